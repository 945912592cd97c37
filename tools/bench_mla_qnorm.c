/* dsacl-bench rows for Q RMSNorm + RoPE and KV RoPE + fp8 insert into the SWA
 * MLA cache (dsa_mla_qnorm_rope_kv_insert) at DeepSeek-V4 shapes. Shapes,
 * inputs and the call are the shared case description's
 * (tools/cases/mla_qnorm.c). */
#include "bench.h"

#include <math.h>

/* p = {T, H, cos_sin rows P}; q_out is a separate buffer, so every run does
 * the same work on the same input. */
static int qn_setup(bench_env *e, const int64_t *p, void **out) {
  bench_case *b = bench_case_new(&case_qnorm_ops, sizeof(case_qnorm), 0);
  if (!(*out = b)) return -1;
  case_qnorm *c = b->c;
  const double pool = e->quick ? CASE_MLA_POOL_BYTES_QUICK : CASE_MLA_POOL_BYTES;
  *c = (case_qnorm){.t = p[0], .h = p[1], .np = p[2],
                    .nb = (int64_t)ceil(pool / CASE_MLA_BENCH_STRIDE)};
  return case_qnorm_gen_bench(c) ? -1 : bench_case_upload(e, b);
}

#define QN_OP(t, h, qt)                                                                     \
  {"mla_qnorm_rope_kv", "T=%lld H=%lld", {t, h, CASE_QNORM_POS}, {qt, h, CASE_QNORM_POS_QUICK}, \
   qn_setup, bench_case_run, bench_case_teardown, case_qnorm_bytes, case_qnorm_flops},

const bench_op bench_ops_mla_qnorm[] = {
    CASE_QNORM_ROWS(QN_OP)
    {0},
};
