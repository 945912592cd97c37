/* Checks the C reference itself: against facts derived by hand from SPEC
 * (§2.1–2.3, §3.1, §8.1) and against the golden vectors vLLM produced on an
 * H200. If the reference reproduces the golden bytes, it can be trusted to
 * judge the kernels on shapes the golden vectors do not cover.
 *
 * Usage: test_ref_numerics [GOLDEN_DIR]  (else $DSACL_GOLDEN_DIR, else
 * ../shared/golden next to the source tree). */
#include "ref/ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* This test links only the reference library, so the reader comes in whole. */
#include "npy.h"

static int passed, failed;
#define CHECK(cond, ...)                                        \
  do {                                                          \
    if (cond) {                                                 \
      passed++;                                                 \
    } else {                                                    \
      failed++;                                                 \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);      \
      fprintf(stderr, __VA_ARGS__);                             \
      fprintf(stderr, "\n");                                    \
    }                                                           \
  } while (0)

#define ENC(x, want) \
  CHECK(ref_e4m3_encode(x) == (want), "e4m3(%a) = 0x%02X, want 0x%02X", (double)(x), \
        ref_e4m3_encode(x), (unsigned)(want))

static float f32_from_bits(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

static void test_bf16(void) {
  CHECK(ref_bf16_from_float(1.0f) == 0x3F80, "bf16(1)");
  CHECK(ref_bf16_from_float(-2.0f) == 0xC000, "bf16(-2)");
  CHECK(ref_bf16_from_float(-0.0f) == 0x8000, "bf16(-0)");
  /* Halfway cases go to the even significand. */
  CHECK(ref_bf16_from_float(1.0f + 0x1p-8f) == 0x3F80, "tie down to even");
  CHECK(ref_bf16_from_float(1.0f + 3 * 0x1p-8f) == 0x3F82, "tie up to even");
  CHECK(ref_bf16_from_float(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81, "above tie");
  CHECK(ref_bf16_from_float(f32_from_bits(0x7F7FFFFF)) == 0x7F80, "max float -> inf");
  CHECK(ref_bf16_from_float(INFINITY) == 0x7F80, "inf");
  uint16_t n = ref_bf16_from_float(NAN);
  CHECK((n & 0x7F80) == 0x7F80 && (n & 0x7F), "NaN stays NaN: 0x%04X", n);
  CHECK(ref_bf16_from_float(f32_from_bits(0x7F800001)) != 0x7F80, "sNaN not inf");
  /* bf16(1e-4): the MLA amax floor of §8.1. */
  CHECK(ref_bf16_to_float(ref_bf16_from_float(1e-4f)) == (float)REF_MLA_AMAX_FLOOR,
        "bf16(1e-4) = %.17g", (double)ref_bf16_to_float(ref_bf16_from_float(1e-4f)));
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = ref_bf16_to_float((uint16_t)h);
    if (!isnan(f) && ref_bf16_from_float(f) != h) bad++;
  }
  CHECK(bad == 0, "%d bf16 codes do not round-trip", bad);
}

static void test_e4m3(void) {
  ENC(448.0, 0x7E);
  ENC(464.0, 0x7E); /* the would-be midpoint to 480 */
  ENC(480.0, 0x7E);
  ENC(1e30, 0x7E);
  ENC(INFINITY, 0x7E);
  ENC(-INFINITY, 0xFE);
  ENC(-449.0, 0xFE);
  ENC(NAN, 0x7F);
  ENC(-NAN, 0x7F);
  ENC(0.0, 0x00);
  ENC(-0.0, 0x80);
  ENC(0x1p-10, 0x00);                 /* half the smallest subnormal: even */
  ENC(0x1p-10 * 1.0001, 0x01);
  ENC(-0x1p-10, 0x80);                /* the sign of a zero result is kept */
  ENC(-0x1p-11, 0x80);
  ENC(0x1p-9, 0x01);
  ENC(3 * 0x1p-10, 0x02);             /* tie between 1/8 and 2/8 of 2^-6 */
  ENC(5 * 0x1p-10, 0x02);             /* tie between 2/8 and 3/8 */
  ENC(7 * 0x1p-9, 0x07);              /* largest subnormal */
  ENC(15 * 0x1p-10, 0x08);            /* tie between 7/8·2^-6 and 2^-6 */
  ENC(1.0, 0x38);
  ENC(1.0625, 0x38);                  /* tie 1 / 1.125 -> even (1) */
  ENC(1.1875, 0x3A);                  /* tie 1.125 / 1.25 -> even (1.25) */
  ENC(1.0625 + 1e-9, 0x39);
  ENC(-1.5, 0xBC);
  ENC(240.0, 0x77);
  ENC(432.0, 0x7E);                   /* tie 416 / 448 -> even (448, m=6) */
  ENC(424.0, 0x7D);
  CHECK(ref_e4m3_decode(0x7E) == 448.0, "decode 0x7E");
  CHECK(ref_e4m3_decode(0x01) == 0x1p-9, "decode 0x01");
  CHECK(ref_e4m3_decode(0x08) == 0x1p-6, "decode 0x08");
  CHECK(ref_e4m3_decode(0xB8) == -1.0, "decode 0xB8");
  CHECK(signbit(ref_e4m3_decode(0x80)) && ref_e4m3_decode(0x80) == 0, "decode 0x80");
  CHECK(isnan(ref_e4m3_decode(0x7F)) && isnan(ref_e4m3_decode(0xFF)), "NaN codes");

  int bad = 0, badmid = 0;
  for (int c = 0; c < 256; c++) {
    if ((c & 0x7F) == 0x7F) continue;
    if (ref_e4m3_encode(ref_e4m3_decode((uint8_t)c)) != c) bad++;
    if ((c & 0x7F) == 0x7E) continue;
    /* Between two neighbours: the midpoint goes to the even code, anything
     * off the midpoint to the nearer one. */
    double lo = ref_e4m3_decode((uint8_t)c), hi = ref_e4m3_decode((uint8_t)(c + 1));
    double mid = (lo + hi) / 2, eps = fabs(hi - lo) / 64;
    int even = (c & 1) ? c + 1 : c;
    if (ref_e4m3_encode(mid) != even || ref_e4m3_encode(mid - copysign(eps, mid)) != c ||
        ref_e4m3_encode(mid + copysign(eps, mid)) != c + 1)
      badmid++;
  }
  CHECK(bad == 0, "%d e4m3 codes do not round-trip", bad);
  CHECK(badmid == 0, "%d e4m3 midpoints round wrongly", badmid);
}

static void test_ue8m0(void) {
  CHECK(ref_ue8m0_exponent(REF_MLA_AMAX_FLOOR, 448) == -22, "floor -> -22");
  CHECK(ref_ue8m0_exponent(REF_MLA_AMAX_FLOOR, 448) + 127 == 105, "floor byte 105");
  CHECK(ref_ue8m0_exponent(1.0, 448) == -8, "amax 1 -> -8");
  CHECK(ref_ue8m0_exponent(448, 448) == 0, "amax 448 -> 0");
  CHECK(ref_ue8m0_exponent(224, 448) == -1, "amax 224 -> -1");
  CHECK(ref_ue8m0_exponent(6, 6) == 0 && ref_ue8m0_exponent(6.0001, 6) == 1, "qmax 6");
  int bad = 0;
  for (int k = -40; k <= 110; k++) {
    double p = ldexp(448, k);
    /* 448 = 1.75·2^8: the bf16 neighbours are 1.7421875 and 1.7578125. */
    if (ref_ue8m0_exponent(p, 448) != k) bad++;
    if (ref_ue8m0_exponent(ldexp(1.7578125, 8 + k), 448) != k + 1) bad++;
    if (ref_ue8m0_exponent(ldexp(1.7421875, 8 + k), 448) != k) bad++;
    if (ref_ue8m0_exponent(nextafter(p, INFINITY), 448) != k + 1) bad++;
    if (ref_ue8m0_exponent(nextafter(p, 0), 448) != k) bad++;
    if (ref_ue8m0_exponent(ldexp(1.0, 8 + k), 448) != k) bad++;
    if (ref_ue8m0_exponent(ldexp(1.9921875, 8 + k), 448) != k + 1) bad++;
  }
  CHECK(bad == 0, "%d power-of-two edge exponents wrong", bad);
  CHECK(ref_ue8m0_exponent(ldexp(1.9921875, 127), 448) == 120, "max bf16 -> 120 (byte 247)");
}

static void test_mla_quantize(void) {
  uint16_t k[512];
  uint8_t tok[REF_MLA_TOKEN_BYTES];
  memset(k, 0, sizeof k);
  for (int d = 64; d < 128; d++) k[d] = 0x8000; /* -0.0 block */
  for (int i = 0; i < 64; i++) k[448 + i] = (uint16_t)(0x1234 + 0x101 * i);
  k[130] = ref_bf16_from_float(448.0f * 8); /* exact power-of-two amax: e = 3 */
  k[131] = ref_bf16_from_float(-448.0f);
  k[200] = ref_bf16_from_float(NAN);        /* ignored by amax */
  k[201] = ref_bf16_from_float(1.0f);
  k[300] = ref_bf16_from_float(ldexp(1.7578125f, 11)); /* next bf16 above 448·8 */
  ref_mla_quantize(k, tok);
  const uint8_t *sc = tok + 576;
  CHECK(sc[0] == 105 && sc[1] == 105 && sc[5] == 105 && sc[6] == 105, "zero blocks: 105");
  CHECK(sc[7] == 0, "scale byte 7 is 0");
  CHECK(tok[0] == 0x00 && tok[64] == 0x80 && tok[127] == 0x80, "±0 data");
  CHECK(sc[2] == 130 && tok[130] == 0x7E && tok[131] == 0xE6, "448·8 block: %u %02X %02X",
        sc[2], tok[130], tok[131]); /* -448/8 = -56 = -1.75·2^5 */
  CHECK(sc[3] == 127 - 8 && tok[200] == 0x7F && tok[201] == 0x78,
        "NaN block: %u %02X %02X", sc[3], tok[200], tok[201]); /* 1·2^8 = 256 = 0x78 */
  CHECK(sc[4] == 131 && tok[300] == 0x76, "above 448·8: %u %02X", sc[4], tok[300]); /* 225 -> 224 */
  CHECK(tok[448] == 0x34 && tok[449] == 0x12 && tok[575] == (uint8_t)((0x1234 + 0x101 * 63) >> 8),
        "rope bytes little-endian");

  /* Layout addresses (§3.1) with a non-default block size and stride. */
  ref_mla_cache c = {NULL, 10, 3, 2000};
  CHECK(ref_mla_data_offset(&c, 7) == 2 * 2000 + 576, "data offset");
  CHECK(ref_mla_scale_offset(&c, 7) == 2 * 2000 + 3 * 576 + 8, "scale offset");
  ref_mla_cache big = {NULL, 1 << 20, 64, 1000000};
  CHECK(ref_mla_data_offset(&big, 64LL * 500000 + 1) == 500000ULL * 1000000 + 576,
        "64-bit offset");
}

/* ---- golden vectors ------------------------------------------------------ */

static int load(const char *dir, const char *name, npy_array *a) {
  char path[1200], err[256];
  snprintf(path, sizeof path, "%s/%s.npy", dir, name);
  if (npy_load(path, a, err, sizeof err)) {
    CHECK(0, "%s", err);
    return -1;
  }
  return 0;
}

static void compare_bytes(const char *what, const void *got, const void *want, size_t n) {
  const uint8_t *g = got, *w = want;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++)
    if (g[i] != w[i] && !bad++) first = i;
  CHECK(bad == 0, "%s: %zu of %zu bytes differ, first at %zu: got 0x%02X want 0x%02X", what,
        bad, n, first, bad ? g[first] : 0, bad ? w[first] : 0);
}

