/* dsacl-bench rows for the indexer quantization family: Q RoPE + FP8 / MXFP4
 * quantization and the FP8 K quantize + insert into the paged indexer cache,
 * at DeepSeek-V4 shapes (H = 64, D = 128, rope 64). */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IQ_D 128
#define IQ_BS 64
#define IQ_STRIDE 8640 /* 64 * 132 rounded up to a multiple of 576 */
#define POOL_BYTES 600e6
#define POOL_BYTES_QUICK 64e6

/* ---- Q RoPE + quant: p = {T, H, positions P, mxfp4}: the shared case
 * description's (tools/cases/indexer_quant.c) -------------------------------------- */

static int q_setup(bench_env *e, const int64_t *p, void **out) {
  bench_case *b = bench_case_new(&case_q_quant_ops, sizeof(case_q_quant), 0);
  if (!(*out = b)) return -1;
  case_q_quant *c = b->c;
  *c = (case_q_quant){.mx = p[3] != 0, .t = p[0], .h = p[1], .np = p[2]};
  return case_q_quant_gen_bench(c) ? -1 : bench_case_upload(e, b);
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

#define Q_OP(name, mx, t, qt)                                                               \
  {name, "T=%lld H=%lld", {t, 64, 65536, mx}, {qt, 64, 4096, mx}, q_setup, bench_case_run,   \
   bench_case_teardown, case_q_quant_bytes, case_q_quant_flops},
#define K_OP(n, qn)                                                                          \
  {"indexer_k_insert", "N=%lld", {n}, {qn}, k_setup, k_run, k_teardown, k_bytes,             \
   bench_no_flops}

const bench_op bench_ops_indexer_quant[] = {
    CASE_Q_QUANT_ROWS(Q_OP)
    K_OP(64, 64),
    K_OP(8192, 1024),
    {0},
};
