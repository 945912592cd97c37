/* Foreign memory as a cl_mem: cl_khr_external_memory imports (an opaque fd
 * or a dma-buf exported by CUDA, Vulkan, Level Zero ...) and the acquire /
 * release commands around their use. The import is zero-copy: the cl_mem
 * aliases the exporter's allocation, so any operator can read or write it.
 *
 * The OpenCL 3.0 entry point clCreateBufferWithProperties is referenced
 * weakly: an OpenCL 1.2/2.x ICD loader that lacks it still loads libdsacl,
 * and the import then reports DSA_ERR_UNSUPPORTED. The acquire / release
 * commands are extension functions, looked up per platform. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#ifndef CL_DEVICE_EXTERNAL_MEMORY_IMPORT_HANDLE_TYPES_KHR
#define CL_DEVICE_EXTERNAL_MEMORY_IMPORT_HANDLE_TYPES_KHR 0x204F
#endif
#ifndef CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR
#define CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR 0x2060
#endif
#ifndef CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR
#define CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR 0x2067
#endif

/* OpenCL 3.0 (cl_mem_properties is cl_ulong); weak, see above. */
extern CL_API_ENTRY cl_mem CL_API_CALL clCreateBufferWithProperties(
    cl_context context, const cl_ulong *properties, cl_mem_flags flags, size_t size,
    void *host_ptr, cl_int *errcode_ret) __attribute__((weak));

typedef cl_int(CL_API_CALL *dsa_acquire_fn)(cl_command_queue, cl_uint, const cl_mem *, cl_uint,
                                            const cl_event *, cl_event *);

#define BAD(...) dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, __VA_ARGS__)

static const struct {
  dsa_external_handle type;
  const char *ext;
  cl_uint cl_type;
} handles[] = {
    {DSA_EXTERNAL_OPAQUE_FD, "cl_khr_external_memory_opaque_fd",
     CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR},
    {DSA_EXTERNAL_DMA_BUF, "cl_khr_external_memory_dma_buf", CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR},
};

/* Why the device cannot import handle h, or NULL. */
static const char *import_refusal(cl_device_id dev, const char *exts, int h) {
  if (!clCreateBufferWithProperties) return "the OpenCL ICD loader lacks clCreateBufferWithProperties";
  if (!dsa__has_ext(exts, "cl_khr_external_memory")) return "the device lacks cl_khr_external_memory";
  if (!dsa__has_ext(exts, handles[h].ext)) return handles[h].ext;
  cl_uint types[16];
  size_t nb = 0;
  if (clGetDeviceInfo(dev, CL_DEVICE_EXTERNAL_MEMORY_IMPORT_HANDLE_TYPES_KHR, sizeof types, types,
                      &nb) != CL_SUCCESS)
    return "CL_DEVICE_EXTERNAL_MEMORY_IMPORT_HANDLE_TYPES_KHR cannot be queried";
  for (size_t i = 0; i < nb / sizeof types[0] && i < 16; i++)
    if (types[i] == handles[h].cl_type) return NULL;
  return "the handle type is not in CL_DEVICE_EXTERNAL_MEMORY_IMPORT_HANDLE_TYPES_KHR";
}

void dsa__probe_external(dsa_context *c, cl_platform_id plat, const char *exts) {
  for (int h = 0; h < (int)(sizeof handles / sizeof handles[0]); h++)
    c->ext_refusal[handles[h].type] = import_refusal(c->dev, exts, h);
  const bool ext = plat && dsa__has_ext(exts, "cl_khr_external_memory");
  c->ext_acquire =
      ext ? clGetExtensionFunctionAddressForPlatform(plat, "clEnqueueAcquireExternalMemObjectsKHR")
          : NULL;
  c->ext_release =
      ext ? clGetExtensionFunctionAddressForPlatform(plat, "clEnqueueReleaseExternalMemObjectsKHR")
          : NULL;
}

static int handle_index(dsa_external_handle type) {
  for (int i = 0; i < (int)(sizeof handles / sizeof handles[0]); i++)
    if (handles[i].type == type) return i;
  return -1;
}

int dsa_external_supported(const dsa_context *c, dsa_external_handle type) {
  const int h = handle_index(type);
  return c && h >= 0 && !c->ext_refusal[type];
}

dsa_status dsa_external_import(dsa_context *c, dsa_external_handle type, int fd, size_t bytes,
                               cl_mem *out) {
  dsa__clear_error();
  const char *op = "dsa_external_import";
  if (!out) return BAD("%s: out is NULL", op);
  *out = NULL;
  if (!c) return BAD("%s: c is NULL", op);
  const int h = handle_index(type);
  if (h < 0) return BAD("%s: unknown handle type %d", op, (int)type);
  if (fd < 0) return BAD("%s: fd %d is not a file descriptor", op, fd);
  if (bytes == 0) return BAD("%s: bytes is 0", op);
  const char *why = c->ext_refusal[type];
  if (why) return dsa__fail(DSA_ERR_UNSUPPORTED, 0, "%s: cannot import here: %s", op, why);
  /* One device: the import is for the context's device (a context of
   * several devices would list them with CL_MEM_DEVICE_HANDLE_LIST_KHR). */
  const cl_ulong props[] = {handles[h].cl_type, (cl_ulong)fd, 0};
  cl_int e = CL_SUCCESS;
  cl_mem m = clCreateBufferWithProperties(c->ctx, props, CL_MEM_READ_WRITE, bytes, NULL, &e);
  if (!m) return dsa__fail_cl(e ? e : CL_INVALID_VALUE, "clCreateBufferWithProperties (import)");
  *out = m;
  return DSA_OK;
}

static dsa_status acquire_release(dsa_queue *q, cl_uint n, const cl_mem *mems,
                                  const dsa_events *ev, bool acquire) {
  dsa__clear_error();
  const char *op = acquire ? "dsa_external_acquire" : "dsa_external_release";
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  if (n == 0 || !mems) return BAD("%s: %s", op, n == 0 ? "no memory objects" : "mems is NULL");
  for (cl_uint i = 0; i < n; i++) {
    size_t size;
    char arg[32];
    snprintf(arg, sizeof arg, "mems[%u]", i);
    DSA_CHECK(dsa__check_mem(mems[i], op, arg, &size));
  }
  const char *fname =
      acquire ? "clEnqueueAcquireExternalMemObjectsKHR" : "clEnqueueReleaseExternalMemObjectsKHR";
  void *addr = acquire ? q->ctx->ext_acquire : q->ctx->ext_release; /* probed once */
  dsa_acquire_fn f = NULL;
  memcpy(&f, &addr, sizeof f); /* object pointer -> function pointer, as OpenCL returns it */
  if (!f) return dsa__fail(DSA_ERR_UNSUPPORTED, 0, "%s: the device has no %s", op, fname);
  const cl_int e = f(q->q, n, mems, ev ? ev->num_wait : 0, ev ? ev->wait : NULL,
                     ev ? ev->done : NULL);
  if (e != CL_SUCCESS) return dsa__fail_cl(e, fname);
  return DSA_OK;
}

dsa_status dsa_external_acquire(dsa_queue *q, cl_uint n, const cl_mem *mems, const dsa_events *ev) {
  return acquire_release(q, n, mems, ev, true);
}
dsa_status dsa_external_release(dsa_queue *q, cl_uint n, const cl_mem *mems, const dsa_events *ev) {
  return acquire_release(q, n, mems, ev, false);
}
