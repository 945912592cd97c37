/* dsa_indexer_q_quant (FP8 and MXFP4, both E2M1 modes) against the C
 * reference in tests/ref on randomized shapes, numeric edge cases, positions
 * at and past the table ends, strided inputs and outputs, guard bands, bad
 * arguments, events; and the reference itself against the golden vectors.
 *
 * Usage: test_indexer_q [GOLDEN_DIR] */
#include <math.h>
#include <stdarg.h>

#include "common.h"
#include "npy.h"
#include "ref_indexer_quant.h"

_Static_assert((int)REF_FAULT_POSITION_RANGE == (int)DSA_FAULT_POSITION_RANGE, "fault bits");

static dsa_context *ctx;
static dsa_queue *q;
static uint64_t rng = 0x1D3E5C0FFEEull;

static int64_t rnd(int64_t n) { return n > 0 ? (int64_t)(dsa_test_rand(&rng) % (uint64_t)n) : 0; }
static uint16_t bf16(double x) { return ref_bf16_from_float((float)x); }
static double gauss(void) {
  return (dsa_test_uniform(&rng) + dsa_test_uniform(&rng) + dsa_test_uniform(&rng) - 1.5) * 2;
}

/* 32 values of one edge family (kind < 0: plain random). */
static void make_block(uint16_t *b, int kind) {
  static const double scales[] = {1, 3000, 1e4, 1e-5, 1e-6, 0.01, 1e30, 1e-30};
  switch (kind) {
    case 0: memset(b, 0, 64); return;
    case 1: for (int i = 0; i < 32; i++) b[i] = (uint16_t)(rnd(2) ? 0x8000 : 0); return;
    case 2: for (int i = 0; i < 32; i++) b[i] = (uint16_t)(rnd(0x80) | (rnd(2) << 15)); return;
    case 3: case 4: case 5: { /* amax a power-of-two edge for 448 or 6 */
      int k = (int)rnd(60) - 40;
      for (int i = 0; i < 32; i++) b[i] = bf16(ldexp(gauss(), k));
      static const double tops[] = {1.75, 1.7578125, 1.5, 1.5078125, 1.4921875, 1.0};
      b[rnd(32)] = bf16((rnd(2) ? -1 : 1) * ldexp(tops[rnd(6)], k + 1));
      return;
    }
    case 6: /* exact e2m1 ties after scaling: multiples of 0.25 * 2^k */
      { int k = (int)rnd(20) - 10;
        for (int i = 0; i < 32; i++) b[i] = bf16((rnd(2) ? -1 : 1) * ldexp((double)rnd(25), k - 2));
        b[rnd(32)] = bf16(ldexp(6.0, k)); }
      return;
    case 7: for (int i = 0; i < 32; i++) b[i] = bf16(gauss() * 100); b[rnd(32)] = 0x7FC0; return;
    case 8: /* huge */ for (int i = 0; i < 32; i++) b[i] = bf16(gauss() * 1e38); return;
    default: {
      double s = scales[rnd(8)];
      for (int i = 0; i < 32; i++) b[i] = bf16(gauss() * s);
    }
  }
}

typedef struct qcase {
  int64_t T, H, D, R, P;
  int pos_i32, cs_bf16, w_bf16, mxfp4, mode;
  int pad;  /* padded strides / odd offsets */
  int edge; /* edge families */
  int bad;  /* out-of-table positions */
} qcase;

