/* dsacl-bench rows for the MTP RMSNorms (dsa_mtp_input_rmsnorm,
 * dsa_mtp_shared_head_rmsnorm) at DeepSeek-V4 shapes: T = 64, 256, 4096
 * tokens, H = 4096 (Flash) and 7168 (Pro), HC = 4, f32 weights (as vLLM's
 * V4 warm-up compiles them). Memory-bound: bytes = rows read + written. */
#include "bench.h"

#include <stdlib.h>

#define MN_HC 4

/* p = {T, H, HC (0: the shared-head operator)}. Outputs are separate
 * buffers, so every run does the same work on the same input. */
typedef struct mn_state {
  cl_mem emb, pos, prev, w, eo, ho;
  dsa_tensor temb, tpos, tprev, tw, teo, tho;
  int head;
} mn_state;

static int mn_setup(bench_env *e, const int64_t *p, void **out) {
  mn_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  const int64_t t = p[0], h = p[1], hc = p[2];
  s->head = hc == 0;
  uint64_t seed = 0x5eed3770u;
  uint16_t *emb = bench_random_bf16(&seed, (size_t)(t * h), -4.0f, 4.0f);
  uint16_t *prev = hc ? bench_random_bf16(&seed, (size_t)(t * hc * h), -4.0f, 4.0f) : NULL;
  float *w = bench_random_f32(&seed, (size_t)h, 0.5f, 1.5f);
  int64_t *pos = malloc((size_t)t * sizeof *pos);
  if (emb && w && pos && (prev || !hc)) {
    for (int64_t i = 0; i < t; i++) pos[i] = i % 97; /* some zeros */
    s->emb = bench_make_buf(e, (size_t)(t * h) * 2, emb);
    s->w = bench_make_buf(e, (size_t)h * 4, w);
    s->pos = bench_make_buf(e, (size_t)t * 8, pos);
    s->eo = bench_make_buf(e, (size_t)(t * h) * 2, NULL);
    if (hc) {
      s->prev = bench_make_buf(e, (size_t)(t * hc * h) * 2, prev);
      s->ho = bench_make_buf(e, (size_t)(t * hc * h) * 2, NULL);
    }
  }
  free(emb), free(prev), free(w), free(pos);
  if (!s->emb || !s->w || !s->pos || !s->eo || (hc && (!s->prev || !s->ho))) return -1;
  const int64_t es[2] = {t, h}, hs[3] = {t, hc, h};
  s->temb = dsa_tensor_make(s->emb, 0, DSA_BF16, 2, es);
  s->teo = dsa_tensor_make(s->eo, 0, DSA_BF16, 2, es);
  s->tpos = dsa_tensor_make(s->pos, 0, DSA_I64, 1, &t);
  s->tw = dsa_tensor_make(s->w, 0, DSA_F32, 1, &h);
  if (hc) {
    s->tprev = dsa_tensor_make(s->prev, 0, DSA_BF16, 3, hs);
    s->tho = dsa_tensor_make(s->ho, 0, DSA_BF16, 3, hs);
  }
  return 0;
}

static int mn_run(bench_env *e, void *st, cl_event *done) {
  mn_state *s = st;
  dsa_events ev = {0, NULL, done};
  if (s->head)
    DSA_TRY(dsa_mtp_shared_head_rmsnorm(e->q, &s->temb, &s->tw, &s->teo, NULL, &ev));
  else
    DSA_TRY(dsa_mtp_input_rmsnorm(e->q, &s->temb, &s->tpos, &s->tprev, &s->tw, &s->tw, &s->teo,
                                  &s->tho, NULL, &ev));
  return 0;
}

static void mn_teardown(void *st) {
  mn_state *s = st;
  if (!s) return;
  bench_free_buf(&s->emb), bench_free_buf(&s->pos), bench_free_buf(&s->prev);
  bench_free_buf(&s->w), bench_free_buf(&s->eo), bench_free_buf(&s->ho);
  free(s);
}

/* Rows read and written once (the second pass's re-read hits the cache),
 * weights, positions. */
static double mn_bytes(const int64_t *p) {
  const double t = (double)p[0], h = (double)p[1], hc = (double)p[2];
  return 2 * t * (hc + 1) * h * 2 + (hc ? 2 : 1) * h * 4 + (hc ? t * 8 : 0);
}

#define MN_IN(t, h, qt)                                                                  \
  {"mtp_input_rmsnorm", "T=%lld H=%lld HC=%lld", {t, h, MN_HC}, {qt, h, MN_HC}, mn_setup, \
   mn_run, mn_teardown, mn_bytes, bench_no_flops}
#define MN_HEAD(t, h, qt)                                                            \
  {"mtp_shared_head_rmsnorm", "T=%lld H=%lld", {t, h, 0}, {qt, h, 0}, mn_setup, mn_run, \
   mn_teardown, mn_bytes, bench_no_flops}

const bench_op bench_ops_mtp_norm[] = {
    MN_IN(64, 4096, 8),     MN_IN(256, 4096, 16),   MN_IN(4096, 4096, 32),
    MN_IN(64, 7168, 8),     MN_IN(256, 7168, 16),   MN_IN(4096, 7168, 32),
    MN_HEAD(64, 4096, 8),   MN_HEAD(256, 4096, 16), MN_HEAD(4096, 4096, 32),
    MN_HEAD(64, 7168, 8),   MN_HEAD(256, 7168, 16), MN_HEAD(4096, 7168, 32),
    {0},
};
