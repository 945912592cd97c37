/* MLA cache operators (dsa_mla_cache_insert / _gather_slots / _gather_paged)
 * against the C reference in tests/ref on randomized shapes, numeric edge
 * cases, data-dependent faults and host-side argument validation.
 *
 * Every device buffer is a guarded_buf whose payload starts with known random
 * bytes: the whole payload is compared with the reference's image, so bytes
 * an operator must not touch (other slots, padding between blocks, padding
 * columns of strided rows) are checked too, and the guard bands catch writes
 * outside the payload. */
#include <math.h>
#include <stdarg.h>

#include "common.h"
#include "ref.h"

_Static_assert((int)REF_FAULT_SLOT_RANGE == (int)DSA_FAULT_SLOT_RANGE &&
                   (int)REF_FAULT_INDEX_RANGE == (int)DSA_FAULT_INDEX_RANGE &&
                   (int)REF_FAULT_LENGTH_RANGE == (int)DSA_FAULT_LENGTH_RANGE,
               "fault bits");

static dsa_context *ctx;
static dsa_queue *q;
static uint64_t rng = 0x5EED1234ABCDull;

static int64_t rnd(int64_t n) { return n > 0 ? (int64_t)(dsa_test_rand(&rng) % (uint64_t)n) : 0; }



static uint16_t bf16(double x) { return ref_bf16_from_float((float)x); }

static double gauss(void) {
  return (dsa_test_uniform(&rng) + dsa_test_uniform(&rng) + dsa_test_uniform(&rng) - 1.5) * 2;
}

/* One 64-element NoPE block in one of the edge-case families. */
static void make_block(uint16_t *b, int kind) {
  static const double scales[] = {1, 3000, 1e4, 1e-5, 1e-6, 0.01, 1e20, 1e-20};
  switch (kind) {
    case 0: /* all zero */
      memset(b, 0, 64 * sizeof *b);
      return;
    case 1: /* -0.0 and +0.0 */
      for (int i = 0; i < 64; i++) b[i] = (uint16_t)(rnd(2) ? 0x8000 : 0);
      return;
    case 2: /* bf16 subnormals (below the amax floor) */
      for (int i = 0; i < 64; i++) b[i] = (uint16_t)(rnd(0x80) | (rnd(2) << 15));
      return;
    case 3: case 4: { /* amax exactly 448·2^k, or the next bf16 above it */
      int k = (int)rnd(40) - 25;
      for (int i = 0; i < 64; i++) b[i] = bf16(ldexp(gauss(), k + 7));
      b[rnd(64)] = bf16((rnd(2) ? -1 : 1) * ldexp(kind == 3 ? 1.75 : 1.7578125, 8 + k));
      return;
    }
    case 5: /* a NaN among normal values: ignored by amax */
      for (int i = 0; i < 64; i++) b[i] = bf16(gauss() * 100);
      b[rnd(64)] = (uint16_t)(rnd(2) ? 0x7FC0 : 0xFFC1);
      return;
    default: {
      double s = scales[rnd(sizeof scales / sizeof scales[0])];
      for (int i = 0; i < 64; i++) b[i] = bf16(gauss() * s);
    }
  }
}

/* A k row: 7 NoPE blocks of random families, 64 RoPE dims of any non-NaN bits,
 * and junk in the padding columns up to the row stride. */
static void make_row(uint16_t *row, int64_t stride, int edge) {
  for (int q7 = 0; q7 < 7; q7++) make_block(row + 64 * q7, edge ? (int)rnd(12) : 6);
  for (int i = 448; i < 512; i++) {
    uint16_t v = (uint16_t)rnd(0x10000);
    row[i] = (v & 0x7F80) == 0x7F80 ? (uint16_t)(v & 0xBFFF) : v;
  }
  dsa_test_fill_random(&rng, row + 512, (size_t)(stride - 512) * 2);
}

/* Describes where the first difference between two images lies. */


/* A cache of nb blocks at byte coff of a guarded payload with random bytes,
 * about half of whose slots hold tokens quantized by the reference. */
typedef struct test_cache {
  guarded_buf gb;
  uint8_t *img; /* payload image */
  size_t size, coff;
  ref_mla_cache ref;
  dsa_paged_cache dc;
} test_cache;

static int64_t page_bytes(int32_t bs) { return (int64_t)bs * REF_MLA_TOKEN_BYTES; }

static int64_t pick_stride(int32_t bs, int kind) {
  int64_t page = page_bytes(bs);
  switch (kind) {
    case 0: return page;
    case 1: return page + 1; /* unaligned block bases */
    case 2: return (page + 575) / 576 * 576;
    case 3: return page > 37440 ? page : 37440;
    default: return page > 100000 ? page + 13 : 100000;
  }
}

static test_cache cache_make(int64_t nb, int32_t bs, int64_t stride, size_t coff, int fill) {
  test_cache t;
  t.coff = coff;
  t.size = coff + (size_t)(nb * stride);
  t.img = dsa_test_xmalloc(t.size);
  dsa_test_fill_random(&rng, t.img, t.size);
  t.ref = (ref_mla_cache){t.img + coff, nb, bs, stride};
  if (fill) {
    uint16_t row[512];
    for (int64_t s = 0; s < nb * bs; s++) {
      if (rnd(4) == 0) continue; /* keep random bytes: exercises odd scale bytes */
      make_row(row, 512, 1);
      ref_mla_insert(&t.ref, row, 512, &s, 1);
    }
  }
  t.gb = gbuf_create(ctx, q, t.size, t.img);
  t.dc = (dsa_paged_cache){.mem = t.gb.mem, .offset = t.gb.off + coff, .num_blocks = nb,
                           .block_size = bs, .block_stride = stride, .format = DSA_CACHE_MLA_FP8};
  return t;
}

