/* Runtime: status table, device choice, wrapping caller objects (retain and
 * release balance), fault word, events, kernel-dir builds and build errors,
 * and several threads with their own queues on one context. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "internal.h"

#define PAGE (64 * 584)

static cl_uint refcount_ctx(cl_context c) {
  cl_uint n = 0;
  clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, sizeof n, &n, NULL);
  return n;
}
static cl_uint refcount_queue(cl_command_queue q) {
  cl_uint n = 0;
  clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof n, &n, NULL);
  return n;
}

static void test_status_table(void) {
  const dsa_status all[] = {DSA_OK, DSA_ERR_INVALID_ARGUMENT, DSA_ERR_UNSUPPORTED,
                            DSA_ERR_NO_DEVICE, DSA_ERR_OUT_OF_MEMORY, DSA_ERR_BUILD,
                            DSA_ERR_OPENCL, DSA_ERR_CACHE, DSA_ERR_INTERNAL};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    CHECK(strncmp(dsa_status_name(all[i]), "DSA_", 4) == 0, "name of %d", all[i]);
    CHECK(strcmp(dsa_status_string(all[i]), "unknown status") != 0, "string of %d", all[i]);
    for (size_t j = 0; j < i; j++)
      CHECK(strcmp(dsa_status_name(all[i]), dsa_status_name(all[j])) != 0, "names unique");
  }
  CHECK(strcmp(dsa_status_name(DSA_ERR_BUILD), "DSA_ERR_BUILD") == 0, "DSA_ERR_BUILD name");
  CHECK(strcmp(dsa_status_name((dsa_status)-99), "DSA_UNKNOWN_STATUS") == 0, "unknown name");
  CHECK(dsa_version() == DSACL_VERSION, "version number");
  char v[32];
  snprintf(v, sizeof v, "%d.%d.%d", DSACL_VERSION_MAJOR, DSACL_VERSION_MINOR,
           DSACL_VERSION_PATCH);
  CHECK(strcmp(dsa_version_string(), v) == 0, "version string %s", dsa_version_string());
  CHECK(strcmp(dsa_dtype_name(DSA_BF16), "bf16") == 0 && dsa_dtype_size(DSA_I64) == 8,
        "dtype table");
  CHECK(dsa_cache_token_bytes(DSA_CACHE_MLA_FP8) == 584 &&
            dsa_cache_token_bytes(DSA_CACHE_INDEXER_FP8) == 132 &&
            dsa_cache_token_bytes(DSA_CACHE_INDEXER_MXFP4) == 68,
        "token bytes");
}

static void test_device_choice(void) {
  dsa_context *c = NULL;
  dsa_context_options o;
  dsa_context_options_default(&o);
  o.cache_dir = "off";
  o.device_index = 1000;
  CHECK(dsa_context_create(&c, &o) == DSA_ERR_NO_DEVICE && c == NULL, "index out of range");
  CHECK(strstr(dsa_last_error(), "1000") != NULL, "message names the index: %s",
        dsa_last_error());
  o.device_index = -1;
  o.device_name = "no-such-device-xyz";
  CHECK(dsa_context_create(&c, &o) == DSA_ERR_NO_DEVICE, "name without match");
  CHECK(strstr(dsa_last_error(), "no-such-device-xyz") != NULL, "message names the name");
  o.device_name = NULL;
  o.device_index = 0;
  o.reserved[sizeof o.reserved - 1] = 1;
  CHECK(dsa_context_create(&c, &o) == DSA_ERR_INVALID_ARGUMENT && c == NULL,
        "non-zero reserved byte refused");
  CHECK(strstr(dsa_last_error(), "reserved[27]") != NULL, "message names the byte: %s",
        dsa_last_error());
  o.reserved[sizeof o.reserved - 1] = 0;
  CHECK_OK(dsa_context_create(&c, &o));
  CHECK(strcmp(dsa_last_error(), "") == 0, "success clears the last error");
  CHECK(c && dsa_context_cl_context(c) && dsa_context_cl_device(c), "handles");
  CHECK(c && strlen(dsa_context_device_name(c)) > 0, "device name");
  CHECK(c && strstr(dsa_context_build_options(c), "-DDSA_") != NULL, "build options");
  CHECK(c && strcmp(dsa_context_cache_dir(c), "") == 0, "cache off");
  dsa_context_destroy(&c);
  CHECK(c == NULL, "destroy NULLs the handle");
  dsa_context_destroy(&c); /* harmless */
  dsa_context_destroy(NULL);
  CHECK(dsa_context_create(NULL, &o) == DSA_ERR_INVALID_ARGUMENT, "out NULL");
}

