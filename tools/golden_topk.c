/* Golden runner for the indexer top-k family (topk_per_row: form=prefill, and
 * form=decode with lens_rank 1 or 2). The expected indices follow SPEC.md's
 * deterministic order, so the comparison is exact. */
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
  /* Not -1 or small values: every output word must be written. */
  cl_mem lm = golden_to_device(c, logits->data, logits->nbytes),
         om = golden_filled(c, want->nbytes, 0xEE);
  if (c->failed) return -1;
  dsa_tensor lt = golden_tensor_of(lm, logits, DSA_F32), ot = golden_tensor_of(om, want, DSA_I32);
  dsa_topk_params p;
  dsa_topk_params_default(&p);
  p.k = (int32_t)k;
  dsa_status s;
  if (!strcmp(form, "prefill")) {
    npy_array *st = golden_load(c, "row_starts", NPY_I4, 1), *en = golden_load(c, "row_ends", NPY_I4, 1);
    if (c->failed) return -1;
    cl_mem sm = golden_to_device(c, st->data, st->nbytes), em = golden_to_device(c, en->data, en->nbytes);
    if (c->failed) return -1;
    dsa_tensor stt = golden_tensor_of(sm, st, DSA_I32), ent = golden_tensor_of(em, en, DSA_I32);
    s = dsa_topk_prefill(c->q, &lt, &stt, &ent, &ot, &p, NULL);
  } else if (!strcmp(form, "decode")) {
    int64_t rank, next_n;
    if (golden_meta_i64(c, "lens_rank", &rank) || golden_meta_i64(c, "next_n", &next_n)) return -1;
    if (rank != 1 && rank != 2) return golden_fail(c, "meta lens_rank=%lld", (long long)rank);
    npy_array *lens = golden_load(c, "lens", NPY_I4, (int)rank);
    if (c->failed) return -1;
    cl_mem nm = golden_to_device(c, lens->data, lens->nbytes);
    if (c->failed) return -1;
    dsa_tensor nt = golden_tensor_of(nm, lens, DSA_I32);
    p.next_n = (int32_t)next_n;
    s = dsa_topk_decode(c->q, &lt, &nt, &ot, &p, NULL);
  } else {
    return golden_fail(c, "meta form=%s: expected prefill or decode", form);
  }
  if (golden_op_status(c, "dsa_topk", s)) return -1;
  return golden_no_faults(c) || golden_compare(c, "out_indices", om, want) ? -1 : 0;
}

const golden_op golden_ops_topk[] = {
    {"topk_per_row", run_topk_per_row},
    {NULL, NULL},
};
