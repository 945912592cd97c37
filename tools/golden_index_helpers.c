/* Golden runners for the index-building helpers (§10.3-10.5) and the q-norm
 * RoPE + KV insert (§8.4). Exact comparisons, except q_out of
 * qnorm_rope_kv_insert: vLLM's rsqrt is approximate, so up to 1 bf16 ulp
 * (SPEC.md). */
#include "golden.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int run_global_topk_indices(gcase *c) {
  npy_array *tk = golden_load(c, "topk_indices", NPY_I4, 2),
            *t2r = golden_load(c, "token_to_req", NPY_I4, 1),
            *bt = golden_load(c, "block_table", NPY_I4, 2),
            *valid = golden_load(c, "is_valid_token", NPY_U1, 1),
            *oi = golden_load(c, "out_indices", NPY_I4, 2),
            *ol = golden_load(c, "out_lens", NPY_I4, 1);
  int64_t bs;
  if (c->failed || golden_meta_i64(c, "block_size", &bs)) return -1;
  cl_mem tm = golden_to_device(c, tk->data, tk->nbytes),
         rm = golden_to_device(c, t2r->data, t2r->nbytes),
         bm = golden_to_device(c, bt->data, bt->nbytes),
         vm = golden_to_device(c, valid->data, valid->nbytes),
         om = golden_filled(c, oi->nbytes, 0xEE), lm = golden_filled(c, ol->nbytes, 0xEE);
  if (c->failed) return -1;
  dsa_tensor tt = golden_tensor_of(tm, tk, DSA_I32), rt = golden_tensor_of(rm, t2r, DSA_I32),
             btt = golden_tensor_of(bm, bt, DSA_I32), vt = golden_tensor_of(vm, valid, DSA_U8),
             ot = golden_tensor_of(om, oi, DSA_I32), lt = golden_tensor_of(lm, ol, DSA_I32);
  dsa_index_global_topk_params p;
  dsa_index_global_topk_params_default(&p);
  p.block_size = (int32_t)bs;
  if (golden_op_status(c, "dsa_index_global_topk",
                       dsa_index_global_topk(c->q, &tt, &rt, &btt, &vt, &ot, &lt, &p, NULL)))
    return -1;
  return golden_no_faults(c) || golden_compare(c, "out_indices", om, oi) ||
                 golden_compare(c, "out_lens", lm, ol)
             ? -1
             : 0;
}

static int run_combine_topk_swa_indices(gcase *c) {
  npy_array *tk = golden_load(c, "topk_indices", NPY_I4, 2),
            *qsl = golden_load(c, "query_start_loc", NPY_I4, 1),
            *sl = golden_load(c, "seq_lens", NPY_I4, 1),
            *gl = golden_load(c, "gather_lens", NPY_I4, 1),
            *oi = golden_load(c, "out_indices", NPY_I4, 2),
            *ol = golden_load(c, "out_lens", NPY_I4, 1);
  int64_t window, ratio, topk, m, n;
  if (c->failed || golden_meta_i64(c, "window", &window) ||
      golden_meta_i64(c, "compress_ratio", &ratio) || golden_meta_i64(c, "topk", &topk) ||
      golden_meta_i64(c, "M", &m) || golden_meta_i64(c, "N", &n))
    return -1;
  cl_mem tm = golden_to_device(c, tk->data, tk->nbytes),
         qm = golden_to_device(c, qsl->data, qsl->nbytes),
         sm = golden_to_device(c, sl->data, sl->nbytes),
         gm = golden_to_device(c, gl->data, gl->nbytes), om = golden_filled(c, oi->nbytes, 0xEE),
         lm = golden_filled(c, ol->nbytes, 0xEE);
  if (c->failed) return -1;
  dsa_tensor tt = golden_tensor_of(tm, tk, DSA_I32), qt = golden_tensor_of(qm, qsl, DSA_I32),
             st = golden_tensor_of(sm, sl, DSA_I32), gt = golden_tensor_of(gm, gl, DSA_I32),
             ot = golden_tensor_of(om, oi, DSA_I32), lt = golden_tensor_of(lm, ol, DSA_I32);
  dsa_index_combine_topk_swa_params p;
  dsa_index_combine_topk_swa_params_default(&p);
  p.window = (int32_t)window;
  p.compress_ratio = (int32_t)ratio;
  p.topk = (int32_t)topk;
  p.M = m;
  p.N = n;
  if (golden_op_status(c, "dsa_index_combine_topk_swa",
                       dsa_index_combine_topk_swa(c->q, &tt, &qt, &st, &gt, &ot, &lt, &p, NULL)))
    return -1;
  return golden_no_faults(c) || golden_compare(c, "out_indices", om, oi) ||
                 golden_compare(c, "out_lens", lm, ol)
             ? -1
             : 0;
}

