/* dsa_compressor_save_states and dsa_compressor_compress_insert against the
 * C reference (tests/ref/compressor.c) on random shapes and edge cases:
 * ratios 4 and 128, the three cache formats, state block sizes 1..9 with
 * padded strides, first windows (masked rows), -1 / out-of-range slots,
 * bad requests, block-table entries and positions, bf16 and f32 norm
 * weights with negative entries (signed zeros through the indexer's identity
 * rotation), score families from flat to peaked. The state and cache images
 * are compared whole, byte for byte (untouched rows included), guard bands
 * and fault words checked; a decode sequence runs save + compress step by
 * step; bad arguments and events. The dsacl EXP2 of the reference is checked
 * against exp2l (<= 1 ulp). */
#include <math.h>

#include "common.h"
#include "ref.h"
#include "ref_compressor.h"

static dsa_context *ctx;
static dsa_queue *q;
static uint64_t rng = 0xC0FFEE5EEDull;

static int64_t rnd(int64_t n) { return n > 0 ? (int64_t)(dsa_test_rand(&rng) % (uint64_t)n) : 0; }
static double gauss(void) {
  return (dsa_test_uniform(&rng) + dsa_test_uniform(&rng) + dsa_test_uniform(&rng) - 1.5) * 2;
}

static void fill_cos_sin(float *cs, int64_t npos, int64_t rs) {
  for (int64_t p = 0; p < npos; p++)
    for (int i = 0; i < 32; i++) {
      double th = p * pow(10000.0, -i / 32.0);
      cs[p * rs + i] = (float)cos(th);
      cs[p * rs + 32 + i] = (float)sin(th);
    }
}

static void cmp_bytes(const uint8_t *got, const uint8_t *want, size_t n, const char *what,
                      const char *ctxs) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i] && !bad++) first = i;
  if (bad && getenv("CMP_DEBUG")) {
    for (size_t i = first & ~(size_t)15; i < first + 48 && i < n; i++)
      fprintf(stderr, "%zu: %02X %02X\n", i, got[i], want[i]);
  }
  CHECK(bad == 0, "%s: %zu bytes differ, first at %zu got 0x%02X want 0x%02X (%s)", what, bad,
        first, bad ? got[first] : 0, bad ? want[first] : 0, ctxs);
}

/* ---- EXP2 of the reference ------------------------------------------------- */

static void test_ref_exp2(void) {
  int bad = 0;
  double worst = 0;
  for (int i = 0; i < 200000; i++) {
    float t = i < 1000 ? -(float)i * 0.126f : (float)(-126.0 * dsa_test_uniform(&rng));
    if (i % 7 == 0) t = -(float)ldexp(dsa_test_uniform(&rng), -(int)rnd(30));
    float y = ref_cmp_exp2(t);
    long double tr = exp2l((long double)t);
    long double ulp = (long double)nextafterf(y, INFINITY) - (long double)y;
    long double err = fabsl((long double)y - tr) / ulp;
    if (err > worst) worst = (double)err;
    if (err > 1.0L) bad++;
  }
  CHECK(bad == 0, "ref_cmp_exp2: %d values off by more than 1 ulp (worst %.3f)", bad, worst);
  CHECK(ref_cmp_exp2(0.0f) == 1.0f && ref_cmp_exp2(-127.0f) == 0.0f &&
            ref_cmp_exp2(-INFINITY) == 0.0f && ref_cmp_exp2(-126.0f) == 0x1p-126f &&
            ref_cmp_exp2(-1.0f) == 0.5f,
        "ref_cmp_exp2 special values");
}

/* ---- save states ------------------------------------------------------------ */

typedef struct scase {
  int64_t t, w, nb;
  int32_t bs;
  int ratio, bad;
} scase;

