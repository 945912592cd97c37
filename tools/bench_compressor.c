/* dsacl-bench rows for the DeepSeek-V4 KV compressor: state saving
 * (dsa_compressor_save_states) and the fused compress -> norm -> RoPE ->
 * quantize -> insert (dsa_compressor_compress_insert), at decode and prefill
 * shapes of the C4 (main and indexer heads) and C128 layers. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CB_CTX 4096  /* decode context length */
#define CB_POS 65536 /* cos_sin rows */

/* Page strides as vLLM pads them (multiples of 576). */
static int64_t cb_stride(int fmt, int32_t bs) {
  const int64_t page = (int64_t)bs * (fmt == 1 ? 584 : fmt == 2 ? 132 : 132);
  return (page + 575) / 576 * 576;
}
static int cb_hd(int fmt) { return fmt == 1 ? 512 : 128; }

typedef struct cb_state {
  cl_mem kvs, ape, pos, slots, state, bt, req, w, cs, cslots, cache;
  dsa_tensor tkv, tsc, tape, tpos, tslots, tstate, tbt, treq, tw, tcs, tcslots;
  dsa_paged_cache pc;
  dsa_compressor_params prm;
} cb_state;

/* p = {T, format (1 MLA, 2 indexer FP8, 3 indexer MXFP4), ratio, decode}.
 * Prefill: one request at positions 0..T-1. Decode: T requests, each at
 * position a window end near CB_CTX (every token closes a window). */
static int cb_setup(bench_env *e, const int64_t *p, void **out) {
  cb_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  const int64_t t = p[0], ratio = p[2];
  const int fmt = (int)p[1], decode = (int)p[3], hd = cb_hd(fmt);
  const int64_t coff = ratio == 4 ? 2 : 1, w = coff * hd, bs = ratio == 4 ? 4 : 8;
  const int64_t ctx = decode ? (e->quick ? 512 : CB_CTX) : t;
  const int64_t R = decode ? t : 1, W = (ctx + bs - 1) / bs;
  /* Decode keeps only the window's blocks (vLLM's sliding-window state). */
  const int64_t win_blocks = (coff * ratio + bs - 1) / bs + 1;
  const int64_t nbs = decode ? R * win_blocks + 1 : W + 1;
  uint64_t seed = 0xC0DE5EEDu;
  float *kvs = bench_random_f32(&seed, (size_t)(t * 2 * w), -3.0f, 3.0f);
  float *ape = bench_random_f32(&seed, (size_t)(ratio * w), -1.0f, 1.0f);
  float *stv = bench_random_f32(&seed, (size_t)(nbs * bs * 2 * w), -3.0f, 3.0f);
  float *wv = bench_random_f32(&seed, (size_t)hd, 0.5f, 1.5f);
  float *cs = malloc((size_t)CB_POS * 64 * sizeof *cs);
  int64_t *pos = malloc((size_t)t * 8), *slots = malloc((size_t)t * 8),
          *cslots = malloc((size_t)t * 8);
  int32_t *bt = calloc((size_t)(R * W), 4), *req = malloc((size_t)t * 4);
  if (!kvs || !ape || !stv || !wv || !cs || !pos || !slots || !cslots || !bt || !req) return -1;
  for (int64_t r = 0; r < CB_POS; r++)
    for (int i = 0; i < 32; i++) {
      const double a = (double)r * pow(10000.0, -2.0 * i / 64);
      cs[r * 64 + i] = (float)cos(a), cs[r * 64 + 32 + i] = (float)sin(a);
    }
  int64_t next_blk = 1, nc = 0;
  for (int64_t i = 0; i < t; i++) {
    const int64_t r = decode ? i : 0;
    const int64_t pp = decode ? (ctx / ratio) * ratio - 1 - ratio * (i % 3) : i;
    pos[i] = pp, req[i] = (int32_t)r;
    if (decode && i == r) /* the window's logical blocks of request r */
      for (int64_t j = (pp - coff * ratio + 1 < 0 ? 0 : (pp - coff * ratio + 1)) / bs; j <= pp / bs;
           j++)
        if (!bt[r * W + j]) bt[r * W + j] = (int32_t)(next_blk++ % nbs);
    if (!decode) bt[pp / bs] = (int32_t)(pp / bs + 1);
    slots[i] = (int64_t)bt[r * W + pp / bs] * bs + pp % bs;
    cslots[i] = (pp + 1) % ratio == 0 ? nc++ : -1;
  }
  const int32_t cbs = fmt == 1 && ratio == 128 ? 2 : 64;
  const int64_t cnb = (nc + cbs - 1) / cbs + 1, cstride = cb_stride(fmt, cbs);
  s->pc = (dsa_paged_cache){.mem = NULL, .offset = 0, .num_blocks = cnb, .block_size = cbs,
                            .block_stride = cstride, .format = (dsa_cache_format)fmt};
  s->kvs = bench_make_buf(e, (size_t)(t * 2 * w) * 4, kvs);
  s->ape = bench_make_buf(e, (size_t)(ratio * w) * 4, ape);
  s->state = bench_make_buf(e, (size_t)(nbs * bs * 2 * w) * 4, stv);
  s->w = bench_make_buf(e, (size_t)hd * 4, wv);
  s->cs = bench_make_buf(e, (size_t)CB_POS * 64 * 4, cs);
  s->pos = bench_make_buf(e, (size_t)t * 8, pos);
  s->slots = bench_make_buf(e, (size_t)t * 8, slots);
  s->cslots = bench_make_buf(e, (size_t)t * 8, cslots);
  s->bt = bench_make_buf(e, (size_t)(R * W) * 4, bt);
  s->req = bench_make_buf(e, (size_t)t * 4, req);
  s->pc.mem = bench_make_filled(e, (size_t)(cnb * cstride), 0);
  free(kvs), free(ape), free(stv), free(wv), free(cs), free(pos), free(slots), free(cslots);
  free(bt), free(req);
  if (!s->kvs || !s->ape || !s->state || !s->w || !s->cs || !s->pos || !s->slots ||
      !s->cslots || !s->bt || !s->req || !s->pc.mem)
    return -1;
  s->tkv = (dsa_tensor){.mem = s->kvs, .offset = 0, .dtype = DSA_F32, .ndim = 2, .shape = {t, w},
                        .stride = {2 * w, 1}};
  s->tsc = (dsa_tensor){.mem = s->kvs, .offset = (size_t)w * 4, .dtype = DSA_F32, .ndim = 2,
                        .shape = {t, w}, .stride = {2 * w, 1}};
  s->tape = dsa_tensor_make(s->ape, 0, DSA_F32, 2, (int64_t[]){ratio, w});
  s->tpos = dsa_tensor_make(s->pos, 0, DSA_I64, 1, &t);
  s->tslots = dsa_tensor_make(s->slots, 0, DSA_I64, 1, &t);
  s->tcslots = dsa_tensor_make(s->cslots, 0, DSA_I64, 1, &t);
  s->treq = dsa_tensor_make(s->req, 0, DSA_I32, 1, &t);
  s->tstate = dsa_tensor_make(s->state, 0, DSA_F32, 3, (int64_t[]){nbs, bs, 2 * w});
  s->tbt = dsa_tensor_make(s->bt, 0, DSA_I32, 2, (int64_t[]){R, W});
  s->tw = dsa_tensor_make(s->w, 0, DSA_F32, 1, (int64_t[]){hd});
  s->tcs = dsa_tensor_make(s->cs, 0, DSA_F32, 2, (int64_t[]){CB_POS, 64});
  dsa_compressor_params_default(&s->prm);
  s->prm.compress_ratio = (int32_t)ratio;
  return 0;
}

