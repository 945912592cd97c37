/* The MTP RMSNorms' case description (cases.h). */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

static size_t wsz(const case_mtp *c) { return c->w_bf16 ? 2 : 4; }
static int64_t hc_of(const case_mtp *c) { return c->head ? 0 : c->hc; }

static int mtp_alloc(case_mtp *c) {
  const int64_t hc = hc_of(c);
  c->owned = 1;
  c->emb = case_alloc((size_t)(c->t * c->h) * 2);
  c->prev = case_alloc((size_t)(c->t * hc * c->h) * 2);
  c->pos = case_alloc((size_t)c->t * 8);
  c->we = case_alloc((size_t)c->h * wsz(c));
  c->wh = c->shared_w || c->head ? NULL : case_alloc((size_t)c->h * wsz(c));
  return c->emb && c->prev && c->pos && c->we && (c->wh || c->shared_w || c->head) ? 0 : -1;
}

/* Rows of one random scale each (zero rows now and then). */
static void gen_rows(uint64_t *rng, uint16_t *x, int64_t rows, int64_t h) {
  for (int64_t r = 0; r < rows; r++) {
    const int zero = case_rnd(rng, 16) == 0;
    const double sc = ldexp(1.0, (int)case_rnd(rng, 40) - 20);
    for (int64_t d = 0; d < h; d++)
      x[r * h + d] = zero ? 0 : case_bf16((float)(case_uniform(rng, -1, 1) * sc));
  }
}
static void gen_weight(uint64_t *rng, void *w, int bf16, int64_t h) {
  for (int64_t d = 0; d < h; d++) {
    const float v = case_rnd(rng, 32) == 0 ? 0.0f : (float)case_uniform(rng, -1.5, 1.5);
    if (bf16) ((uint16_t *)w)[d] = case_bf16(v);
    else ((float *)w)[d] = v;
  }
}

int case_mtp_gen_check(case_mtp *c, uint64_t *rng) {
  if (mtp_alloc(c)) return -1;
  gen_rows(rng, c->emb, c->t, c->h);
  gen_rows(rng, c->prev, c->t * hc_of(c), c->h);
  for (int64_t i = 0; i < c->t; i++)
    c->pos[i] = case_rnd(rng, 4) == 0 ? 0 : case_rnd(rng, 3) == 0 ? -1 - case_rnd(rng, 5)
                                                                    : case_rnd(rng, 1 << 20);
  gen_weight(rng, c->we, c->w_bf16, c->h);
  if (c->wh) gen_weight(rng, c->wh, c->w_bf16, c->h);
  return 0;
}

int case_mtp_gen_bench(case_mtp *c) {
  c->hc = c->head ? 0 : CASE_MTP_HC, c->w_bf16 = 0, c->shared_w = 1;
  if (mtp_alloc(c)) return -1;
  uint64_t seed = 0x5eed3770u; /* the rows' data since they were written */
  for (int64_t i = 0; i < c->t * c->h; i++) c->emb[i] = case_bf16((float)case_uniform(&seed, -4, 4));
  for (int64_t i = 0; i < c->t * c->hc * c->h; i++)
    c->prev[i] = case_bf16((float)case_uniform(&seed, -4, 4));
  float *w = c->we;
  for (int64_t d = 0; d < c->h; d++) w[d] = (float)case_uniform(&seed, 0.5, 1.5);
  for (int64_t i = 0; i < c->t; i++) c->pos[i] = i % 97; /* some zeros */
  return 0;
}

dsa_mtp_params case_mtp_params(const case_mtp *c) {
  dsa_mtp_params p;
  dsa_mtp_params_default(&p);
  if (c->eps != 0) p.eps = c->eps;
  return p;
}

int case_mtp_upload(const case_dev *d, case_mtp *c, unsigned char out_fill, char *msg,
                    size_t msz) {
  const int64_t t = c->t, h = c->h, hc = hc_of(c);
  const dsa_dtype wd = c->w_bf16 ? DSA_BF16 : DSA_F32;
  c->me = case_buf(d, (size_t)(t * h) * 2, c->emb, 0);
  c->mwe = case_buf(d, (size_t)h * wsz(c), c->we, 0);
  c->meo = case_buf(d, (size_t)(t * h) * 2, NULL, out_fill);
  int ok = c->me && c->mwe && c->meo;
  if (!c->head) {
    c->mp = case_buf(d, (size_t)t * 8, c->pos, 0);
    c->mh = case_buf(d, (size_t)(t * hc * h) * 2, c->prev, 0);
    c->mho = case_buf(d, (size_t)(t * hc * h) * 2, NULL, out_fill);
    if (c->wh) c->mwh = case_buf(d, (size_t)h * wsz(c), c->wh, 0);
    ok = ok && c->mp && c->mh && c->mho && (c->mwh || !c->wh);
  }
  if (!ok) {
    snprintf(msg, msz, "mtp norm: device buffers for t=%lld h=%lld", (long long)t, (long long)h);
    return 1;
  }
  c->te = dsa_tensor_make(c->me, 0, DSA_BF16, 2, (int64_t[]){t, h});
  c->teo = dsa_tensor_make(c->meo, 0, DSA_BF16, 2, (int64_t[]){t, h});
  c->twe = dsa_tensor_make(c->mwe, 0, wd, 1, &c->h);
  c->twh = c->wh ? dsa_tensor_make(c->mwh, 0, wd, 1, &c->h) : c->twe;
  if (!c->head) {
    c->tp = dsa_tensor_make(c->mp, 0, DSA_I64, 1, &c->t);
    c->th = dsa_tensor_make(c->mh, 0, DSA_BF16, 3, (int64_t[]){t, hc, h});
    c->tho = dsa_tensor_make(c->mho, 0, DSA_BF16, 3, (int64_t[]){t, hc, h});
  }
  return 0;
}

