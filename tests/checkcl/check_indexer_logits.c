/* Indexer MQA logits (ragged and paged, FP8 and MXFP4). Tolerance as in
 * tests/test_indexer_logits.c (SPEC.md): max|got - ref| <= 1e-5 * max|ref|
 * over the finite entries of a call, -inf exactly where the fp64 reference
 * has it; bf16 output also allows the final rounding (2^-8 relative). Plus
 * the fault word. Cases use clean = 1 (every column written). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkcl.h"
#include "ref_indexer_logits.h"

#define TOL 1e-5

static uint8_t e4m3(cc_env *e) {
  return (uint8_t)((cc_rnd(e, 2) ? 0x80 : 0) | (0x20 + cc_rnd(e, 0x30)));
}
static uint8_t ue8m0(cc_env *e) { return (uint8_t)(110 + cc_rnd(e, 30)); }

static int logits_cmp(const void *got, int bf16, const double *ref, int64_t rows, int64_t cols,
                      const char *what, char *msg, size_t ms) {
  double maxref = 0;
  for (int64_t i = 0; i < rows * cols; i++)
    if (isfinite(ref[i]) && fabs(ref[i]) > maxref) maxref = fabs(ref[i]);
  const double lim = TOL * (maxref > 0 ? maxref : 1);
  for (int64_t i = 0; i < rows * cols; i++) {
    const double g = bf16 ? cc_bf16_f(((const uint16_t *)got)[i]) : ((const float *)got)[i];
    const double v = ref[i];
    int bad;
    if (isinf(v))
      bad = !(isinf(g) && g < 0);
    else if (!isfinite(g))
      bad = 1;
    else
      bad = fabs(g - v) - (bf16 ? fabs(v) * 0x1p-8 : 0) > lim;
    if (bad)
      return CC_FAIL(msg, ms, "%s: first difference at [%lld, %lld]: got %.9g, want %.9g (tol %.3g)",
                     what, (long long)(i / cols), (long long)(i % cols), g, v, lim);
  }
  return 0;
}

/* ---- ragged -------------------------------------------------------------------- */

typedef struct rag {
  int64_t m, h, d, n;
  int fp4, bf16;
  uint8_t *q, *qs, *k, *kss;
  float *ksc, *w;
  int32_t *ks, *ke;
  cl_mem mq, mqs, mk, mks, mw, mks0, mke, mo;
  dsa_tensor tq, tqs, tk, tks, tw, tks0, tke, to;
} rag;

