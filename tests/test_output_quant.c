/* dsa_output_inv_rope_fp8_quant against the C reference
 * (tests/ref/output_quant.c) on random shapes and edge cases: H = 1..128,
 * G = 1..16 groups, T = 0, 1, odd; f32 and packed i32 scales; Tp = T and
 * padded (zeroed scale columns); all-zero heads and blocks, signed zeros,
 * subnormals, huge and tiny values, NaN and inf (the stated policy);
 * cos/sin tables built so that a block's amax / 448 lands a few ulps above a
 * power of two (the log2 rounding model); positions at both ends of the
 * table and outside it (fault); strided o, cos/sin, out and scales (vLLM's
 * [G, T, D] / token-contiguous scale layouts and others). Whole payloads are
 * compared byte for byte (untouched bytes included), guard bands checked,
 * fault words compared; plus bad-argument classes and events. */
#include <math.h>

#include "common.h"
#include "ref.h"
#include "ref_output_quant.h"

static dsa_context *ctx;
static dsa_queue *q;
static uint64_t rng = 0x0B7E11A5EEDull;

static int64_t rnd(int64_t n) { return n > 0 ? (int64_t)(dsa_test_rand(&rng) % (uint64_t)n) : 0; }
static double gauss(void) {
  return (dsa_test_uniform(&rng) + dsa_test_uniform(&rng) + dsa_test_uniform(&rng) - 1.5) * 2;
}
static uint16_t bf16(double x) { return ref_bf16_from_float((float)x); }

enum { K_ZERO, K_SZERO, K_SUB, K_BLOCK0, K_NONFINITE, K_BOUNDARY, K_RANDOM, K_N };

/* A 512-vector of one value family. */
static void make_vec(uint16_t *v, int kind) {
  static const double scales[] = {1, 3000, 1e4, 1e-5, 1e-6, 0.01, 1e-30, 1e25, 1e37, 1e-12};
  const double s = scales[rnd(10)];
  for (int d = 0; d < 512; d++) {
    switch (kind) {
      case K_ZERO: v[d] = 0; break;
      case K_SZERO: v[d] = (uint16_t)(rnd(2) ? 0x8000 : 0); break;
      case K_SUB: v[d] = (uint16_t)(rnd(0x80) | (rnd(2) << 15)); break;
      default: v[d] = bf16(gauss() * s);
    }
  }
  if (kind == K_BLOCK0) { /* one or two whole blocks zero */
    const int b = (int)rnd(4);
    for (int d = 128 * b; d < 128 * b + 128; d++) v[d] = 0;
    if (rnd(2))
      for (int d = 128 * ((b + 2) % 4); d < 128 * ((b + 2) % 4) + 128; d++) v[d] = 0x8000;
  }
  if (kind == K_NONFINITE) {
    static const uint16_t specials[] = {0x7FC0, 0xFFC0, 0x7F80, 0xFF80, 0x7F81};
    for (int i = 0, n = 1 + (int)rnd(3); i < n; i++) v[rnd(512)] = specials[rnd(5)];
    if (rnd(2)) v[448 + rnd(64)] = specials[rnd(5)]; /* in the rotated dims */
  }
  if (kind == K_BOUNDARY) {
    /* Small values, then a RoPE pair e = o = 1.75 * 2^q: with cos = 1 and
     * sin = +-j 2^-23 (the boundary table) the rotated block-3 amax / 448
     * lands j-ish ulps above 2^(q-8). */
    const int qe = (int)rnd(160) - 34;
    for (int d = 0; d < 512; d++) v[d] = bf16(gauss() * ldexp(1.0, qe - 2));
    const int i = (int)rnd(32);
    v[448 + 2 * i] = v[449 + 2 * i] = bf16(ldexp(1.75, qe));
    if (rnd(3) == 0) v[449 + 2 * i] ^= 0x8000;
    if (rnd(4) == 0) /* the same in a NoPE block (bf16 amax: exact path) */
      v[rnd(384)] = bf16(ldexp(1.75, qe));
  }
}

