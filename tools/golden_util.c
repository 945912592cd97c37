/* Helpers shared by the golden runners (see golden.h). */
#include "golden.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int golden_fail(gcase *c, const char *fmt, ...) {
  if (!c->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
  }
  c->failed = 1;
  return -1;
}

npy_array *golden_load_opt(gcase *c, const char *name, npy_dtype want, int ndim, int optional) {
  char path[2048], err[512];
  snprintf(path, sizeof path, "%s/%s.npy", c->dir, name);
  if (optional) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fclose(f);
  }
  if (c->narrays == GOLDEN_MAX_RES) return golden_fail(c, "too many tensors"), NULL;
  npy_array *a = &c->arrays[c->narrays];
  if (npy_load(path, a, err, sizeof err)) return golden_fail(c, "%s", err), NULL;
  c->narrays++;
  if (a->dtype != want || a->ndim != ndim)
    return golden_fail(c, "%s: %s rank %d, expected %s rank %d", name, npy_dtype_name(a->dtype),
                       a->ndim, npy_dtype_name(want), ndim),
           NULL;
  return a;
}

int golden_meta_i64(gcase *c, const char *key, int64_t *v) {
  if (npy_meta_i64(&c->meta, key, v)) return golden_fail(c, "meta.txt: no integer '%s'", key);
  return 0;
}

int golden_meta_f64(gcase *c, const char *key, double *v) {
  if (npy_meta_f64(&c->meta, key, v)) return golden_fail(c, "meta.txt: no number '%s'", key);
  return 0;
}

const char *golden_meta_str(gcase *c, const char *key) {
  const char *s = npy_meta_get(&c->meta, key);
  if (!s) golden_fail(c, "meta.txt: no '%s'", key);
  return s;
}

cl_mem golden_to_device(gcase *c, const void *data, size_t n) {
  if (c->nmems == GOLDEN_MAX_RES) return golden_fail(c, "too many buffers"), NULL;
  cl_int err;
  cl_mem m = clCreateBuffer(dsa_context_cl_context(c->ctx),
                            CL_MEM_READ_WRITE | (n ? CL_MEM_COPY_HOST_PTR : 0), n ? n : 1,
                            n ? (void *)data : NULL, &err);
  if (!m) return golden_fail(c, "clCreateBuffer(%zu): error %d", n, (int)err), NULL;
  return c->mems[c->nmems++] = m;
}

cl_mem golden_filled(gcase *c, size_t n, unsigned char fill) {
  uint8_t *h = malloc(n ? n : 1);
  if (!h) return golden_fail(c, "out of memory"), NULL;
  memset(h, fill, n);
  cl_mem m = golden_to_device(c, h, n);
  free(h);
  return m;
}

dsa_tensor golden_tensor_of(cl_mem m, const npy_array *a, dsa_dtype t) {
  return dsa_tensor_make(m, 0, t, a->ndim, a->shape);
}

int golden_op_status(gcase *c, const char *what, dsa_status s) {
  if (s != DSA_OK)
    return golden_fail(c, "%s -> %s: %s", what, dsa_status_name(s), dsa_last_error());
  return 0;
}

int golden_no_faults(gcase *c) {
  uint32_t bits = 0;
  if (golden_op_status(c, "dsa_queue_faults", dsa_queue_faults(c->q, &bits))) return -1;
  if (bits) return golden_fail(c, "fault bits 0x%x set on valid input", (unsigned)bits);
  return 0;
}

/* Element i of a as "i0,i1,..." (its index in a's shape). */
static void index_str(const npy_array *a, size_t i, char *out, size_t n) {
  int64_t at[NPY_MAX_DIMS];
  size_t rem = i;
  for (int d = a->ndim - 1; d >= 0; d--) {
    at[d] = (int64_t)(rem % (size_t)a->shape[d]);
    rem /= (size_t)a->shape[d];
  }
  out[0] = 0;
  for (int d = 0; d < a->ndim; d++)
    snprintf(out + strlen(out), n - strlen(out), "%s%lld", d ? "," : "", (long long)at[d]);
}

/* want->nbytes read back from m into a malloc'ed buffer (NULL and a failure
 * on error). */
static uint8_t *read_back(gcase *c, cl_mem m, const npy_array *want) {
  uint8_t *got = malloc(want->nbytes ? want->nbytes : 1);
  if (!got) return golden_fail(c, "out of memory"), NULL;
  if (!want->nbytes) return got;
  cl_int err = clEnqueueReadBuffer(dsa_queue_cl(c->q), m, CL_TRUE, 0, want->nbytes, got, 0,
                                   NULL, NULL);
  if (err != CL_SUCCESS) {
    free(got);
    return golden_fail(c, "clEnqueueReadBuffer: error %d", (int)err), NULL;
  }
  return got;
}