static rag *rag_make(cc_env *e, int fp4, int64_t m, int64_t h, int64_t d, int64_t n, int bf16) {
  rag *r = cc_xmalloc(sizeof *r);
  *r = (rag){.m = m, .h = h, .d = d, .n = n, .fp4 = fp4, .bf16 = bf16};
  const int64_t qrow = fp4 ? d / 2 : d;
  r->q = cc_xmalloc((size_t)(m * h * qrow));
  r->qs = cc_xmalloc((size_t)(m * h * (d / 32)));
  r->k = cc_xmalloc((size_t)(n * qrow));
  r->kss = cc_xmalloc((size_t)(n * (d / 32)));
  r->ksc = cc_xmalloc((size_t)n * 4);
  r->w = cc_xmalloc((size_t)(m * h) * 4);
  r->ks = cc_xmalloc((size_t)m * 4);
  r->ke = cc_xmalloc((size_t)m * 4);
  for (int64_t i = 0; i < m * h * (d / 32); i++) r->qs[i] = ue8m0(e);
  for (int64_t i = 0; i < n * (d / 32); i++) r->kss[i] = ue8m0(e);
  if (fp4) {
    cc_fill_bytes(e, r->q, (size_t)(m * h * qrow));
    cc_fill_bytes(e, r->k, (size_t)(n * qrow));
  } else {
    for (int64_t i = 0; i < m * h * d; i++) r->q[i] = e4m3(e);
    for (int64_t i = 0; i < n * d; i++) r->k[i] = e4m3(e);
    for (int64_t i = 0; i < n; i++) r->ksc[i] = ldexpf(1.0f, (int)cc_rnd(e, 12) - 6);
  }
  for (int64_t i = 0; i < m * h; i++) r->w[i] = (float)cc_uniform(e, -0.6, 1.4);
  for (int64_t i = 0; i < m; i++) {
    int64_t a = cc_rnd(e, n + 1), b = cc_rnd(e, n + 1);
    if (a > b) { int64_t t = a; a = b; b = t; }
    if (cc_rnd(e, 6) == 0) a = 0, b = n;
    r->ks[i] = (int32_t)a, r->ke[i] = (int32_t)b;
  }
  const dsa_dtype vt = fp4 ? DSA_E2M1X2 : DSA_E4M3;
  r->mq = cc_buf(e, (size_t)(m * h * qrow), r->q);
  r->mqs = cc_buf(e, (size_t)(m * h * (d / 32)), r->qs);
  r->mk = cc_buf(e, (size_t)(n * qrow), r->k);
  r->mks = fp4 ? cc_buf(e, (size_t)(n * (d / 32)), r->kss) : cc_buf(e, (size_t)n * 4, r->ksc);
  r->mw = cc_buf(e, (size_t)(m * h) * 4, r->w);
  r->mks0 = cc_buf(e, (size_t)m * 4, r->ks);
  r->mke = cc_buf(e, (size_t)m * 4, r->ke);
  r->mo = cc_buf(e, (size_t)(m * n) * (bf16 ? 2 : 4), NULL);
  r->tq = cc_t(r->mq, vt, 3, (int64_t[]){m, h, qrow});
  r->tqs = cc_t(r->mqs, DSA_UE8M0, 3, (int64_t[]){m, h, d / 32});
  r->tk = cc_t(r->mk, vt, 2, (int64_t[]){n, qrow});
  r->tks = fp4 ? cc_t(r->mks, DSA_UE8M0, 2, (int64_t[]){n, d / 32})
               : cc_t(r->mks, DSA_F32, 1, (int64_t[]){n});
  r->tw = cc_t(r->mw, DSA_F32, 2, (int64_t[]){m, h});
  r->tks0 = cc_t(r->mks0, DSA_I32, 1, (int64_t[]){m});
  r->tke = cc_t(r->mke, DSA_I32, 1, (int64_t[]){m});
  r->to = cc_t(r->mo, bf16 ? DSA_BF16 : DSA_F32, 2, (int64_t[]){m, n});
  return r;
}

static void rag_free(void *p) {
  rag *r = p;
  if (!r) return;
  free(r->q), free(r->qs), free(r->k), free(r->kss), free(r->ksc), free(r->w), free(r->ks);
  free(r->ke);
  cc_free(&r->mq), cc_free(&r->mqs), cc_free(&r->mk), cc_free(&r->mks), cc_free(&r->mw);
  cc_free(&r->mks0), cc_free(&r->mke), cc_free(&r->mo);
  free(r);
}

static dsa_status rag_call(cc_env *e, rag *r, cl_event *done) {
  dsa_indexer_logits_params p;
  dsa_indexer_logits_params_default(&p);
  dsa_events ev = {0, NULL, done};
  dsa_status s = r->fp4 ? dsa_indexer_logits(e->q, &r->tq, &r->tqs, &r->tk, &r->tks, &r->tw,
                                               &r->tks0, &r->tke, &r->to, &p, &ev)
                        : dsa_indexer_logits(e->q, &r->tq, NULL, &r->tk, &r->tks, &r->tw,
                                         &r->tks0, &r->tke, &r->to, &p, &ev);
  cc_after_call(e);
  return s;
}