/* Wrapped objects: retained while we hold them, released exactly once. */
static void test_wrap(void) {
  cl_platform_id plat;
  cl_device_id dev;
  dsa_context *tmp = NULL;
  if (dsa_context_create(&tmp, NULL) != DSA_OK) return;
  dev = dsa_context_cl_device(tmp);
  clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
  dsa_context_destroy(&tmp);

  cl_int e;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0};
  cl_context ctx = clCreateContext(props, 1, &dev, NULL, NULL, &e);
  cl_command_queue cq = clCreateCommandQueue(ctx, dev, 0, &e);
  CHECK(ctx && cq, "own context and queue");
  cl_uint rc0 = refcount_ctx(ctx), rq0 = refcount_queue(cq);

  dsa_context *c = NULL;
  dsa_queue *q = NULL;
  dsa_context_options bad;
  dsa_context_options_default(&bad);
  bad.reserved[0] = 7;
  CHECK(dsa_context_create_from_cl(&c, ctx, dev, &bad) == DSA_ERR_INVALID_ARGUMENT && !c &&
            refcount_ctx(ctx) == rc0,
        "reserved bytes refused, nothing retained");
  CHECK_OK(dsa_context_create_from_cl(&c, ctx, dev, NULL));
  CHECK(refcount_ctx(ctx) == rc0 + 1, "context retained");
  CHECK(dsa_context_cl_context(c) == ctx, "same cl_context");
  CHECK_OK(dsa_queue_create_from_cl(&q, c, cq));
  CHECK(refcount_queue(cq) == rq0 + 1, "queue retained");
  CHECK(dsa_queue_cl(q) == cq, "same queue");

  /* A queue of another context is refused. */
  dsa_context *c2 = NULL;
  dsa_queue *q2 = NULL;
  CHECK_OK(dsa_context_create(&c2, NULL));
  CHECK(dsa_queue_create_from_cl(&q2, c2, cq) == DSA_ERR_INVALID_ARGUMENT && !q2,
        "foreign queue refused");
  CHECK(strstr(dsa_last_error(), "q") != NULL, "message: %s", dsa_last_error());
  dsa_context_destroy(&c2); /* (the create below NULLs c2: it used to leak) */
  CHECK(dsa_context_create_from_cl(&c2, ctx, NULL, NULL) == DSA_ERR_INVALID_ARGUMENT,
        "NULL device refused");
  CHECK(c2 == NULL, "out NULLed on failure");

  dsa_queue_destroy(&q);
  CHECK(q == NULL && refcount_queue(cq) == rq0, "queue released once");
  dsa_context_destroy(&c);
  CHECK(refcount_ctx(ctx) == rc0, "context released once (%u vs %u)", refcount_ctx(ctx), rc0);
  clReleaseCommandQueue(cq);
  clReleaseContext(ctx);
}

static void fill_k(uint16_t *k, int n, uint64_t seed) {
  for (int i = 0; i < n * 512; i++) {
    float f = (float)(dsa_test_uniform(&seed) * 8.0 - 4.0);
    uint32_t u;
    memcpy(&u, &f, 4);
    k[i] = (uint16_t)(u >> 16);
  }
}

