/* The MTP RMSNorms (include/dsacl/mtp_norm.h). Kernel: cl/mtp_norm.cl. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "dsacl/mtp_norm.h"

#define BAD(...) dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, __VA_ARGS__)

/* Kernel geometry: one group of 128 work-items per row (the reduction order
 * of the header is defined over 128 lanes). */
#define MTP_LANES 128
#define MTP_MAX_H (1 << 24)
const char dsa__defines_mtp_norm[] = DSA_KDEF(MTP_LANES);

/* One table for both operators (named after the first). A group is four
 * 32-wide rows: their sums come from sub-group shuffles where the device
 * has them (build-time variants of the one kernel, same bytes), through
 * local memory elsewhere. */
static const char *refuse_wg(const dsa_context *c, const void *shape, char *buf, size_t n) {
  (void)shape;
  if (c->caps.max_wg >= MTP_LANES) return NULL;
  snprintf(buf, n, "needs work-groups of %d, the device allows %zu", MTP_LANES, c->caps.max_wg);
  return buf;
}
static const char *refuse_wg_sg32(const dsa_context *c, const void *shape, char *buf, size_t n) {
  const char *r = refuse_wg(c, shape, buf, n);
  return r ? r : dsa__refuse_no_sg32(c, shape, buf, n);
}
DSA_VARIANT_TABLE(dsa__variants_mtp_norm, "dsa_mtp_input_rmsnorm",
                  {"nv-shfl", DSA_CAP_NV_PTX, refuse_wg, NULL},
                  {"amd-bperm", DSA_CAP_AMD_BUILTINS, refuse_wg, NULL},
                  {"intel-sg32", DSA_CAP_INTEL_SUBGROUPS, refuse_wg_sg32, NULL},
                  {"portable", 0, refuse_wg, NULL});

void dsa_mtp_params_default(dsa_mtp_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->eps = 1e-6f;
}

/* t has dtype a or b (then checked like any tensor). */
static dsa_status check_tensor2(const dsa_tensor *t, const char *op, const char *arg, dsa_dtype a,
                                dsa_dtype b, int ndim) {
  if (t && t->dtype != a && t->dtype != b)
    return BAD("%s: %s has dtype %s, expected %s or %s", op, arg, dsa_dtype_name(t->dtype),
               dsa_dtype_name(a), dsa_dtype_name(b));
  return dsa__check_tensor(t, op, arg, t ? t->dtype : a, ndim);
}

/* A bf16 row tensor of rank nd: shape[0] = T (when T >= 0), shape[nd-1] = H
 * (when H >= 0), unit inner stride. */
static dsa_status check_rows(const dsa_tensor *t, const char *op, const char *arg, int nd,
                             int64_t T, int64_t H) {
  DSA_CHECK(dsa__check_tensor(t, op, arg, DSA_BF16, nd));
  if (T >= 0) DSA_CHECK(dsa__check_dim(t, op, arg, 0, T));
  if (H >= 0) DSA_CHECK(dsa__check_dim(t, op, arg, nd - 1, H));
  return dsa__check_unit_inner(t, op, arg);
}

static dsa_status check_weight(const dsa_tensor *w, const char *op, const char *arg, int64_t H) {
  DSA_CHECK(check_tensor2(w, op, arg, DSA_BF16, DSA_F32, 1));
  DSA_CHECK(dsa__check_dim(w, op, arg, 0, H));
  return dsa__check_unit_inner(w, op, arg);
}

static dsa_status check_params(const dsa_mtp_params *p, const char *op) {
  if (!(isfinite(p->eps) && p->eps >= FLT_MIN))
    return BAD("%s: p->eps = %g must be finite and >= FLT_MIN", op, (double)p->eps);
  return DSA_OK;
}

static dsa_status check_h(int64_t H, const char *op, const char *arg) {
  if (H < 1 || H > MTP_MAX_H)
    return BAD("%s: %s has hidden size %lld; it must be in [1, 2^24]", op, arg, (long long)H);
  return DSA_OK;
}

/* The one launch of both operators (pos / xh / wh / oh NULL: no enorm mask,
 * HC = 0). */