int golden_compare(gcase *c, const char *name, cl_mem m, const npy_array *want) {
  uint8_t *got = read_back(c, m, want);
  if (!got) return -1;
  const uint8_t *w = want->data;
  size_t es = want->elem_size, bad = 0;
  char list[640] = "";
  for (size_t i = 0; i < want->count; i++) {
    if (!memcmp(got + i * es, w + i * es, es)) continue;
    if (bad++ >= 4) continue;
    char idx[96], one[192];
    index_str(want, i, idx, sizeof idx);
    uint64_t g = 0, x = 0;
    memcpy(&g, got + i * es, es); /* little-endian host assumed, as .npy is */
    memcpy(&x, w + i * es, es);
    snprintf(one, sizeof one, "%s[%s] got 0x%0*llx want 0x%0*llx", bad > 1 ? "; " : "", idx,
             (int)es * 2, (unsigned long long)g, (int)es * 2, (unsigned long long)x);
    strncat(list, one, sizeof list - strlen(list) - 1);
  }
  free(got);
  if (bad)
    return golden_fail(c, "%s: %zu of %zu elements differ: %s%s", name, bad, want->count, list,
                       bad > 4 ? "; ..." : "");
  return 0;
}

/* 0 finite, 1 -inf, 2 +inf, 3 NaN. */
static int fclass(float x) {
  if (isnan(x)) return 3;
  if (isinf(x)) return x < 0 ? 1 : 2;
  return 0;
}

int golden_compare_f32_tol(gcase *c, const char *name, cl_mem m, const npy_array *want,
                           double rel_tol) {
  if (want->dtype != NPY_F4) return golden_fail(c, "%s: reference is not float32", name);
  uint8_t *raw = read_back(c, m, want);
  if (!raw) return -1;
  const float *got = (const float *)raw, *w = want->data;
  static const char *cls[] = {"finite", "-inf", "+inf", "nan"};
  size_t pat_bad = 0, worst = 0;
  double max_ref = 0, max_diff = 0;
  char list[640] = "";
  for (size_t i = 0; i < want->count; i++) {
    int cg = fclass(got[i]), cw = fclass(w[i]);
    if (cg != cw) {
      if (pat_bad++ < 4) {
        char idx[96], one[192];
        index_str(want, i, idx, sizeof idx);
        snprintf(one, sizeof one, "%s[%s] got %s (%g) want %s (%g)", pat_bad > 1 ? "; " : "",
                 idx, cls[cg], (double)got[i], cls[cw], (double)w[i]);
        strncat(list, one, sizeof list - strlen(list) - 1);
      }
      continue;
    }
    if (cw) continue;
    double r = fabs((double)w[i]), d = fabs((double)got[i] - (double)w[i]);
    if (r > max_ref) max_ref = r;
    if (d > max_diff) max_diff = d, worst = i;
  }
  int rc = 0;
  if (pat_bad) {
    rc = golden_fail(c, "%s: inf/nan pattern differs at %zu of %zu elements: %s%s", name,
                     pat_bad, want->count, list, pat_bad > 4 ? "; ..." : "");
  } else {
    double err = max_ref > 0 ? max_diff / max_ref : max_diff;
    if (!(err <= rel_tol)) {
      char idx[96];
      index_str(want, worst, idx, sizeof idx);
      rc = golden_fail(c,
                       "%s: max|d|/max|ref| = %.3g > %.3g (max|d| %.6g at [%s]: got %.9g want "
                       "%.9g; max|ref| %.6g)",
                       name, err, rel_tol, max_diff, idx, (double)got[worst],
                       (double)w[worst], max_ref);
    }
  }
  free(raw);
  return rc;
}

int golden_cache_of(gcase *c, cl_mem m, dsa_paged_cache *pc) {
  int64_t nb, bs, stride;
  if (golden_meta_i64(c, "num_blocks", &nb) || golden_meta_i64(c, "block_size", &bs) ||
      golden_meta_i64(c, "block_stride_bytes", &stride))
    return -1;
  *pc = (dsa_paged_cache){.mem = m, .offset = 0, .num_blocks = nb, .block_size = (int32_t)bs,
                          .block_stride = stride, .format = DSA_CACHE_MLA_FP8};
  return 0;
}

int golden_cache_geometry(gcase *c, const npy_array *cache, const char *name, int64_t *nb,
                          int32_t *bs, int64_t *stride) {
  int64_t b;
  if (golden_meta_i64(c, "num_blocks", nb) || golden_meta_i64(c, "block_size", &b) ||
      golden_meta_i64(c, "block_stride_bytes", stride))
    return -1;
  *bs = (int32_t)b;
  if (*nb < 0 || *stride < 0 || b < 1 || b > INT32_MAX ||
      cache->nbytes != (size_t)*nb * (size_t)*stride)
    return golden_fail(c, "%s is not num_blocks x block_stride_bytes", name);
  return 0;
}

int golden_run_case(gcase *c, const case_ops *o, void *cs, unsigned char out_fill,
                    const void *want) {
  const case_dev d = {dsa_context_cl_context(c->ctx), dsa_queue_cl(c->q)};
  char msg[512];
  int rc = o->upload(&d, cs, out_fill, msg, sizeof msg) ? golden_fail(c, "%s", msg) : 0;
  if (!rc) rc = golden_op_status(c, o->op, o->call(c->q, cs, NULL));
  if (!rc) rc = golden_no_faults(c);
  if (!rc && o->check(&d, cs, want, msg, sizeof msg)) rc = golden_fail(c, "%s", msg);
  o->free(cs);
  return rc;
}

int golden_shapes_agree(gcase *c, int ok, const char *what) {
  return ok ? 0 : golden_fail(c, "array shapes disagree: %s", what);
}
