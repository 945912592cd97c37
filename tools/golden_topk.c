/* Golden runner for the indexer top-k family (topk_per_row: form=prefill, and
 * form=decode with lens_rank 1 or 2): the golden's arrays in the shared case
 * description (tools/cases/topk.c), its call and its rule (the indices
 * byte for byte: SPEC.md's deterministic order). */
#include "golden.h"

#include <string.h>

static int run_topk_per_row(gcase *c) {
  const char *form = golden_meta_str(c, "form");
  int64_t k, rows;
  if (!form || golden_meta_i64(c, "k", &k) || golden_meta_i64(c, "rows", &rows)) return -1;
  npy_array *logits = golden_load(c, "logits", NPY_F4, 2),
            *want = golden_load(c, "out_indices", NPY_I4, 2);
  if (c->failed) return -1;
  if (logits->shape[0] != rows || want->shape[0] != rows || want->shape[1] != k)
    return golden_fail(c, "shapes disagree with meta rows=%lld k=%lld", (long long)rows,
                       (long long)k);
  case_topk tc = {.rows = rows, .n = logits->shape[1], .k = (int32_t)k, .logits = logits->data};
  int agree;
  if (!strcmp(form, "prefill")) {
    npy_array *st = golden_load(c, "row_starts", NPY_I4, 1), *en = golden_load(c, "row_ends", NPY_I4, 1);
    if (c->failed) return -1;
    tc.lens = st->data, tc.ends = en->data;
    agree = st->shape[0] == rows && en->shape[0] == rows;
  } else if (!strcmp(form, "decode")) {
    int64_t rank, next_n;
    if (golden_meta_i64(c, "lens_rank", &rank) || golden_meta_i64(c, "next_n", &next_n)) return -1;
    if (rank != 1 && rank != 2) return golden_fail(c, "meta lens_rank=%lld", (long long)rank);
    npy_array *lens = golden_load(c, "lens", NPY_I4, (int)rank);
    if (c->failed) return -1;
    tc.decode = 1, tc.lens_rank = (int)rank, tc.next_n = (int32_t)next_n;
    tc.b = lens->shape[0], tc.lens = lens->data;
    agree = rank == 1 || (int64_t)lens->count == rows;
  } else {
    return golden_fail(c, "meta form=%s: expected prefill or decode", form);
  }
  if (golden_shapes_agree(c, agree, "lengths vs rows")) return -1;
  /* Not -1 or small values: every output word must be written. */
  return golden_run_case(c, &case_topk_ops, &tc, 0xEE, want->data);
}

const golden_op golden_ops_topk[] = {
    {"topk_per_row", run_topk_per_row},
    {NULL, NULL},
};
