/* KV compressor: the state image (save) and the whole cache image
 * (compress, all three formats) byte-exact against tests/ref (as
 * tests/test_compressor.c), and the fault word. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkcl.h"
#include "ref_compressor.h"

/* One prefill-like batch of one request at positions 0..T-1 over a state
 * cache of block size bs; the compress cache of format fmt. */
typedef struct cp {
  int fmt, ratio, hd;
  int64_t t, sw, nbs, bs, cnb, cstride;
  float *kvs, *ape, *st, *w, *cs;
  int64_t *pos, *sl, *csl;
  int32_t *bt, *req;
  uint8_t *img;
  cl_mem mkvs, mape, mst, mw, mcs, mpos, msl, mcsl, mbt, mreq, mc;
  dsa_tensor tkv, tsc, tape, tst, tw, tcs, tpos, tsl, tcsl, tbt, treq;
  dsa_paged_cache dc;
  dsa_compressor_params prm;
} cp;

static cp *cp_make(cc_env *e, int fmt, int ratio, int64_t t, int bad) {
  cp *s = cc_xmalloc(sizeof *s);
  s->fmt = fmt, s->ratio = ratio, s->hd = fmt == 1 ? 512 : 128, s->t = t;
  s->sw = (ratio == 4 ? 2 : 1) * s->hd;
  s->bs = ratio == 4 ? 4 : 8;
  s->nbs = (t + s->bs - 1) / s->bs + 1;
  const int64_t w = s->sw, rows = s->nbs * s->bs;
  s->kvs = cc_xmalloc((size_t)(t * 2 * w) * 4);
  for (int64_t i = 0; i < t * 2 * w; i++) s->kvs[i] = (float)cc_uniform(e, -3, 3);
  s->ape = cc_xmalloc((size_t)(ratio * w) * 4);
  for (int64_t i = 0; i < ratio * w; i++) s->ape[i] = (float)cc_uniform(e, -1, 1);
  s->st = cc_xmalloc((size_t)(rows * 2 * w) * 4);
  for (int64_t i = 0; i < rows * 2 * w; i++) s->st[i] = (float)cc_uniform(e, -4, 4);
  s->w = cc_xmalloc((size_t)s->hd * 4);
  for (int d = 0; d < s->hd; d++) s->w[d] = (float)cc_uniform(e, -1.5, 1.5);
  const int64_t npos = bad ? t / 2 + 1 : t + 1;
  s->cs = cc_xmalloc((size_t)(npos * 64) * 4);
  for (int64_t p = 0; p < npos; p++)
    for (int i = 0; i < 32; i++) {
      const double th = (double)p * pow(10000.0, -i / 32.0);
      s->cs[p * 64 + i] = (float)cos(th), s->cs[p * 64 + 32 + i] = (float)sin(th);
    }
  s->bt = cc_xmalloc((size_t)s->nbs * 4);
  for (int64_t j = 0; j < s->nbs - 1; j++) s->bt[j] = (int32_t)(s->nbs - 1 - j);
  s->pos = cc_xmalloc((size_t)t * 8), s->sl = cc_xmalloc((size_t)t * 8);
  s->csl = cc_xmalloc((size_t)t * 8), s->req = cc_xmalloc((size_t)t * 4);
  const int32_t cbs = fmt == 1 && ratio == 128 ? 2 : 64;
  s->cnb = t / ratio / cbs + 1;
  const int64_t tok = fmt == 1 ? 584 : fmt == 2 ? 132 : 68;
  s->cstride = cbs * tok;
  for (int64_t i = 0; i < t; i++) {
    s->pos[i] = i;
    s->sl[i] = cc_rnd(e, 16) == 0 ? -1 : (int64_t)s->bt[i / s->bs] * s->bs + i % s->bs;
    s->csl[i] = (i + 1) % ratio == 0 ? i / ratio : -1;
    if (bad && cc_rnd(e, 8) == 0) s->csl[i] = s->cnb * cbs + cc_rnd(e, 3);
    s->req[i] = 0;
  }
  s->img = cc_xmalloc((size_t)(s->cnb * s->cstride));
  cc_fill_bytes(e, s->img, (size_t)(s->cnb * s->cstride));
  s->mkvs = cc_buf(e, (size_t)(t * 2 * w) * 4, s->kvs);
  s->mape = cc_buf(e, (size_t)(ratio * w) * 4, s->ape);
  s->mst = cc_buf(e, (size_t)(rows * 2 * w) * 4, s->st);
  s->mw = cc_buf(e, (size_t)s->hd * 4, s->w);
  s->mcs = cc_buf(e, (size_t)(npos * 64) * 4, s->cs);
  s->mpos = cc_buf(e, (size_t)t * 8, s->pos);
  s->msl = cc_buf(e, (size_t)t * 8, s->sl);
  s->mcsl = cc_buf(e, (size_t)t * 8, s->csl);
  s->mbt = cc_buf(e, (size_t)s->nbs * 4, s->bt);
  s->mreq = cc_buf(e, (size_t)t * 4, s->req);
  s->mc = cc_buf(e, (size_t)(s->cnb * s->cstride), s->img);
  s->tkv = (dsa_tensor){.mem = s->mkvs, .offset = 0, .dtype = DSA_F32, .ndim = 2, .shape = {t, w},
                        .stride = {2 * w, 1}};
  s->tsc = (dsa_tensor){.mem = s->mkvs, .offset = (size_t)w * 4, .dtype = DSA_F32, .ndim = 2,
                        .shape = {t, w}, .stride = {2 * w, 1}};
  s->tape = cc_t(s->mape, DSA_F32, 2, (int64_t[]){ratio, w});
  s->tst = cc_t(s->mst, DSA_F32, 3, (int64_t[]){s->nbs, s->bs, 2 * w});
  s->tw = cc_t(s->mw, DSA_F32, 1, (int64_t[]){s->hd});
  s->tcs = cc_t(s->mcs, DSA_F32, 2, (int64_t[]){npos, 64});
  s->tpos = cc_t(s->mpos, DSA_I64, 1, (int64_t[]){t});
  s->tsl = cc_t(s->msl, DSA_I64, 1, (int64_t[]){t});
  s->tcsl = cc_t(s->mcsl, DSA_I64, 1, (int64_t[]){t});
  s->tbt = cc_t(s->mbt, DSA_I32, 2, (int64_t[]){1, s->nbs});
  s->treq = cc_t(s->mreq, DSA_I32, 1, (int64_t[]){t});
  s->dc = (dsa_paged_cache){.mem = s->mc, .offset = 0, .num_blocks = s->cnb, .block_size = cbs,
                            .block_stride = s->cstride, .format = (dsa_cache_format)fmt};
  dsa_compressor_params_default(&s->prm);
  s->prm.compress_ratio = ratio;
  return s;
}

