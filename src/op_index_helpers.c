/* Index-building helpers (§10.1-10.5). Kernels: cl/index_helpers.cl.
 * Launchers validate every argument, pass byte offsets and byte strides,
 * and launch one work-group of LANES items per token row (one item per
 * token for the compressed slot mapping). */
#include <string.h>

#include "internal.h"
#include "dsacl/index_helpers.h"

#define IH_LANES 64 /* work-items per token row (cl/index_helpers.cl) */
#define LANES IH_LANES
#define I32_MAX_ROWS (((int64_t)1 << 31) - 1)
const char dsa__defines_index_helpers[] = DSA_KDEF(IH_LANES);

/* One portable kernel each (index arithmetic, no vendor path). */
DSA_VARIANT_TABLE(dsa__variants_compressed_slot_mapping, "dsa_index_compressed_slot_mapping",
                  {"portable", 0, NULL, NULL});
DSA_VARIANT_TABLE(dsa__variants_swa_indices, "dsa_index_swa", {"portable", 0, NULL, NULL});
DSA_VARIANT_TABLE(dsa__variants_global_topk_indices, "dsa_index_global_topk",
                  {"portable", 0, NULL, NULL});
DSA_VARIANT_TABLE(dsa__variants_c128_topk_indices, "dsa_index_c128_topk",
                  {"portable", 0, NULL, NULL});
DSA_VARIANT_TABLE(dsa__variants_combine_topk_swa, "dsa_index_combine_topk_swa",
                  {"portable", 0, NULL, NULL});
DSA_VARIANT_TABLE(dsa__variants_mixed_sparse_indices, "dsa_index_mixed_sparse",
                  {"portable", 0, NULL, NULL});

#define BAD(...) dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, __VA_ARGS__)

void dsa_index_compressed_slot_mapping_params_default(dsa_index_compressed_slot_mapping_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->compress_ratio = 4;
  p->block_size = 64;
}
void dsa_index_swa_params_default(dsa_index_swa_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->window = 128;
  p->block_size = 64;
}
void dsa_index_global_topk_params_default(dsa_index_global_topk_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->block_size = 64;
}
void dsa_index_c128_topk_params_default(dsa_index_c128_topk_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->compress_ratio = 128;
  p->block_size = 2;
}
void dsa_index_combine_topk_swa_params_default(dsa_index_combine_topk_swa_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->window = 128;
  p->compress_ratio = 4;
  p->topk = 512;
}
void dsa_index_mixed_sparse_params_default(dsa_index_mixed_sparse_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->window = 128;
  p->compress_ratio = 4;
  p->topk = 512;
  p->swa_block_size = 64;
  p->compressed_block_size = 64;
}

/* ---- argument helpers ----------------------------------------------------------- */

static dsa_status check_vec(const dsa_tensor *t, const char *op, const char *arg, dsa_dtype dt,
                            int64_t n) {
  DSA_CHECK(dsa__check_tensor(t, op, arg, dt, 1));
  if (n >= 0) DSA_CHECK(dsa__check_dim(t, op, arg, 0, n));
  return DSA_OK;
}

static dsa_status check_table(const dsa_tensor *t, const char *op, const char *arg,
                              int64_t rows) {
  DSA_CHECK(dsa__check_tensor(t, op, arg, DSA_I32, 2));
  if (rows >= 0) DSA_CHECK(dsa__check_dim(t, op, arg, 0, rows));
  if (t->shape[0] > I32_MAX_ROWS || t->shape[1] > I32_MAX_ROWS)
    return BAD("%s: %s is %lld x %lld; both sizes must be < 2^31", op, arg,
               (long long)t->shape[0], (long long)t->shape[1]);
  return DSA_OK;
}

static dsa_status check_pos_int(const char *op, const char *name, int64_t v, int64_t lo) {
  if (v < lo || v > I32_MAX_ROWS)
    return BAD("%s: p->%s = %lld must be in [%lld, 2^31)", op, name, (long long)v,
               (long long)lo);
  return DSA_OK;
}

static dsa_status check_rows(const char *op, const char *arg, int64_t t) {
  if (t > I32_MAX_ROWS) return BAD("%s: %s has %lld rows; at most 2^31 - 1", op, arg, (long long)t);
  return DSA_OK;
}

