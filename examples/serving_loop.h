/* A continuous-batching serving loop over dsacl, as an inference server runs
 * it (issue 11, item 5): requests arrive with prompts of different lengths,
 * take cache blocks from free lists, prefill writes their KV rows (SWA MLA
 * cache) and compressed rows (C4 MLA cache and indexer K cache), decode
 * steps run the whole DeepSeek-V4 sparse-attention path on the current batch
 * (examples/decode_step.c), requests finish at different steps and give
 * their blocks back, and waiting requests take them. Public API only, on the
 * caller's cl_context and in-order cl_command_queue. The activations are
 * random (no model weights): the loop is about the cache and batch
 * bookkeeping and the operator calls around it.
 *
 * examples/serving_loop_main.c runs it and prints steps per second and the
 * device time per step; tests/serving_loop_check.c runs it with hooks that
 * mirror every cache write and check every step against the C reference. */
#ifndef DSACL_EXAMPLE_SERVING_LOOP_H
#define DSACL_EXAMPLE_SERVING_LOOP_H

#include <stdint.h>

#include <dsacl/dsacl.h>

enum {
  SERVE_MLA_DIM = 512,
  SERVE_IDX_HEADS = 64,
  SERVE_IDX_DIM = 128,
  SERVE_ROPE_DIM = 64,
  SERVE_RATIO = 4,   /* C4: one compressed row per 4 tokens */
  SERVE_SWA_BS = 64, /* SWA cache: tokens per block */
  SERVE_CMP_BS = 64  /* C4 MLA and indexer caches: compressed rows per block */
};
/* vLLM's padded page strides: 64 x 584 -> 37440, 64 x 132 -> 8640. */
#define SERVE_MLA_STRIDE 37440
#define SERVE_IDX_STRIDE 8640

typedef struct serving_config {
  int requests;                /* requests to serve in all */
  int max_batch;               /* most requests decoded in one step */
  int arrival_every;           /* a new request arrives every this many steps (0: all at once) */
  int min_prompt, max_prompt;  /* prompt lengths, uniform in [min, max] */
  int min_new, max_new;        /* tokens each request generates */
  int heads, topk, window;     /* MLA heads, top-k of the indexer, SWA window */
  int swa_blocks, cmp_blocks;  /* physical blocks in the pools (0: enough for max_batch) */
  uint64_t seed;
} serving_config;

/* Small defaults that run in seconds on a CPU OpenCL device. */
void serving_config_default(serving_config *c);

/* Host copies of one decode step's inputs and the device buffers holding
 * its outputs, for a checker (tests/serving_loop_check.c). Token t of the
 * step is request row t of the batch (next_n = 1). */
typedef struct serving_step {
  int step;
  int64_t T;              /* tokens (= requests) in this step */
  int64_t swa_w, cmp_w;   /* block-table widths */
  int64_t logits_cols;    /* cmp_w * SERVE_CMP_BS */
  int64_t cos_rows;       /* rows of the cos/sin table */
  const int64_t *positions;        /* [T] */
  const int32_t *token_to_req;     /* [T] (= t) */
  const int32_t *swa_table;        /* [T, swa_w] */
  const int32_t *cmp_table;        /* [T, cmp_w] */
  const int32_t *context_lens;     /* [T] compressed rows token t sees */
  const uint16_t *index_q;         /* [T, 64, 128] bf16 */
  const uint16_t *index_w;         /* [T, 64] bf16 */
  const uint16_t *q;               /* [T, H, 512] bf16 */
  const uint16_t *kv;              /* [T, 512] bf16, the new tokens' kv */
  const int64_t *kv_slots;         /* [T] their SWA slots */
  const float *sink;               /* [H] */
  const float *cos_sin;            /* [cos_rows, 64] */
  /* Outputs on the device (dsacl tensors over caller-owned cl_mem). */
  const dsa_tensor *iq_fp8, *iq_weights, *logits, *topk, *c4_slots, *c4_lens, *swa_slots,
      *swa_lens, *q_normed, *out, *lse;
  /* The output quantized for the O projection: e4m3 [G, T, H / G * 512] and
   * f32 block scales [G, H / G * 4, round_up(T, 4)]. */
  const dsa_tensor *o_fp8, *o_scales;
} serving_step;

typedef struct serving_hooks {
  void *user;
  /* n rows of dim bf16 values written to cache `which` (0 SWA MLA, 1 C4
   * MLA, 2 indexer K FP8) at slots[n] (called after the write completed). */
  void (*inserted)(void *user, int which, const uint16_t *rows, int dim, const int64_t *slots,
                   int64_t n);
  /* After decode step s has completed on the device. */
  void (*stepped)(void *user, const serving_step *s);
} serving_hooks;

typedef struct serving_stats {
  int steps, requests_done, max_batch_seen;
  int64_t tokens_decoded, tokens_prefilled;
  double device_us; /* sum over steps of each decode step's device time (profiling queue) */
  double host_s;    /* wall time of the whole loop */
} serving_stats;

/* The caches the loop keeps (for a checker's final comparison). */
typedef struct serving_caches {
  dsa_paged_cache swa, c4, ik;
} serving_caches;

/* Runs the loop to completion on q (hooks may be NULL). With caches
 * non-NULL the three caches outlive the run (for a checker's final
 * comparison) and the caller frees them with serving_caches_release.
 * Returns DSA_OK or the first failing call's status (dsa_last_error() names
 * an operator's failure; DSA_ERR_INVALID_ARGUMENT: a config the pools or
 * tables cannot hold); stats is filled either way. */
dsa_status serving_loop_run(dsa_queue *q, const serving_config *cfg, const serving_hooks *hooks,
                            serving_stats *stats, serving_caches *caches);
void serving_caches_release(serving_caches *c);

/* The server's own OpenCL context and in-order profiling queue on the first
 * GPU (else the first device): 0, 77 when there is no device, 1 on an error
 * (serving_loop_main.c). */
int serving_open_cl(cl_context *ctx, cl_command_queue *q, cl_device_id *dev);

#endif
