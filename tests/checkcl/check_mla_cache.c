/* MLA KV-cache operators: insert, gather by slot, gather through block
 * tables. All byte-exact against tests/ref (as tests/test_mla_cache.c):
 * the whole cache image after an insert, the whole output buffer (rows the
 * call must not touch included) after a gather, and the fault word. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkcl.h"
#include "ref.h"

#define TOK REF_MLA_TOKEN_BYTES

/* A k row: per 64-dim block a random scale (zeros now and then), RoPE dims
 * random finite bf16. */
static void make_row(cc_env *e, uint16_t *row) {
  for (int b = 0; b < 7; b++) {
    const int kind = (int)cc_rnd(e, 10);
    const double s = ldexp(1.0, (int)cc_rnd(e, 40) - 20);
    for (int i = 0; i < 64; i++)
      row[64 * b + i] = kind == 0 ? 0 : cc_bf16((float)(cc_uniform(e, -1, 1) * s));
  }
  for (int i = 448; i < 512; i++) row[i] = cc_bf16((float)cc_uniform(e, -4, 4));
}

typedef struct mcache {
  uint8_t *img;
  size_t size;
  ref_mla_cache ref;
  cl_mem mem;
  dsa_paged_cache dc;
} mcache;

static mcache cache_make(cc_env *e, int64_t nb, int32_t bs, int fill) {
  mcache c;
  const int64_t stride = (int64_t)bs * TOK + 16 * cc_rnd(e, 3);
  c.size = (size_t)(nb * stride);
  c.img = cc_xmalloc(c.size);
  cc_fill_bytes(e, c.img, c.size);
  c.ref = (ref_mla_cache){c.img, nb, bs, stride};
  if (fill) {
    uint16_t row[512];
    for (int64_t s = 0; s < nb * bs; s++) {
      if (cc_rnd(e, 4) == 0) continue;
      make_row(e, row);
      ref_mla_insert(&c.ref, row, 512, &s, 1);
    }
  }
  c.mem = cc_buf(e, c.size, c.img);
  c.dc = (dsa_paged_cache){.mem = c.mem, .offset = 0, .num_blocks = nb, .block_size = bs,
                           .block_stride = stride, .format = DSA_CACHE_MLA_FP8};
  return c;
}

static void cache_free(mcache *c) {
  free(c->img);
  cc_free(&c->mem);
}

/* ---- insert ------------------------------------------------------------------ */

static int insert_case(cc_env *e, int64_t n, int64_t nb, int32_t bs, char *msg, size_t ms) {
  mcache c = cache_make(e, nb, bs, 0);
  const int64_t cap = nb * bs;
  uint16_t *k = cc_xmalloc((size_t)n * 1024);
  int64_t *slots = cc_xmalloc((size_t)n * 8);
  for (int64_t i = 0; i < n; i++) make_row(e, k + i * 512);
  /* distinct slots (the order of equal slots is unspecified), some -1, an
   * out-of-range one now and then */
  int64_t *perm = cc_xmalloc((size_t)cap * 8);
  for (int64_t i = 0; i < cap; i++) perm[i] = i;
  for (int64_t i = 0; i < n; i++) {
    const int64_t j = i < cap ? i + cc_rnd(e, cap - i) : i;
    if (i < cap) {
      int64_t t = perm[i];
      perm[i] = perm[j], perm[j] = t;
    }
    const int64_t r = cc_rnd(e, 12);
    slots[i] = i >= cap || r == 0 ? -1 : r == 1 ? cap + cc_rnd(e, 5) : perm[i];
  }
  cl_mem km = cc_buf(e, (size_t)n * 1024, k), sm = cc_buf(e, (size_t)n * 8, slots);
  dsa_tensor kt = cc_t(km, DSA_BF16, 2, (int64_t[]){n, 512});
  dsa_tensor st = cc_t(sm, DSA_I64, 1, (int64_t[]){n});
  int bad = 0;
  dsa_status s_ = dsa_mla_cache_insert(e->q, &kt, &st, &c.dc, NULL);
  cc_after_call(e);
  if (s_ != DSA_OK) {
    bad = CC_FAIL(msg, ms, "dsa_mla_cache_insert: %s", dsa_last_error());
  } else {
    const uint32_t f = cc_faults(e);
    const unsigned want_f = ref_mla_insert(&c.ref, k, 512, slots, n);
    uint8_t *got = cc_xmalloc(c.size);
    cc_read(e, c.mem, c.size, got);
    char what[96];
    snprintf(what, sizeof what, "insert n=%lld nb=%lld bs=%d cache", (long long)n,
             (long long)nb, bs);
    bad = cc_cmp_bytes(got, c.img, c.size, 1, what, msg, ms);
    if (!bad && f != want_f) bad = CC_FAIL(msg, ms, "%s: faults 0x%x, want 0x%x", what, f, want_f);
    free(got);
  }
  cc_free(&km), cc_free(&sm);
  free(k), free(slots), free(perm);
  cache_free(&c);
  return bad;
}