static dsa_status launch_rows(dsa_queue *q, dsa_program_id prog, const char *name, int64_t rows,
                              const dsa_kargs *a, const dsa_events *ev) {
  if (rows == 0) return dsa__launch_nothing(q, ev);
  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, prog, name, &kern));
  const size_t global[1] = {(size_t)rows * LANES}, local[1] = {LANES};
  return dsa__launch_args(q, kern, name, a, 1, global, local, ev);
}

/* ---- §10.1 ---------------------------------------------------------------------- */

dsa_status dsa_index_compressed_slot_mapping(dsa_queue *q, const dsa_tensor *query_start_loc,
                                             const dsa_tensor *seq_lens, const dsa_tensor *block_table,
                                             const dsa_tensor *slot_mapping,
                                             const dsa_index_compressed_slot_mapping_params *p,
                                             const dsa_events *ev) {
  static const char op[] = "dsa_index_compressed_slot_mapping";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  dsa_index_compressed_slot_mapping_params dp;
  if (!p) dsa_index_compressed_slot_mapping_params_default(&dp), p = &dp;
  DSA_CHECK(check_pos_int(op, "compress_ratio", p->compress_ratio, 1));
  DSA_CHECK(check_pos_int(op, "block_size", p->block_size, 1));
  DSA_CHECK(check_table(block_table, op, "block_table", -1));
  const int64_t r = block_table->shape[0];
  DSA_CHECK(check_vec(query_start_loc, op, "query_start_loc", DSA_I32, r + 1));
  DSA_CHECK(check_vec(seq_lens, op, "seq_lens", DSA_I32, r));
  DSA_CHECK(check_vec(slot_mapping, op, "slot_mapping", DSA_I64, -1));
  const int64_t t = slot_mapping->shape[0];
  DSA_CHECK(check_rows(op, "slot_mapping", t));
  if (t == 0) return dsa__launch_nothing(q, ev);

  cl_int rr = (cl_int)r, w = (cl_int)block_table->shape[1], ratio = p->compress_ratio,
         bs = p->block_size;
  cl_long tt = t;
  if (dsa__pick(q, &dsa__variants_compressed_slot_mapping, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_tensor(&a, query_start_loc, 1);
  dsa__karg_tensor(&a, seq_lens, 1);
  dsa__karg_tensor(&a, block_table, 2);
  dsa__karg_i32(&a, rr);
  dsa__karg_i32(&a, w);
  dsa__karg_i32(&a, ratio);
  dsa__karg_i32(&a, bs);
  dsa__karg_tensor(&a, slot_mapping, 1);
  dsa__karg_i64(&a, tt);
  dsa__karg_faults(&a);
  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_INDEX_HELPERS, "ih_compressed_slot_mapping", &kern));
  const size_t global[1] = {(size_t)((t + LANES - 1) / LANES * LANES)}, local[1] = {LANES};
  return dsa__launch_args(q, kern, "ih_compressed_slot_mapping", &a, 1, global, local, ev);
}

/* ---- §10.2 ---------------------------------------------------------------------- */

