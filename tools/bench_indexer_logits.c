/* dsacl-bench rows for the indexer logits family: ragged prefill and paged
 * decode MQA logits (FP8) at DeepSeek-V4 shapes (H = 64, D = 128). */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IL_D 128
#define IL_BS 64
#define IL_STRIDE 8640 /* 64 * 132 rounded up to a multiple of 576, as vLLM pads */

/* ---- paged decode: p = {B, context (compressed keys), next_n, H} ---------------- */

typedef struct paged_state {
  dsa_paged_cache cache;
  cl_mem q, w, ctx, table, out;
  dsa_tensor tq, tw, tctx, ttable, tout;
} paged_state;

static int64_t width(int64_t t) { return (t + IL_BS - 1) / IL_BS; }

static int paged_setup(bench_env *e, const int64_t *p, void **out) {
  paged_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  const int64_t b = p[0], t = p[1], nn = p[2], h = p[3], w = width(t);
  s->cache = (dsa_paged_cache){.mem = NULL, .offset = 0, .num_blocks = b * w, .block_size = IL_BS,
                               .block_stride = IL_STRIDE, .format = DSA_CACHE_INDEXER_FP8};
  /* 0x3c everywhere: e4m3 1.5 values and finite f32 scales (0.0115). */
  if (!(s->cache.mem = bench_make_filled(e, (size_t)(b * w) * IL_STRIDE, 0x3c))) return -1;
  uint64_t seed = 0x5eed1001u;
  uint8_t *q = bench_random_bytes(&seed, (size_t)(b * nn * h * IL_D));
  float *wt = bench_random_f32(&seed, (size_t)(b * nn * h), -1.0f, 1.0f);
  int64_t *blocks = bench_random_distinct(&seed, b * w, b * w);
  int32_t *table = malloc((size_t)(b * w) * sizeof *table), *ctx = malloc((size_t)b * 4);
  if (q && wt && blocks && table && ctx) {
    for (int64_t i = 0; i < b * w; i++) table[i] = (int32_t)blocks[i];
    for (int64_t i = 0; i < b; i++) ctx[i] = (int32_t)t;
    s->q = bench_make_buf(e, (size_t)(b * nn * h * IL_D), q);
    s->w = bench_make_buf(e, (size_t)(b * nn * h) * 4, wt);
    s->table = bench_make_buf(e, (size_t)(b * w) * 4, table);
    s->ctx = bench_make_buf(e, (size_t)b * 4, ctx);
  }
  free(q), free(wt), free(blocks), free(table), free(ctx);
  if (!s->q || !s->w || !s->table || !s->ctx ||
      !(s->out = bench_make_buf(e, (size_t)(b * nn * t) * 4, NULL)))
    return -1;
  int64_t qs[4] = {b, nn, h, IL_D}, ws[2] = {b * nn, h}, ts[2] = {b, w}, os[2] = {b * nn, t};
  s->tq = dsa_tensor_make(s->q, 0, DSA_E4M3, 4, qs);
  s->tw = dsa_tensor_make(s->w, 0, DSA_F32, 2, ws);
  s->tctx = dsa_tensor_make(s->ctx, 0, DSA_I32, 1, &b);
  s->ttable = dsa_tensor_make(s->table, 0, DSA_I32, 2, ts);
  s->tout = dsa_tensor_make(s->out, 0, DSA_F32, 2, os);
  return 0;
}

static int paged_run(bench_env *e, void *st, cl_event *done) {
  paged_state *s = st;
  dsa_events ev = {0, NULL, done};
  DSA_TRY(dsa_indexer_paged_logits(e->q, &s->tq, NULL, &s->tw, &s->tctx, &s->ttable, &s->cache,
                               &s->tout, NULL, &ev));
  return 0;
}

static void paged_teardown(void *st) {
  paged_state *s = st;
  if (!s) return;
  bench_free_buf(&s->cache.mem);
  bench_free_buf(&s->q), bench_free_buf(&s->w), bench_free_buf(&s->ctx);
  bench_free_buf(&s->table), bench_free_buf(&s->out);
  free(s);
}

static double paged_bytes(const int64_t *p) {
  const double b = (double)p[0], t = (double)p[1], nn = (double)p[2], h = (double)p[3];
  return b * t * 132 + b * nn * h * (IL_D + 4) + b * (double)width(p[1]) * 4 + b * nn * t * 4;
}

static double paged_flops(const int64_t *p) {
  return 2.0 * (double)p[0] * (double)p[1] * (double)p[2] * (double)p[3] * IL_D;
}

/* ---- ragged prefill: p = {M, N, H}, every row sees all N keys --------------------- */

