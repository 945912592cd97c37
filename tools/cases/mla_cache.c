/* The MLA fp8_ds_mla cache's case descriptions (cases.h): insert, gather by
 * slot, gather through block tables. */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

#define TOK CASE_MLA_TOKEN_BYTES

/* The check cases' stride: a token multiple plus 0, 16 or 32 bytes (the
 * kernels' 16-byte alignment kept, the padding vLLM may add varied). */
static int64_t check_stride(uint64_t *rng, int32_t bs) {
  return (int64_t)bs * TOK + 16 * case_rnd(rng, 3);
}

/* The bench pool's geometry; nb is the caller's. */
static void bench_pool(int64_t *stride, int32_t *bs, unsigned char *fill) {
  *bs = 64, *stride = CASE_MLA_BENCH_STRIDE, *fill = 0x3c;
}

/* A random cache image of nb * stride bytes; -1 when out of memory. */
static int random_cache(uint64_t *rng, uint8_t **cache, int64_t nb, int64_t stride) {
  const size_t n = (size_t)(nb * stride);
  if (!(*cache = case_alloc(n))) return -1;
  case_fill_bytes(rng, *cache, n);
  return 0;
}

static int upload_cache(const case_dev *d, cl_mem *m, dsa_paged_cache *pc, const uint8_t *cache,
                        unsigned char fill, int64_t nb, int32_t bs, int64_t stride) {
  if (!(*m = case_buf(d, (size_t)(nb * stride), cache, fill))) return 1;
  *pc = (dsa_paged_cache){.mem = *m, .offset = 0, .num_blocks = nb, .block_size = bs,
                          .block_stride = stride, .format = DSA_CACHE_MLA_FP8};
  return 0;
}

/* ---- insert ---------------------------------------------------------------------- */

static int insert_alloc(case_mla_insert *c) {
  c->owned = 1;
  c->k = case_alloc((size_t)c->n * 1024);
  c->slots = case_alloc((size_t)c->n * 8);
  return c->k && c->slots ? 0 : -1;
}

void case_mla_k_row(uint64_t *rng, uint16_t *row) {
  for (int b = 0; b < 7; b++) {
    const int kind = (int)case_rnd(rng, 10);
    const double s = ldexp(1.0, (int)case_rnd(rng, 40) - 20);
    for (int i = 0; i < 64; i++)
      row[64 * b + i] = kind == 0 ? 0 : case_bf16((float)(case_uniform(rng, -1, 1) * s));
  }
  for (int i = 448; i < 512; i++) row[i] = case_bf16((float)case_uniform(rng, -4, 4));
}

int case_mla_insert_gen_check(case_mla_insert *c, uint64_t *rng) {
  c->stride = check_stride(rng, c->bs);
  if (insert_alloc(c) || random_cache(rng, &c->cache, c->nb, c->stride)) return -1;
  for (int64_t i = 0; i < c->n; i++) case_mla_k_row(rng, c->k + i * 512);
  /* distinct slots (the order of equal slots is unspecified), some -1, an
   * out-of-range one now and then */
  return case_insert_slots(rng, c->slots, c->n, c->nb * c->bs, 5);
}

int case_mla_insert_gen_bench(case_mla_insert *c) {
  bench_pool(&c->stride, &c->bs, &c->cache_fill);
  if (insert_alloc(c)) return -1;
  uint64_t seed = 0x5eed0001u; /* the rows' data since they were written */
  for (int64_t i = 0; i < c->n * 512; i++) c->k[i] = case_bf16((float)case_uniform(&seed, -4, 4));
  int64_t *s;
  if (!c->whole) {
    if (!(s = case_random_distinct(&seed, c->nb * c->bs, c->n))) return -1;
    memcpy(c->slots, s, (size_t)c->n * 8);
  } else {
    if (!(s = case_random_distinct(&seed, c->nb, (c->n + c->bs - 1) / c->bs))) return -1;
    for (int64_t i = 0; i < c->n; i++) c->slots[i] = s[i / c->bs] * c->bs + i % c->bs;
  }
  free(s);
  return 0;
}

