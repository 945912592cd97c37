/* dsa_indexer_k_insert / dsa_indexer_k_gather (FP8 132-B and MXFP4 68-B
 * indexer caches, both E2M1 modes) against the C reference in tests/ref on
 * randomized shapes, edge values, bad slots / lengths / block ids, guard
 * bands, bad arguments and events; and the reference against the golden
 * indexer_k_cache_fp8 vectors.
 *
 * Usage: test_indexer_k [GOLDEN_DIR] */
#include <math.h>
#include <stdarg.h>

#include "common.h"
#include "npy.h"
#include "ref_indexer_quant.h"

static dsa_context *ctx;
static dsa_queue *q;
static uint64_t rng = 0xC0FFEE12345ull;

static int64_t rnd(int64_t n) { return n > 0 ? (int64_t)(dsa_test_rand(&rng) % (uint64_t)n) : 0; }
static uint16_t bf16(double x) { return ref_bf16_from_float((float)x); }
static double gauss(void) {
  return (dsa_test_uniform(&rng) + dsa_test_uniform(&rng) + dsa_test_uniform(&rng) - 1.5) * 2;
}

static void make_row(uint16_t *r, int edge) {
  static const double scales[] = {1, 3000, 1e4, 1e-5, 1e-6, 1e30, 1e-30};
  for (int b = 0; b < 4; b++) {
    uint16_t *x = r + 32 * b;
    int kind = edge ? (int)rnd(8) : 7;
    int k = (int)rnd(60) - 40;
    for (int i = 0; i < 32; i++) {
      switch (kind) {
        case 0: x[i] = 0; break;
        case 1: x[i] = (uint16_t)(rnd(2) ? 0x8000 : 0); break;
        case 2: x[i] = (uint16_t)(rnd(0x80) | (rnd(2) << 15)); break;
        case 3: x[i] = bf16((rnd(2) ? -1 : 1) * ldexp((double)rnd(25), k - 2)); break;
        default: x[i] = bf16(gauss() * (kind == 7 ? 1 : scales[rnd(7)]));
      }
    }
    if (kind >= 3 && kind <= 5) {
      static const double tops[] = {1.75, 1.7578125, 1.5, 1.5078125, 1.4921875, 1.0};
      x[rnd(32)] = bf16((rnd(2) ? -1 : 1) * ldexp(tops[rnd(6)], k + 1));
    }
    if (kind == 6) x[rnd(32)] = 0x7FC0;
  }
}

static int64_t token_bytes(int mx) { return mx ? 68 : 132; }

typedef struct tcache {
  guarded_buf gb;
  uint8_t *img;
  size_t size, coff;
  ref_idx_cache ref;
  dsa_paged_cache dc;
} tcache;

static tcache cache_make(int mx, int64_t nb, int32_t bs, int stride_kind, size_t coff) {
  tcache t;
  int64_t page = bs * token_bytes(mx);
  int64_t stride = stride_kind == 0 ? page : stride_kind == 1 ? page + 1
                 : stride_kind == 2 ? (bs * 132 + 575) / 576 * 576 : page + 64 + rnd(100);
  t.coff = coff;
  t.size = coff + (size_t)(nb * stride);
  t.img = dsa_test_xmalloc(t.size);
  dsa_test_fill_random(&rng, t.img, t.size);
  t.ref = (ref_idx_cache){t.img + coff, nb, bs, stride, mx};
  t.gb = gbuf_create(ctx, q, t.size, t.img);
  t.dc = (dsa_paged_cache){.mem = t.gb.mem, .offset = t.gb.off + coff, .num_blocks = nb,
                           .block_size = bs, .block_stride = stride,
                           .format = mx ? DSA_CACHE_INDEXER_MXFP4 : DSA_CACHE_INDEXER_FP8};
  return t;
}
static void cache_free(tcache *t) {
  gbuf_release(&t->gb);
  free(t->img);
}

/* ---- insert ---------------------------------------------------------------------- */