static void cache_free(test_cache *t) {
  gbuf_release(&t->gb);
  free(t->img);
}

/* ---- insert ----------------------------------------------------------------- */

typedef struct ins_case {
  int64_t n, nb;
  int32_t bs;
  int stride_kind;
  size_t coff;
  int64_t kstride; /* elements, >= 512 */
  int bad;         /* slots >= capacity and odd negatives */
  int edge;        /* edge-case value families */
} ins_case;

static void run_insert(const ins_case *tc) {
  int64_t stride = pick_stride(tc->bs, tc->stride_kind), cap = tc->nb * tc->bs;
  test_cache c = cache_make(tc->nb, tc->bs, stride, tc->coff, 0);

  /* Distinct valid slots: two tokens to one slot would make the result
   * depend on the order of the writes. */
  int64_t *perm = dsa_test_xmalloc((size_t)cap * sizeof *perm), *slots = dsa_test_xmalloc((size_t)tc->n * 8);
  for (int64_t i = 0; i < cap; i++) perm[i] = i;
  for (int64_t i = cap - 1; i > 0; i--) {
    int64_t j = rnd(i + 1), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  int64_t used = 0;
  for (int64_t i = 0; i < tc->n; i++) {
    int64_t r = rnd(10);
    if (r == 0) slots[i] = -1;
    else if (r == 1 && tc->bad) slots[i] = -2 - rnd(1000);
    else if (r == 2 && tc->bad) slots[i] = cap + (rnd(2) ? rnd(3) : rnd(1 << 20));
    else slots[i] = used < cap ? perm[used++] : -1;
  }
  size_t koff = (size_t)rnd(3) * 2; /* elements */
  size_t kbytes = (koff + (size_t)(tc->n * tc->kstride)) * 2;
  uint16_t *k = dsa_test_xmalloc(kbytes);
  dsa_test_fill_random(&rng, k, kbytes);
  for (int64_t i = 0; i < tc->n; i++) make_row(k + koff + i * tc->kstride, tc->kstride, tc->edge);

  guarded_buf kb = gbuf_create(ctx, q, kbytes, k), sb = gbuf_create(ctx, q, (size_t)tc->n * 8, slots);
  dsa_tensor kt = {.mem = kb.mem, .offset = kb.off + koff * 2, .dtype = DSA_BF16, .ndim = 2,
                   .shape = {tc->n, 512}, .stride = {tc->kstride, 1}};
  dsa_tensor st = dsa_tensor_make(sb.mem, sb.off, DSA_I64, 1, (int64_t[]){tc->n});
  CHECK_OK(dsa_mla_cache_insert(q, &kt, &st, &c.dc, NULL, NULL));
  uint32_t f = dsa_test_read_faults(q);
  unsigned want_f = ref_mla_insert(&c.ref, k + koff, tc->kstride, slots, tc->n);

  uint8_t *got = dsa_test_xmalloc(c.size);
  gbuf_read(q, &c.gb, got);
  dsa_test_first_diff(got, c.img, c.size, "insert cache",
             "n=%lld bs=%d nb=%lld stride=%lld coff=%zu kstride=%lld edge=%d", (long long)tc->n,
             tc->bs, (long long)tc->nb, (long long)stride, tc->coff, (long long)tc->kstride,
             tc->edge);
  CHECK(f == want_f, "insert faults 0x%x, want 0x%x (n=%lld bs=%d)", f, want_f,
        (long long)tc->n, tc->bs);
  if (want_f) CHECK(dsa_test_read_faults(q) == 0, "fault word not cleared by the read");
  CHECK(gbuf_guards_ok(q, &c.gb) && gbuf_guards_ok(q, &kb) && gbuf_guards_ok(q, &sb),
        "insert: guard band overwritten (n=%lld bs=%d)", (long long)tc->n, tc->bs);
  uint16_t *kback = dsa_test_xmalloc(kbytes);
  gbuf_read(q, &kb, kback);
  CHECK(!memcmp(kback, k, kbytes), "insert modified k");

  free(kback), free(got), free(k), free(slots), free(perm);
  gbuf_release(&kb), gbuf_release(&sb);
  cache_free(&c);
}

static void test_insert(void) {
  const ins_case fixed[] = {
      {1, 1, 1, 0, 0, 512, 0, 1},       {3, 2, 2, 1, 1, 512, 0, 1},
      {64, 2, 64, 3, 0, 512, 0, 1},     {200, 12, 64, 3, 0, 512, 1, 1},
      {37, 5, 17, 1, 3, 520, 1, 1},     {50, 3, 3, 2, 7, 1024, 1, 1},
      {9, 2, 64, 4, 0, 600, 1, 0},      {300, 40, 17, 2, 5, 512, 1, 1},
      {10, 0, 4, 0, 0, 512, 1, 0}, /* no blocks at all: every slot is out of range */
      /* more tokens than the launch cap (4 groups of 8 rows per compute
       * unit: 64 rows on 2 PoCL cores, 4224 on a 132-SM GPU), so rows loop
       * over several tokens each */
      {9000, 150, 64, 3, 0, 512, 1, 1},
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) run_insert(&fixed[i]);
  static const int32_t bss[] = {1, 2, 3, 17, 64};
  for (int it = 0; it < 12; it++) {
    ins_case tc = {rnd(2) ? rnd(301) : 1 + 2 * rnd(20), 1 + rnd(12), bss[rnd(5)],
                   (int)rnd(5), (size_t)rnd(2) * (1 + 2 * (size_t)rnd(40)),
                   512 + 8 * rnd(3) + (rnd(3) == 0 ? 1 : 0), (int)rnd(2), 1};
    run_insert(&tc);
  }
}

/* Exact power-of-two amax edges and the bf16 neighbours, for every k the
 * quantizer can meet, through the whole device path. */
static void test_insert_pow2(void) {
  const int64_t n = 2 * 60;
  uint16_t *k = dsa_test_xmalloc((size_t)n * 512 * 2);
  int64_t *slots = dsa_test_xmalloc((size_t)n * 8);
  for (int64_t i = 0; i < n; i++) {
    uint16_t *row = k + i * 512;
    int kk = (int)(i / 2) - 40;
    double top = ldexp(i % 2 ? 1.7578125 : 1.75, 8 + kk);
    for (int d = 0; d < 512; d++) row[d] = bf16(ldexp(gauss(), 8 + kk - 1));
    for (int q7 = 0; q7 < 7; q7++) {
      row[64 * q7 + rnd(64)] = bf16(q7 & 1 ? -top : top);
      if (q7 == 6) row[64 * q7 + rnd(64)] = bf16(ldexp(1.7421875, 8 + kk)); /* below */
    }
    slots[i] = i;
  }
  test_cache c = cache_make(2, 64, 37440, 0, 0);
  guarded_buf kb = gbuf_create(ctx, q, (size_t)n * 1024, k), sb = gbuf_create(ctx, q, (size_t)n * 8, slots);
  dsa_tensor kt = dsa_tensor_make(kb.mem, kb.off, DSA_BF16, 2, (int64_t[]){n, 512});
  dsa_tensor st = dsa_tensor_make(sb.mem, sb.off, DSA_I64, 1, (int64_t[]){n});
  CHECK_OK(dsa_mla_cache_insert(q, &kt, &st, &c.dc, NULL, NULL));
  ref_mla_insert(&c.ref, k, 512, slots, n);
  uint8_t *got = dsa_test_xmalloc(c.size);
  gbuf_read(q, &c.gb, got);
  dsa_test_first_diff(got, c.img, c.size, "insert pow2 edges", "k in [-40, 19]");
  free(got), free(k), free(slots);
  gbuf_release(&kb), gbuf_release(&sb);
  cache_free(&c);
}

/* ---- gather by slot ------------------------------------------------------------ */

static void run_gather_slots(int64_t s, int64_t nb, int32_t bs, int stride_kind, size_t coff,
                             int64_t ostride, int bad) {
  test_cache c = cache_make(nb, bs, pick_stride(bs, stride_kind), coff, 1);
  int64_t cap = nb * bs;
  int32_t *idx = dsa_test_xmalloc((size_t)s * 4);
  for (int64_t i = 0; i < s; i++) {
    int64_t r = rnd(10);
    idx[i] = (int32_t)(r == 0 ? -1 : r == 1 && bad ? -2 - rnd(100)
                      : r == 2 && bad ? cap + rnd(5) : rnd(cap > 0 ? cap : 1) - (cap == 0));
  }
  size_t ooff = (size_t)rnd(4), obytes = (ooff + (size_t)(s * ostride)) * 2;
  uint16_t *out = dsa_test_xmalloc(obytes), *want = dsa_test_xmalloc(obytes), *got = dsa_test_xmalloc(obytes);
  dsa_test_fill_random(&rng, out, obytes);
  memcpy(want, out, obytes);
  guarded_buf ib = gbuf_create(ctx, q, (size_t)s * 4, idx), ob = gbuf_create(ctx, q, obytes, out);
  dsa_tensor it = dsa_tensor_make(ib.mem, ib.off, DSA_I32, 1, (int64_t[]){s});
  dsa_tensor ot = {.mem = ob.mem, .offset = ob.off + ooff * 2, .dtype = DSA_BF16, .ndim = 2,
                   .shape = {s, 512}, .stride = {ostride, 1}};
  CHECK_OK(dsa_mla_gather_slots(q, &it, &c.dc, &ot, NULL, NULL));
  uint32_t f = dsa_test_read_faults(q);
  unsigned want_f = ref_mla_gather_slots(&c.ref, idx, s, want + ooff, ostride);
  gbuf_read(q, &ob, got);
  dsa_test_first_diff((uint8_t *)got, (uint8_t *)want, obytes, "gather_slots out",
             "s=%lld nb=%lld bs=%d stride_kind=%d coff=%zu ostride=%lld", (long long)s,
             (long long)nb, bs, stride_kind, coff, (long long)ostride);
  CHECK(f == want_f, "gather_slots faults 0x%x, want 0x%x", f, want_f);
  CHECK(gbuf_guards_ok(q, &ob) && gbuf_guards_ok(q, &c.gb), "gather_slots: guard overwritten");
  uint8_t *cback = dsa_test_xmalloc(c.size);
  gbuf_read(q, &c.gb, cback);
  CHECK(!memcmp(cback, c.img, c.size), "gather_slots modified the cache");
  free(cback), free(idx), free(out), free(want), free(got);
  gbuf_release(&ib), gbuf_release(&ob);
  cache_free(&c);
}

static void test_gather_slots(void) {
  run_gather_slots(97, 12, 64, 3, 0, 512, 0);
  run_gather_slots(1, 1, 1, 0, 0, 512, 0);
  run_gather_slots(33, 7, 3, 1, 5, 520, 1);
  run_gather_slots(200, 4, 17, 2, 1, 512, 1);
  run_gather_slots(20, 2, 64, 4, 0, 1000, 1);
  run_gather_slots(5, 0, 2, 0, 0, 512, 1); /* empty cache: all zeros + fault */
  static const int32_t bss[] = {1, 2, 3, 17, 64};
  for (int it = 0; it < 8; it++)
    run_gather_slots(rnd(2) ? rnd(300) : 1 + 2 * rnd(10), 1 + rnd(8), bss[rnd(5)], (int)rnd(5),
                     (size_t)rnd(2) * (1 + 2 * (size_t)rnd(40)), 512 + 8 * rnd(3) + rnd(2),
                     (int)rnd(2));
}

/* ---- gather through block tables ------------------------------------------------ */

typedef struct paged_case {
  int64_t r, w, nb;
  int32_t bs;
  int stride_kind;
  size_t coff;
  int null_gl;
  int bad; /* lengths, block indices and block ids beyond their ranges */
} paged_case;

static void run_gather_paged(const paged_case *tc) {
  test_cache c = cache_make(tc->nb, tc->bs, pick_stride(tc->bs, tc->stride_kind), tc->coff, 1);
  int64_t r = tc->r, w = tc->w, bts = w + rnd(3), cap_t = w * tc->bs;
  int32_t *seq = dsa_test_xmalloc((size_t)r * 4), *gl = dsa_test_xmalloc((size_t)r * 4);
  int32_t *bt = dsa_test_xmalloc((size_t)(r * bts) * 4);
  for (int64_t i = 0; i < r * bts; i++)
    bt[i] = (int32_t)(tc->bad && rnd(8) == 0 ? (rnd(2) ? -1 : tc->nb + rnd(3)) : rnd(tc->nb));
  int64_t maxg = 0;
  for (int64_t i = 0; i < r; i++) {
    seq[i] = (int32_t)rnd(cap_t + 1);
    gl[i] = (int32_t)(tc->null_gl ? seq[i] : rnd(seq[i] + 1));
    if (tc->bad) {
      int64_t k = rnd(6);
      if (k == 0) gl[i] = seq[i] + 1 + (int32_t)rnd(3);           /* g > seq_len */
      if (k == 1) seq[i] = (int32_t)(cap_t + 1 + rnd(2 * tc->bs)); /* past the table */
      if (k == 2 && !tc->null_gl) seq[i] = -1 - (int32_t)rnd(3), gl[i] = 0;
    }
    int64_t g = tc->null_gl ? seq[i] : gl[i];
    if (g > maxg) maxg = g;
  }
  int64_t offset = rnd(4);
  int64_t max_t = tc->bad ? (maxg + offset) * 3 / 4 + 1 : maxg + offset + rnd(3);
  if (offset > max_t) offset = max_t;
  int64_t s1 = rnd(2) ? 512 : 528, s0 = max_t * s1 + 8 * rnd(2);
  size_t obytes = (size_t)(r * s0) * 2;
  uint16_t *out = dsa_test_xmalloc(obytes), *want = dsa_test_xmalloc(obytes), *got = dsa_test_xmalloc(obytes);
  dsa_test_fill_random(&rng, out, obytes);
  memcpy(want, out, obytes);

  guarded_buf sb = gbuf_create(ctx, q, (size_t)r * 4, seq), gb = gbuf_create(ctx, q, (size_t)r * 4, gl),
              bb = gbuf_create(ctx, q, (size_t)(r * bts) * 4, bt), ob = gbuf_create(ctx, q, obytes, out);
  dsa_tensor st = dsa_tensor_make(sb.mem, sb.off, DSA_I32, 1, (int64_t[]){r});
  dsa_tensor gt = dsa_tensor_make(gb.mem, gb.off, DSA_I32, 1, (int64_t[]){r});
  dsa_tensor btt = {.mem = bb.mem, .offset = bb.off, .dtype = DSA_I32, .ndim = 2, .shape = {r, w},
                    .stride = {bts, 1}};
  dsa_tensor ot = {.mem = ob.mem, .offset = ob.off, .dtype = DSA_BF16, .ndim = 3,
                   .shape = {r, max_t, 512}, .stride = {s0, s1, 1}};
  CHECK_OK(dsa_mla_gather_paged(q, &st, tc->null_gl ? NULL : &gt, &btt, &c.dc, &ot, &(dsa_mla_gather_paged_params){.offset = offset}, NULL));
  uint32_t f = dsa_test_read_faults(q);
  unsigned want_f = ref_mla_gather_paged(&c.ref, seq, tc->null_gl ? NULL : gl, bt, r, w, bts,
                                         offset, want, max_t, s0, s1);
  gbuf_read(q, &ob, got);
  dsa_test_first_diff((uint8_t *)got, (uint8_t *)want, obytes, "gather_paged out",
             "r=%lld w=%lld nb=%lld bs=%d offset=%lld max_t=%lld null_gl=%d bad=%d",
             (long long)r, (long long)w, (long long)tc->nb, tc->bs, (long long)offset,
             (long long)max_t, tc->null_gl, tc->bad);
  CHECK(f == want_f, "gather_paged faults 0x%x, want 0x%x (bad=%d)", f, want_f, tc->bad);
  CHECK(gbuf_guards_ok(q, &ob) && gbuf_guards_ok(q, &c.gb), "gather_paged: guard overwritten");
  free(seq), free(gl), free(bt), free(out), free(want), free(got);
  gbuf_release(&sb), gbuf_release(&gb), gbuf_release(&bb), gbuf_release(&ob);
  cache_free(&c);
}

static void test_gather_paged(void) {
  const paged_case fixed[] = {
      {3, 3, 12, 64, 3, 0, 0, 0}, {1, 1, 1, 1, 0, 0, 1, 0},  {4, 5, 9, 3, 1, 3, 0, 0},
      {2, 4, 6, 17, 2, 1, 1, 0},  {5, 3, 4, 2, 4, 0, 0, 1},  {4, 6, 8, 3, 1, 7, 1, 1},
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) run_gather_paged(&fixed[i]);
  static const int32_t bss[] = {1, 2, 3, 17, 64};
  for (int it = 0; it < 10; it++) {
    paged_case tc = {1 + rnd(5), 1 + rnd(5), 1 + rnd(8), bss[rnd(5)], (int)rnd(5),
                     (size_t)rnd(2) * (1 + 2 * (size_t)rnd(40)), (int)rnd(2), (int)rnd(2)};
    run_gather_paged(&tc);
  }
}

/* ---- argument validation ---------------------------------------------------------- */

/* A valid call's arguments, which each case breaks in one way. */
typedef struct args {
  dsa_queue *q;
  dsa_tensor a, b, c, d; /* per operator: see the callers */
  dsa_tensor *pa, *pb, *pc, *pd;
  dsa_paged_cache cache;
  dsa_paged_cache *pcache;
  int64_t offset;
  unsigned char reserved; /* the params' last reserved byte (non-zero: refused) */
  dsa_events ev;
  dsa_events *pev;
} args;

static void args_point(void *vx) {
  args *x = vx;
  x->pa = &x->a, x->pb = &x->b, x->pc = &x->c, x->pd = &x->d;
  x->pcache = &x->cache;
  x->pev = &x->ev;
}

/* Breaks x by case number; returns 0 past the last case. The cases shared by
 * all operators: cache fields, queue, events. */
static int break_common(void *vx, int c, const char **w1, const char **w2) {
  args *x = vx;
  switch (c) {
    case 0: x->pcache = NULL, *w1 = "cache"; return 1;
    case 1: x->cache.mem = NULL, *w1 = "cache"; return 1;
    case 2: x->cache.format = DSA_CACHE_INDEXER_FP8, *w1 = "cache", *w2 = "format"; return 1;
    case 3: x->cache.block_size = 0, *w1 = "cache", *w2 = "block_size"; return 1;
    case 4: x->cache.block_size = -64, *w1 = "cache", *w2 = "block_size"; return 1;
    case 5: x->cache.block_stride = x->cache.block_size * 584 - 1, *w1 = "cache",
            *w2 = "block_stride"; return 1;
    case 6: x->cache.num_blocks = -1, *w1 = "cache", *w2 = "num_blocks"; return 1;
    case 7: x->cache.num_blocks += 1, *w1 = "cache"; return 1; /* past the buffer */
    case 8: x->cache.offset += 4096, *w1 = "cache"; return 1;  /* the same, by offset */
    case 9: x->q = NULL, *w1 = "q"; return 1;
    case 10: x->ev.num_wait = 2, x->ev.wait = NULL, *w1 = "ev"; return 1;
    case 11: x->reserved = 1, *w1 = "reserved"; return 1;
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
                       .outs = (const guarded_buf *const[]){out}, .nouts = 1, .min_cases = 20};
  dsa_test_run_bad(q, &spec);
  dsa_test_read_faults(q);
}

/* insert: a = k, b = slot_mapping */
static dsa_status call_insert(void *vx, cl_event *done) {
  args *x = vx;
  x->ev.done = done;
  dsa_mla_cache_insert_params p;
  dsa_mla_cache_insert_params_default(&p);
  p.reserved[sizeof p.reserved - 1] = x->reserved;
  return dsa_mla_cache_insert(x->q, x->pa, x->pb, x->pcache, &p, x->pev);
}

static int break_insert(void *vx, int c, const char **w1, const char **w2) {
  args *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->pa = NULL, *w1 = "k"; return 1;
    case 1: x->a.mem = NULL, *w1 = "k"; return 1;
    case 2: x->a.dtype = DSA_F32, *w1 = "k"; return 1;
    case 3: x->a.ndim = 3, x->a.shape[2] = 1, x->a.stride[2] = 1, *w1 = "k"; return 1;
    case 4: x->a.shape[1] = 448, *w1 = "k"; return 1;
    case 5: x->a.stride[1] = 2, x->a.stride[0] = 1024, x->a.shape[0] = 2, x->b.shape[0] = 2,
            *w1 = "k"; return 1;
    case 6: x->a.stride[0] = -512, *w1 = "k"; return 1;
    case 7: x->a.shape[0] = -1, x->b.shape[0] = -1, *w1 = "k"; return 1;
    case 8: x->a.shape[0] += 1, x->b.shape[0] += 1, x->b.mem = x->a.mem, *w1 = "k"; return 1;
    case 9: x->a.offset += 1, *w1 = "k"; return 1; /* not a whole element */
    case 10: x->pb = NULL, *w1 = "slot_mapping"; return 1;
    case 11: x->b.mem = NULL, *w1 = "slot_mapping"; return 1;
    case 12: x->b.dtype = DSA_I32, *w1 = "slot_mapping"; return 1;
    case 13: x->b.ndim = 2, x->b.shape[1] = 1, x->b.stride[1] = 1, *w1 = "slot_mapping"; return 1;
    case 14: x->b.shape[0] -= 1, *w1 = "slot_mapping"; return 1; /* length != N */
    case 15: x->b.offset += 4096, *w1 = "slot_mapping"; return 1; /* past its buffer */
    case 16: x->b.stride[0] = -1, *w1 = "slot_mapping"; return 1;
    default: return 0;
  }
}

