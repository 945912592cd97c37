/* Sparse MLA decode (fused and two-stage): the case description (cases.h). */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

#define DIM 512
#define TOKEN_DATA 576 /* 448 e4m3 NoPE bytes, 64 bf16 RoPE values */
#define TOKEN_BYTES 584

/* The two-stage decode's workspace: bytes [0, n) of m as a u8 tensor. */
#define WS_BYTES(m, n)                                                                 \
  (&(dsa_tensor){.mem = (m), .offset = 0, .dtype = DSA_U8, .ndim = 1,                  \
                 .shape = {(int64_t)(n)}, .stride = {1}})


int case_attn_cmp(const uint16_t *got, const float *lse, const case_attn_want *want, int64_t rows,
                  const char *what, char *msg, size_t msz) {
  double d2 = 0, r2 = 0;
  for (int64_t i = 0; i < rows * DIM; i++) {
    const double g = case_bf16_f(got[i]), w = want->out[i], d = fabs(g - w);
    if (!(d <= 1e-2 * fmax(1.0, fabs(w)))) {
      snprintf(msg, msz, "%s: out first difference at [%lld, %lld]: got %.6g, want %.6g", what,
               (long long)(i / DIM), (long long)(i % DIM), g, w);
      return 1;
    }
    d2 += (g - w) * (g - w), r2 += w * w;
  }
  const double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
  if (!(rel <= 4e-3)) {
    snprintf(msg, msz, "%s: out relative L2 error %.3g > 4e-3", what, rel);
    return 1;
  }
  for (int64_t r = 0; lse && r < rows; r++) {
    const double g = lse[r], w = want->lse[r];
    const int ok = isinf(w) ? (isinf(g) && (g < 0) == (w < 0)) : fabs(g - w) <= 1e-4;
    if (!ok) {
      snprintf(msg, msz, "%s: lse first difference at [%lld]: got %.9g, want %.9g", what,
               (long long)r, g, w);
      return 1;
    }
  }
  return 0;
}

/* ---- generators ------------------------------------------------------------- */

static int set_alloc(case_mla_set *s, int64_t t, int with_cache) {
  s->cache = with_cache ? case_alloc((size_t)(s->nb * s->stride)) : NULL;
  s->idx = case_alloc((size_t)(t * s->k) * 4 + 4);
  s->lens = case_alloc((size_t)t * 4 + 4);
  return (s->cache || !with_cache) && s->idx && s->lens ? 0 : -1;
}

/* A random valid cache: per token finite e4m3 NoPE bytes, RoPE bf16 in
 * [-1, 1], ue8m0 scales 2^-4 .. 2^-1 (NoPE values about 2^-7 .. 2^1, as
 * quantized rows of [-1, 1]; byte 7 zero, as the layout has it). */
static void random_cache(case_mla_set *s, uint64_t *rng) {
  for (int64_t blk = 0; blk < s->nb; blk++) {
    uint8_t *base = s->cache + blk * s->stride;
    for (int32_t t = 0; t < s->bs; t++) {
      uint8_t *data = base + (int64_t)t * TOKEN_DATA, *sc = base + (int64_t)s->bs * TOKEN_DATA + t * 8;
      for (int i = 0; i < 448; i++)
        data[i] = (uint8_t)((case_rnd(rng, 2) ? 0x80 : 0) | (0x20 + case_rnd(rng, 0x30)));
      for (int i = 0; i < 64; i++) {
        const uint16_t v = case_bf16((float)case_uniform(rng, -1, 1));
        memcpy(data + 448 + 2 * i, &v, 2);
      }
      for (int i = 0; i < 7; i++) sc[i] = (uint8_t)(123 + case_rnd(rng, 4));
      sc[7] = 0;
    }
  }
}

static void random_slots(case_mla_set *s, uint64_t *rng, int64_t t, int bad) {
  const int64_t range = s->nb * s->bs;
  for (int64_t i = 0; i < t; i++) {
    for (int64_t j = 0; j < s->k; j++) {
      const int64_t r = case_rnd(rng, 20);
      s->idx[i * s->k + j] =
          (int32_t)(r == 0 ? -1 : r == 1 && bad ? range + case_rnd(rng, 3) : case_rnd(rng, range));
    }
    s->lens[i] = (int32_t)(case_rnd(rng, 4) == 0 ? s->k : case_rnd(rng, s->k + 1));
  }
}

static int dec_alloc(case_mla_decode *c) {
  c->owned = 1;
  c->q = case_alloc((size_t)(c->t * c->h * DIM) * 2);
  c->sink = case_alloc((size_t)c->h * 4);
  return c->q && c->sink ? 0 : -1;
}