/* Inserts n tokens at slots base.. and gathers them back into out. */
static dsa_status roundtrip(dsa_context *c, dsa_queue *q, int n, uint64_t seed, uint16_t *out) {
  cl_context ctx = dsa_context_cl_context(c);
  uint16_t *k = malloc((size_t)n * 1024);
  int64_t *slots = malloc((size_t)n * 8);
  int32_t *idx = malloc((size_t)n * 4);
  fill_k(k, n, seed);
  int nb = (n + 63) / 64 + 1;
  for (int i = 0; i < n; i++) slots[i] = idx[i] = (int32_t)((i * 37) % (nb * 64));
  cl_int e;
  cl_mem mk = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, (size_t)n * 1024, k, &e);
  cl_mem ms = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, (size_t)n * 8, slots, &e);
  cl_mem mi = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, (size_t)n * 4, idx, &e);
  cl_mem mc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, (size_t)nb * PAGE, NULL, &e);
  cl_mem mo = clCreateBuffer(ctx, CL_MEM_READ_WRITE, (size_t)n * 1024, NULL, &e);
  int64_t shk[2] = {n, 512}, shs[1] = {n}, sho[2] = {n, 512};
  dsa_tensor tk = dsa_tensor_make(mk, 0, DSA_BF16, 2, shk);
  dsa_tensor ts = dsa_tensor_make(ms, 0, DSA_I64, 1, shs);
  dsa_tensor ti = dsa_tensor_make(mi, 0, DSA_I32, 1, shs);
  dsa_tensor to = dsa_tensor_make(mo, 0, DSA_BF16, 2, sho);
  dsa_paged_cache cache = {.mem = mc, .offset = 0, .num_blocks = nb, .block_size = 64,
                           .block_stride = PAGE, .format = DSA_CACHE_MLA_FP8};
  dsa_status s = dsa_mla_cache_insert(q, &tk, &ts, &cache, NULL, NULL);
  if (s == DSA_OK) s = dsa_mla_gather_slots(q, &ti, &cache, &to, NULL, NULL);
  if (s == DSA_OK &&
      clEnqueueReadBuffer(dsa_queue_cl(q), mo, CL_TRUE, 0, (size_t)n * 1024, out, 0, NULL,
                          NULL) != CL_SUCCESS)
    s = DSA_ERR_OPENCL;
  clReleaseMemObject(mk);
  clReleaseMemObject(ms);
  clReleaseMemObject(mi);
  clReleaseMemObject(mc);
  clReleaseMemObject(mo);
  free(k);
  free(slots);
  free(idx);
  return s;
}

typedef struct thread_job {
  dsa_context *c;
  int n;
  uint64_t seed;
  uint16_t *out;
  dsa_status status;
} thread_job;

static void *thread_main(void *p) {
  thread_job *j = p;
  dsa_queue *q = NULL;
  j->status = dsa_queue_create(&q, j->c, 0);
  for (int rep = 0; rep < 3 && j->status == DSA_OK; rep++)
    j->status = roundtrip(j->c, q, j->n, j->seed, j->out);
  dsa_queue_destroy(&q);
  return NULL;
}

/* Threads race to the first program build and then share it, each with its
 * own queue; results must equal the single-threaded ones. */
static void test_threads(void) {
  enum { T = 4, N = 67 };
  dsa_context *c = NULL;
  dsa_context_options o;
  dsa_context_options_default(&o);
  o.cache_dir = "off";
  CHECK_OK(dsa_context_create(&c, &o));
  if (!c) return;
  thread_job jobs[T];
  pthread_t th[T];
  for (int t = 0; t < T; t++) {
    jobs[t] = (thread_job){c, N + t, 1000 + (uint64_t)t, calloc((N + T) * 512, 2), DSA_OK};
    pthread_create(&th[t], NULL, thread_main, &jobs[t]);
  }
  for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
  dsa_queue *q = NULL;
  CHECK_OK(dsa_queue_create(&q, c, 0));
  uint16_t *ref = calloc((N + T) * 512, 2);
  for (int t = 0; t < T; t++) {
    CHECK(jobs[t].status == DSA_OK, "thread %d: %s", t, dsa_status_name(jobs[t].status));
    CHECK_OK(roundtrip(c, q, jobs[t].n, jobs[t].seed, ref));
    CHECK(memcmp(ref, jobs[t].out, (size_t)jobs[t].n * 1024) == 0, "thread %d result", t);
    free(jobs[t].out);
  }
  free(ref);
  dsa_queue_destroy(&q);
  dsa_context_destroy(&c);
}