static void run_case(const qcase *c) {
  const int64_t T = c->T, H = c->H, D = c->D, R = c->R, P = c->P;
  /* strides (elements) */
  const int64_t q_sh = D + (c->pad ? 8 * rnd(3) + rnd(2) : 0), q_st = H * q_sh + (c->pad ? rnd(5) : 0);
  const int64_t cs_rs = R + (c->pad ? rnd(9) : 0);
  const int64_t w_sh = c->pad ? 1 + rnd(2) : 1, w_st = H * w_sh + (c->pad ? rnd(3) : 0);
  const int64_t ps = c->pad ? 1 + rnd(3) : 1;
  const int64_t qd = c->mxfp4 ? D / 2 : D;
  const int64_t oq_sh = qd + (c->pad ? 16 * rnd(2) + rnd(3) : 0), oq_st = H * oq_sh + (c->pad ? rnd(3) : 0);
  const int64_t os_sh = D / 32 + (c->pad ? rnd(3) : 0), os_st = H * os_sh + (c->pad ? rnd(2) : 0);
  const int64_t ow_sh = c->pad ? 1 + rnd(2) : 1, ow_st = H * ow_sh + (c->pad ? rnd(3) : 0);
  const size_t qoff = c->pad ? (size_t)rnd(3) : 0, ooff = c->pad ? (size_t)rnd(5) : 0;

  size_t qn = qoff + (size_t)(T * q_st) + 1;
  uint16_t *qh = dsa_test_xmalloc(qn * 2);
  dsa_test_fill_random(&rng, qh, qn * 2);
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t b = 0; b < D / 32; b++)
        make_block(qh + qoff + t * q_st + h * q_sh + 32 * b, c->edge ? (int)rnd(12) : -1);
  int64_t *pos64 = dsa_test_xmalloc((size_t)(T * ps + 1) * 8);
  int32_t *pos32 = dsa_test_xmalloc((size_t)(T * ps + 1) * 4);
  for (int64_t t = 0; t < T; t++) {
    int64_t r = rnd(8), p = r == 0 ? 0 : r == 1 ? P - 1 : rnd(P);
    if (c->bad && rnd(3) == 0) p = rnd(2) ? -1 - rnd(5) : P + rnd(3);
    if (c->bad && t == 0) p = P;
    pos64[t * ps] = p, pos32[t * ps] = (int32_t)p;
  }
  size_t csn = (size_t)(P * cs_rs) + 1, cses = c->cs_bf16 ? 2 : 4;
  uint8_t *cs = dsa_test_xmalloc(csn * cses);
  dsa_test_fill_random(&rng, cs, csn * cses);
  for (int64_t p = 0; p < P; p++)
    for (int64_t i = 0; i < R / 2; i++) {
      double th = p * pow(10000.0, -2.0 * i / (R ? R : 1)) + (c->edge ? gauss() : 0);
      double cv = cos(th), sv = sin(th);
      if (c->cs_bf16) {
        ((uint16_t *)cs)[p * cs_rs + i] = bf16(cv);
        ((uint16_t *)cs)[p * cs_rs + R / 2 + i] = bf16(sv);
      } else {
        ((float *)cs)[p * cs_rs + i] = (float)cv;
        ((float *)cs)[p * cs_rs + R / 2 + i] = (float)sv;
      }
    }
  size_t wn = (size_t)(T * w_st) + 1, wes = c->w_bf16 ? 2 : 4;
  uint8_t *w = dsa_test_xmalloc(wn * wes);
  for (size_t i = 0; i < wn; i++) {
    double v = gauss() * (c->edge && rnd(4) == 0 ? 1e-30 : 1);
    if (c->w_bf16) ((uint16_t *)w)[i] = bf16(v);
    else ((float *)w)[i] = (float)v;
  }
  size_t oqn = ooff + (size_t)(T * oq_st) + 1, osn = ooff + (size_t)(T * os_st) + 1,
         own = ooff + (size_t)(T * ow_st) + 1;
  uint8_t *oq = dsa_test_xmalloc(oqn), *os = dsa_test_xmalloc(osn);
  float *ow = dsa_test_xmalloc(own * 4);
  dsa_test_fill_random(&rng, oq, oqn), dsa_test_fill_random(&rng, os, osn), dsa_test_fill_random(&rng, ow, own * 4);

  dsa_indexer_q_quant_params prm;
  dsa_indexer_q_quant_params_default(&prm);
  prm.softmax_scale = (float)(1.0 / sqrt((double)D));
  prm.head_scale = (float)(1.0 / sqrt((double)H));
  prm.e2m1 = c->mode ? DSA_E2M1_LEGACY : DSA_E2M1_RNE;

  guarded_buf qb = gbuf_create(ctx, q, qn * 2, qh),
              pb = gbuf_create(ctx, q, (size_t)(T * ps + 1) * (c->pos_i32 ? 4 : 8),
                               c->pos_i32 ? (void *)pos32 : (void *)pos64),
              cb = gbuf_create(ctx, q, csn * cses, cs), wb = gbuf_create(ctx, q, wn * wes, w),
              oqb = gbuf_create(ctx, q, oqn, oq), osb = gbuf_create(ctx, q, osn, os),
              owb = gbuf_create(ctx, q, own * 4, ow);
  dsa_tensor qt = {.mem = qb.mem, .offset = qb.off + qoff * 2, .dtype = DSA_BF16, .ndim = 3,
                   .shape = {T, H, D}, .stride = {q_st, q_sh, 1}};
  dsa_tensor pt = {.mem = pb.mem, .offset = pb.off, .dtype = c->pos_i32 ? DSA_I32 : DSA_I64,
                   .ndim = 1, .shape = {T}, .stride = {ps}};
  dsa_tensor ct = {.mem = cb.mem, .offset = cb.off, .dtype = c->cs_bf16 ? DSA_BF16 : DSA_F32,
                   .ndim = 2, .shape = {P, R}, .stride = {cs_rs, 1}};
  dsa_tensor wt = {.mem = wb.mem, .offset = wb.off, .dtype = c->w_bf16 ? DSA_BF16 : DSA_F32,
                   .ndim = 2, .shape = {T, H}, .stride = {w_st, w_sh}};
  dsa_tensor oqt = {.mem = oqb.mem, .offset = oqb.off + ooff,
                    .dtype = c->mxfp4 ? DSA_E2M1X2 : DSA_E4M3, .ndim = 3, .shape = {T, H, qd},
                    .stride = {oq_st, oq_sh, 1}};
  dsa_tensor ost = {.mem = osb.mem, .offset = osb.off + ooff, .dtype = DSA_UE8M0, .ndim = 3,
                    .shape = {T, H, D / 32}, .stride = {os_st, os_sh, 1}};
  dsa_tensor owt = {.mem = owb.mem, .offset = owb.off + ooff * 4, .dtype = DSA_F32, .ndim = 2,
                    .shape = {T, H}, .stride = {ow_st, ow_sh}};
  CHECK_OK(dsa_indexer_q_quant(q, &pt, &qt, &ct, &wt, &oqt, c->mxfp4 ? &ost : NULL, &owt, &prm,
                               NULL));
  uint32_t f = dsa_test_read_faults(q);

  ref_indexer_q_args a = {T, H, D, R, P, c->pos_i32 ? (void *)pos32 : (void *)pos64, c->pos_i32, ps,
                          qh + qoff, q_st, q_sh, cs, c->cs_bf16, cs_rs, w, c->w_bf16, w_st, w_sh,
                          prm.softmax_scale, prm.head_scale, c->mxfp4, c->mode,
                          oq + ooff, oq_st, oq_sh, os + ooff, os_st, os_sh, ow + ooff, ow_st, ow_sh};
  unsigned want_f = ref_indexer_q(&a);
  uint8_t *g = dsa_test_xmalloc(oqn > own * 4 ? (oqn > osn ? oqn : osn) : own * 4);
  char desc[200];
  snprintf(desc, sizeof desc, "T=%lld H=%lld D=%lld R=%lld P=%lld mx=%d mode=%d pad=%d edge=%d bad=%d",
           (long long)T, (long long)H, (long long)D, (long long)R, (long long)P, c->mxfp4, c->mode,
           c->pad, c->edge, c->bad);
  gbuf_read(q, &oqb, g);
  dsa_test_first_diff(g, oq, oqn, "out_q", "%s", desc);
  gbuf_read(q, &osb, g);
  dsa_test_first_diff(g, os, osn, "out_scales", "%s", desc);
  gbuf_read(q, &owb, g);
  dsa_test_first_diff(g, ow, own * 4, "out_weights", "%s", desc);
  CHECK(f == want_f, "faults 0x%x want 0x%x [%s]", f, want_f, desc);
  CHECK(gbuf_guards_ok(q, &qb) && gbuf_guards_ok(q, &pb) && gbuf_guards_ok(q, &cb) &&
            gbuf_guards_ok(q, &wb) && gbuf_guards_ok(q, &oqb) && gbuf_guards_ok(q, &osb) &&
            gbuf_guards_ok(q, &owb),
        "guard band overwritten [%s]", desc);
  free(g), free(qh), free(pos64), free(pos32), free(cs), free(w), free(oq), free(os), free(ow);
  gbuf_release(&qb), gbuf_release(&pb), gbuf_release(&cb), gbuf_release(&wb);
  gbuf_release(&oqb), gbuf_release(&osb), gbuf_release(&owb);
}

