/*
 * dsacl — indexer quantization family: Q RoPE + FP8/MXFP4 quantization, K
 * quantize + insert into the paged indexer cache, K gather for prefill
 * (SPEC.md "Indexer operators", SPEC-reference §2.2-2.6, §3.2-3.4, §4, §5, §6.5).
 *
 * Included at the end of dsacl.h; include <dsacl/dsacl.h>, not this file.
 */
#ifndef DSACL_INDEXER_QUANT_H
#define DSACL_INDEXER_QUANT_H

/* dsacl.h includes this file at its end; including it first works too. */
#include "dsacl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* E2M1 (FP4) rounding of the MXFP4 paths (§2.4, §2.5).
 *   RNE:    round to nearest, ties to the even code, saturate at 6, the sign
 *           bit copied even for a zero code (-0.0 -> 0x8); block amax floor
 *           6 * 2^-126, ratio fl32(amax * fl32(1/6)). vLLM today.
 *   LEGACY: vLLM's older bucketize rule: ties to the lower code, no negative
 *           zero; floor 1e-4, ratio amax / 6 (correctly rounded).
 * Both: scale byte = ceil(log2(ratio)) + 127, computed exactly; NaN elements
 * are ignored by the amax and encode as 0x7. */
#define DSA_E2M1_MODE_MAP(X) X(RNE, 0) X(LEGACY, 1) /* kernels: -DDSA_E2M1_<NAME> */
typedef enum dsa_e2m1_mode {
#define DSA_E2M1_ENUM_(name, val) DSA_E2M1_##name = (val),
  DSA_E2M1_MODE_MAP(DSA_E2M1_ENUM_)
#undef DSA_E2M1_ENUM_
} dsa_e2m1_mode;

/* --------------------------------------------------------------------------
 * Indexer Q: RoPE + quantization (§4).
 * ------------------------------------------------------------------------ */
typedef struct dsa_indexer_q_quant_params {
  float softmax_scale;    /* default 128^-0.5 (DeepSeek's indexer head dim) */
  float head_scale;       /* default 64^-0.5 (DeepSeek's indexer head count;
                             with tensor parallelism this is NOT the shard's H) */
  dsa_e2m1_mode e2m1;     /* MXFP4 output only; default DSA_E2M1_RNE */
  unsigned char reserved[32];
} dsa_indexer_q_quant_params;

DSA_API void dsa_indexer_q_quant_params_default(dsa_indexer_q_quant_params *p);

/* Inputs
 *   positions  [T] i64 (i32 accepted), any stride: row of cos_sin per token
 *   index_q    [T, H, D] bf16, any token/head strides, unit inner stride;
 *              D a multiple of 32, at most 4096
 *   cos_sin    [P, R] f32 or bf16, any row stride, unit inner stride: R is the
 *              rope dim (even, <= D); columns [0, R/2) hold cos, [R/2, R) sin.
 *              The rotated dims are the trailing R of a head, GPT-J pairs
 *              (D-R+2i, D-R+2i+1) with cos/sin column i (§2.6), evaluated as
 *              e' = fma(e, c, -fl32(o*s)), o' = fma(o, c, fl32(e*s)) and
 *              rounded to bf16. R = 0: no RoPE (positions not read).
 *   weights    [T, H] bf16 or f32, any strides
 * Outputs (the format follows out_q's dtype):
 *   FP8   out_q [T, H, D] DSA_E4M3, out_scales NULL;
 *         out_weights [T, H] f32 = fl32(fl32(fl32(w * q_scale) * softmax_scale)
 *         * head_scale) with q_scale = 2^ceil(log2(max(amax, 1e-4) / 448))
 *         per (token, head) (§4.1).
 *   MXFP4 out_q [T, H, D/2] DSA_E2M1X2 (even element in the low nibble),
 *         out_scales [T, H, D/32] DSA_UE8M0 (byte q = block of dims
 *         [32q, 32q+32), mode p->e2m1); out_weights [T, H] f32 =
 *         fl32(fl32(w * softmax_scale) * head_scale) (§4.2).
 *   All outputs: any token/head strides, unit inner stride.
 * p may be NULL (defaults). T = 0 enqueues nothing (a marker if ev->done).
 * A position < 0 or >= P is not read: that token's heads are rotated with
 * cos = 1, sin = 0 through the same formula (so they are quantized as if not
 * rotated) and DSA_FAULT_POSITION_RANGE is set.
 * Bit-exact with vLLM; subnormal weights or products assume a device that
 * keeps fp32 denormals. */
DSA_API dsa_status dsa_indexer_q_quant(dsa_queue *queue, const dsa_tensor *positions,
                                       const dsa_tensor *index_q, const dsa_tensor *cos_sin,
                                       const dsa_tensor *weights, const dsa_tensor *out_q,
                                       const dsa_tensor *out_scales,
                                       const dsa_tensor *out_weights,
                                       const dsa_indexer_q_quant_params *p,
                                       const dsa_events *ev);

