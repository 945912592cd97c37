/* dsa_mla_qnorm_rope_kv_insert against the C reference (tests/ref/mla_qnorm.c)
 * on random shapes and edge cases: H = 0, 1, 8, 64, 128; T = 0, 1, odd;
 * block sizes 64 and 2; all-zero and tiny/huge q heads; positions at both
 * ends of the cos/sin table and outside it; -1 and out-of-range slots;
 * strided q, kv and cos/sin; in place and out of place. Whole payloads are
 * compared byte for byte (q_out including its padding, the cache image
 * including untouched slots), guard bands checked, fault words compared;
 * plus >= 10 bad-argument classes and events. */
#include <math.h>

#include "common.h"
#include "ref.h"
#include "ref_mla_qnorm.h"

static dsa_context *ctx;
static dsa_queue *q;
static uint64_t rng = 0x0A11CE5EEDull;

static int64_t rnd(int64_t n) { return n > 0 ? (int64_t)(dsa_test_rand(&rng) % (uint64_t)n) : 0; }
static double gauss(void) {
  return (dsa_test_uniform(&rng) + dsa_test_uniform(&rng) + dsa_test_uniform(&rng) - 1.5) * 2;
}
static uint16_t bf16(double x) { return ref_bf16_from_float((float)x); }


/* A 512-vector of one value family. */
static void make_vec(uint16_t *v, int kind) {
  static const double scales[] = {1, 3000, 1e4, 1e-5, 1e-6, 0.01, 1e-30, 1e25};
  double s = scales[rnd(8)];
  for (int d = 0; d < 512; d++) {
    switch (kind) {
      case 0: v[d] = 0; break;                                  /* all-zero head */
      case 1: v[d] = (uint16_t)(rnd(2) ? 0x8000 : 0); break;    /* signed zeros */
      case 2: v[d] = (uint16_t)(rnd(0x80) | (rnd(2) << 15)); break; /* subnormals */
      default: v[d] = bf16(gauss() * s);
    }
  }
}

typedef struct qcase {
  int64_t t, h, nb, npos;
  int32_t bs;
  int in_place, bad, edge;
  /* Block stride 8 bytes past a multiple of 16, i64 positions and f32
   * cos/sin: the i64/f32 kernel's unaligned build (the aligned one is the
   * launcher's usual pick, cl/mla_qnorm.cl). */
  int misaligned;
} qcase;

