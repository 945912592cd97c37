/* Indexer top-k (dsa_topk_prefill / dsa_topk_decode) against the C reference
 * in tests/ref on randomized shapes, tie-heavy and non-finite data, bad
 * ranges (faults), guard bands, events and host-side argument validation;
 * first with the library's own pick (which splits few rows here), then
 * with each algorithm forced through DSACL_TOPK (wide, split in chunks of
 * 300 columns, lrow, row, stream), so every variant runs here whatever the
 * device.
 *
 * The output rule is deterministic, so every comparison is exact: the whole
 * output payload (with random bytes between strided entries, which must stay
 * untouched) against the reference's image. */
#include <math.h>
#include <stdarg.h>

#include "common.h"
#include "internal.h" /* dsa__topk_env, dsa__queue_scratch */
#include "ref_topk.h"

_Static_assert((int)REF_TOPK_FAULT_LENGTH_RANGE == (int)DSA_FAULT_LENGTH_RANGE, "fault bit");

static dsa_context *ctx;
static dsa_queue *q;
static uint64_t rng = 0x70C4A11CE5ull;

static int64_t rnd(int64_t n) { return n > 0 ? (int64_t)(dsa_test_rand(&rng) % (uint64_t)n) : 0; }

/* Set by test_poisoned: before each call the queue's scratch (the split's
 * chunk lists, src/op_topk.c) is made at least as large as any split of
 * the call can use (64 chunks a row) and filled with 0xFF bytes. A list word
 * 0xFFFF...FF outranks every real word (key << 32 | ~column), so a merge
 * that read a list entry its chunk group did not write this call (past a
 * list shorter than k, or a chunk with no columns) would rank it first and
 * write column 0 or shift every rank: the outputs would differ from the
 * reference. (An Oclgrind --uninitialized report on those lists,
 * docs/PORTING.md "Oclgrind", was the simulator's; this test is the check
 * on real runtimes that the merge reads only what was written.) */
static int poison_scratch;
static void poison(int64_t rows, int32_t k) {
  if (!poison_scratch || rows == 0) return;
  cl_mem m;
  CHECK_OK(dsa__queue_scratch(q, (size_t)rows * 64 * (size_t)k * 8, &m));
  /* One whole-buffer write, not clEnqueueFillBuffer: under Oclgrind's
   * --uninitialized a fill leaves the buffer a one-byte shadow state, and
   * the split's lists would read as uninitialized (tools/cases/cases.c). */
  unsigned char *ff = dsa_test_xmalloc(q->scratch_size);
  memset(ff, 0xFF, q->scratch_size);
  const cl_int e = clEnqueueWriteBuffer(dsa_queue_cl(q), m, CL_TRUE, 0, q->scratch_size, ff, 0,
                                        NULL, NULL);
  free(ff);
  CHECK(e == CL_SUCCESS, "poisoning the scratch: OpenCL error %d", (int)e);
}



static float f_of_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint32_t bits_of_f(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

#define NKINDS 14
/* Data families: 0 uniform, 1 small-int ties, 2 all equal, 3 non-finite mix,
 * 4 masked (-inf), 5 bf16 gauss, 6 ulp-close, 7 ulp-close negative,
 * 8 signed zeros, 9 all NaN, 10 subnormal, 11 64 levels (ties at every k-th
 * value, yet few enough candidates for the sampled select to take them),
 * 12 ascending (the largest all at the row's end), 13 bin edges: values
 * spread over ~3840 14-bit key prefixes whose f32 sort keys have their low
 * 18 bits zero (low bits 1 when positive, 0x3FFFF when negative), so every
 * key is the first of its level-0 bin: the selects' threshold compares
 * (key >= a bin's first key) meet equality. */

/* A row of n logits of one data family. */
static void fill_row(float *v, int64_t n, int kind) {
  const float common = (float)(rnd(2001) - 1000) / 8;
  for (int64_t i = 0; i < n; i++) {
    switch (kind) {
      case 0: v[i] = (float)(dsa_test_uniform(&rng) * 20 - 10); break;
      case 1: v[i] = (float)(rnd(5) - 2); break;
      case 2: v[i] = common; break;
      case 3: {
        static const uint32_t sp[] = {0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x7F800000u,
                                      0xFF800000u, 0x00000000u, 0x80000000u, 0x3F800000u,
                                      0xBF800000u, 0x7F7FFFFFu, 0xFF7FFFFFu};
        int64_t c = rnd(16);
        v[i] = c < 11 ? f_of_bits(sp[c]) : (float)(dsa_test_uniform(&rng) * 4 - 2);
        break;
      }
      case 4:
        v[i] = rnd(10) ? -INFINITY : rnd(4) ? (float)(dsa_test_uniform(&rng) * 8 - 4) : NAN;
        break;
      case 5: {
        double g = dsa_test_uniform(&rng) + dsa_test_uniform(&rng) + dsa_test_uniform(&rng) - 1.5;
        v[i] = f_of_bits(bits_of_f((float)(g * 3)) & 0xFFFF0000u);
        break;
      }
      case 6: v[i] = f_of_bits(0x3F800000u + (uint32_t)rnd(3000)); break;
      case 7: v[i] = f_of_bits(0xBF800000u + (uint32_t)rnd(1500)); break;
      case 8: v[i] = rnd(3) ? f_of_bits(rnd(2) ? 0x80000000u : 0u) : (float)(rnd(3) - 1); break;
      case 9: v[i] = f_of_bits(rnd(2) ? 0x7FC00000u : 0xFFFFFFFFu); break;
      case 11: v[i] = (float)rnd(64) / 4; break;
      case 12: v[i] = (float)i / 8 - 100; break;
      case 10: v[i] = f_of_bits((uint32_t)rnd(0x1000) | (rnd(2) ? 0x80000000u : 0u)); break;
      case 13: { /* +-2^e (1 + m / 32): about 3840 prefixes, few keys each */
        const float f = ldexpf(1.0f + (float)rnd(32) / 32, (int)rnd(60) - 30);
        const uint32_t u = bits_of_f(rnd(2) ? -f : f);
        v[i] = f_of_bits((u & ~0x3FFFFu) | (u >> 31 ? 0x3FFFFu : 1u));
        break;
      }
      default: v[i] = 0; break;
    }
  }
}

/* bf16 bits standing for f: the truncated bits (so f32 families become
 * tie-heavy bf16 rows), except that a NaN stays a NaN (a payload bit is
 * kept) and an f32 subnormal becomes a bf16 subnormal (truncation would
 * make it a zero). */
static uint16_t bf16_of(float f) {
  const uint32_t u = bits_of_f(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 1u);
  if ((u & 0x7F800000u) == 0u && (u & 0x007FFFFFu))
    return (uint16_t)(((u >> 16) & 0x8000u) | 1u | (u & 0x7Eu));
  return (uint16_t)(u >> 16);
}

static void compare_out(const int32_t *got, const int32_t *want, size_t count, const char *fmt,
                        ...) __attribute__((format(printf, 4, 5)));
static void compare_out(const int32_t *got, const int32_t *want, size_t count, const char *fmt,
                        ...) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < count; i++)
    if (got[i] != want[i] && !bad++) first = i;
  char c[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c, sizeof c, fmt, ap);
  va_end(ap);
  CHECK(bad == 0, "indices [%s]: %zu of %zu words differ, first at word %zu: got %d want %d", c,
        bad, count, first, bad ? got[first] : 0, bad ? want[first] : 0);
}

