/* One DeepSeek-V4 decode step of the sparse-attention path, as a server
 * calls dsacl: every buffer is the caller's, the function only enqueues.
 * Walked through in docs/DECODE.md; tests/dsacl-demo.c runs it on synthetic
 * data and checks every stage against the C reference. */
#ifndef DSACL_EXAMPLE_DECODE_STEP_H
#define DSACL_EXAMPLE_DECODE_STEP_H

#include <dsacl/dsacl.h>

enum { DECODE_STEP_STAGES = 8 };

/* Stage names, in enqueue order (index into the event arrays below). */
extern const char *const decode_step_stage_names[DECODE_STEP_STAGES];

typedef struct decode_step_io {
  /* Caches (filled by earlier steps / prefill): the sliding-window MLA cache,
   * the compressed (C4) MLA cache and the indexer K cache (FP8). The two
   * compressed caches share cmp_block_table. */
  const dsa_paged_cache *swa_cache, *c4_cache, *ik_cache;
  /* Step metadata: positions [T] i64, token_to_req [T] i32, cos_sin [P, 64]
   * f32, swa_block_table [B, Ws] i32, cmp_block_table [B, Wc] i32,
   * context_lens [B, next_n] i32 (compressed rows each token sees). */
  const dsa_tensor *positions, *token_to_req, *cos_sin, *swa_block_table, *cmp_block_table,
      *context_lens;
  /* This step's activations: indexer q [T, 64, 128] bf16 and its head
   * weights [T, 64] bf16; the MLA q [T, H, 512] bf16, the new token's kv
   * [T, 512] bf16 and its SWA slots [T] i64; the attention sink [H] f32. */
  const dsa_tensor *index_q, *index_weights, *q, *kv, *kv_slots, *attn_sink;
  /* Caller-owned intermediates and outputs: indexer q FP8 [T, 64, 128]
   * e4m3 (T = B * next_n) and weights [T, 64] f32, logits [T, Wc * 64] f32, top-k [T, k]
   * i32, C4 slots [T, k] and lengths [T], SWA slots [T, window] and lengths
   * [T], the normalised q [T, H, 512] bf16, out [T, H, 512] bf16, lse [T, H]
   * f32 (or NULL); the output quantized for the grouped O projection:
   * o_fp8 e4m3 [G, T, H / G * 512] (G wo_a groups, G divides H) and its
   * block scales o_scales f32 [G, H / G * 4, Tp] (or DeepGEMM's packed
   * UE8M0, i32 [G, H / G, Tp]) with Tp >= T (vLLM: round_up(T, 4)). */
  const dsa_tensor *iq_fp8, *iq_weights, *logits, *topk, *c4_slots, *c4_lens, *swa_slots,
      *swa_lens, *q_normed, *out, *lse, *o_fp8, *o_scales;
  int32_t topk_k, window, swa_block_size, cmp_block_size;
} decode_step_io;

/* Enqueues the eight stages on q. ev: waits for ev->wait before the first
 * stage and returns the last stage's event in ev->done (either may be
 * absent). start / done (NULL, or arrays of DECODE_STEP_STAGES): a marker
 * before each stage and each stage's completion event, for per-stage device
 * times (the caller releases them). Returns the first failing operator's
 * status; dsa_last_error() names it. */
dsa_status decode_step(dsa_queue *q, const decode_step_io *io, const dsa_events *ev,
                       cl_event *start, cl_event *done);

/* The same with stages 5 and 6 (SWA indices, q-norm insert) on side (a
 * second queue of the same context), beside the indexer's stages 1-4 on q;
 * side first waits for everything enqueued on q before the call and for
 * ev's list, the attention for stage 6. side NULL: decode_step(). */
dsa_status decode_step_two_queues(dsa_queue *q, dsa_queue *side, const decode_step_io *io,
                                  const dsa_events *ev, cl_event *start, cl_event *done);

#endif
