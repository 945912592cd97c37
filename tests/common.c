/* Test harness (see common.h). Setup failures end the test program: there is
 * nothing meaningful to check without a device or a buffer. */
#include <stdarg.h>

#include "common.h"
#include "rng.h"

int dsa_test_passed, dsa_test_failed;

int dsa_test_large(void) {
  const char *v = getenv("DSACL_TEST_LARGE");
  return v && *v && strcmp(v, "0") != 0;
}

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
  if (s == DSA_ERR_UNSUPPORTED && (getenv("DSACL_EMULATE") || getenv("DSACL_MMA"))) {
    fprintf(stderr, "SKIP: this device cannot emulate: %s\n", dsa_last_error());
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

/* The tests' and tools' one generator (tools/common/rng.h). */
uint64_t dsa_test_rand(uint64_t *state) { return rng64_next(state); }

double dsa_test_uniform(uint64_t *state) { return rng64_uniform(state); }

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

/* Writes n bytes at off by rewriting the whole buffer (read, patch, write).
 * A plain partial clEnqueueWriteBuffer is right on every OpenCL runtime, but
 * Oclgrind's --uninitialized plugin re-allocates a buffer's shadow state on
 * every host write (MemCheck's hostMemoryStore -> allocAndStoreShadowMemory),
 * so a write of a part at an offset leaves the rest of the buffer marked
 * uninitialized and the kernels that then read it reported. */
void dsa_test_write_at(dsa_queue *q, cl_mem m, size_t off, size_t n, const void *src) {
  size_t total = 0;
  cl_int err = clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof total, &total, NULL);
  if (err != CL_SUCCESS) cl_die("clGetMemObjectInfo", err);
  if (off > total || n > total - off) cl_die("dsa_test_write_at: past the buffer", CL_INVALID_VALUE);
  uint8_t *h = malloc(total ? total : 1);
  if (!h) cl_die("dsa_test_write_at: malloc", CL_OUT_OF_HOST_MEMORY);
  err = clEnqueueReadBuffer(dsa_queue_cl(q), m, CL_TRUE, 0, total, h, 0, NULL, NULL);
  if (err != CL_SUCCESS) cl_die("clEnqueueReadBuffer", err);
  memcpy(h + off, src, n);
  err = clEnqueueWriteBuffer(dsa_queue_cl(q), m, CL_TRUE, 0, total, h, 0, NULL, NULL);
  if (err != CL_SUCCESS) cl_die("clEnqueueWriteBuffer", err);
  free(h);
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

int dsa_test_names(const char *msg, const char *w1, const char *w2) {
  const char *ws[2] = {w1, w2};
  if (!msg) return !w1 && !w2;
  for (int i = 0; i < 2; i++) {
    if (!ws[i]) continue;
    size_t n = strlen(ws[i]);
    int found = 0;
    for (const char *p = strstr(msg, ws[i]); p && !found; p = strstr(p + 1, ws[i])) {
      char before = p == msg ? ' ' : p[-1], after = p[n];
      found = !(before == '_' || (before >= 'a' && before <= 'z')) &&
              !(after == '_' || (after >= 'a' && after <= 'z') || (after >= '0' && after <= '9'));
    }
    if (!found) return 0;
  }
  return 1;
}

void dsa_test_expect_complete(cl_event e, const char *what) {
  CHECK(e != NULL, "%s: no event returned", what);
  if (!e) return;
  CHECK(clWaitForEvents(1, &e) == CL_SUCCESS, "%s: wait failed", what);
  cl_int st = -1;
  clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL);
  CHECK(st == CL_COMPLETE, "%s: event status %d", what, (int)st);
  clReleaseEvent(e);
}

static void *xalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) cl_die("malloc", CL_OUT_OF_HOST_MEMORY);
  return p;
}

