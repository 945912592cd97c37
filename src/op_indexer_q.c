/* Indexer Q RoPE + FP8/MXFP4 quantization (SPEC-reference §4). Kernel:
 * cl/indexer_q.cl. */
#include <math.h>
#include <string.h>

#include "internal.h"

#define BAD(...) dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, __VA_ARGS__)

void dsa_indexer_q_quant_params_default(dsa_indexer_q_quant_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->softmax_scale = (float)0.08838834764831845; /* 128^-0.5 */
  p->head_scale = 0.125f;                        /* 64^-0.5 */
  p->e2m1 = DSA_E2M1_RNE;
}

/* t has dtype a or b (then checked like any tensor). */
static dsa_status check_tensor2(const dsa_tensor *t, const char *op, const char *arg, dsa_dtype a,
                                dsa_dtype b, int ndim) {
  if (t && t->dtype != a && t->dtype != b)
    return BAD("%s: %s has dtype %s, expected %s or %s", op, arg, dsa_dtype_name(t->dtype),
               dsa_dtype_name(a), dsa_dtype_name(b));
  return dsa__check_tensor(t, op, arg, t ? t->dtype : a, ndim);
}

/* One kernel; on NVIDIA (sm_80+) the RoPE pair rounds by cvt.rn.bf16x2 and
 * (sm_89+) the e4m3 encode by cvt.rn.satfinite.e4m3x2: a build-time variant
 * with the same bytes. */
DSA_VARIANT_TABLE(dsa__variants_indexer_q_quant, "dsa_indexer_q_quant",
                  {"nv-cvt", DSA_CAP_NV_PTX, NULL, NULL}, {"portable", 0, NULL, NULL});

