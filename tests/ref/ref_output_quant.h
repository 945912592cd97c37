/* Host C reference for inverse RoPE + block-scaled FP8 quantization of the
 * attention output (§8.6, vLLM fused_inv_rope_fp8_quant), written from
 * docs/OUTPUT_QUANT.md and the contract in include/dsacl/output_quant.h:
 * the fma spelling of vLLM's rotation, fp32 amax with NaN ignored and the
 * 1e-10 floor, ceil of a correctly rounded fp32 log2 of amax * fl32(1/448). */
#ifndef DSACL_TESTS_REF_OUTPUT_QUANT_H
#define DSACL_TESTS_REF_OUTPUT_QUANT_H

#include <stdint.h>

#include "ref.h"

/* The scale exponent of a block whose floored amax is `amax` (finite > 0 or
 * +inf): ceil(RN32(log2(fl32(amax * fl32(1/448))))), log2 evaluated in long
 * double and rounded to fp32. 128 stands for +inf (amax = +inf). */
int ref_oq_scale_exp(float amax);

/* o [t, h, 512] bf16 bits with token/head strides (elements); pos [t];
 * cos_sin [n_pos, 64] row stride cs_rs; g groups (h % g == 0).
 * out: e4m3 bytes, element (gi, ti, d) at gi * out_gs + ti * out_ts + d.
 * scales: packed = 0: float, (gi, k, ti) at gi * sc_gs + k * sc_ks + ti * sc_ts
 * for k < 4 * hpg; packed = 1: uint32 words, k < hpg. Tokens t..tp-1 get zero
 * scales. Returns fault bits. */
unsigned ref_inv_rope_fp8_quant(const uint16_t *o, int64_t o_ts, int64_t o_hs, int64_t t,
                                int64_t h, const int64_t *pos, const float *cos_sin,
                                int64_t cs_rs, int64_t n_pos, int64_t g, uint8_t *out,
                                int64_t out_gs, int64_t out_ts, void *scales, int packed,
                                int64_t sc_gs, int64_t sc_ks, int64_t sc_ts, int64_t tp);

#endif
