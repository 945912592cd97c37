/* dsacl-bench: per-operator timings at DeepSeek-V4 shapes.
 *
 *   dsacl-bench [--device N|NAME] [--quick] [--json] [--runs N] [--only NAME]
 *               [--no-flush]
 *
 * Every time is device time from OpenCL profiling events (START..END of the
 * event an operator returns), median and minimum over N runs after warm-up.
 * The bandwidth ceiling is measured here: a uint4 copy kernel of our own and
 * clEnqueueCopyBuffer, whichever is faster, counting bytes read + written.
 * Between timed runs a scratch buffer several times the device cache is
 * overwritten, so operators start cold as they would in a server step.
 * Uses only the public API. To add an operator: write setup/run/teardown and
 * a bytes (and flops) count, and add rows to `ops` below. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dsacl/dsacl.h>

#define MLA_BLOCK_SIZE 64
#define MLA_BLOCK_STRIDE 37440 /* 64 * 584 rounded up to a multiple of 576 */
#define MLA_TOKEN_BYTES 584
#define MLA_DIM 512
#define POOL_BYTES 600e6       /* gather cache pool */
#define POOL_BYTES_QUICK 64e6

typedef struct bench_env {
  dsa_context *ctx;
  dsa_queue *q;
  cl_context clctx;
  cl_device_id dev;
  cl_command_queue clq;
  int quick;
} bench_env;

/* ---- errors ---------------------------------------------------------------- */

static int cl_fail(cl_int err, const char *what, int line) {
  fprintf(stderr, "dsacl-bench:%d: %s failed: OpenCL error %d\n", line, what, (int)err);
  return -1;
}

static int dsa_fail(dsa_status st, const char *what, int line) {
  fprintf(stderr, "dsacl-bench:%d: %s failed: %s: %s\n", line, what, dsa_status_name(st),
          dsa_last_error());
  return -1;
}

