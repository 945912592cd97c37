/* dsa_mtp_input_rmsnorm and dsa_mtp_shared_head_rmsnorm against the C
 * reference (tests/ref/mtp_norm.c) on random shapes and edge cases: H odd,
 * even, powers of two and the V4 sizes (4096, 7168); HC = 0, 1, 2, 4; T = 0,
 * 1, odd; positions 0 (zeroed rows), negative, large, i64 and i32; bf16 and
 * f32 weights (negative, zero, NaN); rows of zeros, signed zeros,
 * subnormals, tiny and huge values (squares overflowing to inf), a NaN or
 * an inf element; padded strides; in place and out of place. Whole payloads
 * are compared byte for byte (padding included), guard bands checked, the
 * inputs checked unchanged; plus the bad-argument classes and events. */
#include <math.h>

#include "common.h"
#include "ref.h"
#include "ref_mtp_norm.h"

static dsa_context *ctx;
static dsa_queue *q;
static uint64_t rng = 0x7E5DA11CEull;

static int64_t rnd(int64_t n) { return n > 0 ? (int64_t)(dsa_test_rand(&rng) % (uint64_t)n) : 0; }
static double gauss(void) {
  return (dsa_test_uniform(&rng) + dsa_test_uniform(&rng) + dsa_test_uniform(&rng) - 1.5) * 2;
}
static uint16_t bf16(double x) { return ref_bf16_from_float((float)x); }

/* A row of h values of one family (kind 3+: plain gaussian at a random scale). */
static void make_row(uint16_t *v, int64_t h, int kind) {
  static const double scales[] = {1, 3000, 1e4, 1e-5, 1e-6, 0.01, 1e-30, 1e25, 1e20, 3e38, 1e-19, 3e-21};
  const double s = scales[rnd(12)];
  for (int64_t d = 0; d < h; d++) {
    switch (kind) {
      case 0: v[d] = 0; break;                                      /* all zero */
      case 1: v[d] = (uint16_t)(rnd(2) ? 0x8000 : 0); break;        /* signed zeros */
      case 2: v[d] = (uint16_t)(rnd(0x80) | (rnd(2) << 15)); break; /* subnormals */
      default: v[d] = bf16(gauss() * s);
    }
  }
  if (kind == 3 && h > 0 && rnd(4) == 0) v[rnd(h)] = rnd(2) ? 0x7FC1 : (rnd(2) ? 0x7F80 : 0xFF80);
}

/* A weight vector: bf16 or f32 values, sometimes with zeros, negatives, NaN. */
static void *make_weight(int64_t h, int f32, int edge) {
  void *w = dsa_test_xmalloc((size_t)(h > 0 ? h : 1) * 4);
  for (int64_t d = 0; d < h; d++) {
    double x = 1.0 + 0.25 * gauss();
    if (edge) {
      int64_t r = rnd(16);
      x = r == 0 ? 0.0 : r == 1 ? -x : r == 2 ? NAN : r == 3 ? -1e-3 : r == 4 ? 1e30 : x;
    }
    if (f32)
      ((float *)w)[d] = (float)(x * (1.0 + 1e-3 * gauss())); /* not bf16-representable */
    else
      ((uint16_t *)w)[d] = isnan(x) ? 0x7FC0 : bf16(x);
  }
  return w;
}

/* Payload comparison of n bf16 values. */
static void compare(const uint16_t *got, const uint16_t *want, size_t n, const char *what,
                    int64_t t, int64_t hc, int64_t h) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i] && !bad++) first = i;
  CHECK(bad == 0, "%s: %zu values differ, first %zu got 0x%04X want 0x%04X (T=%lld HC=%lld H=%lld)",
        what, bad, first, bad ? got[first] : 0, bad ? want[first] : 0, (long long)t,
        (long long)hc, (long long)h);
}

typedef struct ncase {
  int64_t t, hc, h;
  int in_place, edge, w32e, w32h, pos32;
} ncase;

