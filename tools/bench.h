/* Adding an operator family to dsacl-bench (one file per family):
 *  1. tools/bench_<family>.c: `#include "bench.h"`; per operator setup/run/teardown
 *     and bytes (read + written) / flops counts, then
 *     `const bench_op bench_ops_<family>[] = {{...}, ..., {0}};` (rows at V4 + quick shapes).
 *     With a shared case description (tools/cases/cases.h), setup fills the
 *     case and calls its gen_bench, run/teardown are bench_case_run/_teardown
 *     and the rows expand the case's CASE_<FORM>_ROWS list.
 *  2. tools/dsacl-bench.c: add the line `X(<family>) \` to BENCH_FAMILIES.
 *  3. tools/meson.build: add 'bench_<family>.c' to bench_sources. */
#ifndef DSACL_TOOLS_BENCH_H
#define DSACL_TOOLS_BENCH_H

#include <dsacl/dsacl.h>

#include "cases.h"

#include <stddef.h>
#include <stdint.h>

/* Per-stage device times of a row made of several operators (decode_step). */
#define BENCH_MAX_STAGES 12
typedef struct bench_stage {
  const char *name;
  double median_us, min_us;
} bench_stage;

/* What every operator runs on: the library's context and profiling queue
 * and the OpenCL objects under them. */
typedef struct bench_env {
  dsa_context *ctx;
  dsa_queue *q; /* created with DSA_QUEUE_PROFILING */
  cl_context clctx;
  cl_device_id dev;
  cl_command_queue clq; /* dsa_queue_cl(q) */
  int quick;            /* --quick: small shapes, a few runs */
  /* Multi-command operators: the driver sets this NULL before each run and
   * takes ownership of what run leaves in it (see bench_span_begin). */
  cl_event span_first;
  /* Rows made of stages: setup may set this (the driver clears it first).
   * After the timed runs (and a clFinish), before teardown, the driver calls
   * it with the number of timed runs (the last `runs` run calls, after the
   * warm-up ones); it fills at most BENCH_MAX_STAGES entries of out and
   * returns how many, or -1. */
  int (*stages)(void *state, int runs, bench_stage *out);
} bench_env;

#define BENCH_MAX_PARAMS 4

/* One table row. The driver calls setup once, then run (warm-up + timed
 * runs; run must return the completion event of what it enqueued in *done,
 * exactly one event covering the whole operator), then teardown after a
 * clFinish. The time is START..END of *done; an operator that enqueues
 * several commands (its done event is only the last one's) calls
 * bench_span_begin first, and the time becomes START of that marker..END of
 * *done. setup may leave a partly built state for teardown (which gets
 * NULL if setup allocated nothing). A family's array ends with {0}. */
typedef struct bench_op {
  const char *name;                /* --only matches a prefix of it */
  const char *shape;               /* printf format over the BENCH_MAX_PARAMS values (long long) */
  int64_t p[BENCH_MAX_PARAMS];     /* DeepSeek-V4 shape */
  int64_t quick[BENCH_MAX_PARAMS]; /* --quick shape (seconds on PoCL) */
  int (*setup)(bench_env *e, const int64_t *p, void **state);
  int (*run)(bench_env *e, void *state, cl_event *done);
  void (*teardown)(void *state);
  double (*bytes)(const int64_t *p); /* bytes read + written by the operator */
  double (*flops)(const int64_t *p); /* bench_no_flops when not compute-bound */
} bench_op;

/* ---- errors: print to stderr, return -1 ---------------------------------- */

int bench_cl_fail(cl_int err, const char *what, int line);
int bench_dsa_fail(dsa_status st, const char *what, int line);

#define CL_TRY(expr)                                                  \
  do {                                                                \
    cl_int e_ = (expr);                                               \
    if (e_ != CL_SUCCESS) return bench_cl_fail(e_, #expr, __LINE__);  \
  } while (0)
#define DSA_TRY(expr)                                                 \
  do {                                                                \
    dsa_status s_ = (expr);                                           \
    if (s_ != DSA_OK) return bench_dsa_fail(s_, #expr, __LINE__);     \
  } while (0)

/* ---- host data (deterministic: seed *s once per setup) ------------------- */

uint64_t bench_rng_next(uint64_t *s); /* xorshift64* */
double bench_rng_uniform(uint64_t *s, double lo, double hi);
uint16_t bench_bf16_from_float(float f); /* round to nearest even; finite inputs */
/* malloc'ed arrays of n values (NULL when out of memory); free() them. */
uint16_t *bench_random_bf16(uint64_t *s, size_t n, float lo, float hi); /* uniform */
float *bench_random_f32(uint64_t *s, size_t n, float lo, float hi);     /* uniform */
uint8_t *bench_random_bytes(uint64_t *s, size_t n);                     /* any byte */
int32_t *bench_random_i32(uint64_t *s, size_t n, int32_t lo, int32_t hi); /* [lo, hi) */
int64_t *bench_random_distinct(uint64_t *s, int64_t n, int64_t k); /* first k of a perm of [0,n) */

/* ---- device buffers --------------------------------------------------------- */

/* A read-write buffer of bytes (> 0), written from init when not NULL
 * (blocking); NULL (after a message) on failure. */
cl_mem bench_make_buf(bench_env *e, size_t bytes, const void *init);
/* A buffer of bytes with every byte = value (enqueued fill, then clFinish). */
cl_mem bench_make_filled(bench_env *e, size_t bytes, unsigned char value);
/* Releases *m if set and NULLs it. */
void bench_free_buf(cl_mem *m);

double bench_no_flops(const int64_t *p);

/* Enqueues a profiled marker into e->span_first (released first if set), so
 * the run's time spans from it to the END of *done: call at the top of run
 * for operators of several kernels. */
int bench_span_begin(bench_env *e);

/* ---- rows over a shared case (tools/cases/) ----------------------------------
 * The row's state: setup makes it (bench_case_new), fills the case struct
 * c (shape, then its gen_bench) and uploads it; run and teardown are these. */
typedef struct bench_case {
  const case_ops *ops;
  int span; /* the call enqueues several commands: time from a marker before */
  void *c;  /* the case struct, zeroed */
} bench_case;

/* NULL when out of memory. */
bench_case *bench_case_new(const case_ops *ops, size_t case_size, int span);
/* Uploads c (output zeroed); -1 after a message on failure. */
int bench_case_upload(bench_env *e, bench_case *b);
int bench_case_run(bench_env *e, void *state, cl_event *done);
void bench_case_teardown(void *state);

#endif
