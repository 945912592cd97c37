/* One DeepSeek-V4 decode step of the sparse-attention path (see
 * decode_step.h): indexer Q quant -> paged logits -> top-k -> global C4 slots,
 * SWA slots, q RMSNorm + RoPE with the new token's KV insert -> sparse MLA
 * decode with the attention sink -> inverse RoPE + FP8 quant of the output
 * for the O projection. Public API only. decode_step() enqueues every call
 * on one in-order queue, so each stage sees the previous one's outputs;
 * decode_step_two_queues() puts the SWA indices and the q-norm insert, which
 * need nothing of the indexer's stages, on a second queue, so that they run
 * beside them (the top-k leaves most compute units idle), and the attention
 * waits for both. */
#include "decode_step.h"

#include <stddef.h>

const char *const decode_step_stage_names[DECODE_STEP_STAGES] = {
    "indexer Q RoPE + FP8 quant",   "paged MQA logits (FP8)",
    "top-k decode",                 "top-k -> global C4 slots",
    "SWA indices + lengths",        "q RMSNorm+RoPE, kv RoPE+insert",
    "sparse MLA decode, fused (+sink)", "output inv RoPE + FP8 quant"};

/* The events of stage i: its wait list (nw events at w), a marker for its
 * start and its completion event when timing (else *own when given: an
 * event the step itself needs). */
static dsa_status begin(dsa_queue *q, int i, cl_uint nw, const cl_event *w,
                        const dsa_events *ev, cl_event *start, cl_event *done, cl_event *own,
                        dsa_events *out) {
  out->num_wait = nw;
  out->wait = nw ? w : NULL;
  out->done = done ? &done[i] : own;
  if (i == DECODE_STEP_STAGES - 1 && ev && ev->done && !done) out->done = ev->done;
  if (start) {
    /* The wait first, then the marker: a marker that itself waits on
     * another queue's event reports a START from before the wait (NVIDIA's
     * OpenCL gave stage times of 0.3 s that way). */
    cl_int e = out->num_wait ? clEnqueueBarrierWithWaitList(dsa_queue_cl(q), out->num_wait,
                                                            out->wait, NULL)
                             : CL_SUCCESS;
    if (e == CL_SUCCESS) e = clEnqueueMarkerWithWaitList(dsa_queue_cl(q), 0, NULL, &start[i]);
    if (e != CL_SUCCESS) return DSA_ERR_OPENCL;
    out->num_wait = 0, out->wait = NULL;
  }
  return DSA_OK;
}

/* Stage i on queue Q after the NW events at W; OWN as in begin(). */
#define STAGE_ON(Q, i, NW, W, OWN, call)                                   \
  do {                                                                     \
    dsa_events e_;                                                         \
    s_ = begin((Q), (i), (NW), (W), ev, start, done, (OWN), &e_);          \
    if (s_ == DSA_OK) s_ = (call);                                         \
    if (s_ != DSA_OK) goto out;                                            \
  } while (0)
/* Stage i on the main queue; the first waits for the caller's list. */
#define STAGE(i, call)                                                             \
  STAGE_ON(q, (i), (i) == 0 && ev ? ev->num_wait : 0u, (i) == 0 && ev ? ev->wait : NULL, \
           NULL, call)

dsa_status decode_step(dsa_queue *q, const decode_step_io *io, const dsa_events *ev,
                       cl_event *start, cl_event *done) {
  return decode_step_two_queues(q, NULL, io, ev, start, done);
}

