/* A program outside the project, built against an installed dsacl (pkg-config
 * or CMake; tests/install/run.sh). It checks that the installed header and
 * library agree and that a context can be made on the first OpenCL device
 * when there is one. Compiled as C and, renamed, as C++ (consumer.cpp). */
#include <dsacl/dsacl.h>
#include <stdio.h>

int main(void) {
  if (dsa_version() != DSACL_VERSION) {
    printf("header says version %u, library %u\n", (unsigned)DSACL_VERSION, dsa_version());
    return 1;
  }
  if (dsa_status_name(DSA_ERR_INVALID_ARGUMENT) == NULL) return 1;
  cl_platform_id plat;
  cl_device_id dev;
  cl_uint n = 0;
  if (clGetPlatformIDs(1, &plat, &n) != CL_SUCCESS || n == 0 ||
      clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) {
    printf("dsacl %u.%u.%u: no OpenCL device, API linked only\n", dsa_version() >> 16,
           (dsa_version() >> 8) & 255, dsa_version() & 255);
    return 0;
  }
  cl_int err;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  if (err != CL_SUCCESS) return 1;
  dsa_context_options o;
  dsa_context_options_default(&o);
  o.cache_dir = "off";
  dsa_context *c = NULL;
  dsa_status s = dsa_context_create_from_cl(&c, ctx, dev, &o);
  if (s != DSA_OK) {
    printf("dsa_context_create: %s (%s)\n", dsa_status_name(s), dsa_last_error());
    return 1;
  }
  printf("dsacl %u.%u.%u: a context on the first device, matrix back-end %s\n",
         dsa_version() >> 16, (dsa_version() >> 8) & 255, dsa_version() & 255,
         dsa_context_matrix_backend(c));
  dsa_context_destroy(&c);
  clReleaseContext(ctx);
  return 0;
}