typedef struct ocase {
  int64_t t, h, g, npos, tp_extra;
  int packed, edge, bad, boundary, nonfinite, strided;
} ocase;

static void run_case(const ocase *tc) {
  const int64_t t = tc->t, h = tc->h, g = tc->g, hpg = h / g, dd = hpg * 512;
  const int64_t tp = t + tc->tp_extra, kk = tc->packed ? hpg : 4 * hpg;
  const int st = tc->strided;
  /* Strides (elements). */
  const int64_t ohs = 512 + (st && rnd(2) ? 8 * rnd(3) : 0), ots = ohs * h + (st ? 8 * rnd(2) : 0);
  const int64_t csrs = 64 + (st ? 4 * rnd(2) : 0);
  /* out: [G, T, D] dense (vLLM), or the transposed [T, G, D]-dense memory, or padded rows. */
  int64_t out_gs, out_ts, out_n;
  const int olay = st ? (int)rnd(3) : 0;
  if (olay == 1) {
    out_ts = g * dd, out_gs = dd, out_n = t * g * dd;
  } else {
    out_ts = dd + (olay == 2 ? 16 : 0), out_gs = out_ts * t + (olay == 2 ? 32 : 0);
    out_n = out_gs * g;
  }
  /* scales: [G, K, Tp] token-contiguous (vLLM), or k innermost. */
  int64_t sc_gs, sc_ks, sc_ts;
  const int slay = st ? (int)rnd(2) : 0;
  if (slay == 0) {
    sc_ts = 1, sc_ks = tp + (st ? rnd(3) : 0), sc_gs = sc_ks * kk;
  } else {
    sc_ks = 1, sc_ts = kk, sc_gs = kk * tp + 4;
  }
  const int64_t sc_n = sc_gs * g;

  const size_t on = (size_t)(t * ots > 0 ? t * ots : 1);
  uint16_t *o = dsa_test_xmalloc(on * 2);
  dsa_test_fill_random(&rng, o, on * 2);
  for (int64_t i = 0; i < t; i++)
    for (int64_t j = 0; j < h; j++) {
      int kind = K_RANDOM;
      if (tc->boundary && rnd(4)) kind = K_BOUNDARY;
      else if (tc->edge) kind = (int)rnd(K_BOUNDARY);
      if (kind == K_NONFINITE && !tc->nonfinite) kind = K_RANDOM;
      if (tc->nonfinite && rnd(3) == 0) kind = K_NONFINITE;
      make_vec(o + i * ots + j * ohs, kind);
    }
  float *cs = dsa_test_xmalloc((size_t)(tc->npos * csrs + 1) * 4);
  dsa_test_fill_random(&rng, cs, (size_t)(tc->npos * csrs + 1) * 4);
  for (int64_t p = 0; p < tc->npos; p++)
    for (int i = 0; i < 32; i++) {
      if (tc->boundary) {
        cs[p * csrs + i] = 1.0f;
        cs[p * csrs + 32 + i] = (float)ldexp((double)rnd(48), -23) * (rnd(2) ? 1 : -1);
      } else {
        const double th = (double)p * pow(10000.0, -i / 32.0);
        cs[p * csrs + i] = (float)cos(th);
        cs[p * csrs + 32 + i] = (float)sin(th);
      }
    }
  int64_t *pos = dsa_test_xmalloc((size_t)(t + 1) * 8);
  for (int64_t i = 0; i < t; i++) {
    const int64_t r = rnd(8);
    pos[i] = r == 0 ? 0 : r == 1 ? tc->npos - 1 : rnd(tc->npos);
    if (tc->bad && rnd(5) == 0) pos[i] = rnd(2) ? tc->npos + rnd(3) : -1 - rnd(5);
  }
  /* The API's other dtypes: i32 positions, bf16 cos/sin (the reference reads
   * the narrowed values). */
  const int pos32 = rnd(3) == 0, cs16 = rnd(3) == 0;
  int32_t *pos_n = pos32 ? dsa_test_narrow_pos(pos, (size_t)t) : NULL;
  uint16_t *cs_n = cs16 ? dsa_test_narrow_cs(cs, (size_t)(tc->npos * csrs)) : NULL;

  uint8_t *out0 = dsa_test_xmalloc((size_t)out_n + 1), *outw = dsa_test_xmalloc((size_t)out_n + 1);
  dsa_test_fill_random(&rng, out0, (size_t)out_n + 1);
  memcpy(outw, out0, (size_t)out_n + 1);
  uint32_t *sc0 = dsa_test_xmalloc((size_t)(sc_n + 1) * 4), *scw = dsa_test_xmalloc((size_t)(sc_n + 1) * 4);
  dsa_test_fill_random(&rng, sc0, (size_t)(sc_n + 1) * 4);
  memcpy(scw, sc0, (size_t)(sc_n + 1) * 4);

  guarded_buf ob = gbuf_create(ctx, q, on * 2, o);
  guarded_buf csb = cs16 ? gbuf_create(ctx, q, (size_t)(tc->npos * csrs + 1) * 2, cs_n)
                         : gbuf_create(ctx, q, (size_t)(tc->npos * csrs + 1) * 4, cs);
  guarded_buf pb = pos32 ? gbuf_create(ctx, q, (size_t)(t + 1) * 4, pos_n)
                         : gbuf_create(ctx, q, (size_t)(t + 1) * 8, pos);
  guarded_buf outb = gbuf_create(ctx, q, (size_t)out_n + 1, out0);
  guarded_buf scb = gbuf_create(ctx, q, (size_t)(sc_n + 1) * 4, sc0);
  dsa_tensor ot = {.mem = ob.mem, .offset = ob.off, .dtype = DSA_BF16, .ndim = 3,
                   .shape = {t, h, 512}, .stride = {ots, ohs, 1}};
  dsa_tensor pt = dsa_tensor_make(pb.mem, pb.off, pos32 ? DSA_I32 : DSA_I64, 1, (int64_t[]){t});
  dsa_tensor cst = {.mem = csb.mem, .offset = csb.off, .dtype = cs16 ? DSA_BF16 : DSA_F32, .ndim = 2,
                    .shape = {tc->npos, 64}, .stride = {csrs, 1}};
  dsa_tensor outt = {.mem = outb.mem, .offset = outb.off, .dtype = DSA_E4M3, .ndim = 3,
                     .shape = {g, t, dd}, .stride = {out_gs, out_ts, 1}};
  dsa_tensor sct = {.mem = scb.mem, .offset = scb.off, .dtype = tc->packed ? DSA_I32 : DSA_F32,
                    .ndim = 3, .shape = {g, kk, tp}, .stride = {sc_gs, sc_ks, sc_ts}};
  cl_event done = NULL;
  dsa_events ev = {0, NULL, &done};
  CHECK_OK(dsa_output_inv_rope_fp8_quant(q, &ot, &pt, &cst, &outt, &sct, NULL, &ev));
  if (done) dsa_test_expect_complete(done, "output quant");
  const uint32_t f = dsa_test_read_faults(q);

  const unsigned want_f = ref_inv_rope_fp8_quant(o, ots, ohs, t, h, pos, cs, csrs, tc->npos, g,
                                                 outw, out_gs, out_ts, scw, tc->packed, sc_gs,
                                                 sc_ks, sc_ts, tp);
  uint8_t *outg = dsa_test_xmalloc((size_t)out_n + 1);
  uint32_t *scg = dsa_test_xmalloc((size_t)(sc_n + 1) * 4);
  gbuf_read(q, &outb, outg);
  gbuf_read(q, &scb, scg);
  dsa_test_first_diff(outg, outw, (size_t)out_n + 1, "out",
                      "T=%lld H=%lld G=%lld packed=%d edge=%d boundary=%d nonfinite=%d olay=%d "
                      "pos32=%d cs16=%d",
                      (long long)t, (long long)h, (long long)g, tc->packed, tc->edge,
                      tc->boundary, tc->nonfinite, olay, pos32, cs16);
  dsa_test_first_diff(scg, scw, (size_t)(sc_n + 1) * 4, "scales",
                      "T=%lld Tp=%lld H=%lld G=%lld packed=%d slay=%d", (long long)t,
                      (long long)tp, (long long)h, (long long)g, tc->packed, slay);
  CHECK(f == want_f, "faults 0x%x, want 0x%x (T=%lld bad=%d)", f, want_f, (long long)t, tc->bad);
  CHECK(gbuf_guards_ok(q, &ob) && gbuf_guards_ok(q, &outb) && gbuf_guards_ok(q, &scb) &&
            gbuf_guards_ok(q, &csb) && gbuf_guards_ok(q, &pb),
        "guard band overwritten (T=%lld H=%lld)", (long long)t, (long long)h);

  free(o), free(cs), free(pos), free(out0), free(outw), free(sc0), free(scw), free(outg), free(scg);
  free(pos_n), free(cs_n);
  gbuf_release(&ob), gbuf_release(&csb), gbuf_release(&pb), gbuf_release(&outb);
  gbuf_release(&scb);
}

