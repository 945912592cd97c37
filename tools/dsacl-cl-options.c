/*
 * dsacl-cl-options PROFILE: prints the OpenCL build options the library would
 * use on a device of that kind, from a synthetic dsa_caps filled the way the
 * vendor's driver reports the device. tests/offline_compile.sh feeds them to
 * the vendor compilers (ocloc, clang -target amdgcn) so that the kernels are
 * compiled with the same feature macros as on the real hardware.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

typedef struct profile {
  const char *name;
  dsa_vendor vendor;
  cl_device_type type;
  int cl_major, cl_minor; /* CL_DEVICE_OPENCL_C_VERSION */
  bool subgroups, intel_subgroups, intel_dpas, nv_ptx, amd_builtins, fp16;
  cl_ulong local_mem;
  size_t max_wg;
  cl_uint cus;
  const char *device, *platform, *platform_version, *device_version, *driver;
} profile;

#define GPU CL_DEVICE_TYPE_GPU
#define KIB(n) ((cl_ulong)(n) * 1024u)

/* NEO reports OpenCL C 1.2 in CL_DEVICE_OPENCL_C_VERSION (3.0 only through
 * the _ALL_VERSIONS query); ROCm reports OpenCL C 2.0. PVC has 128 KiB of
 * shared local memory per Xe-core, DG2 64 KiB. */
static const profile profiles[] = {
    {"intel-pvc", DSA_VENDOR_INTEL, GPU, 1, 2, true, true, true, false, false, true,
     KIB(128), 1024, 448, "Intel(R) Data Center GPU Max 1100", "Intel(R) OpenCL Graphics",
     "OpenCL 3.0 ", "OpenCL 3.0 NEO ", "23.30.26918.50"},
    {"intel-dg2", DSA_VENDOR_INTEL, GPU, 1, 2, true, true, true, false, false, true,
     KIB(64), 1024, 512, "Intel(R) Arc(TM) A770 Graphics", "Intel(R) OpenCL Graphics",
     "OpenCL 3.0 ", "OpenCL 3.0 NEO ", "23.30.26918.50"},
    {"amd-gfx90a", DSA_VENDOR_AMD, GPU, 2, 0, false, false, false, false, true, true,
     KIB(64), 256, 104, "gfx90a:sramecc+:xnack-", "AMD Accelerated Parallel Processing",
     "OpenCL 2.1 AMD-APP (3590.0)", "OpenCL 2.0 ", "3590.0 (HSA1.1,LC)"},
    {"amd-gfx940", DSA_VENDOR_AMD, GPU, 2, 0, false, false, false, false, true, true,
     KIB(64), 256, 304, "gfx940:sramecc+:xnack-", "AMD Accelerated Parallel Processing",
     "OpenCL 2.1 AMD-APP (3590.0)", "OpenCL 2.0 ", "3590.0 (HSA1.1,LC)"},
    {"amd-gfx1030", DSA_VENDOR_AMD, GPU, 2, 0, false, false, false, false, true, true,
     KIB(64), 256, 36, "gfx1030", "AMD Accelerated Parallel Processing",
     "OpenCL 2.1 AMD-APP (3590.0)", "OpenCL 2.0 ", "3590.0 (HSA1.1,LC)"},
    {"amd-gfx1100", DSA_VENDOR_AMD, GPU, 2, 0, false, false, false, false, true, true,
     KIB(64), 1024, 96, "gfx1100", "AMD Accelerated Parallel Processing",
     "OpenCL 2.1 AMD-APP (3590.0)", "OpenCL 2.0 ", "3590.0 (HSA1.1,LC)"},
    {"nvidia", DSA_VENDOR_NVIDIA, GPU, 1, 2, false, false, false, true, false, true,
     KIB(48), 1024, 132, "NVIDIA H100 80GB HBM3", "NVIDIA CUDA", "OpenCL 3.0 CUDA 12.4.131",
     "OpenCL 3.0 CUDA", "550.54.15"},
    {"pocl", DSA_VENDOR_POCL, CL_DEVICE_TYPE_CPU, 1, 2, false, false, false, false, false,
     false, KIB(1024), 4096, 2, "cpu-x86-64", "Portable Computing Language",
     "OpenCL 3.0 PoCL 3.1+debian", "OpenCL 3.0 PoCL", "3.1+debian"},
};
#define NPROFILES (sizeof profiles / sizeof profiles[0])

