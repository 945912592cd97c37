/* Indexer MQA logits: ragged prefill and paged decode, FP8 and MXFP4
 * (SPEC-reference §6). Kernels: cl/indexer_logits.cl. */
#include <string.h>

#include "internal.h"

typedef cl_ulong u64;

#define NT 256
/* Column limit: tile starts stay below 2^31 in the kernel's int arithmetic. */
#define MAX_COLS (INT32_MAX - 4096)
/* Work-groups per launch: global sizes stay far below 2^32 work-items.
 * (Overridable at build time only to test the splitting with tiny values.) */
#ifdef DSA_IL_MAX_GROUPS
#define MAX_GROUPS_PER_LAUNCH ((unsigned)DSA_IL_MAX_GROUPS)
#else
#define MAX_GROUPS_PER_LAUNCH (1u << 22)
#endif

#define BAD(...) dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, __VA_ARGS__)

void dsa_mqa_logits_params_default(dsa_mqa_logits_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->clean = 1;
}

/* Everything a logits kernel needs, in the kernel's argument order. */
typedef struct il_job {
  cl_mem qv;
  u64 qv_off, qv_bs, qv_rs, qv_hs;
  cl_mem qsc;
  u64 qsc_off, qsc_bs, qsc_rs, qsc_hs, qsc_ds;
  cl_int H, D, next_n;
  cl_mem w;
  u64 w_off, w_rs, w_hs;
  cl_mem kv;
  u64 kv_off, kv_rs;
  cl_mem ksc;
  u64 ksc_off, ksc_rs, ksc_ds;
  cl_mem lim;
  u64 lim_off, lim_s0, lim_s1;
  cl_mem lim2;
  u64 lim2_off, lim2_s0;
  cl_int ctx_rank;
  cl_mem cache;
  u64 c_off;
  cl_long num_blocks;
  cl_int bs;
  u64 c_bstride;
  cl_mem bt;
  u64 bt_off, bt_rs, bt_cs;
  cl_long W;
  cl_int ncols, clean;
  cl_mem out;
  u64 o_off, o_rs;
  cl_int out_bf16, q_al, k_al;
  int64_t rows;
  int paged, fp4;
} il_job;

static u64 bytes(const dsa_tensor *t, int dim) {
  return (u64)t->stride[dim] * dsa_dtype_size(t->dtype);
}

static int aligned(u64 a, unsigned n) { return a % n == 0; }

/* The NVIDIA tensor-core kernels (cl/indexer_logits.cl, built when the
 * program has DSA_HAS_NV_PTX, i.e. an NVIDIA device and no
 * DSA_CONTEXT_FORCE_PORTABLE / DSACL_FORCE_PORTABLE): FP8, D = 128, H <= 128.
 * Group geometry: 128 work-items, 256 keys. */
#define MMA_NT 128
#define MMA_TILE 256
static int use_mma(const dsa_queue *q, const il_job *j) {
  return q->ctx->caps.nv_inline_ptx && !q->ctx->force_portable && !j->fp4 && j->D == 128 &&
         j->H <= 128;
}

