/* Indexer top-k reference: SPEC.md's deterministic rule, by a full sort. */
#include "ref_topk.h"

#include <math.h>
#include <stdlib.h>

typedef struct cand {
  float v; /* NaN already replaced by -inf */
  int64_t col;
} cand;

/* Value descending (as floats: -0.0 == +0.0), then column ascending. */
static int cmp_cand(const void *pa, const void *pb) {
  const cand *a = pa, *b = pb;
  if (a->v > b->v) return -1;
  if (a->v < b->v) return 1;
  return a->col < b->col ? -1 : a->col > b->col;
}

void ref_topk_row(const float *v, int64_t n, int32_t k, int32_t *out, int64_t out_s1) {
  if (n <= k) {
    for (int64_t j = 0; j < k; j++) out[j * out_s1] = j < n ? (int32_t)j : -1;
    return;
  }
  cand *c = malloc((size_t)n * sizeof *c);
  if (!c) abort(); /* test helper: no graceful path needed */
  for (int64_t i = 0; i < n; i++) c[i] = (cand){isnan(v[i]) ? -INFINITY : v[i], i};
  qsort(c, (size_t)n, sizeof *c, cmp_cand);
  for (int64_t j = 0; j < k; j++) out[j * out_s1] = (int32_t)c[j].col;
  free(c);
}

static int64_t clamp64(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

unsigned ref_topk_prefill(const float *logits, int64_t rows, int64_t n_cols, int64_t row_stride,
                          const int32_t *starts, const int32_t *ends, int32_t k, int32_t *out,
                          int64_t out_s0, int64_t out_s1) {
  unsigned f = 0;
  for (int64_t r = 0; r < rows; r++) {
    int64_t st = starts[r], en = ends[r];
    if (st < 0 || en > n_cols) f |= REF_TOPK_FAULT_LENGTH_RANGE; /* st >= en: empty, no fault */
    int64_t s = clamp64(st, 0, n_cols), e = clamp64(en, s, n_cols);
    ref_topk_row(logits + r * row_stride + s, e - s, k, out + r * out_s0, out_s1);
  }
  return f;
}

unsigned ref_topk_decode(const float *logits, int64_t rows, int64_t n_cols, int64_t row_stride,
                         const int32_t *lens, int lens_rank, int64_t next_n, int32_t k,
                         int32_t *out, int64_t out_s0, int64_t out_s1) {
  unsigned f = 0;
  for (int64_t r = 0; r < rows; r++) {
    int64_t len = lens_rank == 1 ? lens[r / next_n] : lens[r];
    int64_t en = lens_rank == 1 ? len - next_n + r % next_n + 1 : len;
    if (len < 0 || len > n_cols) f |= REF_TOPK_FAULT_LENGTH_RANGE; /* the length itself */
    int64_t e = clamp64(en, 0, n_cols);
    ref_topk_row(logits + r * row_stride, e, k, out + r * out_s0, out_s1);
  }
  return f;
}