/* gather_slots: a = indices, b = out */
static dsa_status call_slots(void *vx, cl_event *done) {
  args *x = vx;
  x->ev.done = done;
  dsa_mla_gather_slots_params p;
  dsa_mla_gather_slots_params_default(&p);
  p.reserved[sizeof p.reserved - 1] = x->reserved;
  return dsa_mla_gather_slots(x->q, x->pa, x->pcache, x->pb, &p, x->pev);
}

static int break_slots(void *vx, int c, const char **w1, const char **w2) {
  args *x = vx;
  (void)w2;
  switch (c) {
    case 0: x->pa = NULL, *w1 = "indices"; return 1;
    case 1: x->a.mem = NULL, *w1 = "indices"; return 1;
    case 2: x->a.dtype = DSA_I64, *w1 = "indices"; return 1;
    case 3: x->a.ndim = 2, x->a.shape[1] = 1, x->a.stride[1] = 1, *w1 = "indices"; return 1;
    case 4: x->a.offset += 4096, *w1 = "indices"; return 1;
    case 5: x->pb = NULL, *w1 = "out"; return 1;
    case 6: x->b.mem = NULL, *w1 = "out"; return 1;
    case 7: x->b.dtype = DSA_F32, *w1 = "out"; return 1;
    case 8: x->b.ndim = 3, x->b.shape[2] = 1, x->b.stride[2] = 1, *w1 = "out"; return 1;
    case 9: x->b.shape[0] -= 1, *w1 = "out"; return 1; /* rows != S */
    case 10: x->b.shape[1] = 576, *w1 = "out"; return 1;
    case 11: x->b.stride[1] = 2, *w1 = "out"; return 1;
    case 12: x->b.stride[0] = -512, *w1 = "out"; return 1;
    case 13: x->b.shape[0] = -4, x->a.shape[0] = -4, *w1 = "indices"; return 1;
    case 14: x->b.stride[0] = 1024, *w1 = "out"; return 1; /* past its buffer */
    case 15: x->b.offset += 1, *w1 = "out"; return 1;
    default: return 0;
  }
}