static dsa_status launch(dsa_queue *q, const il_job *j, const dsa_events *ev) {
  static const char *names[2][2][2] = {
      {{"mqa_logits_h16", "mqa_logits_h64"}, {"paged_mqa_logits_h16", "paged_mqa_logits_h64"}},
      {{"mqa_logits_mxfp4_h16", "mqa_logits_mxfp4_h64"},
       {"paged_mqa_logits_mxfp4_h16", "paged_mqa_logits_mxfp4_h64"}}};
  const int wide = j->H > 16;
  const char *kname = names[j->fp4][j->paged][wide];
  cl_int tk = wide ? 64 : 256;
  size_t nt = NT;
  if (use_mma(q, j)) {
    kname = j->paged ? "paged_mqa_logits_mma" : "mqa_logits_mma";
    tk = MMA_TILE;
    nt = MMA_NT;
  }
  cl_kernel k;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_INDEXER_LOGITS, kname, &k));

  /* Launches of at most MAX_GROUPS_PER_LAUNCH groups: tiles of the row in
   * chunks, rows in chunks. */
  const int64_t total_tiles = ((int64_t)j->ncols + tk - 1) / tk;
  const int64_t tiles_per =
      total_tiles < (int64_t)MAX_GROUPS_PER_LAUNCH ? total_tiles : (int64_t)MAX_GROUPS_PER_LAUNCH;
  const int64_t rows_cap = (int64_t)MAX_GROUPS_PER_LAUNCH / tiles_per;
  const int64_t rows_per = rows_cap > 0 ? rows_cap : 1;
  /* A zero-block cache or an empty tensor may carry no buffer; any valid
   * buffer stands in, since nothing is read through it. */
  cl_mem dummy = q->faults;
#define M_(x) cl_mem x##_ = j->x ? j->x : dummy
  M_(qv); M_(qsc); M_(w); M_(kv); M_(ksc); M_(lim); M_(lim2); M_(cache); M_(bt); M_(out);
#undef M_
  for (int64_t t0 = 0; t0 < total_tiles; t0 += tiles_per)
  for (int64_t r0 = 0; r0 < j->rows; r0 += rows_per) {
    const int64_t nr = j->rows - r0 < rows_per ? j->rows - r0 : rows_per;
    const cl_int ntiles = (cl_int)(total_tiles - t0 < tiles_per ? total_tiles - t0 : tiles_per);
    const cl_int tile0 = (cl_int)t0;
    cl_uint row0 = (cl_uint)r0;
    const dsa_karg args[] = {
        DSA_KARG(qv_),        DSA_KARG(j->qv_off),   DSA_KARG(j->qv_bs),    DSA_KARG(j->qv_rs),
        DSA_KARG(j->qv_hs),   DSA_KARG(qsc_),        DSA_KARG(j->qsc_off),  DSA_KARG(j->qsc_bs),
        DSA_KARG(j->qsc_rs),  DSA_KARG(j->qsc_hs),   DSA_KARG(j->qsc_ds),   DSA_KARG(j->H),
        DSA_KARG(j->D),       DSA_KARG(j->next_n),   DSA_KARG(w_),          DSA_KARG(j->w_off),
        DSA_KARG(j->w_rs),    DSA_KARG(j->w_hs),     DSA_KARG(kv_),         DSA_KARG(j->kv_off),
        DSA_KARG(j->kv_rs),   DSA_KARG(ksc_),        DSA_KARG(j->ksc_off),  DSA_KARG(j->ksc_rs),
        DSA_KARG(j->ksc_ds),  DSA_KARG(lim_),        DSA_KARG(j->lim_off),  DSA_KARG(j->lim_s0),
        DSA_KARG(j->lim_s1),  DSA_KARG(lim2_),       DSA_KARG(j->lim2_off), DSA_KARG(j->lim2_s0),
        DSA_KARG(j->ctx_rank), DSA_KARG(cache_),     DSA_KARG(j->c_off),    DSA_KARG(j->num_blocks),
        DSA_KARG(j->bs),      DSA_KARG(j->c_bstride), DSA_KARG(bt_),        DSA_KARG(j->bt_off),
        DSA_KARG(j->bt_rs),   DSA_KARG(j->bt_cs),    DSA_KARG(j->W),        DSA_KARG(j->ncols),
        DSA_KARG(j->clean),   DSA_KARG(out_),        DSA_KARG(j->o_off),    DSA_KARG(j->o_rs),
        DSA_KARG(j->out_bf16), DSA_KARG(j->q_al),    DSA_KARG(j->k_al),     DSA_KARG(ntiles),
        DSA_KARG(tile0),      DSA_KARG(row0),        DSA_KARG(q->faults)};
    /* In-order queue: the first launch waits, the last returns the event. */
    const int first = t0 == 0 && r0 == 0, last = t0 + ntiles >= total_tiles && r0 + nr >= j->rows;
    dsa_events sub = {first && ev ? ev->num_wait : 0, first && ev ? ev->wait : NULL,
                      last && ev ? ev->done : NULL};
    const size_t global = (size_t)nr * (size_t)ntiles * nt, local = nt;
    DSA_CHECK(dsa__launch(q, k, kname, (int)(sizeof args / sizeof args[0]), args, 1, &global,
                          &local, &sub));
  }
  return DSA_OK;
}

