/* Kernel arguments: the one route from dsa_tensor / dsa_paged_cache to
 * clSetKernelArg, matching the signature macros of cl/dsa_args.h. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

void dsa__kargs_init(dsa_kargs *a, dsa_queue *q) {
  a->q = q;
  a->n = 0;
  a->bad = false;
}

/* The next slot, or NULL (and the list marked bad) when full. */
static void *slot(dsa_kargs *a, size_t size) {
  if (a->n >= DSA_KARGS_MAX) {
    a->bad = true;
    return NULL;
  }
  a->a[a->n].size = size;
  a->a[a->n].local = false;
  a->a[a->n].kind = DSA_MEM_BUFFER;
  return &a->a[a->n++].v;
}

/* A USM or SVM pointer argument (dsa__launch_args sets it by kind). */
static void karg_ptr(dsa_kargs *a, dsa_mem_kind kind, void *ptr) {
  void **p = slot(a, sizeof ptr);
  if (!p) return;
  *p = ptr;
  a->a[a->n - 1].kind = kind;
}

/* The storage of a non-empty tensor or cache: its cl_mem or its pointer. */
static void karg_storage(dsa_kargs *a, dsa_mem_kind kind, cl_mem mem, void *ptr) {
  if (kind == DSA_MEM_BUFFER)
    dsa__karg_mem(a, mem);
  else
    karg_ptr(a, kind, ptr);
}

/* The address term of the alignment: the offset, plus the pointer's
 * address for a pointer kind (a cl_mem's base is aligned by OpenCL). */
static cl_ulong addr_term(dsa_mem_kind kind, const void *ptr, size_t offset) {
  return (cl_ulong)offset + (kind == DSA_MEM_BUFFER ? 0 : (cl_ulong)(uintptr_t)ptr);
}

void dsa__karg_mem(dsa_kargs *a, cl_mem m) {
  cl_mem *p = slot(a, sizeof(cl_mem));
  if (p) *p = m ? m : a->q->faults;
}
void dsa__karg_faults(dsa_kargs *a) { dsa__karg_mem(a, a->q->faults); }
void dsa__karg_i32(dsa_kargs *a, cl_int v) {
  cl_int *p = slot(a, sizeof v);
  if (p) *p = v;
}
void dsa__karg_u32(dsa_kargs *a, cl_uint v) {
  cl_uint *p = slot(a, sizeof v);
  if (p) *p = v;
}
void dsa__karg_i64(dsa_kargs *a, cl_long v) {
  cl_long *p = slot(a, sizeof v);
  if (p) *p = v;
}
void dsa__karg_u64(dsa_kargs *a, cl_ulong v) {
  cl_ulong *p = slot(a, sizeof v);
  if (p) *p = v;
}
void dsa__karg_f32(dsa_kargs *a, cl_float v) {
  cl_float *p = slot(a, sizeof v);
  if (p) *p = v;
}
void dsa__karg_local(dsa_kargs *a, size_t bytes) {
  if (slot(a, bytes)) a->a[a->n - 1].local = true;
}

/* Largest power of two <= 256 dividing every term (256 when all are 0). */
static cl_uint pow2_align(const cl_ulong *terms, int n) {
  cl_ulong acc = 256;
  for (int i = 0; i < n; i++) acc |= terms[i];
  return (cl_uint)(acc & (~acc + 1));
}

cl_uint dsa__tensor_align(const dsa_tensor *t) {
  if (!t) return 256;
  cl_ulong terms[DSA_MAX_DIMS + 1];
  int n = 0;
  terms[n++] = addr_term(t->kind, t->ptr, t->offset);
  size_t es = dsa_dtype_size(t->dtype);
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] == 0) return 256; /* addresses nothing */
    if (i < t->ndim - 1 && t->shape[i] > 1) terms[n++] = (cl_ulong)t->stride[i] * es;
  }
  return pow2_align(terms, n);
}

static bool tensor_empty(const dsa_tensor *t) {
  if (!t) return true;
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] == 0) return true;
  return false;
}