static int cache_meta(const char *dir, ref_mla_cache *c) {
  char path[1200], err[256];
  npy_meta m;
  snprintf(path, sizeof path, "%s/meta.txt", dir);
  if (npy_meta_load(path, &m, err, sizeof err)) {
    CHECK(0, "%s", err);
    return -1;
  }
  int64_t bs = 0;
  int rc = npy_meta_i64(&m, "num_blocks", &c->num_blocks) |
           npy_meta_i64(&m, "block_size", &bs) |
           npy_meta_i64(&m, "block_stride_bytes", &c->block_stride);
  c->block_size = (int32_t)bs;
  npy_meta_free(&m);
  CHECK(rc == 0, "%s: meta.txt lacks cache keys", dir);
  return rc;
}

static void golden_insert(const char *root) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/mla_cache_insert/n200", root);
  npy_array k, slots, cin, cout;
  ref_mla_cache c;
  if (cache_meta(dir, &c) || load(dir, "k", &k) || load(dir, "slot_mapping", &slots) ||
      load(dir, "cache_in", &cin) || load(dir, "cache_out", &cout))
    return;
  c.base = cin.data;
  CHECK(cin.nbytes == (size_t)(c.num_blocks * c.block_stride), "cache shape");
  unsigned f = ref_mla_insert(&c, k.data, k.shape[1], slots.data, slots.shape[0]);
  CHECK(f == 0, "golden insert faults %u", f);
  compare_bytes("golden mla_cache_insert", cin.data, cout.data, cout.nbytes);
  npy_free(&k), npy_free(&slots), npy_free(&cin), npy_free(&cout);
}

