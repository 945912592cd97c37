/* dsacl-bench rows for sparse MLA decode, fused and two-stage, at
 * DeepSeek-V4 shapes: main set = 128 SWA entries, extra set = the top-k
 * (512 or 1024) compressed entries, random valid slots of a >= 600 MB fp8
 * cache pool (both sets index the same pool), full lengths, with a sink.
 * Shapes, inputs and the calls are the shared case description's
 * (tools/cases/sparse_mla.c). */
#include "bench.h"

#include <math.h>

/* p = {T, H, K1 (main), K2 (extra)}. Two kernels (two-stage: gather-pack,
 * then attention; fused under split-K: the partial rows, then the combine):
 * done is only the last one's, so the time spans from a marker. */
static int smla_setup(bench_env *e, const int64_t *p, void **out, int two) {
  bench_case *b = bench_case_new(&case_mla_decode_ops, sizeof(case_mla_decode), 1);
  if (!(*out = b)) return -1;
  case_mla_decode *c = b->c;
  const double pool = e->quick ? CASE_MLA_POOL_BYTES_QUICK : CASE_MLA_POOL_BYTES;
  *c = (case_mla_decode){.two = two, .no_lse = 1, .t = p[0], .h = p[1]};
  c->s1.k = p[2], c->s2.k = p[3];
  c->s1.nb = (int64_t)ceil(pool / CASE_MLA_BENCH_STRIDE);
  return case_mla_decode_gen_bench(c) ? -1 : bench_case_upload(e, b);
}

static int fused_setup(bench_env *e, const int64_t *p, void **out) {
  return smla_setup(e, p, out, 0);
}

static int two_setup(bench_env *e, const int64_t *p, void **out) {
  return smla_setup(e, p, out, 1);
}

#define SMLA_OP(name, su, t, h, k2, qt, qh)                                                 \
  {name, "T=%lld H=%lld K=%lld+%lld", {t, h, 128, k2}, {qt, qh, 128, k2}, su, bench_case_run, \
   bench_case_teardown, case_mla_decode_bytes, case_mla_decode_flops},
#define FUSED_OP(t, h, k2, qt, qh) SMLA_OP("sparse_mla_fused", fused_setup, t, h, k2, qt, qh)
#define TWO_OP(t, h, k2, qt, qh) SMLA_OP("sparse_mla_2stage", two_setup, t, h, k2, qt, qh)

const bench_op bench_ops_sparse_mla[] = {
    CASE_MLA_DECODE_ROWS(FUSED_OP)
    CASE_MLA_DECODE_ROWS(TWO_OP)
    {0},
};