static void run_case(const qcase *tc) {
  const int64_t t = tc->t, h = tc->h, cap = tc->nb * tc->bs;
  /* Strides (elements): padded heads/tokens sometimes. */
  const int64_t qhs = 512 + (rnd(3) == 0 ? 8 * rnd(3) : 0), qts = qhs * h + 8 * rnd(2);
  const int64_t kvrs = 512 + 8 * rnd(2), csrs = 64 + 4 * rnd(2);
  const int64_t page = (int64_t)tc->bs * 584;
  int64_t bstride = rnd(2) ? page : (page + 575) / 576 * 576 + 16 * rnd(3);
  if (tc->misaligned) bstride = (page + 15) / 16 * 16 + 8;
  const size_t qn = (size_t)(t * qts > 0 ? t * qts : 1);

  uint16_t *qin = dsa_test_xmalloc(qn * 2), *qref = dsa_test_xmalloc(qn * 2), *qout0 = dsa_test_xmalloc(qn * 2);
  dsa_test_fill_random(&rng, qin, qn * 2);
  dsa_test_fill_random(&rng, qout0, qn * 2);
  for (int64_t i = 0; i < t; i++)
    for (int64_t j = 0; j < h; j++) make_vec(qin + i * qts + j * qhs, tc->edge ? (int)rnd(5) : 3);
  uint16_t *kv = dsa_test_xmalloc((size_t)(t * kvrs + 1) * 2);
  dsa_test_fill_random(&rng, kv, (size_t)(t * kvrs + 1) * 2);
  for (int64_t i = 0; i < t; i++) make_vec(kv + i * kvrs, tc->edge ? (int)rnd(5) : 3);
  float *cs = dsa_test_xmalloc((size_t)(tc->npos * csrs + 1) * 4);
  dsa_test_fill_random(&rng, cs, (size_t)(tc->npos * csrs + 1) * 4);
  for (int64_t p = 0; p < tc->npos; p++)
    for (int i = 0; i < 32; i++) {
      double th = p * pow(10000.0, -i / 32.0);
      cs[p * csrs + i] = (float)cos(th);
      cs[p * csrs + 32 + i] = (float)sin(th);
    }
  int64_t *pos = dsa_test_xmalloc((size_t)(t + 1) * 8), *slots = dsa_test_xmalloc((size_t)(t + 1) * 8);
  int64_t *perm = dsa_test_xmalloc((size_t)(cap + 1) * 8), used = 0;
  for (int64_t i = 0; i < cap; i++) perm[i] = i;
  for (int64_t i = cap - 1; i > 0; i--) {
    int64_t j = rnd(i + 1), x = perm[i];
    perm[i] = perm[j], perm[j] = x;
  }
  for (int64_t i = 0; i < t; i++) {
    int64_t r = rnd(8);
    pos[i] = r == 0 ? 0 : r == 1 ? tc->npos - 1 : rnd(tc->npos);
    if (tc->bad && rnd(6) == 0) pos[i] = rnd(2) ? tc->npos + rnd(3) : -1 - rnd(5);
    r = rnd(10);
    slots[i] = r == 0 ? -1 : (r == 1 && tc->bad) ? cap + rnd(4) : used < cap ? perm[used++] : -1;
  }
  /* The API's other dtypes: i32 positions, bf16 cos/sin (the reference reads
   * the narrowed values). */
  const int pos32 = rnd(3) == 0 && !tc->misaligned, cs16 = rnd(3) == 0 && !tc->misaligned;
  int32_t *pos_n = pos32 ? dsa_test_narrow_pos(pos, (size_t)t) : NULL;
  uint16_t *cs_n = cs16 ? dsa_test_narrow_cs(cs, (size_t)(tc->npos * csrs)) : NULL;

  uint8_t *img = dsa_test_xmalloc((size_t)(tc->nb * bstride + 1));
  dsa_test_fill_random(&rng, img, (size_t)(tc->nb * bstride + 1));
  guarded_buf cb = gbuf_create(ctx, q, (size_t)(tc->nb * bstride + 1), img);
  ref_mla_cache rc = {img, tc->nb, tc->bs, bstride};
  guarded_buf qib = gbuf_create(ctx, q, qn * 2, qin), qob = gbuf_create(ctx, q, qn * 2, qout0);
  guarded_buf kb = gbuf_create(ctx, q, (size_t)(t * kvrs + 1) * 2, kv);
  guarded_buf csb = cs16 ? gbuf_create(ctx, q, (size_t)(tc->npos * csrs + 1) * 2, cs_n)
                         : gbuf_create(ctx, q, (size_t)(tc->npos * csrs + 1) * 4, cs);
  guarded_buf pb = pos32 ? gbuf_create(ctx, q, (size_t)(t + 1) * 4, pos_n)
                         : gbuf_create(ctx, q, (size_t)(t + 1) * 8, pos),
              sb = gbuf_create(ctx, q, (size_t)(t + 1) * 8, slots);

  dsa_tensor qit = {.mem = qib.mem, .offset = qib.off, .dtype = DSA_BF16, .ndim = 3,
                    .shape = {t, h, 512}, .stride = {qts, qhs, 1}};
  dsa_tensor qot = {.mem = qob.mem, .offset = qob.off, .dtype = DSA_BF16, .ndim = 3,
                    .shape = {t, h, 512}, .stride = {qts, qhs, 1}};
  dsa_tensor kvt = {.mem = kb.mem, .offset = kb.off, .dtype = DSA_BF16, .ndim = 2,
                    .shape = {t, 512}, .stride = {kvrs, 1}};
  dsa_tensor cst = {.mem = csb.mem, .offset = csb.off, .dtype = cs16 ? DSA_BF16 : DSA_F32,
                    .ndim = 2, .shape = {tc->npos, 64}, .stride = {csrs, 1}};
  dsa_tensor pt = dsa_tensor_make(pb.mem, pb.off, pos32 ? DSA_I32 : DSA_I64, 1, (int64_t[]){t});
  dsa_tensor st = dsa_tensor_make(sb.mem, sb.off, DSA_I64, 1, (int64_t[]){t});
  dsa_paged_cache pc = {.mem = cb.mem, .offset = cb.off, .num_blocks = tc->nb,
                        .block_size = tc->bs, .block_stride = bstride, .format = DSA_CACHE_MLA_FP8};
  dsa_mla_qnorm_rope_kv_insert_params prm;
  dsa_mla_qnorm_rope_kv_insert_params_default(&prm);
  if (rnd(3) == 0) prm.eps = 1e-3f;
  CHECK_OK(dsa_mla_qnorm_rope_kv_insert(q, &qit, &kvt, &pt, &cst, &st, &pc,
                                        tc->in_place ? NULL : &qot, &prm, NULL));
  uint32_t f = dsa_test_read_faults(q);

  memcpy(qref, tc->in_place ? qin : qout0, qn * 2);
  unsigned want_f = ref_mla_qnorm_rope_kv_insert(&rc, qin, qts, qhs, qref, qts, qhs, h, kv, kvrs,
                                                 pos, cs, csrs, tc->npos, slots, prm.eps, t);
  uint16_t *qgot = dsa_test_xmalloc(qn * 2);
  gbuf_read(q, tc->in_place ? &qib : &qob, qgot);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < qn; i++)
    if (qgot[i] != qref[i] && !bad++) first = i;
  CHECK(bad == 0, "q_out: %zu values differ, first %zu got 0x%04X want 0x%04X "
        "(T=%lld H=%lld in_place=%d edge=%d)", bad, first, bad ? qgot[first] : 0,
        bad ? qref[first] : 0, (long long)t, (long long)h, tc->in_place, tc->edge);
  if (!tc->in_place) {
    gbuf_read(q, &qib, qgot);
    CHECK(!memcmp(qgot, qin, qn * 2), "q_in modified by an out-of-place call");
  }
  uint8_t *cgot = dsa_test_xmalloc((size_t)(tc->nb * bstride + 1));
  gbuf_read(q, &cb, cgot);
  size_t cbad = 0, cfirst = 0;
  for (size_t i = 0; i < (size_t)(tc->nb * bstride + 1); i++)
    if (cgot[i] != img[i] && !cbad++) cfirst = i;
  CHECK(cbad == 0, "cache: %zu bytes differ, first at %zu (T=%lld bs=%d stride=%lld)", cbad,
        cfirst, (long long)t, tc->bs, (long long)bstride);
  CHECK(f == want_f, "faults 0x%x, want 0x%x (T=%lld bad=%d)", f, want_f, (long long)t, tc->bad);
  CHECK(gbuf_guards_ok(q, &cb) && gbuf_guards_ok(q, &qib) && gbuf_guards_ok(q, &qob) &&
            gbuf_guards_ok(q, &kb),
        "guard band overwritten (T=%lld H=%lld)", (long long)t, (long long)h);

  free(qin), free(qref), free(qout0), free(kv), free(cs), free(pos), free(slots), free(perm);
  free(pos_n), free(cs_n);
  free(img), free(qgot), free(cgot);
  gbuf_release(&cb), gbuf_release(&qib), gbuf_release(&qob), gbuf_release(&kb);
  gbuf_release(&csb), gbuf_release(&pb), gbuf_release(&sb);
}

