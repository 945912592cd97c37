/* MLA KV-cache operators: insert, gather by slot, gather through block
 * tables. All byte-exact against tests/ref (as tests/test_mla_cache.c):
 * the whole cache image after an insert, the whole output buffer (rows the
 * call must not touch included) after a gather, and the fault word. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "checkcl.h"
#include "ref.h"

/* The cases are tools/cases/mla_cache.c's; the reference runs on a copy of
 * the starting cache image (insert) or output (gathers). */

/* The gathers' cache: over gen_check's random bytes, 3 of 4 slots written
 * with valid tokens by the reference insert (k rows as the insert case's). */
static void fill_tokens(cc_env *e, uint8_t *cache, int64_t nb, int32_t bs, int64_t stride) {
  ref_mla_cache rc = {cache, nb, bs, stride};
  uint16_t row[512];
  for (int64_t s = 0; s < nb * bs; s++) {
    if (cc_rnd(e, 4) == 0) continue;
    case_mla_k_row(&e->rng, row);
    ref_mla_insert(&rc, row, 512, &s, 1);
  }
}

/* ---- insert ------------------------------------------------------------------ */

static int insert_case(cc_env *e, int64_t n, int64_t nb, int32_t bs, char *msg, size_t ms) {
  case_mla_insert c = {.n = n, .nb = nb, .bs = bs};
  const case_dev d = {e->clctx, e->clq};
  cc_upload(e, &case_mla_insert_ops, &c, case_mla_insert_gen_check(&c, &e->rng), 0);
  int bad;
  if (cc_run(e, &case_mla_insert_ops, &c, NULL) != DSA_OK) {
    bad = CC_FAIL(msg, ms, "dsa_mla_cache_insert: %s", dsa_last_error());
  } else {
    const size_t size = (size_t)(nb * c.stride);
    uint8_t *want = cc_xmalloc(size);
    memcpy(want, c.cache, size);
    ref_mla_cache rc = {want, nb, bs, c.stride};
    const unsigned want_f = ref_mla_insert(&rc, c.k, 512, c.slots, n);
    bad = case_mla_insert_check(&d, &c, want, msg, ms) ||
          case_faults(e->q, want_f, "mla insert", msg, ms);
    free(want);
  }
  case_mla_insert_free(&c);
  return bad;
}