static void golden_slots(const char *root) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/dequant_gather_slots/n200", root);
  npy_array cache, idx, out;
  ref_mla_cache c;
  if (cache_meta(dir, &c) || load(dir, "cache", &cache) || load(dir, "indices", &idx) ||
      load(dir, "out", &out))
    return;
  c.base = cache.data;
  uint16_t *got = malloc(out.nbytes);
  unsigned f = ref_mla_gather_slots(&c, idx.data, idx.shape[0], got, 512);
  CHECK(f == 0, "golden gather_slots faults %u", f);
  compare_bytes("golden dequant_gather_slots", got, out.data, out.nbytes);
  free(got);
  npy_free(&cache), npy_free(&idx), npy_free(&out);
}

static void golden_paged(const char *root) {
  char dir[1024], path[1200], err[256];
  snprintf(dir, sizeof dir, "%s/dequant_gather_k_cache/n200", root);
  npy_array cache, seq, gl, bt, oin, out;
  ref_mla_cache c;
  npy_meta m;
  int64_t offset = 0;
  snprintf(path, sizeof path, "%s/meta.txt", dir);
  if (npy_meta_load(path, &m, err, sizeof err) == 0) {
    CHECK(npy_meta_i64(&m, "offset", &offset) == 0, "meta offset");
    npy_meta_free(&m);
  }
  if (cache_meta(dir, &c) || load(dir, "cache", &cache) || load(dir, "seq_lens", &seq) ||
      load(dir, "gather_lens", &gl) || load(dir, "block_table", &bt) ||
      load(dir, "out_in", &oin) || load(dir, "out", &out))
    return;
  c.base = cache.data;
  int64_t r = oin.shape[0], t = oin.shape[1];
  unsigned f = ref_mla_gather_paged(&c, seq.data, gl.data, bt.data, bt.shape[0], bt.shape[1],
                                    bt.shape[1], offset, oin.data, t, t * 512, 512);
  CHECK(f == 0 && r == seq.shape[0], "golden gather_paged faults %u", f);
  compare_bytes("golden dequant_gather_k_cache", oin.data, out.data, out.nbytes);
  npy_free(&cache), npy_free(&seq), npy_free(&gl), npy_free(&bt), npy_free(&oin),
      npy_free(&out);
}

