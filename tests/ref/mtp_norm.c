/* MTP RMSNorms: reference (see ref_mtp_norm.h). */
#include "ref_mtp_norm.h"

#include <math.h>
#include <string.h>

#include "ref_mla_qnorm.h" /* ref_rsqrt_cr */

#define LANES 128

float ref_mtp_sumsq(const uint16_t *x, int64_t h) {
  float s[LANES], u[LANES];
  for (int i = 0; i < LANES; i++) s[i] = 0.0f;
  int64_t v = h & -h;
  if (v > 8) v = 8;
  for (int64_t d = 0; d < h; d++) {
    const float a = x ? ref_bf16_to_float(x[d]) : 0.0f;
    const float sq = a * a;
    const int lane = (int)((d / v) % LANES);
    s[lane] = s[lane] + sq;
  }
  /* The butterfly of the contract: every lane ends with the total. */
  static const int masks[] = {16, 8, 4, 2, 1, 64, 32};
  for (int k = 0; k < 7; k++) {
    for (int i = 0; i < LANES; i++) u[i] = s[i] + s[i ^ masks[k]];
    memcpy(s, u, sizeof s);
  }
  return s[0];
}

static uint16_t bf16(float v) { return isnan(v) ? 0x7FC0 : ref_bf16_from_float(v); }

void ref_mtp_rmsnorm_row(const uint16_t *x, const void *w, int w_f32, int64_t h, float eps,
                         uint16_t *out) {
  const float ss = ref_mtp_sumsq(x, h);
  float r;
  if (isnan(ss)) {
    r = NAN;
  } else if (isinf(ss)) {
    r = 0.0f; /* 1 / sqrt(inf) */
  } else {
    /* ss / h in double is exact to 53 bits; rounding that to fp32 is the
     * correctly rounded quotient (53 >= 2 * 24 + 2). */
    const float mean = (float)((double)ss / (double)h);
    const float a = mean + eps;
    r = isinf(a) ? 0.0f : ref_rsqrt_cr(a);
  }
  for (int64_t d = 0; d < h; d++) {
    const float xv = x ? ref_bf16_to_float(x[d]) : 0.0f;
    const float wv = w_f32 ? ((const float *)w)[d] : ref_bf16_to_float(((const uint16_t *)w)[d]);
    const float xr = xv * r;
    out[d] = bf16(xr * wv);
  }
}

void ref_mtp_input_rmsnorm(const uint16_t *embeds, int64_t e_rs, const void *pos, int pos_i32,
                           const uint16_t *prev, int64_t p_ts, int64_t p_rs, const void *enorm_w,
                           int enorm_f32, const void *hnorm_w, int hnorm_f32, uint16_t *eo,
                           int64_t eo_rs, uint16_t *ho, int64_t ho_ts, int64_t ho_rs, int64_t t,
                           int64_t hc, int64_t h, float eps) {
  for (int64_t i = 0; i < t; i++) {
    const int64_t p = pos_i32 ? ((const int32_t *)pos)[i] : ((const int64_t *)pos)[i];
    ref_mtp_rmsnorm_row(p == 0 ? NULL : embeds + i * e_rs, enorm_w, enorm_f32, h, eps,
                        eo + i * eo_rs);
    for (int64_t k = 0; k < hc; k++)
      ref_mtp_rmsnorm_row(prev + i * p_ts + k * p_rs, hnorm_w, hnorm_f32, h, eps,
                          ho + i * ho_ts + k * ho_rs);
  }
}