int case_mla_decode_gen_check(case_mla_decode *c, uint64_t *rng) {
  c->has1 = c->s1.k >= 0, c->has2 = c->s2.k >= 0;
  if (dec_alloc(c)) return -1;
  for (int64_t i = 0; i < c->t * c->h * DIM; i++) c->q[i] = case_bf16((float)case_uniform(rng, -2, 2));
  for (int64_t i = 0; i < c->h; i++) c->sink[i] = (float)case_uniform(rng, -3, 3);
  case_mla_set *sets[2] = {&c->s1, &c->s2};
  for (int k = 0; k < 2; k++) {
    case_mla_set *s = sets[k];
    if (!(k ? c->has2 : c->has1)) continue;
    s->stride = (int64_t)s->bs * TOKEN_BYTES;
    if (set_alloc(s, c->t, 1)) return -1;
    random_cache(s, rng);
    random_slots(s, rng, c->t, k == 0 && c->bad);
  }
  return 0;
}

int case_mla_decode_gen_bench(case_mla_decode *c) {
  c->has1 = c->has2 = 1;
  c->s1.bs = c->s2.bs = 64;
  c->s1.stride = c->s2.stride = CASE_MLA_BENCH_STRIDE;
  c->s1.cache_fill = 0x3c; /* e4m3 1.5 values, scale byte 60 (finite), rope bf16 0x3c3c */
  c->s2.shares_cache = 1, c->s2.nb = c->s1.nb;
  if (dec_alloc(c) || set_alloc(&c->s1, c->t, 0) || set_alloc(&c->s2, c->t, 0)) return -1;
  uint64_t seed = 0x5eed4001u; /* the rows' data since they were written */
  const uint64_t cap = (uint64_t)(c->s1.nb * 64);
  case_mla_set *sets[2] = {&c->s1, &c->s2};
  for (int k = 0; k < 2; k++) {
    for (int64_t i = 0; i < c->t * sets[k]->k; i++)
      sets[k]->idx[i] = (int32_t)(rng64_next(&seed) % cap);
    for (int64_t i = 0; i < c->t; i++) sets[k]->lens[i] = (int32_t)sets[k]->k;
  }
  for (int64_t i = 0; i < c->t * c->h * DIM; i++)
    c->q[i] = case_bf16((float)case_uniform(&seed, -1.0, 1.0));
  for (int64_t i = 0; i < c->h; i++) c->sink[i] = (float)case_uniform(&seed, -1.0, 1.0);
  return 0;
}

/* ---- device ----------------------------------------------------------------- */

static int set_upload(const case_dev *d, case_mla_set *s, const case_mla_set *main_set,
                      int64_t t) {
  s->mc = s->shares_cache ? NULL : case_buf(d, (size_t)(s->nb * s->stride), s->cache, s->cache_fill);
  s->mi = case_buf(d, (size_t)(t * s->k) * 4, s->idx, 0);
  s->ml = case_buf(d, (size_t)t * 4, s->lens, 0);
  if ((!s->shares_cache && !s->mc) || !s->mi || !s->ml) return 1;
  s->pc = (dsa_paged_cache){.mem = s->shares_cache ? main_set->mc : s->mc, .offset = 0,
                            .num_blocks = s->nb, .block_size = s->bs, .block_stride = s->stride,
                            .format = DSA_CACHE_MLA_FP8};
  s->ti = dsa_tensor_make(s->mi, 0, DSA_I32, 2, (int64_t[]){t, s->k});
  s->tl = dsa_tensor_make(s->ml, 0, DSA_I32, 1, &t);
  s->set = (dsa_sparse_index_set){&s->pc, &s->ti, &s->tl};
  return 0;
}

