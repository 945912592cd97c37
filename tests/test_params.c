/* Every params struct (issue 13 item 4): its _default function zeroes the
 * reserved bytes, and every operator that takes one refuses a non-zero
 * reserved byte with DSA_ERR_INVALID_ARGUMENT naming p->reserved, before it
 * looks at any tensor (the calls here pass none: with the reserved bytes
 * zeroed the same call fails on a tensor instead, so nothing past the params
 * check is reached and nothing can be enqueued). Guarded outputs of the
 * refused call are checked per family (test_mla_cache, test_indexer_k,
 * test_output_quant: the "reserved" bad-argument case). */
#include <dsacl/dsacl.h>
#include <string.h>

#include "common.h"

static dsa_context *ctx;
static dsa_queue *q;

/* s: the call's status with reserved[last] = bad; the message names the
 * reserved bytes exactly when bad is set. */
static void expect(const char *op, int bad, dsa_status s) {
  const char *m = dsa_last_error();
  const int names = m && strstr(m, "reserved") != NULL;
  CHECK(s == DSA_ERR_INVALID_ARGUMENT, "%s (reserved %s): %s, want DSA_ERR_INVALID_ARGUMENT",
        op, bad ? "set" : "zero", dsa_status_name(s));
  CHECK(names == bad, "%s (reserved %s): message '%s'", op, bad ? "set" : "zero", m ? m : "");
  CHECK(!bad || (m && strstr(m, op)), "%s: message '%s' does not name the operator", op,
        m ? m : "");
}

/* T's _default zeroes its reserved bytes (the struct starts as 0xA5), then
 * call (an expression of p) runs with the last reserved byte 0 and 1. */
#define CASE(T, op, call)                                                                \
  do {                                                                                   \
    T p;                                                                                 \
    memset(&p, 0xA5, sizeof p);                                                          \
    T##_default(&p);                                                                     \
    int zero = 1;                                                                        \
    for (size_t i_ = 0; i_ < sizeof p.reserved; i_++) zero &= p.reserved[i_] == 0;      \
    CHECK(zero, #T "_default leaves reserved bytes set");                                \
    for (int bad = 0; bad < 2; bad++) {                                                  \
      p.reserved[sizeof p.reserved - 1] = (unsigned char)bad;                            \
      expect(op, bad, (call));                                                           \
    }                                                                                    \
  } while (0)

int main(void) {
  dsa_test_open(&ctx, &q, 0);
  const dsa_tensor *N = NULL;
  const dsa_paged_cache *NC = NULL;
  CASE(dsa_mla_cache_insert_params, "dsa_mla_cache_insert",
       dsa_mla_cache_insert(q, N, N, NC, &p, NULL));
  CASE(dsa_mla_gather_slots_params, "dsa_mla_gather_slots",
       dsa_mla_gather_slots(q, N, NC, N, &p, NULL));
  CASE(dsa_mla_gather_paged_params, "dsa_mla_gather_paged",
       dsa_mla_gather_paged(q, N, N, N, NC, N, &p, NULL));
  CASE(dsa_indexer_k_insert_params, "dsa_indexer_k_insert",
       dsa_indexer_k_insert(q, N, N, NC, &p, NULL));
  CASE(dsa_indexer_k_gather_params, "dsa_indexer_k_gather",
       dsa_indexer_k_gather(q, N, N, NC, N, N, &p, NULL));
  CASE(dsa_indexer_q_quant_params, "dsa_indexer_q_quant",
       dsa_indexer_q_quant(q, N, N, N, N, N, N, N, &p, NULL));
  CASE(dsa_indexer_logits_params, "dsa_indexer_logits",
       dsa_indexer_logits(q, N, N, N, N, N, N, N, N, &p, NULL));
  CASE(dsa_indexer_logits_params, "dsa_indexer_paged_logits",
       dsa_indexer_paged_logits(q, N, N, N, N, N, NC, N, &p, NULL));
  CASE(dsa_topk_params, "dsa_topk_prefill", dsa_topk_prefill(q, N, N, N, N, &p, NULL));
  CASE(dsa_topk_params, "dsa_topk_decode", dsa_topk_decode(q, N, N, N, &p, NULL));
  CASE(dsa_sparse_params, "dsa_sparse_attn_bf16",
       dsa_sparse_attn_bf16(q, N, N, N, N, N, N, N, &p, NULL));
  CASE(dsa_sparse_params, "dsa_sparse_mla_decode",
       dsa_sparse_mla_decode(q, N, NULL, NULL, N, N, N, &p, NULL));
  CASE(dsa_sparse_params, "dsa_sparse_mla_decode_two_stage",
       dsa_sparse_mla_decode_two_stage(q, N, NULL, NULL, N, N, N, N, &p, NULL));
  CASE(dsa_mla_qnorm_rope_kv_insert_params, "dsa_mla_qnorm_rope_kv_insert",
       dsa_mla_qnorm_rope_kv_insert(q, N, N, N, N, N, NC, N, &p, NULL));
  CASE(dsa_output_inv_rope_fp8_quant_params, "dsa_output_inv_rope_fp8_quant",
       dsa_output_inv_rope_fp8_quant(q, N, N, N, N, N, &p, NULL));
  CASE(dsa_mtp_params, "dsa_mtp_input_rmsnorm",
       dsa_mtp_input_rmsnorm(q, N, N, N, N, N, N, N, &p, NULL));
  CASE(dsa_mtp_params, "dsa_mtp_shared_head_rmsnorm",
       dsa_mtp_shared_head_rmsnorm(q, N, N, N, &p, NULL));
  CASE(dsa_compressor_params, "dsa_compressor_save_states",
       dsa_compressor_save_states(q, N, N, N, N, N, N, &p, NULL));
  CASE(dsa_compressor_params, "dsa_compressor_compress_insert",
       dsa_compressor_compress_insert(q, N, N, N, N, N, N, N, N, NC, &p, NULL));
  CASE(dsa_index_compressed_slot_mapping_params, "dsa_index_compressed_slot_mapping",
       dsa_index_compressed_slot_mapping(q, N, N, N, N, &p, NULL));
  CASE(dsa_index_swa_params, "dsa_index_swa", dsa_index_swa(q, N, N, N, N, N, N, &p, NULL));
  CASE(dsa_index_global_topk_params, "dsa_index_global_topk",
       dsa_index_global_topk(q, N, N, N, N, N, N, &p, NULL));
  CASE(dsa_index_c128_topk_params, "dsa_index_c128_topk",
       dsa_index_c128_topk(q, N, N, N, N, N, N, &p, NULL));
  CASE(dsa_index_combine_topk_swa_params, "dsa_index_combine_topk_swa",
       dsa_index_combine_topk_swa(q, N, N, N, N, N, N, &p, NULL));
  CASE(dsa_index_mixed_sparse_params, "dsa_index_mixed_sparse",
       dsa_index_mixed_sparse(q, NULL, N, N, &p, NULL));
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
