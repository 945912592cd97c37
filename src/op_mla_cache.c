/* MLA KV-cache operators (fp8_ds_mla, 584 B/token): insert, gather by slot,
 * gather through block tables. Kernels: cl/mla_cache.cl. */
#include <string.h>

#include "internal.h"

#define MLA_DIM 512
/* Kernel geometry (cl/mla_cache.cl): 32 lanes per row (lane l owns dims
 * [16l, 16l+16)), 8 rows per group; the gather serves 2 rows per item. */
#define LANES 32
#define ROWS 8
#define GATHER_UNROLL 2
const char dsa__defines_mla_cache[] = DSA_KDEF(LANES) DSA_KDEF(ROWS) DSA_KDEF(GATHER_UNROLL);

static size_t round_rows(int64_t n) { return (size_t)((n + ROWS - 1) / ROWS * ROWS); }


/* One kernel each; the insert's NoPE step trades block maxima by sub-group
 * shuffles where a 32-wide row shares a sub-group (build-time variants of the
 * same kernel, in cl/dsa_subgroup.h's order: NVIDIA warps, AMD waves, Intel
 * sub-groups), by local memory elsewhere. The same bytes either way. */
DSA_VARIANT_TABLE(dsa__variants_mla_cache_insert, "dsa_mla_cache_insert",
                  {"nv-shfl", DSA_CAP_NV_PTX, NULL, NULL},
                  {"amd-bperm", DSA_CAP_AMD_BUILTINS, NULL, NULL},
                  {"intel-sg32", DSA_CAP_INTEL_SUBGROUPS, dsa__refuse_no_sg32, NULL},
                  {"portable", 0, NULL, NULL});
DSA_VARIANT_TABLE(dsa__variants_mla_gather_slots, "dsa_mla_gather_slots",
                  {"portable", 0, NULL, NULL});
DSA_VARIANT_TABLE(dsa__variants_mla_gather_paged, "dsa_mla_gather_paged",
                  {"portable", 0, NULL, NULL});

void dsa_mla_cache_insert_params_default(dsa_mla_cache_insert_params *p) {
  if (p) memset(p, 0, sizeof *p);
}

dsa_status dsa_mla_cache_insert(dsa_queue *q, const dsa_tensor *k, const dsa_tensor *slot_mapping,
                                const dsa_paged_cache *cache, const dsa_mla_cache_insert_params *p,
                                const dsa_events *ev) {
  static const char op[] = "dsa_mla_cache_insert";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  DSA_CHECK(dsa__check_tensor(k, op, "k", DSA_BF16, 2));
  DSA_CHECK(dsa__check_dim(k, op, "k", 1, MLA_DIM));
  DSA_CHECK(dsa__check_unit_inner(k, op, "k"));
  DSA_CHECK(dsa__check_tensor(slot_mapping, op, "slot_mapping", DSA_I64, 1));
  DSA_CHECK(dsa__check_dim(slot_mapping, op, "slot_mapping", 0, k->shape[0]));
  DSA_CHECK(dsa__check_cache(cache, op, "cache", DSA_CACHE_MLA_FP8));

  const int64_t n = k->shape[0];
  if (n == 0) return dsa__launch_nothing(q, ev);

  if (dsa__pick(q, &dsa__variants_mla_cache_insert, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  /* k and the cache 16-byte aligned (the usual case) get the kernel built
   * for it (cl/mla_cache.cl); the same arguments. */
  const char *kname = dsa__tensor_align(k) >= 16 && dsa__paged_align(cache) >= 16
                          ? "mla_cache_insert_a16"
                          : "mla_cache_insert";
  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_MLA_CACHE, kname, &kern));
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_tensor(&a, k, 2);
  dsa__karg_tensor(&a, slot_mapping, 1);
  dsa__karg_i64(&a, n);
  dsa__karg_paged(&a, cache);
  dsa__karg_faults(&a);
  /* mla_cache_insert loops over tokens: at most the device's tuning row's
   * groups per compute unit (DSA_TUNING_MAP), each row several tokens whose
   * loads it overlaps. */
  size_t rows = round_rows(n);
  const size_t cap =
      (size_t)q->ctx->caps.compute_units * q->ctx->caps.tuning.insert_groups_per_cu * ROWS;
  if (cap > 0 && rows > cap) rows = cap;
  const size_t global[2] = {LANES, rows}, local[2] = {LANES, ROWS};
  return dsa__launch_args(q, kern, kname, &a, 2, global, local, ev);
}