static void test_cases(void) {
  const qcase fixed[] = {
      {1, 1, 1, 4, 64, 1, 0, 0, 0},    {1, 8, 2, 3, 2, 0, 1, 1, 0},
      {7, 8, 2, 50, 64, 1, 1, 1, 0},   {9, 64, 2, 1024, 64, 1, 0, 0, 0},
      {3, 128, 1, 20, 2, 0, 1, 1, 0},  {33, 1, 4, 40, 2, 1, 1, 1, 0},
      {17, 0, 2, 30, 64, 1, 1, 1, 0},
      {5, 16, 0, 10, 64, 0, 1, 0, 0}, /* no blocks: all slots bad */
      {64, 8, 2, 200, 64, 0, 0, 1, 0}, {2, 3, 3, 1, 2, 1, 1, 1, 0},    /* one-row table */
      {9, 8, 3, 100, 64, 0, 0, 0, 1}, {5, 16, 2, 50, 2, 1, 1, 1, 1},
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) run_case(&fixed[i]);
  static const int64_t hs[] = {1, 8, 16, 64, 128};
  for (int it = 0; it < 10; it++) {
    int64_t h = hs[rnd(5)];
    qcase tc = {1 + rnd(h >= 64 ? 6 : 40), h, 1 + rnd(4), 1 + rnd(300), rnd(2) ? 64 : 2,
                (int)rnd(2), (int)rnd(2), (int)rnd(2), 0};
    run_case(&tc);
  }
}

/* The correctly rounded rsqrt against long double on many values, through
 * the reference only (the device is checked by the q tests above): a
 * sanity check that the reference itself rounds correctly. */