void dsa_test_run_bad(dsa_queue *q, const dsa_bad_args *sp) {
  const char *op = sp->op;
  int nouts = sp->nouts;
  uint8_t **before = xalloc(sizeof *before * (size_t)nouts);
  uint8_t **after = xalloc(sizeof *after * (size_t)nouts);
  for (int i = 0; i < nouts; i++) {
    before[i] = xalloc(sp->outs[i]->size), after[i] = xalloc(sp->outs[i]->size);
    gbuf_read(q, sp->outs[i], before[i]);
  }
  void *x = xalloc(sp->size);
  int ncases = 0;
  for (int pass = sp->common ? 0 : 1; pass < 2; pass++) {
    int (*brk)(void *, int, const char **, const char **) = pass ? sp->brk : sp->common;
    int base_no = pass && sp->common ? 100 : 0;
    for (int c = 0;; c++) {
      memcpy(x, sp->base, sp->size);
      if (sp->reset) sp->reset(x);
      const char *w1 = NULL, *w2 = NULL;
      int more = brk(x, c, &w1, &w2);
      if (more == 0) break;
      if (more < 0) continue;
      int cn = base_no + c;
      cl_event done = (cl_event)(uintptr_t)1;
      dsa_status s = sp->call(x, &done);
      const char *msg = dsa_last_error();
      CHECK(s == DSA_ERR_INVALID_ARGUMENT, "%s bad case %d: status %s (%s)", op, cn,
            dsa_status_name(s), msg);
      CHECK(dsa_test_names(msg, w1, w2), "%s bad case %d: message '%s' does not name %s%s%s",
            op, cn, msg, w1 ? w1 : "(null)", w2 ? " and " : "", w2 ? w2 : "");
      CHECK(done == (cl_event)(uintptr_t)1, "%s bad case %d: an event was returned", op, cn);
      if (done != (cl_event)(uintptr_t)1 && done) clReleaseEvent(done);
      clFinish(dsa_queue_cl(q));
      for (int i = 0; i < nouts; i++) {
        const guarded_buf *b = sp->outs[i];
        gbuf_read(q, b, after[i]);
        if (memcmp(before[i], after[i], b->size)) {
          CHECK(0, "%s bad case %d: output %d changed", op, cn, i);
          clEnqueueWriteBuffer(dsa_queue_cl(q), b->mem, CL_TRUE, b->off, b->size, before[i], 0,
                               NULL, NULL);
        }
      }
      ncases++;
    }
  }
  CHECK(ncases >= sp->min_cases, "%s: only %d bad-argument cases", op, ncases);
  /* The unbroken call works and does change the output: the cases above
   * proved something. */
  memcpy(x, sp->base, sp->size);
  if (sp->reset) sp->reset(x);
  cl_event done = NULL;
  CHECK_OK((sp->valid ? sp->valid : sp->call)(x, &done));
  if (sp->no_event) {
    CHECK(done == NULL, "%s: valid call without events returned one", op);
    if (done) clReleaseEvent(done);
  } else {
    CHECK(done && clWaitForEvents(1, &done) == CL_SUCCESS, "%s: valid call event", op);
    if (done) clReleaseEvent(done);
  }
  clFinish(dsa_queue_cl(q));
  int changed = 0, all = 1;
  for (int i = 0; i < nouts; i++) {
    gbuf_read(q, sp->outs[i], after[i]);
    int ch = memcmp(before[i], after[i], sp->outs[i]->size) != 0;
    changed |= ch, all &= ch;
    free(before[i]), free(after[i]);
  }
  if (sp->all_change)
    CHECK(all, "%s: the valid call left an output unchanged", op);
  else
    CHECK(changed, "%s: the valid call left the output unchanged", op);
  free(x), free(before), free(after);
}

void *dsa_test_xmalloc(size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (!p) {
    fprintf(stderr, "out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

void dsa_test_fill_random(uint64_t *state, void *p, size_t n) {
  uint8_t *b = p;
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(dsa_test_rand(state) >> 56);
}

uint32_t dsa_test_read_faults(dsa_queue *q) {
  uint32_t bits = 0xFFFFFFFFu;
  CHECK_OK(dsa_queue_faults(q, &bits));
  return bits;
}

void dsa_test_first_diff(const void *g, const void *w, size_t n, const char *what,
                         const char *fmt, ...) {
  const uint8_t *got = g, *want = w;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i] && !bad++) first = i;
  char c[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c, sizeof c, fmt, ap);
  va_end(ap);
  CHECK(bad == 0, "%s [%s]: %zu bytes differ, first at byte %zu: got 0x%02X want 0x%02X", what,
        c, bad, first, bad ? got[first] : 0, bad ? want[first] : 0);
}

int32_t *dsa_test_narrow_pos(int64_t *pos, size_t n) {
  int32_t *p = dsa_test_xmalloc((n + 1) * 4);
  for (size_t i = 0; i < n; i++) p[i] = (int32_t)(uint32_t)(uint64_t)pos[i], pos[i] = p[i];
  return p;
}

uint16_t *dsa_test_narrow_cs(float *cs, size_t n) {
  uint16_t *h = dsa_test_xmalloc((n + 1) * 2);
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &cs[i], 4);
    /* RNE to bf16; NaN kept quiet */
    h[i] = (u & 0x7FFFFFFFu) > 0x7F800000u ? (uint16_t)((u >> 16) | 0x40u)
                                             : (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    u = (uint32_t)h[i] << 16;
    memcpy(&cs[i], &u, 4);
  }
  return h;
}