static void run_save(const scase *c) {
  const int64_t t = c->t, w = c->w, width = 2 * w;
  const int64_t s1 = width + 4 * rnd(2), s0 = c->bs * s1 + 4 * rnd(3);
  const int64_t kvrs = rnd(2) ? 2 * w : w + 4 * rnd(3); /* halves of one projection, or not */
  const int64_t stn = c->nb * s0 + 1, cap = c->nb * c->bs;
  float *kv = dsa_test_xmalloc((size_t)(t * kvrs + w + 1) * 4);
  for (int64_t i = 0; i < t * kvrs + w; i++) kv[i] = (float)(gauss() * 3);
  float *sc = kvrs == 2 * w ? kv + w : kv; /* score half of the same rows */
  float *sc_own = NULL;
  if (kvrs != 2 * w) {
    sc_own = dsa_test_xmalloc((size_t)(t * kvrs + 1) * 4);
    for (int64_t i = 0; i < t * kvrs; i++) sc_own[i] = (float)(gauss() * 10);
    sc = sc_own;
  }
  float *ape = dsa_test_xmalloc((size_t)(c->ratio * w) * 4);
  for (int64_t i = 0; i < c->ratio * w; i++) ape[i] = (float)gauss();
  int64_t *pos = dsa_test_xmalloc((size_t)(t + 1) * 8), *slots = dsa_test_xmalloc((size_t)(t + 1) * 8);
  int64_t *perm = dsa_test_xmalloc((size_t)(cap + 1) * 8), used = 0;
  for (int64_t i = 0; i < cap; i++) perm[i] = i;
  for (int64_t i = cap - 1; i > 0; i--) {
    int64_t j = rnd(i + 1), x = perm[i];
    perm[i] = perm[j], perm[j] = x;
  }
  for (int64_t i = 0; i < t; i++) {
    pos[i] = rnd(5000);
    if (c->bad && rnd(8) == 0) pos[i] = -1 - rnd(3);
    int64_t r = rnd(10);
    slots[i] = r == 0 ? -1 - rnd(2) : (r == 1 && c->bad) ? cap + rnd(3) : used < cap ? perm[used++] : -1;
  }
  float *img = dsa_test_xmalloc((size_t)stn * 4);
  dsa_test_fill_random(&rng, img, (size_t)stn * 4);
  float *want = dsa_test_xmalloc((size_t)stn * 4);
  memcpy(want, img, (size_t)stn * 4);
  /* The API's other positions dtype: i32 (the reference reads the same values). */
  const int pos32 = rnd(3) == 0;
  int32_t *pos_n = pos32 ? dsa_test_narrow_pos(pos, (size_t)t) : NULL;

  guarded_buf kb = gbuf_create(ctx, q, (size_t)(t * kvrs + w + 1) * 4, kv);
  guarded_buf sb = sc_own ? gbuf_create(ctx, q, (size_t)(t * kvrs + 1) * 4, sc_own) : kb;
  guarded_buf ab = gbuf_create(ctx, q, (size_t)(c->ratio * w) * 4, ape);
  guarded_buf pb = pos32 ? gbuf_create(ctx, q, (size_t)(t + 1) * 4, pos_n)
                         : gbuf_create(ctx, q, (size_t)(t + 1) * 8, pos);
  guarded_buf lb = gbuf_create(ctx, q, (size_t)(t + 1) * 8, slots);
  guarded_buf stb = gbuf_create(ctx, q, (size_t)stn * 4, img);
  dsa_tensor kvt = {.mem = kb.mem, .offset = kb.off, .dtype = DSA_F32, .ndim = 2, .shape = {t, w},
                    .stride = {kvrs, 1}};
  dsa_tensor sct = {.mem = sb.mem, .offset = sb.off + (sc_own ? 0 : (size_t)w * 4),
                    .dtype = DSA_F32, .ndim = 2, .shape = {t, w}, .stride = {kvrs, 1}};
  dsa_tensor at = dsa_tensor_make(ab.mem, ab.off, DSA_F32, 2, (int64_t[]){c->ratio, w});
  dsa_tensor pt = dsa_tensor_make(pb.mem, pb.off, pos32 ? DSA_I32 : DSA_I64, 1, (int64_t[]){t});
  dsa_tensor lt = dsa_tensor_make(lb.mem, lb.off, DSA_I64, 1, (int64_t[]){t});
  dsa_tensor stt = {.mem = stb.mem, .offset = stb.off, .dtype = DSA_F32, .ndim = 3,
                    .shape = {c->nb, c->bs, width}, .stride = {s0, s1, 1}};
  dsa_compressor_params prm;
  dsa_compressor_params_default(&prm);
  prm.compress_ratio = c->ratio;
  CHECK_OK(dsa_compressor_save_states(q, &kvt, &sct, &at, &pt, &lt, &stt, &prm, NULL));
  uint32_t f = dsa_test_read_faults(q);
  ref_state rs = {want, c->nb, c->bs, s0, s1};
  unsigned wf = ref_compressor_save_states(&rs, kv, kvrs, sc + (sc_own ? 0 : 0), kvrs, ape, w, pos,
                                           slots, t, c->ratio, w);
  float *got = dsa_test_xmalloc((size_t)stn * 4);
  gbuf_read(q, &stb, got);
  char cs[128];
  snprintf(cs, sizeof cs, "save T=%lld W=%lld bs=%d ratio=%d", (long long)t, (long long)w, c->bs,
           c->ratio);
  cmp_bytes((const uint8_t *)got, (const uint8_t *)want, (size_t)stn * 4, "state", cs);
  CHECK(f == wf, "save faults 0x%x want 0x%x (%s)", f, wf, cs);
  CHECK(gbuf_guards_ok(q, &stb), "state guard band overwritten (%s)", cs);
  free(kv), free(sc_own), free(ape), free(pos), free(slots), free(perm), free(img), free(want);
  free(pos_n);
  free(got);
  gbuf_release(&kb), gbuf_release(&ab), gbuf_release(&pb), gbuf_release(&lb), gbuf_release(&stb);
  if (sc_own) gbuf_release(&sb);
}

static void test_save(void) {
  const scase fixed[] = {
      {1, 1024, 4, 4, 4, 0},  {37, 1024, 16, 4, 4, 1}, {20, 512, 8, 8, 128, 1},
      {9, 256, 5, 4, 4, 1},   {64, 4, 3, 7, 4, 1},     {5, 12, 0, 4, 128, 1}, /* no blocks */
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) run_save(&fixed[i]);
  for (int it = 0; it < 8; it++) {
    static const int64_t ws[] = {1024, 512, 256, 4, 36};
    scase c = {1 + rnd(50), ws[rnd(5)], 1 + rnd(12), (int32_t)(1 + rnd(9)), rnd(2) ? 4 : 128,
               (int)rnd(2)};
    run_save(&c);
  }
}

/* ---- compress --------------------------------------------------------------- */

typedef struct ccase {
  int fmt, ratio;
  int64_t reqs, maxlen, t;
  int32_t st_bs, c_bs;
  int bad, wbf16, family;
} ccase;

