/* Indexer Q RoPE + quantization: the case description (cases.h). */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"


/* bf16 values in 32-wide blocks of random scale 2^-15 .. 2^14. */
static void block_bf16(uint64_t *rng, uint16_t *v, int64_t n) {
  for (int64_t b = 0; b < n; b += 32) {
    const double s = ldexp(1.0, (int)case_rnd(rng, 30) - 15);
    for (int64_t i = b; i < n && i < b + 32; i++)
      v[i] = case_bf16((float)(case_uniform(rng, -1, 1) * s));
  }
}

static int q_alloc(case_q_quant *c) {
  c->owned = 1;
  c->pos = case_alloc((size_t)c->t * 8);
  c->q = case_alloc((size_t)(c->t * c->h * c->d) * 2);
  c->cs = case_alloc((size_t)(c->np * c->r + 1) * 4);
  c->w = case_alloc((size_t)(c->t * c->h) * (c->w_bf16 ? 2 : 4));
  if (!c->pos || !c->q || !c->cs || !c->w) return -1;
  for (int64_t p = 0; p < c->np; p++)
    for (int64_t i = 0; i < c->r / 2; i++) {
      const double th = (double)p * pow(10000.0, -2.0 * (double)i / (double)c->r);
      c->cs[p * c->r + i] = (float)cos(th), c->cs[p * c->r + c->r / 2 + i] = (float)sin(th);
    }
  return 0;
}

int case_q_quant_gen_check(case_q_quant *c, uint64_t *rng) {
  if (q_alloc(c)) return -1;
  block_bf16(rng, c->q, c->t * c->h * c->d);
  for (int64_t t = 0; t < c->t; t++)
    c->pos[t] = c->bad && case_rnd(rng, 4) == 0 ? c->np + case_rnd(rng, 3) : case_rnd(rng, c->np);
  for (int64_t i = 0; i < c->t * c->h; i++) {
    const float v = (float)case_uniform(rng, -2, 2);
    if (c->w_bf16)
      ((uint16_t *)c->w)[i] = case_bf16(v);
    else
      ((float *)c->w)[i] = v;
  }
  return 0;
}

int case_q_quant_gen_bench(case_q_quant *c) {
  c->d = 128, c->r = 64, c->w_bf16 = 1;
  if (q_alloc(c)) return -1;
  uint64_t seed = 0x5eed2001u; /* the rows' data since they were written */
  for (int64_t i = 0; i < c->t * c->h * c->d; i++) c->q[i] = case_bf16((float)case_uniform(&seed, -4, 4));
  for (int64_t i = 0; i < c->t * c->h; i++)
    ((uint16_t *)c->w)[i] = case_bf16((float)case_uniform(&seed, -1, 1));
  for (int64_t i = 0; i < c->t; i++) c->pos[i] = (int64_t)(rng64_next(&seed) % (uint64_t)c->np);
  return 0;
}

int case_q_quant_upload(const case_dev *d, case_q_quant *c, unsigned char out_fill, char *msg,
                        size_t msz) {
  const int64_t t = c->t, h = c->h, qd = c->mx ? c->d / 2 : c->d;
  c->mp = case_buf(d, (size_t)t * 8, c->pos, 0);
  c->mq = case_buf(d, (size_t)(t * h * c->d) * 2, c->q, 0);
  c->mc = case_buf(d, (size_t)(c->np * c->r) * 4, c->cs, 0);
  c->mw = case_buf(d, (size_t)(t * h) * (c->w_bf16 ? 2 : 4), c->w, 0);
  c->moq = case_buf(d, (size_t)(t * h * qd), NULL, out_fill);
  c->mos = c->mx ? case_buf(d, (size_t)(t * h * (c->d / 32)), NULL, out_fill) : NULL;
  c->mow = case_buf(d, (size_t)(t * h) * 4, NULL, out_fill);
  if (!c->mp || !c->mq || !c->mc || !c->mw || !c->moq || (c->mx && !c->mos) || !c->mow) {
    snprintf(msg, msz, "indexer q quant: device buffers for T=%lld H=%lld", (long long)t,
             (long long)h);
    return 1;
  }
  c->tp = dsa_tensor_make(c->mp, 0, DSA_I64, 1, &t);
  c->tq = dsa_tensor_make(c->mq, 0, DSA_BF16, 3, (int64_t[]){t, h, c->d});
  c->tc = dsa_tensor_make(c->mc, 0, DSA_F32, 2, (int64_t[]){c->np, c->r});
  c->tw = dsa_tensor_make(c->mw, 0, c->w_bf16 ? DSA_BF16 : DSA_F32, 2, (int64_t[]){t, h});
  c->toq = dsa_tensor_make(c->moq, 0, c->mx ? DSA_E2M1X2 : DSA_E4M3, 3, (int64_t[]){t, h, qd});
  if (c->mx) c->tos = dsa_tensor_make(c->mos, 0, DSA_UE8M0, 3, (int64_t[]){t, h, c->d / 32});
  c->tow = dsa_tensor_make(c->mow, 0, DSA_F32, 2, (int64_t[]){t, h});
  return 0;
}

