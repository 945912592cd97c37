/* dsacl-bench row decode_step: examples/decode_step.c's decode_step() (the
 * eight calls of one DeepSeek-V4 decode step, as a server makes them) at full
 * size, without the reference (tests/dsacl-demo.c checks the same function
 * at sizes the C reference finishes). Reports the whole step and each stage
 * (START of the marker decode_step enqueues before a stage .. END of its
 * completion event), median and minimum over the timed runs.
 *
 * The batch: B sequences of L tokens each, decoding token L (position L - 1,
 * next_n = 1), H MLA heads, top-k K, window 128. Paging as in the demo: SWA
 * cache 64 tokens per block, C4 MLA cache and indexer K cache 64 compressed
 * rows per block (one block table, L / 4 rows per sequence), vLLM's padded
 * page strides, blocks handed out in a random order. The SWA cache holds only
 * the blocks the window touches (the block table's older entries are -1, as a
 * server that frees them has). Contents: the indexer K cache is written by
 * dsa_indexer_k_insert from random bf16 (the logits and the top-k see
 * distinct values); the MLA caches are filled with the byte 0x3c (finite
 * e4m3 values and scales; attention time does not depend on them) and the
 * step's own q-norm stage writes each new token into the SWA cache. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_step.h"

enum {
  MLA_DIM = 512,
  IDX_HEADS = 64,
  IDX_DIM = 128,
  ROPE_DIM = 64,
  RATIO = 4,   /* tokens per compressed row */
  SWA_BS = 64, /* SWA cache: tokens per block */
  CMP_BS = 64, /* C4 MLA cache and indexer cache: compressed rows per block */
  WINDOW = 128,
  INSERT_CHUNK = 65536 /* indexer K rows written per insert during setup */
};
#define MLA_STRIDE 37440 /* 64 * 584 padded as vLLM does */
#define IDX_STRIDE 8640  /* 64 * 132 padded */

/* ds_stages fills the stages and the indexer step. */
_Static_assert(DECODE_STEP_STAGES + 1 <= BENCH_MAX_STAGES, "BENCH_MAX_STAGES too small");

/* One timed (or warm-up) call: its per-stage start markers and completions. */
typedef struct step_events {
  cl_event start[DECODE_STEP_STAGES], done[DECODE_STEP_STAGES];
} step_events;

/* p = {B, L, H, K}. The "2 queues" rows (ds_setup2) run
 * decode_step_two_queues() with a second profiling queue (stages 5 and 6
 * there). */
typedef struct ds_state {
  dsa_queue *side; /* queues 2, else NULL */
  dsa_paged_cache swa, c4, ik;
  cl_mem mem[32];
  int nmem;
  dsa_tensor t[32];
  int nt;
  decode_step_io io;
  step_events *calls;
  int ncalls, cap;
} ds_state;

/* A buffer of bytes (from init when not NULL) kept in s, and a tensor over
 * it; NULL on failure. */
static const dsa_tensor *tensor(ds_state *s, bench_env *e, dsa_dtype dt, int nd,
                                const int64_t *shape, size_t bytes, const void *init) {
  cl_mem m = bench_make_buf(e, bytes ? bytes : 1, init);
  if (!m) return NULL;
  s->mem[s->nmem++] = m;
  s->t[s->nt] = dsa_tensor_make(m, 0, dt, nd, shape);
  return &s->t[s->nt++];
}

/* Random bf16 in [-1, 1) as a device tensor. */
static const dsa_tensor *random_bf16(ds_state *s, bench_env *e, uint64_t *seed, int nd,
                                     const int64_t *shape) {
  size_t n = 1;
  for (int i = 0; i < nd; i++) n *= (size_t)shape[i];
  uint16_t *v = bench_random_bf16(seed, n, -1.0f, 1.0f);
  const dsa_tensor *t = v ? tensor(s, e, DSA_BF16, nd, shape, n * 2, v) : NULL;
  free(v);
  return t;
}

/* Writes the indexer K cache rows of every sequence (slots from the block
 * table) from random bf16, INSERT_CHUNK rows per call. */
