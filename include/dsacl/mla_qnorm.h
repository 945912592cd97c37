/*
 * dsacl — Q RMSNorm + RoPE and KV RoPE + insert into the SWA MLA cache
 * (SPEC-reference §8.4; vLLM xpu_qnorm_rope_kv_fp8_insert, the Triton
 * replacement of fused_deepseek_v4_qnorm_rope_kv_rope_quant_insert).
 * Included by dsacl.h; relies on its types.
 *
 * Per token t (position p = positions[t], cos/sin row p of cos_sin: cos in
 * columns [0, 32), sin in [32, 64); GPT-J pairs over dims [448, 512)):
 *  - q, per head h (weight-free RMSNorm over the 512 dims, then RoPE):
 *      ss  = sum of q_d^2 in fp32, in this fixed order: sixteen partial
 *            sums s_l = sum of q_d^2 for d = 16l .. 16l+15 added in dim
 *            order (l = 0..31), then s_i += s_{i+w} for w = 16, 8, 4, 2, 1
 *            (the squares of bf16 values are exact in fp32);
 *      rho = 1 / sqrt(ss * 2^-9 + eps), correctly rounded to fp32;
 *      NoPE dims: bf16(q_d * rho);
 *      RoPE pair (e, o) = (q * rho, q * rho) in fp32:
 *        e' = fma(e, c, -fl(o*s)),  o' = fma(e, s, fl(o*c)),  then bf16;
 *    written to q_out (or in place). vLLM uses an approximate rsqrt
 *    (rsqrt.approx on NVIDIA), so q_out differs from vLLM's in rare
 *    values by 1 bf16 ulp; this library's result is the same on every
 *    device.
 *  - kv: the 64 RoPE dims rotated in fp32 from the bf16 values with the
 *    same spelling and rounded to bf16, NoPE dims unchanged, then quantized
 *    and inserted exactly as dsa_mla_cache_insert does (§8.1) at slot
 *    slot_mapping[t]: slot < 0 skipped; slot >= capacity skipped +
 *    DSA_FAULT_SLOT_RANGE.
 *  - p < 0 or p >= cos_sin's shape[0]: DSA_FAULT_POSITION_RANGE; the KV
 *    entry is not written and the token's q heads are normalized but not
 *    rotated.
 * bf16 NaN results are 0x7FC0. Inf/NaN inputs give NaN rows (not compared
 * with vLLM).
 *
 * Tensors: q_in bf16 [T, H, 512] (strides free, unit inner stride), q_out
 * the same shape or NULL (in place; otherwise it must not overlap q_in), kv
 * bf16 [T, 512] (row stride free), positions i64 or i32 [T], cos_sin f32 or
 * bf16 [P, 64]
 * (row stride free, unit inner), slot_mapping i64 [T], cache
 * DSA_CACHE_MLA_FP8 (any block size and block stride). H >= 0 (0: only the
 * KV insert); T * (H + 1) < 2^31.
 */
#ifndef DSACL_MLA_QNORM_H
#define DSACL_MLA_QNORM_H

/* dsacl.h includes this file at its end; including it first works too. */
#include "dsacl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dsa_mla_qnorm_rope_kv_insert_params {
  float eps; /* RMSNorm epsilon: finite, >= FLT_MIN (1.17549435e-38); default 1e-6 */
  unsigned char reserved[28];
} dsa_mla_qnorm_rope_kv_insert_params;

/* eps = 1e-6, reserved zeroed. */
DSA_API void dsa_mla_qnorm_rope_kv_insert_params_default(dsa_mla_qnorm_rope_kv_insert_params *p);

/* Arguments: inputs q_in, kv, positions, cos_sin, slot_mapping; the cache it
 * inserts into; q_out (NULL: in place); p may be NULL (defaults). */
DSA_API dsa_status dsa_mla_qnorm_rope_kv_insert(dsa_queue *queue, const dsa_tensor *q_in,
                                                const dsa_tensor *kv,
                                                const dsa_tensor *positions,
                                                const dsa_tensor *cos_sin,
                                                const dsa_tensor *slot_mapping,
                                                const dsa_paged_cache *cache,
                                                const dsa_tensor *q_out,
                                                const dsa_mla_qnorm_rope_kv_insert_params *p,
                                                const dsa_events *ev);

#ifdef __cplusplus
}
#endif
#endif /* DSACL_MLA_QNORM_H */