static void cp_free(void *p) {
  cp *s = p;
  if (!s) return;
  free(s->kvs), free(s->ape), free(s->st), free(s->w), free(s->cs), free(s->pos), free(s->sl);
  free(s->csl), free(s->bt), free(s->req), free(s->img);
  cl_mem *m[] = {&s->mkvs, &s->mape, &s->mst, &s->mw, &s->mcs, &s->mpos,
                 &s->msl,  &s->mcsl, &s->mbt, &s->mreq, &s->mc};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) cc_free(m[i]);
  free(s);
}

static dsa_status save_call(cc_env *e, cp *s, cl_event *done) {
  dsa_events ev = {0, NULL, done};
  dsa_status st = dsa_compressor_save_states(e->q, &s->tkv, &s->tsc, &s->tape, &s->tpos, &s->tsl,
                                             &s->tst, &s->prm, &ev);
  cc_after_call(e);
  return st;
}
static dsa_status comp_call(cc_env *e, cp *s, cl_event *done) {
  dsa_events ev = {0, NULL, done};
  dsa_status st = dsa_compressor_compress_insert(e->q, &s->tst, &s->tbt, &s->treq, &s->tpos,
                                                 &s->tsl, &s->tw, &s->tcs, &s->tcsl, &s->dc,
                                                 &s->prm, &ev);
  cc_after_call(e);
  return st;
}