/* Logits [rows, n_cols] with row stride ls and offset loff (elements), rows
 * of the given family (kind < 0: a random family per row); the padding
 * columns hold NaN-free junk the kernel must not read into the result.
 * Returns the values the reference ranks (f32); *dev is the device image
 * of *nbytes bytes: the same array for f32, bf16 bits for bf16 (then the
 * returned values are those bits widened, exactly what the spec ranks). */
static float *make_logits(int64_t rows, int64_t n_cols, int64_t ls, size_t loff, int kind,
                          int bf16, size_t *nbytes, void **dev) {
  const size_t count = loff + (size_t)(rows > 0 ? (rows - 1) * ls + n_cols : 0);
  float *l = dsa_test_xmalloc(count * 4 + 4);
  for (size_t i = 0; i < count; i++) l[i] = 1e30f; /* would win if read */
  for (int64_t r = 0; r < rows; r++) fill_row(l + loff + r * ls, n_cols, kind < 0 ? (int)rnd(NKINDS) : kind);
  *nbytes = count * (bf16 ? 2 : 4);
  *dev = l;
  if (bf16) {
    uint16_t *h = dsa_test_xmalloc(count * 2 + 2);
    for (size_t i = 0; i < count; i++) {
      h[i] = bf16_of(l[i]);
      l[i] = f_of_bits((uint32_t)h[i] << 16);
    }
    *dev = h;
  }
  return l;
}

/* Output geometry: [rows, k] with strides (os0, os1) elements at ooff. */
typedef struct outg {
  int64_t os0, os1;
  size_t ooff, words;
} outg;

static outg pick_out(int64_t rows, int32_t k) {
  outg o;
  o.os1 = rnd(4) == 0 ? 2 : 1;
  o.os0 = k * o.os1 + (rnd(2) ? rnd(5) : 0);
  o.ooff = (size_t)rnd(3);
  o.words = o.ooff + (size_t)(rows > 0 ? (rows - 1) * o.os0 + (k - 1) * o.os1 + 1 : 0);
  return o;
}

/* ---- prefill -------------------------------------------------------------------- */

typedef struct pf_case {
  int64_t rows, n_cols;
  int32_t k;
  int kind;   /* data family, -1: random per row */
  int ranges; /* 0 random in [0, N], 1 full rows, 2 n around k, 3 some bad */
  int bf16;   /* logits bf16 (else f32) */
} pf_case;

static void run_prefill(const pf_case *tc) {
  const int64_t rows = tc->rows, nc = tc->n_cols;
  const int32_t k = tc->k;
  const int64_t ls = nc + (rnd(2) ? rnd(9) : 0);
  const size_t loff = (size_t)rnd(4);
  size_t lbytes;
  void *ldev;
  float *l = make_logits(rows, nc, ls, loff, tc->kind, tc->bf16, &lbytes, &ldev);
  const size_t es = tc->bf16 ? 2 : 4;
  const int64_t ss = 1 + (rnd(3) == 0); /* starts/ends strides */
  int32_t *st = dsa_test_xmalloc((size_t)(rows * ss) * 4 + 4), *en = dsa_test_xmalloc((size_t)(rows * ss) * 4 + 4);
  int32_t *st_c = dsa_test_xmalloc((size_t)rows * 4 + 4), *en_c = dsa_test_xmalloc((size_t)rows * 4 + 4);
  dsa_test_fill_random(&rng, st, (size_t)(rows * ss) * 4), dsa_test_fill_random(&rng, en, (size_t)(rows * ss) * 4);
  for (int64_t r = 0; r < rows; r++) {
    int64_t s = rnd(nc + 1), e = s + rnd(nc - s + 1);
    if (tc->ranges == 1) s = 0, e = nc;
    if (tc->ranges == 2) {
      int64_t want = k + rnd(3) - 1; /* n = k-1, k, k+1 */
      if (want < 0) want = 0;
      if (want > nc) want = nc;
      s = rnd(nc - want + 1), e = s + want;
    }
    if (tc->ranges == 3) switch (rnd(6)) {
        case 0: s = -1 - rnd(5); break;
        case 1: e = nc + 1 + rnd(100); break;
        case 2: { int64_t t = s; s = e + 1 + rnd(3), e = t; break; }
        case 3: s = INT32_MIN, e = INT32_MAX; break;
        default: break;
      }
    st[r * ss] = (int32_t)s, en[r * ss] = (int32_t)e, st_c[r] = (int32_t)s, en_c[r] = (int32_t)e;
  }
  outg o = pick_out(rows, k);
  int32_t *out = dsa_test_xmalloc(o.words * 4), *want = dsa_test_xmalloc(o.words * 4), *got = dsa_test_xmalloc(o.words * 4);
  dsa_test_fill_random(&rng, out, o.words * 4);
  memcpy(want, out, o.words * 4);
  unsigned want_f = ref_topk_prefill(l + loff, rows, nc, ls, st_c, en_c, k, want + o.ooff, o.os0, o.os1);

  guarded_buf lb = gbuf_create(ctx, q, lbytes, ldev), sb = gbuf_create(ctx, q, (size_t)(rows * ss) * 4, st),
              eb = gbuf_create(ctx, q, (size_t)(rows * ss) * 4, en), ob = gbuf_create(ctx, q, o.words * 4, out);
  dsa_tensor lt = {.mem = lb.mem, .offset = lb.off + loff * es,
                   .dtype = tc->bf16 ? DSA_BF16 : DSA_F32, .ndim = 2, .shape = {rows, nc},
                   .stride = {ls, 1}};
  dsa_tensor stt = {.mem = sb.mem, .offset = sb.off, .dtype = DSA_I32, .ndim = 1, .shape = {rows},
                    .stride = {ss}};
  dsa_tensor ent = {.mem = eb.mem, .offset = eb.off, .dtype = DSA_I32, .ndim = 1, .shape = {rows},
                    .stride = {ss}};
  dsa_tensor ot = {.mem = ob.mem, .offset = ob.off + o.ooff * 4, .dtype = DSA_I32, .ndim = 2,
                   .shape = {rows, k}, .stride = {o.os0, o.os1}};
  dsa_topk_params p;
  dsa_topk_params_default(&p);
  if (rnd(2)) p.k = k;
  poison(rows, k);
  CHECK_OK(dsa_topk_prefill(q, &lt, &stt, &ent, &ot, rnd(4) ? &p : NULL, NULL));
  uint32_t f = dsa_test_read_faults(q);
  gbuf_read(q, &ob, got);
  compare_out(got, want, o.words, "prefill rows=%lld N=%lld k=%d kind=%d ranges=%d %s",
              (long long)rows, (long long)nc, k, tc->kind, tc->ranges, tc->bf16 ? "bf16" : "f32");
  CHECK(f == want_f, "prefill faults 0x%x, want 0x%x (ranges=%d)", f, want_f, tc->ranges);
  CHECK(gbuf_guards_ok(q, &lb) && gbuf_guards_ok(q, &sb) && gbuf_guards_ok(q, &eb) &&
            gbuf_guards_ok(q, &ob),
        "prefill: guard band overwritten (rows=%lld N=%lld k=%d)", (long long)rows,
        (long long)nc, k);
  float *lback = dsa_test_xmalloc(lbytes);
  gbuf_read(q, &lb, lback);
  CHECK(!memcmp(lback, ldev, lbytes), "prefill modified logits");
  if (ldev != l) free(ldev);
  free(lback), free(l), free(st), free(en), free(st_c), free(en_c), free(out), free(want), free(got);
  gbuf_release(&lb), gbuf_release(&sb), gbuf_release(&eb), gbuf_release(&ob);
}

