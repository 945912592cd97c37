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
void gbuf_read(dsa_queue *q, const guarded_buf *b, void *dst);
/* Returns 1 when both guard bands are still intact. */
int gbuf_guards_ok(dsa_queue *q, const guarded_buf *b);
void gbuf_release(guarded_buf *b);

#endif
