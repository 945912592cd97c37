/* DeepSeek-V4 KV compressor: state saving and the fused compress -> norm ->
 * RoPE -> quantize -> insert (docs/COMPRESSOR.md). Kernels:
 * cl/compressor.cl. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "dsacl/compressor.h"

/* Save-states work-group width (float4 columns per group) and the most rows
 * one window gathers (2 x 4 for ratio 4, 128 for ratio 128). */
#define CMP_SAVE_WG 64
#define CMP_MAX_ROWS 256
const char dsa__defines_compressor[] = DSA_KDEF(CMP_SAVE_WG) DSA_KDEF(CMP_MAX_ROWS);

DSA_VARIANT_TABLE(dsa__variants_compressor_save_states, "dsa_compressor_save_states",
                  {"portable", 0, NULL, NULL});
/* "split" (compressor_c128_part + compressor_c128_tail): windows of 128
 * rows (ratio 128, head 512) with their 512 dims over CMP_NS work-groups
 * of 32, every row of a group's slice loaded at once, and the norm, RoPE
 * and quantization in a second kernel (cl/compressor.cl). A window's time
 * in the kernels below is its chain of row loads, not its bytes (one
 * window alone takes as long as 64), and 64 windows leave most of a big GPU
 * idle. The same operations per dim in the same order, so the same bytes.
 * H200 (docs/PERFORMANCE.md, session 28): 64 decode windows (T = 64)
 * 74.7 -> 33.3 us; the T = 8192 prefill's 64 windows 126 -> 45.9 us, its
 * work-group rows taking 128 tokens each (compressor_c128_part_tb: a token
 * a row, most of whose 131,072 groups only read their token and leave,
 * took 189). Where a device-scope fence is known the tail runs in each
 * token's last group (one launch). The scratch holds 2052 bytes a token,
 * so the tokens go in slices of CMP_SPLIT_T (a launch or two each).
 *
 * "wide" (compressor_compress_512w): windows of 128 rows with hd
 * work-items, one dim each through the softmax, instead of hd / 4 with
 * four. A window's softmax is ~97 instructions a (row, dim) over its three
 * passes, and at four dims a work-item the window's 4 warps ran alone on an
 * SM at one instruction in 7.6 cycles (Nsight Compute, H200: 49,900
 * instructions a warp, 6 % of issue slots). H200, same call: 64 windows of
 * a decode step (T = 64) 208.8 -> 124.3 us, the T = 8192 prefill's 64
 * windows 232.6 -> 206.8; with each batch's loads issued a batch ahead
 * (cl/compressor.cl) 74.2 and 183.6-188.6. Same operations per dim in the
 * same order, so the same bytes. Needs work-groups of hd. At ratio 4
 * (eight rows a window, every row's loads at once in either kernel) it
 * takes decode-sized calls, where a window's time is its latency: H200, C4
 * main T = 64 17.7 (the hd / 4 kernel before session 28) -> 14.4 (hd / 4)
 * -> 11.5 us (wide), indexer FP8 17.3 -> 13.6 -> 10.0; a prefill's
 * thousands of windows fill the device better on hd / 4 lanes (T = 8192:
 * 70.5 -> 56.0 us against 90.0 wide), so above 4 tokens a compute unit
 * the portable kernel takes them.
 *
 * DSACL_COMPRESSOR=wide refuses "split", =narrow both (tests: the portable
 * kernel at ratio 128), =split:N,K makes the split's slices N tokens and
 * its work-group rows K tokens, =split2 launches its tail kernel (tests). */
