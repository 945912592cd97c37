/* Indexer K cache (FP8 132 B/token, MXFP4 68 B/token): quantize + insert and
 * the prefill gather (SPEC-reference §3.2, §3.3, §5.1, §6.5). Kernels:
 * cl/indexer_k.cl. */
#include "internal.h"

typedef cl_ulong u64;

#define BAD(...) dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, __VA_ARGS__)

#define IK_DIM 128
#define IK_ROWS 64   /* insert: rows per work-group (cl/indexer_k.cl) */
#define IKG_ROWS 32  /* gather: rows per work-group */

static int al16(u64 a) { return a % 16 == 0; }

/* The cache is one of the two indexer formats. */
static dsa_status check_indexer_cache(const dsa_paged_cache *c, const char *op) {
  if (!c) return BAD("%s: cache is NULL", op);
  if (c->format != DSA_CACHE_INDEXER_FP8 && c->format != DSA_CACHE_INDEXER_MXFP4)
    return BAD("%s: cache has format %d, this operator needs DSA_CACHE_INDEXER_FP8 (%d) or "
               "DSA_CACHE_INDEXER_MXFP4 (%d)",
               op, (int)c->format, (int)DSA_CACHE_INDEXER_FP8, (int)DSA_CACHE_INDEXER_MXFP4);
  return dsa__check_cache(c, op, "cache", c->format);
}

dsa_status dsa_indexer_k_insert(dsa_queue *q, const dsa_tensor *k, const dsa_tensor *slot_mapping,
                                const dsa_paged_cache *cache, dsa_e2m1_mode e2m1,
                                const dsa_events *ev) {
  static const char op[] = "dsa_indexer_k_insert";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK(dsa__check_tensor(k, op, "k", DSA_BF16, 2));
  DSA_CHECK(dsa__check_dim(k, op, "k", 1, IK_DIM));
  DSA_CHECK(dsa__check_unit_inner(k, op, "k"));
  DSA_CHECK(dsa__check_tensor(slot_mapping, op, "slot_mapping", DSA_I64, 1));
  DSA_CHECK(dsa__check_dim(slot_mapping, op, "slot_mapping", 0, k->shape[0]));
  DSA_CHECK(check_indexer_cache(cache, op));
  if (e2m1 != DSA_E2M1_RNE && e2m1 != DSA_E2M1_LEGACY)
    return BAD("%s: e2m1 = %d is not a dsa_e2m1_mode", op, (int)e2m1);

  const int64_t n = k->shape[0];
  if (n == 0) return dsa__launch_nothing(q, ev);

  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_INDEXER_K, "indexer_k_insert", &kern));
  u64 k_off = k->offset, k_rs = (u64)k->stride[0] * 2;
  cl_int k_al = al16(k_off) && al16(k_rs);
  u64 s_off = slot_mapping->offset, s_st = (u64)slot_mapping->stride[0] * 8;
  cl_long nt = n, nb = cache->num_blocks;
  u64 c_off = cache->offset, c_bs = (u64)cache->block_stride;
  cl_int bs = cache->block_size, c_al = al16(c_off) && al16(c_bs);
  cl_int mx = cache->format == DSA_CACHE_INDEXER_MXFP4, mode = e2m1;
  cl_mem cmem = cache->mem ? cache->mem : q->faults;
  const dsa_karg args[] = {DSA_KARG(k->mem), DSA_KARG(k_off), DSA_KARG(k_rs), DSA_KARG(k_al),
                           DSA_KARG(slot_mapping->mem), DSA_KARG(s_off), DSA_KARG(s_st),
                           DSA_KARG(nt),     DSA_KARG(cmem),  DSA_KARG(c_off), DSA_KARG(nb),
                           DSA_KARG(bs),     DSA_KARG(c_bs),  DSA_KARG(c_al),  DSA_KARG(mx),
                           DSA_KARG(mode),   DSA_KARG(q->faults)};
  const size_t global[2] = {4, (size_t)((n + IK_ROWS - 1) / IK_ROWS * IK_ROWS)},
               local[2] = {4, IK_ROWS};
  return dsa__launch(q, kern, "indexer_k_insert", (int)(sizeof args / sizeof args[0]), args, 2,
                     global, local, ev);
}