static int fill_indexer_cache(bench_env *e, ds_state *s, uint64_t *seed, const int32_t *cmp_bt,
                              int64_t b, int64_t wc, int64_t n_cmp) {
  const int64_t rows = b * n_cmp;
  int rc = -1;
  int64_t *slots = malloc((size_t)INSERT_CHUNK * sizeof *slots);
  cl_mem km = bench_make_buf(e, (size_t)INSERT_CHUNK * IDX_DIM * 2, NULL);
  cl_mem sm = bench_make_buf(e, (size_t)INSERT_CHUNK * 8, NULL);
  if (!slots || !km || !sm) goto out;
  for (int64_t r0 = 0; r0 < rows; r0 += INSERT_CHUNK) {
    const int64_t n = rows - r0 < INSERT_CHUNK ? rows - r0 : INSERT_CHUNK;
    for (int64_t i = 0; i < n; i++) {
      const int64_t seq = (r0 + i) / n_cmp, c = (r0 + i) % n_cmp;
      slots[i] = (int64_t)cmp_bt[seq * wc + c / CMP_BS] * CMP_BS + c % CMP_BS;
    }
    uint16_t *k = bench_random_bf16(seed, (size_t)n * IDX_DIM, -1.0f, 1.0f);
    if (!k) goto out;
    cl_int err = clEnqueueWriteBuffer(e->clq, km, CL_TRUE, 0, (size_t)n * IDX_DIM * 2, k, 0,
                                      NULL, NULL);
    free(k);
    if (err == CL_SUCCESS)
      err = clEnqueueWriteBuffer(e->clq, sm, CL_TRUE, 0, (size_t)n * 8, slots, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
      bench_cl_fail(err, "clEnqueueWriteBuffer", __LINE__);
      goto out;
    }
    const int64_t ks[2] = {n, IDX_DIM};
    dsa_tensor kt = dsa_tensor_make(km, 0, DSA_BF16, 2, ks);
    dsa_tensor st = dsa_tensor_make(sm, 0, DSA_I64, 1, &n);
    dsa_status r = dsa_indexer_k_insert(e->q, &kt, &st, &s->ik, NULL, NULL);
    if (r != DSA_OK) {
      bench_dsa_fail(r, "dsa_indexer_k_insert", __LINE__);
      goto out;
    }
  }
  rc = 0;
out:
  clFinish(e->clq); /* before the staging buffers go */
  free(slots);
  bench_free_buf(&km);
  bench_free_buf(&sm);
  return rc;
}

static int ds_stages(void *st, int runs, bench_stage *out);

