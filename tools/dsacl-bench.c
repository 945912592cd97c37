/* dsacl-bench: per-operator timings at DeepSeek-V4 shapes.
 *
 *   dsacl-bench [--device N|NAME] [--quick] [--json] [--runs N] [--only NAME]
 *               [--no-flush]
 *
 * Every time is device time from OpenCL profiling events (START..END of the
 * event an operator returns; for operators of several kernels, START of a
 * marker enqueued just before them..END of the last), median and minimum over
 * N runs after warm-up.
 * Between timed runs a scratch buffer several times the device cache is
 * overwritten, so operators start cold as they would in a server step.
 * Reference measurements, taken the same way with kernels of our own:
 *  - the bandwidth ceiling: a uint4 copy kernel (grid-stride and one uint4 per
 *    work-item) and clEnqueueCopyBuffer on a large buffer, whichever is
 *    fastest, counting bytes read + written ("% ceil" = op GB/s / ceiling);
 *  - the compute ceilings: fp32 FMA (eight float4 chains per work-item) and,
 *    on NVIDIA, bf16 mma.sync m16n8k16 (four chains per warp), the
 *    instruction of the tile back-end; for the roofline (tools/roofline.py);
 *  - the launch floor: an empty kernel on one work-group;
 *  - per operator, a size-matched copy: the faster of copy_one (one uint4 per
 *    work-item) and copy_four (four) moving as many bytes as the operator
 *    (bytes/2 read + bytes/2 written, rounded up to 16 B and to whole
 *    work-groups of 256 uint4), so
 *    "% copy" = copy us / op us * 100 (100% = as fast as a plain copy of the
 *    same bytes; small ops are dominated by launch cost on both sides);
 *  - for the MLA insert, mla_insert_traffic rows: its exact loads and stores
 *    without the quantization (bench_mla.c), the bound for that operator.
 * Uses only the public API. Operators live in one file per family
 * (bench_<family>.c); how to add a family is at the top of bench.h. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dsacl/dsacl.h>

#include "bench.h"
#include "json.h"

/* The families, one line each: X(<family>) for bench_ops_<family>[]. */
#define BENCH_FAMILIES(X) \
  X(indexer_logits)       \
  X(indexer_quant)        \
  X(topk)                 \
  X(mla)                  \
  X(mla_qnorm)            \
  X(sparse_mla)           \
  X(decode_step)          \
  X(output_quant)         \
  X(mtp_norm)             \
  X(compressor)           \
  /* end of families */

#define DECLARE(f) extern const bench_op bench_ops_##f[];
BENCH_FAMILIES(DECLARE)
#undef DECLARE
#define ENTRY(f) bench_ops_##f,
static const bench_op *const families[] = {BENCH_FAMILIES(ENTRY)};
#undef ENTRY
#define NUM_FAMILIES ((int)(sizeof families / sizeof families[0]))

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
  cl_event *first = calloc((size_t)cfg->runs, sizeof *first);
  double *us = calloc((size_t)cfg->runs, sizeof *us);
  if (!ev || !first || !us) {
    rc = -1;
    goto done;
  }
  for (int i = 0; i < cfg->warmup && rc == 0; i++) {
    cl_event w = NULL;
    e->span_first = NULL;
    rc = fn(e, arg, &w);
    if (w) clReleaseEvent(w);
    if (e->span_first) clReleaseEvent(e->span_first);
    e->span_first = NULL;
  }
  for (; n < cfg->runs && rc == 0; n++) {
    const cl_uchar zero = 0;
    cl_int err = cfg->flush ? clEnqueueFillBuffer(e->clq, cfg->flush, &zero, 1, 0,
                                                  cfg->flush_bytes, 0, NULL, NULL)
                            : CL_SUCCESS;
    if (err != CL_SUCCESS) {
      rc = bench_cl_fail(err, "clEnqueueFillBuffer (cache flush)", __LINE__);
      break;
    }
    e->span_first = NULL;
    rc = fn(e, arg, &ev[n]);
    first[n] = e->span_first; /* a marker before a multi-kernel operator, or NULL */
    e->span_first = NULL;
    if (rc != 0) break;
  }
  cl_int err = clFinish(e->clq);
  if (rc == 0 && err != CL_SUCCESS) rc = bench_cl_fail(err, "clFinish", __LINE__);
  for (int i = 0; i < n && rc == 0; i++) {
    cl_ulong t0 = 0, t1 = 0;
    if (!ev[i]) {
      fprintf(stderr, "dsacl-bench: operator returned no event\n");
      rc = -1;
    } else if ((err = clGetEventProfilingInfo(first[i] ? first[i] : ev[i],
                                              CL_PROFILING_COMMAND_START, sizeof t0, &t0,
                                              NULL)) != CL_SUCCESS ||
               (err = clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_END, sizeof t1, &t1,
                                              NULL)) != CL_SUCCESS) {
      rc = bench_cl_fail(err, "clGetEventProfilingInfo", __LINE__);
    }
    us[i] = (double)(t1 - t0) * 1e-3;
  }
  if (rc == 0) {
    qsort(us, (size_t)n, sizeof *us, cmp_double);
    out->min_us = us[0];
    out->median_us = n % 2 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
  }