dsa_status dsa_indexer_q_quant(dsa_queue *q, const dsa_tensor *positions,
                               const dsa_tensor *index_q, const dsa_tensor *cos_sin,
                               const dsa_tensor *weights, const dsa_tensor *out_q,
                               const dsa_tensor *out_scales, const dsa_tensor *out_weights,
                               const dsa_indexer_q_quant_params *p, const dsa_events *ev) {
  static const char op[] = "dsa_indexer_q_quant";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  dsa_indexer_q_quant_params prm;
  if (p)
    prm = *p;
  else
    dsa_indexer_q_quant_params_default(&prm);
  if (!isfinite(prm.softmax_scale))
    return BAD("%s: p->softmax_scale = %g must be finite", op, (double)prm.softmax_scale);
  if (!isfinite(prm.head_scale))
    return BAD("%s: p->head_scale = %g must be finite", op, (double)prm.head_scale);
  if (prm.e2m1 != DSA_E2M1_RNE && prm.e2m1 != DSA_E2M1_LEGACY)
    return BAD("%s: p->e2m1 = %d is not a dsa_e2m1_mode", op, (int)prm.e2m1);

  DSA_CHECK(dsa__check_tensor(index_q, op, "index_q", DSA_BF16, 3));
  DSA_CHECK(dsa__check_unit_inner(index_q, op, "index_q"));
  const int64_t T = index_q->shape[0], H = index_q->shape[1], D = index_q->shape[2];
  if (H < 1) return BAD("%s: index_q shape[1] (heads) = %lld must be >= 1", op, (long long)H);
  if (D < 32 || D % 32 != 0 || D > 4096)
    return BAD("%s: index_q shape[2] (head dim) = %lld must be a multiple of 32 in [32, 4096]", op,
               (long long)D);
  int64_t TH;
  if (__builtin_mul_overflow(T, H, &TH) || TH >= ((int64_t)1 << 31))
    return BAD("%s: index_q has %lld x %lld heads, more than 2^31 - 1", op, (long long)T,
               (long long)H);
  DSA_CHECK(check_tensor2(positions, op, "positions", DSA_I64, DSA_I32, 1));
  DSA_CHECK(dsa__check_dim(positions, op, "positions", 0, T));
  DSA_CHECK(check_tensor2(cos_sin, op, "cos_sin", DSA_F32, DSA_BF16, 2));
  DSA_CHECK(dsa__check_unit_inner(cos_sin, op, "cos_sin"));
  const int64_t P = cos_sin->shape[0], R = cos_sin->shape[1];
  if (R % 2 != 0 || R > D)
    return BAD("%s: cos_sin shape[1] (rope dim) = %lld must be even and <= the head dim %lld", op,
               (long long)R, (long long)D);
  DSA_CHECK(check_tensor2(weights, op, "weights", DSA_BF16, DSA_F32, 2));
  DSA_CHECK(dsa__check_dim(weights, op, "weights", 0, T));
  DSA_CHECK(dsa__check_dim(weights, op, "weights", 1, H));

  DSA_CHECK(check_tensor2(out_q, op, "out_q", DSA_E4M3, DSA_E2M1X2, 3));
  const int mxfp4 = out_q->dtype == DSA_E2M1X2;
  DSA_CHECK(dsa__check_dim(out_q, op, "out_q", 0, T));
  DSA_CHECK(dsa__check_dim(out_q, op, "out_q", 1, H));
  DSA_CHECK(dsa__check_dim(out_q, op, "out_q", 2, mxfp4 ? D / 2 : D));
  DSA_CHECK(dsa__check_unit_inner(out_q, op, "out_q"));
  if (mxfp4) {
    if (!out_scales)
      return BAD("%s: out_scales is NULL but out_q is e2m1x2 (MXFP4 needs [T, H, D/32] ue8m0)", op);
    DSA_CHECK(dsa__check_tensor(out_scales, op, "out_scales", DSA_UE8M0, 3));
    DSA_CHECK(dsa__check_dim(out_scales, op, "out_scales", 0, T));
    DSA_CHECK(dsa__check_dim(out_scales, op, "out_scales", 1, H));
    DSA_CHECK(dsa__check_dim(out_scales, op, "out_scales", 2, D / 32));
    DSA_CHECK(dsa__check_unit_inner(out_scales, op, "out_scales"));
  } else if (out_scales) {
    return BAD("%s: out_scales must be NULL for FP8 output (the q scale is folded into "
               "out_weights)", op);
  }
  DSA_CHECK(dsa__check_tensor(out_weights, op, "out_weights", DSA_F32, 2));
  DSA_CHECK(dsa__check_dim(out_weights, op, "out_weights", 0, T));
  DSA_CHECK(dsa__check_dim(out_weights, op, "out_weights", 1, H));

  if (T == 0) return dsa__launch_nothing(q, ev);

  /* Geometry: ipd items per head, hpg heads per group (about 256 items). */
  const size_t ipd = (size_t)(D / 32);
  size_t lim = 256;
  if (q->ctx->caps.max_wg && q->ctx->caps.max_wg < lim) lim = q->ctx->caps.max_wg;
  if (ipd > lim)
    return dsa__fail(DSA_ERR_UNSUPPORTED, 0,
                     "%s: head dim %lld needs %zu work-items per head, the device allows %zu", op,
                     (long long)D, ipd, lim);
  size_t hpg = lim / ipd;
  const uint64_t npairs = (uint64_t)(T * H);
  if (hpg > npairs) hpg = (size_t)npairs;
  const size_t local = hpg * ipd, groups = (size_t)((npairs + hpg - 1) / hpg);
  const size_t global = groups * local;

  if (dsa__pick(q, &dsa__variants_indexer_q_quant, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_INDEXER_Q, "indexer_q_quant", &kern));
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_tensor(&a, positions, 1);
  dsa__karg_i32(&a, positions->dtype == DSA_I32);
  dsa__karg_tensor(&a, index_q, 3);
  dsa__karg_tensor(&a, cos_sin, 2);
  dsa__karg_i32(&a, cos_sin->dtype == DSA_BF16);
  dsa__karg_i64(&a, P);
  dsa__karg_i32(&a, (cl_int)R);
  dsa__karg_tensor(&a, weights, 2);
  dsa__karg_i32(&a, weights->dtype == DSA_BF16);
  dsa__karg_f32(&a, prm.softmax_scale);
  dsa__karg_f32(&a, prm.head_scale);
  dsa__karg_tensor(&a, out_q, 3);
  dsa__karg_tensor(&a, mxfp4 ? out_scales : NULL, 3); /* FP8: none */
  dsa__karg_tensor(&a, out_weights, 2);
  dsa__karg_u32(&a, (cl_uint)npairs);
  dsa__karg_u32(&a, (cl_uint)H);
  dsa__karg_i32(&a, (cl_int)D);
  dsa__karg_i32(&a, (cl_int)hpg);
  dsa__karg_i32(&a, mxfp4);
  dsa__karg_i32(&a, prm.e2m1);
  dsa__karg_faults(&a);
  dsa__karg_local(&a, local * sizeof(cl_uint));
  return dsa__launch_args(q, kern, "indexer_q_quant", &a, 1, &global, &local, ev);
}
