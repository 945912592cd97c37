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
  /* Contiguous strides. A product past INT64_MAX leaves the stride at
   * INT64_MAX, which every operator's check refuses. */
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    t.shape[i] = shape[i];
    t.stride[i] = s;
    if (__builtin_mul_overflow(s, shape[i] > 0 ? shape[i] : 1, &s)) s = INT64_MAX;
  }
  return t;
}

dsa_tensor dsa_tensor_make_ptr(dsa_mem_kind kind, void *ptr, size_t bytes, size_t offset,
                               dsa_dtype dtype, int ndim, const int64_t *shape) {
  dsa_tensor t = dsa_tensor_make(NULL, offset, dtype, ndim, shape);
  t.kind = kind;
  t.ptr = ptr;
  t.ptr_bytes = bytes;
  return t;
}

size_t dsa__mem_size(cl_mem m) {
  size_t n = 0;
  if (!m || clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof n, &n, NULL) != CL_SUCCESS) return 0;
  return n;
}

#define BAD(...) dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, __VA_ARGS__)

/* The cl_context (and dsa_context) of the queue of the operator this thread
 * is validating; set by dsa__check_queue, compared by the tensor, cache and
 * mem checks. */
static _Thread_local cl_context current_ctx;
static _Thread_local const dsa_context *current_dctx;

dsa_status dsa__check_queue(const dsa_queue *q, const char *op) {
  current_ctx = NULL;
  current_dctx = NULL;
  if (!q) return BAD("%s: q is NULL", op);
  if (!q->ctx || !q->ctx->ctx) return BAD("%s: q has no context", op);
  current_ctx = q->ctx->ctx;
  current_dctx = q->ctx;
  return DSA_OK;
}

dsa_status dsa__check_mem(cl_mem m, const char *op, const char *arg, size_t *size) {
  *size = 0;
  if (!m) return BAD("%s: %s is NULL", op, arg);
  size_t n = dsa__mem_size(m);
  if (n == 0) return BAD("%s: %s is not a valid buffer", op, arg);
  if (current_ctx) {
    cl_context mc = NULL;
    if (clGetMemObjectInfo(m, CL_MEM_CONTEXT, sizeof mc, &mc, NULL) != CL_SUCCESS)
      return BAD("%s: %s is not a valid buffer", op, arg);
    if (mc != current_ctx)
      return BAD("%s: %s belongs to another cl_context than the queue's", op, arg);
  }
  *size = n;
  return DSA_OK;
}

/* A USM pointer: an allocation of the queue's cl_context (device memory: of
 * its device); *usable = bytes from ptr to the allocation's end. */
static dsa_status usm_usable(const void *ptr, const char *op, const char *arg, size_t *usable) {
  const dsa_context *c = current_dctx;
  cl_uint type = 0;
  cl_int e = c->usm_info(current_ctx, ptr, DSA_CL_MEM_ALLOC_TYPE_INTEL, sizeof type, &type, NULL);
  if (e != CL_SUCCESS || (type != DSA_CL_MEM_TYPE_HOST_INTEL &&
                          type != DSA_CL_MEM_TYPE_DEVICE_INTEL &&
                          type != DSA_CL_MEM_TYPE_SHARED_INTEL))
    return BAD("%s: %s->ptr is not a USM allocation of the queue's cl_context", op, arg);
  if (type == DSA_CL_MEM_TYPE_DEVICE_INTEL) {
    cl_device_id d = NULL;
    e = c->usm_info(current_ctx, ptr, DSA_CL_MEM_ALLOC_DEVICE_INTEL, sizeof d, &d, NULL);
    if (e != CL_SUCCESS || d != c->dev)
      return BAD("%s: %s->ptr is USM device memory of another device than the queue's", op,
                 arg);
  }
  void *base = NULL;
  size_t size = 0;
  if (c->usm_info(current_ctx, ptr, DSA_CL_MEM_ALLOC_BASE_PTR_INTEL, sizeof base, &base, NULL) !=
          CL_SUCCESS ||
      c->usm_info(current_ctx, ptr, DSA_CL_MEM_ALLOC_SIZE_INTEL, sizeof size, &size, NULL) !=
          CL_SUCCESS)
    return BAD("%s: %s->ptr: the USM allocation's base and size cannot be queried", op, arg);
  const uintptr_t b = (uintptr_t)base, p = (uintptr_t)ptr;
  if (p < b || p - b > size)
    return BAD("%s: %s->ptr lies outside the USM allocation the driver reports for it", op, arg);
  *usable = size - (size_t)(p - b);
  return DSA_OK;
}

