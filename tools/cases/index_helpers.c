/* The index-building helpers' case description (cases.h): one struct for
 * the six operators. */
#include "cases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

static const char *const names[CASE_IH_OPS] = {
    "dsa_index_compressed_slot_mapping", "dsa_index_swa", "dsa_index_global_topk",
    "dsa_index_c128_topk", "dsa_index_combine_topk_swa", "dsa_index_mixed_sparse"};

const char *case_ih_name(case_ih_op op) { return op < CASE_IH_OPS ? names[op] : "?"; }

static size_t esz(dsa_dtype dt) { return dt == DSA_U8 ? 1 : dt == DSA_I64 ? 8 : 4; }
static size_t arr_bytes(const case_ih_arr *a) {
  return (size_t)(a->d0 * (a->d1 < 0 ? 1 : a->rs)) * esz(a->dt);
}

/* Sets a (rank 1 when d1 < 0, row stride rs) and allocates its host data,
 * owned by the case; NULL when out of memory. */
static void *arr(case_ih *c, case_ih_arr *a, dsa_dtype dt, int64_t d0, int64_t d1, int64_t rs) {
  *a = (case_ih_arr){.present = 1, .dt = dt, .d0 = d0, .d1 = d1, .rs = d1 < 0 ? 1 : rs};
  if (c->nown == (int)(sizeof c->own / sizeof c->own[0])) return NULL;
  a->host = c->own[c->nown++] = case_alloc(arr_bytes(a));
  return a->host;
}

/* A block table [r, w]: -1 one in 10, else a block id below 5000. */
static int32_t *table(case_ih *c, case_ih_arr *a, uint64_t *rng, int64_t r, int64_t w) {
  int32_t *t = arr(c, a, DSA_I32, r, w, w);
  for (int64_t i = 0; t && i < r * w; i++)
    t[i] = case_rnd(rng, 10) == 0 ? -1 : (int32_t)case_rnd(rng, 5000);
  return t;
}

/* Requests: query lengths 0..8 (decode-like 1 sometimes), seq_len >= ql. */
static void requests(uint64_t *rng, int64_t r, int64_t maxseq, int32_t *qsl, int32_t *seq) {
  qsl[0] = 0;
  for (int64_t i = 0; i < r; i++) {
    const int64_t ql = case_rnd(rng, 3) == 0 ? 1 : case_rnd(rng, 9);
    qsl[i + 1] = qsl[i] + (int32_t)ql;
    seq[i] = (int32_t)(ql + case_rnd(rng, maxseq - ql + 1));
  }
}

/* out [t, width] i32 and lens [t]. */
static int outs(case_ih *c, int64_t t, int64_t width) {
  c->out = (case_ih_arr){.present = 1, .dt = DSA_I32, .d0 = t, .d1 = width, .rs = width};
  c->lens = (case_ih_arr){.present = 1, .dt = DSA_I32, .d0 = t, .d1 = -1, .rs = 1};
  return 0;
}

static int gen_slot(case_ih *c, uint64_t *rng) {
  const int64_t r = 1 + case_rnd(rng, 5), w = 4;
  const int32_t ratio = case_rnd(rng, 2) ? 4 : 128, bs = case_rnd(rng, 2) ? 64 : 2;
  int32_t *qsl = arr(c, &c->in[0], DSA_I32, r + 1, -1, 1), *seq = arr(c, &c->in[1], DSA_I32, r, -1, 1);
  if (!qsl || !seq || !table(c, &c->in[2], rng, r, w)) return -1;
  requests(rng, r, w * bs * ratio, qsl, seq);
  dsa_index_compressed_slot_mapping_params_default(&c->p.slot);
  c->p.slot.compress_ratio = ratio, c->p.slot.block_size = bs;
  c->out = (case_ih_arr){.present = 1, .dt = DSA_I64, .d0 = qsl[r] + case_rnd(rng, 3), .d1 = -1,
                         .rs = 1};
  return 0;
}

