/* Golden runners for the MLA fp8 paged-cache family (insert, gathers). */
#include "golden.h"

#include <stdlib.h>
#include <string.h>

static int run_mla_cache_insert(gcase *c) {
  npy_array *k = golden_load(c, "k", NPY_U2, 2), *slots = golden_load(c, "slot_mapping", NPY_I8, 1),
            *cin = golden_load(c, "cache_in", NPY_U1, 2),
            *cout = golden_load(c, "cache_out", NPY_U1, 2);
  if (c->failed) return -1;
  cl_mem km = golden_to_device(c, k->data, k->nbytes),
         sm = golden_to_device(c, slots->data, slots->nbytes),
         cm = golden_to_device(c, cin->data, cin->nbytes);
  dsa_paged_cache pc;
  if (c->failed || golden_cache_of(c, cm, &pc)) return -1;
  dsa_tensor kt = golden_tensor_of(km, k, DSA_BF16), st = golden_tensor_of(sm, slots, DSA_I64);
  if (golden_op_status(c, "dsa_mla_cache_insert",
                       dsa_mla_cache_insert(c->q, &kt, &st, &pc, NULL)))
    return -1;
  return golden_no_faults(c) || golden_compare(c, "cache_out", cm, cout) ? -1 : 0;
}

static int run_dequant_gather_slots(gcase *c) {
  npy_array *cache = golden_load(c, "cache", NPY_U1, 2),
            *idx = golden_load(c, "indices", NPY_I4, 1), *out = golden_load(c, "out", NPY_U2, 2);
  if (c->failed) return -1;
  /* Not zeros: every byte of out must be written. */
  cl_mem cm = golden_to_device(c, cache->data, cache->nbytes),
         im = golden_to_device(c, idx->data, idx->nbytes), om = golden_filled(c, out->nbytes, 0xEE);
  dsa_paged_cache pc;
  if (c->failed || golden_cache_of(c, cm, &pc)) return -1;
  dsa_tensor it = golden_tensor_of(im, idx, DSA_I32), ot = golden_tensor_of(om, out, DSA_BF16);
  if (golden_op_status(c, "dsa_mla_gather_slots",
                       dsa_mla_gather_slots(c->q, &it, &pc, &ot, NULL)))
    return -1;
  return golden_no_faults(c) || golden_compare(c, "out", om, out) ? -1 : 0;
}

static int run_dequant_gather_k_cache(gcase *c) {
  npy_array *cache = golden_load(c, "cache", NPY_U1, 2),
            *seq = golden_load(c, "seq_lens", NPY_I4, 1),
            *bt = golden_load(c, "block_table", NPY_I4, 2),
            *oin = golden_load(c, "out_in", NPY_U2, 3), *out = golden_load(c, "out", NPY_U2, 3);
  npy_array *gl = golden_load_opt(c, "gather_lens", NPY_I4, 1, 1);
  int64_t offset;
  if (c->failed || golden_meta_i64(c, "offset", &offset)) return -1;
  cl_mem cm = golden_to_device(c, cache->data, cache->nbytes),
         sm = golden_to_device(c, seq->data, seq->nbytes),
         bm = golden_to_device(c, bt->data, bt->nbytes),
         om = golden_to_device(c, oin->data, oin->nbytes),
         gm = gl ? golden_to_device(c, gl->data, gl->nbytes) : NULL;
  dsa_paged_cache pc;
  if (c->failed || golden_cache_of(c, cm, &pc)) return -1;
  dsa_tensor st = golden_tensor_of(sm, seq, DSA_I32), bt_t = golden_tensor_of(bm, bt, DSA_I32),
             ot = golden_tensor_of(om, oin, DSA_BF16),
             gt = gl ? golden_tensor_of(gm, gl, DSA_I32) : st;
  if (golden_op_status(c, "dsa_mla_gather_paged",
                       dsa_mla_gather_paged(c->q, &st, gl ? &gt : NULL, &bt_t, &pc, &ot, &(dsa_mla_gather_paged_params){.offset = offset},
                                            NULL)))
    return -1;
  return golden_no_faults(c) || golden_compare(c, "out", om, out) ? -1 : 0;
}

const golden_op golden_ops_mla[] = {
    {"mla_cache_insert", run_mla_cache_insert},
    {"dequant_gather_slots", run_dequant_gather_slots},
    {"dequant_gather_k_cache", run_dequant_gather_k_cache},
    {NULL, NULL},
};