/* gather_paged: a = seq_lens, b = gather_lens, c = block_table, d = out */
static dsa_status call_paged(void *vx, cl_event *done) {
  args *x = vx;
  x->ev.done = done;
  dsa_mla_gather_paged_params p = {.offset = x->offset};
  p.reserved[sizeof p.reserved - 1] = x->reserved;
  return dsa_mla_gather_paged(x->q, x->pa, x->pb, x->pc, x->pcache, x->pd, &p, x->pev);
}

static int break_paged(void *vx, int c, const char **w1, const char **w2) {
  args *x = vx;
  switch (c) {
    case 0: x->pa = NULL, *w1 = "seq_lens"; return 1;
    case 1: x->a.dtype = DSA_I64, *w1 = "seq_lens"; return 1;
    case 2: x->a.ndim = 2, x->a.shape[1] = 1, x->a.stride[1] = 1, *w1 = "seq_lens"; return 1;
    case 3: x->a.offset += 4096, *w1 = "seq_lens"; return 1;
    case 4: x->b.dtype = DSA_U8, *w1 = "gather_lens"; return 1;
    case 5: x->b.shape[0] -= 1, *w1 = "gather_lens"; return 1;
    case 6: x->b.mem = NULL, *w1 = "gather_lens"; return 1;
    case 7: x->pc = NULL, *w1 = "block_table"; return 1;
    case 8: x->c.ndim = 1, *w1 = "block_table"; return 1;
    case 9: x->c.shape[0] += 1, *w1 = "block_table"; return 1;
    case 10: x->c.stride[1] = -1, *w1 = "block_table"; return 1;
    case 11: x->c.dtype = DSA_I64, *w1 = "block_table"; return 1;
    case 12: x->pd = NULL, *w1 = "out"; return 1;
    case 13: x->d.dtype = DSA_F32, *w1 = "out"; return 1;
    case 14: x->d.ndim = 2, *w1 = "out"; return 1;
    case 15: x->d.shape[0] += 1, *w1 = "out"; return 1;
    case 16: x->d.shape[2] = 256, *w1 = "out"; return 1;
    case 17: x->d.stride[2] = 2, *w1 = "out"; return 1;
    case 18: x->d.stride[0] *= 2, *w1 = "out"; return 1; /* past its buffer */
    case 19: x->d.mem = NULL, *w1 = "out"; return 1;
    case 20: x->offset = -1, *w1 = "offset"; return 1;
    case 21: x->offset = x->d.shape[1] + 1, *w1 = "offset"; return 1;
    default: (void)w2; return 0;
  }
}

