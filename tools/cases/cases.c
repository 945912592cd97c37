/* The helpers of the shared case descriptions (cases.h). */
#include "cases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

#define CASE_FILL_BY_WRITE ((size_t)64 << 20)

cl_mem case_buf(const case_dev *d, size_t bytes, const void *init, unsigned char fill) {
  cl_int err;
  if (!bytes) bytes = 1;
  cl_mem m = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err != CL_SUCCESS) return NULL;
  /* A fill is written from the host as one whole-buffer write up to
   * CASE_FILL_BY_WRITE bytes (the golden and checkcl sizes), larger ones by
   * clEnqueueFillBuffer (the bench's). Oclgrind 21.10's
   * --uninitialized plugin re-sizes a buffer's shadow state to each host
   * store, and its clEnqueueFillBuffer stores one pattern (a byte) at a
   * time: the filled buffer is left with a one-byte shadow, so every later
   * kernel store to it is dropped from the shadow and every load reads
   * "uninitialized" (the two-stage decode's lengths in its workspace,
   * sparse_attn_bf16's set_len; and, through a released buffer's shadow
   * that the next buffer at its index inherits, the top-k split's lists in
   * the queue's scratch: docs/PORTING.md, "Oclgrind"). */
  unsigned char *h = !init && bytes <= CASE_FILL_BY_WRITE ? malloc(bytes) : NULL;
  if (h) memset(h, fill, bytes);
  if (init || h) {
    err = clEnqueueWriteBuffer(d->q, m, CL_TRUE, 0, bytes, init ? init : h, 0, NULL, NULL);
    free(h);
  } else {
    const cl_uchar v = fill;
    err = clEnqueueFillBuffer(d->q, m, &v, 1, 0, bytes, 0, NULL, NULL);
    if (err == CL_SUCCESS) err = clFinish(d->q);
  }
  if (err != CL_SUCCESS) {
    clReleaseMemObject(m);
    return NULL;
  }
  return m;
}

void case_release(cl_mem *m) {
  if (*m) clReleaseMemObject(*m);
  *m = NULL;
}

void *case_alloc(size_t n) { return calloc(n ? n : 1, 1); }

int64_t case_rnd(uint64_t *rng, int64_t n) {
  return n > 0 ? (int64_t)(rng64_next(rng) % (uint64_t)n) : 0;
}
double case_uniform(uint64_t *rng, double lo, double hi) {
  return lo + rng64_uniform(rng) * (hi - lo);
}
void case_fill_bytes(uint64_t *rng, void *p, size_t n) {
  uint8_t *b = p;
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(rng64_next(rng) >> 56);
}
int64_t *case_random_distinct(uint64_t *seed, int64_t n, int64_t k) {
  int64_t *all = case_alloc((size_t)(n > 0 ? n : 0) * 8);
  if (!all) return NULL;
  for (int64_t i = 0; i < n; i++) all[i] = i;
  for (int64_t i = 0; i < k; i++) {
    const int64_t j = i + (int64_t)(rng64_next(seed) % (uint64_t)(n - i)), t = all[i];
    all[i] = all[j], all[j] = t;
  }
  return all;
}

int case_insert_slots(uint64_t *rng, int64_t *slots, int64_t n, int64_t cap, int64_t bad_span) {
  int64_t *perm = case_alloc((size_t)(cap > 0 ? cap : 0) * 8);
  if (!perm) return -1;
  for (int64_t i = 0; i < cap; i++) perm[i] = i;
  for (int64_t i = 0; i < n; i++) {
    if (i < cap) {
      const int64_t j = i + case_rnd(rng, cap - i), t = perm[i];
      perm[i] = perm[j], perm[j] = t;
    }
    const int64_t r = case_rnd(rng, 12);
    slots[i] = i >= cap || r == 0 ? -1 : r == 1 ? cap + case_rnd(rng, bad_span) : perm[i];
  }
  free(perm);
  return 0;
}

uint16_t case_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
double case_bf16_f(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

int case_cmp_bytes(const void *got, const void *want, size_t n, size_t esz, const char *what,
                   char *msg, size_t msz) {
  const uint8_t *g = got, *w = want;
  for (size_t i = 0; i < n; i++)
    if (g[i] != w[i]) {
      const size_t el = i / esz * esz;
      char gs[40] = "", ws[40] = "";
      for (size_t k = 0; k < esz && k < 8 && el + k < n; k++) {
        snprintf(gs + 2 * k, 3, "%02x", g[el + esz - 1 - k]);
        snprintf(ws + 2 * k, 3, "%02x", w[el + esz - 1 - k]);
      }
      snprintf(msg, msz, "%s: first difference at element %zu (byte %zu): got 0x%s, want 0x%s",
               what, i / esz, i, gs, ws);
      return 1;
    }
  return 0;
}

int case_read(const case_dev *d, cl_mem m, size_t bytes, void *dst, char *msg, size_t msz) {
  if (!bytes) return 0;
  const cl_int err = clEnqueueReadBuffer(d->q, m, CL_TRUE, 0, bytes, dst, 0, NULL, NULL);
  if (err == CL_SUCCESS) return 0;
  snprintf(msg, msz, "clEnqueueReadBuffer: OpenCL error %d", (int)err);
  return 1;
}

int case_read_cmp(const case_dev *d, cl_mem m, size_t bytes, const void *want, size_t esz,
                  const char *what, char *msg, size_t msz) {
  void *got = case_alloc(bytes);
  if (!got) return snprintf(msg, msz, "%s: out of memory", what), 1;
  const int rc = case_read(d, m, bytes, got, msg, msz) ||
                 case_cmp_bytes(got, want, bytes, esz, what, msg, msz);
  free(got);
  return rc;
}

int case_faults(dsa_queue *q, uint32_t want, const char *what, char *msg, size_t msz) {
  uint32_t f = 0;
  const dsa_status s = dsa_queue_faults(q, &f);
  if (s != DSA_OK) {
    snprintf(msg, msz, "%s: dsa_queue_faults: %s", what, dsa_status_name(s));
    return 1;
  }
  if (f == want) return 0;
  snprintf(msg, msz, "%s: faults 0x%x, want 0x%x", what, f, want);
  return 1;
}
