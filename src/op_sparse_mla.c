/* Sparse MLA attention: bf16 sparse attention, sparse MLA decode (fused and
 * two-stage). Kernels: cl/sparse_mla.cl. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "dsacl/sparse_mla.h"

#define MLA_DIM 512
#define WG 256 /* attention work-group: one token x 16 heads */
#define HG 16
#define GROWS 8 /* gather_pack rows per work-group */
#define WS_ALIGN 256
/* Kernel index arithmetic is 32-bit: widths and T * Ktot stay below this. */
#define MAX_WIDTH ((int64_t)1 << 24)
#define MAX_ROWS (((int64_t)1 << 31) - 1)

typedef cl_ulong u64;

void dsa_sparse_attn_params_default(dsa_sparse_attn_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->softmax_scale = (float)(1.0 / sqrt((double)MLA_DIM));
}

static int al(u64 a, u64 b, u64 c, u64 n) { return a % n == 0 && b % n == 0 && c % n == 0; }

static dsa_status check_params(const dsa_sparse_attn_params *p, const char *op) {
  if (!p) return DSA_OK;
  if (!isfinite(p->softmax_scale))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: p->softmax_scale = %g must be finite", op,
                     (double)p->softmax_scale);
  if (p->flags != 0)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: p->flags = 0x%x, must be 0", op, p->flags);
  return DSA_OK;
}

/* query [T, H, 512] bf16, out likewise, attn_sink [H] f32, lse [T, H] f32. */
static dsa_status check_qio(const dsa_tensor *query, const dsa_tensor *attn_sink,
                            const dsa_tensor *out, const dsa_tensor *lse, const char *op) {
  DSA_CHECK(dsa__check_tensor(query, op, "query", DSA_BF16, 3));
  DSA_CHECK(dsa__check_dim(query, op, "query", 2, MLA_DIM));
  DSA_CHECK(dsa__check_unit_inner(query, op, "query"));
  const int64_t t = query->shape[0], h = query->shape[1];
  if (h < 1 || h > MAX_WIDTH)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: query has %lld heads, must be >= 1", op,
                     (long long)h);
  if (t > MAX_ROWS)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: query has too many tokens (%lld)", op,
                     (long long)t);
  if (attn_sink) {
    DSA_CHECK(dsa__check_tensor(attn_sink, op, "attn_sink", DSA_F32, 1));
    DSA_CHECK(dsa__check_dim(attn_sink, op, "attn_sink", 0, h));
  }
  DSA_CHECK(dsa__check_tensor(out, op, "out", DSA_BF16, 3));
  DSA_CHECK(dsa__check_dim(out, op, "out", 0, t));
  DSA_CHECK(dsa__check_dim(out, op, "out", 1, h));
  DSA_CHECK(dsa__check_dim(out, op, "out", 2, MLA_DIM));
  DSA_CHECK(dsa__check_unit_inner(out, op, "out"));
  if (lse) {
    DSA_CHECK(dsa__check_tensor(lse, op, "lse", DSA_F32, 2));
    DSA_CHECK(dsa__check_dim(lse, op, "lse", 0, t));
    DSA_CHECK(dsa__check_dim(lse, op, "lse", 1, h));
  }
  return DSA_OK;
}

/* indices [T, K] i32 (K < 2^24), lens [T] i32 (NULL allowed when lens_opt). */
static dsa_status check_index(const dsa_tensor *idx, const dsa_tensor *lens, int lens_opt,
                              int64_t t, const char *op, const char *iname, const char *lname) {
  DSA_CHECK(dsa__check_tensor(idx, op, iname, DSA_I32, 2));
  DSA_CHECK(dsa__check_dim(idx, op, iname, 0, t));
  if (idx->shape[1] > MAX_WIDTH)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: %s width %lld exceeds %lld", op, iname,
                     (long long)idx->shape[1], (long long)MAX_WIDTH);
  if (!lens && lens_opt) return DSA_OK;
  DSA_CHECK(dsa__check_tensor(lens, op, lname, DSA_I32, 1));
  DSA_CHECK(dsa__check_dim(lens, op, lname, 0, t));
  return DSA_OK;
}

static dsa_status check_set(const dsa_mla_index_set *s, int64_t t, const char *op,
                            const char *sname) {
  if (!s) return DSA_OK;
  char c[48], i[48], l[48];
  snprintf(c, sizeof c, "%s->cache", sname);
  snprintf(i, sizeof i, "%s->indices", sname);
  snprintf(l, sizeof l, "%s->lens", sname);
  DSA_CHECK(dsa__check_cache(s->cache, op, c, DSA_CACHE_MLA_FP8));
  return check_index(s->indices, s->lens, 0, t, op, i, l);
}