static int ds_setup_q(bench_env *e, const int64_t *p, void **out, int queues) {
  ds_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  e->stages = ds_stages;
  if (queues == 2) {
    dsa_status st = dsa_queue_create(&s->side, e->ctx, DSA_QUEUE_PROFILING);
    if (st != DSA_OK) return bench_dsa_fail(st, "dsa_queue_create", __LINE__);
  }
  const int64_t B = p[0], L = p[1], H = p[2], K = p[3], T = B, W = WINDOW;
  const int64_t n_cmp = L / RATIO;                        /* rows each token sees */
  const int64_t ws = (L + SWA_BS - 1) / SWA_BS;           /* SWA block-table width */
  const int64_t wc = n_cmp ? (n_cmp + CMP_BS - 1) / CMP_BS : 1; /* compressed width */
  const int64_t lw = wc * CMP_BS;                         /* logits columns */
  const int64_t first_swa = L > W ? (L - W) / SWA_BS : 0; /* first block the window uses */
  const int64_t swa_per = ws - first_swa, swa_nb = B * swa_per, cmp_nb = B * wc;
  uint64_t seed = 0x5eed6001u;
  int rc = -1;

  /* Host metadata: block tables from random permutations of the blocks. */
  int32_t *swa_bt = malloc((size_t)(B * ws) * 4), *cmp_bt = malloc((size_t)(B * wc) * 4);
  int32_t *t2r = malloc((size_t)T * 4), *ctx = malloc((size_t)B * 4);
  int64_t *pos = malloc((size_t)T * 8), *kv_slots = malloc((size_t)T * 8);
  int64_t *swa_perm = bench_random_distinct(&seed, swa_nb, swa_nb);
  int64_t *cmp_perm = bench_random_distinct(&seed, cmp_nb, cmp_nb);
  float *cos_sin = bench_random_f32(&seed, (size_t)L * ROPE_DIM, -1.0f, 1.0f);
  float *sink = bench_random_f32(&seed, (size_t)H, -2.0f, 2.0f);
  if (!swa_bt || !cmp_bt || !t2r || !ctx || !pos || !kv_slots || !swa_perm || !cmp_perm ||
      !cos_sin || !sink)
    goto out;
  for (int64_t b = 0, ns = 0, nc = 0; b < B; b++) {
    for (int64_t j = 0; j < ws; j++) swa_bt[b * ws + j] = j >= first_swa ? (int32_t)swa_perm[ns++] : -1;
    for (int64_t j = 0; j < wc; j++) cmp_bt[b * wc + j] = (int32_t)cmp_perm[nc++];
    t2r[b] = (int32_t)b, ctx[b] = (int32_t)n_cmp, pos[b] = L - 1;
    kv_slots[b] = (int64_t)swa_bt[b * ws + (L - 1) / SWA_BS] * SWA_BS + (L - 1) % SWA_BS;
  }

  /* The caches: MLA ones filled with 0x3c, the indexer's written by its insert. */
  s->swa = (dsa_paged_cache){.mem = NULL, .offset = 0, .num_blocks = swa_nb, .block_size = SWA_BS,
                             .block_stride = MLA_STRIDE, .format = DSA_CACHE_MLA_FP8};
  s->c4 = (dsa_paged_cache){.mem = NULL, .offset = 0, .num_blocks = cmp_nb, .block_size = CMP_BS,
                            .block_stride = MLA_STRIDE, .format = DSA_CACHE_MLA_FP8};
  s->ik = (dsa_paged_cache){.mem = NULL, .offset = 0, .num_blocks = cmp_nb, .block_size = CMP_BS,
                            .block_stride = IDX_STRIDE, .format = DSA_CACHE_INDEXER_FP8};
  if (!(s->swa.mem = bench_make_filled(e, (size_t)swa_nb * MLA_STRIDE, 0x3c)) ||
      !(s->c4.mem = bench_make_filled(e, (size_t)cmp_nb * MLA_STRIDE, 0x3c)) ||
      !(s->ik.mem = bench_make_buf(e, (size_t)cmp_nb * IDX_STRIDE, NULL)))
    goto out;
  if (fill_indexer_cache(e, s, &seed, cmp_bt, B, wc, n_cmp) != 0) goto out;

  decode_step_io *io = &s->io;
  io->swa_cache = &s->swa, io->c4_cache = &s->c4, io->ik_cache = &s->ik;
  io->topk_k = (int32_t)K, io->window = (int32_t)W;
  io->swa_block_size = SWA_BS, io->cmp_block_size = CMP_BS;
  /* Step metadata. */
  if (!(io->positions = tensor(s, e, DSA_I64, 1, &T, (size_t)T * 8, pos)) ||
      !(io->token_to_req = tensor(s, e, DSA_I32, 1, &T, (size_t)T * 4, t2r)) ||
      !(io->cos_sin = tensor(s, e, DSA_F32, 2, (int64_t[]){L, ROPE_DIM},
                             (size_t)L * ROPE_DIM * 4, cos_sin)) ||
      !(io->swa_block_table = tensor(s, e, DSA_I32, 2, (int64_t[]){B, ws},
                                     (size_t)(B * ws) * 4, swa_bt)) ||
      !(io->cmp_block_table = tensor(s, e, DSA_I32, 2, (int64_t[]){B, wc},
                                     (size_t)(B * wc) * 4, cmp_bt)) ||
      !(io->context_lens = tensor(s, e, DSA_I32, 2, (int64_t[]){B, 1}, (size_t)B * 4, ctx)))
    goto out;
  /* This step's activations. */
  if (!(io->index_q = random_bf16(s, e, &seed, 3, (int64_t[]){T, IDX_HEADS, IDX_DIM})) ||
      !(io->index_weights = random_bf16(s, e, &seed, 2, (int64_t[]){T, IDX_HEADS})) ||
      !(io->q = random_bf16(s, e, &seed, 3, (int64_t[]){T, H, MLA_DIM})) ||
      !(io->kv = random_bf16(s, e, &seed, 2, (int64_t[]){T, MLA_DIM})) ||
      !(io->kv_slots = tensor(s, e, DSA_I64, 1, &T, (size_t)T * 8, kv_slots)) ||
      !(io->attn_sink = tensor(s, e, DSA_F32, 1, &H, (size_t)H * 4, sink)))
    goto out;
  /* Intermediates and outputs. */
  const size_t qn = (size_t)(T * H * MLA_DIM);
  if (!(io->iq_fp8 = tensor(s, e, DSA_E4M3, 3, (int64_t[]){T, IDX_HEADS, IDX_DIM},
                            (size_t)(T * IDX_HEADS * IDX_DIM), NULL)) ||
      !(io->iq_weights = tensor(s, e, DSA_F32, 2, (int64_t[]){T, IDX_HEADS},
                                (size_t)(T * IDX_HEADS) * 4, NULL)) ||
      !(io->logits = tensor(s, e, DSA_F32, 2, (int64_t[]){T, lw}, (size_t)(T * lw) * 4, NULL)) ||
      !(io->topk = tensor(s, e, DSA_I32, 2, (int64_t[]){T, K}, (size_t)(T * K) * 4, NULL)) ||
      !(io->c4_slots = tensor(s, e, DSA_I32, 2, (int64_t[]){T, K}, (size_t)(T * K) * 4, NULL)) ||
      !(io->c4_lens = tensor(s, e, DSA_I32, 1, &T, (size_t)T * 4, NULL)) ||
      !(io->swa_slots = tensor(s, e, DSA_I32, 2, (int64_t[]){T, W}, (size_t)(T * W) * 4, NULL)) ||
      !(io->swa_lens = tensor(s, e, DSA_I32, 1, &T, (size_t)T * 4, NULL)) ||
      !(io->q_normed = tensor(s, e, DSA_BF16, 3, (int64_t[]){T, H, MLA_DIM}, qn * 2, NULL)) ||
      !(io->out = tensor(s, e, DSA_BF16, 3, (int64_t[]){T, H, MLA_DIM}, qn * 2, NULL)) ||
      !(io->lse = tensor(s, e, DSA_F32, 2, (int64_t[]){T, H}, (size_t)(T * H) * 4, NULL)))
    goto out;
  /* The O projection's input: G = H / 8 wo_a groups of 8 heads (V4-Flash 64
   * heads -> 8 groups, Pro 128 -> 16), f32 block scales with the token axis
   * padded to a multiple of 4 as vLLM pads it. */
  const int64_t G = H % 8 ? 1 : H / 8, hpg = H / G, Tp = (T + 3) / 4 * 4;
  if (!(io->o_fp8 = tensor(s, e, DSA_E4M3, 3, (int64_t[]){G, T, hpg * MLA_DIM}, qn, NULL)) ||
      !(io->o_scales = tensor(s, e, DSA_F32, 3, (int64_t[]){G, hpg * 4, Tp},
                              (size_t)(G * hpg * 4 * Tp) * 4, NULL)))
    goto out;
  rc = 0;
out:
  free(swa_bt), free(cmp_bt), free(t2r), free(ctx), free(pos), free(kv_slots);
  free(swa_perm), free(cmp_perm), free(cos_sin), free(sink);
  return rc;
}