static void test_cases(void) {
  /* t, h, g, npos, tp_extra, packed, edge, bad, boundary, nonfinite, strided */
  const ocase fixed[] = {
      {1, 1, 1, 4, 0, 0, 0, 0, 0, 0, 0},     {1, 1, 1, 4, 3, 1, 0, 0, 0, 0, 0},
      {5, 8, 1, 50, 3, 0, 1, 1, 0, 0, 1},    {7, 64, 8, 100, 1, 1, 0, 0, 0, 0, 1},
      {3, 128, 16, 20, 1, 0, 1, 0, 0, 0, 1}, {0, 8, 2, 10, 4, 0, 0, 0, 0, 0, 0},
      {0, 8, 2, 10, 4, 1, 0, 0, 0, 0, 1},    {13, 6, 3, 1, 3, 1, 1, 1, 0, 0, 1},
      {9, 16, 2, 64, 0, 0, 0, 0, 1, 0, 0},   {9, 16, 4, 64, 3, 1, 0, 0, 1, 0, 1},
      {6, 8, 1, 30, 2, 0, 1, 0, 0, 1, 1},    {6, 8, 2, 30, 2, 1, 1, 0, 0, 1, 0},
      {2, 4, 4, 0, 2, 0, 0, 1, 0, 0, 0}, /* empty table: every position faults */
      {33, 2, 1, 40, 3, 0, 1, 1, 1, 0, 1},
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) run_case(&fixed[i]);
  static const int64_t hs[] = {1, 8, 16, 64, 128};
  for (int it = 0; it < 12; it++) {
    const int64_t h = hs[rnd(5)], gdiv[] = {1, 2, 4, 8};
    int64_t g = gdiv[rnd(4)];
    while (h % g) g /= 2;
    ocase tc = {1 + rnd(h >= 64 ? 5 : 24), h, g, 1 + rnd(300), rnd(5), (int)rnd(2),
                (int)rnd(2), (int)rnd(2), (int)(rnd(3) == 0), (int)(rnd(4) == 0), (int)rnd(2)};
    run_case(&tc);
  }
}

