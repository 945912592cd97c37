/* Sparse MLA attention (dsa_sparse_attn_bf16, dsa_sparse_mla_decode fused and
 * two-stage) against the fp64 reference in tests/ref on randomized shapes
 * (H = 1..128, T = 0, 1, odd; K up to 2048; only-main / only-extra / both /
 * neither), edge cases (sinks -inf/+inf/30/-30, empty rows, a fully masked
 * first tile, -1 inside a valid length, out-of-range indices and lengths ->
 * faults), guard bands, and host-side argument validation.
 *
 * Tolerance (SPEC.md): max |d| <= 1e-2 * max(1, |ref|) elementwise, relative
 * L2 <= 4e-3, lse within 1e-4 absolute up to |lse| = 16 and 6.25e-6
 * relative above (ref_lse_tol: f32's limit at the amplified cases' |lse| of
 * 130-200; -inf exactly where the reference has it). The two decode
 * strategies must also agree with each other. */
#include <math.h>
#include <stdarg.h>

#include "common.h"
#include "dsacl/sparse_mla.h"
#include "ref.h"
#include "ref_sparse_mla.h"

/* The two-stage decode's workspace: bytes [off, off + n) of m as a u8 tensor. */
#define WS_BYTES(m, off, n)                                                        \
  (&(dsa_tensor){.mem = (m), .offset = (off), .dtype = DSA_U8, .ndim = 1,          \
                 .shape = {(int64_t)(n)}, .stride = {1}})

static dsa_context *ctx;
static dsa_queue *q;
static uint64_t rng = 0x5A95E1234ull;

static int64_t rnd(int64_t n) { return n > 0 ? (int64_t)(dsa_test_rand(&rng) % (uint64_t)n) : 0; }



static double gauss(void) {
  return (dsa_test_uniform(&rng) + dsa_test_uniform(&rng) + dsa_test_uniform(&rng) - 1.5) * 2;
}

static uint16_t bf16(double x) { return ref_bf16_from_float((float)x); }


/* ---- tolerance ------------------------------------------------------------------ */

/* got bf16 [n rows of 512] (row i at got + i*row_stride) vs want (dense
 * double); lse likewise (NULL: not checked). */
static void check_close(const char *what, const uint16_t *got, int64_t row_stride,
                        const double *want, int64_t rows, const float *lse_got,
                        const double *lse_want) {
  double worst = 0, d2 = 0, r2 = 0;
  int64_t bad = 0, first = -1;
  for (int64_t r = 0; r < rows; r++)
    for (int i = 0; i < 512; i++) {
      double g = ref_bf16_to_float(got[r * row_stride + i]), w = want[r * 512 + i];
      double d = fabs(g - w), lim = 1e-2 * fmax(1.0, fabs(w));
      if (!(d <= lim)) {
        if (!bad++) first = r * 512 + i;
      }
      if (d / lim > worst) worst = d / lim;
      d2 += (g - w) * (g - w), r2 += w * w;
    }
  double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
  CHECK(bad == 0, "%s: %lld elements beyond 1e-2*max(1,|ref|), first [%lld] got %g want %g", what,
        (long long)bad, (long long)first,
        bad ? (double)ref_bf16_to_float(got[first / 512 * row_stride + first % 512]) : 0.0,
        bad ? want[first] : 0.0);
  CHECK(rel <= 4e-3, "%s: relative L2 error %g > 4e-3", what, rel);
  if (!lse_got) return;
  int64_t lbad = 0, lfirst = -1;
  for (int64_t r = 0; r < rows; r++) {
    double g = lse_got[r], w = lse_want[r];
    int ok = isinf(w) ? (isinf(g) && (g < 0) == (w < 0)) : fabs(g - w) <= ref_lse_tol(w);
    if (!ok && !lbad++) lfirst = r;
  }
  CHECK(lbad == 0, "%s: %lld lse values off, first [%lld] got %.9g want %.9g", what,
        (long long)lbad, (long long)lfirst, lbad ? (double)lse_got[lfirst] : 0.0,
        lbad ? lse_want[lfirst] : 0.0);
}

/* bf16 vs bf16 (the two decode strategies) with the same bounds. */
static void check_agree(const char *what, const uint16_t *a, const uint16_t *b, int64_t rows,
                        int64_t row_stride) {
  double *w = dsa_test_xmalloc((size_t)rows * 512 * sizeof *w);
  for (int64_t r = 0; r < rows; r++)
    for (int i = 0; i < 512; i++) w[r * 512 + i] = ref_bf16_to_float(b[r * row_stride + i]);
  check_close(what, a, row_stride, w, rows, NULL, NULL);
  free(w);
}

/* ---- inputs ---------------------------------------------------------------------- */

/* q [T, H, 512] at element strides (s0, s1) with junk in the gaps; amp scales
 * the values (peaky or flat softmax). */
static uint16_t *make_q(int64_t t, int64_t h, int64_t s0, int64_t s1, double amp, size_t *bytes) {
  *bytes = (size_t)(t ? (t - 1) * s0 + (h - 1) * s1 + 512 : 0) * 2;
  uint16_t *x = dsa_test_xmalloc(*bytes);
  dsa_test_fill_random(&rng, x, *bytes);
  for (int64_t a = 0; a < t; a++)
    for (int64_t b = 0; b < h; b++)
      for (int i = 0; i < 512; i++) x[a * s0 + b * s1 + i] = bf16(gauss() * amp);
  return x;
}

static float *make_sink(int64_t h, int edge) {
  static const float edges[] = {-INFINITY, INFINITY, 30.0f, -30.0f, 0.0f, 2.5f};
  float *s = dsa_test_xmalloc((size_t)h * 4);
  for (int64_t i = 0; i < h; i++)
    s[i] = edge ? edges[(i + rnd(2)) % 6] : (float)(gauss() * 3);
  return s;
}