static void test_random(void) {
  static const int64_t Hs[] = {1, 8, 16, 64, 128}, Ds[] = {32, 64, 128, 256};
  const qcase fixed[] = {
      {1, 1, 128, 64, 16, 0, 0, 1, 0, 0, 0, 0, 0},   {5, 8, 128, 64, 1024, 0, 0, 1, 1, 0, 0, 1, 0},
      {3, 64, 128, 64, 7, 1, 1, 0, 1, 1, 1, 1, 1},   {7, 16, 128, 64, 9, 0, 0, 0, 0, 0, 1, 1, 1},
      {2, 128, 128, 64, 5, 0, 1, 1, 1, 0, 0, 1, 0},  {3, 5, 96, 50, 4, 1, 0, 1, 0, 0, 1, 1, 1},
      {4, 3, 64, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0},      {2, 3, 32, 32, 3, 0, 1, 0, 1, 0, 1, 1, 1},
      {9, 7, 256, 64, 11, 1, 0, 0, 0, 0, 1, 1, 1},   {1, 1, 32, 2, 2, 0, 0, 1, 1, 1, 0, 1, 1},
      {33, 64, 128, 64, 40, 0, 0, 1, 0, 0, 0, 1, 0}, {33, 64, 128, 64, 40, 0, 0, 1, 1, 0, 0, 1, 0},
      {6, 2, 128, 128, 6, 0, 1, 1, 1, 1, 0, 1, 1},   {0, 8, 128, 64, 4, 0, 0, 1, 0, 0, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) run_case(&fixed[i]);
  for (int it = 0; it < 24; it++) {
    int64_t D = Ds[rnd(4)], R = 2 * rnd(D / 2 + 1);
    if (rnd(2)) R = D >= 64 ? 64 : D;
    qcase c = {rnd(3) == 0 ? rnd(2) : 1 + 2 * rnd(8), Hs[rnd(5)], D, R, 1 + rnd(20),
               (int)rnd(2), (int)rnd(2), (int)rnd(2), (int)rnd(2), (int)rnd(2), (int)rnd(2),
               (int)rnd(2), (int)rnd(2)};
    run_case(&c);
  }
}

/* Every bf16 bit pattern through both quantizers (no RoPE: R = 0), so each
 * value meets the encoders at many block exponents. */
static void test_sweep(void) {
  for (int mx = 0; mx < 2; mx++)
    for (int mode = 0; mode < (mx ? 2 : 1); mode++) {
      const int64_t T = 16, H = 32, D = 128;
      uint16_t *qh = dsa_test_xmalloc(65536 * 2);
      for (uint32_t i = 0; i < 65536; i++) {
        /* byte-swapped index (a permutation) with signs mixed in: every block
         * holds a spread of magnitudes */
        qh[i] = (uint16_t)(((i & 0xFF) << 8 | (i >> 8)) ^ ((i >> 3) & 0x8000));
        if (!mx && (qh[i] & 0x7FFF) == 0x7F80) qh[i] = 0; /* no inf for FP8 */
      }
      int64_t pos[16] = {0};
      float w[16 * 32];
      for (int i = 0; i < 16 * 32; i++) w[i] = (float)gauss();
      const int64_t qd = mx ? 64 : 128;
      uint8_t *oq = dsa_test_xmalloc((size_t)(T * H * qd)), os[16 * 32 * 4];
      float ow[16 * 32];
      guarded_buf qb = gbuf_create(ctx, q, 65536 * 2, qh), pb = gbuf_create(ctx, q, sizeof pos, pos),
                  cb = gbuf_create(ctx, q, 64, NULL), wb = gbuf_create(ctx, q, sizeof w, w),
                  oqb = gbuf_create(ctx, q, (size_t)(T * H * qd), NULL),
                  osb = gbuf_create(ctx, q, sizeof os, NULL), owb = gbuf_create(ctx, q, sizeof ow, NULL);
      dsa_tensor qt = dsa_tensor_make(qb.mem, qb.off, DSA_BF16, 3, (int64_t[]){T, H, D});
      dsa_tensor pt = dsa_tensor_make(pb.mem, pb.off, DSA_I64, 1, (int64_t[]){T});
      dsa_tensor ct = dsa_tensor_make(cb.mem, cb.off, DSA_F32, 2, (int64_t[]){4, 0});
      dsa_tensor wt = dsa_tensor_make(wb.mem, wb.off, DSA_F32, 2, (int64_t[]){T, H});
      dsa_tensor oqt = dsa_tensor_make(oqb.mem, oqb.off, mx ? DSA_E2M1X2 : DSA_E4M3, 3, (int64_t[]){T, H, qd});
      dsa_tensor ost = dsa_tensor_make(osb.mem, osb.off, DSA_UE8M0, 3, (int64_t[]){T, H, 4});
      dsa_tensor owt = dsa_tensor_make(owb.mem, owb.off, DSA_F32, 2, (int64_t[]){T, H});
      dsa_indexer_q_quant_params prm;
      dsa_indexer_q_quant_params_default(&prm);
      prm.e2m1 = mode ? DSA_E2M1_LEGACY : DSA_E2M1_RNE;
      CHECK_OK(dsa_indexer_q_quant(q, &pt, &qt, &ct, &wt, &oqt, mx ? &ost : NULL, &owt, &prm, NULL));
      CHECK(dsa_test_read_faults(q) == 0, "sweep: faults");
      uint8_t *woq = dsa_test_xmalloc((size_t)(T * H * qd)), wos[16 * 32 * 4];
      float wow[16 * 32];
      ref_indexer_q_args a = {T, H, D, 0, 4, pos, 0, 1, qh, H * D, D, NULL, 0, 0, w, 0, H, 1,
                              prm.softmax_scale, prm.head_scale, mx, mode, woq, H * qd, qd,
                              wos, H * 4, 4, wow, H, 1};
      ref_indexer_q(&a);
      gbuf_read(q, &oqb, oq);
      dsa_test_first_diff(oq, woq, (size_t)(T * H * qd), "sweep out_q", "mx=%d mode=%d", mx, mode);
      if (mx) {
        gbuf_read(q, &osb, os);
        dsa_test_first_diff(os, wos, sizeof os, "sweep out_scales", "mode=%d", mode);
      }
      gbuf_read(q, &owb, ow);
      dsa_test_first_diff(ow, wow, sizeof ow, "sweep out_weights", "mx=%d mode=%d", mx, mode);
      free(qh), free(oq), free(woq);
      gbuf_release(&qb), gbuf_release(&pb), gbuf_release(&cb), gbuf_release(&wb);
      gbuf_release(&oqb), gbuf_release(&osb), gbuf_release(&owb);
    }
}

/* ---- the reference's own facts (§2.4, §2.5) ------------------------------------ */

static void test_ref_facts(void) {
  /* RNE ties: 0.25->0, 0.75->2, 1.25->2, 1.75->4, 2.5->4, 3.5->6, 5->6; legacy lower. */
  static const double ties[] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
  static const uint8_t rne[] = {0, 2, 2, 4, 4, 6, 6}, leg[] = {0, 1, 2, 3, 4, 5, 6};
  for (int i = 0; i < 7; i++) {
    CHECK(ref_e2m1_encode(ties[i], REF_E2M1_RNE) == rne[i], "rne tie %g", ties[i]);
    CHECK(ref_e2m1_encode(ties[i], REF_E2M1_LEGACY) == leg[i], "legacy tie %g", ties[i]);
    CHECK(ref_e2m1_encode(-ties[i], REF_E2M1_RNE) == (rne[i] | 8), "rne -tie %g", ties[i]);
  }
  CHECK(ref_e2m1_encode(-0.0, REF_E2M1_RNE) == 8, "rne -0 -> 0x8");
  CHECK(ref_e2m1_encode(-0.1, REF_E2M1_RNE) == 8, "rne -0.1 -> 0x8");
  CHECK(ref_e2m1_encode(-0.1, REF_E2M1_LEGACY) == 0, "legacy -0.1 -> 0");
  CHECK(ref_e2m1_encode(100, REF_E2M1_RNE) == 7 && ref_e2m1_encode(-100, REF_E2M1_LEGACY) == 15,
        "saturation");
  CHECK(ref_mxfp4_exponent(0, REF_E2M1_RNE) == -126, "all-zero block: byte 1");
  CHECK(ref_mxfp4_exponent(0, REF_E2M1_LEGACY) == -15, "legacy floor: e = -15");
  CHECK(ref_mxfp4_exponent(6, REF_E2M1_RNE) == 0 && ref_mxfp4_exponent(6.0f * 1.0000001f, 0) == 1,
        "6 -> e 0, just above -> 1");
  /* The exponent of the fp32 ratio equals the exact ceil(log2(amax/6)) for
   * every normal amax mantissa at a few exponents (the kernels' integer rule
   * relies on this). */
  int bad = 0;
  for (int k = -100; k <= 100; k += 37)
    for (uint32_t m = 0; m < (1u << 23); m += 7) {
      float a = ldexpf(1.0f + (float)m / 8388608.0f, k);
      int want = ref_ue8m0_exponent(a, 6.0);
      bad += ref_mxfp4_exponent(a, REF_E2M1_RNE) != want;
      bad += ref_mxfp4_exponent(a, REF_E2M1_LEGACY) != (a < 1e-4f ? -15 : want);
    }
  CHECK(bad == 0, "%d mxfp4 exponents differ from the exact rule", bad);
}

/* ---- goldens: the reference reproduces vLLM's bytes ------------------------------ */

static int load(const char *dir, const char *name, npy_array *a) {
  char p[1024], err[256];
  snprintf(p, sizeof p, "%s/%s.npy", dir, name);
  if (npy_load(p, a, err, sizeof err)) {
    CHECK(0, "golden %s: %s", p, err);
    return -1;
  }
  return 0;
}

static void golden_case(const char *root, const char *op, const char *cs, int mx, int mode) {
  char dir[1024], p[1100], err[256];
  snprintf(dir, sizeof dir, "%s/%s/%s", root, op, cs);
  npy_meta meta;
  snprintf(p, sizeof p, "%s/meta.txt", dir);
  if (npy_meta_load(p, &meta, err, sizeof err)) {
    CHECK(0, "golden %s: %s", p, err);
    return;
  }
  npy_array pos, qa, csn, w, oq, ow, osc;
  memset(&osc, 0, sizeof osc);
  double ss = 0, hs = 0;
  npy_meta_f64(&meta, "softmax_scale", &ss);
  npy_meta_f64(&meta, "head_scale", &hs);
  if (load(dir, "positions", &pos) || load(dir, "q", &qa) || load(dir, "cos_sin", &csn) ||
      load(dir, "weights", &w) || load(dir, "out_q", &oq) || load(dir, "out_weights", &ow) ||
      (mx && load(dir, "out_scales", &osc)))
    return;
  const int64_t T = qa.shape[0], H = qa.shape[1], D = qa.shape[2], R = csn.shape[1];
  const int64_t qd = mx ? D / 2 : D;
  uint8_t *gq = dsa_test_xmalloc((size_t)(T * H * qd)), *gs = dsa_test_xmalloc((size_t)(T * H * D / 32) + 1);
  float *gw = dsa_test_xmalloc((size_t)(T * H) * 4);
  ref_indexer_q_args a = {T, H, D, R, csn.shape[0], pos.data, 0, 1, qa.data, H * D, D, csn.data,
                          0, R, w.data, 1, H, 1, (float)ss, (float)hs, mx, mode,
                          gq, H * qd, qd, gs, H * (D / 32), D / 32, gw, H, 1};
  CHECK(ref_indexer_q(&a) == 0, "golden %s: faults", dir);
  dsa_test_first_diff(gq, oq.data, oq.nbytes, "golden out_q", "%s", dir);
  dsa_test_first_diff(gw, ow.data, ow.nbytes, "golden out_weights", "%s", dir);
  if (mx) dsa_test_first_diff(gs, osc.data, osc.nbytes, "golden out_scales", "%s", dir);
  free(gq), free(gs), free(gw);
  npy_free(&pos), npy_free(&qa), npy_free(&csn), npy_free(&w), npy_free(&oq), npy_free(&ow);
  if (mx) npy_free(&osc);
  npy_meta_free(&meta);
}

static void test_goldens(const char *root) {
  golden_case(root, "indexer_q_fp8", "t5_h8", 0, 0);
  golden_case(root, "indexer_q_fp8", "t33_h64", 0, 0);
  golden_case(root, "indexer_q_mxfp4", "t5_h8_rne", 1, REF_E2M1_RNE);
  golden_case(root, "indexer_q_mxfp4", "t33_h64_rne", 1, REF_E2M1_RNE);
  golden_case(root, "indexer_q_mxfp4", "t5_h8_legacy", 1, REF_E2M1_LEGACY);
  golden_case(root, "indexer_q_mxfp4", "t33_h64_legacy", 1, REF_E2M1_LEGACY);
}

/* ---- bad arguments -------------------------------------------------------------- */

typedef struct qargs {
  dsa_queue *q;
  dsa_tensor pos, qin, cs, w, oq, os, ow;
  const dsa_tensor *ppos, *pqin, *pcs, *pw, *poq, *pos_, *pow;
  dsa_indexer_q_quant_params prm;
  const dsa_indexer_q_quant_params *pprm;
  dsa_events ev;
} qargs;

static int break_q(void *vx, int c, const char **w, const char **w2) {
  qargs *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->q = NULL, *w = "q"; return 1;
    case 1: x->ev.num_wait = 1, x->ev.wait = NULL, *w = "ev"; return 1;
    case 2: x->ppos = NULL, *w = "positions"; return 1;
    case 3: x->pos.dtype = DSA_F32, *w = "positions"; return 1;
    case 4: x->pos.shape[0] = 2, *w = "positions"; return 1;
    case 5: x->pqin = NULL, *w = "index_q"; return 1;
    case 6: x->qin.dtype = DSA_F32, *w = "index_q"; return 1;
    case 7: x->qin.shape[2] = 100, x->oq.shape[2] = 50, *w = "index_q"; return 1;
    case 8: x->qin.stride[2] = 2, *w = "index_q"; return 1;
    case 9: x->qin.offset += 1 << 20, *w = "index_q"; return 1;
    case 10: x->qin.shape[1] = 0, *w = "index_q"; return 1;
    case 11: x->pcs = NULL, *w = "cos_sin"; return 1;
    case 12: x->cs.shape[1] = 63, *w = "cos_sin"; return 1;
    case 13: x->cs.dtype = DSA_I32, *w = "cos_sin"; return 1;
    case 14: x->cs.shape[1] = 130, x->cs.stride[0] = 130, *w = "cos_sin"; return 1;
    case 15: x->pw = NULL, *w = "weights"; return 1;
    case 16: x->w.shape[1] = 3, *w = "weights"; return 1;
    case 17: x->w.dtype = DSA_I64, *w = "weights"; return 1;
    case 18: x->poq = NULL, *w = "out_q"; return 1;
    case 19: x->oq.dtype = DSA_U8, *w = "out_q"; return 1;
    case 20: x->oq.shape[2] = 64, *w = "out_q"; return 1;
    case 21: x->pos_ = &x->os, *w = "out_scales"; return 1; /* FP8 with scales */
    case 22: x->pow = NULL, *w = "out_weights"; return 1;
    case 23: x->ow.dtype = DSA_BF16, *w = "out_weights"; return 1;
    case 24: x->ow.stride[0] = -1, *w = "out_weights"; return 1;
    case 25: x->prm.softmax_scale = NAN, *w = "softmax_scale"; return 1;
    case 26: x->prm.head_scale = INFINITY, *w = "head_scale"; return 1;
    case 27: x->oq.mem = NULL, *w = "out_q"; return 1;
    /* MXFP4 variants */
    case 28: x->oq.dtype = DSA_E2M1X2, x->oq.shape[2] = 64, *w = "out_scales"; return 1; /* NULL */
    case 29: x->oq.dtype = DSA_E2M1X2, x->oq.shape[2] = 64, x->pos_ = &x->os, x->os.shape[2] = 3,
             *w = "out_scales"; return 1;
    case 30: x->oq.dtype = DSA_E2M1X2, x->oq.shape[2] = 64, x->pos_ = &x->os, x->prm.e2m1 = 7,
             *w = "e2m1"; return 1;
    case 31: x->oq.dtype = DSA_E2M1X2, x->oq.shape[2] = 64, x->pos_ = &x->os,
             x->os.dtype = DSA_U8, *w = "out_scales"; return 1;
    default: return 0;
  }
}