static int check_insert(cc_env *e, char *msg, size_t ms) {
  static const int32_t bss[] = {1, 3, 16, 64};
  if (insert_case(e, 1, 1, 1, msg, ms) || insert_case(e, 37, 4, 16, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (insert_case(e, 1 + cc_rnd(e, 80), 1 + cc_rnd(e, 6), bss[cc_rnd(e, 4)], msg, ms)) return 1;
  return 0;
}

/* ---- gather by slot -------------------------------------------------------------- */

static int slots_case(cc_env *e, int64_t n, int64_t nb, int32_t bs, char *msg, size_t ms) {
  case_mla_slots c = {.s = n, .nb = nb, .bs = bs};
  const case_dev d = {e->clctx, e->clq};
  const int gen = case_mla_slots_gen_check(&c, &e->rng);
  if (!gen) fill_tokens(e, c.cache, nb, bs, c.stride);
  cc_upload(e, &case_mla_slots_ops, &c, gen, 0);
  int bad;
  if (cc_run(e, &case_mla_slots_ops, &c, NULL) != DSA_OK) {
    bad = CC_FAIL(msg, ms, "dsa_mla_gather_slots: %s", dsa_last_error());
  } else {
    const size_t ob = (size_t)n * 1024;
    uint16_t *want = cc_xmalloc(ob);
    memcpy(want, c.out_in, ob);
    const ref_mla_cache rc = {c.cache, nb, bs, c.stride};
    const unsigned want_f = ref_mla_gather_slots(&rc, c.idx, n, want, 512);
    bad = case_mla_slots_check(&d, &c, want, msg, ms) ||
          case_faults(e->q, want_f, "mla gather_slots", msg, ms);
    free(want);
  }
  case_mla_slots_free(&c);
  return bad;
}

static int check_slots(cc_env *e, char *msg, size_t ms) {
  static const int32_t bss[] = {1, 5, 16, 64};
  if (slots_case(e, 1, 1, 1, msg, ms) || slots_case(e, 33, 3, 16, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (slots_case(e, 1 + cc_rnd(e, 100), 1 + cc_rnd(e, 6), bss[cc_rnd(e, 4)], msg, ms)) return 1;
  return 0;
}

/* ---- gather through block tables ---------------------------------------------------- */

static int paged_case(cc_env *e, int64_t r, int64_t w, int64_t nb, int32_t bs, int with_gl,
                      char *msg, size_t ms) {
  case_mla_paged c = {.has_gl = with_gl, .r = r, .w = w, .nb = nb, .bs = bs};
  const case_dev d = {e->clctx, e->clq};
  const int gen = case_mla_paged_gen_check(&c, &e->rng);
  if (!gen) fill_tokens(e, c.cache, nb, bs, c.stride);
  cc_upload(e, &case_mla_paged_ops, &c, gen, 0);
  int bad;
  if (cc_run(e, &case_mla_paged_ops, &c, NULL) != DSA_OK) {
    bad = CC_FAIL(msg, ms, "dsa_mla_gather_paged: %s", dsa_last_error());
  } else {
    const size_t ob = (size_t)(r * c.max_t) * 1024;
    uint16_t *want = cc_xmalloc(ob);
    memcpy(want, c.out_in, ob);
    const ref_mla_cache rc = {c.cache, nb, bs, c.stride};
    const unsigned want_f =
        ref_mla_gather_paged(&rc, c.seq, with_gl ? c.gl : NULL, c.table, r, w, w, c.offset, want,
                             c.max_t, c.max_t * 512, 512);
    bad = case_mla_paged_check(&d, &c, want, msg, ms) ||
          case_faults(e->q, want_f, "mla gather_paged", msg, ms);
    free(want);
  }
  case_mla_paged_free(&c);
  return bad;
}

static int check_paged(cc_env *e, char *msg, size_t ms) {
  static const int32_t bss[] = {1, 4, 16, 64};
  if (paged_case(e, 1, 1, 1, 1, 0, msg, ms) || paged_case(e, 3, 4, 5, 16, 1, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (paged_case(e, 1 + cc_rnd(e, 4), 1 + cc_rnd(e, 4), 1 + cc_rnd(e, 6), bss[cc_rnd(e, 4)],
                   (int)cc_rnd(e, 2), msg, ms))
      return 1;
  return 0;
}

/* ---- bench: dsacl-bench's rows (the insert's N = 8192 one, the first
 * gathers') and their inputs ------------------------------------------------------- */

static int64_t b_pool(int small) {
  return (int64_t)ceil((small ? CASE_MLA_POOL_BYTES_QUICK : CASE_MLA_POOL_BYTES) /
                       CASE_MLA_BENCH_STRIDE);
}

#define INS_ROW(n, qn, whole) {n, qn, whole},
static const int64_t ins_row[][3] = {CASE_MLA_INSERT_ROWS(INS_ROW)};
#define SLOTS_ROW(t, k, qt, qk) {(t) * (k), (qt) * (qk)},
static const int64_t slots_row[][2] = {CASE_MLA_SLOTS_ROWS(SLOTS_ROW)};
#define PAGED_ROW(r, t, qr, qt) {r, t, qr, qt},
static const int64_t paged_row[][4] = {CASE_MLA_PAGED_ROWS(PAGED_ROW)};

static int b_insert(cc_env *e, int small, void *p) {
  (void)e;
  case_mla_insert *c = p;
  *c = (case_mla_insert){.n = ins_row[1][small], .whole = (int)ins_row[1][2], .nb = b_pool(small)};
  return case_mla_insert_gen_bench(c);
}

static int b_slots(cc_env *e, int small, void *p) {
  (void)e;
  case_mla_slots *c = p;
  *c = (case_mla_slots){.s = slots_row[0][small], .nb = b_pool(small)};
  return case_mla_slots_gen_bench(c);
}

static int b_paged(cc_env *e, int small, void *p) {
  (void)e;
  case_mla_paged *c = p;
  *c = (case_mla_paged){.r = paged_row[0][2 * small], .max_t = paged_row[0][1 + 2 * small],
                        .nb = b_pool(small)};
  return case_mla_paged_gen_bench(c);
}

const cc_op cc_ops_mla_cache[] = {
    {"dsa_mla_cache_insert", check_insert, "N=8192", CC_BENCH(mla_insert, b_insert)},
    {"dsa_mla_gather_slots", check_slots, "64x640 (S=40960)", CC_BENCH(mla_slots, b_slots)},
    {"dsa_mla_gather_paged", check_paged, "R=4 T=8192", CC_BENCH(mla_paged, b_paged)},
    {0}};