#define CMP_NS 16           /* work-groups a window (cl/compressor.cl) */
#define CMP_PWG 256         /* their work-items */
#define CMP_PART_LOCAL 22800 /* their local memory, bytes (1 KB rows, 16 KB slices, ...) */
#define CMP_SPLIT_T 16384 /* tokens a slice: 32 MiB of scratch */
#define CMP_TB_T 256      /* tokens a slice with a token a work-group row, at most */
#define CMP_TB_ROWS 64    /* work-group rows a slice above (several tokens a row) */
typedef struct cmp_shape {
  int hd, ratio;
  int64_t t;
} cmp_shape;
/* DSACL_COMPRESSOR, read when the context is made (as DSACL_TOPK). */
void dsa__compressor_env(dsa_context *c) {
  const char *e = getenv("DSACL_COMPRESSOR");
  c->cmp_mode = e && !strcmp(e, "narrow") ? 2 : e && !strcmp(e, "wide") ? 1 : 0;
  c->cmp_slice = c->cmp_tb = 0;
  if (e && !strncmp(e, "split:", 6) && atoi(e + 6) > 0) {
    c->cmp_slice = atoi(e + 6);
    const char *k = strchr(e + 6, ',');
    if (k && atoi(k + 1) > 0 && atoi(k + 1) <= CMP_PWG) c->cmp_tb = atoi(k + 1);
  }
  c->cmp_nofuse = e && !strcmp(e, "split2");
}
static const char *refuse_split(const dsa_context *c, const void *shape, char *buf, size_t n) {
  if (c->cmp_mode) return c->cmp_mode == 2 ? "DSACL_COMPRESSOR=narrow" : "DSACL_COMPRESSOR=wide";
  if (c->caps.max_wg < CMP_PWG) {
    snprintf(buf, n, "needs work-groups of %d, the device takes %zu", CMP_PWG,
             (size_t)c->caps.max_wg);
    return buf;
  }
  const char *lm = dsa__refuse_local_mem(c, CMP_PART_LOCAL, buf, n);
  if (lm) return lm;
  if (!shape) return NULL;
  const cmp_shape *s = shape;
  if (s->hd != 512 || s->ratio != 128) return "head 512 at ratio 128 only";
  return NULL;
}
static const char *refuse_wide(const dsa_context *c, const void *shape, char *buf, size_t n) {
  if (c->cmp_mode == 2) return "DSACL_COMPRESSOR=narrow";
  const size_t need = shape ? (size_t)((const cmp_shape *)shape)->hd : 128;
  if (c->caps.max_wg < need) {
    snprintf(buf, n, "needs work-groups of %zu, the device takes %zu", need,
             (size_t)c->caps.max_wg);
    return buf;
  }
  if (!shape) return NULL;
  const cmp_shape *s = shape;
  if (s->ratio == 4 && s->t > 4 * (int64_t)c->caps.compute_units) {
    snprintf(buf, n, "ratio 4 with T = %lld above 4 tokens a compute unit (%u units)",
             (long long)s->t, (unsigned)c->caps.compute_units);
    return buf;
  }
  return NULL;
}
DSA_VARIANT_TABLE(dsa__variants_compressor_compress_insert, "dsa_compressor_compress_insert",
                  {"split", 0, refuse_split, "ratio 128: a window's dims over 16 work-groups"},
                  {"wide", 0, refuse_wide,
                   "one dim a work-item (hd of them a window); ratio 4: T <= 4 a compute unit"},
                  {"portable", 0, NULL, NULL});

void dsa_compressor_params_default(dsa_compressor_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->compress_ratio = 4;
  p->eps = 1e-6f;
}

static dsa_status check_params(const dsa_compressor_params *p, const char *op) {
  if (p->compress_ratio != 4 && p->compress_ratio != 128)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: p->compress_ratio = %d, must be 4 or 128", op, (int)p->compress_ratio);
  if (!(isfinite(p->eps) && p->eps >= FLT_MIN))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: p->eps = %g must be finite and >= FLT_MIN", op, (double)p->eps);
  return DSA_OK;
}

/* state: F32 [nb, bs, width] with unit inner stride and rows that do not
 * overlap (the save kernel writes them in parallel). */
