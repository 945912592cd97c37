/* dsacl-bench rows for the indexer top-k family: decode top-k over random
 * f32 or bf16 logits (the two dtypes the indexer logits operators write),
 * every row using all N candidates, at DeepSeek-V4 shapes. Shapes, inputs
 * and the call are the shared case description's (tools/cases/topk.c). */
#include "bench.h"
#include "cases.h"

#include <stdio.h>
#include <stdlib.h>

/* p = {rows, N, k, bf16} */
static int topk_setup(bench_env *e, const int64_t *p, void **out) {
  case_topk *c = calloc(1, sizeof *c);
  if (!(*out = c)) return -1;
  *c = (case_topk){.decode = 1, .bf16 = (int)p[3], .rows = p[0], .n = p[1], .b = p[0],
                   .next_n = 1, .lens_rank = 1, .k = (int32_t)p[2]};
  const case_dev d = {e->clctx, e->clq};
  char msg[256];
  if (case_topk_gen_bench(c)) return -1;
  if (case_topk_upload(&d, c, 0, msg, sizeof msg)) {
    fprintf(stderr, "dsacl-bench: %s\n", msg);
    return -1;
  }
  return 0;
}

static int topk_run(bench_env *e, void *st, cl_event *done) {
  /* The split runs two kernels: time from a marker before the first. */
  if (bench_span_begin(e)) return -1;
  dsa_events ev = {0, NULL, done};
  DSA_TRY(case_topk_call(e->q, st, &ev));
  return 0;
}

static void topk_teardown(void *st) {
  if (!st) return;
  case_topk_free(st);
  free(st);
}

#define TOPK_OP(r, n, k, qr, qn, h)                                                      \
  {"topk_decode", (h) ? "%lldx%lld k=%lld bf16" : "%lldx%lld k=%lld", {r, n, k, h},      \
   {qr, qn, k, h}, topk_setup, topk_run, topk_teardown, case_topk_bytes, bench_no_flops},

const bench_op bench_ops_topk[] = {
    CASE_TOPK_ROWS(TOPK_OP)
    {0},
};
