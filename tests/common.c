/* Test harness (see common.h). Setup failures end the test program: there is
 * nothing meaningful to check without a device or a buffer. */
#include "common.h"

int dsa_test_passed, dsa_test_failed;

int dsa_test_summary(void) {
  printf("%d passed, %d failed\n", dsa_test_passed, dsa_test_failed);
  fflush(stdout);
  return dsa_test_failed ? 1 : 0;
}

static void die(const char *what, dsa_status s) {
  fprintf(stderr, "FATAL: %s -> %s: %s\n", what, dsa_status_name(s), dsa_last_error());
  dsa_test_summary();
  exit(1);
}

void dsa_test_open(dsa_context **c, dsa_queue **q, unsigned queue_flags) {
  dsa_context_options o;
  dsa_context_options_default(&o);
  const char *dir = getenv("DSACL_CACHE_DIR");
  o.cache_dir = dir && *dir ? dir : "off";
  dsa_status s = dsa_context_create(c, &o);
  if (s == DSA_ERR_NO_DEVICE) {
    fprintf(stderr, "SKIP: no OpenCL device: %s\n", dsa_last_error());
    exit(77);
  }
  if (s != DSA_OK) die("dsa_context_create", s);
  s = dsa_queue_create(q, *c, queue_flags);
  if (s != DSA_OK) die("dsa_queue_create", s);
}

void dsa_test_close(dsa_context **c, dsa_queue **q) {
  dsa_queue_destroy(q);
  dsa_context_destroy(c);
}

uint64_t dsa_test_rand(uint64_t *state) {
  uint64_t x = *state ? *state : 0x9E3779B97F4A7C15ull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

double dsa_test_uniform(uint64_t *state) { return (double)(dsa_test_rand(state) >> 11) * 0x1p-53; }

/* The byte a guarded buffer holds at position i before anyone writes it. */
static uint8_t guard_byte(size_t i) { return (uint8_t)(0xA5 ^ (i * 7)); }

static void cl_die(const char *what, cl_int err) {
  fprintf(stderr, "FATAL: %s: OpenCL error %d\n", what, (int)err);
  dsa_test_summary();
  exit(1);
}

guarded_buf gbuf_create(dsa_context *c, dsa_queue *q, size_t size, const void *init) {
  guarded_buf b = {NULL, DSA_TEST_GUARD, size};
  size_t total = size + 2 * DSA_TEST_GUARD;
  uint8_t *host = malloc(total);
  if (!host) cl_die("gbuf_create: malloc", CL_OUT_OF_HOST_MEMORY);
  for (size_t i = 0; i < total; i++) host[i] = guard_byte(i);
  if (init && size) memcpy(host + b.off, init, size);
  cl_int err;
  b.mem = clCreateBuffer(dsa_context_cl_context(c), CL_MEM_READ_WRITE, total, NULL, &err);
  if (!b.mem) cl_die("clCreateBuffer", err);
  err = clEnqueueWriteBuffer(dsa_queue_cl(q), b.mem, CL_TRUE, 0, total, host, 0, NULL, NULL);
  if (err != CL_SUCCESS) cl_die("clEnqueueWriteBuffer", err);
  free(host);
  return b;
}

void gbuf_read(dsa_queue *q, const guarded_buf *b, void *dst) {
  if (!b->size) return;
  cl_int err = clEnqueueReadBuffer(dsa_queue_cl(q), b->mem, CL_TRUE, b->off, b->size, dst, 0,
                                   NULL, NULL);
  if (err != CL_SUCCESS) cl_die("clEnqueueReadBuffer", err);
}

int gbuf_guards_ok(dsa_queue *q, const guarded_buf *b) {
  uint8_t band[DSA_TEST_GUARD];
  size_t starts[2] = {0, b->off + b->size};
  for (int k = 0; k < 2; k++) {
    cl_int err = clEnqueueReadBuffer(dsa_queue_cl(q), b->mem, CL_TRUE, starts[k],
                                     DSA_TEST_GUARD, band, 0, NULL, NULL);
    if (err != CL_SUCCESS) cl_die("clEnqueueReadBuffer (guard)", err);
    for (size_t i = 0; i < DSA_TEST_GUARD; i++)
      if (band[i] != guard_byte(starts[k] + i)) return 0;
  }
  return 1;
}

void gbuf_release(guarded_buf *b) {
  if (b->mem) clReleaseMemObject(b->mem);
  b->mem = NULL;
}