void dsa_mla_gather_slots_params_default(dsa_mla_gather_slots_params *p) {
  if (p) memset(p, 0, sizeof *p);
}

dsa_status dsa_mla_gather_slots(dsa_queue *q, const dsa_tensor *indices,
                                const dsa_paged_cache *cache, const dsa_tensor *out,
                                const dsa_mla_gather_slots_params *p, const dsa_events *ev) {
  static const char op[] = "dsa_mla_gather_slots";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  DSA_CHECK(dsa__check_cache(cache, op, "cache", DSA_CACHE_MLA_FP8));
  DSA_CHECK(dsa__check_tensor(indices, op, "indices", DSA_I32, 1));
  DSA_CHECK(dsa__check_tensor(out, op, "out", DSA_BF16, 2));
  DSA_CHECK(dsa__check_dim(out, op, "out", 0, indices->shape[0]));
  DSA_CHECK(dsa__check_dim(out, op, "out", 1, MLA_DIM));
  DSA_CHECK(dsa__check_unit_inner(out, op, "out"));

  const int64_t s = indices->shape[0];
  if (s == 0) return dsa__launch_nothing(q, ev);

  if (dsa__pick(q, &dsa__variants_mla_gather_slots, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_MLA_CACHE, "mla_gather_slots", &kern));
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_paged(&a, cache);
  dsa__karg_tensor(&a, indices, 1);
  dsa__karg_i64(&a, s);
  dsa__karg_tensor(&a, out, 2);
  dsa__karg_faults(&a);
  const size_t global[2] = {LANES, round_rows((s + GATHER_UNROLL - 1) / GATHER_UNROLL)},
               local[2] = {LANES, ROWS};
  return dsa__launch_args(q, kern, "mla_gather_slots", &a, 2, global, local, ev);
}

void dsa_mla_gather_paged_params_default(dsa_mla_gather_paged_params *p) {
  if (p) memset(p, 0, sizeof *p);
}

dsa_status dsa_mla_gather_paged(dsa_queue *q, const dsa_tensor *seq_lens,
                                const dsa_tensor *gather_lens, const dsa_tensor *block_table,
                                const dsa_paged_cache *cache, const dsa_tensor *out,
                                const dsa_mla_gather_paged_params *p, const dsa_events *ev) {
  static const char op[] = "dsa_mla_gather_paged";
  const int64_t offset = p ? p->offset : 0;
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
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
                     "%s: p->offset = %lld must be in [0, out shape[1] = %lld]", op,
                     (long long)offset, (long long)out->shape[1]);

  const int64_t max_t = out->shape[1];
  /* The grid is LANES x maxT x R work-items: with zero strides an out of
   * 2^40 x 2^40 rows is inside its buffer, but the grid's item count
   * (2^86) wraps in size_t. A real out holds R x maxT rows of 1 KiB. */
  if (r > INT32_MAX || max_t > INT32_MAX || r * max_t > ((int64_t)1 << 40))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: out has %lld x %lld rows; R and maxT must be < 2^31 and R x maxT "
                     "<= 2^40",
                     op, (long long)r, (long long)max_t);
  if (r == 0 || max_t == 0) return dsa__launch_nothing(q, ev);
  if (dsa__pick(q, &dsa__variants_mla_gather_paged, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_MLA_CACHE, "mla_gather_paged", &kern));
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_paged(&a, cache);
  dsa__karg_tensor(&a, seq_lens, 1);
  dsa__karg_tensor(&a, gather_lens, 1);
  dsa__karg_i32(&a, gather_lens != NULL);
  dsa__karg_tensor(&a, block_table, 2);
  dsa__karg_i64(&a, block_table->shape[1]);
  dsa__karg_i64(&a, offset);
  dsa__karg_tensor(&a, out, 3);
  dsa__karg_i64(&a, max_t);
  dsa__karg_faults(&a);
  const size_t global[3] = {LANES, round_rows(max_t), (size_t)r}, local[3] = {LANES, ROWS, 1};
  return dsa__launch_args(q, kern, "mla_gather_paged", &a, 3, global, local, ev);
}
