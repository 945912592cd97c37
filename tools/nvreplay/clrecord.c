/* clrecord: an LD_PRELOAD shim that records one OpenCL kernel launch (its
 * program binary, arguments and every buffer argument's bytes before and
 * after the kernel) so that tools/nvreplay/ptxreplay.c can launch the same
 * PTX with the same inputs through the CUDA driver API, where Nsight Compute
 * can profile it. NVIDIA's OpenCL launches are invisible to `ncu` ("No kernels
 * were profiled", driver 580, session 17), and its program binaries are PTX.
 *
 * Not part of the library or the test suite: a developer tool for the lent
 * GPU machines (tools/nvreplay/run.sh builds and uses it).
 *   DSACL_REC_KERNEL  kernel names (exact), comma-separated
 *   DSACL_REC_NTH     which launch of each to record (1-based, default 3:
 *                     after the bench's warm-up has started)
 *   DSACL_REC_DIR     where to write (default /tmp/clrec)
 *   DSACL_REC_LIST    if set, every kernel's first launch is named on stderr
 * Output, a folder DIR/NAME for each kernel recorded: launch.txt (name,
 * dims, sizes, one line an argument), program.bin (the program binary: PTX
 * text on NVIDIA), argN.in and argN.out for buffer arguments. Buffers are those this process created
 * with clCreateBuffer/clCreateSubBuffer/clCreateBufferWithProperties and has
 * not released (an argument's value is only dereferenced as a cl_mem when it
 * is one of those). */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAXK 4096 /* kernels tracked */
#define MAXA 128  /* arguments a kernel */
#define MAXM 65536 /* live buffers tracked */

typedef struct {
  size_t size;
  int null; /* __local argument: size only */
  unsigned char v[64];
} arg_t;

typedef struct {
  cl_kernel k;
  int nargs;
  arg_t a[MAXA];
} kern_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static kern_t *kerns;
static int nkerns;
static cl_mem mems[MAXM];
static int nmems;
#define MAXN 16 /* names recorded */
static char names[MAXN][128];
static int nnames = -1;
static int launches[MAXN], done[MAXN];
static char seen[256][128];
static int nseen;

static void names_init(void) {
  if (nnames >= 0) return;
  nnames = 0;
  const char *w = getenv("DSACL_REC_KERNEL");
  while (w && *w && nnames < MAXN) {
    size_t l = strcspn(w, ",");
    if (l && l < sizeof names[0]) {
      memcpy(names[nnames], w, l);
      names[nnames++][l] = 0;
    }
    w += l + (w[l] == ',');
  }
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

static void mem_add(cl_mem m) {
  if (!m) return;
  pthread_mutex_lock(&mu);
  if (nmems < MAXM) mems[nmems++] = m;
  pthread_mutex_unlock(&mu);
}

static int mem_known(cl_mem m) {
  int r = 0;
  for (int i = 0; i < nmems && !r; i++) r = mems[i] == m;
  return r;
}

cl_mem clCreateBuffer(cl_context c, cl_mem_flags f, size_t s, void *h, cl_int *e) {
  cl_mem m = NEXT(clCreateBuffer)(c, f, s, h, e);
  mem_add(m);
  return m;
}

cl_mem clCreateSubBuffer(cl_mem b, cl_mem_flags f, cl_buffer_create_type t, const void *i,
                         cl_int *e) {
  cl_mem m = NEXT(clCreateSubBuffer)(b, f, t, i, e);
  mem_add(m);
  return m;
}

cl_mem clCreateBufferWithProperties(cl_context c, const cl_mem_properties *p, cl_mem_flags f,
                                    size_t s, void *h, cl_int *e) {
  cl_mem m = NEXT(clCreateBufferWithProperties)(c, p, f, s, h, e);
  mem_add(m);
  return m;
}

cl_int clReleaseMemObject(cl_mem m) {
  /* A released object's handle may be reused: forget it only when its last
   * reference goes. */
  cl_uint rc = 0;
  if (clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof rc, &rc, NULL) == CL_SUCCESS &&
      rc == 1) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nmems; i++)
      if (mems[i] == m) {
        mems[i] = mems[--nmems];
        break;
      }
    pthread_mutex_unlock(&mu);
  }
  return NEXT(clReleaseMemObject)(m);
}

static kern_t *kern_get(cl_kernel k) {
  if (!kerns) kerns = calloc(MAXK, sizeof *kerns);
  if (!kerns) return NULL;
  for (int i = 0; i < nkerns; i++)
    if (kerns[i].k == k) return &kerns[i];
  if (nkerns == MAXK) return NULL;
  kerns[nkerns].k = k;
  kerns[nkerns].nargs = 0;
  return &kerns[nkerns++];
}

cl_int clSetKernelArg(cl_kernel k, cl_uint i, size_t s, const void *v) {
  pthread_mutex_lock(&mu);
  kern_t *kt = kern_get(k);
  if (kt && i < MAXA) {
    arg_t *a = &kt->a[i];
    a->size = s;
    a->null = v == NULL;
    memset(a->v, 0, sizeof a->v);
    if (v) memcpy(a->v, v, s < sizeof a->v ? s : sizeof a->v);
    if ((int)i >= kt->nargs) kt->nargs = (int)i + 1;
  }
  pthread_mutex_unlock(&mu);
  return NEXT(clSetKernelArg)(k, i, s, v);
}

