/* Q RMSNorm + RoPE, KV RoPE + insert: reference (see ref_mla_qnorm.h). */
#include "ref_mla_qnorm.h"

#include <math.h>
#include <string.h>

/* m^2 * x > 1, exactly (m, x > 0 finite, m with <= 25 significant bits). */
static int above(double m, float x) {
  int ea, eb;
  double fm = frexp(m, &ea), fx = frexp((double)x, &eb);
  unsigned __int128 mm = (unsigned __int128)(uint64_t)ldexp(fm, 25);
  unsigned __int128 xx = (unsigned __int128)(uint64_t)ldexp(fx, 24);
  int s = 74 - 2 * ea - eb; /* m^2 x = mm^2 xx 2^-s */
  if (s < 0) return 1;
  if (s >= 127) return 0;
  return mm * mm * xx > ((unsigned __int128)1 << s);
}

float ref_rsqrt_cr(float x) {
  float y = (float)(1.0 / sqrt((double)x));
  for (int i = 0; i < 4; i++) {
    float up = nextafterf(y, INFINITY), dn = nextafterf(y, 0.0f);
    if (!above(((double)y + up) / 2, x)) y = up;
    else if (above(((double)y + dn) / 2, x)) y = dn;
    else break;
  }
  return y;
}

static uint16_t bf16(float v) { return isnan(v) ? 0x7FC0 : ref_bf16_from_float(v); }

/* GPT-J pair rotation of this kernel: e' = fma(e, c, -fl(o s)), o' = fma(e, s, fl(o c)). */
static void rotate(float *v, const float *cs) {
  for (int i = 0; i < 32; i++) {
    float e = v[2 * i], o = v[2 * i + 1], c = cs[i], s = cs[32 + i];
    float os = o * s, oc = o * c;
    v[2 * i] = fmaf(e, c, -os);
    v[2 * i + 1] = fmaf(e, s, oc);
  }
}

unsigned ref_mla_qnorm_rope_kv_insert(ref_mla_cache *c, const uint16_t *q_in, int64_t qi_ts,
                                      int64_t qi_hs, uint16_t *q_out, int64_t qo_ts,
                                      int64_t qo_hs, int64_t h, const uint16_t *kv,
                                      int64_t kv_rs, const int64_t *pos, const float *cos_sin,
                                      int64_t cs_rs, int64_t n_pos, const int64_t *slots,
                                      float eps, int64_t t) {
  unsigned f = 0;
  const int64_t cap = c->num_blocks * c->block_size;
  for (int64_t i = 0; i < t; i++) {
    const int64_t p = pos[i];
    const int pos_ok = p >= 0 && p < n_pos;
    if (!pos_ok) f |= REF_FAULT_POSITION_RANGE;
    const float *cs = pos_ok ? cos_sin + p * cs_rs : NULL;
    for (int64_t hh = 0; hh < h; hh++) {
      const uint16_t *src = q_in + i * qi_ts + hh * qi_hs;
      float v[512], part[32];
      for (int d = 0; d < 512; d++) v[d] = ref_bf16_to_float(src[d]);
      for (int l = 0; l < 32; l++) {
        float a = 0.0f;
        for (int j = 0; j < 16; j++) {
          float sq = v[16 * l + j] * v[16 * l + j];
          a = a + sq;
        }
        part[l] = a;
      }
      for (int w = 16; w > 0; w >>= 1)
        for (int k = 0; k < w; k++) part[k] = part[k] + part[k + w];
      float x = part[0] * 0x1p-9f;
      x = x + eps;
      float rho = isnan(x) ? NAN : isinf(x) ? 0.0f : ref_rsqrt_cr(x);
      for (int d = 0; d < 512; d++) v[d] = v[d] * rho;
      if (pos_ok) rotate(v + 448, cs);
      uint16_t *dst = q_out + i * qo_ts + hh * qo_hs;
      for (int d = 0; d < 512; d++) dst[d] = bf16(v[d]);
    }
    const int64_t s = slots[i];
    if (s >= cap) f |= REF_FAULT_SLOT_RANGE;
    if (s < 0 || s >= cap || !pos_ok) continue;
    uint16_t row[512];
    memcpy(row, kv + i * kv_rs, sizeof row);
    float r[64];
    for (int d = 0; d < 64; d++) r[d] = ref_bf16_to_float(row[448 + d]);
    rotate(r, cs);
    for (int d = 0; d < 64; d++) row[448 + d] = bf16(r[d]);
    f |= ref_mla_insert(c, row, 512, &s, 1);
  }
  return f;
}