static void test_ref_rsqrt(void) {
  int bad = 0;
  for (int i = 0; i < 200000; i++) {
    float x = (float)ldexp(1.0 + dsa_test_uniform(&rng), (int)rnd(250) - 125);
    float y = ref_rsqrt_cr(x);
    long double tr = 1.0L / sqrtl((long double)x);
    long double e0 = fabsl((long double)y - tr), e1 = fabsl((long double)nextafterf(y, 0) - tr),
                e2 = fabsl((long double)nextafterf(y, INFINITY) - tr);
    if (e1 < e0 || e2 < e0) bad++;
  }
  CHECK(bad == 0, "ref_rsqrt_cr: %d values not correctly rounded", bad);
}

/* ---- bad arguments ---------------------------------------------------------- */

typedef struct bargs {
  dsa_queue *q;
  dsa_tensor qi, qo, kv, pos, cs, sl;
  const dsa_tensor *pqi, *pqo, *pkv, *ppos, *pcs, *psl;
  dsa_paged_cache cache;
  const dsa_paged_cache *pcache;
  dsa_mla_qnorm_rope_kv_insert_params prm;
  dsa_events ev;
} bargs;

static int breaker(void *vx, int c, const char **w, const char **w2) {
  bargs *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->q = NULL, *w = "q"; return 1;
    case 1: x->pqi = NULL, *w = "q_in"; return 1;
    case 2: x->qi.dtype = DSA_F32, *w = "q_in"; return 1;
    case 3: x->qi.ndim = 2, *w = "q_in"; return 1;
    case 4: x->qi.shape[2] = 448, *w = "q_in"; return 1;
    case 5: x->qi.stride[2] = 2, *w = "q_in"; return 1;
    case 6: x->qi.shape[0] += 1000, x->qo.shape[0] += 1000, *w = "q_in"; return 1; /* past buffer */
    case 7: x->qo.shape[1] -= 1, *w = "q_out"; return 1;
    case 8: x->qo.dtype = DSA_U8, *w = "q_out"; return 1;
    case 9: x->pkv = NULL, *w = "kv"; return 1;
    case 10: x->kv.shape[0] -= 1, *w = "kv"; return 1;
    case 11: x->kv.shape[1] = 576, *w = "kv"; return 1;
    case 12: x->pos.dtype = DSA_F32, *w = "positions"; return 1;
    case 13: x->pos.shape[0] -= 1, *w = "positions"; return 1;
    case 14: x->cs.shape[1] = 32, *w = "cos_sin"; return 1;
    case 15: x->cs.dtype = DSA_I32, *w = "cos_sin"; return 1;
    case 16: x->psl = NULL, *w = "slot_mapping"; return 1;
    case 17: x->sl.shape[0] += 1, *w = "slot_mapping"; return 1;
    case 18: x->cache.format = DSA_CACHE_INDEXER_FP8, *w = "cache"; return 1;
    case 19: x->cache.block_stride = 10, *w = "block_stride"; return 1;
    case 20: x->pcache = NULL, *w = "cache"; return 1;
    case 21: x->prm.eps = 0.0f, *w = "eps"; return 1;
    case 22: x->prm.eps = NAN, *w = "eps"; return 1;
    case 23: x->prm.eps = -1e-6f, *w = "eps"; return 1;
    case 24: x->ev.num_wait = 1, x->ev.wait = NULL, *w = "ev"; return 1;
    case 25: x->cs.stride[1] = 0, x->cs.shape[1] = 64, x->cs.stride[1] = 3, *w = "cos_sin"; return 1;
    default: return 0;
  }
}

static void bargs_point(void *vx) {
  bargs *x = vx;
  x->pqi = &x->qi, x->pqo = &x->qo, x->pkv = &x->kv, x->ppos = &x->pos, x->pcs = &x->cs;
  x->psl = &x->sl, x->pcache = &x->cache;
}

static dsa_status call_bad(void *vx, cl_event *done) {
  bargs *x = vx;
  x->ev.done = done;
  return dsa_mla_qnorm_rope_kv_insert(x->q, x->pqi, x->pkv, x->ppos, x->pcs, x->psl, x->pcache,
                                      x->pqo, &x->prm, &x->ev);
}

/* The valid call, with params and events NULL. */
static dsa_status call_valid(void *vx, cl_event *done) {
  bargs *x = vx;
  (void)done;
  return dsa_mla_qnorm_rope_kv_insert(x->q, &x->qi, &x->kv, &x->pos, &x->cs, &x->sl, &x->cache,
                                      &x->qo, NULL, NULL);
}