/* A cache with every slot holding a quantized random row. */
typedef struct tcache {
  guarded_buf gb;
  uint8_t *img;
  size_t size;
  ref_mla_cache ref;
  dsa_paged_cache dc;
} tcache;

static tcache cache_make(int64_t nb, int32_t bs, int64_t stride, double amp) {
  tcache t;
  t.size = (size_t)(nb * stride);
  t.img = dsa_test_xmalloc(t.size);
  dsa_test_fill_random(&rng, t.img, t.size);
  t.ref = (ref_mla_cache){t.img, nb, bs, stride};
  uint16_t row[512];
  for (int64_t s = 0; s < nb * bs; s++) {
    double blk_amp = amp * (rnd(8) == 0 ? 50 : 1);
    for (int i = 0; i < 512; i++) row[i] = bf16(gauss() * blk_amp);
    if (rnd(16) == 0) memset(row + 64 * rnd(7), 0, 128); /* an all-zero NoPE block */
    ref_mla_insert(&t.ref, row, 512, &s, 1);
    /* Codes the quantizer does not write but a cache may hold, in one slot of
     * eight: e4m3 NaN codes (read as 0), subnormal codes and scale bytes
     * below 8 or from 135 on (the dequantization's exact paths), a NaN RoPE
     * element. */
    if (rnd(8) == 0) {
      const int64_t blk = s / bs, tok = s % bs, b = rnd(7);
      uint8_t *data = t.img + blk * stride + tok * 576;
      const int mode = (int)rnd(4), n = 1 + (int)rnd(6);
      for (int i = 0; i < n && mode < 2; i++)
        data[64 * b + rnd(64)] = (uint8_t)(mode == 0 ? (rnd(2) ? 0xFF : 0x7F)
                                                     : (rnd(2) ? 0x80 : 0) | (1 + rnd(7)));
      if (mode == 2)
        t.img[blk * stride + (int64_t)bs * 576 + tok * 8 + b] =
            (uint8_t)(rnd(2) ? rnd(8) : 135 + rnd(8));
      if (mode == 3) {
        const int64_t e = 448 + 2 * rnd(64);
        data[e] = 0xC0, data[e + 1] = 0x7F;
      }
    }
  }
  t.gb = gbuf_create(ctx, q, t.size, t.img);
  t.dc = (dsa_paged_cache){.mem = t.gb.mem, .offset = t.gb.off, .num_blocks = nb, .block_size = bs,
                           .block_stride = stride, .format = DSA_CACHE_MLA_FP8};
  return t;
}

static void cache_free(tcache *t) {
  gbuf_release(&t->gb);
  free(t->img);
}

/* indices [T, K] (row stride s0 >= K) into a table of `cap` entries: mostly
 * valid, some -1; with `bad`, some >= cap. lens in [0, K] (bad: some beyond). */
static void make_indices(int32_t *idx, int32_t *lens, int64_t t, int64_t k, int64_t s0,
                         int64_t cap, int bad, int masked_first) {
  for (int64_t a = 0; a < t; a++) {
    int64_t r = rnd(6);
    lens[a] = (int32_t)(r == 0 ? 0 : r == 1 ? rnd(k + 1) : k - rnd(k < 4 ? k + 1 : 4));
    if (bad && rnd(4) == 0) lens[a] = (int32_t)(rnd(2) ? k + 1 + rnd(5) : -1 - rnd(3));
    if (masked_first && k >= 20) lens[a] = (int32_t)k;
    for (int64_t j = 0; j < s0; j++) {
      int64_t v = cap > 0 ? rnd(cap) : -1;
      int64_t c = rnd(16);
      if (c == 0) v = -1;
      if (c == 1 && bad) v = cap + rnd(3);
      if (masked_first && j < 17) v = -1; /* two whole tiles and one entry masked */
      idx[a * s0 + j] = (int32_t)v;
    }
  }
}

/* ---- bf16 sparse attention -------------------------------------------------------- */

typedef struct attn_case {
  int64_t t, h, s, k;
  int lens_null, sink;  /* sink: 0 none, 1 random, 2 edge values */
  int strided, bad, masked_first, with_lse;
  double amp;
} attn_case;