/* Kernel arguments shared by both attention kernels: the query block and the
 * sink/scale/out/lse block, in kernel order. */
typedef struct qargs {
  cl_mem q;
  u64 off, ts, hs;
  cl_int al, h;
} qargs;
typedef struct oargs {
  cl_mem sink;
  u64 sink_off, sink_st;
  cl_int has_sink;
  cl_float scale;
  cl_mem out;
  u64 o_off, o_ts, o_hs;
  cl_int o_al;
  cl_mem lse;
  u64 lse_off, lse_ts, lse_hs;
  cl_int has_lse;
} oargs;

static qargs q_args(const dsa_tensor *query) {
  qargs a = {query->mem, query->offset, (u64)query->stride[0] * 2, (u64)query->stride[1] * 2, 0,
             (cl_int)query->shape[1]};
  a.al = al(a.off, a.ts, a.hs, 8);
  return a;
}

static oargs o_args(dsa_queue *q, const dsa_tensor *sink, const dsa_sparse_attn_params *p,
                    const dsa_tensor *out, const dsa_tensor *lse) {
  oargs a;
  memset(&a, 0, sizeof a);
  a.sink = sink && sink->mem ? sink->mem : q->faults;
  if (sink) a.sink_off = sink->offset, a.sink_st = (u64)sink->stride[0] * 4;
  a.has_sink = sink != NULL;
  dsa_sparse_attn_params d;
  dsa_sparse_attn_params_default(&d);
  a.scale = p ? p->softmax_scale : d.softmax_scale;
  a.out = out->mem;
  a.o_off = out->offset, a.o_ts = (u64)out->stride[0] * 2, a.o_hs = (u64)out->stride[1] * 2;
  a.o_al = al(a.o_off, a.o_ts, a.o_hs, 4);
  a.lse = lse && lse->mem ? lse->mem : q->faults;
  if (lse)
    a.lse_off = lse->offset, a.lse_ts = (u64)lse->stride[0] * 4, a.lse_hs = (u64)lse->stride[1] * 4;
  a.has_lse = lse != NULL;
  return a;
}

#define QARGS(a) DSA_KARG(a.q), DSA_KARG(a.off), DSA_KARG(a.ts), DSA_KARG(a.hs), DSA_KARG(a.al), \
                 DSA_KARG(a.h)
#define OARGS(a)                                                                              \
  DSA_KARG(a.sink), DSA_KARG(a.sink_off), DSA_KARG(a.sink_st), DSA_KARG(a.has_sink),          \
      DSA_KARG(a.scale), DSA_KARG(a.out), DSA_KARG(a.o_off), DSA_KARG(a.o_ts),                \
      DSA_KARG(a.o_hs), DSA_KARG(a.o_al), DSA_KARG(a.lse), DSA_KARG(a.lse_off),               \
      DSA_KARG(a.lse_ts), DSA_KARG(a.lse_hs), DSA_KARG(a.has_lse)

/* An index set as kernel arguments (an absent set: width 0, any buffers). */
typedef struct sargs {
  cl_mem c;
  u64 c_off;
  cl_long nb;
  cl_int bs;
  u64 c_stride;
  cl_int c_al;
  cl_mem i;
  u64 i_off, i_ts, i_cs;
  cl_int k;
  cl_mem l;
  u64 l_off, l_st;
} sargs;

static sargs s_args(dsa_queue *q, const dsa_mla_index_set *s) {
  sargs a;
  memset(&a, 0, sizeof a);
  a.c = a.i = a.l = q->faults;
  a.bs = 1;
  if (!s || s->indices->shape[1] == 0) return a;
  const dsa_paged_cache *c = s->cache;
  a.c = c->mem ? c->mem : q->faults;
  a.c_off = c->offset, a.nb = c->num_blocks, a.bs = c->block_size, a.c_stride = (u64)c->block_stride;
  a.c_al = al(a.c_off, a.c_stride, 0, 16);
  a.i = s->indices->mem, a.i_off = s->indices->offset;
  a.i_ts = (u64)s->indices->stride[0] * 4, a.i_cs = (u64)s->indices->stride[1] * 4;
  a.k = (cl_int)s->indices->shape[1];
  a.l = s->lens->mem, a.l_off = s->lens->offset, a.l_st = (u64)s->lens->stride[0] * 4;
  return a;
}

