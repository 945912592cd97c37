/* dsacl-bench rows for the indexer top-k family: decode top-k over random
 * f32 or bf16 logits (the two dtypes the indexer logits operators write),
 * every row using all N candidates, at DeepSeek-V4 shapes. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* p = {rows, N, k, bf16} */
typedef struct topk_state {
  cl_mem logits, lens, idx;
  dsa_tensor tlogits, tlens, tidx;
  dsa_topk_params prm;
} topk_state;

static int topk_setup(bench_env *e, const int64_t *p, void **out) {
  topk_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  const int64_t rows = p[0], n = p[1], k = p[2], bf16 = p[3];
  uint64_t seed = 0x5eed3001u;
  void *logits = bf16 ? (void *)bench_random_bf16(&seed, (size_t)(rows * n), -10.0f, 10.0f)
                      : (void *)bench_random_f32(&seed, (size_t)(rows * n), -10.0f, 10.0f);
  int32_t *lens = malloc((size_t)rows * sizeof *lens);
  if (logits && lens) {
    for (int64_t i = 0; i < rows; i++) lens[i] = (int32_t)n;
    s->logits = bench_make_buf(e, (size_t)(rows * n) * (bf16 ? 2 : 4), logits);
    s->lens = bench_make_buf(e, (size_t)rows * 4, lens);
  }
  free(logits), free(lens);
  if (!s->logits || !s->lens || !(s->idx = bench_make_buf(e, (size_t)(rows * k) * 4, NULL)))
    return -1;
  int64_t ls[2] = {rows, n}, is[2] = {rows, k};
  s->tlogits = dsa_tensor_make(s->logits, 0, bf16 ? DSA_BF16 : DSA_F32, 2, ls);
  s->tlens = dsa_tensor_make(s->lens, 0, DSA_I32, 1, &rows);
  s->tidx = dsa_tensor_make(s->idx, 0, DSA_I32, 2, is);
  dsa_topk_params_default(&s->prm);
  s->prm.k = (int32_t)k;
  s->prm.next_n = 1;
  return 0;
}

static int topk_run(bench_env *e, void *st, cl_event *done) {
  topk_state *s = st;
  /* The split runs two kernels: time from a marker before the first. */
  if (bench_span_begin(e)) return -1;
  dsa_events ev = {0, NULL, done};
  DSA_TRY(dsa_topk_decode(e->q, &s->tlogits, &s->tlens, &s->tidx, &s->prm, &ev));
  return 0;
}

static void topk_teardown(void *st) {
  topk_state *s = st;
  if (!s) return;
  bench_free_buf(&s->logits), bench_free_buf(&s->lens), bench_free_buf(&s->idx);
  free(s);
}

/* Logits and lengths read, indices written. */
static double topk_bytes(const int64_t *p) {
  return (double)p[0] * ((double)p[1] * (p[3] ? 2 : 4) + 4 + (double)p[2] * 4);
}

#define TOPK_OP(r, n, k, qr, qn, h)                                                      \
  {"topk_decode", (h) ? "%lldx%lld k=%lld bf16" : "%lldx%lld k=%lld", {r, n, k, h},      \
   {qr, qn, k, h}, topk_setup, topk_run, topk_teardown, topk_bytes, bench_no_flops}

const bench_op bench_ops_topk[] = {
    TOPK_OP(64, 32768, 512, 4, 8192, 0),
    TOPK_OP(64, 32768, 2048, 4, 8192, 0),
    TOPK_OP(8192, 8192, 512, 64, 4096, 0),
    TOPK_OP(8192, 8192, 2048, 64, 4096, 0),
    TOPK_OP(64, 32768, 512, 4, 8192, 1),
    TOPK_OP(8192, 8192, 512, 64, 4096, 1),
    {0},
};