/* Save, then compress over the saved state; both images and faults. */
static int cp_case(cc_env *e, int fmt, int ratio, int64_t t, int bad, char *msg, size_t ms) {
  cp *s = cp_make(e, fmt, ratio, t, bad);
  char what[96];
  snprintf(what, sizeof what, "fmt=%d ratio=%d T=%lld bad=%d", fmt, ratio, (long long)t, bad);
  int rc = 0;
  if (save_call(e, s, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "%s: dsa_compressor_save_states: %s", what, dsa_last_error());
  } else {
    const uint32_t f = cc_faults(e);
    ref_state rs = {s->st, s->nbs, (int32_t)s->bs, s->bs * 2 * s->sw, 2 * s->sw};
    const unsigned wf = ref_compressor_save_states(&rs, s->kvs, 2 * s->sw, s->kvs + s->sw,
                                                   2 * s->sw, s->ape, s->sw, s->pos, s->sl, t,
                                                   ratio, s->sw);
    const size_t sb = (size_t)(s->nbs * s->bs * 2 * s->sw) * 4;
    float *got = cc_xmalloc(sb);
    cc_read(e, s->mst, sb, got);
    rc = cc_cmp_bytes(got, s->st, sb, 4, what, msg, ms);
    free(got);
    if (!rc && f != wf) rc = CC_FAIL(msg, ms, "%s: save faults 0x%x, want 0x%x", what, f, wf);
  }
  if (!rc && comp_call(e, s, NULL) != DSA_OK)
    rc = CC_FAIL(msg, ms, "%s: dsa_compressor_compress_insert: %s", what, dsa_last_error());
  if (!rc) {
    const uint32_t f = cc_faults(e);
    ref_state rs = {s->st, s->nbs, (int32_t)s->bs, s->bs * 2 * s->sw, 2 * s->sw};
    ref_compress_args ra = {&rs, s->bt, 1, s->nbs, s->nbs, 1, s->req, s->pos, s->sl, s->csl, t,
                            s->w, s->cs, 64, s->tcs.shape[0], s->prm.eps, ratio, fmt, s->img,
                            s->cnb, s->dc.block_size, s->cstride, NULL};
    const unsigned wf = ref_compressor_compress_insert(&ra);
    const size_t cb = (size_t)(s->cnb * s->cstride);
    uint8_t *img = cc_xmalloc(cb);
    cc_read(e, s->mc, cb, img);
    rc = cc_cmp_bytes(img, s->img, cb, 1, what, msg, ms);
    free(img);
    if (!rc && f != wf) rc = CC_FAIL(msg, ms, "%s: compress faults 0x%x, want 0x%x", what, f, wf);
  }
  cp_free(s);
  return rc;
}

static int check_save(cc_env *e, char *msg, size_t ms) {
  return cp_case(e, 1, 4, 17, 0, msg, ms) || cp_case(e, 2, 4, 9, 1, msg, ms) ||
         cp_case(e, 1, 128, 5, 0, msg, ms);
}
static int check_comp(cc_env *e, char *msg, size_t ms) {
  for (int it = 0; it < (e->quick ? 2 : 6); it++) {
    const int fmt = 1 + (int)cc_rnd(e, 3), ratio = fmt == 1 && cc_rnd(e, 2) ? 128 : 4;
    if (cp_case(e, fmt, ratio, ratio == 4 ? 8 + cc_rnd(e, 40) : 128 + cc_rnd(e, 200),
                (int)cc_rnd(e, 2), msg, ms))
      return 1;
  }
  return 0;
}

static int bs_setup(cc_env *e, int small, void **st) {
  *st = cp_make(e, 1, 4, small ? 256 : 8192, 0);
  return 0;
}
static int bs_run(cc_env *e, void *st, cl_event *done) { return save_call(e, st, done) != DSA_OK; }
static int bc_setup(cc_env *e, int small, void **st) {
  *st = cp_make(e, 1, 128, small ? 256 : 8192, 0);
  return 0;
}
static int bc_run(cc_env *e, void *st, cl_event *done) { return comp_call(e, st, done) != DSA_OK; }

const cc_op cc_ops_compressor[] = {
    {"dsa_compressor_save_states", check_save, "C4 main T=8192", bs_setup, bs_run, cp_free},
    {"dsa_compressor_compress_insert", check_comp, "C128 main T=8192", bc_setup, bc_run, cp_free},
    {0}};