static int gen_swa(case_ih *c, uint64_t *rng) {
  const int64_t t = 1 + case_rnd(rng, 20), r = 1 + case_rnd(rng, 4), w = 6;
  const int32_t window = case_rnd(rng, 2) ? 128 : 1 + (int32_t)case_rnd(rng, 40),
                bs = case_rnd(rng, 2) ? 64 : 3;
  const int valid = (int)case_rnd(rng, 2);
  int64_t *pos = arr(c, &c->in[0], DSA_I64, t, -1, 1);
  int32_t *t2r = arr(c, &c->in[1], DSA_I32, t, -1, 1);
  uint8_t *v = arr(c, &c->in[2], DSA_U8, t, -1, 1);
  if (!pos || !t2r || !v || !table(c, &c->in[3], rng, r, w)) return -1;
  for (int64_t i = 0; i < t; i++)
    pos[i] = case_rnd(rng, w * bs), t2r[i] = (int32_t)case_rnd(rng, r), v[i] = case_rnd(rng, 5) != 0;
  c->in[2].present = valid;
  dsa_index_swa_params_default(&c->p.swa);
  c->p.swa.window = window, c->p.swa.block_size = bs;
  return outs(c, t, window + case_rnd(rng, 3));
}

static int gen_gtk(case_ih *c, uint64_t *rng) {
  const int64_t t = 1 + case_rnd(rng, 10), k = 1 + case_rnd(rng, 600), r = 1 + case_rnd(rng, 3),
                w = 5;
  const int32_t bs = case_rnd(rng, 2) ? 64 : 2;
  const int valid = (int)case_rnd(rng, 2);
  int32_t *tl = arr(c, &c->in[0], DSA_I32, t, k, k), *t2r = arr(c, &c->in[1], DSA_I32, t, -1, 1);
  uint8_t *v = arr(c, &c->in[3], DSA_U8, t, -1, 1);
  if (!tl || !t2r || !v || !table(c, &c->in[2], rng, r, w)) return -1;
  for (int64_t i = 0; i < t * k; i++)
    tl[i] = case_rnd(rng, 6) == 0 ? -1 : (int32_t)case_rnd(rng, w * bs);
  for (int64_t i = 0; i < t; i++) t2r[i] = (int32_t)case_rnd(rng, r), v[i] = case_rnd(rng, 5) != 0;
  c->in[3].present = valid;
  dsa_index_global_topk_params_default(&c->p.gtk);
  c->p.gtk.block_size = bs;
  return outs(c, t, k);
}

static int gen_c128(case_ih *c, uint64_t *rng) {
  const int64_t t = 1 + case_rnd(rng, 10), k = 1 + case_rnd(rng, 300), r = 1 + case_rnd(rng, 3);
  const int32_t ratio = case_rnd(rng, 2) ? 128 : 4, bs = case_rnd(rng, 2) ? 2 : 64;
  const int global = (int)case_rnd(rng, 2);
  const int64_t w = (k + bs - 1) / bs;
  int64_t *pos = arr(c, &c->in[0], DSA_I64, t, -1, 1);
  int32_t *t2r = arr(c, &c->in[1], DSA_I32, t, -1, 1);
  uint8_t *v = arr(c, &c->in[3], DSA_U8, t, -1, 1);
  if (!pos || !t2r || !v || !table(c, &c->in[2], rng, r, w)) return -1;
  for (int64_t i = 0; i < t; i++)
    pos[i] = case_rnd(rng, (k + 2) * ratio), t2r[i] = (int32_t)case_rnd(rng, r),
    v[i] = case_rnd(rng, 5) != 0;
  c->in[2].present = global;
  dsa_index_c128_topk_params_default(&c->p.c128);
  c->p.c128.compress_ratio = ratio, c->p.c128.block_size = bs;
  return outs(c, t, k);
}

