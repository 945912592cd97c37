/* Tensor and cache descriptors: sizes, and the checks every operator runs
 * before it enqueues anything. */
#include <string.h>

#include "internal.h"

static const struct {
  const char *name;
  size_t size;
} dtypes[] = {
#define DSA_DTYPE_ROW_(name, val, str, size) [DSA_##name] = {str, size},
    DSA_DTYPE_MAP(DSA_DTYPE_ROW_)
#undef DSA_DTYPE_ROW_
};

static bool dtype_valid(dsa_dtype t) {
  return (unsigned)t < sizeof dtypes / sizeof dtypes[0] && dtypes[t].name;
}

const char *dsa_dtype_name(dsa_dtype t) { return dtype_valid(t) ? dtypes[t].name : "invalid"; }
size_t dsa_dtype_size(dsa_dtype t) { return dtype_valid(t) ? dtypes[t].size : 0; }

size_t dsa_cache_token_bytes(dsa_cache_format f) {
  switch (f) {
#define DSA_CACHE_BYTES_(name, val, data, scale) \
  case DSA_CACHE_##name: return (data) + (scale);
    DSA_CACHE_FORMAT_MAP(DSA_CACHE_BYTES_)
#undef DSA_CACHE_BYTES_
  }
  return 0;
}

dsa_tensor dsa_tensor_make(cl_mem mem, size_t offset, dsa_dtype dtype, int ndim,
                           const int64_t *shape) {
  dsa_tensor t;
  memset(&t, 0, sizeof t);
  t.mem = mem;
  t.offset = offset;
  t.dtype = dtype;
  t.ndim = ndim;
  if (ndim < 0 || ndim > DSA_MAX_DIMS || !shape) return t;
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    t.shape[i] = shape[i];
    t.stride[i] = s;
    s *= shape[i] > 0 ? shape[i] : 1;
  }
  return t;
}

size_t dsa__mem_size(cl_mem m) {
  size_t n = 0;
  if (!m || clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof n, &n, NULL) != CL_SUCCESS) return 0;
  return n;
}

#define BAD(...) dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, __VA_ARGS__)

dsa_status dsa__check_queue(const dsa_queue *q, const char *op) {
  if (!q) return BAD("%s: q is NULL", op);
  return DSA_OK;
}

dsa_status dsa__check_events(const dsa_events *ev, const char *op) {
  if (ev && ev->num_wait > 0 && !ev->wait)
    return BAD("%s: ev->wait is NULL but ev->num_wait is %u", op, ev->num_wait);
  if (ev && ev->num_wait == 0 && ev->wait)
    return BAD("%s: ev->wait is set but ev->num_wait is 0", op);
  for (cl_uint i = 0; ev && i < ev->num_wait; i++)
    if (!ev->wait[i]) return BAD("%s: ev->wait[%u] is NULL", op, i);
  return DSA_OK;
}

uint64_t dsa__tensor_extent(const dsa_tensor *t) {
  uint64_t last = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] == 0) return 0;
    last += (uint64_t)(t->shape[i] - 1) * (uint64_t)t->stride[i];
  }
  return t->offset + (last + 1) * dsa_dtype_size(t->dtype);
}