dsa_status decode_step_two_queues(dsa_queue *q, dsa_queue *side, const decode_step_io *io,
                                  const dsa_events *ev, cl_event *start, cl_event *done) {
  dsa_status s_ = DSA_OK;
  /* side waits for a marker on q after everything enqueued there before
   * this step (the previous step still reads the slots stages 5 and 6
   * rewrite) and the caller's list; the attention waits for stage 6. */
  cl_event side_wait = NULL, side_done = NULL;
  const cl_uint nside = side ? 1u : 0u;
  if (side && clEnqueueMarkerWithWaitList(dsa_queue_cl(q), ev ? ev->num_wait : 0u,
                                          ev && ev->num_wait ? ev->wait : NULL,
                                          &side_wait) != CL_SUCCESS)
    return DSA_ERR_OPENCL;
  /* 1. Indexer q: RoPE on its last 64 dims, FP8 per head; the q scale folds
   *    into the head weights (softmax and head scales at their defaults). */
  dsa_indexer_q_quant_params qp;
  dsa_indexer_q_quant_params_default(&qp);
  STAGE(0, dsa_indexer_q_quant(q, io->positions, io->index_q, io->cos_sin, io->index_weights,
                               io->iq_fp8, NULL, io->iq_weights, &qp, &e_));

  /* 2. Logits of every compressed row each token may see (-inf past its
   *    context length). The quantized q is read as Q quant wrote it,
   *    [T, 64, 128] with T = B * next_n (next_n from the context lengths'
   *    shape); its e4m3 tag picks the FP8 path (no query scale). */
  dsa_indexer_logits_params lp;
  dsa_indexer_logits_params_default(&lp);
  STAGE(1, dsa_indexer_paged_logits(q, io->iq_fp8, NULL, io->iq_weights, io->context_lens,
                                    io->cmp_block_table, io->ik_cache, io->logits, &lp, &e_));

  /* 3. The k best compressed rows per token (deterministic ties). */
  dsa_topk_params tp;
  dsa_topk_params_default(&tp);
  tp.k = io->topk_k;
  STAGE(2, dsa_topk_decode(q, io->logits, io->context_lens, io->topk, &tp, &e_));

  /* 4. Row numbers -> slots of the C4 MLA cache (through the block table). */
  dsa_index_global_topk_params gp;
  dsa_index_global_topk_params_default(&gp);
  gp.block_size = io->cmp_block_size;
  STAGE(3, dsa_index_global_topk(q, io->topk, io->token_to_req, io->cmp_block_table, NULL,
                                   io->c4_slots, io->c4_lens, &gp, &e_));

  /* 5. The sliding window's slots in the SWA cache (on side, if any). */
  dsa_queue *const sq = side ? side : q;
  dsa_index_swa_params sp;
  dsa_index_swa_params_default(&sp);
  sp.window = io->window;
  sp.block_size = io->swa_block_size;
  STAGE_ON(sq, 4, nside, &side_wait, NULL,
           dsa_index_swa(sq, io->positions, io->token_to_req, NULL, io->swa_block_table,
                         io->swa_slots, io->swa_lens, &sp, &e_));

  /* 6. q RMSNorm + RoPE; the new token's kv RoPE'd, quantized and written to
   *    its SWA slot (so the window below includes it). */
  dsa_mla_qnorm_rope_kv_insert_params np;
  dsa_mla_qnorm_rope_kv_insert_params_default(&np);
  STAGE_ON(sq, 5, 0u, NULL, side && !done ? &side_done : NULL,
           dsa_mla_qnorm_rope_kv_insert(sq, io->q, io->kv, io->positions, io->cos_sin,
                                        io->kv_slots, io->swa_cache, io->q_normed, &np, &e_));

  /* 7. Attention over the window (SWA cache) then the top-k (C4 cache),
   *    with the sink; lse for the caller's combine. */
  const dsa_sparse_index_set window = {io->swa_cache, io->swa_slots, io->swa_lens};
  const dsa_sparse_index_set chosen = {io->c4_cache, io->c4_slots, io->c4_lens};
  dsa_sparse_params ap;
  dsa_sparse_params_default(&ap);
  cl_event *const after_side = side ? (done ? &done[5] : &side_done) : NULL;
  STAGE_ON(q, 6, side ? 1u : 0u, after_side, NULL,
           dsa_sparse_mla_decode(q, io->q_normed, &window, &chosen, io->attn_sink, io->out,
                                 io->lse, &ap, &e_));

  /* 8. The output for the grouped O projection (wo_a): inverse RoPE of dims
   *    448..511 at each token's position, FP8 e4m3 per 128-value block with
   *    power-of-two scales; the group count G is o_fp8's first extent. */
  STAGE(7, dsa_output_inv_rope_fp8_quant(q, io->out, io->positions, io->cos_sin, io->o_fp8,
                                         io->o_scales, NULL, &e_));
out:
  if (side_wait) clReleaseEvent(side_wait);
  if (side_done) clReleaseEvent(side_done);
  return s_;
}