static void run_insert(int mx, int mode, int64_t n, int64_t nb, int32_t bs, int sk, size_t coff,
                       int64_t kst, int bad, int edge) {
  tcache c = cache_make(mx, nb, bs, sk, coff);
  int64_t cap = nb * bs;
  int64_t *perm = dsa_test_xmalloc((size_t)(cap + 1) * 8), *slots = dsa_test_xmalloc((size_t)(n + 1) * 8);
  for (int64_t i = 0; i < cap; i++) perm[i] = i;
  for (int64_t i = cap - 1; i > 0; i--) {
    int64_t j = rnd(i + 1), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  int64_t used = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t r = rnd(10);
    if (r == 0) slots[i] = -1;
    else if (r == 1 && bad) slots[i] = -2 - rnd(1000);
    else if (r == 2 && bad) slots[i] = cap + rnd(3);
    else slots[i] = used < cap ? perm[used++] : -1;
  }
  size_t koff = (size_t)rnd(3), kbytes = (koff + (size_t)(n * kst) + 1) * 2;
  uint16_t *k = dsa_test_xmalloc(kbytes);
  dsa_test_fill_random(&rng, k, kbytes);
  for (int64_t i = 0; i < n; i++) make_row(k + koff + i * kst, edge);
  guarded_buf kb = gbuf_create(ctx, q, kbytes, k), sb = gbuf_create(ctx, q, (size_t)(n + 1) * 8, slots);
  dsa_tensor kt = {.mem = kb.mem, .offset = kb.off + koff * 2, .dtype = DSA_BF16, .ndim = 2,
                   .shape = {n, 128}, .stride = {kst, 1}};
  dsa_tensor st = dsa_tensor_make(sb.mem, sb.off, DSA_I64, 1, (int64_t[]){n});
  CHECK_OK(dsa_indexer_k_insert(q, &kt, &st, &c.dc, &(dsa_indexer_k_insert_params){.e2m1 = mode ? DSA_E2M1_LEGACY : DSA_E2M1_RNE}, NULL));
  uint32_t f = dsa_test_read_faults(q);
  unsigned want_f = ref_indexer_k_insert(&c.ref, k + koff, kst, slots, n, mode);
  uint8_t *got = dsa_test_xmalloc(c.size);
  gbuf_read(q, &c.gb, got);
  dsa_test_first_diff(got, c.img, c.size, "insert cache", "mx=%d mode=%d n=%lld nb=%lld bs=%d sk=%d coff=%zu kst=%lld",
             mx, mode, (long long)n, (long long)nb, bs, sk, coff, (long long)kst);
  CHECK(f == want_f, "insert faults 0x%x want 0x%x", f, want_f);
  CHECK(gbuf_guards_ok(q, &c.gb) && gbuf_guards_ok(q, &kb), "insert: guard overwritten");
  free(got), free(k), free(slots), free(perm);
  gbuf_release(&kb), gbuf_release(&sb);
  cache_free(&c);
}

static void test_insert(void) {
  static const int32_t bss[] = {1, 2, 3, 17, 64};
  for (int mx = 0; mx < 2; mx++) {
    run_insert(mx, 0, 1, 1, 1, 0, 0, 128, 0, 1);
    run_insert(mx, 1, 300, 16, 64, 0, 0, 128, 1, 1);
    run_insert(mx, 0, 77, 5, 17, 1, 3, 136, 1, 1);
    run_insert(mx, 1, 65, 2, 64, 2, 16, 129, 0, 1);
    run_insert(mx, 0, 9, 0, 4, 0, 0, 128, 1, 0); /* no blocks: every slot out of range */
    for (int it = 0; it < 6; it++)
      run_insert(mx, (int)rnd(2), rnd(3) ? 1 + rnd(200) : 1 + 2 * rnd(5), 1 + rnd(10), bss[rnd(5)],
                 (int)rnd(4), (size_t)rnd(2) * (1 + (size_t)rnd(40)), 128 + 8 * rnd(3) + rnd(2),
                 (int)rnd(2), (int)rnd(2));
  }
}

