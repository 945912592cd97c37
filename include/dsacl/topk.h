/*
 * dsacl — indexer top-k per row (SPEC-reference §7, SPEC.md "Indexer
 * operators"). Included by dsacl.h; relies on its types (dsa_tensor,
 * dsa_events, dsa_status, DSA_API).
 *
 * Deterministic rule (stronger than vLLM's, whose order is unspecified):
 * the candidates of row r are the columns [start, end) of logits row r.
 * With n = end - start:
 *   - n <= k: out[r] = 0, 1, ..., n-1, then -1 (logits are not read);
 *   - n >  k: the k candidates ranked first by (value descending, column
 *     ascending), in that order. NaN ranks as -inf (it ties with -inf and
 *     the tie is broken by column); -0.0 and +0.0 compare equal, so they
 *     tie too and are ordered by column. bf16 logits are ranked by their
 *     exact f32 widening under the same rule.
 * Output entries are columns relative to start (prefill) or absolute
 * columns (decode, where start is 0).
 *
 * Bad ranges are data (they live on the device), so they are not errors:
 * the kernel sets DSA_FAULT_LENGTH_RANGE in the queue's fault word and
 * uses the clamped range start' = clamp(start, 0, N),
 * end' = clamp(end, start', N) (N = logits shape[1]); it never reads
 * outside [start', end') of the row.
 */
#ifndef DSACL_TOPK_H
#define DSACL_TOPK_H

/* dsacl.h includes this file at its end; including it first works too. */
#include "dsacl.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DSA_TOPK_MAX_K 2048

typedef struct dsa_topk_params {
  /* Entries per row, 1..DSA_TOPK_MAX_K. 0: the indices tensor's shape[1]
   * (which must equal k when k is given). */
  int32_t k;
  /* Decode only: queries per sequence, 0 = from the tensors (the rule of
   * dsa_indexer_paged_logits): 2-D lengths [B, next_n] carry it; with 1-D
   * lengths [B] it is rows / B. Nonzero: must agree with them. */
  int32_t next_n;
  unsigned char reserved[24];
} dsa_topk_params;

/* k = 0, next_n = 0, reserved zeroed. */
DSA_API void dsa_topk_params_default(dsa_topk_params *p);

/* Prefill (ragged) form: logits f32 or bf16 [rows, N] (what the indexer
 * logits operators write; row stride free, unit inner stride), row_starts
 * and row_ends i32 [rows] (any stride), indices i32 [rows, k] (any
 * strides). Row r covers [row_starts[r], row_ends[r]);
 * outputs are relative to row_starts[r]. Faults (DSA_FAULT_LENGTH_RANGE):
 * start < 0, end > N; start >= end is an empty row, not a fault (the rule of
 * dsa_indexer_logits). p may be NULL (defaults). */
DSA_API dsa_status dsa_topk_prefill(dsa_queue *queue, const dsa_tensor *logits,
                                    const dsa_tensor *row_starts, const dsa_tensor *row_ends,
                                    const dsa_tensor *indices, const dsa_topk_params *p,
                                    const dsa_events *ev);

/* Decode form: logits f32 or bf16 [rows, N], lengths i32 either
 *   [B] (1-D, causal among the next_n queries of a sequence): rows = B * next_n,
 *       row r = b * next_n + i covers [0, lengths[b] - next_n + i + 1)
 *       (an end below 0 from a length >= 0 is an empty row, no fault);
 *   [B, next_n] (2-D, DeepSeek-V4): row r = b * next_n + i covers
 *       [0, lengths[b][i]).
 * indices i32 [rows, k], absolute columns. Faults: a length < 0 or > N (the
 * length itself, as dsa_indexer_paged_logits checks it). next_n: see
 * dsa_topk_params. */
DSA_API dsa_status dsa_topk_decode(dsa_queue *queue, const dsa_tensor *logits,
                                   const dsa_tensor *lengths, const dsa_tensor *indices,
                                   const dsa_topk_params *p, const dsa_events *ev);

#ifdef __cplusplus
}
#endif
#endif /* DSACL_TOPK_H */