static void run_input_case(const ncase *tc) {
  const int64_t t = tc->t, hc = tc->hc, h = tc->h;
  const int64_t ers = h + (rnd(3) == 0 ? rnd(9) : 0), ors = tc->in_place ? ers : h + rnd(3) * 8;
  const int64_t prs = h + (rnd(3) == 0 ? rnd(5) : 0), pts = prs * hc + rnd(3);
  const int64_t hrs = tc->in_place ? prs : h + rnd(2) * 4, hts = tc->in_place ? pts : hrs * hc + rnd(2);
  const size_t en = (size_t)(t * ers + 1), eon = (size_t)(t * ors + 1);
  const size_t pn = (size_t)(t * pts + 1), hon = (size_t)(t * hts + 1);

  uint16_t *emb = dsa_test_xmalloc(en * 2), *prev = dsa_test_xmalloc(pn * 2);
  uint16_t *eo0 = dsa_test_xmalloc(eon * 2), *ho0 = dsa_test_xmalloc(hon * 2);
  dsa_test_fill_random(&rng, emb, en * 2), dsa_test_fill_random(&rng, prev, pn * 2);
  dsa_test_fill_random(&rng, eo0, eon * 2), dsa_test_fill_random(&rng, ho0, hon * 2);
  for (int64_t i = 0; i < t; i++) {
    make_row(emb + i * ers, h, tc->edge ? (int)rnd(6) : 4);
    for (int64_t k = 0; k < hc; k++) make_row(prev + i * pts + k * prs, h, tc->edge ? (int)rnd(6) : 4);
  }
  int64_t *pos64 = dsa_test_xmalloc((size_t)(t + 1) * 8);
  int32_t *pos32 = dsa_test_xmalloc((size_t)(t + 1) * 4);
  for (int64_t i = 0; i < t; i++) {
    const int64_t r = rnd(6);
    pos64[i] = r == 0 ? 0 : r == 1 ? -1 - rnd(3) : r == 2 ? ((int64_t)1 << 32) : rnd(100000);
    if (tc->pos32 && r == 2) pos64[i] = 65536; /* i32 can't hold 2^32; a large value */
    pos32[i] = (int32_t)pos64[i];
  }
  void *we = make_weight(h, tc->w32e, tc->edge), *wh = make_weight(h, tc->w32h, tc->edge);

  guarded_buf eb = gbuf_create(ctx, q, en * 2, emb), pb = gbuf_create(ctx, q, pn * 2, prev);
  guarded_buf eob = gbuf_create(ctx, q, eon * 2, eo0), hob = gbuf_create(ctx, q, hon * 2, ho0);
  guarded_buf posb = tc->pos32 ? gbuf_create(ctx, q, (size_t)(t + 1) * 4, pos32)
                               : gbuf_create(ctx, q, (size_t)(t + 1) * 8, pos64);
  guarded_buf web = gbuf_create(ctx, q, (size_t)(h * (tc->w32e ? 4 : 2)), we);
  guarded_buf whb = gbuf_create(ctx, q, (size_t)(h * (tc->w32h ? 4 : 2)), wh);

  dsa_tensor et = {.mem = eb.mem, .offset = eb.off, .dtype = DSA_BF16, .ndim = 2, .shape = {t, h},
                   .stride = {ers, 1}};
  dsa_tensor pt = {.mem = pb.mem, .offset = pb.off, .dtype = DSA_BF16, .ndim = 3,
                   .shape = {t, hc, h}, .stride = {pts, prs, 1}};
  dsa_tensor eot = {.mem = eob.mem, .offset = eob.off, .dtype = DSA_BF16, .ndim = 2,
                    .shape = {t, h}, .stride = {ors, 1}};
  dsa_tensor hot = {.mem = hob.mem, .offset = hob.off, .dtype = DSA_BF16, .ndim = 3,
                    .shape = {t, hc, h}, .stride = {hts, hrs, 1}};
  if (tc->in_place) eot = et, hot = pt;
  dsa_tensor post = dsa_tensor_make(posb.mem, posb.off, tc->pos32 ? DSA_I32 : DSA_I64, 1,
                                    (int64_t[]){t});
  dsa_tensor wet = dsa_tensor_make(web.mem, web.off, tc->w32e ? DSA_F32 : DSA_BF16, 1, &h);
  dsa_tensor wht = dsa_tensor_make(whb.mem, whb.off, tc->w32h ? DSA_F32 : DSA_BF16, 1, &h);
  dsa_mtp_params prm;
  dsa_mtp_params_default(&prm);
  if (rnd(3) == 0) prm.eps = rnd(2) ? 1e-3f : 1e-30f;
  CHECK_OK(dsa_mtp_input_rmsnorm(q, &et, &post, &pt, &wet, &wht, &eot, &hot, &prm, NULL));
  CHECK(dsa_test_read_faults(q) == 0, "faults set (T=%lld)", (long long)t);

  /* Expected images: the untouched bytes of the output buffers, then the rows. */
  uint16_t *eref = dsa_test_xmalloc((tc->in_place ? en : eon) * 2);
  uint16_t *href = dsa_test_xmalloc((tc->in_place ? pn : hon) * 2);
  memcpy(eref, tc->in_place ? emb : eo0, (tc->in_place ? en : eon) * 2);
  memcpy(href, tc->in_place ? prev : ho0, (tc->in_place ? pn : hon) * 2);
  ref_mtp_input_rmsnorm(emb, ers, tc->pos32 ? (const void *)pos32 : (const void *)pos64,
                        tc->pos32, prev, pts, prs, we, tc->w32e, wh, tc->w32h, eref,
                        tc->in_place ? ers : ors, href, tc->in_place ? pts : hts,
                        tc->in_place ? prs : hrs, t, hc, h, prm.eps);
  uint16_t *got = dsa_test_xmalloc((en > eon ? en : eon) * 2 + (pn > hon ? pn : hon) * 2);
  gbuf_read(q, tc->in_place ? &eb : &eob, got);
  compare(got, eref, tc->in_place ? en : eon, "enorm_out", t, hc, h);
  gbuf_read(q, tc->in_place ? &pb : &hob, got);
  compare(got, href, tc->in_place ? pn : hon, "hnorm_out", t, hc, h);
  if (!tc->in_place) {
    gbuf_read(q, &eb, got);
    CHECK(!memcmp(got, emb, en * 2), "inputs_embeds modified (T=%lld H=%lld)", (long long)t,
          (long long)h);
    gbuf_read(q, &pb, got);
    CHECK(!memcmp(got, prev, pn * 2), "previous_hidden modified (T=%lld H=%lld)", (long long)t,
          (long long)h);
  }
  CHECK(gbuf_guards_ok(q, &eb) && gbuf_guards_ok(q, &pb) && gbuf_guards_ok(q, &eob) &&
            gbuf_guards_ok(q, &hob),
        "guard band overwritten (T=%lld HC=%lld H=%lld)", (long long)t, (long long)hc,
        (long long)h);

  free(emb), free(prev), free(eo0), free(ho0), free(pos64), free(pos32), free(we), free(wh);
  free(eref), free(href), free(got);
  gbuf_release(&eb), gbuf_release(&pb), gbuf_release(&eob), gbuf_release(&hob);
  gbuf_release(&posb), gbuf_release(&web), gbuf_release(&whb);
}