static void run_compress(const ccase *c) {
  const int hd = c->fmt == REF_CACHE_MLA_FP8 ? 512 : 128;
  const int coff = c->ratio == 4 ? 2 : 1;
  const int64_t SW = (int64_t)coff * hd, width = 2 * SW;
  const int64_t s1 = width + 4 * rnd(2), bs = c->st_bs, s0 = bs * s1 + 4 * rnd(2);
  const int64_t R = c->reqs, W = (c->maxlen + bs - 1) / bs + rnd(2);
  const int64_t nb = R * W + 1;
  const int64_t stn = nb * s0 + 1;
  /* State image: every float random in the case's family. */
  float *st = dsa_test_xmalloc((size_t)stn * 4);
  for (int64_t b = 0; b < nb; b++)
    for (int64_t i = 0; i < bs; i++) {
      float *row = st + b * s0 + i * s1;
      const double sscale = c->family == 0 ? 1.0 : c->family == 1 ? 20.0 : c->family == 2 ? 1e-3 : 4.0;
      for (int64_t j = 0; j < SW; j++) {
        row[j] = c->family == 3 && rnd(4) == 0 ? 0.0f : (float)(gauss() * (1 + rnd(3)));
        row[SW + j] = c->family == 3 && rnd(3) == 0 ? 0.5f : (float)(gauss() * sscale);
      }
    }
  /* Block tables: a permutation of the blocks (block nb - 1 never used). */
  int32_t *bt = dsa_test_xmalloc((size_t)(R * W + 1) * 4);
  int64_t *perm = dsa_test_xmalloc((size_t)nb * 8);
  for (int64_t i = 0; i < nb; i++) perm[i] = i;
  for (int64_t i = nb - 2; i > 0; i--) {
    int64_t j = rnd(i + 1), x = perm[i];
    perm[i] = perm[j], perm[j] = x;
  }
  for (int64_t i = 0; i < R * W; i++) bt[i] = (int32_t)perm[i];
  if (c->bad)
    for (int k = 0; k < 2; k++) bt[rnd(R * W)] = rnd(2) ? -1 : (int32_t)(nb + rnd(3));

  const int64_t t = c->t, npos = c->bad && rnd(2) ? c->maxlen / 2 : c->maxlen + rnd(3);
  float *cs = dsa_test_xmalloc((size_t)(npos * 64 + 1) * 4);
  fill_cos_sin(cs, npos, 64);
  int32_t *req = dsa_test_xmalloc((size_t)(t + 1) * 4);
  int64_t *pos = dsa_test_xmalloc((size_t)(t + 1) * 8), *sl = dsa_test_xmalloc((size_t)(t + 1) * 8),
          *csl = dsa_test_xmalloc((size_t)(t + 1) * 8);
  const int64_t c_nb = 1 + t / c->c_bs + rnd(2), cap = c_nb * c->c_bs;
  int64_t *cperm = dsa_test_xmalloc((size_t)(cap + 1) * 8), used = 0;
  for (int64_t i = 0; i < cap; i++) cperm[i] = i;
  for (int64_t i = cap - 1; i > 0; i--) {
    int64_t j = rnd(i + 1), x = cperm[i];
    cperm[i] = cperm[j], cperm[j] = x;
  }
  for (int64_t i = 0; i < t; i++) {
    req[i] = (int32_t)rnd(R);
    int64_t r = rnd(6);
    pos[i] = r < 3 ? (1 + rnd(c->maxlen / c->ratio)) * c->ratio - 1 /* closes a window */
             : r == 3 ? c->ratio - 1 + (c->ratio == 4 ? 4 * rnd(2) : 0) /* first windows */
                      : rnd(c->maxlen);
    if (pos[i] >= c->maxlen) pos[i] = c->maxlen - 1;
    sl[i] = rnd(12) == 0 ? -1 : rnd(1000);
    csl[i] = rnd(10) == 0 ? -1 : used < cap ? cperm[used++] : -1;
    if (c->bad) {
      int64_t b = rnd(12);
      if (b == 0) req[i] = rnd(2) ? -1 : (int32_t)(R + rnd(2));
      if (b == 1) pos[i] = -1 - rnd(4);
      if (b == 2) csl[i] = cap + rnd(4);
    }
  }
  /* The API's other dtypes and omissions: i32 positions, bf16 cos/sin,
   * token_to_req NULL (token t is request t); the reference reads the same. */
  const int pos32 = rnd(3) == 0, cs16 = rnd(3) == 0, no_req = rnd(4) == 0;
  int32_t *pos_n = pos32 ? dsa_test_narrow_pos(pos, (size_t)t) : NULL;
  uint16_t *cs_n = cs16 ? dsa_test_narrow_cs(cs, (size_t)(npos * 64)) : NULL;
  if (no_req)
    for (int64_t i = 0; i < t; i++) req[i] = (int32_t)i;
  float *wt = dsa_test_xmalloc((size_t)hd * 4);
  uint16_t *wb = dsa_test_xmalloc((size_t)hd * 2);
  for (int d = 0; d < hd; d++) {
    wb[d] = ref_bf16_from_float((float)(1.0 + 0.3 * gauss()) * (rnd(5) == 0 ? -1.0f : 1.0f));
    wt[d] = c->wbf16 ? ref_bf16_to_float(wb[d]) : (float)(1.0 + 0.3 * gauss());
  }
  const int64_t tok = c->fmt == REF_CACHE_MLA_FP8 ? 584 : c->fmt == REF_CACHE_INDEXER_FP8 ? 132 : 68;
  const int64_t page = c->c_bs * tok;
  const int64_t bstride = rnd(2) ? page : (page + 575) / 576 * 576 + 16 * rnd(3);
  const size_t cn = (size_t)(c_nb * bstride + 1);
  uint8_t *img = dsa_test_xmalloc(cn), *want = dsa_test_xmalloc(cn), *got = dsa_test_xmalloc(cn);
  dsa_test_fill_random(&rng, img, cn);
  memcpy(want, img, cn);

  guarded_buf stb = gbuf_create(ctx, q, (size_t)stn * 4, st);
  guarded_buf btb = gbuf_create(ctx, q, (size_t)(R * W + 1) * 4, bt);
  guarded_buf rb = gbuf_create(ctx, q, (size_t)(t + 1) * 4, req);
  guarded_buf pb = pos32 ? gbuf_create(ctx, q, (size_t)(t + 1) * 4, pos_n)
                         : gbuf_create(ctx, q, (size_t)(t + 1) * 8, pos);
  guarded_buf slb = gbuf_create(ctx, q, (size_t)(t + 1) * 8, sl);
  guarded_buf cslb = gbuf_create(ctx, q, (size_t)(t + 1) * 8, csl);
  guarded_buf wgb = gbuf_create(ctx, q, (size_t)hd * (c->wbf16 ? 2 : 4),
                                c->wbf16 ? (void *)wb : (void *)wt);
  guarded_buf csb = cs16 ? gbuf_create(ctx, q, (size_t)(npos * 64 + 1) * 2, cs_n)
                         : gbuf_create(ctx, q, (size_t)(npos * 64 + 1) * 4, cs);
  guarded_buf cb = gbuf_create(ctx, q, cn, img);
  dsa_tensor stt = {.mem = stb.mem, .offset = stb.off, .dtype = DSA_F32, .ndim = 3,
                    .shape = {nb, bs, width}, .stride = {s0, s1, 1}};
  dsa_tensor btt = dsa_tensor_make(btb.mem, btb.off, DSA_I32, 2, (int64_t[]){R, W});
  dsa_tensor rt = dsa_tensor_make(rb.mem, rb.off, DSA_I32, 1, (int64_t[]){t});
  dsa_tensor pt = dsa_tensor_make(pb.mem, pb.off, pos32 ? DSA_I32 : DSA_I64, 1, (int64_t[]){t});
  dsa_tensor slt = dsa_tensor_make(slb.mem, slb.off, DSA_I64, 1, (int64_t[]){t});
  dsa_tensor cslt = dsa_tensor_make(cslb.mem, cslb.off, DSA_I64, 1, (int64_t[]){t});
  dsa_tensor wgt = dsa_tensor_make(wgb.mem, wgb.off, c->wbf16 ? DSA_BF16 : DSA_F32, 1,
                                   (int64_t[]){hd});
  dsa_tensor cst = dsa_tensor_make(csb.mem, csb.off, cs16 ? DSA_BF16 : DSA_F32, 2,
                                   (int64_t[]){npos, 64});
  dsa_paged_cache pc = {.mem = cb.mem, .offset = cb.off, .num_blocks = c_nb, .block_size = c->c_bs,
                        .block_stride = bstride, .format = (dsa_cache_format)c->fmt};
  dsa_compressor_params prm;
  dsa_compressor_params_default(&prm);
  prm.compress_ratio = c->ratio;
  if (rnd(3) == 0) prm.eps = 1e-3f;
  CHECK_OK(dsa_compressor_compress_insert(q, &stt, &btt, no_req ? NULL : &rt, &pt, &slt, &wgt,
                                          &cst, &cslt, &pc, &prm, NULL));
  uint32_t f = dsa_test_read_faults(q);
  ref_state rs = {st, nb, c->st_bs, s0, s1};
  ref_compress_args ra = {&rs, bt, R, W, W, 1, req, pos, sl, csl, t, wt, cs, 64, npos, prm.eps,
                          c->ratio, c->fmt, want, c_nb, c->c_bs, bstride, NULL};
  unsigned wf = ref_compressor_compress_insert(&ra);
  gbuf_read(q, &cb, got);
  char cx[160];
  snprintf(cx, sizeof cx,
           "fmt=%d ratio=%d T=%lld R=%lld bs=%d cbs=%d bad=%d fam=%d bf16w=%d pos32=%d cs16=%d "
           "no_req=%d",
           c->fmt, c->ratio, (long long)t, (long long)R, c->st_bs, c->c_bs, c->bad, c->family,
           c->wbf16, pos32, cs16, no_req);
  cmp_bytes(got, want, cn, "cache", cx);
  CHECK(f == wf, "compress faults 0x%x want 0x%x (%s)", f, wf, cx);
  CHECK(gbuf_guards_ok(q, &cb), "cache guard band overwritten (%s)", cx);
  float *stg = dsa_test_xmalloc((size_t)stn * 4);
  gbuf_read(q, &stb, stg);
  CHECK(!memcmp(stg, st, (size_t)stn * 4), "state modified by compress (%s)", cx);

  free(st), free(bt), free(perm), free(cs), free(req), free(pos), free(sl), free(csl);
  free(pos_n), free(cs_n);
  free(cperm), free(wt), free(wb), free(img), free(want), free(got), free(stg);
  gbuf_release(&stb), gbuf_release(&btb), gbuf_release(&rb), gbuf_release(&pb);
  gbuf_release(&slb), gbuf_release(&cslb), gbuf_release(&wgb), gbuf_release(&csb);
  gbuf_release(&cb);
}