/* Loads name (i32/u8, rank nd) into a device tensor; optional inputs may be
 * absent (NULL, no failure). */
static const dsa_tensor *load_tensor(gcase *c, const char *name, npy_dtype nt, dsa_dtype dt,
                                     int nd, int optional, dsa_tensor *slot) {
  npy_array *a = golden_load_opt(c, name, nt, nd, optional);
  if (!a) return NULL;
  cl_mem m = golden_to_device(c, a->data, a->nbytes);
  if (!m) return NULL;
  *slot = golden_tensor_of(m, a, dt);
  return slot;
}

static int run_mixed_sparse_indices(gcase *c) {
  int64_t td, window, ratio, topk, sbs, cbs, local;
  if (golden_meta_i64(c, "num_decode_tokens", &td) || golden_meta_i64(c, "window", &window) ||
      golden_meta_i64(c, "compress_ratio", &ratio) || golden_meta_i64(c, "topk", &topk) ||
      golden_meta_i64(c, "swa_block_size", &sbs) ||
      golden_meta_i64(c, "compressed_block_size", &cbs) ||
      golden_meta_i64(c, "decode_compressed_indices_are_local", &local))
    return -1;
  dsa_tensor ts[10];
  dsa_index_mixed_sparse_inputs in;
  in.decode_swa_indices = load_tensor(c, "decode_swa_indices", NPY_I4, DSA_I32, 2, 0, &ts[0]);
  in.decode_compressed_indices =
      load_tensor(c, "decode_compressed_indices", NPY_I4, DSA_I32, 2, 1, &ts[1]);
  in.decode_compressed_lens =
      load_tensor(c, "decode_compressed_topk_lens", NPY_I4, DSA_I32, 1, 1, &ts[2]);
  in.decode_is_valid_token =
      load_tensor(c, "decode_is_valid_token", NPY_U1, DSA_U8, 1, 1, &ts[3]);
  in.prefill_topk_indices =
      load_tensor(c, "prefill_topk_indices", NPY_I4, DSA_I32, 2, 0, &ts[4]);
  in.query_start_loc = load_tensor(c, "query_start_loc", NPY_I4, DSA_I32, 1, 0, &ts[5]);
  in.seq_lens = load_tensor(c, "seq_lens", NPY_I4, DSA_I32, 1, 0, &ts[6]);
  in.token_to_req = load_tensor(c, "token_to_req", NPY_I4, DSA_I32, 1, 0, &ts[7]);
  in.swa_block_table = load_tensor(c, "swa_block_table", NPY_I4, DSA_I32, 2, 0, &ts[8]);
  in.compressed_block_table =
      load_tensor(c, "compressed_block_table", NPY_I4, DSA_I32, 2, 1, &ts[9]);
  npy_array *oi = golden_load(c, "out_indices", NPY_I4, 2), *ol = golden_load(c, "out_lens", NPY_I4, 1);
  if (c->failed) return -1;
  if (in.decode_swa_indices->shape[0] != td)
    return golden_fail(c, "num_decode_tokens = %lld but decode_swa_indices has %lld rows",
                       (long long)td, (long long)in.decode_swa_indices->shape[0]);
  cl_mem om = golden_filled(c, oi->nbytes, 0xEE), lm = golden_filled(c, ol->nbytes, 0xEE);
  if (c->failed) return -1;
  dsa_tensor ot = golden_tensor_of(om, oi, DSA_I32), lt = golden_tensor_of(lm, ol, DSA_I32);
  dsa_index_mixed_sparse_params p;
  dsa_index_mixed_sparse_params_default(&p);
  p.window = (int32_t)window;
  p.compress_ratio = (int32_t)ratio;
  p.topk = (int32_t)topk;
  p.swa_block_size = (int32_t)sbs;
  p.compressed_block_size = (int32_t)cbs;
  p.decode_compressed_local = (int32_t)local;
  if (golden_op_status(c, "dsa_index_mixed_sparse",
                       dsa_index_mixed_sparse(c->q, &in, &ot, &lt, &p, NULL)))
    return -1;
  return golden_no_faults(c) || golden_compare(c, "out_indices", om, oi) ||
                 golden_compare(c, "out_lens", lm, ol)
             ? -1
             : 0;
}

