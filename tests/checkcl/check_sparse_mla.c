/* Sparse MLA attention: bf16 KV, fused decode over paged MLA caches, and the
 * two-stage decode. The decode cases (inputs, calls) and the rule of all
 * three are tools/cases/sparse_mla.c's (as tests/test_sparse_mla.c,
 * SPEC.md: |got - ref| <= 1e-2 * max(1, |ref|) per element, relative L2 <=
 * 4e-3, lse within 1e-4, -inf exactly where the fp64 reference has it); here
 * the reference, the fault word, the bf16-KV form (no bench row or golden)
 * and the random shapes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "checkcl.h"
#include "ref_sparse_mla.h"

static uint16_t *make_q(cc_env *e, int64_t n) {
  uint16_t *q = cc_xmalloc((size_t)n * 2);
  for (int64_t i = 0; i < n; i++) q[i] = cc_bf16((float)cc_uniform(e, -2, 2));
  return q;
}

static void make_idx(cc_env *e, int32_t *idx, int32_t *lens, int64_t t, int64_t k, int64_t range,
                     int bad) {
  for (int64_t i = 0; i < t; i++) {
    for (int64_t j = 0; j < k; j++) {
      const int64_t r = cc_rnd(e, 20);
      idx[i * k + j] = (int32_t)(r == 0 ? -1 : r == 1 && bad ? range + cc_rnd(e, 3) : cc_rnd(e, range));
    }
    lens[i] = (int32_t)(cc_rnd(e, 4) == 0 ? k : cc_rnd(e, k + 1));
  }
}

static float *make_sink(cc_env *e, int64_t h) {
  float *s = cc_xmalloc((size_t)h * 4);
  for (int64_t i = 0; i < h; i++) s[i] = (float)cc_uniform(e, -3, 3);
  return s;
}

/* ---- bf16 ------------------------------------------------------------------------- */

typedef struct ab {
  int64_t t, h, s, k;
  uint16_t *q, *kv;
  int32_t *idx, *lens;
  float *sink;
  cl_mem mq, mkv, mi, ml, ms, mo, me;
  dsa_tensor tq, tkv, ti, tl, ts, to, te;
} ab;

/* The host inputs of a bf16 case (the shape set). */
static void ab_gen(cc_env *e, ab *a, int bad) {
  const int64_t t = a->t, h = a->h, s = a->s, k = a->k;
  a->q = make_q(e, t * h * 512);
  a->kv = make_q(e, s * 512);
  a->idx = cc_xmalloc((size_t)(t * k) * 4 + 4);
  a->lens = cc_xmalloc((size_t)t * 4 + 4);
  make_idx(e, a->idx, a->lens, t, k, s, bad);
  a->sink = make_sink(e, h);
}

/* The bf16 form as case ops (the bench's): device buffers and tensors. */
static int ab_upload(const case_dev *d, void *p, unsigned char fill, char *msg, size_t ms) {
  ab *a = p;
  const int64_t t = a->t, h = a->h, s = a->s, k = a->k;
  if (!(a->mq = case_buf(d, (size_t)(t * h) * 1024, a->q, 0)) ||
      !(a->mkv = case_buf(d, (size_t)s * 1024, a->kv, 0)) ||
      !(a->mi = case_buf(d, (size_t)(t * k) * 4, a->idx, 0)) ||
      !(a->ml = case_buf(d, (size_t)t * 4, a->lens, 0)) ||
      !(a->ms = case_buf(d, (size_t)h * 4, a->sink, 0)) ||
      !(a->mo = case_buf(d, (size_t)(t * h) * 1024, NULL, fill)) ||
      !(a->me = case_buf(d, (size_t)(t * h) * 4, NULL, fill)))
    return CC_FAIL(msg, ms, "dsa_sparse_attn_bf16: buffers of T=%lld H=%lld S=%lld K=%lld",
                   (long long)t, (long long)h, (long long)s, (long long)k);
  a->tq = cc_t(a->mq, DSA_BF16, 3, (int64_t[]){t, h, 512});
  a->tkv = cc_t(a->mkv, DSA_BF16, 2, (int64_t[]){s, 512});
  a->ti = cc_t(a->mi, DSA_I32, 2, (int64_t[]){t, k});
  a->tl = cc_t(a->ml, DSA_I32, 1, (int64_t[]){t});
  a->ts = cc_t(a->ms, DSA_F32, 1, (int64_t[]){h});
  a->to = cc_t(a->mo, DSA_BF16, 3, (int64_t[]){t, h, 512});
  a->te = cc_t(a->me, DSA_F32, 2, (int64_t[]){t, h});
  return 0;
}
static void ab_release(void *p) {
  ab *a = p;
  free(a->q), free(a->kv), free(a->idx), free(a->lens), free(a->sink);
  cc_free(&a->mq), cc_free(&a->mkv), cc_free(&a->mi), cc_free(&a->ml), cc_free(&a->ms);
  cc_free(&a->mo), cc_free(&a->me);
}
static dsa_status ab_call_v(dsa_queue *q, const void *p, const dsa_events *ev) {
  ab *a = (ab *)p;
  dsa_sparse_params prm;
  dsa_sparse_params_default(&prm);
  return dsa_sparse_attn_bf16(q, &a->tq, &a->tkv, &a->ti, &a->tl, &a->ts, &a->to, &a->te, &prm,
                              ev);
}
static const case_ops ab_ops = {"dsa_sparse_attn_bf16", ab_upload, ab_call_v, NULL, ab_release};

