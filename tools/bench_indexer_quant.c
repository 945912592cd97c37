/* dsacl-bench rows for the indexer quantization family: Q RoPE + FP8 / MXFP4
 * quantization and the FP8 K quantize + insert into the paged indexer cache,
 * at DeepSeek-V4 shapes (H = 64, D = 128, rope 64). */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IQ_D 128
#define IQ_ROPE 64
#define IQ_BS 64
#define IQ_STRIDE 8640 /* 64 * 132 rounded up to a multiple of 576 */
#define POOL_BYTES 600e6
#define POOL_BYTES_QUICK 64e6

/* ---- Q RoPE + quant: p = {T, H, positions P, mxfp4} ------------------------------ */

typedef struct q_state {
  cl_mem pos, qin, cs, w, oq, os, ow;
  dsa_tensor tpos, tqin, tcs, tw, toq, tos, tow;
  int mx;
} q_state;

static int q_setup(bench_env *e, const int64_t *p, void **out) {
  q_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  const int64_t t = p[0], h = p[1], np = p[2];
  s->mx = p[3] != 0;
  uint64_t seed = 0x5eed2001u;
  uint16_t *qin = bench_random_bf16(&seed, (size_t)(t * h * IQ_D), -4.0f, 4.0f);
  uint16_t *w = bench_random_bf16(&seed, (size_t)(t * h), -1.0f, 1.0f);
  float *cs = malloc((size_t)(np * IQ_ROPE) * sizeof *cs);
  int64_t *pos = malloc((size_t)t * sizeof *pos);
  if (qin && w && cs && pos) {
    for (int64_t r = 0; r < np; r++)
      for (int i = 0; i < IQ_ROPE / 2; i++) {
        const double a = (double)r * pow(10000.0, -2.0 * i / IQ_ROPE);
        cs[r * IQ_ROPE + i] = (float)cos(a);
        cs[r * IQ_ROPE + IQ_ROPE / 2 + i] = (float)sin(a);
      }
    for (int64_t i = 0; i < t; i++) pos[i] = (int64_t)(bench_rng_next(&seed) % (uint64_t)np);
    s->qin = bench_make_buf(e, (size_t)(t * h * IQ_D) * 2, qin);
    s->w = bench_make_buf(e, (size_t)(t * h) * 2, w);
    s->cs = bench_make_buf(e, (size_t)(np * IQ_ROPE) * 4, cs);
    s->pos = bench_make_buf(e, (size_t)t * 8, pos);
  }
  free(qin), free(w), free(cs), free(pos);
  const int64_t qd = s->mx ? IQ_D / 2 : IQ_D;
  if (!s->qin || !s->w || !s->cs || !s->pos ||
      !(s->oq = bench_make_buf(e, (size_t)(t * h * qd), NULL)) ||
      !(s->ow = bench_make_buf(e, (size_t)(t * h) * 4, NULL)) ||
      (s->mx && !(s->os = bench_make_buf(e, (size_t)(t * h) * (IQ_D / 32), NULL))))
    return -1;
  int64_t qs[3] = {t, h, IQ_D}, cshape[2] = {np, IQ_ROPE}, ws[2] = {t, h}, oqs[3] = {t, h, qd},
          oss[3] = {t, h, IQ_D / 32};
  s->tpos = dsa_tensor_make(s->pos, 0, DSA_I64, 1, &t);
  s->tqin = dsa_tensor_make(s->qin, 0, DSA_BF16, 3, qs);
  s->tcs = dsa_tensor_make(s->cs, 0, DSA_F32, 2, cshape);
  s->tw = dsa_tensor_make(s->w, 0, DSA_BF16, 2, ws);
  s->toq = dsa_tensor_make(s->oq, 0, s->mx ? DSA_E2M1X2 : DSA_E4M3, 3, oqs);
  if (s->mx) s->tos = dsa_tensor_make(s->os, 0, DSA_UE8M0, 3, oss);
  s->tow = dsa_tensor_make(s->ow, 0, DSA_F32, 2, ws);
  return 0;
}