int case_mla_insert_upload(const case_dev *d, case_mla_insert *c, unsigned char out_fill,
                           char *msg, size_t msz) {
  (void)out_fill; /* the output is the cache, which starts as given */
  c->mk = case_buf(d, (size_t)c->n * 1024, c->k, 0);
  c->ms = case_buf(d, (size_t)c->n * 8, c->slots, 0);
  if (!c->mk || !c->ms ||
      upload_cache(d, &c->mc, &c->pc, c->cache, c->cache_fill, c->nb, c->bs, c->stride)) {
    snprintf(msg, msz, "mla insert: device buffers for n=%lld nb=%lld", (long long)c->n,
             (long long)c->nb);
    return 1;
  }
  c->tk = dsa_tensor_make(c->mk, 0, DSA_BF16, 2, (int64_t[]){c->n, 512});
  c->ts = dsa_tensor_make(c->ms, 0, DSA_I64, 1, &c->n);
  return 0;
}

dsa_status case_mla_insert_call(dsa_queue *q, const case_mla_insert *c, const dsa_events *ev) {
  return dsa_mla_cache_insert(q, &c->tk, &c->ts, &c->pc, NULL, ev);
}

int case_mla_insert_check(const case_dev *d, const case_mla_insert *c, const uint8_t *want,
                          char *msg, size_t msz) {
  char what[96];
  snprintf(what, sizeof what, "insert n=%lld nb=%lld bs=%d cache", (long long)c->n,
           (long long)c->nb, c->bs);
  return case_read_cmp(d, c->mc, (size_t)(c->nb * c->stride), want, 1, what, msg, msz);
}

void case_mla_insert_free(case_mla_insert *c) {
  if (c->owned) free(c->k), free(c->slots), free(c->cache);
  case_release(&c->mk), case_release(&c->ms), case_release(&c->mc);
}

/* k and slots read, a 584-byte token written. */
double case_mla_insert_bytes(const int64_t *p) {
  return (double)p[0] * (512 * 2 + 8) + (double)p[0] * TOK;
}

double case_mla_insert_flops(const int64_t *p) {
  (void)p;
  return 0; /* memory-bound */
}

CASE_OPS(mla_insert, uint8_t, "dsa_mla_cache_insert")

/* ---- gather by slot --------------------------------------------------------------- */

int case_mla_slots_gen_check(case_mla_slots *c, uint64_t *rng) {
  c->owned = 1;
  c->stride = check_stride(rng, c->bs);
  const size_t ob = (size_t)c->s * 1024;
  c->idx = case_alloc((size_t)c->s * 4);
  c->out_in = case_alloc(ob);
  if (!c->idx || !c->out_in || random_cache(rng, &c->cache, c->nb, c->stride)) return -1;
  const int64_t cap = c->nb * c->bs;
  for (int64_t i = 0; i < c->s; i++) {
    const int64_t r = case_rnd(rng, 16);
    c->idx[i] = (int32_t)(r == 0   ? -1 - case_rnd(rng, 3)
                          : r == 1 ? cap + case_rnd(rng, 3)
                                   : case_rnd(rng, cap));
  }
  case_fill_bytes(rng, c->out_in, ob);
  return 0;
}

int case_mla_slots_gen_bench(case_mla_slots *c) {
  c->owned = 1;
  bench_pool(&c->stride, &c->bs, &c->cache_fill);
  if (!(c->idx = case_alloc((size_t)c->s * 4))) return -1;
  uint64_t seed = 0x5eed0002u;
  const uint64_t cap = (uint64_t)(c->nb * c->bs);
  for (int64_t i = 0; i < c->s; i++) c->idx[i] = (int32_t)(rng64_next(&seed) % cap);
  return 0;
}