static dsa_status check_state(const dsa_tensor *st, const char *op, int64_t width) {
  DSA_CHECK(dsa__check_tensor(st, op, "state", DSA_F32, 3));
  DSA_CHECK(dsa__check_dim(st, op, "state", 2, width));
  DSA_CHECK(dsa__check_unit_inner(st, op, "state"));
  if (st->shape[1] < 1 || st->shape[1] > (1 << 20))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: state block size (shape[1]) = %lld, must be in [1, 2^20]", op,
                     (long long)st->shape[1]);
  if (st->shape[0] > ((int64_t)1 << 40))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: state has %lld blocks, at most 2^40",
                     op, (long long)st->shape[0]);
  if (st->stride[1] < width || st->stride[0] < st->shape[1] * st->stride[1])
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: state strides (%lld, %lld) overlap its rows of %lld floats", op,
                     (long long)st->stride[0], (long long)st->stride[1], (long long)width);
  return DSA_OK;
}

dsa_status dsa_compressor_save_states(dsa_queue *q, const dsa_tensor *kv,
                                      const dsa_tensor *score, const dsa_tensor *ape,
                                      const dsa_tensor *positions,
                                      const dsa_tensor *slot_mapping, const dsa_tensor *state,
                                      const dsa_compressor_params *p, const dsa_events *ev) {
  static const char op[] = "dsa_compressor_save_states";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  dsa_compressor_params defp;
  if (!p) {
    dsa_compressor_params_default(&defp);
    p = &defp;
  }
  DSA_CHECK(check_params(p, op));
  DSA_CHECK(dsa__check_tensor(kv, op, "kv", DSA_F32, 2));
  DSA_CHECK(dsa__check_unit_inner(kv, op, "kv"));
  const int64_t t = kv->shape[0], w = kv->shape[1];
  if (w < 4 || w % 4 != 0 || w > (1 << 20))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: kv width %lld must be a positive multiple of 4 (<= 2^20)", op,
                     (long long)w);
  DSA_CHECK(dsa__check_tensor(score, op, "score", DSA_F32, 2));
  DSA_CHECK(dsa__check_dim(score, op, "score", 0, t));
  DSA_CHECK(dsa__check_dim(score, op, "score", 1, w));
  DSA_CHECK(dsa__check_unit_inner(score, op, "score"));
  DSA_CHECK(dsa__check_tensor(ape, op, "ape", DSA_F32, 2));
  DSA_CHECK(dsa__check_dim(ape, op, "ape", 0, p->compress_ratio));
  DSA_CHECK(dsa__check_dim(ape, op, "ape", 1, w));
  DSA_CHECK(dsa__check_unit_inner(ape, op, "ape"));
  DSA_CHECK(dsa__check_positions(positions, op, t));
  DSA_CHECK(dsa__check_tensor(slot_mapping, op, "slot_mapping", DSA_I64, 1));
  DSA_CHECK(dsa__check_dim(slot_mapping, op, "slot_mapping", 0, t));
  DSA_CHECK(check_state(state, op, 2 * w));
  if (t >= ((int64_t)1 << 31))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: %lld tokens, at most 2^31 - 1", op,
                     (long long)t);

  if (t == 0) return dsa__launch_nothing(q, ev);
  if (dsa__pick(q, &dsa__variants_compressor_save_states, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_COMPRESSOR, "compressor_save_states", &kern));
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_tensor(&a, kv, 2);
  dsa__karg_tensor(&a, score, 2);
  dsa__karg_tensor(&a, ape, 2);
  dsa__karg_positions(&a, positions);
  dsa__karg_tensor(&a, slot_mapping, 1);
  dsa__karg_tensor(&a, state, 3);
  dsa__karg_i64(&a, state->shape[0]);
  dsa__karg_i32(&a, (cl_int)state->shape[1]);
  dsa__karg_i32(&a, (cl_int)(w / 4));
  dsa__karg_i32(&a, p->compress_ratio);
  dsa__karg_i64(&a, t);
  dsa__karg_faults(&a);
  const size_t w4 = (size_t)(w / 4);
  const size_t global[2] = {(w4 + CMP_SAVE_WG - 1) / CMP_SAVE_WG * CMP_SAVE_WG, (size_t)t},
               local[2] = {CMP_SAVE_WG, 1};
  return dsa__launch_args(q, kern, "compressor_save_states", &a, 2, global, local, ev);
}