/* ---- validation helpers ------------------------------------------------------ */

/* dsa__check_tensor with either of two dtypes. */
static dsa_status check_tensor2(const dsa_tensor *t, const char *op, const char *arg,
                                dsa_dtype a, dsa_dtype b, int ndim) {
  if (t && t->dtype == b && a != b) return dsa__check_tensor(t, op, arg, b, ndim);
  return dsa__check_tensor(t, op, arg, a, ndim);
}

static dsa_status check_params(const dsa_mqa_logits_params *p, const char *op) {
  if (p && p->clean != 0 && p->clean != 1)
    return BAD("%s: p->clean = %d, must be 0 or 1", op, (int)p->clean);
  return DSA_OK;
}

static dsa_status check_logits(const dsa_tensor *t, const char *op, int64_t rows, int64_t cols) {
  DSA_CHECK(check_tensor2(t, op, "logits", DSA_F32, DSA_BF16, 2));
  DSA_CHECK(dsa__check_dim(t, op, "logits", 0, rows));
  DSA_CHECK(dsa__check_dim(t, op, "logits", 1, cols));
  DSA_CHECK(dsa__check_unit_inner(t, op, "logits"));
  if (cols > MAX_COLS)
    return BAD("%s: logits has %lld columns, at most %d are supported", op, (long long)cols,
               MAX_COLS);
  return DSA_OK;
}

static void set_logits(il_job *j, const dsa_tensor *t, const dsa_mqa_logits_params *p) {
  j->out = t->mem;
  j->o_off = t->offset;
  j->o_rs = bytes(t, 0);
  j->out_bf16 = t->dtype == DSA_BF16;
  j->ncols = (cl_int)t->shape[1];
  j->clean = p ? p->clean : 1;
}

static dsa_status check_head_dim(int64_t d, const char *op, const char *arg, int dim) {
  if (d < 32 || d % 32 != 0 || d > 65536)
    return BAD("%s: %s shape[%d] = %lld: the head dim D must be a positive multiple of 32 "
               "(at most 65536)",
               op, arg, dim, (long long)d);
  return DSA_OK;
}

static dsa_status check_heads(int64_t h, const char *op, const char *arg, int dim) {
  if (h < 1 || h > 65536)
    return BAD("%s: %s shape[%d] = %lld heads, must be in [1, 65536]", op, arg, dim,
               (long long)h);
  return DSA_OK;
}

static void set_weights(il_job *j, const dsa_tensor *w) {
  j->w = w->mem;
  j->w_off = w->offset;
  j->w_rs = bytes(w, 0);
  j->w_hs = bytes(w, 1);
}

/* ---- ragged prefill ------------------------------------------------------------ */