static void run_head_case(int64_t t, int64_t h, int in_place, int edge, int w32) {
  const int64_t xrs = h + (rnd(3) == 0 ? rnd(9) : 0), ors = in_place ? xrs : h + rnd(3) * 2;
  const size_t xn = (size_t)(t * xrs + 1), on = (size_t)(t * ors + 1);
  uint16_t *x = dsa_test_xmalloc(xn * 2), *o0 = dsa_test_xmalloc(on * 2);
  dsa_test_fill_random(&rng, x, xn * 2), dsa_test_fill_random(&rng, o0, on * 2);
  for (int64_t i = 0; i < t; i++) make_row(x + i * xrs, h, edge ? (int)rnd(6) : 4);
  void *w = make_weight(h, w32, edge);
  guarded_buf xb = gbuf_create(ctx, q, xn * 2, x), ob = gbuf_create(ctx, q, on * 2, o0);
  guarded_buf wb = gbuf_create(ctx, q, (size_t)(h * (w32 ? 4 : 2)), w);
  dsa_tensor xt = {.mem = xb.mem, .offset = xb.off, .dtype = DSA_BF16, .ndim = 2, .shape = {t, h},
                   .stride = {xrs, 1}};
  dsa_tensor ot = in_place ? xt : (dsa_tensor){.mem = ob.mem, .offset = ob.off, .dtype = DSA_BF16,
                                               .ndim = 2, .shape = {t, h}, .stride = {ors, 1}};
  dsa_tensor wt = dsa_tensor_make(wb.mem, wb.off, w32 ? DSA_F32 : DSA_BF16, 1, &h);
  CHECK_OK(dsa_mtp_shared_head_rmsnorm(q, &xt, &wt, &ot, NULL, NULL));
  const size_t n = in_place ? xn : on;
  uint16_t *want = dsa_test_xmalloc(n * 2), *got = dsa_test_xmalloc(n * 2);
  memcpy(want, in_place ? x : o0, n * 2);
  for (int64_t i = 0; i < t; i++) ref_mtp_rmsnorm_row(x + i * xrs, w, w32, h, 1e-6f, want + i * (in_place ? xrs : ors));
  gbuf_read(q, in_place ? &xb : &ob, got);
  compare(got, want, n, "shared_head out", t, 0, h);
  CHECK(gbuf_guards_ok(q, &xb) && gbuf_guards_ok(q, &ob), "guard band overwritten (head T=%lld H=%lld)",
        (long long)t, (long long)h);
  free(x), free(o0), free(w), free(want), free(got);
  gbuf_release(&xb), gbuf_release(&ob), gbuf_release(&wb);
}