static const int32_t ks[] = {1, 7, 512, 2048, 64, 100};

static void test_prefill(void) {
  const pf_case fixed[] = {
      {0, 100, 7, 0, 0, 0},       {1, 1, 1, 0, 1, 0},        {1, 0, 4, 0, 1, 0},
      {3, 5000, 2048, 0, 1, 0},   {5, 3000, 512, 1, 1, 0},   {4, 3000, 512, 2, 1, 0},
      {9, 2000, 64, 3, 1, 0},     {7, 4000, 100, 4, 1, 0},   {6, 5000, 512, 5, 1, 0},
      {6, 6000, 512, 6, 1, 0},    {6, 6000, 512, 7, 1, 0},   {5, 3000, 100, 8, 1, 0},
      {3, 3000, 7, 9, 1, 0},      {3, 3000, 7, 10, 1, 0},    {11, 600, 512, -1, 2, 0},
      {9, 3000, 2048, -1, 2, 0},  {13, 300, 7, -1, 3, 0},    {7, 40000, 2048, 0, 1, 0},
      {3, 40000, 512, 1, 1, 0},   {2, 33000, 1, 4, 1, 0},    {5, 2100, 2048, 1, 1, 0},
      {17, 1000, 1, -1, 0, 0},    {5, 6000, 512, 13, 1, 0},  {3, 40000, 2048, 13, 1, 0},
      {4, 4096, 64, 13, 1, 0},    {4, 4096, 100, 0, 1, 0},
      /* bf16 logits: the f32 families truncated (many ties), NaN, -inf,
       * signed zeros, subnormals, n around k, bad ranges, long rows */
      {5, 3000, 512, 0, 1, 1},  {4, 5000, 2048, 5, 1, 1}, {9, 2000, 64, 3, 1, 1},
      {7, 4000, 100, 4, 1, 1},  {5, 3000, 100, 8, 1, 1},  {3, 3000, 7, 9, 1, 1},
      {3, 3000, 7, 10, 1, 1},   {6, 6000, 512, 6, 1, 1},  {11, 600, 512, -1, 2, 1},
      {13, 300, 7, -1, 3, 1},   {3, 40000, 2048, 0, 1, 1}, {4, 3000, 512, 2, 1, 1},
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) run_prefill(&fixed[i]);
  /* The fixed cases hold every shape class (n around k, > 32768 columns,
   * each value family and range kind); the random ones add combinations:
   * 4 in CI, 14 with DSACL_TEST_LARGE. */
  for (int it = 0; it < (dsa_test_large() ? 14 : 4); it++) {
    pf_case tc = {rnd(3) ? 1 + rnd(12) : 2 * rnd(4) + 1, rnd(3) ? rnd(6000) : rnd(40000),
                  ks[rnd(6)], (int)rnd(NKINDS + 1) - 1, (int)rnd(4), (int)rnd(2)};
    if (rnd(5) == 0) tc.k = (int32_t)(1 + rnd(2048));
    run_prefill(&tc);
  }
}

/* ---- decode ---------------------------------------------------------------------- */

typedef struct dc_case {
  int64_t b, next_n, n_cols;
  int32_t k;
  int rank, kind;
  int lens; /* 0 random in [0, N], 1 full, 2 around k, 3 some bad, 4 all in [0, next_n) */
  int bf16; /* logits bf16 (else f32) */
} dc_case;