static int check_insert(cc_env *e, char *msg, size_t ms) {
  static const int32_t bss[] = {1, 3, 16, 64};
  if (insert_case(e, 1, 1, 1, msg, ms) || insert_case(e, 37, 4, 16, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (insert_case(e, 1 + cc_rnd(e, 80), 1 + cc_rnd(e, 6), bss[cc_rnd(e, 4)], msg, ms)) return 1;
  return 0;
}

/* ---- gather by slot -------------------------------------------------------------- */

static int slots_case(cc_env *e, int64_t s, int64_t nb, int32_t bs, char *msg, size_t ms) {
  mcache c = cache_make(e, nb, bs, 1);
  const int64_t cap = nb * bs;
  int32_t *idx = cc_xmalloc((size_t)s * 4);
  for (int64_t i = 0; i < s; i++) {
    const int64_t r = cc_rnd(e, 16);
    idx[i] = (int32_t)(r == 0 ? -1 - cc_rnd(e, 3) : r == 1 ? cap + cc_rnd(e, 3) : cc_rnd(e, cap));
  }
  const size_t ob = (size_t)s * 1024;
  uint16_t *out = cc_xmalloc(ob), *want = cc_xmalloc(ob);
  cc_fill_bytes(e, out, ob);
  memcpy(want, out, ob);
  cl_mem im = cc_buf(e, (size_t)s * 4, idx), om = cc_buf(e, ob, out);
  dsa_tensor it = cc_t(im, DSA_I32, 1, (int64_t[]){s});
  dsa_tensor ot = cc_t(om, DSA_BF16, 2, (int64_t[]){s, 512});
  int bad;
  dsa_status s_ = dsa_mla_gather_slots(e->q, &it, &c.dc, &ot, NULL);
  cc_after_call(e);
  if (s_ != DSA_OK) {
    bad = CC_FAIL(msg, ms, "dsa_mla_gather_slots: %s", dsa_last_error());
  } else {
    const uint32_t f = cc_faults(e);
    const unsigned want_f = ref_mla_gather_slots(&c.ref, idx, s, want, 512);
    cc_read(e, om, ob, out);
    char what[96];
    snprintf(what, sizeof what, "gather_slots s=%lld nb=%lld bs=%d out", (long long)s,
             (long long)nb, bs);
    bad = cc_cmp_bytes(out, want, ob, 2, what, msg, ms);
    if (!bad && f != want_f) bad = CC_FAIL(msg, ms, "%s: faults 0x%x, want 0x%x", what, f, want_f);
  }
  cc_free(&im), cc_free(&om);
  free(idx), free(out), free(want);
  cache_free(&c);
  return bad;
}

static int check_slots(cc_env *e, char *msg, size_t ms) {
  static const int32_t bss[] = {1, 5, 16, 64};
  if (slots_case(e, 1, 1, 1, msg, ms) || slots_case(e, 33, 3, 16, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (slots_case(e, 1 + cc_rnd(e, 100), 1 + cc_rnd(e, 6), bss[cc_rnd(e, 4)], msg, ms)) return 1;
  return 0;
}

/* ---- gather through block tables ---------------------------------------------------- */

static int paged_case(cc_env *e, int64_t r, int64_t w, int64_t nb, int32_t bs, int with_gl,
                      char *msg, size_t ms) {
  mcache c = cache_make(e, nb, bs, 1);
  int32_t *seq = cc_xmalloc((size_t)r * 4), *gl = cc_xmalloc((size_t)r * 4);
  int32_t *bt = cc_xmalloc((size_t)(r * w) * 4);
  int64_t maxg = 0;
  for (int64_t i = 0; i < r; i++) {
    seq[i] = (int32_t)cc_rnd(e, w * bs + 1);
    gl[i] = with_gl ? (int32_t)cc_rnd(e, seq[i] + 1) : seq[i];
    if (gl[i] > maxg) maxg = gl[i];
  }
  for (int64_t i = 0; i < r * w; i++) {
    const int64_t x = cc_rnd(e, 20);
    bt[i] = (int32_t)(x == 0 ? -1 : x == 1 ? nb + cc_rnd(e, 3) : cc_rnd(e, nb));
  }
  const int64_t offset = cc_rnd(e, 4), max_t = offset + maxg + cc_rnd(e, 3);
  const size_t ob = (size_t)(r * max_t) * 1024;
  uint16_t *out = cc_xmalloc(ob), *want = cc_xmalloc(ob);
  cc_fill_bytes(e, out, ob);
  memcpy(want, out, ob);
  cl_mem sm = cc_buf(e, (size_t)r * 4, seq), gm = cc_buf(e, (size_t)r * 4, gl);
  cl_mem bm = cc_buf(e, (size_t)(r * w) * 4, bt), om = cc_buf(e, ob, out);
  dsa_tensor stt = cc_t(sm, DSA_I32, 1, (int64_t[]){r}), gt = cc_t(gm, DSA_I32, 1, (int64_t[]){r});
  dsa_tensor btt = cc_t(bm, DSA_I32, 2, (int64_t[]){r, w});
  dsa_tensor ot = cc_t(om, DSA_BF16, 3, (int64_t[]){r, max_t, 512});
  int bad;
  dsa_status s_ =
      dsa_mla_gather_paged(e->q, &stt, with_gl ? &gt : NULL, &btt, &c.dc, &ot, &(dsa_mla_gather_paged_params){.offset = offset}, NULL);
  cc_after_call(e);
  if (s_ != DSA_OK) {
    bad = CC_FAIL(msg, ms, "dsa_mla_gather_paged: %s", dsa_last_error());
  } else {
    const uint32_t f = cc_faults(e);
    const unsigned want_f = ref_mla_gather_paged(&c.ref, seq, with_gl ? gl : NULL, bt, r, w, w,
                                                 offset, want, max_t, max_t * 512, 512);
    cc_read(e, om, ob, out);
    char what[128];
    snprintf(what, sizeof what, "gather_paged r=%lld w=%lld nb=%lld bs=%d offset=%lld out",
             (long long)r, (long long)w, (long long)nb, bs, (long long)offset);
    bad = cc_cmp_bytes(out, want, ob, 2, what, msg, ms);
    if (!bad && f != want_f) bad = CC_FAIL(msg, ms, "%s: faults 0x%x, want 0x%x", what, f, want_f);
  }
  cc_free(&sm), cc_free(&gm), cc_free(&bm), cc_free(&om);
  free(seq), free(gl), free(bt), free(out), free(want);
  cache_free(&c);
  return bad;
}

static int check_paged(cc_env *e, char *msg, size_t ms) {
  static const int32_t bss[] = {1, 4, 16, 64};
  if (paged_case(e, 1, 1, 1, 1, 0, msg, ms) || paged_case(e, 3, 4, 5, 16, 1, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (paged_case(e, 1 + cc_rnd(e, 4), 1 + cc_rnd(e, 4), 1 + cc_rnd(e, 6), bss[cc_rnd(e, 4)],
                   (int)cc_rnd(e, 2), msg, ms))
      return 1;
  return 0;
}

/* ---- bench: the DeepSeek-V4 decode step's insert and a prefill gather ------------- */

typedef struct mla_bench {
  cl_mem cache, a, b, c, d;
  dsa_paged_cache dc;
  dsa_tensor ta, tb, tc, td;
} mla_bench;

static void mb_free(void *p) {
  mla_bench *s = p;
  if (!s) return;
  cc_free(&s->cache), cc_free(&s->a), cc_free(&s->b), cc_free(&s->c), cc_free(&s->d);
  free(s);
}

static mla_bench *mb_cache(cc_env *e, int64_t nb, int32_t bs) {
  mla_bench *s = cc_xmalloc(sizeof *s);
  s->cache = cc_buf(e, (size_t)(nb * bs * TOK), NULL);
  s->dc = (dsa_paged_cache){.mem = s->cache, .offset = 0, .num_blocks = nb, .block_size = bs,
                            .block_stride = (int64_t)bs * TOK, .format = DSA_CACHE_MLA_FP8};
  return s;
}

/* insert: N tokens (V4 decode batch 64 ... prefill 8192) */
static int b_insert_setup(cc_env *e, int small, void **st) {
  const int64_t n = small ? 256 : 8192, nb = n / 64 + 1;
  mla_bench *s = mb_cache(e, nb, 64);
  *st = s;
  uint16_t *k = cc_xmalloc((size_t)n * 1024);
  int64_t *slots = cc_xmalloc((size_t)n * 8);
  for (int64_t i = 0; i < n; i++) {
    make_row(e, k + i * 512);
    slots[i] = i;
  }
  s->a = cc_buf(e, (size_t)n * 1024, k);
  s->b = cc_buf(e, (size_t)n * 8, slots);
  s->ta = cc_t(s->a, DSA_BF16, 2, (int64_t[]){n, 512});
  s->tb = cc_t(s->b, DSA_I64, 1, (int64_t[]){n});
  free(k), free(slots);
  return 0;
}
static int b_insert_run(cc_env *e, void *p, cl_event *done) {
  mla_bench *s = p;
  dsa_events ev = {0, NULL, done};
  dsa_status st = dsa_mla_cache_insert(e->q, &s->ta, &s->tb, &s->dc, &ev);
  cc_after_call(e);
  return st != DSA_OK;
}

static int b_slots_setup(cc_env *e, int small, void **st) {
  const int64_t n = small ? 512 : 65536, nb = n / 64;
  mla_bench *s = mb_cache(e, nb, 64);
  *st = s;
  int32_t *idx = cc_xmalloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)cc_rnd(e, n);
  s->a = cc_buf(e, (size_t)n * 4, idx);
  s->b = cc_buf(e, (size_t)n * 1024, NULL);
  s->ta = cc_t(s->a, DSA_I32, 1, (int64_t[]){n});
  s->tb = cc_t(s->b, DSA_BF16, 2, (int64_t[]){n, 512});
  free(idx);
  return 0;
}
static int b_slots_run(cc_env *e, void *p, cl_event *done) {
  mla_bench *s = p;
  dsa_events ev = {0, NULL, done};
  dsa_status st = dsa_mla_gather_slots(e->q, &s->ta, &s->dc, &s->tb, &ev);
  cc_after_call(e);
  return st != DSA_OK;
}

static int b_paged_setup(cc_env *e, int small, void **st) {
  const int64_t r = small ? 2 : 4, len = small ? 512 : 16384, w = len / 64;
  mla_bench *s = mb_cache(e, r * w, 64);
  *st = s;
  int32_t *seq = cc_xmalloc((size_t)r * 4), *bt = cc_xmalloc((size_t)(r * w) * 4);
  for (int64_t i = 0; i < r; i++) seq[i] = (int32_t)len;
  for (int64_t i = 0; i < r * w; i++) bt[i] = (int32_t)i;
  s->a = cc_buf(e, (size_t)r * 4, seq);
  s->b = cc_buf(e, (size_t)(r * w) * 4, bt);
  s->c = cc_buf(e, (size_t)(r * len) * 1024, NULL);
  s->ta = cc_t(s->a, DSA_I32, 1, (int64_t[]){r});
  s->tb = cc_t(s->b, DSA_I32, 2, (int64_t[]){r, w});
  s->tc = cc_t(s->c, DSA_BF16, 3, (int64_t[]){r, len, 512});
  free(seq), free(bt);
  return 0;
}
static int b_paged_run(cc_env *e, void *p, cl_event *done) {
  mla_bench *s = p;
  dsa_events ev = {0, NULL, done};
  dsa_status st = dsa_mla_gather_paged(e->q, &s->ta, NULL, &s->tb, &s->dc, &s->tc, NULL, &ev);
  cc_after_call(e);
  return st != DSA_OK;
}

const cc_op cc_ops_mla_cache[] = {
    {"dsa_mla_cache_insert", check_insert, "N=8192 bs=64", b_insert_setup, b_insert_run, mb_free},
    {"dsa_mla_gather_slots", check_slots, "S=65536", b_slots_setup, b_slots_run, mb_free},
    {"dsa_mla_gather_paged", check_paged, "R=4 len=16384", b_paged_setup, b_paged_run, mb_free},
    {0}};
