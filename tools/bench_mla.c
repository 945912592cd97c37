/* dsacl-bench rows for the MLA fp8 paged-cache family: insert and the two
 * dequantizing gathers, at DeepSeek-V4 shapes. Shapes, inputs and the calls
 * are the shared case descriptions' (tools/cases/mla_cache.c); the
 * traffic-only rows are the bench's own. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int64_t pool_blocks(const bench_env *e) {
  return (int64_t)ceil((e->quick ? CASE_MLA_POOL_BYTES_QUICK : CASE_MLA_POOL_BYTES) /
                       CASE_MLA_BENCH_STRIDE);
}

/* ---- insert: p = {N, whole_blocks} (cases.h, CASE_MLA_INSERT_ROWS) ------------------- */

static int insert_setup(bench_env *e, const int64_t *p, void **out) {
  bench_case *b = bench_case_new(&case_mla_insert_ops, sizeof(case_mla_insert), 0);
  if (!(*out = b)) return -1;
  case_mla_insert *c = b->c;
  *c = (case_mla_insert){.n = p[0], .whole = p[1] != 0, .nb = pool_blocks(e)};
  return case_mla_insert_gen_bench(c) ? -1 : bench_case_upload(e, b);
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

typedef struct traffic_state {
  bench_case *b; /* the insert row's case: its k, slots and pool */
  cl_program prog;
  cl_kernel kern;
} traffic_state;

static int traffic_setup(bench_env *e, const int64_t *p, void **out) {
  traffic_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  if (insert_setup(e, p, (void **)&s->b) != 0) return -1;
  const case_mla_insert *c = s->b->c;
  const char *src = traffic_src;
  cl_int err;
  s->prog = clCreateProgramWithSource(e->clctx, 1, &src, NULL, &err);
  if (err != CL_SUCCESS) return bench_cl_fail(err, "clCreateProgramWithSource", __LINE__);
  CL_TRY(clBuildProgram(s->prog, 1, &e->dev, "", NULL, NULL));
  s->kern = clCreateKernel(s->prog, "insert_traffic", &err);
  if (err != CL_SUCCESS) return bench_cl_fail(err, "clCreateKernel", __LINE__);
  const cl_long n = p[0];
  const cl_int bs = c->bs;
  const cl_ulong stride = (cl_ulong)c->stride;
  CL_TRY(clSetKernelArg(s->kern, 0, sizeof c->mk, &c->mk));
  CL_TRY(clSetKernelArg(s->kern, 1, sizeof c->ms, &c->ms));
  CL_TRY(clSetKernelArg(s->kern, 2, sizeof n, &n));
  CL_TRY(clSetKernelArg(s->kern, 3, sizeof c->mc, &c->mc));
  CL_TRY(clSetKernelArg(s->kern, 4, sizeof bs, &bs));
  CL_TRY(clSetKernelArg(s->kern, 5, sizeof stride, &stride));
  return 0;
}

static int traffic_run(bench_env *e, void *st, cl_event *done) {
  traffic_state *s = st;
  const size_t rows = (size_t)(((const case_mla_insert *)s->b->c)->n + 7) / 8 * 8;
  const size_t global[2] = {32, rows}, local[2] = {32, 8};
  CL_TRY(clEnqueueNDRangeKernel(e->clq, s->kern, 2, NULL, global, local, 0, NULL, done));
  return 0;
}

static void traffic_teardown(void *st) {
  traffic_state *s = st;
  if (!s) return;
  if (s->kern) clReleaseKernel(s->kern);
  if (s->prog) clReleaseProgram(s->prog);
  bench_case_teardown(s->b);
  free(s);
}

/* ---- gathers: p = {T, K, S = T*K} and {R, T tokens per request} --------------------- */

static int slots_setup(bench_env *e, const int64_t *p, void **out) {
  bench_case *b = bench_case_new(&case_mla_slots_ops, sizeof(case_mla_slots), 0);
  if (!(*out = b)) return -1;
  case_mla_slots *c = b->c;
  *c = (case_mla_slots){.s = p[2], .nb = pool_blocks(e)};
  return case_mla_slots_gen_bench(c) ? -1 : bench_case_upload(e, b);
}

static int paged_setup(bench_env *e, const int64_t *p, void **out) {
  bench_case *b = bench_case_new(&case_mla_paged_ops, sizeof(case_mla_paged), 0);
  if (!(*out = b)) return -1;
  case_mla_paged *c = b->c;
  *c = (case_mla_paged){.r = p[0], .max_t = p[1], .nb = pool_blocks(e)};
  if (c->r * ((c->max_t + 63) / 64) > c->nb) {
    fprintf(stderr, "dsacl-bench: gather_paged: pool too small for %lld blocks\n",
            (long long)(c->r * ((c->max_t + 63) / 64)));
    return -1;
  }
  return case_mla_paged_gen_bench(c) ? -1 : bench_case_upload(e, b);
}

#define INSERT_OP(n, qn, whole)                                                              \
  {"mla_insert", (whole) ? "N=%lld whole blocks" : "N=%lld", {n, whole, 0}, {qn, whole, 0},  \
   insert_setup, bench_case_run, bench_case_teardown, case_mla_insert_bytes,                 \
   case_mla_insert_flops},
/* The same rows' traffic alone (traffic_src): the bound for the insert. */
#define TRAFFIC_OP(n, qn, whole)                                                             \
  {"mla_insert_traffic", (whole) ? "N=%lld whole blocks" : "N=%lld", {n, whole, 0},          \
   {qn, whole, 0}, traffic_setup, traffic_run, traffic_teardown, case_mla_insert_bytes,       \
   case_mla_insert_flops},
#define SLOTS_OP(t, k, qt, qk)                                                               \
  {"mla_gather_slots", "%lldx%lld (S=%lld)", {t, k, (t) * (k)}, {qt, qk, (qt) * (qk)},      \
   slots_setup, bench_case_run, bench_case_teardown, case_mla_slots_bytes,                   \
   case_mla_slots_flops},
#define PAGED_OP(r, t, qr, qt)                                                               \
  {"mla_gather_paged", "R=%lld T=%lld", {r, t, 0}, {qr, qt, 0}, paged_setup, bench_case_run, \
   bench_case_teardown, case_mla_paged_bytes, case_mla_paged_flops},

const bench_op bench_ops_mla[] = {
    CASE_MLA_INSERT_ROWS(INSERT_OP)
    TRAFFIC_OP(8192, 1024, 0)
    TRAFFIC_OP(8192, 1024, 1)
    CASE_MLA_SLOTS_ROWS(SLOTS_OP)
    CASE_MLA_PAGED_ROWS(PAGED_OP)
    {0},
};
