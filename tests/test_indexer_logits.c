/* Indexer MQA logits (dsa_indexer_logits, dsa_indexer_paged_logits and their MXFP4
 * forms) against the fp64 reference in tests/ref on randomized shapes and
 * strides, edge cases (empty / full / inverted ranges, zero context, NaN
 * codes, zero heads, negative weights, saturated values), data-dependent
 * faults and host-side argument validation.
 *
 * Tolerance (SPEC.md): max|got - ref| / max|ref| <= 1e-5 over the finite
 * entries of one call, -inf exactly where the reference has it; bf16 output
 * additionally allows the final rounding (2^-8 relative). Every device buffer
 * is a guarded_buf with random bytes in its payload: columns a call must not
 * write (outside the range with clean = 0, padding of strided rows) must keep
 * their bytes, and the guard bands catch writes outside the payload. */
#include <math.h>
#include <stdarg.h>

#include "common.h"
#include "ref_indexer_logits.h"

static dsa_context *ctx;
static dsa_queue *q;
static uint64_t rng = 0x10617510ABCDull;

#define TOL 1e-5

static int64_t rnd(int64_t n) { return n > 0 ? (int64_t)(dsa_test_rand(&rng) % (uint64_t)n) : 0; }




/* ---- value generators ------------------------------------------------------ */

/* e4m3 bytes of one family: 0 any byte (NaN codes included), 1 moderate
 * magnitudes, 2 saturated (+-448 and NaN codes), 3 zeros (and -0), 4
 * subnormals (at most 7 x 2^-9: keys that take the huge scales below). */
static uint8_t e4m3_byte(int kind) {
  switch (kind) {
    case 0: return (uint8_t)rnd(256);
    case 2: return (uint8_t)((rnd(2) ? 0x80 : 0) | (rnd(4) ? 0x7E : 0x7F));
    case 3: return (uint8_t)(rnd(2) ? 0x80 : 0);
    case 4: return (uint8_t)((rnd(2) ? 0x80 : 0) | rnd(8));
    default: return (uint8_t)((rnd(2) ? 0x80 : 0) | (0x20 + rnd(0x30)));
  }
}

static void fill_e4m3(uint8_t *p, int64_t n, int kind) {
  for (int64_t i = 0; i < n; i++) p[i] = e4m3_byte(kind);
}

static float pow2f(int e) { return ldexpf(1.0f, e); }

/* A key's f32 scale: 2^-6 .. 2^5, or for huge keys 2^111 .. 2^117 (the
 * quantizer's amax / 448 reaches 2^119.2), where the logits of subnormal
 * keys and moderate queries stay finite: the keys kernel once folded 2^16
 * into the scale, which overflowed from 2^112 on. */
static float key_scale(int huge) { return huge ? pow2f(111 + (int)rnd(7)) : pow2f((int)rnd(12) - 6); }
/* A foreign cache's scales (SPEC-reference §6.1 asks k_scale > 0; the
 * formula, scale before ReLU, still defines the others): zero, negative,
 * NaN, subnormal, the least scale whose 2^8 multiple is normal, not a
 * power of two, and sane ones, so a kernel that takes the scale after
 * its head sum meets every case it must leave to the per-product form. */
static float key_scale_foreign(void) {
  switch (rnd(8)) {
    case 0: return 0.0f;
    case 1: return -pow2f((int)rnd(12) - 6);
    case 2: return NAN;
    case 3: return 1e-40f;
    case 4: return pow2f(-134);
    case 5: return (float)(0.3 + dsa_test_uniform(&rng));
    default: return key_scale(0);
  }
}
/* By family: 4 huge, 5 foreign, else sane. */
static float key_scale_kind(int kind) {
  return kind == 5 ? key_scale_foreign() : key_scale(kind == 4);
}

/* ue8m0 scale bytes in a sane range (the quantizers write 1..253). */
static uint8_t ue8m0_byte(void) { return (uint8_t)(110 + rnd(30)); }

static void fill_weights(float *w, int64_t n, int kind) {
  for (int64_t i = 0; i < n; i++) {
    double v = (dsa_test_uniform(&rng) - (kind == 1 ? 0.5 : 0.3)) * 2;
    w[i] = kind == 2 ? 0.0f : (float)v;
  }
}

/* ---- strided packing ------------------------------------------------------ */

/* Copies dense src (shape, esz-byte elements) into a new buffer laid out with
 * strides st (elements) after `off` junk elements; junk everywhere else.
 * Returns the buffer, its size in *bytes. */
static uint8_t *pack(const void *src, int nd, const int64_t *shape, const int64_t *st, size_t esz,
                     size_t off, size_t *bytes) {
  int64_t last = 0, count = 1;
  for (int i = 0; i < nd; i++) {
    count *= shape[i];
    last += (shape[i] > 0 ? shape[i] - 1 : 0) * st[i];
  }
  size_t n = count ? (off + (size_t)last + 1) * esz : off * esz + esz;
  uint8_t *b = dsa_test_xmalloc(n);
  dsa_test_fill_random(&rng, b, n);
  const uint8_t *s = src;
  int64_t idx[4] = {0, 0, 0, 0};
  for (int64_t e = 0; e < count; e++) {
    int64_t o = 0;
    for (int i = 0; i < nd; i++) o += idx[i] * st[i];
    memcpy(b + (off + (size_t)o) * esz, s + (size_t)e * esz, esz);
    for (int i = nd - 1; i >= 0; i--) {
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
    }
  }
  *bytes = n;
  return b;
}

/* Strides for a shape: dense, or each outer dimension padded a little
 * (padded = 2: odd paddings too); the last dimension has unit stride unless
 * unit_inner is 0 and the tensor is padded. */
static void pick_strides(int nd, const int64_t *shape, int padded, int unit_inner, int64_t *st) {
  for (int i = nd - 1; i >= 0; i--) {
    if (i == nd - 1) {
      st[i] = padded && !unit_inner ? 1 + rnd(2) : 1;
      continue;
    }
    int64_t inner = st[i + 1] * (shape[i + 1] > 0 ? shape[i + 1] : 1);
    st[i] = inner + (padded ? rnd(3) * 16 + (padded == 2 ? rnd(2) : 0) : 0);
  }
}

/* A device tensor holding dense host data with chosen strides. */
typedef struct dev_t_ {
  guarded_buf gb;
  dsa_tensor t;
} dev_t_;

static dev_t_ dev(const void *src, dsa_dtype dt, int nd, const int64_t *shape, int padded,
                  int unit_inner) {
  int64_t st[4];
  pick_strides(nd, shape, padded, unit_inner, st);
  size_t esz = dsa_dtype_size(dt), bytes;
  size_t off = padded ? (size_t)rnd(3) * (esz == 1 ? 16 : 1) + (padded > 1 ? 1 : 0) : 0;
  uint8_t *b = pack(src, nd, shape, st, esz, off, &bytes);
  dev_t_ d;
  d.gb = gbuf_create(ctx, q, bytes, b);
  free(b);
  memset(&d.t, 0, sizeof d.t);
  d.t.mem = d.gb.mem;
  d.t.offset = d.gb.off + off * esz;
  d.t.dtype = dt;
  d.t.ndim = nd;
  for (int i = 0; i < nd; i++) d.t.shape[i] = shape[i], d.t.stride[i] = st[i];
  return d;
}

static void dev_free(dev_t_ *d) { gbuf_release(&d->gb); }

/* ---- logits output ------------------------------------------------------------ */

typedef struct out_buf {
  guarded_buf gb;
  uint8_t *init; /* payload before the call */
  size_t size;
  dsa_tensor t;
  int64_t rows, cols, rs; /* row stride in elements */
  size_t off;             /* element offset of [0,0] in the payload */
} out_buf;

