/*
 * dsacl — index-building helpers of the DeepSeek-V4 sparse-attention path
 * (SPEC-reference §10.1–10.5, SPEC.md "Index-building helpers"). Included
 * by dsacl.h; relies on its types (dsa_tensor, dsa_events, dsa_status,
 * DSA_API).
 *
 * Every helper runs on the device (no host loop, no readback) and is exact
 * integer work. Conventions shared by all of them:
 *  - index tensors are i32 with any strides; outputs are written in full
 *    (every column of every row), so no pre-fill is needed;
 *  - an index < 0 is "none": it maps to -1 and is never looked up;
 *  - data-dependent problems set a bit in the queue's fault word and give
 *    -1 (and, where a whole row is affected, length 0); nothing outside the
 *    tensors is ever read or written:
 *      DSA_FAULT_INDEX_RANGE     request id outside the block table / the
 *                                request arrays, or a block-table column
 *                                >= its width;
 *      DSA_FAULT_POSITION_RANGE  a position < 0 or >= 2^31 - 1;
 *      DSA_FAULT_LENGTH_RANGE    inconsistent lengths (seq_len < query_len,
 *                                an SWA entry outside the gathered range);
 *      DSA_FAULT_SLOT_RANGE      a slot id that does not fit in i32;
 *  - a block-table entry < 0 (unallocated page) maps to -1 without a fault
 *    (vLLM computes block * bs + offset from it, or clamps it to 0).
 * Validity flags (is_valid_token) are u8, 0 = padding token; where optional,
 * NULL means every token is valid.
 */
#ifndef DSACL_INDEX_HELPERS_H
#define DSACL_INDEX_HELPERS_H

/* dsacl.h includes this file at its end; including it first works too. */
#include "dsacl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- §10.1 compressed slot mapping ---------------------------------------
 * For token t of request r (query_start_loc[r] <= t < query_start_loc[r+1],
 * absolute token ids, NOT rebased) at position
 * p = seq_lens[r] - query_len_r + (t - query_start_loc[r]):
 *   (p + 1) % compress_ratio == 0:  c = p / compress_ratio,
 *       slot = block_table[r][c / block_size] * block_size + c % block_size;
 *   otherwise, and for tokens no request covers (padding): -1.
 * query_start_loc i32 [R+1], seq_lens i32 [R], block_table i32 [R, W],
 * slot_mapping i64 [T] (output; T may exceed query_start_loc[R]).
 * block_size is the storage block size (compressed rows per block). */
typedef struct dsa_index_compressed_slot_mapping_params {
  int32_t compress_ratio; /* >= 1; default 4 */
  int32_t block_size;     /* >= 1; default 64 */
  unsigned char reserved[24];
} dsa_index_compressed_slot_mapping_params;
DSA_API void dsa_index_compressed_slot_mapping_params_default(
    dsa_index_compressed_slot_mapping_params *p);
DSA_API dsa_status dsa_index_compressed_slot_mapping(dsa_queue *queue,
                                                     const dsa_tensor *query_start_loc,
                                                     const dsa_tensor *seq_lens,
                                                     const dsa_tensor *block_table,
                                                     const dsa_tensor *slot_mapping,
                                                     const dsa_index_compressed_slot_mapping_params *p,
                                                     const dsa_events *ev);

/* ---- §10.2 SWA indices and lengths (decode) --------------------------------
 * Per token t with p = positions[t] and r = token_to_req[t]:
 *   start = max(p - window + 1, 0), len = p - start + 1 (<= window);
 *   indices[t][i] = slot of position start + i in the SWA cache
 *                   (block_table[r][(start+i) / block_size] * block_size +
 *                   (start+i) % block_size) for i < len, -1 for i >= len
 *                   (all columns up to indices' shape[1] >= window);
 *   lens[t] = len.
 * A token with is_valid_token[t] == 0 gets len 0 and a row of -1 (vLLM
 * leaves that row stale). positions i64 or i32 [T] (the positions used for
 * RoPE; vLLM's prefix_len + t - query_start), token_to_req i32 [T] or NULL
 * (pure decode: token t is request t),
 * is_valid_token u8 [T] or NULL, block_table i32 [R, W], indices i32
 * [T, >= window], lens i32 [T]. */
typedef struct dsa_index_swa_params {
  int32_t window;     /* >= 1; default 128 */
  int32_t block_size; /* SWA cache block size, >= 1; default 64 */
  unsigned char reserved[24];
} dsa_index_swa_params;
DSA_API void dsa_index_swa_params_default(dsa_index_swa_params *p);
DSA_API dsa_status dsa_index_swa(dsa_queue *queue, const dsa_tensor *positions,
                                 const dsa_tensor *token_to_req,
                                 const dsa_tensor *is_valid_token,
                                 const dsa_tensor *block_table, const dsa_tensor *indices,
                                 const dsa_tensor *lens, const dsa_index_swa_params *p,
                                 const dsa_events *ev);