void dsa__karg_tensor(dsa_kargs *a, const dsa_tensor *t, int rank) {
  if (t && t->ndim > rank) a->bad = true;
  const bool empty = tensor_empty(t);
  if (empty)
    dsa__karg_mem(a, NULL);
  else
    karg_storage(a, t->kind, t->mem, t->ptr);
  dsa__karg_u64(a, empty ? 0 : (cl_ulong)t->offset);
  const size_t es = t ? dsa_dtype_size(t->dtype) : 0;
  for (int i = 0; i < rank; i++)
    dsa__karg_u64(a, empty || i >= t->ndim ? 0 : (cl_ulong)t->stride[i] * es);
  dsa__karg_u32(a, empty ? 256 : dsa__tensor_align(t));
}

void dsa__karg_paged(dsa_kargs *a, const dsa_paged_cache *c) {
  const bool empty = !c || c->num_blocks == 0;
  if (empty)
    dsa__karg_mem(a, NULL);
  else
    karg_storage(a, c->kind, c->mem, c->ptr);
  dsa__karg_u64(a, empty ? 0 : (cl_ulong)c->offset);
  dsa__karg_i64(a, empty ? 0 : (cl_long)c->num_blocks);
  dsa__karg_i32(a, c ? (cl_int)c->block_size : 1);
  dsa__karg_u64(a, c ? (cl_ulong)c->block_stride : 0);
  dsa__karg_u32(a, dsa__paged_align(c));
}

cl_uint dsa__paged_align(const dsa_paged_cache *c) {
  const bool empty = !c || c->num_blocks == 0;
  const cl_ulong terms[2] = {empty ? 0 : addr_term(c->kind, c->ptr, c->offset),
                             c ? (cl_ulong)c->block_stride : 0};
  return pow2_align(terms, 2);
}

dsa_status dsa__launch_args(dsa_queue *q, cl_kernel k, const char *kname, const dsa_kargs *a,
                            cl_uint dims, const size_t *global, const size_t *local,
                            const dsa_events *ev) {
  if (a->bad)
    return dsa__fail(DSA_ERR_INTERNAL, 0,
                     "kernel %s: argument list overflow or tensor rank mismatch", kname);
  /* The host list and the kernel signature are matched by count here and by
   * size in clSetKernelArg; the signature macros keep their order equal. */
  cl_uint nk = 0;
  if (clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof nk, &nk, NULL) == CL_SUCCESS &&
      nk != (cl_uint)a->n)
    return dsa__fail(DSA_ERR_INTERNAL, 0, "kernel %s takes %u arguments, the launcher passes %d",
                     kname, nk, a->n);
  for (int i = 0; i < a->n; i++) {
    const dsa_mem_kind kind = a->a[i].kind;
    cl_int e = kind != DSA_MEM_BUFFER
                   ? dsa__set_arg_ptr(q->ctx, k, (cl_uint)i, kind, a->a[i].v.p)
                   : clSetKernelArg(k, (cl_uint)i, a->a[i].size,
                                    a->a[i].local ? NULL : &a->a[i].v);
    if (e != CL_SUCCESS) {
      dsa__fail_cl(e, kind == DSA_MEM_USM   ? "clSetKernelArgMemPointerINTEL"
                      : kind == DSA_MEM_SVM ? "clSetKernelArgSVMPointer"
                                            : "clSetKernelArg");
      char buf[160];
      snprintf(buf, sizeof buf, " (kernel %s, argument %d)", kname, i);
      dsa__append_error(buf);
      return DSA_ERR_OPENCL;
    }
  }
  return dsa__enqueue(q, k, kname, dims, global, local, ev);
}

void dsa__karg_positions(dsa_kargs *a, const dsa_tensor *t) {
  dsa__karg_tensor(a, t, 1);
  dsa__karg_i32(a, t && t->dtype == DSA_I32);
}

void dsa__karg_cos_sin(dsa_kargs *a, const dsa_tensor *t) {
  dsa__karg_tensor(a, t, 2);
  dsa__karg_i32(a, t && t->dtype == DSA_BF16);
}
