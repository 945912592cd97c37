/* Golden runners for the indexer logits family: mqa_logits (ragged prefill)
 * and paged_mqa_logits (1-D and 2-D context lengths). Outputs are compared
 * with out_ref (fp64 reference rounded to f32) within SPEC.md's tolerance:
 * max|got - ref| / max|ref| <= 1e-5 over finite entries, and the same
 * -inf (and NaN / +inf) pattern. The output buffer starts as NaN bytes, so an
 * entry the operator fails to write shows up as a pattern mismatch. */
#include "golden.h"

#include <string.h>

#define LOGITS_TOL 1e-5

static int run_mqa_logits(gcase *c) {
  npy_array *q = golden_load(c, "q", NPY_U1, 3), *k = golden_load(c, "k", NPY_U1, 2),
            *ksc = golden_load(c, "k_scale", NPY_F4, 1),
            *w = golden_load(c, "weights", NPY_F4, 2), *ks = golden_load(c, "ks", NPY_I4, 1),
            *ke = golden_load(c, "ke", NPY_I4, 1), *ref = golden_load(c, "out_ref", NPY_F4, 2);
  int64_t clean = 1;
  if (c->failed) return -1;
  if (npy_meta_get(&c->meta, "clean_logits") && golden_meta_i64(c, "clean_logits", &clean))
    return -1;
  if (!clean) return golden_fail(c, "clean_logits=0: out_ref leaves entries unspecified");
  cl_mem qm = golden_to_device(c, q->data, q->nbytes), km = golden_to_device(c, k->data, k->nbytes),
         sm = golden_to_device(c, ksc->data, ksc->nbytes),
         wm = golden_to_device(c, w->data, w->nbytes),
         bm = golden_to_device(c, ks->data, ks->nbytes),
         em = golden_to_device(c, ke->data, ke->nbytes), om = golden_filled(c, ref->nbytes, 0xFF);
  if (c->failed) return -1;
  dsa_tensor qt = golden_tensor_of(qm, q, DSA_E4M3), kt = golden_tensor_of(km, k, DSA_E4M3),
             st = golden_tensor_of(sm, ksc, DSA_F32), wt = golden_tensor_of(wm, w, DSA_F32),
             bt = golden_tensor_of(bm, ks, DSA_I32), et = golden_tensor_of(em, ke, DSA_I32),
             ot = golden_tensor_of(om, ref, DSA_F32);
  dsa_indexer_logits_params p;
  dsa_indexer_logits_params_default(&p);
  p.clean = 1;
  if (golden_op_status(c, "dsa_indexer_logits",
                       dsa_indexer_logits(c->q, &qt, NULL, &kt, &st, &wt, &bt, &et, &ot, &p, NULL)))
    return -1;
  return golden_no_faults(c) || golden_compare_f32_tol(c, "out_ref", om, ref, LOGITS_TOL) ? -1
                                                                                          : 0;
}

static int run_paged_mqa_logits(gcase *c) {
  int64_t rank = 1, nb, bs, stride, mml;
  if (npy_meta_get(&c->meta, "context_lens_rank") &&
      golden_meta_i64(c, "context_lens_rank", &rank))
    return -1;
  if (rank != 1 && rank != 2) return golden_fail(c, "context_lens_rank=%lld", (long long)rank);
  npy_array *q = golden_load(c, "q", NPY_U1, 4), *cache = golden_load(c, "cache", NPY_U1, 2),
            *w = golden_load(c, "weights", NPY_F4, 2),
            *cl = golden_load(c, "context_lens", NPY_I4, (int)rank),
            *bt = golden_load(c, "block_tables", NPY_I4, 2),
            *ref = golden_load(c, "out_ref", NPY_F4, 2);
  if (c->failed || golden_meta_i64(c, "num_blocks", &nb) ||
      golden_meta_i64(c, "block_size", &bs) || golden_meta_i64(c, "block_stride_bytes", &stride))
    return -1;
  if (npy_meta_get(&c->meta, "max_model_len")) {
    if (golden_meta_i64(c, "max_model_len", &mml)) return -1;
    if (mml != ref->shape[1])
      return golden_fail(c, "max_model_len %lld but out_ref has %lld columns", (long long)mml,
                         (long long)ref->shape[1]);
  }
  cl_mem qm = golden_to_device(c, q->data, q->nbytes),
         cm = golden_to_device(c, cache->data, cache->nbytes),
         wm = golden_to_device(c, w->data, w->nbytes),
         lm = golden_to_device(c, cl->data, cl->nbytes),
         tm = golden_to_device(c, bt->data, bt->nbytes), om = golden_filled(c, ref->nbytes, 0xFF);
  if (c->failed) return -1;
  dsa_paged_cache pc = {.mem = cm, .offset = 0, .num_blocks = nb, .block_size = (int32_t)bs,
                        .block_stride = stride, .format = DSA_CACHE_INDEXER_FP8};
  dsa_tensor qt = golden_tensor_of(qm, q, DSA_E4M3), wt = golden_tensor_of(wm, w, DSA_F32),
             lt = golden_tensor_of(lm, cl, DSA_I32), tt = golden_tensor_of(tm, bt, DSA_I32),
             ot = golden_tensor_of(om, ref, DSA_F32);
  dsa_indexer_logits_params p;
  dsa_indexer_logits_params_default(&p);
  p.clean = 1;
  if (golden_op_status(c, "dsa_indexer_paged_logits",
                       dsa_indexer_paged_logits(c->q, &qt, NULL, &wt, &lt, &tt, &pc, &ot, &p, NULL)))
    return -1;
  return golden_no_faults(c) || golden_compare_f32_tol(c, "out_ref", om, ref, LOGITS_TOL) ? -1
                                                                                          : 0;
}

const golden_op golden_ops_indexer_logits[] = {
    {"mqa_logits", run_mqa_logits},
    {"paged_mqa_logits", run_paged_mqa_logits},
    {NULL, NULL},
};