done:
  for (int i = 0; i < cfg->runs && ev && first; i++) {
    if (ev[i]) clReleaseEvent(ev[i]);
    if (first[i]) clReleaseEvent(first[i]);
  }
  free(ev);
  free(first);
  free(us);
  return rc;
}

/* ---- reference kernels --------------------------------------------------------------- */

static const char *ref_src =
    "__kernel void copy_stride(__global const uint4 *restrict src,\n"
    "                          __global uint4 *restrict dst, ulong n) {\n"
    "  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) dst[i] = src[i];\n"
    "}\n"
    "__kernel void copy_one(__global const uint4 *restrict src,\n"
    "                       __global uint4 *restrict dst) {\n"
    "  size_t i = get_global_id(0);\n"
    "  dst[i] = src[i];\n"
    "}\n"
    "__kernel void copy_four(__global const uint4 *restrict src,\n"
    "                        __global uint4 *restrict dst, ulong n) {\n"
    "  const ulong l = get_local_size(0);\n"
    "  const ulong b = get_group_id(0) * l * 4 + get_local_id(0);\n"
    "  uint4 v[4] = {(uint4)(0u), (uint4)(0u), (uint4)(0u), (uint4)(0u)};\n"
    "  for (int j = 0; j < 4; j++) if (b + j * l < n) v[j] = src[b + j * l];\n"
    "  for (int j = 0; j < 4; j++) if (b + j * l < n) dst[b + j * l] = v[j];\n"
    "}\n"
    "__kernel void empty(void) {}\n"
    /* The fp32 vector ceiling: eight independent float4 FMA chains per
     * work-item (2 * 4 * 8 FLOP an iteration); the sum is stored so that
     * nothing is optimised away. */
    "__kernel void fma_peak(__global float *out, float a, float b, int iters) {\n"
    "  const float g = (float)get_global_id(0) * 1e-6f;\n"
    "  float4 x0 = g, x1 = g + 1, x2 = g + 2, x3 = g + 3, x4 = g + 4, x5 = g + 5,\n"
    "         x6 = g + 6, x7 = g + 7;\n"
    "  const float4 av = a, bv = b;\n"
    "  for (int i = 0; i < iters; i++) {\n"
    "    x0 = fma(x0, av, bv); x1 = fma(x1, av, bv); x2 = fma(x2, av, bv);\n"
    "    x3 = fma(x3, av, bv); x4 = fma(x4, av, bv); x5 = fma(x5, av, bv);\n"
    "    x6 = fma(x6, av, bv); x7 = fma(x7, av, bv);\n"
    "  }\n"
    "  const float4 s = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));\n"
    "  out[get_global_id(0)] = (s.x + s.y) + (s.z + s.w);\n"
    "}\n";

/* The matrix ceiling on NVIDIA (the instruction the tile back-end uses,
 * cl/dsa_nv.h): per warp, four independent bf16 mma.sync m16n8k16 chains,
 * 2 * 16 * 8 * 16 FLOP each per iteration. Built only where the device is
 * NVIDIA's. */