#define CL_TRY(expr)                                                   \
  do {                                                                 \
    cl_int e_ = (expr);                                                \
    if (e_ != CL_SUCCESS) return cl_fail(e_, #expr, __LINE__);         \
  } while (0)
#define DSA_TRY(expr)                                                  \
  do {                                                                 \
    dsa_status s_ = (expr);                                            \
    if (s_ != DSA_OK) return dsa_fail(s_, #expr, __LINE__);            \
  } while (0)

/* ---- host data --------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) { /* xorshift64* */
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

static uint16_t bf16_from_float(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even; inputs are finite */
  return (uint16_t)(u >> 16);
}

/* k ~ uniform(-4, 4) as bf16 */
static uint16_t *random_bf16(uint64_t *s, size_t n) {
  uint16_t *v = malloc(n * sizeof *v);
  if (!v) return NULL;
  for (size_t i = 0; i < n; i++)
    v[i] = bf16_from_float((float)((double)(rng_next(s) >> 11) * 0x1p-53 * 8.0 - 4.0));
  return v;
}

/* The first k of a random permutation of [0, n). */
static int64_t *random_distinct(uint64_t *s, int64_t n, int64_t k) {
  int64_t *all = malloc((size_t)n * sizeof *all);
  if (!all) return NULL;
  for (int64_t i = 0; i < n; i++) all[i] = i;
  for (int64_t i = 0; i < k; i++) {
    int64_t j = i + (int64_t)(rng_next(s) % (uint64_t)(n - i));
    int64_t t = all[i];
    all[i] = all[j];
    all[j] = t;
  }
  return all;
}

/* ---- device buffers -------------------------------------------------------- */

static cl_mem make_buf(bench_env *e, size_t bytes, const void *init) {
  cl_int err;
  cl_mem m = clCreateBuffer(e->clctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err != CL_SUCCESS) {
    cl_fail(err, "clCreateBuffer", __LINE__);
    return NULL;
  }
  if (init && (err = clEnqueueWriteBuffer(e->clq, m, CL_TRUE, 0, bytes, init, 0, NULL, NULL)) !=
                  CL_SUCCESS) {
    cl_fail(err, "clEnqueueWriteBuffer", __LINE__);
    clReleaseMemObject(m);
    return NULL;
  }
  return m;
}

static void free_buf(cl_mem *m) {
  if (*m) clReleaseMemObject(*m);
  *m = NULL;
}

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
  if (!(c->mem = make_buf(e, bytes, NULL))) return -1;
  const cl_uchar pattern = 0x3c;
  CL_TRY(clEnqueueFillBuffer(e->clq, c->mem, &pattern, 1, 0, bytes, 0, NULL, NULL));
  CL_TRY(clFinish(e->clq));
  return 0;
}

/* ---- operators ----------------------------------------------------------------- */

/* MLA insert: p = {N} */
typedef struct insert_state {
  dsa_paged_cache cache;
  cl_mem k, slots;
  dsa_tensor tk, tslots;
} insert_state;

static int insert_setup(bench_env *e, const int64_t *p, void **out) {
  insert_state *s = calloc(1, sizeof *s);
  if (!(*out = s)) return -1;
  const int64_t n = p[0];
  if (make_pool(e, &s->cache) != 0) return -1;
  uint64_t seed = 0x5eed0001u;
  uint16_t *k = random_bf16(&seed, (size_t)(n * MLA_DIM));
  int64_t *slots = random_distinct(&seed, s->cache.num_blocks * MLA_BLOCK_SIZE, n);
  if (k && slots) {
    s->k = make_buf(e, (size_t)n * MLA_DIM * 2, k);
    s->slots = make_buf(e, (size_t)n * 8, slots);
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

static void insert_teardown(void *st) {
  insert_state *s = st;
  if (!s) return;
  free_buf(&s->cache.mem);
  free_buf(&s->k);
  free_buf(&s->slots);
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
  for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)(rng_next(&seed) % cap);
  s->idx = make_buf(e, (size_t)n * 4, idx);
  free(idx);
  if (!s->idx || !(s->out = make_buf(e, (size_t)n * MLA_DIM * 2, NULL))) return -1;
  int64_t oshape[2] = {n, MLA_DIM};
  s->tidx = dsa_tensor_make(s->idx, 0, DSA_I32, 1, &n);
  s->tout = dsa_tensor_make(s->out, 0, DSA_BF16, 2, oshape);
  return 0;
}

static int slots_run(bench_env *e, void *st, cl_event *done) {
  slots_state *s = st;
  dsa_events ev = {0, NULL, done};
  DSA_TRY(dsa_mla_gather_slots(e->q, &s->cache, &s->tidx, &s->tout, &ev));
  return 0;
}

static void slots_teardown(void *st) {
  slots_state *s = st;
  if (!s) return;
  free_buf(&s->cache.mem);
  free_buf(&s->idx);
  free_buf(&s->out);
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
  int64_t *blocks = random_distinct(&seed, s->cache.num_blocks, r * w);
  int32_t *table = malloc((size_t)(r * w) * sizeof *table);
  int32_t *seq = malloc((size_t)r * sizeof *seq);
  if (blocks && table && seq) {
    for (int64_t i = 0; i < r * w; i++) table[i] = (int32_t)blocks[i];
    for (int64_t i = 0; i < r; i++) seq[i] = (int32_t)t;
    s->table = make_buf(e, (size_t)(r * w) * 4, table);
    s->seq = make_buf(e, (size_t)r * 4, seq);
  }
  free(blocks);
  free(table);
  free(seq);
  if (!s->table || !s->seq || !(s->out = make_buf(e, (size_t)(r * t) * MLA_DIM * 2, NULL)))
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
  DSA_TRY(dsa_mla_gather_paged(e->q, &s->cache, &s->tseq, NULL, &s->ttable, 0, &s->tout, &ev));
  return 0;
}

static void paged_teardown(void *st) {
  paged_state *s = st;
  if (!s) return;
  free_buf(&s->cache.mem);
  free_buf(&s->seq);
  free_buf(&s->table);
  free_buf(&s->out);
  free(s);
}

static double paged_bytes(const int64_t *p) {
  const double rt = (double)p[0] * (double)p[1];
  return rt * MLA_TOKEN_BYTES + (double)(p[0] * paged_width(p[1])) * 4 + (double)p[0] * 4 +
         rt * MLA_DIM * 2;
}

static double no_flops(const int64_t *p) {
  (void)p;
  return 0;
}

/* ---- the table ------------------------------------------------------------------ */

typedef struct bench_op {
  const char *name;
  const char *shape; /* printf format over the three shape values */
  int64_t p[3];      /* DeepSeek-V4 shape */
  int64_t quick[3];  /* --quick shape */
  int (*setup)(bench_env *e, const int64_t *p, void **state);
  int (*run)(bench_env *e, void *state, cl_event *done);
  void (*teardown)(void *state);
  double (*bytes)(const int64_t *p); /* read + written */
  double (*flops)(const int64_t *p);
} bench_op;

#define INSERT_OP(n, qn) \
  {"mla_insert", "N=%lld", {n, 0, 0}, {qn, 0, 0}, insert_setup, insert_run, insert_teardown, insert_bytes, no_flops}
#define SLOTS_OP(t, k, qt, qk)                                                               \
  {"mla_gather_slots", "%lldx%lld (S=%lld)", {t, k, (t) * (k)}, {qt, qk, (qt) * (qk)},      \
   slots_setup, slots_run, slots_teardown, slots_bytes, no_flops}
#define PAGED_OP(r, t, qr, qt)                                                               \
  {"mla_gather_paged", "R=%lld T=%lld", {r, t, 0}, {qr, qt, 0}, paged_setup, paged_run,     \
   paged_teardown, paged_bytes, no_flops}

static const bench_op ops[] = {
    INSERT_OP(64, 64),
    INSERT_OP(8192, 1024),
    SLOTS_OP(64, 640, 16, 64),
    SLOTS_OP(128, 1152, 32, 128),
    PAGED_OP(4, 8192, 2, 1024),
};
#define NUM_OPS ((int)(sizeof ops / sizeof *ops))

/* ---- timing ----------------------------------------------------------------------- */

typedef struct timing {
  double median_us, min_us;
} timing;

typedef int (*enqueue_fn)(bench_env *e, void *arg, cl_event *done);

typedef struct bench_cfg {
  int runs, warmup;
  cl_mem flush; /* overwritten before every timed run; NULL: no flush */
  size_t flush_bytes;
} bench_cfg;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int time_it(bench_env *e, const bench_cfg *cfg, enqueue_fn fn, void *arg, timing *out) {
  int rc = 0, n = 0;
  cl_event *ev = calloc((size_t)cfg->runs, sizeof *ev);
  double *us = calloc((size_t)cfg->runs, sizeof *us);
  if (!ev || !us) {
    rc = -1;
    goto done;
  }
  for (int i = 0; i < cfg->warmup && rc == 0; i++) {
    cl_event w = NULL;
    rc = fn(e, arg, &w);
    if (w) clReleaseEvent(w);
  }
  for (; n < cfg->runs && rc == 0; n++) {
    const cl_uchar zero = 0;
    cl_int err = cfg->flush ? clEnqueueFillBuffer(e->clq, cfg->flush, &zero, 1, 0,
                                                  cfg->flush_bytes, 0, NULL, NULL)
                            : CL_SUCCESS;
    if (err != CL_SUCCESS) {
      rc = cl_fail(err, "clEnqueueFillBuffer (cache flush)", __LINE__);
      break;
    }
    if ((rc = fn(e, arg, &ev[n])) != 0) break;
  }
  cl_int err = clFinish(e->clq);
  if (rc == 0 && err != CL_SUCCESS) rc = cl_fail(err, "clFinish", __LINE__);
  for (int i = 0; i < n && rc == 0; i++) {
    cl_ulong t0 = 0, t1 = 0;
    if (!ev[i]) {
      fprintf(stderr, "dsacl-bench: operator returned no event\n");
      rc = -1;
    } else if ((err = clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_START, sizeof t0, &t0,
                                              NULL)) != CL_SUCCESS ||
               (err = clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_END, sizeof t1, &t1,
                                              NULL)) != CL_SUCCESS) {
      rc = cl_fail(err, "clGetEventProfilingInfo", __LINE__);
    }
    us[i] = (double)(t1 - t0) * 1e-3;
  }
  if (rc == 0) {
    qsort(us, (size_t)n, sizeof *us, cmp_double);
    out->min_us = us[0];
    out->median_us = n % 2 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
  }
done:
  for (int i = 0; i < cfg->runs && ev; i++)
    if (ev[i]) clReleaseEvent(ev[i]);
  free(ev);
  free(us);
  return rc;
}