static void test_cases(void) {
  const ncase fixed[] = {
      {1, 1, 1, 0, 0, 0, 0, 0},    {3, 4, 7168, 0, 0, 1, 1, 0}, {2, 4, 4096, 1, 1, 0, 1, 1},
      {5, 0, 64, 0, 1, 0, 0, 0},   {7, 2, 129, 0, 1, 1, 0, 1},  {4, 1, 8, 1, 1, 1, 1, 0},
      {9, 4, 1000, 0, 1, 0, 0, 0}, {1, 4, 12, 0, 1, 1, 1, 1},   {6, 3, 3, 1, 1, 0, 0, 0},
      {2, 2, 2049, 0, 0, 0, 1, 0}, {3, 1, 7170, 1, 0, 1, 0, 1}, /* V = 2 */
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) run_input_case(&fixed[i]);
  static const int64_t hs[] = {1, 2, 5, 16, 24, 100, 255, 256, 1028, 1536, 3000, 4096};
  for (int it = 0; it < 14; it++) {
    const int64_t h = hs[rnd(12)];
    ncase tc = {rnd(h >= 1024 ? 6 : 30), rnd(5), h, (int)rnd(2), (int)rnd(2), (int)rnd(2),
                (int)rnd(2), (int)rnd(2)};
    run_input_case(&tc);
  }
  run_head_case(3, 7168, 0, 0, 1);
  run_head_case(2, 4096, 1, 1, 0);
  run_head_case(5, 77, 0, 1, 0);
  run_head_case(1, 1, 0, 0, 0);
  for (int it = 0; it < 6; it++)
    run_head_case(rnd(9), hs[rnd(12)], (int)rnd(2), (int)rnd(2), (int)rnd(2));
}

