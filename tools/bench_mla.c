/* dsacl-bench rows for the MLA fp8 paged-cache family: insert and the two
 * dequantizing gathers, at DeepSeek-V4 shapes. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MLA_BLOCK_SIZE 64
#define MLA_BLOCK_STRIDE 37440 /* 64 * 584 rounded up to a multiple of 576 */
#define MLA_TOKEN_BYTES 584
#define MLA_DIM 512
#define POOL_BYTES 600e6       /* gather cache pool */
#define POOL_BYTES_QUICK 64e6

static int64_t pool_blocks(const bench_env *e) {
  return (int64_t)ceil((e->quick ? POOL_BYTES_QUICK : POOL_BYTES) / MLA_BLOCK_STRIDE);
}

/* An MLA cache pool; its contents only need to be defined, not meaningful:
 * the gathers do the same work for every byte pattern. */
static int make_pool(bench_env *e, dsa_paged_cache *c) {
  memset(c, 0, sizeof *c);
  c->num_blocks = pool_blocks(e);
  c->block_size = MLA_BLOCK_SIZE;
  c->block_stride = MLA_BLOCK_STRIDE;
  c->format = DSA_CACHE_MLA_FP8;
  size_t bytes = (size_t)c->num_blocks * MLA_BLOCK_STRIDE;
  if (!(c->mem = bench_make_buf(e, bytes, NULL))) return -1;
  const cl_uchar pattern = 0x3c;
  CL_TRY(clEnqueueFillBuffer(e->clq, c->mem, &pattern, 1, 0, bytes, 0, NULL, NULL));
  CL_TRY(clFinish(e->clq));
  return 0;
}

/* ---- operators ----------------------------------------------------------------- */

/* MLA insert: p = {N, whole_blocks}. whole_blocks = 0: N distinct slots drawn
 * from the whole pool (decode: one token per request, anywhere); 1: N
 * tokens filling whole 64-slot blocks taken in random order (prefill: vLLM's
 * slot mapping puts a request's consecutive tokens in consecutive slots). */
typedef struct insert_state {
  dsa_paged_cache cache;
  cl_mem k, slots;
  dsa_tensor tk, tslots;
  cl_program prog; /* the traffic-only rows' kernel */
  cl_kernel kern;
} insert_state;

static int insert_setup(bench_env *e, const int64_t *p, void **out) {
  insert_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  const int64_t n = p[0];
  if (make_pool(e, &s->cache) != 0) return -1;
  uint64_t seed = 0x5eed0001u;
  uint16_t *k = bench_random_bf16(&seed, (size_t)(n * MLA_DIM), -4.0f, 4.0f);
  int64_t *slots = NULL;
  if (p[1] == 0) {
    slots = bench_random_distinct(&seed, s->cache.num_blocks * MLA_BLOCK_SIZE, n);
  } else {
    int64_t *blocks = bench_random_distinct(&seed, s->cache.num_blocks,
                                            (n + MLA_BLOCK_SIZE - 1) / MLA_BLOCK_SIZE);
    if (blocks && (slots = malloc((size_t)n * sizeof *slots)))
      for (int64_t i = 0; i < n; i++)
        slots[i] = blocks[i / MLA_BLOCK_SIZE] * MLA_BLOCK_SIZE + i % MLA_BLOCK_SIZE;
    free(blocks);
  }
  if (k && slots) {
    s->k = bench_make_buf(e, (size_t)n * MLA_DIM * 2, k);
    s->slots = bench_make_buf(e, (size_t)n * 8, slots);
  }
  free(k);
  free(slots);
  if (!s->k || !s->slots) return -1;
  int64_t kshape[2] = {n, MLA_DIM};
  s->tk = dsa_tensor_make(s->k, 0, DSA_BF16, 2, kshape);
  s->tslots = dsa_tensor_make(s->slots, 0, DSA_I64, 1, &n);
  return 0;
}

static int insert_run(bench_env *e, void *st, cl_event *done) {
  insert_state *s = st;
  dsa_events ev = {0, NULL, done};
  DSA_TRY(dsa_mla_cache_insert(e->q, &s->tk, &s->tslots, &s->cache, &ev));
  return 0;
}

/* The insert's memory traffic without its arithmetic: every load and store
 * of mla_cache_insert (a token is 32 lanes; 2 x 16 B in per lane; out 8 B
 * per lane, 8 or 16 B more per lane, the 8 scale bytes from lane 0) with the
 * bytes passed through instead of quantized. Its time bounds what the
 * quantizing kernel can reach on the device under this bench's timing. The
 * XORs keep every loaded byte live. */