dsa_status dsa__check_tensor(const dsa_tensor *t, const char *op, const char *arg,
                             dsa_dtype want, int ndim) {
  if (!t) return BAD("%s: %s is NULL", op, arg);
  if (t->dtype != want)
    return BAD("%s: %s has dtype %s, expected %s", op, arg, dsa_dtype_name(t->dtype),
               dsa_dtype_name(want));
  if (t->ndim != ndim) return BAD("%s: %s has rank %d, expected %d", op, arg, t->ndim, ndim);
  /* Products below stay far from 2^63: each shape and stride is capped at 2^40. */
  const int64_t cap = (int64_t)1 << 40;
  bool empty = false;
  for (int i = 0; i < ndim; i++) {
    if (t->shape[i] < 0 || t->shape[i] > cap)
      return BAD("%s: %s shape[%d] = %lld is out of range", op, arg, i, (long long)t->shape[i]);
    if (t->stride[i] < 0 || t->stride[i] > cap)
      return BAD("%s: %s stride[%d] = %lld is out of range (strides are >= 0, in elements)", op,
                 arg, i, (long long)t->stride[i]);
    empty |= t->shape[i] == 0;
  }
  if (empty) return DSA_OK; /* addresses nothing; mem may even be NULL */
  if (!t->mem) return BAD("%s: %s->mem is NULL", op, arg);
  size_t size = dsa__mem_size(t->mem);
  if (size == 0) return BAD("%s: %s->mem is not a valid buffer", op, arg);
  if (t->offset % dsa_dtype_size(t->dtype) != 0)
    return BAD("%s: %s offset %zu is not a multiple of its element size %zu", op, arg, t->offset,
               dsa_dtype_size(t->dtype));
  uint64_t end = dsa__tensor_extent(t);
  if (end > size)
    return BAD("%s: %s addresses bytes up to %llu but its buffer holds %zu", op, arg,
               (unsigned long long)end, size);
  return DSA_OK;
}

dsa_status dsa__check_unit_inner(const dsa_tensor *t, const char *op, const char *arg) {
  if (t->ndim > 0 && t->shape[t->ndim - 1] > 1 && t->stride[t->ndim - 1] != 1)
    return BAD("%s: %s must have unit stride in its last dimension (got %lld)", op, arg,
               (long long)t->stride[t->ndim - 1]);
  return DSA_OK;
}

dsa_status dsa__check_dim(const dsa_tensor *t, const char *op, const char *arg, int dim,
                          int64_t want) {
  if (t->shape[dim] != want)
    return BAD("%s: %s shape[%d] = %lld, expected %lld", op, arg, dim, (long long)t->shape[dim],
               (long long)want);
  return DSA_OK;
}

dsa_status dsa__check_cache(const dsa_paged_cache *c, const char *op, const char *arg,
                            dsa_cache_format want) {
  if (!c) return BAD("%s: %s is NULL", op, arg);
  if (c->format != want)
    return BAD("%s: %s has format %d, this operator needs format %d", op, arg, (int)c->format,
               (int)want);
  if (c->block_size <= 0)
    return BAD("%s: %s block_size = %d, must be >= 1", op, arg, (int)c->block_size);
  if (c->num_blocks < 0 || c->num_blocks > ((int64_t)1 << 40))
    return BAD("%s: %s num_blocks = %lld is out of range", op, arg, (long long)c->num_blocks);
  uint64_t page = (uint64_t)c->block_size * dsa_cache_token_bytes(c->format);
  if (c->block_stride < 0 || (uint64_t)c->block_stride < page || c->block_stride > ((int64_t)1 << 40))
    return BAD("%s: %s block_stride = %lld, must be >= the page (%llu bytes = block_size %d x %zu)",
               op, arg, (long long)c->block_stride, (unsigned long long)page, (int)c->block_size,
               dsa_cache_token_bytes(c->format));
  if (c->num_blocks == 0) return DSA_OK;
  if (!c->mem) return BAD("%s: %s->mem is NULL", op, arg);
  size_t size = dsa__mem_size(c->mem);
  if (size == 0) return BAD("%s: %s->mem is not a valid buffer", op, arg);
  /* The last block needs only its page, not the full stride. */
  uint64_t end = c->offset + (uint64_t)(c->num_blocks - 1) * (uint64_t)c->block_stride + page;
  if (end > size)
    return BAD("%s: %s (%lld blocks of stride %lld at offset %zu) needs %llu bytes but its "
               "buffer holds %zu",
               op, arg, (long long)c->num_blocks, (long long)c->block_stride, c->offset,
               (unsigned long long)end, size);
  return DSA_OK;
}
