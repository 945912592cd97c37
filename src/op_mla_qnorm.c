/* Q RMSNorm + RoPE and KV RoPE + insert (§8.4). Kernel: cl/mla_qnorm.cl. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "internal.h"
#include "dsacl/mla_qnorm.h"

#define MLA_DIM 512
#define ROPE_DIM 64
/* Kernel geometry: 32 lanes per row, 8 rows per group. */
#define LANES 32
#define ROWS 8
const char dsa__defines_mla_qnorm[] = DSA_KDEF(LANES) DSA_KDEF(ROWS);

/* A row trades its sum of squares and block maxima by sub-group shuffles
 * where it is one 32-wide sub-group (cl/dsa_subgroup.h; build-time variants
 * of the one kernel, same bytes), through local memory elsewhere. */
DSA_VARIANT_TABLE(dsa__variants_mla_qnorm, "dsa_mla_qnorm_rope_kv_insert",
                  {"nv-shfl", DSA_CAP_NV_PTX, NULL, NULL},
                  {"amd-bperm", DSA_CAP_AMD_BUILTINS, NULL, NULL},
                  {"intel-sg32", DSA_CAP_INTEL_SUBGROUPS, dsa__refuse_no_sg32, NULL},
                  {"portable", 0, NULL, NULL});

void dsa_mla_qnorm_rope_kv_insert_params_default(dsa_mla_qnorm_rope_kv_insert_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->eps = 1e-6f;
}

dsa_status dsa_mla_qnorm_rope_kv_insert(dsa_queue *q, const dsa_tensor *q_in,
                                        const dsa_tensor *kv, const dsa_tensor *positions,
                                        const dsa_tensor *cos_sin, const dsa_tensor *slot_mapping,
                                        const dsa_paged_cache *cache, const dsa_tensor *q_out,
                                        const dsa_mla_qnorm_rope_kv_insert_params *p,
                                        const dsa_events *ev) {
  static const char op[] = "dsa_mla_qnorm_rope_kv_insert";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  dsa_mla_qnorm_rope_kv_insert_params defp;
  if (!p) {
    dsa_mla_qnorm_rope_kv_insert_params_default(&defp);
    p = &defp;
  }
  if (!(isfinite(p->eps) && p->eps >= FLT_MIN))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: p->eps = %g must be finite and >= FLT_MIN", op, (double)p->eps);
  DSA_CHECK(dsa__check_tensor(q_in, op, "q_in", DSA_BF16, 3));
  DSA_CHECK(dsa__check_dim(q_in, op, "q_in", 2, MLA_DIM));
  DSA_CHECK(dsa__check_unit_inner(q_in, op, "q_in"));
  const int64_t t = q_in->shape[0], h = q_in->shape[1];
  const dsa_tensor *qo = q_out ? q_out : q_in;
  if (q_out) {
    DSA_CHECK(dsa__check_tensor(q_out, op, "q_out", DSA_BF16, 3));
    DSA_CHECK(dsa__check_dim(q_out, op, "q_out", 0, t));
    DSA_CHECK(dsa__check_dim(q_out, op, "q_out", 1, h));
    DSA_CHECK(dsa__check_dim(q_out, op, "q_out", 2, MLA_DIM));
    DSA_CHECK(dsa__check_unit_inner(q_out, op, "q_out"));
  }
  DSA_CHECK(dsa__check_tensor(kv, op, "kv", DSA_BF16, 2));
  DSA_CHECK(dsa__check_dim(kv, op, "kv", 0, t));
  DSA_CHECK(dsa__check_dim(kv, op, "kv", 1, MLA_DIM));
  DSA_CHECK(dsa__check_unit_inner(kv, op, "kv"));
  DSA_CHECK(dsa__check_positions(positions, op, t));
  DSA_CHECK(dsa__check_cos_sin(cos_sin, op));
  DSA_CHECK(dsa__check_dim(cos_sin, op, "cos_sin", 1, ROPE_DIM));
  DSA_CHECK(dsa__check_tensor(slot_mapping, op, "slot_mapping", DSA_I64, 1));
  DSA_CHECK(dsa__check_dim(slot_mapping, op, "slot_mapping", 0, t));
  DSA_CHECK(dsa__check_cache(cache, op, "cache", DSA_CACHE_MLA_FP8));
  uint64_t th1;
  if (t > 0 && (__builtin_mul_overflow((uint64_t)t, (uint64_t)(h + 1), &th1) ||
                th1 >= ((uint64_t)1 << 31)))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: q_in has %lld tokens x %lld heads; T * (H + 1) must be < 2^31", op,
                     (long long)t, (long long)h);

  if (t == 0) return dsa__launch_nothing(q, ev);
  if (dsa__pick(q, &dsa__variants_mla_qnorm, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  /* i64 positions with f32 cos/sin get the kernel built for them (the
   * dtype branches cost 4 % on NVIDIA, cl/mla_qnorm.cl), and with every
   * 16-byte operand aligned the one built for that too; the same arguments. */
  const bool a16 = dsa__tensor_align(q_in) >= 16 && dsa__tensor_align(qo) >= 16 &&
                   dsa__tensor_align(kv) >= 16 && dsa__paged_align(cache) >= 16;
  const char *kname = positions->dtype != DSA_I64 || cos_sin->dtype != DSA_F32
                          ? "mla_qnorm_rope_kv_insert"
                      : a16 ? "mla_qnorm_rope_kv_insert_i64f32_a16"
                            : "mla_qnorm_rope_kv_insert_i64f32";
  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_MLA_QNORM, kname, &kern));
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_tensor(&a, q_in, 3);
  dsa__karg_tensor(&a, qo, 3);
  dsa__karg_i32(&a, (cl_int)h);
  dsa__karg_tensor(&a, kv, 2);
  dsa__karg_positions(&a, positions);
  dsa__karg_cos_sin(&a, cos_sin);
  dsa__karg_i64(&a, cos_sin->shape[0]);
  dsa__karg_tensor(&a, slot_mapping, 1);
  dsa__karg_i64(&a, t);
  dsa__karg_f32(&a, p->eps);
  dsa__karg_paged(&a, cache);
  dsa__karg_faults(&a);
  const uint64_t rows = (uint64_t)t * (uint64_t)(h + 1);
  const size_t global[2] = {LANES, (size_t)((rows + ROWS - 1) / ROWS * ROWS)},
               local[2] = {LANES, ROWS};
  return dsa__launch_args(q, kern, kname, &a, 2, global, local, ev);
}