static const char *mma_src =
    "__kernel void mma_peak(__global float *out, int iters) {\n"
    "  const uint id = (uint)get_global_id(0);\n"
    "  const uint a0 = 0x3f803f80u ^ (id & 7u), a1 = a0 + 1u, a2 = a0 + 2u, a3 = a0 + 3u;\n"
    "  const uint b0 = 0x3c003c00u ^ (id & 3u), b1 = b0 + 1u;\n"
    "  float c[4][4] = {{0}};\n"
    "  for (int i = 0; i < iters; i++) {\n"
    "    for (int j = 0; j < 4; j++) {\n"
    "      float d0, d1, d2, d3;\n"
    "      __asm__ __volatile__(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \"\n"
    "          \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\"\n"
    "          : \"=f\"(d0), \"=f\"(d1), \"=f\"(d2), \"=f\"(d3)\n"
    "          : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1),\n"
    "            \"f\"(c[j][0]), \"f\"(c[j][1]), \"f\"(c[j][2]), \"f\"(c[j][3]));\n"
    "      c[j][0] = d0; c[j][1] = d1; c[j][2] = d2; c[j][3] = d3;\n"
    "    }\n"
    "  }\n"
    "  float s = 0;\n"
    "  for (int j = 0; j < 4; j++) s += (c[j][0] + c[j][1]) + (c[j][2] + c[j][3]);\n"
    "  out[id] = s;\n"
    "}\n";

typedef struct ref_kernels {
  cl_program prog, mma_prog;
  cl_kernel stride, one, four, empty, fma, mma;
  size_t max_wg;
} ref_kernels;

static void ref_release(ref_kernels *r) {
  if (r->fma) clReleaseKernel(r->fma);
  if (r->mma) clReleaseKernel(r->mma);
  if (r->mma_prog) clReleaseProgram(r->mma_prog);
  if (r->stride) clReleaseKernel(r->stride);
  if (r->one) clReleaseKernel(r->one);
  if (r->four) clReleaseKernel(r->four);
  if (r->empty) clReleaseKernel(r->empty);
  if (r->prog) clReleaseProgram(r->prog);
  memset(r, 0, sizeof *r);
}