static int gen_comb(case_ih *c, uint64_t *rng) {
  const int64_t r = 1 + case_rnd(rng, 4);
  const int32_t window = case_rnd(rng, 2) ? 128 : 8, ratio = case_rnd(rng, 2) ? 4 : 128,
                topk = (int32_t)(case_rnd(rng, 4) == 0 ? 0 : 1 + case_rnd(rng, 512));
  int32_t *qsl = arr(c, &c->in[1], DSA_I32, r + 1, -1, 1), *seq = arr(c, &c->in[2], DSA_I32, r, -1, 1),
          *gl = arr(c, &c->in[3], DSA_I32, r, -1, 1);
  if (!qsl || !seq || !gl) return -1;
  requests(rng, r, 2000, qsl, seq);
  const int32_t base = (int32_t)case_rnd(rng, 5); /* query_start_loc is rebased */
  for (int64_t i = 0; i < r; i++) {
    const int32_t ql = qsl[i + 1] - qsl[i], g = ql + window - 1;
    gl[i] = g > seq[i] ? seq[i] : g;
  }
  for (int64_t i = 0; i <= r; i++) qsl[i] += base;
  const int64_t t = qsl[r] - base, kt = topk ? topk : 1;
  int32_t *tk = arr(c, &c->in[0], DSA_I32, t, kt, kt);
  if (!tk) return -1;
  for (int64_t i = 0; i < t * kt; i++) tk[i] = (int32_t)case_rnd(rng, 3000);
  c->in[0].present = topk != 0;
  dsa_index_combine_topk_swa_params_default(&c->p.comb);
  c->p.comb.window = window, c->p.comb.compress_ratio = ratio, c->p.comb.topk = topk;
  c->p.comb.M = 4000, c->p.comb.N = 3000;
  return outs(c, t, topk + window + case_rnd(rng, 3));
}

static int gen_mixed(case_ih *c, uint64_t *rng) {
  const int64_t rd = case_rnd(rng, 4), rp = case_rnd(rng, 4), r = rd + rp, kd = case_rnd(rng, 3) * 100;
  const int32_t window = case_rnd(rng, 2) ? 128 : 8,
                topk = (int32_t)(case_rnd(rng, 4) == 0 ? 0 : 1 + case_rnd(rng, 512));
  const int local = (int)case_rnd(rng, 2);
  const int32_t sbs = case_rnd(rng, 2) ? 64 : 2, cbs = case_rnd(rng, 2) ? 64 : 2,
                ratio = case_rnd(rng, 2) ? 4 : 128;
  int32_t *qsl = arr(c, &c->in[5], DSA_I32, r + 1, -1, 1), *seq = arr(c, &c->in[6], DSA_I32, r, -1, 1);
  if (!qsl || !seq) return -1;
  int64_t maxseq = 1;
  for (int64_t i = 0; i < r; i++) {
    const int64_t ql = i < rd ? 1 : 1 + case_rnd(rng, 9);
    qsl[i + 1] = qsl[i] + (int32_t)ql;
    seq[i] = (int32_t)(ql + case_rnd(rng, 900));
    if (seq[i] > maxseq) maxseq = seq[i];
  }
  const int64_t td = rd, t = qsl[r], tp = t - td;
  int32_t *t2r = arr(c, &c->in[7], DSA_I32, t, -1, 1);
  if (!t2r) return -1;
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = qsl[i]; j < qsl[i + 1]; j++) t2r[j] = (int32_t)i;
  const int64_t ws = (maxseq + sbs - 1) / sbs, wc = (maxseq / ratio + cbs) / cbs;
  if (!table(c, &c->in[8], rng, r, ws) || !table(c, &c->in[9], rng, r, wc)) return -1;
  int32_t *dswa = arr(c, &c->in[0], DSA_I32, td, window, window);
  if (!dswa) return -1;
  case_fill_bytes(rng, dswa, (size_t)(td * window) * 4);
  const int64_t dk = kd ? kd : 1;
  int32_t *dci = arr(c, &c->in[1], DSA_I32, td, kd, dk), *dl = arr(c, &c->in[2], DSA_I32, td, -1, 1);
  uint8_t *dv = arr(c, &c->in[3], DSA_U8, td, -1, 1);
  if (!dci || !dl || !dv) return -1;
  for (int64_t i = 0; i < td * dk; i++)
    dci[i] = case_rnd(rng, 4) == 0 ? -1
             : local               ? (int32_t)case_rnd(rng, wc * cbs)
                                   : (int32_t)case_rnd(rng, 1 << 20);
  for (int64_t i = 0; i < td; i++)
    dl[i] = (int32_t)case_rnd(rng, dk + 1), dv[i] = case_rnd(rng, 4) != 0;
  const int64_t kp = topk ? topk - case_rnd(rng, 2) : 1 + case_rnd(rng, 3);
  int32_t *pti = arr(c, &c->in[4], DSA_I32, tp, kp, kp);
  if (!pti) return -1;
  for (int64_t i = 0; i < tp * kp; i++)
    pti[i] = case_rnd(rng, 8) == 0 ? -1 : (int32_t)case_rnd(rng, wc * cbs);
  const int64_t pw = ((kd > topk ? kd : topk) + 3) / 4 * 4;
  c->in[1].present = kd != 0;
  c->in[2].present = !local && case_rnd(rng, 2);
  c->in[9].present = case_rnd(rng, 3) != 0;
  dsa_index_mixed_sparse_params_default(&c->p.mixed);
  c->p.mixed.window = window, c->p.mixed.compress_ratio = ratio, c->p.mixed.topk = topk;
  c->p.mixed.swa_block_size = sbs, c->p.mixed.compressed_block_size = cbs;
  c->p.mixed.decode_compressed_local = local;
  return outs(c, t, window + pw);
}