static void run_decode(const dc_case *tc) {
  const int64_t b = tc->b, nn = tc->next_n, rows = b * nn, nc = tc->n_cols;
  const int32_t k = tc->k;
  const int64_t ls = nc + (rnd(2) ? rnd(9) : 0);
  const size_t loff = (size_t)rnd(4);
  size_t lbytes;
  void *ldev;
  float *l = make_logits(rows, nc, ls, loff, tc->kind, tc->bf16, &lbytes, &ldev);
  const size_t es = tc->bf16 ? 2 : 4;
  const int64_t nlen = tc->rank == 1 ? b : rows;
  int32_t *lc = dsa_test_xmalloc((size_t)nlen * 4 + 4); /* compact, for the reference */
  for (int64_t i = 0; i < nlen; i++) {
    int64_t v = rnd(nc + 1);
    if (tc->lens == 1) v = nc;
    if (tc->lens == 2) v = k + rnd(3) - 1 + (tc->rank == 1 ? nn - 1 : 0);
    if (tc->lens == 4) v = rnd(nn); /* 1-D: the first queries see nothing, no fault */
    if (tc->lens == 3) switch (rnd(5)) {
        case 0: v = -1 - rnd(3); break;
        case 1: v = nc + 1 + rnd(50); break;
        case 2: v = INT32_MIN; break;
        case 3: v = rnd(nn); break; /* 1-D: shorter than next_n, no fault */
        default: break;
      }
    if (tc->lens != 3 && v > nc) v = nc;
    if (tc->lens != 3 && v < 0) v = 0;
    lc[i] = (int32_t)v;
  }
  /* Device layout: 1-D stride 1 or 3; 2-D row-major, padded, or transposed. */
  int64_t s0, s1 = 0;
  int lay = (int)rnd(3);
  if (tc->rank == 1) s0 = lay == 0 ? 3 : 1;
  else if (lay == 0) s0 = nn, s1 = 1;
  else if (lay == 1) s0 = nn * 2 + 1, s1 = 2;
  else s0 = 1, s1 = b;
  size_t lwords = tc->rank == 1 ? (size_t)((b - 1) * s0 + 1) : (size_t)((b - 1) * s0 + (nn - 1) * s1 + 1);
  if (b == 0) lwords = 0;
  int32_t *ld = dsa_test_xmalloc(lwords * 4 + 4);
  dsa_test_fill_random(&rng, ld, lwords * 4);
  for (int64_t i = 0; i < nlen; i++) {
    int64_t bi = tc->rank == 1 ? i : i / nn, ii = tc->rank == 1 ? 0 : i % nn;
    ld[bi * s0 + ii * s1] = lc[i];
  }
  outg o = pick_out(rows, k);
  int32_t *out = dsa_test_xmalloc(o.words * 4), *want = dsa_test_xmalloc(o.words * 4), *got = dsa_test_xmalloc(o.words * 4);
  dsa_test_fill_random(&rng, out, o.words * 4);
  memcpy(want, out, o.words * 4);
  unsigned want_f = ref_topk_decode(l + loff, rows, nc, ls, lc, tc->rank, nn, k, want + o.ooff,
                                    o.os0, o.os1);

  guarded_buf lb = gbuf_create(ctx, q, lbytes, ldev), nb = gbuf_create(ctx, q, lwords * 4, ld),
              ob = gbuf_create(ctx, q, o.words * 4, out);
  dsa_tensor lt = {.mem = lb.mem, .offset = lb.off + loff * es,
                   .dtype = tc->bf16 ? DSA_BF16 : DSA_F32, .ndim = 2, .shape = {rows, nc},
                   .stride = {ls, 1}};
  dsa_tensor nt = tc->rank == 1 ? (dsa_tensor){.mem = nb.mem, .offset = nb.off, .dtype = DSA_I32,
                                               .ndim = 1, .shape = {b}, .stride = {s0}}
                                : (dsa_tensor){.mem = nb.mem, .offset = nb.off, .dtype = DSA_I32,
                                               .ndim = 2, .shape = {b, nn}, .stride = {s0, s1}};
  dsa_tensor ot = {.mem = ob.mem, .offset = ob.off + o.ooff * 4, .dtype = DSA_I32, .ndim = 2,
                   .shape = {rows, k}, .stride = {o.os0, o.os1}};
  dsa_topk_params p;
  dsa_topk_params_default(&p);
  if (rnd(2)) p.k = k;
  if (tc->rank == 1 || rnd(2)) p.next_n = (int32_t)nn;
  if (tc->rank == 1 && nn == 1 && rnd(2)) p.next_n = 0;
  poison(rows, k);
  CHECK_OK(dsa_topk_decode(q, &lt, &nt, &ot, &p, NULL));
  uint32_t f = dsa_test_read_faults(q);
  gbuf_read(q, &ob, got);
  compare_out(got, want, o.words,
              "decode B=%lld next_n=%lld rank=%d N=%lld k=%d kind=%d lens=%d %s", (long long)b,
              (long long)nn, tc->rank, (long long)nc, k, tc->kind, tc->lens,
              tc->bf16 ? "bf16" : "f32");
  CHECK(f == want_f, "decode faults 0x%x, want 0x%x (lens=%d)", f, want_f, tc->lens);
  CHECK(gbuf_guards_ok(q, &lb) && gbuf_guards_ok(q, &nb) && gbuf_guards_ok(q, &ob),
        "decode: guard band overwritten");
  if (ldev != l) free(ldev);
  free(l), free(lc), free(ld), free(out), free(want), free(got);
  gbuf_release(&lb), gbuf_release(&nb), gbuf_release(&ob);
}

static void test_decode(void) {
  const dc_case fixed[] = {
      {0, 2, 100, 7, 1, 0, 0, 0},       {0, 3, 100, 7, 2, 0, 0, 0},     {1, 1, 1, 1, 1, 0, 1, 0},
      {2, 2, 3000, 512, 1, 0, 1, 0},    {2, 2, 3000, 512, 2, 1, 1, 0},  {3, 4, 2500, 2048, 2, -1, 2, 0},
      {3, 4, 2500, 2048, 1, -1, 2, 0},  {4, 3, 1500, 64, 1, -1, 3, 0},  {4, 3, 1500, 64, 2, -1, 3, 0},
      {2, 1, 32768, 2048, 1, 0, 1, 0},  {1, 2, 32768, 512, 2, 5, 1, 0}, {5, 2, 1000, 128, 1, 3, 0, 0},
      {5, 2, 1000, 128, 2, 4, 0, 0},    {3, 1, 700, 1, 2, 8, 1, 0},     {6, 4, 50, 1, 1, 0, 4, 0},
      {6, 3, 50, 2, 2, 0, 4, 0},        {2, 1, 32768, 512, 1, 13, 1, 0}, {3, 2, 5000, 512, 2, 13, 0, 0},
      /* k = 64 and 100 over 4096 columns: where a CPU's groups of 128
       * reach the register kernels' level-0 stop (4 words an item) */
      {3, 1, 4096, 64, 1, 13, 1, 0},    {2, 2, 4096, 100, 2, 0, 1, 0},
      /* bf16 logits */
      {2, 1, 32768, 2048, 1, 0, 1, 1}, {1, 2, 32768, 512, 2, 5, 1, 1}, {4, 3, 1500, 64, 2, -1, 3, 1},
      {5, 2, 1000, 128, 1, 3, 0, 1},   {3, 4, 2500, 2048, 2, -1, 2, 1}, {6, 4, 50, 1, 1, 0, 4, 1},
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) run_decode(&fixed[i]);
  for (int it = 0; it < (dsa_test_large() ? 14 : 4); it++) { /* as in test_prefill */
    dc_case tc = {rnd(4) ? 1 + rnd(6) : 0, 1 + rnd(4), rnd(3) ? rnd(5000) : rnd(40000), ks[rnd(6)],
                  1 + (int)rnd(2), (int)rnd(NKINDS + 1) - 1, (int)rnd(4), (int)rnd(2)};
    run_decode(&tc);
  }
}

