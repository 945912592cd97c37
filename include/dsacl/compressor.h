/*
 * dsacl — DeepSeek-V4 KV compressor (SPEC-reference §8.5, §5.2, §5.3;
 * vLLM save_partial_states and the fused compress -> RMSNorm -> RoPE ->
 * quantize -> insert kernels of fused_compress_quant_cache.py). The exact
 * semantics, what was read where in vLLM, and the tolerance to vLLM's
 * approximate softmax: docs/COMPRESSOR.md. Included by dsacl.h; relies on
 * its types.
 *
 * Names: hd = head dim (512 for the main MLA cache, 128 for the indexer),
 * ratio 4 (overlapping windows, coff = 2) or 128 (coff = 1),
 * SW = coff * hd (state width), N = coff * ratio (rows per window).
 *
 * The state cache is an F32 tensor state[num_blocks, bs, 2 * SW] (strides
 * free, unit inner stride, rows not overlapping: stride1 >= 2 * SW,
 * stride0 >= bs * stride1). Row (s / bs, s % bs) belongs to the token with
 * state slot s: [kv (SW floats) | score + ape (SW floats)].
 *
 * dsa_compressor_save_states: per token t, slot = slot_mapping[t],
 * p = positions[t]:
 *   slot < 0: nothing; slot >= num_blocks * bs: nothing, DSA_FAULT_SLOT_RANGE;
 *   p < 0: nothing, DSA_FAULT_POSITION_RANGE;
 *   else row[j] = kv[t][j] (bit copy) and
 *        row[SW + j] = fl32(score[t][j] + ape[p % ratio][j]), j < SW.
 * kv, score: F32 [T, SW] (row stride free, unit inner; they may be the two
 * halves of one [T, 2 * SW] projection output); ape F32 [ratio, SW];
 * positions I64 or I32 [T], slot_mapping I64 [T]. SW must be a multiple of 4. The state
 * must not overlap the inputs.
 *
 * dsa_compressor_compress_insert: per token t whose position p closes a
 * window ((p + 1) % ratio == 0), the softmax-gated sum of the N state rows
 * at positions p - N + 1 .. p (positions < 0 masked; with overlap the first
 * ratio rows read the state's first hd columns, the others the next hd),
 * per dim: m = max s_i, w_i = EXP2(fl(fl(s_i - m) * fl(log2 e))),
 * den = sum w_i (row order), c = sum fl(kv_i * fl(w_i / den)) (row order);
 * RMSNorm with a fixed tree, correctly rounded 1/sqrt; GPT-J RoPE of the
 * trailing 64 dims at position (p / ratio) * ratio as
 * e' = fma(e, c, -fl(o s)), o' = fma(o, c, fl(e s)); then the cache record
 * of the format, written at cache_slot_mapping[t]:
 *   DSA_CACHE_MLA_FP8 (hd 512): NoPE from bf16 of the unrotated values,
 *     e4m3 per 64-dim block with ue8m0 scales, RoPE dims as bf16 (§3.1);
 *   DSA_CACHE_INDEXER_FP8 (hd 128): all 128 dims rotated (identity pairs
 *     before the RoPE section), bf16, e4m3 with one f32 power-of-two scale;
 *   DSA_CACHE_INDEXER_MXFP4 (hd 128): the same bf16 values as four MXFP4
 *     blocks (E2M1 round-to-nearest-even, ue8m0 bytes).
 * Tokens are skipped (nothing written), in this order:
 *   slot_mapping[t] < 0 (state slot: padding)            no fault
 *   p < 0                                                DSA_FAULT_POSITION_RANGE
 *   (p + 1) % ratio != 0                                 no fault
 *   token_to_req[t] outside [0, block_table rows)        DSA_FAULT_INDEX_RANGE
 *   a window row's block index >= block_table width      DSA_FAULT_INDEX_RANGE
 *   a window row's block id outside [0, num_blocks)      DSA_FAULT_SLOT_RANGE
 *   cache_slot_mapping[t] < 0                            no fault
 *   cache_slot_mapping[t] >= cache capacity              DSA_FAULT_SLOT_RANGE
 *   (p / ratio) * ratio >= cos_sin rows                  DSA_FAULT_POSITION_RANGE
 * Tensors: state as above (num_blocks, bs from its shape); block_table I32
 * [R, W] (strides free); token_to_req I32 [T], or NULL: pure decode, token
 * t is request t; positions I64 or I32 [T]; slot_mapping, cache_slot_mapping
 * I64 [T]; norm_weight F32 or BF16 [hd] (stride free); cos_sin F32 or BF16
 * [P, 64] (row stride free, unit inner); cache of one of the
 * three formats (any block size and block stride). The result is the same
 * on every device; it differs from vLLM's GPU kernels by their approximate
 * exp2 / division / rsqrt (docs/COMPRESSOR.md: +-1 code or bf16 ulp in
 * rare values). NaN and infinite inputs are outside what is compared.
 */
#ifndef DSACL_COMPRESSOR_H
#define DSACL_COMPRESSOR_H

/* dsacl.h includes this file at its end; including it first works too. */
#include "dsacl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dsa_compressor_params {
  int32_t compress_ratio; /* 4 or 128; default 4 */
  float eps;              /* RMSNorm epsilon: finite, >= FLT_MIN; default 1e-6 */
  unsigned char reserved[24];
} dsa_compressor_params;

/* compress_ratio = 4, eps = 1e-6, reserved zeroed. */
DSA_API void dsa_compressor_params_default(dsa_compressor_params *p);

/* p may be NULL (defaults); only p->compress_ratio is used. */
DSA_API dsa_status dsa_compressor_save_states(dsa_queue *queue, const dsa_tensor *kv,
                                              const dsa_tensor *score, const dsa_tensor *ape,
                                              const dsa_tensor *positions,
                                              const dsa_tensor *slot_mapping,
                                              const dsa_tensor *state,
                                              const dsa_compressor_params *p,
                                              const dsa_events *ev);

/* p may be NULL (defaults). */
DSA_API dsa_status dsa_compressor_compress_insert(
    dsa_queue *queue, const dsa_tensor *state, const dsa_tensor *block_table,
    const dsa_tensor *token_to_req, const dsa_tensor *positions, const dsa_tensor *slot_mapping,
    const dsa_tensor *norm_weight, const dsa_tensor *cos_sin,
    const dsa_tensor *cache_slot_mapping, const dsa_paged_cache *cache,
    const dsa_compressor_params *p, const dsa_events *ev);

#ifdef __cplusplus
}
#endif
#endif /* DSACL_COMPRESSOR_H */
