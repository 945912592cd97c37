/* dsacl-bench rows for the indexer quantization family: Q RoPE + FP8 / MXFP4
 * quantization and the FP8 K quantize + insert into the paged indexer cache,
 * at DeepSeek-V4 shapes (H = 64, D = 128, rope 64). Shapes, inputs and the
 * calls are the shared case descriptions' (tools/cases/indexer_quant.c). */
#include "bench.h"

#include <math.h>

/* ---- Q RoPE + quant: p = {T, H, positions P, mxfp4}: the shared case
 * description's (tools/cases/indexer_quant.c) -------------------------------------- */

static int q_setup(bench_env *e, const int64_t *p, void **out) {
  bench_case *b = bench_case_new(&case_q_quant_ops, sizeof(case_q_quant), 0);
  if (!(*out = b)) return -1;
  case_q_quant *c = b->c;
  *c = (case_q_quant){.mx = p[3] != 0, .t = p[0], .h = p[1], .np = p[2]};
  return case_q_quant_gen_bench(c) ? -1 : bench_case_upload(e, b);
}

/* ---- K quant + insert (FP8): p = {N}, the shared case's ---------------------------- */

static int k_setup(bench_env *e, const int64_t *p, void **out) {
  bench_case *b = bench_case_new(&case_k_insert_ops, sizeof(case_k_insert), 0);
  if (!(*out = b)) return -1;
  case_k_insert *c = b->c;
  const double pool = e->quick ? CASE_K_POOL_BYTES_QUICK : CASE_K_POOL_BYTES;
  *c = (case_k_insert){.n = p[0], .nb = (int64_t)ceil(pool / 8640)};
  return case_k_insert_gen_bench(c) ? -1 : bench_case_upload(e, b);
}

#define Q_OP(name, mx, t, qt)                                                               \
  {name, "T=%lld H=%lld", {t, 64, 65536, mx}, {qt, 64, 4096, mx}, q_setup, bench_case_run,   \
   bench_case_teardown, case_q_quant_bytes, case_q_quant_flops},
#define K_OP(n, qn)                                                                         \
  {"indexer_k_insert", "N=%lld", {n}, {qn}, k_setup, bench_case_run, bench_case_teardown,    \
   case_k_insert_bytes, case_k_insert_flops},

const bench_op bench_ops_indexer_quant[] = {
    CASE_Q_QUANT_ROWS(Q_OP)
    CASE_K_INSERT_ROWS(K_OP)
    {0},
};
