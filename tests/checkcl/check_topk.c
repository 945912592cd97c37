/* Indexer top-k (prefill and decode): indices byte-exact against tests/ref
 * (the deterministic rule of topk.h, as tests/test_topk.c), and the fault
 * word. Logits with ties, -inf and NaN now and then. The cases run with the
 * automatic pick, then with each algorithm preferred in turn (the context's
 * DSACL_TOPK setting, set directly: wide, split in chunks of 300 columns
 * and in its default ones, lrow, row, stream; the random cases under
 * automatic and split:300; --quick: automatic, wide, split:300 and stream),
 * so every variant the device can
 * run is seen. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkcl.h"
#include "internal.h"
#include "cases.h"
#include "ref_topk.h"

/* The case (shape, inputs, call, rule) is tools/cases/topk.c's; here the
 * reference and the variants. */
static case_topk *tk_make(cc_env *e, int decode, int64_t rows_or_b, int64_t nn, int64_t n,
                          int32_t k, int rank, int bad) {
  case_topk *s = cc_xmalloc(sizeof *s);
  *s = (case_topk){.decode = decode, .rows = decode ? rows_or_b * nn : rows_or_b, .n = n,
                   .b = rows_or_b, .next_n = (int32_t)nn, .lens_rank = rank, .k = k, .bad = bad};
  cc_upload(e, &case_topk_ops, s, case_topk_gen_check(s, &e->rng), 0);
  return s;
}

static int tk_case(cc_env *e, int decode, int64_t rb, int64_t nn, int64_t n, int32_t k, int rank,
                   int bad, char *msg, size_t ms) {
  case_topk *s = tk_make(e, decode, rb, nn, n, k, rank, bad);
  int rc;
  if (cc_run(e, &case_topk_ops, s, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "%s: %s", decode ? "dsa_topk_decode" : "dsa_topk_prefill",
                 dsa_last_error());
  } else {
    int32_t *want = cc_xmalloc((size_t)(s->rows * k) * 4);
    const unsigned wf =
        decode ? ref_topk_decode(s->logits, s->rows, n, n, s->lens, rank, nn, k, want, k, 1)
               : ref_topk_prefill(s->logits, s->rows, n, n, s->lens, s->ends, k, want, k, 1);
    rc = case_topk_check(&(case_dev){e->clctx, e->clq}, s, want, msg, ms) ||
         case_faults(e->q, wf, "top-k", msg, ms);
    free(want);
  }
  cc_case_free(&case_topk_ops, s);
  return rc;
}

/* The preferences every check runs under: {algorithm, chunk}. */
/* random: also the random cases; quick: also under --quick (the automatic
 * pick already takes split and row for these shapes). */
static const struct { int algo; uint32_t chunk; int random, quick; } prefs[] = {
    {DSA_TOPK_ALGO_AUTO, 0, 1, 1},  {DSA_TOPK_ALGO_WIDE, 0, 0, 1},
    {DSA_TOPK_ALGO_SPLIT, 300, 1, 1},
    {DSA_TOPK_ALGO_SPLIT, 0, 0, 0}, {DSA_TOPK_ALGO_LROW, 0, 0, 0},
    {DSA_TOPK_ALGO_ROW, 0, 0, 0},
    {DSA_TOPK_ALGO_STREAM, 0, 0, 1}};

static int check_form(cc_env *e, int decode, char *msg, size_t ms) {
  static const int32_t ks[] = {1, 7, 64, 512, 2048};
  const int algo0 = e->ctx->topk_algo;
  const uint32_t chunk0 = e->ctx->topk_chunk;
  int rc = 0;
  for (size_t pi = 0; pi < sizeof prefs / sizeof prefs[0] && !rc; pi++) {
    if (e->quick && !prefs[pi].quick) continue;
    e->ctx->topk_algo = prefs[pi].algo;
    e->ctx->topk_chunk = prefs[pi].chunk;
    if (decode)
      rc = tk_case(e, 1, 1, 1, 1, 1, 1, 0, msg, ms) ||
           tk_case(e, 1, 3, 2, 3000, 512, 2, 1, msg, ms) ||
           tk_case(e, 1, 2, 1, 9000, 2048, 1, 0, msg, ms);
    else
      rc = tk_case(e, 0, 1, 0, 1, 1, 1, 0, msg, ms) ||
           tk_case(e, 0, 5, 0, 3000, 512, 1, 1, msg, ms) ||
           tk_case(e, 0, 2, 0, 9000, 2048, 1, 0, msg, ms);
    for (int it = 0; prefs[pi].random && it < (e->quick ? 2 : 6) && !rc; it++)
      rc = decode ? tk_case(e, 1, 1 + cc_rnd(e, 4), 1 + cc_rnd(e, 2), 1 + cc_rnd(e, 3000),
                            ks[cc_rnd(e, 5)], 1 + (int)cc_rnd(e, 2), 0, msg, ms)
                  : tk_case(e, 0, 1 + cc_rnd(e, 6), 0, 1 + cc_rnd(e, 3000), ks[cc_rnd(e, 5)], 1,
                            (int)cc_rnd(e, 2), msg, ms);
  }
  e->ctx->topk_algo = algo0;
  e->ctx->topk_chunk = chunk0;
  return rc;
}
static int check_prefill(cc_env *e, char *msg, size_t ms) { return check_form(e, 0, msg, ms); }
static int check_decode(cc_env *e, char *msg, size_t ms) { return check_form(e, 1, msg, ms); }

/* --bench: dsacl-bench's first decode row and inputs, and a prefill shape. */
#define FIRST_ROW(r, n, k, qr, qn, bf) {r, n, k, qr, qn, bf},
static const int64_t dec_row[][6] = {CASE_TOPK_ROWS(FIRST_ROW)};
#define PRE_ROW(r, n, k, qr, qn) {r, n, k, qr, qn},
static const int64_t pre_row[][5] = {CASE_TOPK_PREFILL_ROW(PRE_ROW)};

static int gen(int decode, const int64_t *row, int bf16, int small, case_topk *c) {
  const int64_t rows = small ? row[3] : row[0], n = small ? row[4] : row[1];
  *c = (case_topk){.decode = decode, .bf16 = bf16, .rows = rows, .n = n, .b = rows,
                   .next_n = 1, .lens_rank = 1, .k = (int32_t)row[2]};
  return case_topk_gen_bench(c);
}
static int b_pre(cc_env *e, int small, void *c) { return (void)e, gen(0, pre_row[0], 0, small, c); }
static int b_dec(cc_env *e, int small, void *c) {
  return (void)e, gen(1, dec_row[0], (int)dec_row[0][5], small, c);
}

const cc_op cc_ops_topk[] = {
    {"dsa_topk_prefill", check_prefill, "rows=4096 N=65536 k=512", CC_BENCH(topk, b_pre)},
    {"dsa_topk_decode", check_decode, "64x32768 k=512 (dsacl-bench's first)",
     CC_BENCH(topk, b_dec)},
    {0}};