static void test_compress(void) {
  /* fmt, ratio, reqs, maxlen, t, st_bs, c_bs, bad, wbf16, family */
  const ccase fixed[] = {
      {1, 4, 2, 64, 40, 4, 64, 0, 1, 0},    {1, 128, 2, 600, 24, 8, 2, 0, 1, 0},
      {2, 4, 3, 100, 50, 4, 64, 0, 0, 1},   {3, 4, 3, 100, 50, 4, 64, 0, 1, 2},
      {1, 4, 2, 50, 30, 3, 5, 1, 0, 3},     {2, 4, 2, 50, 30, 1, 7, 1, 1, 3},
      {3, 4, 2, 50, 30, 5, 3, 1, 1, 3},     {1, 128, 1, 300, 12, 5, 2, 1, 0, 1},
      {2, 128, 1, 400, 10, 8, 64, 0, 1, 0}, {3, 128, 1, 300, 10, 8, 64, 1, 0, 3},
      {1, 4, 1, 8, 8, 4, 64, 0, 1, 3}, /* first windows only */
      /* Ratio 128, head 512, scores of family 1 (spread 20): many weights
       * in [2^-126, 2^-100), whose quotients only the long division
       * rounds (the kernels' slow paths). */
      {1, 128, 2, 400, 16, 8, 2, 0, 0, 1},
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) run_compress(&fixed[i]);
  for (int it = 0; it < 10; it++) {
    ccase c;
    c.fmt = 1 + (int)rnd(3);
    c.ratio = rnd(3) == 0 ? 128 : 4;
    c.reqs = 1 + rnd(3);
    c.maxlen = c.ratio == 4 ? 8 + rnd(120) : 128 + rnd(300);
    c.t = 1 + rnd(c.ratio == 4 ? 40 : 12);
    c.st_bs = (int32_t)(1 + rnd(9));
    c.c_bs = rnd(2) ? 64 : (int32_t)(1 + rnd(8));
    c.bad = (int)rnd(2), c.wbf16 = (int)rnd(2), c.family = (int)rnd(4);
    run_compress(&c);
  }
}