/* ---- bandwidth ceiling ----------------------------------------------------------- */

static const char *copy_src =
    "__kernel void copy_stride(__global const uint4 *restrict src,\n"
    "                          __global uint4 *restrict dst, ulong n) {\n"
    "  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) dst[i] = src[i];\n"
    "}\n"
    "__kernel void copy_one(__global const uint4 *restrict src,\n"
    "                       __global uint4 *restrict dst) {\n"
    "  size_t i = get_global_id(0);\n"
    "  dst[i] = src[i];\n"
    "}\n";

typedef struct copy_state {
  cl_kernel k;
  cl_mem src, dst;
  size_t bytes, global;
} copy_state;

static int copy_kernel_run(bench_env *e, void *arg, cl_event *done) {
  copy_state *c = arg;
  CL_TRY(clEnqueueNDRangeKernel(e->clq, c->k, 1, NULL, &c->global, NULL, 0, NULL, done));
  return 0;
}

static int copy_buffer_run(bench_env *e, void *arg, cl_event *done) {
  copy_state *c = arg;
  CL_TRY(clEnqueueCopyBuffer(e->clq, c->src, c->dst, 0, 0, c->bytes, 0, NULL, done));
  return 0;
}

typedef struct ceiling {
  double stride_gbs, one_gbs, copybuf_gbs, gbs;
  size_t bytes;
} ceiling;

