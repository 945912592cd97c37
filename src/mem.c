/* Memory kinds of tensors and caches (dsa_mem_kind): which ones a device
 * takes, and the calls that pass a USM or SVM pointer to a kernel. The
 * checks live in tensor.c, the argument slots in kargs.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* OpenCL 2.0's entry point, referenced weakly: the library is built for
 * OpenCL 1.2 and must still load with an ICD loader that predates 2.0 (SVM
 * is then absent). Every loader in use exports it. */
#if defined(__GNUC__)
extern CL_API_ENTRY cl_int CL_API_CALL clSetKernelArgSVMPointer(cl_kernel kernel,
                                                                cl_uint arg_index,
                                                                const void *arg_value)
    __attribute__((weak));
#else
extern CL_API_ENTRY cl_int CL_API_CALL clSetKernelArgSVMPointer(cl_kernel kernel,
                                                                cl_uint arg_index,
                                                                const void *arg_value);
#endif

void dsa__probe_mem(dsa_context *c) {
  c->mem_kinds = 1u << DSA_MEM_BUFFER;
  c->usm_set_arg = NULL;
  c->usm_info = NULL;

  cl_platform_id plat = NULL;
  size_t n = 0;
  char *exts = NULL;
  if (clGetDeviceInfo(c->dev, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL) == CL_SUCCESS &&
      clGetDeviceInfo(c->dev, CL_DEVICE_EXTENSIONS, 0, NULL, &n) == CL_SUCCESS && n > 0) {
    exts = calloc(n + 1, 1);
    if (exts && clGetDeviceInfo(c->dev, CL_DEVICE_EXTENSIONS, n, exts, NULL) != CL_SUCCESS) {
      free(exts);
      exts = NULL;
    }
  }
  if (exts && dsa__has_ext(exts, "cl_intel_unified_shared_memory")) {
    /* Function pointers come back as void *: the platform's ICD
     * dispatch of an extension (POSIX guarantees the conversion). */
    void *set = clGetExtensionFunctionAddressForPlatform(plat, "clSetKernelArgMemPointerINTEL");
    void *info = clGetExtensionFunctionAddressForPlatform(plat, "clGetMemAllocInfoINTEL");
    if (set && info) {
      c->usm_set_arg = (dsa_usm_set_arg_fn)set;
      c->usm_info = (dsa_usm_info_fn)info;
      c->mem_kinds |= 1u << DSA_MEM_USM;
    }
  }
  dsa__probe_external(c, plat, exts ? exts : "");
  free(exts);

  /* SVM: core in OpenCL 2.0 (optional again in 3.0, where a device without
   * it reports no capabilities). Not on NVIDIA: its OpenCL (driver 580,
   * H100) reports coarse-grained SVM and accepts clSetKernelArgSVMPointer,
   * then fails every launch of such a kernel with CL_INVALID_KERNEL_ARGS
   * (test_usm, 2026-11-25). */
  int major = 0, minor = 0;
  cl_bitfield svm = 0;
  if (clSetKernelArgSVMPointer && c->caps.vendor != DSA_VENDOR_NVIDIA &&
      sscanf(c->caps.device_version, "OpenCL %d.%d", &major, &minor) == 2 && major >= 2 &&
      clGetDeviceInfo(c->dev, DSA_CL_DEVICE_SVM_CAPABILITIES, sizeof svm, &svm, NULL) ==
          CL_SUCCESS &&
      svm != 0)
    c->mem_kinds |= 1u << DSA_MEM_SVM;
}

cl_int dsa__set_arg_ptr(const dsa_context *c, cl_kernel k, cl_uint index, dsa_mem_kind kind,
                        const void *p) {
  if (!(c->mem_kinds & (1u << kind))) return CL_INVALID_OPERATION;
  switch (kind) {
    case DSA_MEM_USM: return c->usm_set_arg(k, index, p);
    case DSA_MEM_SVM: return clSetKernelArgSVMPointer(k, index, p);
    default: return CL_INVALID_OPERATION;
  }
}

const char *dsa__mem_kind_name(dsa_mem_kind kind) {
  switch (kind) {
    case DSA_MEM_BUFFER: return "DSA_MEM_BUFFER";
    case DSA_MEM_USM: return "DSA_MEM_USM";
    case DSA_MEM_SVM: return "DSA_MEM_SVM";
  }
  return "an unknown kind";
}

const char *dsa__mem_kind_needs(dsa_mem_kind kind) {
  switch (kind) {
    case DSA_MEM_USM: return "the cl_intel_unified_shared_memory extension";
    case DSA_MEM_SVM:
      return "OpenCL 2.0 shared virtual memory (CL_DEVICE_SVM_CAPABILITIES) that kernels "
             "accept (not NVIDIA's OpenCL: it fails the launch)";
    default: return "nothing";
  }
}

unsigned dsa_context_mem_kinds(const dsa_context *c) { return c ? c->mem_kinds : 0; }