/* The reference's log2 model around powers of two: for each exponent k the
 * scale exponent steps from k to k + 1 only past the first fp32 ratio whose
 * correctly rounded log2 exceeds k, and is exact elsewhere (a sanity check
 * of the reference against the exact ceil away from the boundary). */
static void test_ref_model(void) {
  int bad = 0, steps = 0;
  for (int k = -42; k <= 119; k++) {
    for (int j = 0; j < 64; j++) {
      /* amax whose product with fl32(1/448) is (1 + j 2^-23) 2^k: search
       * the nearest float amax giving it. */
      const float r = (float)ldexp(1.0 + ldexp(j, -23), k);
      float a = (float)((double)r * 448.0);
      for (int it = 0; it < 4 && a * (float)(1.0 / 448.0) != r; it++)
        a = nextafterf(a, a * (float)(1.0 / 448.0) < r ? INFINITY : 0.0f);
      if (a * (float)(1.0 / 448.0) != r) continue;
      const int e = ref_oq_scale_exp(a);
      const double l = (double)k + log2(1.0 + ldexp(j, -23));
      if (e != (int)ceil((double)(float)l)) bad++;
      if (e != (j == 0 ? k : k + 1)) steps++;
    }
    if (k > 118) continue; /* 784 * 2^119 overflows */
    const float r2 = (float)ldexp(1.75, k); /* far from a boundary */
    if (ref_oq_scale_exp(r2 * 448.0f) != k + 1) bad++;
  }
  CHECK(bad == 0, "ref_oq_scale_exp: %d inconsistent values", bad);
  CHECK(steps > 100, "ref_oq_scale_exp: only %d ratios just above 2^k keep exponent k", steps);
}