/* Many rows, the two realistic row shapes, scaled down for a CPU. */
static void test_many_rows(void) {
  run_prefill(&(pf_case){96, 1500, 512, 0, 0, 0});
  run_decode(&(dc_case){48, 2, 1200, 512, 2, -1, 0, 0});
  run_decode(&(dc_case){48, 2, 1200, 512, 2, -1, 0, 1});
}

/* ---- events ------------------------------------------------------------------------ */

/* A user event gates the operator: nothing happens before it completes, and
 * the returned event completes after the output is written. Also the empty
 * (rows = 0) call honours the wait list and returns an event. */
static void test_events(void) {
  const int64_t rows = 3, nc = 600;
  const int32_t k = 8;
  size_t lbytes;
  void *ldev;
  float *l = make_logits(rows, nc, nc, 0, 0, 0, &lbytes, &ldev);
  int32_t st[3] = {0, 10, 0}, en[3] = {600, 20, 300};
  int32_t *want = dsa_test_xmalloc((size_t)rows * k * 4), *got = dsa_test_xmalloc((size_t)rows * k * 4);
  ref_topk_prefill(l, rows, nc, nc, st, en, k, want, k, 1);
  guarded_buf lb = gbuf_create(ctx, q, lbytes, l), sb = gbuf_create(ctx, q, 12, st),
              eb = gbuf_create(ctx, q, 12, en), ob = gbuf_create(ctx, q, (size_t)rows * k * 4, NULL);
  dsa_tensor lt = dsa_tensor_make(lb.mem, lb.off, DSA_F32, 2, (int64_t[]){rows, nc});
  dsa_tensor stt = dsa_tensor_make(sb.mem, sb.off, DSA_I32, 1, (int64_t[]){rows});
  dsa_tensor ent = dsa_tensor_make(eb.mem, eb.off, DSA_I32, 1, (int64_t[]){rows});
  dsa_tensor ot = dsa_tensor_make(ob.mem, ob.off, DSA_I32, 2, (int64_t[]){rows, k});
  cl_int err;
  cl_event gate = clCreateUserEvent(dsa_context_cl_context(ctx), &err), done = NULL;
  CHECK(err == CL_SUCCESS, "clCreateUserEvent: %d", (int)err);
  dsa_events ev = {1, &gate, &done};
  CHECK_OK(dsa_topk_prefill(q, &lt, &stt, &ent, &ot, NULL, &ev));
  CHECK(done != NULL, "no event returned");
  cl_int stat = CL_COMPLETE;
  clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof stat, &stat, NULL);
  CHECK(stat != CL_COMPLETE, "operator completed before its wait list");
  clSetUserEventStatus(gate, CL_COMPLETE);
  clWaitForEvents(1, &done);
  clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof stat, &stat, NULL);
  CHECK(stat == CL_COMPLETE, "event not complete after wait");
  gbuf_read(q, &ob, got);
  compare_out(got, want, (size_t)rows * k, "events");
  clReleaseEvent(done), clReleaseEvent(gate);

  /* rows = 0: a marker */
  dsa_tensor lt0 = lt, stt0 = stt, ent0 = ent, ot0 = ot;
  lt0.shape[0] = stt0.shape[0] = ent0.shape[0] = ot0.shape[0] = 0;
  gate = clCreateUserEvent(dsa_context_cl_context(ctx), &err), done = NULL;
  ev = (dsa_events){1, &gate, &done};
  CHECK_OK(dsa_topk_prefill(q, &lt0, &stt0, &ent0, &ot0, NULL, &ev));
  CHECK(done != NULL, "no event returned for rows = 0");
  clSetUserEventStatus(gate, CL_COMPLETE);
  if (done) clWaitForEvents(1, &done), clReleaseEvent(done);
  clReleaseEvent(gate);
  /* decode rows = 0 with no events at all */
  dsa_tensor nt0 = dsa_tensor_make(sb.mem, sb.off, DSA_I32, 1, (int64_t[]){0});
  CHECK_OK(dsa_topk_decode(q, &lt0, &nt0, &ot0, NULL, NULL));
  clFinish(dsa_queue_cl(q));
  free(l), free(want), free(got);
  gbuf_release(&lb), gbuf_release(&sb), gbuf_release(&eb), gbuf_release(&ob);
}

/* ---- argument validation ------------------------------------------------------------- */

typedef struct args {
  dsa_queue *q;
  dsa_tensor l, a, b, o; /* logits, starts|lengths, ends, indices */
  dsa_tensor *pl, *pa, *pb, *po;
  dsa_topk_params p;
  dsa_topk_params *pp;
  dsa_events ev;
  dsa_events *pev;
} args;

static void args_point(void *vx) {
  args *x = vx;
  x->pl = &x->l, x->pa = &x->a, x->pb = &x->b, x->po = &x->o;
  x->pp = &x->p, x->pev = &x->ev;
}