static void test_bad_args(void) {
  test_cache c = cache_make(3, 4, 4 * 584 + 3, 8, 1);
  const int64_t n = 5;
  int64_t slots[5] = {0, 3, 5, 11, 7};
  uint16_t k[5 * 512];
  for (int i = 0; i < 5; i++) make_row(k + 512 * i, 512, 1);
  guarded_buf kb = gbuf_create(ctx, q, sizeof k, k), sb = gbuf_create(ctx, q, sizeof slots, slots);
  args x;
  memset(&x, 0, sizeof x);
  x.q = q;
  x.cache = c.dc;
  x.a = dsa_tensor_make(kb.mem, kb.off, DSA_BF16, 2, (int64_t[]){n, 512});
  x.b = dsa_tensor_make(sb.mem, sb.off, DSA_I64, 1, (int64_t[]){n});
  run_bad("insert", &x, call_insert, break_insert, &c.gb);

  int32_t idx[4] = {1, 0, 11, 6};
  uint16_t out0[4 * 512];
  dsa_test_fill_random(&rng, out0, sizeof out0);
  guarded_buf ib = gbuf_create(ctx, q, sizeof idx, idx), ob = gbuf_create(ctx, q, sizeof out0, out0);
  memset(&x, 0, sizeof x);
  x.q = q;
  x.cache = c.dc;
  x.a = dsa_tensor_make(ib.mem, ib.off, DSA_I32, 1, (int64_t[]){4});
  x.b = dsa_tensor_make(ob.mem, ob.off, DSA_BF16, 2, (int64_t[]){4, 512});
  run_bad("gather_slots", &x, call_slots, break_slots, &ob);

  int32_t seq[2] = {9, 5}, gl[2] = {4, 5}, bt[2 * 3] = {2, 0, 1, 1, 2, 0};
  uint16_t *pout = dsa_test_xmalloc(2 * 6 * 512 * 2);
  dsa_test_fill_random(&rng, pout, 2 * 6 * 512 * 2);
  guarded_buf qb = gbuf_create(ctx, q, sizeof seq, seq), gb = gbuf_create(ctx, q, sizeof gl, gl),
              bb = gbuf_create(ctx, q, sizeof bt, bt), pb = gbuf_create(ctx, q, 2 * 6 * 512 * 2, pout);
  memset(&x, 0, sizeof x);
  x.q = q;
  x.cache = c.dc;
  x.offset = 1;
  x.a = dsa_tensor_make(qb.mem, qb.off, DSA_I32, 1, (int64_t[]){2});
  x.b = dsa_tensor_make(gb.mem, gb.off, DSA_I32, 1, (int64_t[]){2});
  x.c = dsa_tensor_make(bb.mem, bb.off, DSA_I32, 2, (int64_t[]){2, 3});
  x.d = dsa_tensor_make(pb.mem, pb.off, DSA_BF16, 3, (int64_t[]){2, 6, 512});
  run_bad("gather_paged", &x, call_paged, break_paged, &pb);

  free(pout);
  gbuf_release(&kb), gbuf_release(&sb), gbuf_release(&ib), gbuf_release(&ob);
  gbuf_release(&qb), gbuf_release(&gb), gbuf_release(&bb), gbuf_release(&pb);
  cache_free(&c);
}