dsa_indexer_q_quant_params case_q_quant_params(const case_q_quant *c) {
  dsa_indexer_q_quant_params p;
  dsa_indexer_q_quant_params_default(&p);
  if (c->softmax_scale != 0) p.softmax_scale = c->softmax_scale;
  if (c->head_scale != 0) p.head_scale = c->head_scale;
  p.e2m1 = c->e2m1;
  return p;
}

dsa_status case_q_quant_call(dsa_queue *q, const case_q_quant *c, const dsa_events *ev) {
  const dsa_indexer_q_quant_params p = case_q_quant_params(c);
  return dsa_indexer_q_quant(q, &c->tp, &c->tq, &c->tc, &c->tw, &c->toq, c->mx ? &c->tos : NULL,
                             &c->tow, &p, ev);
}

int case_q_quant_check(const case_dev *d, const case_q_quant *c, const case_q_quant_want *want,
                       char *msg, size_t msz) {
  const int64_t th = c->t * c->h, qd = c->mx ? c->d / 2 : c->d;
  char what[128], wq[160], ws[160], ww[160];
  snprintf(what, sizeof what, "T=%lld H=%lld D=%lld R=%lld mx=%d mode=%d", (long long)c->t,
           (long long)c->h, (long long)c->d, (long long)c->r, c->mx, (int)c->e2m1);
  snprintf(wq, sizeof wq, "%s out_q", what);
  snprintf(ws, sizeof ws, "%s out_scales", what);
  snprintf(ww, sizeof ww, "%s out_weights", what);
  return case_read_cmp(d, c->moq, (size_t)(th * qd), want->q, 1, wq, msg, msz) ||
         (c->mx &&
          case_read_cmp(d, c->mos, (size_t)(th * (c->d / 32)), want->scales, 1, ws, msg, msz)) ||
         case_read_cmp(d, c->mow, (size_t)th * 4, want->weights, 4, ww, msg, msz);
}

void case_q_quant_free(case_q_quant *c) {
  if (c->owned) free(c->pos), free(c->q), free(c->cs), free(c->w);
  case_release(&c->mp), case_release(&c->mq), case_release(&c->mc), case_release(&c->mw);
  case_release(&c->moq), case_release(&c->mos), case_release(&c->mow);
}

/* Read: q, bf16 weights, positions, the cos_sin rows read; written: q,
 * scales, weights (D = 128, R = 64). */
double case_q_quant_bytes(const int64_t *p) {
  const double t = (double)p[0], th = (double)p[0] * (double)p[1];
  const double wq = p[3] ? th * (128 / 2 + 128 / 32) : th * 128;
  return th * 128 * 2 + th * 2 + t * 8 + t * 64 * 4 + wq + th * 4;
}

double case_q_quant_flops(const int64_t *p) {
  (void)p;
  return 0; /* memory-bound */
}

CASE_OPS(q_quant, case_q_quant_want, "dsa_indexer_q_quant")

/* ---- K insert ----------------------------------------------------------------- */

static int k_alloc(case_k_insert *c, int with_cache) {
  c->owned = 1;
  c->k = case_alloc((size_t)c->n * 256);
  c->slots = case_alloc((size_t)c->n * 8);
  c->cache = with_cache ? case_alloc((size_t)(c->nb * c->stride)) : NULL;
  return c->k && c->slots && (c->cache || !with_cache) ? 0 : -1;
}

int case_k_insert_gen_check(case_k_insert *c, uint64_t *rng) {
  c->stride = (int64_t)c->bs * (c->mx ? 68 : 132) + 4 * case_rnd(rng, 3);
  if (k_alloc(c, 1)) return -1;
  case_fill_bytes(rng, c->cache, (size_t)(c->nb * c->stride));
  block_bf16(rng, c->k, c->n * 128);
  return case_insert_slots(rng, c->slots, c->n, c->nb * c->bs, 3);
}

