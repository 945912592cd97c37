/* The KV compressor's case description (cases.h): one struct, the save
 * and the compress forms over it. */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

static int64_t tok_bytes(int fmt) { return fmt == 1 ? 584 : fmt == 2 ? 132 : 68; }
static size_t state_bytes(const case_cp *c) { return (size_t)(c->nbs * c->bss * 2 * c->sw) * 4; }

/* The geometry both generators share: hd, sw, bss from fmt and ratio. */
static void geometry(case_cp *c) {
  c->hd = c->fmt == 1 ? 512 : 128;
  c->sw = (c->ratio == 4 ? 2 : 1) * c->hd;
  c->bss = c->ratio == 4 ? 4 : 8;
  c->cbs = c->fmt == 1 && c->ratio == 128 ? 2 : 64;
}

static int cp_alloc(case_cp *c) {
  const int64_t t = c->t;
  c->owned = 1;
  c->kvs = case_alloc((size_t)(t * 2 * c->sw) * 4);
  c->ape = case_alloc((size_t)(c->ratio * c->sw) * 4);
  c->st = case_alloc(state_bytes(c));
  c->nw = case_alloc((size_t)c->hd * 4);
  c->cs = case_alloc((size_t)(c->np * 64) * 4);
  c->pos = case_alloc((size_t)t * 8), c->sl = case_alloc((size_t)t * 8);
  c->csl = case_alloc((size_t)t * 8);
  c->bt = case_alloc((size_t)(c->r * c->w) * 4), c->req = case_alloc((size_t)t * 4);
  if (!c->kvs || !c->ape || !c->st || !c->nw || !c->cs || !c->pos || !c->sl || !c->csl ||
      !c->bt || !c->req)
    return -1;
  for (int64_t p = 0; p < c->np; p++)
    for (int i = 0; i < 32; i++) {
      const double th = (double)p * pow(10000.0, -i / 32.0);
      c->cs[p * 64 + i] = (float)cos(th), c->cs[p * 64 + 32 + i] = (float)sin(th);
    }
  return 0;
}

static void uniform_f32(uint64_t *rng, float *v, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; i++) v[i] = (float)case_uniform(rng, lo, hi);
}

int case_cp_save_gen_check(case_cp *c, uint64_t *rng) {
  geometry(c);
  const int64_t t = c->t, ratio = c->ratio;
  c->nbs = (t + c->bss - 1) / c->bss + 1, c->r = 1, c->w = c->nbs;
  c->np = c->bad ? t / 2 + 1 : t + 1;
  c->cnb = t / ratio / c->cbs + 1, c->cstride = c->cbs * tok_bytes(c->fmt);
  if (cp_alloc(c) || !(c->cache = case_alloc((size_t)(c->cnb * c->cstride)))) return -1;
  uniform_f32(rng, c->kvs, t * 2 * c->sw, -3, 3);
  uniform_f32(rng, c->ape, ratio * c->sw, -1, 1);
  uniform_f32(rng, c->st, c->nbs * c->bss * 2 * c->sw, -4, 4);
  float *nw = c->nw;
  for (int64_t d = 0; d < c->hd; d++) {
    const float v = (float)case_uniform(rng, -1.5, 1.5);
    if (c->w_bf16) ((uint16_t *)nw)[d] = case_bf16(v);
    else nw[d] = v;
  }
  for (int64_t j = 0; j < c->nbs - 1; j++) c->bt[j] = (int32_t)(c->nbs - 1 - j);
  for (int64_t i = 0; i < t; i++) {
    c->pos[i] = i;
    c->sl[i] = case_rnd(rng, 16) == 0 ? -1 : (int64_t)c->bt[i / c->bss] * c->bss + i % c->bss;
    c->csl[i] = (i + 1) % ratio == 0 ? i / ratio : -1;
    if (c->bad && case_rnd(rng, 8) == 0) c->csl[i] = c->cnb * c->cbs + case_rnd(rng, 3);
    c->req[i] = 0;
  }
  case_fill_bytes(rng, c->cache, (size_t)(c->cnb * c->cstride));
  return 0;
}
int case_cp_comp_gen_check(case_cp *c, uint64_t *rng) { return case_cp_save_gen_check(c, rng); }

