/* Index-building helpers (§10.1-10.5) against the C reference
 * (tests/ref/index_helpers.c): random shapes and edge cases (T = 0, 1, odd;
 * invalid tokens; -1 entries; windows larger than positions; ratio 1, 4,
 * 128; block sizes 64, 2, 1; strided rows; bad indices that fault), whole
 * output payloads compared (padding columns included), guard bands, fault
 * words, events, and >= 10 bad-argument classes per operator. */
#include "common.h"
#include "ref_index_helpers.h"

_Static_assert((int)REF_FAULT_SLOT_RANGE == (int)DSA_FAULT_SLOT_RANGE &&
                   (int)REF_FAULT_POSITION_RANGE == (int)DSA_FAULT_POSITION_RANGE &&
                   (int)REF_FAULT_INDEX_RANGE == (int)DSA_FAULT_INDEX_RANGE &&
                   (int)REF_FAULT_LENGTH_RANGE == (int)DSA_FAULT_LENGTH_RANGE,
               "fault bits");

static dsa_context *ctx;
static dsa_queue *q;
static uint64_t rng = 0x1DE7A11ull;

static int64_t rnd(int64_t n) { return n > 0 ? (int64_t)(dsa_test_rand(&rng) % (uint64_t)n) : 0; }

/* ---- device buffers: a pool released at the end of each case ------------------ */

#define MAXB 24
static guarded_buf pool[MAXB];
static int npool;

static guarded_buf *dev(const void *host, size_t bytes) {
  guarded_buf *b = &pool[npool++];
  /* An empty buffer still gets 4 bytes, but host holds none of them. */
  *b = gbuf_create(ctx, q, bytes ? bytes : 4, bytes ? host : NULL);
  return b;
}
static void pool_check_release(const char *what) {
  int ok = 1;
  for (int i = 0; i < npool; i++) ok &= gbuf_guards_ok(q, &pool[i]);
  CHECK(ok, "%s: guard band overwritten", what);
  for (int i = 0; i < npool; i++) gbuf_release(&pool[i]);
  npool = 0;
}
static dsa_tensor t1(const guarded_buf *b, dsa_dtype dt, int64_t n) {
  return dsa_tensor_make(b->mem, b->off, dt, 1, (int64_t[]){n});
}
static dsa_tensor t2(const guarded_buf *b, dsa_dtype dt, int64_t rows, int64_t cols, int64_t rs) {
  dsa_tensor t = dsa_tensor_make(b->mem, b->off, dt, 2, (int64_t[]){rows, cols});
  t.stride[0] = rs;
  return t;
}
/* Reads b and compares it with want (n bytes). */
static void compare(const guarded_buf *b, const void *want, size_t n, const char *what) {
  /* gbuf_read reads b->size bytes, which exceeds n for an empty buffer. */
  uint8_t *got = dsa_test_xmalloc(b->size > n ? b->size : n);
  gbuf_read(q, b, got);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++)
    if (got[i] != ((const uint8_t *)want)[i] && !bad++) first = i;
  CHECK(bad == 0, "%s: %zu bytes differ, first at byte %zu (element %zu)", what, bad, first,
        first / 4);
  free(got);
}

/* Random block table [r, w] (row stride rs); entries -1 with probability
 * neg/16. */
static int32_t *make_table(int64_t r, int64_t w, int64_t rs, int neg, int64_t maxblk) {
  int32_t *t = dsa_test_xmalloc((size_t)(r * rs + 1) * 4);
  dsa_test_fill_random(&rng, t, (size_t)(r * rs + 1) * 4);
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = 0; j < w; j++) t[i * rs + j] = rnd(16) < neg ? -1 : (int32_t)rnd(maxblk);
  return t;
}

/* ---- §10.1 ------------------------------------------------------------------------ */

static void run_slot_mapping(int64_t r, int32_t ratio, int32_t bs, int bad) {
  int32_t *qsl = dsa_test_xmalloc((size_t)(r + 1) * 4), *seq = dsa_test_xmalloc((size_t)(r + 1) * 4);
  qsl[0] = 0;
  int64_t maxc = 1;
  for (int64_t i = 0; i < r; i++) {
    int64_t ql = rnd(4) == 0 ? 0 : 1 + rnd(20);
    qsl[i + 1] = qsl[i] + (int32_t)ql;
    seq[i] = (int32_t)(ql + rnd(600));
    if (bad && rnd(5) == 0) seq[i] = (int32_t)rnd(ql + 1) - 1;
    int64_t c = (seq[i] + 1) / ratio + 1;
    if (c > maxc) maxc = c;
  }
  int64_t t = qsl[r] + rnd(3), w = (maxc + bs - 1) / bs - (bad ? rnd(2) : 0), brs = w + rnd(3);
  if (w < 0) w = 0;
  int32_t *bt = make_table(r, w, brs, bad ? 2 : 0, 5000);
  int64_t *out = dsa_test_xmalloc((size_t)t * 8 + 8), *want = dsa_test_xmalloc((size_t)t * 8 + 8);
  dsa_test_fill_random(&rng, out, (size_t)t * 8);
  guarded_buf *qb = dev(qsl, (size_t)(r + 1) * 4), *sb = dev(seq, (size_t)r * 4),
              *bb = dev(bt, (size_t)(r * brs + 1) * 4), *ob = dev(out, (size_t)t * 8);
  dsa_tensor qt = t1(qb, DSA_I32, r + 1), st = t1(sb, DSA_I32, r),
             btt = t2(bb, DSA_I32, r, w, brs), ot = t1(ob, DSA_I64, t);
  dsa_index_compressed_slot_mapping_params p;
  dsa_index_compressed_slot_mapping_params_default(&p);
  p.compress_ratio = ratio, p.block_size = bs;
  CHECK_OK(dsa_index_compressed_slot_mapping(q, &qt, &st, &btt, &ot, &p, NULL));
  uint32_t f = dsa_test_read_faults(q);
  unsigned wf = ref_compressed_slot_mapping(qsl, seq, (ref_table){bt, r, w, brs}, ratio, bs, want, t);
  compare(ob, want, (size_t)t * 8, "compressed_slot_mapping");
  CHECK(f == wf, "compressed_slot_mapping faults 0x%x want 0x%x", f, wf);
  pool_check_release("compressed_slot_mapping");
  free(qsl), free(seq), free(bt), free(out), free(want);
}

/* The example of vLLM's test (§10.1): ratio 4, block size 64, blocks [5, 7],
 * positions 240..279 -> slots 380..383 then 448..453 at every 4th token. */
