/* The serving loop of serving_loop.h. Layout of one run:
 *
 *   pools     SWA MLA cache (64 tokens a block), C4 MLA cache and indexer K
 *             cache (64 compressed rows a block; the two share block ids),
 *             each a free list of physical block ids in a random order.
 *   request   prompt length, tokens to generate, its blocks (enough for its
 *             whole life, taken at admission, as a server that reserves),
 *             tokens in the cache, compressed rows in the cache.
 *   step      admit arrived requests while the batch and the pools allow
 *             (prefill: their KV rows and compressed rows); then, for the
 *             batch (active requests in admission order, token t = request
 *             row t): the compressed rows that the new tokens complete, then
 *             decode_step() (ending with the output quantized for the O
 *             projection: G = H / 8 wo_a groups of 8 heads, or one group
 *             when 8 does not divide H); finished requests return their
 *             blocks.
 * All device work is enqueued on the caller's in-order queue; the host waits
 * once per step (a server would overlap the next step's host work). */
#include "serving_loop.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decode_step.h"

void serving_config_default(serving_config *c) {
  memset(c, 0, sizeof *c);
  c->requests = 10;
  c->max_batch = 4;
  c->arrival_every = 2;
  c->min_prompt = 20, c->max_prompt = 300;
  c->min_new = 3, c->max_new = 10;
  c->heads = 16, c->topk = 64, c->window = 64;
  c->seed = 1;
}

/* ---- OpenCL setup ----------------------------------------------------------------- */

/* The server's own OpenCL objects: first GPU of any platform, else the
 * first device. Returns 0, or 77 when there is none, 1 on an error. */
int serving_open_cl(cl_context *ctx, cl_command_queue *q, cl_device_id *dev) {
  cl_platform_id plats[16];
  cl_uint np = 0;
  if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS || np == 0) return 77;
  if (np > 16) np = 16;
  *dev = NULL;
  for (int pass = 0; pass < 2 && !*dev; pass++)
    for (cl_uint i = 0; i < np && !*dev; i++) {
      cl_uint n = 0;
      if (clGetDeviceIDs(plats[i], pass ? CL_DEVICE_TYPE_ALL : CL_DEVICE_TYPE_GPU, 1, dev, &n) !=
              CL_SUCCESS ||
          n == 0)
        *dev = NULL;
    }
  if (!*dev) return 77;
  cl_int e;
  *ctx = clCreateContext(NULL, 1, dev, NULL, NULL, &e);
  if (!*ctx) return 1;
  *q = clCreateCommandQueue(*ctx, *dev, CL_QUEUE_PROFILING_ENABLE, &e);
  if (!*q) {
    clReleaseContext(*ctx);
    return 1;
  }
  return 0;
}

/* ---- small helpers ------------------------------------------------------------------ */

static uint64_t next_u64(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static int uniform_int(uint64_t *s, int lo, int hi) {
  return lo + (int)(next_u64(s) % (uint64_t)(hi - lo + 1));
}
/* bf16 of a value in about [-2, 2): random sign, exponent 126..127, mantissa. */
static void random_bf16(uint64_t *s, uint16_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint64_t r = next_u64(s);
    v[i] = (uint16_t)(((r & 1) << 15) | ((126 + ((r >> 1) & 1)) << 7) | ((r >> 2) & 0x7F));
  }
}

typedef struct pool {
  int32_t *free_ids;
  int n_free;
} pool;

static int pool_init(pool *p, int n, uint64_t *rng) {
  p->free_ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *p->free_ids);
  if (!p->free_ids) return -1;
  for (int i = 0; i < n; i++) p->free_ids[i] = i;
  for (int i = n - 1; i > 0; i--) { /* physical placement in a random order */
    int j = (int)(next_u64(rng) % (uint64_t)(i + 1));
    int32_t t = p->free_ids[i];
    p->free_ids[i] = p->free_ids[j], p->free_ids[j] = t;
  }
  p->n_free = n;
  return 0;
}

