/* MLA KV-cache operators (fp8_ds_mla, 584 B/token): insert, gather by slot,
 * gather through block tables. Kernels: cl/mla_cache.cl. */
#include "internal.h"

#define MLA_DIM 512
/* Kernel geometry (cl/mla_cache.cl): 32 lanes per row, 8 rows per group. */
#define LANES 32
#define ROWS 8

/* mla_cache_insert loops over tokens; launching at most this many groups
 * per compute unit leaves each row several tokens, whose loads it overlaps
 * (measured on an H200: see docs/PERFORMANCE.md). */
#define INSERT_GROUPS_PER_CU 4

static size_t round_rows(int64_t n) { return (size_t)((n + ROWS - 1) / ROWS * ROWS); }

typedef cl_ulong u64;

static int aligned16(u64 a, u64 b) { return a % 16 == 0 && b % 16 == 0; }

/* A cache's vector accesses are aligned when every block base is. */
static int cache_aligned(const dsa_paged_cache *c) {
  return aligned16(c->offset, (u64)c->block_stride);
}

/* The bf16 [rows, 512] matrix inside t as (offset, row stride) in bytes. */
static void row_geometry(const dsa_tensor *t, int row_dim, u64 *off, u64 *row_stride) {
  *off = t->offset;
  *row_stride = (u64)t->stride[row_dim] * dsa_dtype_size(t->dtype);
}

dsa_status dsa_mla_cache_insert(dsa_queue *q, const dsa_tensor *k, const dsa_tensor *slot_mapping,
                                const dsa_paged_cache *cache, const dsa_events *ev) {
  static const char op[] = "dsa_mla_cache_insert";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK(dsa__check_tensor(k, op, "k", DSA_BF16, 2));
  DSA_CHECK(dsa__check_dim(k, op, "k", 1, MLA_DIM));
  DSA_CHECK(dsa__check_unit_inner(k, op, "k"));
  DSA_CHECK(dsa__check_tensor(slot_mapping, op, "slot_mapping", DSA_I64, 1));
  DSA_CHECK(dsa__check_dim(slot_mapping, op, "slot_mapping", 0, k->shape[0]));
  DSA_CHECK(dsa__check_cache(cache, op, "cache", DSA_CACHE_MLA_FP8));

  const int64_t n = k->shape[0];
  if (n == 0) return dsa__launch_nothing(q, ev);

  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_MLA_CACHE, "mla_cache_insert", &kern));
  u64 k_off, k_rs;
  row_geometry(k, 0, &k_off, &k_rs);
  u64 s_off = slot_mapping->offset, s_st = (u64)slot_mapping->stride[0] * 8;
  u64 c_off = cache->offset, c_bs = (u64)cache->block_stride;
  cl_long nb = cache->num_blocks;
  cl_int bs = cache->block_size;
  cl_int k_al = aligned16(k_off, k_rs), c_al = cache_aligned(cache);
  cl_long nt = n;
  /* A zero-block cache still needs a valid buffer argument; any is fine since
   * every slot is then out of range and nothing is touched. */
  cl_mem cmem = cache->mem ? cache->mem : q->faults;
  const dsa_karg args[] = {DSA_KARG(k->mem), DSA_KARG(k_off),       DSA_KARG(k_rs),
                           DSA_KARG(slot_mapping->mem), DSA_KARG(s_off), DSA_KARG(s_st),
                           DSA_KARG(nt),     DSA_KARG(cmem),   DSA_KARG(c_off),       DSA_KARG(nb),
                           DSA_KARG(bs),     DSA_KARG(c_bs),        DSA_KARG(k_al),
                           DSA_KARG(c_al),   DSA_KARG(q->faults)};
  size_t rows = round_rows(n);
  const size_t cap = (size_t)q->ctx->caps.compute_units * INSERT_GROUPS_PER_CU * ROWS;
  if (cap > 0 && rows > cap) rows = cap;
  const size_t global[2] = {LANES, rows}, local[2] = {LANES, ROWS};
  return dsa__launch(q, kern, "mla_cache_insert", (int)(sizeof args / sizeof args[0]), args, 2,
                     global, local, ev);
}

dsa_status dsa_mla_gather_slots(dsa_queue *q, const dsa_paged_cache *cache,
                                const dsa_tensor *indices, const dsa_tensor *out,
                                const dsa_events *ev) {
  static const char op[] = "dsa_mla_gather_slots";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK(dsa__check_cache(cache, op, "cache", DSA_CACHE_MLA_FP8));
  DSA_CHECK(dsa__check_tensor(indices, op, "indices", DSA_I32, 1));
  DSA_CHECK(dsa__check_tensor(out, op, "out", DSA_BF16, 2));
  DSA_CHECK(dsa__check_dim(out, op, "out", 0, indices->shape[0]));
  DSA_CHECK(dsa__check_dim(out, op, "out", 1, MLA_DIM));
  DSA_CHECK(dsa__check_unit_inner(out, op, "out"));

  const int64_t s = indices->shape[0];
  if (s == 0) return dsa__launch_nothing(q, ev);

  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_MLA_CACHE, "mla_gather_slots", &kern));
  u64 o_off, o_rs;
  row_geometry(out, 0, &o_off, &o_rs);
  u64 c_off = cache->offset, c_bs = (u64)cache->block_stride;
  u64 i_off = indices->offset, i_st = (u64)indices->stride[0] * 4;
  cl_long nb = cache->num_blocks;
  cl_int bs = cache->block_size;
  cl_int c_al = cache_aligned(cache), o_al = aligned16(o_off, o_rs);
  cl_long nr = s;
  cl_mem cmem = cache->mem ? cache->mem : q->faults;
  const dsa_karg args[] = {DSA_KARG(cmem),  DSA_KARG(c_off), DSA_KARG(nb),
                           DSA_KARG(bs),    DSA_KARG(c_bs),  DSA_KARG(indices->mem),
                           DSA_KARG(i_off), DSA_KARG(i_st),  DSA_KARG(nr), DSA_KARG(out->mem),
                           DSA_KARG(o_off), DSA_KARG(o_rs),  DSA_KARG(c_al),
                           DSA_KARG(o_al),  DSA_KARG(q->faults)};
  /* mla_gather_slots serves 2 rows per work-item (GATHER_UNROLL). */
  const size_t global[2] = {LANES, round_rows((s + 1) / 2)}, local[2] = {LANES, ROWS};
  return dsa__launch(q, kern, "mla_gather_slots", (int)(sizeof args / sizeof args[0]), args, 2,
                     global, local, ev);
}