/* ---- a decode sequence: save + compress per step ---------------------------- */

static void test_sequence(int fmt, int ratio, int steps) {
  const int hd = fmt == REF_CACHE_MLA_FP8 ? 512 : 128, coff = ratio == 4 ? 2 : 1;
  const int64_t SW = (int64_t)coff * hd, width = 2 * SW, bs = ratio == 4 ? 4 : 8;
  const int64_t nb = (steps + bs - 1) / bs + 1, stn = nb * bs * width;
  const int64_t npos = steps + 1;
  float *stimg = dsa_test_xmalloc((size_t)stn * 4);
  float *kvs = dsa_test_xmalloc((size_t)(2 * SW) * 4), *ape = dsa_test_xmalloc((size_t)(ratio * SW) * 4);
  for (int64_t i = 0; i < ratio * SW; i++) ape[i] = (float)(0.5 * gauss());
  float *cs = dsa_test_xmalloc((size_t)npos * 64 * 4);
  fill_cos_sin(cs, npos, 64);
  float wt[512];
  for (int d = 0; d < hd; d++) wt[d] = (float)(1.0 + 0.2 * gauss());
  int32_t *bt = dsa_test_xmalloc((size_t)nb * 4);
  for (int64_t i = 0; i < nb; i++) bt[i] = (int32_t)(nb - 1 - i);
  const int32_t c_bs = fmt == REF_CACHE_MLA_FP8 && ratio == 128 ? 2 : 64;
  const int64_t tok = fmt == REF_CACHE_MLA_FP8 ? 584 : fmt == REF_CACHE_INDEXER_FP8 ? 132 : 68;
  const int64_t c_nb = steps / ratio / c_bs + 1, bstride = c_bs * tok, cn = c_nb * bstride;
  uint8_t *want = dsa_test_xmalloc((size_t)cn), *got = dsa_test_xmalloc((size_t)cn);
  float *stw = dsa_test_xmalloc((size_t)stn * 4);

  guarded_buf stb = gbuf_create(ctx, q, (size_t)stn * 4, stimg);
  guarded_buf kvb = gbuf_create(ctx, q, (size_t)(2 * SW) * 4, NULL);
  guarded_buf ab = gbuf_create(ctx, q, (size_t)(ratio * SW) * 4, ape);
  guarded_buf csb = gbuf_create(ctx, q, (size_t)npos * 64 * 4, cs);
  guarded_buf wgb = gbuf_create(ctx, q, (size_t)hd * 4, wt);
  guarded_buf btb = gbuf_create(ctx, q, (size_t)nb * 4, bt);
  guarded_buf cb = gbuf_create(ctx, q, (size_t)cn, want);
  guarded_buf mb = gbuf_create(ctx, q, 64, NULL);
  dsa_tensor stt = dsa_tensor_make(stb.mem, stb.off, DSA_F32, 3, (int64_t[]){nb, bs, width});
  dsa_tensor kvt = {.mem = kvb.mem, .offset = kvb.off, .dtype = DSA_F32, .ndim = 2,
                    .shape = {1, SW}, .stride = {2 * SW, 1}};
  dsa_tensor sct = {.mem = kvb.mem, .offset = kvb.off + (size_t)SW * 4, .dtype = DSA_F32,
                    .ndim = 2, .shape = {1, SW}, .stride = {2 * SW, 1}};
  dsa_tensor at = dsa_tensor_make(ab.mem, ab.off, DSA_F32, 2, (int64_t[]){ratio, SW});
  dsa_tensor cst = dsa_tensor_make(csb.mem, csb.off, DSA_F32, 2, (int64_t[]){npos, 64});
  dsa_tensor wgt = dsa_tensor_make(wgb.mem, wgb.off, DSA_F32, 1, (int64_t[]){hd});
  dsa_tensor btt = dsa_tensor_make(btb.mem, btb.off, DSA_I32, 2, (int64_t[]){1, nb});
  /* meta: pos, slot, cslot (i64) at 0, 8, 16; req (i32) at 24 */
  dsa_tensor pt = dsa_tensor_make(mb.mem, mb.off, DSA_I64, 1, (int64_t[]){1});
  dsa_tensor slt = dsa_tensor_make(mb.mem, mb.off + 8, DSA_I64, 1, (int64_t[]){1});
  dsa_tensor cslt = dsa_tensor_make(mb.mem, mb.off + 16, DSA_I64, 1, (int64_t[]){1});
  dsa_tensor rt = dsa_tensor_make(mb.mem, mb.off + 24, DSA_I32, 1, (int64_t[]){1});
  dsa_paged_cache pc = {.mem = cb.mem, .offset = cb.off, .num_blocks = c_nb, .block_size = c_bs,
                        .block_stride = bstride, .format = (dsa_cache_format)fmt};
  dsa_compressor_params prm;
  dsa_compressor_params_default(&prm);
  prm.compress_ratio = ratio;
  memcpy(stw, stimg, (size_t)stn * 4);
  ref_state rs = {stw, nb, (int32_t)bs, bs * width, width};
  unsigned fw = 0;
  for (int64_t p = 0; p < steps; p++) {
    for (int64_t j = 0; j < 2 * SW; j++) kvs[j] = (float)(gauss() * (j < SW ? 1.0 : 2.0));
    const int64_t blk = bt[p / bs], slot = blk * bs + p % bs;
    const int64_t cslot = (p + 1) % ratio == 0 ? p / ratio : -1;
    int64_t meta[4] = {p, slot, cslot, 0};
    clEnqueueWriteBuffer(dsa_queue_cl(q), kvb.mem, CL_TRUE, kvb.off, (size_t)(2 * SW) * 4, kvs, 0,
                         NULL, NULL);
    clEnqueueWriteBuffer(dsa_queue_cl(q), mb.mem, CL_TRUE, mb.off, sizeof meta, meta, 0, NULL, NULL);
    CHECK_OK(dsa_compressor_save_states(q, &kvt, &sct, &at, &pt, &slt, &stt, &prm, NULL));
    CHECK_OK(dsa_compressor_compress_insert(q, &stt, &btt, &rt, &pt, &slt, &wgt, &cst, &cslt, &pc,
                                            &prm, NULL));
    fw |= ref_compressor_save_states(&rs, kvs, 2 * SW, kvs + SW, 2 * SW, ape, SW, &p, &slot, 1,
                                     ratio, SW);
    int32_t r0 = 0;
    ref_compress_args ra = {&rs, bt, 1, nb, nb, 1, &r0, &p, &slot, &cslot, 1, wt, cs, 64, npos,
                            prm.eps, ratio, fmt, want, c_nb, c_bs, bstride, NULL};
    fw |= ref_compressor_compress_insert(&ra);
  }
  CHECK(dsa_test_read_faults(q) == 0 && fw == 0, "sequence faulted");
  gbuf_read(q, &cb, got);
  char cx[64];
  snprintf(cx, sizeof cx, "sequence fmt=%d ratio=%d steps=%d", fmt, ratio, steps);
  cmp_bytes(got, want, (size_t)cn, "cache", cx);
  float *stg = dsa_test_xmalloc((size_t)stn * 4);
  gbuf_read(q, &stb, stg);
  cmp_bytes((const uint8_t *)stg, (const uint8_t *)stw, (size_t)stn * 4, "state", cx);
  free(stimg), free(kvs), free(ape), free(cs), free(bt), free(want), free(got), free(stw), free(stg);
  gbuf_release(&stb), gbuf_release(&kvb), gbuf_release(&ab), gbuf_release(&csb);
  gbuf_release(&wgb), gbuf_release(&btb), gbuf_release(&cb), gbuf_release(&mb);
}

