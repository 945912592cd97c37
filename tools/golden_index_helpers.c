/* Golden runners for the index-building helpers (§10.3-10.5) and the q-norm
 * RoPE + KV insert (§8.4), over the shared case descriptions
 * (tools/cases/index_helpers.c, mla_qnorm.c). Exact comparisons, except
 * q_out of qnorm_rope_kv_insert: vLLM's rsqrt is approximate, so up to 1
 * bf16 ulp (SPEC.md). */
#include "golden.h"

#include <stdio.h>

/* in[i] (or the output) over a golden array; absent when a is NULL. */
static void from_npy(case_ih_arr *a, npy_array *n, dsa_dtype dt) {
  if (!n) return;
  *a = (case_ih_arr){.host = n->data, .present = 1, .dt = dt, .d0 = n->shape[0],
                     .d1 = n->ndim == 2 ? n->shape[1] : -1, .rs = n->ndim == 2 ? n->shape[1] : 1};
}

/* The shared case (tools/cases/index_helpers.c): out_indices and out_lens
 * byte for byte, both starting as 0xEE bytes. */
static int run_ih(gcase *c, case_ih *ic, npy_array *oi, npy_array *ol) {
  from_npy(&ic->out, oi, DSA_I32), from_npy(&ic->lens, ol, DSA_I32);
  const case_ih_want want = {oi->data, ol->data};
  return golden_run_case(c, &case_ih_ops[ic->op], ic, 0xEE, &want);
}

static int run_global_topk_indices(gcase *c) {
  npy_array *tk = golden_load(c, "topk_indices", NPY_I4, 2),
            *t2r = golden_load(c, "token_to_req", NPY_I4, 1),
            *bt = golden_load(c, "block_table", NPY_I4, 2),
            *valid = golden_load(c, "is_valid_token", NPY_U1, 1),
            *oi = golden_load(c, "out_indices", NPY_I4, 2),
            *ol = golden_load(c, "out_lens", NPY_I4, 1);
  int64_t bs;
  if (c->failed || golden_meta_i64(c, "block_size", &bs)) return -1;
  const int64_t t = tk->shape[0];
  if (golden_shapes_agree(c, t2r->shape[0] == t && valid->shape[0] == t && oi->shape[0] == t &&
                                 oi->shape[1] == tk->shape[1] && ol->shape[0] == t,
                          "topk_indices and out_indices [T, K], token_to_req, is_valid_token "
                          "and out_lens [T]"))
    return -1;
  case_ih ic = {.op = CASE_IH_GTK};
  from_npy(&ic.in[0], tk, DSA_I32), from_npy(&ic.in[1], t2r, DSA_I32);
  from_npy(&ic.in[2], bt, DSA_I32), from_npy(&ic.in[3], valid, DSA_U8);
  dsa_index_global_topk_params_default(&ic.p.gtk);
  ic.p.gtk.block_size = (int32_t)bs;
  return run_ih(c, &ic, oi, ol);
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
  const int64_t r = sl->shape[0];
  if (golden_shapes_agree(c, qsl->shape[0] == r + 1 && gl->shape[0] == r &&
                                 ol->shape[0] == oi->shape[0],
                          "query_start_loc [R + 1], seq_lens and gather_lens [R], out_indices "
                          "[T, W] and out_lens [T]"))
    return -1;
  case_ih ic = {.op = CASE_IH_COMB};
  from_npy(&ic.in[0], tk, DSA_I32), from_npy(&ic.in[1], qsl, DSA_I32);
  from_npy(&ic.in[2], sl, DSA_I32), from_npy(&ic.in[3], gl, DSA_I32);
  dsa_index_combine_topk_swa_params_default(&ic.p.comb);
  ic.p.comb.window = (int32_t)window;
  ic.p.comb.compress_ratio = (int32_t)ratio;
  ic.p.comb.topk = (int32_t)topk;
  ic.p.comb.M = m;
  ic.p.comb.N = n;
  return run_ih(c, &ic, oi, ol);
}

static int run_mixed_sparse_indices(gcase *c) {
  int64_t td, window, ratio, topk, sbs, cbs, local;
  if (golden_meta_i64(c, "num_decode_tokens", &td) || golden_meta_i64(c, "window", &window) ||
      golden_meta_i64(c, "compress_ratio", &ratio) || golden_meta_i64(c, "topk", &topk) ||
      golden_meta_i64(c, "swa_block_size", &sbs) ||
      golden_meta_i64(c, "compressed_block_size", &cbs) ||
      golden_meta_i64(c, "decode_compressed_indices_are_local", &local))
    return -1;
  /* dsa_index_mixed_sparse_inputs' order; optional ones may be absent. */
  static const struct {
    const char *name;
    npy_dtype nt;
    int nd, optional;
  } ins[10] = {{"decode_swa_indices", NPY_I4, 2, 0},
               {"decode_compressed_indices", NPY_I4, 2, 1},
               {"decode_compressed_topk_lens", NPY_I4, 1, 1},
               {"decode_is_valid_token", NPY_U1, 1, 1},
               {"prefill_topk_indices", NPY_I4, 2, 0},
               {"query_start_loc", NPY_I4, 1, 0},
               {"seq_lens", NPY_I4, 1, 0},
               {"token_to_req", NPY_I4, 1, 0},
               {"swa_block_table", NPY_I4, 2, 0},
               {"compressed_block_table", NPY_I4, 2, 1}};
  case_ih ic = {.op = CASE_IH_MIXED};
  npy_array *a[10];
  for (int i = 0; i < 10; i++) {
    a[i] = golden_load_opt(c, ins[i].name, ins[i].nt, ins[i].nd, ins[i].optional);
    from_npy(&ic.in[i], a[i], ins[i].nt == NPY_U1 ? DSA_U8 : DSA_I32);
  }
  npy_array *oi = golden_load(c, "out_indices", NPY_I4, 2), *ol = golden_load(c, "out_lens", NPY_I4, 1);
  if (c->failed) return -1;
  if (a[0]->shape[0] != td)
    return golden_fail(c, "num_decode_tokens = %lld but decode_swa_indices has %lld rows",
                       (long long)td, (long long)a[0]->shape[0]);
  if (golden_shapes_agree(c, ol->shape[0] == oi->shape[0], "out_indices [T, W], out_lens [T]"))
    return -1;
  dsa_index_mixed_sparse_params_default(&ic.p.mixed);
  ic.p.mixed.window = (int32_t)window;
  ic.p.mixed.compress_ratio = (int32_t)ratio;
  ic.p.mixed.topk = (int32_t)topk;
  ic.p.mixed.swa_block_size = (int32_t)sbs;
  ic.p.mixed.compressed_block_size = (int32_t)cbs;
  ic.p.mixed.decode_compressed_local = (int32_t)local;
  return run_ih(c, &ic, oi, ol);
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