/* ---- gather ------------------------------------------------------------------------ */

static void run_gather(int mx, int64_t R, int64_t W, int64_t nb, int32_t bs, int sk, int bad) {
  tcache c = cache_make(mx, nb, bs, sk, (size_t)rnd(2) * 16);
  const int64_t vb = mx ? 64 : 128, bts1 = rnd(2) ? 1 : 2, bts0 = W * bts1 + rnd(3);
  int32_t *bt = dsa_test_xmalloc((size_t)(R * bts0 + 1) * 4);
  for (int64_t i = 0; i < R * bts0; i++)
    bt[i] = (int32_t)(bad && rnd(8) == 0 ? (rnd(2) ? -1 : nb + rnd(3)) : rnd(nb));
  const int64_t cus = rnd(2) ? 1 : 3;
  int32_t *cu = dsa_test_xmalloc((size_t)((R + 1) * cus) * 4);
  int64_t acc = bad && rnd(2) ? rnd(3) : 0;
  for (int64_t r = 0; r <= R; r++) {
    cu[r * cus] = (int32_t)acc;
    int64_t len = rnd(W * bs + 1);
    if (bad && rnd(5) == 0) len = W * bs + 1 + rnd(3); /* past its table row */
    acc += len;
  }
  if (bad && R > 2 && rnd(2)) cu[1 * cus] = cu[2 * cus] + 2; /* not non-decreasing */
  int64_t total = cu[R * cus] + (bad ? -(int64_t)rnd(3) : rnd(3));
  if (total < 0) total = 0;
  const int64_t ko_rs = vb + (rnd(2) ? 0 : 16 * rnd(2) + rnd(3)), ks_rs = mx ? 4 + rnd(3) : 1 + rnd(2);
  size_t kon = (size_t)(total * ko_rs) + 1, ksn = (size_t)(total * ks_rs * (mx ? 1 : 4)) + 4;
  uint8_t *ko = dsa_test_xmalloc(kon), *ks = dsa_test_xmalloc(ksn), *g = dsa_test_xmalloc(kon > ksn ? kon : ksn);
  dsa_test_fill_random(&rng, ko, kon), dsa_test_fill_random(&rng, ks, ksn);
  guarded_buf bb = gbuf_create(ctx, q, (size_t)(R * bts0 + 1) * 4, bt),
              cb = gbuf_create(ctx, q, (size_t)((R + 1) * cus) * 4, cu),
              kob = gbuf_create(ctx, q, kon, ko), ksb = gbuf_create(ctx, q, ksn, ks);
  dsa_tensor btt = {.mem = bb.mem, .offset = bb.off, .dtype = DSA_I32, .ndim = 2, .shape = {R, W},
                    .stride = {bts0, bts1}};
  dsa_tensor cut = {.mem = cb.mem, .offset = cb.off, .dtype = DSA_I32, .ndim = 1, .shape = {R + 1},
                    .stride = {cus}};
  dsa_tensor kot = {.mem = kob.mem, .offset = kob.off, .dtype = mx ? DSA_E2M1X2 : DSA_E4M3,
                    .ndim = 2, .shape = {total, vb}, .stride = {ko_rs, 1}};
  dsa_tensor kst = mx ? (dsa_tensor){.mem = ksb.mem, .offset = ksb.off, .dtype = DSA_UE8M0,
                                     .ndim = 2, .shape = {total, 4}, .stride = {ks_rs, 1}}
                      : (dsa_tensor){.mem = ksb.mem, .offset = ksb.off, .dtype = DSA_F32,
                                     .ndim = 1, .shape = {total}, .stride = {ks_rs}};
  CHECK_OK(dsa_indexer_k_gather(q, &cut, &btt, &c.dc, &kot, &kst, NULL, NULL));
  uint32_t f = dsa_test_read_faults(q);
  unsigned want_f = ref_indexer_k_gather(&c.ref, bt, R, W, bts0, bts1, cu, cus, total, ko, ko_rs, ks,
                                         ks_rs * (mx ? 1 : 4));
  gbuf_read(q, &kob, g);
  dsa_test_first_diff(g, ko, kon, "gather k_out", "mx=%d R=%lld W=%lld nb=%lld bs=%d total=%lld bad=%d", mx,
             (long long)R, (long long)W, (long long)nb, bs, (long long)total, bad);
  gbuf_read(q, &ksb, g);
  dsa_test_first_diff(g, ks, ksn, "gather k_scale", "mx=%d R=%lld bad=%d", mx, (long long)R, bad);
  CHECK(f == want_f, "gather faults 0x%x want 0x%x (mx=%d R=%lld bad=%d)", f, want_f, mx,
        (long long)R, bad);
  CHECK(gbuf_guards_ok(q, &kob) && gbuf_guards_ok(q, &ksb) && gbuf_guards_ok(q, &c.gb),
        "gather: guard overwritten");
  free(bt), free(cu), free(ko), free(ks), free(g);
  gbuf_release(&bb), gbuf_release(&cb), gbuf_release(&kob), gbuf_release(&ksb);
  cache_free(&c);
}