dsa_status dsa__check_storage(dsa_mem_kind kind, cl_mem mem, const void *ptr, size_t ptr_bytes,
                              const char *op, const char *arg, size_t *size) {
  *size = 0;
  if ((unsigned)kind > DSA_MEM_SVM)
    return BAD("%s: %s->kind = %d is not a dsa_mem_kind (DSA_MEM_BUFFER, DSA_MEM_USM or "
               "DSA_MEM_SVM)",
               op, arg, (int)kind);
  if (kind == DSA_MEM_BUFFER) {
    if (ptr)
      return BAD("%s: %s->ptr is set but its kind is DSA_MEM_BUFFER (a pointer needs kind "
                 "DSA_MEM_USM or DSA_MEM_SVM)",
                 op, arg);
    if (ptr_bytes)
      return BAD("%s: %s->ptr_bytes = %zu but its kind is DSA_MEM_BUFFER (no pointer)", op, arg,
                 ptr_bytes);
    if (!mem) return BAD("%s: %s->mem is NULL", op, arg);
    return dsa__check_mem(mem, op, arg, size);
  }
  const char *kn = dsa__mem_kind_name(kind);
  if (mem)
    return BAD("%s: %s has kind %s and both mem and ptr set: a pointer kind takes ptr, mem must "
               "be NULL",
               op, arg, kn);
  if (!ptr) return BAD("%s: %s->ptr is NULL (kind %s)", op, arg, kn);
  if (!current_dctx)
    return BAD("%s: %s: a %s pointer is checked against the queue's context, which is unknown",
               op, arg, kn);
  if (!(current_dctx->mem_kinds & (1u << kind)))
    return dsa__fail(DSA_ERR_UNSUPPORTED, 0, "%s: %s has kind %s, which needs %s; %s lacks it",
                     op, arg, kn, dsa__mem_kind_needs(kind), current_dctx->caps.device_name);
  if (kind == DSA_MEM_SVM) {
    if (ptr_bytes == 0)
      return BAD("%s: %s->ptr_bytes is 0: an SVM pointer needs the bytes usable from it", op,
                 arg);
    *size = ptr_bytes;
    return DSA_OK;
  }
  size_t usable = 0;
  DSA_CHECK(usm_usable(ptr, op, arg, &usable));
  if (ptr_bytes > usable)
    return BAD("%s: %s->ptr_bytes = %zu but its USM allocation holds %zu bytes from ptr", op,
               arg, ptr_bytes, usable);
  *size = ptr_bytes ? ptr_bytes : usable;
  return DSA_OK;
}

/* What holds a view's bytes, in messages: "its buffer" (a cl_mem) or "its
 * pointer range" (ptr_bytes, or what is left of the USM allocation). */
static const char *storage_noun(dsa_mem_kind kind) {
  return kind == DSA_MEM_BUFFER ? "its buffer" : "its pointer range";
}

bool dsa__checked_end(uint64_t offset, uint64_t count, uint64_t stride, uint64_t tail,
                      uint64_t *end) {
  /* end = offset + (count - 1) * stride + tail; count >= 1. */
  uint64_t x;
  if (count == 0) return false;
  if (__builtin_mul_overflow(count - 1, stride, &x)) return false;
  if (__builtin_add_overflow(x, tail, &x)) return false;
  if (__builtin_add_overflow(x, offset, &x)) return false;
  *end = x;
  return true;
}

dsa_status dsa__check_reserved(const unsigned char *r, size_t n, const char *op) {
  for (size_t i = 0; i < n; i++)
    if (r[i])
      return BAD("%s: p->reserved[%zu] = %u: reserved bytes must be zero (start from the "
                 "params' _default function)",
                 op, i, (unsigned)r[i]);
  return DSA_OK;
}

dsa_status dsa__check_events(const dsa_events *ev, const char *op) {
  if (ev && ev->num_wait > 0 && !ev->wait)
    return BAD("%s: ev->wait is NULL but ev->num_wait is %u", op, ev->num_wait);
  if (ev && ev->num_wait == 0 && ev->wait)
    return BAD("%s: ev->wait is set but ev->num_wait is 0", op);
  for (cl_uint i = 0; ev && i < ev->num_wait; i++) {
    if (!ev->wait[i]) return BAD("%s: ev->wait[%u] is NULL", op, i);
    /* An event of another cl_context: PoCL waits on it as if it were its
     * own; the standard leaves it to the driver (CL_INVALID_CONTEXT or not). */
    if (current_ctx) {
      cl_context ec = NULL;
      if (clGetEventInfo(ev->wait[i], CL_EVENT_CONTEXT, sizeof ec, &ec, NULL) != CL_SUCCESS)
        return BAD("%s: ev->wait[%u] is not a valid event", op, i);
      if (ec != current_ctx)
        return BAD("%s: ev->wait[%u] belongs to another cl_context than the queue's", op, i);
    }
  }
  return DSA_OK;
}

/* The one extent computation behind every tensor check: the last element's
 * offset in elements, sum of (shape[i]-1)*stride[i], then bytes. All checked. */
static bool tensor_end(const dsa_tensor *t, uint64_t *end) {
  uint64_t last = 0, x;
  size_t elem = dsa_dtype_size(t->dtype);
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] <= 0) {
      *end = 0;
      return true;
    }
    if (t->stride[i] < 0) return false;
    if (__builtin_mul_overflow((uint64_t)(t->shape[i] - 1), (uint64_t)t->stride[i], &x))
      return false;
    if (__builtin_add_overflow(last, x, &last)) return false;
  }
  if (__builtin_add_overflow(last, 1, &last)) return false;
  return dsa__checked_end(t->offset, last, elem, elem, end);
}