/* ---- §10.3 top-k local -> global slots ---------------------------------------
 * out[t][j] = block_table[r][i / block_size] * block_size + i % block_size
 * for i = topk_local[t][j] >= 0 (r = token_to_req[t]), -1 for i < 0;
 * lens[t] = number of entries i >= 0 in the whole row (wherever they are),
 * 0 when is_valid_token[t] == 0 (whose row is still mapped, as in vLLM).
 * topk_local i32 [T, K], token_to_req i32 [T] or NULL (token t is request
 * t), block_table i32 [R, W],
 * is_valid_token u8 [T] or NULL, out i32 [T, K] (may be topk_local itself),
 * lens i32 [T] or NULL. */
typedef struct dsa_index_global_topk_params {
  int32_t block_size; /* compressed rows per block, >= 1; default 64 (C4) */
  unsigned char reserved[28];
} dsa_index_global_topk_params;
DSA_API void dsa_index_global_topk_params_default(dsa_index_global_topk_params *p);
DSA_API dsa_status dsa_index_global_topk(dsa_queue *queue, const dsa_tensor *topk_local,
                                         const dsa_tensor *token_to_req,
                                         const dsa_tensor *block_table,
                                         const dsa_tensor *is_valid_token,
                                         const dsa_tensor *out, const dsa_tensor *lens,
                                         const dsa_index_global_topk_params *p,
                                         const dsa_events *ev);

/* C128 dense form (vLLM _build_c128a_topk_metadata_kernel): every compressed
 * row a token can see. With n = min((positions[t] + 1) / compress_ratio, K)
 * (K = out's shape[1]):
 *   global form (block_table given, decode tokens): out[t][i] = slot of
 *     compressed row i (block_table[token_to_req[t]][i / block_size] *
 *     block_size + i % block_size) for i < n;
 *   local form (block_table NULL, prefill tokens): out[t][i] = i for i < n;
 * -1 for i >= n; lens[t] = n, or 0 when is_valid_token[t] == 0.
 * positions i64 or i32 [T], token_to_req i32 [T] or NULL (token t is
 * request t; not read in the local form),
 * block_table i32 [R, W] or NULL, is_valid_token u8 [T] or NULL, out i32
 * [T, K], lens i32 [T] or NULL. A negative position counts as n = 0 and
 * faults. */
typedef struct dsa_index_c128_topk_params {
  int32_t compress_ratio; /* >= 1; default 128 */
  int32_t block_size;     /* compressed rows per block, >= 1; default 2 */
  unsigned char reserved[24];
} dsa_index_c128_topk_params;
DSA_API void dsa_index_c128_topk_params_default(dsa_index_c128_topk_params *p);
DSA_API dsa_status dsa_index_c128_topk(dsa_queue *queue, const dsa_tensor *positions,
                                       const dsa_tensor *token_to_req,
                                       const dsa_tensor *block_table,
                                       const dsa_tensor *is_valid_token,
                                       const dsa_tensor *out, const dsa_tensor *lens,
                                       const dsa_index_c128_topk_params *p, const dsa_events *ev);

/* ---- §10.4 prefill top-k + SWA combination ------------------------------------
 * Indices into a prefill workspace of M rows per request (compressed rows
 * first, the gathered SWA rows from row N on). query_start_loc is rebased by
 * its first element; token t belongs to request b when
 * qsl[b] - qsl[0] <= t < qsl[b+1] - qsl[0]. Its position is
 * p = seq_lens[b] - query_len_b + (t - qs_b), and with
 *   topk_len = min((p + 1) / compress_ratio, topk),
 *   swa_len  = min(p + 1, window),
 *   gather_start = seq_lens[b] - gather_lens[b]:
 *   out[t][j]            = topk[t][j] + M*b                 j < topk_len
 *   out[t][topk_len + i] = M*b + N + (p - swa_len + 1 - gather_start) + i
 *                                                            i < swa_len
 *   every other column: -1;  lens[t] = topk_len + swa_len.
 * Differences from vLLM (invalid input only): a topk entry < 0 inside
 * topk_len gives -1 (vLLM: M*b - 1); an SWA position outside
 * [gather_start, seq_len) gives -1 + DSA_FAULT_LENGTH_RANGE; tokens no
 * request covers get -1 and length 0 (vLLM: untouched).
 * topk i32 [T, >= topk] (NULL allowed when topk == 0), query_start_loc i32
 * [R+1], seq_lens / gather_lens i32 [R], out i32 [T, >= topk + window]
 * (vLLM: round_up(topk + window, 128)), lens i32 [T]. */