static ab *ab_make(cc_env *e, int64_t t, int64_t h, int64_t s, int64_t k, int bad) {
  ab *a = cc_xmalloc(sizeof *a);
  *a = (ab){.t = t, .h = h, .s = s, .k = k};
  ab_gen(e, a, bad);
  cc_upload(e, &ab_ops, a, 0, 0);
  return a;
}

static int ab_case(cc_env *e, int64_t t, int64_t h, int64_t s, int64_t k, int bad, char *msg,
                   size_t ms) {
  ab *a = ab_make(e, t, h, s, k, bad);
  int rc;
  if (cc_run(e, &ab_ops, a, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "dsa_sparse_attn_bf16: %s", dsa_last_error());
  } else {
    const uint32_t f = cc_faults(e);
    double *want = cc_xmalloc((size_t)(t * h) * 512 * 8), *wlse = cc_xmalloc((size_t)(t * h) * 8);
    const unsigned wf = ref_sparse_attn_bf16(a->q, t, h, h * 512, 512, a->kv, s, 512, a->idx, k,
                                             k, 1, a->lens, a->sink, 1.0 / sqrt(512.0), want, wlse);
    uint16_t *got = cc_xmalloc((size_t)(t * h) * 1024);
    float *lse = cc_xmalloc((size_t)(t * h) * 4);
    cc_read(e, a->mo, (size_t)(t * h) * 1024, got);
    cc_read(e, a->me, (size_t)(t * h) * 4, lse);
    char what[128];
    snprintf(what, sizeof what, "bf16 T=%lld H=%lld S=%lld K=%lld", (long long)t, (long long)h,
             (long long)s, (long long)k);
    rc = case_attn_cmp(got, lse, &(case_attn_want){want, wlse}, t * h, what, msg, ms);
    if (!rc && f != wf) rc = CC_FAIL(msg, ms, "%s: faults 0x%x, want 0x%x", what, f, wf);
    free(want), free(wlse), free(got), free(lse);
  }
  cc_case_free(&ab_ops, a);
  return rc;
}

static int check_bf16(cc_env *e, char *msg, size_t ms) {
  static const int64_t hs[] = {1, 16, 64, 128};
  if (ab_case(e, 1, 1, 1, 1, 0, msg, ms) || ab_case(e, 3, 64, 300, 100, 1, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 1 : 8); it++)
    if (ab_case(e, 1 + cc_rnd(e, 3), hs[cc_rnd(e, 4)], 1 + cc_rnd(e, 400), 1 + cc_rnd(e, 300),
                (int)cc_rnd(e, 2), msg, ms))
      return 1;
  return 0;
}

/* ---- decode (fused / two-stage) ------------------------------------------------------- */

static case_mla_decode *dec_make(cc_env *e, int two, int64_t t, int64_t h, int64_t k1,
                                 int64_t k2, int64_t nb, int32_t bs, int bad) {
  case_mla_decode *d = cc_xmalloc(sizeof *d);
  *d = (case_mla_decode){.two = two, .bad = bad, .t = t, .h = h};
  d->s1 = (case_mla_set){.nb = nb, .bs = bs, .k = k1};
  d->s2 = (case_mla_set){.nb = 1 + nb / 2, .bs = 64, .k = k2};
  cc_upload(e, &case_mla_decode_ops, d, case_mla_decode_gen_check(d, &e->rng), 0);
  return d;
}