/* The shared case (tools/cases/mla_qnorm.c), in place as vLLM runs it. */
static int run_qnorm_rope_kv_insert(gcase *c) {
  npy_array *qin = golden_load(c, "q_in", NPY_U2, 3), *kv = golden_load(c, "kv", NPY_U2, 2),
            *pos = golden_load(c, "positions", NPY_I8, 1),
            *cs = golden_load(c, "cos_sin", NPY_F4, 2),
            *slots = golden_load(c, "slot_mapping", NPY_I8, 1),
            *cin = golden_load(c, "cache_in", NPY_U1, 2),
            *qout = golden_load(c, "q_out", NPY_U2, 3),
            *cout = golden_load(c, "cache_out", NPY_U1, 2);
  double eps;
  case_qnorm qc = {.in_place = 1};
  if (c->failed || golden_meta_f64(c, "eps", &eps) ||
      golden_cache_geometry(c, cin, "cache_in", &qc.nb, &qc.bs, &qc.stride))
    return -1;
  const int64_t t = qin->shape[0];
  if (golden_shapes_agree(c, qin->shape[2] == 512 && kv->shape[0] == t && kv->shape[1] == 512 &&
                                 pos->shape[0] == t && slots->shape[0] == t &&
                                 cs->shape[1] == 64 && qout->shape[0] == t &&
                                 qout->shape[1] == qin->shape[1] && qout->shape[2] == 512 &&
                                 cout->nbytes == cin->nbytes,
                          "q_in and q_out [T, H, 512], kv [T, 512], positions and slot_mapping "
                          "[T], cos_sin [P, 64], cache_out as cache_in"))
    return -1;
  qc.t = t, qc.h = qin->shape[1], qc.np = cs->shape[0], qc.eps = (float)eps;
  qc.q = qin->data, qc.kv = kv->data, qc.pos = pos->data, qc.cs = cs->data;
  qc.slots = slots->data, qc.cache = cin->data;
  size_t off1 = 0;
  const case_qnorm_want want = {qout->data, cout->data, 1, &off1};
  const int rc = golden_run_case(c, &case_qnorm_ops, &qc, 0, &want);
  if (!rc && off1)
    fprintf(stderr, "note: qnorm_rope_kv_insert q_out: %zu of %zu values 1 bf16 ulp off vLLM\n",
            off1, qout->count);
  return rc;
}

const golden_op golden_ops_index_helpers[] = {
    {"global_topk_indices", run_global_topk_indices},
    {"combine_topk_swa_indices", run_combine_topk_swa_indices},
    {"mixed_sparse_indices", run_mixed_sparse_indices},
    {"qnorm_rope_kv_insert", run_qnorm_rope_kv_insert},
    {NULL, NULL},
};
