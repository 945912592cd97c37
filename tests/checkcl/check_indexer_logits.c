/* Indexer MQA logits (ragged and paged, FP8 and MXFP4): the cases, their
 * calls and SPEC.md's tolerance are tools/cases/indexer_logits.c's (as
 * tests/test_indexer_logits.c: max|got - ref| <= 1e-5 * max|ref| over the
 * finite entries of a call, -inf exactly where the fp64 reference has it;
 * bf16 output also allows the final rounding); here the reference, the fault
 * word and the random shapes. Cases use clean = 1 (every column written). */
#include <stdio.h>
#include <stdlib.h>

#include "cases.h"
#include "checkcl.h"
#include "ref_indexer_logits.h"

/* ---- ragged -------------------------------------------------------------------- */

static case_logits *rag_make(cc_env *e, int fp4, int64_t m, int64_t h, int64_t d, int64_t n,
                             int bf16) {
  case_logits *r = cc_xmalloc(sizeof *r);
  *r = (case_logits){.m = m, .h = h, .d = d, .n = n, .fp4 = fp4, .bf16 = bf16};
  cc_upload(e, &case_logits_ops, r, case_logits_gen_check(r, &e->rng), 0);
  return r;
}

static int rag_case(cc_env *e, int fp4, int64_t m, int64_t h, int64_t d, int64_t n, int bf16,
                    char *msg, size_t ms) {
  case_logits *r = rag_make(e, fp4, m, h, d, n, bf16);
  int bad;
  if (cc_run(e, &case_logits_ops, r, NULL) != DSA_OK) {
    bad = CC_FAIL(msg, ms, "dsa_indexer_logits: %s", dsa_last_error());
  } else {
    double *ref = cc_xmalloc((size_t)(m * n) * sizeof *ref);
    const unsigned want_f = ref_mqa_logits(fp4, m, h, d, n, r->q, r->qs, r->k,
                                           fp4 ? (const void *)r->kss : r->ksc, r->w, r->ks,
                                           r->ke, 1, ref);
    bad = case_logits_check(&(case_dev){e->clctx, e->clq}, r, ref, msg, ms) ||
          case_faults(e->q, want_f, "mqa logits", msg, ms);
    free(ref);
  }
  cc_case_free(&case_logits_ops, r);
  return bad;
}

static int check_rag(cc_env *e, int fp4, char *msg, size_t ms) {
  static const int64_t hs[] = {1, 8, 16, 64};
  if (rag_case(e, fp4, 1, 1, 32, 1, 0, msg, ms) || rag_case(e, fp4, 5, 64, 128, 130, 0, msg, ms))
    return 1;
  for (int it = 0; it < (e->quick ? 2 : 10); it++)
    if (rag_case(e, fp4, 1 + cc_rnd(e, 6), hs[cc_rnd(e, 4)], 32 * (1 + cc_rnd(e, 4)),
                 1 + cc_rnd(e, 200), cc_rnd(e, 4) == 0, msg, ms))
      return 1;
  return 0;
}
static int check_rag_fp8(cc_env *e, char *msg, size_t ms) { return check_rag(e, 0, msg, ms); }
static int check_rag_fp4(cc_env *e, char *msg, size_t ms) { return check_rag(e, 1, msg, ms); }

/* ---- paged ----------------------------------------------------------------------- */

static case_paged_logits *paged_make(cc_env *e, int fp4, int64_t b, int64_t nn, int64_t h,
                                     int64_t w, int64_t nb, int32_t bs, int rank, int bf16) {
  case_paged_logits *p = cc_xmalloc(sizeof *p);
  *p = (case_paged_logits){.fp4 = fp4, .bf16 = bf16, .ctx_rank = rank, .b = b, .next_n = nn,
                           .h = h, .w = w, .nb = nb, .bs = bs};
  cc_upload(e, &case_paged_logits_ops, p, case_paged_logits_gen_check(p, &e->rng), 0);
  return p;
}

