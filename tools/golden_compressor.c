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
 *   every byte outside the written records identical. The cases and their
 *   rules are the shared description's (tools/cases/compressor.c). */
#include "golden.h"

#include <string.h>

static int run_save_states(gcase *c) {
  npy_array *kvs = golden_load(c, "kv_score", NPY_F4, 2), *ape = golden_load(c, "ape", NPY_F4, 2),
            *pos = golden_load(c, "positions", NPY_I8, 1),
            *sl = golden_load(c, "slot_mapping", NPY_I8, 1),
            *sin_ = golden_load(c, "state_in", NPY_F4, 3),
            *sout = golden_load(c, "state_out", NPY_F4, 3);
  int64_t ratio;
  if (c->failed || golden_meta_i64(c, "compress_ratio", &ratio)) return -1;
  const int64_t t = kvs->shape[0], w = kvs->shape[1] / 2;
  if (golden_shapes_agree(c, kvs->shape[1] == 2 * w && ape->shape[0] == ratio &&
                                 ape->shape[1] == w && pos->shape[0] == t && sl->shape[0] == t &&
                                 sin_->shape[2] == 2 * w && sout->nbytes == sin_->nbytes,
                          "kv_score [T, 2W], ape [ratio, W], positions and slot_mapping [T], "
                          "state_in [nb, bs, 2W], state_out as state_in"))
    return -1;
  case_cp cc = {.ratio = (int)ratio, .t = t, .sw = w, .nbs = sin_->shape[0],
                .bss = sin_->shape[1], .kvs = kvs->data, .ape = ape->data, .st = sin_->data,
                .pos = pos->data, .sl = sl->data};
  return golden_run_case(c, &case_cp_save_ops, &cc, 0, sout->data);
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
  const int64_t t = pos->shape[0];
  if (golden_shapes_agree(c, req->shape[0] == t && sl->shape[0] == t && csl->shape[0] == t &&
                                 st->shape[2] % 2 == 0 && cs->shape[1] == 64 &&
                                 cout->nbytes == cin->nbytes,
                          "token_to_req, positions, slot_mapping and cache_slot_mapping [T], "
                          "state [nb, bs, 2 SW], cos_sin [P, 64], cache_out as cache_in"))
    return -1;
  case_cp cc = {.fmt = (int)fmt, .ratio = (int)ratio, .w_bf16 = wbf16, .t = t, .hd = w->shape[0],
                .sw = st->shape[2] / 2, .nbs = st->shape[0], .bss = st->shape[1],
                .r = bt->shape[0], .w = bt->shape[1], .np = cs->shape[0],
                .cnb = cin->shape[0], .cstride = cin->shape[1], .cbs = (int32_t)bs,
                .eps = (float)eps, .st = st->data, .cs = cs->data, .nw = w->data,
                .pos = pos->data, .sl = sl->data, .csl = csl->data, .bt = bt->data,
                .req = req->data, .cache = cin->data};
  const case_cp_want want = {cout->data, 1};
  return golden_run_case(c, &case_cp_comp_ops, &cc, 0, &want);
}

const golden_op golden_ops_compressor[] = {
    {"compressor_save_states", run_save_states},
    {"compressor_compress_insert", run_compress_insert},
    {NULL, NULL},
};