static int rag_case(cc_env *e, int fp4, int64_t m, int64_t h, int64_t d, int64_t n, int bf16,
                    char *msg, size_t ms) {
  rag *r = rag_make(e, fp4, m, h, d, n, bf16);
  int bad;
  dsa_status s = rag_call(e, r, NULL);
  if (s != DSA_OK) {
    bad = CC_FAIL(msg, ms, "%s: %s", fp4 ? "dsa_indexer_logits" : "dsa_indexer_logits",
                  dsa_last_error());
  } else {
    const uint32_t f = cc_faults(e);
    double *ref = cc_xmalloc((size_t)(m * n) * sizeof *ref);
    const unsigned want_f = ref_mqa_logits(fp4, m, h, d, n, r->q, r->qs, r->k,
                                           fp4 ? (const void *)r->kss : r->ksc, r->w, r->ks,
                                           r->ke, 1, ref);
    void *got = cc_xmalloc((size_t)(m * n) * 4);
    cc_read(e, r->mo, (size_t)(m * n) * (bf16 ? 2 : 4), got);
    char what[128];
    snprintf(what, sizeof what, "m=%lld h=%lld d=%lld n=%lld bf16=%d", (long long)m,
             (long long)h, (long long)d, (long long)n, bf16);
    bad = logits_cmp(got, bf16, ref, m, n, what, msg, ms);
    if (!bad && f != want_f) bad = CC_FAIL(msg, ms, "%s: faults 0x%x, want 0x%x", what, f, want_f);
    free(ref), free(got);
  }
  rag_free(r);
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

typedef struct paged {
  int fp4, bf16, rank;
  int64_t b, nn, h, w, nb, mml;
  int32_t bs;
  uint8_t *img, *q, *qs;
  float *wt;
  int32_t *cl, *bt;
  size_t csize;
  int64_t stride;
  cl_mem mc, mq, mqs, mw, mcl, mbt, mo;
  dsa_paged_cache pc;
  dsa_tensor tq, tqs, tw, tcl, tbt, to;
} paged;

static paged *paged_make(cc_env *e, int fp4, int64_t b, int64_t nn, int64_t h, int64_t w,
                         int64_t nb, int32_t bs, int rank, int bf16) {
  paged *p = cc_xmalloc(sizeof *p);
  *p = (paged){.fp4 = fp4, .bf16 = bf16, .rank = rank, .b = b, .nn = nn, .h = h, .w = w,
               .nb = nb, .bs = bs};
  const int64_t tokb = fp4 ? 68 : 132, rows = b * nn, qrow = fp4 ? 64 : 128;
  p->stride = bs * tokb + 16 * cc_rnd(e, 2);
  p->mml = w * bs;
  p->csize = (size_t)(nb * p->stride);
  p->img = cc_xmalloc(p->csize);
  cc_fill_bytes(e, p->img, p->csize);
  for (int64_t blk = 0; blk < nb; blk++) {
    uint8_t *base = p->img + blk * p->stride;
    for (int32_t t = 0; t < bs; t++) {
      if (fp4) {
        for (int k = 0; k < 4; k++) base[bs * 64 + t * 4 + k] = ue8m0(e);
      } else {
        for (int k = 0; k < 128; k++) base[t * 128 + k] = e4m3(e);
        const float s = ldexpf(1.0f, (int)cc_rnd(e, 12) - 6);
        memcpy(base + bs * 128 + t * 4, &s, 4);
      }
    }
  }
  p->q = cc_xmalloc((size_t)(rows * h * qrow));
  p->qs = cc_xmalloc((size_t)(rows * h * 4));
  if (fp4) {
    cc_fill_bytes(e, p->q, (size_t)(rows * h * qrow));
    for (int64_t i = 0; i < rows * h * 4; i++) p->qs[i] = ue8m0(e);
  } else {
    for (int64_t i = 0; i < rows * h * 128; i++) p->q[i] = e4m3(e);
  }
  p->wt = cc_xmalloc((size_t)(rows * h) * 4);
  for (int64_t i = 0; i < rows * h; i++) p->wt[i] = (float)cc_uniform(e, -0.6, 1.4);
  const int64_t nctx = rank == 2 ? rows : b;
  p->cl = cc_xmalloc((size_t)nctx * 4);
  for (int64_t i = 0; i < nctx; i++)
    p->cl[i] = (int32_t)(cc_rnd(e, 4) == 0 ? p->mml : cc_rnd(e, p->mml + 1));
  p->bt = cc_xmalloc((size_t)(b * w) * 4);
  for (int64_t i = 0; i < b * w; i++) p->bt[i] = (int32_t)cc_rnd(e, nb);
  p->mc = cc_buf(e, p->csize, p->img);
  p->pc = (dsa_paged_cache){.mem = p->mc, .offset = 0, .num_blocks = nb, .block_size = bs,
                            .block_stride = p->stride,
                            .format = fp4 ? DSA_CACHE_INDEXER_MXFP4 : DSA_CACHE_INDEXER_FP8};
  p->mq = cc_buf(e, (size_t)(rows * h * qrow), p->q);
  p->mqs = cc_buf(e, (size_t)(rows * h * 4), p->qs);
  p->mw = cc_buf(e, (size_t)(rows * h) * 4, p->wt);
  p->mcl = cc_buf(e, (size_t)nctx * 4, p->cl);
  p->mbt = cc_buf(e, (size_t)(b * w) * 4, p->bt);
  p->mo = cc_buf(e, (size_t)(rows * p->mml) * (bf16 ? 2 : 4), NULL);
  p->tq = cc_t(p->mq, fp4 ? DSA_E2M1X2 : DSA_E4M3, 4, (int64_t[]){b, nn, h, qrow});
  p->tqs = cc_t(p->mqs, DSA_UE8M0, 4, (int64_t[]){b, nn, h, 4});
  p->tw = cc_t(p->mw, DSA_F32, 2, (int64_t[]){rows, h});
  p->tcl = rank == 2 ? cc_t(p->mcl, DSA_I32, 2, (int64_t[]){b, nn})
                     : cc_t(p->mcl, DSA_I32, 1, (int64_t[]){b});
  p->tbt = cc_t(p->mbt, DSA_I32, 2, (int64_t[]){b, w});
  p->to = cc_t(p->mo, bf16 ? DSA_BF16 : DSA_F32, 2, (int64_t[]){rows, p->mml});
  return p;
}

static void paged_free(void *x) {
  paged *p = x;
  if (!p) return;
  free(p->img), free(p->q), free(p->qs), free(p->wt), free(p->cl), free(p->bt);
  cc_free(&p->mc), cc_free(&p->mq), cc_free(&p->mqs), cc_free(&p->mw), cc_free(&p->mcl);
  cc_free(&p->mbt), cc_free(&p->mo);
  free(p);
}

static dsa_status paged_call(cc_env *e, paged *p, cl_event *done) {
  dsa_indexer_logits_params pr;
  dsa_indexer_logits_params_default(&pr);
  dsa_events ev = {0, NULL, done};
  dsa_status s = p->fp4 ? dsa_indexer_paged_logits(e->q, &p->tq, &p->tqs, &p->tw, &p->tcl,
                                                     &p->tbt, &p->pc, &p->to, &pr, &ev)
                        : dsa_indexer_paged_logits(e->q, &p->tq, NULL, &p->tw, &p->tcl, &p->tbt,
                                               &p->pc, &p->to, &pr, &ev);
  cc_after_call(e);
  return s;
}

static int paged_case(cc_env *e, int fp4, int64_t b, int64_t nn, int64_t h, int64_t w, int64_t nb,
                      int32_t bs, int rank, int bf16, char *msg, size_t ms) {
  paged *p = paged_make(e, fp4, b, nn, h, w, nb, bs, rank, bf16);
  int bad;
  if (paged_call(e, p, NULL) != DSA_OK) {
    bad = CC_FAIL(msg, ms, "%s: %s", fp4 ? "dsa_indexer_paged_logits" : "dsa_indexer_paged_logits",
                  dsa_last_error());
  } else {
    const uint32_t f = cc_faults(e);
    const int64_t rows = b * nn;
    double *ref = cc_xmalloc((size_t)(rows * p->mml) * sizeof *ref);
    ref_il_cache rc = {p->img, nb, bs, p->stride};
    const unsigned want_f = ref_paged_mqa_logits(fp4, b, nn, h, p->q, p->qs, &rc, p->wt, p->cl,
                                                 rank, p->bt, w, p->mml, 1, ref);
    void *got = cc_xmalloc((size_t)(rows * p->mml) * 4);
    cc_read(e, p->mo, (size_t)(rows * p->mml) * (bf16 ? 2 : 4), got);
    char what[160];
    snprintf(what, sizeof what, "b=%lld next_n=%lld h=%lld w=%lld bs=%d rank=%d bf16=%d",
             (long long)b, (long long)nn, (long long)h, (long long)w, bs, rank, bf16);
    bad = logits_cmp(got, bf16, ref, rows, p->mml, what, msg, ms);
    if (!bad && f != want_f) bad = CC_FAIL(msg, ms, "%s: faults 0x%x, want 0x%x", what, f, want_f);
    free(ref), free(got);
  }
  paged_free(p);
  return bad;
}

static int check_paged(cc_env *e, int fp4, char *msg, size_t ms) {
  static const int64_t hs[] = {1, 8, 16, 64};
  static const int32_t bss[] = {1, 3, 16, 64};
  if (paged_case(e, fp4, 1, 1, 1, 1, 1, 1, 1, 0, msg, ms) ||
      paged_case(e, fp4, 3, 2, 64, 5, 16, 64, 2, 0, msg, ms))
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

/* ---- bench: V4 indexer, H = 64, D = 128 -------------------------------------------- */

static int b_rag_setup(cc_env *e, int small, int fp4, void **st) {
  *st = small ? rag_make(e, fp4, 64, 64, 128, 1024, 0) : rag_make(e, fp4, 4096, 64, 128, 8192, 0);
  return 0;
}
static int b_rag8_setup(cc_env *e, int small, void **st) { return b_rag_setup(e, small, 0, st); }
static int b_rag4_setup(cc_env *e, int small, void **st) { return b_rag_setup(e, small, 1, st); }
static int b_rag_run(cc_env *e, void *st, cl_event *done) { return rag_call(e, st, done) != DSA_OK; }

static int b_paged_setup(cc_env *e, int small, int fp4, void **st) {
  /* B sequences, next_n 2 (MTP), 64 heads, context W*64 */
  const int64_t b = small ? 4 : 64, w = small ? 16 : 512;
  *st = paged_make(e, fp4, b, 2, 64, w, b * w, 64, 2, 0);
  paged *p = *st;
  for (int64_t i = 0; i < b * 2; i++) p->cl[i] = (int32_t)(w * 64);
  clEnqueueWriteBuffer(e->clq, p->mcl, CL_TRUE, 0, (size_t)(b * 2) * 4, p->cl, 0, NULL, NULL);
  return 0;
}
static int b_paged8_setup(cc_env *e, int small, void **st) { return b_paged_setup(e, small, 0, st); }
static int b_paged4_setup(cc_env *e, int small, void **st) { return b_paged_setup(e, small, 1, st); }
static int b_paged_run(cc_env *e, void *st, cl_event *done) {
  return paged_call(e, st, done) != DSA_OK;
}

const cc_op cc_ops_indexer_logits[] = {
    {"dsa_indexer_logits", check_rag_fp8, "M=4096 H=64 N=8192", b_rag8_setup, b_rag_run, rag_free},
    {"dsa_indexer_logits", check_rag_fp4, "M=4096 H=64 N=8192", b_rag4_setup, b_rag_run,
     rag_free},
    {"dsa_indexer_paged_logits", check_paged_fp8, "B=64 next_n=2 H=64 ctx=32K", b_paged8_setup,
     b_paged_run, paged_free},
    {"dsa_indexer_paged_logits", check_paged_fp4, "B=64 next_n=2 H=64 ctx=32K",
     b_paged4_setup, b_paged_run, paged_free},
    {0}};
