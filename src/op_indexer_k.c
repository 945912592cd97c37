/* Indexer K cache (FP8 132 B/token, MXFP4 68 B/token): quantize + insert and
 * the prefill gather (SPEC-reference §3.2, §3.3, §5.1, §6.5). Kernels:
 * cl/indexer_k.cl. */
#include <string.h>

#include "internal.h"

#define BAD(...) dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, __VA_ARGS__)

#define IK_DIM 128
#define IK_ROWS 64   /* insert: rows per work-group (cl/indexer_k.cl) */
#define IKG_ROWS 32  /* gather: rows per work-group */
const char dsa__defines_indexer_k[] = DSA_KDEF(IK_ROWS) DSA_KDEF(IKG_ROWS);

DSA_VARIANT_TABLE(dsa__variants_indexer_k_insert, "dsa_indexer_k_insert",
                  {"portable", 0, NULL, NULL});
DSA_VARIANT_TABLE(dsa__variants_indexer_k_gather, "dsa_indexer_k_gather",
                  {"portable", 0, NULL, NULL});

/* The cache is one of the two indexer formats. */
static dsa_status check_indexer_cache(const dsa_paged_cache *c, const char *op) {
  if (!c) return BAD("%s: cache is NULL", op);
  if (c->format != DSA_CACHE_INDEXER_FP8 && c->format != DSA_CACHE_INDEXER_MXFP4)
    return BAD("%s: cache has format %d, this operator needs DSA_CACHE_INDEXER_FP8 (%d) or "
               "DSA_CACHE_INDEXER_MXFP4 (%d)",
               op, (int)c->format, (int)DSA_CACHE_INDEXER_FP8, (int)DSA_CACHE_INDEXER_MXFP4);
  return dsa__check_cache(c, op, "cache", c->format);
}

void dsa_indexer_k_insert_params_default(dsa_indexer_k_insert_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->e2m1 = DSA_E2M1_RNE;
}

dsa_status dsa_indexer_k_insert(dsa_queue *q, const dsa_tensor *k, const dsa_tensor *slot_mapping,
                                const dsa_paged_cache *cache,
                                const dsa_indexer_k_insert_params *p, const dsa_events *ev) {
  static const char op[] = "dsa_indexer_k_insert";
  dsa_indexer_k_insert_params d;
  dsa_indexer_k_insert_params_default(&d);
  const dsa_e2m1_mode e2m1 = p ? p->e2m1 : d.e2m1;
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  DSA_CHECK(dsa__check_tensor(k, op, "k", DSA_BF16, 2));
  DSA_CHECK(dsa__check_dim(k, op, "k", 1, IK_DIM));
  DSA_CHECK(dsa__check_unit_inner(k, op, "k"));
  DSA_CHECK(dsa__check_tensor(slot_mapping, op, "slot_mapping", DSA_I64, 1));
  DSA_CHECK(dsa__check_dim(slot_mapping, op, "slot_mapping", 0, k->shape[0]));
  DSA_CHECK(check_indexer_cache(cache, op));
  if (e2m1 != DSA_E2M1_RNE && e2m1 != DSA_E2M1_LEGACY)
    return BAD("%s: p->e2m1 = %d is not a dsa_e2m1_mode", op, (int)e2m1);

  const int64_t n = k->shape[0];
  if (n == 0) return dsa__launch_nothing(q, ev);

  if (dsa__pick(q, &dsa__variants_indexer_k_insert, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_INDEXER_K, "indexer_k_insert", &kern));
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_tensor(&a, k, 2);
  dsa__karg_tensor(&a, slot_mapping, 1);
  dsa__karg_i64(&a, n);
  dsa__karg_paged(&a, cache);
  dsa__karg_i32(&a, cache->format == DSA_CACHE_INDEXER_MXFP4);
  dsa__karg_i32(&a, e2m1);
  dsa__karg_faults(&a);
  const size_t global[2] = {4, (size_t)((n + IK_ROWS - 1) / IK_ROWS * IK_ROWS)},
               local[2] = {4, IK_ROWS};
  return dsa__launch_args(q, kern, "indexer_k_insert", &a, 2, global, local, ev);
}

void dsa_indexer_k_gather_params_default(dsa_indexer_k_gather_params *p) {
  if (p) memset(p, 0, sizeof *p);
}

dsa_status dsa_indexer_k_gather(dsa_queue *q, const dsa_tensor *cu_seqlens,
                                const dsa_tensor *block_table, const dsa_paged_cache *cache,
                                const dsa_tensor *k_out, const dsa_tensor *k_scale,
                                const dsa_indexer_k_gather_params *p, const dsa_events *ev) {
  static const char op[] = "dsa_indexer_k_gather";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
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

  if (dsa__pick(q, &dsa__variants_indexer_k_gather, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_INDEXER_K, "indexer_k_gather", &kern));
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_paged(&a, cache);
  dsa__karg_i32(&a, mxfp4);
  dsa__karg_tensor(&a, block_table, 2);
  dsa__karg_i64(&a, block_table->shape[1]);
  dsa__karg_tensor(&a, cu_seqlens, 1);
  dsa__karg_i32(&a, (cl_int)R);
  dsa__karg_tensor(&a, k_out, 2);
  dsa__karg_tensor(&a, k_scale, 2); /* f32 [N] or ue8m0 [N, 4] */
  dsa__karg_i64(&a, total);
  dsa__karg_faults(&a);
  const size_t lanes = mxfp4 ? 4 : 8;
  const size_t global[2] = {lanes, (size_t)((total + IKG_ROWS - 1) / IKG_ROWS * IKG_ROWS)},
               local[2] = {lanes, IKG_ROWS};
  return dsa__launch_args(q, kern, "indexer_k_gather", &a, 2, global, local, ev);
}