static void test_slot_mapping_example(void) {
  int32_t qsl[2] = {0, 40}, seq[1] = {280}, bt[2] = {5, 7};
  int64_t out[40];
  guarded_buf *qb = dev(qsl, 8), *sb = dev(seq, 4), *bb = dev(bt, 8), *ob = dev(NULL, sizeof out);
  dsa_tensor qt = t1(qb, DSA_I32, 2), st = t1(sb, DSA_I32, 1), btt = t2(bb, DSA_I32, 1, 2, 2),
             ot = t1(ob, DSA_I64, 40);
  CHECK_OK(dsa_index_compressed_slot_mapping(q, &qt, &st, &btt, &ot, NULL, NULL));
  gbuf_read(q, ob, out);
  int ok = 1, k = 0;
  static const int64_t want[10] = {380, 381, 382, 383, 448, 449, 450, 451, 452, 453};
  for (int i = 0; i < 40; i++) ok &= out[i] == ((i + 1) % 4 == 0 ? want[k++] : -1);
  CHECK(ok, "compressed slot mapping: vLLM's example differs");
  pool_check_release("slot mapping example");
}

/* ---- §10.2 ------------------------------------------------------------------------ */

static void run_swa(int64_t t, int32_t window, int32_t bs, int bad, int use_valid) {
  int64_t r = 1 + rnd(5), w = 1 + rnd(12), brs = w + rnd(2);
  int32_t *bt = make_table(r, w, brs, bad ? 2 : 0, 1 << 20);
  int64_t *pos = dsa_test_xmalloc((size_t)t * 8 + 8);
  int32_t *t2r = dsa_test_xmalloc((size_t)t * 4 + 4);
  uint8_t *valid = dsa_test_xmalloc((size_t)t + 1);
  for (int64_t i = 0; i < t; i++) {
    int64_t k = rnd(6);
    pos[i] = k == 0 ? 0 : k == 1 ? rnd(window) : rnd(w * bs);
    if (bad && rnd(6) == 0) pos[i] = rnd(2) ? -1 - rnd(9) : w * bs + rnd(100);
    if (bad && rnd(30) == 0) pos[i] = (int64_t)1 << 40;
    t2r[i] = (int32_t)rnd(r);
    if (bad && rnd(8) == 0) t2r[i] = rnd(2) ? -1 : (int32_t)(r + rnd(3));
    valid[i] = (uint8_t)(rnd(5) != 0);
  }
  /* The API's rules: positions may be i32, and token_to_req may be omitted
   * (NULL: token t is request t, pure decode); the reference sees the same
   * values. */
  const int pos32 = rnd(3) == 0, no_t2r = rnd(3) == 0;
  int32_t *p32 = dsa_test_xmalloc((size_t)t * 4 + 4);
  for (int64_t i = 0; i < t; i++) {
    if (pos32) pos[i] = (int32_t)pos[i];
    p32[i] = (int32_t)pos[i];
    if (no_t2r) t2r[i] = (int32_t)i;
  }
  int64_t width = window + rnd(3), ors = width + rnd(3);
  size_t ob_bytes = (size_t)(t * ors) * 4 + 4;
  int32_t *out = dsa_test_xmalloc(ob_bytes), *want = dsa_test_xmalloc(ob_bytes), *lens = dsa_test_xmalloc((size_t)t * 4 + 4),
          *wlens = dsa_test_xmalloc((size_t)t * 4 + 4);
  dsa_test_fill_random(&rng, out, ob_bytes), dsa_test_fill_random(&rng, lens, (size_t)t * 4);
  memcpy(want, out, ob_bytes);
  guarded_buf *pb = pos32 ? dev(p32, (size_t)t * 4) : dev(pos, (size_t)t * 8),
              *rb = dev(t2r, (size_t)t * 4), *vb = dev(valid, (size_t)t),
              *bb = dev(bt, (size_t)(r * brs + 1) * 4), *ob = dev(out, ob_bytes),
              *lb = dev(lens, (size_t)t * 4);
  dsa_tensor pt = t1(pb, pos32 ? DSA_I32 : DSA_I64, t), rt = t1(rb, DSA_I32, t), vt = t1(vb, DSA_U8, t),
             btt = t2(bb, DSA_I32, r, w, brs), ot = t2(ob, DSA_I32, t, width, ors),
             lt = t1(lb, DSA_I32, t);
  dsa_index_swa_params p;
  dsa_index_swa_params_default(&p);
  p.window = window, p.block_size = bs;
  CHECK_OK(dsa_index_swa(q, &pt, no_t2r ? NULL : &rt, use_valid ? &vt : NULL, &btt, &ot, &lt, &p, NULL));
  uint32_t f = dsa_test_read_faults(q);
  unsigned wf = ref_swa_indices(pos, t2r, use_valid ? valid : NULL, (ref_table){bt, r, w, brs},
                                window, bs, want, width, ors, wlens, t);
  compare(ob, want, ob_bytes, "swa_indices");
  compare(lb, wlens, (size_t)t * 4, "swa_indices lens");
  CHECK(f == wf, "swa_indices faults 0x%x want 0x%x (t=%lld bad=%d pos32=%d no_t2r=%d)", f, wf,
        (long long)t, bad, pos32, no_t2r);
  pool_check_release("swa_indices");
  free(p32), free(bt), free(pos), free(t2r), free(valid), free(out), free(want), free(lens), free(wlens);
}

/* ---- §10.3 ------------------------------------------------------------------------ */

