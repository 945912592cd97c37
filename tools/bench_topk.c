/* dsacl-bench rows for the indexer top-k family: decode top-k over random
 * f32 or bf16 logits (the two dtypes the indexer logits operators write),
 * every row using all N candidates, at DeepSeek-V4 shapes. Shapes, inputs
 * and the call are the shared case description's (tools/cases/topk.c). */
#include "bench.h"

/* p = {rows, N, k, bf16}. The split runs two kernels: a span. */
static int topk_setup(bench_env *e, const int64_t *p, void **out) {
  bench_case *b = bench_case_new(&case_topk_ops, sizeof(case_topk), 1);
  if (!(*out = b)) return -1;
  case_topk *c = b->c;
  *c = (case_topk){.decode = 1, .bf16 = (int)p[3], .rows = p[0], .n = p[1], .b = p[0],
                   .next_n = 1, .lens_rank = 1, .k = (int32_t)p[2]};
  return case_topk_gen_bench(c) ? -1 : bench_case_upload(e, b);
}

#define TOPK_OP(r, n, k, qr, qn, h)                                                        \
  {"topk_decode", (h) ? "%lldx%lld k=%lld bf16" : "%lldx%lld k=%lld", {r, n, k, h},        \
   {qr, qn, k, h}, topk_setup, bench_case_run, bench_case_teardown, case_topk_bytes,       \
   case_topk_flops},

const bench_op bench_ops_topk[] = {
    CASE_TOPK_ROWS(TOPK_OP)
    {0},
};