/* Fault word, wait lists, done events, empty work. */
static void test_faults_events(void) {
  dsa_context *c = NULL;
  dsa_queue *q = NULL;
  dsa_test_open(&c, &q, 0);
  cl_context ctx = dsa_context_cl_context(c);
  uint32_t bits = 123;
  CHECK_OK(dsa_queue_faults(q, &bits));
  CHECK(bits == 0, "fresh fault word is 0 (%u)", bits);

  cl_int e;
  uint16_t k[2 * 512] = {0};
  int64_t slots[2] = {5, 64}; /* 64 = capacity of one block: out of range */
  cl_mem mk = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, sizeof k, k, &e);
  cl_mem ms = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, sizeof slots, slots, &e);
  cl_mem mc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, PAGE, NULL, &e);
  int64_t shk[2] = {2, 512}, shs[1] = {2};
  dsa_tensor tk = dsa_tensor_make(mk, 0, DSA_BF16, 2, shk);
  dsa_tensor ts = dsa_tensor_make(ms, 0, DSA_I64, 1, shs);
  dsa_paged_cache cache = {.mem = mc, .offset = 0, .num_blocks = 1, .block_size = 64,
                           .block_stride = PAGE, .format = DSA_CACHE_MLA_FP8};

  /* Wait on a user event: the operator's done event cannot finish before. */
  cl_event user = clCreateUserEvent(ctx, &e), done = NULL;
  dsa_events ev = {1, &user, &done};
  CHECK_OK(dsa_mla_cache_insert(q, &tk, &ts, &cache, NULL, &ev));
  CHECK(done != NULL, "done event returned");
  cl_int st = CL_QUEUED;
  clFlush(dsa_queue_cl(q));
  clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL);
  CHECK(st != CL_COMPLETE, "operator waited for the user event (status %d)", st);
  clSetUserEventStatus(user, CL_COMPLETE);
  CHECK(clWaitForEvents(1, &done) == CL_SUCCESS, "done completes");
  clReleaseEvent(done);
  clReleaseEvent(user);
  CHECK_OK(dsa_queue_faults(q, &bits));
  CHECK(bits == DSA_FAULT_SLOT_RANGE, "slot fault recorded (%u)", bits);
  CHECK_OK(dsa_queue_faults(q, &bits));
  CHECK(bits == 0, "fault word cleared by the read (%u)", bits);

  /* Empty input: a completed event if asked, nothing else. */
  int64_t sh0[2] = {0, 512}, sh0s[1] = {0};
  dsa_tensor t0 = dsa_tensor_make(NULL, 0, DSA_BF16, 2, sh0);
  dsa_tensor s0 = dsa_tensor_make(NULL, 0, DSA_I64, 1, sh0s);
  done = NULL;
  dsa_events ev0 = {0, NULL, &done};
  CHECK_OK(dsa_mla_cache_insert(q, &t0, &s0, &cache, NULL, &ev0));
  CHECK(done && clWaitForEvents(1, &done) == CL_SUCCESS, "empty op returns a completed event");
  if (done) clReleaseEvent(done);
  CHECK(dsa_queue_faults(NULL, &bits) == DSA_ERR_INVALID_ARGUMENT, "faults: NULL queue");
  CHECK(dsa_queue_faults(q, NULL) == DSA_ERR_INVALID_ARGUMENT, "faults: NULL bits");
  dsa_queue *qbad = NULL;
  CHECK(dsa_queue_create(&qbad, c, 0x100) == DSA_ERR_INVALID_ARGUMENT && !qbad,
        "unknown queue flags refused");
  clReleaseMemObject(mk);
  clReleaseMemObject(ms);
  clReleaseMemObject(mc);
  dsa_test_close(&c, &q);
}