static double gbs(double bytes, double us) { return us > 0 ? bytes / (us * 1e3) : 0; }

static int measure_ceiling(bench_env *e, const bench_cfg *cfg, ceiling *out) {
  cl_device_type type = 0;
  cl_ulong max_alloc = 0, global_mem = 0;
  cl_uint cus = 1;
  CL_TRY(clGetDeviceInfo(e->dev, CL_DEVICE_TYPE, sizeof type, &type, NULL));
  CL_TRY(clGetDeviceInfo(e->dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL));
  CL_TRY(clGetDeviceInfo(e->dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global_mem, &global_mem, NULL));
  CL_TRY(clGetDeviceInfo(e->dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL));

  size_t bytes = e->quick ? 64u << 20 : (type & CL_DEVICE_TYPE_GPU) ? 1u << 30 : 256u << 20;
  while (bytes > (64u << 20) && (bytes > max_alloc || bytes > global_mem / 4)) bytes /= 2;

  memset(out, 0, sizeof *out);
  out->bytes = bytes;
  copy_state c = {0};
  c.bytes = bytes;
  cl_program prog = NULL;
  cl_kernel ks = NULL, k1 = NULL;
  int rc = -1;
  cl_int err;
  prog = clCreateProgramWithSource(e->clctx, 1, &copy_src, NULL, &err);
  if (err != CL_SUCCESS) {
    cl_fail(err, "clCreateProgramWithSource", __LINE__);
    goto done;
  }
  if ((err = clBuildProgram(prog, 1, &e->dev, "", NULL, NULL)) != CL_SUCCESS) {
    char log[4096] = "";
    clGetProgramBuildInfo(prog, e->dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    fprintf(stderr, "dsacl-bench: copy kernel build failed (%d):\n%s\n", (int)err, log);
    goto done;
  }
  ks = clCreateKernel(prog, "copy_stride", &err);
  if (err == CL_SUCCESS) k1 = clCreateKernel(prog, "copy_one", &err);
  if (err != CL_SUCCESS) {
    cl_fail(err, "clCreateKernel", __LINE__);
    goto done;
  }
  if (!(c.src = make_buf(e, bytes, NULL)) || !(c.dst = make_buf(e, bytes, NULL))) goto done;
  const cl_uchar pattern = 0x5a;
  if ((err = clEnqueueFillBuffer(e->clq, c.src, &pattern, 1, 0, bytes, 0, NULL, NULL)) !=
      CL_SUCCESS) {
    cl_fail(err, "clEnqueueFillBuffer", __LINE__);
    goto done;
  }
  const cl_ulong n = bytes / 16;
  timing t;
  if ((err = clSetKernelArg(ks, 0, sizeof c.src, &c.src)) != CL_SUCCESS ||
      (err = clSetKernelArg(ks, 1, sizeof c.dst, &c.dst)) != CL_SUCCESS ||
      (err = clSetKernelArg(ks, 2, sizeof n, &n)) != CL_SUCCESS ||
      (err = clSetKernelArg(k1, 0, sizeof c.src, &c.src)) != CL_SUCCESS ||
      (err = clSetKernelArg(k1, 1, sizeof c.dst, &c.dst)) != CL_SUCCESS) {
    cl_fail(err, "clSetKernelArg", __LINE__);
    goto done;
  }
  /* Grid-stride: enough work-items to fill the device, each looping. */
  c.k = ks;
  c.global = (size_t)cus * ((type & CL_DEVICE_TYPE_GPU) ? 2048 : 256);
  if (time_it(e, cfg, copy_kernel_run, &c, &t) != 0) goto done;
  out->stride_gbs = gbs(2.0 * (double)bytes, t.median_us);
  /* One uint4 per work-item. */
  c.k = k1;
  c.global = (size_t)n;
  if (time_it(e, cfg, copy_kernel_run, &c, &t) != 0) goto done;
  out->one_gbs = gbs(2.0 * (double)bytes, t.median_us);
  if (time_it(e, cfg, copy_buffer_run, &c, &t) != 0) goto done;
  out->copybuf_gbs = gbs(2.0 * (double)bytes, t.median_us);
  out->gbs = fmax(out->stride_gbs, fmax(out->one_gbs, out->copybuf_gbs));
  rc = 0;
done:
  free_buf(&c.src);
  free_buf(&c.dst);
  if (ks) clReleaseKernel(ks);
  if (k1) clReleaseKernel(k1);
  if (prog) clReleaseProgram(prog);
  return rc;
}

/* ---- one operator ------------------------------------------------------------------ */

typedef struct op_run {
  void *state;
  const bench_op *op;
} op_run;

static int op_enqueue(bench_env *e, void *arg, cl_event *done) {
  op_run *r = arg;
  return r->op->run(e, r->state, done);
}

typedef struct result {
  const bench_op *op;
  const int64_t *p;
  char shape[64];
  int ok;
  timing t;
  double bytes, flops;
} result;

static int bench_one(bench_env *e, const bench_cfg *cfg, result *res) {
  op_run r = {NULL, res->op};
  res->ok = 0;
  res->bytes = res->op->bytes(res->p);
  res->flops = res->op->flops(res->p);
  int rc = res->op->setup(e, res->p, &r.state);
  if (rc == 0) rc = time_it(e, cfg, op_enqueue, &r, &res->t);
  if (rc == 0) {
    uint32_t faults = 0;
    dsa_status st = dsa_queue_faults(e->q, &faults);
    if (st != DSA_OK) {
      rc = dsa_fail(st, "dsa_queue_faults", __LINE__);
    } else if (faults) {
      fprintf(stderr, "dsacl-bench: %s %s raised device faults 0x%x\n", res->op->name,
              res->shape, faults);
      rc = -1;
    }
  }
  clFinish(e->clq); /* nothing may still use the buffers teardown releases */
  res->op->teardown(r.state);
  res->ok = rc == 0;
  return rc;
}

/* ---- output ------------------------------------------------------------------------- */

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      printf("\\%c", ch);
    else if (ch < 0x20)
      printf("\\u%04x", ch);
    else
      putchar(ch);
  }
  putchar('"');
}