/* The reference's own pieces: the correctly rounded mean. */
static void test_ref_pieces(void) {
  /* Known sums: all ones -> ss = H; a zero row -> 0; one big value. */
  uint16_t row[4096];
  for (int i = 0; i < 4096; i++) row[i] = 0x3F80; /* 1.0 */
  CHECK(ref_mtp_sumsq(row, 4096) == 4096.0f, "sum of 4096 ones");
  CHECK(ref_mtp_sumsq(NULL, 77) == 0.0f, "zero row");
  uint16_t out[8], w[8];
  for (int i = 0; i < 8; i++) w[i] = (uint16_t)(i & 1 ? 0xBF80 : 0x3F80); /* +-1 */
  ref_mtp_rmsnorm_row(NULL, w, 0, 8, 1e-6f, out);
  CHECK(out[0] == 0x0000 && out[1] == 0x8000, "zeroed row: +0 * -1 = -0 (got 0x%04X 0x%04X)",
        out[0], out[1]);
}

/* ---- bad arguments ---------------------------------------------------------- */

typedef struct bargs {
  dsa_queue *q;
  dsa_tensor e, pos, p, we, wh, eo, ho;
  const dsa_tensor *pe, *ppos, *pp, *pwe, *pwh, *peo, *pho;
  dsa_mtp_params prm;
  dsa_events ev;
} bargs;

static int breaker(void *vx, int c, const char **w, const char **w2) {
  bargs *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->q = NULL, *w = "q"; return 1;
    case 1: x->pe = NULL, *w = "inputs_embeds"; return 1;
    case 2: x->e.dtype = DSA_F32, *w = "inputs_embeds"; return 1;
    case 3: x->e.ndim = 3, *w = "inputs_embeds"; return 1;
    case 4: x->e.stride[1] = 2, *w = "inputs_embeds"; return 1;
    case 5: x->e.shape[0] += 1000, *w = "inputs_embeds"; return 1; /* past its buffer */
    case 6: x->ppos = NULL, *w = "positions"; return 1;
    case 7: x->pos.dtype = DSA_F32, *w = "positions"; return 1;
    case 8: x->pos.shape[0] -= 1, *w = "positions"; return 1;
    case 9: x->pp = NULL, *w = "previous_hidden"; return 1;
    case 10: x->p.shape[2] -= 1, *w = "previous_hidden"; return 1;
    case 11: x->p.shape[0] -= 1, *w = "previous_hidden"; return 1;
    case 12: x->p.ndim = 2, *w = "previous_hidden"; return 1;
    case 13: x->pwe = NULL, *w = "enorm_weight"; return 1;
    case 14: x->we.dtype = DSA_I64, *w = "enorm_weight"; return 1;
    case 15: x->we.shape[0] += 1, *w = "enorm_weight"; return 1;
    case 16: x->wh.stride[0] = 2, *w = "hnorm_weight"; return 1;
    case 17: x->pwh = NULL, *w = "hnorm_weight"; return 1;
    case 18: x->peo = NULL, *w = "enorm_out"; return 1;
    case 19: x->eo.dtype = DSA_F32, *w = "enorm_out"; return 1;
    case 20: x->eo.shape[1] -= 1, *w = "enorm_out"; return 1;
    case 21: x->pho = NULL, *w = "hnorm_out"; return 1;
    case 22: x->ho.shape[1] -= 1, *w = "hnorm_out"; return 1;
    case 23: x->ho.stride[2] = 0, *w = "hnorm_out"; return 1;
    case 24: x->prm.eps = 0.0f, *w = "eps"; return 1;
    case 25: x->prm.eps = NAN, *w = "eps"; return 1;
    case 26: x->prm.eps = INFINITY, *w = "eps"; return 1;
    case 27: x->ev.num_wait = 1, x->ev.wait = NULL, *w = "ev"; return 1;
    case 28: /* H = 0 */
      x->e.shape[1] = 0, x->p.shape[2] = 0, x->we.shape[0] = 0, x->wh.shape[0] = 0;
      x->eo.shape[1] = 0, x->ho.shape[2] = 0, *w = "inputs_embeds";
      return 1;
    default: return 0;
  }
}

static void bargs_point(void *vx) {
  bargs *x = vx;
  x->pe = &x->e, x->ppos = &x->pos, x->pp = &x->p, x->pwe = &x->we, x->pwh = &x->wh;
  x->peo = &x->eo, x->pho = &x->ho;
}