/* Cases shared by both forms: queue, events, logits, indices, params. */
static int break_common(void *vx, int c, const char **w1, const char **w2) {
  args *x = vx;
  switch (c) {
    case 0: x->q = NULL, *w1 = "q"; return 1;
    case 1: x->ev.num_wait = 2, x->ev.wait = NULL, *w1 = "ev"; return 1;
    case 2: x->pl = NULL, *w1 = "logits"; return 1;
    case 3: x->l.mem = NULL, *w1 = "logits"; return 1;
    case 4: x->l.dtype = DSA_E4M3, *w1 = "logits"; return 1; /* neither f32 nor bf16 */
    case 5: x->l.ndim = 3, x->l.shape[2] = 1, x->l.stride[2] = 1, *w1 = "logits"; return 1;
    case 6: x->l.stride[1] = 2, *w1 = "logits"; return 1;
    case 7: x->l.stride[0] = -x->l.stride[0], *w1 = "logits"; return 1;
    case 8: x->l.offset += 1 << 20, *w1 = "logits"; return 1; /* past its buffer */
    case 9: x->l.offset += 2, *w1 = "logits"; return 1;       /* not a whole element */
    case 10: x->po = NULL, *w1 = "indices"; return 1;
    case 11: x->o.dtype = DSA_I64, *w1 = "indices"; return 1;
    case 12: x->o.ndim = 1, *w1 = "indices"; return 1;
    case 13: x->o.shape[0] -= 1, *w1 = "indices"; return 1;
    case 14: x->o.mem = NULL, *w1 = "indices"; return 1;
    case 15: x->o.stride[0] *= 64, *w1 = "indices"; return 1; /* past its buffer */
    case 16: x->o.stride[1] = 0, *w1 = "indices", *w2 = "stride"; return 1;
    case 17: x->p.k = x->o.shape[1] + 1, *w1 = "k"; return 1; /* != indices shape[1] */
    case 18: x->p.k = DSA_TOPK_MAX_K + 1, *w1 = "k"; return 1;
    case 19: x->p.k = -1, *w1 = "k"; return 1;
    case 20: x->p.k = 0, x->o.shape[1] = DSA_TOPK_MAX_K + 1, x->o.stride[1] = 0, x->o.shape[0] = 1,
             x->l.shape[0] = 1, x->a.shape[0] = 1, x->b.shape[0] = 1, *w1 = "indices";
             return 1;
    case 21: x->l.shape[1] = (int64_t)INT32_MAX + 1, x->l.shape[0] = 1, x->l.stride[0] = 0,
             *w1 = "logits"; return 1;
    case 22: x->l.dtype = DSA_BF16, x->l.offset += 1, *w1 = "logits"; return 1; /* half a bf16 */
    case 23: x->l.dtype = DSA_BF16, x->l.stride[1] = 2, *w1 = "logits"; return 1;
    default: (void)w2; return 0;
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
  CHECK(dsa_test_read_faults(q) == 0, "%s: valid call set faults", op);
}

static dsa_status call_prefill(void *vx, cl_event *done) {
  args *x = vx;
  x->ev.done = done;
  return dsa_topk_prefill(x->q, x->pl, x->pa, x->pb, x->po, x->pp, x->pev);
}

static int break_prefill(void *vx, int c, const char **w1, const char **w2) {
  args *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->pa = NULL, *w1 = "row_starts"; return 1;
    case 1: x->a.mem = NULL, *w1 = "row_starts"; return 1;
    case 2: x->a.dtype = DSA_I64, *w1 = "row_starts"; return 1;
    case 3: x->a.ndim = 2, x->a.shape[1] = 1, x->a.stride[1] = 1, *w1 = "row_starts"; return 1;
    case 4: x->a.shape[0] -= 1, *w1 = "row_starts"; return 1;
    case 5: x->a.offset += 4096, *w1 = "row_starts"; return 1;
    case 6: x->a.stride[0] = -1, *w1 = "row_starts"; return 1;
    case 7: x->pb = NULL, *w1 = "row_ends"; return 1;
    case 8: x->b.dtype = DSA_F32, *w1 = "row_ends"; return 1;
    case 9: x->b.shape[0] += 1, *w1 = "row_ends"; return 1;
    case 10: x->b.mem = NULL, *w1 = "row_ends"; return 1;
    case 11: x->b.offset += 1, *w1 = "row_ends"; return 1;
    case 12: x->p.next_n = 2, *w1 = "next_n"; return 1;
    default: return 0;
  }
}

static dsa_status call_decode(void *vx, cl_event *done) {
  args *x = vx;
  x->ev.done = done;
  return dsa_topk_decode(x->q, x->pl, x->pa, x->po, x->pp, x->pev);
}

/* base: lengths [B, next_n] 2-D (a), with b a valid 1-D [B] view. */
static int break_decode(void *vx, int c, const char **w1, const char **w2) {
  args *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->pa = NULL, *w1 = "lengths"; return 1;
    case 1: x->a.mem = NULL, *w1 = "lengths"; return 1;
    case 2: x->a.dtype = DSA_I64, *w1 = "lengths"; return 1;
    case 3: x->a.ndim = 3, x->a.shape[2] = 1, x->a.stride[2] = 1, *w1 = "lengths"; return 1;
    case 4: x->a.ndim = 0, *w1 = "lengths"; return 1;
    case 5: x->a.shape[0] -= 1, *w1 = "lengths"; return 1; /* B * next_n != rows */
    case 6: x->a.offset += 4096, *w1 = "lengths"; return 1;
    case 7: x->a.stride[1] = -1, *w1 = "lengths"; return 1;
    case 8: x->p.next_n = 3, *w1 = "next_n"; return 1; /* != lengths shape[1] */
    case 9: x->a = x->b, x->p.next_n = 3, *w1 = "lengths"; return 1; /* 1-D: B*3 != rows */
    case 10: x->a = x->b, x->p.next_n = -2, *w1 = "next_n"; return 1;
    case 11: x->a = x->b, x->p.next_n = 1, *w1 = "lengths"; return 1; /* 1-D: B != rows */
    case 12: x->a.shape[1] = 0, x->a.shape[0] = 0, *w1 = "lengths"; return 1;
    default: return 0;
  }
}

static void test_bad_args(void) {
  const int64_t rows = 4, nc = 300;
  const int32_t k = 16;
  size_t lbytes;
  void *ldev;
  float *l = make_logits(rows, nc, nc, 0, 0, 0, &lbytes, &ldev);
  int32_t st[4] = {0, 1, 2, 3}, en[4] = {300, 200, 100, 50};
  guarded_buf lb = gbuf_create(ctx, q, lbytes, l), sb = gbuf_create(ctx, q, 16, st),
              eb = gbuf_create(ctx, q, 16, en), ob = gbuf_create(ctx, q, (size_t)rows * k * 4, NULL);
  cl_int err;
  cl_event ready = clCreateUserEvent(dsa_context_cl_context(ctx), &err);
  clSetUserEventStatus(ready, CL_COMPLETE);
  args base;
  memset(&base, 0, sizeof base);
  base.q = q;
  base.l = dsa_tensor_make(lb.mem, lb.off, DSA_F32, 2, (int64_t[]){rows, nc});
  base.a = dsa_tensor_make(sb.mem, sb.off, DSA_I32, 1, (int64_t[]){rows});
  base.b = dsa_tensor_make(eb.mem, eb.off, DSA_I32, 1, (int64_t[]){rows});
  base.o = dsa_tensor_make(ob.mem, ob.off, DSA_I32, 2, (int64_t[]){rows, k});
  dsa_topk_params_default(&base.p);
  base.p.k = k;
  base.ev = (dsa_events){1, &ready, NULL};
  run_bad("dsa_topk_prefill", &base, call_prefill, break_prefill, &ob);

  /* decode: lengths [2, 2] over the starts buffer {0, 1, 2, 3}; b = the
   * ends buffer as a 1-D [2] view */
  base.a = dsa_tensor_make(eb.mem, eb.off, DSA_I32, 2, (int64_t[]){2, 2});
  base.b = dsa_tensor_make(eb.mem, eb.off, DSA_I32, 1, (int64_t[]){2});
  base.p.next_n = 2;
  run_bad("dsa_topk_decode", &base, call_decode, break_decode, &ob);

  clReleaseEvent(ready);
  free(l);
  gbuf_release(&lb), gbuf_release(&sb), gbuf_release(&eb), gbuf_release(&ob);
}

