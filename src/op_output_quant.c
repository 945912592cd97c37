/* Inverse RoPE + block-scaled FP8 quantization of the attention output
 * (§8.6). Kernel: cl/output_quant.cl. */
#include <string.h>

#include "internal.h"
#include "dsacl/output_quant.h"

#define OQ_DIM 512
#define OQ_ROPE 64
/* Kernel geometry: 32 lanes per (token, head) row, 8 rows per group. */
#define OQ_LANES 32
#define OQ_ROWS 8
const char dsa__defines_output_quant[] = DSA_KDEF(OQ_LANES) DSA_KDEF(OQ_ROWS);

DSA_VARIANT_TABLE(dsa__variants_output_quant, "dsa_output_inv_rope_fp8_quant",
                  {"portable", 0, NULL, NULL});

void dsa_output_inv_rope_fp8_quant_params_default(dsa_output_inv_rope_fp8_quant_params *p) {
  if (p) memset(p, 0, sizeof *p);
}

dsa_status dsa_output_inv_rope_fp8_quant(dsa_queue *q, const dsa_tensor *o,
                                         const dsa_tensor *positions, const dsa_tensor *cos_sin,
                                         const dsa_tensor *out, const dsa_tensor *scales,
                                         const dsa_output_inv_rope_fp8_quant_params *p,
                                         const dsa_events *ev) {
  static const char op[] = "dsa_output_inv_rope_fp8_quant";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  DSA_CHECK(dsa__check_tensor(o, op, "o", DSA_BF16, 3));
  DSA_CHECK(dsa__check_dim(o, op, "o", 2, OQ_DIM));
  DSA_CHECK(dsa__check_unit_inner(o, op, "o"));
  const int64_t t = o->shape[0], h = o->shape[1];
  DSA_CHECK(dsa__check_positions(positions, op, t));
  DSA_CHECK(dsa__check_cos_sin(cos_sin, op));
  DSA_CHECK(dsa__check_dim(cos_sin, op, "cos_sin", 1, OQ_ROPE));
  DSA_CHECK(dsa__check_tensor(out, op, "out", DSA_E4M3, 3));
  const int64_t g = out->shape[0];
  if (g < 1 || h % g != 0)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: out has %lld groups (shape[0]), which must be >= 1 and divide o's %lld "
                     "heads",
                     op, (long long)g, (long long)h);
  const int64_t hpg = h / g;
  DSA_CHECK(dsa__check_dim(out, op, "out", 1, t));
  DSA_CHECK(dsa__check_dim(out, op, "out", 2, hpg * OQ_DIM));
  DSA_CHECK(dsa__check_unit_inner(out, op, "out"));
  if (!scales)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: scales is NULL", op);
  const int packed = scales->dtype == DSA_I32;
  if (!packed && scales->dtype != DSA_F32)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: scales has dtype %s, expected f32 (scales) or i32 (packed ue8m0)", op,
                     dsa_dtype_name(scales->dtype));
  DSA_CHECK(dsa__check_tensor(scales, op, "scales", scales->dtype, 3));
  DSA_CHECK(dsa__check_dim(scales, op, "scales", 0, g));
  DSA_CHECK(dsa__check_dim(scales, op, "scales", 1, packed ? hpg : 4 * hpg));
  const int64_t tp = scales->shape[2];
  if (tp < t)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: scales has %lld token columns (shape[2]), fewer than o's %lld tokens",
                     op, (long long)tp, (long long)t);
  uint64_t rows;
  if (__builtin_mul_overflow((uint64_t)tp, (uint64_t)h, &rows) || rows >= ((uint64_t)1 << 31))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: scales' %lld token columns x %lld heads; the product must be < 2^31",
                     op, (long long)tp, (long long)h);

  if (rows == 0) return dsa__launch_nothing(q, ev);
  if (dsa__pick(q, &dsa__variants_output_quant, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  cl_kernel kern;
  /* i64 positions with f32 cos/sin get the kernel built for them (the dtype
   * branches cost 6-8 % on NVIDIA, cl/output_quant.cl); the same arguments. */
  const char *kname = positions->dtype == DSA_I64 && cos_sin->dtype == DSA_F32
                          ? "output_inv_rope_fp8_quant_i64f32"
                          : "output_inv_rope_fp8_quant";
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_OUTPUT_QUANT, kname, &kern));
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_tensor(&a, o, 3);
  dsa__karg_positions(&a, positions);
  dsa__karg_cos_sin(&a, cos_sin);
  dsa__karg_i64(&a, cos_sin->shape[0]);
  dsa__karg_tensor(&a, out, 3);
  dsa__karg_tensor(&a, scales, 3);
  dsa__karg_i32(&a, (cl_int)h);
  dsa__karg_i32(&a, (cl_int)hpg);
  dsa__karg_i64(&a, t);
  dsa__karg_i64(&a, tp);
  dsa__karg_i32(&a, packed);
  dsa__karg_faults(&a);
  const size_t global[2] = {OQ_LANES, (size_t)((rows + OQ_ROWS - 1) / OQ_ROWS * OQ_ROWS)},
               local[2] = {OQ_LANES, OQ_ROWS};
  return dsa__launch_args(q, kern, kname, &a, 2, global, local, ev);
}
