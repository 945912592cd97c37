/* Golden runners for the indexer quantization family: indexer_q_fp8,
 * indexer_q_mxfp4 (meta e2m1 = rne | legacy), indexer_k_cache_fp8. */
#include "golden.h"

#include <string.h>

/* Q quant, FP8 (mxfp4 = 0) or MXFP4. */
static int run_q(gcase *c, int mxfp4) {
  npy_array *pos = golden_load(c, "positions", NPY_I8, 1), *qa = golden_load(c, "q", NPY_U2, 3),
            *cs = golden_load(c, "cos_sin", NPY_F4, 2), *w = golden_load(c, "weights", NPY_U2, 2),
            *oq = golden_load(c, "out_q", NPY_U1, 3), *ow = golden_load(c, "out_weights", NPY_F4, 2);
  npy_array *osc = mxfp4 ? golden_load(c, "out_scales", NPY_U1, 3) : NULL;
  double ss, hs;
  if (c->failed || golden_meta_f64(c, "softmax_scale", &ss) ||
      golden_meta_f64(c, "head_scale", &hs))
    return -1;
  dsa_indexer_q_quant_params p;
  dsa_indexer_q_quant_params_default(&p);
  p.softmax_scale = (float)ss;
  p.head_scale = (float)hs;
  if (mxfp4) {
    const char *mode = golden_meta_str(c, "e2m1");
    if (!mode) return -1;
    if (!strcmp(mode, "rne"))
      p.e2m1 = DSA_E2M1_RNE;
    else if (!strcmp(mode, "legacy"))
      p.e2m1 = DSA_E2M1_LEGACY;
    else
      return golden_fail(c, "meta e2m1=%s is neither rne nor legacy", mode);
  }
  cl_mem pm = golden_to_device(c, pos->data, pos->nbytes),
         qm = golden_to_device(c, qa->data, qa->nbytes),
         cm = golden_to_device(c, cs->data, cs->nbytes),
         wm = golden_to_device(c, w->data, w->nbytes),
         oqm = golden_filled(c, oq->nbytes, 0xEE), owm = golden_filled(c, ow->nbytes, 0xEE),
         osm = mxfp4 ? golden_filled(c, osc->nbytes, 0xEE) : NULL;
  if (c->failed) return -1;
  dsa_tensor pt = golden_tensor_of(pm, pos, DSA_I64), qt = golden_tensor_of(qm, qa, DSA_BF16),
             ct = golden_tensor_of(cm, cs, DSA_F32), wt = golden_tensor_of(wm, w, DSA_BF16),
             oqt = golden_tensor_of(oqm, oq, mxfp4 ? DSA_E2M1X2 : DSA_E4M3),
             owt = golden_tensor_of(owm, ow, DSA_F32),
             ost = mxfp4 ? golden_tensor_of(osm, osc, DSA_UE8M0) : owt;
  if (golden_op_status(c, "dsa_indexer_q_quant",
                       dsa_indexer_q_quant(c->q, &pt, &qt, &ct, &wt, &oqt, mxfp4 ? &ost : NULL,
                                           &owt, &p, NULL)))
    return -1;
  if (golden_no_faults(c) || golden_compare(c, "out_q", oqm, oq) ||
      golden_compare(c, "out_weights", owm, ow))
    return -1;
  return mxfp4 && golden_compare(c, "out_scales", osm, osc) ? -1 : 0;
}

static int run_indexer_q_fp8(gcase *c) { return run_q(c, 0); }
static int run_indexer_q_mxfp4(gcase *c) { return run_q(c, 1); }

static int run_indexer_k_cache_fp8(gcase *c) {
  npy_array *k = golden_load(c, "k", NPY_U2, 2), *slots = golden_load(c, "slot_mapping", NPY_I8, 1),
            *cin = golden_load(c, "cache_in", NPY_U1, 2),
            *cout = golden_load(c, "cache_out", NPY_U1, 2);
  int64_t nb, bs, stride;
  if (c->failed || golden_meta_i64(c, "num_blocks", &nb) || golden_meta_i64(c, "block_size", &bs) ||
      golden_meta_i64(c, "block_stride_bytes", &stride))
    return -1;
  cl_mem km = golden_to_device(c, k->data, k->nbytes),
         sm = golden_to_device(c, slots->data, slots->nbytes),
         cm = golden_to_device(c, cin->data, cin->nbytes);
  if (c->failed) return -1;
  dsa_paged_cache pc = {.mem = cm, .offset = 0, .num_blocks = nb, .block_size = (int32_t)bs,
                        .block_stride = stride, .format = DSA_CACHE_INDEXER_FP8};
  dsa_tensor kt = golden_tensor_of(km, k, DSA_BF16), st = golden_tensor_of(sm, slots, DSA_I64);
  if (golden_op_status(c, "dsa_indexer_k_insert",
                       dsa_indexer_k_insert(c->q, &kt, &st, &pc, NULL, NULL)))
    return -1;
  return golden_no_faults(c) || golden_compare(c, "cache_out", cm, cout) ? -1 : 0;
}

const golden_op golden_ops_indexer_quant[] = {
    {"indexer_q_fp8", run_indexer_q_fp8},
    {"indexer_q_mxfp4", run_indexer_q_mxfp4},
    {"indexer_k_cache_fp8", run_indexer_k_cache_fp8},
    {NULL, NULL},
};
