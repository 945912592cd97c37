/* Host C reference for the MTP RMSNorms, written from the contract in
 * include/dsacl/mtp_norm.h and docs/MTP_NORM.md (the summation order stated
 * there as a butterfly over 128 lane sums, a correctly rounded mean and
 * 1/sqrt, then two fp32 multiplications and a bf16 rounding). */
#ifndef DSACL_TESTS_REF_MTP_NORM_H
#define DSACL_TESTS_REF_MTP_NORM_H

#include <stdint.h>

#include "ref.h"

/* The fixed-order fp32 sum of squares of the H bf16 values x. */
float ref_mtp_sumsq(const uint16_t *x, int64_t h);

/* One row: out[d] = bf16((x[d] * r) * w[d]); x NULL: a zeroed row (every
 * x[d] = +0). w: H bf16 (w_f32 = 0) or H floats (w_f32 = 1). */
void ref_mtp_rmsnorm_row(const uint16_t *x, const void *w, int w_f32, int64_t h, float eps,
                         uint16_t *out);

/* fused_mtp_input_rmsnorm on whole tensors (strides in elements):
 * embeds [t, h] (row stride e_rs), pos [t] (i64, or i32 when pos_i32),
 * prev [t, hc, h] (strides p_ts, p_rs), outputs likewise. */
void ref_mtp_input_rmsnorm(const uint16_t *embeds, int64_t e_rs, const void *pos, int pos_i32,
                           const uint16_t *prev, int64_t p_ts, int64_t p_rs, const void *enorm_w,
                           int enorm_f32, const void *hnorm_w, int hnorm_f32, uint16_t *eo,
                           int64_t eo_rs, uint16_t *ho, int64_t ho_ts, int64_t ho_rs, int64_t t,
                           int64_t hc, int64_t h, float eps);

#endif