int case_k_insert_gen_bench(case_k_insert *c) {
  c->bs = 64, c->stride = 8640; /* 64 * 132 rounded up to a multiple of 576 */
  c->cache_fill = 0;
  const int64_t cap = c->nb * c->bs;
  int64_t *perm = case_alloc((size_t)cap * 8);
  if (!perm || k_alloc(c, 0)) return free(perm), -1;
  uint64_t seed = 0x5eed2002u; /* the rows' data since they were written */
  for (int64_t i = 0; i < c->n * 128; i++) c->k[i] = case_bf16((float)case_uniform(&seed, -4, 4));
  /* The first n of a random permutation of the slots (the whole shuffle:
   * the stream the rows always drew). */
  for (int64_t i = 0; i < cap; i++) perm[i] = i;
  for (int64_t i = 0; i < c->n; i++) {
    const int64_t j = i + (int64_t)(rng64_next(&seed) % (uint64_t)(cap - i)), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  memcpy(c->slots, perm, (size_t)c->n * 8);
  free(perm);
  return 0;
}

int case_k_insert_upload(const case_dev *d, case_k_insert *c, unsigned char out_fill, char *msg,
                         size_t msz) {
  (void)out_fill; /* the output is the cache, which starts as given */
  c->mk = case_buf(d, (size_t)c->n * 256, c->k, 0);
  c->ms = case_buf(d, (size_t)c->n * 8, c->slots, 0);
  c->mc = case_buf(d, (size_t)(c->nb * c->stride), c->cache, c->cache_fill);
  if (!c->mk || !c->ms || !c->mc) {
    snprintf(msg, msz, "indexer k insert: device buffers for n=%lld nb=%lld", (long long)c->n,
             (long long)c->nb);
    return 1;
  }
  c->pc = (dsa_paged_cache){.mem = c->mc, .offset = 0, .num_blocks = c->nb, .block_size = c->bs,
                            .block_stride = c->stride,
                            .format = c->mx ? DSA_CACHE_INDEXER_MXFP4 : DSA_CACHE_INDEXER_FP8};
  c->tk = dsa_tensor_make(c->mk, 0, DSA_BF16, 2, (int64_t[]){c->n, 128});
  c->ts = dsa_tensor_make(c->ms, 0, DSA_I64, 1, &c->n);
  return 0;
}

dsa_status case_k_insert_call(dsa_queue *q, const case_k_insert *c, const dsa_events *ev) {
  const dsa_indexer_k_insert_params p = {.e2m1 = c->e2m1};
  return dsa_indexer_k_insert(q, &c->tk, &c->ts, &c->pc, &p, ev);
}

int case_k_insert_check(const case_dev *d, const case_k_insert *c, const uint8_t *want, char *msg,
                        size_t msz) {
  char what[128];
  snprintf(what, sizeof what, "k_insert n=%lld nb=%lld bs=%d mx=%d mode=%d cache",
           (long long)c->n, (long long)c->nb, c->bs, c->mx, (int)c->e2m1);
  return case_read_cmp(d, c->mc, (size_t)(c->nb * c->stride), want, 1, what, msg, msz);
}

void case_k_insert_free(case_k_insert *c) {
  if (c->owned) free(c->k), free(c->slots), free(c->cache);
  case_release(&c->mk), case_release(&c->ms), case_release(&c->mc);
}

/* k read, slots read, 128 e4m3 + a 4-byte scale written per token. */
double case_k_insert_bytes(const int64_t *p) { return (double)p[0] * (128 * 2 + 8 + 128 + 4); }

double case_k_insert_flops(const int64_t *p) {
  (void)p;
  return 0; /* memory-bound */
}

CASE_OPS(k_insert, uint8_t, "dsa_indexer_k_insert")

/* ---- K gather ----------------------------------------------------------------- */

static int64_t kg_row_bytes(const case_k_gather *c) { return c->mx ? 64 : 128; }

int case_k_gather_gen_check(case_k_gather *c, uint64_t *rng) {
  c->owned = 1;
  c->stride = (int64_t)c->bs * (c->mx ? 68 : 132) + 4 * case_rnd(rng, 3);
  c->cache = case_alloc((size_t)(c->nb * c->stride));
  c->table = case_alloc((size_t)(c->r * c->w) * 4);
  c->cu = case_alloc((size_t)(c->r + 1) * 4);
  if (!c->cache || !c->table || !c->cu) return -1;
  case_fill_bytes(rng, c->cache, (size_t)(c->nb * c->stride));
  for (int64_t i = 0; i < c->r * c->w; i++) {
    const int64_t x = case_rnd(rng, 20);
    c->table[i] = (int32_t)(x == 0 ? -1 : x == 1 ? c->nb + case_rnd(rng, 2) : case_rnd(rng, c->nb));
  }
  c->cu[0] = 0;
  for (int64_t i = 0; i < c->r; i++) c->cu[i + 1] = c->cu[i] + (int32_t)case_rnd(rng, c->w * c->bs + 1);
  c->total = c->cu[c->r] + case_rnd(rng, 3);
  const size_t ob = (size_t)(c->total * kg_row_bytes(c)), sb = (size_t)c->total * 4;
  c->out_in = case_alloc(ob);
  c->sc_in = case_alloc(sb);
  if (!c->out_in || !c->sc_in) return -1;
  case_fill_bytes(rng, c->out_in, ob), case_fill_bytes(rng, c->sc_in, sb);
  return 0;
}

int case_k_gather_gen_bench(case_k_gather *c) {
  c->owned = 1;
  c->mx = 0, c->bs = 64, c->stride = 8640, c->cache_fill = 0x3c;
  const int64_t t = c->total / c->r;
  c->w = (t + c->bs - 1) / c->bs;
  if (c->r * c->w > c->nb) return -1; /* the pool too small */
  uint64_t seed = 0x5eed2003u;
  int64_t *blocks = case_random_distinct(&seed, c->nb, c->r * c->w);
  c->table = case_alloc((size_t)(c->r * c->w) * 4);
  c->cu = case_alloc((size_t)(c->r + 1) * 4);
  if (!blocks || !c->table || !c->cu) return free(blocks), -1;
  for (int64_t i = 0; i < c->r * c->w; i++) c->table[i] = (int32_t)blocks[i];
  for (int64_t i = 0; i <= c->r; i++) c->cu[i] = (int32_t)(i * t);
  free(blocks);
  return 0;
}

int case_k_gather_upload(const case_dev *d, case_k_gather *c, unsigned char out_fill, char *msg,
                         size_t msz) {
  const int64_t kb = kg_row_bytes(c);
  c->mc = case_buf(d, (size_t)(c->nb * c->stride), c->cache, c->cache_fill);
  c->mcu = case_buf(d, (size_t)(c->r + 1) * 4, c->cu, 0);
  c->mbt = case_buf(d, (size_t)(c->r * c->w) * 4, c->table, 0);
  c->mo = case_buf(d, (size_t)(c->total * kb), c->out_in, out_fill);
  c->ms = case_buf(d, (size_t)c->total * 4, c->sc_in, out_fill);
  if (!c->mc || !c->mcu || !c->mbt || !c->mo || !c->ms) {
    snprintf(msg, msz, "indexer k gather: device buffers for r=%lld w=%lld total=%lld",
             (long long)c->r, (long long)c->w, (long long)c->total);
    return 1;
  }
  c->pc = (dsa_paged_cache){.mem = c->mc, .offset = 0, .num_blocks = c->nb, .block_size = c->bs,
                            .block_stride = c->stride,
                            .format = c->mx ? DSA_CACHE_INDEXER_MXFP4 : DSA_CACHE_INDEXER_FP8};
  c->tcu = dsa_tensor_make(c->mcu, 0, DSA_I32, 1, (int64_t[]){c->r + 1});
  c->tbt = dsa_tensor_make(c->mbt, 0, DSA_I32, 2, (int64_t[]){c->r, c->w});
  c->to = dsa_tensor_make(c->mo, 0, c->mx ? DSA_E2M1X2 : DSA_E4M3, 2, (int64_t[]){c->total, kb});
  c->ts = c->mx ? dsa_tensor_make(c->ms, 0, DSA_UE8M0, 2, (int64_t[]){c->total, 4})
                : dsa_tensor_make(c->ms, 0, DSA_F32, 1, &c->total);
  return 0;
}

dsa_status case_k_gather_call(dsa_queue *q, const case_k_gather *c, const dsa_events *ev) {
  return dsa_indexer_k_gather(q, &c->tcu, &c->tbt, &c->pc, &c->to, &c->ts, NULL, ev);
}

int case_k_gather_check(const case_dev *d, const case_k_gather *c, const case_k_gather_want *want,
                        char *msg, size_t msz) {
  char what[128], w2[160];
  snprintf(what, sizeof what, "k_gather R=%lld W=%lld bs=%d mx=%d", (long long)c->r,
           (long long)c->w, c->bs, c->mx);
  snprintf(w2, sizeof w2, "%s k_out", what);
  if (case_read_cmp(d, c->mo, (size_t)(c->total * kg_row_bytes(c)), want->k, 1, w2, msg, msz))
    return 1;
  snprintf(w2, sizeof w2, "%s k_scale", what);
  return case_read_cmp(d, c->ms, (size_t)c->total * 4, want->scale, 4, w2, msg, msz);
}

void case_k_gather_free(case_k_gather *c) {
  if (c->owned) free(c->cache), free(c->cu), free(c->table), free(c->out_in), free(c->sc_in);
  case_release(&c->mc), case_release(&c->mcu), case_release(&c->mbt), case_release(&c->mo);
  case_release(&c->ms);
}

/* A 132-byte FP8 token read and written per row, the table and lengths read. */
double case_k_gather_bytes(const int64_t *p) {
  const double rows = (double)p[0] * (double)p[1];
  return rows * 132 * 2 + (double)(p[0] * ((p[1] + 63) / 64)) * 4 + (double)(p[0] + 1) * 4;
}

double case_k_gather_flops(const int64_t *p) {
  (void)p;
  return 0; /* memory-bound */
}

CASE_OPS(k_gather, case_k_gather_want, "dsa_indexer_k_gather")