int case_ih_gen_check(case_ih *c, uint64_t *rng) {
  static int (*const gen[CASE_IH_OPS])(case_ih *, uint64_t *) = {gen_slot, gen_swa,  gen_gtk,
                                                                  gen_c128, gen_comb, gen_mixed};
  return c->op < CASE_IH_OPS ? gen[c->op](c, rng) : -1;
}

/* ---- gen_bench ---------------------------------------------------------- */

#define B_R 64        /* decode requests, one token each */
#define B_CTX 32768   /* their context */
#define B_PR 4        /* prefill requests */
#define B_PT 2048     /* tokens each */

/* A block table [r, w] of distinct random blocks. */
static int32_t *btable(case_ih *c, case_ih_arr *a, uint64_t *seed, int64_t r, int64_t w) {
  int32_t *t = arr(c, a, DSA_I32, r, w, w);
  int64_t *perm = case_random_distinct(seed, r * w, r * w);
  if (!t || !perm) return free(perm), NULL;
  for (int64_t i = 0; i < r * w; i++) t[i] = (int32_t)perm[i];
  free(perm);
  return t;
}
static int32_t *iota(case_ih *c, case_ih_arr *a, int64_t n) { /* token i is request i */
  int32_t *v = arr(c, a, DSA_I32, n, -1, 1);
  for (int64_t i = 0; v && i < n; i++) v[i] = (int32_t)i;
  return v;
}
static int32_t *filled(case_ih *c, case_ih_arr *a, int64_t n, int32_t x) {
  int32_t *v = arr(c, a, DSA_I32, n, -1, 1);
  for (int64_t i = 0; v && i < n; i++) v[i] = x;
  return v;
}
static int64_t *last_pos(case_ih *c, case_ih_arr *a, int64_t n) {
  int64_t *v = arr(c, a, DSA_I64, n, -1, 1);
  for (int64_t i = 0; v && i < n; i++) v[i] = B_CTX - 1;
  return v;
}
static int32_t *rand_i32(case_ih *c, case_ih_arr *a, uint64_t *seed, int64_t d0, int64_t d1,
                         int64_t hi) {
  int32_t *v = arr(c, a, DSA_I32, d0, d1, d1);
  for (int64_t i = 0; v && i < d0 * (d1 < 0 ? 1 : d1); i++) v[i] = (int32_t)case_rnd(seed, hi);
  return v;
}