static void test_npy_errors(void) {
  char err[256] = "";
  npy_array a;
  CHECK(npy_load("/nonexistent/x.npy", &a, err, sizeof err) == -1 && err[0],
        "missing file reported");
  const char *tmp = "/tmp/dsacl_ref_bad.npy";
  static const char bad_descr[] = "\x93NUMPY\x01\x00\x20\x00{'descr': '<f8', 'shape': (2,), }";
  static const char short_data[] =
      "\x93NUMPY\x01\x00\x3A\x00{'descr': '<i4', 'fortran_order': False, 'shape': (9,), }\n";
  const struct {
    const char *bytes, *want;
    size_t n;
  } cases[] = {{bad_descr, "descr", sizeof bad_descr - 1},
               {short_data, "truncated", sizeof short_data - 1},
               {short_data, "truncated", 30}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    FILE *f = fopen(tmp, "wb");
    if (!f) return;
    fwrite(cases[i].bytes, 1, cases[i].n, f);
    fclose(f);
    err[0] = 0;
    CHECK(npy_load(tmp, &a, err, sizeof err) == -1 && strstr(err, cases[i].want),
          "bad file %zu: '%s'", i, err);
  }
  remove(tmp);
}

static const char *golden_root(int argc, char **argv) {
  static char buf[512];
  if (argc > 1) return argv[1];
  const char *e = getenv("DSACL_GOLDEN_DIR");
  if (e && *e) return e;
  /* __FILE__ is the path the compiler was given (meson: relative to the
   * build directory, where tests run). */
  snprintf(buf, sizeof buf, "%s", __FILE__);
  char *slash = strrchr(buf, '/');
  if (!slash) return "../shared/golden";
  snprintf(slash, sizeof buf - (size_t)(slash - buf), "/../../shared/golden");
  return buf;
}

int main(int argc, char **argv) {
  test_bf16();
  test_e4m3();
  test_ue8m0();
  test_mla_quantize();
  test_npy_errors();
  const char *root = golden_root(argc, argv);
  char probe[1100];
  snprintf(probe, sizeof probe, "%s/README.md", root);
  FILE *f = fopen(probe, "r");
  if (f) {
    fclose(f);
    golden_insert(root);
    golden_slots(root);
    golden_paged(root);
  } else {
    fprintf(stderr, "note: no golden vectors at %s; golden checks skipped\n", root);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