static int ds_setup(bench_env *e, const int64_t *p, void **out) { return ds_setup_q(e, p, out, 1); }
static int ds_setup2(bench_env *e, const int64_t *p, void **out) { return ds_setup_q(e, p, out, 2); }

/* One step; its events are kept for ds_stages. The whole step's time spans
 * from stage 1's start marker (handed to the driver as span_first) to the
 * end of stage 8. */
static int ds_run(bench_env *e, void *st, cl_event *done) {
  ds_state *s = st;
  if (s->ncalls == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    step_events *c = realloc(s->calls, (size_t)cap * sizeof *c);
    if (!c) return -1;
    s->calls = c, s->cap = cap;
  }
  step_events *c = &s->calls[s->ncalls];
  memset(c, 0, sizeof *c);
  dsa_status r = decode_step_two_queues(e->q, s->side, &s->io, NULL, c->start, c->done);
  s->ncalls++; /* a failing step may have left some events: teardown releases them */
  if (r != DSA_OK) return bench_dsa_fail(r, "decode_step", __LINE__);
  CL_TRY(clRetainEvent(c->start[0]));
  e->span_first = c->start[0];
  CL_TRY(clRetainEvent(c->done[DECODE_STEP_STAGES - 1]));
  *done = c->done[DECODE_STEP_STAGES - 1];
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Per-stage median and minimum over the last `runs` calls (the timed ones;
 * the warm-up calls come first). */
static int ds_stages(void *st, int runs, bench_stage *out) {
  ds_state *s = st;
  if (runs > s->ncalls) runs = s->ncalls;
  if (runs < 1) return 0;
  double *us = malloc((size_t)runs * sizeof *us);
  if (!us) return -1;
  /* The stages, then the indexer step (issue 14): Q quant + logits +
   * top-k, from stage 1's start to stage 3's end. */
  for (int i = 0; i <= DECODE_STEP_STAGES; i++) {
    const int first = i < DECODE_STEP_STAGES ? i : 0, last = i < DECODE_STEP_STAGES ? i : 2;
    for (int r = 0; r < runs; r++) {
      const step_events *c = &s->calls[s->ncalls - runs + r];
      cl_ulong t0 = 0, t1 = 0;
      cl_int err = clGetEventProfilingInfo(c->start[first], CL_PROFILING_COMMAND_START,
                                           sizeof t0, &t0, NULL);
      if (err == CL_SUCCESS)
        err = clGetEventProfilingInfo(c->done[last], CL_PROFILING_COMMAND_END, sizeof t1, &t1,
                                      NULL);
      if (err != CL_SUCCESS) {
        free(us);
        return bench_cl_fail(err, "clGetEventProfilingInfo", __LINE__);
      }
      us[r] = t1 > t0 ? (double)(t1 - t0) * 1e-3 : 0;
    }
    qsort(us, (size_t)runs, sizeof *us, cmp_double);
    out[i].name = i < DECODE_STEP_STAGES ? decode_step_stage_names[i]
                                         : "indexer step (Q quant + logits + top-k)";
    out[i].min_us = us[0];
    out[i].median_us = runs % 2 ? us[runs / 2] : 0.5 * (us[runs / 2 - 1] + us[runs / 2]);
  }
  free(us);
  return DECODE_STEP_STAGES + 1;
}

static void ds_teardown(void *st) {
  ds_state *s = st;
  if (!s) return;
  for (int i = 0; i < s->ncalls; i++)
    for (int j = 0; j < DECODE_STEP_STAGES; j++) {
      if (s->calls[i].start[j]) clReleaseEvent(s->calls[i].start[j]);
      if (s->calls[i].done[j]) clReleaseEvent(s->calls[i].done[j]);
    }
  free(s->calls);
  dsa_queue_destroy(&s->side);
  for (int i = 0; i < s->nmem; i++) bench_free_buf(&s->mem[i]);
  bench_free_buf(&s->swa.mem), bench_free_buf(&s->c4.mem), bench_free_buf(&s->ik.mem);
  free(s);
}

/* The main traffic: indexer q in, FP8 q and weights out and back in, the
 * indexer K cache rows each token sees, logits written and read, top-k and
 * slots, q in / normed q out and back in / attention out, (W + K) MLA cache
 * entries (584 B + a 4 B index) per token, the attention output read again
 * for the output quant and its FP8 bytes and f32 block scales. */
static double ds_bytes(const int64_t *p) {
  const double t = (double)p[0], h = (double)p[2], k = (double)p[3], n = (double)(p[1] / RATIO);
  const double lw = (double)(((p[1] / RATIO) + CMP_BS - 1) / CMP_BS * CMP_BS);
  return t * IDX_HEADS * IDX_DIM * (2 + 2 * 1) + t * IDX_HEADS * (2 + 2 * 4) + t * n * 132 +
         t * lw * 4 * 2 + t * k * 4 * 3 + t * WINDOW * 4 * 2 + t * h * MLA_DIM * 2 * 4 +
         t * (WINDOW + k) * (584 + 4) + t * h * (MLA_DIM * (2 + 1) + 4 * 4);
}

/* Logits (2 * 64 heads * 128 per compressed row) and attention (QK and PV). */
static double ds_flops(const int64_t *p) {
  const double t = (double)p[0], h = (double)p[2], k = (double)p[3], n = (double)(p[1] / RATIO);
  return 2.0 * t * n * IDX_HEADS * IDX_DIM + 4.0 * t * h * (WINDOW + k) * MLA_DIM;
}

const bench_op bench_ops_decode_step[] = {
    {"decode_step", "B=%lld L=%lld H=%lld K=%lld", {64, 32768, 64, 512}, {4, 1024, 16, 128},
     ds_setup, ds_run, ds_teardown, ds_bytes, ds_flops},
    /* DeepSeek-V4-Flash at its full context: 131072 tokens, 32768
     * compressed rows per sequence (issue 12's decode-step figure). */
    {"decode_step", "B=%lld L=%lld H=%lld K=%lld", {64, 131072, 64, 512}, {2, 2048, 16, 128},
     ds_setup, ds_run, ds_teardown, ds_bytes, ds_flops},
    /* The same two steps with stages 5 and 6 on a second queue, beside the
     * indexer's stages (decode_step_two_queues). */
    {"decode_step", "B=%lld L=%lld H=%lld K=%lld, 2 queues", {64, 32768, 64, 512},
     {4, 1024, 16, 128}, ds_setup2, ds_run, ds_teardown, ds_bytes, ds_flops},
    {"decode_step", "B=%lld L=%lld H=%lld K=%lld, 2 queues", {64, 131072, 64, 512},
     {2, 2048, 16, 128}, ds_setup2, ds_run, ds_teardown, ds_bytes, ds_flops},
    {0},
};
