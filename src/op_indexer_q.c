/* Indexer Q RoPE + FP8/MXFP4 quantization (SPEC-reference §4). Kernel:
 * cl/indexer_q.cl. */
#include <math.h>
#include <string.h>

#include "internal.h"

typedef cl_ulong u64;

#define BAD(...) dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, __VA_ARGS__)

void dsa_indexer_q_params_default(dsa_indexer_q_params *p) {
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

static int al16(u64 a) { return a % 16 == 0; }

dsa_status dsa_indexer_q_quant(dsa_queue *q, const dsa_tensor *positions,
                               const dsa_tensor *index_q, const dsa_tensor *cos_sin,
                               const dsa_tensor *weights, const dsa_indexer_q_params *p,
                               const dsa_tensor *out_q, const dsa_tensor *out_scales,
                               const dsa_tensor *out_weights, const dsa_events *ev) {
  static const char op[] = "dsa_indexer_q_quant";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  dsa_indexer_q_params prm;
  if (p)
    prm = *p;
  else
    dsa_indexer_q_params_default(&prm);
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

  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_INDEXER_Q, "indexer_q_quant", &kern));
  const size_t cs_es = dsa_dtype_size(cos_sin->dtype), w_es = dsa_dtype_size(weights->dtype);
  u64 pos_off = positions->offset, pos_st = (u64)positions->stride[0] * dsa_dtype_size(positions->dtype);
  cl_int pos_i32 = positions->dtype == DSA_I32;
  u64 q_off = index_q->offset, q_ts = (u64)index_q->stride[0] * 2, q_hs = (u64)index_q->stride[1] * 2;
  cl_int q_al = al16(q_off) && al16(q_ts) && al16(q_hs);
  u64 cs_off = cos_sin->offset, cs_rs = (u64)cos_sin->stride[0] * cs_es;
  cl_int cs_bf16 = cos_sin->dtype == DSA_BF16;
  /* Vector cos/sin loads need 16-byte aligned rows, halves and block starts. */
  cl_int cs_al = al16(cs_off) && al16(cs_rs) && al16((u64)(R / 2) * cs_es) &&
                 al16((u64)((D - R) / 2) * cs_es);
  cl_long n_pos = P;
  cl_int rr = (cl_int)R;
  u64 w_off = weights->offset, w_ts = (u64)weights->stride[0] * w_es,
      w_hs = (u64)weights->stride[1] * w_es;
  cl_int w_bf16 = weights->dtype == DSA_BF16;
  cl_float ss = prm.softmax_scale, hs = prm.head_scale;
  u64 oq_off = out_q->offset, oq_ts = (u64)out_q->stride[0], oq_hs = (u64)out_q->stride[1];
  cl_int oq_al = al16(oq_off) && al16(oq_ts) && al16(oq_hs);
  const dsa_tensor *osc = mxfp4 ? out_scales : out_q; /* unused for FP8 */
  u64 os_off = osc->offset, os_ts = (u64)osc->stride[0], os_hs = (u64)osc->stride[1];
  u64 ow_off = out_weights->offset, ow_ts = (u64)out_weights->stride[0] * 4,
      ow_hs = (u64)out_weights->stride[1] * 4;
  cl_uint np = (cl_uint)npairs, hh = (cl_uint)H;
  cl_int dd = (cl_int)D, hpg_i = (cl_int)hpg, mx = mxfp4, mode = prm.e2m1;
  /* Empty tensors may carry no buffer; any valid one stands in (never read). */
  cl_mem pos_m = R > 0 && positions->mem ? positions->mem : q->faults;
  cl_mem cs_m = cos_sin->mem && P > 0 && R > 0 ? cos_sin->mem : q->faults;
  const dsa_karg args[] = {
      DSA_KARG(pos_m),   DSA_KARG(pos_off), DSA_KARG(pos_st), DSA_KARG(pos_i32),
      DSA_KARG(index_q->mem), DSA_KARG(q_off), DSA_KARG(q_ts), DSA_KARG(q_hs), DSA_KARG(q_al),
      DSA_KARG(cs_m),    DSA_KARG(cs_off), DSA_KARG(cs_rs), DSA_KARG(cs_bf16), DSA_KARG(cs_al), DSA_KARG(n_pos),
      DSA_KARG(rr),
      DSA_KARG(weights->mem), DSA_KARG(w_off), DSA_KARG(w_ts), DSA_KARG(w_hs), DSA_KARG(w_bf16),
      DSA_KARG(ss),      DSA_KARG(hs),
      DSA_KARG(out_q->mem), DSA_KARG(oq_off), DSA_KARG(oq_ts), DSA_KARG(oq_hs), DSA_KARG(oq_al),
      DSA_KARG(osc->mem), DSA_KARG(os_off), DSA_KARG(os_ts), DSA_KARG(os_hs),
      DSA_KARG(out_weights->mem), DSA_KARG(ow_off), DSA_KARG(ow_ts), DSA_KARG(ow_hs),
      DSA_KARG(np),      DSA_KARG(hh), DSA_KARG(dd), DSA_KARG(hpg_i), DSA_KARG(mx), DSA_KARG(mode),
      DSA_KARG(q->faults), DSA_KLOCAL(local * sizeof(cl_uint))};
  return dsa__launch(q, kern, "indexer_q_quant", (int)(sizeof args / sizeof args[0]), args, 1,
                     &global, &local, ev);
}