static void print_json(const char *device, const char *driver, const char *platform,
                       const char *date, const bench_cfg *cfg, int quick, const ceiling *ceil_,
                       const result *res, int nres) {
  printf("{\n  \"tool\": \"dsacl-bench\",\n  \"dsacl_version\": ");
  json_str(dsa_version_string());
  printf(",\n  \"device\": ");
  json_str(device);
  printf(",\n  \"driver\": ");
  json_str(driver);
  printf(",\n  \"platform\": ");
  json_str(platform);
  printf(",\n  \"date\": ");
  json_str(date);
  printf(",\n  \"runs\": %d,\n  \"warmup\": %d,\n  \"quick\": %s,\n  \"cache_flush_bytes\": %zu,\n",
         cfg->runs, cfg->warmup, quick ? "true" : "false", cfg->flush ? cfg->flush_bytes : 0);
  printf("  \"ceiling\": {\"bytes\": %zu, \"copy_kernel_stride_gbs\": %.2f, "
         "\"copy_kernel_one_gbs\": %.2f, \"copy_buffer_gbs\": %.2f, \"gbs\": %.2f},\n",
         ceil_->bytes, ceil_->stride_gbs, ceil_->one_gbs, ceil_->copybuf_gbs, ceil_->gbs);
  printf("  \"results\": [");
  for (int i = 0; i < nres; i++) {
    const result *r = &res[i];
    printf("%s\n    {\"name\": ", i ? "," : "");
    json_str(r->op->name);
    printf(", \"shape\": ");
    json_str(r->shape);
    printf(", \"params\": [%lld, %lld, %lld], \"ok\": %s", (long long)r->p[0],
           (long long)r->p[1], (long long)r->p[2], r->ok ? "true" : "false");
    if (r->ok) {
      double g = gbs(r->bytes, r->t.median_us);
      printf(", \"median_us\": %.3f, \"min_us\": %.3f, \"bytes\": %.0f, \"gbs\": %.2f, "
             "\"pct_ceiling\": %.1f, \"flops\": %.0f, \"gflops\": %.2f",
             r->t.median_us, r->t.min_us, r->bytes, g, ceil_->gbs > 0 ? 100 * g / ceil_->gbs : 0,
             r->flops, r->t.median_us > 0 ? r->flops / (r->t.median_us * 1e3) : 0);
    }
    printf("}");
  }
  printf("\n  ]\n}\n");
}