static dsa_status launch(dsa_queue *q, const dsa_tensor *xe, const dsa_tensor *pos,
                         const dsa_tensor *xh, const dsa_tensor *we, const dsa_tensor *wh,
                         const dsa_tensor *oe, const dsa_tensor *oh, int64_t T, int64_t HC,
                         int64_t H, float eps, const dsa_events *ev) {
  if (T == 0) return dsa__launch_nothing(q, ev);
  if (dsa__pick(q, &dsa__variants_mtp_norm, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_MTP_NORM, "mtp_rmsnorm", &kern));
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_tensor(&a, xe, 2);
  dsa__karg_tensor(&a, pos, 1);
  dsa__karg_i32(&a, pos && pos->dtype == DSA_I64);
  dsa__karg_i32(&a, pos != NULL);
  dsa__karg_tensor(&a, xh, 3);
  dsa__karg_tensor(&a, we, 1);
  dsa__karg_i32(&a, we->dtype == DSA_F32);
  dsa__karg_tensor(&a, wh, 1);
  dsa__karg_i32(&a, wh && wh->dtype == DSA_F32);
  dsa__karg_tensor(&a, oe, 2);
  dsa__karg_tensor(&a, oh, 3);
  dsa__karg_i32(&a, (cl_int)H);
  dsa__karg_i32(&a, (cl_int)HC);
  dsa__karg_f32(&a, eps);
  const uint64_t rows = (uint64_t)T * (uint64_t)(HC + 1);
  const size_t global[2] = {MTP_LANES, (size_t)rows}, local[2] = {MTP_LANES, 1};
  return dsa__launch_args(q, kern, "mtp_rmsnorm", &a, 2, global, local, ev);
}

dsa_status dsa_mtp_input_rmsnorm(dsa_queue *q, const dsa_tensor *inputs_embeds,
                                 const dsa_tensor *positions, const dsa_tensor *previous_hidden,
                                 const dsa_tensor *enorm_weight, const dsa_tensor *hnorm_weight,
                                 const dsa_tensor *enorm_out, const dsa_tensor *hnorm_out,
                                 const dsa_mtp_params *p, const dsa_events *ev) {
  static const char op[] = "dsa_mtp_input_rmsnorm";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  dsa_mtp_params defp;
  if (!p) {
    dsa_mtp_params_default(&defp);
    p = &defp;
  }
  DSA_CHECK(check_params(p, op));
  DSA_CHECK(check_rows(inputs_embeds, op, "inputs_embeds", 2, -1, -1));
  const int64_t T = inputs_embeds->shape[0], H = inputs_embeds->shape[1];
  DSA_CHECK(check_h(H, op, "inputs_embeds"));
  DSA_CHECK(check_tensor2(positions, op, "positions", DSA_I64, DSA_I32, 1));
  DSA_CHECK(dsa__check_dim(positions, op, "positions", 0, T));
  DSA_CHECK(check_rows(previous_hidden, op, "previous_hidden", 3, T, H));
  const int64_t HC = previous_hidden->shape[1];
  DSA_CHECK(check_weight(enorm_weight, op, "enorm_weight", H));
  DSA_CHECK(check_weight(hnorm_weight, op, "hnorm_weight", H));
  DSA_CHECK(check_rows(enorm_out, op, "enorm_out", 2, T, H));
  DSA_CHECK(check_rows(hnorm_out, op, "hnorm_out", 3, T, H));
  DSA_CHECK(dsa__check_dim(hnorm_out, op, "hnorm_out", 1, HC));
  uint64_t rows;
  if (__builtin_mul_overflow((uint64_t)T, (uint64_t)HC + 1u, &rows) ||
      rows >= ((uint64_t)1 << 31))
    return BAD("%s: previous_hidden has %lld tokens x %lld rows; T * (HC + 1) must be < 2^31",
               op, (long long)T, (long long)HC);
  return launch(q, inputs_embeds, positions, previous_hidden, enorm_weight, hnorm_weight,
                enorm_out, hnorm_out, T, HC, H, p->eps, ev);
}

dsa_status dsa_mtp_shared_head_rmsnorm(dsa_queue *q, const dsa_tensor *x,
                                       const dsa_tensor *weight, const dsa_tensor *out,
                                       const dsa_mtp_params *p, const dsa_events *ev) {
  static const char op[] = "dsa_mtp_shared_head_rmsnorm";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  dsa_mtp_params defp;
  if (!p) {
    dsa_mtp_params_default(&defp);
    p = &defp;
  }
  DSA_CHECK(check_params(p, op));
  DSA_CHECK(check_rows(x, op, "x", 2, -1, -1));
  const int64_t T = x->shape[0], H = x->shape[1];
  DSA_CHECK(check_h(H, op, "x"));
  DSA_CHECK(check_weight(weight, op, "weight", H));
  DSA_CHECK(check_rows(out, op, "out", 2, T, H));
  if (T >= ((int64_t)1 << 31))
    return BAD("%s: x has %lld tokens; T must be < 2^31", op, (long long)T);
  return launch(q, x, NULL, NULL, weight, NULL, out, NULL, T, 0, H, p->eps, ev);
}