static int ref_build(bench_env *e, ref_kernels *r) {
  cl_int err;
  memset(r, 0, sizeof *r);
  CL_TRY(clGetDeviceInfo(e->dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof r->max_wg, &r->max_wg,
                         NULL));
  r->prog = clCreateProgramWithSource(e->clctx, 1, &ref_src, NULL, &err);
  if (err != CL_SUCCESS) return bench_cl_fail(err, "clCreateProgramWithSource", __LINE__);
  if ((err = clBuildProgram(r->prog, 1, &e->dev, "", NULL, NULL)) != CL_SUCCESS) {
    char log[4096] = "";
    clGetProgramBuildInfo(r->prog, e->dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    fprintf(stderr, "dsacl-bench: reference kernel build failed (%d):\n%s\n", (int)err, log);
    return -1;
  }
  r->stride = clCreateKernel(r->prog, "copy_stride", &err);
  if (err == CL_SUCCESS) r->one = clCreateKernel(r->prog, "copy_one", &err);
  if (err == CL_SUCCESS) r->four = clCreateKernel(r->prog, "copy_four", &err);
  if (err == CL_SUCCESS) r->empty = clCreateKernel(r->prog, "empty", &err);
  if (err == CL_SUCCESS) r->fma = clCreateKernel(r->prog, "fma_peak", &err);
  if (err != CL_SUCCESS) return bench_cl_fail(err, "clCreateKernel", __LINE__);
  /* The NVIDIA matrix kernel: a failed build leaves the matrix ceiling out. */
  char vendor[256] = "";
  clGetDeviceInfo(e->dev, CL_DEVICE_VENDOR, sizeof vendor - 1, vendor, NULL);
  if (strstr(vendor, "NVIDIA")) {
    r->mma_prog = clCreateProgramWithSource(e->clctx, 1, &mma_src, NULL, &err);
    if (err == CL_SUCCESS && clBuildProgram(r->mma_prog, 1, &e->dev, "", NULL, NULL) == CL_SUCCESS)
      r->mma = clCreateKernel(r->mma_prog, "mma_peak", &err);
    if (!r->mma) fprintf(stderr, "dsacl-bench: no matrix ceiling (mma_peak did not build)\n");
  }
  return 0;
}

typedef struct kernel_launch {
  cl_kernel k;
  size_t global, local; /* local 0: the driver's choice */
  cl_mem src, dst;
  size_t bytes;
} kernel_launch;

static int kernel_run(bench_env *e, void *arg, cl_event *done) {
  kernel_launch *l = arg;
  CL_TRY(clEnqueueNDRangeKernel(e->clq, l->k, 1, NULL, &l->global, l->local ? &l->local : NULL, 0,
                                NULL, done));
  return 0;
}

static int copy_buffer_run(bench_env *e, void *arg, cl_event *done) {
  kernel_launch *l = arg;
  CL_TRY(clEnqueueCopyBuffer(e->clq, l->src, l->dst, 0, 0, l->bytes, 0, NULL, done));
  return 0;
}

static double gbs(double bytes, double us) { return us > 0 ? bytes / (us * 1e3) : 0; }

/* ---- bandwidth ceiling ----------------------------------------------------------- */

typedef struct ceiling {
  double stride_gbs, one_gbs, copybuf_gbs, gbs;
  size_t bytes;
  double fma_gflops, mma_gflops; /* compute ceilings; 0: not measured */
} ceiling;

/* GFLOP/s of kernel k (fma_peak or mma_peak) over `items` work-items of
 * `iters` iterations, flop_per_item_iter each; its argument 0 is out. */
static double measure_flops(bench_env *e, const bench_cfg *cfg, cl_kernel k, size_t items,
                            int iters, double flop_per_item_iter, int fma) {
  kernel_launch l = {0};
  l.k = k;
  l.global = items;
  l.local = 256;
  cl_mem out = bench_make_buf(e, items * sizeof(float), NULL);
  if (!out) return 0;
  const cl_float a = 0.999f, b = 1e-3f;
  cl_int err = clSetKernelArg(k, 0, sizeof out, &out);
  if (fma) {
    if (err == CL_SUCCESS) err = clSetKernelArg(k, 1, sizeof a, &a);
    if (err == CL_SUCCESS) err = clSetKernelArg(k, 2, sizeof b, &b);
  }
  if (err == CL_SUCCESS) err = clSetKernelArg(k, fma ? 3 : 1, sizeof iters, &iters);
  timing t;
  double g = 0;
  if (err == CL_SUCCESS && time_it(e, cfg, kernel_run, &l, &t) == 0 && t.median_us > 0)
    g = (double)items * iters * flop_per_item_iter / (t.median_us * 1e3);
  bench_free_buf(&out);
  return g;
}

static int measure_ceiling(bench_env *e, const bench_cfg *cfg, const ref_kernels *rk,
                           ceiling *out) {
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
  kernel_launch l = {0};
  l.bytes = bytes;
  int rc = -1;
  cl_int err;
  if (!(l.src = bench_make_filled(e, bytes, 0x5a)) || !(l.dst = bench_make_buf(e, bytes, NULL)))
    goto done;
  const cl_ulong n = bytes / 16;
  timing t;
  if ((err = clSetKernelArg(rk->stride, 0, sizeof l.src, &l.src)) != CL_SUCCESS ||
      (err = clSetKernelArg(rk->stride, 1, sizeof l.dst, &l.dst)) != CL_SUCCESS ||
      (err = clSetKernelArg(rk->stride, 2, sizeof n, &n)) != CL_SUCCESS ||
      (err = clSetKernelArg(rk->one, 0, sizeof l.src, &l.src)) != CL_SUCCESS ||
      (err = clSetKernelArg(rk->one, 1, sizeof l.dst, &l.dst)) != CL_SUCCESS) {
    bench_cl_fail(err, "clSetKernelArg", __LINE__);
    goto done;
  }
  /* Grid-stride: enough work-items to fill the device, each looping. */
  l.k = rk->stride;
  l.global = (size_t)cus * ((type & CL_DEVICE_TYPE_GPU) ? 2048 : 256);
  if (time_it(e, cfg, kernel_run, &l, &t) != 0) goto done;
  out->stride_gbs = gbs(2.0 * (double)bytes, t.median_us);
  /* One uint4 per work-item. */
  l.k = rk->one;
  l.global = (size_t)n;
  if (time_it(e, cfg, kernel_run, &l, &t) != 0) goto done;
  out->one_gbs = gbs(2.0 * (double)bytes, t.median_us);
  if (time_it(e, cfg, copy_buffer_run, &l, &t) != 0) goto done;
  out->copybuf_gbs = gbs(2.0 * (double)bytes, t.median_us);
  out->gbs = fmax(out->stride_gbs, fmax(out->one_gbs, out->copybuf_gbs));
  /* Compute ceilings: enough work-groups of 256 to fill the device several
   * times over, a few milliseconds of work on a GPU. */
  const int gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
  const size_t items = (size_t)cus * (gpu ? 2048 : 256);
  out->fma_gflops = measure_flops(e, cfg, rk->fma, items, gpu ? 512 : 64, 2.0 * 4 * 8, 1);
  if (rk->mma) /* a warp's 32 items share each mma: 4096 FLOP / 32 per item */
    out->mma_gflops = measure_flops(e, cfg, rk->mma, items, 256, 4 * 4096.0 / 32, 0);
  rc = 0;
done:
  bench_free_buf(&l.src);
  bench_free_buf(&l.dst);
  return rc;
}

/* ---- launch floor and size-matched copy ----------------------------------------------- */

/* Median event time of the empty kernel on one work-group of one item. */
static int measure_floor(bench_env *e, const bench_cfg *cfg, const ref_kernels *rk,
                         timing *out) {
  kernel_launch l = {0};
  l.k = rk->empty;
  l.global = l.local = 1;
  return time_it(e, cfg, kernel_run, &l, out);
}

/* Bytes each read and written by the copy matched to an operator moving
 * op_bytes (read + written): op_bytes/2 rounded up to 16 B (one uint4 per
 * work-item), then up to whole work-groups of `wg` items when more than one
 * group is needed (at most wg*16 - 16 bytes more; odd item counts would
 * otherwise leave the driver only work-groups of one item). */
static size_t copy_half_bytes(double op_bytes, size_t wg) {
  double items = ceil(fmax(op_bytes, 0) / 2 / 16);
  if (items < 1) items = 1;
  if (items > (double)wg) items = ceil(items / (double)wg) * (double)wg;
  return (size_t)items * 16;
}

/* The work-group size of the size-matched copy: 256 or the device maximum. */
static size_t copy_wg(const ref_kernels *rk) {
  size_t wg = 256;
  while (wg > 1 && wg > rk->max_wg) wg /= 2;
  return wg;
}

/* The faster of two copies of half bytes (from copy_half_bytes): copy_one,
 * one uint4 per work-item, and copy_four, four per work-item (all loads
 * before the stores; the fastest small copy on NVIDIA). */
static int measure_copy(bench_env *e, const bench_cfg *cfg, const ref_kernels *rk, size_t half,
                        timing *out) {
  kernel_launch l = {0};
  int rc = -1;
  cl_int err;
  const cl_ulong n = half / 16;
  if (!(l.src = bench_make_filled(e, half, 0x5a)) || !(l.dst = bench_make_buf(e, half, NULL)))
    goto done;
  if ((err = clSetKernelArg(rk->one, 0, sizeof l.src, &l.src)) != CL_SUCCESS ||
      (err = clSetKernelArg(rk->one, 1, sizeof l.dst, &l.dst)) != CL_SUCCESS ||
      (err = clSetKernelArg(rk->four, 0, sizeof l.src, &l.src)) != CL_SUCCESS ||
      (err = clSetKernelArg(rk->four, 1, sizeof l.dst, &l.dst)) != CL_SUCCESS ||
      (err = clSetKernelArg(rk->four, 2, sizeof n, &n)) != CL_SUCCESS) {
    bench_cl_fail(err, "clSetKernelArg", __LINE__);
    goto done;
  }
  l.k = rk->one;
  l.global = (size_t)n;
  l.local = copy_wg(rk);
  if (l.local > l.global) l.local = l.global;
  if ((rc = time_it(e, cfg, kernel_run, &l, out)) != 0) goto done;
  timing t4;
  l.k = rk->four;
  l.global = ((size_t)n + 4 * l.local - 1) / (4 * l.local) * l.local;
  if ((rc = time_it(e, cfg, kernel_run, &l, &t4)) != 0) goto done;
  if (t4.median_us < out->median_us) *out = t4;
done:
  clFinish(e->clq);
  bench_free_buf(&l.src);
  bench_free_buf(&l.dst);
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
  char shape[96];
  int ok, copy_ok;
  timing t, copy;
  double bytes, flops;
  size_t copy_half; /* bytes read (= written) by the size-matched copy */
  bench_stage stage[BENCH_MAX_STAGES]; /* rows made of stages (bench_env.stages) */
  int nstages;
  char variant[96]; /* the queue's last pick: "operator: variant (back-end)" */
} result;

static int bench_one(bench_env *e, const bench_cfg *cfg, const ref_kernels *rk, result *res) {
  op_run r = {NULL, res->op};
  res->ok = res->copy_ok = 0;
  res->bytes = res->op->bytes(res->p);
  res->flops = res->op->flops(res->p);
  res->nstages = 0;
  e->stages = NULL;
  int rc = res->op->setup(e, res->p, &r.state);
  if (rc == 0) rc = time_it(e, cfg, op_enqueue, &r, &res->t);
  snprintf(res->variant, sizeof res->variant, "%s", dsa_queue_last_variant(e->q));
  if (rc == 0 && e->stages) {
    int n = e->stages(r.state, cfg->runs, res->stage);
    if (n < 0) rc = -1;
    res->nstages = n < 0 ? 0 : n > BENCH_MAX_STAGES ? BENCH_MAX_STAGES : n;
  }
  e->stages = NULL;
  if (rc == 0) {
    uint32_t faults = 0;
    dsa_status st = dsa_queue_faults(e->q, &faults);
    if (st != DSA_OK) {
      rc = bench_dsa_fail(st, "dsa_queue_faults", __LINE__);
    } else if (faults) {
      fprintf(stderr, "dsacl-bench: %s %s raised device faults 0x%x\n", res->op->name,
              res->shape, (unsigned)faults);
      rc = -1;
    }
  }
  clFinish(e->clq); /* nothing may still use the buffers teardown releases */
  res->op->teardown(r.state);
  res->ok = rc == 0;
  if (rc == 0) {
    /* After teardown, so both never hold device memory at once. */
    res->copy_half = copy_half_bytes(res->bytes, copy_wg(rk));
    if (measure_copy(e, cfg, rk, res->copy_half, &res->copy) == 0)
      res->copy_ok = 1;
    else
      fprintf(stderr, "dsacl-bench: %s %s: size-matched copy failed\n", res->op->name,
              res->shape);
  }
  return rc;
}

/* ---- output ------------------------------------------------------------------------- */

static void json_str(const char *s) { json_write_str(stdout, s); }

/* The matrix-tile back-end of the bench's context (cl/dsa_tile.h). */
static const dsa_context *g_ctx;
static const char *matrix_backend(void) { return g_ctx ? dsa_context_matrix_backend(g_ctx) : ""; }

static double pct_copy(const result *r) {
  return r->copy_ok && r->t.median_us > 0 ? 100 * r->copy.median_us / r->t.median_us : 0;
}

static void print_json(const char *device, const char *driver, const char *platform,
                       const char *date, const bench_cfg *cfg, int quick, const ceiling *ceil_,
                       double floor_us, const result *res, int nres) {
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
  printf(",\n  \"matrix_backend\": ");
  json_str(matrix_backend());
  printf(",\n  \"runs\": %d,\n  \"warmup\": %d,\n  \"quick\": %s,\n  \"cache_flush_bytes\": %zu,\n",
         cfg->runs, cfg->warmup, quick ? "true" : "false", cfg->flush ? cfg->flush_bytes : 0);
  printf("  \"ceiling\": {\"bytes\": %zu, \"copy_kernel_stride_gbs\": %.2f, "
         "\"copy_kernel_one_gbs\": %.2f, \"copy_buffer_gbs\": %.2f, \"gbs\": %.2f},\n",
         ceil_->bytes, ceil_->stride_gbs, ceil_->one_gbs, ceil_->copybuf_gbs, ceil_->gbs);
  printf("  \"compute_ceiling\": {\"fp32_fma_gflops\": %.1f, \"matrix_gflops\": %.1f, "
         "\"matrix_instruction\": %s},\n",
         ceil_->fma_gflops, ceil_->mma_gflops,
         ceil_->mma_gflops > 0 ? "\"mma.sync m16n8k16 bf16\"" : "null");
  printf("  \"launch_floor_us\": %.3f,\n", floor_us);
  printf("  \"results\": [");
  for (int i = 0; i < nres; i++) {
    const result *r = &res[i];
    printf("%s\n    {\"name\": ", i ? "," : "");
    json_str(r->op->name);
    printf(", \"shape\": ");
    json_str(r->shape);
    printf(", \"params\": [");
    for (int j = 0; j < BENCH_MAX_PARAMS; j++) printf("%s%lld", j ? ", " : "", (long long)r->p[j]);
    printf("], \"ok\": %s, \"variant\": ", r->ok ? "true" : "false");
    json_str(r->variant);
    if (r->ok) {
      double g = gbs(r->bytes, r->t.median_us);
      printf(", \"median_us\": %.3f, \"min_us\": %.3f, \"bytes\": %.0f, \"gbs\": %.2f, "
             "\"pct_ceiling\": %.1f, \"flops\": %.0f, \"gflops\": %.2f",
             r->t.median_us, r->t.min_us, r->bytes, g, ceil_->gbs > 0 ? 100 * g / ceil_->gbs : 0,
             r->flops, r->t.median_us > 0 ? r->flops / (r->t.median_us * 1e3) : 0);
      if (r->copy_ok)
        printf(", \"copy_bytes\": %zu, \"copy_us\": %.3f, \"copy_min_us\": %.3f, "
               "\"pct_same_size_copy\": %.1f",
               2 * r->copy_half, r->copy.median_us, r->copy.min_us, pct_copy(r));
      else
        printf(", \"copy_us\": null, \"pct_same_size_copy\": null");
      if (r->nstages) {
        printf(", \"stages\": [");
        for (int j = 0; j < r->nstages; j++) {
          printf("%s{\"name\": ", j ? ", " : "");
          json_str(r->stage[j].name);
          printf(", \"median_us\": %.3f, \"min_us\": %.3f}", r->stage[j].median_us,
                 r->stage[j].min_us);
        }
        printf("]");
      }
    }
    printf("}");
  }
  printf("\n  ]\n}\n");
}

static void print_table(const char *device, const char *driver, const char *platform,
                        const char *date, const bench_cfg *cfg, const ceiling *c,
                        double floor_us, const result *res, int nres) {
  printf("dsacl-bench %s | %s | driver %s | %s | %s\n", dsa_version_string(), device, driver,
         platform, date);
  printf("timing: OpenCL profiling events, median (min) of %d runs after %d warm-up; ", cfg->runs,
         cfg->warmup);
  if (cfg->flush)
    printf("%.0f MiB overwritten before each run\n", (double)cfg->flush_bytes / (1 << 20));
  else
    printf("no cache flush\n");
  printf("ceiling: %.1f GB/s (read+write; copy kernel grid-stride %.1f, one-per-item %.1f, "
         "clEnqueueCopyBuffer %.1f; %zu MiB)\n",
         c->gbs, c->stride_gbs, c->one_gbs, c->copybuf_gbs, c->bytes >> 20);
  printf("compute ceiling: fp32 FMA %.1f GFLOP/s", c->fma_gflops);
  if (c->mma_gflops > 0) printf(", matrix (mma.sync bf16) %.1f GFLOP/s", c->mma_gflops);
  printf("\n");
  printf("launch floor: %.2f us (empty kernel) | matrix tiles: %s (DSACL_MMA; JSON: each row's "
         "variant)\n",
         floor_us, matrix_backend());
  printf("%% ceil: GB/s vs the ceiling | %% copy: %% of same-size copy = copy us / median us "
         "(copy us: the faster of copy_one and copy_four moving the op's bytes)\n\n");
  printf("%-18s %-22s %12s %12s %12s %9s %7s %10s %7s\n", "operator", "shape", "median us",
         "min us", "MB moved", "GB/s", "% ceil", "copy us", "% copy");
  for (int i = 0; i < nres; i++) {
    const result *r = &res[i];
    if (!r->ok) {
      printf("%-18s %-22s %12s\n", r->op->name, r->shape, "FAILED");
      continue;
    }
    double g = gbs(r->bytes, r->t.median_us);
    printf("%-18s %-22s %12.2f %12.2f %12.3f %9.1f %6.1f%%", r->op->name, r->shape,
           r->t.median_us, r->t.min_us, r->bytes * 1e-6, g, c->gbs > 0 ? 100 * g / c->gbs : 0);
    if (r->copy_ok)
      printf(" %10.2f %6.1f%%", r->copy.median_us, pct_copy(r));
    else
      printf(" %10s %7s", "-", "-");
    if (r->flops > 0) printf("  %.1f GFLOP/s", r->flops / (r->t.median_us * 1e3));
    printf("\n");
    for (int j = 0; j < r->nstages; j++) /* stage rows: device us, median (min) */
      printf("  %-39s %12.2f %12.2f\n", r->stage[j].name, r->stage[j].median_us,
             r->stage[j].min_us);
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
          "  --only NAME      only operators whose name starts with NAME\n"
          "  --no-flush       do not overwrite the device cache between runs\n");
  fprintf(f, "operators (--only takes a prefix):");
  const char *last = "";
  for (int i = 0; i < NUM_FAMILIES; i++)
    for (const bench_op *op = families[i]; op->name; op++)
      if (strcmp(op->name, last)) fprintf(f, " %s", last = op->name);
  fprintf(f, "\n  decode_step: examples/decode_step.c's whole step (B=64, 32K context), with the"
             " device time of each stage\n");
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
    bench_dsa_fail(st, "dsa_context_create", __LINE__);
    return 1;
  }
  int rc = 1;
  result *res = NULL;
  ref_kernels rk = {0};
  if ((st = dsa_queue_create(&e.q, e.ctx, DSA_QUEUE_PROFILING)) != DSA_OK) {
    bench_dsa_fail(st, "dsa_queue_create", __LINE__);
    goto out;
  }
  g_ctx = e.ctx;
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
    if (!(cfg.flush = bench_make_buf(&e, cfg.flush_bytes, NULL))) goto out;
  }

  if (ref_build(&e, &rk) != 0) goto out;
  ceiling ceil_;
  if (measure_ceiling(&e, &cfg, &rk, &ceil_) != 0) {
    fprintf(stderr, "dsacl-bench: measuring the copy ceiling failed\n");
    goto out;
  }
  timing floor_t;
  if (measure_floor(&e, &cfg, &rk, &floor_t) != 0) {
    fprintf(stderr, "dsacl-bench: measuring the launch floor failed\n");
    goto out;
  }

  int nops = 0;
  for (int f = 0; f < NUM_FAMILIES; f++)
    for (const bench_op *op = families[f]; op->name; op++) nops++;
  res = calloc(nops ? (size_t)nops : 1, sizeof *res);
  if (!res) goto out;
  int nres = 0, failed = 0, nwanted = 0;
  for (int f = 0; f < NUM_FAMILIES; f++)
    for (const bench_op *op = families[f]; op->name; op++)
      nwanted += !only || !strncmp(op->name, only, strlen(only));
  /* Progress on stderr, only when it is a terminal (a full run takes
   * minutes; logs and pipes get nothing extra). */
  const int progress = isatty(STDERR_FILENO);
  for (int f = 0; f < NUM_FAMILIES; f++) {
    for (const bench_op *op = families[f]; op->name; op++) {
      if (only && strncmp(op->name, only, strlen(only))) continue;
      result *r = &res[nres++];
      r->op = op;
      r->p = quick ? op->quick : op->p;
      snprintf(r->shape, sizeof r->shape, op->shape, (long long)r->p[0], (long long)r->p[1],
               (long long)r->p[2], (long long)r->p[3]);
      if (progress) {
        fprintf(stderr, "\r\033[K[%d/%d] %s %s", nres, nwanted, r->op->name, r->shape);
        fflush(stderr);
      }
      if (bench_one(&e, &cfg, &rk, r) != 0) {
        fprintf(stderr, "%sdsacl-bench: %s %s failed\n", progress ? "\r\033[K" : "", r->op->name,
                r->shape);
        failed++;
      }
    }
  }
  if (progress) fprintf(stderr, "\r\033[K");
  if (nres == 0) {
    fprintf(stderr, "dsacl-bench: no operator matches '%s'\n", only ? only : "");
    rc = 2;
    goto out;
  }
  if (json)
    print_json(dsa_context_device_name(e.ctx), driver, platform, date, &cfg, quick, &ceil_,
               floor_t.median_us, res, nres);
  else
    print_table(dsa_context_device_name(e.ctx), driver, platform, date, &cfg, &ceil_,
                floor_t.median_us, res, nres);
  rc = failed ? 1 : 0;
out:
  free(res);
  ref_release(&rk);
  bench_free_buf(&cfg.flush);
  dsa_queue_destroy(&e.q);
  dsa_context_destroy(&e.ctx);
  return rc;
}
