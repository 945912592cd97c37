/* dequant_cvt: the fused attention's dequantization by conversion
 * instructions (cl/dsa_common.h, dsa_dequant4_e4m3_bf16_cvt: NVIDIA sm_89+)
 * and by one bf16 multiply (dsa_dequant4_e4m3_bf16_hm) against the exact
 * path (dsa_dequant4_e4m3_bf16_exact) on the device: every byte pair in
 * both halves of the word (the high half a bijection of the low), every
 * scale byte u; words that dsa_dequant4_e4m3_nan (dsa_dequant4_e4m3_hm_special)
 * flags are skipped (they take the exact path in the kernel). A standalone
 * probe (not built by meson):
 *   cc -O2 tools/probes/dequant_cvt.c -lOpenCL -o dequant_cvt &&
 *   ./dequant_cvt cl "-DDSA_HAS_NV_PTX=1 -DDSA_NV_SM=90"
 * prints "checked N words, M differ (cvt), M2 differ (hm)" and exits 0
 * when both are 0. Elsewhere
 * (no DSA_DEQUANT_CVT) it checks the exact path against itself. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define CK(x)                                                             \
  do {                                                                    \
    cl_int e_ = (x);                                                      \
    if (e_) {                                                             \
      printf("ERR %d at %s:%d\n", e_, __FILE__, __LINE__);                \
      return 1;                                                           \
    }                                                                     \
  } while (0)
static const char *src =
    "#include \"dsa_common.h\"\n"
    "__kernel void probe(__global uint *bad, __global uint *first) {\n"
    "  const uint g = get_global_id(0), p = g & 0xFFFFu, u = g >> 16;\n"
    "  const uint x = p | (((p * 40503u) & 0xFFFFu) << 16);\n"
    "  if (dsa_dequant4_e4m3_nan(x, u)) return;\n"
    "  const uint2 e = dsa_dequant4_e4m3_bf16_exact(x, u);\n"
    "#if DSA_DEQUANT_CVT\n"
    "  const uint2 c = dsa_dequant4_e4m3_bf16_cvt(x, dsa_ue8m0_to_f32(u));\n"
    "#else\n"
    "  const uint2 c = e;\n"
    "#endif\n"
    "  if (c.x != e.x || c.y != e.y) {\n"
    "    if (atomic_inc(bad) == 0u) first[0] = x, first[1] = u, first[2] = c.x, first[3] = c.y,\n"
    "                               first[4] = e.x, first[5] = e.y;\n"
    "  }\n"
    "#if DSA_DEQUANT_CVT\n"
    "  if (!dsa_dequant4_e4m3_hm_special(x, u)) {\n"
    "    const uint2 h = dsa_dequant4_e4m3_bf16_hm(x, dsa_dequant_hm_scale(u));\n"
    "    if ((h.x != e.x || h.y != e.y) && atomic_inc(bad + 1) == 0u)\n"
    "      first[6] = x, first[7] = u;\n"
    "  }\n"
    "#endif\n"
    "}\n";
int main(int argc, char **argv) {
  const char *inc = argc > 1 ? argv[1] : "cl", *defs = argc > 2 ? argv[2] : "";
  cl_platform_id pl[8];
  cl_uint np = 0;
  CK(clGetPlatformIDs(8, pl, &np));
  cl_device_id dev = NULL;
  for (cl_uint i = 0; i < np && !dev; i++)
    if (clGetDeviceIDs(pl[i], CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) dev = NULL;
  if (!dev) return printf("no device\n"), 1;
  cl_int e;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
  CK(e);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &e);
  CK(e);
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &e);
  CK(e);
  char opt[1024];
  /* DSA_FAULT_SLOT_RANGE: dsa_common.h wants the host's enum tables. */
  snprintf(opt, sizeof opt, "-I %s -DDSA_FAULT_SLOT_RANGE=1 %s", inc, defs);
  if (clBuildProgram(prog, 1, &dev, opt, NULL, NULL)) {
    static char log[100000];
    clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
    return printf("build failed:\n%.4000s\n", log), 1;
  }
  cl_kernel k = clCreateKernel(prog, "probe", &e);
  CK(e);
  cl_uint zero[8] = {0};
  cl_mem bad = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, 8, zero, &e);
  CK(e);
  cl_mem first = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, 32, zero, &e);
  CK(e);
  CK(clSetKernelArg(k, 0, sizeof bad, &bad));
  CK(clSetKernelArg(k, 1, sizeof first, &first));
  const size_t n = (size_t)65536 * 256, wg = 256;
  CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &n, &wg, 0, NULL, NULL));
  cl_uint nb2[2] = {0, 0}, f[8];
  CK(clEnqueueReadBuffer(q, bad, CL_TRUE, 0, 8, nb2, 0, NULL, NULL));
  const cl_uint nb = nb2[0];
  CK(clEnqueueReadBuffer(q, first, CL_TRUE, 0, 32, f, 0, NULL, NULL));
  printf("checked %zu words, %u differ (cvt), %u differ (hm)\n", n, nb, nb2[1]);
  if (nb)
    printf("first: x %08x u %u: cvt %08x %08x, exact %08x %08x\n", f[0], f[1], f[2], f[3], f[4],
           f[5]);
  if (nb2[1]) printf("first (hm): x %08x u %u\n", f[6], f[7]);
  return nb != 0 || nb2[1] != 0;
}
