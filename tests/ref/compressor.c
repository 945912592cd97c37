/* DeepSeek-V4 KV compressor reference (see ref_compressor.h). */
#include "ref_compressor.h"

#include <math.h>
#include <string.h>

#include "ref_indexer_quant.h"
#include "ref_mla_qnorm.h"

float ref_cmp_exp2(float t) {
  /* C_n = fl32(ln(2)^n / n!) */
  static float c[8];
  if (c[1] == 0.0f) {
    double f = 1.0;
    for (int n = 1; n <= 7; n++) {
      f *= n;
      c[n] = (float)(pow(log(2.0), n) / f);
    }
  }
  if (isnan(t)) return t;
  if (t < -126.0f) return 0.0f;
  const float k = rintf(t); /* ties to even in the default rounding mode */
  const float f = t - k;
  float a = c[7];
  for (int n = 6; n >= 1; n--) a = fmaf(a, f, c[n]);
  const float p = fmaf(a, f, 1.0f);
  return ldexpf(p, (int)k);
}

unsigned ref_compressor_save_states(ref_state *st, const float *kv, int64_t kv_rs,
                                    const float *score, int64_t sc_rs, const float *ape,
                                    int64_t ape_rs, const int64_t *pos, const int64_t *slots,
                                    int64_t T, int ratio, int64_t W) {
  unsigned f = 0;
  for (int64_t t = 0; t < T; t++) {
    const int64_t s = slots[t];
    if (s < 0) continue;
    if (s >= st->nb * st->bs) {
      f |= REF_FAULT_SLOT_RANGE;
      continue;
    }
    if (pos[t] < 0) {
      f |= REF_FAULT_POSITION_RANGE;
      continue;
    }
    float *row = st->base + (s / st->bs) * st->s0 + (s % st->bs) * st->s1;
    const float *a = ape + (pos[t] % ratio) * ape_rs;
    memcpy(row, kv + t * kv_rs, (size_t)W * 4); /* bit copy */
    for (int64_t j = 0; j < W; j++) row[W + j] = score[t * sc_rs + j] + a[j];
  }
  return f;
}

static uint16_t bf16(float v) { return isnan(v) ? 0x7FC0 : ref_bf16_from_float(v); }

/* Triton's max: NaN ignored. */
static float max_nan(float a, float b) { return isnan(b) ? a : isnan(a) ? b : (b > a ? b : a); }