#define SARGS(a)                                                                              \
  DSA_KARG(a.c), DSA_KARG(a.c_off), DSA_KARG(a.nb), DSA_KARG(a.bs), DSA_KARG(a.c_stride),     \
      DSA_KARG(a.c_al), DSA_KARG(a.i), DSA_KARG(a.i_off), DSA_KARG(a.i_ts), DSA_KARG(a.i_cs), \
      DSA_KARG(a.k), DSA_KARG(a.l), DSA_KARG(a.l_off), DSA_KARG(a.l_st)

static void attn_grid(int64_t t, int64_t h, size_t wg, size_t global[3], size_t local[3]) {
  global[0] = wg, global[1] = (size_t)((h + HG - 1) / HG), global[2] = (size_t)t;
  local[0] = wg, local[1] = 1, local[2] = 1;
}

/* The attention kernel for this queue: the NVIDIA tensor-core variant
 * (cl/sparse_mla.cl, built under DSA_HAS_NV_PTX) unless the context is forced
 * portable, else the portable one. *wg: its work-group size (the mma kernels
 * declare theirs with reqd_work_group_size). */
static dsa_status attn_kernel(dsa_queue *q, const char *portable, const char *mma,
                              cl_kernel *k, const char **name, size_t *wg) {
  if (q->ctx->caps.nv_inline_ptx && !q->ctx->force_portable) {
    size_t cw[3] = {0, 0, 0};
    DSA_CHECK(dsa__get_kernel(q, DSA_PROG_SPARSE_MLA, mma, k));
    if (clGetKernelWorkGroupInfo(*k, q->ctx->dev, CL_KERNEL_COMPILE_WORK_GROUP_SIZE,
                                 sizeof cw, cw, NULL) == CL_SUCCESS &&
        cw[0] > 0) {
      *name = mma;
      *wg = cw[0];
      return DSA_OK;
    }
  }
  *name = portable;
  *wg = WG;
  return dsa__get_kernel(q, DSA_PROG_SPARSE_MLA, portable, k);
}

/* The bf16 attention launch over prepared arguments (shared with the
 * two-stage decode). */
static dsa_status launch_bf16(dsa_queue *q, const qargs *qa, cl_mem kv, u64 kv_off, u64 kv_rs,
                              cl_long n_rows, cl_int kv_al, cl_mem idx, u64 i_off, u64 i_ts,
                              u64 i_cs, cl_int width, cl_mem lens, u64 l_off, u64 l_st,
                              cl_int has_lens, const oargs *oa, int64_t t,
                              const dsa_events *ev) {
  cl_kernel kern;
  const char *kname;
  size_t wg;
  DSA_CHECK(attn_kernel(q, "sparse_attn_bf16", "sparse_attn_bf16_mma", &kern, &kname, &wg));
  qargs qv = *qa;
  oargs ov = *oa;
  const dsa_karg args[] = {QARGS(qv),        DSA_KARG(kv),    DSA_KARG(kv_off), DSA_KARG(kv_rs),
                           DSA_KARG(n_rows), DSA_KARG(kv_al), DSA_KARG(idx),    DSA_KARG(i_off),
                           DSA_KARG(i_ts),   DSA_KARG(i_cs),  DSA_KARG(width),  DSA_KARG(lens),
                           DSA_KARG(l_off),  DSA_KARG(l_st),  DSA_KARG(has_lens), OARGS(ov),
                           DSA_KARG(q->faults)};
  size_t global[3], local[3];
  attn_grid(t, qa->h, wg, global, local);
  return dsa__launch(q, kern, kname, (int)(sizeof args / sizeof args[0]), args, 3,
                     global, local, ev);
}