static void qargs_point(void *vx) {
  qargs *x = vx;
  x->ppos = &x->pos, x->pqin = &x->qin, x->pcs = &x->cs, x->pw = &x->w, x->poq = &x->oq,
  x->pos_ = NULL, x->pow = &x->ow, x->pprm = &x->prm;
}

static dsa_status call_q(void *vx, cl_event *done) {
  qargs *x = vx;
  x->ev.done = done;
  return dsa_indexer_q_quant(x->q, x->ppos, x->pqin, x->pcs, x->pw, x->poq, x->pos_, x->pow,
                             x->pprm, &x->ev);
}

/* The valid call, with p = NULL (defaults). */
static dsa_status valid_q(void *vx, cl_event *done) {
  qargs *x = vx;
  x->ev.done = done;
  return dsa_indexer_q_quant(x->q, &x->pos, &x->qin, &x->cs, &x->w, &x->oq, NULL, &x->ow, NULL,
                             &x->ev);
}

static void test_bad_args(void) {
  const int64_t T = 3, H = 4, D = 128;
  guarded_buf qb = gbuf_create(ctx, q, T * H * D * 2, NULL), pb = gbuf_create(ctx, q, T * 8, (int64_t[]){0, 1, 2}),
              cb = gbuf_create(ctx, q, 4 * 64 * 4, NULL), wb = gbuf_create(ctx, q, T * H * 2, NULL),
              oqb = gbuf_create(ctx, q, T * H * D, NULL), osb = gbuf_create(ctx, q, T * H * 4, NULL),
              owb = gbuf_create(ctx, q, T * H * 4, NULL);
  qargs base;
  memset(&base, 0, sizeof base);
  base.q = q;
  base.pos = dsa_tensor_make(pb.mem, pb.off, DSA_I64, 1, (int64_t[]){T});
  base.qin = dsa_tensor_make(qb.mem, qb.off, DSA_BF16, 3, (int64_t[]){T, H, D});
  base.cs = dsa_tensor_make(cb.mem, cb.off, DSA_F32, 2, (int64_t[]){4, 64});
  base.w = dsa_tensor_make(wb.mem, wb.off, DSA_BF16, 2, (int64_t[]){T, H});
  base.oq = dsa_tensor_make(oqb.mem, oqb.off, DSA_E4M3, 3, (int64_t[]){T, H, D});
  base.os = dsa_tensor_make(osb.mem, osb.off, DSA_UE8M0, 3, (int64_t[]){T, H, 4});
  base.ow = dsa_tensor_make(owb.mem, owb.off, DSA_F32, 2, (int64_t[]){T, H});
  dsa_indexer_q_quant_params_default(&base.prm);
  /* The unbroken call works (p = NULL means defaults) and returns an event. */
  dsa_bad_args spec = {.op = "indexer_q_quant", .base = &base, .size = sizeof base,
                       .reset = qargs_point, .brk = break_q, .call = call_q, .valid = valid_q,
                       .outs = (const guarded_buf *const[]){&oqb, &owb}, .nouts = 2,
                       .min_cases = 30, .all_change = 1};
  dsa_test_run_bad(q, &spec);
  cl_event done = NULL;
  dsa_events ev = {0, NULL, &done};
  /* T = 0 still gives a completed event. */
  dsa_tensor z[7] = {base.pos, base.qin, base.cs, base.w, base.oq, base.os, base.ow};
  z[0].shape[0] = z[1].shape[0] = z[3].shape[0] = z[4].shape[0] = z[6].shape[0] = 0;
  done = NULL;
  CHECK_OK(dsa_indexer_q_quant(q, &z[0], &z[1], &z[2], &z[3], &z[4], NULL, &z[6], NULL, &ev));
  CHECK(done && clWaitForEvents(1, &done) == CL_SUCCESS, "T=0: event");
  if (done) clReleaseEvent(done);
  dsa_test_read_faults(q);
  gbuf_release(&qb), gbuf_release(&pb), gbuf_release(&cb), gbuf_release(&wb);
  gbuf_release(&oqb), gbuf_release(&osb), gbuf_release(&owb);
}