static const char traffic_src[] =
    "__kernel __attribute__((reqd_work_group_size(32, 8, 1)))\n"
    "void insert_traffic(__global const uint4 *k, __global const long *slots, long n,\n"
    "                    __global uchar *cache, int block_size, ulong block_stride) {\n"
    "  const uint l = get_local_id(0);\n"
    "  const ulong t = get_global_id(1);\n"
    "  if (t >= (ulong)n) return;\n"
    "  const uint4 x = k[t * 64 + l], y = k[t * 64 + 32 + l];\n"
    "  const long s = slots[t];\n"
    "  const ulong blk = (ulong)(s / block_size), ts = (ulong)(s % block_size);\n"
    "  __global uchar *d = cache + blk * block_stride + ts * 576;\n"
    "  *(__global uint2 *)(d + 8 * l) = x.xy ^ x.zw;\n"
    "  if (l >= 24) *(__global uint4 *)(d + 448 + 16 * (l - 24)) = y;\n"
    "  else *(__global uint2 *)(d + 256 + 8 * l) = y.xy ^ y.zw;\n"
    "  if (l == 0)\n"
    "    *(__global uint2 *)(cache + blk * block_stride + (ulong)block_size * 576 + ts * 8) =\n"
    "        x.xy;\n"
    "}\n";

static int traffic_setup(bench_env *e, const int64_t *p, void **out) {
  if (insert_setup(e, p, out) != 0) return -1;
  insert_state *s = *out;
  const char *src = traffic_src;
  cl_int err;
  s->prog = clCreateProgramWithSource(e->clctx, 1, &src, NULL, &err);
  if (err != CL_SUCCESS) return bench_cl_fail(err, "clCreateProgramWithSource", __LINE__);
  CL_TRY(clBuildProgram(s->prog, 1, &e->dev, "", NULL, NULL));
  s->kern = clCreateKernel(s->prog, "insert_traffic", &err);
  if (err != CL_SUCCESS) return bench_cl_fail(err, "clCreateKernel", __LINE__);
  const cl_long n = p[0];
  const cl_int bs = MLA_BLOCK_SIZE;
  const cl_ulong stride = MLA_BLOCK_STRIDE;
  CL_TRY(clSetKernelArg(s->kern, 0, sizeof s->k, &s->k));
  CL_TRY(clSetKernelArg(s->kern, 1, sizeof s->slots, &s->slots));
  CL_TRY(clSetKernelArg(s->kern, 2, sizeof n, &n));
  CL_TRY(clSetKernelArg(s->kern, 3, sizeof s->cache.mem, &s->cache.mem));
  CL_TRY(clSetKernelArg(s->kern, 4, sizeof bs, &bs));
  CL_TRY(clSetKernelArg(s->kern, 5, sizeof stride, &stride));
  return 0;
}

static int traffic_run(bench_env *e, void *st, cl_event *done) {
  insert_state *s = st;
  const size_t rows = (size_t)(s->tk.shape[0] + 7) / 8 * 8;
  const size_t global[2] = {32, rows}, local[2] = {32, 8};
  CL_TRY(clEnqueueNDRangeKernel(e->clq, s->kern, 2, NULL, global, local, 0, NULL, done));
  return 0;
}

static void insert_teardown(void *st) {
  insert_state *s = st;
  if (!s) return;
  if (s->kern) clReleaseKernel(s->kern);
  if (s->prog) clReleaseProgram(s->prog);
  bench_free_buf(&s->cache.mem);
  bench_free_buf(&s->k);
  bench_free_buf(&s->slots);
  free(s);
}

static double insert_bytes(const int64_t *p) {
  return (double)p[0] * (MLA_DIM * 2 + 8) + (double)p[0] * MLA_TOKEN_BYTES;
}

/* MLA gather_slots: p = {T, K, S = T*K} */
typedef struct slots_state {
  dsa_paged_cache cache;
  cl_mem idx, out;
  dsa_tensor tidx, tout;
} slots_state;

static int slots_setup(bench_env *e, const int64_t *p, void **out) {
  slots_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  const int64_t n = p[2];
  if (make_pool(e, &s->cache) != 0) return -1;
  uint64_t seed = 0x5eed0002u;
  const uint64_t cap = (uint64_t)(s->cache.num_blocks * MLA_BLOCK_SIZE);
  int32_t *idx = malloc((size_t)n * sizeof *idx);
  if (!idx) return -1;
  for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)(bench_rng_next(&seed) % cap);
  s->idx = bench_make_buf(e, (size_t)n * 4, idx);
  free(idx);
  if (!s->idx || !(s->out = bench_make_buf(e, (size_t)n * MLA_DIM * 2, NULL))) return -1;
  int64_t oshape[2] = {n, MLA_DIM};
  s->tidx = dsa_tensor_make(s->idx, 0, DSA_I32, 1, &n);
  s->tout = dsa_tensor_make(s->out, 0, DSA_BF16, 2, oshape);
  return 0;
}

static int slots_run(bench_env *e, void *st, cl_event *done) {
  slots_state *s = st;
  dsa_events ev = {0, NULL, done};
  DSA_TRY(dsa_mla_gather_slots(e->q, &s->tidx, &s->cache, &s->tout, &ev));
  return 0;
}

static void slots_teardown(void *st) {
  slots_state *s = st;
  if (!s) return;
  bench_free_buf(&s->cache.mem);
  bench_free_buf(&s->idx);
  bench_free_buf(&s->out);
  free(s);
}