dsa_status dsa_sparse_attn_bf16(dsa_queue *q, const dsa_tensor *query, const dsa_tensor *kv,
                                const dsa_tensor *indices, const dsa_tensor *lens,
                                const dsa_tensor *attn_sink, const dsa_sparse_attn_params *p,
                                const dsa_tensor *out, const dsa_tensor *lse,
                                const dsa_events *ev) {
  static const char op[] = "dsa_sparse_attn_bf16";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK(check_params(p, op));
  DSA_CHECK(check_qio(query, attn_sink, out, lse, op));
  const int64_t t = query->shape[0];
  DSA_CHECK(dsa__check_tensor(kv, op, "kv", DSA_BF16, 2));
  DSA_CHECK(dsa__check_dim(kv, op, "kv", 1, MLA_DIM));
  DSA_CHECK(dsa__check_unit_inner(kv, op, "kv"));
  if (kv->shape[0] > MAX_ROWS)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: kv has too many rows (%lld)", op,
                     (long long)kv->shape[0]);
  DSA_CHECK(check_index(indices, lens, 1, t, op, "indices", "lens"));
  if (t == 0) return dsa__launch_nothing(q, ev);

  const qargs qa = q_args(query);
  const oargs oa = o_args(q, attn_sink, p, out, lse);
  const int has_k = indices->shape[1] > 0;
  cl_mem kvm = kv->mem ? kv->mem : q->faults;
  u64 kv_rs = (u64)kv->stride[0] * 2;
  cl_int kv_al = al(kv->offset, kv_rs, 0, 16);
  cl_mem im = has_k ? indices->mem : q->faults;
  cl_mem lm = lens && has_k ? lens->mem : q->faults;
  return launch_bf16(q, &qa, kvm, kv->offset, kv_rs, kv->shape[0], kv_al, im, indices->offset,
                     (u64)indices->stride[0] * 4, (u64)indices->stride[1] * 4,
                     (cl_int)indices->shape[1], lm, lens ? lens->offset : 0,
                     lens ? (u64)lens->stride[0] * 4 : 0, lens != NULL && has_k, &oa, t, ev);
}

static dsa_status check_decode(dsa_queue *q, const dsa_tensor *query,
                               const dsa_mla_index_set *main_set,
                               const dsa_mla_index_set *extra_set, const dsa_tensor *attn_sink,
                               const dsa_sparse_attn_params *p, const dsa_tensor *out,
                               const dsa_tensor *lse, const dsa_events *ev, const char *op) {
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK(check_params(p, op));
  DSA_CHECK(check_qio(query, attn_sink, out, lse, op));
  DSA_CHECK(check_set(main_set, query->shape[0], op, "main_set"));
  DSA_CHECK(check_set(extra_set, query->shape[0], op, "extra_set"));
  return DSA_OK;
}

static int64_t set_width(const dsa_mla_index_set *s) { return s ? s->indices->shape[1] : 0; }

dsa_status dsa_sparse_mla_decode(dsa_queue *q, const dsa_tensor *query,
                                 const dsa_mla_index_set *main_set,
                                 const dsa_mla_index_set *extra_set, const dsa_tensor *attn_sink,
                                 const dsa_sparse_attn_params *p, const dsa_tensor *out,
                                 const dsa_tensor *lse, const dsa_events *ev) {
  static const char op[] = "dsa_sparse_mla_decode";
  dsa__clear_error();
  DSA_CHECK(check_decode(q, query, main_set, extra_set, attn_sink, p, out, lse, ev, op));
  const int64_t t = query->shape[0];
  if (t == 0) return dsa__launch_nothing(q, ev);

  cl_kernel kern;
  const char *kname;
  size_t wg;
  DSA_CHECK(attn_kernel(q, "sparse_mla_decode_fused", "sparse_mla_decode_fused_mma", &kern,
                        &kname, &wg));
  qargs qa = q_args(query);
  oargs oa = o_args(q, attn_sink, p, out, lse);
  sargs sa = s_args(q, main_set), sb = s_args(q, extra_set);
  const dsa_karg args[] = {QARGS(qa), SARGS(sa), SARGS(sb), OARGS(oa), DSA_KARG(q->faults)};
  size_t global[3], local[3];
  attn_grid(t, qa.h, wg, global, local);
  return dsa__launch(q, kern, kname, (int)(sizeof args / sizeof args[0]),
                     args, 3, global, local, ev);
}

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Workspace layout: rows [T*Ktot, 512] bf16 | indices [T, Ktot] i32 | lens [T] i32,
 * each part starting on a WS_ALIGN boundary. */
static int ws_layout(int64_t t, int64_t k1, int64_t k2, uint64_t *idx_off, uint64_t *len_off,
                     uint64_t *total) {
  if (t < 0 || k1 < 0 || k2 < 0 || t > MAX_ROWS || k1 > MAX_WIDTH || k2 > MAX_WIDTH) return -1;
  const uint64_t rows = (uint64_t)t * (uint64_t)(k1 + k2);
  if (rows > (uint64_t)MAX_ROWS) return -1;
  *idx_off = round_up(rows * MLA_DIM * 2, WS_ALIGN);
  *len_off = *idx_off + round_up(rows * 4, WS_ALIGN);
  *total = *len_off + round_up((uint64_t)t * 4, WS_ALIGN);
  if (*total > (uint64_t)SIZE_MAX) return -1;
  return 0;
}

