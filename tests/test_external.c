/* Foreign memory (cl_khr_external_memory): argument checks everywhere, and
 * the refusal where the device or loader cannot import. The import itself
 * needs an exporter (CUDA, Vulkan): examples/cuda_external_memory.c runs it
 * where CUDA exists (tools/gpu-check.sh). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static dsa_context *ctx;
static dsa_queue *q;

/* A refused call returns before it touches the queue: no completion event
 * comes back, and the message names the problem. */
static void refused(dsa_status st, dsa_status want, cl_event done, const char *what) {
  CHECK(st == want, "%s: %s, want %s (%s)", what, dsa_status_name(st), dsa_status_name(want),
        dsa_last_error());
  CHECK(done == NULL, "%s: an event came back from a refused call", what);
  CHECK(strlen(dsa_last_error()) > 0, "%s: no message", what);
}

int main(void) {
  dsa_test_open(&ctx, &q, 0);
  cl_context clc = dsa_context_cl_context(ctx);
  cl_int e;
  cl_mem m = clCreateBuffer(clc, CL_MEM_READ_WRITE, 4096, NULL, &e);
  CHECK(m != NULL, "clCreateBuffer: %d", e);
  int fd = open("/dev/null", O_RDONLY);
  CHECK(fd >= 0, "open /dev/null");
  const int sup_fd = dsa_external_supported(ctx, DSA_EXTERNAL_OPAQUE_FD);
  const int sup_dma = dsa_external_supported(ctx, DSA_EXTERNAL_DMA_BUF);
  printf("device %s: opaque fd import %s, dma-buf import %s\n", dsa_context_device_name(ctx),
         sup_fd ? "yes" : "no", sup_dma ? "yes" : "no");
  CHECK(!dsa_external_supported(NULL, DSA_EXTERNAL_OPAQUE_FD), "NULL context supported");
  CHECK(!dsa_external_supported(ctx, (dsa_external_handle)77), "unknown type supported");

  /* dsa_external_import: arguments */
  cl_mem out = (cl_mem)&out;
  refused(dsa_external_import(ctx, DSA_EXTERNAL_OPAQUE_FD, fd, 4096, NULL),
          DSA_ERR_INVALID_ARGUMENT, NULL, "import out NULL");
  refused(dsa_external_import(NULL, DSA_EXTERNAL_OPAQUE_FD, fd, 4096, &out),
          DSA_ERR_INVALID_ARGUMENT, NULL, "import c NULL");
  CHECK(out == NULL, "out not cleared on a refused import");
  refused(dsa_external_import(ctx, (dsa_external_handle)0, fd, 4096, &out),
          DSA_ERR_INVALID_ARGUMENT, NULL, "import type 0");
  refused(dsa_external_import(ctx, DSA_EXTERNAL_OPAQUE_FD, -1, 4096, &out),
          DSA_ERR_INVALID_ARGUMENT, NULL, "import fd -1");
  refused(dsa_external_import(ctx, DSA_EXTERNAL_OPAQUE_FD, fd, 0, &out),
          DSA_ERR_INVALID_ARGUMENT, NULL, "import 0 bytes");
  /* Where the device cannot import: the reason, named. Where it can, the
   * descriptor is the driver's to judge: dsacl cannot tell an exported
   * allocation from another file. NVIDIA's 580 driver accepts /dev/null as
   * an opaque fd (the buffer is released unused here); docs/SECURITY.md. */
  for (int t = DSA_EXTERNAL_OPAQUE_FD; t <= DSA_EXTERNAL_DMA_BUF; t++) {
    const int sup = t == DSA_EXTERNAL_OPAQUE_FD ? sup_fd : sup_dma;
    dsa_status st = dsa_external_import(ctx, (dsa_external_handle)t, fd, 4096, &out);
    if (!sup)
      CHECK(st == DSA_ERR_UNSUPPORTED && strstr(dsa_last_error(), "cannot import here"),
            "import type %d on a device without it: %s (%s)", t, dsa_status_name(st),
            dsa_last_error());
    else {
      CHECK(st == DSA_ERR_OPENCL || st == DSA_OK, "import of /dev/null as type %d: %s (%s)", t,
            dsa_status_name(st), dsa_last_error());
      printf("import of /dev/null as type %d: %s (the driver's call)\n", t, dsa_status_name(st));
    }
    CHECK((st == DSA_OK) == (out != NULL), "out and the status disagree");
    if (out) clReleaseMemObject(out);
    out = NULL;
  }

  /* acquire / release: arguments, then the refusal without the extension */
  cl_event done = NULL;
  dsa_events ev = {0, NULL, &done};
  const cl_mem one[1] = {m}, none[1] = {NULL};
  for (int acq = 0; acq < 2; acq++) {
    dsa_status (*f)(dsa_queue *, cl_uint, const cl_mem *, const dsa_events *) =
        acq ? dsa_external_acquire : dsa_external_release;
    const char *name = acq ? "acquire" : "release";
    char what[64];
    snprintf(what, sizeof what, "%s q NULL", name);
    refused(f(NULL, 1, one, &ev), DSA_ERR_INVALID_ARGUMENT, done, what);
    snprintf(what, sizeof what, "%s n 0", name);
    refused(f(q, 0, one, &ev), DSA_ERR_INVALID_ARGUMENT, done, what);
    snprintf(what, sizeof what, "%s mems NULL", name);
    refused(f(q, 1, NULL, &ev), DSA_ERR_INVALID_ARGUMENT, done, what);
    snprintf(what, sizeof what, "%s mems[0] NULL", name);
    refused(f(q, 1, none, &ev), DSA_ERR_INVALID_ARGUMENT, done, what);
    const dsa_events bad_ev = {2, NULL, &done};
    snprintf(what, sizeof what, "%s bad wait list", name);
    refused(f(q, 1, one, &bad_ev), DSA_ERR_INVALID_ARGUMENT, done, what);
    /* a buffer of another context */
    cl_device_id dev = dsa_context_cl_device(ctx);
    cl_context other = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
    if (other) {
      cl_mem om = clCreateBuffer(other, CL_MEM_READ_WRITE, 64, NULL, &e);
      snprintf(what, sizeof what, "%s buffer of another context", name);
      refused(f(q, 1, &om, &ev), DSA_ERR_INVALID_ARGUMENT, done, what);
      clReleaseMemObject(om);
      clReleaseContext(other);
    }
    if (!sup_fd && !sup_dma) {
      snprintf(what, sizeof what, "%s without the extension", name);
      refused(f(q, 1, one, &ev), DSA_ERR_UNSUPPORTED, done, what);
    }
  }
  close(fd);
  clReleaseMemObject(m);
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