static int q_run(bench_env *e, void *st, cl_event *done) {
  q_state *s = st;
  dsa_events ev = {0, NULL, done};
  DSA_TRY(dsa_indexer_q_quant(e->q, &s->tpos, &s->tqin, &s->tcs, &s->tw, &s->toq, s->mx ? &s->tos : NULL,
                              &s->tow, NULL, &ev));
  return 0;
}

static void q_teardown(void *st) {
  q_state *s = st;
  if (!s) return;
  bench_free_buf(&s->pos), bench_free_buf(&s->qin), bench_free_buf(&s->cs);
  bench_free_buf(&s->w), bench_free_buf(&s->oq), bench_free_buf(&s->os), bench_free_buf(&s->ow);
  free(s);
}

/* Read: q, bf16 weights, positions, the cos_sin rows read; written: q, scales, weights. */
static double q_bytes(const int64_t *p) {
  const double t = (double)p[0], th = (double)p[0] * (double)p[1];
  const double wq = p[3] ? th * (IQ_D / 2 + IQ_D / 32) : th * IQ_D;
  return th * IQ_D * 2 + th * 2 + t * 8 + t * IQ_ROPE * 4 + wq + th * 4;
}

/* ---- K quant + insert (FP8): p = {N} ------------------------------------------------ */

typedef struct k_state {
  dsa_paged_cache cache;
  cl_mem k, slots;
  dsa_tensor tk, tslots;
} k_state;

static int k_setup(bench_env *e, const int64_t *p, void **out) {
  k_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  const int64_t n = p[0];
  const int64_t nb = (int64_t)ceil((e->quick ? POOL_BYTES_QUICK : POOL_BYTES) / IQ_STRIDE);
  s->cache = (dsa_paged_cache){.mem = NULL, .offset = 0, .num_blocks = nb, .block_size = IQ_BS,
                               .block_stride = IQ_STRIDE, .format = DSA_CACHE_INDEXER_FP8};
  if (!(s->cache.mem = bench_make_filled(e, (size_t)nb * IQ_STRIDE, 0))) return -1;
  uint64_t seed = 0x5eed2002u;
  uint16_t *k = bench_random_bf16(&seed, (size_t)(n * IQ_D), -4.0f, 4.0f);
  int64_t *slots = bench_random_distinct(&seed, nb * IQ_BS, n);
  if (k && slots) {
    s->k = bench_make_buf(e, (size_t)(n * IQ_D) * 2, k);
    s->slots = bench_make_buf(e, (size_t)n * 8, slots);
  }
  free(k), free(slots);
  if (!s->k || !s->slots) return -1;
  int64_t kshape[2] = {n, IQ_D};
  s->tk = dsa_tensor_make(s->k, 0, DSA_BF16, 2, kshape);
  s->tslots = dsa_tensor_make(s->slots, 0, DSA_I64, 1, &n);
  return 0;
}

static int k_run(bench_env *e, void *st, cl_event *done) {
  k_state *s = st;
  dsa_events ev = {0, NULL, done};
  DSA_TRY(dsa_indexer_k_insert(e->q, &s->tk, &s->tslots, &s->cache, NULL, &ev));
  return 0;
}

static void k_teardown(void *st) {
  k_state *s = st;
  if (!s) return;
  bench_free_buf(&s->cache.mem), bench_free_buf(&s->k), bench_free_buf(&s->slots);
  free(s);
}

static double k_bytes(const int64_t *p) { return (double)p[0] * (IQ_D * 2 + 8 + IQ_D + 4); }

#define Q_OP(name, mx, t, qt)                                                                \
  {name, "T=%lld H=%lld", {t, 64, 65536, mx}, {qt, 64, 4096, mx}, q_setup, q_run, q_teardown, \
   q_bytes, bench_no_flops}
#define K_OP(n, qn)                                                                          \
  {"indexer_k_insert", "N=%lld", {n}, {qn}, k_setup, k_run, k_teardown, k_bytes,             \
   bench_no_flops}

const bench_op bench_ops_indexer_quant[] = {
    Q_OP("indexer_q_fp8", 0, 64, 16),
    Q_OP("indexer_q_fp8", 0, 8192, 256),
    Q_OP("indexer_q_mxfp4", 1, 64, 16),
    Q_OP("indexer_q_mxfp4", 1, 8192, 256),
    K_OP(64, 64),
    K_OP(8192, 1024),
    {0},
};
