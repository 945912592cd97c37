/* dsacl-bench rows for inverse RoPE + block-scaled FP8 quantization of the
 * attention output (dsa_output_inv_rope_fp8_quant) at DeepSeek-V4 shapes:
 * decode (T = 64..256) and prefill (T = 4096) with 64 heads in 8 groups
 * (V4-Flash) and 128 heads in 16 groups (V4-Pro), f32 and packed scales. */
#include "bench.h"

#include <math.h>
#include <stdlib.h>

#define OQ_DIM 512
#define OQ_ROPE 64
#define OQ_POS 65536 /* cos_sin rows */

/* p = {T, H, G, packed}. */
typedef struct oq_state {
  cl_mem o, pos, cs, out, sc;
  dsa_tensor to, tpos, tcs, tout, tsc;
} oq_state;

static int64_t oq_tp(int64_t t) { return (t + 3) / 4 * 4; }

static int oq_setup(bench_env *e, const int64_t *p, void **out) {
  oq_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  const int64_t t = p[0], h = p[1], g = p[2], packed = p[3], hpg = h / g, tp = oq_tp(t);
  uint64_t seed = 0x5eed0a11u;
  uint16_t *ov = bench_random_bf16(&seed, (size_t)(t * h * OQ_DIM), -4.0f, 4.0f);
  float *cs = malloc((size_t)OQ_POS * OQ_ROPE * sizeof *cs);
  int64_t *pos = malloc((size_t)t * sizeof *pos);
  if (ov && cs && pos) {
    for (int64_t r = 0; r < OQ_POS; r++)
      for (int i = 0; i < OQ_ROPE / 2; i++) {
        const double a = (double)r * pow(10000.0, -2.0 * i / OQ_ROPE);
        cs[r * OQ_ROPE + i] = (float)cos(a);
        cs[r * OQ_ROPE + OQ_ROPE / 2 + i] = (float)sin(a);
      }
    for (int64_t i = 0; i < t; i++) pos[i] = (int64_t)(bench_rng_next(&seed) % OQ_POS);
    s->o = bench_make_buf(e, (size_t)(t * h * OQ_DIM) * 2, ov);
    s->cs = bench_make_buf(e, (size_t)OQ_POS * OQ_ROPE * 4, cs);
    s->pos = bench_make_buf(e, (size_t)t * 8, pos);
  }
  free(ov), free(cs), free(pos);
  const int64_t kk = packed ? hpg : 4 * hpg;
  if (!s->o || !s->cs || !s->pos ||
      !(s->out = bench_make_buf(e, (size_t)(t * h * OQ_DIM), NULL)) ||
      !(s->sc = bench_make_buf(e, (size_t)(g * kk * tp) * 4, NULL)))
    return -1;
  int64_t os[3] = {t, h, OQ_DIM}, cshape[2] = {OQ_POS, OQ_ROPE}, fs[3] = {g, t, hpg * OQ_DIM},
          ss[3] = {g, kk, tp};
  s->to = dsa_tensor_make(s->o, 0, DSA_BF16, 3, os);
  s->tpos = dsa_tensor_make(s->pos, 0, DSA_I64, 1, &t);
  s->tcs = dsa_tensor_make(s->cs, 0, DSA_F32, 2, cshape);
  s->tout = dsa_tensor_make(s->out, 0, DSA_E4M3, 3, fs);
  s->tsc = dsa_tensor_make(s->sc, 0, packed ? DSA_I32 : DSA_F32, 3, ss);
  return 0;
}

static int oq_run(bench_env *e, void *st, cl_event *done) {
  oq_state *s = st;
  dsa_events ev = {0, NULL, done};
  DSA_TRY(dsa_output_inv_rope_fp8_quant(e->q, &s->to, &s->tpos, &s->tcs, &s->tout, &s->tsc, &ev));
  return 0;
}

static void oq_teardown(void *st) {
  oq_state *s = st;
  if (!s) return;
  bench_free_buf(&s->o), bench_free_buf(&s->pos), bench_free_buf(&s->cs);
  bench_free_buf(&s->out), bench_free_buf(&s->sc);
  free(s);
}

/* Read: o, positions, the cos_sin rows; written: the e4m3 output and the
 * scales (padding included). */
static double oq_bytes(const int64_t *p) {
  const double t = (double)p[0], h = (double)p[1];
  const double sc = p[3] ? (double)oq_tp(p[0]) * h : (double)oq_tp(p[0]) * h * 4;
  return t * h * OQ_DIM * 2 + t * (8 + OQ_ROPE * 4) + t * h * OQ_DIM + sc * 4;
}

#define OQ_OP(t, h, g, pk, qt)                                                                   \
  {"output_inv_rope_fp8_quant", "T=%lld H=%lld G=%lld packed=%lld", {t, h, g, pk},             \
   {qt, h, g, pk}, oq_setup, oq_run, oq_teardown, oq_bytes, bench_no_flops}

const bench_op bench_ops_output_quant[] = {
    OQ_OP(64, 64, 8, 0, 8),     OQ_OP(256, 64, 8, 0, 16),    OQ_OP(64, 128, 16, 1, 8),
    OQ_OP(256, 128, 16, 1, 16),  OQ_OP(4096, 64, 8, 0, 32),  OQ_OP(4096, 128, 16, 1, 32),
    {0},
};
