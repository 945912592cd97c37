/* Index-building helpers (§10.1-10.5): every output byte-exact against
 * tests/ref (as tests/test_index_helpers.c), lens included, and the fault
 * word. Inputs are valid index data with a few -1 entries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkcl.h"
#include "ref_index_helpers.h"

/* Device buffers of one case, released together. */
typedef struct pool {
  cl_mem m[24];
  int n;
} pool;

static dsa_tensor pdev(cc_env *e, pool *p, const void *host, size_t bytes, dsa_dtype dt, int nd,
                       int64_t d0, int64_t d1, int64_t rs) {
  cl_mem m = cc_buf(e, bytes + 4, NULL);
  if (bytes) clEnqueueWriteBuffer(e->clq, m, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
  p->m[p->n++] = m;
  dsa_tensor t = dsa_tensor_make(m, 0, dt, nd, nd == 1 ? (int64_t[]){d0} : (int64_t[]){d0, d1});
  if (nd == 2) t.stride[0] = rs;
  return t;
}
static void pool_free(pool *p) {
  for (int i = 0; i < p->n; i++) cc_free(&p->m[i]);
  p->n = 0;
}

static int32_t *table(cc_env *e, int64_t r, int64_t w) {
  int32_t *t = cc_xmalloc((size_t)(r * w) * 4 + 4);
  for (int64_t i = 0; i < r * w; i++) t[i] = cc_rnd(e, 10) == 0 ? -1 : (int32_t)cc_rnd(e, 5000);
  return t;
}

/* The common tail: read out (bytes) and lens, compare, faults. */
static int finish(cc_env *e, const char *what, cl_mem om, const void *want, size_t ob, size_t esz,
                  cl_mem lm, const int32_t *wl, int64_t t, unsigned wf, char *msg, size_t ms) {
  const uint32_t f = cc_faults(e);
  uint8_t *g = cc_xmalloc(ob + (size_t)t * 4);
  char w2[160];
  cc_read(e, om, ob, g);
  snprintf(w2, sizeof w2, "%s out", what);
  int rc = cc_cmp_bytes(g, want, ob, esz, w2, msg, ms);
  if (!rc && lm) {
    cc_read(e, lm, (size_t)t * 4, g);
    snprintf(w2, sizeof w2, "%s lens", what);
    rc = cc_cmp_bytes(g, wl, (size_t)t * 4, 4, w2, msg, ms);
  }
  if (!rc && f != wf) rc = CC_FAIL(msg, ms, "%s: faults 0x%x, want 0x%x", what, f, wf);
  free(g);
  return rc;
}

#define CALL(e, msg, ms, name, expr)                                            \
  do {                                                                          \
    dsa_status s_ = (expr);                                                     \
    cc_after_call(e);                                                           \
    if (s_ != DSA_OK) {                                                         \
      rc = CC_FAIL(msg, ms, "%s: %s", name, dsa_last_error());                  \
      goto done;                                                                \
    }                                                                           \
  } while (0)

/* Requests: query lengths 0..8 (decode-like 1 sometimes), seq_len >= ql. */
static void requests(cc_env *e, int64_t r, int64_t maxseq, int32_t *qsl, int32_t *seq) {
  qsl[0] = 0;
  for (int64_t i = 0; i < r; i++) {
    const int64_t ql = cc_rnd(e, 3) == 0 ? 1 : cc_rnd(e, 9);
    qsl[i + 1] = qsl[i] + (int32_t)ql;
    seq[i] = (int32_t)(ql + cc_rnd(e, maxseq - ql + 1));
  }
}

/* ---- §10.1 -------------------------------------------------------------------- */
static int slot_case(cc_env *e, int64_t r, int32_t ratio, int32_t bs, char *msg, size_t ms) {
  pool p = {{0}, 0};
  int rc = 0;
  const int64_t w = 4, maxseq = w * bs * ratio;
  int32_t *qsl = cc_xmalloc((size_t)(r + 1) * 4), *seq = cc_xmalloc((size_t)r * 4);
  requests(e, r, maxseq, qsl, seq);
  int32_t *bt = table(e, r, w);
  const int64_t t = qsl[r] + cc_rnd(e, 3);
  int64_t *want = cc_xmalloc((size_t)t * 8 + 8);
  dsa_tensor a = pdev(e, &p, qsl, (size_t)(r + 1) * 4, DSA_I32, 1, r + 1, 0, 0);
  dsa_tensor b = pdev(e, &p, seq, (size_t)r * 4, DSA_I32, 1, r, 0, 0);
  dsa_tensor c = pdev(e, &p, bt, (size_t)(r * w) * 4, DSA_I32, 2, r, w, w);
  dsa_tensor o = pdev(e, &p, NULL, (size_t)t * 8, DSA_I64, 1, t, 0, 0);
  dsa_index_compressed_slot_mapping_params prm;
  dsa_index_compressed_slot_mapping_params_default(&prm);
  prm.compress_ratio = ratio, prm.block_size = bs;
  CALL(e, msg, ms, "dsa_index_compressed_slot_mapping",
       dsa_index_compressed_slot_mapping(e->q, &a, &b, &c, &o, &prm, NULL));
  {
    const unsigned wf = ref_compressed_slot_mapping(qsl, seq, (ref_table){bt, r, w, w}, ratio, bs,
                                                    want, t);
    char what[96];
    snprintf(what, sizeof what, "R=%lld ratio=%d bs=%d", (long long)r, ratio, bs);
    rc = finish(e, what, o.mem, want, (size_t)t * 8, 8, NULL, NULL, t, wf, msg, ms);
  }
done:
  pool_free(&p);
  free(qsl), free(seq), free(bt), free(want);
  return rc;
}
static int check_slot(cc_env *e, char *msg, size_t ms) {
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (slot_case(e, 1 + cc_rnd(e, 5), cc_rnd(e, 2) ? 4 : 128, cc_rnd(e, 2) ? 64 : 2, msg, ms))
      return 1;
  return 0;
}

/* ---- §10.2 -------------------------------------------------------------------- */
static int swa_case(cc_env *e, int64_t t, int64_t r, int32_t window, int32_t bs, int valid,
                    char *msg, size_t ms) {
  pool p = {{0}, 0};
  int rc = 0;
  const int64_t w = 6, width = window + cc_rnd(e, 3);
  int64_t *pos = cc_xmalloc((size_t)t * 8);
  int32_t *t2r = cc_xmalloc((size_t)t * 4), *bt = table(e, r, w);
  uint8_t *v = cc_xmalloc((size_t)t);
  for (int64_t i = 0; i < t; i++)
    pos[i] = cc_rnd(e, w * bs), t2r[i] = (int32_t)cc_rnd(e, r), v[i] = cc_rnd(e, 5) != 0;
  int32_t *want = cc_xmalloc((size_t)(t * width) * 4), *wl = cc_xmalloc((size_t)t * 4);
  dsa_tensor a = pdev(e, &p, pos, (size_t)t * 8, DSA_I64, 1, t, 0, 0);
  dsa_tensor b = pdev(e, &p, t2r, (size_t)t * 4, DSA_I32, 1, t, 0, 0);
  dsa_tensor c = pdev(e, &p, v, (size_t)t, DSA_U8, 1, t, 0, 0);
  dsa_tensor d = pdev(e, &p, bt, (size_t)(r * w) * 4, DSA_I32, 2, r, w, w);
  dsa_tensor o = pdev(e, &p, NULL, (size_t)(t * width) * 4, DSA_I32, 2, t, width, width);
  dsa_tensor l = pdev(e, &p, NULL, (size_t)t * 4, DSA_I32, 1, t, 0, 0);
  dsa_index_swa_params prm;
  dsa_index_swa_params_default(&prm);
  prm.window = window, prm.block_size = bs;
  CALL(e, msg, ms, "dsa_index_swa",
       dsa_index_swa(e->q, &a, &b, valid ? &c : NULL, &d, &o, &l, &prm, NULL));
  {
    const unsigned wf = ref_swa_indices(pos, t2r, valid ? v : NULL, (ref_table){bt, r, w, w},
                                        window, bs, want, width, width, wl, t);
    char what[96];
    snprintf(what, sizeof what, "T=%lld window=%d bs=%d", (long long)t, window, bs);
    rc = finish(e, what, o.mem, want, (size_t)(t * width) * 4, 4, l.mem, wl, t, wf, msg, ms);
  }
done:
  pool_free(&p);
  free(pos), free(t2r), free(bt), free(v), free(want), free(wl);
  return rc;
}
static int check_swa(cc_env *e, char *msg, size_t ms) {
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (swa_case(e, 1 + cc_rnd(e, 20), 1 + cc_rnd(e, 4), cc_rnd(e, 2) ? 128 : 1 + (int32_t)cc_rnd(e, 40),
                 cc_rnd(e, 2) ? 64 : 3, (int)cc_rnd(e, 2), msg, ms))
      return 1;
  return 0;
}

/* ---- §10.3 -------------------------------------------------------------------- */
static int gtk_case(cc_env *e, int64_t t, int64_t k, int64_t r, int32_t bs, int valid, char *msg,
                    size_t ms) {
  pool p = {{0}, 0};
  int rc = 0;
  const int64_t w = 5;
  int32_t *tl = cc_xmalloc((size_t)(t * k) * 4), *t2r = cc_xmalloc((size_t)t * 4), *bt = table(e, r, w);
  uint8_t *v = cc_xmalloc((size_t)t);
  for (int64_t i = 0; i < t * k; i++) tl[i] = cc_rnd(e, 6) == 0 ? -1 : (int32_t)cc_rnd(e, w * bs);
  for (int64_t i = 0; i < t; i++) t2r[i] = (int32_t)cc_rnd(e, r), v[i] = cc_rnd(e, 5) != 0;
  int32_t *want = cc_xmalloc((size_t)(t * k) * 4), *wl = cc_xmalloc((size_t)t * 4);
  dsa_tensor a = pdev(e, &p, tl, (size_t)(t * k) * 4, DSA_I32, 2, t, k, k);
  dsa_tensor b = pdev(e, &p, t2r, (size_t)t * 4, DSA_I32, 1, t, 0, 0);
  dsa_tensor c = pdev(e, &p, bt, (size_t)(r * w) * 4, DSA_I32, 2, r, w, w);
  dsa_tensor d = pdev(e, &p, v, (size_t)t, DSA_U8, 1, t, 0, 0);
  dsa_tensor o = pdev(e, &p, NULL, (size_t)(t * k) * 4, DSA_I32, 2, t, k, k);
  dsa_tensor l = pdev(e, &p, NULL, (size_t)t * 4, DSA_I32, 1, t, 0, 0);
  dsa_index_global_topk_params prm;
  dsa_index_global_topk_params_default(&prm);
  prm.block_size = bs;
  CALL(e, msg, ms, "dsa_index_global_topk",
       dsa_index_global_topk(e->q, &a, &b, &c, valid ? &d : NULL, &o, &l, &prm, NULL));
  {
    const unsigned wf = ref_global_topk(tl, k, k, t2r, (ref_table){bt, r, w, w}, valid ? v : NULL,
                                        bs, want, k, wl, t);
    char what[96];
    snprintf(what, sizeof what, "T=%lld K=%lld bs=%d", (long long)t, (long long)k, bs);
    rc = finish(e, what, o.mem, want, (size_t)(t * k) * 4, 4, l.mem, wl, t, wf, msg, ms);
  }
done:
  pool_free(&p);
  free(tl), free(t2r), free(bt), free(v), free(want), free(wl);
  return rc;
}
static int check_gtk(cc_env *e, char *msg, size_t ms) {
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (gtk_case(e, 1 + cc_rnd(e, 10), 1 + cc_rnd(e, 600), 1 + cc_rnd(e, 3), cc_rnd(e, 2) ? 64 : 2,
                 (int)cc_rnd(e, 2), msg, ms))
      return 1;
  return 0;
}

/* ---- §10.3 C128 ------------------------------------------------------------------ */
static int c128_case(cc_env *e, int64_t t, int64_t k, int64_t r, int32_t ratio, int32_t bs,
                     int global, char *msg, size_t ms) {
  pool p = {{0}, 0};
  int rc = 0;
  const int64_t w = (k + bs - 1) / bs;
  int64_t *pos = cc_xmalloc((size_t)t * 8);
  int32_t *t2r = cc_xmalloc((size_t)t * 4), *bt = table(e, r, w);
  uint8_t *v = cc_xmalloc((size_t)t);
  for (int64_t i = 0; i < t; i++)
    pos[i] = cc_rnd(e, (k + 2) * ratio), t2r[i] = (int32_t)cc_rnd(e, r), v[i] = cc_rnd(e, 5) != 0;
  int32_t *want = cc_xmalloc((size_t)(t * k) * 4), *wl = cc_xmalloc((size_t)t * 4);
  dsa_tensor a = pdev(e, &p, pos, (size_t)t * 8, DSA_I64, 1, t, 0, 0);
  dsa_tensor b = pdev(e, &p, t2r, (size_t)t * 4, DSA_I32, 1, t, 0, 0);
  dsa_tensor c = pdev(e, &p, bt, (size_t)(r * w) * 4, DSA_I32, 2, r, w, w);
  dsa_tensor d = pdev(e, &p, v, (size_t)t, DSA_U8, 1, t, 0, 0);
  dsa_tensor o = pdev(e, &p, NULL, (size_t)(t * k) * 4, DSA_I32, 2, t, k, k);
  dsa_tensor l = pdev(e, &p, NULL, (size_t)t * 4, DSA_I32, 1, t, 0, 0);
  dsa_index_c128_topk_params prm;
  dsa_index_c128_topk_params_default(&prm);
  prm.compress_ratio = ratio, prm.block_size = bs;
  CALL(e, msg, ms, "dsa_index_c128_topk",
       dsa_index_c128_topk(e->q, &a, &b, global ? &c : NULL, &d, &o, &l, &prm, NULL));
  {
    const unsigned wf = ref_c128_topk(pos, t2r, (ref_table){global ? bt : NULL, r, w, w}, v,
                                      ratio, bs, want, k, k, wl, t);
    char what[96];
    snprintf(what, sizeof what, "T=%lld K=%lld ratio=%d bs=%d global=%d", (long long)t,
             (long long)k, ratio, bs, global);
    rc = finish(e, what, o.mem, want, (size_t)(t * k) * 4, 4, l.mem, wl, t, wf, msg, ms);
  }
done:
  pool_free(&p);
  free(pos), free(t2r), free(bt), free(v), free(want), free(wl);
  return rc;
}
static int check_c128(cc_env *e, char *msg, size_t ms) {
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (c128_case(e, 1 + cc_rnd(e, 10), 1 + cc_rnd(e, 300), 1 + cc_rnd(e, 3),
                  cc_rnd(e, 2) ? 128 : 4, cc_rnd(e, 2) ? 2 : 64, (int)cc_rnd(e, 2), msg, ms))
      return 1;
  return 0;
}

/* ---- §10.4 -------------------------------------------------------------------- */
static int comb_case(cc_env *e, int64_t r, int32_t window, int32_t ratio, int32_t topk, char *msg,
                     size_t ms) {
  pool p = {{0}, 0};
  int rc = 0;
  int32_t *qsl = cc_xmalloc((size_t)(r + 1) * 4), *seq = cc_xmalloc((size_t)r * 4),
          *gl = cc_xmalloc((size_t)r * 4);
  requests(e, r, 2000, qsl, seq);
  const int32_t base = (int32_t)cc_rnd(e, 5); /* query_start_loc is rebased */
  for (int64_t i = 0; i < r; i++) {
    const int32_t ql = qsl[i + 1] - qsl[i];
    int32_t g = ql + window - 1;
    gl[i] = g > seq[i] ? seq[i] : g;
  }
  for (int64_t i = 0; i <= r; i++) qsl[i] += base;
  const int64_t t = qsl[r] - base, kt = topk ? topk : 1, width = topk + window + cc_rnd(e, 3);
  int32_t *tk = cc_xmalloc((size_t)(t * kt) * 4 + 4);
  for (int64_t i = 0; i < t * kt; i++) tk[i] = (int32_t)cc_rnd(e, 3000);
  const int64_t m = 4000, n = 3000;
  int32_t *want = cc_xmalloc((size_t)(t * width) * 4 + 4), *wl = cc_xmalloc((size_t)t * 4 + 4);
  dsa_tensor a = pdev(e, &p, tk, (size_t)(t * kt) * 4, DSA_I32, 2, t, kt, kt);
  dsa_tensor b = pdev(e, &p, qsl, (size_t)(r + 1) * 4, DSA_I32, 1, r + 1, 0, 0);
  dsa_tensor c = pdev(e, &p, seq, (size_t)r * 4, DSA_I32, 1, r, 0, 0);
  dsa_tensor d = pdev(e, &p, gl, (size_t)r * 4, DSA_I32, 1, r, 0, 0);
  dsa_tensor o = pdev(e, &p, NULL, (size_t)(t * width) * 4, DSA_I32, 2, t, width, width);
  dsa_tensor l = pdev(e, &p, NULL, (size_t)t * 4, DSA_I32, 1, t, 0, 0);
  dsa_index_combine_topk_swa_params prm;
  dsa_index_combine_topk_swa_params_default(&prm);
  prm.window = window, prm.compress_ratio = ratio, prm.topk = topk, prm.M = m, prm.N = n;
  CALL(e, msg, ms, "dsa_index_combine_topk_swa",
       dsa_index_combine_topk_swa(e->q, topk ? &a : NULL, &b, &c, &d, &o, &l, &prm, NULL));
  {
    const unsigned wf = ref_combine_topk_swa(tk, kt, qsl, seq, gl, r, window, ratio, topk, m, n,
                                             want, width, width, wl, t);
    char what[96];
    snprintf(what, sizeof what, "R=%lld window=%d ratio=%d topk=%d", (long long)r, window, ratio,
             topk);
    rc = finish(e, what, o.mem, want, (size_t)(t * width) * 4, 4, l.mem, wl, t, wf, msg, ms);
  }
done:
  pool_free(&p);
  free(qsl), free(seq), free(gl), free(tk), free(want), free(wl);
  return rc;
}
static int check_comb(cc_env *e, char *msg, size_t ms) {
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (comb_case(e, 1 + cc_rnd(e, 4), cc_rnd(e, 2) ? 128 : 8, cc_rnd(e, 2) ? 4 : 128,
                  (int32_t)(cc_rnd(e, 4) == 0 ? 0 : 1 + cc_rnd(e, 512)), msg, ms))
      return 1;
  return 0;
}

/* ---- §10.5 -------------------------------------------------------------------- */
static int mixed_case(cc_env *e, int64_t rd, int64_t rp, int32_t window, int32_t topk, int64_t kd,
                      int local, char *msg, size_t ms) {
  pool p = {{0}, 0};
  int rc = 0;
  const int64_t r = rd + rp;
  const int32_t sbs = cc_rnd(e, 2) ? 64 : 2, cbs = cc_rnd(e, 2) ? 64 : 2,
                ratio = cc_rnd(e, 2) ? 4 : 128;
  int32_t *qsl = cc_xmalloc((size_t)(r + 1) * 4), *seq = cc_xmalloc((size_t)r * 4 + 4);
  int64_t maxseq = 1;
  for (int64_t i = 0; i < r; i++) {
    const int64_t ql = i < rd ? 1 : 1 + cc_rnd(e, 9);
    qsl[i + 1] = qsl[i] + (int32_t)ql;
    seq[i] = (int32_t)(ql + cc_rnd(e, 900));
    if (seq[i] > maxseq) maxseq = seq[i];
  }
  const int64_t td = rd, t = qsl[r], tp = t - td;
  int32_t *t2r = cc_xmalloc((size_t)t * 4 + 4);
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = qsl[i]; j < qsl[i + 1]; j++) t2r[j] = (int32_t)i;
  const int64_t ws = (maxseq + sbs - 1) / sbs, wc = (maxseq / ratio + cbs) / cbs;
  int32_t *sbt = table(e, r, ws), *cbt = table(e, r, wc);
  int32_t *dswa = cc_xmalloc((size_t)(td * window) * 4 + 4);
  cc_fill_bytes(e, dswa, (size_t)(td * window) * 4);
  const int64_t dk = kd ? kd : 1;
  int32_t *dci = cc_xmalloc((size_t)(td * dk) * 4 + 4), *dl = cc_xmalloc((size_t)td * 4 + 4);
  uint8_t *dv = cc_xmalloc((size_t)td + 1);
  for (int64_t i = 0; i < td * dk; i++)
    dci[i] = cc_rnd(e, 4) == 0 ? -1 : local ? (int32_t)cc_rnd(e, wc * cbs) : (int32_t)cc_rnd(e, 1 << 20);
  for (int64_t i = 0; i < td; i++) dl[i] = (int32_t)cc_rnd(e, dk + 1), dv[i] = cc_rnd(e, 4) != 0;
  const int64_t kp = topk ? topk - cc_rnd(e, 2) : 1 + cc_rnd(e, 3);
  int32_t *pti = cc_xmalloc((size_t)(tp * kp) * 4 + 4);
  for (int64_t i = 0; i < tp * kp; i++) pti[i] = cc_rnd(e, 8) == 0 ? -1 : (int32_t)cc_rnd(e, wc * cbs);
  const int64_t pw = ((kd > topk ? kd : topk) + 3) / 4 * 4, width = window + pw;
  int32_t *want = cc_xmalloc((size_t)(t * width) * 4 + 4), *wl = cc_xmalloc((size_t)t * 4 + 4);
  const int with_lens = !local && cc_rnd(e, 2), sep = cc_rnd(e, 3) != 0;
  dsa_tensor a_dswa = pdev(e, &p, dswa, (size_t)(td * window) * 4, DSA_I32, 2, td, window, window);
  dsa_tensor a_dci = pdev(e, &p, dci, (size_t)(td * dk) * 4, DSA_I32, 2, td, kd, dk);
  dsa_tensor a_dl = pdev(e, &p, dl, (size_t)td * 4, DSA_I32, 1, td, 0, 0);
  dsa_tensor a_dv = pdev(e, &p, dv, (size_t)td, DSA_U8, 1, td, 0, 0);
  dsa_tensor a_pti = pdev(e, &p, pti, (size_t)(tp * kp) * 4, DSA_I32, 2, tp, kp, kp);
  dsa_tensor a_qsl = pdev(e, &p, qsl, (size_t)(r + 1) * 4, DSA_I32, 1, r + 1, 0, 0);
  dsa_tensor a_seq = pdev(e, &p, seq, (size_t)r * 4, DSA_I32, 1, r, 0, 0);
  dsa_tensor a_t2r = pdev(e, &p, t2r, (size_t)t * 4, DSA_I32, 1, t, 0, 0);
  dsa_tensor a_sbt = pdev(e, &p, sbt, (size_t)(r * ws) * 4, DSA_I32, 2, r, ws, ws);
  dsa_tensor a_cbt = pdev(e, &p, cbt, (size_t)(r * wc) * 4, DSA_I32, 2, r, wc, wc);
  dsa_tensor o = pdev(e, &p, NULL, (size_t)(t * width) * 4, DSA_I32, 2, t, width, width);
  dsa_tensor l = pdev(e, &p, NULL, (size_t)t * 4, DSA_I32, 1, t, 0, 0);
  dsa_index_mixed_sparse_inputs in = {&a_dswa, kd ? &a_dci : NULL, with_lens ? &a_dl : NULL, &a_dv,
                                &a_pti, &a_qsl, &a_seq, &a_t2r, &a_sbt, sep ? &a_cbt : NULL};
  dsa_index_mixed_sparse_params prm;
  dsa_index_mixed_sparse_params_default(&prm);
  prm.window = window, prm.compress_ratio = ratio, prm.topk = topk, prm.swa_block_size = sbs;
  prm.compressed_block_size = cbs, prm.decode_compressed_local = local;
  CALL(e, msg, ms, "dsa_index_mixed_sparse",
       dsa_index_mixed_sparse(e->q, &in, &o, &l, &prm, NULL));
  {
    ref_mixed rm = {dswa, window, kd ? dci : NULL, kd, dk, with_lens ? dl : NULL, dv, pti, kp, kp,
                    qsl, seq, r, t2r, (ref_table){sbt, r, ws, ws},
                    sep ? (ref_table){cbt, r, wc, wc} : (ref_table){sbt, r, ws, ws},
                    td, tp, window, ratio, topk, sbs, cbs, local};
    const unsigned wf = ref_mixed_sparse(&rm, want, width, width, wl);
    char what[128];
    snprintf(what, sizeof what, "Rd=%lld Rp=%lld window=%d topk=%d Kd=%lld local=%d",
             (long long)rd, (long long)rp, window, topk, (long long)kd, local);
    rc = finish(e, what, o.mem, want, (size_t)(t * width) * 4, 4, l.mem, wl, t, wf, msg, ms);
  }
done:
  pool_free(&p);
  free(qsl), free(seq), free(t2r), free(sbt), free(cbt), free(dswa), free(dci), free(dl);
  free(dv), free(pti), free(want), free(wl);
  return rc;
}
static int check_mixed(cc_env *e, char *msg, size_t ms) {
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (mixed_case(e, cc_rnd(e, 4), cc_rnd(e, 4), cc_rnd(e, 2) ? 128 : 8,
                   (int32_t)(cc_rnd(e, 4) == 0 ? 0 : 1 + cc_rnd(e, 512)), cc_rnd(e, 3) * 100,
                   (int)cc_rnd(e, 2), msg, ms))
      return 1;
  return 0;
}

const cc_op cc_ops_index_helpers[] = {
    {"dsa_index_compressed_slot_mapping", check_slot, "", NULL, NULL, NULL},
    {"dsa_index_swa", check_swa, "", NULL, NULL, NULL},
    {"dsa_index_global_topk", check_gtk, "", NULL, NULL, NULL},
    {"dsa_index_c128_topk", check_c128, "", NULL, NULL, NULL},
    {"dsa_index_combine_topk_swa", check_comb, "", NULL, NULL, NULL},
    {"dsa_index_mixed_sparse", check_mixed, "", NULL, NULL, NULL},
    {0}};