static int dec_case(cc_env *e, int two, int64_t t, int64_t h, int64_t k1, int64_t k2, int64_t nb,
                    int32_t bs, int bad, char *msg, size_t ms) {
  case_mla_decode *d = dec_make(e, two, t, h, k1, k2, nb, bs, bad);
  int rc;
  if (cc_run(e, &case_mla_decode_ops, d, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "%s: %s", two ? "dsa_sparse_mla_decode_two_stage" : "dsa_sparse_mla_decode",
                 dsa_last_error());
  } else {
    double *want = cc_xmalloc((size_t)(t * h) * 512 * 8), *wlse = cc_xmalloc((size_t)(t * h) * 8);
    const case_mla_set *a = &d->s1, *b = &d->s2;
    ref_mla_cache c1 = {a->cache, a->nb, a->bs, a->stride}, c2 = {b->cache, b->nb, b->bs, b->stride};
    ref_mla_set r1 = {&c1, a->idx, a->k, a->k, 1, a->lens};
    ref_mla_set r2 = {&c2, b->idx, b->k, b->k, 1, b->lens};
    const unsigned wf = ref_sparse_mla_decode(d->q, t, h, h * 512, 512, d->has1 ? &r1 : NULL,
                                              d->has2 ? &r2 : NULL, d->sink, 1.0 / sqrt(512.0),
                                              want, wlse);
    rc = case_mla_decode_check(&(case_dev){e->clctx, e->clq}, d, &(case_attn_want){want, wlse},
                               msg, ms) ||
         case_faults(e->q, wf, "sparse MLA decode", msg, ms);
    free(want), free(wlse);
  }
  cc_case_free(&case_mla_decode_ops, d);
  return rc;
}

static int check_dec(cc_env *e, int two, char *msg, size_t ms) {
  static const int64_t hs[] = {1, 16, 64, 128};
  static const int32_t bss[] = {1, 16, 64};
  if (dec_case(e, two, 1, 1, 1, -1, 1, 1, 0, msg, ms) ||
      dec_case(e, two, 2, 64, 100, 40, 4, 64, 1, msg, ms) ||
      dec_case(e, two, 2, 16, -1, 30, 4, 64, 0, msg, ms))
    return 1;
  for (int it = 0; it < (e->quick ? 1 : 8); it++)
    if (dec_case(e, two, 1 + cc_rnd(e, 3), hs[cc_rnd(e, 4)], cc_rnd(e, 200) - 1,
                 cc_rnd(e, 100) - 1, 1 + cc_rnd(e, 6), bss[cc_rnd(e, 3)], (int)cc_rnd(e, 2), msg,
                 ms))
      return 1;
  return 0;
}
static int check_fused(cc_env *e, char *msg, size_t ms) { return check_dec(e, 0, msg, ms); }
static int check_two(cc_env *e, char *msg, size_t ms) { return check_dec(e, 1, msg, ms); }

/* ---- bench: V4 decode, H = 128 (one rank of 64 heads x 2), SWA 128 + top-512 --------- */

static int b_ab(cc_env *e, int small, void *p) {
  ab *a = p;
  *a = small ? (ab){.t = 4, .h = 64, .s = 4096, .k = 512} : (ab){.t = 64, .h = 128, .s = 65536, .k = 640};
  ab_gen(e, a, 0);
  for (int64_t i = 0; i < a->t; i++) a->lens[i] = (int32_t)a->k;
  return 0;
}
/* dsacl-bench's first decode row and its inputs (the quick pool when small). */
#define DEC_ROW(t, h, k2, qt, qh) {t, h, k2, qt, qh},
static const int64_t dec_row[][5] = {CASE_MLA_DECODE_ROWS(DEC_ROW)};
static int b_dec(int small, int two, case_mla_decode *c) {
  const int64_t *r = dec_row[0];
  *c = (case_mla_decode){.two = two, .no_lse = 1, .t = small ? r[3] : r[0], .h = small ? r[4] : r[1]};
  c->s1.k = 128, c->s2.k = r[2];
  c->s1.nb = (int64_t)ceil((small ? CASE_MLA_POOL_BYTES_QUICK : CASE_MLA_POOL_BYTES) /
                           CASE_MLA_BENCH_STRIDE);
  return case_mla_decode_gen_bench(c);
}
static int b_fused(cc_env *e, int small, void *c) { return (void)e, b_dec(small, 0, c); }
static int b_two(cc_env *e, int small, void *c) { return (void)e, b_dec(small, 1, c); }

const cc_op cc_ops_sparse_mla[] = {
    {"dsa_sparse_attn_bf16", check_bf16, "T=64 H=128 K=640", &ab_ops, sizeof(ab), b_ab},
    {"dsa_sparse_mla_decode", check_fused, "T=64 H=64 K=128+512", CC_BENCH(mla_decode, b_fused)},
    {"dsa_sparse_mla_decode_two_stage", check_two, "T=64 H=64 K=128+512",
     CC_BENCH(mla_decode, b_two)},
    {0}};