static void test_bad_args(void) {
  const int64_t t = 4, h = 2;
  guarded_buf qb = gbuf_create(ctx, q, (size_t)(t * h * 512 * 2), NULL);
  guarded_buf ob = gbuf_create(ctx, q, (size_t)(t * h * 512 * 2), NULL);
  guarded_buf kb = gbuf_create(ctx, q, (size_t)(t * 512 * 2), NULL);
  int64_t pos[4] = {0, 1, 2, 3}, slots[4] = {0, 1, 2, 3};
  float cs[8 * 64];
  for (int i = 0; i < 8 * 64; i++) cs[i] = (float)(i % 3) * 0.5f;
  guarded_buf pb = gbuf_create(ctx, q, sizeof pos, pos), sb = gbuf_create(ctx, q, sizeof slots, slots);
  guarded_buf csb = gbuf_create(ctx, q, sizeof cs, cs);
  guarded_buf cb = gbuf_create(ctx, q, 2 * 64 * 584, NULL);
  bargs base;
  memset(&base, 0, sizeof base);
  base.q = q;
  base.qi = dsa_tensor_make(qb.mem, qb.off, DSA_BF16, 3, (int64_t[]){t, h, 512});
  base.qo = dsa_tensor_make(ob.mem, ob.off, DSA_BF16, 3, (int64_t[]){t, h, 512});
  base.kv = dsa_tensor_make(kb.mem, kb.off, DSA_BF16, 2, (int64_t[]){t, 512});
  base.pos = dsa_tensor_make(pb.mem, pb.off, DSA_I64, 1, (int64_t[]){t});
  base.sl = dsa_tensor_make(sb.mem, sb.off, DSA_I64, 1, (int64_t[]){t});
  base.cs = dsa_tensor_make(csb.mem, csb.off, DSA_F32, 2, (int64_t[]){8, 64});
  base.cache = (dsa_paged_cache){.mem = cb.mem, .offset = cb.off, .num_blocks = 2,
                                 .block_size = 64, .block_stride = 64 * 584,
                                 .format = DSA_CACHE_MLA_FP8};
  dsa_mla_qnorm_rope_kv_insert_params_default(&base.prm);
  /* Each rejected call writes neither q_out nor the cache; the unbroken call
   * (params and events NULL) writes both. */
  dsa_bad_args spec = {.op = "mla_qnorm_rope_kv_insert", .base = &base, .size = sizeof base,
                       .reset = bargs_point, .brk = breaker, .call = call_bad, .valid = call_valid,
                       .outs = (const guarded_buf *const[]){&ob, &cb}, .nouts = 2,
                       .min_cases = 20, .all_change = 1, .no_event = 1};
  dsa_test_run_bad(q, &spec);
  CHECK(dsa_test_read_faults(q) == 0, "valid call faulted");
  gbuf_release(&qb), gbuf_release(&ob), gbuf_release(&kb), gbuf_release(&pb);
  gbuf_release(&sb), gbuf_release(&csb), gbuf_release(&cb);
}

static void test_empty_and_events(void) {
  guarded_buf any = gbuf_create(ctx, q, 4096, NULL), cb = gbuf_create(ctx, q, 64 * 584, NULL);
  dsa_paged_cache pc = {.mem = cb.mem, .offset = cb.off, .num_blocks = 1, .block_size = 64,
                        .block_stride = 64 * 584, .format = DSA_CACHE_MLA_FP8};
  dsa_tensor q0 = dsa_tensor_make(any.mem, any.off, DSA_BF16, 3, (int64_t[]){0, 8, 512});
  dsa_tensor k0 = dsa_tensor_make(any.mem, any.off, DSA_BF16, 2, (int64_t[]){0, 512});
  dsa_tensor i0 = dsa_tensor_make(any.mem, any.off, DSA_I64, 1, (int64_t[]){0});
  dsa_tensor c0 = dsa_tensor_make(any.mem, any.off, DSA_F32, 2, (int64_t[]){4, 64});
  cl_event done = NULL;
  dsa_events ev = {0, NULL, &done};
  CHECK_OK(dsa_mla_qnorm_rope_kv_insert(q, &q0, &k0, &i0, &c0, &i0, &pc, NULL, NULL, &ev));
  CHECK(done != NULL, "T=0: no event");
  if (done) {
    CHECK(clWaitForEvents(1, &done) == CL_SUCCESS, "T=0: wait failed");
    clReleaseEvent(done);
  }
  gbuf_release(&any), gbuf_release(&cb);
}

int main(void) {
  dsa_test_open(&ctx, &q, 0);
  test_ref_rsqrt();
  test_bad_args();
  test_empty_and_events();
  test_cases();
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