/* ---- bad arguments ---------------------------------------------------------- */

typedef struct sargs {
  dsa_queue *q;
  dsa_tensor kv, sc, ape, pos, sl, st;
  const dsa_tensor *pkv, *psc, *pape, *ppos, *psl, *pst;
  dsa_compressor_params prm;
  dsa_events ev;
} sargs;

static int save_breaker(void *vx, int c, const char **w, const char **w2) {
  sargs *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->q = NULL, *w = "q"; return 1;
    case 1: x->pkv = NULL, *w = "kv"; return 1;
    case 2: x->kv.dtype = DSA_BF16, *w = "kv"; return 1;
    case 3: x->kv.shape[1] = 6, x->sc.shape[1] = 6, *w = "kv"; return 1;
    case 4: x->kv.stride[1] = 2, *w = "kv"; return 1;
    case 5: x->sc.shape[0] -= 1, *w = "score"; return 1;
    case 6: x->psc = NULL, *w = "score"; return 1;
    case 7: x->ape.shape[0] = 3, *w = "ape"; return 1;
    case 8: x->ape.dtype = DSA_BF16, *w = "ape"; return 1;
    case 9: x->pos.dtype = DSA_F32, *w = "positions"; return 1;
    case 10: x->sl.shape[0] += 1, *w = "slot_mapping"; return 1;
    case 11: x->st.shape[2] -= 4, *w = "state"; return 1;
    case 12: x->st.stride[1] = 8, *w = "state"; return 1;
    case 13: x->st.stride[0] = x->st.stride[1], *w = "state"; return 1;
    case 14: x->st.shape[0] += 1000, *w = "state"; return 1; /* past the buffer */
    case 15: x->pst = NULL, *w = "state"; return 1;
    case 16: x->prm.compress_ratio = 8, *w = "compress_ratio"; return 1;
    case 17: x->ev.num_wait = 1, x->ev.wait = NULL, *w = "ev"; return 1;
    case 18: x->st.dtype = DSA_I32, *w = "state"; return 1;
    case 19: x->kv.shape[0] += 100, *w = "kv"; return 1;
    default: return 0;
  }
}
static void sargs_point(void *vx) {
  sargs *x = vx;
  x->pkv = &x->kv, x->psc = &x->sc, x->pape = &x->ape, x->ppos = &x->pos, x->psl = &x->sl;
  x->pst = &x->st;
}
static dsa_status save_call(void *vx, cl_event *done) {
  sargs *x = vx;
  x->ev.done = done;
  return dsa_compressor_save_states(x->q, x->pkv, x->psc, x->pape, x->ppos, x->psl, x->pst,
                                    &x->prm, &x->ev);
}
static dsa_status save_valid(void *vx, cl_event *done) {
  sargs *x = vx;
  (void)done;
  return dsa_compressor_save_states(x->q, &x->kv, &x->sc, &x->ape, &x->pos, &x->sl, &x->st, NULL,
                                    NULL);
}