static dsa_status call_bad(void *vx, cl_event *done) {
  bargs *x = vx;
  x->ev.done = done;
  return dsa_mtp_input_rmsnorm(x->q, x->pe, x->ppos, x->pp, x->pwe, x->pwh, x->peo, x->pho,
                               &x->prm, &x->ev);
}

static dsa_status call_valid(void *vx, cl_event *done) {
  bargs *x = vx;
  (void)done;
  return dsa_mtp_input_rmsnorm(x->q, &x->e, &x->pos, &x->p, &x->we, &x->wh, &x->eo, &x->ho, NULL,
                               NULL);
}

/* The shared-head operator's own classes. */
typedef struct hargs {
  dsa_queue *q;
  dsa_tensor x, w, o;
  const dsa_tensor *px, *pw, *po;
  dsa_mtp_params prm;
  dsa_events ev;
} hargs;

static int hbreaker(void *vx, int c, const char **w, const char **w2) {
  hargs *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->q = NULL, *w = "q"; return 1;
    case 1: x->px = NULL, *w = "x"; return 1;
    case 2: x->x.dtype = DSA_I64, *w = "x"; return 1;
    case 3: x->x.stride[1] = 3, *w = "x"; return 1;
    case 4: x->pw = NULL, *w = "weight"; return 1;
    case 5: x->w.shape[0] = 7, *w = "weight"; return 1;
    case 6: x->w.dtype = DSA_I32, *w = "weight"; return 1;
    case 7: x->po = NULL, *w = "out"; return 1;
    case 8: x->o.shape[0] += 1, *w = "out"; return 1;
    case 9: x->o.shape[0] += 4000, x->x.shape[0] += 4000, *w = "x"; return 1;
    case 10: x->prm.eps = -1.0f, *w = "eps"; return 1;
    case 11: x->prm.eps = 1e-40f, *w = "eps"; return 1; /* subnormal */
    default: return 0;
  }
}
static void hargs_point(void *vx) {
  hargs *x = vx;
  x->px = &x->x, x->pw = &x->w, x->po = &x->o;
}
static dsa_status hcall_bad(void *vx, cl_event *done) {
  hargs *x = vx;
  x->ev.done = done;
  return dsa_mtp_shared_head_rmsnorm(x->q, x->px, x->pw, x->po, &x->prm, &x->ev);
}

