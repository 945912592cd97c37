/* Queues: the cl queue, per-queue kernel objects, the fault word, launches. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static dsa_status init_queue(dsa_queue *q) {
  cl_int e;
  cl_uint zero = 0;
  q->faults = clCreateBuffer(q->ctx->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                             sizeof zero, &zero, &e);
  if (!q->faults) return dsa__fail_cl(e, "allocating the queue's fault word");
  return DSA_OK;
}

dsa_status dsa_queue_create(dsa_queue **out, dsa_context *c, unsigned flags) {
  dsa__clear_error();
  if (!out) return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "dsa_queue_create: out is NULL");
  *out = NULL;
  if (!c) return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "dsa_queue_create: c is NULL");
  if (flags & ~(unsigned)DSA_QUEUE_PROFILING)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "dsa_queue_create: unknown flags 0x%x", flags);
  dsa_queue *q = calloc(1, sizeof *q);
  if (!q) return dsa__fail(DSA_ERR_OUT_OF_MEMORY, 0, "dsa_queue_create: out of memory");
  q->ctx = c;
  cl_int e;
  cl_command_queue_properties props =
      (flags & DSA_QUEUE_PROFILING) ? CL_QUEUE_PROFILING_ENABLE : 0;
  q->q = clCreateCommandQueue(c->ctx, c->dev, props, &e);
  if (!q->q) {
    free(q);
    return dsa__fail_cl(e, "clCreateCommandQueue");
  }
  dsa_status s = init_queue(q);
  if (s != DSA_OK) {
    clReleaseCommandQueue(q->q);
    free(q);
    return s;
  }
  pthread_mutex_lock(&c->lock);
  c->nqueues++;
  pthread_mutex_unlock(&c->lock);
  *out = q;
  return DSA_OK;
}

dsa_status dsa_queue_create_from_cl(dsa_queue **out, dsa_context *c, cl_command_queue cq) {
  dsa__clear_error();
  if (!out)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "dsa_queue_create_from_cl: out is NULL");
  *out = NULL;
  if (!c || !cq)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "dsa_queue_create_from_cl: %s is NULL",
                     !c ? "c" : "q");
  cl_context qctx;
  cl_device_id qdev;
  cl_int e = clGetCommandQueueInfo(cq, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL);
  if (e == CL_SUCCESS) e = clGetCommandQueueInfo(cq, CL_QUEUE_DEVICE, sizeof qdev, &qdev, NULL);
  if (e != CL_SUCCESS)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, e,
                     "dsa_queue_create_from_cl: q is not a valid command queue (%s)",
                     dsa__cl_error_name(e));
  if (qctx != c->ctx || qdev != c->dev)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "dsa_queue_create_from_cl: q belongs to another context or device than c");
  cl_command_queue_properties props = 0;
  clGetCommandQueueInfo(cq, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
  if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
    return dsa__fail(DSA_ERR_UNSUPPORTED, 0,
                     "dsa_queue_create_from_cl: q is out-of-order; dsacl needs an in-order queue");
  dsa_queue *q = calloc(1, sizeof *q);
  if (!q) return dsa__fail(DSA_ERR_OUT_OF_MEMORY, 0, "dsa_queue_create_from_cl: out of memory");
  q->ctx = c;
  q->q = cq;
  dsa_status s = init_queue(q);
  if (s != DSA_OK) {
    free(q);
    return s;
  }
  clRetainCommandQueue(cq);
  pthread_mutex_lock(&c->lock);
  c->nqueues++;
  pthread_mutex_unlock(&c->lock);
  *out = q;
  return DSA_OK;
}

void dsa_queue_destroy(dsa_queue **pq) {
  if (!pq || !*pq) return;
  dsa_queue *q = *pq;
  /* Kernels still queued hold references to their arguments, so releasing
   * our objects now is safe; finishing first keeps destroy deterministic. */
  clFinish(q->q);
  for (int i = 0; i < q->nkernels; i++) clReleaseKernel(q->kernels[i].k);
  clReleaseMemObject(q->faults);
  if (q->scratch) clReleaseMemObject(q->scratch);
  if (q->counters) clReleaseMemObject(q->counters);
  clReleaseCommandQueue(q->q);
  dsa_context *c = q->ctx;
  free(q);
  dsa__context_queue_gone(c);
  *pq = NULL;
}

dsa_status dsa__queue_scratch(dsa_queue *q, size_t bytes, cl_mem *out) {
  if (bytes == 0) bytes = 1;
  if (q->scratch && q->scratch_size >= bytes) {
    *out = q->scratch;
    return DSA_OK;
  }
  const size_t mib = (size_t)1 << 20;
  const size_t size = bytes > SIZE_MAX - mib ? bytes : (bytes + mib - 1) / mib * mib;
  cl_int e;
  cl_mem m = clCreateBuffer(q->ctx->ctx, CL_MEM_READ_WRITE, size, NULL, &e);
  if (!m) return dsa__fail_cl(e, "allocating the queue's scratch buffer");
  if (q->scratch) clReleaseMemObject(q->scratch);
  q->scratch = m;
  q->scratch_size = size;
  *out = m;
  return DSA_OK;
}

