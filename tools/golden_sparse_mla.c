/* Golden runner for sparse MLA attention: sparse_mla_decode, run with both
 * strategies (fused and two-stage) through the shared case description
 * (tools/cases/sparse_mla.c) and compared with the fp64 reference by its
 * rule (SPEC.md): max |d| <= 1e-2 * max(1, |ref|) elementwise, relative L2
 * <= 4e-3, lse within 1e-4 absolute (-inf where the reference has -inf). */
#include "golden.h"

#include <stdlib.h>

static double *widen(const npy_array *a) {
  double *w = malloc(a->count * sizeof *w + 1);
  if (w)
    for (size_t i = 0; i < a->count; i++) w[i] = ((const float *)a->data)[i];
  return w;
}

static int run_sparse_mla_decode(gcase *c) {
  npy_array *qa = golden_load(c, "q", NPY_U2, 3), *sc = golden_load(c, "swa_cache", NPY_U1, 2),
            *si = golden_load(c, "swa_indices", NPY_I4, 2),
            *sl = golden_load(c, "swa_lens", NPY_I4, 1),
            *out_ref = golden_load(c, "out_ref", NPY_F4, 3),
            *lse_ref = golden_load(c, "lse_ref", NPY_F4, 2);
  npy_array *ec = golden_load_opt(c, "extra_cache", NPY_U1, 2, 1),
            *ei = golden_load_opt(c, "extra_indices", NPY_I4, 2, 1),
            *el = golden_load_opt(c, "extra_lens", NPY_I4, 1, 1),
            *sink = golden_load_opt(c, "attn_sink", NPY_F4, 1, 1);
  int64_t bs, stride;
  double scale;
  if (c->failed || golden_meta_i64(c, "block_size", &bs) ||
      golden_meta_i64(c, "block_stride_bytes", &stride) ||
      golden_meta_f64(c, "softmax_scale", &scale))
    return -1;
  if ((ec != NULL) != (ei != NULL) || (ei != NULL) != (el != NULL))
    return golden_fail(c, "extra_cache, extra_indices and extra_lens come together");
  const int64_t t = qa->shape[0], h = qa->shape[1];
  if (h != out_ref->shape[1] || t != out_ref->shape[0])
    return golden_fail(c, "out_ref shape does not match q");
  /* Both caches share the case's block size and stride (meta.txt). */
  case_mla_decode dc = {.has1 = 1, .has2 = ei != NULL, .t = t, .h = h, .scale = (float)scale,
                        .q = qa->data, .sink = sink ? sink->data : NULL};
  dc.s1 = (case_mla_set){.nb = sc->shape[0], .stride = stride, .k = si->shape[1],
                         .bs = (int32_t)bs, .cache = sc->data, .idx = si->data, .lens = sl->data};
  if (ei)
    dc.s2 = (case_mla_set){.nb = ec->shape[0], .stride = stride, .k = ei->shape[1],
                           .bs = (int32_t)bs, .cache = ec->data, .idx = ei->data,
                           .lens = el->data};
  if (golden_shapes_agree(
          c,
          qa->shape[2] == 512 && si->shape[0] == t && sl->shape[0] == t &&
              sc->nbytes == (size_t)sc->shape[0] * (size_t)stride &&
              (!ei || (ei->shape[0] == t && el->shape[0] == t &&
                       ec->nbytes == (size_t)ec->shape[0] * (size_t)stride)) &&
              (!sink || sink->shape[0] == h) && out_ref->shape[2] == 512 &&
              lse_ref->shape[0] == t && lse_ref->shape[1] == h,
          "q [T, H, 512], indices [T, K], lens [T], caches [blocks, block_stride_bytes], "
          "attn_sink [H], out_ref [T, H, 512], lse_ref [T, H]"))
    return -1;
  double *wo = widen(out_ref), *wl = widen(lse_ref);
  const case_attn_want want = {wo, wl};
  /* Not zeros: every output byte must be written. */
  int rc = !wo || !wl ? golden_fail(c, "out of memory")
                      : golden_run_case(c, &case_mla_decode_ops, &dc, 0xEE, &want);
  if (!rc) {
    dc.two = 1;
    rc = golden_run_case(c, &case_mla_decode_ops, &dc, 0xEE, &want);
  }
  free(wo), free(wl);
  return rc;
}

const golden_op golden_ops_sparse_mla[] = {
    {"sparse_mla_decode", run_sparse_mla_decode},
    {NULL, NULL},
};
