/* dsacl-bench rows for sparse MLA decode, fused and two-stage, at
 * DeepSeek-V4 shapes: main set = 128 SWA entries, extra set = the top-k
 * (512 or 1024) compressed entries, random valid slots of a >= 600 MB fp8
 * cache pool (both sets index the same pool), full lengths, with a sink. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The two-stage decode's workspace: bytes [off, off + n) of m as a u8 tensor. */
#define WS_BYTES(m, off, n)                                                        \
  (&(dsa_tensor){.mem = (m), .offset = (off), .dtype = DSA_U8, .ndim = 1,          \
                 .shape = {(int64_t)(n)}, .stride = {1}})

#define SM_BS 64
#define SM_STRIDE 37440 /* 64 * 584 rounded up to a multiple of 576 */
#define SM_TOKEN_BYTES 584
#define SM_DIM 512
#define POOL_BYTES 600e6
#define POOL_BYTES_QUICK 64e6

/* p = {T, H, K1 (main), K2 (extra)} */
typedef struct smla_state {
  dsa_paged_cache cache;
  cl_mem query, idx1, idx2, len1, len2, sink, out, ws;
  dsa_tensor tquery, tidx1, tidx2, tlen1, tlen2, tsink, tout;
  dsa_sparse_index_set main_set, extra_set;
  size_t ws_bytes;
} smla_state;

/* Random valid slots [t, k] and full lengths. */
static int make_set(bench_env *e, uint64_t *seed, int64_t t, int64_t k, uint64_t cap, cl_mem *idx,
                    cl_mem *len, dsa_tensor *tidx, dsa_tensor *tlen) {
  int32_t *iv = malloc((size_t)(t * k) * sizeof *iv), *lv = malloc((size_t)t * sizeof *lv);
  if (iv && lv) {
    for (int64_t i = 0; i < t * k; i++) iv[i] = (int32_t)(bench_rng_next(seed) % cap);
    for (int64_t i = 0; i < t; i++) lv[i] = (int32_t)k;
    *idx = bench_make_buf(e, (size_t)(t * k) * 4, iv);
    *len = bench_make_buf(e, (size_t)t * 4, lv);
  }
  free(iv), free(lv);
  if (!*idx || !*len) return -1;
  int64_t is[2] = {t, k};
  *tidx = dsa_tensor_make(*idx, 0, DSA_I32, 2, is);
  *tlen = dsa_tensor_make(*len, 0, DSA_I32, 1, &t);
  return 0;
}

static int smla_setup(bench_env *e, const int64_t *p, void **out, int two_stage) {
  smla_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  const int64_t t = p[0], h = p[1], k1 = p[2], k2 = p[3];
  const int64_t nb = (int64_t)ceil((e->quick ? POOL_BYTES_QUICK : POOL_BYTES) / SM_STRIDE);
  s->cache = (dsa_paged_cache){.mem = NULL, .offset = 0, .num_blocks = nb, .block_size = SM_BS,
                               .block_stride = SM_STRIDE, .format = DSA_CACHE_MLA_FP8};
  /* 0x3c: e4m3 1.5 values, scale byte 60 (finite), rope bf16 0x3c3c. */
  if (!(s->cache.mem = bench_make_filled(e, (size_t)nb * SM_STRIDE, 0x3c))) return -1;
  uint64_t seed = 0x5eed4001u;
  const uint64_t cap = (uint64_t)(nb * SM_BS);
  if (make_set(e, &seed, t, k1, cap, &s->idx1, &s->len1, &s->tidx1, &s->tlen1) != 0 ||
      make_set(e, &seed, t, k2, cap, &s->idx2, &s->len2, &s->tidx2, &s->tlen2) != 0)
    return -1;
  uint16_t *qv = bench_random_bf16(&seed, (size_t)(t * h * SM_DIM), -1.0f, 1.0f);
  float *sink = bench_random_f32(&seed, (size_t)h, -1.0f, 1.0f);
  if (qv && sink) {
    s->query = bench_make_buf(e, (size_t)(t * h * SM_DIM) * 2, qv);
    s->sink = bench_make_buf(e, (size_t)h * 4, sink);
  }
  free(qv), free(sink);
  if (!s->query || !s->sink || !(s->out = bench_make_buf(e, (size_t)(t * h * SM_DIM) * 2, NULL)))
    return -1;
  if (two_stage) {
    if (!(s->ws_bytes = dsa_sparse_mla_decode_workspace_size(t, k1, k2))) {
      fprintf(stderr, "dsacl-bench: sparse_mla two-stage: no workspace size\n");
      return -1;
    }
    if (!(s->ws = bench_make_buf(e, s->ws_bytes, NULL))) return -1;
  }
  int64_t qs[3] = {t, h, SM_DIM};
  s->tquery = dsa_tensor_make(s->query, 0, DSA_BF16, 3, qs);
  s->tout = dsa_tensor_make(s->out, 0, DSA_BF16, 3, qs);
  s->tsink = dsa_tensor_make(s->sink, 0, DSA_F32, 1, &h);
  s->main_set = (dsa_sparse_index_set){&s->cache, &s->tidx1, &s->tlen1};
  s->extra_set = (dsa_sparse_index_set){&s->cache, &s->tidx2, &s->tlen2};
  return 0;
}