static void run_global_topk(int64_t t, int64_t k, int32_t bs, int bad, int variant) {
  int64_t r = 1 + rnd(5), w = 1 + rnd(10), brs = w + rnd(2);
  int32_t *bt = make_table(r, w, brs, bad ? 2 : 0, 1 << 24);
  int64_t krs = k + rnd(3);
  int32_t *tk = dsa_test_xmalloc((size_t)(t * krs) * 4 + 4), *t2r = dsa_test_xmalloc((size_t)t * 4 + 4);
  uint8_t *valid = dsa_test_xmalloc((size_t)t + 1);
  dsa_test_fill_random(&rng, tk, (size_t)(t * krs) * 4);
  for (int64_t i = 0; i < t; i++) {
    int64_t n = rnd(k + 1);
    for (int64_t j = 0; j < k; j++) {
      int32_t v = j < n ? (int32_t)rnd(w * bs) : -1;
      if (rnd(20) == 0) v = -1 - (int32_t)rnd(5); /* -1 inside the valid part */
      if (bad && rnd(20) == 0) v = (int32_t)(w * bs + rnd(1000));
      tk[i * krs + j] = v;
    }
    t2r[i] = (int32_t)rnd(r);
    if (bad && rnd(8) == 0) t2r[i] = rnd(2) ? -2 : (int32_t)r;
    valid[i] = (uint8_t)(rnd(4) != 0);
  }
  const int in_place = variant == 1, with_lens = variant != 2, with_valid = variant != 3;
  /* token_to_req omitted (NULL: token t is request t) in a third of the calls. */
  const int no_t2r = rnd(3) == 0;
  if (no_t2r)
    for (int64_t i = 0; i < t; i++) t2r[i] = (int32_t)i;
  int64_t ors = in_place ? krs : k + rnd(3);
  size_t ob_bytes = (size_t)(t * ors) * 4 + 4;
  int32_t *out = dsa_test_xmalloc(ob_bytes), *want = dsa_test_xmalloc(ob_bytes), *lens = dsa_test_xmalloc((size_t)t * 4 + 4),
          *wlens = dsa_test_xmalloc((size_t)t * 4 + 4);
  if (in_place) memcpy(out, tk, ob_bytes);
  else dsa_test_fill_random(&rng, out, ob_bytes);
  dsa_test_fill_random(&rng, lens, (size_t)t * 4);
  memcpy(want, out, ob_bytes), memcpy(wlens, lens, (size_t)t * 4);
  guarded_buf *kb = dev(tk, (size_t)(t * krs) * 4 + 4), *rb = dev(t2r, (size_t)t * 4),
              *vb = dev(valid, (size_t)t), *bb = dev(bt, (size_t)(r * brs + 1) * 4),
              *ob = in_place ? kb : dev(out, ob_bytes), *lb = dev(lens, (size_t)t * 4);
  dsa_tensor kt = t2(kb, DSA_I32, t, k, krs), rt = t1(rb, DSA_I32, t), vt = t1(vb, DSA_U8, t),
             btt = t2(bb, DSA_I32, r, w, brs), ot = t2(ob, DSA_I32, t, k, ors),
             lt = t1(lb, DSA_I32, t);
  dsa_index_global_topk_params p;
  dsa_index_global_topk_params_default(&p);
  p.block_size = bs;
  CHECK_OK(dsa_index_global_topk(q, &kt, no_t2r ? NULL : &rt, &btt, with_valid ? &vt : NULL, &ot,
                                   with_lens ? &lt : NULL, &p, NULL));
  uint32_t f = dsa_test_read_faults(q);
  unsigned wf = ref_global_topk(tk, k, krs, t2r, (ref_table){bt, r, w, brs},
                                with_valid ? valid : NULL, bs, want, ors,
                                with_lens ? wlens : NULL, t);
  compare(ob, want, ob_bytes, "global_topk");
  compare(lb, wlens, (size_t)t * 4, "global_topk lens");
  CHECK(f == wf, "global_topk faults 0x%x want 0x%x", f, wf);
  pool_check_release("global_topk");
  free(bt), free(tk), free(t2r), free(valid), free(out), free(want), free(lens), free(wlens);
}

static void run_c128(int64_t t, int64_t k, int32_t ratio, int32_t bs, int global, int bad) {
  int64_t r = 1 + rnd(4), w = (k + bs - 1) / bs + rnd(2) - (bad ? rnd(2) : 0), brs = w + 1;
  if (w < 1) w = 1, brs = 2;
  int32_t *bt = make_table(r, w, brs, bad ? 2 : 0, 1 << 20);
  int64_t *pos = dsa_test_xmalloc((size_t)t * 8 + 8);
  int32_t *t2r = dsa_test_xmalloc((size_t)t * 4 + 4);
  uint8_t *valid = dsa_test_xmalloc((size_t)t + 1);
  for (int64_t i = 0; i < t; i++) {
    pos[i] = rnd(3) == 0 ? rnd(ratio * 2) : rnd((k + 3) * ratio);
    if (bad && rnd(8) == 0) pos[i] = -1 - rnd(3);
    t2r[i] = (int32_t)rnd(r);
    if (bad && rnd(8) == 0) t2r[i] = (int32_t)(r + 1);
    valid[i] = (uint8_t)(rnd(4) != 0);
  }
  /* The API's rules: positions may be i32, and token_to_req may be omitted
   * (NULL: token t is request t, pure decode); the reference sees the same
   * values. */
  const int pos32 = rnd(3) == 0, no_t2r = rnd(3) == 0;
  int32_t *p32 = dsa_test_xmalloc((size_t)t * 4 + 4);
  for (int64_t i = 0; i < t; i++) {
    if (pos32) pos[i] = (int32_t)pos[i];
    p32[i] = (int32_t)pos[i];
    if (no_t2r) t2r[i] = (int32_t)i;
  }
  int64_t ors = k + rnd(2);
  size_t ob_bytes = (size_t)(t * ors) * 4 + 4;
  int32_t *out = dsa_test_xmalloc(ob_bytes), *want = dsa_test_xmalloc(ob_bytes), *lens = dsa_test_xmalloc((size_t)t * 4 + 4),
          *wlens = dsa_test_xmalloc((size_t)t * 4 + 4);
  dsa_test_fill_random(&rng, out, ob_bytes), dsa_test_fill_random(&rng, lens, (size_t)t * 4);
  memcpy(want, out, ob_bytes), memcpy(wlens, lens, (size_t)t * 4);
  guarded_buf *pb = pos32 ? dev(p32, (size_t)t * 4) : dev(pos, (size_t)t * 8),
              *rb = dev(t2r, (size_t)t * 4), *vb = dev(valid, (size_t)t),
              *bb = dev(bt, (size_t)(r * brs + 1) * 4), *ob = dev(out, ob_bytes),
              *lb = dev(lens, (size_t)t * 4);
  dsa_tensor pt = t1(pb, pos32 ? DSA_I32 : DSA_I64, t), rt = t1(rb, DSA_I32, t), vt = t1(vb, DSA_U8, t),
             btt = t2(bb, DSA_I32, r, w, brs), ot = t2(ob, DSA_I32, t, k, ors),
             lt = t1(lb, DSA_I32, t);
  dsa_index_c128_topk_params p;
  dsa_index_c128_topk_params_default(&p);
  p.compress_ratio = ratio, p.block_size = bs;
  CHECK_OK(dsa_index_c128_topk(q, &pt, global && !no_t2r ? &rt : NULL, global ? &btt : NULL, &vt, &ot, &lt,
                                 &p, NULL));
  uint32_t f = dsa_test_read_faults(q);
  ref_table rtb = {global ? bt : NULL, r, w, brs};
  unsigned wf = ref_c128_topk(pos, t2r, rtb, valid, ratio, bs, want, k, ors, wlens, t);
  compare(ob, want, ob_bytes, "c128_topk");
  compare(lb, wlens, (size_t)t * 4, "c128_topk lens");
  CHECK(f == wf, "c128_topk faults 0x%x want 0x%x (pos32=%d no_t2r=%d)", f, wf, pos32, no_t2r);
  pool_check_release("c128_topk");
  free(p32), free(bt), free(pos), free(t2r), free(valid), free(out), free(want), free(lens), free(wlens);
}