static void copy(char *dst, const char *src, size_t n) { snprintf(dst, n, "%s", src); }

static int usage(FILE *f) {
  fprintf(f, "usage: dsacl-cl-options [--portable] PROFILE [PROGRAM.cl]\n"
             "  PROGRAM.cl: also print that program's own constants (-D)\nprofiles:");
  for (size_t i = 0; i < NPROFILES; i++) fprintf(f, " %s", profiles[i].name);
  fprintf(f, "\n");
  return f == stderr ? 2 : 0;
}

int main(int argc, char **argv) {
  bool portable = false;
  const char *name = NULL, *prog = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--portable")) portable = true;
    else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return usage(stdout);
    else if (!name) name = argv[i];
    else if (!prog) prog = argv[i];
    else return usage(stderr);
  }
  if (!name) return usage(stderr);

  const profile *p = NULL;
  for (size_t i = 0; i < NPROFILES; i++)
    if (!strcmp(name, profiles[i].name)) p = &profiles[i];
  if (!p) {
    fprintf(stderr, "dsacl-cl-options: unknown profile '%s'\n", name);
    return usage(stderr);
  }

  dsa_caps caps;
  memset(&caps, 0, sizeof caps);
  caps.vendor = p->vendor;
  caps.type = p->type;
  caps.cl_c_major = p->cl_major;
  caps.cl_c_minor = p->cl_minor;
  caps.subgroups = p->subgroups;
  caps.intel_subgroups = p->intel_subgroups;
  caps.intel_dpas = p->intel_dpas;
  /* CL_DEVICE_SUB_GROUP_SIZES_INTEL: PVC 16 and 32, DG2 8, 16 and 32. */
  if (p->intel_subgroups)
    caps.intel_sg_sizes = (1u << 4) | (1u << 5) | (strstr(p->name, "dg2") ? 1u << 3 : 0u);
  caps.nv_inline_ptx = p->nv_ptx;
  caps.nv_sm = p->nv_ptx ? 90 : 0; /* the nvidia profile is an H100 */
  caps.amd_builtins = p->amd_builtins;
  caps.fp16 = p->fp16;
  caps.local_mem = p->local_mem;
  caps.max_wg = p->max_wg;
  caps.compute_units = p->cus;
  copy(caps.device_name, p->device, sizeof caps.device_name);
  copy(caps.platform_name, p->platform, sizeof caps.platform_name);
  copy(caps.platform_version, p->platform_version, sizeof caps.platform_version);
  copy(caps.device_version, p->device_version, sizeof caps.device_version);
  copy(caps.driver_version, p->driver, sizeof caps.driver_version);

  /* The matrix-tile back-end this device gets (the real builtins: DPAS,
   * MFMA, WMMA, mma.sync), as the library picks it. */
  if (dsa__pick_tile(&caps) != DSA_OK) {
    fprintf(stderr, "dsacl-cl-options: %s\n", dsa_last_error());
    return 1;
  }
  char opts[4096];
  dsa__build_options(&caps, portable ? 0u : (unsigned)DSA_CAP_ALL, opts, sizeof opts);
  fputs(opts, stdout);
  if (prog) {
    const char *base = strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog;
    int id = -1;
    for (int i = 0; i < DSA_NUM_PROGRAMS; i++)
      if (!strcmp(base, dsa__programs[i].name)) id = i;
    if (id < 0) {
      fprintf(stderr, "\ndsacl-cl-options: unknown program '%s'\n", prog);
      return 2;
    }
    fputs(dsa__program_defines((dsa_program_id)id), stdout);
  }
  putchar('\n');
  return 0;
}
