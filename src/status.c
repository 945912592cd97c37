/* Status strings from the one table, per-thread last error, logging. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define DSA_ERRMSG_MAX 16384

static _Thread_local char last_msg[DSA_ERRMSG_MAX];
static _Thread_local cl_int last_cl = CL_SUCCESS;

const char *dsa_status_name(dsa_status s) {
  switch (s) {
#define DSA_STATUS_NAME_(name, val, desc) \
  case DSA_##name:                        \
    return "DSA_" #name;
    DSA_STATUS_MAP(DSA_STATUS_NAME_)
#undef DSA_STATUS_NAME_
  }
  return "DSA_UNKNOWN_STATUS";
}

const char *dsa_status_string(dsa_status s) {
  switch (s) {
#define DSA_STATUS_DESC_(name, val, desc) \
  case DSA_##name:                        \
    return desc;
    DSA_STATUS_MAP(DSA_STATUS_DESC_)
#undef DSA_STATUS_DESC_
  }
  return "unknown status";
}

const char *dsa_last_error(void) { return last_msg; }
cl_int dsa_last_cl_error(void) { return last_cl; }

unsigned dsa_version(void) { return DSACL_VERSION; }

#define DSA_STR2_(x) #x
#define DSA_STR_(x) DSA_STR2_(x)
const char *dsa_version_string(void) {
  return DSA_STR_(DSACL_VERSION_MAJOR) "." DSA_STR_(DSACL_VERSION_MINOR) "." DSA_STR_(
      DSACL_VERSION_PATCH);
}

void dsa__clear_error(void) {
  last_msg[0] = '\0';
  last_cl = CL_SUCCESS;
}

dsa_status dsa__fail(dsa_status s, cl_int clerr, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_msg, sizeof last_msg, fmt, ap);
  va_end(ap);
  last_cl = clerr;
  dsa__log(3, "%s: %s", dsa_status_name(s), last_msg);
  return s;
}

dsa_status dsa__fail_cl(cl_int clerr, const char *what) {
  dsa_status s = (clerr == CL_OUT_OF_HOST_MEMORY || clerr == CL_MEM_OBJECT_ALLOCATION_FAILURE)
                     ? DSA_ERR_OUT_OF_MEMORY
                     : DSA_ERR_OPENCL;
  return dsa__fail(s, clerr, "%s: %s (%d)", what, dsa__cl_error_name(clerr), (int)clerr);
}

void dsa__append_error(const char *text) {
  size_t n = strlen(last_msg);
  if (n + 1 < sizeof last_msg) snprintf(last_msg + n, sizeof last_msg - n, "%s", text);
}

void dsa__log(int level, const char *fmt, ...) {
  /* Read each time: a server may change DSACL_LOG while running, and the
   * cost is nothing next to an OpenCL call. */
  const char *env = getenv("DSACL_LOG");
  int want = env ? atoi(env) : 0;
  if (level > want) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "dsacl: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

const char *dsa__cl_error_name(cl_int e) {
  switch (e) {
#define E_(x) \
  case x:     \
    return #x;
    E_(CL_SUCCESS) E_(CL_DEVICE_NOT_FOUND) E_(CL_DEVICE_NOT_AVAILABLE)
    E_(CL_COMPILER_NOT_AVAILABLE) E_(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    E_(CL_OUT_OF_RESOURCES) E_(CL_OUT_OF_HOST_MEMORY) E_(CL_PROFILING_INFO_NOT_AVAILABLE)
    E_(CL_MEM_COPY_OVERLAP) E_(CL_IMAGE_FORMAT_MISMATCH) E_(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    E_(CL_BUILD_PROGRAM_FAILURE) E_(CL_MAP_FAILURE) E_(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    E_(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) E_(CL_COMPILE_PROGRAM_FAILURE)
    E_(CL_LINKER_NOT_AVAILABLE) E_(CL_LINK_PROGRAM_FAILURE) E_(CL_DEVICE_PARTITION_FAILED)
    E_(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) E_(CL_INVALID_VALUE) E_(CL_INVALID_DEVICE_TYPE)
    E_(CL_INVALID_PLATFORM) E_(CL_INVALID_DEVICE) E_(CL_INVALID_CONTEXT)
    E_(CL_INVALID_QUEUE_PROPERTIES) E_(CL_INVALID_COMMAND_QUEUE) E_(CL_INVALID_HOST_PTR)
    E_(CL_INVALID_MEM_OBJECT) E_(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) E_(CL_INVALID_IMAGE_SIZE)
    E_(CL_INVALID_SAMPLER) E_(CL_INVALID_BINARY) E_(CL_INVALID_BUILD_OPTIONS)
    E_(CL_INVALID_PROGRAM) E_(CL_INVALID_PROGRAM_EXECUTABLE) E_(CL_INVALID_KERNEL_NAME)
    E_(CL_INVALID_KERNEL_DEFINITION) E_(CL_INVALID_KERNEL) E_(CL_INVALID_ARG_INDEX)
    E_(CL_INVALID_ARG_VALUE) E_(CL_INVALID_ARG_SIZE) E_(CL_INVALID_KERNEL_ARGS)
    E_(CL_INVALID_WORK_DIMENSION) E_(CL_INVALID_WORK_GROUP_SIZE) E_(CL_INVALID_WORK_ITEM_SIZE)
    E_(CL_INVALID_GLOBAL_OFFSET) E_(CL_INVALID_EVENT_WAIT_LIST) E_(CL_INVALID_EVENT)
    E_(CL_INVALID_OPERATION) E_(CL_INVALID_GL_OBJECT) E_(CL_INVALID_BUFFER_SIZE)
    E_(CL_INVALID_MIP_LEVEL) E_(CL_INVALID_GLOBAL_WORK_SIZE) E_(CL_INVALID_PROPERTY)
    E_(CL_INVALID_IMAGE_DESCRIPTOR) E_(CL_INVALID_COMPILER_OPTIONS)
    E_(CL_INVALID_LINKER_OPTIONS) E_(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E_
    case -1001:
      return "CL_PLATFORM_NOT_FOUND_KHR";
  }
  return "CL_UNKNOWN_ERROR";
}