/* ---- §10.4 ------------------------------------------------------------------------ */

static void run_combine(int64_t r, int32_t window, int32_t ratio, int32_t topk, int bad) {
  int32_t *qsl = dsa_test_xmalloc((size_t)(r + 1) * 4), *seq = dsa_test_xmalloc((size_t)r * 4 + 4),
          *gl = dsa_test_xmalloc((size_t)r * 4 + 4);
  qsl[0] = rnd(2) ? 0 : (int32_t)rnd(1000); /* rebased by the operator */
  for (int64_t i = 0; i < r; i++) {
    int64_t ql = rnd(5) == 0 ? 0 : 1 + rnd(12), prefix = rnd(3) == 0 ? rnd(4) : rnd(3000);
    qsl[i + 1] = qsl[i] + (int32_t)ql;
    seq[i] = (int32_t)(ql + prefix);
    gl[i] = (int32_t)(ql + (prefix < window - 1 ? prefix : window - 1));
    if (bad && rnd(5) == 0) gl[i] -= (int32_t)(1 + rnd(5));
    if (bad && rnd(8) == 0) seq[i] = (int32_t)rnd(ql + 1) - 1;
  }
  int64_t t = qsl[r] - qsl[0] + rnd(3);
  int64_t n = 1 + rnd(2048), m = n + window + rnd(64);
  if (bad && rnd(2)) m = (int64_t)1 << 30;
  int64_t kw = topk + rnd(3);
  int32_t *tk = dsa_test_xmalloc((size_t)(t * kw) * 4 + 4);
  for (int64_t i = 0; i < t * kw; i++) tk[i] = rnd(30) == 0 ? -1 : (int32_t)rnd(n);
  int64_t width = (topk + window + 127) / 128 * 128 + rnd(2), ors = width + rnd(2);
  size_t ob_bytes = (size_t)(t * ors) * 4 + 4;
  int32_t *out = dsa_test_xmalloc(ob_bytes), *want = dsa_test_xmalloc(ob_bytes), *lens = dsa_test_xmalloc((size_t)t * 4 + 4),
          *wlens = dsa_test_xmalloc((size_t)t * 4 + 4);
  dsa_test_fill_random(&rng, out, ob_bytes);
  memcpy(want, out, ob_bytes);
  guarded_buf *kb = dev(tk, (size_t)(t * kw) * 4 + 4), *qb = dev(qsl, (size_t)(r + 1) * 4),
              *sb = dev(seq, (size_t)r * 4), *gb = dev(gl, (size_t)r * 4), *ob = dev(out, ob_bytes),
              *lb = dev(lens, (size_t)t * 4);
  dsa_tensor kt = t2(kb, DSA_I32, t, topk, kw), qt = t1(qb, DSA_I32, r + 1),
             st = t1(sb, DSA_I32, r), gt = t1(gb, DSA_I32, r), ot = t2(ob, DSA_I32, t, width, ors),
             lt = t1(lb, DSA_I32, t);
  dsa_index_combine_topk_swa_params p;
  dsa_index_combine_topk_swa_params_default(&p);
  p.window = window, p.compress_ratio = ratio, p.topk = topk, p.M = m, p.N = n;
  CHECK_OK(dsa_index_combine_topk_swa(q, topk || rnd(2) ? &kt : NULL, &qt, &st, &gt, &ot, &lt, &p, NULL));
  uint32_t f = dsa_test_read_faults(q);
  unsigned wf = ref_combine_topk_swa(tk, kw, qsl, seq, gl, r, window, ratio, topk, m, n, want,
                                     width, ors, wlens, t);
  compare(ob, want, ob_bytes, "combine_topk_swa");
  compare(lb, wlens, (size_t)t * 4, "combine_topk_swa lens");
  CHECK(f == wf, "combine_topk_swa faults 0x%x want 0x%x (bad=%d)", f, wf, bad);
  pool_check_release("combine_topk_swa");
  free(qsl), free(seq), free(gl), free(tk), free(out), free(want), free(lens), free(wlens);
}

/* ---- §10.5 ------------------------------------------------------------------------ */