/* Page strides as vLLM pads them (multiples of 576). */
static int64_t padded_stride(int fmt, int32_t bs) {
  const int64_t page = (int64_t)bs * (fmt == 1 ? 584 : 132);
  return (page + 575) / 576 * 576;
}

int case_cp_save_gen_bench(case_cp *c) {
  geometry(c);
  const int64_t t = c->t, ratio = c->ratio, bs = c->bss, coff = ratio == 4 ? 2 : 1;
  const int decode = c->decode;
  const int64_t ctx = decode ? c->ctx : t;
  c->r = decode ? t : 1, c->w = (ctx + bs - 1) / bs;
  /* Decode keeps only the window's blocks (vLLM's sliding-window state). */
  const int64_t win_blocks = (coff * ratio + bs - 1) / bs + 1;
  c->nbs = decode ? c->r * win_blocks + 1 : c->w + 1;
  c->np = CASE_CP_POS;
  if (cp_alloc(c)) return -1;
  uint64_t seed = 0xC0DE5EEDu; /* the rows' data since they were written */
  uniform_f32(&seed, c->kvs, t * 2 * c->sw, -3, 3);
  uniform_f32(&seed, c->ape, ratio * c->sw, -1, 1);
  uniform_f32(&seed, c->st, c->nbs * bs * 2 * c->sw, -3, 3);
  uniform_f32(&seed, c->nw, c->hd, 0.5, 1.5);
  const int64_t W = c->w;
  int32_t *bt = c->bt;
  int64_t next_blk = 1, nc = 0;
  for (int64_t i = 0; i < t; i++) {
    const int64_t r = decode ? i : 0;
    const int64_t pp = decode ? (ctx / ratio) * ratio - 1 - ratio * (i % 3) : i;
    c->pos[i] = pp, c->req[i] = (int32_t)r;
    if (decode && i == r) /* the window's logical blocks of request r */
      for (int64_t j = (pp - coff * ratio + 1 < 0 ? 0 : (pp - coff * ratio + 1)) / bs; j <= pp / bs;
           j++)
        if (!bt[r * W + j]) bt[r * W + j] = (int32_t)(next_blk++ % c->nbs);
    if (!decode) bt[pp / bs] = (int32_t)(pp / bs + 1);
    c->sl[i] = (int64_t)bt[r * W + pp / bs] * bs + pp % bs;
    c->csl[i] = (pp + 1) % ratio == 0 ? nc++ : -1;
  }
  c->cnb = (nc + c->cbs - 1) / c->cbs + 1, c->cstride = padded_stride(c->fmt, c->cbs);
  c->cache = NULL, c->cache_fill = 0;
  return 0;
}
int case_cp_comp_gen_bench(case_cp *c) { return case_cp_save_gen_bench(c); }

dsa_compressor_params case_cp_params(const case_cp *c) {
  dsa_compressor_params p;
  dsa_compressor_params_default(&p);
  p.compress_ratio = c->ratio;
  if (c->eps != 0) p.eps = c->eps;
  return p;
}

/* A device copy of the host array p (n bytes) when p is not NULL. */
static int up(const case_dev *d, cl_mem *m, const void *p, size_t n) {
  if (!p) return 0;
  return !(*m = case_buf(d, n, p, 0));
}

