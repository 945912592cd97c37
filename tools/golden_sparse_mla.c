/* Golden runner for sparse MLA attention: sparse_mla_decode, run with both
 * strategies (fused and two-stage) and compared with the fp64 reference
 * within SPEC.md's tolerance: max |d| <= 1e-2 * max(1, |ref|) elementwise,
 * relative L2 <= 4e-3, lse within 1e-4 absolute (-inf where the reference
 * has -inf). */
#include "golden.h"

#include <dsacl/dsacl.h>
#include <dsacl/sparse_mla.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The two-stage decode's workspace: bytes [off, off + n) of m as a u8 tensor. */
#define WS_BYTES(m, off, n)                                                        \
  (&(dsa_tensor){.mem = (m), .offset = (off), .dtype = DSA_U8, .ndim = 1,          \
                 .shape = {(int64_t)(n)}, .stride = {1}})

static void *read_buf(gcase *c, cl_mem m, size_t n) {
  void *h = malloc(n ? n : 1);
  if (!h) return golden_fail(c, "out of memory"), NULL;
  cl_int err = n ? clEnqueueReadBuffer(dsa_queue_cl(c->q), m, CL_TRUE, 0, n, h, 0, NULL, NULL)
                 : CL_SUCCESS;
  if (err != CL_SUCCESS) {
    free(h);
    return golden_fail(c, "clEnqueueReadBuffer: error %d", (int)err), NULL;
  }
  return h;
}

static double bf16_val(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* out (bf16 on the device) vs out_ref (f32), lse vs lse_ref. */
static int compare_attn(gcase *c, const char *what, cl_mem out, const npy_array *ref,
                        cl_mem lse, const npy_array *lse_ref) {
  uint16_t *got = read_buf(c, out, ref->count * 2);
  float *gl = got ? read_buf(c, lse, lse_ref->nbytes) : NULL;
  if (!got || !gl) return free(got), -1;
  const float *w = ref->data, *wl = lse_ref->data;
  size_t bad = 0, first = 0;
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < ref->count; i++) {
    double g = bf16_val(got[i]), x = w[i], d = fabs(g - x);
    if (!(d <= 1e-2 * fmax(1.0, fabs(x))) && !bad++) first = i;
    d2 += (g - x) * (g - x), r2 += x * x;
  }
  double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
  size_t lbad = 0, lfirst = 0;
  for (size_t i = 0; i < lse_ref->count; i++) {
    double g = gl[i], x = wl[i];
    int ok = isinf(x) ? (isinf(g) && (g < 0) == (x < 0)) : fabs(g - x) <= 1e-4;
    if (!ok && !lbad++) lfirst = i;
  }
  int rc = 0;
  if (bad)
    rc = golden_fail(c, "%s: out: %zu elements beyond 1e-2*max(1,|ref|), first at %zu: got %.6g "
                        "want %.6g",
                     what, bad, first, bf16_val(got[first]), (double)w[first]);
  else if (!(rel <= 4e-3))
    rc = golden_fail(c, "%s: out: relative L2 error %.3g > 4e-3", what, rel);
  else if (lbad)
    rc = golden_fail(c, "%s: lse: %zu values off by > 1e-4, first at %zu: got %.9g want %.9g",
                     what, lbad, lfirst, (double)gl[lfirst], (double)wl[lfirst]);
  free(got);
  free(gl);
  return rc;
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
  cl_mem qm = golden_to_device(c, qa->data, qa->nbytes),
         scm = golden_to_device(c, sc->data, sc->nbytes),
         sim = golden_to_device(c, si->data, si->nbytes),
         slm = golden_to_device(c, sl->data, sl->nbytes),
         ecm = ec ? golden_to_device(c, ec->data, ec->nbytes) : NULL,
         eim = ei ? golden_to_device(c, ei->data, ei->nbytes) : NULL,
         elm = el ? golden_to_device(c, el->data, el->nbytes) : NULL,
         skm = sink ? golden_to_device(c, sink->data, sink->nbytes) : NULL,
         /* Not zeros: every output byte must be written. */
         o1 = golden_filled(c, out_ref->count * 2, 0xEE), o2 = golden_filled(c, out_ref->count * 2, 0xEE),
         l1 = golden_filled(c, lse_ref->nbytes, 0xEE), l2 = golden_filled(c, lse_ref->nbytes, 0xEE);
  const size_t wsz = dsa_sparse_mla_decode_workspace_size(t, si->shape[1], ei ? ei->shape[1] : 0);
  cl_mem ws = golden_filled(c, wsz, 0xEE);
  if (c->failed) return -1;
  /* Both caches share the case's block size and stride (meta.txt). */
  dsa_paged_cache swa = {.mem = scm, .offset = 0, .num_blocks = sc->shape[0],
                         .block_size = (int32_t)bs, .block_stride = stride,
                         .format = DSA_CACHE_MLA_FP8};
  dsa_paged_cache ext = {.mem = ecm, .offset = 0, .num_blocks = ec ? ec->shape[0] : 0,
                         .block_size = (int32_t)bs, .block_stride = stride,
                         .format = DSA_CACHE_MLA_FP8};
  dsa_tensor qt = golden_tensor_of(qm, qa, DSA_BF16), sit = golden_tensor_of(sim, si, DSA_I32),
             slt = golden_tensor_of(slm, sl, DSA_I32);
  dsa_tensor eit, elt, skt;
  if (ei) eit = golden_tensor_of(eim, ei, DSA_I32), elt = golden_tensor_of(elm, el, DSA_I32);
  if (sink) skt = golden_tensor_of(skm, sink, DSA_F32);
  dsa_tensor o1t = dsa_tensor_make(o1, 0, DSA_BF16, 3, out_ref->shape),
             o2t = dsa_tensor_make(o2, 0, DSA_BF16, 3, out_ref->shape),
             l1t = dsa_tensor_make(l1, 0, DSA_F32, 2, lse_ref->shape),
             l2t = dsa_tensor_make(l2, 0, DSA_F32, 2, lse_ref->shape);
  dsa_sparse_index_set main_set = {&swa, &sit, &slt}, extra_set = {&ext, &eit, &elt};
  dsa_sparse_params p;
  dsa_sparse_params_default(&p);
  p.softmax_scale = (float)scale;
  if (h != out_ref->shape[1] || t != out_ref->shape[0])
    return golden_fail(c, "out_ref shape does not match q");
  if (golden_op_status(c, "dsa_sparse_mla_decode",
                       dsa_sparse_mla_decode(c->q, &qt, &main_set, ei ? &extra_set : NULL,
                                             sink ? &skt : NULL, &o1t, &l1t, &p, NULL)) ||
      golden_no_faults(c) || compare_attn(c, "fused", o1, out_ref, l1, lse_ref))
    return -1;
  if (golden_op_status(c, "dsa_sparse_mla_decode_two_stage",
                       dsa_sparse_mla_decode_two_stage(c->q, &qt, &main_set,
                                                       ei ? &extra_set : NULL, sink ? &skt : NULL,
                                                       &o2t, &l2t, WS_BYTES(ws, 0, wsz), &p, NULL)) ||
      golden_no_faults(c) || compare_attn(c, "two-stage", o2, out_ref, l2, lse_ref))
    return -1;
  return 0;
}

const golden_op golden_ops_sparse_mla[] = {
    {"sparse_mla_decode", run_sparse_mla_decode},
    {NULL, NULL},
};