/* ---- --bench: Q quant at DeepSeek-V4 shapes against a buffer copy ----------------- */

static double event_ms(cl_event e) {
  cl_ulong a = 0, b = 0;
  clWaitForEvents(1, &e);
  clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL);
  clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL);
  clReleaseEvent(e);
  return (double)(b - a) * 1e-6;
}

static int bench(void) {
  dsa_test_open(&ctx, &q, DSA_QUEUE_PROFILING);
  printf("device: %s\n", dsa_context_device_name(ctx));
  cl_context cc = dsa_context_cl_context(ctx);
  cl_command_queue cq = dsa_queue_cl(q);
  const int64_t Ts[] = {64, 8192}, H = 64, D = 128, P = 65536;
  cl_int err;
  const size_t big = (size_t)8192 * H * D * 2;
  cl_mem qm = clCreateBuffer(cc, CL_MEM_READ_WRITE, big, NULL, &err),
         pm = clCreateBuffer(cc, CL_MEM_READ_WRITE, 8192 * 8, NULL, &err),
         cm = clCreateBuffer(cc, CL_MEM_READ_WRITE, (size_t)P * 64 * 4, NULL, &err),
         wm = clCreateBuffer(cc, CL_MEM_READ_WRITE, 8192 * H * 2, NULL, &err),
         oqm = clCreateBuffer(cc, CL_MEM_READ_WRITE, big / 2, NULL, &err),
         osm = clCreateBuffer(cc, CL_MEM_READ_WRITE, 8192 * H * 4, NULL, &err),
         owm = clCreateBuffer(cc, CL_MEM_READ_WRITE, 8192 * H * 4, NULL, &err),
         cpy = clCreateBuffer(cc, CL_MEM_READ_WRITE, big, NULL, &err);
  uint16_t *h = dsa_test_xmalloc(big);
  for (size_t i = 0; i < big / 2; i++) h[i] = bf16(gauss());
  clEnqueueWriteBuffer(cq, qm, CL_TRUE, 0, big, h, 0, NULL, NULL);
  int64_t *pos = dsa_test_xmalloc(8192 * 8);
  for (int i = 0; i < 8192; i++) pos[i] = rnd(P);
  clEnqueueWriteBuffer(cq, pm, CL_TRUE, 0, 8192 * 8, pos, 0, NULL, NULL);
  float *csv = dsa_test_xmalloc((size_t)P * 64 * 4);
  for (size_t i = 0; i < (size_t)P * 64; i++) csv[i] = (float)gauss();
  clEnqueueWriteBuffer(cq, cm, CL_TRUE, 0, (size_t)P * 64 * 4, csv, 0, NULL, NULL);
  clEnqueueWriteBuffer(cq, wm, CL_TRUE, 0, 8192 * H * 2, h, 0, NULL, NULL);
  double copy_best = 1e30;
  for (int it = 0; it < 20; it++) {
    cl_event e;
    clEnqueueCopyBuffer(cq, qm, cpy, 0, 0, big, 0, NULL, &e);
    double ms = event_ms(e);
    if (ms < copy_best) copy_best = ms;
  }
  const double copy_gbs = 2.0 * (double)big / (copy_best * 1e6);
  printf("copy %zu B: %.1f us, %.0f GB/s (read + write)\n", big, copy_best * 1e3, copy_gbs);
  for (int ti = 0; ti < 2; ti++)
    for (int mx = 0; mx < 2; mx++) {
      const int64_t T = Ts[ti], qd = mx ? D / 2 : D;
      dsa_tensor qt = dsa_tensor_make(qm, 0, DSA_BF16, 3, (int64_t[]){T, H, D});
      dsa_tensor pt = dsa_tensor_make(pm, 0, DSA_I64, 1, (int64_t[]){T});
      dsa_tensor ct = dsa_tensor_make(cm, 0, DSA_F32, 2, (int64_t[]){P, 64});
      dsa_tensor wt = dsa_tensor_make(wm, 0, DSA_BF16, 2, (int64_t[]){T, H});
      dsa_tensor oqt = dsa_tensor_make(oqm, 0, mx ? DSA_E2M1X2 : DSA_E4M3, 3, (int64_t[]){T, H, qd});
      dsa_tensor ost = dsa_tensor_make(osm, 0, DSA_UE8M0, 3, (int64_t[]){T, H, D / 32});
      dsa_tensor owt = dsa_tensor_make(owm, 0, DSA_F32, 2, (int64_t[]){T, H});
      double best = 1e30;
      for (int it = 0; it < 30; it++) {
        cl_event e = NULL;
        dsa_events ev = {0, NULL, &e};
        if (dsa_indexer_q_quant(q, &pt, &qt, &ct, &wt, &oqt, mx ? &ost : NULL, &owt, NULL, &ev)) {
          printf("failed: %s\n", dsa_last_error());
          return 1;
        }
        double ms = event_ms(e);
        if (ms < best) best = ms;
      }
      const double bytes = (double)T * H * (D * 2 + qd + (mx ? D / 32 : 0) + 2 + 4);
      printf("indexer_q_quant %s T=%lld H=%lld D=%lld: %.1f us, %.0f GB/s, %.0f%% of copy\n",
             mx ? "mxfp4" : "fp8", (long long)T, (long long)H, (long long)D, best * 1e3,
             bytes / (best * 1e6), 100.0 * bytes / (best * 1e6) / copy_gbs);
    }
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--bench")) return bench();
  const char *golden = argc > 1 ? argv[1] : getenv("DSACL_GOLDEN_DIR");
  test_ref_facts();
  if (golden) test_goldens(golden);
  dsa_test_open(&ctx, &q, 0);
  test_random();
  test_sweep();
  test_bad_args();
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