static void test_gather(void) {
  static const int32_t bss[] = {1, 2, 3, 17, 64};
  for (int mx = 0; mx < 2; mx++) {
    run_gather(mx, 1, 1, 1, 1, 0, 0);
    run_gather(mx, 3, 4, 9, 64, 0, 0);
    run_gather(mx, 5, 3, 6, 3, 1, 1);
    run_gather(mx, 4, 2, 4, 17, 2, 1);
    run_gather(mx, 3, 2, 0, 2, 0, 1); /* no blocks */
    for (int it = 0; it < 8; it++)
      run_gather(mx, 1 + rnd(6), 1 + rnd(5), 1 + rnd(8), bss[rnd(5)], (int)rnd(4), (int)rnd(2));
  }
}

/* ---- golden: the reference reproduces vLLM's cache bytes ------------------------------ */

static void test_golden(const char *root) {
  char dir[1024], p[1100], err[256];
  snprintf(dir, sizeof dir, "%s/indexer_k_cache_fp8/n300", root);
  npy_array k, s, ci, co;
  const char *names_[4] = {"k", "slot_mapping", "cache_in", "cache_out"};
  npy_array *arr[4] = {&k, &s, &ci, &co};
  for (int i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s/%s.npy", dir, names_[i]);
    if (npy_load(p, arr[i], err, sizeof err)) {
      CHECK(0, "golden %s: %s", p, err);
      return;
    }
  }
  ref_idx_cache c = {ci.data, ci.shape[0], 64, ci.shape[1], 0};
  CHECK(ref_indexer_k_insert(&c, k.data, 128, s.data, s.shape[0], 0) == 0, "golden: faults");
  dsa_test_first_diff(ci.data, co.data, co.nbytes, "golden indexer_k_cache_fp8", "%s", dir);
  for (int i = 0; i < 4; i++) npy_free(arr[i]);
}

/* ---- bad arguments ---------------------------------------------------------------------- */

typedef struct kargs {
  dsa_queue *q;
  dsa_tensor a, b, c, d; /* insert: k, slots; gather: block_table, cu, k_out, k_scale */
  const dsa_tensor *pa, *pb, *pc, *pd;
  dsa_paged_cache cache;
  const dsa_paged_cache *pcache;
  int mode;
  unsigned char reserved; /* the params' last reserved byte (non-zero: refused) */
  dsa_events ev;
} kargs;

static int break_common(void *vx, int c, const char **w, const char **w2) {
  kargs *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->q = NULL, *w = "q"; return 1;
    case 1: x->ev.num_wait = 2, x->ev.wait = NULL, *w = "ev"; return 1;
    case 2: x->pcache = NULL, *w = "cache"; return 1;
    case 3: x->cache.format = DSA_CACHE_MLA_FP8, *w = "cache"; return 1;
    case 4: x->cache.block_size = 0, *w = "cache"; return 1;
    case 5: x->cache.block_stride = x->cache.block_size * 132 - 1, *w = "cache"; return 1;
    case 6: x->cache.num_blocks += 1, *w = "cache"; return 1;
    case 7: x->cache.mem = NULL, *w = "cache"; return 1;
    case 8: x->reserved = 1, *w = "reserved"; return 1;
    default: return 0;
  }
}