static void run_mixed(int64_t rd, int64_t rp, int32_t window, int32_t topk, int64_t kd, int local,
                      int bad) {
  const int64_t r = rd + rp;
  const int32_t sbs = rnd(2) ? 64 : 2, cbs = rnd(2) ? 64 : 2, ratio = rnd(2) ? 4 : 128;
  int32_t *qsl = dsa_test_xmalloc((size_t)(r + 1) * 4), *seq = dsa_test_xmalloc((size_t)r * 4 + 4);
  int64_t maxseq = 1;
  for (int64_t i = 0; i < r; i++) {
    int64_t ql = i < rd ? 1 : 1 + rnd(9);
    qsl[i + 1] = qsl[i] + (int32_t)ql;
    seq[i] = (int32_t)(ql + rnd(900));
    if (bad && i >= rd && rnd(6) == 0) seq[i] = (int32_t)rnd(ql) - 1;
    if (seq[i] > maxseq) maxseq = seq[i];
  }
  const int64_t td = rd, t = qsl[r], tp = t - td;
  int32_t *t2r = dsa_test_xmalloc((size_t)t * 4 + 4);
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = qsl[i]; j < qsl[i + 1]; j++) t2r[j] = (int32_t)i;
  for (int64_t j = td; bad && j < t; j++)
    if (rnd(10) == 0) t2r[j] = rnd(2) ? -1 : (int32_t)(rnd(2) ? r : rnd(r));
  int64_t ws = (maxseq + sbs - 1) / sbs - (bad ? rnd(2) : 0), wc = (maxseq / ratio + cbs) / cbs;
  if (ws < 1) ws = 1;
  int32_t *sbt = make_table(r, ws, ws, bad ? 1 : 0, 5000), *cbt = make_table(r, wc, wc + 1, 0, 5000);
  int32_t *dswa = dsa_test_xmalloc((size_t)(td * window) * 4 + 4);
  dsa_test_fill_random(&rng, dswa, (size_t)(td * window) * 4);
  int64_t dk = kd ? kd : 1;
  int32_t *dci = dsa_test_xmalloc((size_t)(td * dk) * 4 + 4), *dl = dsa_test_xmalloc((size_t)td * 4 + 4);
  uint8_t *dv = dsa_test_xmalloc((size_t)td + 1);
  for (int64_t i = 0; i < td * dk; i++)
    dci[i] = rnd(4) == 0 ? -1 : local ? (int32_t)rnd(wc * cbs) : (int32_t)rnd(1 << 20);
  for (int64_t i = 0; i < td; i++) dl[i] = (int32_t)rnd(dk + 1), dv[i] = (uint8_t)(rnd(4) != 0);
  int64_t kp = topk ? topk - rnd(2) : 1 + rnd(3);
  int32_t *pti = dsa_test_xmalloc((size_t)(tp * kp) * 4 + 4);
  for (int64_t i = 0; i < tp * kp; i++) pti[i] = rnd(8) == 0 ? -1 : (int32_t)rnd(wc * cbs);
  int64_t pw = ((kd > topk ? kd : topk) + 3) / 4 * 4 + rnd(2), width = window + pw,
          ors = width + rnd(2);
  size_t ob_bytes = (size_t)(t * ors) * 4 + 4;
  int32_t *out = dsa_test_xmalloc(ob_bytes), *want = dsa_test_xmalloc(ob_bytes), *lens = dsa_test_xmalloc((size_t)t * 4 + 4),
          *wlens = dsa_test_xmalloc((size_t)t * 4 + 4);
  dsa_test_fill_random(&rng, out, ob_bytes);
  memcpy(want, out, ob_bytes);
  const int with_lens = !local && rnd(2), sep_cbt = rnd(3) != 0;
  guarded_buf *b_dswa = dev(dswa, (size_t)(td * window) * 4), *b_dci = dev(dci, (size_t)(td * dk) * 4),
              *b_dl = dev(dl, (size_t)td * 4), *b_dv = dev(dv, (size_t)td),
              *b_pti = dev(pti, (size_t)(tp * kp) * 4), *b_qsl = dev(qsl, (size_t)(r + 1) * 4),
              *b_seq = dev(seq, (size_t)r * 4), *b_t2r = dev(t2r, (size_t)t * 4),
              *b_sbt = dev(sbt, (size_t)(r * ws + 1) * 4),
              *b_cbt = dev(cbt, (size_t)(r * (wc + 1) + 1) * 4), *ob = dev(out, ob_bytes),
              *lb = dev(lens, (size_t)t * 4);
  dsa_tensor a_dswa = t2(b_dswa, DSA_I32, td, window, window), a_dci = t2(b_dci, DSA_I32, td, kd, dk),
             a_dl = t1(b_dl, DSA_I32, td), a_dv = t1(b_dv, DSA_U8, td),
             a_pti = t2(b_pti, DSA_I32, tp, kp, kp), a_qsl = t1(b_qsl, DSA_I32, r + 1),
             a_seq = t1(b_seq, DSA_I32, r), a_t2r = t1(b_t2r, DSA_I32, t),
             a_sbt = t2(b_sbt, DSA_I32, r, ws, ws), a_cbt = t2(b_cbt, DSA_I32, r, wc, wc + 1),
             ot = t2(ob, DSA_I32, t, width, ors), lt = t1(lb, DSA_I32, t);
  dsa_index_mixed_sparse_inputs in = {&a_dswa,  kd ? &a_dci : NULL, with_lens ? &a_dl : NULL,
                                &a_dv,    &a_pti,  &a_qsl, &a_seq, &a_t2r, &a_sbt,
                                sep_cbt ? &a_cbt : NULL};
  dsa_index_mixed_sparse_params p;
  dsa_index_mixed_sparse_params_default(&p);
  p.window = window, p.compress_ratio = ratio, p.topk = topk, p.swa_block_size = sbs;
  p.compressed_block_size = cbs, p.decode_compressed_local = local;
  CHECK_OK(dsa_index_mixed_sparse(q, &in, &ot, &lt, &p, NULL));
  uint32_t f = dsa_test_read_faults(q);
  ref_mixed rm = {dswa, window, kd ? dci : NULL, kd, dk, with_lens ? dl : NULL, dv, pti, kp, kp,
                  qsl, seq, r, t2r, (ref_table){sbt, r, ws, ws},
                  sep_cbt ? (ref_table){cbt, r, wc, wc + 1} : (ref_table){sbt, r, ws, ws},
                  td, tp, window, ratio, topk, sbs, sep_cbt ? cbs : cbs, local};
  if (!sep_cbt) rm.cbt = (ref_table){sbt, r, ws, ws};
  unsigned wf = ref_mixed_sparse(&rm, want, width, ors, wlens);
  compare(ob, want, ob_bytes, "mixed_sparse");
  compare(lb, wlens, (size_t)t * 4, "mixed_sparse lens");
  CHECK(f == wf, "mixed_sparse faults 0x%x want 0x%x (bad=%d)", f, wf, bad);
  pool_check_release("mixed_sparse");
  free(qsl), free(seq), free(t2r), free(sbt), free(cbt), free(dswa), free(dci), free(dl), free(dv);
  free(pti), free(out), free(want), free(lens), free(wlens);
}

static void test_random(void) {
  static const int32_t ratios[] = {1, 4, 128, 3}, bss[] = {64, 2, 1, 5};
  for (int it = 0; it < 14; it++)
    run_slot_mapping(rnd(7), ratios[rnd(4)], bss[rnd(4)], it % 2);
  run_slot_mapping(0, 4, 64, 0);
  static const int32_t windows[] = {128, 4, 1, 300};
  run_swa(1, 128, 64, 0, 1);
  run_swa(0, 128, 64, 0, 0);
  for (int it = 0; it < 14; it++)
    run_swa(1 + 2 * rnd(40), windows[rnd(4)], bss[rnd(3)], it % 2, (int)rnd(2));
  static const int64_t ks[] = {64, 512, 1, 7, 2048};
  run_global_topk(0, 64, 64, 0, 0);
  for (int it = 0; it < 14; it++)
    run_global_topk(1 + rnd(50), ks[rnd(5)], bss[rnd(3)], it % 2, (int)rnd(4));
  for (int it = 0; it < 12; it++)
    run_c128(rnd(30), 1 + rnd(300), rnd(2) ? 128 : 4, rnd(2) ? 2 : 64, (int)rnd(2), it % 2);
  static const int32_t topks[] = {512, 0, 64, 1024};
  for (int it = 0; it < 14; it++)
    run_combine(rnd(6), windows[rnd(3)], rnd(2) ? 4 : 128, topks[rnd(4)], it % 2);
  static const int64_t kds[] = {0, 64, 5, 100};
  for (int it = 0; it < 14; it++)
    run_mixed(rnd(6), rnd(5), rnd(2) ? 128 : 8, (int32_t)(rnd(2) ? 64 : rnd(3) * 7),
              kds[rnd(4)], (int)rnd(2), it % 2);
}

