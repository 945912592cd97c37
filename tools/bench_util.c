/* Helpers shared by the dsacl-bench operator families (see bench.h). */
#include "bench.h"
#include "rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_cl_fail(cl_int err, const char *what, int line) {
  fprintf(stderr, "dsacl-bench:%d: %s failed: OpenCL error %d\n", line, what, (int)err);
  return -1;
}

int bench_dsa_fail(dsa_status st, const char *what, int line) {
  fprintf(stderr, "dsacl-bench:%d: %s failed: %s: %s\n", line, what, dsa_status_name(st),
          dsa_last_error());
  return -1;
}

/* The tests' and tools' one generator (tools/common/rng.h); every row seeds
 * it with a non-zero value, so the streams are the ones before the move. */
uint64_t bench_rng_next(uint64_t *s) { return rng64_next(s); }

double bench_rng_uniform(uint64_t *s, double lo, double hi) {
  return lo + rng64_uniform(s) * (hi - lo);
}

uint16_t bench_bf16_from_float(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

uint16_t *bench_random_bf16(uint64_t *s, size_t n, float lo, float hi) {
  uint16_t *v = malloc(n ? n * sizeof *v : 1);
  if (!v) return NULL;
  for (size_t i = 0; i < n; i++) v[i] = bench_bf16_from_float((float)bench_rng_uniform(s, lo, hi));
  return v;
}

float *bench_random_f32(uint64_t *s, size_t n, float lo, float hi) {
  float *v = malloc(n ? n * sizeof *v : 1);
  if (!v) return NULL;
  for (size_t i = 0; i < n; i++) v[i] = (float)bench_rng_uniform(s, lo, hi);
  return v;
}

uint8_t *bench_random_bytes(uint64_t *s, size_t n) {
  uint8_t *v = malloc(n ? n : 1);
  if (!v) return NULL;
  for (size_t i = 0; i < n; i++) v[i] = (uint8_t)(bench_rng_next(s) >> 56);
  return v;
}

int32_t *bench_random_i32(uint64_t *s, size_t n, int32_t lo, int32_t hi) {
  int32_t *v = malloc(n ? n * sizeof *v : 1);
  if (!v) return NULL;
  const uint64_t span = hi > lo ? (uint64_t)((int64_t)hi - lo) : 1;
  for (size_t i = 0; i < n; i++) v[i] = (int32_t)(lo + (int64_t)(bench_rng_next(s) % span));
  return v;
}

int64_t *bench_random_distinct(uint64_t *s, int64_t n, int64_t k) {
  int64_t *all = malloc(n > 0 ? (size_t)n * sizeof *all : 1);
  if (!all) return NULL;
  for (int64_t i = 0; i < n; i++) all[i] = i;
  for (int64_t i = 0; i < k; i++) {
    int64_t j = i + (int64_t)(bench_rng_next(s) % (uint64_t)(n - i));
    int64_t t = all[i];
    all[i] = all[j];
    all[j] = t;
  }
  return all;
}

cl_mem bench_make_buf(bench_env *e, size_t bytes, const void *init) {
  cl_int err;
  cl_mem m = clCreateBuffer(e->clctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err != CL_SUCCESS) {
    bench_cl_fail(err, "clCreateBuffer", __LINE__);
    return NULL;
  }
  if (init && (err = clEnqueueWriteBuffer(e->clq, m, CL_TRUE, 0, bytes, init, 0, NULL, NULL)) !=
                  CL_SUCCESS) {
    bench_cl_fail(err, "clEnqueueWriteBuffer", __LINE__);
    clReleaseMemObject(m);
    return NULL;
  }
  return m;
}

cl_mem bench_make_filled(bench_env *e, size_t bytes, unsigned char value) {
  cl_mem m = bench_make_buf(e, bytes, NULL);
  if (!m) return NULL;
  const cl_uchar v = value;
  cl_int err = clEnqueueFillBuffer(e->clq, m, &v, 1, 0, bytes, 0, NULL, NULL);
  if (err == CL_SUCCESS) err = clFinish(e->clq);
  if (err != CL_SUCCESS) {
    bench_cl_fail(err, "clEnqueueFillBuffer", __LINE__);
    clReleaseMemObject(m);
    return NULL;
  }
  return m;
}

void bench_free_buf(cl_mem *m) {
  if (*m) clReleaseMemObject(*m);
  *m = NULL;
}

double bench_no_flops(const int64_t *p) {
  (void)p;
  return 0;
}

int bench_span_begin(bench_env *e) {
  if (e->span_first) clReleaseEvent(e->span_first);
  e->span_first = NULL;
  CL_TRY(clEnqueueMarkerWithWaitList(e->clq, 0, NULL, &e->span_first));
  return 0;
}

bench_case *bench_case_new(const case_ops *ops, size_t case_size, int span) {
  bench_case *b = calloc(1, sizeof *b);
  if (!b || !(b->c = calloc(1, case_size))) {
    free(b);
    return NULL;
  }
  b->ops = ops;
  /* DSACL_BENCH_SPAN=1: a marker before every operator (the time of all
   * its kernels, for variants that launch several where the row's own
   * setting assumes one). */
  const char *sp = getenv("DSACL_BENCH_SPAN");
  b->span = span || (sp && !strcmp(sp, "1"));
  return b;
}

int bench_case_upload(bench_env *e, bench_case *b) {
  const case_dev d = {e->clctx, e->clq};
  char msg[256];
  if (!b->ops->upload(&d, b->c, 0, msg, sizeof msg)) return 0;
  fprintf(stderr, "dsacl-bench: %s\n", msg);
  return -1;
}

int bench_case_run(bench_env *e, void *state, cl_event *done) {
  bench_case *b = state;
  if (b->span && bench_span_begin(e)) return -1;
  dsa_events ev = {0, NULL, done};
  DSA_TRY(b->ops->call(e->q, b->c, &ev));
  return 0;
}

void bench_case_teardown(void *state) {
  bench_case *b = state;
  if (!b) return;
  b->ops->free(b->c);
  free(b->c);
  free(b);
}