int case_ih_gen_bench(case_ih *c) {
  uint64_t seed = 0x1d5eedu + (uint64_t)c->op;
  const int64_t t = B_R;
  switch (c->op) {
  case CASE_IH_SLOT: {
    int32_t *qsl = iota(c, &c->in[0], B_R + 1);
    if (!qsl || !filled(c, &c->in[1], B_R, B_CTX) || !btable(c, &c->in[2], &seed, B_R, B_CTX / 4 / 64))
      return -1;
    dsa_index_compressed_slot_mapping_params_default(&c->p.slot);
    c->p.slot.compress_ratio = 4, c->p.slot.block_size = 64;
    c->out = (case_ih_arr){.present = 1, .dt = DSA_I64, .d0 = t, .d1 = -1, .rs = 1};
    return 0;
  }
  case CASE_IH_SWA:
    if (!last_pos(c, &c->in[0], t) || !iota(c, &c->in[1], t) ||
        !btable(c, &c->in[3], &seed, B_R, B_CTX / 64))
      return -1;
    dsa_index_swa_params_default(&c->p.swa);
    c->p.swa.window = 128, c->p.swa.block_size = 64;
    return outs(c, t, 128);
  case CASE_IH_GTK:
    if (!rand_i32(c, &c->in[0], &seed, t, 512, B_CTX / 4) || !iota(c, &c->in[1], t) ||
        !btable(c, &c->in[2], &seed, B_R, B_CTX / 4 / 64))
      return -1;
    dsa_index_global_topk_params_default(&c->p.gtk);
    c->p.gtk.block_size = 64;
    return outs(c, t, 512);
  case CASE_IH_C128: {
    uint8_t *v = arr(c, &c->in[3], DSA_U8, t, -1, 1);
    if (!v || !last_pos(c, &c->in[0], t) || !iota(c, &c->in[1], t) ||
        !btable(c, &c->in[2], &seed, B_R, B_CTX / 128 / 2))
      return -1;
    memset(v, 1, (size_t)t);
    dsa_index_c128_topk_params_default(&c->p.c128);
    c->p.c128.compress_ratio = 128, c->p.c128.block_size = 2;
    return outs(c, t, B_CTX / 128);
  }
  case CASE_IH_COMB: {
    const int64_t pt = B_PR * B_PT;
    int32_t *qsl = arr(c, &c->in[1], DSA_I32, B_PR + 1, -1, 1);
    if (!qsl || !rand_i32(c, &c->in[0], &seed, pt, 512, B_PT / 4) ||
        !filled(c, &c->in[2], B_PR, B_PT) || !filled(c, &c->in[3], B_PR, B_PT))
      return -1;
    for (int64_t i = 0; i <= B_PR; i++) qsl[i] = (int32_t)(i * B_PT);
    dsa_index_combine_topk_swa_params_default(&c->p.comb);
    c->p.comb.window = 128, c->p.comb.compress_ratio = 4, c->p.comb.topk = 512;
    c->p.comb.N = B_PT / 4, c->p.comb.M = B_PT / 4 + B_PT;
    return outs(c, pt, 512 + 128);
  }
  case CASE_IH_MIXED: {
    const int64_t r = B_R + B_PR, tp = B_PR * B_PT, tt = B_R + tp;
    const int64_t ws = B_CTX / 64, wc = (B_CTX / 4 + 64) / 64;
    int32_t *qsl = arr(c, &c->in[5], DSA_I32, r + 1, -1, 1), *seq = arr(c, &c->in[6], DSA_I32, r, -1, 1),
            *t2r = arr(c, &c->in[7], DSA_I32, tt, -1, 1);
    uint8_t *dv = arr(c, &c->in[3], DSA_U8, B_R, -1, 1);
    if (!qsl || !seq || !t2r || !dv) return -1;
    for (int64_t i = 0; i < r; i++) {
      const int64_t ql = i < B_R ? 1 : B_PT;
      qsl[i + 1] = qsl[i] + (int32_t)ql, seq[i] = i < B_R ? B_CTX : B_PT;
      for (int64_t j = qsl[i]; j < qsl[i + 1]; j++) t2r[j] = (int32_t)i;
    }
    memset(dv, 1, B_R);
    if (!rand_i32(c, &c->in[0], &seed, B_R, 128, B_R * ws * 64) ||
        !rand_i32(c, &c->in[1], &seed, B_R, 512, B_R * wc * 64) ||
        !filled(c, &c->in[2], B_R, 512) || !rand_i32(c, &c->in[4], &seed, tp, 512, B_PT / 4) ||
        !btable(c, &c->in[8], &seed, r, ws) || !btable(c, &c->in[9], &seed, r, wc))
      return -1;
    dsa_index_mixed_sparse_params_default(&c->p.mixed);
    c->p.mixed.window = 128, c->p.mixed.compress_ratio = 4, c->p.mixed.topk = 512;
    c->p.mixed.swa_block_size = 64, c->p.mixed.compressed_block_size = 64;
    c->p.mixed.decode_compressed_local = 0;
    return outs(c, tt, 128 + 512);
  }
  default:
    return -1;
  }
}

static int up(const case_dev *d, case_ih_arr *a, unsigned char fill) {
  if (!a->present) return 0;
  if (!(a->m = case_buf(d, arr_bytes(a), a->host, fill))) return 1;
  a->t = a->d1 < 0 ? dsa_tensor_make(a->m, 0, a->dt, 1, &a->d0)
                   : dsa_tensor_make(a->m, 0, a->dt, 2, (int64_t[]){a->d0, a->d1});
  if (a->d1 >= 0) a->t.stride[0] = a->rs;
  return 0;
}

