/* Golden runners for the indexer quantization family: indexer_q_fp8,
 * indexer_q_mxfp4 (meta e2m1 = rne | legacy), indexer_k_cache_fp8. */
#include "golden.h"

#include <string.h>

/* Q quant, FP8 (mxfp4 = 0) or MXFP4: the golden's arrays in the shared case
 * description (tools/cases/indexer_quant.c), its call and its rule (every
 * output byte). */
static int run_q(gcase *c, int mxfp4) {
  npy_array *pos = golden_load(c, "positions", NPY_I8, 1), *qa = golden_load(c, "q", NPY_U2, 3),
            *cs = golden_load(c, "cos_sin", NPY_F4, 2), *w = golden_load(c, "weights", NPY_U2, 2),
            *oq = golden_load(c, "out_q", NPY_U1, 3), *ow = golden_load(c, "out_weights", NPY_F4, 2);
  npy_array *osc = mxfp4 ? golden_load(c, "out_scales", NPY_U1, 3) : NULL;
  double ss, hs;
  if (c->failed || golden_meta_f64(c, "softmax_scale", &ss) ||
      golden_meta_f64(c, "head_scale", &hs))
    return -1;
  case_q_quant qc = {.mx = mxfp4, .w_bf16 = 1, .t = qa->shape[0], .h = qa->shape[1],
                     .d = qa->shape[2], .r = cs->shape[1], .np = cs->shape[0],
                     .softmax_scale = (float)ss, .head_scale = (float)hs, .pos = pos->data,
                     .q = qa->data, .cs = cs->data, .w = w->data};
  const int64_t th = qc.t * qc.h, qd = mxfp4 ? qc.d / 2 : qc.d;
  if (golden_shapes_agree(c,
                          pos->shape[0] == qc.t && (int64_t)w->count == th &&
                              (int64_t)oq->count == th * qd && (int64_t)ow->count == th &&
                              (!osc || (int64_t)osc->count == th * (qc.d / 32)),
                          "positions [T], weights [T, H], out_q, out_weights [T, H], "
                          "out_scales"))
    return -1;
  if (mxfp4) {
    const char *mode = golden_meta_str(c, "e2m1");
    if (!mode) return -1;
    if (!strcmp(mode, "rne"))
      qc.e2m1 = DSA_E2M1_RNE;
    else if (!strcmp(mode, "legacy"))
      qc.e2m1 = DSA_E2M1_LEGACY;
    else
      return golden_fail(c, "meta e2m1=%s is neither rne nor legacy", mode);
  }
  const case_q_quant_want want = {oq->data, osc ? osc->data : NULL, ow->data};
  return golden_run_case(c, &case_q_quant_ops, &qc, 0xEE, &want);
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
  if (nb < 0 || stride < 0 || cin->nbytes != (size_t)nb * (size_t)stride ||
      cout->nbytes != cin->nbytes)
    return golden_fail(c, "cache_in / cache_out are not num_blocks x block_stride_bytes");
  if (k->shape[1] != 128 || slots->shape[0] != k->shape[0])
    return golden_fail(c, "k is not [N, 128] or slot_mapping not [N]");
  case_k_insert kc = {.n = k->shape[0], .nb = nb, .stride = stride, .bs = (int32_t)bs,
                      .k = k->data, .slots = slots->data, .cache = cin->data};
  return golden_run_case(c, &case_k_insert_ops, &kc, 0, cout->data);
}

const golden_op golden_ops_indexer_quant[] = {
    {"indexer_q_fp8", run_indexer_q_fp8},
    {"indexer_q_mxfp4", run_indexer_q_mxfp4},
    {"indexer_k_cache_fp8", run_indexer_k_cache_fp8},
    {NULL, NULL},
};