uint64_t dsa__tensor_extent(const dsa_tensor *t) {
  uint64_t end;
  return tensor_end(t, &end) ? end : UINT64_MAX;
}

dsa_status dsa__check_tensor(const dsa_tensor *t, const char *op, const char *arg,
                             dsa_dtype want, int ndim) {
  if (!t) return BAD("%s: %s is NULL", op, arg);
  if (t->dtype != want)
    return BAD("%s: %s has dtype %s, expected %s", op, arg, dsa_dtype_name(t->dtype),
               dsa_dtype_name(want));
  if (t->ndim != ndim) return BAD("%s: %s has rank %d, expected %d", op, arg, t->ndim, ndim);
  /* Each shape and stride is capped at 2^40 (launchers compute in int64 from
   * them); their products are checked below, not assumed small. */
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
  if ((unsigned)t->kind > DSA_MEM_SVM)
    return BAD("%s: %s->kind = %d is not a dsa_mem_kind (DSA_MEM_BUFFER, DSA_MEM_USM or "
               "DSA_MEM_SVM)",
               op, arg, (int)t->kind);
  if (empty) return DSA_OK; /* addresses nothing; mem (or ptr) may even be NULL */
  size_t size;
  DSA_CHECK(dsa__check_storage(t->kind, t->mem, t->ptr, t->ptr_bytes, op, arg, &size));
  /* A pointer's address joins the offset: elements must be aligned in memory. */
  const size_t es = dsa_dtype_size(t->dtype);
  if (t->kind == DSA_MEM_BUFFER && t->offset % es != 0)
    return BAD("%s: %s offset %zu is not a multiple of its element size %zu", op, arg, t->offset,
               es);
  if (t->kind != DSA_MEM_BUFFER && ((uintptr_t)t->ptr + t->offset) % es != 0)
    return BAD("%s: %s address ptr + offset = %p + %zu is not a multiple of its element size %zu",
               op, arg, t->ptr, t->offset, es);
  if (t->offset > size)
    return BAD("%s: %s offset %zu is past the end of %s (%zu bytes)", op, arg, t->offset,
               storage_noun(t->kind), size);
  uint64_t end;
  if (!tensor_end(t, &end))
    return BAD("%s: %s: offset %zu + shape x stride overflows 64 bits", op, arg, t->offset);
  if (end > size)
    return BAD("%s: %s addresses bytes up to %llu but %s holds %zu", op, arg,
               (unsigned long long)end, storage_noun(t->kind), size);
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
  if ((unsigned)c->kind > DSA_MEM_SVM)
    return BAD("%s: %s->kind = %d is not a dsa_mem_kind (DSA_MEM_BUFFER, DSA_MEM_USM or "
               "DSA_MEM_SVM)",
               op, arg, (int)c->kind);
  if (c->num_blocks == 0) return DSA_OK;
  size_t size;
  DSA_CHECK(dsa__check_storage(c->kind, c->mem, c->ptr, c->ptr_bytes, op, arg, &size));
  if (c->offset > size)
    return BAD("%s: %s offset %zu is past the end of %s (%zu bytes)", op, arg, c->offset,
               storage_noun(c->kind), size);
  /* The last block needs only its page, not the full stride. */
  uint64_t end;
  if (!dsa__checked_end(c->offset, (uint64_t)c->num_blocks, (uint64_t)c->block_stride, page,
                        &end))
    return BAD("%s: %s: offset %zu + %lld blocks of stride %lld overflows 64 bits", op, arg,
               c->offset, (long long)c->num_blocks, (long long)c->block_stride);
  if (end > size)
    return BAD("%s: %s (%lld blocks of stride %lld at offset %zu) needs %llu bytes but "
               "%s holds %zu",
               op, arg, (long long)c->num_blocks, (long long)c->block_stride, c->offset,
               (unsigned long long)end, storage_noun(c->kind), size);
  return DSA_OK;
}

/* The API's one rule for positions and cos/sin tables (docs/API.md,
 * Conventions): positions i64 or i32 of rank 1, cos/sin f32 or bf16 of rank 2
 * with unit inner stride. Kernels get the dtype as a flag (dsa__karg_positions,
 * dsa__karg_cos_sin) and read both (cl/dsa_common.h). */
dsa_status dsa__check_positions(const dsa_tensor *t, const char *op, int64_t n) {
  DSA_CHECK(dsa__check_tensor(t, op, "positions", t && t->dtype == DSA_I32 ? DSA_I32 : DSA_I64, 1));
  if (n >= 0) DSA_CHECK(dsa__check_dim(t, op, "positions", 0, n));
  return DSA_OK;
}

dsa_status dsa__check_cos_sin(const dsa_tensor *t, const char *op) {
  DSA_CHECK(dsa__check_tensor(t, op, "cos_sin", t && t->dtype == DSA_BF16 ? DSA_BF16 : DSA_F32, 2));
  return dsa__check_unit_inner(t, op, "cos_sin");
}