/* The compress kernels' first arguments (cl/compressor.cl: the state, the
 * block table, the token's request, position and state slot). */
static void karg_window(dsa_kargs *a, const dsa_tensor *state, const dsa_tensor *block_table,
                        const dsa_tensor *token_to_req, const dsa_tensor *positions,
                        const dsa_tensor *slot_mapping) {
  dsa__karg_tensor(a, state, 3);
  dsa__karg_i64(a, state->shape[0]);
  dsa__karg_i32(a, (cl_int)state->shape[1]);
  dsa__karg_tensor(a, block_table, 2);
  dsa__karg_i64(a, block_table->shape[0]);
  dsa__karg_i64(a, block_table->shape[1]);
  dsa__karg_tensor(a, token_to_req, 1);
  dsa__karg_i32(a, token_to_req != NULL);
  dsa__karg_positions(a, positions);
  dsa__karg_tensor(a, slot_mapping, 1);
}

/* Variant "split": compressor_c128_part, then compressor_c128_tail over the
 * queue's scratch (T x 512 sums, then a verdict word a token). Both
 * kernels and the scratch are had before anything is enqueued. */
static dsa_status launch_split(dsa_queue *q, const dsa_tensor *state,
                               const dsa_tensor *block_table, const dsa_tensor *token_to_req,
                               const dsa_tensor *positions, const dsa_tensor *slot_mapping,
                               const dsa_tensor *norm_weight, int w_bf16,
                               const dsa_tensor *cos_sin, const dsa_tensor *cache_slot_mapping,
                               const dsa_paged_cache *cache, const dsa_compressor_params *p,
                               int64_t t, const dsa_events *ev) {
  cl_kernel part;
  cl_mem ws;
  const int64_t cap = q->ctx->cmp_slice ? q->ctx->cmp_slice : CMP_SPLIT_T;
  const int64_t sl = t < cap ? t : cap; /* tokens a slice */
  /* Tokens a work-group row: 1 up to CMP_TB_T tokens a slice
   * (compressor_c128_part), else as many as make CMP_TB_ROWS rows
   * (compressor_c128_part_tb: a prefill's rows read their tokens at once,
   * most of which close no window). H200, T = 8192: 8 / 32 / 128 tokens a
   * row 90.2 / 54.1 / 45.8 us (docs/PERFORMANCE.md, session 28). */
  const int64_t tb = q->ctx->cmp_tb     ? q->ctx->cmp_tb
                     : sl <= CMP_TB_T ? 1
                                        : (sl + CMP_TB_ROWS - 1) / CMP_TB_ROWS;
  const char *pname = tb > 1 ? "compressor_c128_part_tb" : "compressor_c128_part";
  /* The tail in each token's last part group where the hand-off is known
   * to hold (dsa__group_handoff_ok; DSACL_COMPRESSOR=split2 launches the
   * tail kernel anyway, tests), else compressor_c128_tail. */
  const int fuse = !q->ctx->cmp_nofuse && dsa__group_handoff_ok(q->ctx);
  cl_kernel tail = NULL;
  cl_mem cnt = NULL;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_COMPRESSOR, pname, &part));
  if (fuse)
    DSA_CHECK(dsa__queue_counters(q, sl, &cnt));
  else
    DSA_CHECK(dsa__get_kernel(q, DSA_PROG_COMPRESSOR, "compressor_c128_tail", &tail));
  DSA_CHECK(dsa__queue_scratch(q, (size_t)sl * (512 * 4 + 4), &ws));
  for (int64_t t0 = 0; t0 < t; t0 += sl) {
    const int64_t n = t - t0 < sl ? t - t0 : sl;
    dsa_kargs a;
    dsa__kargs_init(&a, q);
    karg_window(&a, state, block_table, token_to_req, positions, slot_mapping);
    dsa__karg_i64(&a, cos_sin->shape[0]);
    dsa__karg_tensor(&a, cache_slot_mapping, 1);
    dsa__karg_paged(&a, cache);
    dsa__karg_mem(&a, ws);
    dsa__karg_i64(&a, t0);
    dsa__karg_i64(&a, sl);
    dsa__karg_i64(&a, n);
    dsa__karg_i32(&a, (cl_int)tb);
    dsa__karg_tensor(&a, norm_weight, 1);
    dsa__karg_i32(&a, w_bf16);
    dsa__karg_cos_sin(&a, cos_sin);
    dsa__karg_f32(&a, p->eps);
    dsa__karg_mem(&a, cnt);
    dsa__karg_i32(&a, fuse);
    dsa__karg_faults(&a);
    const size_t g1[2] = {(size_t)CMP_PWG * CMP_NS, (size_t)((n + tb - 1) / tb)},
                 l1[2] = {CMP_PWG, 1};
    /* In-order queue: each launch follows the one before. */
    const int last_slice = t0 + n == t;
    const dsa_events first = {t0 == 0 && ev ? ev->num_wait : 0, t0 == 0 && ev ? ev->wait : NULL,
                              fuse && last_slice && ev ? ev->done : NULL};
    DSA_CHECK(dsa__launch_args(q, part, pname, &a, 2, g1, l1, &first));
    if (fuse) continue;
    dsa__kargs_init(&a, q);
    dsa__karg_positions(&a, positions);
    dsa__karg_tensor(&a, norm_weight, 1);
    dsa__karg_i32(&a, w_bf16);
    dsa__karg_cos_sin(&a, cos_sin);
    dsa__karg_tensor(&a, cache_slot_mapping, 1);
    dsa__karg_paged(&a, cache);
    dsa__karg_f32(&a, p->eps);
    dsa__karg_mem(&a, ws);
    dsa__karg_i64(&a, t0);
    dsa__karg_i64(&a, sl);
    const size_t g2[2] = {128, (size_t)n}, l2[2] = {128, 1};
    const dsa_events last = {0, NULL, last_slice && ev ? ev->done : NULL};
    DSA_CHECK(dsa__launch_args(q, tail, "compressor_c128_tail", &a, 2, g2, l2, &last));
  }
  return DSA_OK;
}

