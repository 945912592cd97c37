/* dsacl-bench rows for the indexer logits family: ragged prefill and paged
 * decode MQA logits (FP8) at DeepSeek-V4 shapes (H = 64, D = 128). Shapes,
 * inputs and the calls are the shared case descriptions'
 * (tools/cases/indexer_logits.c). */
#include "bench.h"

/* Paged decode: p = {B, context (compressed keys), next_n, H}. */
static int paged_setup(bench_env *e, const int64_t *p, void **out) {
  bench_case *b = bench_case_new(&case_paged_logits_ops, sizeof(case_paged_logits), 0);
  if (!(*out = b)) return -1;
  case_paged_logits *c = b->c;
  *c = (case_paged_logits){.ctx_rank = 1, .b = p[0], .mml = p[1], .next_n = p[2], .h = p[3]};
  return case_paged_logits_gen_bench(c) ? -1 : bench_case_upload(e, b);
}

/* Ragged prefill: p = {M, N, H}, every row sees all N keys. */
static int rag_setup(bench_env *e, const int64_t *p, void **out) {
  bench_case *b = bench_case_new(&case_logits_ops, sizeof(case_logits), 0);
  if (!(*out = b)) return -1;
  case_logits *c = b->c;
  *c = (case_logits){.m = p[0], .n = p[1], .h = p[2], .d = 128};
  return case_logits_gen_bench(c) ? -1 : bench_case_upload(e, b);
}

#define PAGED_OP(b, t, nn, qb, qt)                                                          \
  {"paged_mqa_logits", "B=%lld ctx=%lld next_n=%lld H=%lld", {b, t, nn, 64}, {qb, qt, nn, 64}, \
   paged_setup, bench_case_run, bench_case_teardown, case_paged_logits_bytes,                 \
   case_paged_logits_flops},
#define RAG_OP(m, n, h, qm, qn)                                                              \
  {"mqa_logits", "M=%lld N=%lld H=%lld", {m, n, h}, {qm, qn, h}, rag_setup, bench_case_run,  \
   bench_case_teardown, case_logits_bytes, case_logits_flops},

const bench_op bench_ops_indexer_logits[] = {
    CASE_PAGED_LOGITS_ROWS(PAGED_OP)
    CASE_LOGITS_ROWS(RAG_OP)
    {0},
};