/* --------------------------------------------------------------------------
 * Indexer K cache (DSA_CACHE_INDEXER_FP8 / DSA_CACHE_INDEXER_MXFP4, §3.2/3.3).
 * Block b at cache->offset + b * block_stride:
 *   FP8:   [0, bs*128) token t's 128 e4m3 at t*128; [bs*128, bs*132) its f32
 *          scale 2^e at bs*128 + 4t.
 *   MXFP4: [0, bs*64) token t's 64 packed bytes at t*64; [bs*64, bs*68) its
 *          4 ue8m0 bytes at bs*64 + 4t (byte q = dims [32q, 32q+32)).
 *   Other bytes of the page and the stride padding are never touched.
 * ------------------------------------------------------------------------ */

typedef struct dsa_indexer_k_insert_params {
  dsa_e2m1_mode e2m1; /* MXFP4 cache only (ignored for FP8); default DSA_E2M1_RNE */
  unsigned char reserved[28];
} dsa_indexer_k_insert_params;

/* e2m1 = DSA_E2M1_RNE, reserved zeroed. */
DSA_API void dsa_indexer_k_insert_params_default(dsa_indexer_k_insert_params *p);

/* dsa_indexer_k_gather's: no field yet, room to grow within 1.x (a field's
 * zero keeps today's behaviour). Non-zero reserved bytes:
 * DSA_ERR_INVALID_ARGUMENT. */
typedef struct dsa_indexer_k_gather_params {
  unsigned char reserved[32];
} dsa_indexer_k_gather_params;

/* reserved zeroed. */
DSA_API void dsa_indexer_k_gather_params_default(dsa_indexer_k_gather_params *p);

/* Quantize k [N, 128] bf16 (any row stride, unit inner stride) and write row
 * n to slot slot_mapping[n] (i64 [N], any stride): block = slot / block_size.
 *   FP8 (§5.1): e = ceil(log2(max(amax, 1e-4) / 448)) over the row, bytes
 *   e4m3(x * 2^-e), scale stored as the f32 2^e.
 *   MXFP4 (§2.5, §5.3 without the compressor): four 32-element blocks with
 *   the E2M1 mode p->e2m1 (ignored for FP8).
 * slot < 0: skipped. slot >= num_blocks * block_size: skipped +
 * DSA_FAULT_SLOT_RANGE. Two rows with the same valid slot: one of them wins.
 * p may be NULL (defaults). */
DSA_API dsa_status dsa_indexer_k_insert(dsa_queue *queue, const dsa_tensor *k,
                                        const dsa_tensor *slot_mapping,
                                        const dsa_paged_cache *cache,
                                        const dsa_indexer_k_insert_params *p,
                                        const dsa_events *ev);

/* Prefill gather (§6.5, cp_gather_indexer_k_quant_cache): request r owns the
 * output rows [cu_seqlens[r], cu_seqlens[r+1]) (cu_seqlens i32 [R+1], the
 * exclusive prefix sum of the per-request compressed lengths, supplied by the
 * caller); its row cu[r] + j is compressed row j of the request: block
 * block_table[r][j / bs] (i32 [R, W], any strides), row j % bs.
 *   FP8 cache:   k_out [total, 128] DSA_E4M3, k_scale [total] f32
 *   MXFP4 cache: k_out [total, 64] DSA_E2M1X2, k_scale [total, 4] DSA_UE8M0
 *   (k_out any row stride, unit inner; k_scale any strides, unit inner for
 *   the MXFP4 form.)
 * Row i of the output (0 <= i < total) goes to the request r that bisection
 * finds: the largest r in [0, R) with cu[r] <= i, searching with
 * lo = 0, hi = R: while (hi - lo > 1) { mid = (lo + hi) / 2;
 * if (cu[mid] <= i) lo = mid; else hi = mid; }. For a non-decreasing cu that
 * is the unique request containing i. Then, with j = i - cu[r]:
 *   cu[r] <= i < cu[r+1]: row j of request r, unless
 *     j / bs >= W: untouched + DSA_FAULT_INDEX_RANGE;
 *     block id < 0: zeros (values and scale); >= num_blocks: zeros +
 *     DSA_FAULT_SLOT_RANGE;
 *   i < cu[0] (rows before the first request) or r = R-1 and i >= cu[R]
 *     (rows after the last): untouched;
 *   otherwise (cu not non-decreasing): untouched + DSA_FAULT_LENGTH_RANGE.
 * cu[R] > total also sets DSA_FAULT_LENGTH_RANGE (rows past total are not
 * written). R = 0 or total = 0 enqueues nothing. Here R + 1 = cu_seqlens' length and
 * block_table has R rows. p may be NULL (defaults). */
DSA_API dsa_status dsa_indexer_k_gather(dsa_queue *queue, const dsa_tensor *cu_seqlens,
                                        const dsa_tensor *block_table,
                                        const dsa_paged_cache *cache, const dsa_tensor *k_out,
                                        const dsa_tensor *k_scale,
                                        const dsa_indexer_k_gather_params *p,
                                        const dsa_events *ev);

#ifdef __cplusplus
}
#endif
#endif /* DSACL_INDEXER_QUANT_H */