/* ---- bad arguments ------------------------------------------------------------------
 * Each operator's valid call is described by a list of tensors (name, whether
 * it may be NULL); the generic classes break one tensor at a time (NULL when
 * required, dtype, rank, past its buffer), then the operator's own cases
 * break scalars. Every broken call must return DSA_ERR_INVALID_ARGUMENT with
 * a message naming the argument, enqueue nothing and return no event. */

#define MAXT 12
typedef struct bcall {
  dsa_queue *q;
  dsa_tensor t[MAXT];
  const dsa_tensor *p[MAXT];
  dsa_events ev;
  union {
    dsa_index_compressed_slot_mapping_params slot;
    dsa_index_swa_params swa;
    dsa_index_global_topk_params gt;
    dsa_index_c128_topk_params c128;
    dsa_index_combine_topk_swa_params comb;
    dsa_index_mixed_sparse_params mix;
  } u;
  const void *pp;
  const struct bop *op; /* the operator under test */
} bcall;

typedef struct bop {
  const char *name;
  int nt;
  const char *tname[MAXT];
  int optional[MAXT];
  dsa_status (*call)(bcall *c);
  /* Scalar-breaking cases: returns 0 past the last; *w = word to find. */
  int (*brk)(bcall *c, int k, const char **w);
} bop;

static dsa_status call_slot(bcall *c) {
  return dsa_index_compressed_slot_mapping(c->q, c->p[0], c->p[1], c->p[2], c->p[3], c->pp, &c->ev);
}
static int brk_slot(bcall *c, int k, const char **w) {
  switch (k) {
    case 0: c->u.slot.compress_ratio = 0, *w = "compress_ratio"; return 1;
    case 1: c->u.slot.block_size = -3, *w = "block_size"; return 1;
    case 2: c->t[0].shape[0] += 1, *w = "query_start_loc"; return 1;
    case 3: c->t[1].shape[0] -= 1, *w = "seq_lens"; return 1;
    default: return 0;
  }
}
static dsa_status call_swa(bcall *c) {
  return dsa_index_swa(c->q, c->p[0], c->p[1], c->p[2], c->p[3], c->p[4], c->p[5], c->pp,
                         &c->ev);
}
static int brk_swa(bcall *c, int k, const char **w) {
  switch (k) {
    case 0: c->u.swa.window = 0, *w = "window"; return 1;
    case 1: c->u.swa.window = 1000, *w = "window"; return 1; /* wider than indices */
    case 2: c->u.swa.block_size = 0, *w = "block_size"; return 1;
    case 3: c->t[1].shape[0] -= 1, *w = "token_to_req"; return 1;
    case 4: c->t[5].shape[0] += 1, *w = "lens"; return 1;
    case 5: c->t[4].shape[0] -= 1, *w = "indices"; return 1;
    default: return 0;
  }
}
static dsa_status call_gt(bcall *c) {
  return dsa_index_global_topk(c->q, c->p[0], c->p[1], c->p[2], c->p[3], c->p[4], c->p[5],
                                 c->pp, &c->ev);
}
static int brk_gt(bcall *c, int k, const char **w) {
  switch (k) {
    case 0: c->u.gt.block_size = 0, *w = "block_size"; return 1;
    case 1: c->t[4].shape[1] -= 1, *w = "out"; return 1;
    case 2: c->t[1].shape[0] += 1, *w = "token_to_req"; return 1;
    case 3: c->t[3].shape[0] += 1, *w = "is_valid_token"; return 1;
    default: return 0;
  }
}
static dsa_status call_c128(bcall *c) {
  return dsa_index_c128_topk(c->q, c->p[0], c->p[1], c->p[2], c->p[3], c->p[4], c->p[5], c->pp,
                               &c->ev);
}
static int brk_c128(bcall *c, int k, const char **w) {
  switch (k) {
    case 0: c->u.c128.compress_ratio = 0, *w = "compress_ratio"; return 1;
    case 1: c->u.c128.block_size = 0, *w = "block_size"; return 1;
    case 2: c->t[1].shape[0] += 1, *w = "token_to_req"; return 1;
    case 3: c->t[4].shape[0] += 1, *w = "out"; return 1;
    default: return 0;
  }
}
static dsa_status call_comb(bcall *c) {
  return dsa_index_combine_topk_swa(c->q, c->p[0], c->p[1], c->p[2], c->p[3], c->p[4], c->p[5], c->pp,
                              &c->ev);
}
static int brk_comb(bcall *c, int k, const char **w) {
  switch (k) {
    case 0: c->u.comb.window = 0, *w = "window"; return 1;
    case 1: c->u.comb.compress_ratio = 0, *w = "compress_ratio"; return 1;
    case 2: c->u.comb.topk = -1, *w = "topk"; return 1;
    case 3: c->u.comb.M = -1, *w = "M"; return 1;
    case 4: c->u.comb.N = -5, *w = "N"; return 1;
    case 5: c->u.comb.topk = 40, *w = "topk"; return 1; /* wider than the topk tensor */
    case 6: c->t[4].shape[1] = 10, *w = "out"; return 1;
    case 7: c->p[0] = NULL, *w = "topk"; return 1;
    case 8: c->t[1].shape[0] += 1, *w = "query_start_loc"; return 1;
    case 9: c->t[3].shape[0] -= 1, *w = "gather_lens"; return 1;
    default: return 0;
  }
}
static dsa_status call_mix(bcall *c) {
  dsa_index_mixed_sparse_inputs in = {c->p[0], c->p[1], c->p[2], c->p[3], c->p[4],
                                c->p[5], c->p[6], c->p[7], c->p[8], c->p[9]};
  return dsa_index_mixed_sparse(c->q, &in, c->p[10], c->p[11], c->pp, &c->ev);
}
static int brk_mix(bcall *c, int k, const char **w) {
  switch (k) {
    case 0: c->u.mix.window = 0, *w = "window"; return 1;
    case 1: c->u.mix.window = 8, *w = "decode_swa_indices"; return 1;
    case 2: c->u.mix.compress_ratio = 0, *w = "compress_ratio"; return 1;
    case 3: c->u.mix.topk = -1, *w = "topk"; return 1;
    case 4: c->u.mix.swa_block_size = 0, *w = "swa_block_size"; return 1;
    case 5: c->u.mix.compressed_block_size = 0, *w = "compressed_block_size"; return 1;
    case 6: c->u.mix.decode_compressed_local = 2, *w = "decode_compressed_local"; return 1;
    case 7: c->p[3] = NULL, *w = "decode_is_valid_token"; return 1; /* local needs it */
    case 8: c->t[10].shape[1] = 20, *w = "out"; return 1; /* < window + topk */
    case 9: c->t[7].shape[0] = 2, *w = "token_to_req"; return 1;
    case 10: c->t[8].shape[0] += 1, *w = "swa_block_table"; return 1;
    default: return 0;
  }
}

