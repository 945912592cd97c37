/* Host C reference for Q RMSNorm + RoPE and KV RoPE + insert (§8.4), written
 * from SPEC-reference §8.4 / §2.6 / §2.7 / §8.1 and the contract in
 * include/dsacl/mla_qnorm.h (fixed summation order, correctly rounded
 * 1/sqrt, the fma spelling of this kernel). */
#ifndef DSACL_TESTS_REF_MLA_QNORM_H
#define DSACL_TESTS_REF_MLA_QNORM_H

#include <stdint.h>

#include "ref.h"

/* Correctly rounded 1/sqrt(x) for a positive normal float x. */
float ref_rsqrt_cr(float x);

/* q_in / q_out [t, h, 512] with token/head strides (elements; may be the
 * same array for in place), kv [t, 512] row stride kv_rs, cos_sin [n_pos,
 * 64] row stride cs_rs. Returns fault bits. */
unsigned ref_mla_qnorm_rope_kv_insert(ref_mla_cache *c, const uint16_t *q_in, int64_t qi_ts,
                                      int64_t qi_hs, uint16_t *q_out, int64_t qo_ts,
                                      int64_t qo_hs, int64_t h, const uint16_t *kv,
                                      int64_t kv_rs, const int64_t *pos, const float *cos_sin,
                                      int64_t cs_rs, int64_t n_pos, const int64_t *slots,
                                      float eps, int64_t t);

#endif