/* DSACL_KERNEL_DIR: sources from disk; a broken kernel gives DSA_ERR_BUILD
 * with the build log, a missing file names its path. */
static void test_kernel_dir(void) {
  dsa_context_options o;
  dsa_context_options_default(&o);
  o.cache_dir = "off";
  dsa_context *c = NULL;

  /* From the source tree: compressor.cl includes every header but the tile
   * layer's (dsa_mla, dsa_mxfp4, dsa_norm, dsa_common and what it
   * includes), so the driver resolves them with -I as the embedding did.
   * One program, not a warm-up of all: with the binary cache bypassed in
   * this mode, Intel's CPU runtime took 80 s to build every program
   * (compressor: 2 s); the embedded sources of the same files are what the
   * other tests build. */
  setenv("DSACL_KERNEL_DIR", DSA_SOURCE_CL_DIR, 1);
  CHECK_OK(dsa_context_create(&c, &o));
  cl_program prog = NULL;
  CHECK_OK(dsa__get_program(c, DSA_PROG_COMPRESSOR, &prog));
  CHECK(prog != NULL, "no program from DSACL_KERNEL_DIR");
  dsa_context_destroy(&c);

  char dir[] = "/tmp/dsacl-kdir-XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  setenv("DSACL_KERNEL_DIR", dir, 1);
  CHECK_OK(dsa_context_create(&c, &o));
  CHECK(dsa_context_warmup(c) == DSA_ERR_BUILD, "missing source is a build error");
  CHECK(strstr(dsa_last_error(), dir) != NULL, "message names the dir: %s", dsa_last_error());
  dsa_context_destroy(&c);

  /* Every program's file, broken the same way: whichever builds first fails. */
  char path[DSA_NUM_PROGRAMS][256];
  for (int i = 0; i < DSA_NUM_PROGRAMS; i++) {
    snprintf(path[i], sizeof path[i], "%s/%s", dir, dsa__programs[i].name);
    FILE *f = fopen(path[i], "w");
    if (f) {
      fputs("__kernel void broken(__global int *p) { p[0] = undeclared_thing; }\n", f);
      fclose(f);
    }
  }
  CHECK_OK(dsa_context_create(&c, &o));
  CHECK(dsa_context_warmup(c) == DSA_ERR_BUILD, "broken source is a build error");
  CHECK(dsa_last_cl_error() == CL_BUILD_PROGRAM_FAILURE, "raw cl error %d",
        dsa_last_cl_error());
  CHECK(strstr(dsa_last_error(), "build log") && strstr(dsa_last_error(), "undeclared_thing"),
        "message holds the build log: %s", dsa_last_error());
  dsa_context_destroy(&c);
  for (int i = 0; i < DSA_NUM_PROGRAMS; i++) unlink(path[i]);
  rmdir(dir);
  unsetenv("DSACL_KERNEL_DIR");
}

/* The build options follow the probed capabilities and DSACL_FORCE_PORTABLE. */
/* Finding 7: destroying a context with live queues keeps it alive until the
 * last queue is destroyed (reference counting); the queues keep working. */
