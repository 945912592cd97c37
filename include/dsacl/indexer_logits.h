/*
 * dsacl — indexer MQA logits (SPEC-reference §6.1–6.4, SPEC.md "Indexer
 * operators"). Included by dsacl.h; relies on its types (dsa_tensor,
 * dsa_paged_cache, dsa_events, dsa_status, DSA_API).
 *
 * For a query row r and a key n (§6.1):
 *   score_h(r, n) = (Σ_d Q[r,h,d] · K[n,d]) · k_scale[n]
 *   logit(r, n)   = Σ_h max(score_h(r, n), 0) · w[r,h]
 * accumulated in fp32 (summation order unspecified: results agree with an
 * fp64 reference to ~1e-7 of the row's magnitude, not bit for bit).
 *
 * Value decoding: e4m3 bytes decode exactly; the two NaN codes 0x7F / 0xFF
 * decode to +480 / -480 as in vLLM's logits kernels (the value their bits
 * would have without the NaN rule). MXFP4 elements decode as
 * e2m1(nibble) · 2^(u - 127) with u the ue8m0 byte of their 32-element block
 * (u = 0 gives 0, u = 255 gives +inf, like vLLM's dequantizers); k_scale ≡ 1.
 *
 * Output: logits f32 or bf16 (dtype of the logits tensor; bf16 is the f32
 * result rounded to nearest even), row stride free, unit inner stride.
 * Positions outside a row's valid keys are -inf when params.clean is set and
 * left untouched otherwise. Addresses are 64-bit: rows × columns beyond
 * 2^31 are fine.
 *
 * Data-dependent problems are not errors (the values live on the device):
 * the kernel sets bits in the queue's fault word (dsa_queue_faults) and
 * carries on with the fallback stated per operator.
 */
#ifndef DSACL_INDEXER_LOGITS_H
#define DSACL_INDEXER_LOGITS_H

/* dsacl.h includes this file at its end; including it first works too. */
#include "dsacl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dsa_indexer_logits_params {
  /* 1: every column outside a row's valid keys becomes -inf; 0: such columns
   * are not written (consumers read only the valid range). Default 1. */
  int32_t clean;
  unsigned char reserved[28];
} dsa_indexer_logits_params;

/* clean = 1, reserved zeroed. */
DSA_API void dsa_indexer_logits_params_default(dsa_indexer_logits_params *p);

/* The format is the query's dtype tag, and every operand must agree with it:
 *   FP8   query e4m3, query_scale NULL; k e4m3 with f32 scales (ragged) or a
 *         DSA_CACHE_INDEXER_FP8 cache (paged);
 *   MXFP4 query e2m1x2 (D/2 bytes per head) with query_scale ue8m0 [..., D/32]
 *         (required); k e2m1x2 with ue8m0 scales (ragged) or a
 *         DSA_CACHE_INDEXER_MXFP4 cache (paged).
 * The u8 dtype is not accepted for either (Q quant and K gather produce the
 * tagged dtypes). */

/* Ragged prefill form (§6.2 FP8, §6.4 MXFP4).
 *   query        FP8: e4m3 [M, H, D]; MXFP4: e2m1x2 [M, H, D/2]
 *                (row and head strides free, unit inner stride)
 *   query_scale  NULL (FP8) or ue8m0 [M, H, D/32] (MXFP4; any strides)
 *   k            FP8: e4m3 [N, D]; MXFP4: e2m1x2 [N, D/2] (row stride free,
 *                unit inner stride)
 *   k_scale      FP8: f32 [N] (any stride); MXFP4: ue8m0 [N, D/32] (any strides)
 *   weights      f32  [M, H]  (any strides)
 *   ks, ke       i32  [M]     (any stride): row m's keys are [ks[m], ke[m])
 *   logits       f32 or bf16 [M, N]
 * D: a multiple of 32, H >= 1; M = 0 or N = 0 enqueue nothing (the event, if
 * asked for, still completes). p may be NULL (defaults).
 * Ranges (the rule dsa_topk_prefill follows too): ks < 0 or ke > N set
 * DSA_FAULT_LENGTH_RANGE and the range is clamped to [max(ks, 0), min(ke, N));
 * ks >= ke is an empty row (all -inf when clean), not a fault. */
DSA_API dsa_status dsa_indexer_logits(dsa_queue *queue, const dsa_tensor *query,
                                      const dsa_tensor *query_scale, const dsa_tensor *k,
                                      const dsa_tensor *k_scale, const dsa_tensor *weights,
                                      const dsa_tensor *ks, const dsa_tensor *ke,
                                      const dsa_tensor *logits,
                                      const dsa_indexer_logits_params *p,
                                      const dsa_events *ev);

/* Paged decode form (§6.3 FP8, §6.4 MXFP4), D = 128.
 *   query         FP8: e4m3, MXFP4: e2m1x2 (64 bytes per head), either
 *                 [B, next_n, H, D'] or [T, H, D'] with T = B * next_n (the
 *                 layout dsa_indexer_q_quant writes); strides free, unit inner
 *   query_scale   NULL (FP8) or ue8m0 [B, next_n, H, 4] / [T, H, 4] (MXFP4)
 *   weights       f32 [B·next_n, H] (any strides)
 *   context_lens  i32 [B] (1-D rule) or [B, next_n] (2-D rule), any strides
 *   block_tables  i32 [B, W] (any strides)
 *   cache         DSA_CACHE_INDEXER_FP8 (§3.2: a block's bs·128 value bytes,
 *                 then its bs f32 scales) for an FP8 query,
 *                 DSA_CACHE_INDEXER_MXFP4 (§3.3: bs·64 packed bytes, then bs·4
 *                 scale bytes) for an MXFP4 one; any block size and stride
 *   logits        f32 or bf16 [B·next_n, max_model_len]
 * next_n is read from the tensor that carries it: a rank-4 query's shape[1],
 * else 2-D context_lens' shape[1], else T / B (T must be a multiple of B).
 * Row r = b·next_n + i sees keys j < limit(b, i):
 *   1-D: limit = min(ctx[b], ctx[b] - next_n + i + 1)   (causal among the
 *        next_n queries of a sequence; DeepGEMM / vLLM)
 *   2-D: limit = ctx[b][i]                              (DeepSeek-V4)
 * key j lives in block block_tables[b][j / bs], row j % bs. Table entries of
 * blocks at or beyond the limit are never read, nor are their keys.
 * Faults and fallbacks (the rule dsa_topk_decode follows too):
 *   - a length ctx < 0, or one above W·bs or max_model_len:
 *     DSA_FAULT_LENGTH_RANGE, the limit is clamped to [0, min(W·bs, max_model_len)];
 *     a 1-D limit below 0 from a length >= 0 is an empty row, not a fault;
 *   - a block id outside [0, num_blocks) inside the limit:
 *     DSA_FAULT_SLOT_RANGE, nothing is read for it and its keys' logits are
 *     -inf (whatever clean says).
 * B = 0 or max_model_len = 0 enqueue nothing. p may be NULL. */
DSA_API dsa_status dsa_indexer_paged_logits(dsa_queue *queue, const dsa_tensor *query,
                                            const dsa_tensor *query_scale,
                                            const dsa_tensor *weights,
                                            const dsa_tensor *context_lens,
                                            const dsa_tensor *block_tables,
                                            const dsa_paged_cache *cache,
                                            const dsa_tensor *logits,
                                            const dsa_indexer_logits_params *p,
                                            const dsa_events *ev);

#ifdef __cplusplus
}
#endif
#endif /* DSACL_INDEXER_LOGITS_H */