int case_mla_decode_upload(const case_dev *d, case_mla_decode *c, unsigned char out_fill,
                           char *msg, size_t msz) {
  const int64_t t = c->t, h = c->h;
  int bad = (c->has1 && set_upload(d, &c->s1, NULL, t)) ||
            (c->has2 && set_upload(d, &c->s2, &c->s1, t));
  c->mq = case_buf(d, (size_t)(t * h * DIM) * 2, c->q, 0);
  c->ms = c->sink ? case_buf(d, (size_t)h * 4, c->sink, 0) : NULL;
  c->mo = case_buf(d, (size_t)(t * h * DIM) * 2, NULL, out_fill);
  c->me = c->no_lse ? NULL : case_buf(d, (size_t)(t * h) * 4, NULL, out_fill);
  if (c->two) {
    c->mwb = dsa_sparse_mla_decode_workspace_size(t, c->has1 ? c->s1.k : 0,
                                                  c->has2 ? c->s2.k : 0);
    c->mw = c->mwb ? case_buf(d, c->mwb, NULL, out_fill) : NULL;
    bad |= !c->mw;
  }
  if (bad || !c->mq || (c->sink && !c->ms) || !c->mo || (!c->no_lse && !c->me)) {
    snprintf(msg, msz, "sparse MLA decode: device buffers for T=%lld H=%lld", (long long)t,
             (long long)h);
    return 1;
  }
  const int64_t qs[3] = {t, h, DIM};
  c->tq = dsa_tensor_make(c->mq, 0, DSA_BF16, 3, qs);
  if (c->sink) c->ts = dsa_tensor_make(c->ms, 0, DSA_F32, 1, &h);
  c->to = dsa_tensor_make(c->mo, 0, DSA_BF16, 3, qs);
  if (!c->no_lse) c->te = dsa_tensor_make(c->me, 0, DSA_F32, 2, (int64_t[]){t, h});
  return 0;
}

dsa_status case_mla_decode_call(dsa_queue *q, const case_mla_decode *c, const dsa_events *ev) {
  dsa_sparse_params p;
  dsa_sparse_params_default(&p);
  if (c->scale != 0) p.softmax_scale = c->scale;
  const dsa_sparse_index_set *s1 = c->has1 ? &c->s1.set : NULL, *s2 = c->has2 ? &c->s2.set : NULL;
  const dsa_tensor *sink = c->sink ? &c->ts : NULL, *lse = c->no_lse ? NULL : &c->te;
  return c->two ? dsa_sparse_mla_decode_two_stage(q, &c->tq, s1, s2, sink, &c->to, lse,
                                                  WS_BYTES(c->mw, c->mwb), &p, ev)
                : dsa_sparse_mla_decode(q, &c->tq, s1, s2, sink, &c->to, lse, &p, ev);
}

int case_mla_decode_check(const case_dev *d, const case_mla_decode *c, const case_attn_want *want,
                          char *msg, size_t msz) {
  const int64_t rows = c->t * c->h;
  uint16_t *got = case_alloc((size_t)(rows * DIM) * 2);
  float *lse = case_alloc((size_t)rows * 4);
  char what[160];
  snprintf(what, sizeof what, "%s T=%lld H=%lld K1=%lld K2=%lld nb=%lld bs=%d",
           c->two ? "two-stage" : "fused", (long long)c->t, (long long)c->h,
           (long long)(c->has1 ? c->s1.k : -1), (long long)(c->has2 ? c->s2.k : -1),
           (long long)c->s1.nb, c->s1.bs);
  int rc = !got || !lse ? (snprintf(msg, msz, "%s: out of memory", what), 1)
                        : case_read(d, c->mo, (size_t)(rows * DIM) * 2, got, msg, msz) ||
                              case_read(d, c->me, (size_t)rows * 4, lse, msg, msz) ||
                              case_attn_cmp(got, lse, want, rows, what, msg, msz);
  free(got), free(lse);
  return rc;
}

static void set_free(case_mla_set *s, int owned) {
  if (owned) free(s->cache), free(s->idx), free(s->lens);
  case_release(&s->mc), case_release(&s->mi), case_release(&s->ml);
}

void case_mla_decode_free(case_mla_decode *c) {
  set_free(&c->s1, c->owned), set_free(&c->s2, c->owned);
  if (c->owned) free(c->q), free(c->sink);
  case_release(&c->mq), case_release(&c->ms), case_release(&c->mo), case_release(&c->me);
  case_release(&c->mw);
}

/* The useful traffic (same for both forms; two-stage also writes and re-reads
 * its bf16 workspace): K fp8 entries per token, indices, lengths, sink, q, out. */
double case_mla_decode_bytes(const int64_t *p) {
  const double t = (double)p[0], h = (double)p[1], k = (double)(p[2] + p[3]);
  return t * k * (TOKEN_BYTES + 4) + t * 8 + h * 4 + 2 * t * h * DIM * 2;
}

/* QK and PV: 2 * 2 * T * H * K * 512. */
double case_mla_decode_flops(const int64_t *p) {
  return 4.0 * (double)p[0] * (double)p[1] * (double)(p[2] + p[3]) * DIM;
}

CASE_OPS(mla_decode, case_attn_want, "dsa_sparse_mla_decode")