typedef struct cargs {
  dsa_queue *q;
  dsa_tensor st, bt, req, pos, sl, w, cs, csl;
  const dsa_tensor *pst, *pbt, *preq, *ppos, *psl, *pw, *pcs, *pcsl;
  dsa_paged_cache cache;
  const dsa_paged_cache *pcache;
  dsa_compressor_params prm;
  dsa_events ev;
} cargs;

static int comp_breaker(void *vx, int c, const char **w, const char **w2) {
  cargs *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->q = NULL, *w = "q"; return 1;
    case 1: x->pst = NULL, *w = "state"; return 1;
    case 2: x->st.shape[2] = 1024, *w = "state"; return 1; /* C128 width for a C4 call */
    case 3: x->pbt = NULL, *w = "block_table"; return 1;
    case 4: x->bt.dtype = DSA_I64, *w = "block_table"; return 1;
    case 5: x->req.shape[0] += 1, *w = "token_to_req"; return 1;
    case 6: x->ppos = NULL, *w = "positions"; return 1;
    case 7: x->sl.dtype = DSA_I32, *w = "slot_mapping"; return 1;
    case 8: x->w.shape[0] = 128, *w = "norm_weight"; return 1;
    case 9: x->w.dtype = DSA_U8, *w = "norm_weight"; return 1;
    case 10: x->pw = NULL, *w = "norm_weight"; return 1;
    case 11: x->cs.shape[1] = 32, *w = "cos_sin"; return 1;
    case 12: x->pcs = NULL, *w = "cos_sin"; return 1;
    case 13: x->csl.shape[0] -= 1, *w = "cache_slot_mapping"; return 1;
    case 14: x->cache.format = (dsa_cache_format)9, *w = "cache"; return 1;
    case 15: x->cache.format = DSA_CACHE_INDEXER_FP8, *w = "state"; return 1; /* hd 128 width */
    case 16: x->cache.block_stride = 10, *w = "block_stride"; return 1;
    case 17: x->pcache = NULL, *w = "cache"; return 1;
    case 18: x->prm.compress_ratio = 0, *w = "compress_ratio"; return 1;
    case 19: x->prm.eps = NAN, *w = "eps"; return 1;
    case 20: x->ev.num_wait = 1, x->ev.wait = NULL, *w = "ev"; return 1;
    case 21: x->prm.compress_ratio = 128, *w = "state"; return 1;
    default: return 0;
  }
}
static void cargs_point(void *vx) {
  cargs *x = vx;
  x->pst = &x->st, x->pbt = &x->bt, x->preq = &x->req, x->ppos = &x->pos, x->psl = &x->sl;
  x->pw = &x->w, x->pcs = &x->cs, x->pcsl = &x->csl, x->pcache = &x->cache;
}
static dsa_status comp_call(void *vx, cl_event *done) {
  cargs *x = vx;
  x->ev.done = done;
  return dsa_compressor_compress_insert(x->q, x->pst, x->pbt, x->preq, x->ppos, x->psl, x->pw,
                                        x->pcs, x->pcsl, x->pcache, &x->prm, &x->ev);
}
static dsa_status comp_valid(void *vx, cl_event *done) {
  cargs *x = vx;
  (void)done;
  return dsa_compressor_compress_insert(x->q, &x->st, &x->bt, &x->req, &x->pos, &x->sl, &x->w,
                                        &x->cs, &x->csl, &x->cache, NULL, NULL);
}