/* ---- bad arguments ---------------------------------------------------------- */

typedef struct bargs {
  dsa_queue *q;
  dsa_tensor o, pos, cs, out, sc;
  const dsa_tensor *po, *ppos, *pcs, *pout, *psc;
  unsigned char reserved; /* the params' last reserved byte (non-zero: refused) */
  dsa_events ev;
} bargs;

static int breaker(void *vx, int c, const char **w, const char **w2) {
  bargs *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->q = NULL, *w = "q"; return 1;
    case 1: x->po = NULL, *w = "o"; return 1;
    case 2: x->o.dtype = DSA_F32, *w = "o"; return 1;
    case 3: x->o.ndim = 2, *w = "o"; return 1;
    case 4: x->o.shape[2] = 448, *w = "o"; return 1;
    case 5: x->o.stride[2] = 2, *w = "o"; return 1;
    case 6: x->o.shape[0] += 1000, x->pos.shape[0] += 1000, x->out.shape[1] += 1000,
            x->sc.shape[2] += 1000, *w = "o"; return 1; /* past the buffer */
    case 7: x->ppos = NULL, *w = "positions"; return 1;
    case 8: x->pos.dtype = DSA_F32, *w = "positions"; return 1;
    case 9: x->pos.shape[0] -= 1, *w = "positions"; return 1;
    case 10: x->cs.shape[1] = 32, *w = "cos_sin"; return 1;
    case 11: x->cs.dtype = DSA_I32, *w = "cos_sin"; return 1;
    case 12: x->cs.stride[1] = 3, *w = "cos_sin"; return 1;
    case 13: x->pout = NULL, *w = "out"; return 1;
    case 14: x->out.dtype = DSA_U8, *w = "out"; return 1;
    case 15: x->out.shape[0] = 3, *w = "out"; return 1; /* 3 does not divide 4 heads */
    case 16: x->out.shape[0] = 0, *w = "out"; return 1;
    case 17: x->out.shape[1] -= 1, *w = "out"; return 1;
    case 18: x->out.shape[2] = 512, *w = "out"; return 1;
    case 19: x->out.stride[2] = 2, *w = "out"; return 1;
    case 20: x->psc = NULL, *w = "scales"; return 1;
    case 21: x->sc.dtype = DSA_BF16, *w = "scales"; return 1;
    case 22: x->sc.dtype = DSA_I32, *w = "scales"; return 1; /* f32 shape, i32 dtype */
    case 23: x->sc.shape[0] = 1, *w = "scales"; return 1;
    case 24: x->sc.shape[2] = 3, *w = "scales"; return 1; /* fewer columns than tokens */
    case 25: x->sc.ndim = 2, *w = "scales"; return 1;
    case 26: x->sc.stride[0] = 1 << 20, *w = "scales"; return 1; /* past the buffer */
    case 27: x->ev.num_wait = 1, x->ev.wait = NULL, *w = "ev"; return 1;
    case 28: x->reserved = 1, *w = "reserved"; return 1;
    default: return 0;
  }
}

static void bargs_point(void *vx) {
  bargs *x = vx;
  x->po = &x->o, x->ppos = &x->pos, x->pcs = &x->cs, x->pout = &x->out, x->psc = &x->sc;
}

static dsa_status call_bad(void *vx, cl_event *done) {
  bargs *x = vx;
  x->ev.done = done;
  dsa_output_inv_rope_fp8_quant_params p;
  dsa_output_inv_rope_fp8_quant_params_default(&p);
  p.reserved[sizeof p.reserved - 1] = x->reserved;
  return dsa_output_inv_rope_fp8_quant(x->q, x->po, x->ppos, x->pcs, x->pout, x->psc, &p, &x->ev);
}