dsa_status dsa_mla_gather_paged(dsa_queue *q, const dsa_paged_cache *cache,
                                const dsa_tensor *seq_lens, const dsa_tensor *gather_lens,
                                const dsa_tensor *block_table, int64_t offset,
                                const dsa_tensor *out, const dsa_events *ev) {
  static const char op[] = "dsa_mla_gather_paged";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK(dsa__check_cache(cache, op, "cache", DSA_CACHE_MLA_FP8));
  DSA_CHECK(dsa__check_tensor(seq_lens, op, "seq_lens", DSA_I32, 1));
  const int64_t r = seq_lens->shape[0];
  if (gather_lens) {
    DSA_CHECK(dsa__check_tensor(gather_lens, op, "gather_lens", DSA_I32, 1));
    DSA_CHECK(dsa__check_dim(gather_lens, op, "gather_lens", 0, r));
  }
  DSA_CHECK(dsa__check_tensor(block_table, op, "block_table", DSA_I32, 2));
  DSA_CHECK(dsa__check_dim(block_table, op, "block_table", 0, r));
  DSA_CHECK(dsa__check_tensor(out, op, "out", DSA_BF16, 3));
  DSA_CHECK(dsa__check_dim(out, op, "out", 0, r));
  DSA_CHECK(dsa__check_dim(out, op, "out", 2, MLA_DIM));
  DSA_CHECK(dsa__check_unit_inner(out, op, "out"));
  if (offset < 0 || offset > out->shape[1])
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: offset = %lld must be in [0, out shape[1] = %lld]", op,
                     (long long)offset, (long long)out->shape[1]);

  const int64_t max_t = out->shape[1];
  if (r == 0 || max_t == 0) return dsa__launch_nothing(q, ev);
  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_MLA_CACHE, "mla_gather_paged", &kern));
  u64 c_off = cache->offset, c_bs = (u64)cache->block_stride;
  cl_long nb = cache->num_blocks;
  cl_int bs = cache->block_size;
  u64 sl_off = seq_lens->offset, sl_st = (u64)seq_lens->stride[0] * 4;
  cl_int has_gl = gather_lens != NULL;
  const dsa_tensor *gl = gather_lens ? gather_lens : seq_lens;
  u64 gl_off = gl->offset, gl_st = (u64)gl->stride[0] * 4;
  u64 tb_off = block_table->offset, tb_rs = (u64)block_table->stride[0] * 4,
      tb_cs = (u64)block_table->stride[1] * 4;
  cl_long tw = block_table->shape[1], off = offset, mt = max_t;
  u64 o_off = out->offset, o_req = (u64)out->stride[0] * 2, o_rs = (u64)out->stride[1] * 2;
  cl_int c_al = cache_aligned(cache), o_al = aligned16(o_off, o_rs) && o_req % 16 == 0;
  cl_mem cmem = cache->mem ? cache->mem : q->faults;
  cl_mem tmem = block_table->mem ? block_table->mem : q->faults;
  const dsa_karg args[] = {
      DSA_KARG(cmem),   DSA_KARG(c_off),  DSA_KARG(nb),    DSA_KARG(bs),
      DSA_KARG(c_bs),   DSA_KARG(seq_lens->mem), DSA_KARG(sl_off), DSA_KARG(sl_st),
      DSA_KARG(gl->mem), DSA_KARG(gl_off), DSA_KARG(gl_st), DSA_KARG(has_gl),
      DSA_KARG(tmem),   DSA_KARG(tb_off), DSA_KARG(tb_rs), DSA_KARG(tb_cs),
      DSA_KARG(tw),     DSA_KARG(off),    DSA_KARG(out->mem), DSA_KARG(o_off),
      DSA_KARG(o_req),  DSA_KARG(o_rs),   DSA_KARG(mt),    DSA_KARG(c_al),
      DSA_KARG(o_al),   DSA_KARG(q->faults)};
  const size_t global[3] = {LANES, round_rows(max_t), (size_t)r}, local[3] = {LANES, ROWS, 1};
  return dsa__launch(q, kern, "mla_gather_paged", (int)(sizeof args / sizeof args[0]), args, 3,
                     global, local, ev);
}