static int paged_case(cc_env *e, int fp4, int64_t b, int64_t nn, int64_t h, int64_t w, int64_t nb,
                      int32_t bs, int rank, int bf16, char *msg, size_t ms) {
  case_paged_logits *p = paged_make(e, fp4, b, nn, h, w, nb, bs, rank, bf16);
  int bad;
  if (cc_run(e, &case_paged_logits_ops, p, NULL) != DSA_OK) {
    bad = CC_FAIL(msg, ms, "dsa_indexer_paged_logits: %s", dsa_last_error());
  } else {
    double *ref = cc_xmalloc((size_t)(b * nn * p->mml) * sizeof *ref);
    ref_il_cache rc = {p->cache, nb, bs, p->stride};
    const unsigned want_f = ref_paged_mqa_logits(fp4, b, nn, h, p->q, p->qs, &rc, p->wt, p->ctx,
                                                 rank, p->table, w, p->mml, 1, ref);
    bad = case_paged_logits_check(&(case_dev){e->clctx, e->clq}, p, ref, msg, ms) ||
          case_faults(e->q, want_f, "paged mqa logits", msg, ms);
    free(ref);
  }
  cc_case_free(&case_paged_logits_ops, p);
  return bad;
}

static int check_paged(cc_env *e, int fp4, char *msg, size_t ms) {
  static const int64_t hs[] = {1, 8, 16, 64};
  static const int32_t bss[] = {1, 3, 16, 64};
  /* (H = 128: two head chunks, the paged portable-h64pre's general
   * kernel; H <= 64 takes its one-chunk twin.) */
  if (paged_case(e, fp4, 1, 1, 1, 1, 1, 1, 1, 0, msg, ms) ||
      paged_case(e, fp4, 3, 2, 64, 5, 16, 64, 2, 0, msg, ms) ||
      paged_case(e, fp4, 2, 1, 128, 3, 4, 64, 1, 0, msg, ms))
    return 1;
  for (int it = 0; it < (e->quick ? 2 : 10); it++)
    if (paged_case(e, fp4, 1 + cc_rnd(e, 4), 1 + cc_rnd(e, 3), hs[cc_rnd(e, 4)],
                   1 + cc_rnd(e, 4), 1 + cc_rnd(e, 8), bss[cc_rnd(e, 4)], 1 + (int)cc_rnd(e, 2),
                   cc_rnd(e, 4) == 0, msg, ms))
      return 1;
  return 0;
}
static int check_paged_fp8(cc_env *e, char *msg, size_t ms) { return check_paged(e, 0, msg, ms); }
static int check_paged_fp4(cc_env *e, char *msg, size_t ms) { return check_paged(e, 1, msg, ms); }

/* ---- bench: dsacl-bench's first row of each form and its inputs, FP8 and MXFP4 -------- */

#define RAG_ROW(m, n, h, qm, qn) {m, n, h, qm, qn},
static const int64_t rag_row[][5] = {CASE_LOGITS_ROWS(RAG_ROW)};
#define PAGED_ROW(b, t, nn, qb, qt) {b, t, nn, qb, qt},
static const int64_t paged_row[][5] = {CASE_PAGED_LOGITS_ROWS(PAGED_ROW)};

static int rag_gen(int fp4, int small, case_logits *c) {
  const int64_t *r = rag_row[0];
  *c = (case_logits){.fp4 = fp4, .m = small ? r[3] : r[0], .n = small ? r[4] : r[1], .h = r[2],
                     .d = 128};
  return case_logits_gen_bench(c);
}
static int b_rag8(cc_env *e, int small, void *c) { return (void)e, rag_gen(0, small, c); }
static int b_rag4(cc_env *e, int small, void *c) { return (void)e, rag_gen(1, small, c); }

static int paged_gen(int fp4, int small, case_paged_logits *c) {
  const int64_t *r = paged_row[0];
  *c = (case_paged_logits){.fp4 = fp4, .ctx_rank = 1, .b = small ? r[3] : r[0],
                           .mml = small ? r[4] : r[1], .next_n = r[2], .h = 64};
  return case_paged_logits_gen_bench(c);
}
static int b_paged8(cc_env *e, int small, void *c) { return (void)e, paged_gen(0, small, c); }
static int b_paged4(cc_env *e, int small, void *c) { return (void)e, paged_gen(1, small, c); }

#define RAG_SHAPE "M=2048 N=8192 H=64"
#define PAGED_SHAPE "B=64 ctx=32768 next_n=1 H=64"
const cc_op cc_ops_indexer_logits[] = {
    {"dsa_indexer_logits", check_rag_fp8, RAG_SHAPE, CC_BENCH(logits, b_rag8)},
    {"dsa_indexer_logits", check_rag_fp4, RAG_SHAPE, CC_BENCH(logits, b_rag4)},
    {"dsa_indexer_paged_logits", check_paged_fp8, PAGED_SHAPE, CC_BENCH(paged_logits, b_paged8)},
    {"dsa_indexer_paged_logits", check_paged_fp4, PAGED_SHAPE, CC_BENCH(paged_logits, b_paged4)},
    {0}};