/* ---- empty inputs and events ------------------------------------------------------ */

static void test_empty_and_events(void) {
  test_cache c = cache_make(2, 2, 2 * 584, 0, 1);
  guarded_buf any = gbuf_create(ctx, q, 4096, NULL);
  cl_event done = NULL;
  dsa_events ev = {0, NULL, &done};

  dsa_tensor k0 = dsa_tensor_make(any.mem, any.off, DSA_BF16, 2, (int64_t[]){0, 512});
  dsa_tensor s0 = dsa_tensor_make(any.mem, any.off, DSA_I64, 1, (int64_t[]){0});
  CHECK_OK(dsa_mla_cache_insert(q, &k0, &s0, &c.dc, NULL, &ev));
  dsa_test_expect_complete(done, "insert N=0");

  dsa_tensor i0 = dsa_tensor_make(any.mem, any.off, DSA_I32, 1, (int64_t[]){0});
  dsa_tensor o0 = dsa_tensor_make(any.mem, any.off, DSA_BF16, 2, (int64_t[]){0, 512});
  done = NULL;
  CHECK_OK(dsa_mla_gather_slots(q, &i0, &c.dc, &o0, NULL, &ev));
  dsa_test_expect_complete(done, "gather_slots S=0");

  dsa_tensor r0 = dsa_tensor_make(any.mem, any.off, DSA_I32, 1, (int64_t[]){0});
  dsa_tensor b0 = dsa_tensor_make(any.mem, any.off, DSA_I32, 2, (int64_t[]){0, 4});
  dsa_tensor p0 = dsa_tensor_make(any.mem, any.off, DSA_BF16, 3, (int64_t[]){0, 8, 512});
  done = NULL;
  CHECK_OK(dsa_mla_gather_paged(q, &r0, NULL, &b0, &c.dc, &p0, NULL, &ev));
  dsa_test_expect_complete(done, "gather_paged R=0");

  /* A real call that waits on the previous one's event and returns its own. */
  int64_t slot = 3;
  uint16_t k[512];
  make_row(k, 512, 0);
  guarded_buf kb = gbuf_create(ctx, q, sizeof k, k), sb = gbuf_create(ctx, q, 8, &slot);
  dsa_tensor kt = dsa_tensor_make(kb.mem, kb.off, DSA_BF16, 2, (int64_t[]){1, 512});
  dsa_tensor st = dsa_tensor_make(sb.mem, sb.off, DSA_I64, 1, (int64_t[]){1});
  cl_event first = NULL, second = NULL;
  dsa_events ev1 = {0, NULL, &first};
  CHECK_OK(dsa_mla_cache_insert(q, &kt, &st, &c.dc, NULL, &ev1));
  dsa_events ev2 = {1, &first, &second};
  CHECK_OK(dsa_mla_cache_insert(q, &kt, &st, &c.dc, NULL, &ev2));
  dsa_test_expect_complete(second, "insert with a wait list");
  if (first) clReleaseEvent(first);
  ref_mla_insert(&c.ref, k, 512, &slot, 1);
  uint8_t *got = dsa_test_xmalloc(c.size);
  gbuf_read(q, &c.gb, got);
  dsa_test_first_diff(got, c.img, c.size, "insert with events", "slot 3");
  free(got);
  gbuf_release(&kb), gbuf_release(&sb), gbuf_release(&any);
  cache_free(&c);
}