unsigned ref_compressor_compress_insert(const ref_compress_args *a) {
  const int hd = a->format == REF_CACHE_MLA_FP8 ? 512 : 128;
  const int overlap = a->ratio == 4, coff = 1 + overlap;
  const int64_t SW = (int64_t)coff * hd, N = (int64_t)coff * a->ratio;
  const float L2E = 0x1.715476p+0f;
  const ref_state *st = a->st;
  unsigned f = 0;
  for (int64_t t = 0; t < a->T; t++) {
    if (a->slots[t] < 0) continue;
    const int64_t p = a->pos[t];
    if (p < 0) {
      f |= REF_FAULT_POSITION_RANGE;
      continue;
    }
    if ((p + 1) % a->ratio != 0) continue;
    const int64_t r = a->tok_req[t];
    if (r < 0 || r >= a->R) {
      f |= REF_FAULT_INDEX_RANGE;
      continue;
    }
    /* Rows of the window. */
    const float *rows[256];
    int ok = 1;
    for (int64_t i = 0; i < N; i++) {
      const int64_t qi = p - N + 1 + i;
      rows[i] = NULL;
      if (qi < 0) continue;
      const int64_t j = qi / st->bs;
      if (j >= a->Wb) {
        f |= REF_FAULT_INDEX_RANGE;
        ok = 0;
        break;
      }
      const int64_t b = a->bt[r * a->bt_s0 + j * a->bt_s1];
      if (b < 0 || b >= st->nb) {
        f |= REF_FAULT_SLOT_RANGE;
        ok = 0;
        break;
      }
      const int64_t off = (overlap && i >= a->ratio) ? hd : 0;
      rows[i] = st->base + b * st->s0 + (qi % st->bs) * st->s1 + off;
    }
    if (!ok) continue;
    const int64_t cs = a->cslots[t];
    if (cs < 0) continue;
    if (cs >= a->c_nb * a->c_bs) {
      f |= REF_FAULT_SLOT_RANGE;
      continue;
    }
    const int64_t pc = p / a->ratio * a->ratio;
    if (pc >= a->n_pos) {
      f |= REF_FAULT_POSITION_RANGE;
      continue;
    }

    /* Softmax over rows per dim, weighted sum. */
    float c[512];
    for (int d = 0; d < hd; d++) {
      float m = -INFINITY;
      for (int64_t i = 0; i < N; i++)
        if (rows[i]) m = max_nan(m, rows[i][SW + d]);
      float w[256], den = 0.0f;
      for (int64_t i = 0; i < N; i++) {
        if (!rows[i]) continue;
        const float z = rows[i][SW + d] - m;
        w[i] = ref_cmp_exp2(z * L2E);
        den = den + w[i];
      }
      float acc = 0.0f;
      for (int64_t i = 0; i < N; i++) {
        if (!rows[i]) continue;
        const float pi = w[i] / den;
        acc = acc + rows[i][d] * pi;
      }
      c[d] = acc;
    }
    if (a->c_out) memcpy(a->c_out + t * hd, c, (size_t)hd * 4);

    /* RMSNorm: lane sums of 4 squares, then the halving tree. */
    float part[128];
    const int lanes = hd / 4;
    for (int l = 0; l < lanes; l++) {
      float s = c[4 * l] * c[4 * l];
      for (int k = 1; k < 4; k++) s = s + c[4 * l + k] * c[4 * l + k];
      part[l] = s;
    }
    for (int wd = lanes / 2; wd >= 1; wd /= 2)
      for (int l = 0; l < wd; l++) part[l] = part[l] + part[l + wd];
    const float var = ldexpf(part[0], hd == 512 ? -9 : -7);
    const float rho = ref_rsqrt_cr(var + a->eps);
    float n[512];
    for (int d = 0; d < hd; d++) n[d] = (c[d] * rho) * a->weight[d];

    /* RoPE (identity pairs (1, 0) before the rope section for head 128). */
    const float *csr = a->cs + pc * a->cs_rs;
    float rot[512];
    memcpy(rot, n, sizeof rot);
    for (int i = 0; i < hd / 2; i++) {
      const int ri = i - (hd - 64) / 2;
      if (ri < 0 && hd == 512) continue; /* the MLA head rotates only its RoPE dims */
      const float cc = ri >= 0 ? csr[ri] : 1.0f, ss = ri >= 0 ? csr[32 + ri] : 0.0f;
      const float e = n[2 * i], o = n[2 * i + 1];
      const float os = o * ss, es = e * ss;
      rot[2 * i] = fmaf(e, cc, -os);
      rot[2 * i + 1] = fmaf(o, cc, es);
    }

    if (a->format == REF_CACHE_MLA_FP8) {
      uint16_t k[512];
      for (int d = 0; d < 448; d++) k[d] = bf16(n[d]);
      for (int d = 448; d < 512; d++) k[d] = bf16(rot[d]);
      uint8_t tok[REF_MLA_TOKEN_BYTES];
      ref_mla_quantize(k, tok);
      ref_mla_cache mc = {a->cache, a->c_nb, a->c_bs, a->c_bstride};
      memcpy(a->cache + ref_mla_data_offset(&mc, cs), tok, REF_MLA_DATA_BYTES);
      memcpy(a->cache + ref_mla_scale_offset(&mc, cs), tok + REF_MLA_DATA_BYTES,
             REF_MLA_SCALE_BYTES);
    } else {
      uint16_t k[128];
      for (int d = 0; d < 128; d++) k[d] = bf16(rot[d]);
      ref_idx_cache ic = {a->cache, a->c_nb, a->c_bs, a->c_bstride,
                          a->format == REF_CACHE_INDEXER_MXFP4};
      f |= ref_indexer_k_insert(&ic, k, 128, &cs, 1, REF_E2M1_RNE);
    }
  }
  return f;
}