static int fused_setup(bench_env *e, const int64_t *p, void **out) {
  return smla_setup(e, p, out, 0);
}

static int two_setup(bench_env *e, const int64_t *p, void **out) {
  return smla_setup(e, p, out, 1);
}

/* One kernel, or two under split-K (the partial rows, then the combine):
 * done is the last one's, so the time spans from a marker enqueued first. */
static int fused_run(bench_env *e, void *st, cl_event *done) {
  smla_state *s = st;
  dsa_events ev = {0, NULL, done};
  if (bench_span_begin(e) != 0) return -1;
  DSA_TRY(dsa_sparse_mla_decode(e->q, &s->tquery, &s->main_set, &s->extra_set, &s->tsink, &s->tout,
                                NULL, NULL, &ev));
  return 0;
}

/* Two kernels (gather-pack, then attention): done is only the second's, so
 * the time spans from a marker enqueued first. */
static int two_run(bench_env *e, void *st, cl_event *done) {
  smla_state *s = st;
  dsa_events ev = {0, NULL, done};
  if (bench_span_begin(e) != 0) return -1;
  DSA_TRY(dsa_sparse_mla_decode_two_stage(e->q, &s->tquery, &s->main_set, &s->extra_set,
                                          &s->tsink, &s->tout, NULL, WS_BYTES(s->ws, 0, s->ws_bytes), NULL, &ev));
  return 0;
}

static void smla_teardown(void *st) {
  smla_state *s = st;
  if (!s) return;
  bench_free_buf(&s->cache.mem), bench_free_buf(&s->query), bench_free_buf(&s->sink);
  bench_free_buf(&s->idx1), bench_free_buf(&s->idx2), bench_free_buf(&s->len1);
  bench_free_buf(&s->len2), bench_free_buf(&s->out), bench_free_buf(&s->ws);
  free(s);
}

/* The useful traffic (same for both forms; two-stage also writes and re-reads
 * its bf16 workspace): K fp8 entries per token, indices, lengths, sink, q, out. */
static double smla_bytes(const int64_t *p) {
  const double t = (double)p[0], h = (double)p[1], k = (double)(p[2] + p[3]);
  return t * k * (SM_TOKEN_BYTES + 4) + t * 8 + h * 4 + 2 * t * h * SM_DIM * 2;
}

/* QK and PV: 2 * 2 * T * H * K * 512. */
static double smla_flops(const int64_t *p) {
  return 4.0 * (double)p[0] * (double)p[1] * (double)(p[2] + p[3]) * SM_DIM;
}

#define SMLA_OP(name, su, run, t, h, k2, qt, qh, qk2)                                       \
  {name, "T=%lld H=%lld K=%lld+%lld", {t, h, 128, k2}, {qt, qh, 128, qk2}, su, run,         \
   smla_teardown, smla_bytes, smla_flops}
#define SMLA_ROWS(name, su, run)                                                           \
  SMLA_OP(name, su, run, 64, 64, 512, 4, 16, 512),                                         \
  SMLA_OP(name, su, run, 128, 64, 512, 8, 16, 512),                                        \
  SMLA_OP(name, su, run, 64, 128, 1024, 4, 16, 1024),                                      \
  SMLA_OP(name, su, run, 128, 128, 1024, 8, 16, 1024)

const bench_op bench_ops_sparse_mla[] = {
    SMLA_ROWS("sparse_mla_fused", fused_setup, fused_run),
    SMLA_ROWS("sparse_mla_2stage", two_setup, two_run),
    {0},
};