int case_cp_save_upload(const case_dev *d, case_cp *c, unsigned char out_fill, char *msg,
                        size_t msz) {
  (void)out_fill; /* both operators write in place */
  const int64_t t = c->t, sw = c->sw;
  const size_t cb = (size_t)(c->cnb * c->cstride);
  int bad = up(d, &c->mkvs, c->kvs, (size_t)(t * 2 * sw) * 4) ||
            up(d, &c->mape, c->ape, (size_t)(c->ratio * sw) * 4) ||
            up(d, &c->mst, c->st, state_bytes(c)) || up(d, &c->mpos, c->pos, (size_t)t * 8) ||
            up(d, &c->msl, c->sl, (size_t)t * 8) ||
            up(d, &c->mbt, c->bt, (size_t)(c->r * c->w) * 4) ||
            up(d, &c->mreq, c->req, (size_t)t * 4) ||
            up(d, &c->mw, c->nw, (size_t)c->hd * (c->w_bf16 ? 2 : 4)) ||
            up(d, &c->mcs, c->cs, (size_t)(c->np * 64) * 4) ||
            up(d, &c->mcsl, c->csl, (size_t)t * 8);
  if (!bad && c->bt) /* a compress case: the cache too */
    bad = !(c->mc = case_buf(d, cb, c->cache, c->cache_fill));
  if (bad) {
    snprintf(msg, msz, "compressor: device buffers for t=%lld", (long long)t);
    return 1;
  }
  if (c->mkvs) {
    c->tkv = (dsa_tensor){.mem = c->mkvs, .offset = 0, .dtype = DSA_F32, .ndim = 2,
                          .shape = {t, sw}, .stride = {2 * sw, 1}};
    c->tsc = (dsa_tensor){.mem = c->mkvs, .offset = (size_t)sw * 4, .dtype = DSA_F32, .ndim = 2,
                          .shape = {t, sw}, .stride = {2 * sw, 1}};
  }
  if (c->mape) c->tape = dsa_tensor_make(c->mape, 0, DSA_F32, 2, (int64_t[]){c->ratio, sw});
  c->tst = dsa_tensor_make(c->mst, 0, DSA_F32, 3, (int64_t[]){c->nbs, c->bss, 2 * sw});
  c->tpos = dsa_tensor_make(c->mpos, 0, DSA_I64, 1, &c->t);
  c->tsl = dsa_tensor_make(c->msl, 0, DSA_I64, 1, &c->t);
  if (c->mbt) {
    c->tbt = dsa_tensor_make(c->mbt, 0, DSA_I32, 2, (int64_t[]){c->r, c->w});
    c->treq = dsa_tensor_make(c->mreq, 0, DSA_I32, 1, &c->t);
    c->tw = dsa_tensor_make(c->mw, 0, c->w_bf16 ? DSA_BF16 : DSA_F32, 1, &c->hd);
    c->tcs = dsa_tensor_make(c->mcs, 0, DSA_F32, 2, (int64_t[]){c->np, 64});
    c->tcsl = dsa_tensor_make(c->mcsl, 0, DSA_I64, 1, &c->t);
    c->pc = (dsa_paged_cache){.mem = c->mc, .offset = 0, .num_blocks = c->cnb,
                              .block_size = c->cbs, .block_stride = c->cstride,
                              .format = (dsa_cache_format)c->fmt};
  }
  return 0;
}
int case_cp_comp_upload(const case_dev *d, case_cp *c, unsigned char out_fill, char *msg,
                        size_t msz) {
  return case_cp_save_upload(d, c, out_fill, msg, msz);
}

dsa_status case_cp_save_call(dsa_queue *q, const case_cp *c, const dsa_events *ev) {
  const dsa_compressor_params p = case_cp_params(c);
  return dsa_compressor_save_states(q, &c->tkv, &c->tsc, &c->tape, &c->tpos, &c->tsl, &c->tst, &p,
                                    ev);
}
dsa_status case_cp_comp_call(dsa_queue *q, const case_cp *c, const dsa_events *ev) {
  const dsa_compressor_params p = case_cp_params(c);
  return dsa_compressor_compress_insert(q, &c->tst, &c->tbt, &c->treq, &c->tpos, &c->tsl, &c->tw,
                                        &c->tcs, &c->tcsl, &c->pc, &p, ev);
}

int case_cp_save_check(const case_dev *d, const case_cp *c, const uint8_t *want, char *msg,
                       size_t msz) {
  char what[128];
  snprintf(what, sizeof what, "state (ratio=%d T=%lld, [%lld, %lld, %lld])", c->ratio,
           (long long)c->t, (long long)c->nbs, (long long)c->bss, (long long)(2 * c->sw));
  return case_read_cmp(d, c->mst, state_bytes(c), want, 4, what, msg, msz);
}

/* ---- the tolerant record rule (a golden against vLLM) -------------------- */

