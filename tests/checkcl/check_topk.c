/* Indexer top-k (prefill and decode): indices byte-exact against tests/ref
 * (the deterministic rule of topk.h, as tests/test_topk.c), and the fault
 * word. Logits with ties, -inf and NaN now and then. The cases run with the
 * automatic pick, then with each algorithm preferred in turn (the context's
 * DSACL_TOPK setting, set directly: split in chunks of 300 columns and in
 * its default ones, lrow, row, stream; the random cases under the first two;
 * --quick: automatic, split:300 and stream), so every variant the device can
 * run is seen. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkcl.h"
#include "internal.h"
#include "ref_topk.h"

static float *make_logits(cc_env *e, int64_t n) {
  float *l = cc_xmalloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) {
    const int64_t r = cc_rnd(e, 50);
    l[i] = r == 0 ? -INFINITY : r == 1 ? NAN : r < 6 ? (float)cc_rnd(e, 4) : (float)cc_uniform(e, -10, 10);
  }
  return l;
}

typedef struct tk {
  int64_t rows, n, b, nn;
  int32_t k;
  int decode, rank;
  float *l;
  int32_t *a, *b2;
  cl_mem ml, ma, mb, mo;
  dsa_tensor tl, ta, tb, to;
} tk;

static tk *tk_make(cc_env *e, int decode, int64_t rows_or_b, int64_t nn, int64_t n, int32_t k,
                   int rank, int bad) {
  tk *s = cc_xmalloc(sizeof *s);
  const int64_t rows = decode ? rows_or_b * nn : rows_or_b;
  *s = (tk){.rows = rows, .n = n, .b = rows_or_b, .nn = nn, .k = k, .decode = decode, .rank = rank};
  s->l = make_logits(e, rows * n);
  s->a = cc_xmalloc((size_t)rows * 4 + 4);
  s->b2 = cc_xmalloc((size_t)rows * 4 + 4);
  if (!decode) {
    for (int64_t r = 0; r < rows; r++) {
      int64_t x = cc_rnd(e, n + 1), y = cc_rnd(e, n + 1);
      if (x > y) { int64_t t = x; x = y; y = t; }
      if (cc_rnd(e, 4) == 0) x = 0, y = n;
      if (bad && cc_rnd(e, 5) == 0) y = n + 1;
      s->a[r] = (int32_t)x, s->b2[r] = (int32_t)y;
    }
  } else {
    const int64_t nl = rank == 2 ? rows : rows_or_b;
    for (int64_t i = 0; i < nl; i++) s->a[i] = (int32_t)(cc_rnd(e, 4) == 0 ? n : cc_rnd(e, n + 1));
    if (bad) s->a[0] = (int32_t)(n + 2);
  }
  s->ml = cc_buf(e, (size_t)(rows * n) * 4, s->l);
  s->ma = cc_buf(e, (size_t)rows * 4, s->a);
  s->mb = cc_buf(e, (size_t)rows * 4, s->b2);
  s->mo = cc_buf(e, (size_t)(rows * k) * 4, NULL);
  s->tl = cc_t(s->ml, DSA_F32, 2, (int64_t[]){rows, n});
  s->ta = decode && rank == 2 ? cc_t(s->ma, DSA_I32, 2, (int64_t[]){rows_or_b, nn})
                              : cc_t(s->ma, DSA_I32, 1, (int64_t[]){decode ? rows_or_b : rows});
  s->tb = cc_t(s->mb, DSA_I32, 1, (int64_t[]){rows});
  s->to = cc_t(s->mo, DSA_I32, 2, (int64_t[]){rows, k});
  return s;
}
static void tk_free(void *p) {
  tk *s = p;
  if (!s) return;
  free(s->l), free(s->a), free(s->b2);
  cc_free(&s->ml), cc_free(&s->ma), cc_free(&s->mb), cc_free(&s->mo);
  free(s);
}
static dsa_status tk_call(cc_env *e, tk *s, cl_event *done) {
  dsa_events ev = {0, NULL, done};
  dsa_topk_params p;
  dsa_topk_params_default(&p);
  p.k = s->k;
  p.next_n = s->decode ? (int32_t)s->nn : 0;
  dsa_status st = s->decode ? dsa_topk_decode(e->q, &s->tl, &s->ta, &s->to, &p, &ev)
                            : dsa_topk_prefill(e->q, &s->tl, &s->ta, &s->tb, &s->to, &p, &ev);
  cc_after_call(e);
  return st;
}

static int tk_case(cc_env *e, int decode, int64_t rb, int64_t nn, int64_t n, int32_t k, int rank,
                   int bad, char *msg, size_t ms) {
  tk *s = tk_make(e, decode, rb, nn, n, k, rank, bad);
  int rc;
  if (tk_call(e, s, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "%s: %s", decode ? "dsa_topk_decode" : "dsa_topk_prefill",
                 dsa_last_error());
  } else {
    const uint32_t f = cc_faults(e);
    int32_t *want = cc_xmalloc((size_t)(s->rows * k) * 4), *got = cc_xmalloc((size_t)(s->rows * k) * 4);
    const unsigned wf =
        decode ? ref_topk_decode(s->l, s->rows, n, n, s->a, rank, nn, k, want, k, 1)
               : ref_topk_prefill(s->l, s->rows, n, n, s->a, s->b2, k, want, k, 1);
    cc_read(e, s->mo, (size_t)(s->rows * k) * 4, got);
    char what[128];
    snprintf(what, sizeof what, "rows=%lld n=%lld k=%d rank=%d indices", (long long)s->rows,
             (long long)n, k, rank);
    rc = cc_cmp_bytes(got, want, (size_t)(s->rows * k) * 4, 4, what, msg, ms);
    if (!rc && f != wf) rc = CC_FAIL(msg, ms, "%s: faults 0x%x, want 0x%x", what, f, wf);
    free(want), free(got);
  }
  tk_free(s);
  return rc;
}

/* The preferences every check runs under: {algorithm, chunk}. */
/* random: also the random cases; quick: also under --quick (the automatic
 * pick already takes split and row for these shapes). */
static const struct { int algo; uint32_t chunk; int random, quick; } prefs[] = {
    {DSA_TOPK_ALGO_AUTO, 0, 1, 1},  {DSA_TOPK_ALGO_SPLIT, 300, 1, 1},
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

static int b_pre_setup(cc_env *e, int small, void **st) {
  *st = small ? tk_make(e, 0, 16, 0, 8192, 512, 1, 0) : tk_make(e, 0, 4096, 0, 65536, 512, 1, 0);
  return 0;
}
static int b_dec_setup(cc_env *e, int small, void **st) {
  *st = small ? tk_make(e, 1, 4, 2, 8192, 512, 2, 0) : tk_make(e, 1, 64, 2, 32768, 512, 2, 0);
  return 0;
}
static int b_run(cc_env *e, void *st, cl_event *done) { return tk_call(e, st, done) != DSA_OK; }

const cc_op cc_ops_topk[] = {
    {"dsa_topk_prefill", check_prefill, "rows=4096 N=65536 k=512", b_pre_setup, b_run, tk_free},
    {"dsa_topk_decode", check_decode, "B=64 next_n=2 N=32K k=512", b_dec_setup, b_run, tk_free},
    {0}};