static void print_table(const char *device, const char *driver, const char *platform,
                        const char *date, const bench_cfg *cfg, const ceiling *c,
                        const result *res, int nres) {
  printf("dsacl-bench %s | %s | driver %s | %s | %s\n", dsa_version_string(), device, driver,
         platform, date);
  printf("timing: OpenCL profiling events, median (min) of %d runs after %d warm-up; ", cfg->runs,
         cfg->warmup);
  if (cfg->flush)
    printf("%.0f MiB overwritten before each run\n", (double)cfg->flush_bytes / (1 << 20));
  else
    printf("no cache flush\n");
  printf("ceiling: %.1f GB/s (read+write; copy kernel grid-stride %.1f, one-per-item %.1f, "
         "clEnqueueCopyBuffer %.1f; %zu MiB)\n\n",
         c->gbs, c->stride_gbs, c->one_gbs, c->copybuf_gbs, c->bytes >> 20);
  printf("%-18s %-22s %12s %12s %12s %9s %7s\n", "operator", "shape", "median us", "min us",
         "MB moved", "GB/s", "% ceil");
  for (int i = 0; i < nres; i++) {
    const result *r = &res[i];
    if (!r->ok) {
      printf("%-18s %-22s %12s\n", r->op->name, r->shape, "FAILED");
      continue;
    }
    double g = gbs(r->bytes, r->t.median_us);
    printf("%-18s %-22s %12.2f %12.2f %12.3f %9.1f %6.1f%%", r->op->name, r->shape,
           r->t.median_us, r->t.min_us, r->bytes * 1e-6, g, c->gbs > 0 ? 100 * g / c->gbs : 0);
    if (r->flops > 0) printf("  %.1f GFLOP/s", r->flops / (r->t.median_us * 1e3));
    printf("\n");
  }
}

/* ---- main --------------------------------------------------------------------------- */

static int all_digits(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (!isdigit((unsigned char)*s)) return 0;
  return 1;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: dsacl-bench [--device N|NAME] [--quick] [--json] [--runs N] [--only NAME]"
          " [--no-flush]\n"
          "  --device N|NAME  device index or name substring (default: $DSACL_DEVICE, first GPU)\n"
          "  --quick          5 runs and small shapes (seconds on a CPU)\n"
          "  --json           one JSON document on stdout instead of the table\n"
          "  --runs N         timed runs per measurement (default 50)\n"
          "  --only NAME      only operators whose name contains NAME\n"
          "  --no-flush       do not overwrite the device cache between runs\n");
}