dsa_status dsa_compressor_compress_insert(dsa_queue *q, const dsa_tensor *state,
                                          const dsa_tensor *block_table,
                                          const dsa_tensor *token_to_req,
                                          const dsa_tensor *positions,
                                          const dsa_tensor *slot_mapping,
                                          const dsa_tensor *norm_weight,
                                          const dsa_tensor *cos_sin,
                                          const dsa_tensor *cache_slot_mapping,
                                          const dsa_paged_cache *cache,
                                          const dsa_compressor_params *p, const dsa_events *ev) {
  static const char op[] = "dsa_compressor_compress_insert";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  dsa_compressor_params defp;
  if (!p) {
    dsa_compressor_params_default(&defp);
    p = &defp;
  }
  DSA_CHECK(check_params(p, op));
  if (!cache) return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: cache is NULL", op);
  if (cache->format != DSA_CACHE_MLA_FP8 && cache->format != DSA_CACHE_INDEXER_FP8 &&
      cache->format != DSA_CACHE_INDEXER_MXFP4)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: cache has format %d, this operator needs DSA_CACHE_MLA_FP8, "
                     "DSA_CACHE_INDEXER_FP8 or DSA_CACHE_INDEXER_MXFP4",
                     op, (int)cache->format);
  DSA_CHECK(dsa__check_cache(cache, op, "cache", cache->format));
  const int64_t hd = cache->format == DSA_CACHE_MLA_FP8 ? 512 : 128;
  const int64_t coff = p->compress_ratio == 4 ? 2 : 1;
  DSA_CHECK(check_state(state, op, 2 * coff * hd));
  DSA_CHECK(dsa__check_positions(positions, op, -1));
  const int64_t t = positions->shape[0];
  DSA_CHECK(dsa__check_tensor(block_table, op, "block_table", DSA_I32, 2));
  if (token_to_req) { /* NULL: pure decode, token t is request t */
    DSA_CHECK(dsa__check_tensor(token_to_req, op, "token_to_req", DSA_I32, 1));
    DSA_CHECK(dsa__check_dim(token_to_req, op, "token_to_req", 0, t));
  }
  DSA_CHECK(dsa__check_tensor(slot_mapping, op, "slot_mapping", DSA_I64, 1));
  DSA_CHECK(dsa__check_dim(slot_mapping, op, "slot_mapping", 0, t));
  if (!norm_weight)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: norm_weight is NULL", op);
  const int w_bf16 = norm_weight->dtype == DSA_BF16;
  DSA_CHECK(dsa__check_tensor(norm_weight, op, "norm_weight", w_bf16 ? DSA_BF16 : DSA_F32, 1));
  DSA_CHECK(dsa__check_dim(norm_weight, op, "norm_weight", 0, hd));
  DSA_CHECK(dsa__check_cos_sin(cos_sin, op));
  DSA_CHECK(dsa__check_dim(cos_sin, op, "cos_sin", 1, 64));
  DSA_CHECK(dsa__check_tensor(cache_slot_mapping, op, "cache_slot_mapping", DSA_I64, 1));
  DSA_CHECK(dsa__check_dim(cache_slot_mapping, op, "cache_slot_mapping", 0, t));
  if (t >= ((int64_t)1 << 31))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: %lld tokens, at most 2^31 - 1", op,
                     (long long)t);

  if (t == 0) return dsa__launch_nothing(q, ev);
  const cmp_shape shape = {(int)hd, p->compress_ratio, t};
  const int v = dsa__pick(q, &dsa__variants_compressor_compress_insert, &shape);
  if (v < 0) return DSA_ERR_UNSUPPORTED;
  if (v == 0) return launch_split(q, state, block_table, token_to_req, positions, slot_mapping,
                                  norm_weight, w_bf16, cos_sin, cache_slot_mapping, cache, p, t, ev);
  const int wide = v == 1;
  const char *kname = hd == 512 ? (wide ? "compressor_compress_512w" : "compressor_compress_512")
                                : (wide ? "compressor_compress_128w" : "compressor_compress_128");
  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_COMPRESSOR, kname, &kern));
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  karg_window(&a, state, block_table, token_to_req, positions, slot_mapping);
  dsa__karg_tensor(&a, norm_weight, 1);
  dsa__karg_i32(&a, w_bf16);
  dsa__karg_cos_sin(&a, cos_sin);
  dsa__karg_i64(&a, cos_sin->shape[0]);
  dsa__karg_tensor(&a, cache_slot_mapping, 1);
  dsa__karg_paged(&a, cache);
  dsa__karg_i32(&a, (cl_int)cache->format);
  dsa__karg_i32(&a, p->compress_ratio);
  dsa__karg_f32(&a, p->eps);
  dsa__karg_faults(&a);
  const size_t lanes = (size_t)(wide ? hd : hd / 4);
  const size_t global[2] = {lanes, (size_t)t}, local[2] = {lanes, 1};
  return dsa__launch_args(q, kern, kname, &a, 2, global, local, ev);
}