int case_mla_slots_upload(const case_dev *d, case_mla_slots *c, unsigned char out_fill, char *msg,
                          size_t msz) {
  c->mi = case_buf(d, (size_t)c->s * 4, c->idx, 0);
  c->mo = case_buf(d, (size_t)c->s * 1024, c->out_in, out_fill);
  if (!c->mi || !c->mo ||
      upload_cache(d, &c->mc, &c->pc, c->cache, c->cache_fill, c->nb, c->bs, c->stride)) {
    snprintf(msg, msz, "mla gather_slots: device buffers for s=%lld nb=%lld", (long long)c->s,
             (long long)c->nb);
    return 1;
  }
  c->ti = dsa_tensor_make(c->mi, 0, DSA_I32, 1, &c->s);
  c->to = dsa_tensor_make(c->mo, 0, DSA_BF16, 2, (int64_t[]){c->s, 512});
  return 0;
}

dsa_status case_mla_slots_call(dsa_queue *q, const case_mla_slots *c, const dsa_events *ev) {
  return dsa_mla_gather_slots(q, &c->ti, &c->pc, &c->to, NULL, ev);
}

int case_mla_slots_check(const case_dev *d, const case_mla_slots *c, const uint16_t *want,
                         char *msg, size_t msz) {
  char what[96];
  snprintf(what, sizeof what, "gather_slots s=%lld nb=%lld bs=%d out", (long long)c->s,
           (long long)c->nb, c->bs);
  return case_read_cmp(d, c->mo, (size_t)c->s * 1024, want, 2, what, msg, msz);
}

void case_mla_slots_free(case_mla_slots *c) {
  if (c->owned) free(c->cache), free(c->idx), free(c->out_in);
  case_release(&c->mc), case_release(&c->mi), case_release(&c->mo);
}

/* A token and its index read, 512 bf16 written per slot. */
double case_mla_slots_bytes(const int64_t *p) {
  return (double)p[2] * (TOK + 4) + (double)p[2] * 512 * 2;
}

double case_mla_slots_flops(const int64_t *p) {
  (void)p;
  return 0;
}

CASE_OPS(mla_slots, uint16_t, "dsa_mla_gather_slots")

/* ---- gather through block tables ------------------------------------------------- */

int case_mla_paged_gen_check(case_mla_paged *c, uint64_t *rng) {
  c->owned = 1;
  c->stride = check_stride(rng, c->bs);
  c->seq = case_alloc((size_t)c->r * 4);
  c->gl = case_alloc((size_t)c->r * 4);
  c->table = case_alloc((size_t)(c->r * c->w) * 4);
  if (!c->seq || !c->gl || !c->table || random_cache(rng, &c->cache, c->nb, c->stride)) return -1;
  int64_t maxg = 0;
  for (int64_t i = 0; i < c->r; i++) {
    c->seq[i] = (int32_t)case_rnd(rng, c->w * c->bs + 1);
    c->gl[i] = c->has_gl ? (int32_t)case_rnd(rng, c->seq[i] + 1) : c->seq[i];
    if (c->gl[i] > maxg) maxg = c->gl[i];
  }
  for (int64_t i = 0; i < c->r * c->w; i++) {
    const int64_t x = case_rnd(rng, 20);
    c->table[i] = (int32_t)(x == 0 ? -1 : x == 1 ? c->nb + case_rnd(rng, 3) : case_rnd(rng, c->nb));
  }
  c->offset = case_rnd(rng, 4);
  c->max_t = c->offset + maxg + case_rnd(rng, 3);
  const size_t ob = (size_t)(c->r * c->max_t) * 1024;
  if (!(c->out_in = case_alloc(ob))) return -1;
  case_fill_bytes(rng, c->out_in, ob);
  return 0;
}