dsa_status dsa_index_swa(dsa_queue *q, const dsa_tensor *positions,
                         const dsa_tensor *token_to_req, const dsa_tensor *is_valid_token,
                         const dsa_tensor *block_table, const dsa_tensor *indices,
                         const dsa_tensor *lens, const dsa_index_swa_params *p,
                         const dsa_events *ev) {
  static const char op[] = "dsa_index_swa";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  dsa_index_swa_params dp;
  if (!p) dsa_index_swa_params_default(&dp), p = &dp;
  DSA_CHECK(check_pos_int(op, "window", p->window, 1));
  DSA_CHECK(check_pos_int(op, "block_size", p->block_size, 1));
  DSA_CHECK(dsa__check_positions(positions, op, -1));
  const int64_t t = positions->shape[0];
  DSA_CHECK(check_rows(op, "positions", t));
  /* token_to_req NULL: token t is request t (pure decode). */
  if (token_to_req) DSA_CHECK(check_vec(token_to_req, op, "token_to_req", DSA_I32, t));
  if (is_valid_token) DSA_CHECK(check_vec(is_valid_token, op, "is_valid_token", DSA_U8, t));
  DSA_CHECK(check_table(block_table, op, "block_table", -1));
  DSA_CHECK(dsa__check_tensor(indices, op, "indices", DSA_I32, 2));
  DSA_CHECK(dsa__check_dim(indices, op, "indices", 0, t));
  if (indices->shape[1] < p->window || indices->shape[1] > I32_MAX_ROWS)
    return BAD("%s: indices shape[1] = %lld must be >= p->window = %d (and < 2^31)", op,
               (long long)indices->shape[1], (int)p->window);
  DSA_CHECK(check_vec(lens, op, "lens", DSA_I32, t));

  cl_int hv = is_valid_token != NULL, rr = (cl_int)block_table->shape[0],
         w = (cl_int)block_table->shape[1], win = p->window, bs = p->block_size,
         width = (cl_int)indices->shape[1];
  if (dsa__pick(q, &dsa__variants_swa_indices, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_positions(&a, positions);
  dsa__karg_tensor(&a, token_to_req, 1);
  dsa__karg_i32(&a, token_to_req != NULL);
  dsa__karg_tensor(&a, is_valid_token, 1);
  dsa__karg_i32(&a, hv);
  dsa__karg_tensor(&a, block_table, 2);
  dsa__karg_i32(&a, rr);
  dsa__karg_i32(&a, w);
  dsa__karg_i32(&a, win);
  dsa__karg_i32(&a, bs);
  dsa__karg_tensor(&a, indices, 2);
  dsa__karg_i32(&a, width);
  dsa__karg_tensor(&a, lens, 1);
  dsa__karg_faults(&a);
  return launch_rows(q, DSA_PROG_INDEX_HELPERS, "ih_swa_indices", t, &a, ev);
}

/* ---- §10.3 ---------------------------------------------------------------------- */

dsa_status dsa_index_global_topk(dsa_queue *q, const dsa_tensor *topk_local,
                                 const dsa_tensor *token_to_req, const dsa_tensor *block_table,
                                 const dsa_tensor *is_valid_token, const dsa_tensor *out,
                                 const dsa_tensor *lens, const dsa_index_global_topk_params *p,
                                 const dsa_events *ev) {
  static const char op[] = "dsa_index_global_topk";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  dsa_index_global_topk_params dp;
  if (!p) dsa_index_global_topk_params_default(&dp), p = &dp;
  DSA_CHECK(check_pos_int(op, "block_size", p->block_size, 1));
  DSA_CHECK(check_table(topk_local, op, "topk_local", -1));
  const int64_t t = topk_local->shape[0], k = topk_local->shape[1];
  /* token_to_req NULL: token t is request t (pure decode). */
  if (token_to_req) DSA_CHECK(check_vec(token_to_req, op, "token_to_req", DSA_I32, t));
  DSA_CHECK(check_table(block_table, op, "block_table", -1));
  if (is_valid_token) DSA_CHECK(check_vec(is_valid_token, op, "is_valid_token", DSA_U8, t));
  DSA_CHECK(dsa__check_tensor(out, op, "out", DSA_I32, 2));
  DSA_CHECK(dsa__check_dim(out, op, "out", 0, t));
  DSA_CHECK(dsa__check_dim(out, op, "out", 1, k));
  if (lens) DSA_CHECK(check_vec(lens, op, "lens", DSA_I32, t));

  cl_int kk = (cl_int)k, rr = (cl_int)block_table->shape[0], w = (cl_int)block_table->shape[1],
         bs = p->block_size, hv = is_valid_token != NULL, hl = lens != NULL;
  if (dsa__pick(q, &dsa__variants_global_topk_indices, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_tensor(&a, topk_local, 2);
  dsa__karg_i32(&a, kk);
  dsa__karg_tensor(&a, token_to_req, 1);
  dsa__karg_i32(&a, token_to_req != NULL);
  dsa__karg_tensor(&a, block_table, 2);
  dsa__karg_i32(&a, rr);
  dsa__karg_i32(&a, w);
  dsa__karg_i32(&a, bs);
  dsa__karg_tensor(&a, is_valid_token, 1);
  dsa__karg_i32(&a, hv);
  dsa__karg_tensor(&a, out, 2);
  dsa__karg_tensor(&a, lens, 1);
  dsa__karg_i32(&a, hl);
  dsa__karg_faults(&a);
  return launch_rows(q, DSA_PROG_INDEX_HELPERS, "ih_global_topk", t, &a, ev);
}

dsa_status dsa_index_c128_topk(dsa_queue *q, const dsa_tensor *positions,
                               const dsa_tensor *token_to_req, const dsa_tensor *block_table,
                               const dsa_tensor *is_valid_token, const dsa_tensor *out,
                               const dsa_tensor *lens, const dsa_index_c128_topk_params *p,
                               const dsa_events *ev) {
  static const char op[] = "dsa_index_c128_topk";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  dsa_index_c128_topk_params dp;
  if (!p) dsa_index_c128_topk_params_default(&dp), p = &dp;
  DSA_CHECK(check_pos_int(op, "compress_ratio", p->compress_ratio, 1));
  DSA_CHECK(check_pos_int(op, "block_size", p->block_size, 1));
  DSA_CHECK(dsa__check_positions(positions, op, -1));
  const int64_t t = positions->shape[0];
  DSA_CHECK(check_rows(op, "positions", t));
  /* token_to_req NULL: token t is request t (pure decode); unread in the
   * local form. */
  if (token_to_req) DSA_CHECK(check_vec(token_to_req, op, "token_to_req", DSA_I32, t));
  if (block_table) DSA_CHECK(check_table(block_table, op, "block_table", -1));
  if (is_valid_token) DSA_CHECK(check_vec(is_valid_token, op, "is_valid_token", DSA_U8, t));
  DSA_CHECK(check_table(out, op, "out", t));
  if (lens) DSA_CHECK(check_vec(lens, op, "lens", DSA_I32, t));

  cl_int gf = block_table != NULL, rr = block_table ? (cl_int)block_table->shape[0] : 0,
         w = block_table ? (cl_int)block_table->shape[1] : 0, ratio = p->compress_ratio,
         bs = p->block_size, hv = is_valid_token != NULL, kk = (cl_int)out->shape[1],
         hl = lens != NULL;
  if (dsa__pick(q, &dsa__variants_c128_topk_indices, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_positions(&a, positions);
  dsa__karg_tensor(&a, token_to_req, 1);
  dsa__karg_i32(&a, token_to_req != NULL);
  dsa__karg_i32(&a, gf);
  dsa__karg_tensor(&a, block_table, 2);
  dsa__karg_i32(&a, rr);
  dsa__karg_i32(&a, w);
  dsa__karg_i32(&a, ratio);
  dsa__karg_i32(&a, bs);
  dsa__karg_tensor(&a, is_valid_token, 1);
  dsa__karg_i32(&a, hv);
  dsa__karg_tensor(&a, out, 2);
  dsa__karg_i32(&a, kk);
  dsa__karg_tensor(&a, lens, 1);
  dsa__karg_i32(&a, hl);
  dsa__karg_faults(&a);
  return launch_rows(q, DSA_PROG_INDEX_HELPERS, "ih_c128_topk", t, &a, ev);
}

/* ---- §10.4 ---------------------------------------------------------------------- */

dsa_status dsa_index_combine_topk_swa(dsa_queue *q, const dsa_tensor *topk,
                                      const dsa_tensor *query_start_loc, const dsa_tensor *seq_lens,
                                      const dsa_tensor *gather_lens, const dsa_tensor *out,
                                      const dsa_tensor *lens, const dsa_index_combine_topk_swa_params *p,
                                      const dsa_events *ev) {
  static const char op[] = "dsa_index_combine_topk_swa";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  dsa_index_combine_topk_swa_params dp;
  if (!p) dsa_index_combine_topk_swa_params_default(&dp), p = &dp;
  DSA_CHECK(check_pos_int(op, "window", p->window, 1));
  DSA_CHECK(check_pos_int(op, "compress_ratio", p->compress_ratio, 1));
  DSA_CHECK(check_pos_int(op, "topk", p->topk, 0));
  if (p->M < 0 || p->M > I32_MAX_ROWS)
    return BAD("%s: p->M = %lld must be in [0, 2^31)", op, (long long)p->M);
  if (p->N < 0 || p->N > I32_MAX_ROWS)
    return BAD("%s: p->N = %lld must be in [0, 2^31)", op, (long long)p->N);
  if ((int64_t)p->topk + p->window > I32_MAX_ROWS)
    return BAD("%s: p->topk + p->window must be < 2^31", op);
  DSA_CHECK(check_table(out, op, "out", -1));
  const int64_t t = out->shape[0];
  if (out->shape[1] < (int64_t)p->topk + p->window)
    return BAD("%s: out shape[1] = %lld must be >= p->topk + p->window = %lld", op,
               (long long)out->shape[1], (long long)p->topk + p->window);
  if (topk || p->topk > 0) {
    if (!topk) return BAD("%s: topk is NULL but p->topk = %d", op, (int)p->topk);
    DSA_CHECK(check_table(topk, op, "topk", t));
    if (topk->shape[1] < p->topk)
      return BAD("%s: topk shape[1] = %lld must be >= p->topk = %d", op,
                 (long long)topk->shape[1], (int)p->topk);
  }
  DSA_CHECK(check_vec(seq_lens, op, "seq_lens", DSA_I32, -1));
  const int64_t r = seq_lens->shape[0];
  if (r >= I32_MAX_ROWS) return BAD("%s: seq_lens has too many requests", op);
  DSA_CHECK(check_vec(query_start_loc, op, "query_start_loc", DSA_I32, r + 1));
  DSA_CHECK(check_vec(gather_lens, op, "gather_lens", DSA_I32, r));
  DSA_CHECK(check_vec(lens, op, "lens", DSA_I32, t));

  cl_int rr = (cl_int)r, win = p->window, ratio = p->compress_ratio, tk = p->topk,
         width = (cl_int)out->shape[1];
  cl_long m = p->M, n = p->N;
  if (dsa__pick(q, &dsa__variants_combine_topk_swa, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_tensor(&a, topk, 2);
  dsa__karg_tensor(&a, query_start_loc, 1);
  dsa__karg_tensor(&a, seq_lens, 1);
  dsa__karg_tensor(&a, gather_lens, 1);
  dsa__karg_i32(&a, rr);
  dsa__karg_i32(&a, win);
  dsa__karg_i32(&a, ratio);
  dsa__karg_i32(&a, tk);
  dsa__karg_i64(&a, m);
  dsa__karg_i64(&a, n);
  dsa__karg_tensor(&a, out, 2);
  dsa__karg_i32(&a, width);
  dsa__karg_tensor(&a, lens, 1);
  dsa__karg_faults(&a);
  return launch_rows(q, DSA_PROG_INDEX_HELPERS, "ih_combine_topk_swa", t, &a, ev);
}

/* ---- §10.5 ---------------------------------------------------------------------- */

dsa_status dsa_index_mixed_sparse(dsa_queue *q, const dsa_index_mixed_sparse_inputs *in,
                                  const dsa_tensor *out, const dsa_tensor *lens,
                                  const dsa_index_mixed_sparse_params *p, const dsa_events *ev) {
  static const char op[] = "dsa_index_mixed_sparse";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  if (!in) return BAD("%s: in is NULL", op);
  dsa_index_mixed_sparse_params dp;
  if (!p) dsa_index_mixed_sparse_params_default(&dp), p = &dp;
  DSA_CHECK(check_pos_int(op, "window", p->window, 1));
  DSA_CHECK(check_pos_int(op, "compress_ratio", p->compress_ratio, 1));
  DSA_CHECK(check_pos_int(op, "topk", p->topk, 0));
  DSA_CHECK(check_pos_int(op, "swa_block_size", p->swa_block_size, 1));
  DSA_CHECK(check_pos_int(op, "compressed_block_size", p->compressed_block_size, 1));
  if (p->decode_compressed_local != 0 && p->decode_compressed_local != 1)
    return BAD("%s: p->decode_compressed_local = %d must be 0 or 1", op,
               (int)p->decode_compressed_local);
  DSA_CHECK(check_table(in->decode_swa_indices, op, "decode_swa_indices", -1));
  const int64_t td = in->decode_swa_indices->shape[0];
  DSA_CHECK(dsa__check_dim(in->decode_swa_indices, op, "decode_swa_indices", 1, p->window));
  int64_t kd = 0;
  if (in->decode_compressed_indices) {
    DSA_CHECK(check_table(in->decode_compressed_indices, op, "decode_compressed_indices", td));
    kd = in->decode_compressed_indices->shape[1];
  }
  const int local = p->decode_compressed_local && kd > 0;
  if (in->decode_compressed_lens)
    DSA_CHECK(check_vec(in->decode_compressed_lens, op, "decode_compressed_lens", DSA_I32, td));
  if (local && !in->decode_is_valid_token)
    return BAD("%s: decode_is_valid_token is NULL but p->decode_compressed_local is set", op);
  if (in->decode_is_valid_token)
    DSA_CHECK(check_vec(in->decode_is_valid_token, op, "decode_is_valid_token", DSA_U8, td));
  DSA_CHECK(check_table(in->prefill_topk_indices, op, "prefill_topk_indices", -1));
  const int64_t tp = in->prefill_topk_indices->shape[0], kp = in->prefill_topk_indices->shape[1];
  const int64_t t = td + tp;
  DSA_CHECK(check_rows(op, "out", t));
  DSA_CHECK(check_vec(in->seq_lens, op, "seq_lens", DSA_I32, -1));
  const int64_t r = in->seq_lens->shape[0];
  if (r >= I32_MAX_ROWS) return BAD("%s: seq_lens has too many requests", op);
  DSA_CHECK(check_vec(in->query_start_loc, op, "query_start_loc", DSA_I32, r + 1));
  DSA_CHECK(dsa__check_tensor(in->token_to_req, op, "token_to_req", DSA_I32, 1));
  if (in->token_to_req->shape[0] < t)
    return BAD("%s: token_to_req has %lld entries, fewer than the %lld tokens", op,
               (long long)in->token_to_req->shape[0], (long long)t);
  DSA_CHECK(check_table(in->swa_block_table, op, "swa_block_table", r));
  const dsa_tensor *cbt = in->compressed_block_table ? in->compressed_block_table
                                                     : in->swa_block_table;
  if (in->compressed_block_table)
    DSA_CHECK(check_table(in->compressed_block_table, op, "compressed_block_table", r));
  DSA_CHECK(check_table(out, op, "out", t));
  const int64_t need = (int64_t)p->window + (kd > p->topk ? kd : p->topk);
  if (out->shape[1] < need)
    return BAD("%s: out shape[1] = %lld must be >= p->window + max(p->topk, Kd) = %lld", op,
               (long long)out->shape[1], (long long)need);
  DSA_CHECK(check_vec(lens, op, "lens", DSA_I32, t));

  cl_int ckd = (cl_int)kd, hdl = in->decode_compressed_lens != NULL,
         hdv = in->decode_is_valid_token != NULL, ckp = (cl_int)kp, rr = (cl_int)r,
         ws = (cl_int)in->swa_block_table->shape[1], sbs = p->swa_block_size,
         wc = (cl_int)cbt->shape[1], cbs = p->compressed_block_size, ctd = (cl_int)td,
         win = p->window, ratio = p->compress_ratio, tk = p->topk, loc = local,
         pp = (cl_int)(out->shape[1] - p->window);
  if (dsa__pick(q, &dsa__variants_mixed_sparse_indices, NULL) < 0) return DSA_ERR_UNSUPPORTED;
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  dsa__karg_tensor(&a, in->decode_swa_indices, 2);
  dsa__karg_tensor(&a, in->decode_compressed_indices, 2);
  dsa__karg_i32(&a, ckd);
  dsa__karg_tensor(&a, in->decode_compressed_lens, 1);
  dsa__karg_i32(&a, hdl);
  dsa__karg_tensor(&a, in->decode_is_valid_token, 1);
  dsa__karg_i32(&a, hdv);
  dsa__karg_tensor(&a, in->prefill_topk_indices, 2);
  dsa__karg_i32(&a, ckp);
  dsa__karg_tensor(&a, in->query_start_loc, 1);
  dsa__karg_tensor(&a, in->seq_lens, 1);
  dsa__karg_tensor(&a, in->token_to_req, 1);
  dsa__karg_i32(&a, rr);
  dsa__karg_tensor(&a, in->swa_block_table, 2);
  dsa__karg_i32(&a, ws);
  dsa__karg_i32(&a, sbs);
  dsa__karg_tensor(&a, cbt, 2);
  dsa__karg_i32(&a, wc);
  dsa__karg_i32(&a, cbs);
  dsa__karg_i32(&a, ctd);
  dsa__karg_i32(&a, win);
  dsa__karg_i32(&a, ratio);
  dsa__karg_i32(&a, tk);
  dsa__karg_i32(&a, loc);
  dsa__karg_tensor(&a, out, 2);
  dsa__karg_i32(&a, pp);
  dsa__karg_tensor(&a, lens, 1);
  dsa__karg_faults(&a);
  return launch_rows(q, DSA_PROG_INDEX_HELPERS, "ih_mixed_sparse", t, &a, ev);
}