dsa_status case_mtp_call(dsa_queue *q, const case_mtp *c, const dsa_events *ev) {
  const dsa_mtp_params p = case_mtp_params(c);
  if (c->head) return dsa_mtp_shared_head_rmsnorm(q, &c->te, &c->twe, &c->teo, &p, ev);
  return dsa_mtp_input_rmsnorm(q, &c->te, &c->tp, &c->th, &c->twe, &c->twh, &c->teo, &c->tho, &p,
                               ev);
}

/* bf16 bit patterns as a monotone integer line (-0 and +0 both 0). */
static int64_t line(uint16_t h) { return (h & 0x8000) ? -(int64_t)(h & 0x7FFF) : (int64_t)h; }
static int is_nan(uint16_t h) { return (h & 0x7FFF) > 0x7F80; }

/* got against want: exact but for 1-ulp steps and NaN payloads. */
static int cmp_ulp1(const uint16_t *got, const uint16_t *w, size_t n, const char *name,
                    size_t *off1_out, char *msg, size_t msz) {
  size_t off1 = 0, bad = 0, first = 0;
  for (size_t i = 0; i < n; i++) {
    if (got[i] == w[i] || (is_nan(got[i]) && is_nan(w[i]))) continue;
    const int64_t dd = line(got[i]) - line(w[i]);
    if (!is_nan(got[i]) && !is_nan(w[i]) && (dd == 1 || dd == -1 || dd == 0)) {
      off1 += dd != 0; /* dd == 0: +0 against -0 is a difference */
      if (dd == 0 && !bad++) first = i;
    } else if (!bad++) {
      first = i;
    }
  }
  if (off1_out) *off1_out = off1;
  if (!bad) return 0;
  snprintf(msg, msz, "%s: %zu values differ by more than 1 bf16 ulp (or in sign of zero), "
                     "first at %zu: got 0x%04X want 0x%04X",
           name, bad, first, got[first], w[first]);
  return 1;
}

static int check_one(const case_dev *d, cl_mem m, size_t n, const uint16_t *want, int ulp,
                     const char *name, size_t *off1, char *msg, size_t msz) {
  uint16_t *got = case_alloc(n * 2);
  if (!got) return snprintf(msg, msz, "%s: out of memory", name), 1;
  const int rc = case_read(d, m, n * 2, got, msg, msz) ||
                 (ulp ? cmp_ulp1(got, want, n, name, off1, msg, msz)
                      : case_cmp_bytes(got, want, n * 2, 2, name, msg, msz));
  free(got);
  return rc;
}

int case_mtp_check(const case_dev *d, const case_mtp *c, const case_mtp_want *want, char *msg,
                   size_t msz) {
  char what[128];
  if (c->head) {
    snprintf(what, sizeof what, "out (T=%lld H=%lld)", (long long)c->t, (long long)c->h);
    return check_one(d, c->meo, (size_t)(c->t * c->h), want->eo, want->ulp,
                     want->ulp ? "out" : what, want->off1_e, msg, msz);
  }
  snprintf(what, sizeof what, "out_enorm (T=%lld H=%lld HC=%lld)", (long long)c->t,
           (long long)c->h, (long long)c->hc);
  if (check_one(d, c->meo, (size_t)(c->t * c->h), want->eo, want->ulp,
                want->ulp ? "out_enorm" : what, want->off1_e, msg, msz))
    return 1;
  snprintf(what, sizeof what, "out_hnorm (T=%lld H=%lld HC=%lld)", (long long)c->t,
           (long long)c->h, (long long)c->hc);
  return check_one(d, c->mho, (size_t)(c->t * c->hc * c->h), want->ho, want->ulp,
                   want->ulp ? "out_hnorm" : what, want->off1_h, msg, msz);
}

void case_mtp_free(case_mtp *c) {
  if (c->owned) free(c->emb), free(c->prev), free(c->pos), free(c->we), free(c->wh);
  case_release(&c->me), case_release(&c->mp), case_release(&c->mh), case_release(&c->mwe);
  case_release(&c->mwh), case_release(&c->meo), case_release(&c->mho);
}

/* Rows read and written once (the second pass's re-read hits the cache),
 * weights, positions. p = {t, h, hc (0: the shared head)}. */
double case_mtp_bytes(const int64_t *p) {
  const double t = (double)p[0], h = (double)p[1], hc = (double)p[2];
  return 2 * t * (hc + 1) * h * 2 + (hc ? 2 : 1) * h * 4 + (hc ? t * 8 : 0);
}

double case_mtp_flops(const int64_t *p) {
  (void)p;
  return 0; /* memory-bound */
}

CASE_OPS(mtp, case_mtp_want, "dsa_mtp_input_rmsnorm")
/* The same functions under the shared head's name (the case's head flag
 * picks the call). */
const case_ops case_mtp_head_ops = {"dsa_mtp_shared_head_rmsnorm", mtp_upload_v, mtp_call_v,
                                    mtp_check_v, mtp_free_v};