static double slots_bytes(const int64_t *p) {
  return (double)p[2] * (MLA_TOKEN_BYTES + 4) + (double)p[2] * MLA_DIM * 2;
}

/* MLA gather_paged: p = {R, T tokens per request} */
typedef struct paged_state {
  dsa_paged_cache cache;
  cl_mem seq, table, out;
  dsa_tensor tseq, ttable, tout;
} paged_state;

static int64_t paged_width(int64_t t) { return (t + MLA_BLOCK_SIZE - 1) / MLA_BLOCK_SIZE; }

static int paged_setup(bench_env *e, const int64_t *p, void **out) {
  paged_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  const int64_t r = p[0], t = p[1], w = paged_width(t);
  if (make_pool(e, &s->cache) != 0) return -1;
  if (r * w > s->cache.num_blocks) {
    fprintf(stderr, "dsacl-bench: gather_paged: pool too small for %lld blocks\n",
            (long long)(r * w));
    return -1;
  }
  uint64_t seed = 0x5eed0003u;
  int64_t *blocks = bench_random_distinct(&seed, s->cache.num_blocks, r * w);
  int32_t *table = malloc((size_t)(r * w) * sizeof *table);
  int32_t *seq = malloc((size_t)r * sizeof *seq);
  if (blocks && table && seq) {
    for (int64_t i = 0; i < r * w; i++) table[i] = (int32_t)blocks[i];
    for (int64_t i = 0; i < r; i++) seq[i] = (int32_t)t;
    s->table = bench_make_buf(e, (size_t)(r * w) * 4, table);
    s->seq = bench_make_buf(e, (size_t)r * 4, seq);
  }
  free(blocks);
  free(table);
  free(seq);
  if (!s->table || !s->seq || !(s->out = bench_make_buf(e, (size_t)(r * t) * MLA_DIM * 2, NULL)))
    return -1;
  int64_t tshape[2] = {r, w}, oshape[3] = {r, t, MLA_DIM};
  s->tseq = dsa_tensor_make(s->seq, 0, DSA_I32, 1, &r);
  s->ttable = dsa_tensor_make(s->table, 0, DSA_I32, 2, tshape);
  s->tout = dsa_tensor_make(s->out, 0, DSA_BF16, 3, oshape);
  return 0;
}

static int paged_run(bench_env *e, void *st, cl_event *done) {
  paged_state *s = st;
  dsa_events ev = {0, NULL, done};
  DSA_TRY(dsa_mla_gather_paged(e->q, &s->tseq, NULL, &s->ttable, &s->cache, &s->tout, NULL, &ev));
  return 0;
}

static void paged_teardown(void *st) {
  paged_state *s = st;
  if (!s) return;
  bench_free_buf(&s->cache.mem);
  bench_free_buf(&s->seq);
  bench_free_buf(&s->table);
  bench_free_buf(&s->out);
  free(s);
}

static double paged_bytes(const int64_t *p) {
  const double rt = (double)p[0] * (double)p[1];
  return rt * MLA_TOKEN_BYTES + (double)(p[0] * paged_width(p[1])) * 4 + (double)p[0] * 4 +
         rt * MLA_DIM * 2;
}

#define INSERT_OP(n, qn, whole)                                                              \
  {"mla_insert", (whole) ? "N=%lld whole blocks" : "N=%lld", {n, whole, 0}, {qn, whole, 0},  \
   insert_setup, insert_run, insert_teardown, insert_bytes, bench_no_flops}
/* The same rows' traffic alone (traffic_src): the bound for the insert. */
#define TRAFFIC_OP(n, qn, whole)                                                             \
  {"mla_insert_traffic", (whole) ? "N=%lld whole blocks" : "N=%lld", {n, whole, 0},          \
   {qn, whole, 0}, traffic_setup, traffic_run, insert_teardown, insert_bytes, bench_no_flops}
#define SLOTS_OP(t, k, qt, qk)                                                               \
  {"mla_gather_slots", "%lldx%lld (S=%lld)", {t, k, (t) * (k)}, {qt, qk, (qt) * (qk)},      \
   slots_setup, slots_run, slots_teardown, slots_bytes, bench_no_flops}
#define PAGED_OP(r, t, qr, qt)                                                               \
  {"mla_gather_paged", "R=%lld T=%lld", {r, t, 0}, {qr, qt, 0}, paged_setup, paged_run,     \
   paged_teardown, paged_bytes, bench_no_flops}

const bench_op bench_ops_mla[] = {
    INSERT_OP(64, 64, 0),
    INSERT_OP(8192, 1024, 0),
    INSERT_OP(8192, 1024, 1),
    TRAFFIC_OP(8192, 1024, 0),
    TRAFFIC_OP(8192, 1024, 1),
    SLOTS_OP(64, 640, 16, 64),
    SLOTS_OP(128, 1152, 32, 128),
    PAGED_OP(4, 8192, 2, 1024),
    {0},
};