static float e4m3_val(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  const float v = e ? ldexpf(1.0f + m / 8.0f, e - 7) : ldexpf((float)m, -9);
  return s ? -v : v;
}
static float e2m1_val(uint8_t n) {
  static const float mag[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  return (n & 8) ? -mag[n & 7] : mag[n & 7];
}
static float bf16_val(const uint8_t *p) {
  uint32_t u = (uint32_t)(p[0] | p[1] << 8) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* |g - w| within one step of a format with `mbits` mantissa bits at the
 * larger magnitude, or within `floor_step` (the subnormal / zero step). */
static int close_to(float g, float w, int mbits, float floor_step) {
  if (g == w) return 1;
  if (!isfinite(g) || !isfinite(w)) return 0;
  const float m = fmaxf(fabsf(g), fabsf(w));
  int ex;
  frexpf(m, &ex);
  const float step = fmaxf(ldexpf(1.0f, ex - 1 - mbits), floor_step);
  return fabsf(g - w) <= step * 1.0001f;
}

typedef struct tally {
  long values, differ, beyond, records;
} tally;

static void cmp_record(int fmt, int32_t bs, const uint8_t *gb, const uint8_t *wb, int64_t ti,
                       tally *t) {
  if (fmt == DSA_CACHE_MLA_FP8) {
    const uint8_t *gd = gb + ti * 576, *wd = wb + ti * 576;
    const uint8_t *gs = gb + (int64_t)bs * 576 + ti * 8, *ws = wb + (int64_t)bs * 576 + ti * 8;
    for (int d = 0; d < 448; d++) {
      const float sg = ldexpf(1.0f, gs[d / 64] - 127), sw = ldexpf(1.0f, ws[d / 64] - 127);
      const float g = e4m3_val(gd[d]) * sg, w = e4m3_val(wd[d]) * sw;
      t->values++;
      if (g != w) t->differ++, t->beyond += !close_to(g, w, 3, ldexpf(fmaxf(sg, sw), -9));
    }
    for (int i = 0; i < 64; i++) {
      const float g = bf16_val(gd + 448 + 2 * i), w = bf16_val(wd + 448 + 2 * i);
      t->values++;
      if (g != w) t->differ++, t->beyond += !close_to(g, w, 7, 0x1p-133f);
    }
    t->beyond += gs[7] != 0 || ws[7] != 0;
  } else if (fmt == DSA_CACHE_INDEXER_FP8) {
    float sg, sw;
    memcpy(&sg, gb + (int64_t)bs * 128 + ti * 4, 4);
    memcpy(&sw, wb + (int64_t)bs * 128 + ti * 4, 4);
    for (int d = 0; d < 128; d++) {
      const float g = e4m3_val(gb[ti * 128 + d]) * sg, w = e4m3_val(wb[ti * 128 + d]) * sw;
      t->values++;
      if (g != w) t->differ++, t->beyond += !close_to(g, w, 3, ldexpf(fmaxf(sg, sw), -9));
    }
  } else {
    for (int d = 0; d < 128; d++) {
      const uint8_t gsb = gb[(int64_t)bs * 64 + ti * 4 + d / 32],
                    wsb = wb[(int64_t)bs * 64 + ti * 4 + d / 32];
      const float sg = ldexpf(1.0f, gsb - 127), sw = ldexpf(1.0f, wsb - 127);
      const uint8_t gbyte = gb[ti * 64 + d / 2], wbyte = wb[ti * 64 + d / 2];
      const float g = e2m1_val((d & 1) ? gbyte >> 4 : gbyte & 15) * sg,
                  w = e2m1_val((d & 1) ? wbyte >> 4 : wbyte & 15) * sw;
      t->values++;
      /* E2M1: one code step is at most a quarter of the larger value
       * (6 -> 4 is a third), or half the scale near zero. */
      if (g != w) {
        const float m = fmaxf(fabsf(g), fabsf(w));
        t->differ++;
        t->beyond += fabsf(g - w) > fmaxf(m / 3.0f, 0.5f * fmaxf(sg, sw)) * 1.0001f;
      }
    }
  }
  t->records++;
}

/* Records vLLM wrote (want differs from the starting image there) or this
 * library wrote: compared by value; every other byte exactly. */
static int cmp_tolerant(const case_cp *c, const uint8_t *got, const uint8_t *want, char *msg,
                        size_t msz) {
  const int64_t stride = c->cstride, nb = c->cnb, bs = c->cbs;
  const size_t n = (size_t)(nb * stride), tok = (size_t)tok_bytes(c->fmt),
               dat = c->fmt == DSA_CACHE_MLA_FP8 ? 576 : c->fmt == DSA_CACHE_INDEXER_FP8 ? 128 : 64;
  uint8_t *in = c->cache, *mask = case_alloc(n);
  if (!in && (in = case_alloc(n))) memset(in, c->cache_fill, n);
  if (!in || !mask) {
    if (in != c->cache) free(in);
    free(mask);
    return snprintf(msg, msz, "compressor: out of memory"), 1;
  }
  tally t = {0, 0, 0, 0};
  for (int64_t b = 0; b < nb; b++)
    for (int64_t i = 0; i < bs; i++) {
      const size_t d0 = (size_t)(b * stride) + (size_t)i * dat,
                   s0 = (size_t)(b * stride) + (size_t)bs * dat + (size_t)i * (tok - dat);
      const int touched = memcmp(in + d0, want + d0, dat) || memcmp(in + s0, want + s0, tok - dat) ||
                          memcmp(got + d0, want + d0, dat) ||
                          memcmp(got + s0, want + s0, tok - dat);
      if (!touched) continue;
      memset(mask + d0, 1, dat), memset(mask + s0, 1, tok - dat);
      cmp_record(c->fmt, (int32_t)bs, got + b * stride, want + b * stride, i, &t);
    }
  size_t other = 0, first = 0;
  for (size_t k = 0; k < n; k++)
    if (!mask[k] && got[k] != want[k] && !other++) first = k;
  if (in != c->cache) free(in);
  free(mask);
  if (other)
    return snprintf(msg, msz, "%zu bytes outside the records differ, first at %zu", other, first),
           1;
  if (t.beyond)
    return snprintf(msg, msz, "%ld of %ld values beyond one code/ulp of vLLM's (%ld records)",
                    t.beyond, t.values, t.records),
           1;
  if (t.differ * 50 > t.values)
    return snprintf(msg, msz, "%ld of %ld values differ from vLLM's (> 2 %%)", t.differ, t.values),
           1;
  return 0;
}

int case_cp_comp_check(const case_dev *d, const case_cp *c, const case_cp_want *want, char *msg,
                       size_t msz) {
  const size_t n = (size_t)(c->cnb * c->cstride);
  char what[128];
  snprintf(what, sizeof what, "cache (fmt=%d ratio=%d T=%lld)", c->fmt, c->ratio,
           (long long)c->t);
  if (!want->tol) return case_read_cmp(d, c->mc, n, want->cache, 1, what, msg, msz);
  uint8_t *got = case_alloc(n);
  if (!got) return snprintf(msg, msz, "%s: out of memory", what), 1;
  const int rc = case_read(d, c->mc, n, got, msg, msz) || cmp_tolerant(c, got, want->cache, msg, msz);
  free(got);
  return rc;
}

void case_cp_save_free(case_cp *c) {
  if (c->owned) {
    free(c->kvs), free(c->ape), free(c->st), free(c->nw), free(c->cs), free(c->pos);
    free(c->sl), free(c->csl), free(c->bt), free(c->req), free(c->cache);
  }
  cl_mem *m[] = {&c->mkvs, &c->mape, &c->mst, &c->mpos, &c->msl, &c->mbt,
                 &c->mreq, &c->mw,   &c->mcs, &c->mcsl, &c->mc};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) case_release(m[i]);
}
void case_cp_comp_free(case_cp *c) { case_cp_save_free(c); }

/* Save: kv + score read, the state rows written (+ ape, metadata). p = {t,
 * fmt, ratio, decode}. */
double case_cp_save_bytes(const int64_t *p) {
  const double w = (p[2] == 4 ? 2.0 : 1.0) * (p[1] == 1 ? 512 : 128);
  return (double)p[0] * (4 * w * 4 + 16);
}
/* Compress: per window, its rows' kv and score read, one record written. */
double case_cp_comp_bytes(const int64_t *p) {
  const int hd = p[1] == 1 ? 512 : 128;
  const double n = (p[2] == 4 ? 8.0 : 128.0), windows = p[3] ? (double)p[0] : (double)p[0] / p[2];
  const double rec = p[1] == 1 ? 584 : p[1] == 2 ? 132 : 68;
  return windows * (n * hd * 2 * 4 + rec) + (double)p[0] * 28;
}
double case_cp_save_flops(const int64_t *p) {
  (void)p;
  return 0; /* memory-bound */
}
double case_cp_comp_flops(const int64_t *p) {
  (void)p;
  return 0; /* memory-bound */
}

CASE_OPS(cp_save, uint8_t, "dsa_compressor_save_states")
CASE_OPS(cp_comp, case_cp_want, "dsa_compressor_compress_insert")