static void bcall_point(void *vx) {
  bcall *c = vx;
  for (int i = 0; i < c->op->nt; i++) c->p[i] = c->p[i] ? &c->t[i] : NULL;
  c->pp = &c->u;
}

/* Case k: the queue, the events, then per tensor (4 cases each: NULL when
 * required, dtype, rank, past its buffer), then the operator's own cases. */
static int brk_all(void *vx, int k, const char **w, const char **w2) {
  bcall *c = vx;
  const bop *op = c->op;
  (void)w2;
  if (k == 0) return c->q = NULL, *w = "q", 1;
  if (k == 1) return c->ev.num_wait = 3, c->ev.wait = NULL, *w = "ev", 1;
  int g = k - 2, ti = g / 4, kind = g % 4;
  if (ti >= op->nt) return op->brk(c, g - 4 * op->nt, w);
  if (!c->p[ti] || (kind == 0 && op->optional[ti])) return -1;
  *w = op->tname[ti];
  if (kind == 0) c->p[ti] = NULL;
  else if (kind == 1) c->t[ti].dtype = c->t[ti].dtype == DSA_F32 ? DSA_I32 : DSA_F32;
  else if (kind == 2) c->t[ti].ndim = c->t[ti].ndim == 1 ? 2 : 1;
  else c->t[ti].offset += (size_t)1 << 30;
  return 1;
}

static dsa_status call_op(void *vx, cl_event *done) {
  bcall *c = vx;
  c->ev.done = done;
  return c->op->call(c);
}

static void run_bad(const bop *op, const bcall *base, guarded_buf *const *outs, int nouts) {
  bcall b = *base;
  b.op = op;
  const guarded_buf *o[4];
  for (int i = 0; i < nouts; i++) o[i] = outs[i];
  dsa_bad_args spec = {.op = op->name, .base = &b, .size = sizeof b, .reset = bcall_point,
                       .brk = brk_all, .call = call_op, .outs = o, .nouts = nouts,
                       .min_cases = 10};
  dsa_test_run_bad(q, &spec);
  dsa_test_read_faults(q);
}