static void test_bad_args(void) {
  const int64_t t = 8, w = 1024;
  float *kv = dsa_test_xmalloc((size_t)(t * 2 * w) * 4);
  for (int64_t i = 0; i < t * 2 * w; i++) kv[i] = (float)(i % 7) * 0.25f;
  guarded_buf kb = gbuf_create(ctx, q, (size_t)(t * 2 * w) * 4, kv);
  guarded_buf ab = gbuf_create(ctx, q, (size_t)(4 * w) * 4, kv);
  int64_t pos[8] = {0, 1, 2, 3, 4, 5, 6, 7}, sl[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  int32_t req[8] = {0}, bt[2] = {0, 1};
  guarded_buf pb = gbuf_create(ctx, q, sizeof pos, pos), lb = gbuf_create(ctx, q, sizeof sl, sl);
  guarded_buf rb = gbuf_create(ctx, q, sizeof req, req), btb = gbuf_create(ctx, q, sizeof bt, bt);
  guarded_buf stb = gbuf_create(ctx, q, (size_t)(2 * 4 * 2 * w) * 4, NULL);
  sargs sb;
  memset(&sb, 0, sizeof sb);
  sb.q = q;
  sb.kv = (dsa_tensor){.mem = kb.mem, .offset = kb.off, .dtype = DSA_F32, .ndim = 2,
                       .shape = {t, w}, .stride = {2 * w, 1}};
  sb.sc = (dsa_tensor){.mem = kb.mem, .offset = kb.off + (size_t)w * 4, .dtype = DSA_F32,
                       .ndim = 2, .shape = {t, w}, .stride = {2 * w, 1}};
  sb.ape = dsa_tensor_make(ab.mem, ab.off, DSA_F32, 2, (int64_t[]){4, w});
  sb.pos = dsa_tensor_make(pb.mem, pb.off, DSA_I64, 1, (int64_t[]){t});
  sb.sl = dsa_tensor_make(lb.mem, lb.off, DSA_I64, 1, (int64_t[]){t});
  sb.st = dsa_tensor_make(stb.mem, stb.off, DSA_F32, 3, (int64_t[]){2, 4, 2 * w});
  dsa_compressor_params_default(&sb.prm);
  dsa_bad_args spec = {.op = "compressor_save_states", .base = &sb, .size = sizeof sb,
                       .reset = sargs_point, .brk = save_breaker, .call = save_call,
                       .valid = save_valid, .outs = (const guarded_buf *const[]){&stb},
                       .nouts = 1, .min_cases = 18, .all_change = 1, .no_event = 1};
  dsa_test_run_bad(q, &spec);
  CHECK(dsa_test_read_faults(q) == 0, "valid save faulted");

  /* compress: state now holds tokens 0..7 (two blocks of 4); C4 MLA. */
  float cs[8 * 64];
  fill_cos_sin(cs, 8, 64);
  guarded_buf csb = gbuf_create(ctx, q, sizeof cs, cs);
  guarded_buf wb = gbuf_create(ctx, q, 512 * 4, kv);
  guarded_buf cb = gbuf_create(ctx, q, 64 * 584, NULL);
  cargs cbs;
  memset(&cbs, 0, sizeof cbs);
  cbs.q = q;
  cbs.st = sb.st;
  cbs.bt = dsa_tensor_make(btb.mem, btb.off, DSA_I32, 2, (int64_t[]){1, 2});
  cbs.req = dsa_tensor_make(rb.mem, rb.off, DSA_I32, 1, (int64_t[]){t});
  cbs.pos = sb.pos, cbs.sl = sb.sl, cbs.csl = sb.sl;
  cbs.w = dsa_tensor_make(wb.mem, wb.off, DSA_F32, 1, (int64_t[]){512});
  cbs.cs = dsa_tensor_make(csb.mem, csb.off, DSA_F32, 2, (int64_t[]){8, 64});
  cbs.cache = (dsa_paged_cache){.mem = cb.mem, .offset = cb.off, .num_blocks = 1, .block_size = 64,
                                .block_stride = 64 * 584, .format = DSA_CACHE_MLA_FP8};
  dsa_compressor_params_default(&cbs.prm);
  dsa_bad_args spec2 = {.op = "compressor_compress_insert", .base = &cbs, .size = sizeof cbs,
                        .reset = cargs_point, .brk = comp_breaker, .call = comp_call,
                        .valid = comp_valid, .outs = (const guarded_buf *const[]){&cb},
                        .nouts = 1, .min_cases = 20, .all_change = 1, .no_event = 1};
  dsa_test_run_bad(q, &spec2);
  CHECK(dsa_test_read_faults(q) == 0, "valid compress faulted");

  /* T = 0 gives a completed event and touches nothing. */
  cl_event done = NULL;
  dsa_events ev = {0, NULL, &done};
  dsa_tensor k0 = sb.kv, s0 = sb.sc, p0 = sb.pos, l0 = sb.sl, r0 = cbs.req;
  k0.shape[0] = s0.shape[0] = p0.shape[0] = l0.shape[0] = r0.shape[0] = 0;
  CHECK_OK(dsa_compressor_save_states(q, &k0, &s0, &sb.ape, &p0, &l0, &sb.st, NULL, &ev));
  if (done) dsa_test_expect_complete(done, "save T=0");
  done = NULL;
  CHECK_OK(dsa_compressor_compress_insert(q, &cbs.st, &cbs.bt, &r0, &p0, &l0, &cbs.w, &cbs.cs,
                                          &l0, &cbs.cache, NULL, &ev));
  if (done) dsa_test_expect_complete(done, "compress T=0");
  free(kv);
  gbuf_release(&kb), gbuf_release(&ab), gbuf_release(&pb), gbuf_release(&lb), gbuf_release(&rb);
  gbuf_release(&btb), gbuf_release(&stb), gbuf_release(&csb), gbuf_release(&wb);
  gbuf_release(&cb);
}

int main(void) {
  dsa_test_open(&ctx, &q, 0);
  test_ref_exp2();
  test_bad_args();
  test_save();
  test_compress();
  test_sequence(REF_CACHE_MLA_FP8, 4, 24);
  test_sequence(REF_CACHE_INDEXER_FP8, 4, 20);
  test_sequence(REF_CACHE_INDEXER_MXFP4, 4, 20);
  test_sequence(REF_CACHE_MLA_FP8, 128, 260);
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