enum { WAITING, ACTIVE, DONE };
typedef struct request {
  int state, arrival, prompt, to_generate, generated;
  int64_t len;  /* tokens in the SWA cache */
  int64_t ncmp; /* compressed rows in the C4 and indexer caches */
  int32_t *swa_blocks, *cmp_blocks;
  int n_swa, n_cmp;
} request;

typedef struct loop {
  dsa_queue *q;
  cl_context clctx;
  cl_command_queue clq;
  const serving_config *cfg;
  const serving_hooks *hooks;
  uint64_t rng;
  int64_t swa_w, cmp_w, cols, max_ctx;
  dsa_paged_cache swa, c4, ik;
  pool swa_pool, cmp_pool;
} loop;

static cl_mem new_buf(loop *l, size_t size, dsa_status *st) {
  cl_int e;
  cl_mem m = clCreateBuffer(l->clctx, CL_MEM_READ_WRITE, size ? size : 16, NULL, &e);
  if (!m && *st == DSA_OK) *st = DSA_ERR_OPENCL;
  return m;
}
static void release(cl_mem *m) {
  if (*m) clReleaseMemObject(*m);
  *m = NULL;
}
static dsa_status upload(loop *l, cl_mem m, const void *src, size_t bytes) {
  if (!bytes) return DSA_OK;
  return clEnqueueWriteBuffer(l->clq, m, CL_FALSE, 0, bytes, src, 0, NULL, NULL) == CL_SUCCESS
             ? DSA_OK
             : DSA_ERR_OPENCL;
}

/* Writes n rows of bf16 KV (dim 512) or indexer K (dim 128) at slots into a
 * cache, through the operator a server would call. */
static dsa_status insert_rows(loop *l, int which, const uint16_t *rows, int dim,
                              const int64_t *slots, int64_t n) {
  if (n == 0) return DSA_OK;
  dsa_status st = DSA_OK;
  cl_mem rm = new_buf(l, (size_t)n * dim * 2, &st), sm = new_buf(l, (size_t)n * 8, &st);
  if (st == DSA_OK) st = upload(l, rm, rows, (size_t)n * dim * 2);
  if (st == DSA_OK) st = upload(l, sm, slots, (size_t)n * 8);
  if (st == DSA_OK) {
    dsa_tensor rt = dsa_tensor_make(rm, 0, DSA_BF16, 2, (int64_t[]){n, dim});
    dsa_tensor stt = dsa_tensor_make(sm, 0, DSA_I64, 1, (int64_t[]){n});
    st = which == 2 ? dsa_indexer_k_insert(l->q, &rt, &stt, &l->ik, NULL, NULL)
                    : dsa_mla_cache_insert(l->q, &rt, &stt, which ? &l->c4 : &l->swa, NULL, NULL);
  }
  /* The host arrays are reused by the caller: wait for the uploads. */
  if (clFinish(l->clq) != CL_SUCCESS && st == DSA_OK) st = DSA_ERR_OPENCL;
  if (st == DSA_OK && l->hooks && l->hooks->inserted)
    l->hooks->inserted(l->hooks->user, which, rows, dim, slots, n);
  release(&rm), release(&sm);
  return st;
}

static int64_t swa_slot(const request *r, int64_t p) {
  return (int64_t)r->swa_blocks[p / SERVE_SWA_BS] * SERVE_SWA_BS + p % SERVE_SWA_BS;
}
static int64_t cmp_slot(const request *r, int64_t c) {
  return (int64_t)r->cmp_blocks[c / SERVE_CMP_BS] * SERVE_CMP_BS + c % SERVE_CMP_BS;
}

/* Compressed rows [from, to) of the requests in list: C4 rows (512) and
 * indexer rows (128), random, one insert call per cache. */
