/* dsacl-bench rows for Q RMSNorm + RoPE and KV RoPE + fp8 insert into the SWA
 * MLA cache (dsa_mla_qnorm_rope_kv_insert) at DeepSeek-V4 shapes. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QN_DIM 512
#define QN_ROPE 64
#define QN_BS 64
#define QN_STRIDE 37440 /* 64 * 584 rounded up to a multiple of 576 */
#define QN_TOKEN_BYTES 584
#define QN_POS 65536 /* cos_sin rows */
#define POOL_BYTES 600e6
#define POOL_BYTES_QUICK 64e6

/* p = {T, H, cos_sin rows P}; q_out is a separate buffer, so every run does
 * the same work on the same input. */
typedef struct qn_state {
  dsa_paged_cache cache;
  cl_mem qin, qout, kv, pos, cs, slots;
  dsa_tensor tqin, tqout, tkv, tpos, tcs, tslots;
} qn_state;

static int qn_setup(bench_env *e, const int64_t *p, void **out) {
  qn_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  const int64_t t = p[0], h = p[1], np = p[2];
  const int64_t nb = (int64_t)ceil((e->quick ? POOL_BYTES_QUICK : POOL_BYTES) / QN_STRIDE);
  s->cache = (dsa_paged_cache){.mem = NULL, .offset = 0, .num_blocks = nb, .block_size = QN_BS,
                               .block_stride = QN_STRIDE, .format = DSA_CACHE_MLA_FP8};
  if (!(s->cache.mem = bench_make_filled(e, (size_t)nb * QN_STRIDE, 0))) return -1;
  uint64_t seed = 0x5eed5001u;
  uint16_t *qv = bench_random_bf16(&seed, (size_t)(t * h * QN_DIM), -4.0f, 4.0f);
  uint16_t *kv = bench_random_bf16(&seed, (size_t)(t * QN_DIM), -4.0f, 4.0f);
  int64_t *slots = bench_random_distinct(&seed, nb * QN_BS, t);
  float *cs = malloc((size_t)(np * QN_ROPE) * sizeof *cs);
  int64_t *pos = malloc((size_t)t * sizeof *pos);
  if (qv && kv && slots && cs && pos) {
    for (int64_t r = 0; r < np; r++)
      for (int i = 0; i < QN_ROPE / 2; i++) {
        const double a = (double)r * pow(10000.0, -2.0 * i / QN_ROPE);
        cs[r * QN_ROPE + i] = (float)cos(a);
        cs[r * QN_ROPE + QN_ROPE / 2 + i] = (float)sin(a);
      }
    for (int64_t i = 0; i < t; i++) pos[i] = (int64_t)(bench_rng_next(&seed) % (uint64_t)np);
    s->qin = bench_make_buf(e, (size_t)(t * h * QN_DIM) * 2, qv);
    s->kv = bench_make_buf(e, (size_t)(t * QN_DIM) * 2, kv);
    s->slots = bench_make_buf(e, (size_t)t * 8, slots);
    s->cs = bench_make_buf(e, (size_t)(np * QN_ROPE) * 4, cs);
    s->pos = bench_make_buf(e, (size_t)t * 8, pos);
  }
  free(qv), free(kv), free(slots), free(cs), free(pos);
  if (!s->qin || !s->kv || !s->slots || !s->cs || !s->pos ||
      !(s->qout = bench_make_buf(e, (size_t)(t * h * QN_DIM) * 2, NULL)))
    return -1;
  int64_t qs[3] = {t, h, QN_DIM}, ks[2] = {t, QN_DIM}, cshape[2] = {np, QN_ROPE};
  s->tqin = dsa_tensor_make(s->qin, 0, DSA_BF16, 3, qs);
  s->tqout = dsa_tensor_make(s->qout, 0, DSA_BF16, 3, qs);
  s->tkv = dsa_tensor_make(s->kv, 0, DSA_BF16, 2, ks);
  s->tpos = dsa_tensor_make(s->pos, 0, DSA_I64, 1, &t);
  s->tcs = dsa_tensor_make(s->cs, 0, DSA_F32, 2, cshape);
  s->tslots = dsa_tensor_make(s->slots, 0, DSA_I64, 1, &t);
  return 0;
}

static int qn_run(bench_env *e, void *st, cl_event *done) {
  qn_state *s = st;
  dsa_events ev = {0, NULL, done};
  DSA_TRY(dsa_mla_qnorm_rope_kv_insert(e->q, &s->tqin, &s->tkv, &s->tpos, &s->tcs, &s->tslots,
                                       &s->cache, &s->tqout, NULL, &ev));
  return 0;
}

static void qn_teardown(void *st) {
  qn_state *s = st;
  if (!s) return;
  bench_free_buf(&s->cache.mem), bench_free_buf(&s->qin), bench_free_buf(&s->qout);
  bench_free_buf(&s->kv), bench_free_buf(&s->pos), bench_free_buf(&s->cs);
  bench_free_buf(&s->slots);
  free(s);
}

/* Read: q, kv, positions, slots, the cos_sin rows read; written: q_out, the
 * cache entries. */
static double qn_bytes(const int64_t *p) {
  const double t = (double)p[0], h = (double)p[1];
  return 2 * t * h * QN_DIM * 2 + t * (QN_DIM * 2 + 8 + 8 + QN_ROPE * 4 + QN_TOKEN_BYTES);
}

#define QN_OP(t, h, qt)                                                                     \
  {"mla_qnorm_rope_kv", "T=%lld H=%lld", {t, h, QN_POS}, {qt, h, 4096}, qn_setup, qn_run,   \
   qn_teardown, qn_bytes, bench_no_flops}

const bench_op bench_ops_mla_qnorm[] = {
    QN_OP(64, 64, 16),
    QN_OP(8192, 64, 256),
    {0},
};