int case_ih_upload(const case_dev *d, case_ih *c, unsigned char out_fill, char *msg, size_t msz) {
  int bad = 0;
  for (int i = 0; i < 10; i++) bad = bad || up(d, &c->in[i], 0);
  c->out.host = c->lens.host = NULL; /* outputs: filled */
  bad = bad || up(d, &c->out, out_fill) || up(d, &c->lens, out_fill);
  if (bad) snprintf(msg, msz, "%s: device buffers", case_ih_name(c->op));
  return bad;
}

const dsa_tensor *case_ih_in(const case_ih *c, int i) {
  return c->in[i].present ? &c->in[i].t : NULL;
}

dsa_status case_ih_call(dsa_queue *q, const case_ih *c, const dsa_events *ev) {
#define A(i) case_ih_in(c, i)
  const dsa_tensor *o = &c->out.t, *l = &c->lens.t;
  switch (c->op) {
  case CASE_IH_SLOT:
    return dsa_index_compressed_slot_mapping(q, A(0), A(1), A(2), o, &c->p.slot, ev);
  case CASE_IH_SWA:
    return dsa_index_swa(q, A(0), A(1), A(2), A(3), o, l, &c->p.swa, ev);
  case CASE_IH_GTK:
    return dsa_index_global_topk(q, A(0), A(1), A(2), A(3), o, l, &c->p.gtk, ev);
  case CASE_IH_C128:
    return dsa_index_c128_topk(q, A(0), A(1), A(2), A(3), o, l, &c->p.c128, ev);
  case CASE_IH_COMB:
    return dsa_index_combine_topk_swa(q, A(0), A(1), A(2), A(3), o, l, &c->p.comb, ev);
  case CASE_IH_MIXED: {
    const dsa_index_mixed_sparse_inputs in = {A(0), A(1), A(2), A(3), A(4),
                                              A(5), A(6), A(7), A(8), A(9)};
    return dsa_index_mixed_sparse(q, &in, o, l, &c->p.mixed, ev);
  }
  default:
    return DSA_ERR_INVALID_ARGUMENT;
  }
#undef A
}

int case_ih_check(const case_dev *d, const case_ih *c, const case_ih_want *want, char *msg,
                  size_t msz) {
  char what[160];
  snprintf(what, sizeof what, "%s out (T=%lld)", case_ih_name(c->op), (long long)c->out.d0);
  if (case_read_cmp(d, c->out.m, arr_bytes(&c->out), want->out, esz(c->out.dt), what, msg, msz))
    return 1;
  if (!c->lens.present) return 0;
  snprintf(what, sizeof what, "%s lens (T=%lld)", case_ih_name(c->op), (long long)c->lens.d0);
  return case_read_cmp(d, c->lens.m, arr_bytes(&c->lens), want->lens, 4, what, msg, msz);
}

void case_ih_free(case_ih *c) {
  for (int i = 0; i < c->nown; i++) free(c->own[i]);
  c->nown = 0;
  for (int i = 0; i < 10; i++) case_release(&c->in[i].m);
  case_release(&c->out.m), case_release(&c->lens.m);
}

static int ih_upload_v(const case_dev *d, void *c, unsigned char f, char *m, size_t n) {
  return case_ih_upload(d, c, f, m, n);
}
static dsa_status ih_call_v(dsa_queue *q, const void *c, const dsa_events *ev) {
  return case_ih_call(q, c, ev);
}
static int ih_check_v(const case_dev *d, const void *c, const void *w, char *m, size_t n) {
  return case_ih_check(d, c, w, m, n);
}
static void ih_free_v(void *c) { case_ih_free(c); }
#define IH_OPS(name) {name, ih_upload_v, ih_call_v, ih_check_v, ih_free_v}
const case_ops case_ih_ops[CASE_IH_OPS] = {
    IH_OPS("dsa_index_compressed_slot_mapping"), IH_OPS("dsa_index_swa"),
    IH_OPS("dsa_index_global_topk"),             IH_OPS("dsa_index_c128_topk"),
    IH_OPS("dsa_index_combine_topk_swa"),        IH_OPS("dsa_index_mixed_sparse")};