static void test_bad_args(void) {
  const int64_t t = 6, r = 2, w = 4, k = 16;
  int32_t qsl[3] = {0, 3, 6}, seq[2] = {10, 20}, bt[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int32_t t2r[6] = {0, 0, 0, 1, 1, 1}, tk[6 * 16];
  int64_t pos[6] = {5, 6, 7, 17, 18, 19};
  uint8_t valid[6] = {1, 1, 1, 1, 0, 1};
  for (int i = 0; i < 6 * 16; i++) tk[i] = i % 5 == 4 ? -1 : i % 7;
  guarded_buf *bq = dev(qsl, sizeof qsl), *bs_ = dev(seq, sizeof seq), *bb = dev(bt, sizeof bt),
              *br = dev(t2r, sizeof t2r), *bp = dev(pos, sizeof pos), *bv = dev(valid, sizeof valid),
              *bk = dev(tk, sizeof tk), *bo = dev(NULL, 6 * 1024 * 4), *bl = dev(NULL, 6 * 4);
  bcall base;
  memset(&base, 0, sizeof base);
  base.q = q;

  /* §10.1 */
  bop op_slot = {"compressed_slot_mapping", 4, {"query_start_loc", "seq_lens", "block_table", "slot_mapping"},
                 {0}, call_slot, brk_slot};
  bcall c = base;
  c.t[0] = t1(bq, DSA_I32, 3), c.t[1] = t1(bs_, DSA_I32, 2), c.t[2] = t2(bb, DSA_I32, r, w, w);
  c.t[3] = t1(bo, DSA_I64, t);
  for (int i = 0; i < 4; i++) c.p[i] = &c.t[i];
  dsa_index_compressed_slot_mapping_params_default(&c.u.slot);
  c.u.slot.compress_ratio = 2, c.u.slot.block_size = 4;
  run_bad(&op_slot, &c, (guarded_buf *const[]){bo}, 1);

  /* §10.2 */
  bop op_swa = {"swa_indices", 6, {"positions", "token_to_req", "is_valid_token", "block_table", "indices", "lens"},
                {0, 1, 1, 0, 0, 0}, call_swa, brk_swa};
  c = base;
  c.t[0] = t1(bp, DSA_I64, t), c.t[1] = t1(br, DSA_I32, t), c.t[2] = t1(bv, DSA_U8, t);
  c.t[3] = t2(bb, DSA_I32, r, w, w), c.t[4] = t2(bo, DSA_I32, t, 8, 8), c.t[5] = t1(bl, DSA_I32, t);
  for (int i = 0; i < 6; i++) c.p[i] = &c.t[i];
  dsa_index_swa_params_default(&c.u.swa);
  c.u.swa.window = 8, c.u.swa.block_size = 8;
  run_bad(&op_swa, &c, (guarded_buf *const[]){bo, bl}, 2);

  /* §10.3 */
  bop op_gt = {"global_topk_indices", 6, {"topk_local", "token_to_req", "block_table", "is_valid_token", "out", "lens"},
               {0, 1, 0, 1, 0, 1}, call_gt, brk_gt};
  c = base;
  c.t[0] = t2(bk, DSA_I32, t, k, k), c.t[1] = t1(br, DSA_I32, t), c.t[2] = t2(bb, DSA_I32, r, w, w);
  c.t[3] = t1(bv, DSA_U8, t), c.t[4] = t2(bo, DSA_I32, t, k, k), c.t[5] = t1(bl, DSA_I32, t);
  for (int i = 0; i < 6; i++) c.p[i] = &c.t[i];
  dsa_index_global_topk_params_default(&c.u.gt);
  c.u.gt.block_size = 2;
  run_bad(&op_gt, &c, (guarded_buf *const[]){bo, bl}, 2);

  /* C128 */
  bop op_c128 = {"c128_topk_indices", 6, {"positions", "token_to_req", "block_table", "is_valid_token", "out", "lens"},
                 {0, 1, 1, 1, 0, 1}, call_c128, brk_c128};
  c = base;
  c.t[0] = t1(bp, DSA_I64, t), c.t[1] = t1(br, DSA_I32, t), c.t[2] = t2(bb, DSA_I32, r, w, w);
  c.t[3] = t1(bv, DSA_U8, t), c.t[4] = t2(bo, DSA_I32, t, k, k), c.t[5] = t1(bl, DSA_I32, t);
  for (int i = 0; i < 6; i++) c.p[i] = &c.t[i];
  dsa_index_c128_topk_params_default(&c.u.c128);
  c.u.c128.compress_ratio = 2;
  run_bad(&op_c128, &c, (guarded_buf *const[]){bo, bl}, 2);

  /* §10.4 */
  bop op_comb = {"combine_topk_swa", 6, {"topk", "query_start_loc", "seq_lens", "gather_lens", "out", "lens"},
                 {0}, call_comb, brk_comb};
  c = base;
  c.t[0] = t2(bk, DSA_I32, t, k, k), c.t[1] = t1(bq, DSA_I32, 3), c.t[2] = t1(bs_, DSA_I32, 2);
  c.t[3] = t1(bs_, DSA_I32, 2), c.t[4] = t2(bo, DSA_I32, t, 128, 128), c.t[5] = t1(bl, DSA_I32, t);
  for (int i = 0; i < 6; i++) c.p[i] = &c.t[i];
  dsa_index_combine_topk_swa_params_default(&c.u.comb);
  c.u.comb.window = 16, c.u.comb.topk = 16, c.u.comb.M = 100, c.u.comb.N = 20;
  run_bad(&op_comb, &c, (guarded_buf *const[]){bo, bl}, 2);

  /* §10.5: 2 decode tokens (requests 0, 1), 4 prefill tokens (request 2). */
  int32_t mqsl[4] = {0, 1, 2, 6}, mseq[3] = {30, 40, 50}, mt2r[6] = {0, 1, 2, 2, 2, 2};
  int32_t mbt[3 * 4] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  guarded_buf *mq = dev(mqsl, sizeof mqsl), *ms = dev(mseq, sizeof mseq), *mr = dev(mt2r, sizeof mt2r),
              *mb = dev(mbt, sizeof mbt);
  bop op_mix = {"mixed_sparse_indices", 12,
                {"decode_swa_indices", "decode_compressed_indices", "decode_compressed_lens",
                 "decode_is_valid_token", "prefill_topk_indices", "query_start_loc", "seq_lens",
                 "token_to_req", "swa_block_table", "compressed_block_table", "out", "lens"},
                {0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0}, call_mix, brk_mix};
  c = base;
  c.t[0] = t2(bk, DSA_I32, 2, 16, 16), c.t[1] = t2(bk, DSA_I32, 2, 8, 16);
  c.t[2] = t1(bl, DSA_I32, 2), c.t[3] = t1(bv, DSA_U8, 2), c.t[4] = t2(bk, DSA_I32, 4, 8, 16);
  c.t[5] = t1(mq, DSA_I32, 4), c.t[6] = t1(ms, DSA_I32, 3), c.t[7] = t1(mr, DSA_I32, 6);
  c.t[8] = t2(mb, DSA_I32, 3, 4, 4), c.t[9] = t2(mb, DSA_I32, 3, 4, 4);
  c.t[10] = t2(bo, DSA_I32, 6, 24, 24), c.t[11] = t1(bl, DSA_I32, 6);
  for (int i = 0; i < 12; i++) c.p[i] = i == 2 ? NULL : &c.t[i];
  dsa_index_mixed_sparse_params_default(&c.u.mix);
  c.u.mix.window = 16, c.u.mix.topk = 8, c.u.mix.swa_block_size = 16;
  c.u.mix.compressed_block_size = 4, c.u.mix.decode_compressed_local = 1;
  run_bad(&op_mix, &c, (guarded_buf *const[]){bo, bl}, 2);
  pool_check_release("bad args");
}

/* T = 0 (and R = 0) calls complete and return events; a wait list is honoured. */
static void test_empty_and_events(void) {
  guarded_buf *b = dev(NULL, 4096);
  dsa_tensor e1 = t1(b, DSA_I32, 0), e64 = t1(b, DSA_I64, 0), e2 = t2(b, DSA_I32, 0, 8, 8),
             q1 = t1(b, DSA_I32, 1), tb = t2(b, DSA_I32, 0, 4, 4), ew = t2(b, DSA_I32, 0, 128, 128);
  cl_event d[6] = {0};
  dsa_events ev[6];
  for (int i = 0; i < 6; i++) ev[i] = (dsa_events){i ? 1 : 0, i ? &d[i - 1] : NULL, &d[i]};
  CHECK_OK(dsa_index_compressed_slot_mapping(q, &q1, &e1, &tb, &e64, NULL, &ev[0]));
  CHECK_OK(dsa_index_swa(q, &e64, &e1, NULL, &tb, &ew, &e1, NULL, &ev[1]));
  CHECK_OK(dsa_index_global_topk(q, &e2, &e1, &tb, NULL, &e2, &e1, NULL, &ev[2]));
  CHECK_OK(dsa_index_c128_topk(q, &e64, NULL, NULL, NULL, &e2, NULL, NULL, &ev[3]));
  dsa_index_combine_topk_swa_params cp;
  dsa_index_combine_topk_swa_params_default(&cp);
  cp.topk = 0;
  dsa_tensor ew2 = t2(b, DSA_I32, 0, 128, 128);
  CHECK_OK(dsa_index_combine_topk_swa(q, NULL, &q1, &e1, &e1, &ew2, &e1, &cp, &ev[4]));
  dsa_tensor ds = t2(b, DSA_I32, 0, 128, 128), pt = t2(b, DSA_I32, 0, 512, 512),
             mo = t2(b, DSA_I32, 0, 640, 640);
  dsa_index_mixed_sparse_inputs in = {&ds, NULL, NULL, NULL, &pt, &q1, &e1, &e1, &tb, NULL};
  CHECK_OK(dsa_index_mixed_sparse(q, &in, &mo, &e1, NULL, &ev[5]));
  for (int i = 0; i < 6; i++) {
    CHECK(d[i] != NULL, "empty call %d returned no event", i);
    if (!d[i]) continue;
    CHECK(clWaitForEvents(1, &d[i]) == CL_SUCCESS, "empty call %d: wait failed", i);
  }
  for (int i = 0; i < 6; i++)
    if (d[i]) clReleaseEvent(d[i]);
  pool_check_release("empty");
}

int main(void) {
  dsa_test_open(&ctx, &q, 0);
  test_bad_args();
  test_empty_and_events();
  test_slot_mapping_example();
  test_random();
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