size_t dsa_sparse_mla_decode_workspace_size(int64_t t, int64_t k1, int64_t k2) {
  uint64_t io, lo, total;
  return ws_layout(t, k1, k2, &io, &lo, &total) ? 0 : (size_t)total;
}

dsa_status dsa_sparse_mla_decode_two_stage(
    dsa_queue *q, const dsa_tensor *query, const dsa_mla_index_set *main_set,
    const dsa_mla_index_set *extra_set, const dsa_tensor *attn_sink,
    const dsa_sparse_attn_params *p, const dsa_tensor *out, const dsa_tensor *lse,
    cl_mem workspace, size_t workspace_offset, const dsa_events *ev) {
  static const char op[] = "dsa_sparse_mla_decode_two_stage";
  dsa__clear_error();
  DSA_CHECK(check_decode(q, query, main_set, extra_set, attn_sink, p, out, lse, ev, op));
  const int64_t t = query->shape[0], k1 = set_width(main_set), k2 = set_width(extra_set);
  uint64_t idx_off, len_off, need;
  if (ws_layout(t, k1, k2, &idx_off, &len_off, &need))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: workspace for T = %lld, K1 = %lld, K2 = %lld exceeds the kernels' "
                     "32-bit row range",
                     op, (long long)t, (long long)k1, (long long)k2);
  if (t == 0) return dsa__launch_nothing(q, ev);
  if (!workspace) return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: workspace is NULL", op);
  if (workspace_offset % WS_ALIGN)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: workspace_offset %zu is not a multiple of %d", op, workspace_offset,
                     WS_ALIGN);
  size_t size; /* valid buffer of the queue's cl_context */
  DSA_CHECK(dsa__check_mem(workspace, op, "workspace", &size));
  if (workspace_offset > size || size - workspace_offset < need)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: workspace needs %llu bytes from offset %zu but its buffer holds %zu",
                     op, (unsigned long long)need, workspace_offset, size);

  const qargs qa = q_args(query);
  const oargs oa = o_args(q, attn_sink, p, out, lse);
  const int64_t ktot = k1 + k2;
  const u64 rows_off = workspace_offset, ws_idx = workspace_offset + idx_off,
            ws_len = workspace_offset + len_off;
  /* Nothing to gather: the attention alone writes zeros and -inf. */
  if (ktot == 0)
    return launch_bf16(q, &qa, workspace, rows_off, MLA_DIM * 2, 0, 1, workspace, ws_idx, 0, 4, 0,
                       workspace, ws_len, 4, 0, &oa, t, ev);

  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_SPARSE_MLA, "sparse_mla_gather_pack", &kern));
  /* The attention kernel is looked up before anything is enqueued, so a
   * failure cannot leave a half-done operation behind. */
  cl_kernel attn;
  const char *aname;
  size_t awg;
  DSA_CHECK(attn_kernel(q, "sparse_attn_bf16", "sparse_attn_bf16_mma", &attn, &aname, &awg));
  (void)attn, (void)aname, (void)awg;
  sargs sa = s_args(q, main_set), sb = s_args(q, extra_set);
  cl_mem ws = workspace;
  u64 r_off = rows_off, i_off = ws_idx, l_off = ws_len;
  const dsa_karg args[] = {SARGS(sa),       SARGS(sb),       DSA_KARG(ws), DSA_KARG(r_off),
                           DSA_KARG(i_off), DSA_KARG(l_off), DSA_KARG(q->faults)};
  const size_t global[3] = {32, (size_t)round_up((uint64_t)ktot, GROWS), (size_t)t},
               local[3] = {32, GROWS, 1};
  const dsa_events first = {ev ? ev->num_wait : 0, ev ? ev->wait : NULL, NULL};
  DSA_CHECK(dsa__launch(q, kern, "sparse_mla_gather_pack", (int)(sizeof args / sizeof args[0]),
                        args, 3, global, local, &first));
  /* In-order queue: the attention follows the gather. */
  const dsa_events second = {0, NULL, ev ? ev->done : NULL};
  return launch_bf16(q, &qa, workspace, rows_off, MLA_DIM * 2, (cl_long)(t * ktot), 1, workspace,
                     ws_idx, (u64)ktot * 4, 4, (cl_int)ktot, workspace, ws_len, 4, 1, &oa, t,
                     &second);
}
