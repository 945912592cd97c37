/* Golden runners for the DeepSeek-V4 KV compressor (docs/COMPRESSOR.md);
 * the cases come from tools/golden-gen/compressor.py (vLLM's Triton
 * kernels run on a GPU).
 *
 * compressor_save_states/<case>: meta compress_ratio; kv_score f32 [T, 2W]
 *   (kv = columns [0, W), score = [W, 2W), as vLLM splits its projection),
 *   ape f32 [ratio, W], positions i64 [T], slot_mapping i64 [T], state_in /
 *   state_out f32 [nb, bs, 2W]. Byte-exact.
 * compressor_compress_insert/<case>: meta compress_ratio, cache_format
 *   (mla | indexer_fp8 | indexer_mxfp4), block_size (cache), eps; state f32
 *   [nbs, bss, 2 SW], block_table i32 [R, W], token_to_req i32 [T],
 *   positions, slot_mapping, cache_slot_mapping i64 [T], norm_weight f32 or
 *   uint16 (bf16) [hd], cos_sin f32 [P, 64], cache_in / cache_out u8
 *   [nb, block_stride]. vLLM's softmax and rsqrt are approximate, so a token
 *   record may differ: every decoded value within one code (e4m3, e2m1) or
 *   one bf16 ulp of vLLM's, at most 2 % of the values differing at all, and
 *   every byte outside the written records identical. */
#include "golden.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int run_save_states(gcase *c) {
  npy_array *kvs = golden_load(c, "kv_score", NPY_F4, 2), *ape = golden_load(c, "ape", NPY_F4, 2),
            *pos = golden_load(c, "positions", NPY_I8, 1),
            *sl = golden_load(c, "slot_mapping", NPY_I8, 1),
            *sin_ = golden_load(c, "state_in", NPY_F4, 3),
            *sout = golden_load(c, "state_out", NPY_F4, 3);
  int64_t ratio;
  if (c->failed || golden_meta_i64(c, "compress_ratio", &ratio)) return -1;
  cl_mem km = golden_to_device(c, kvs->data, kvs->nbytes),
         am = golden_to_device(c, ape->data, ape->nbytes),
         pm = golden_to_device(c, pos->data, pos->nbytes),
         lm = golden_to_device(c, sl->data, sl->nbytes),
         sm = golden_to_device(c, sin_->data, sin_->nbytes);
  if (c->failed) return -1;
  const int64_t t = kvs->shape[0], w = kvs->shape[1] / 2;
  dsa_tensor kt = {.mem = km, .offset = 0, .dtype = DSA_F32, .ndim = 2, .shape = {t, w},
                   .stride = {2 * w, 1}};
  dsa_tensor st = {.mem = km, .offset = (size_t)w * 4, .dtype = DSA_F32, .ndim = 2,
                   .shape = {t, w}, .stride = {2 * w, 1}};
  dsa_tensor at = golden_tensor_of(am, ape, DSA_F32), pt = golden_tensor_of(pm, pos, DSA_I64),
             lt = golden_tensor_of(lm, sl, DSA_I64), stt = golden_tensor_of(sm, sin_, DSA_F32);
  dsa_compressor_params p;
  dsa_compressor_params_default(&p);
  p.compress_ratio = (int32_t)ratio;
  if (golden_op_status(c, "dsa_compressor_save_states",
                       dsa_compressor_save_states(c->q, &kt, &st, &at, &pt, &lt, &stt, &p, NULL)))
    return -1;
  return golden_no_faults(c) || golden_compare(c, "state_out", sm, sout) ? -1 : 0;
}

