/* The MLA q-norm + RoPE + KV insert's case description (cases.h). */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

static int qnorm_alloc(case_qnorm *c) {
  c->owned = 1;
  c->q = case_alloc((size_t)(c->t * c->h) * 1024);
  c->kv = case_alloc((size_t)c->t * 1024);
  c->pos = case_alloc((size_t)c->t * 8);
  c->slots = case_alloc((size_t)c->t * 8);
  c->cs = case_alloc((size_t)(c->np * 64) * 4);
  if (!c->q || !c->kv || !c->pos || !c->slots || !c->cs) return -1;
  for (int64_t p = 0; p < c->np; p++)
    for (int i = 0; i < 32; i++) {
      const double th = (double)p * pow(10000.0, -i / 32.0);
      c->cs[p * 64 + i] = (float)cos(th), c->cs[p * 64 + 32 + i] = (float)sin(th);
    }
  return 0;
}

int case_qnorm_gen_check(case_qnorm *c, uint64_t *rng) {
  c->stride = (int64_t)c->bs * CASE_MLA_TOKEN_BYTES;
  const int64_t cap = c->nb * c->bs;
  int64_t *perm = case_alloc((size_t)cap * 8);
  if (!perm || qnorm_alloc(c) || !(c->cache = case_alloc((size_t)(c->nb * c->stride))))
    return free(perm), -1;
  for (int64_t i = 0; i < c->t * c->h; i++) {
    const double sc = ldexp(1.0, (int)case_rnd(rng, 20) - 10);
    for (int d = 0; d < 512; d++)
      c->q[i * 512 + d] = case_bf16((float)(case_uniform(rng, -1, 1) * sc));
  }
  for (int64_t i = 0; i < c->t * 512; i++) c->kv[i] = case_bf16((float)case_uniform(rng, -3, 3));
  for (int64_t i = 0; i < cap; i++) perm[i] = i;
  for (int64_t i = 0; i < c->t; i++) {
    c->pos[i] = c->bad && case_rnd(rng, 6) == 0 ? c->np + case_rnd(rng, 3) : case_rnd(rng, c->np);
    if (i < cap) {
      const int64_t j = i + case_rnd(rng, cap - i), x = perm[i];
      perm[i] = perm[j], perm[j] = x;
    }
    const int64_t r = case_rnd(rng, 10);
    c->slots[i] = i >= cap || r == 0 ? -1 : r == 1 && c->bad ? cap : perm[i];
  }
  free(perm);
  case_fill_bytes(rng, c->cache, (size_t)(c->nb * c->stride));
  return 0;
}

int case_qnorm_gen_bench(case_qnorm *c) {
  c->bs = 64, c->stride = CASE_MLA_BENCH_STRIDE, c->cache_fill = 0;
  if (qnorm_alloc(c)) return -1;
  uint64_t seed = 0x5eed5001u; /* the rows' data since they were written */
  for (int64_t i = 0; i < c->t * c->h * 512; i++)
    c->q[i] = case_bf16((float)case_uniform(&seed, -4, 4));
  for (int64_t i = 0; i < c->t * 512; i++) c->kv[i] = case_bf16((float)case_uniform(&seed, -4, 4));
  int64_t *s = case_random_distinct(&seed, c->nb * c->bs, c->t);
  if (!s) return -1;
  memcpy(c->slots, s, (size_t)c->t * 8);
  free(s);
  for (int64_t i = 0; i < c->t; i++) c->pos[i] = (int64_t)(rng64_next(&seed) % (uint64_t)c->np);
  return 0;
}

dsa_mla_qnorm_rope_kv_insert_params case_qnorm_params(const case_qnorm *c) {
  dsa_mla_qnorm_rope_kv_insert_params p;
  dsa_mla_qnorm_rope_kv_insert_params_default(&p);
  if (c->eps != 0) p.eps = c->eps;
  return p;
}

