/* Golden runners for the indexer logits family: mqa_logits (ragged prefill)
 * and paged_mqa_logits (1-D and 2-D context lengths), through the shared
 * case descriptions (tools/cases/indexer_logits.c: the call with clean = 1
 * and SPEC.md's rule, CASE_LOGITS_TOL against out_ref, the fp64 reference
 * rounded to f32). The output buffer starts as NaN bytes, so an entry the
 * operator fails to write shows up as a mismatch. */
#include "golden.h"

#include <stdlib.h>
#include <string.h>

/* out_ref as the rule's doubles; NULL (and a failure) when out of memory. */
static double *want_of(gcase *c, const npy_array *ref) {
  double *w = malloc((size_t)ref->count * sizeof *w + 1);
  if (!w) {
    golden_fail(c, "out of memory");
    return NULL;
  }
  for (size_t i = 0; i < (size_t)ref->count; i++) w[i] = ((const float *)ref->data)[i];
  return w;
}

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
  case_logits lc = {.m = q->shape[0], .h = q->shape[1], .d = q->shape[2], .n = k->shape[0],
                    .q = q->data, .k = k->data, .ksc = ksc->data, .w = w->data,
                    .ks = ks->data, .ke = ke->data};
  const int64_t m = lc.m, n = lc.n;
  if (golden_shapes_agree(c,
                          k->shape[1] == lc.d && (int64_t)ksc->count == n &&
                              (int64_t)w->count == m * lc.h && (int64_t)ks->count == m &&
                              (int64_t)ke->count == m && (int64_t)ref->count == m * n,
                          "q [M, H, D], k [N, D], k_scale [N], weights [M, H], ks/ke [M], "
                          "out_ref [M, N]"))
    return -1;
  double *want = want_of(c, ref);
  const int rc = want ? golden_run_case(c, &case_logits_ops, &lc, 0xFF, want) : -1;
  free(want);
  return rc;
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
  if (nb < 0 || stride < 0 || cache->nbytes < (size_t)nb * (size_t)stride)
    return golden_fail(c, "cache has %zu bytes, meta num_blocks x block_stride_bytes more",
                       cache->nbytes);
  case_paged_logits pl = {.ctx_rank = (int)rank, .b = q->shape[0], .next_n = q->shape[1],
                          .h = q->shape[2], .w = bt->shape[1], .nb = nb, .bs = (int32_t)bs,
                          .stride = stride, .mml = ref->shape[1], .cache = cache->data,
                          .q = q->data, .wt = w->data, .ctx = cl->data, .table = bt->data};
  const int64_t rows = pl.b * pl.next_n;
  if (golden_shapes_agree(c,
                          q->shape[3] == 128 && (int64_t)w->count == rows * pl.h &&
                              (int64_t)cl->count == (rank == 2 ? rows : pl.b) &&
                              bt->shape[0] == pl.b && ref->shape[0] == rows,
                          "q [B, next_n, H, 128], weights [B * next_n, H], context_lens, "
                          "block_tables [B, W], out_ref [B * next_n, .]"))
    return -1;
  double *want = want_of(c, ref);
  const int rc = want ? golden_run_case(c, &case_paged_logits_ops, &pl, 0xFF, want) : -1;
  free(want);
  return rc;
}

const golden_op golden_ops_indexer_logits[] = {
    {"mqa_logits", run_mqa_logits},
    {"paged_mqa_logits", run_paged_mqa_logits},
    {NULL, NULL},
};