static int dump_buf(cl_command_queue q, cl_mem m, const char *path) {
  size_t n = 0;
  if (clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof n, &n, NULL) != CL_SUCCESS) return -1;
  void *h = malloc(n ? n : 1);
  if (!h) return -1;
  int r = NEXT(clEnqueueReadBuffer)(q, m, CL_TRUE, 0, n, h, 0, NULL, NULL) == CL_SUCCESS ? 0 : -1;
  FILE *f = r ? NULL : fopen(path, "wb");
  if (f) {
    r = fwrite(h, 1, n, f) == n ? 0 : -1;
    fclose(f);
  } else
    r = -1;
  free(h);
  return r;
}

static void record(cl_command_queue q, kern_t *kt, const char *name, cl_uint dims,
                   const size_t *gws, const size_t *lws, int after) {
  const char *top = getenv("DSACL_REC_DIR");
  char dir[2048], p[4096];
  snprintf(dir, sizeof dir, "%s", top ? top : "/tmp/clrec");
  mkdir(dir, 0755);
  snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/%s", name);
  mkdir(dir, 0755);
  clFinish(q);
  if (!after) {
    snprintf(p, sizeof p, "%s/launch.txt", dir);
    FILE *f = fopen(p, "w");
    if (!f) return;
    fprintf(f, "kernel %s\ndims %u\n", name, dims);
    for (cl_uint d = 0; d < dims; d++)
      fprintf(f, "size %zu %zu\n", gws[d], lws ? lws[d] : (size_t)0);
    for (int i = 0; i < kt->nargs; i++) {
      arg_t *a = &kt->a[i];
      cl_mem m = NULL;
      if (!a->null && a->size == sizeof(cl_mem)) memcpy(&m, a->v, sizeof m);
      if (a->null)
        fprintf(f, "arg %d local %zu\n", i, a->size);
      else if (m && mem_known(m))
        fprintf(f, "arg %d buffer %zu\n", i, a->size);
      else {
        fprintf(f, "arg %d value %zu ", i, a->size);
        for (size_t b = 0; b < a->size && b < sizeof a->v; b++) fprintf(f, "%02x", a->v[b]);
        fprintf(f, "\n");
      }
    }
    fclose(f);
    /* The program binary (one device). */
    cl_program pr = NULL;
    size_t bs = 0;
    if (clGetKernelInfo(kt->k, CL_KERNEL_PROGRAM, sizeof pr, &pr, NULL) == CL_SUCCESS &&
        clGetProgramInfo(pr, CL_PROGRAM_BINARY_SIZES, sizeof bs, &bs, NULL) == CL_SUCCESS &&
        bs) {
      unsigned char *bin = malloc(bs);
      unsigned char *bp[1] = {bin};
      if (bin && clGetProgramInfo(pr, CL_PROGRAM_BINARIES, sizeof bp, bp, NULL) == CL_SUCCESS) {
        snprintf(p, sizeof p, "%s/program.bin", dir);
        FILE *g = fopen(p, "wb");
        if (g) {
          fwrite(bin, 1, bs, g);
          fclose(g);
        }
      }
      free(bin);
    }
  }
  for (int i = 0; i < kt->nargs; i++) {
    arg_t *a = &kt->a[i];
    cl_mem m = NULL;
    if (a->null || a->size != sizeof(cl_mem)) continue;
    memcpy(&m, a->v, sizeof m);
    if (!m || !mem_known(m)) continue;
    snprintf(p, sizeof p, "%s/arg%d.%s", dir, i, after ? "out" : "in");
    if (dump_buf(q, m, p)) fprintf(stderr, "clrecord: could not dump argument %d\n", i);
  }
}

cl_int clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dims, const size_t *off,
                              const size_t *gws, const size_t *lws, cl_uint ne,
                              const cl_event *ev, cl_event *out) {
  char name[256] = "";
  int rec = 0, w = -1;
  pthread_mutex_lock(&mu);
  names_init();
  if (nnames || getenv("DSACL_REC_LIST")) {
    clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
    for (int i = 0; i < nnames; i++)
      if (!strcmp(name, names[i]) && !done[i]) w = i;
    if (w >= 0) {
      const char *nth = getenv("DSACL_REC_NTH");
      rec = ++launches[w] == (nth ? atoi(nth) : 3);
    }
    if (getenv("DSACL_REC_LIST")) {
      int s = 0;
      for (int i = 0; i < nseen && !s; i++) s = !strcmp(seen[i], name);
      if (!s && nseen < 256) {
        snprintf(seen[nseen++], sizeof seen[0], "%s", name);
        fprintf(stderr, "clrecord: kernel %s global %zu x %zu local %zu\n", name, gws[0],
                dims > 1 ? gws[1] : (size_t)1, lws ? lws[0] : (size_t)0);
      }
    }
  }
  pthread_mutex_unlock(&mu);
  kern_t *kt = NULL;
  if (rec) {
    pthread_mutex_lock(&mu);
    kt = kern_get(k);
    pthread_mutex_unlock(&mu);
    if (off) fprintf(stderr, "clrecord: %s has a global offset: not recorded\n", name);
    if (!kt || off) rec = 0;
  }
  if (rec) {
    clWaitForEvents(ne, ev);
    record(q, kt, name, dims, gws, lws, 0);
  }
  cl_int e = NEXT(clEnqueueNDRangeKernel)(q, k, dims, off, gws, lws, ne, ev, out);
  if (rec) {
    record(q, kt, name, dims, gws, lws, 1);
    done[w] = 1;
    fprintf(stderr, "clrecord: recorded %s (launch %d)\n", name, launches[w]);
  }
  return e;
}