static out_buf out_make(int64_t rows, int64_t cols, int bf16, int padded) {
  out_buf o;
  size_t esz = bf16 ? 2 : 4;
  o.rows = rows, o.cols = cols;
  o.rs = cols + (padded ? rnd(5) : 0);
  o.off = padded ? (size_t)rnd(4) : 0;
  o.size = (o.off + (size_t)(rows * o.rs) + 1) * esz;
  o.init = dsa_test_xmalloc(o.size);
  dsa_test_fill_random(&rng, o.init, o.size);
  o.gb = gbuf_create(ctx, q, o.size, o.init);
  o.t = (dsa_tensor){.mem = o.gb.mem, .offset = o.gb.off + o.off * esz,
                     .dtype = bf16 ? DSA_BF16 : DSA_F32, .ndim = 2, .shape = {rows, cols},
                     .stride = {o.rs, 1}};
  return o;
}

static void out_free(out_buf *o) {
  gbuf_release(&o->gb);
  free(o->init);
}

static double bf16_val(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Compares the call's output with ref ([rows, cols] in the reference's
 * convention) and every other payload byte with its initial value. */
static void out_check(out_buf *o, const double *ref, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void out_check(out_buf *o, const double *ref, const char *fmt, ...) {
  char what[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  const int bf16 = o->t.dtype == DSA_BF16;
  const size_t esz = bf16 ? 2 : 4;
  uint8_t *got = dsa_test_xmalloc(o->size), *cell = dsa_test_xmalloc(o->size);
  gbuf_read(q, &o->gb, got);
  memset(cell, 0, o->size);
  double maxref = 0, maxd = 0, bf_excess = 0;
  long bad_pattern = 0, bad_untouched = 0, first_r = -1, first_c = -1;
  for (int64_t r = 0; r < o->rows; r++)
    for (int64_t c = 0; c < o->cols; c++) {
      double v = ref[r * o->cols + c];
      if (isfinite(v) && fabs(v) > maxref) maxref = fabs(v);
    }
  for (int64_t r = 0; r < o->rows; r++)
    for (int64_t c = 0; c < o->cols; c++) {
      size_t at = (o->off + (size_t)(r * o->rs + c)) * esz;
      memset(cell + at, 1, esz);
      double v = ref[r * o->cols + c], g;
      if (bf16) {
        uint16_t h;
        memcpy(&h, got + at, 2);
        g = bf16_val(h);
      } else {
        float f;
        memcpy(&f, got + at, 4);
        g = f;
      }
      int bad = 0;
      if (isnan(v))
        bad = memcmp(got + at, o->init + at, esz) != 0, bad_untouched += bad;
      else if (isinf(v))
        bad = !(isinf(g) && g < 0 && v < 0), bad_pattern += bad;
      else if (!isfinite(g))
        bad = 1, bad_pattern++;
      else {
        double d = fabs(g - v);
        if (bf16) {
          double ex = d - fabs(v) * 0x1p-8;
          if (ex > bf_excess) bf_excess = ex;
        } else if (d > maxd) {
          maxd = d;
        }
      }
      if (bad && first_r < 0) first_r = (long)r, first_c = (long)c;
    }
  CHECK(bad_pattern == 0 && bad_untouched == 0,
        "%s: %ld entries with the wrong -inf/finite pattern, %ld untouched entries written "
        "(first at [%ld, %ld])",
        what, bad_pattern, bad_untouched, first_r, first_c);
  double lim = TOL * (maxref > 0 ? maxref : 1);
  CHECK(maxd <= lim && bf_excess <= lim, "%s: max|d| %.4g (bf16 excess %.4g), max|ref| %.4g",
        what, maxd, bf_excess, maxref);
  size_t other = 0;
  for (size_t i = 0; i < o->size; i++)
    if (!cell[i] && got[i] != o->init[i]) other++;
  CHECK(other == 0, "%s: %zu bytes outside the logits cells changed", what, other);
  CHECK(gbuf_guards_ok(q, &o->gb), "%s: guard band overwritten", what);
  free(got), free(cell);
}

/* ---- ragged prefill ----------------------------------------------------------- */

typedef struct rag_case {
  int fp4;
  int64_t m, h, d, n;
  int clean, bf16, padded;
  int qkind, kkind, wkind; /* kkind 4: subnormal keys with huge scales; 5: foreign scales */
  int ranges; /* 0 random, 1 full, 2 empty (ks = ke), 3 inverted, 4 out of bounds (faults) */
} rag_case;

static void run_ragged(const rag_case *tc) {
  const int64_t m = tc->m, h = tc->h, d = tc->d, n = tc->n;
  const int fp4 = tc->fp4;
  const int64_t qrow = fp4 ? d / 2 : d;
  uint8_t *qv = dsa_test_xmalloc((size_t)(m * h * qrow)), *qs = dsa_test_xmalloc((size_t)(m * h * (d / 32)));
  uint8_t *kv = dsa_test_xmalloc((size_t)(n * qrow)), *kss = dsa_test_xmalloc((size_t)(n * (d / 32)));
  float *ksc = dsa_test_xmalloc((size_t)n * 4), *w = dsa_test_xmalloc((size_t)(m * h) * 4);
  int32_t *ks = dsa_test_xmalloc((size_t)m * 4), *ke = dsa_test_xmalloc((size_t)m * 4);
  for (int64_t i = 0; i < m * h * (d / 32); i++) qs[i] = ue8m0_byte();
  for (int64_t i = 0; i < n * (d / 32); i++) kss[i] = ue8m0_byte();
  if (fp4) {
    dsa_test_fill_random(&rng, qv, (size_t)(m * h * qrow));
    dsa_test_fill_random(&rng, kv, (size_t)(n * qrow));
  } else {
    fill_e4m3(qv, m * h * d, tc->qkind);
    fill_e4m3(kv, n * d, tc->kkind);
    for (int64_t i = 0; i < n; i++) ksc[i] = key_scale_kind(tc->kkind);
  }
  /* Some heads all zero. */
  for (int64_t r = 0; r < m; r++)
    if (h > 1 && rnd(3) == 0) memset(qv + (r * h + rnd(h)) * qrow, 0, (size_t)qrow);
  fill_weights(w, m * h, tc->wkind);
  for (int64_t r = 0; r < m; r++) {
    int64_t a = rnd(n + 1), b = rnd(n + 1);
    if (a > b) { int64_t t = a; a = b; b = t; }
    switch (tc->ranges) {
      case 1: a = 0, b = n; break;
      case 2: b = a; break;
      case 3: { int64_t t = a; a = b; b = t; } break;
      case 4: if (rnd(2)) a = -1 - rnd(5); else b = n + 1 + rnd(5); break;
      default: if (rnd(6) == 0) a = 0, b = n; else if (rnd(6) == 0) b = a; break;
    }
    ks[r] = (int32_t)a, ke[r] = (int32_t)b;
  }

  dev_t_ dq = dev(qv, fp4 ? DSA_E2M1X2 : DSA_E4M3, 3, (int64_t[]){m, h, qrow}, tc->padded, 1);
  dev_t_ dqs = dev(qs, DSA_UE8M0, 3, (int64_t[]){m, h, d / 32}, tc->padded, 0);
  dev_t_ dk = dev(kv, fp4 ? DSA_E2M1X2 : DSA_E4M3, 2, (int64_t[]){n, qrow}, tc->padded, 1);
  dev_t_ dks = fp4 ? dev(kss, DSA_UE8M0, 2, (int64_t[]){n, d / 32}, tc->padded, 0)
                   : dev(ksc, DSA_F32, 1, (int64_t[]){n}, tc->padded, 0);
  dev_t_ dw = dev(w, DSA_F32, 2, (int64_t[]){m, h}, tc->padded, 0);
  dev_t_ dks0 = dev(ks, DSA_I32, 1, (int64_t[]){m}, tc->padded, 0);
  dev_t_ dke = dev(ke, DSA_I32, 1, (int64_t[]){m}, tc->padded, 0);
  out_buf o = out_make(m, n, tc->bf16, tc->padded);
  dsa_indexer_logits_params p;
  dsa_indexer_logits_params_default(&p);
  p.clean = tc->clean;
  if (fp4)
    CHECK_OK(dsa_indexer_logits(q, &dq.t, &dqs.t, &dk.t, &dks.t, &dw.t, &dks0.t, &dke.t, &o.t,
                                  &p, NULL));
  else
    CHECK_OK(dsa_indexer_logits(q, &dq.t, NULL, &dk.t, &dks.t, &dw.t, &dks0.t, &dke.t, &o.t, &p, NULL));
  uint32_t f = dsa_test_read_faults(q);
  double *ref = dsa_test_xmalloc((size_t)(m * n) * sizeof *ref);
  unsigned want_f = ref_mqa_logits(fp4, m, h, d, n, qv, qs, kv, fp4 ? (const void *)kss : ksc, w,
                                   ks, ke, tc->clean, ref);
  out_check(&o, ref, "%s m=%lld h=%lld d=%lld n=%lld clean=%d bf16=%d padded=%d kinds=%d%d%d "
                     "ranges=%d",
            fp4 ? "mqa_logits_mxfp4" : "mqa_logits", (long long)m, (long long)h, (long long)d,
            (long long)n, tc->clean, tc->bf16, tc->padded, tc->qkind, tc->kkind, tc->wkind,
            tc->ranges);
  CHECK(f == want_f, "ragged faults 0x%x, want 0x%x (m=%lld n=%lld ranges=%d)", f, want_f,
        (long long)m, (long long)n, tc->ranges);
  CHECK(gbuf_guards_ok(q, &dq.gb) && gbuf_guards_ok(q, &dk.gb) && gbuf_guards_ok(q, &dw.gb),
        "ragged: input guard band overwritten");
  free(ref), free(qv), free(qs), free(kv), free(kss), free(ksc), free(w), free(ks), free(ke);
  dev_free(&dq), dev_free(&dqs), dev_free(&dk), dev_free(&dks), dev_free(&dw);
  dev_free(&dks0), dev_free(&dke);
  out_free(&o);
}

static void test_ragged(void) {
  static const int64_t hs[] = {1, 8, 16, 64, 128};
  const rag_case fixed[] = {
      /* fp4 m h d n clean bf16 padded q k w ranges */
      {0, 1, 1, 128, 1, 1, 0, 0, 1, 1, 0, 1},     {0, 7, 64, 128, 300, 1, 0, 1, 1, 1, 0, 0},
      {0, 5, 128, 128, 130, 0, 0, 1, 0, 0, 1, 0}, {0, 3, 16, 32, 257, 1, 1, 1, 1, 1, 0, 0},
      {0, 4, 8, 96, 77, 0, 1, 2, 1, 1, 1, 0},     {0, 3, 17, 64, 65, 1, 0, 1, 2, 2, 0, 1},
      {0, 3, 64, 128, 100, 1, 0, 0, 3, 1, 0, 1},  {0, 3, 64, 128, 100, 1, 0, 0, 1, 1, 2, 1},
      {0, 5, 33, 128, 90, 1, 0, 1, 1, 1, 0, 2},   {0, 5, 33, 128, 90, 0, 0, 1, 1, 1, 0, 3},
      {0, 6, 8, 64, 70, 1, 0, 1, 1, 1, 0, 4},     {0, 6, 64, 64, 70, 0, 0, 2, 1, 1, 0, 4},
      {0, 0, 8, 128, 50, 1, 0, 0, 1, 1, 0, 0},    {0, 3, 8, 128, 0, 1, 0, 0, 1, 1, 0, 0},
      {1, 3, 64, 128, 150, 1, 0, 1, 0, 0, 1, 0},  {1, 5, 8, 64, 300, 0, 0, 2, 0, 0, 0, 0},
      {1, 2, 1, 32, 40, 1, 1, 0, 0, 0, 1, 1},     {1, 3, 128, 96, 66, 1, 0, 1, 0, 0, 0, 4},
      /* Several key tiles of every kernel (keys: 1024 keys a group) and
       * an odd row count (groups of several query rows, the last partial). */
      {0, 5, 64, 128, 2500, 1, 0, 0, 1, 1, 0, 0}, {0, 3, 64, 128, 2100, 0, 1, 1, 1, 1, 0, 1},
      /* Key scales 2^111 .. 2^117 (finite logits). */
      {0, 3, 64, 128, 1100, 1, 0, 0, 1, 4, 0, 0},
      /* Foreign key scales (zero, negative, NaN, subnormal, ...). */
      {0, 3, 64, 128, 1100, 1, 0, 0, 1, 5, 0, 0}, {0, 4, 8, 128, 300, 0, 0, 1, 1, 5, 1, 0},
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) run_ragged(&fixed[i]);
  /* Random combinations on top of the fixed cases (which hold each
   * format, layout and range kind): 8 in CI, 24 with DSACL_TEST_LARGE. */
  for (int it = 0; it < (dsa_test_large() ? 24 : 8); it++) {
    rag_case tc = {(int)(rnd(4) == 0), rnd(3) ? 1 + 2 * rnd(4) : rnd(3), hs[rnd(5)],
                   32 * (1 + rnd(4)), 1 + rnd(200), (int)rnd(2), (int)(rnd(4) == 0),
                   (int)rnd(3), (int)rnd(3), (int)rnd(3), (int)rnd(2), 0};
    run_ragged(&tc);
  }
}

/* ---- paged decode ------------------------------------------------------------ */

typedef struct paged_case {
  int fp4;
  int64_t b, next_n, h, w, nb;
  int32_t bs;
  int stride_kind; /* 0 page, 1 page + 4 (unaligned for 16-byte loads), 2 8640-like, 3 large */
  int rank, clean, bf16, padded;
  int ctx_kind; /* 0 random, 1 full table, 2 zeros, 3 lengths past the table (fault) */
  int bad_blocks;
  int64_t mml_extra; /* max_model_len = w * bs + mml_extra (may be negative) */
  int huge; /* 1: subnormal keys with scales 2^111 .. 2^117 (key_scale); 2: foreign scales */
} paged_case;

static void run_paged(const paged_case *tc) {
  const int fp4 = tc->fp4;
  const int64_t b = tc->b, nn = tc->next_n, h = tc->h, wd = tc->w, rows = b * nn;
  const int32_t bs = tc->bs;
  const int64_t tokb = fp4 ? 68 : 132, page = bs * tokb;
  int64_t stride = tc->stride_kind == 0   ? page
                   : tc->stride_kind == 1 ? page + 4
                   : tc->stride_kind == 2 ? (page + 575) / 576 * 576
                                          : page + 4096 + 16 * rnd(4);
  int64_t mml = wd * bs + tc->mml_extra;
  if (mml < 0) mml = 0;
  /* The cache: random value bytes; sane scales. */
  size_t coff = (size_t)rnd(2) * 16;
  size_t csize = coff + (size_t)(tc->nb * stride);
  uint8_t *img = dsa_test_xmalloc(csize);
  dsa_test_fill_random(&rng, img, csize);
  for (int64_t blk = 0; blk < tc->nb; blk++) {
    uint8_t *base = img + coff + blk * stride;
    for (int32_t t = 0; t < bs; t++) {
      if (fp4) {
        for (int qq = 0; qq < 4; qq++) base[bs * 64 + t * 4 + qq] = ue8m0_byte();
      } else {
        fill_e4m3(base + t * 128, 128, tc->huge == 1 ? 4 : rnd(8) == 0 ? 0 : 1);
        float s = key_scale_kind(tc->huge == 1 ? 4 : tc->huge == 2 ? 5 : 0);
        memcpy(base + bs * 128 + t * 4, &s, 4);
      }
    }
  }
  const int64_t qrow = fp4 ? 64 : 128;
  uint8_t *qv = dsa_test_xmalloc((size_t)(rows * h * qrow)), *qs = dsa_test_xmalloc((size_t)(rows * h * 4));
  if (fp4) {
    dsa_test_fill_random(&rng, qv, (size_t)(rows * h * qrow));
    for (int64_t i = 0; i < rows * h * 4; i++) qs[i] = ue8m0_byte();
  } else {
    fill_e4m3(qv, rows * h * 128, 1);
  }
  for (int64_t r = 0; r < rows; r++)
    if (h > 1 && rnd(3) == 0) memset(qv + (r * h + rnd(h)) * qrow, 0, (size_t)qrow);
  float *w = dsa_test_xmalloc((size_t)(rows * h) * 4);
  fill_weights(w, rows * h, (int)rnd(2));
  int32_t *cl = dsa_test_xmalloc((size_t)rows * 4);
  const int64_t nctx = tc->rank == 2 ? rows : b, cap = wd * bs < mml ? wd * bs : mml;
  for (int64_t i = 0; i < nctx; i++) {
    int64_t v;
    switch (tc->ctx_kind) {
      case 1: v = cap; break;
      case 2: v = 0; break;
      case 3: v = rnd(2) ? cap + 1 + rnd(100) : -1 - rnd(3); break;
      default: v = rnd(4) == 0 ? cap : rnd(cap + 1); break;
    }
    cl[i] = (int32_t)v;
  }
  /* Block tables: valid ids inside every row's range; junk (negative or huge)
   * beyond it, which must never be read; optional bad ids inside. */
  int32_t *bt = dsa_test_xmalloc((size_t)(b * wd + 1) * 4);
  for (int64_t s = 0; s < b; s++) {
    int64_t maxl = 0;
    for (int64_t i = 0; i < nn; i++) {
      int64_t v = tc->rank == 2 ? cl[s * nn + i] : cl[s];
      if (v > maxl) maxl = v;
    }
    for (int64_t j = 0; j < wd; j++) {
      int used = j * bs < maxl;
      bt[s * wd + j] = used ? (int32_t)rnd(tc->nb) : (int32_t)(rnd(2) ? -1 : 1000000 + rnd(100));
      if (used && tc->bad_blocks && rnd(3) == 0)
        bt[s * wd + j] = (int32_t)(rnd(2) ? -1 - rnd(3) : tc->nb + rnd(3));
    }
  }
  dev_t_ dq = dev(qv, fp4 ? DSA_E2M1X2 : DSA_E4M3, 4, (int64_t[]){b, nn, h, qrow}, tc->padded, 1);
  dev_t_ dqs = dev(qs, DSA_UE8M0, 4, (int64_t[]){b, nn, h, 4}, tc->padded, 0);
  dev_t_ dw = dev(w, DSA_F32, 2, (int64_t[]){rows, h}, tc->padded, 0);
  dev_t_ dcl = tc->rank == 2 ? dev(cl, DSA_I32, 2, (int64_t[]){b, nn}, tc->padded, 0)
                             : dev(cl, DSA_I32, 1, (int64_t[]){b}, tc->padded, 0);
  dev_t_ dbt = dev(bt, DSA_I32, 2, (int64_t[]){b, wd}, tc->padded, 0);
  guarded_buf cb = gbuf_create(ctx, q, csize, img);
  dsa_paged_cache pc = {.mem = cb.mem, .offset = cb.off + coff, .num_blocks = tc->nb,
                        .block_size = bs, .block_stride = stride,
                        .format = fp4 ? DSA_CACHE_INDEXER_MXFP4 : DSA_CACHE_INDEXER_FP8};
  out_buf o = out_make(rows, mml, tc->bf16, tc->padded);
  dsa_indexer_logits_params p;
  dsa_indexer_logits_params_default(&p);
  p.clean = tc->clean;
  /* Half the calls where the memory allows pass Q quant's [T, H, D] layout
   * (T = B * next_n; next_n then comes from the lengths or T / B). */
  dsa_tensor q3 = dq.t, qs3 = dqs.t;
  const int rank3 = dq.t.stride[0] == nn * dq.t.stride[1] &&
                    dqs.t.stride[0] == nn * dqs.t.stride[1] && rnd(2);
  if (rank3) {
    dsa_tensor *v[2] = {&q3, &qs3};
    for (int k = 0; k < 2; k++) {
      const dsa_tensor src = *v[k];
      v[k]->ndim = 3;
      v[k]->shape[0] = rows, v[k]->stride[0] = src.stride[1];
      for (int d = 1; d < 3; d++) v[k]->shape[d] = src.shape[d + 1], v[k]->stride[d] = src.stride[d + 1];
      v[k]->shape[3] = 0, v[k]->stride[3] = 0;
    }
  }
  if (fp4)
    CHECK_OK(dsa_indexer_paged_logits(q, &q3, &qs3, &dw.t, &dcl.t, &dbt.t, &pc, &o.t, &p, NULL));
  else
    CHECK_OK(dsa_indexer_paged_logits(q, &q3, NULL, &dw.t, &dcl.t, &dbt.t, &pc, &o.t, &p, NULL));
  uint32_t f = dsa_test_read_faults(q);
  double *ref = dsa_test_xmalloc((size_t)(rows * mml + 1) * sizeof *ref);
  ref_il_cache rc = {img + coff, tc->nb, bs, stride};
  unsigned want_f = ref_paged_mqa_logits(fp4, b, nn, h, qv, qs, &rc, w, cl, tc->rank, bt, wd, mml,
                                         tc->clean, ref);
  out_check(&o, ref,
            "%s b=%lld next_n=%lld h=%lld w=%lld nb=%lld bs=%d stride=%lld rank=%d clean=%d "
            "bf16=%d padded=%d ctx=%d bad=%d mml=%lld",
            fp4 ? "paged_mxfp4" : "paged", (long long)b, (long long)nn, (long long)h,
            (long long)wd, (long long)tc->nb, bs, (long long)stride, tc->rank, tc->clean,
            tc->bf16, tc->padded, tc->ctx_kind, tc->bad_blocks, (long long)mml);
  CHECK(f == want_f, "paged faults 0x%x, want 0x%x (ctx=%d bad=%d)", f, want_f, tc->ctx_kind,
        tc->bad_blocks);
  uint8_t *cback = dsa_test_xmalloc(csize);
  gbuf_read(q, &cb, cback);
  CHECK(!memcmp(cback, img, csize) && gbuf_guards_ok(q, &cb), "paged: cache modified");
  free(cback), free(ref), free(img), free(qv), free(qs), free(w), free(cl), free(bt);
  dev_free(&dq), dev_free(&dqs), dev_free(&dw), dev_free(&dcl), dev_free(&dbt);
  gbuf_release(&cb);
  out_free(&o);
}

static void test_paged(void) {
  const paged_case fixed[] = {
      /* fp4 b nn h w nb bs stride rank clean bf16 padded ctx bad mml+ */
      {0, 3, 2, 64, 5, 16, 64, 2, 1, 1, 0, 0, 0, 0, 0, 0},
      {0, 3, 2, 64, 5, 16, 64, 2, 2, 1, 0, 0, 0, 0, 0, 0},
      {0, 1, 1, 128, 3, 4, 64, 0, 1, 1, 0, 1, 1, 0, 0, 0},
      {0, 5, 3, 8, 4, 9, 17, 1, 2, 0, 0, 1, 0, 0, 7, 0},
      {0, 3, 4, 16, 6, 7, 3, 3, 1, 0, 1, 2, 0, 0, 5, 0},
      {0, 2, 1, 1, 3, 4, 1, 0, 2, 1, 0, 1, 0, 0, 0, 0},
      {0, 4, 2, 64, 3, 5, 16, 2, 1, 1, 0, 1, 2, 0, 3, 0},    /* context 0 everywhere */
      {0, 4, 2, 64, 3, 5, 16, 2, 2, 0, 0, 1, 2, 0, 3, 0},
      {0, 3, 2, 16, 3, 6, 16, 0, 1, 1, 0, 0, 3, 0, 9, 0},    /* lengths past the table */
      {0, 3, 2, 16, 4, 6, 16, 1, 2, 1, 0, 1, 1, 1, 0, 0},    /* bad block ids */
      {0, 3, 2, 16, 4, 6, 16, 1, 2, 0, 0, 1, 0, 1, 0, 0},
      {0, 2, 2, 64, 4, 6, 32, 0, 1, 1, 0, 1, 0, 0, -40, 0},  /* max_model_len < W * bs */
      {0, 0, 2, 64, 4, 6, 32, 0, 1, 1, 0, 0, 0, 0, 0, 0},    /* B = 0 */
      {0, 3, 1, 128, 2, 3, 64, 3, 2, 1, 1, 1, 1, 0, 0, 0},
      {1, 3, 2, 64, 5, 16, 64, 2, 1, 1, 0, 1, 0, 0, 0, 0},
      {1, 3, 3, 8, 4, 9, 17, 1, 2, 0, 0, 2, 0, 1, 2, 0},
      {1, 2, 1, 16, 3, 4, 5, 3, 1, 1, 1, 1, 3, 0, 0, 0},
      /* Contexts over several key groups (keys: 1024 keys a group) */
      {0, 2, 2, 64, 40, 48, 64, 0, 1, 1, 0, 0, 1, 0, 0, 0},
      {0, 3, 1, 32, 90, 100, 16, 1, 2, 1, 0, 1, 0, 1, 0, 0},
      {0, 2, 3, 64, 20, 24, 64, 2, 1, 0, 1, 0, 0, 0, -100, 0},
      /* Key scales 2^111 .. 2^117 (one and two tokens a sequence) */
      {0, 3, 1, 64, 18, 20, 64, 0, 1, 1, 0, 0, 1, 0, 0, 1},
      {0, 2, 2, 64, 18, 20, 64, 0, 1, 1, 0, 0, 1, 0, 0, 1},
      /* Foreign key scales (one and two tokens a sequence) */
      {0, 3, 1, 64, 18, 20, 64, 0, 1, 1, 0, 0, 1, 0, 0, 2},
      {0, 2, 2, 64, 18, 20, 64, 0, 1, 1, 0, 0, 1, 0, 0, 2},
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) run_paged(&fixed[i]);
  static const int64_t hs[] = {1, 8, 16, 64, 128};
  static const int32_t bss[] = {1, 2, 3, 16, 17, 64};
  /* Random combinations on top of the fixed cases (which hold each
   * format, layout and range kind): 8 in CI, 24 with DSACL_TEST_LARGE. */
  for (int it = 0; it < (dsa_test_large() ? 24 : 8); it++) {
    paged_case tc = {(int)(rnd(4) == 0), rnd(3) ? 1 + 2 * rnd(3) : 2, 1 + rnd(4), hs[rnd(5)],
                     1 + rnd(4), 1 + rnd(8), bss[rnd(6)], (int)rnd(4), 1 + (int)rnd(2),
                     (int)rnd(2), (int)(rnd(4) == 0), (int)rnd(3), rnd(3) ? 0 : 1,
                     (int)(rnd(5) == 0), rnd(2) * rnd(20), 0};
    run_paged(&tc);
  }
}

/* ---- every e4m3 code in every byte position ------------------------------------ */

/* The kernels decode a word's bytes in pairs by position (the portable
 * tile: bytes 0 and 2, then 1 and 3, each pair its own bit operations), so
 * each of the 256 codes must come out exactly in each of the 4 positions.
 * Operand e (of 1024) holds code e / 4 at dim 4 ((7 e) % 32) + e % 4 and
 * zeros elsewhere; its partner is 1.0 on every dim (head 1: -1.0); heads
 * past 1 are zero and weigh 0. A per-operand power of two (the key's
 * scale, or the row's weights) takes every nonzero value to [1, 2), so a
 * wrong mantissa bit of any code (subnormals included) is an error of at
 * least 1/16 of the largest logit, and a zero code that decodes to
 * anything else is one too. Keys carry the codes (ragged and paged), then
 * the query (ragged). */
static int code_dim(int e) { return 4 * ((7 * e) % 32) + (e & 3); }
static float code_pow2(uint8_t c) {
  const double v = fabs(ref_il_e4m3(c));
  return v == 0 ? 1.0f : pow2f(-(int)floor(log2(v)));
}

static void test_all_codes(void) {
  const int64_t n = 1024, h = 64, d = 128;
  /* Keys: ragged, then the same keys in a paged cache (16 blocks of 64). */
  uint8_t *kv = dsa_test_xmalloc((size_t)(n * d)), *qv = dsa_test_xmalloc((size_t)(n * h * d));
  float *ksc = dsa_test_xmalloc((size_t)n * 4), *w = dsa_test_xmalloc((size_t)(n * h) * 4);
  memset(kv, 0, (size_t)(n * d));
  for (int e = 0; e < n; e++) {
    kv[e * d + code_dim(e)] = (uint8_t)(e >> 2);
    ksc[e] = code_pow2((uint8_t)(e >> 2));
  }
  memset(qv, 0, (size_t)(h * d));
  memset(qv, 0x38, (size_t)d);         /* head 0: 1.0 */
  memset(qv + d, 0xB8, (size_t)d);     /* head 1: -1.0 */
  memset(w, 0, (size_t)h * 4);
  w[0] = 1.0f, w[1] = -2.0f;
  {
    int32_t ks = 0, ke = (int32_t)n;
    dev_t_ dq = dev(qv, DSA_E4M3, 3, (int64_t[]){1, h, d}, 0, 1);
    dev_t_ dk = dev(kv, DSA_E4M3, 2, (int64_t[]){n, d}, 0, 1);
    dev_t_ dks = dev(ksc, DSA_F32, 1, (int64_t[]){n}, 0, 0);
    dev_t_ dw = dev(w, DSA_F32, 2, (int64_t[]){1, h}, 0, 0);
    dev_t_ da = dev(&ks, DSA_I32, 1, (int64_t[]){1}, 0, 0);
    dev_t_ db = dev(&ke, DSA_I32, 1, (int64_t[]){1}, 0, 0);
    out_buf o = out_make(1, n, 0, 0);
    dsa_indexer_logits_params p;
    dsa_indexer_logits_params_default(&p);
    CHECK_OK(dsa_indexer_logits(q, &dq.t, NULL, &dk.t, &dks.t, &dw.t, &da.t, &db.t, &o.t, &p,
                                NULL));
    double *ref = dsa_test_xmalloc((size_t)n * sizeof *ref);
    ref_mqa_logits(0, 1, h, d, n, qv, NULL, kv, ksc, w, &ks, &ke, 1, ref);
    out_check(&o, ref, "all e4m3 codes as keys (ragged)");
    free(ref);
    dev_free(&dq), dev_free(&dk), dev_free(&dks), dev_free(&dw), dev_free(&da), dev_free(&db);
    out_free(&o);
  }
  {
    const int32_t bs = 64;
    const int64_t nb = n / bs, stride = bs * 132;
    uint8_t *img = dsa_test_xmalloc((size_t)(nb * stride));
    int32_t *bt = dsa_test_xmalloc((size_t)nb * 4), cl = (int32_t)n;
    for (int64_t j = 0; j < nb; j++) {
      const int64_t blk = (j * 5) % nb; /* 5 is prime to 16: a permutation */
      bt[j] = (int32_t)blk;
      for (int32_t t = 0; t < bs; t++) {
        memcpy(img + blk * stride + t * 128, kv + (j * bs + t) * d, 128);
        memcpy(img + blk * stride + bs * 128 + t * 4, &ksc[j * bs + t], 4);
      }
    }
    dev_t_ dq = dev(qv, DSA_E4M3, 4, (int64_t[]){1, 1, h, d}, 0, 1);
    dev_t_ dw = dev(w, DSA_F32, 2, (int64_t[]){1, h}, 0, 0);
    dev_t_ dcl = dev(&cl, DSA_I32, 1, (int64_t[]){1}, 0, 0);
    dev_t_ dbt = dev(bt, DSA_I32, 2, (int64_t[]){1, nb}, 0, 0);
    guarded_buf cb = gbuf_create(ctx, q, (size_t)(nb * stride), img);
    dsa_paged_cache pc = {.mem = cb.mem, .offset = cb.off, .num_blocks = nb, .block_size = bs,
                          .block_stride = stride, .format = DSA_CACHE_INDEXER_FP8};
    out_buf o = out_make(1, n, 0, 0);
    dsa_indexer_logits_params p;
    dsa_indexer_logits_params_default(&p);
    CHECK_OK(dsa_indexer_paged_logits(q, &dq.t, NULL, &dw.t, &dcl.t, &dbt.t, &pc, &o.t, &p, NULL));
    double *ref = dsa_test_xmalloc((size_t)n * sizeof *ref);
    ref_il_cache rc = {img, nb, bs, stride};
    ref_paged_mqa_logits(0, 1, 1, h, qv, NULL, &rc, w, &cl, 1, bt, nb, n, 1, ref);
    out_check(&o, ref, "all e4m3 codes as keys (paged)");
    free(ref), free(img), free(bt);
    dev_free(&dq), dev_free(&dw), dev_free(&dcl), dev_free(&dbt);
    gbuf_release(&cb);
    out_free(&o);
  }
  /* The query: row e's head 0 holds code e / 4 (head 1 its negation) at
   * code_dim(e); one key of 1.0 on every dim; the row's weights scale. */
  {
    memset(qv, 0, (size_t)(n * h * d));
    for (int e = 0; e < n; e++) {
      const uint8_t c = (uint8_t)(e >> 2);
      qv[(e * h + 0) * d + code_dim(e)] = c;
      qv[(e * h + 1) * d + code_dim(e)] = (uint8_t)(c ^ 0x80);
      for (int64_t k = 0; k < h; k++) w[e * h + k] = 0.0f;
      w[e * h + 0] = code_pow2(c), w[e * h + 1] = -2.0f * code_pow2(c);
    }
    memset(kv, 0x38, (size_t)d);
    float one = 1.0f;
    int32_t *ks = dsa_test_xmalloc((size_t)n * 4), *ke = dsa_test_xmalloc((size_t)n * 4);
    for (int e = 0; e < n; e++) ks[e] = 0, ke[e] = 1;
    dev_t_ dq = dev(qv, DSA_E4M3, 3, (int64_t[]){n, h, d}, 0, 1);
    dev_t_ dk = dev(kv, DSA_E4M3, 2, (int64_t[]){1, d}, 0, 1);
    dev_t_ dks = dev(&one, DSA_F32, 1, (int64_t[]){1}, 0, 0);
    dev_t_ dw = dev(w, DSA_F32, 2, (int64_t[]){n, h}, 0, 0);
    dev_t_ da = dev(ks, DSA_I32, 1, (int64_t[]){n}, 0, 0);
    dev_t_ db = dev(ke, DSA_I32, 1, (int64_t[]){n}, 0, 0);
    out_buf o = out_make(n, 1, 0, 0);
    dsa_indexer_logits_params p;
    dsa_indexer_logits_params_default(&p);
    CHECK_OK(dsa_indexer_logits(q, &dq.t, NULL, &dk.t, &dks.t, &dw.t, &da.t, &db.t, &o.t, &p,
                                NULL));
    double *ref = dsa_test_xmalloc((size_t)n * sizeof *ref);
    ref_mqa_logits(0, n, h, d, 1, qv, NULL, kv, &one, w, ks, ke, 1, ref);
    out_check(&o, ref, "all e4m3 codes in the query (ragged)");
    free(ref), free(ks), free(ke);
    dev_free(&dq), dev_free(&dk), dev_free(&dks), dev_free(&dw), dev_free(&da), dev_free(&db);
    out_free(&o);
  }
  free(kv), free(qv), free(ksc), free(w);
}

/* ---- argument validation ------------------------------------------------------ */

/* A valid call's arguments; each case breaks one thing. t[] per operator:
 *   ragged: 0 query, 1 query_scale, 2 k, 3 k_scale, 4 weights, 5 ks, 6 ke, 7 logits
 *   paged:  0 query, 1 query_scale, 2 weights, 3 context_lens, 4 block_tables, 7 logits */
typedef struct args {
  dsa_queue *q;
  dsa_tensor t[8];
  dsa_tensor *pt[8];
  dsa_paged_cache cache;
  dsa_paged_cache *pcache;
  dsa_indexer_logits_params p;
  dsa_indexer_logits_params *pp;
  dsa_events ev;
  dsa_events *pev;
  int fp4;
} args;

static void args_point(void *vx) {
  args *x = vx;
  for (int i = 0; i < 8; i++) x->pt[i] = &x->t[i];
  x->pcache = x->pcache ? &x->cache : NULL; /* NULL in the ragged form */
  x->pp = &x->p;
  x->pev = &x->ev;
}

static dsa_status call_ragged(void *vx, cl_event *done) {
  args *x = vx;
  x->ev.done = done;
  if (x->fp4)
    return dsa_indexer_logits(x->q, x->pt[0], x->pt[1], x->pt[2], x->pt[3], x->pt[4], x->pt[5],
                                x->pt[6], x->pt[7], x->pp, x->pev);
  return dsa_indexer_logits(x->q, x->pt[0], NULL, x->pt[2], x->pt[3], x->pt[4], x->pt[5],
                        x->pt[6], x->pt[7], x->pp, x->pev);
}

static dsa_status call_paged(void *vx, cl_event *done) {
  args *x = vx;
  x->ev.done = done;
  if (x->fp4)
    return dsa_indexer_paged_logits(x->q, x->pt[0], x->pt[1], x->pt[2], x->pt[3], x->pt[4],
                                      x->pcache, x->pt[7], x->pp, x->pev);
  return dsa_indexer_paged_logits(x->q, x->pt[0], NULL, x->pt[2], x->pt[3], x->pt[4], x->pcache,
                              x->pt[7], x->pp, x->pev);
}

/* Shared cases: queue, events, params, query, logits. */
static int break_common(void *vx, int c, const char **w1, const char **w2) {
  args *x = vx;
  switch (c) {
    case 0: x->q = NULL, *w1 = "q"; return 1;
    case 1: x->ev.num_wait = 2, x->ev.wait = NULL, *w1 = "ev"; return 1;
    case 2: x->p.clean = 2, *w1 = "clean"; return 1;
    case 3: x->pt[0] = NULL, *w1 = "query"; return 1;
    case 4: x->t[0].dtype = DSA_BF16, *w1 = "query"; return 1;
    case 5: x->t[0].ndim -= 1, *w1 = "query"; return 1;
    case 6: x->t[0].stride[x->t[0].ndim - 1] = 2, *w1 = "query"; return 1;
    case 7: x->t[0].offset += 1 << 20, *w1 = "query"; return 1;
    case 8: x->t[0].mem = NULL, *w1 = "query"; return 1;
    case 9: x->pt[7] = NULL, *w1 = "logits"; return 1;
    case 10: x->t[7].dtype = DSA_I32, *w1 = "logits"; return 1;
    case 11: x->t[7].shape[0] += 1, *w1 = "logits"; return 1;
    case 12: x->t[7].stride[1] = 2, *w1 = "logits"; return 1;
    case 13: x->t[7].stride[0] *= 64, *w1 = "logits"; return 1; /* past its buffer */
    case 14: x->t[7].ndim = 3, x->t[7].shape[2] = 1, x->t[7].stride[2] = 1, *w1 = "logits"; return 1;
    case 15: x->t[4].dtype = DSA_BF16, *w1 = x->pcache ? "block_tables" : "weights"; return 1;
    case 16:
      if (x->fp4)
        x->pt[1] = NULL, *w1 = "query_scale";
      else
        x->t[0].dtype = DSA_F32, *w1 = "query";
      return 1;
    case 17:
      if (!x->fp4) { x->t[0].dtype = DSA_E2M1X2, *w1 = "query"; return 1; }
      x->t[1].shape[x->t[1].ndim - 1] += 1, *w1 = "query_scale";
      return 1;
    default: (void)w2; return 0;
  }
}

static int break_ragged(void *vx, int c, const char **w1, const char **w2) {
  args *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->t[0].shape[2] = x->fp4 ? 24 : 48, *w1 = "query"; return 1; /* D % 32 */
    case 1: x->t[0].shape[1] = 0, x->t[4].shape[1] = 0, *w1 = "query"; return 1; /* H = 0 */
    case 2: x->pt[2] = NULL, *w1 = "k"; return 1;
    case 3: x->t[2].shape[1] *= 2, *w1 = "k"; return 1;
    case 4: x->t[2].dtype = DSA_F32, *w1 = "k"; return 1;
    case 5: x->pt[3] = NULL, *w1 = "k_scale"; return 1;
    case 6: x->t[3].shape[0] += 1, *w1 = "k_scale"; return 1;
    case 7: x->t[3].dtype = DSA_I32, *w1 = "k_scale"; return 1;
    case 8: x->pt[4] = NULL, *w1 = "weights"; return 1;
    case 9: x->t[4].shape[1] += 1, *w1 = "weights"; return 1;
    case 10: x->pt[5] = NULL, *w1 = "ks"; return 1;
    case 11: x->t[5].dtype = DSA_I64, *w1 = "ks"; return 1;
    case 12: x->t[6].shape[0] -= 1, *w1 = "ke"; return 1;
    case 13: x->t[6].offset += 1 << 20, *w1 = "ke"; return 1;
    case 14: x->t[7].shape[1] += 1, *w1 = "logits"; return 1; /* columns != N */
    case 15: x->t[2].stride[0] = -1, *w1 = "k"; return 1;
    default: return 0;
  }
}

static int break_paged(void *vx, int c, const char **w1, const char **w2) {
  args *x = vx;
  switch (c) {
    case 0: x->t[0].shape[3] /= 2, *w1 = "query"; return 1; /* D != 128 */
    case 1: x->t[0].shape[1] = 0, *w1 = "query", *w2 = "next_n"; return 1;
    case 2: x->pcache = NULL, *w1 = "cache"; return 1;
    case 3: x->cache.format = x->fp4 ? DSA_CACHE_INDEXER_FP8 : DSA_CACHE_MLA_FP8, *w1 = "cache",
            *w2 = "format"; return 1;
    case 4: x->cache.block_stride = x->cache.block_size * (x->fp4 ? 68 : 132) - 1, *w1 = "cache",
            *w2 = "block_stride"; return 1;
    case 5: x->cache.block_size = 0, *w1 = "cache", *w2 = "block_size"; return 1;
    case 6: x->cache.num_blocks += 1, *w1 = "cache"; return 1; /* past the buffer */
    case 7: x->cache.mem = NULL, *w1 = "cache"; return 1;
    case 8: x->pt[2] = NULL, *w1 = "weights"; return 1;
    case 9: x->t[2].shape[0] -= 1, *w1 = "weights"; return 1;
    case 10: x->pt[3] = NULL, *w1 = "context_lens"; return 1;
    case 11: x->t[3].dtype = DSA_I64, *w1 = "context_lens"; return 1;
    case 12: x->t[3].ndim = 3, x->t[3].shape[2] = 1, x->t[3].stride[2] = 1, *w1 = "context_lens";
             return 1;
    case 13: x->t[3].shape[0] += 1, *w1 = "context_lens"; return 1;
    case 14: x->pt[4] = NULL, *w1 = "block_tables"; return 1;
    case 15: x->t[4].shape[0] -= 1, *w1 = "block_tables"; return 1;
    case 16: x->t[4].ndim = 1, *w1 = "block_tables"; return 1;
    case 17: x->t[7].shape[0] -= 1, *w1 = "logits"; return 1; /* rows != B * next_n */
    default: return 0;
  }
}

/* Every broken variant of the valid call `base` fails cleanly (see
 * dsa_test_run_bad); the cases shared by all operators come first. */
static void run_bad(const char *op, const args *base, dsa_status (*call)(void *, cl_event *),
                    int (*brk)(void *, int, const char **, const char **),
                    const guarded_buf *out) {
  dsa_bad_args spec = {.op = op, .base = base, .size = sizeof *base, .reset = args_point,
                       .common = break_common, .brk = brk, .call = call,
                       .outs = (const guarded_buf *const[]){out}, .nouts = 1, .min_cases = 30};
  dsa_test_run_bad(q, &spec);
  dsa_test_read_faults(q);
}

static void test_bad_args(void) {
  for (int fp4 = 0; fp4 < 2; fp4++) {
    /* ragged: M = 3, H = 4, D = 64, N = 10 */
    const int64_t m = 3, h = 4, d = 64, n = 10, qr = fp4 ? d / 2 : d;
    uint8_t qv[3 * 4 * 64], qs[3 * 4 * 2], kv[10 * 64], kss[10 * 2];
    float ksc[10], w[3 * 4];
    int32_t ks[3] = {0, 2, 5}, ke[3] = {10, 7, 6};
    fill_e4m3(qv, (int64_t)sizeof qv, 1);
    fill_e4m3(kv, (int64_t)sizeof kv, 1);
    for (size_t i = 0; i < sizeof qs; i++) qs[i] = ue8m0_byte();
    for (size_t i = 0; i < sizeof kss; i++) kss[i] = ue8m0_byte();
    for (int i = 0; i < 10; i++) ksc[i] = 1.0f;
    fill_weights(w, m * h, 0);
    for (int i = 0; i < 12; i++) w[i] = 1.0f;
    dev_t_ t0 = dev(qv, fp4 ? DSA_E2M1X2 : DSA_E4M3, 3, (int64_t[]){m, h, qr}, 0, 1);
    dev_t_ t1 = dev(qs, DSA_UE8M0, 3, (int64_t[]){m, h, d / 32}, 0, 0);
    dev_t_ t2 = dev(kv, fp4 ? DSA_E2M1X2 : DSA_E4M3, 2, (int64_t[]){n, qr}, 0, 1);
    dev_t_ t3 = fp4 ? dev(kss, DSA_UE8M0, 2, (int64_t[]){n, d / 32}, 0, 0)
                    : dev(ksc, DSA_F32, 1, (int64_t[]){n}, 0, 0);
    dev_t_ t4 = dev(w, DSA_F32, 2, (int64_t[]){m, h}, 0, 0);
    dev_t_ t5 = dev(ks, DSA_I32, 1, (int64_t[]){m}, 0, 0);
    dev_t_ t6 = dev(ke, DSA_I32, 1, (int64_t[]){m}, 0, 0);
    out_buf o = out_make(m, n, 0, 0);
    args x;
    memset(&x, 0, sizeof x);
    x.q = q;
    x.fp4 = fp4;
    x.t[0] = t0.t, x.t[1] = t1.t, x.t[2] = t2.t, x.t[3] = t3.t, x.t[4] = t4.t, x.t[5] = t5.t,
    x.t[6] = t6.t, x.t[7] = o.t;
    dsa_indexer_logits_params_default(&x.p);
    x.pcache = NULL;
    run_bad(fp4 ? "mqa_logits_mxfp4" : "mqa_logits", &x, call_ragged, break_ragged, &o.gb);
    dev_free(&t0), dev_free(&t1), dev_free(&t2), dev_free(&t3), dev_free(&t4), dev_free(&t5),
        dev_free(&t6);
    out_free(&o);

    /* paged: B = 2, next_n = 2, H = 4, W = 3, bs = 4, 5 blocks */
    const int64_t b = 2, nn = 2, pw = 3, nb = 5, pqr = fp4 ? 64 : 128;
    const int32_t bs = 4;
    const int64_t stride = bs * (fp4 ? 68 : 132) + 16;
    uint8_t *img = dsa_test_xmalloc((size_t)(nb * stride));
    memset(img, 0, (size_t)(nb * stride));
    uint8_t *pq = dsa_test_xmalloc((size_t)(b * nn * h * pqr)), pqs[2 * 2 * 4 * 4];
    fill_e4m3(pq, b * nn * h * pqr, 1);
    for (size_t i = 0; i < sizeof pqs; i++) pqs[i] = ue8m0_byte();
    float pwt[2 * 2 * 4];
    for (int i = 0; i < 16; i++) pwt[i] = 1.0f;
    int32_t cl[2] = {9, 12}, bt[2 * 3] = {0, 1, 2, 3, 4, 0};
    dev_t_ p0 = dev(pq, fp4 ? DSA_E2M1X2 : DSA_E4M3, 4, (int64_t[]){b, nn, h, pqr}, 0, 1);
    dev_t_ p1 = dev(pqs, DSA_UE8M0, 4, (int64_t[]){b, nn, h, 4}, 0, 0);
    dev_t_ p2 = dev(pwt, DSA_F32, 2, (int64_t[]){b * nn, h}, 0, 0);
    dev_t_ p3 = dev(cl, DSA_I32, 1, (int64_t[]){b}, 0, 0);
    dev_t_ p4 = dev(bt, DSA_I32, 2, (int64_t[]){b, pw}, 0, 0);
    guarded_buf cb = gbuf_create(ctx, q, (size_t)(nb * stride), img);
    out_buf po = out_make(b * nn, 16, 0, 0);
    memset(&x, 0, sizeof x);
    x.q = q;
    x.fp4 = fp4;
    x.t[0] = p0.t, x.t[1] = p1.t, x.t[2] = p2.t, x.t[3] = p3.t, x.t[4] = p4.t, x.t[7] = po.t;
    x.cache = (dsa_paged_cache){.mem = cb.mem, .offset = cb.off, .num_blocks = nb,
                                .block_size = bs, .block_stride = stride,
                                .format = fp4 ? DSA_CACHE_INDEXER_MXFP4 : DSA_CACHE_INDEXER_FP8};
    x.pcache = &x.cache;
    dsa_indexer_logits_params_default(&x.p);
    run_bad(fp4 ? "paged_mqa_logits_mxfp4" : "paged_mqa_logits", &x, call_paged, break_paged,
            &po.gb);
    dev_free(&p0), dev_free(&p1), dev_free(&p2), dev_free(&p3), dev_free(&p4);
    gbuf_release(&cb);
    out_free(&po);
    free(img), free(pq);
  }
}

/* ---- empty inputs, NULL params, events ------------------------------------------ */

static void test_empty_and_events(void) {
  guarded_buf any = gbuf_create(ctx, q, 4096, NULL);
  cl_event done = NULL;
  dsa_events ev = {0, NULL, &done};
  dsa_tensor q0 = dsa_tensor_make(any.mem, any.off, DSA_E4M3, 3, (int64_t[]){0, 8, 128});
  dsa_tensor k0 = dsa_tensor_make(any.mem, any.off, DSA_E4M3, 2, (int64_t[]){5, 128});
  dsa_tensor s0 = dsa_tensor_make(any.mem, any.off, DSA_F32, 1, (int64_t[]){5});
  dsa_tensor w0 = dsa_tensor_make(any.mem, any.off, DSA_F32, 2, (int64_t[]){0, 8});
  dsa_tensor r0 = dsa_tensor_make(any.mem, any.off, DSA_I32, 1, (int64_t[]){0});
  dsa_tensor o0 = dsa_tensor_make(any.mem, any.off, DSA_F32, 2, (int64_t[]){0, 5});
  CHECK_OK(dsa_indexer_logits(q, &q0, NULL, &k0, &s0, &w0, &r0, &r0, &o0, NULL, &ev));
  dsa_test_expect_complete(done, "mqa_logits M=0");

  /* B = 0 paged, with a zero-block cache. */
  dsa_paged_cache pc = {.mem = NULL, .offset = 0, .num_blocks = 0, .block_size = 64,
                        .block_stride = 64 * 132, .format = DSA_CACHE_INDEXER_FP8};
  dsa_tensor pq = dsa_tensor_make(any.mem, any.off, DSA_E4M3, 4, (int64_t[]){0, 1, 8, 128});
  dsa_tensor pw = dsa_tensor_make(any.mem, any.off, DSA_F32, 2, (int64_t[]){0, 8});
  dsa_tensor pb = dsa_tensor_make(any.mem, any.off, DSA_I32, 2, (int64_t[]){0, 4});
  dsa_tensor po = dsa_tensor_make(any.mem, any.off, DSA_F32, 2, (int64_t[]){0, 256});
  done = NULL;
  CHECK_OK(dsa_indexer_paged_logits(q, &pq, NULL, &pw, &r0, &pb, &pc, &po, NULL, &ev));
  dsa_test_expect_complete(done, "paged_mqa_logits B=0");

  /* A real call with a wait list and an event back; a zero-block cache with
   * all lengths 0 reads nothing and writes -inf. */
  int32_t cl[2] = {0, 0}, bt[2] = {-1, -1};
  uint8_t qb[2 * 8 * 128];
  memset(qb, 0x38, sizeof qb);
  float wb[16];
  for (int i = 0; i < 16; i++) wb[i] = 1;
  guarded_buf cb = gbuf_create(ctx, q, sizeof cl, cl), bb = gbuf_create(ctx, q, sizeof bt, bt),
              qq = gbuf_create(ctx, q, sizeof qb, qb), wwb = gbuf_create(ctx, q, sizeof wb, wb);
  out_buf o = out_make(2, 70, 0, 0);
  dsa_tensor qt = dsa_tensor_make(qq.mem, qq.off, DSA_E4M3, 4, (int64_t[]){2, 1, 8, 128});
  dsa_tensor wt = dsa_tensor_make(wwb.mem, wwb.off, DSA_F32, 2, (int64_t[]){2, 8});
  dsa_tensor ct = dsa_tensor_make(cb.mem, cb.off, DSA_I32, 1, (int64_t[]){2});
  dsa_tensor btt = dsa_tensor_make(bb.mem, bb.off, DSA_I32, 2, (int64_t[]){2, 1});
  cl_event first = NULL, second = NULL;
  dsa_events ev1 = {0, NULL, &first};
  pc.block_size = 4, pc.block_stride = 4 * 132;
  CHECK_OK(dsa_indexer_paged_logits(q, &qt, NULL, &wt, &ct, &btt, &pc, &o.t, NULL, &ev1));
  dsa_events ev2 = {1, &first, &second};
  CHECK_OK(dsa_indexer_paged_logits(q, &qt, NULL, &wt, &ct, &btt, &pc, &o.t, NULL, &ev2));
  dsa_test_expect_complete(second, "paged with a wait list");
  if (first) clReleaseEvent(first);
  double ref[2 * 70];
  for (int i = 0; i < 140; i++) ref[i] = -INFINITY;
  out_check(&o, ref, "paged zero-block cache, context 0");
  CHECK(dsa_test_read_faults(q) == 0, "context 0 with a zero-block cache faulted");
  out_free(&o);
  gbuf_release(&cb), gbuf_release(&bb), gbuf_release(&qq), gbuf_release(&wwb);
  gbuf_release(&any);
}

/* ---- a decode-sized case with a full 1-D context through many blocks ----------- */

static void test_decode_shape(void) {
  paged_case tc = {0, 2, 2, 64, 24, 30, 64, 2, 1, 1, 0, 0, 1, 0, 0, 0};
  run_paged(&tc);
  paged_case tc2 = {0, 2, 1, 64, 24, 30, 64, 2, 2, 1, 0, 0, 0, 0, 0, 0};
  run_paged(&tc2);
}

int main(void) {
  dsa_test_open(&ctx, &q, 0);
  test_ragged();
  test_paged();
  test_all_codes();
  test_decode_shape();
  test_bad_args();
  test_empty_and_events();
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
