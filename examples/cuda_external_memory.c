/* cuda_external_memory: a CUDA allocation used by dsacl without a copy.
 *
 * A server whose tensors live in CUDA memory (PyTorch, its own allocator)
 * exports the allocation as an opaque file descriptor, dsacl imports it
 * (dsa_external_import, cl_khr_external_memory_opaque_fd on NVIDIA's
 * OpenCL) and writes an MLA cache into it; CUDA then reads the bytes dsacl
 * wrote. Checked against the same insert into an ordinary cl_mem.
 *
 *   cuda_external_memory      exit 0 PASS, 1 FAIL, 77 no CUDA device or no
 *                             import on this OpenCL device (skip)
 *
 * The CUDA side: cuMemCreate with a POSIX file-descriptor handle type (the
 * only kind of CUDA memory that exports one; cudaMalloc memory does not),
 * mapped into the CUDA address space as usual. Order between the two APIs:
 * CUDA finishes its writes (cuCtxSynchronize) before dsacl's acquire, and
 * dsacl's queue finishes after the release before CUDA reads. A server
 * would use external semaphores (cl_khr_external_semaphore) instead of the
 * two host waits. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dsacl/dsacl.h>

#define CU(x)                                                             \
  do {                                                                    \
    CUresult r_ = (x);                                                    \
    if (r_ != CUDA_SUCCESS) {                                             \
      const char *s_ = "?";                                               \
      cuGetErrorString(r_, &s_);                                          \
      fprintf(stderr, "%s: %s\n", #x, s_);                                \
      return 1;                                                           \
    }                                                                     \
  } while (0)
#define DSA(x)                                                            \
  do {                                                                    \
    dsa_status s_ = (x);                                                  \
    if (s_ != DSA_OK) {                                                   \
      fprintf(stderr, "%s: %s: %s\n", #x, dsa_status_name(s_), dsa_last_error()); \
      return 1;                                                           \
    }                                                                     \
  } while (0)

int main(void) {
  enum { N = 200, BS = 64, NB = 8 };
  dsa_context *ctx;
  dsa_queue *q;
  if (dsa_context_create(&ctx, NULL) != DSA_OK) {
    printf("SKIP: %s\n", dsa_last_error());
    return 77;
  }
  DSA(dsa_queue_create(&q, ctx, 0));
  if (!dsa_external_supported(ctx, DSA_EXTERNAL_OPAQUE_FD)) {
    printf("SKIP: %s cannot import opaque file descriptors\n", dsa_context_device_name(ctx));
    return 77;
  }
  int ndev = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&ndev) != CUDA_SUCCESS || ndev == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  CUdevice cd;
  CUcontext cc;
  CU(cuDeviceGet(&cd, 0));
  CU(cuDevicePrimaryCtxRetain(&cc, cd));
  CU(cuCtxSetCurrent(cc));

  /* The cache, allocated by CUDA and exportable. */
  const size_t tok = dsa_cache_token_bytes(DSA_CACHE_MLA_FP8);
  const size_t bytes = (size_t)NB * BS * tok;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = cd;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  const size_t size = (bytes + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h;
  CU(cuMemCreate(&h, size, &prop, 0));
  int fd = -1;
  CU(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  CUdeviceptr dp;
  CU(cuMemAddressReserve(&dp, size, 0, 0, 0));
  CU(cuMemMap(dp, size, 0, h, 0));
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(cuMemSetAccess(dp, size, &acc, 1));
  CU(cuMemsetD8(dp, 0x5A, size));
  CU(cuCtxSynchronize());

  /* dsacl: the import, and an ordinary buffer for comparison. */
  cl_mem imported, plain;
  DSA(dsa_external_import(ctx, DSA_EXTERNAL_OPAQUE_FD, fd, size, &imported));
  cl_context clc = dsa_context_cl_context(ctx);
  cl_command_queue cq = dsa_queue_cl(q);
  cl_int e;
  uint16_t *k = malloc((size_t)N * 512 * 2);
  int64_t *slots = malloc((size_t)N * 8);
  unsigned char *got = malloc(size), *want = malloc(size);
  if (!k || !slots || !got || !want) return 1;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < N * 512; i++) { /* bf16 around +-1, random signs */
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    k[i] = (uint16_t)(0x3F00u + (x & 0xFFu)) | (uint16_t)((x >> 20) & 0x8000u);
  }
  for (int i = 0; i < N; i++) slots[i] = i % 7 == 3 ? -1 : (int64_t)((i * 37) % (NB * BS));
  cl_mem kb = clCreateBuffer(clc, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)N * 1024, k, &e);
  cl_mem sb = clCreateBuffer(clc, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)N * 8, slots, &e);
  plain = clCreateBuffer(clc, CL_MEM_READ_WRITE, size, NULL, &e);
  if (!kb || !sb || !plain) return 1;
  const unsigned char pat = 0x5A;
  clEnqueueFillBuffer(cq, plain, &pat, 1, 0, size, 0, NULL, NULL);
  const dsa_tensor kt = dsa_tensor_make(kb, 0, DSA_BF16, 2, (int64_t[]){N, 512});
  const dsa_tensor st = dsa_tensor_make(sb, 0, DSA_I64, 1, (int64_t[]){N});
  const dsa_paged_cache c_imp = {.mem = imported, .num_blocks = NB, .block_size = BS,
                                 .block_stride = (int64_t)(BS * tok),
                                 .format = DSA_CACHE_MLA_FP8};
  dsa_paged_cache c_plain = c_imp;
  c_plain.mem = plain;

  DSA(dsa_external_acquire(q, 1, &imported, NULL));
  DSA(dsa_mla_cache_insert(q, &kt, &st, &c_imp, NULL, NULL));
  DSA(dsa_external_release(q, 1, &imported, NULL));
  DSA(dsa_mla_cache_insert(q, &kt, &st, &c_plain, NULL, NULL));
  clEnqueueReadBuffer(cq, plain, CL_TRUE, 0, size, want, 0, NULL, NULL);
  clFinish(cq);
  CU(cuMemcpyDtoH(got, dp, size)); /* CUDA's own view of the memory */

  size_t differ = 0, written = 0;
  for (size_t i = 0; i < size; i++) differ += got[i] != want[i], written += got[i] != 0x5A;
  printf("device %s: %zu cache bytes (CUDA, fd %d) written by dsa_mla_cache_insert through "
         "the import; CUDA reads %zu changed bytes, %zu differ from the plain-buffer insert\n",
         dsa_context_device_name(ctx), size, fd, written, differ);
  const int ok = differ == 0 && written > 0;
  printf("%s\n", ok ? "PASS" : "FAIL");

  clReleaseMemObject(imported);
  clReleaseMemObject(plain);
  clReleaseMemObject(kb);
  clReleaseMemObject(sb);
  dsa_queue_destroy(&q);
  dsa_context_destroy(&ctx);
  CU(cuMemUnmap(dp, size));
  CU(cuMemAddressFree(dp, size));
  CU(cuMemRelease(h));
  free(k), free(slots), free(got), free(want);
  return ok ? 0 : 1;
}
