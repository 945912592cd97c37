/* Indexer top-k per row, prefill and decode forms. Kernel: cl/topk.cl
 * (one work-group per row, radix select + bitonic sort in local memory). */
#include <string.h>

#include "internal.h"

#define TOPK_MAX_WG 1024 /* cl/topk.cl's local arrays are sized for this */
#define TOPK_MIN_WG 64
#define TOPK_MAX_K DSA_TOPK_MAX_K
const char dsa__defines_topk[] = DSA_KDEF(TOPK_MAX_WG) DSA_KDEF(TOPK_MAX_K);

/* One kernel: a work-group per row (29.7 KiB of local memory at the
 * maximum k, inside OpenCL's guaranteed 32 KiB). */
DSA_VARIANT_TABLE(dsa__variants_topk_prefill, "dsa_topk_prefill", {"portable", 0, NULL, NULL});
DSA_VARIANT_TABLE(dsa__variants_topk_decode, "dsa_topk_decode", {"portable", 0, NULL, NULL});

enum { MODE_PREFILL = 0, MODE_LENS_1D = 1, MODE_LENS_2D = 2 };

void dsa_topk_params_default(dsa_topk_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
}

/* Items per row: about 32 candidates per item per pass for wide rows (fewer
 * rows then, so each needs more parallelism), never past what the kernel
 * and the device accept. */
static size_t pick_wg(dsa_queue *q, cl_kernel kern, int64_t n_cols) {
  size_t kmax = 0;
  if (clGetKernelWorkGroupInfo(kern, q->ctx->dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kmax, &kmax,
                               NULL) != CL_SUCCESS)
    kmax = TOPK_MIN_WG;
  size_t lim = TOPK_MAX_WG;
  if (q->ctx->caps.max_wg && q->ctx->caps.max_wg < lim) lim = q->ctx->caps.max_wg;
  if (kmax < lim) lim = kmax;
  size_t wg = TOPK_MIN_WG;
  while (wg * 2 <= lim && (int64_t)wg * 32 < n_cols) wg *= 2;
  return wg;
}

/* Shared by both forms: everything after the per-form range arguments are
 * validated. a/b: the range tensors (b NULL in decode). */
static dsa_status launch(dsa_queue *q, const char *op, const dsa_tensor *logits, int mode,
                         const dsa_tensor *a, const dsa_tensor *b, int32_t next_n,
                         const dsa_tensor *indices, int32_t k, const dsa_events *ev) {
  const int64_t rows = logits->shape[0];
  if (rows == 0) return dsa__launch_nothing(q, ev);
  if (dsa__pick(q, mode == MODE_PREFILL ? &dsa__variants_topk_prefill : &dsa__variants_topk_decode,
                NULL) < 0)
    return DSA_ERR_UNSUPPORTED;
  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_TOPK, "topk_per_row", &kern));
  const size_t wg = pick_wg(q, kern, logits->shape[1]);
  if (wg < TOPK_MIN_WG)
    return dsa__fail(DSA_ERR_UNSUPPORTED, 0, "%s: the device runs top-k groups of %zu items, "
                     "fewer than the %d the kernel needs", op, wg, TOPK_MIN_WG);

  dsa_kargs ka;
  dsa__kargs_init(&ka, q);
  dsa__karg_tensor(&ka, logits, 2);
  dsa__karg_i64(&ka, logits->shape[1]);
  dsa__karg_i32(&ka, mode);
  dsa__karg_tensor(&ka, a, 2); /* lengths: 1-D or 2-D */
  dsa__karg_tensor(&ka, b, 1);
  dsa__karg_i32(&ka, next_n);
  dsa__karg_tensor(&ka, indices, 2);
  dsa__karg_i32(&ka, k);
  dsa__karg_faults(&ka);
  const size_t global[1] = {(size_t)rows * wg}, local[1] = {wg};
  return dsa__launch_args(q, kern, "topk_per_row", &ka, 1, global, local, ev);
}

