/*
 * dsacl — sparse MLA attention (SPEC.md "Sparse MLA attention",
 * SPEC-reference §9). Included by dsacl.h; relies on its types.
 *
 * Semantics shared by the three operators, per query token t and head h:
 *   entries  j of an index set are used iff j < len[t] and the index is valid
 *            (0 <= index < S for a bf16 KV buffer, 0 <= slot < capacity for
 *            a paged cache); an index < 0 is "none" (no fault);
 *   s_j    = scale * (q[t,h] . K_j)           fp32 accumulation
 *   out    = sum_j e^{s_j} K_j / (sum_j e^{s_j} + e^{sink[h]})   (V = K)
 *   lse    = ln sum_j e^{s_j}                  natural log, without the sink
 * A row with no used entry gives out = 0 and lse = -inf (whatever the sink);
 * a sink of -inf changes nothing and +inf gives out = 0. NaN never comes out
 * of masking. Results are checked against an fp64 reference within SPEC.md's
 * tolerance; they are not bit-exact across devices.
 *
 * Data-dependent faults (dsa_queue_faults):
 *   len[t] > K (the index width) or < 0: clamped to [0, K], DSA_FAULT_LENGTH_RANGE;
 *   bf16 attention, index >= S:           not attended, DSA_FAULT_INDEX_RANGE;
 *   decode, slot >= num_blocks*block_size: not attended, DSA_FAULT_SLOT_RANGE.
 * (One rule, the library's: the bit names what the index indexes, a row of
 * a tensor (INDEX_RANGE) or a slot of a paged cache (SLOT_RANGE).)
 */
#ifndef DSACL_SPARSE_MLA_H
#define DSACL_SPARSE_MLA_H

/* dsacl.h includes this file at its end; including it first works too. */
#include "dsacl.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DSA_MLA_HEAD_DIM 512

typedef struct dsa_sparse_params {
  float softmax_scale; /* multiplies q.k; default 1/sqrt(512) (DeepSeek-V4) */
  unsigned flags;      /* must be 0 (reserved for variants) */
  unsigned char reserved[32];
} dsa_sparse_params;

DSA_API void dsa_sparse_params_default(dsa_sparse_params *p);

/* bf16 sparse attention over a bf16 KV buffer (§9.2 plus sink and lse).
 *   query     bf16 [T, H, 512]  token and head strides free, unit inner stride
 *   kv        bf16 [S, 512]     row stride free, unit inner stride (K = V)
 *   indices   i32  [T, K]       rows of kv; strides free
 *   lens      i32  [T]          or NULL: every row uses all K entries
 *   attn_sink f32  [H]          or NULL (no sink)
 *   out       bf16 [T, H, 512]  token and head strides free, unit inner stride
 *   lse       f32  [T, H]       or NULL
 * p may be NULL (defaults). */
DSA_API dsa_status dsa_sparse_attn_bf16(dsa_queue *queue, const dsa_tensor *query,
                                        const dsa_tensor *kv, const dsa_tensor *indices,
                                        const dsa_tensor *lens, const dsa_tensor *attn_sink,
                                        const dsa_tensor *out, const dsa_tensor *lse,
                                        const dsa_sparse_params *p, const dsa_events *ev);

/* One index set of a sparse MLA decode: global slots into its own paged
 * cache (DSA_CACHE_MLA_FP8, any block size and block stride).
 *   indices i32 [T, K] (strides free);
 *   lens    i32 [T] or NULL: every row uses all K entries (as in
 *           dsa_sparse_attn_bf16). */
typedef struct dsa_sparse_index_set {
  const dsa_paged_cache *cache;
  const dsa_tensor *indices;
  const dsa_tensor *lens;
} dsa_sparse_index_set;

/* Sparse MLA decode (§9.1): attention over the union of the main set (SWA
 * cache) and the extra set (compressed cache), K = V = the dequantized
 * 512-vector (§3.1). Either set may be NULL (absent). query, attn_sink, out,
 * lse as in dsa_sparse_attn_bf16.
 *
 * Fused: dequantization happens inside the attention kernel; no workspace. */
DSA_API dsa_status dsa_sparse_mla_decode(dsa_queue *queue, const dsa_tensor *query,
                                         const dsa_sparse_index_set *main_set,
                                         const dsa_sparse_index_set *extra_set,
                                         const dsa_tensor *attn_sink, const dsa_tensor *out,
                                         const dsa_tensor *lse, const dsa_sparse_params *p,
                                         const dsa_events *ev);

/* Bytes of device workspace dsa_sparse_mla_decode_two_stage needs for T
 * tokens and index widths K1 (main) and K2 (extra); 0 on overflow or
 * negative sizes. */
DSA_API size_t dsa_sparse_mla_decode_workspace_size(int64_t T, int64_t K1, int64_t K2);

/* Two-stage decode (the XPU strategy, §9.4, without its host loops): one
 * kernel dequant-gathers the used entries of both sets into a bf16 workspace
 * and writes the combined index list and lengths there; then
 * dsa_sparse_attn_bf16's kernel runs over it. workspace: a u8 tensor
 * [bytes] (unit stride, any memory kind) with bytes >=
 * dsa_sparse_mla_decode_workspace_size(T, K1, K2), starting at a multiple of
 * 256 bytes (offset for a cl_mem, ptr + offset for a pointer kind); its
 * contents are scratch. Same results as dsa_sparse_mla_decode within the
 * tolerance. */
DSA_API dsa_status dsa_sparse_mla_decode_two_stage(
    dsa_queue *queue, const dsa_tensor *query, const dsa_sparse_index_set *main_set,
    const dsa_sparse_index_set *extra_set, const dsa_tensor *attn_sink, const dsa_tensor *out,
    const dsa_tensor *lse, const dsa_tensor *workspace, const dsa_sparse_params *p,
    const dsa_events *ev);

#ifdef __cplusplus
}
#endif
#endif /* DSACL_SPARSE_MLA_H */