int case_qnorm_upload(const case_dev *d, case_qnorm *c, unsigned char out_fill, char *msg,
                      size_t msz) {
  const size_t qb = (size_t)(c->t * c->h) * 1024;
  c->mq = case_buf(d, qb, c->q, 0);
  c->mo = c->in_place ? NULL : case_buf(d, qb, NULL, out_fill);
  c->mkv = case_buf(d, (size_t)c->t * 1024, c->kv, 0);
  c->mp = case_buf(d, (size_t)c->t * 8, c->pos, 0);
  c->mcs = case_buf(d, (size_t)(c->np * 64) * 4, c->cs, 0);
  c->msl = case_buf(d, (size_t)c->t * 8, c->slots, 0);
  c->mc = case_buf(d, (size_t)(c->nb * c->stride), c->cache, c->cache_fill);
  if (!c->mq || (!c->in_place && !c->mo) || !c->mkv || !c->mp || !c->mcs || !c->msl || !c->mc) {
    snprintf(msg, msz, "mla qnorm: device buffers for t=%lld h=%lld nb=%lld", (long long)c->t,
             (long long)c->h, (long long)c->nb);
    return 1;
  }
  const int64_t qs[3] = {c->t, c->h, 512};
  c->tq = dsa_tensor_make(c->mq, 0, DSA_BF16, 3, qs);
  if (!c->in_place) c->to = dsa_tensor_make(c->mo, 0, DSA_BF16, 3, qs);
  c->tkv = dsa_tensor_make(c->mkv, 0, DSA_BF16, 2, (int64_t[]){c->t, 512});
  c->tp = dsa_tensor_make(c->mp, 0, DSA_I64, 1, &c->t);
  c->tcs = dsa_tensor_make(c->mcs, 0, DSA_F32, 2, (int64_t[]){c->np, 64});
  c->tsl = dsa_tensor_make(c->msl, 0, DSA_I64, 1, &c->t);
  c->pc = (dsa_paged_cache){.mem = c->mc, .offset = 0, .num_blocks = c->nb, .block_size = c->bs,
                            .block_stride = c->stride, .format = DSA_CACHE_MLA_FP8};
  return 0;
}

dsa_status case_qnorm_call(dsa_queue *q, const case_qnorm *c, const dsa_events *ev) {
  const dsa_mla_qnorm_rope_kv_insert_params p = case_qnorm_params(c);
  return dsa_mla_qnorm_rope_kv_insert(q, &c->tq, &c->tkv, &c->tp, &c->tcs, &c->tsl, &c->pc,
                                      c->in_place ? NULL : &c->to, &p, ev);
}

/* bf16 bit patterns as a monotone integer line (-0 and +0 both 0). */
static int64_t bf16_line(uint16_t h) {
  return (h & 0x8000) ? -(int64_t)(h & 0x7FFF) : (int64_t)h;
}

int case_qnorm_check(const case_dev *d, const case_qnorm *c, const case_qnorm_want *want,
                     char *msg, size_t msz) {
  char what[128];
  snprintf(what, sizeof what, "T=%lld H=%lld nb=%lld bs=%d cache", (long long)c->t,
           (long long)c->h, (long long)c->nb, c->bs);
  if (case_read_cmp(d, c->mc, (size_t)(c->nb * c->stride), want->cache, 1, what, msg, msz))
    return 1;
  const size_t n = (size_t)(c->t * c->h) * 512;
  uint16_t *got = case_alloc(n * 2);
  if (!got) return snprintf(msg, msz, "q_out: out of memory"), 1;
  if (case_read(d, c->in_place ? c->mq : c->mo, n * 2, got, msg, msz)) return free(got), 1;
  size_t off1 = 0, bad = 0, first = 0;
  for (size_t i = 0; i < n; i++) {
    if (got[i] == want->q_out[i]) continue;
    /* q_ulp 0: bit for bit (-0 is not +0); else -0 and +0 agree, as vLLM's
     * comparison allowed. */
    const int64_t e = bf16_line(got[i]) - bf16_line(want->q_out[i]);
    if (want->q_ulp > 0 && e >= -want->q_ulp && e <= want->q_ulp) {
      off1 += e != 0;
    } else if (!bad++) {
      first = i;
    }
  }
  if (bad)
    snprintf(msg, msz,
             "T=%lld H=%lld q_out: %zu values more than %d bf16 ulp off, first at %zu: got "
             "0x%04X want 0x%04X",
             (long long)c->t, (long long)c->h, bad, want->q_ulp, first, got[first],
             want->q_out[first]);
  if (want->off1) *want->off1 = off1;
  free(got);
  return bad != 0;
}

void case_qnorm_free(case_qnorm *c) {
  if (c->owned) free(c->q), free(c->kv), free(c->pos), free(c->slots), free(c->cs), free(c->cache);
  case_release(&c->mq), case_release(&c->mo), case_release(&c->mkv), case_release(&c->mp);
  case_release(&c->mcs), case_release(&c->msl), case_release(&c->mc);
}

/* Read: q, kv, positions, slots, the cos_sin rows read; written: q_out, the
 * cache entries. */
double case_qnorm_bytes(const int64_t *p) {
  const double t = (double)p[0], h = (double)p[1];
  return 2 * t * h * 512 * 2 + t * (512 * 2 + 8 + 8 + 64 * 4 + CASE_MLA_TOKEN_BYTES);
}

double case_qnorm_flops(const int64_t *p) {
  (void)p;
  return 0; /* memory-bound */
}

CASE_OPS(qnorm, case_qnorm_want, "dsa_mla_qnorm_rope_kv_insert")