static dsa_status call_valid(void *vx, cl_event *done) {
  bargs *x = vx;
  (void)done;
  return dsa_output_inv_rope_fp8_quant(x->q, &x->o, &x->pos, &x->cs, &x->out, &x->sc, NULL, NULL);
}

static void test_bad_args(void) {
  const int64_t t = 4, h = 4, g = 2;
  guarded_buf obuf = gbuf_create(ctx, q, (size_t)(t * h * 512 * 2), NULL);
  guarded_buf outb = gbuf_create(ctx, q, (size_t)(t * h * 512), NULL);
  guarded_buf scb = gbuf_create(ctx, q, (size_t)(g * 8 * t * 4), NULL);
  int64_t pos[4] = {0, 1, 2, 3};
  float cs[8 * 64];
  for (int i = 0; i < 8 * 64; i++) cs[i] = (float)(i % 3) * 0.5f;
  guarded_buf pb = gbuf_create(ctx, q, sizeof pos, pos), csb = gbuf_create(ctx, q, sizeof cs, cs);
  bargs base;
  memset(&base, 0, sizeof base);
  base.q = q;
  base.o = dsa_tensor_make(obuf.mem, obuf.off, DSA_BF16, 3, (int64_t[]){t, h, 512});
  base.pos = dsa_tensor_make(pb.mem, pb.off, DSA_I64, 1, (int64_t[]){t});
  base.cs = dsa_tensor_make(csb.mem, csb.off, DSA_F32, 2, (int64_t[]){8, 64});
  base.out = dsa_tensor_make(outb.mem, outb.off, DSA_E4M3, 3, (int64_t[]){g, t, 1024});
  base.sc = dsa_tensor_make(scb.mem, scb.off, DSA_F32, 3, (int64_t[]){g, 8, t});
  dsa_bad_args spec = {.op = "output_inv_rope_fp8_quant", .base = &base, .size = sizeof base,
                       .reset = bargs_point, .brk = breaker, .call = call_bad, .valid = call_valid,
                       .outs = (const guarded_buf *const[]){&outb, &scb}, .nouts = 2,
                       .min_cases = 25, .all_change = 1, .no_event = 1};
  dsa_test_run_bad(q, &spec);
  CHECK(dsa_test_read_faults(q) == 0, "valid call faulted");
  gbuf_release(&obuf), gbuf_release(&outb), gbuf_release(&scb), gbuf_release(&pb);
  gbuf_release(&csb);
}

static void test_empty_and_events(void) {
  guarded_buf any = gbuf_create(ctx, q, 4096, NULL);
  dsa_tensor o0 = dsa_tensor_make(any.mem, any.off, DSA_BF16, 3, (int64_t[]){0, 8, 512});
  dsa_tensor i0 = dsa_tensor_make(any.mem, any.off, DSA_I64, 1, (int64_t[]){0});
  dsa_tensor c0 = dsa_tensor_make(any.mem, any.off, DSA_F32, 2, (int64_t[]){4, 64});
  dsa_tensor out0 = dsa_tensor_make(any.mem, any.off, DSA_E4M3, 3, (int64_t[]){2, 0, 2048});
  dsa_tensor s0 = dsa_tensor_make(any.mem, any.off, DSA_I32, 3, (int64_t[]){2, 4, 0});
  cl_event done = NULL;
  dsa_events ev = {0, NULL, &done};
  CHECK_OK(dsa_output_inv_rope_fp8_quant(q, &o0, &i0, &c0, &out0, &s0, NULL, &ev));
  CHECK(done != NULL, "T=0, Tp=0: no event");
  if (done) dsa_test_expect_complete(done, "T=0");
  gbuf_release(&any);
}

int main(void) {
  dsa_test_open(&ctx, &q, 0);
  test_ref_model();
  test_bad_args();
  test_empty_and_events();
  test_cases();
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