int case_mla_paged_gen_bench(case_mla_paged *c) {
  c->owned = 1;
  bench_pool(&c->stride, &c->bs, &c->cache_fill);
  c->w = (c->max_t + c->bs - 1) / c->bs;
  c->offset = 0, c->has_gl = 0;
  if (c->r * c->w > c->nb) return -1; /* the pool too small */
  uint64_t seed = 0x5eed0003u;
  int64_t *blocks = case_random_distinct(&seed, c->nb, c->r * c->w);
  c->seq = case_alloc((size_t)c->r * 4);
  c->table = case_alloc((size_t)(c->r * c->w) * 4);
  if (!blocks || !c->seq || !c->table) return free(blocks), -1;
  for (int64_t i = 0; i < c->r * c->w; i++) c->table[i] = (int32_t)blocks[i];
  for (int64_t i = 0; i < c->r; i++) c->seq[i] = (int32_t)c->max_t;
  free(blocks);
  return 0;
}

int case_mla_paged_upload(const case_dev *d, case_mla_paged *c, unsigned char out_fill, char *msg,
                          size_t msz) {
  c->msq = case_buf(d, (size_t)c->r * 4, c->seq, 0);
  c->mgl = c->has_gl ? case_buf(d, (size_t)c->r * 4, c->gl, 0) : NULL;
  c->mbt = case_buf(d, (size_t)(c->r * c->w) * 4, c->table, 0);
  c->mo = case_buf(d, (size_t)(c->r * c->max_t) * 1024, c->out_in, out_fill);
  if (!c->msq || (c->has_gl && !c->mgl) || !c->mbt || !c->mo ||
      upload_cache(d, &c->mc, &c->pc, c->cache, c->cache_fill, c->nb, c->bs, c->stride)) {
    snprintf(msg, msz, "mla gather_paged: device buffers for r=%lld w=%lld max_t=%lld",
             (long long)c->r, (long long)c->w, (long long)c->max_t);
    return 1;
  }
  c->tsq = dsa_tensor_make(c->msq, 0, DSA_I32, 1, &c->r);
  if (c->has_gl) c->tgl = dsa_tensor_make(c->mgl, 0, DSA_I32, 1, &c->r);
  c->tbt = dsa_tensor_make(c->mbt, 0, DSA_I32, 2, (int64_t[]){c->r, c->w});
  c->to = dsa_tensor_make(c->mo, 0, DSA_BF16, 3, (int64_t[]){c->r, c->max_t, 512});
  return 0;
}

dsa_status case_mla_paged_call(dsa_queue *q, const case_mla_paged *c, const dsa_events *ev) {
  const dsa_mla_gather_paged_params p = {.offset = c->offset};
  return dsa_mla_gather_paged(q, &c->tsq, c->has_gl ? &c->tgl : NULL, &c->tbt, &c->pc, &c->to,
                              &p, ev);
}

int case_mla_paged_check(const case_dev *d, const case_mla_paged *c, const uint16_t *want,
                         char *msg, size_t msz) {
  char what[128];
  snprintf(what, sizeof what, "gather_paged r=%lld w=%lld nb=%lld bs=%d offset=%lld out",
           (long long)c->r, (long long)c->w, (long long)c->nb, c->bs, (long long)c->offset);
  return case_read_cmp(d, c->mo, (size_t)(c->r * c->max_t) * 1024, want, 2, what, msg, msz);
}

void case_mla_paged_free(case_mla_paged *c) {
  if (c->owned) free(c->cache), free(c->seq), free(c->gl), free(c->table), free(c->out_in);
  case_release(&c->mc), case_release(&c->msq), case_release(&c->mgl), case_release(&c->mbt),
      case_release(&c->mo);
}

/* Tokens read, the table and lengths read, 512 bf16 written per token. */
double case_mla_paged_bytes(const int64_t *p) {
  const double rt = (double)p[0] * (double)p[1];
  return rt * TOK + (double)(p[0] * ((p[1] + 63) / 64)) * 4 + (double)p[0] * 4 + rt * 512 * 2;
}

double case_mla_paged_flops(const int64_t *p) {
  (void)p;
  return 0;
}

CASE_OPS(mla_paged, uint16_t, "dsa_mla_gather_paged")