static dsa_status insert_compressed(loop *l, request **list, const int64_t *from,
                                    const int64_t *to, int nreq) {
  int64_t n = 0;
  for (int i = 0; i < nreq; i++) n += to[i] - from[i];
  if (n == 0) return DSA_OK;
  uint16_t *kv = malloc((size_t)n * SERVE_MLA_DIM * 2), *k = malloc((size_t)n * SERVE_IDX_DIM * 2);
  int64_t *slots = malloc((size_t)n * 8);
  dsa_status st = kv && k && slots ? DSA_OK : DSA_ERR_OUT_OF_MEMORY;
  if (st == DSA_OK) {
    int64_t j = 0;
    for (int i = 0; i < nreq; i++)
      for (int64_t c = from[i]; c < to[i]; c++) slots[j++] = cmp_slot(list[i], c);
    random_bf16(&l->rng, kv, (size_t)n * SERVE_MLA_DIM);
    random_bf16(&l->rng, k, (size_t)n * SERVE_IDX_DIM);
    st = insert_rows(l, 1, kv, SERVE_MLA_DIM, slots, n);
    if (st == DSA_OK) st = insert_rows(l, 2, k, SERVE_IDX_DIM, slots, n);
  }
  free(kv), free(k), free(slots);
  return st;
}

/* Admission: blocks for the request's whole life, then prefill. */
static int blocks_for(int64_t tokens, int per_block) {
  return (int)((tokens + per_block - 1) / per_block);
}
static dsa_status admit(loop *l, request *r, serving_stats *stats) {
  const int64_t life = r->prompt + r->to_generate;
  r->n_swa = blocks_for(life, SERVE_SWA_BS);
  r->n_cmp = blocks_for(life / SERVE_RATIO, SERVE_CMP_BS);
  for (int i = 0; i < r->n_swa; i++) r->swa_blocks[i] = l->swa_pool.free_ids[--l->swa_pool.n_free];
  for (int i = 0; i < r->n_cmp; i++) r->cmp_blocks[i] = l->cmp_pool.free_ids[--l->cmp_pool.n_free];
  r->state = ACTIVE;
  /* Prefill: the prompt's KV rows into the SWA cache (a prefill attention
   * would run here), its complete windows' compressed rows into C4. */
  uint16_t *kv = malloc((size_t)r->prompt * SERVE_MLA_DIM * 2);
  int64_t *slots = malloc((size_t)r->prompt * 8);
  dsa_status st = kv && slots ? DSA_OK : DSA_ERR_OUT_OF_MEMORY;
  if (st == DSA_OK) {
    for (int64_t p = 0; p < r->prompt; p++) slots[p] = swa_slot(r, p);
    random_bf16(&l->rng, kv, (size_t)r->prompt * SERVE_MLA_DIM);
    st = insert_rows(l, 0, kv, SERVE_MLA_DIM, slots, r->prompt);
  }
  free(kv), free(slots);
  r->len = r->prompt;
  const int64_t from = 0, to = r->prompt / SERVE_RATIO;
  if (st == DSA_OK) st = insert_compressed(l, &r, &from, &to, 1);
  r->ncmp = to;
  stats->tokens_prefilled += r->prompt;
  return st;
}

static void retire(loop *l, request *r) {
  for (int i = 0; i < r->n_swa; i++) l->swa_pool.free_ids[l->swa_pool.n_free++] = r->swa_blocks[i];
  for (int i = 0; i < r->n_cmp; i++) l->cmp_pool.free_ids[l->cmp_pool.n_free++] = r->cmp_blocks[i];
  r->n_swa = r->n_cmp = 0;
  r->state = DONE;
}

/* ---- the loop ------------------------------------------------------------------------ */

enum { NB_STEP = 20 }; /* the step's device buffers */
enum {
  B_POS, B_T2R, B_SWA_BT, B_CMP_BT, B_CTX, B_IQ, B_IW, B_Q, B_KV, B_KVS, B_SINK, B_COS,
  B_IQO, B_IWO, B_LG, B_TK, B_GI, B_GL, B_SI, B_SL
};