static int cb_run_save(bench_env *e, void *st, cl_event *done) {
  cb_state *s = st;
  dsa_events ev = {0, NULL, done};
  DSA_TRY(dsa_compressor_save_states(e->q, &s->tkv, &s->tsc, &s->tape, &s->tpos, &s->tslots,
                                     &s->tstate, &s->prm, &ev));
  return 0;
}

static int cb_run_compress(bench_env *e, void *st, cl_event *done) {
  cb_state *s = st;
  dsa_events ev = {0, NULL, done};
  DSA_TRY(dsa_compressor_compress_insert(e->q, &s->tstate, &s->tbt, &s->treq, &s->tpos,
                                         &s->tslots, &s->tw, &s->tcs, &s->tcslots, &s->pc,
                                         &s->prm, &ev));
  return 0;
}

static void cb_teardown(void *st) {
  cb_state *s = st;
  if (!s) return;
  cl_mem *m[] = {&s->kvs, &s->ape, &s->pos, &s->slots, &s->state, &s->bt, &s->req,
                 &s->w,   &s->cs,  &s->cslots, &s->pc.mem};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) bench_free_buf(m[i]);
  free(s);
}

/* Save: kv + score read, the state rows written (+ ape, metadata). */
static double cb_save_bytes(const int64_t *p) {
  const double w = (p[2] == 4 ? 2.0 : 1.0) * cb_hd((int)p[1]);
  return (double)p[0] * (4 * w * 4 + 16);
}
/* Compress: per window, its rows' kv and score read, one record written. */
static double cb_comp_bytes(const int64_t *p) {
  const int hd = cb_hd((int)p[1]);
  const double n = (p[2] == 4 ? 8.0 : 128.0), windows = p[3] ? (double)p[0] : (double)p[0] / p[2];
  const double rec = p[1] == 1 ? 584 : p[1] == 2 ? 132 : 68;
  return windows * (n * hd * 2 * 4 + rec) + (double)p[0] * 28;
}

#define CB_SAVE(t, f, r, d, qt) \
  {"compressor_save", "T=%lld fmt=%lld ratio=%lld decode=%lld", {t, f, r, d}, {qt, f, r, d}, \
   cb_setup, cb_run_save, cb_teardown, cb_save_bytes, bench_no_flops}
#define CB_COMP(t, f, r, d, qt) \
  {"compressor_compress", "T=%lld fmt=%lld ratio=%lld decode=%lld", {t, f, r, d}, {qt, f, r, d}, \
   cb_setup, cb_run_compress, cb_teardown, cb_comp_bytes, bench_no_flops}

const bench_op bench_ops_compressor[] = {
    CB_SAVE(64, 1, 4, 1, 8),      CB_SAVE(8192, 1, 4, 0, 256),  CB_SAVE(8192, 1, 128, 0, 256),
    CB_SAVE(8192, 2, 4, 0, 256),  CB_COMP(64, 1, 4, 1, 8),      CB_COMP(64, 1, 128, 1, 8),
    CB_COMP(8192, 1, 4, 0, 256),  CB_COMP(8192, 1, 128, 0, 256), CB_COMP(64, 2, 4, 1, 8),
    CB_COMP(8192, 2, 4, 0, 256),  CB_COMP(8192, 3, 4, 0, 256),  {0},
};