/* ---- tolerant record comparison ------------------------------------------- */

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
static int close(float g, float w, int mbits, float floor_step) {
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

static void cmp_record(int fmt, int32_t bs, const uint8_t *gb, const uint8_t *wb, int64_t slot_in,
                       tally *t) {
  const int64_t ti = slot_in;
  if (fmt == DSA_CACHE_MLA_FP8) {
    const uint8_t *gd = gb + ti * 576, *wd = wb + ti * 576;
    const uint8_t *gs = gb + (int64_t)bs * 576 + ti * 8, *ws = wb + (int64_t)bs * 576 + ti * 8;
    for (int d = 0; d < 448; d++) {
      const float sg = ldexpf(1.0f, gs[d / 64] - 127), sw = ldexpf(1.0f, ws[d / 64] - 127);
      const float g = e4m3_val(gd[d]) * sg, w = e4m3_val(wd[d]) * sw;
      t->values++;
      if (g != w) t->differ++, t->beyond += !close(g, w, 3, ldexpf(fmaxf(sg, sw), -9));
    }
    for (int i = 0; i < 64; i++) {
      const float g = bf16_val(gd + 448 + 2 * i), w = bf16_val(wd + 448 + 2 * i);
      t->values++;
      if (g != w) t->differ++, t->beyond += !close(g, w, 7, 0x1p-133f);
    }
    t->beyond += gs[7] != 0 || ws[7] != 0;
  } else if (fmt == DSA_CACHE_INDEXER_FP8) {
    float sg, sw;
    memcpy(&sg, gb + (int64_t)bs * 128 + ti * 4, 4);
    memcpy(&sw, wb + (int64_t)bs * 128 + ti * 4, 4);
    for (int d = 0; d < 128; d++) {
      const float g = e4m3_val(gb[ti * 128 + d]) * sg, w = e4m3_val(wb[ti * 128 + d]) * sw;
      t->values++;
      if (g != w) t->differ++, t->beyond += !close(g, w, 3, ldexpf(fmaxf(sg, sw), -9));
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

static int run_compress_insert(gcase *c) {
  npy_array *st = golden_load(c, "state", NPY_F4, 3),
            *bt = golden_load(c, "block_table", NPY_I4, 2),
            *req = golden_load(c, "token_to_req", NPY_I4, 1),
            *pos = golden_load(c, "positions", NPY_I8, 1),
            *sl = golden_load(c, "slot_mapping", NPY_I8, 1),
            *csl = golden_load(c, "cache_slot_mapping", NPY_I8, 1),
            *cs = golden_load(c, "cos_sin", NPY_F4, 2),
            *cin = golden_load(c, "cache_in", NPY_U1, 2),
            *cout = golden_load(c, "cache_out", NPY_U1, 2);
  const char *wdt = npy_meta_get(&c->meta, "tensor.norm_weight");
  const int wbf16 = wdt && !strncmp(wdt, "uint16", 6); /* bf16 weights */
  npy_array *w = golden_load(c, "norm_weight", wbf16 ? NPY_U2 : NPY_F4, 1);
  int64_t ratio, bs;
  double eps;
  const char *fmts = golden_meta_str(c, "cache_format");
  if (c->failed || golden_meta_i64(c, "compress_ratio", &ratio) ||
      golden_meta_i64(c, "block_size", &bs) || golden_meta_f64(c, "eps", &eps) || !fmts)
    return -1;
  const dsa_cache_format fmt = !strcmp(fmts, "mla")           ? DSA_CACHE_MLA_FP8
                               : !strcmp(fmts, "indexer_fp8") ? DSA_CACHE_INDEXER_FP8
                               : !strcmp(fmts, "indexer_mxfp4")
                                   ? DSA_CACHE_INDEXER_MXFP4
                                   : (dsa_cache_format)0;
  if (!fmt) return golden_fail(c, "cache_format=%s unknown", fmts);
  cl_mem sm = golden_to_device(c, st->data, st->nbytes),
         bm = golden_to_device(c, bt->data, bt->nbytes),
         rm = golden_to_device(c, req->data, req->nbytes),
         pm = golden_to_device(c, pos->data, pos->nbytes),
         lm = golden_to_device(c, sl->data, sl->nbytes),
         clm = golden_to_device(c, csl->data, csl->nbytes),
         wm = golden_to_device(c, w->data, w->nbytes),
         csm = golden_to_device(c, cs->data, cs->nbytes),
         cm = golden_to_device(c, cin->data, cin->nbytes);
  if (c->failed) return -1;
  dsa_tensor stt = golden_tensor_of(sm, st, DSA_F32), btt = golden_tensor_of(bm, bt, DSA_I32),
             rt = golden_tensor_of(rm, req, DSA_I32), pt = golden_tensor_of(pm, pos, DSA_I64),
             lt = golden_tensor_of(lm, sl, DSA_I64), clt = golden_tensor_of(clm, csl, DSA_I64),
             wt = golden_tensor_of(wm, w, wbf16 ? DSA_BF16 : DSA_F32),
             cst = golden_tensor_of(csm, cs, DSA_F32);
  dsa_paged_cache pc = {.mem = cm, .offset = 0, .num_blocks = cin->shape[0],
                        .block_size = (int32_t)bs, .block_stride = cin->shape[1], .format = fmt};
  dsa_compressor_params p;
  dsa_compressor_params_default(&p);
  p.compress_ratio = (int32_t)ratio;
  p.eps = (float)eps;
  if (golden_op_status(c, "dsa_compressor_compress_insert",
                       dsa_compressor_compress_insert(c->q, &stt, &btt, &rt, &pt, &lt, &wt, &cst,
                                                      &clt, &pc, &p, NULL)) ||
      golden_no_faults(c))
    return -1;
  uint8_t *got = malloc(cout->nbytes);
  if (!got) return golden_fail(c, "out of memory");
  cl_int e = clEnqueueReadBuffer(dsa_queue_cl(c->q), cm, CL_TRUE, 0, cout->nbytes, got, 0, NULL,
                                 NULL);
  if (e != CL_SUCCESS) {
    free(got);
    return golden_fail(c, "reading the cache: %d", (int)e);
  }
  /* Records vLLM wrote (cache_out differs from cache_in there) or dsacl
   * wrote: compared by value; every other byte exactly. */
  const int64_t stride = cin->shape[1], nb = cin->shape[0];
  const size_t tok = dsa_cache_token_bytes(fmt), dat = fmt == DSA_CACHE_MLA_FP8 ? 576
                                                       : fmt == DSA_CACHE_INDEXER_FP8 ? 128 : 64;
  const uint8_t *in = cin->data, *want = cout->data;
  uint8_t *mask = calloc((size_t)(nb * stride), 1);
  tally t = {0, 0, 0, 0};
  for (int64_t b = 0; b < nb && mask; b++)
    for (int64_t i = 0; i < bs; i++) {
      const size_t d0 = (size_t)(b * stride) + (size_t)i * dat,
                   s0 = (size_t)(b * stride) + (size_t)bs * dat + (size_t)i * (tok - dat);
      const int touched = memcmp(in + d0, want + d0, dat) || memcmp(in + s0, want + s0, tok - dat) ||
                          memcmp(got + d0, want + d0, dat) ||
                          memcmp(got + s0, want + s0, tok - dat);
      if (!touched) continue;
      memset(mask + d0, 1, dat), memset(mask + s0, 1, tok - dat);
      cmp_record(fmt, (int32_t)bs, got + b * stride, want + b * stride, i, &t);
    }
  size_t other = 0, first = 0;
  for (size_t k = 0; mask && k < cout->nbytes; k++)
    if (!mask[k] && got[k] != want[k] && !other++) first = k;
  free(mask), free(got);
  if (other) return golden_fail(c, "%zu bytes outside the records differ, first at %zu", other, first);
  if (t.beyond)
    return golden_fail(c, "%ld of %ld values beyond one code/ulp of vLLM's (%ld records)", t.beyond,
                       t.values, t.records);
  if (t.differ * 50 > t.values)
    return golden_fail(c, "%ld of %ld values differ from vLLM's (> 2 %%)", t.differ, t.values);
  return 0;
}

const golden_op golden_ops_compressor[] = {
    {"compressor_save_states", run_save_states},
    {"compressor_compress_insert", run_compress_insert},
    {NULL, NULL},
};