int main(int argc, char **argv) {
  const char *device = NULL, *only = NULL;
  int quick = 0, json = 0, runs = -1, flush = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) {
      device = argv[++i];
    } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else if (!strcmp(argv[i], "--runs") && i + 1 < argc && all_digits(argv[i + 1])) {
      runs = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--quick")) {
      quick = 1;
    } else if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else if (!strcmp(argv[i], "--no-flush")) {
      flush = 0;
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (runs < 0) runs = quick ? 5 : 50;
  if (runs < 1) {
    fprintf(stderr, "dsacl-bench: --runs must be >= 1\n");
    return 2;
  }

  bench_env e = {0};
  e.quick = quick;
  bench_cfg cfg = {runs, quick ? 2 : 5, NULL, 0};
  dsa_context_options o;
  dsa_context_options_default(&o);
  if (device && all_digits(device))
    o.device_index = atoi(device);
  else if (device)
    o.device_name = device;
  dsa_status st = dsa_context_create(&e.ctx, &o);
  if (st != DSA_OK) {
    dsa_fail(st, "dsa_context_create", __LINE__);
    return 1;
  }
  int rc = 1;
  result *res = NULL;
  if ((st = dsa_queue_create(&e.q, e.ctx, DSA_QUEUE_PROFILING)) != DSA_OK) {
    dsa_fail(st, "dsa_queue_create", __LINE__);
    goto out;
  }
  e.clctx = dsa_context_cl_context(e.ctx);
  e.dev = dsa_context_cl_device(e.ctx);
  e.clq = dsa_queue_cl(e.q);

  char driver[256] = "?", platform[256] = "?", date[64];
  cl_platform_id plat = NULL;
  clGetDeviceInfo(e.dev, CL_DRIVER_VERSION, sizeof driver, driver, NULL);
  if (clGetDeviceInfo(e.dev, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL) == CL_SUCCESS)
    clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof platform, platform, NULL);
  driver[sizeof driver - 1] = platform[sizeof platform - 1] = '\0';
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S%z", &tm);

  if (flush) {
    /* Some drivers report L1 as the global cache: on GPUs flush at least
     * 128 MiB, past any L2 of today. */
    cl_ulong cache = 0;
    cl_device_type type = 0;
    clGetDeviceInfo(e.dev, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, sizeof cache, &cache, NULL);
    clGetDeviceInfo(e.dev, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    const double least = (type & CL_DEVICE_TYPE_GPU) ? 128 << 20 : 8 << 20;
    cfg.flush_bytes = (size_t)fmin(fmax(4.0 * (double)cache, least), 256 << 20);
    if (!(cfg.flush = make_buf(&e, cfg.flush_bytes, NULL))) goto out;
  }

  ceiling ceil_;
  if (measure_ceiling(&e, &cfg, &ceil_) != 0) {
    fprintf(stderr, "dsacl-bench: measuring the copy ceiling failed\n");
    goto out;
  }

  res = calloc(NUM_OPS, sizeof *res);
  if (!res) goto out;
  int nres = 0, failed = 0;
  for (int i = 0; i < NUM_OPS; i++) {
    if (only && !strstr(ops[i].name, only)) continue;
    result *r = &res[nres++];
    r->op = &ops[i];
    r->p = quick ? ops[i].quick : ops[i].p;
    snprintf(r->shape, sizeof r->shape, ops[i].shape, (long long)r->p[0], (long long)r->p[1],
             (long long)r->p[2]);
    if (bench_one(&e, &cfg, r) != 0) {
      fprintf(stderr, "dsacl-bench: %s %s failed\n", r->op->name, r->shape);
      failed++;
    }
  }
  if (nres == 0) {
    fprintf(stderr, "dsacl-bench: no operator matches '%s'\n", only ? only : "");
    rc = 2;
    goto out;
  }
  if (json)
    print_json(dsa_context_device_name(e.ctx), driver, platform, date, &cfg, quick, &ceil_, res,
               nres);
  else
    print_table(dsa_context_device_name(e.ctx), driver, platform, date, &cfg, &ceil_, res, nres);
  rc = failed ? 1 : 0;
out:
  free(res);
  free_buf(&cfg.flush);
  dsa_queue_destroy(&e.q);
  dsa_context_destroy(&e.ctx);
  return rc;
}