dsa_status serving_loop_run(dsa_queue *q, const serving_config *cfg, const serving_hooks *hooks,
                            serving_stats *stats, serving_caches *caches) {
  memset(stats, 0, sizeof *stats);
  if (caches) memset(caches, 0, sizeof *caches);
  if (!q || !cfg || cfg->requests < 1 || cfg->max_batch < 1 || cfg->min_prompt < 1 ||
      cfg->max_prompt < cfg->min_prompt || cfg->min_new < 1 || cfg->max_new < cfg->min_new ||
      cfg->heads < 1 || cfg->topk < 1 || cfg->window < 1 || cfg->arrival_every < 0)
    return DSA_ERR_INVALID_ARGUMENT;
  loop l;
  memset(&l, 0, sizeof l);
  l.q = q, l.cfg = cfg, l.hooks = hooks;
  l.clq = dsa_queue_cl(q);
  if (clGetCommandQueueInfo(l.clq, CL_QUEUE_CONTEXT, sizeof l.clctx, &l.clctx, NULL) != CL_SUCCESS)
    return DSA_ERR_OPENCL;
  l.rng = cfg->seed * 0x9E3779B97F4A7C15ull + 7;
  l.max_ctx = (int64_t)cfg->max_prompt + cfg->max_new;
  l.swa_w = blocks_for(l.max_ctx, SERVE_SWA_BS);
  l.cmp_w = blocks_for(l.max_ctx / SERVE_RATIO, SERVE_CMP_BS);
  if (l.cmp_w < 1) l.cmp_w = 1;
  l.cols = l.cmp_w * SERVE_CMP_BS;
  if (cfg->topk > l.cols) return DSA_ERR_INVALID_ARGUMENT; /* more than any token can see */
  const int swa_nb = cfg->swa_blocks ? cfg->swa_blocks : cfg->max_batch * (int)l.swa_w;
  const int cmp_nb = cfg->cmp_blocks ? cfg->cmp_blocks : cfg->max_batch * (int)l.cmp_w;
  if (swa_nb < l.swa_w || cmp_nb < l.cmp_w) return DSA_ERR_INVALID_ARGUMENT; /* one must fit */

  const int64_t B = cfg->max_batch, H = cfg->heads, K = cfg->topk, W = cfg->window;
  dsa_status st = DSA_OK;
  request *reqs = calloc((size_t)cfg->requests, sizeof *reqs);
  cl_mem bufs[NB_STEP] = {0}, swa_m = NULL, c4_m = NULL, ik_m = NULL, qo_m = NULL, out_m = NULL,
         lse_m = NULL, of_m = NULL, os_m = NULL;
  /* The output quant's groups; its scales pad the token axis to a multiple
   * of 4 (vLLM's TMA alignment). */
  const int64_t G = H % 8 ? 1 : H / 8, hpg = H / G, Bp = (B + 3) / 4 * 4;
  /* Host side of one step (sized for the largest batch). */
  int64_t *pos = malloc((size_t)B * 8), *kv_slots = malloc((size_t)B * 8);
  int32_t *t2r = malloc((size_t)B * 4), *ctx_lens = malloc((size_t)B * 4);
  int32_t *swa_bt = malloc((size_t)(B * l.swa_w) * 4), *cmp_bt = malloc((size_t)(B * l.cmp_w) * 4);
  uint16_t *iq = malloc((size_t)(B * SERVE_IDX_HEADS * SERVE_IDX_DIM) * 2);
  uint16_t *iw = malloc((size_t)(B * SERVE_IDX_HEADS) * 2);
  uint16_t *qh = malloc((size_t)(B * H * SERVE_MLA_DIM) * 2), *kvh = malloc((size_t)B * SERVE_MLA_DIM * 2);
  float *sink = malloc((size_t)H * 4), *cos_sin = malloc((size_t)l.max_ctx * SERVE_ROPE_DIM * 4);
  request **batch = malloc((size_t)B * sizeof *batch);
  int64_t *from = malloc((size_t)B * 8), *to = malloc((size_t)B * 8);
  if (!reqs || !pos || !kv_slots || !t2r || !ctx_lens || !swa_bt || !cmp_bt || !iq || !iw ||
      !qh || !kvh || !sink || !cos_sin || !batch || !from || !to ||
      pool_init(&l.swa_pool, swa_nb, &l.rng) || pool_init(&l.cmp_pool, cmp_nb, &l.rng)) {
    st = DSA_ERR_OUT_OF_MEMORY;
    goto out;
  }
  for (int i = 0; i < cfg->requests; i++) {
    request *r = &reqs[i];
    r->arrival = i * cfg->arrival_every;
    r->prompt = uniform_int(&l.rng, cfg->min_prompt, cfg->max_prompt);
    r->to_generate = uniform_int(&l.rng, cfg->min_new, cfg->max_new);
    r->swa_blocks = malloc((size_t)l.swa_w * 4);
    r->cmp_blocks = malloc((size_t)l.cmp_w * 4);
    if (!r->swa_blocks || !r->cmp_blocks) {
      st = DSA_ERR_OUT_OF_MEMORY;
      goto out;
    }
  }
  /* GPT-J RoPE table over 64 dims (theta 10000), f32 [max_ctx, 64]; the sinks. */
  for (int64_t p = 0; p < l.max_ctx; p++)
    for (int i = 0; i < SERVE_ROPE_DIM / 2; i++) {
      double a = (double)p * pow(10000.0, -2.0 * i / SERVE_ROPE_DIM);
      cos_sin[p * SERVE_ROPE_DIM + i] = (float)cos(a);
      cos_sin[p * SERVE_ROPE_DIM + SERVE_ROPE_DIM / 2 + i] = (float)sin(a);
    }
  for (int64_t h = 0; h < H; h++) sink[h] = (float)((int)(next_u64(&l.rng) % 41) - 20) / 8.0f;

  /* Caches (zeroed) and the step's buffers, allocated once. */
  swa_m = new_buf(&l, (size_t)swa_nb * SERVE_MLA_STRIDE, &st);
  c4_m = new_buf(&l, (size_t)cmp_nb * SERVE_MLA_STRIDE, &st);
  ik_m = new_buf(&l, (size_t)cmp_nb * SERVE_IDX_STRIDE, &st);
  const size_t step_bytes[NB_STEP] = {
      (size_t)B * 8, (size_t)B * 4, (size_t)(B * l.swa_w) * 4, (size_t)(B * l.cmp_w) * 4,
      (size_t)B * 4, (size_t)(B * SERVE_IDX_HEADS * SERVE_IDX_DIM) * 2,
      (size_t)(B * SERVE_IDX_HEADS) * 2, (size_t)(B * H * SERVE_MLA_DIM) * 2,
      (size_t)B * SERVE_MLA_DIM * 2, (size_t)B * 8, (size_t)H * 4,
      (size_t)l.max_ctx * SERVE_ROPE_DIM * 4, (size_t)(B * SERVE_IDX_HEADS * SERVE_IDX_DIM),
      (size_t)(B * SERVE_IDX_HEADS) * 4, (size_t)(B * l.cols) * 4, (size_t)(B * K) * 4,
      (size_t)(B * K) * 4, (size_t)B * 4, (size_t)(B * W) * 4, (size_t)B * 4};
  for (int i = 0; i < NB_STEP; i++) bufs[i] = new_buf(&l, step_bytes[i], &st);
  qo_m = new_buf(&l, (size_t)(B * H * SERVE_MLA_DIM) * 2, &st);
  out_m = new_buf(&l, (size_t)(B * H * SERVE_MLA_DIM) * 2, &st);
  lse_m = new_buf(&l, (size_t)(B * H) * 4, &st);
  of_m = new_buf(&l, (size_t)(B * H * SERVE_MLA_DIM), &st);
  os_m = new_buf(&l, (size_t)(G * hpg * 4 * Bp) * 4, &st);
  if (st != DSA_OK) goto out;
  static const uint8_t zero = 0;
  if (clEnqueueFillBuffer(l.clq, swa_m, &zero, 1, 0, (size_t)swa_nb * SERVE_MLA_STRIDE, 0, NULL,
                          NULL) != CL_SUCCESS ||
      clEnqueueFillBuffer(l.clq, c4_m, &zero, 1, 0, (size_t)cmp_nb * SERVE_MLA_STRIDE, 0, NULL,
                          NULL) != CL_SUCCESS ||
      clEnqueueFillBuffer(l.clq, ik_m, &zero, 1, 0, (size_t)cmp_nb * SERVE_IDX_STRIDE, 0, NULL,
                          NULL) != CL_SUCCESS) {
    st = DSA_ERR_OPENCL;
    goto out;
  }
  l.swa = (dsa_paged_cache){.mem = swa_m, .offset = 0, .num_blocks = swa_nb,
                            .block_size = SERVE_SWA_BS, .block_stride = SERVE_MLA_STRIDE,
                            .format = DSA_CACHE_MLA_FP8};
  l.c4 = (dsa_paged_cache){.mem = c4_m, .offset = 0, .num_blocks = cmp_nb,
                           .block_size = SERVE_CMP_BS, .block_stride = SERVE_MLA_STRIDE,
                           .format = DSA_CACHE_MLA_FP8};
  l.ik = (dsa_paged_cache){.mem = ik_m, .offset = 0, .num_blocks = cmp_nb,
                           .block_size = SERVE_CMP_BS, .block_stride = SERVE_IDX_STRIDE,
                           .format = DSA_CACHE_INDEXER_FP8};
  if ((st = upload(&l, bufs[B_SINK], sink, (size_t)H * 4)) != DSA_OK ||
      (st = upload(&l, bufs[B_COS], cos_sin, (size_t)l.max_ctx * SERVE_ROPE_DIM * 4)) != DSA_OK)
    goto out;

  cl_command_queue_properties props = 0;
  clGetCommandQueueInfo(l.clq, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
  const int timed = (props & CL_QUEUE_PROFILING_ENABLE) != 0;
  struct timespec w0, w1;
  clock_gettime(CLOCK_MONOTONIC, &w0);

  int done = 0, next_arrival = 0;
  for (int step = 0; done < cfg->requests; step++) {
    /* Admission, in arrival order, while the batch and the pools allow. */
    int active = 0;
    for (int i = 0; i < cfg->requests; i++) active += reqs[i].state == ACTIVE;
    while (next_arrival < cfg->requests && reqs[next_arrival].arrival <= step &&
           active < cfg->max_batch) {
      request *r = &reqs[next_arrival];
      const int64_t life = r->prompt + r->to_generate;
      if (blocks_for(life, SERVE_SWA_BS) > l.swa_pool.n_free ||
          blocks_for(life / SERVE_RATIO, SERVE_CMP_BS) > l.cmp_pool.n_free)
        break; /* waits for blocks to come back */
      if ((st = admit(&l, r, stats)) != DSA_OK) goto out;
      next_arrival++, active++;
    }
    if (active == 0) continue; /* nothing arrived yet */

    /* The batch: active requests in admission order; token t decodes the
     * next position of request row t. */
    int64_t T = 0;
    for (int i = 0; i < cfg->requests; i++)
      if (reqs[i].state == ACTIVE) batch[T++] = &reqs[i];
    for (int64_t t = 0; t < T; t++) { /* the windows the new tokens complete */
      const int64_t p = batch[t]->len;
      from[t] = batch[t]->ncmp, to[t] = (p + 1) / SERVE_RATIO;
    }
    if ((st = insert_compressed(&l, batch, from, to, (int)T)) != DSA_OK) goto out;
    for (int64_t t = 0; t < T; t++) {
      request *r = batch[t];
      r->ncmp = to[t];
      pos[t] = r->len, t2r[t] = (int32_t)t, ctx_lens[t] = (int32_t)r->ncmp;
      kv_slots[t] = swa_slot(r, r->len);
      for (int64_t j = 0; j < l.swa_w; j++) swa_bt[t * l.swa_w + j] = j < r->n_swa ? r->swa_blocks[j] : -1;
      for (int64_t j = 0; j < l.cmp_w; j++) cmp_bt[t * l.cmp_w + j] = j < r->n_cmp ? r->cmp_blocks[j] : -1;
    }
    random_bf16(&l.rng, iq, (size_t)(T * SERVE_IDX_HEADS * SERVE_IDX_DIM));
    random_bf16(&l.rng, iw, (size_t)(T * SERVE_IDX_HEADS));
    random_bf16(&l.rng, qh, (size_t)(T * H * SERVE_MLA_DIM));
    random_bf16(&l.rng, kvh, (size_t)T * SERVE_MLA_DIM);
    const struct { int b; const void *p; size_t n; } up[] = {
        {B_POS, pos, (size_t)T * 8}, {B_T2R, t2r, (size_t)T * 4},
        {B_SWA_BT, swa_bt, (size_t)(T * l.swa_w) * 4}, {B_CMP_BT, cmp_bt, (size_t)(T * l.cmp_w) * 4},
        {B_CTX, ctx_lens, (size_t)T * 4}, {B_IQ, iq, (size_t)(T * SERVE_IDX_HEADS * SERVE_IDX_DIM) * 2},
        {B_IW, iw, (size_t)(T * SERVE_IDX_HEADS) * 2}, {B_Q, qh, (size_t)(T * H * SERVE_MLA_DIM) * 2},
        {B_KV, kvh, (size_t)T * SERVE_MLA_DIM * 2}, {B_KVS, kv_slots, (size_t)T * 8}};
    for (size_t i = 0; i < sizeof up / sizeof up[0]; i++)
      if ((st = upload(&l, bufs[up[i].b], up[i].p, up[i].n)) != DSA_OK) goto out;

    /* This step's tensors: views of T rows over the batch-sized buffers. */
    const int64_t P = l.max_ctx;
#define TN(buf, dt, nd, ...) dsa_tensor_make(buf, 0, dt, nd, (int64_t[]){__VA_ARGS__})
    dsa_tensor pos_t = TN(bufs[B_POS], DSA_I64, 1, T), t2r_t = TN(bufs[B_T2R], DSA_I32, 1, T);
    dsa_tensor cos_t = TN(bufs[B_COS], DSA_F32, 2, P, SERVE_ROPE_DIM);
    dsa_tensor swa_bt_t = TN(bufs[B_SWA_BT], DSA_I32, 2, T, l.swa_w);
    dsa_tensor cmp_bt_t = TN(bufs[B_CMP_BT], DSA_I32, 2, T, l.cmp_w);
    dsa_tensor ctx_t = TN(bufs[B_CTX], DSA_I32, 2, T, 1);
    dsa_tensor iq_t = TN(bufs[B_IQ], DSA_BF16, 3, T, SERVE_IDX_HEADS, SERVE_IDX_DIM);
    dsa_tensor iw_t = TN(bufs[B_IW], DSA_BF16, 2, T, SERVE_IDX_HEADS);
    dsa_tensor q_t = TN(bufs[B_Q], DSA_BF16, 3, T, H, SERVE_MLA_DIM);
    dsa_tensor kv_t = TN(bufs[B_KV], DSA_BF16, 2, T, SERVE_MLA_DIM);
    dsa_tensor kvs_t = TN(bufs[B_KVS], DSA_I64, 1, T), sink_t = TN(bufs[B_SINK], DSA_F32, 1, H);
    dsa_tensor iqo_t = TN(bufs[B_IQO], DSA_E4M3, 3, T, SERVE_IDX_HEADS, SERVE_IDX_DIM);
    dsa_tensor iwo_t = TN(bufs[B_IWO], DSA_F32, 2, T, SERVE_IDX_HEADS);
    dsa_tensor lg_t = TN(bufs[B_LG], DSA_F32, 2, T, l.cols);
    dsa_tensor tk_t = TN(bufs[B_TK], DSA_I32, 2, T, K), gi_t = TN(bufs[B_GI], DSA_I32, 2, T, K);
    dsa_tensor gl_t = TN(bufs[B_GL], DSA_I32, 1, T), si_t = TN(bufs[B_SI], DSA_I32, 2, T, W);
    dsa_tensor sl_t = TN(bufs[B_SL], DSA_I32, 1, T);
    dsa_tensor qo_t = TN(qo_m, DSA_BF16, 3, T, H, SERVE_MLA_DIM);
    dsa_tensor out_t = TN(out_m, DSA_BF16, 3, T, H, SERVE_MLA_DIM);
    dsa_tensor lse_t = TN(lse_m, DSA_F32, 2, T, H);
    dsa_tensor of_t = TN(of_m, DSA_E4M3, 3, G, T, hpg * SERVE_MLA_DIM);
    dsa_tensor os_t = TN(os_m, DSA_F32, 3, G, hpg * 4, (T + 3) / 4 * 4);
#undef TN
    const decode_step_io io = {&l.swa, &l.c4, &l.ik, &pos_t, &t2r_t, &cos_t, &swa_bt_t,
                               &cmp_bt_t, &ctx_t, &iq_t, &iw_t, &q_t, &kv_t, &kvs_t, &sink_t,
                               &iqo_t, &iwo_t, &lg_t, &tk_t, &gi_t, &gl_t, &si_t, &sl_t, &qo_t,
                               &out_t, &lse_t, &of_t, &os_t, (int32_t)K, (int32_t)W,
                               SERVE_SWA_BS, SERVE_CMP_BS};
    cl_event start = NULL, end = NULL;
    if (timed && clEnqueueMarkerWithWaitList(l.clq, 0, NULL, &start) != CL_SUCCESS) {
      st = DSA_ERR_OPENCL;
      goto out;
    }
    dsa_events ev = {0, NULL, timed ? &end : NULL};
    st = decode_step(q, &io, &ev, NULL, NULL);
    if (clFinish(l.clq) != CL_SUCCESS && st == DSA_OK) st = DSA_ERR_OPENCL;
    if (st == DSA_OK && timed && start && end) {
      cl_ulong a = 0, b = 0;
      clGetEventProfilingInfo(start, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL);
      clGetEventProfilingInfo(end, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL);
      if (b > a) stats->device_us += (double)(b - a) * 1e-3;
    }
    if (start) clReleaseEvent(start);
    if (end) clReleaseEvent(end);
    if (st != DSA_OK) goto out;
    stats->steps++;
    stats->tokens_decoded += T;
    if (T > stats->max_batch_seen) stats->max_batch_seen = (int)T;
    if (hooks && hooks->stepped) {
      const serving_step s = {step, T, l.swa_w, l.cmp_w, l.cols, P, pos, t2r, swa_bt, cmp_bt,
                              ctx_lens, iq, iw, qh, kvh, kv_slots, sink, cos_sin,
                              &iqo_t, &iwo_t, &lg_t, &tk_t, &gi_t, &gl_t, &si_t, &sl_t, &qo_t,
                              &out_t, &lse_t, &of_t, &os_t};
      hooks->stepped(hooks->user, &s);
    }
    /* The new tokens are in the SWA cache now; finished requests leave. */
    for (int64_t t = 0; t < T; t++) {
      request *r = batch[t];
      r->len++, r->generated++;
      if (r->generated == r->to_generate) retire(&l, r), done++;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &w1);
  stats->host_s = (double)(w1.tv_sec - w0.tv_sec) + 1e-9 * (double)(w1.tv_nsec - w0.tv_nsec);
  stats->requests_done = done;
  if (l.swa_pool.n_free != swa_nb || l.cmp_pool.n_free != cmp_nb) st = DSA_ERR_INTERNAL;

out:
  if (caches && st == DSA_OK) {
    caches->swa = l.swa, caches->c4 = l.c4, caches->ik = l.ik;
    swa_m = c4_m = ik_m = NULL; /* the caller's now */
  }
  release(&swa_m), release(&c4_m), release(&ik_m);
  for (int i = 0; i < NB_STEP; i++) release(&bufs[i]);
  release(&qo_m), release(&out_m), release(&lse_m), release(&of_m), release(&os_m);
  if (reqs)
    for (int i = 0; i < cfg->requests; i++) free(reqs[i].swa_blocks), free(reqs[i].cmp_blocks);
  free(reqs), free(pos), free(kv_slots), free(t2r), free(ctx_lens), free(swa_bt), free(cmp_bt);
  free(iq), free(iw), free(qh), free(kvh), free(sink), free(cos_sin), free(batch), free(from);
  free(to), free(l.swa_pool.free_ids), free(l.cmp_pool.free_ids);
  return st;
}

void serving_caches_release(serving_caches *c) {
  if (!c) return;
  release(&c->swa.mem), release(&c->c4.mem), release(&c->ik.mem);
}