static int break_insert(void *vx, int c, const char **w, const char **w2) {
  kargs *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->pa = NULL, *w = "k"; return 1;
    case 1: x->a.dtype = DSA_F32, *w = "k"; return 1;
    case 2: x->a.shape[1] = 64, *w = "k"; return 1;
    case 3: x->a.stride[1] = 2, *w = "k"; return 1;
    case 4: x->a.offset += 1, *w = "k"; return 1;
    case 5: x->a.offset += 1 << 20, *w = "k"; return 1;
    case 6: x->pb = NULL, *w = "slot_mapping"; return 1;
    case 7: x->b.dtype = DSA_I32, *w = "slot_mapping"; return 1;
    case 8: x->b.shape[0] -= 1, *w = "slot_mapping"; return 1;
    case 9: x->b.stride[0] = -1, *w = "slot_mapping"; return 1;
    case 10: x->mode = 5, *w = "e2m1"; return 1;
    case 11: x->a.ndim = 3, *w = "k"; return 1;
    default: return 0;
  }
}

static int break_gather(void *vx, int c, const char **w, const char **w2) {
  kargs *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->pa = NULL, *w = "block_table"; return 1;
    case 1: x->a.dtype = DSA_I64, *w = "block_table"; return 1;
    case 2: x->a.shape[0] = 3, *w = "block_table"; return 1;
    case 3: x->pb = NULL, *w = "cu_seqlens"; return 1;
    case 4: x->b.shape[0] = 0, *w = "cu_seqlens"; return 1;
    case 5: x->b.dtype = DSA_I64, *w = "cu_seqlens"; return 1;
    case 6: x->pc = NULL, *w = "k_out"; return 1;
    case 7: x->c.dtype = DSA_U8, *w = "k_out"; return 1;
    case 8: x->c.shape[1] = 64, *w = "k_out"; return 1;
    case 9: x->c.stride[1] = 2, *w = "k_out"; return 1;
    case 10: x->pd = NULL, *w = "k_scale"; return 1;
    case 11: x->d.shape[0] -= 1, *w = "k_scale"; return 1;
    case 12: x->d.dtype = DSA_UE8M0, *w = "k_scale"; return 1;
    case 13: x->c.offset += 1 << 20, *w = "k_out"; return 1;
    default: return 0;
  }
}

static dsa_status call_insert(void *vx, cl_event *done) {
  kargs *x = vx;
  x->ev.done = done;
  dsa_indexer_k_insert_params p = {.e2m1 = (dsa_e2m1_mode)x->mode};
  p.reserved[sizeof p.reserved - 1] = x->reserved;
  return dsa_indexer_k_insert(x->q, x->pa, x->pb, x->pcache, &p, &x->ev);
}
static dsa_status call_gather(void *vx, cl_event *done) {
  kargs *x = vx;
  x->ev.done = done;
  dsa_indexer_k_gather_params p;
  dsa_indexer_k_gather_params_default(&p);
  p.reserved[sizeof p.reserved - 1] = x->reserved;
  return dsa_indexer_k_gather(x->q, x->pb, x->pa, x->pcache, x->pc, x->pd, &p, &x->ev);
}

static void kargs_point(void *vx) {
  kargs *x = vx;
  x->pa = &x->a, x->pb = &x->b, x->pc = &x->c, x->pd = &x->d, x->pcache = &x->cache;
}

/* Every broken variant of the valid call `base` fails cleanly (see
 * dsa_test_run_bad); the cache, queue and event cases come first. */