/* logits [rows, N] f32 and indices [rows, k] i32; returns k in *k_out. */
static dsa_status check_common(const char *op, const dsa_tensor *logits,
                               const dsa_tensor *indices, const dsa_topk_params *p,
                               int32_t *k_out) {
  DSA_CHECK(dsa__check_tensor(logits, op, "logits", DSA_F32, 2));
  DSA_CHECK(dsa__check_unit_inner(logits, op, "logits"));
  if (logits->shape[1] > INT32_MAX)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: logits shape[1] = %lld exceeds the i32 index range", op,
                     (long long)logits->shape[1]);
  if (logits->shape[0] > ((int64_t)1 << 31))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: logits shape[0] = %lld rows is too many",
                     op, (long long)logits->shape[0]);
  DSA_CHECK(dsa__check_tensor(indices, op, "indices", DSA_I32, 2));
  DSA_CHECK(dsa__check_dim(indices, op, "indices", 0, logits->shape[0]));
  int32_t k = p ? p->k : 0;
  if (k < 0 || k > DSA_TOPK_MAX_K)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: params k = %d must be in [0, %d]", op,
                     (int)k, DSA_TOPK_MAX_K);
  if (k == 0) {
    if (indices->shape[1] < 1 || indices->shape[1] > DSA_TOPK_MAX_K)
      return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                       "%s: indices shape[1] = %lld (= k) must be in [1, %d]", op,
                       (long long)indices->shape[1], DSA_TOPK_MAX_K);
    k = (int32_t)indices->shape[1];
  } else if (indices->shape[1] != k) {
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: indices shape[1] = %lld but params k = %d",
                     op, (long long)indices->shape[1], (int)k);
  }
  /* Outputs may not alias each other across rows: a zero stride would. */
  if (indices->shape[0] > 1 && indices->stride[0] == 0)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: indices stride[0] is 0", op);
  if (indices->shape[1] > 1 && indices->stride[1] == 0)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: indices stride[1] is 0", op);
  *k_out = k;
  return DSA_OK;
}

dsa_status dsa_topk_prefill(dsa_queue *q, const dsa_tensor *logits, const dsa_tensor *row_starts,
                            const dsa_tensor *row_ends, const dsa_tensor *indices,
                            const dsa_topk_params *p, const dsa_events *ev) {
  static const char op[] = "dsa_topk_prefill";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  int32_t k;
  DSA_CHECK(check_common(op, logits, indices, p, &k));
  DSA_CHECK(dsa__check_tensor(row_starts, op, "row_starts", DSA_I32, 1));
  DSA_CHECK(dsa__check_dim(row_starts, op, "row_starts", 0, logits->shape[0]));
  DSA_CHECK(dsa__check_tensor(row_ends, op, "row_ends", DSA_I32, 1));
  DSA_CHECK(dsa__check_dim(row_ends, op, "row_ends", 0, logits->shape[0]));
  if (p && p->next_n != 0 && p->next_n != 1)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: params next_n = %d has no meaning here (0 or 1)", op, (int)p->next_n);
  return launch(q, op, logits, MODE_PREFILL, row_starts, row_ends, 1, indices, k, ev);
}

dsa_status dsa_topk_decode(dsa_queue *q, const dsa_tensor *logits, const dsa_tensor *lengths,
                           const dsa_tensor *indices, const dsa_topk_params *p,
                           const dsa_events *ev) {
  static const char op[] = "dsa_topk_decode";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  int32_t k;
  DSA_CHECK(check_common(op, logits, indices, p, &k));
  if (!lengths) return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: lengths is NULL", op);
  const int rank = lengths->ndim;
  if (rank != 1 && rank != 2)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: lengths has rank %d, expected 1 ([B]) or 2 ([B, next_n])", op, rank);
  DSA_CHECK(dsa__check_tensor(lengths, op, "lengths", DSA_I32, rank));
  int32_t pn = p ? p->next_n : 0;
  int64_t next_n;
  if (rank == 1) {
    if (pn < 0)
      return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: params next_n = %d must be >= 0", op,
                       (int)pn);
    next_n = pn ? pn : 1;
  } else {
    next_n = lengths->shape[1];
    if (pn != 0 && pn != next_n)
      return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                       "%s: params next_n = %d but lengths shape[1] = %lld", op, (int)pn,
                       (long long)next_n);
    if (next_n < 1 || next_n > INT32_MAX)
      return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                       "%s: lengths shape[1] = %lld (next_n) must be >= 1", op,
                       (long long)next_n);
  }
  int64_t rows;
  if (__builtin_mul_overflow(lengths->shape[0], next_n, &rows) || rows != logits->shape[0])
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: lengths shape[0] = %lld times next_n = %lld must equal the logits "
                     "rows (%lld)",
                     op, (long long)lengths->shape[0], (long long)next_n,
                     (long long)logits->shape[0]);
  return launch(q, op, logits, rank == 1 ? MODE_LENS_1D : MODE_LENS_2D, lengths, NULL,
                (int32_t)next_n, indices, k, ev);
}
