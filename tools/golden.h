/* Adding an operator family to dsacl-golden (one file per family):
 *  1. tools/golden_<family>.c: `#include "golden.h"`, one runner per op dir
 *     (int run_x(gcase *c): load inputs, run, compare; with a shared case
 *     description, tools/cases/cases.h: fill the case from the arrays and
 *     return golden_run_case), then
 *     `const golden_op golden_ops_<family>[] = {{"op_dir_name", run_x}, ..., {NULL, NULL}};`
 *  2. tools/dsacl-golden.c: add the line `X(<family>) \` to GOLDEN_FAMILIES.
 *  3. tools/meson.build: add 'golden_<family>.c' to golden_sources. */
#ifndef DSACL_TOOLS_GOLDEN_H
#define DSACL_TOOLS_GOLDEN_H

#include <dsacl/dsacl.h>

#include <stddef.h>
#include <stdint.h>

#include "cases.h"
#include "npy.h"

#define GOLDEN_MAX_RES 32

/* One case being run: what it loaded and allocated (freed together by the
 * driver after clFinish), and the first failure in words. Runners return 0
 * on success, -1 on failure (golden_fail records the message). */
typedef struct gcase {
  dsa_context *ctx;
  dsa_queue *q;
  const char *dir; /* DIR/<op>/<case> */
  npy_meta meta;   /* DIR/<op>/<case>/meta.txt */
  npy_array arrays[GOLDEN_MAX_RES];
  int narrays;
  cl_mem mems[GOLDEN_MAX_RES];
  int nmems;
  char msg[1024];
  int failed;
} gcase;

/* One op directory name -> its runner. A family's array ends with {NULL, NULL}. */
typedef struct golden_op {
  const char *name;
  int (*run)(gcase *c);
} golden_op;

/* Records the first failure (printf format); always returns -1. */
int golden_fail(gcase *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Loads <dir>/<name>.npy, checking dtype and rank. NULL (and a failure) if
 * missing or of another dtype/rank; NULL without failure when optional and
 * the file is absent. Freed by the driver. */
npy_array *golden_load_opt(gcase *c, const char *name, npy_dtype want, int ndim, int optional);
#define golden_load(c, name, t, nd) golden_load_opt(c, name, t, nd, 0)

/* meta.txt values; 0 on success, else -1 and a failure naming the key. */
int golden_meta_i64(gcase *c, const char *key, int64_t *v);
int golden_meta_f64(gcase *c, const char *key, double *v);
/* The string value of key (e.g. "e2m1" -> "rne"); NULL and a failure if absent. */
const char *golden_meta_str(gcase *c, const char *key);

/* A device copy of n host bytes (n may be 0); NULL and a failure on error.
 * Released by the driver. */
cl_mem golden_to_device(gcase *c, const void *data, size_t n);
/* A device buffer of n bytes, every byte = fill (for outputs: with a
 * non-zero fill, every byte the op must write is checked as written). */
cl_mem golden_filled(gcase *c, size_t n, unsigned char fill);

/* A dense row-major tensor over m with a's shape. */
dsa_tensor golden_tensor_of(cl_mem m, const npy_array *a, dsa_dtype t);

/* -1 and a failure "what -> STATUS: last error" unless s == DSA_OK. */
int golden_op_status(gcase *c, const char *what, dsa_status s);
/* -1 and a failure if the queue's fault bits are set. */
int golden_no_faults(gcase *c);

/* Reads want->nbytes from m and compares byte for byte, naming the first
 * mismatching elements by index. */
int golden_compare(gcase *c, const char *name, cl_mem m, const npy_array *want);
/* float32 outputs: reads m (want->count floats) and requires
 *   - the same non-finite pattern: -inf, +inf and NaN exactly where want has them;
 *   - max|got-want| / max|want| <= rel_tol over the finite entries
 *     (when max|want| == 0: max|got-want| <= rel_tol).
 * want must be NPY_F4. */
int golden_compare_f32_tol(gcase *c, const char *name, cl_mem m, const npy_array *want,
                           double rel_tol);

/* 0 when the arrays' shapes agree (ok), else -1 and a failure naming what:
 * a shared case reads as many elements as its shape says, so a runner
 * checks every array against it before golden_run_case. */
int golden_shapes_agree(gcase *c, int ok, const char *what);

/* Runs a shared case (tools/cases/) over the golden's arrays: upload (the
 * output filled with out_fill), the call, no faults, the case's rule against
 * want; then frees the case's buffers. 0, or -1 and a failure. */
int golden_run_case(gcase *c, const case_ops *o, void *cs, unsigned char out_fill,
                    const void *want);

/* An MLA fp8 paged cache over m from meta num_blocks, block_size,
 * block_stride_bytes. */
int golden_cache_of(gcase *c, cl_mem m, dsa_paged_cache *pc);
/* The same geometry for a shared case: meta num_blocks, block_size,
 * block_stride_bytes; the array cache (named name) must be num_blocks x
 * block_stride_bytes bytes. 0, or -1 after golden_fail. */
int golden_cache_geometry(gcase *c, const npy_array *cache, const char *name, int64_t *nb,
                          int32_t *bs, int64_t *stride);

#endif