static void run_bad(const char *op, const kargs *base, dsa_status (*call)(void *, cl_event *),
                    int (*brk)(void *, int, const char **, const char **),
                    const guarded_buf *out) {
  dsa_bad_args spec = {.op = op, .base = base, .size = sizeof *base, .reset = kargs_point,
                       .common = break_common, .brk = brk, .call = call,
                       .outs = (const guarded_buf *const[]){out}, .nouts = 1, .min_cases = 18};
  dsa_test_run_bad(q, &spec);
  dsa_test_read_faults(q);
}

static void test_bad_args(void) {
  tcache c = cache_make(0, 3, 4, 3, 8);
  uint16_t k[5 * 128];
  for (int i = 0; i < 5; i++) make_row(k + 128 * i, 0);
  int64_t slots[5] = {0, 3, 5, 11, 7};
  guarded_buf kb = gbuf_create(ctx, q, sizeof k, k), sb = gbuf_create(ctx, q, sizeof slots, slots);
  kargs x;
  memset(&x, 0, sizeof x);
  x.q = q, x.cache = c.dc;
  x.a = dsa_tensor_make(kb.mem, kb.off, DSA_BF16, 2, (int64_t[]){5, 128});
  x.b = dsa_tensor_make(sb.mem, sb.off, DSA_I64, 1, (int64_t[]){5});
  run_bad("insert", &x, call_insert, break_insert, &c.gb);

  int32_t bt[2 * 3] = {2, 0, 1, 1, 2, 0}, cu[3] = {0, 5, 9};
  guarded_buf bb = gbuf_create(ctx, q, sizeof bt, bt), cb = gbuf_create(ctx, q, sizeof cu, cu),
              ob = gbuf_create(ctx, q, 9 * 128, NULL), ksb = gbuf_create(ctx, q, 9 * 4, NULL);
  memset(&x, 0, sizeof x);
  x.q = q, x.cache = c.dc;
  x.a = dsa_tensor_make(bb.mem, bb.off, DSA_I32, 2, (int64_t[]){2, 3});
  x.b = dsa_tensor_make(cb.mem, cb.off, DSA_I32, 1, (int64_t[]){3});
  x.c = dsa_tensor_make(ob.mem, ob.off, DSA_E4M3, 2, (int64_t[]){9, 128});
  x.d = dsa_tensor_make(ksb.mem, ksb.off, DSA_F32, 1, (int64_t[]){9});
  run_bad("gather", &x, call_gather, break_gather, &ob);

  /* Empty work still returns a completed event. */
  cl_event done = NULL;
  dsa_events ev = {0, NULL, &done};
  dsa_tensor k0 = dsa_tensor_make(kb.mem, kb.off, DSA_BF16, 2, (int64_t[]){0, 128});
  dsa_tensor s0 = dsa_tensor_make(sb.mem, sb.off, DSA_I64, 1, (int64_t[]){0});
  CHECK_OK(dsa_indexer_k_insert(q, &k0, &s0, &c.dc, NULL, &ev));
  CHECK(done && clWaitForEvents(1, &done) == CL_SUCCESS, "insert N=0: event");
  if (done) clReleaseEvent(done);
  done = NULL;
  dsa_tensor c1 = dsa_tensor_make(cb.mem, cb.off, DSA_I32, 1, (int64_t[]){1});
  dsa_tensor b0 = dsa_tensor_make(bb.mem, bb.off, DSA_I32, 2, (int64_t[]){0, 3});
  CHECK_OK(dsa_indexer_k_gather(q, &c1, &b0, &c.dc, &x.c, &x.d, NULL, &ev));
  CHECK(done && clWaitForEvents(1, &done) == CL_SUCCESS, "gather R=0: event");
  if (done) clReleaseEvent(done);
  gbuf_release(&kb), gbuf_release(&sb), gbuf_release(&bb), gbuf_release(&cb);
  gbuf_release(&ob), gbuf_release(&ksb);
  cache_free(&c);
}

int main(int argc, char **argv) {
  const char *golden = argc > 1 ? argv[1] : getenv("DSACL_GOLDEN_DIR");
  if (golden) test_golden(golden);
  dsa_test_open(&ctx, &q, 0);
  test_insert();
  test_gather();
  test_bad_args();
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