/* Block ids whose byte offset needs more than 32 bits: only the addressing is
 * exercised, with a stride large enough that a 32-bit product wraps. */
static void test_64bit_addressing(void) {
  const int64_t stride = ((int64_t)1 << 31) / 2 + 4 * 584; /* two blocks span > 2^31 */
  cl_ulong maxalloc = 0;
  clGetDeviceInfo(dsa_context_cl_device(ctx), CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof maxalloc,
                  &maxalloc, NULL);
  size_t need = (size_t)(4 * stride) + 4 * 584 + 2 * DSA_TEST_GUARD;
  if (maxalloc < need) {
    fprintf(stderr, "note: 64-bit addressing test skipped (max alloc %llu)\n",
            (unsigned long long)maxalloc);
    return;
  }
  cl_int err;
  cl_mem m = clCreateBuffer(dsa_context_cl_context(ctx), CL_MEM_READ_WRITE, need, NULL, &err);
  if (!m) {
    fprintf(stderr, "note: 64-bit addressing test skipped (alloc %d)\n", (int)err);
    return;
  }
  uint8_t zero = 0;
  clEnqueueFillBuffer(dsa_queue_cl(q), m, &zero, 1, 0, need, 0, NULL, NULL);
  dsa_paged_cache dc = {.mem = m, .offset = 0, .num_blocks = 5, .block_size = 4,
                        .block_stride = stride, .format = DSA_CACHE_MLA_FP8};
  uint16_t k[512];
  make_row(k, 512, 0);
  int64_t slot = 4 * 4 + 1; /* block 4: offset 4·stride > 2^32 */
  guarded_buf kb = gbuf_create(ctx, q, sizeof k, k), sb = gbuf_create(ctx, q, 8, &slot);
  dsa_tensor kt = dsa_tensor_make(kb.mem, kb.off, DSA_BF16, 2, (int64_t[]){1, 512});
  dsa_tensor st = dsa_tensor_make(sb.mem, sb.off, DSA_I64, 1, (int64_t[]){1});
  CHECK_OK(dsa_mla_cache_insert(q, &kt, &st, &dc, NULL, NULL));
  uint8_t tok[REF_MLA_TOKEN_BYTES], got[REF_MLA_TOKEN_BYTES];
  ref_mla_quantize(k, tok);
  ref_mla_cache rc = {NULL, 5, 4, stride};
  clEnqueueReadBuffer(dsa_queue_cl(q), m, CL_TRUE, ref_mla_data_offset(&rc, slot), 576, got, 0,
                      NULL, NULL);
  clEnqueueReadBuffer(dsa_queue_cl(q), m, CL_TRUE, ref_mla_scale_offset(&rc, slot), 8, got + 576,
                      0, NULL, NULL);
  CHECK(!memcmp(got, tok, sizeof tok), "insert beyond 2^32 bytes: token mismatch");
  /* And back through gather_slots. */
  int32_t idx = (int32_t)slot;
  uint16_t want[512], back[512];
  guarded_buf ib = gbuf_create(ctx, q, 4, &idx), ob = gbuf_create(ctx, q, sizeof back, NULL);
  dsa_tensor it = dsa_tensor_make(ib.mem, ib.off, DSA_I32, 1, (int64_t[]){1});
  dsa_tensor ot = dsa_tensor_make(ob.mem, ob.off, DSA_BF16, 2, (int64_t[]){1, 512});
  CHECK_OK(dsa_mla_gather_slots(q, &it, &dc, &ot, NULL, NULL));
  gbuf_read(q, &ob, back);
  uint8_t img[REF_MLA_TOKEN_BYTES * 4];
  ref_mla_cache one = {img, 1, 4, 4 * 584};
  ref_mla_insert(&one, k, 512, &(int64_t){1}, 1);
  ref_mla_dequant(&one, 1, want);
  CHECK(!memcmp(back, want, sizeof want), "gather beyond 2^32 bytes mismatch");
  gbuf_release(&kb), gbuf_release(&sb), gbuf_release(&ib), gbuf_release(&ob);
  clReleaseMemObject(m);
}