static dsa_status ragged(dsa_queue *q, const char *op, int fp4, const dsa_tensor *query,
                         const dsa_tensor *query_scale, const dsa_tensor *k,
                         const dsa_tensor *k_scale, const dsa_tensor *weights,
                         const dsa_tensor *ks, const dsa_tensor *ke, const dsa_tensor *logits,
                         const dsa_mqa_logits_params *p, const dsa_events *ev) {
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK(check_params(p, op));
  const dsa_dtype vt = fp4 ? DSA_E2M1X2 : DSA_E4M3;
  DSA_CHECK(check_tensor2(query, op, "query", vt, DSA_U8, 3));
  DSA_CHECK(dsa__check_unit_inner(query, op, "query"));
  const int64_t m = query->shape[0], h = query->shape[1];
  const int64_t d = fp4 ? query->shape[2] * 2 : query->shape[2];
  DSA_CHECK(check_heads(h, op, "query", 1));
  DSA_CHECK(check_head_dim(d, op, "query", 2));
  if (fp4) {
    DSA_CHECK(check_tensor2(query_scale, op, "query_scale", DSA_UE8M0, DSA_U8, 3));
    DSA_CHECK(dsa__check_dim(query_scale, op, "query_scale", 0, m));
    DSA_CHECK(dsa__check_dim(query_scale, op, "query_scale", 1, h));
    DSA_CHECK(dsa__check_dim(query_scale, op, "query_scale", 2, d / 32));
  }
  DSA_CHECK(check_tensor2(k, op, "k", vt, DSA_U8, 2));
  DSA_CHECK(dsa__check_dim(k, op, "k", 1, fp4 ? d / 2 : d));
  DSA_CHECK(dsa__check_unit_inner(k, op, "k"));
  const int64_t n = k->shape[0];
  if (fp4) {
    DSA_CHECK(check_tensor2(k_scale, op, "k_scale", DSA_UE8M0, DSA_U8, 2));
    DSA_CHECK(dsa__check_dim(k_scale, op, "k_scale", 0, n));
    DSA_CHECK(dsa__check_dim(k_scale, op, "k_scale", 1, d / 32));
  } else {
    DSA_CHECK(dsa__check_tensor(k_scale, op, "k_scale", DSA_F32, 1));
    DSA_CHECK(dsa__check_dim(k_scale, op, "k_scale", 0, n));
  }
  DSA_CHECK(dsa__check_tensor(weights, op, "weights", DSA_F32, 2));
  DSA_CHECK(dsa__check_dim(weights, op, "weights", 0, m));
  DSA_CHECK(dsa__check_dim(weights, op, "weights", 1, h));
  DSA_CHECK(dsa__check_tensor(ks, op, "ks", DSA_I32, 1));
  DSA_CHECK(dsa__check_dim(ks, op, "ks", 0, m));
  DSA_CHECK(dsa__check_tensor(ke, op, "ke", DSA_I32, 1));
  DSA_CHECK(dsa__check_dim(ke, op, "ke", 0, m));
  DSA_CHECK(check_logits(logits, op, m, n));
  if (m > INT32_MAX) return BAD("%s: query has %lld rows, at most 2^31 - 1", op, (long long)m);

  if (m == 0 || n == 0) return dsa__launch_nothing(q, ev);

  il_job j;
  memset(&j, 0, sizeof j);
  j.paged = 0;
  j.fp4 = fp4;
  j.rows = m;
  j.qv = query->mem;
  j.qv_off = query->offset;
  j.qv_bs = bytes(query, 0);
  j.qv_hs = bytes(query, 1);
  if (fp4) {
    j.qsc = query_scale->mem;
    j.qsc_off = query_scale->offset;
    j.qsc_bs = bytes(query_scale, 0);
    j.qsc_hs = bytes(query_scale, 1);
    j.qsc_ds = bytes(query_scale, 2);
  }
  j.H = (cl_int)h;
  j.D = (cl_int)d;
  j.next_n = 1;
  set_weights(&j, weights);
  j.kv = k->mem;
  j.kv_off = k->offset;
  j.kv_rs = bytes(k, 0);
  j.ksc = k_scale->mem;
  j.ksc_off = k_scale->offset;
  j.ksc_rs = bytes(k_scale, 0);
  j.ksc_ds = fp4 ? bytes(k_scale, 1) : 0;
  j.lim = ks->mem;
  j.lim_off = ks->offset;
  j.lim_s0 = bytes(ks, 0);
  j.lim2 = ke->mem;
  j.lim2_off = ke->offset;
  j.lim2_s0 = bytes(ke, 0);
  set_logits(&j, logits, p);
  const unsigned va = fp4 ? 8 : 16;
  j.q_al = aligned(j.qv_off, va) && aligned(j.qv_bs, va) && aligned(j.qv_hs, va);
  j.k_al = aligned(j.kv_off, va) && aligned(j.kv_rs, va);
  return launch(q, &j, ev);
}