dsa_status dsa__queue_counters(dsa_queue *q, int64_t n, cl_mem *out) {
  if (q->counters && q->counters_n >= (size_t)n) {
    *out = q->counters;
    return DSA_OK;
  }
  const size_t m = (size_t)n < 1024 ? 1024 : (size_t)n;
  cl_uint *zero = calloc(m, sizeof *zero);
  if (!zero) return dsa__fail(DSA_ERR_OUT_OF_MEMORY, 0, "the queue's arrival counters");
  cl_int e;
  cl_mem b = clCreateBuffer(q->ctx->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                            m * sizeof *zero, zero, &e);
  free(zero);
  if (!b) return dsa__fail_cl(e, "allocating the queue's arrival counters");
  if (q->counters) clReleaseMemObject(q->counters);
  q->counters = b;
  q->counters_n = m;
  *out = b;
  return DSA_OK;
}

cl_command_queue dsa_queue_cl(const dsa_queue *q) { return q ? q->q : NULL; }

dsa_status dsa_queue_faults(dsa_queue *q, uint32_t *bits) {
  dsa__clear_error();
  if (!q) return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "dsa_queue_faults: q is NULL");
  if (!bits) return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "dsa_queue_faults: bits is NULL");
  cl_uint v = 0, zero = 0;
  /* In-order queue: the read sees every kernel enqueued before it. */
  cl_int e = clEnqueueReadBuffer(q->q, q->faults, CL_TRUE, 0, sizeof v, &v, 0, NULL, NULL);
  if (e != CL_SUCCESS) return dsa__fail_cl(e, "dsa_queue_faults: reading the fault word");
  e = clEnqueueWriteBuffer(q->q, q->faults, CL_TRUE, 0, sizeof zero, &zero, 0, NULL, NULL);
  if (e != CL_SUCCESS) return dsa__fail_cl(e, "dsa_queue_faults: clearing the fault word");
  *bits = v;
  return DSA_OK;
}

dsa_status dsa__get_kernel(dsa_queue *q, dsa_program_id prog, const char *name,
                           cl_kernel *out) {
  for (int i = 0; i < q->nkernels; i++)
    if (q->kernels[i].prog == prog && strcmp(q->kernels[i].name, name) == 0) {
      *out = q->kernels[i].k;
      return DSA_OK;
    }
  if (q->nkernels == DSA_MAX_KERNELS)
    return dsa__fail(DSA_ERR_INTERNAL, 0, "too many kernels per queue (raise DSA_MAX_KERNELS)");
  cl_program p;
  DSA_CHECK(dsa__get_program(q->ctx, prog, &p));
  cl_int e;
  cl_kernel k = clCreateKernel(p, name, &e);
  if (!k && dsa__program_rebuild(q->ctx, prog, p, name, &p)) k = clCreateKernel(p, name, &e);
  if (!k) return dsa__fail_cl(e, name);
  q->kernels[q->nkernels].prog = prog;
  q->kernels[q->nkernels].name = name;
  q->kernels[q->nkernels].k = k;
  q->nkernels++;
  *out = k;
  return DSA_OK;
}

dsa_status dsa__enqueue(dsa_queue *q, cl_kernel k, const char *kname, cl_uint dims,
                        const size_t *global, const size_t *local, const dsa_events *ev) {
  cl_int e = clEnqueueNDRangeKernel(q->q, k, dims, NULL, global, local,
                                    ev ? ev->num_wait : 0, ev ? ev->wait : NULL,
                                    ev ? ev->done : NULL);
  if (e != CL_SUCCESS) {
    dsa__fail_cl(e, "clEnqueueNDRangeKernel");
    dsa__append_error(" (kernel ");
    dsa__append_error(kname);
    dsa__append_error(")");
    return e == CL_OUT_OF_HOST_MEMORY ? DSA_ERR_OUT_OF_MEMORY : DSA_ERR_OPENCL;
  }
  return DSA_OK;
}

dsa_status dsa__launch_nothing(dsa_queue *q, const dsa_events *ev) {
  if (!ev || (!ev->done && ev->num_wait == 0)) return DSA_OK;
  cl_int e = clEnqueueMarkerWithWaitList(q->q, ev->num_wait, ev->wait, ev->done);
  if (e != CL_SUCCESS) return dsa__fail_cl(e, "clEnqueueMarkerWithWaitList");
  return DSA_OK;
}
