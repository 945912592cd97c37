/* Golden runners for the MLA fp8 paged-cache family (insert, gathers): the
 * shared case descriptions (tools/cases/mla_cache.c) over the golden's
 * arrays. */
#include "golden.h"

#include <stdlib.h>
#include <string.h>

static int run_mla_cache_insert(gcase *c) {
  npy_array *k = golden_load(c, "k", NPY_U2, 2), *slots = golden_load(c, "slot_mapping", NPY_I8, 1),
            *cin = golden_load(c, "cache_in", NPY_U1, 2),
            *cout = golden_load(c, "cache_out", NPY_U1, 2);
  case_mla_insert mc = {0};
  if (c->failed || golden_cache_geometry(c, cin, "cache_in", &mc.nb, &mc.bs, &mc.stride) ||
      golden_shapes_agree(c, k->shape[1] == 512 && slots->shape[0] == k->shape[0] &&
                                 cout->nbytes == cin->nbytes,
                          "k [N, 512], slot_mapping [N], cache_out as cache_in"))
    return -1;
  mc.n = k->shape[0], mc.k = k->data, mc.slots = slots->data, mc.cache = cin->data;
  return golden_run_case(c, &case_mla_insert_ops, &mc, 0, cout->data);
}

static int run_dequant_gather_slots(gcase *c) {
  npy_array *cache = golden_load(c, "cache", NPY_U1, 2),
            *idx = golden_load(c, "indices", NPY_I4, 1), *out = golden_load(c, "out", NPY_U2, 2);
  case_mla_slots mc = {0};
  if (c->failed || golden_cache_geometry(c, cache, "cache", &mc.nb, &mc.bs, &mc.stride) ||
      golden_shapes_agree(c, out->shape[0] == idx->shape[0] && out->shape[1] == 512,
                          "indices [S], out [S, 512]"))
    return -1;
  mc.s = idx->shape[0], mc.cache = cache->data, mc.idx = idx->data;
  /* out starts 0xEE, not zeros: every byte of it must be written. */
  return golden_run_case(c, &case_mla_slots_ops, &mc, 0xEE, out->data);
}

static int run_dequant_gather_k_cache(gcase *c) {
  npy_array *cache = golden_load(c, "cache", NPY_U1, 2),
            *seq = golden_load(c, "seq_lens", NPY_I4, 1),
            *bt = golden_load(c, "block_table", NPY_I4, 2),
            *oin = golden_load(c, "out_in", NPY_U2, 3), *out = golden_load(c, "out", NPY_U2, 3);
  npy_array *gl = golden_load_opt(c, "gather_lens", NPY_I4, 1, 1);
  case_mla_paged mc = {0};
  if (c->failed || golden_meta_i64(c, "offset", &mc.offset) ||
      golden_cache_geometry(c, cache, "cache", &mc.nb, &mc.bs, &mc.stride))
    return -1;
  const int64_t r = seq->shape[0];
  if (golden_shapes_agree(c, bt->shape[0] == r && (!gl || gl->shape[0] == r) &&
                                 oin->shape[0] == r && oin->shape[2] == 512 &&
                                 out->shape[0] == r && out->shape[1] == oin->shape[1] &&
                                 out->shape[2] == 512,
                          "seq_lens [R], gather_lens [R], block_table [R, W], out_in and out "
                          "[R, maxT, 512]"))
    return -1;
  mc.has_gl = gl != NULL, mc.r = r, mc.w = bt->shape[1], mc.max_t = oin->shape[1];
  mc.cache = cache->data, mc.seq = seq->data, mc.gl = gl ? gl->data : NULL, mc.table = bt->data;
  mc.out_in = oin->data;
  return golden_run_case(c, &case_mla_paged_ops, &mc, 0, out->data);
}

const golden_op golden_ops_mla[] = {
    {"mla_cache_insert", run_mla_cache_insert},
    {"dequant_gather_slots", run_dequant_gather_slots},
    {"dequant_gather_k_cache", run_dequant_gather_k_cache},
    {NULL, NULL},
};