dsa_status dsa_mqa_logits(dsa_queue *q, const dsa_tensor *query, const dsa_tensor *k,
                          const dsa_tensor *k_scale, const dsa_tensor *weights,
                          const dsa_tensor *ks, const dsa_tensor *ke, const dsa_tensor *logits,
                          const dsa_mqa_logits_params *p, const dsa_events *ev) {
  return ragged(q, "dsa_mqa_logits", 0, query, NULL, k, k_scale, weights, ks, ke, logits, p, ev);
}

dsa_status dsa_mqa_logits_mxfp4(dsa_queue *q, const dsa_tensor *query,
                                const dsa_tensor *query_scale, const dsa_tensor *k,
                                const dsa_tensor *k_scale, const dsa_tensor *weights,
                                const dsa_tensor *ks, const dsa_tensor *ke,
                                const dsa_tensor *logits, const dsa_mqa_logits_params *p,
                                const dsa_events *ev) {
  return ragged(q, "dsa_mqa_logits_mxfp4", 1, query, query_scale, k, k_scale, weights, ks, ke,
                logits, p, ev);
}

/* ---- paged decode ------------------------------------------------------------ */

#define PAGED_D 128

static dsa_status paged(dsa_queue *q, const char *op, int fp4, const dsa_tensor *query,
                        const dsa_tensor *query_scale, const dsa_paged_cache *cache,
                        const dsa_tensor *weights, const dsa_tensor *context_lens,
                        const dsa_tensor *block_tables, const dsa_tensor *logits,
                        const dsa_mqa_logits_params *p, const dsa_events *ev) {
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK(check_params(p, op));
  const dsa_dtype vt = fp4 ? DSA_E2M1X2 : DSA_E4M3;
  DSA_CHECK(check_tensor2(query, op, "query", vt, DSA_U8, 4));
  DSA_CHECK(dsa__check_unit_inner(query, op, "query"));
  const int64_t b = query->shape[0], next_n = query->shape[1], h = query->shape[2];
  if (next_n < 1 || next_n > 65536)
    return BAD("%s: query shape[1] = next_n = %lld, must be in [1, 65536]", op,
               (long long)next_n);
  DSA_CHECK(check_heads(h, op, "query", 2));
  DSA_CHECK(dsa__check_dim(query, op, "query", 3, fp4 ? PAGED_D / 2 : PAGED_D));
  if (fp4) {
    DSA_CHECK(check_tensor2(query_scale, op, "query_scale", DSA_UE8M0, DSA_U8, 4));
    for (int i = 0; i < 3; i++)
      DSA_CHECK(dsa__check_dim(query_scale, op, "query_scale", i, query->shape[i]));
    DSA_CHECK(dsa__check_dim(query_scale, op, "query_scale", 3, PAGED_D / 32));
  }
  DSA_CHECK(dsa__check_cache(cache, op, "cache",
                             fp4 ? DSA_CACHE_INDEXER_MXFP4 : DSA_CACHE_INDEXER_FP8));
  const int64_t rows = b * next_n;
  DSA_CHECK(dsa__check_tensor(weights, op, "weights", DSA_F32, 2));
  DSA_CHECK(dsa__check_dim(weights, op, "weights", 0, rows));
  DSA_CHECK(dsa__check_dim(weights, op, "weights", 1, h));
  if (!context_lens) return BAD("%s: context_lens is NULL", op);
  const int rank = context_lens->ndim == 2 ? 2 : 1;
  DSA_CHECK(dsa__check_tensor(context_lens, op, "context_lens", DSA_I32, rank));
  DSA_CHECK(dsa__check_dim(context_lens, op, "context_lens", 0, b));
  if (rank == 2) DSA_CHECK(dsa__check_dim(context_lens, op, "context_lens", 1, next_n));
  DSA_CHECK(dsa__check_tensor(block_tables, op, "block_tables", DSA_I32, 2));
  DSA_CHECK(dsa__check_dim(block_tables, op, "block_tables", 0, b));
  if (!logits) return BAD("%s: logits is NULL", op);
  DSA_CHECK(check_logits(logits, op, rows, logits->shape[1]));
  if (rows > INT32_MAX)
    return BAD("%s: query has %lld rows (B x next_n), at most 2^31 - 1", op, (long long)rows);

  const int64_t mml = logits->shape[1];
  if (rows == 0 || mml == 0) return dsa__launch_nothing(q, ev);

  il_job j;
  memset(&j, 0, sizeof j);
  j.paged = 1;
  j.fp4 = fp4;
  j.rows = rows;
  j.qv = query->mem;
  j.qv_off = query->offset;
  j.qv_bs = bytes(query, 0);
  j.qv_rs = bytes(query, 1);
  j.qv_hs = bytes(query, 2);
  if (fp4) {
    j.qsc = query_scale->mem;
    j.qsc_off = query_scale->offset;
    j.qsc_bs = bytes(query_scale, 0);
    j.qsc_rs = bytes(query_scale, 1);
    j.qsc_hs = bytes(query_scale, 2);
    j.qsc_ds = bytes(query_scale, 3);
  }
  j.H = (cl_int)h;
  j.D = PAGED_D;
  j.next_n = (cl_int)next_n;
  set_weights(&j, weights);
  j.lim = context_lens->mem;
  j.lim_off = context_lens->offset;
  j.lim_s0 = bytes(context_lens, 0);
  j.lim_s1 = rank == 2 ? bytes(context_lens, 1) : 0;
  j.ctx_rank = rank;
  j.cache = cache->num_blocks ? cache->mem : NULL;
  j.c_off = cache->offset;
  j.num_blocks = cache->num_blocks;
  j.bs = cache->block_size;
  j.c_bstride = (u64)cache->block_stride;
  j.bt = block_tables->mem;
  j.bt_off = block_tables->offset;
  j.bt_rs = bytes(block_tables, 0);
  j.bt_cs = bytes(block_tables, 1);
  j.W = block_tables->shape[1];
  set_logits(&j, logits, p);
  const unsigned va = fp4 ? 8 : 16;
  j.q_al = aligned(j.qv_off, va) && aligned(j.qv_bs, va) && aligned(j.qv_rs, va) &&
           aligned(j.qv_hs, va);
  j.k_al = aligned(j.c_off, va) && aligned(j.c_bstride, va);
  return launch(q, &j, ev);
}

dsa_status dsa_paged_mqa_logits(dsa_queue *q, const dsa_tensor *query,
                                const dsa_paged_cache *cache, const dsa_tensor *weights,
                                const dsa_tensor *context_lens, const dsa_tensor *block_tables,
                                const dsa_tensor *logits, const dsa_mqa_logits_params *p,
                                const dsa_events *ev) {
  return paged(q, "dsa_paged_mqa_logits", 0, query, NULL, cache, weights, context_lens,
               block_tables, logits, p, ev);
}

dsa_status dsa_paged_mqa_logits_mxfp4(dsa_queue *q, const dsa_tensor *query,
                                      const dsa_tensor *query_scale,
                                      const dsa_paged_cache *cache, const dsa_tensor *weights,
                                      const dsa_tensor *context_lens,
                                      const dsa_tensor *block_tables, const dsa_tensor *logits,
                                      const dsa_mqa_logits_params *p, const dsa_events *ev) {
  return paged(q, "dsa_paged_mqa_logits_mxfp4", 1, query, query_scale, cache, weights,
               context_lens, block_tables, logits, p, ev);
}
