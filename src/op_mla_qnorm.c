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

typedef cl_ulong u64;

static int aligned16(u64 a, u64 b) { return a % 16 == 0 && b % 16 == 0; }

void dsa_mla_qnorm_params_default(dsa_mla_qnorm_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->eps = 1e-6f;
}

dsa_status dsa_mla_qnorm_rope_kv_insert(dsa_queue *q, const dsa_tensor *q_in,
                                        const dsa_tensor *q_out, const dsa_tensor *kv,
                                        const dsa_tensor *positions, const dsa_tensor *cos_sin,
                                        const dsa_tensor *slot_mapping,
                                        const dsa_paged_cache *cache,
                                        const dsa_mla_qnorm_params *p, const dsa_events *ev) {
  static const char op[] = "dsa_mla_qnorm_rope_kv_insert";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  dsa_mla_qnorm_params defp;
  if (!p) {
    dsa_mla_qnorm_params_default(&defp);
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
  DSA_CHECK(dsa__check_tensor(positions, op, "positions", DSA_I64, 1));
  DSA_CHECK(dsa__check_dim(positions, op, "positions", 0, t));
  DSA_CHECK(dsa__check_tensor(cos_sin, op, "cos_sin", DSA_F32, 2));
  DSA_CHECK(dsa__check_dim(cos_sin, op, "cos_sin", 1, ROPE_DIM));
  DSA_CHECK(dsa__check_unit_inner(cos_sin, op, "cos_sin"));
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
  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_MLA_QNORM, "mla_qnorm_rope_kv_insert", &kern));
  u64 qi_off = q_in->offset, qi_ts = (u64)q_in->stride[0] * 2, qi_hs = (u64)q_in->stride[1] * 2;
  u64 qo_off = qo->offset, qo_ts = (u64)qo->stride[0] * 2, qo_hs = (u64)qo->stride[1] * 2;
  cl_int hh = (cl_int)h;
  u64 kv_off = kv->offset, kv_rs = (u64)kv->stride[0] * 2;
  u64 p_off = positions->offset, p_st = (u64)positions->stride[0] * 8;
  u64 cs_off = cos_sin->offset, cs_rs = (u64)cos_sin->stride[0] * 4;
  cl_long npos = cos_sin->shape[0];
  u64 s_off = slot_mapping->offset, s_st = (u64)slot_mapping->stride[0] * 8;
  cl_long nt = t;
  cl_float eps = p->eps;
  u64 c_off = cache->offset, c_bs = (u64)cache->block_stride;
  cl_long nb = cache->num_blocks;
  cl_int bs = cache->block_size;
  /* Only rows that exist are addressed: with H = 0 the q strides are moot. */
  cl_int q_al = h == 0 || (aligned16(qi_off, qi_ts) && aligned16(qi_hs, qo_off) &&
                           aligned16(qo_ts, qo_hs));
  cl_int kv_al = aligned16(kv_off, kv_rs), c_al = aligned16(c_off, c_bs);
  /* Empty tensors may carry a NULL buffer; the kernel never touches them. */
  cl_mem qim = q_in->mem ? q_in->mem : q->faults, qom = qo->mem ? qo->mem : q->faults;
  cl_mem csm = cos_sin->mem ? cos_sin->mem : q->faults;
  cl_mem cmem = cache->mem ? cache->mem : q->faults;
  const dsa_karg args[] = {
      DSA_KARG(qim),    DSA_KARG(qi_off), DSA_KARG(qi_ts),   DSA_KARG(qi_hs),
      DSA_KARG(qom),    DSA_KARG(qo_off), DSA_KARG(qo_ts),   DSA_KARG(qo_hs),
      DSA_KARG(hh),     DSA_KARG(kv->mem), DSA_KARG(kv_off), DSA_KARG(kv_rs),
      DSA_KARG(positions->mem), DSA_KARG(p_off), DSA_KARG(p_st), DSA_KARG(csm),
      DSA_KARG(cs_off), DSA_KARG(cs_rs),  DSA_KARG(npos),    DSA_KARG(slot_mapping->mem),
      DSA_KARG(s_off),  DSA_KARG(s_st),   DSA_KARG(nt),      DSA_KARG(eps),
      DSA_KARG(cmem),   DSA_KARG(c_off),  DSA_KARG(nb),      DSA_KARG(bs),
      DSA_KARG(c_bs),   DSA_KARG(q_al),   DSA_KARG(kv_al),   DSA_KARG(c_al),
      DSA_KARG(q->faults)};
  const uint64_t rows = (uint64_t)t * (uint64_t)(h + 1);
  const size_t global[2] = {LANES, (size_t)((rows + ROWS - 1) / ROWS * ROWS)},
               local[2] = {LANES, ROWS};
  return dsa__launch(q, kern, "mla_qnorm_rope_kv_insert", (int)(sizeof args / sizeof args[0]),
                     args, 2, global, local, ev);
}