static void run_attn(const attn_case *c) {
  const int64_t qs1 = c->strided ? 520 : 512, qs0 = c->h * qs1 + (c->strided ? 8 : 0);
  const int64_t kvs = c->strided ? 516 : 512, is0 = c->k + (c->strided ? 3 : 0);
  const int64_t os1 = c->strided ? 528 : 512, os0 = c->h * os1;
  size_t qbytes;
  uint16_t *qh = make_q(c->t, c->h, qs0, qs1, c->amp, &qbytes);
  size_t kvbytes = (size_t)(c->s * kvs) * 2;
  uint16_t *kv = dsa_test_xmalloc(kvbytes);
  dsa_test_fill_random(&rng, kv, kvbytes);
  for (int64_t r = 0; r < c->s; r++)
    for (int i = 0; i < 512; i++) kv[r * kvs + i] = bf16(gauss() * (rnd(10) ? 1 : 4));
  if (c->s > 3) kv[2 * kvs + 7] = 0x7FC0; /* a NaN element of K reads as 0 */
  int32_t *idx = dsa_test_xmalloc((size_t)(c->t * is0) * 4), *lens = dsa_test_xmalloc((size_t)c->t * 4 + 4);
  make_indices(idx, lens, c->t, c->k, is0, c->s, c->bad, c->masked_first);
  float *sink = c->sink ? make_sink(c->h, c->sink == 2) : NULL;
  dsa_sparse_params p;
  dsa_sparse_params_default(&p);
  p.softmax_scale = (float)(0.04419417382415922 * (rnd(2) ? 1 : 0.5));

  /* Strided cases also shift q and out by one element: unaligned vector paths. */
  const size_t sh = c->strided ? 2 : 0;
  uint8_t *qsh = dsa_test_xmalloc(qbytes + sh);
  memset(qsh, 0x55, sh);
  memcpy(qsh + sh, qh, qbytes);
  guarded_buf qb = gbuf_create(ctx, q, qbytes + sh, qsh), kb = gbuf_create(ctx, q, kvbytes, kv),
              ib = gbuf_create(ctx, q, (size_t)(c->t * is0) * 4, idx),
              lb = gbuf_create(ctx, q, (size_t)c->t * 4, lens),
              sb = gbuf_create(ctx, q, (size_t)c->h * 4, sink),
              ob = gbuf_create(ctx, q, (size_t)(c->t * os0) * 2 + sh, NULL),
              eb = gbuf_create(ctx, q, (size_t)(c->t * c->h) * 4, NULL);
  dsa_tensor qt = {.mem = qb.mem, .offset = qb.off + sh, .dtype = DSA_BF16, .ndim = 3,
                   .shape = {c->t, c->h, 512}, .stride = {qs0, qs1, 1}};
  dsa_tensor kt = {.mem = kb.mem, .offset = kb.off, .dtype = DSA_BF16, .ndim = 2,
                   .shape = {c->s, 512}, .stride = {kvs, 1}};
  dsa_tensor it = {.mem = ib.mem, .offset = ib.off, .dtype = DSA_I32, .ndim = 2,
                   .shape = {c->t, c->k}, .stride = {is0, 1}};
  dsa_tensor lt = dsa_tensor_make(lb.mem, lb.off, DSA_I32, 1, (int64_t[]){c->t});
  dsa_tensor st = dsa_tensor_make(sb.mem, sb.off, DSA_F32, 1, (int64_t[]){c->h});
  dsa_tensor ot = {.mem = ob.mem, .offset = ob.off + sh, .dtype = DSA_BF16, .ndim = 3,
                   .shape = {c->t, c->h, 512}, .stride = {os0, os1, 1}};
  dsa_tensor et = dsa_tensor_make(eb.mem, eb.off, DSA_F32, 2, (int64_t[]){c->t, c->h});
  CHECK_OK(dsa_sparse_attn_bf16(q, &qt, &kt, &it, c->lens_null ? NULL : &lt,
                                c->sink ? &st : NULL, &ot, c->with_lse ? &et : NULL, &p, NULL));
  uint8_t *graw = dsa_test_xmalloc(ob.size + 2);
  uint16_t *got = dsa_test_xmalloc(ob.size + 2);
  float *lse = dsa_test_xmalloc(eb.size + 4);
  gbuf_read(q, &ob, graw);
  memcpy(got, graw + sh, ob.size - sh);
  gbuf_read(q, &eb, lse);
  double *want = dsa_test_xmalloc((size_t)(c->t * c->h) * 512 * 8 + 8),
         *wlse = dsa_test_xmalloc((size_t)(c->t * c->h) * 8 + 8);
  unsigned wf = ref_sparse_attn_bf16(qh, c->t, c->h, qs0, qs1, kv, c->s, kvs, idx, c->k, is0, 1,
                                     c->lens_null ? NULL : lens, sink, p.softmax_scale, want,
                                     wlse);
  char what[200];
  snprintf(what, sizeof what, "attn_bf16 T=%lld H=%lld S=%lld K=%lld lens_null=%d sink=%d bad=%d",
           (long long)c->t, (long long)c->h, (long long)c->s, (long long)c->k, c->lens_null,
           c->sink, c->bad);
  /* out rows (t, h) are os1 apart within a token, os0 = h * os1 between. */
  check_close(what, got, os1, want, c->t * c->h, c->with_lse ? lse : NULL, wlse);
  uint32_t f = dsa_test_read_faults(q);
  CHECK(f == wf, "%s: faults 0x%x want 0x%x", what, f, wf);
  /* Padding columns of strided out rows are untouched. */
  if (c->strided) {
    int64_t touched = 0;
    uint8_t *pat = dsa_test_xmalloc(ob.size);
    guarded_buf fresh = gbuf_create(ctx, q, ob.size, NULL);
    gbuf_read(q, &fresh, pat);
    gbuf_release(&fresh);
    for (int64_t r = 0; r < c->t * c->h; r++)
      touched += memcmp(graw + sh + (r * os1 + 512) * 2, pat + sh + (r * os1 + 512) * 2,
                        (size_t)(os1 - 512) * 2) != 0;
    touched += memcmp(graw, pat, sh) != 0;
    CHECK(touched == 0, "%s: %lld padding gaps of out written", what, (long long)touched);
    free(pat);
  }
  CHECK(gbuf_guards_ok(q, &ob) && gbuf_guards_ok(q, &eb) && gbuf_guards_ok(q, &qb),
        "%s: guard band overwritten", what);
  gbuf_release(&qb), gbuf_release(&kb), gbuf_release(&ib), gbuf_release(&lb), gbuf_release(&sb);
  gbuf_release(&ob), gbuf_release(&eb);
  free(qh), free(qsh), free(graw), free(kv), free(idx), free(lens), free(sink), free(got);
  free(lse), free(want), free(wlse);
}