static void test_bad_args(void) {
  const int64_t t = 4, hc = 2, h = 64;
  guarded_buf eb = gbuf_create(ctx, q, (size_t)(t * h * 2), NULL);
  guarded_buf pb = gbuf_create(ctx, q, (size_t)(t * hc * h * 2), NULL);
  guarded_buf eob = gbuf_create(ctx, q, (size_t)(t * h * 2), NULL);
  guarded_buf hob = gbuf_create(ctx, q, (size_t)(t * hc * h * 2), NULL);
  int64_t pos[4] = {0, 1, 2, 3};
  guarded_buf posb = gbuf_create(ctx, q, sizeof pos, pos);
  float wv[64];
  for (int i = 0; i < 64; i++) wv[i] = 1.0f;
  guarded_buf wb = gbuf_create(ctx, q, sizeof wv, wv);
  bargs base;
  memset(&base, 0, sizeof base);
  base.q = q;
  base.e = dsa_tensor_make(eb.mem, eb.off, DSA_BF16, 2, (int64_t[]){t, h});
  base.p = dsa_tensor_make(pb.mem, pb.off, DSA_BF16, 3, (int64_t[]){t, hc, h});
  base.eo = dsa_tensor_make(eob.mem, eob.off, DSA_BF16, 2, (int64_t[]){t, h});
  base.ho = dsa_tensor_make(hob.mem, hob.off, DSA_BF16, 3, (int64_t[]){t, hc, h});
  base.pos = dsa_tensor_make(posb.mem, posb.off, DSA_I64, 1, (int64_t[]){t});
  base.we = dsa_tensor_make(wb.mem, wb.off, DSA_F32, 1, (int64_t[]){h});
  base.wh = dsa_tensor_make(wb.mem, wb.off, DSA_F32, 1, (int64_t[]){h});
  dsa_mtp_params_default(&base.prm);
  dsa_bad_args spec = {.op = "mtp_input_rmsnorm", .base = &base, .size = sizeof base,
                       .reset = bargs_point, .brk = breaker, .call = call_bad, .valid = call_valid,
                       .outs = (const guarded_buf *const[]){&eob, &hob}, .nouts = 2,
                       .min_cases = 25, .all_change = 1, .no_event = 1};
  dsa_test_run_bad(q, &spec);

  hargs hb;
  memset(&hb, 0, sizeof hb);
  hb.q = q;
  hb.x = dsa_tensor_make(eb.mem, eb.off, DSA_BF16, 2, (int64_t[]){t, h});
  hb.o = dsa_tensor_make(eob.mem, eob.off, DSA_BF16, 2, (int64_t[]){t, h});
  hb.w = dsa_tensor_make(wb.mem, wb.off, DSA_F32, 1, (int64_t[]){h});
  dsa_mtp_params_default(&hb.prm);
  /* eob holds the first operator's output: the pattern the head call must change. */
  uint16_t pat[4 * 64];
  for (int i = 0; i < 4 * 64; i++) pat[i] = 0x1234;
  clEnqueueWriteBuffer(dsa_queue_cl(q), eob.mem, CL_TRUE, eob.off, sizeof pat, pat, 0, NULL, NULL);
  dsa_bad_args hspec = {.op = "mtp_shared_head_rmsnorm", .base = &hb, .size = sizeof hb,
                        .reset = hargs_point, .brk = hbreaker, .call = hcall_bad,
                        .outs = (const guarded_buf *const[]){&eob}, .nouts = 1, .min_cases = 10,
                        .all_change = 1};
  dsa_test_run_bad(q, &hspec);
  CHECK(dsa_test_read_faults(q) == 0, "valid call faulted");
  gbuf_release(&eb), gbuf_release(&pb), gbuf_release(&eob), gbuf_release(&hob);
  gbuf_release(&posb), gbuf_release(&wb);
}

static void test_empty_and_events(void) {
  guarded_buf any = gbuf_create(ctx, q, 4096, NULL);
  dsa_tensor e0 = dsa_tensor_make(any.mem, any.off, DSA_BF16, 2, (int64_t[]){0, 7168});
  dsa_tensor p0 = dsa_tensor_make(any.mem, any.off, DSA_BF16, 3, (int64_t[]){0, 4, 7168});
  dsa_tensor i0 = dsa_tensor_make(any.mem, any.off, DSA_I64, 1, (int64_t[]){0});
  dsa_tensor w = dsa_tensor_make(any.mem, any.off, DSA_BF16, 1, (int64_t[]){1024});
  w.shape[0] = 7168, w.mem = NULL; /* replaced below: a buffer large enough */
  guarded_buf wb = gbuf_create(ctx, q, 7168 * 2, NULL);
  w.mem = wb.mem, w.offset = wb.off;
  cl_event done = NULL;
  dsa_events ev = {0, NULL, &done};
  CHECK_OK(dsa_mtp_input_rmsnorm(q, &e0, &i0, &p0, &w, &w, &e0, &p0, NULL, &ev));
  CHECK(done != NULL, "T=0: no event");
  if (done) dsa_test_expect_complete(done, "T=0 input norm");
  done = NULL;
  CHECK_OK(dsa_mtp_shared_head_rmsnorm(q, &e0, &w, &e0, NULL, &ev));
  CHECK(done != NULL, "T=0 head: no event");
  if (done) dsa_test_expect_complete(done, "T=0 head norm");
  gbuf_release(&any), gbuf_release(&wb);
}

int main(void) {
  dsa_test_open(&ctx, &q, 0);
  test_ref_pieces();
  test_bad_args();
  test_empty_and_events();
  test_cases();
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
