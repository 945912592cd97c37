/* Indexer quantization family reference (see ref_indexer_quant.h). */
#include "ref_indexer_quant.h"

#include <math.h>
#include <string.h>

static const double e2m1_values[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

double ref_e2m1_decode(uint8_t nibble) {
  double v = e2m1_values[nibble & 7];
  return nibble & 8 ? -v : v;
}

uint8_t ref_e2m1_encode(double y, int mode) {
  if (isnan(y)) return 7;
  double a = fabs(y);
  if (mode == REF_E2M1_LEGACY) {
    /* torch.bucketize(right=False) on the clamped magnitude: the code is the
     * number of boundaries strictly below a. */
    static const double bounds[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
    if (a > 6) a = 6;
    uint8_t code = 0;
    for (int i = 0; i < 7; i++) code += a > bounds[i];
    return (uint8_t)(code | (y < 0 && code ? 8 : 0));
  }
  /* Nearest representable magnitude, ties to the even code; values above 6
   * are nearest to 6 (saturation, satfinite: inf too). Sign copied, zero
   * included. */
  if (isinf(a)) return (uint8_t)(7 | (signbit(y) ? 8 : 0));
  int best = 0;
  double bestd = a;
  for (int c = 1; c < 8; c++) {
    double d = fabs(a - e2m1_values[c]);
    if (d < bestd || (d == bestd && (c & 1) == 0)) best = c, bestd = d;
  }
  return (uint8_t)(best | (signbit(y) ? 8 : 0));
}

int ref_mxfp4_exponent(float amax, int mode) {
  float r;
  if (mode == REF_E2M1_LEGACY) {
    if (!(amax >= 1e-4f)) amax = 1e-4f;
    r = amax / 6.0f; /* fp32 division, correctly rounded */
  } else {
    const float floor_ = (float)ldexp(6.0, -126);
    if (!(amax >= floor_)) amax = floor_;
    const float sixth = (float)(1.0 / 6.0);
    r = amax * sixth;
  }
  if (isinf(r)) return 127;
  int e = ref_ue8m0_exponent(r, 1.0);
  return e < -127 ? -127 : e > 127 ? 127 : e;
}

static float fmax_nan(float a, float b) { return isnan(b) ? a : (b > a ? b : a); }

uint8_t ref_mxfp4_block(const float *x, int mode, uint8_t packed[16]) {
  float amax = 0;
  for (int i = 0; i < 32; i++) amax = fmax_nan(amax, fabsf(x[i]));
  int e = ref_mxfp4_exponent(amax, mode);
  for (int j = 0; j < 16; j++)
    packed[j] = (uint8_t)(ref_e2m1_encode(ldexp(x[2 * j], -e), mode) |
                          (ref_e2m1_encode(ldexp(x[2 * j + 1], -e), mode) << 4));
  return (uint8_t)(e + 127);
}

void ref_rope_pair(float e, float o, float c, float s, uint16_t *re, uint16_t *ro) {
  const float os = o * s, es = e * s;
  *re = ref_bf16_from_float(fmaf(e, c, -os));
  *ro = ref_bf16_from_float(fmaf(o, c, es));
}

static float ld_f(const void *p, int bf16, int64_t i) {
  if (bf16) return ref_bf16_to_float(((const uint16_t *)p)[i]);
  return ((const float *)p)[i];
}

unsigned ref_indexer_q(const ref_indexer_q_args *a) {
  unsigned faults = 0;
  const int64_t D = a->D, R = a->R, nope = D - R;
  float x[4096];
  for (int64_t t = 0; t < a->T; t++) {
    int64_t pos = 0;
    int pos_ok = 1;
    if (R > 0) {
      pos = a->pos_i32 ? ((const int32_t *)a->positions)[t * a->pos_stride]
                       : ((const int64_t *)a->positions)[t * a->pos_stride];
      pos_ok = pos >= 0 && pos < a->P;
      if (!pos_ok) faults |= REF_FAULT_POSITION_RANGE;
    }
    for (int64_t h = 0; h < a->H; h++) {
      const uint16_t *qh = a->q + t * a->q_st + h * a->q_sh;
      for (int64_t d = 0; d < nope; d++) x[d] = ref_bf16_to_float(qh[d]);
      for (int64_t i = 0; i < R / 2; i++) {
        float c = 1, s = 0;
        if (pos_ok) {
          c = ld_f(a->cos_sin, a->cs_bf16, pos * a->cs_rs + i);
          s = ld_f(a->cos_sin, a->cs_bf16, pos * a->cs_rs + R / 2 + i);
        }
        uint16_t re, ro;
        ref_rope_pair(ref_bf16_to_float(qh[nope + 2 * i]), ref_bf16_to_float(qh[nope + 2 * i + 1]),
                      c, s, &re, &ro);
        x[nope + 2 * i] = ref_bf16_to_float(re);
        x[nope + 2 * i + 1] = ref_bf16_to_float(ro);
      }
      const float w = ld_f(a->w, a->w_bf16, t * a->w_st + h * a->w_sh);
      float *wo = a->out_w + t * a->ow_st + h * a->ow_sh;
      uint8_t *oq = a->out_q + t * a->oq_st + h * a->oq_sh;
      if (!a->mxfp4) {
        float amax = 0;
        for (int64_t d = 0; d < D; d++) amax = fmax_nan(amax, fabsf(x[d]));
        if (!(amax >= 1e-4f)) amax = 1e-4f;
        const int e = ref_ue8m0_exponent(amax, 448.0);
        for (int64_t d = 0; d < D; d++) oq[d] = ref_e4m3_encode(ldexp(x[d], -e));
        const float q_scale = (float)ldexp(1.0, e);
        const float w1 = w * q_scale;
        const float w2 = w1 * a->softmax_scale;
        *wo = w2 * a->head_scale;
      } else {
        uint8_t *os = a->out_s + t * a->os_st + h * a->os_sh;
        for (int64_t b = 0; b < D / 32; b++) os[b] = ref_mxfp4_block(x + 32 * b, a->mode, oq + 16 * b);
        const float w1 = w * a->softmax_scale;
        *wo = w1 * a->head_scale;
      }
    }
  }
  return faults;
}

/* ---- K cache ------------------------------------------------------------------ */

static uint64_t blk_base(const ref_idx_cache *c, int64_t blk) {
  return (uint64_t)blk * (uint64_t)c->block_stride;
}

unsigned ref_indexer_k_insert(ref_idx_cache *c, const uint16_t *k, int64_t k_rs,
                              const int64_t *slots, int64_t n, int mode) {
  unsigned faults = 0;
  const int64_t cap = c->num_blocks * c->block_size, bs = c->block_size;
  for (int64_t i = 0; i < n; i++) {
    const int64_t s = slots[i];
    if (s < 0) continue;
    if (s >= cap) {
      faults |= REF_FAULT_SLOT_RANGE;
      continue;
    }
    const int64_t blk = s / bs, t = s % bs;
    uint8_t *page = c->base + blk_base(c, blk);
    float x[128];
    for (int d = 0; d < 128; d++) x[d] = ref_bf16_to_float(k[i * k_rs + d]);
    if (!c->mxfp4) {
      float amax = 0;
      for (int d = 0; d < 128; d++) amax = fmax_nan(amax, fabsf(x[d]));
      if (!(amax >= 1e-4f)) amax = 1e-4f;
      const float sc = amax / 448.0f;             /* div.rn */
      const int e = ref_ue8m0_exponent(sc, 1.0);   /* 2^ceil(log2(scale)) */
      for (int d = 0; d < 128; d++) page[t * 128 + d] = ref_e4m3_encode(ldexp(x[d], -e));
      const float scale = (float)ldexp(1.0, e);
      uint32_t bits;
      memcpy(&bits, &scale, 4);
      for (int j = 0; j < 4; j++) page[bs * 128 + 4 * t + j] = (uint8_t)(bits >> (8 * j));
    } else {
      for (int b = 0; b < 4; b++)
        page[bs * 64 + 4 * t + b] = ref_mxfp4_block(x + 32 * b, mode, page + t * 64 + 16 * b);
    }
  }
  return faults;
}

unsigned ref_indexer_k_gather(const ref_idx_cache *c, const int32_t *bt, int64_t R, int64_t W,
                              int64_t bt_s0, int64_t bt_s1, const int32_t *cu, int64_t cu_s,
                              int64_t total, uint8_t *k_out, int64_t k_rs, uint8_t *k_scale,
                              int64_t ks_rs) {
  unsigned faults = 0;
  if (R == 0 || total == 0) return 0;
  const int64_t bs = c->block_size, vb = c->mxfp4 ? 64 : 128;
  if (cu[R * cu_s] > total) faults |= REF_FAULT_LENGTH_RANGE;
  for (int64_t i = 0; i < total; i++) {
    int64_t lo = 0, hi = R;
    while (hi - lo > 1) {
      int64_t mid = (lo + hi) / 2;
      if (cu[mid * cu_s] <= i) lo = mid;
      else hi = mid;
    }
    const int64_t r = lo, start = cu[r * cu_s], end = cu[(r + 1) * cu_s];
    if (!(start <= i && i < end)) {
      if (i < cu[0] || (r == R - 1 && i >= end)) continue;
      faults |= REF_FAULT_LENGTH_RANGE;
      continue;
    }
    const int64_t j = i - start;
    if (j / bs >= W) {
      faults |= REF_FAULT_INDEX_RANGE;
      continue;
    }
    const int64_t blk = bt[r * bt_s0 + (j / bs) * bt_s1], t = j % bs;
    uint8_t *dst = k_out + i * k_rs, *ds = k_scale + i * ks_rs;
    if (blk < 0 || blk >= c->num_blocks) {
      if (blk >= c->num_blocks) faults |= REF_FAULT_SLOT_RANGE;
      memset(dst, 0, (size_t)vb);
      memset(ds, 0, 4);
      continue;
    }
    const uint8_t *page = c->base + blk_base(c, blk);
    memcpy(dst, page + t * vb, (size_t)vb);
    memcpy(ds, page + bs * vb + 4 * t, 4);
  }
  return faults;
}
