/* Tiny test harness shared by the test programs.
 *
 * CHECK(cond, fmt, ...) counts a pass or prints the failure and counts it;
 * tests end with `return dsa_test_summary();` which prints
 * "N passed, N failed" and returns the exit code meson expects (0 ok,
 * 1 failure, 77 skip when no OpenCL device exists). */
#ifndef DSACL_TESTS_COMMON_H
#define DSACL_TESTS_COMMON_H

#include <dsacl/dsacl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int dsa_test_passed, dsa_test_failed;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (cond) {                                                       \
      dsa_test_passed++;                                              \
    } else {                                                          \
      dsa_test_failed++;                                              \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);            \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, "\n");                                          \
    }                                                                 \
  } while (0)

/* A status check with dsa_last_error() in the failure message. */
#define CHECK_OK(expr)                                                          \
  do {                                                                          \
    dsa_status st_ = (expr);                                                    \
    CHECK(st_ == DSA_OK, "%s -> %s: %s", #expr, dsa_status_name(st_),           \
          dsa_last_error());                                                    \
  } while (0)

int dsa_test_summary(void);

/* Opens context + queue on the device chosen like the library does
 * (DSACL_DEVICE honoured). Returns 0, or exits 77 (skip) when there is no
 * OpenCL device at all. Cache dir: DSACL_CACHE_DIR or "off". */
void dsa_test_open(dsa_context **c, dsa_queue **q, unsigned queue_flags);
void dsa_test_close(dsa_context **c, dsa_queue **q);

/* Deterministic RNG (xorshift64*). */
uint64_t dsa_test_rand(uint64_t *state);
double dsa_test_uniform(uint64_t *state); /* [0, 1) */

/* Allocation that never returns NULL (exits the test on failure); zeroed. */
void *dsa_test_xmalloc(size_t n);
/* n random bytes from the test's RNG. */
void dsa_test_fill_random(uint64_t *state, void *p, size_t n);

/* The API's alternative dtypes for positions (i32) and cos/sin (bf16):
 * narrow n values in place (so the i64 / f32 arrays the reference reads hold
 * what the device sees: i32 wrap-around, bf16 RNE) and return the narrow
 * copy to upload (malloc'ed, n + 1 elements). */
int32_t *dsa_test_narrow_pos(int64_t *pos, size_t n);
uint16_t *dsa_test_narrow_cs(float *cs, size_t n);
/* Reads (and clears) the queue's fault word, checking the call succeeds. */
uint32_t dsa_test_read_faults(dsa_queue *q);
/* CHECKs that two byte images are equal; on failure names the first
 * differing byte, with `what` and a printf-style context. */
void dsa_test_first_diff(const void *got, const void *want, size_t n, const char *what,
                         const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A device buffer with guard bands: `size` payload bytes between two
 * GUARD-byte bands of a known pattern. The tensor offset of the payload is
 * guarded_buf.off. */
#define DSA_TEST_GUARD 256
typedef struct guarded_buf {
  cl_mem mem;
  size_t off;  /* byte offset of the payload inside mem */
  size_t size; /* payload bytes */
} guarded_buf;

/* Allocates and fills payload with `init` (or the guard pattern if NULL) and
 * the bands with the guard pattern. */
guarded_buf gbuf_create(dsa_context *c, dsa_queue *q, size_t size, const void *init);
/* Reads the payload back into host memory (blocking). */
/* n bytes at byte off of m, written as a whole-buffer rewrite (see common.c). */
void dsa_test_write_at(dsa_queue *q, cl_mem m, size_t off, size_t n, const void *src);
void gbuf_read(dsa_queue *q, const guarded_buf *b, void *dst);
/* Returns 1 when both guard bands are still intact. */
int gbuf_guards_ok(dsa_queue *q, const guarded_buf *b);
void gbuf_release(guarded_buf *b);

/* 1 when msg names each of w1, w2 (NULL = no word) as a whole word: not
 * preceded by a lower-case letter or '_', not followed by a lower-case
 * letter, digit or '_'. */
int dsa_test_names(const char *msg, const char *w1, const char *w2);

/* e must be a returned event that completes: waits for it, checks its
 * status and releases it. */
void dsa_test_expect_complete(cl_event e, const char *what);

/* The bad-argument harness. Starting from a valid call's arguments (an
 * opaque struct `base` of `size` bytes), every case breaks a fresh copy in
 * one way; each broken call must return DSA_ERR_INVALID_ARGUMENT, with
 * dsa_last_error() naming the argument (w1 and w2 when set), return no event
 * and enqueue nothing (every guarded_buf in outs, holding a pattern the valid
 * call overwrites, is unchanged after each case). Then the valid call must
 * succeed and change the outputs (any of them, or every one with
 * all_change). */
typedef struct dsa_bad_args {
  const char *op;   /* operator name for the messages */
  const void *base; /* the valid call's arguments */
  size_t size;      /* sizeof *base */
  /* Optional: run on each fresh copy before breaking it, e.g. to point its
   * pointer members at its own fields (a copy still holds base's values). */
  void (*reset)(void *x);
  /* Case breakers, run in turn: `common` (optional; cases numbered from 0),
   * then `brk` (numbered from 100 when there is a `common`). Each breaks x
   * by case number c and sets *w1 (and optionally *w2) to the words the
   * error message must hold; returns 1, 0 past its last case, or -1 to skip
   * case c (not run, not counted). */
  int (*common)(void *x, int c, const char **w1, const char **w2);
  int (*brk)(void *x, int c, const char **w1, const char **w2);
  /* Calls the operator with x, its events' `done` set to done (may be NULL). */
  dsa_status (*call)(void *x, cl_event *done);
  /* Optional: the valid call, when it differs from call (e.g. NULL params);
   * defaults to call. */
  dsa_status (*valid)(void *x, cl_event *done);
  const guarded_buf *const *outs; /* the outputs to compare */
  int nouts;
  int min_cases;    /* fewer cases run is a failure */
  int all_change;   /* the valid call must change every output, not just one */
  int no_event;     /* the valid call returns no event (valid passes no events) */
} dsa_bad_args;

void dsa_test_run_bad(dsa_queue *q, const dsa_bad_args *spec);

/* DSACL_TEST_LARGE=1 (the GPU runs, tools/gpu-check.sh): the full count of
 * random cases. Unset (CI on 2 CPU cores), tests run fewer random cases
 * that repeat what their fixed cases already cover; never fewer kinds. */
int dsa_test_large(void);

#endif
