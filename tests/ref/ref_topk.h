/* Host C reference for the indexer top-k (SPEC.md "Indexer operators",
 * SPEC-reference §7), written from the SPEC's deterministic rule, never from
 * the kernel. Plain C11, no OpenCL. */
#ifndef DSACL_TESTS_REF_TOPK_H
#define DSACL_TESTS_REF_TOPK_H

#include <stdint.h>

/* Same bit as DSA_FAULT_LENGTH_RANGE. */
#define REF_TOPK_FAULT_LENGTH_RANGE 8u

/* Row r of logits starts at logits + r * row_stride (floats), N columns.
 * Output row r at out + r * out_s0, entry j at + j * out_s1 (int32 units).
 * Bad ranges: the fault bit, and the clamped range
 * start' = clamp(start, 0, N), end' = clamp(end, start', N).
 * Return the fault bits. */
unsigned ref_topk_prefill(const float *logits, int64_t rows, int64_t n_cols, int64_t row_stride,
                          const int32_t *starts, const int32_t *ends, int32_t k, int32_t *out,
                          int64_t out_s0, int64_t out_s1);

/* lens_rank 1: lens[B], rows = B * next_n, end = lens[r / next_n] - next_n +
 * r % next_n + 1 (below 0 from a length >= 0: empty, no fault);
 * lens_rank 2: lens[B * next_n] row-major [B, next_n], end = lens[r].
 * A length < 0 or an end > N is a fault. Start is 0, outputs absolute. */
unsigned ref_topk_decode(const float *logits, int64_t rows, int64_t n_cols, int64_t row_stride,
                         const int32_t *lens, int lens_rank, int64_t next_n, int32_t k,
                         int32_t *out, int64_t out_s0, int64_t out_s1);

/* One row: candidates v[0..n) → out[0..k). */
void ref_topk_row(const float *v, int64_t n, int32_t k, int32_t *out, int64_t out_s1);

#endif