static void test_destroy_order(void) {
  cl_platform_id plat;
  cl_device_id dev;
  dsa_context *tmp = NULL;
  if (dsa_context_create(&tmp, NULL) != DSA_OK) return;
  dev = dsa_context_cl_device(tmp);
  clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
  dsa_context_destroy(&tmp);
  cl_int e;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0};
  cl_context ctx = clCreateContext(props, 1, &dev, NULL, NULL, &e);
  cl_uint rc0 = refcount_ctx(ctx);
  dsa_context *c = NULL;
  dsa_queue *q1 = NULL, *q2 = NULL;
  CHECK_OK(dsa_context_create_from_cl(&c, ctx, dev, NULL));
  CHECK_OK(dsa_queue_create(&q1, c, 0));
  CHECK_OK(dsa_queue_create(&q2, c, 0));
  dsa_context_destroy(&c);
  CHECK(c == NULL, "destroy NULLs the handle");
  CHECK(refcount_ctx(ctx) > rc0, "context kept alive by its queues");
  uint16_t out[8 * 512];
  CHECK_OK(roundtrip(q1->ctx, q1, 8, 3, out));
  dsa_queue_destroy(&q1);
  CHECK(refcount_ctx(ctx) > rc0, "still alive with one queue");
  CHECK_OK(roundtrip(q2->ctx, q2, 8, 4, out));
  uint32_t bits = 1;
  CHECK_OK(dsa_queue_faults(q2, &bits));
  dsa_queue_destroy(&q2);
  CHECK(refcount_ctx(ctx) == rc0, "freed with the last queue (%u vs %u)", refcount_ctx(ctx), rc0);
  clReleaseContext(ctx);
}

static void test_build_options(void) {
  dsa_caps caps;
  memset(&caps, 0, sizeof caps);
  caps.vendor = DSA_VENDOR_INTEL;
  caps.intel_subgroups = caps.subgroups = true;
  caps.local_mem = 65536;
  char buf[1024];
  dsa__build_options(&caps, DSA_CAP_ALL, buf, sizeof buf);
  CHECK(strstr(buf, "-DDSA_VENDOR_INTEL=1") && strstr(buf, "-DDSA_HAS_INTEL_SUBGROUPS=1") &&
            strstr(buf, "-DDSA_LOCAL_MEM_BYTES=65536"),
        "intel options: %s", buf);
  CHECK(!strstr(buf, "finite-math") && !strstr(buf, "fast-relaxed"), "no unsafe math");
  dsa__build_options(&caps, 0, buf, sizeof buf);
  CHECK(strstr(buf, "-DDSA_HAS_INTEL_SUBGROUPS=0") != NULL, "portable: %s", buf);
  /* One capability masked: only its macro goes to 0. */
  dsa__build_options(&caps, DSA_CAP_ALL & ~DSA_CAP_INTEL_SUBGROUPS, buf, sizeof buf);
  CHECK(strstr(buf, "-DDSA_HAS_INTEL_SUBGROUPS=0") && strstr(buf, "-DDSA_HAS_SUBGROUPS=1"),
        "masked: %s", buf);
  unsigned bits = 0;
  CHECK(dsa__parse_caps("nv-ptx,subgroups", &bits) && bits == (DSA_CAP_NV_PTX | DSA_CAP_SUBGROUPS),
        "parse caps: %x", bits);
  CHECK(dsa__parse_caps("all", &bits) && bits == DSA_CAP_ALL, "parse all");
  CHECK(dsa__parse_caps("0x8", &bits) && bits == DSA_CAP_NV_PTX, "parse number");
  CHECK(!dsa__parse_caps("nv-ptx,warp-drive", &bits), "unknown cap refused");
}

int main(void) {
  unsetenv("DSACL_KERNEL_DIR");
  test_status_table();
  test_build_options();
  dsa_context *probe = NULL;
  if (dsa_context_create(&probe, NULL) == DSA_ERR_NO_DEVICE) {
    printf("no OpenCL device: device tests skipped\n");
    return dsa_test_summary();
  }
  dsa_context_destroy(&probe);
  test_device_choice();
  test_wrap();
  test_destroy_order();
  test_faults_events();
  test_threads();
  test_kernel_dir();
  return dsa_test_summary();
}