/* ---- every algorithm, forced ------------------------------------------------ */

static void sample_cases(void);

/* An environment setting's bad value: refused with a named error when a
 * context is made, naming the variable; nothing is created. The variable's
 * value from outside (e.g. CI's DSACL_TOPK_WG) is put back after. */
static void check_bad_env(const char *name, const char *value) {
  const char *was = getenv(name);
  char *saved = was ? strdup(was) : NULL;
  setenv(name, value, 1);
  dsa_context_options o;
  dsa_context_options_default(&o);
  o.cache_dir = "off";
  dsa_context *bad = NULL;
  const dsa_status st = dsa_context_create(&bad, &o);
  CHECK(st == DSA_ERR_INVALID_ARGUMENT && bad == NULL && strstr(dsa_last_error(), name),
        "%s=%s: %s: %s", name, value, dsa_status_name(st), dsa_last_error());
  if (bad) dsa_context_destroy(&bad);
  if (saved) setenv(name, saved, 1);
  else unsetenv(name);
  free(saved);
}

/* DSACL_TOPK (and DSACL_TOPK_SAMPLE) as a new context reads them, taken
 * into this one: the library's own parse (dsa__topk_env, what
 * dsa_context_create calls) on the live context, so the programs it built
 * stay (PoCL, its kernel cache off in the tests, compiles every kernel
 * again in each new context: test_topk took 319 s there with a context an
 * algorithm, in CI). check_bad_env covers the refusal at creation. */
static void use_topk_env(const char *topk) {
  if (topk) setenv("DSACL_TOPK", topk, 1);
  else unsetenv("DSACL_TOPK");
  CHECK(dsa__topk_env(ctx) == DSA_OK, "DSACL_TOPK=%s: %s", topk ? topk : "(unset)",
        dsa_last_error());
}

/* A smaller mix of the cases above under each DSACL_TOPK value: random and
 * tie-heavy rows, NaN / -0 / all-equal families, n around k (n <= k rows
 * inside calls that split), k = 1 and 2048, ragged and bad ranges, both
 * length ranks, events (two kernels for split). */
static void test_forced(void) {
  /* Where the device allows the merge in a row's last group (NVIDIA,
   * Intel's CPU runtime; not PoCL: src/op_topk.c), split:300 merges short rows' lists there
   * and long rows' (more lists than the arena holds) by topk_merge; split
   * (about four chunks) there, and by topk_merge under
   * DSACL_TOPK_MERGE=kernel. */
  static const char *const algos[] = {"wide", "split:300", "split", "split", "lrow", "row",
                                      "stream"};
  static const char *const merge[] = {NULL, NULL, NULL, "kernel", NULL, NULL, NULL};
  for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
    /* PoCL builds topk.cl without the merge in a row's last group
     * (src/op_topk.c): there "split" already merges by topk_merge, so the
     * forced second launch would run the same kernels on the same cases
     * again (about 15 CPU s of the PoCL and ASan jobs). */
    if (merge[a] && ctx->caps.vendor == DSA_VENDOR_POCL) continue;
    if (merge[a]) setenv("DSACL_TOPK_MERGE", merge[a], 1);
    else unsetenv("DSACL_TOPK_MERGE");
    use_topk_env(algos[a]);
    const pf_case pf[] = {
        {4, 3000, 512, -1, 0, 0}, {3, 2500, 2048, -1, 2, 0}, {5, 700, 64, 3, 3, 0},
        {2, 1500, 1, 8, 1, 0},    {3, 9000, 2048, 1, 1, 0},  {2, 5000, 7, 2, 1, 0},
        {6, 600, 100, 9, 2, 0},   {2, 4000, 512, 6, 1, 0},   {3, 2000, 64, 10, 0, 0},
        {4, 3000, 512, -1, 0, 1}, {3, 9000, 2048, 0, 1, 1}, {5, 700, 64, 3, 3, 1},
    };
    for (size_t i = 0; i < sizeof pf / sizeof pf[0]; i++) run_prefill(&pf[i]);
    const dc_case dc[] = {
        {2, 2, 3000, 512, 2, -1, 0, 0}, {1, 1, 32768, 2048, 1, 0, 1, 0}, {3, 1, 4000, 128, 1, 9, 1, 0},
        {2, 2, 1500, 64, 2, 3, 3, 0},   {4, 3, 2500, 2048, 1, -1, 2, 0}, {2, 2, 6000, 7, 2, 7, 1, 0},
        {6, 3, 50, 2, 2, 0, 4, 0},
        {1, 1, 32768, 2048, 1, 0, 1, 1}, {2, 2, 1500, 64, 2, 3, 3, 1},
    };
    for (size_t i = 0; i < sizeof dc / sizeof dc[0]; i++) run_decode(&dc[i]);
    for (int it = 0; it < (dsa_test_large() ? 4 : 1); it++) { /* fixed cases above */
      pf_case p = {1 + rnd(6), 1 + rnd(rnd(2) ? 3000 : 12000), ks[rnd(6)], (int)rnd(NKINDS + 1) - 1,
                   (int)rnd(4), (int)rnd(2)};
      run_prefill(&p);
      dc_case d = {1 + rnd(4), 1 + rnd(3), 1 + rnd(rnd(2) ? 3000 : 12000), ks[rnd(6)],
                   1 + (int)rnd(2), (int)rnd(NKINDS + 1) - 1, (int)rnd(4), (int)rnd(2)};
      run_decode(&d);
    }
    test_events();
    if (!strcmp(algos[a], "lrow")) sample_cases(); /* DSACL_TOPK_SAMPLE unset: on */
  }
  unsetenv("DSACL_TOPK_MERGE");
  use_topk_env(NULL);
  /* An unknown value is refused when the context is made. */
  check_bad_env("DSACL_TOPK", "fastest");
  check_bad_env("DSACL_TOPK_MERGE", "tree");
  /* So is a group limit that is no power of two in 64..1024. */
  static const char *const bad_wg[] = {"300", "32", "2048", "512x"};
  for (size_t i = 0; i < sizeof bad_wg / sizeof bad_wg[0]; i++)
    check_bad_env("DSACL_TOPK_WG", bad_wg[i]);
}