dsa_status dsa_indexer_k_gather(dsa_queue *q, const dsa_paged_cache *cache,
                                const dsa_tensor *block_table, const dsa_tensor *cu_seqlens,
                                const dsa_tensor *k_out, const dsa_tensor *k_scale,
                                const dsa_events *ev) {
  static const char op[] = "dsa_indexer_k_gather";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK(check_indexer_cache(cache, op));
  const int mxfp4 = cache->format == DSA_CACHE_INDEXER_MXFP4;
  DSA_CHECK(dsa__check_tensor(cu_seqlens, op, "cu_seqlens", DSA_I32, 1));
  if (cu_seqlens->shape[0] < 1)
    return BAD("%s: cu_seqlens has length 0, expected R + 1 >= 1", op);
  const int64_t R = cu_seqlens->shape[0] - 1;
  if (R >= ((int64_t)1 << 31) - 1) return BAD("%s: cu_seqlens is too long", op);
  DSA_CHECK(dsa__check_tensor(block_table, op, "block_table", DSA_I32, 2));
  DSA_CHECK(dsa__check_dim(block_table, op, "block_table", 0, R));
  DSA_CHECK(dsa__check_tensor(k_out, op, "k_out", mxfp4 ? DSA_E2M1X2 : DSA_E4M3, 2));
  DSA_CHECK(dsa__check_dim(k_out, op, "k_out", 1, mxfp4 ? 64 : 128));
  DSA_CHECK(dsa__check_unit_inner(k_out, op, "k_out"));
  const int64_t total = k_out->shape[0];
  if (total >= ((int64_t)1 << 31))
    return BAD("%s: k_out has %lld rows, more than 2^31 - 1", op, (long long)total);
  if (mxfp4) {
    DSA_CHECK(dsa__check_tensor(k_scale, op, "k_scale", DSA_UE8M0, 2));
    DSA_CHECK(dsa__check_dim(k_scale, op, "k_scale", 1, 4));
    DSA_CHECK(dsa__check_unit_inner(k_scale, op, "k_scale"));
  } else {
    DSA_CHECK(dsa__check_tensor(k_scale, op, "k_scale", DSA_F32, 1));
  }
  DSA_CHECK(dsa__check_dim(k_scale, op, "k_scale", 0, total));

  if (R == 0 || total == 0) return dsa__launch_nothing(q, ev);

  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_INDEXER_K, "indexer_k_gather", &kern));
  u64 c_off = cache->offset, c_bs = (u64)cache->block_stride;
  cl_long nb = cache->num_blocks;
  cl_int bs = cache->block_size, c_al = al16(c_off) && al16(c_bs), mx = mxfp4;
  u64 bt_off = block_table->offset, bt_rs = (u64)block_table->stride[0] * 4,
      bt_cs = (u64)block_table->stride[1] * 4;
  cl_long W = block_table->shape[1];
  u64 cu_off = cu_seqlens->offset, cu_st = (u64)cu_seqlens->stride[0] * 4;
  cl_int rr = (cl_int)R;
  u64 ko_off = k_out->offset, ko_rs = (u64)k_out->stride[0];
  cl_int ko_al = al16(ko_off) && al16(ko_rs);
  u64 ks_off = k_scale->offset, ks_rs = (u64)k_scale->stride[0] * (mxfp4 ? 1 : 4);
  cl_long tt = total;
  cl_mem cmem = cache->mem ? cache->mem : q->faults;
  cl_mem tmem = block_table->mem ? block_table->mem : q->faults;
  const dsa_karg args[] = {
      DSA_KARG(cmem),  DSA_KARG(c_off), DSA_KARG(nb),     DSA_KARG(bs),    DSA_KARG(c_bs),
      DSA_KARG(c_al),  DSA_KARG(mx),    DSA_KARG(tmem),   DSA_KARG(bt_off), DSA_KARG(bt_rs),
      DSA_KARG(bt_cs), DSA_KARG(W),     DSA_KARG(cu_seqlens->mem), DSA_KARG(cu_off),
      DSA_KARG(cu_st), DSA_KARG(rr),    DSA_KARG(k_out->mem), DSA_KARG(ko_off), DSA_KARG(ko_rs),
      DSA_KARG(ko_al), DSA_KARG(k_scale->mem), DSA_KARG(ks_off), DSA_KARG(ks_rs), DSA_KARG(tt),
      DSA_KARG(q->faults)};
  const size_t lanes = mxfp4 ? 4 : 8;
  const size_t global[2] = {lanes, (size_t)((total + IKG_ROWS - 1) / IKG_ROWS * IKG_ROWS)},
               local[2] = {lanes, IKG_ROWS};
  return dsa__launch(q, kern, "indexer_k_gather", (int)(sizeof args / sizeof args[0]), args, 2,
                     global, local, ev);
}
