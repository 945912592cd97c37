/* Sparse MLA attention: bf16 KV, fused decode over paged MLA caches, and the
 * two-stage decode. Tolerance as tests/test_sparse_mla.c (SPEC.md):
 * |got - ref| <= 1e-2 * max(1, |ref|) per element, relative L2 <= 4e-3,
 * lse within 1e-4 (-inf exactly where the fp64 reference has it); plus the
 * fault word. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkcl.h"
#include "ref_sparse_mla.h"

/* The two-stage decode's workspace: bytes [off, off + n) of m as a u8 tensor. */
#define WS_BYTES(m, off, n)                                                        \
  (&(dsa_tensor){.mem = (m), .offset = (off), .dtype = DSA_U8, .ndim = 1,          \
                 .shape = {(int64_t)(n)}, .stride = {1}})

static int close_cmp(const uint16_t *got, const double *want, const float *lse,
                     const double *wlse, int64_t rows, const char *what, char *msg, size_t ms) {
  double d2 = 0, r2 = 0;
  for (int64_t i = 0; i < rows * 512; i++) {
    const double g = cc_bf16_f(got[i]), w = want[i], d = fabs(g - w);
    if (!(d <= 1e-2 * fmax(1.0, fabs(w))))
      return CC_FAIL(msg, ms, "%s: out first difference at [%lld, %lld]: got %.6g, want %.6g",
                     what, (long long)(i / 512), (long long)(i % 512), g, w);
    d2 += (g - w) * (g - w), r2 += w * w;
  }
  const double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
  if (rel > 4e-3) return CC_FAIL(msg, ms, "%s: out relative L2 error %.3g > 4e-3", what, rel);
  for (int64_t r = 0; r < rows; r++) {
    const double g = lse[r], w = wlse[r];
    const int ok = isinf(w) ? (isinf(g) && (g < 0) == (w < 0)) : fabs(g - w) <= 1e-4;
    if (!ok)
      return CC_FAIL(msg, ms, "%s: lse first difference at [%lld]: got %.9g, want %.9g", what,
                     (long long)r, g, w);
  }
  return 0;
}

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

static ab *ab_make(cc_env *e, int64_t t, int64_t h, int64_t s, int64_t k, int bad) {
  ab *a = cc_xmalloc(sizeof *a);
  *a = (ab){.t = t, .h = h, .s = s, .k = k};
  a->q = make_q(e, t * h * 512);
  a->kv = make_q(e, s * 512);
  a->idx = cc_xmalloc((size_t)(t * k) * 4 + 4);
  a->lens = cc_xmalloc((size_t)t * 4 + 4);
  make_idx(e, a->idx, a->lens, t, k, s, bad);
  a->sink = make_sink(e, h);
  a->mq = cc_buf(e, (size_t)(t * h) * 1024, a->q);
  a->mkv = cc_buf(e, (size_t)s * 1024, a->kv);
  a->mi = cc_buf(e, (size_t)(t * k) * 4, a->idx);
  a->ml = cc_buf(e, (size_t)t * 4, a->lens);
  a->ms = cc_buf(e, (size_t)h * 4, a->sink);
  a->mo = cc_buf(e, (size_t)(t * h) * 1024, NULL);
  a->me = cc_buf(e, (size_t)(t * h) * 4, NULL);
  a->tq = cc_t(a->mq, DSA_BF16, 3, (int64_t[]){t, h, 512});
  a->tkv = cc_t(a->mkv, DSA_BF16, 2, (int64_t[]){s, 512});
  a->ti = cc_t(a->mi, DSA_I32, 2, (int64_t[]){t, k});
  a->tl = cc_t(a->ml, DSA_I32, 1, (int64_t[]){t});
  a->ts = cc_t(a->ms, DSA_F32, 1, (int64_t[]){h});
  a->to = cc_t(a->mo, DSA_BF16, 3, (int64_t[]){t, h, 512});
  a->te = cc_t(a->me, DSA_F32, 2, (int64_t[]){t, h});
  return a;
}
static void ab_free(void *p) {
  ab *a = p;
  if (!a) return;
  free(a->q), free(a->kv), free(a->idx), free(a->lens), free(a->sink);
  cc_free(&a->mq), cc_free(&a->mkv), cc_free(&a->mi), cc_free(&a->ml), cc_free(&a->ms);
  cc_free(&a->mo), cc_free(&a->me);
  free(a);
}
static dsa_status ab_call(cc_env *e, ab *a, cl_event *done) {
  dsa_events ev = {0, NULL, done};
  dsa_sparse_params p;
  dsa_sparse_params_default(&p);
  dsa_status s = dsa_sparse_attn_bf16(e->q, &a->tq, &a->tkv, &a->ti, &a->tl, &a->ts, &a->to, &a->te,
                                      &p, &ev);
  cc_after_call(e);
  return s;
}