typedef struct rag_state {
  cl_mem q, k, ks, w, lo, hi, out;
  dsa_tensor tq, tk, tks, tw, tlo, thi, tout;
} rag_state;

static int rag_setup(bench_env *e, const int64_t *p, void **out) {
  rag_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  const int64_t m = p[0], n = p[1], h = p[2];
  uint64_t seed = 0x5eed1002u;
  uint8_t *q = bench_random_bytes(&seed, (size_t)(m * h * IL_D));
  uint8_t *k = bench_random_bytes(&seed, (size_t)(n * IL_D));
  float *wt = bench_random_f32(&seed, (size_t)(m * h), -1.0f, 1.0f);
  float *ks = malloc((size_t)n * 4);
  int32_t *lo = calloc((size_t)m, 4), *hi = malloc((size_t)m * 4);
  if (q && k && wt && ks && lo && hi) {
    for (int64_t i = 0; i < n; i++) ks[i] = 0.0625f;
    for (int64_t i = 0; i < m; i++) hi[i] = (int32_t)n;
    s->q = bench_make_buf(e, (size_t)(m * h * IL_D), q);
    s->k = bench_make_buf(e, (size_t)(n * IL_D), k);
    s->ks = bench_make_buf(e, (size_t)n * 4, ks);
    s->w = bench_make_buf(e, (size_t)(m * h) * 4, wt);
    s->lo = bench_make_buf(e, (size_t)m * 4, lo);
    s->hi = bench_make_buf(e, (size_t)m * 4, hi);
  }
  free(q), free(k), free(wt), free(ks), free(lo), free(hi);
  if (!s->q || !s->k || !s->ks || !s->w || !s->lo || !s->hi ||
      !(s->out = bench_make_buf(e, (size_t)(m * n) * 4, NULL)))
    return -1;
  int64_t qs[3] = {m, h, IL_D}, kshape[2] = {n, IL_D}, ws[2] = {m, h}, os[2] = {m, n};
  s->tq = dsa_tensor_make(s->q, 0, DSA_E4M3, 3, qs);
  s->tk = dsa_tensor_make(s->k, 0, DSA_E4M3, 2, kshape);
  s->tks = dsa_tensor_make(s->ks, 0, DSA_F32, 1, &n);
  s->tw = dsa_tensor_make(s->w, 0, DSA_F32, 2, ws);
  s->tlo = dsa_tensor_make(s->lo, 0, DSA_I32, 1, &m);
  s->thi = dsa_tensor_make(s->hi, 0, DSA_I32, 1, &m);
  s->tout = dsa_tensor_make(s->out, 0, DSA_F32, 2, os);
  return 0;
}

static int rag_run(bench_env *e, void *st, cl_event *done) {
  rag_state *s = st;
  dsa_events ev = {0, NULL, done};
  DSA_TRY(dsa_indexer_logits(e->q, &s->tq, NULL, &s->tk, &s->tks, &s->tw, &s->tlo, &s->thi, &s->tout,
                         NULL, &ev));
  return 0;
}

static void rag_teardown(void *st) {
  rag_state *s = st;
  if (!s) return;
  bench_free_buf(&s->q), bench_free_buf(&s->k), bench_free_buf(&s->ks), bench_free_buf(&s->w);
  bench_free_buf(&s->lo), bench_free_buf(&s->hi), bench_free_buf(&s->out);
  free(s);
}

static double rag_bytes(const int64_t *p) {
  const double m = (double)p[0], n = (double)p[1], h = (double)p[2];
  return m * h * (IL_D + 4) + n * (IL_D + 4) + m * 8 + m * n * 4;
}

static double rag_flops(const int64_t *p) {
  return 2.0 * (double)p[0] * (double)p[1] * (double)p[2] * IL_D;
}

#define PAGED_OP(b, t, nn, qb, qt)                                                          \
  {"paged_mqa_logits", "B=%lld ctx=%lld next_n=%lld H=%lld", {b, t, nn, 64}, {qb, qt, nn, 64}, \
   paged_setup, paged_run, paged_teardown, paged_bytes, paged_flops}

const bench_op bench_ops_indexer_logits[] = {
    PAGED_OP(64, 32768, 1, 4, 2048),
    PAGED_OP(8, 32768, 1, 2, 2048),
    PAGED_OP(64, 32768, 2, 4, 2048),
    PAGED_OP(8, 32768, 2, 2, 2048),
    {"mqa_logits", "M=%lld N=%lld H=%lld", {2048, 8192, 64}, {64, 1024, 64}, rag_setup, rag_run,
     rag_teardown, rag_bytes, rag_flops},
    {0},
};