static void test_attn(void) {
  const attn_case cases[] = {
      /* t  h   s     k    lens_null sink strided bad masked lse amp */
      {1, 1, 40, 16, 0, 0, 0, 0, 0, 1, 1.0},
      {7, 16, 300, 100, 0, 1, 1, 0, 0, 1, 1.0},
      {3, 8, 64, 37, 1, 2, 0, 0, 0, 1, 3.0},
      {5, 64, 500, 200, 0, 2, 0, 1, 0, 1, 1.0},
      {2, 128, 1000, 64, 0, 1, 1, 0, 1, 1, 1.0},
      {1, 17, 4096, 2048, 1, 1, 0, 0, 0, 0, 2.0},
      {3, 33, 50, 24, 0, 2, 0, 0, 1, 1, 6.0},
      {2, 16, 0, 12, 0, 1, 0, 1, 0, 1, 1.0}, /* empty KV buffer: everything out of range */
      {4, 16, 80, 0, 0, 1, 0, 0, 0, 1, 1.0}, /* K = 0 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_attn(&cases[i]);
}

/* ---- sparse MLA decode -------------------------------------------------------------- */

typedef struct dec_case {
  int64_t t, h;
  int64_t k1, k2;      /* widths; -1: set absent */
  int32_t bs1, bs2;    /* block sizes */
  int64_t nb1, nb2;
  int stride_kind;     /* 0 page, 1 page+16 (aligned), 2 page+3 (unaligned), 3 large */
  int sink, bad, masked_first;
  double amp;
} dec_case;

static int64_t pick_stride(int32_t bs, int kind) {
  int64_t page = (int64_t)bs * 584;
  return kind == 0 ? page : kind == 1 ? page + 16 : kind == 2 ? page + 3 : page + 100000;
}

static void run_decode(const dec_case *c) {
  const int64_t h = c->h, t = c->t;
  const int64_t qs1 = 512, qs0 = h * 512 + 16 * (c->stride_kind & 1);
  size_t qbytes;
  uint16_t *qh = make_q(t, h, qs0, qs1, c->amp, &qbytes);
  tcache ca, cb;
  int has_a = c->k1 >= 0, has_b = c->k2 >= 0;
  int64_t k1 = has_a ? c->k1 : 0, k2 = has_b ? c->k2 : 0;
  if (has_a) ca = cache_make(c->nb1, c->bs1, pick_stride(c->bs1, c->stride_kind), 1.0);
  if (has_b) cb = cache_make(c->nb2, c->bs2, pick_stride(c->bs2, (c->stride_kind + 1) % 4), 1.0);
  const int64_t i1s = k1 + 1, i2s = k2;
  int32_t *i1 = dsa_test_xmalloc((size_t)(t * i1s) * 4), *l1 = dsa_test_xmalloc((size_t)t * 4);
  int32_t *i2 = dsa_test_xmalloc((size_t)(t * i2s) * 4), *l2 = dsa_test_xmalloc((size_t)t * 4);
  if (has_a) make_indices(i1, l1, t, k1, i1s, c->nb1 * c->bs1, c->bad, c->masked_first);
  if (has_b) make_indices(i2, l2, t, k2, i2s, c->nb2 * c->bs2, c->bad, 0);
  /* Stride kind 2 also omits set A's lengths (NULL: every row uses all K1
   * entries); the reference sees K1 for every row. */
  const int null_l1 = has_a && c->stride_kind == 2;
  if (null_l1)
    for (int64_t i = 0; i < t; i++) l1[i] = (int32_t)k1;
  float *sink = c->sink ? make_sink(h, c->sink == 2) : NULL;
  dsa_sparse_params p;
  dsa_sparse_params_default(&p);

  guarded_buf qb = gbuf_create(ctx, q, qbytes, qh),
              i1b = gbuf_create(ctx, q, (size_t)(t * i1s) * 4, i1),
              l1b = gbuf_create(ctx, q, (size_t)t * 4, l1),
              i2b = gbuf_create(ctx, q, (size_t)(t * i2s) * 4, i2),
              l2b = gbuf_create(ctx, q, (size_t)t * 4, l2),
              sb = gbuf_create(ctx, q, (size_t)h * 4, sink),
              o1 = gbuf_create(ctx, q, (size_t)(t * h) * 1024, NULL),
              o2 = gbuf_create(ctx, q, (size_t)(t * h) * 1024, NULL),
              e1 = gbuf_create(ctx, q, (size_t)(t * h) * 4, NULL),
              e2 = gbuf_create(ctx, q, (size_t)(t * h) * 4, NULL);
  size_t wsz = dsa_sparse_mla_decode_workspace_size(t, k1, k2);
  guarded_buf wb = gbuf_create(ctx, q, wsz + 256, NULL);
  dsa_tensor qt = {.mem = qb.mem, .offset = qb.off, .dtype = DSA_BF16, .ndim = 3,
                   .shape = {t, h, 512}, .stride = {qs0, qs1, 1}};
  dsa_tensor i1t = {.mem = i1b.mem, .offset = i1b.off, .dtype = DSA_I32, .ndim = 2,
                    .shape = {t, k1}, .stride = {i1s, 1}};
  dsa_tensor i2t = {.mem = i2b.mem, .offset = i2b.off, .dtype = DSA_I32, .ndim = 2,
                    .shape = {t, k2}, .stride = {i2s, 1}};
  dsa_tensor l1t = dsa_tensor_make(l1b.mem, l1b.off, DSA_I32, 1, (int64_t[]){t});
  dsa_tensor l2t = dsa_tensor_make(l2b.mem, l2b.off, DSA_I32, 1, (int64_t[]){t});
  dsa_tensor st = dsa_tensor_make(sb.mem, sb.off, DSA_F32, 1, (int64_t[]){h});
  dsa_tensor o1t = dsa_tensor_make(o1.mem, o1.off, DSA_BF16, 3, (int64_t[]){t, h, 512});
  dsa_tensor o2t = dsa_tensor_make(o2.mem, o2.off, DSA_BF16, 3, (int64_t[]){t, h, 512});
  dsa_tensor e1t = dsa_tensor_make(e1.mem, e1.off, DSA_F32, 2, (int64_t[]){t, h});
  dsa_tensor e2t = dsa_tensor_make(e2.mem, e2.off, DSA_F32, 2, (int64_t[]){t, h});
  dsa_sparse_index_set sa = {has_a ? &ca.dc : NULL, &i1t, null_l1 ? NULL : &l1t},
                    sb2 = {has_b ? &cb.dc : NULL, &i2t, &l2t};
  char what[240];
  snprintf(what, sizeof what,
           "decode T=%lld H=%lld K1=%lld K2=%lld bs=%d/%d nb=%lld/%lld stride=%d sink=%d bad=%d "
           "masked=%d%s",
           (long long)t, (long long)h, (long long)c->k1, (long long)c->k2, c->bs1, c->bs2,
           (long long)c->nb1, (long long)c->nb2, c->stride_kind, c->sink, c->bad,
           c->masked_first, null_l1 ? " lens1=NULL" : "");
  CHECK_OK(dsa_sparse_mla_decode(q, &qt, has_a ? &sa : NULL, has_b ? &sb2 : NULL,
                                 c->sink ? &st : NULL, &o1t, &e1t, &p, NULL));
  uint32_t f1 = dsa_test_read_faults(q);
  CHECK_OK(dsa_sparse_mla_decode_two_stage(q, &qt, has_a ? &sa : NULL, has_b ? &sb2 : NULL,
                                           c->sink ? &st : NULL, &o2t, &e2t, WS_BYTES(wb.mem, wb.off + 256, wsz), &p,
                                           NULL));
  uint32_t f2 = dsa_test_read_faults(q);

  double *want = dsa_test_xmalloc((size_t)(t * h) * 512 * 8 + 8), *wlse = dsa_test_xmalloc((size_t)(t * h) * 8 + 8);
  ref_mla_set ra = {has_a ? &ca.ref : NULL, i1, k1, i1s, 1, l1},
              rb = {has_b ? &cb.ref : NULL, i2, k2, i2s, 1, l2};
  unsigned wf = ref_sparse_mla_decode(qh, t, h, qs0, qs1, has_a ? &ra : NULL, has_b ? &rb : NULL,
                                      sink, p.softmax_scale, want, wlse);
  uint16_t *g1 = dsa_test_xmalloc(o1.size), *g2 = dsa_test_xmalloc(o2.size);
  float *x1 = dsa_test_xmalloc(e1.size + 4), *x2 = dsa_test_xmalloc(e2.size + 4);
  gbuf_read(q, &o1, g1), gbuf_read(q, &o2, g2), gbuf_read(q, &e1, x1), gbuf_read(q, &e2, x2);
  char w2[260];
  snprintf(w2, sizeof w2, "fused %s", what);
  check_close(w2, g1, 512, want, t * h, x1, wlse);
  snprintf(w2, sizeof w2, "two-stage %s", what);
  check_close(w2, g2, 512, want, t * h, x2, wlse);
  snprintf(w2, sizeof w2, "fused vs two-stage %s", what);
  check_agree(w2, g1, g2, t * h, 512);
  CHECK(f1 == wf, "fused %s: faults 0x%x want 0x%x", what, f1, wf);
  CHECK(f2 == wf, "two-stage %s: faults 0x%x want 0x%x", what, f2, wf);
  CHECK(gbuf_guards_ok(q, &o1) && gbuf_guards_ok(q, &o2) && gbuf_guards_ok(q, &e1) &&
            gbuf_guards_ok(q, &e2) && gbuf_guards_ok(q, &wb),
        "%s: guard band overwritten", what);
  if (has_a) {
    uint8_t *back = dsa_test_xmalloc(ca.size);
    gbuf_read(q, &ca.gb, back);
    CHECK(!memcmp(back, ca.img, ca.size), "%s: cache modified", what);
    free(back);
  }
  gbuf_release(&qb), gbuf_release(&i1b), gbuf_release(&l1b), gbuf_release(&i2b);
  gbuf_release(&l2b), gbuf_release(&sb), gbuf_release(&o1), gbuf_release(&o2);
  gbuf_release(&e1), gbuf_release(&e2), gbuf_release(&wb);
  if (has_a) cache_free(&ca);
  if (has_b) cache_free(&cb);
  free(qh), free(i1), free(l1), free(i2), free(l2), free(sink), free(want), free(wlse);
  free(g1), free(g2), free(x1), free(x2);
}

static void test_decode(void) {
  const dec_case cases[] = {
      /* t h  k1  k2  bs1 bs2 nb1 nb2 stride sink bad masked amp */
      {1, 1, 16, -1, 64, 2, 2, 1, 0, 0, 0, 0, 1.0},      /* only main */
      {3, 8, -1, 40, 64, 2, 1, 30, 1, 1, 0, 0, 1.0},     /* only extra */
      {5, 16, 64, 128, 64, 2, 3, 100, 2, 2, 0, 0, 2.0},  /* both, unaligned strides */
      {2, 64, 128, 512, 64, 64, 4, 12, 3, 2, 0, 0, 1.0}, /* DeepSeek-like */
      {3, 128, 32, 96, 64, 2, 2, 80, 0, 1, 1, 0, 1.0},   /* faults */
      {1, 32, 0, 2048, 64, 64, 1, 40, 1, 1, 0, 0, 1.0},  /* K up to 2048 */
      {3, 24, 40, 8, 16, 3, 4, 9, 2, 2, 0, 1, 4.0},      /* masked first tiles, H=24 */
      {4, 8, -1, -1, 64, 64, 1, 1, 0, 1, 0, 0, 1.0},     /* neither */
      {3, 8, 0, 0, 64, 64, 1, 1, 1, 1, 0, 0, 1.0},       /* both present, width 0 */
      {0, 16, 8, 8, 64, 64, 1, 1, 0, 1, 0, 0, 1.0},      /* T = 0 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_decode(&cases[i]);
}

/* Sinks of each edge value on every head, rows with lengths 0 and full;
 * the fused result against the reference element by element. */
static void test_sink_edges(void) {
  const float sinks[] = {-INFINITY, INFINITY, 30.0f, -30.0f};
  for (int s = 0; s < 4; s++) {
    const int64_t t = 2, h = 16, k = 20;
    tcache ca = cache_make(1, 64, 64 * 584, 1.0);
    size_t qbytes;
    uint16_t *qh = make_q(t, h, h * 512, 512, 1.0, &qbytes);
    int32_t idx[2 * 20], lens[2] = {20, 0};
    for (int i = 0; i < 40; i++) idx[i] = i % 7 == 3 ? -1 : (int32_t)rnd(64);
    float sk[16];
    for (int i = 0; i < 16; i++) sk[i] = sinks[s];
    guarded_buf qb = gbuf_create(ctx, q, qbytes, qh), ib = gbuf_create(ctx, q, sizeof idx, idx),
                lb = gbuf_create(ctx, q, sizeof lens, lens), sb = gbuf_create(ctx, q, sizeof sk, sk),
                ob = gbuf_create(ctx, q, (size_t)(t * h) * 1024, NULL),
                eb = gbuf_create(ctx, q, (size_t)(t * h) * 4, NULL);
    dsa_tensor qt = dsa_tensor_make(qb.mem, qb.off, DSA_BF16, 3, (int64_t[]){t, h, 512});
    dsa_tensor it = dsa_tensor_make(ib.mem, ib.off, DSA_I32, 2, (int64_t[]){t, k});
    dsa_tensor lt = dsa_tensor_make(lb.mem, lb.off, DSA_I32, 1, (int64_t[]){t});
    dsa_tensor st = dsa_tensor_make(sb.mem, sb.off, DSA_F32, 1, (int64_t[]){h});
    dsa_tensor ot = dsa_tensor_make(ob.mem, ob.off, DSA_BF16, 3, (int64_t[]){t, h, 512});
    dsa_tensor et = dsa_tensor_make(eb.mem, eb.off, DSA_F32, 2, (int64_t[]){t, h});
    dsa_sparse_index_set set = {&ca.dc, &it, &lt};
    CHECK_OK(dsa_sparse_mla_decode(q, &qt, &set, NULL, &st, &ot, &et, NULL, NULL));
    uint16_t *got = dsa_test_xmalloc(ob.size);
    float lse[32];
    gbuf_read(q, &ob, got), gbuf_read(q, &eb, lse);
    double *want = dsa_test_xmalloc((size_t)(t * h) * 512 * 8), wlse[32];
    ref_mla_set rs = {&ca.ref, idx, k, k, 1, lens};
    ref_sparse_mla_decode(qh, t, h, h * 512, 512, &rs, NULL, sk, 1.0 / sqrt(512.0), want, wlse);
    char what[64];
    snprintf(what, sizeof what, "sink %g", (double)sinks[s]);
    check_close(what, got, 512, want, t * h, lse, wlse);
    int nonzero = 0, nan = 0;
    for (int64_t i = 0; i < t * h * 512; i++) {
      nan += isnan(ref_bf16_to_float(got[i]));
      nonzero += (got[i] & 0x7FFF) != 0 && (i >= h * 512 || s == 1);
    }
    CHECK(nan == 0, "%s: %d NaN outputs", what, nan);
    CHECK(nonzero == 0, "%s: the empty row (or the +inf sink) gave %d non-zero outputs", what,
          nonzero);
    for (int i = 16; i < 32; i++)
      CHECK(isinf(lse[i]) && lse[i] < 0, "%s: empty row lse %g", what, (double)lse[i]);
    CHECK(dsa_test_read_faults(q) == 0, "%s: unexpected faults", what);
    gbuf_release(&qb), gbuf_release(&ib), gbuf_release(&lb), gbuf_release(&sb);
    gbuf_release(&ob), gbuf_release(&eb);
    cache_free(&ca);
    free(qh), free(got), free(want);
  }
}

/* ---- events --------------------------------------------------------------------------- */

static void test_events(void) {
  /* T = 0: no work, still an event; and a real call waiting on a user event. */
  cl_int err;
  cl_event user = clCreateUserEvent(dsa_context_cl_context(ctx), &err);
  cl_event done = NULL;
  guarded_buf b = gbuf_create(ctx, q, 4096, NULL);
  dsa_tensor q0 = dsa_tensor_make(b.mem, b.off, DSA_BF16, 3, (int64_t[]){0, 4, 512});
  dsa_tensor o0 = dsa_tensor_make(b.mem, b.off, DSA_BF16, 3, (int64_t[]){0, 4, 512});
  dsa_events ev = {1, &user, &done};
  CHECK_OK(dsa_sparse_mla_decode(q, &q0, NULL, NULL, NULL, &o0, NULL, NULL, &ev));
  CHECK(done != NULL, "T=0 decode returned no event");
  cl_int st = CL_QUEUED;
  if (done) {
    clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL);
    CHECK(st != CL_COMPLETE, "T=0 decode completed before its wait event");
  }
  clSetUserEventStatus(user, CL_COMPLETE);
  if (done) {
    CHECK(clWaitForEvents(1, &done) == CL_SUCCESS, "wait on the T=0 event");
    clReleaseEvent(done);
  }
  clReleaseEvent(user);
  gbuf_release(&b);
}

/* ---- argument validation ---------------------------------------------------------------- */

typedef struct args {
  dsa_queue *q;
  dsa_tensor query, kv, idx, lens, sink, out, lse, idx2, lens2;
  dsa_paged_cache cache, cache2;
  dsa_sparse_params p;
  dsa_events ev;
  cl_mem ws;
  size_t ws_off, ws_bytes;
  /* pointers, NULLed by some cases */
  dsa_tensor *pquery, *pkv, *pidx, *plens, *psink, *pout, *plse;
  dsa_sparse_params *pp;
  dsa_events *pev;
  dsa_sparse_index_set main_set, extra_set;
  dsa_sparse_index_set *pmain, *pextra;
} args;

static void args_point(void *vx) {
  args *x = vx;
  x->pquery = &x->query, x->pkv = &x->kv, x->pidx = &x->idx, x->plens = &x->lens;
  x->psink = &x->sink, x->pout = &x->out, x->plse = &x->lse, x->pp = &x->p, x->pev = &x->ev;
  x->main_set = (dsa_sparse_index_set){&x->cache, &x->idx, &x->lens};
  x->extra_set = (dsa_sparse_index_set){&x->cache2, &x->idx2, &x->lens2};
  x->pmain = &x->main_set, x->pextra = &x->extra_set;
}

/* Cases shared by the three operators. */
static int break_common(void *vx, int c, const char **w1, const char **w2) {
  args *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->q = NULL, *w1 = "q"; return 1;
    case 1: x->ev.num_wait = 2, x->ev.wait = NULL, *w1 = "ev"; return 1;
    case 2: x->pquery = NULL, *w1 = "query"; return 1;
    case 3: x->query.dtype = DSA_F32, *w1 = "query"; return 1;
    case 4: x->query.shape[2] = 256, *w1 = "query"; return 1;
    case 5: x->query.stride[2] = 2, *w1 = "query"; return 1;
    case 6: x->query.shape[1] = 0, x->out.shape[1] = 0, *w1 = "query"; return 1;
    case 7: x->query.shape[0] += 100, *w1 = "query"; return 1; /* past the buffer */
    case 8: x->pout = NULL, *w1 = "out"; return 1;
    case 9: x->out.shape[1] += 1, *w1 = "out"; return 1;
    case 10: x->out.dtype = DSA_F32, *w1 = "out"; return 1;
    case 11: x->out.offset += 1 << 20, *w1 = "out"; return 1;
    case 12: x->sink.shape[0] += 1, *w1 = "attn_sink"; return 1;
    case 13: x->sink.dtype = DSA_BF16, *w1 = "attn_sink"; return 1;
    case 14: x->lse.shape[1] += 1, *w1 = "lse"; return 1;
    case 15: x->lse.ndim = 3, *w1 = "lse"; return 1;
    case 16: x->p.flags = 1, *w1 = "flags"; return 1;
    case 17: x->p.softmax_scale = NAN, *w1 = "softmax_scale"; return 1;
    case 18: x->out.stride[2] = 3, *w1 = "out"; return 1;
    default: return 0;
  }
}

/* Every broken variant of the valid call `base` fails cleanly (see
 * dsa_test_run_bad); the cases shared by all operators come first. */
static void run_bad(const char *op, const args *base, dsa_status (*call)(void *, cl_event *),
                    int (*brk)(void *, int, const char **, const char **),
                    const guarded_buf *out) {
  /* A fresh pattern: an earlier operator's valid call may have written what
   * this one writes. */
  uint8_t *pattern = dsa_test_xmalloc(out->size);
  memset(pattern, 0xEE, out->size);
  clEnqueueWriteBuffer(dsa_queue_cl(q), out->mem, CL_TRUE, out->off, out->size, pattern, 0, NULL,
                       NULL);
  free(pattern);
  dsa_bad_args spec = {.op = op, .base = base, .size = sizeof *base, .reset = args_point,
                       .common = break_common, .brk = brk, .call = call,
                       .outs = (const guarded_buf *const[]){out}, .nouts = 1, .min_cases = 25};
  dsa_test_run_bad(q, &spec);
  dsa_test_read_faults(q);
}

static dsa_status call_attn(void *vx, cl_event *done) {
  args *x = vx;
  x->ev.done = done;
  return dsa_sparse_attn_bf16(x->q, x->pquery, x->pkv, x->pidx, x->plens, x->psink, x->pout,
                              x->plse, x->pp, x->pev);
}
static int break_attn(void *vx, int c, const char **w1, const char **w2) {
  args *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->pkv = NULL, *w1 = "kv"; return 1;
    case 1: x->kv.shape[1] = 448, *w1 = "kv"; return 1;
    case 2: x->kv.dtype = DSA_U8, *w1 = "kv"; return 1;
    case 3: x->kv.stride[1] = 0, *w1 = "kv"; return 1;
    case 4: x->kv.mem = NULL, *w1 = "kv"; return 1;
    case 5: x->pidx = NULL, *w1 = "indices"; return 1;
    case 6: x->idx.dtype = DSA_I64, *w1 = "indices"; return 1;
    case 7: x->idx.shape[0] += 1, *w1 = "indices"; return 1;
    case 8: x->lens.shape[0] += 1, *w1 = "lens"; return 1;
    case 9: x->lens.ndim = 2, x->lens.shape[1] = 1, x->lens.stride[1] = 1, *w1 = "lens"; return 1;
    case 10: x->idx.offset = 2, *w1 = "indices"; return 1;
    default: return 0;
  }
}

static dsa_status call_fused(void *vx, cl_event *done) {
  args *x = vx;
  x->ev.done = done;
  return dsa_sparse_mla_decode(x->q, x->pquery, x->pmain, x->pextra, x->psink, x->pout, x->plse,
                               x->pp, x->pev);
}
static dsa_status call_two(void *vx, cl_event *done) {
  args *x = vx;
  x->ev.done = done;
  return dsa_sparse_mla_decode_two_stage(x->q, x->pquery, x->pmain, x->pextra, x->psink, x->pout,
                                         x->plse, WS_BYTES(x->ws, x->ws_off, x->ws_bytes), x->pp, x->pev);
}
static int break_decode(void *vx, int c, const char **w1, const char **w2) {
  args *x = vx;
  switch (c) {
    case 0: x->main_set.cache = NULL, *w1 = "main_set", *w2 = "cache"; return 1;
    case 1: x->cache.format = DSA_CACHE_INDEXER_FP8, *w1 = "main_set", *w2 = "cache"; return 1;
    case 2: x->cache.block_stride = 64 * 584 - 1, *w1 = "main_set", *w2 = "cache"; return 1;
    case 3: x->cache.num_blocks += 1, *w1 = "main_set", *w2 = "cache"; return 1;
    case 4: x->main_set.indices = NULL, *w1 = "main_set", *w2 = "indices"; return 1;
    case 5: x->idx.shape[0] -= 1, *w1 = "main_set", *w2 = "indices"; return 1;
    case 6: x->main_set.lens = &x->idx, *w1 = "main_set", *w2 = "lens"; return 1;
    case 7: x->lens.dtype = DSA_I64, *w1 = "main_set", *w2 = "lens"; return 1;
    case 8: x->cache2.block_size = 0, *w1 = "extra_set", *w2 = "cache"; return 1;
    case 9: x->idx2.ndim = 1, *w1 = "extra_set", *w2 = "indices"; return 1;
    case 10: x->lens2.shape[0] = 1, *w1 = "extra_set", *w2 = "lens"; return 1;
    case 11: x->cache2.mem = NULL, *w1 = "extra_set", *w2 = "cache"; return 1;
    default: return 0;
  }
}
static int break_two(void *vx, int c, const char **w1, const char **w2) {
  args *x = vx;
  switch (c) {
    case 0: x->ws = NULL, *w1 = "workspace"; return 1;
    case 1: x->ws_off = 16, *w1 = "workspace"; return 1;
    case 2: x->ws_off = 1 << 20, *w1 = "workspace"; return 1;
    default: return break_decode(x, c - 3, w1, w2);
  }
}

static void test_bad_args(void) {
  const int64_t t = 3, h = 8, k = 10, S = 64;
  size_t qbytes;
  uint16_t *qh = make_q(t, h, h * 512, 512, 1.0, &qbytes);
  tcache ca = cache_make(2, 64, 64 * 584, 1.0), cb = cache_make(3, 2, 2 * 584, 1.0);
  int32_t idx[30], lens[3] = {10, 5, 7};
  for (int i = 0; i < 30; i++) idx[i] = (int32_t)rnd(4);
  uint16_t *kv = dsa_test_xmalloc((size_t)S * 1024);
  for (int64_t i = 0; i < S * 512; i++) kv[i] = bf16(gauss());
  float sk[8] = {0};
  guarded_buf qb = gbuf_create(ctx, q, qbytes, qh), kb = gbuf_create(ctx, q, (size_t)S * 1024, kv),
              ib = gbuf_create(ctx, q, sizeof idx, idx), lb = gbuf_create(ctx, q, sizeof lens, lens),
              sb = gbuf_create(ctx, q, sizeof sk, sk),
              ob = gbuf_create(ctx, q, (size_t)(t * h) * 1024, NULL),
              eb = gbuf_create(ctx, q, (size_t)(t * h) * 4, NULL);
  size_t wsz = dsa_sparse_mla_decode_workspace_size(t, k, k);
  CHECK(wsz > 0, "workspace size 0");
  CHECK(dsa_sparse_mla_decode_workspace_size(-1, 1, 1) == 0, "negative T accepted");
  guarded_buf wb = gbuf_create(ctx, q, wsz + 256, NULL);
  args base;
  memset(&base, 0, sizeof base);
  base.q = q;
  base.query = dsa_tensor_make(qb.mem, qb.off, DSA_BF16, 3, (int64_t[]){t, h, 512});
  base.kv = dsa_tensor_make(kb.mem, kb.off, DSA_BF16, 2, (int64_t[]){S, 512});
  base.idx = dsa_tensor_make(ib.mem, ib.off, DSA_I32, 2, (int64_t[]){t, k});
  base.idx2 = base.idx;
  base.lens = dsa_tensor_make(lb.mem, lb.off, DSA_I32, 1, (int64_t[]){t});
  base.lens2 = base.lens;
  base.sink = dsa_tensor_make(sb.mem, sb.off, DSA_F32, 1, (int64_t[]){h});
  base.out = dsa_tensor_make(ob.mem, ob.off, DSA_BF16, 3, (int64_t[]){t, h, 512});
  base.lse = dsa_tensor_make(eb.mem, eb.off, DSA_F32, 2, (int64_t[]){t, h});
  base.cache = ca.dc, base.cache2 = cb.dc;
  dsa_sparse_params_default(&base.p);
  base.ws = wb.mem, base.ws_off = 256, base.ws_bytes = wsz;
  run_bad("dsa_sparse_attn_bf16", &base, call_attn, break_attn, &ob);
  run_bad("dsa_sparse_mla_decode", &base, call_fused, break_decode, &ob);
  run_bad("dsa_sparse_mla_decode_two_stage", &base, call_two, break_two, &ob);
  gbuf_release(&qb), gbuf_release(&kb), gbuf_release(&ib), gbuf_release(&lb), gbuf_release(&sb);
  gbuf_release(&ob), gbuf_release(&eb), gbuf_release(&wb);
  cache_free(&ca), cache_free(&cb);
  free(qh), free(kv);
}

int main(int argc, char **argv) {
  (void)argc, (void)argv;
  dsa_test_open(&ctx, &q, 0);
  test_bad_args();
  test_events();
  test_sink_edges();
  test_attn();
  test_decode();
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