typedef struct dsa_index_combine_topk_swa_params {
  int32_t window;         /* >= 1; default 128 */
  int32_t compress_ratio; /* >= 1; default 4 */
  int32_t topk;           /* >= 0 (0: SWA only); default 512 */
  int64_t M;              /* workspace rows per request, >= 0 */
  int64_t N;              /* first SWA row of a request's slab, >= 0 */
  unsigned char reserved[16];
} dsa_index_combine_topk_swa_params;
DSA_API void dsa_index_combine_topk_swa_params_default(dsa_index_combine_topk_swa_params *p);
DSA_API dsa_status dsa_index_combine_topk_swa(dsa_queue *queue, const dsa_tensor *topk,
                                              const dsa_tensor *query_start_loc,
                                              const dsa_tensor *seq_lens,
                                              const dsa_tensor *gather_lens, const dsa_tensor *out,
                                              const dsa_tensor *lens,
                                              const dsa_index_combine_topk_swa_params *p,
                                              const dsa_events *ev);

/* ---- §10.5 mixed sparse-index matrix (FlashInfer layout) -------------------
 * out i32 [T, window + P] with P >= max(topk, Kd) (vLLM: rounded up to 4),
 * T = Td + Tp: the first Td rows are decode tokens, the next Tp prefill.
 * Decode token t:
 *   columns [0, window): decode_swa_indices[t] copied;
 *   column window + j: c = decode_compressed_indices[t][j] for j < Kd, else -1;
 *     if decode_compressed_local: c >= 0 maps to
 *     compressed_block_table[r][c / cbs] * cbs + c % cbs (r = token_to_req[t]);
 *   lens[t] = window + (local: #{c >= 0} if decode_is_valid_token[t] else 0;
 *                       else decode_compressed_lens[t] if given, else Kd).
 * Prefill token t (prefill row t - Td, r = token_to_req[t], token ids
 * absolute in query_start_loc, NOT rebased):
 *   p = seq_lens[r] - query_len_r + (t - qsl[r]); swa_len = min(p+1, window);
 *   topk_len = min((p + 1) / compress_ratio, topk);
 *   column i < window: slot of position p - swa_len + 1 + i through
 *     swa_block_table (block size sbs) for i < swa_len, else -1;
 *   column window + j: local c = prefill_topk_indices[t-Td][j] for
 *     j < min(topk_len, Kp), mapped as above when c >= 0, else -1;
 *   lens[t] = window + topk_len (window, not swa_len, as in vLLM).
 * decode_compressed_indices may be NULL (Kd = 0: compressed columns -1,
 * lens = window); compressed_block_table NULL means swa_block_table. */
typedef struct dsa_index_mixed_sparse_inputs {
  const dsa_tensor *decode_swa_indices;        /* i32 [Td, window] */
  const dsa_tensor *decode_compressed_indices; /* i32 [Td, Kd] or NULL */
  const dsa_tensor *decode_compressed_lens;    /* i32 [Td] or NULL (global form only) */
  const dsa_tensor *decode_is_valid_token;     /* u8 [Td]; local form: required */
  const dsa_tensor *prefill_topk_indices;      /* i32 [Tp, Kp] */
  const dsa_tensor *query_start_loc;           /* i32 [R+1] */
  const dsa_tensor *seq_lens;                  /* i32 [R] */
  const dsa_tensor *token_to_req;              /* i32 [>= Td + Tp] */
  const dsa_tensor *swa_block_table;           /* i32 [R, Ws] */
  const dsa_tensor *compressed_block_table;    /* i32 [R, Wc] or NULL */
} dsa_index_mixed_sparse_inputs;
typedef struct dsa_index_mixed_sparse_params {
  int32_t window;                  /* >= 1; default 128 */
  int32_t compress_ratio;          /* >= 1; default 4 */
  int32_t topk;                    /* >= 0; default 512 */
  int32_t swa_block_size;          /* >= 1; default 64 */
  int32_t compressed_block_size;   /* >= 1; default 64 */
  int32_t decode_compressed_local; /* 0 / 1; default 0 */
  unsigned char reserved[24];
} dsa_index_mixed_sparse_params;
DSA_API void dsa_index_mixed_sparse_params_default(dsa_index_mixed_sparse_params *p);
DSA_API dsa_status dsa_index_mixed_sparse(dsa_queue *queue, const dsa_index_mixed_sparse_inputs *in,
                                          const dsa_tensor *out, const dsa_tensor *lens,
                                          const dsa_index_mixed_sparse_params *p,
                                          const dsa_events *ev);

#ifdef __cplusplus
}
#endif
#endif /* DSACL_INDEX_HELPERS_H */