/* Every (e4m3 byte, scale byte) pair through gather_slots: slot t of a
 * 256-slot cache has all seven scales = t and NoPE byte d = (d + t) mod 256,
 * so each scale byte meets every code (zeros, subnormals, NaN, the scale
 * bytes 0 and 255 included). */
static void test_dequant_exhaustive(void) {
  const int32_t bs = 64;
  const int64_t nb = 4, stride = bs * REF_MLA_TOKEN_BYTES, n = nb * bs;
  uint8_t *img = dsa_test_xmalloc((size_t)(nb * stride));
  dsa_test_fill_random(&rng, img, (size_t)(nb * stride));
  ref_mla_cache rc = {img, nb, bs, stride};
  int32_t *idx = dsa_test_xmalloc((size_t)n * 4);
  for (int64_t t = 0; t < n; t++) {
    uint8_t *d = img + ref_mla_data_offset(&rc, t), *sc = img + ref_mla_scale_offset(&rc, t);
    for (int i = 0; i < REF_MLA_NOPE; i++) d[i] = (uint8_t)(i + t);
    for (int q7 = 0; q7 < 7; q7++) sc[q7] = (uint8_t)t;
    idx[t] = (int32_t)t;
  }
  guarded_buf cb = gbuf_create(ctx, q, (size_t)(nb * stride), img);
  guarded_buf ib = gbuf_create(ctx, q, (size_t)n * 4, idx);
  guarded_buf ob = gbuf_create(ctx, q, (size_t)n * 1024, NULL);
  dsa_paged_cache dc = {.mem = cb.mem, .offset = cb.off, .num_blocks = nb, .block_size = bs,
                        .block_stride = stride, .format = DSA_CACHE_MLA_FP8};
  dsa_tensor it = dsa_tensor_make(ib.mem, ib.off, DSA_I32, 1, (int64_t[]){n});
  dsa_tensor ot = dsa_tensor_make(ob.mem, ob.off, DSA_BF16, 2, (int64_t[]){n, 512});
  CHECK_OK(dsa_mla_gather_slots(q, &it, &dc, &ot, NULL, NULL));
  uint16_t *got = dsa_test_xmalloc((size_t)n * 1024), *want = dsa_test_xmalloc((size_t)n * 1024);
  gbuf_read(q, &ob, got);
  ref_mla_gather_slots(&rc, idx, n, want, 512);
  dsa_test_first_diff((const uint8_t *)got, (const uint8_t *)want, (size_t)n * 1024,
             "exhaustive dequant", "all codes x all scales");
  gbuf_release(&cb), gbuf_release(&ib), gbuf_release(&ob);
  free(img), free(idx), free(got), free(want);
}

int main(void) {
  dsa_test_open(&ctx, &q, 0);
  test_bad_args();
  test_empty_and_events();
  test_insert();
  test_insert_pow2();
  test_gather_slots();
  test_dequant_exhaustive();
  test_gather_paged();
  test_64bit_addressing();
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