static int ab_case(cc_env *e, int64_t t, int64_t h, int64_t s, int64_t k, int bad, char *msg,
                   size_t ms) {
  ab *a = ab_make(e, t, h, s, k, bad);
  int rc;
  if (ab_call(e, a, NULL) != DSA_OK) {
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
    rc = close_cmp(got, want, lse, wlse, t * h, what, msg, ms);
    if (!rc && f != wf) rc = CC_FAIL(msg, ms, "%s: faults 0x%x, want 0x%x", what, f, wf);
    free(want), free(wlse), free(got), free(lse);
  }
  ab_free(a);
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

typedef struct dset {
  int64_t nb, k;
  int32_t bs;
  uint8_t *img;
  ref_mla_cache ref;
  int32_t *idx, *lens;
  cl_mem mc, mi, ml;
  dsa_paged_cache dc;
  dsa_tensor ti, tl;
  dsa_sparse_index_set set;
} dset;

static void dset_make(cc_env *e, dset *d, int64_t t, int64_t nb, int32_t bs, int64_t k, int bad) {
  d->nb = nb, d->bs = bs, d->k = k;
  const int64_t stride = (int64_t)bs * REF_MLA_TOKEN_BYTES;
  d->img = cc_xmalloc((size_t)(nb * stride));
  d->ref = (ref_mla_cache){d->img, nb, bs, stride};
  uint16_t row[512];
  for (int64_t s = 0; s < nb * bs; s++) {
    for (int i = 0; i < 512; i++) row[i] = cc_bf16((float)cc_uniform(e, -1, 1));
    ref_mla_insert(&d->ref, row, 512, &s, 1);
  }
  d->idx = cc_xmalloc((size_t)(t * k) * 4 + 4);
  d->lens = cc_xmalloc((size_t)t * 4 + 4);
  make_idx(e, d->idx, d->lens, t, k, nb * bs, bad);
  d->mc = cc_buf(e, (size_t)(nb * stride), d->img);
  d->mi = cc_buf(e, (size_t)(t * k) * 4, d->idx);
  d->ml = cc_buf(e, (size_t)t * 4, d->lens);
  d->dc = (dsa_paged_cache){.mem = d->mc, .offset = 0, .num_blocks = nb, .block_size = bs,
                            .block_stride = stride, .format = DSA_CACHE_MLA_FP8};
  d->ti = cc_t(d->mi, DSA_I32, 2, (int64_t[]){t, k});
  d->tl = cc_t(d->ml, DSA_I32, 1, (int64_t[]){t});
  d->set = (dsa_sparse_index_set){&d->dc, &d->ti, &d->tl};
}
static void dset_free(dset *d) {
  free(d->img), free(d->idx), free(d->lens);
  cc_free(&d->mc), cc_free(&d->mi), cc_free(&d->ml);
}

typedef struct dec {
  int64_t t, h;
  int two, has1, has2;
  uint16_t *q;
  float *sink;
  dset s1, s2;
  cl_mem mq, ms, mo, me, mw;
  size_t mwb;
  dsa_tensor tq, ts, to, te;
} dec;

static dec *dec_make(cc_env *e, int two, int64_t t, int64_t h, int64_t k1, int64_t k2,
                     int64_t nb, int32_t bs, int bad) {
  dec *d = cc_xmalloc(sizeof *d);
  *d = (dec){.t = t, .h = h, .two = two, .has1 = k1 >= 0, .has2 = k2 >= 0};
  d->q = make_q(e, t * h * 512);
  d->sink = make_sink(e, h);
  if (d->has1) dset_make(e, &d->s1, t, nb, bs, k1, bad);
  if (d->has2) dset_make(e, &d->s2, t, 1 + nb / 2, 64, k2, 0);
  d->mq = cc_buf(e, (size_t)(t * h) * 1024, d->q);
  d->ms = cc_buf(e, (size_t)h * 4, d->sink);
  d->mo = cc_buf(e, (size_t)(t * h) * 1024, NULL);
  d->me = cc_buf(e, (size_t)(t * h) * 4, NULL);
  if (two) {
    d->mwb = dsa_sparse_mla_decode_workspace_size(t, d->has1 ? k1 : 0, d->has2 ? k2 : 0);
    d->mw = cc_buf(e, d->mwb, NULL);
  }
  d->tq = cc_t(d->mq, DSA_BF16, 3, (int64_t[]){t, h, 512});
  d->ts = cc_t(d->ms, DSA_F32, 1, (int64_t[]){h});
  d->to = cc_t(d->mo, DSA_BF16, 3, (int64_t[]){t, h, 512});
  d->te = cc_t(d->me, DSA_F32, 2, (int64_t[]){t, h});
  return d;
}
static void dec_free(void *p) {
  dec *d = p;
  if (!d) return;
  if (d->has1) dset_free(&d->s1);
  if (d->has2) dset_free(&d->s2);
  free(d->q), free(d->sink);
  cc_free(&d->mq), cc_free(&d->ms), cc_free(&d->mo), cc_free(&d->me), cc_free(&d->mw);
  free(d);
}
static dsa_status dec_call(cc_env *e, dec *d, cl_event *done) {
  dsa_events ev = {0, NULL, done};
  dsa_sparse_params p;
  dsa_sparse_params_default(&p);
  dsa_status s =
      d->two ? dsa_sparse_mla_decode_two_stage(e->q, &d->tq, d->has1 ? &d->s1.set : NULL,
                                               d->has2 ? &d->s2.set : NULL, &d->ts, &d->to, &d->te,
                                               WS_BYTES(d->mw, 0, d->mwb), &p, &ev)
             : dsa_sparse_mla_decode(e->q, &d->tq, d->has1 ? &d->s1.set : NULL,
                                     d->has2 ? &d->s2.set : NULL, &d->ts, &d->to, &d->te, &p, &ev);
  cc_after_call(e);
  return s;
}

static int dec_case(cc_env *e, int two, int64_t t, int64_t h, int64_t k1, int64_t k2, int64_t nb,
                    int32_t bs, int bad, char *msg, size_t ms) {
  dec *d = dec_make(e, two, t, h, k1, k2, nb, bs, bad);
  int rc;
  if (dec_call(e, d, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "%s: %s", two ? "dsa_sparse_mla_decode_two_stage" : "dsa_sparse_mla_decode",
                 dsa_last_error());
  } else {
    const uint32_t f = cc_faults(e);
    double *want = cc_xmalloc((size_t)(t * h) * 512 * 8), *wlse = cc_xmalloc((size_t)(t * h) * 8);
    ref_mla_set r1 = {&d->s1.ref, d->s1.idx, d->s1.k, d->s1.k, 1, d->s1.lens};
    ref_mla_set r2 = {&d->s2.ref, d->s2.idx, d->s2.k, d->s2.k, 1, d->s2.lens};
    const unsigned wf = ref_sparse_mla_decode(d->q, t, h, h * 512, 512, d->has1 ? &r1 : NULL,
                                              d->has2 ? &r2 : NULL, d->sink, 1.0 / sqrt(512.0),
                                              want, wlse);
    uint16_t *got = cc_xmalloc((size_t)(t * h) * 1024);
    float *lse = cc_xmalloc((size_t)(t * h) * 4);
    cc_read(e, d->mo, (size_t)(t * h) * 1024, got);
    cc_read(e, d->me, (size_t)(t * h) * 4, lse);
    char what[160];
    snprintf(what, sizeof what, "T=%lld H=%lld K1=%lld K2=%lld nb=%lld bs=%d", (long long)t,
             (long long)h, (long long)k1, (long long)k2, (long long)nb, bs);
    rc = close_cmp(got, want, lse, wlse, t * h, what, msg, ms);
    if (!rc && f != wf) rc = CC_FAIL(msg, ms, "%s: faults 0x%x, want 0x%x", what, f, wf);
    free(want), free(wlse), free(got), free(lse);
  }
  dec_free(d);
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

static int b_ab_setup(cc_env *e, int small, void **st) {
  *st = small ? ab_make(e, 4, 64, 4096, 512, 0) : ab_make(e, 64, 128, 65536, 640, 0);
  ab *a = *st;
  for (int64_t i = 0; i < a->t; i++) a->lens[i] = (int32_t)a->k;
  clEnqueueWriteBuffer(e->clq, a->ml, CL_TRUE, 0, (size_t)a->t * 4, a->lens, 0, NULL, NULL);
  return 0;
}
static int b_ab_run(cc_env *e, void *st, cl_event *done) { return ab_call(e, st, done) != DSA_OK; }
static int b_dec_setup(cc_env *e, int small, int two, void **st) {
  *st = small ? dec_make(e, two, 4, 64, 128, 512, 16, 64, 0)
              : dec_make(e, two, 64, 128, 128, 512, 256, 64, 0);
  dec *d = *st;
  for (int64_t i = 0; i < d->t; i++) d->s1.lens[i] = 128, d->s2.lens[i] = 512;
  clEnqueueWriteBuffer(e->clq, d->s1.ml, CL_TRUE, 0, (size_t)d->t * 4, d->s1.lens, 0, NULL, NULL);
  clEnqueueWriteBuffer(e->clq, d->s2.ml, CL_TRUE, 0, (size_t)d->t * 4, d->s2.lens, 0, NULL, NULL);
  return 0;
}
static int b_fused_setup(cc_env *e, int small, void **st) { return b_dec_setup(e, small, 0, st); }
static int b_two_setup(cc_env *e, int small, void **st) { return b_dec_setup(e, small, 1, st); }
static int b_dec_run(cc_env *e, void *st, cl_event *done) { return dec_call(e, st, done) != DSA_OK; }

const cc_op cc_ops_sparse_mla[] = {
    {"dsa_sparse_attn_bf16", check_bf16, "T=64 H=128 K=640", b_ab_setup, b_ab_run, ab_free},
    {"dsa_sparse_mla_decode", check_fused, "T=64 H=128 K=128+512", b_fused_setup, b_dec_run,
     dec_free},
    {"dsa_sparse_mla_decode_two_stage", check_two, "T=64 H=128 K=128+512", b_two_setup,
     b_dec_run, dec_free},
    {0}};