/* The split with its scratch poisoned (poison above): lists shorter than k
 * (k above the chunk), tail chunks with fewer columns than k, chunks with
 * none (short and ragged rows, bad ranges), rows of n <= k among split ones;
 * merged by topk_merge (DSACL_TOPK_MERGE=kernel) and in each row's last
 * group (where the device allows it, else topk_merge again). */
static void test_poisoned(void) {
  static const char *const algos[] = {"split:300", "split:300", "split", "split"};
  static const char *const merge[] = {"kernel", "group", "kernel", "group"};
  poison_scratch = 1;
  for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
    /* PoCL merges by topk_merge under "group" too (as test_forced). */
    if (!strcmp(merge[a], "group") && ctx->caps.vendor == DSA_VENDOR_POCL) continue;
    setenv("DSACL_TOPK_MERGE", merge[a], 1);
    use_topk_env(algos[a]);
    const pf_case pf[] = {{4, 3000, 512, -1, 0, 0}, {5, 700, 64, 3, 3, 0}, {6, 1000, 100, 9, 2, 0},
                          {3, 2500, 2048, -1, 0, 1}};
    for (size_t i = 0; i < sizeof pf / sizeof pf[0]; i++) run_prefill(&pf[i]);
    const dc_case dc[] = {{3, 2, 3000, 512, 2, -1, 0, 0}, {2, 2, 1500, 64, 2, 3, 3, 0},
                          {4, 1, 1000, 300, 1, -1, 2, 0}};
    for (size_t i = 0; i < sizeof dc / sizeof dc[0]; i++) run_decode(&dc[i]);
  }
  poison_scratch = 0;
  unsetenv("DSACL_TOPK_MERGE");
  use_topk_env(NULL);
}

/* lrow's sampled select (cl/topk.cl; the register kernels have none):
 * DSACL_TOPK_SAMPLE=fallback runs the sample and then the radix select on
 * every row (the path a row takes when the sample's threshold lets fewer
 * than k keys through, or too many), off the radix select alone, on (the
 * default) the sample where it holds. Rows: long ones that take the sample
 * (uniform, 64 levels with ties at the threshold, ascending), tie-heavy
 * ones that fall back by themselves, NaN / -inf rows, n <= k, bf16. Run
 * forced to lrow: in test_forced for "on", in test_sample for fallback and
 * off. */
static void sample_cases(void) {
  const pf_case pf[] = {
      {3, 8000, 512, 0, 1, 0},  {2, 8000, 512, 11, 1, 0}, {2, 8000, 100, 12, 1, 0},
      {2, 6000, 64, 1, 1, 0},   {2, 6000, 64, 4, 1, 0},   {2, 6000, 64, 3, 1, 0},
      {2, 6000, 300, 9, 1, 0},  {2, 400, 512, 0, 1, 0},   {3, 8000, 512, 11, 1, 1},
      {2, 8000, 7, 5, 1, 1},
  };
  for (size_t i = 0; i < sizeof pf / sizeof pf[0]; i++) run_prefill(&pf[i]);
  const dc_case dc[] = {{2, 1, 20000, 512, 1, 0, 1, 0}, {1, 2, 20000, 512, 2, 11, 1, 0},
                        {1, 1, 20000, 1, 1, 12, 1, 0}};
  for (size_t i = 0; i < sizeof dc / sizeof dc[0]; i++) run_decode(&dc[i]);
}

/* The register kernels' counting sort (cl/topk.cl, sk: on GPUs
 * topk_rows_512, the few-row split's chunk kernel, decode; on CPU devices
 * every register kernel sorts so, in the same side room, since theirs stop
 * at 128 items): rows of 40000 columns split (the library's pick and
 * "split" forced; the last chunk shorter), checked against the reference:
 * uniform rows, 64 levels with ties, an ascending row, NaN / -inf rows, a
 * tie-heavy bf16 family, k = 2048 (the side room's largest need, 4 p2
 * words), 300 and 1. */
static void test_rows_csort(void) {
  static const char *const algos[] = {NULL, "split"};
  const dc_case dc[] = {{1, 1, 40000, 512, 1, 0, 1, 0},  {1, 2, 40000, 512, 2, 11, 1, 0},
                        {1, 1, 40000, 512, 1, 12, 1, 1}, {2, 1, 40000, 300, 1, 4, 1, 0},
                        {1, 1, 40000, 2048, 1, 0, 1, 0}, {1, 1, 40000, 1, 1, 11, 1, 1},
                        {1, 1, 40000, 512, 1, 5, 1, 1}};
  for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
    use_topk_env(algos[a]);
    for (size_t i = 0; i < sizeof dc / sizeof dc[0]; i++) run_decode(&dc[i]);
  }
  use_topk_env(NULL);
}

static void test_sample(void) {
  static const char *const modes[] = {"fallback", "off"};
  /* PoCL builds lrow without the sampled select (src/op_topk.c): there
   * the three modes run the same kernel, and these two would repeat
   * test_forced's lrow pass; skipped. */
  const size_t nmodes = ctx->caps.vendor == DSA_VENDOR_POCL ? 0 : sizeof modes / sizeof modes[0];
  for (size_t mo = 0; mo < nmodes; mo++) {
    setenv("DSACL_TOPK_SAMPLE", modes[mo], 1);
    use_topk_env("lrow");
    sample_cases();
  }
  unsetenv("DSACL_TOPK_SAMPLE");
  use_topk_env(NULL);
  /* An unknown value is refused when the context is made. */
  check_bad_env("DSACL_TOPK_SAMPLE", "sometimes");
}

int main(void) {
  unsetenv("DSACL_TOPK"); /* the library's own pick first */
  unsetenv("DSACL_TOPK_SAMPLE");
  unsetenv("DSACL_TOPK_MERGE");
  dsa_test_open(&ctx, &q, 0);
  test_bad_args();
  test_events();
  test_prefill();
  test_decode();
  test_many_rows();
  test_forced();
  test_poisoned();
  test_sample();
  test_rows_csort();
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
