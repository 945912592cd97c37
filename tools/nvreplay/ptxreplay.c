/* ptxreplay: launches a kernel recorded by clrecord.c (NVIDIA OpenCL's PTX,
 * its arguments and input buffers) through the CUDA driver API, so that
 * Nsight Compute can profile it and the JIT can report its registers.
 *   ptxreplay DIR [RUNS]
 * Prints the function's registers, static shared memory, spill bytes and
 * blocks an SM; checks that one launch reproduces every buffer the OpenCL
 * launch wrote (byte for byte: the same PTX on the same inputs); then times
 * RUNS launches (default 20) with a 128 MiB buffer overwritten before each,
 * as dsacl-bench does, and prints the median in microseconds.
 * %envreg registers (NVIDIA OpenCL's group and global offsets; dsacl passes
 * none) are replaced by 0 before the JIT. PTXREPLAY_MAXREG=N caps the JIT's
 * registers as a program's -cl-nv-maxrregcount=N does.
 * Build: gcc -O2 -Wall -Wextra -Werror ptxreplay.c -I$CUDA/include -lcuda */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                                 \
  do {                                                                                        \
    CUresult r_ = (x);                                                                        \
    if (r_ != CUDA_SUCCESS) {                                                                 \
      const char *s_ = "?";                                                                   \
      cuGetErrorString(r_, &s_);                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_);                        \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long l = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)l + 1);
  if (!b || fread(b, 1, (size_t)l, f) != (size_t)l) {
    fclose(f);
    free(b);
    return NULL;
  }
  fclose(f);
  b[l] = 0;
  *n = (size_t)l;
  return b;
}

typedef struct {
  int kind; /* 0 value, 1 buffer, 2 __local (a shared-window address) */
  size_t size;
  unsigned char v[64];
  CUdeviceptr d;
  unsigned char *in, *out;
  size_t n;
} arg_t;

static int cmp_f(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: ptxreplay DIR [RUNS]\n");
    return 2;
  }
  const char *dir = argv[1];
  int runs = argc > 2 ? atoi(argv[2]) : 20;
  char p[4096];
  snprintf(p, sizeof p, "%s/launch.txt", dir);
  FILE *f = fopen(p, "r");
  if (!f) {
    fprintf(stderr, "no %s\n", p);
    return 1;
  }
  char name[256] = "", line[512];
  unsigned dims = 0, nd = 0;
  size_t gws[3] = {1, 1, 1}, lws[3] = {1, 1, 1};
  arg_t *a = calloc(256, sizeof *a);
  int na = 0;
  while (fgets(line, sizeof line, f)) {
    int i;
    size_t s;
    char hex[200];
    if (sscanf(line, "kernel %255s", name) == 1) continue;
    if (sscanf(line, "dims %u", &dims) == 1) continue;
    if (nd < 3 && sscanf(line, "size %zu %zu", &gws[nd], &lws[nd]) == 2) {
      nd++;
      continue;
    }
    if (sscanf(line, "arg %d buffer %zu", &i, &s) == 2 && i < 256) {
      a[i].kind = 1;
      a[i].size = s;
      na = i + 1 > na ? i + 1 : na;
    } else if (sscanf(line, "arg %d value %zu %199s", &i, &s, hex) == 3 && i < 256 && s <= 64) {
      a[i].kind = 0;
      a[i].size = s;
      for (size_t b = 0; b < s; b++) {
        unsigned x;
        sscanf(hex + 2 * b, "%2x", &x);
        a[i].v[b] = (unsigned char)x;
      }
      na = i + 1 > na ? i + 1 : na;
    } else if (sscanf(line, "arg %d local %zu", &i, &s) == 2 && i < 256) {
      a[i].kind = 2;
      a[i].size = s;
      na = i + 1 > na ? i + 1 : na;
    }
  }
  fclose(f);
  for (unsigned d = 0; d < dims; d++)
    if (!lws[d] || gws[d] % lws[d]) {
      fprintf(stderr, "dimension %u: no local size or not a multiple\n", d);
      return 1;
    }

  size_t pn = 0;
  snprintf(p, sizeof p, "%s/program.bin", dir);
  char *ptx = (char *)slurp(p, &pn);
  if (!ptx) {
    fprintf(stderr, "no %s\n", p);
    return 1;
  }
  /* %envregN -> 0 (the token is followed by ';' or ','). */
  for (char *q = strstr(ptx, "%envreg"); q; q = strstr(q, "%envreg")) {
    char *e = q + 7;
    while (*e >= '0' && *e <= '9') e++;
    memset(q, ' ', (size_t)(e - q));
    *q = '0';
  }

  /* Only the wanted entry: the program's other kernels are skipped (the
   * JIT of a whole logits program takes tens of seconds). An entry runs from
   * its ".entry NAME(" line to the next line that is exactly "}". */
  {
    char *o = ptx, *q = ptx;
    int skip = 0;
    while (*q) {
      char *e = strchr(q, '\n');
      size_t l = e ? (size_t)(e - q) + 1 : strlen(q);
      const char *en = !strncmp(q, ".entry ", 7)           ? q + 7
                       : !strncmp(q, ".visible .entry ", 16) ? q + 16
                                                             : NULL;
      if (en) {
        size_t nl = strlen(name);
        skip = !(strncmp(en, name, nl) == 0 && en[nl] == '(');
      }
      int last = skip && l >= 1 && q[0] == '}' && (l == 1 || q[1] == '\n');
      if (!skip) {
        memmove(o, q, l);
        o += l;
      }
      if (last) skip = 0;
      q += l;
    }
    *o = 0;
    /* NVIDIA OpenCL's kernel attribute metadata (reqd_work_group_size):
     * not PTX that the CUDA JIT takes. */
    char *md = strstr(ptx, "\n.metadata_section");
    if (md) md[1] = 0;
    /* __local arguments are ".ptr .shared .align N" parameters, which the
     * CUDA JIT rejects (CUDA_ERROR_INVALID_IMAGE): as plain integers they
     * carry the same shared-window address into the same ld/st.shared. */
    for (char *q = strstr(ptx, " .ptr .shared .align "); q; q = strstr(q, " .ptr .shared .align ")) {
      char *e = q + 21;
      while (*e >= '0' && *e <= '9') e++;
      memset(q, ' ', (size_t)(e - q));
    }
  }
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  static char info[1 << 16], err[1 << 16];
  /* PTXREPLAY_MAXREG=N: the JIT's register cap, as the OpenCL build's
   * -cl-nv-maxrregcount=N (an option to ptxas, not in the PTX; e.g. the
   * sparse MLA program's 128). */
  const char *mr = getenv("PTXREPLAY_MAXREG");
  CUjit_option jo[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                       CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                       CU_JIT_MAX_REGISTERS};
  void *jv[] = {info, (void *)(size_t)sizeof info, err, (void *)(size_t)sizeof err,
                (void *)(size_t)(mr ? atoi(mr) : 0)};
  CUmodule mod;
  CUresult lr = cuModuleLoadDataEx(&mod, ptx, mr && atoi(mr) > 0 ? 5 : 4, jo, jv);
  if (lr != CUDA_SUCCESS) {
    fprintf(stderr, "JIT failed (%d): %s\n", (int)lr, err);
    return 1;
  }
  CUfunction fn;
  CK(cuModuleGetFunction(&fn, mod, name));
  int regs = 0, shared = 0, local = 0, maxt = 0, blocks = 0;
  cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn);
  cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn);
  cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn);
  cuFuncGetAttribute(&maxt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn);
  int threads = (int)(lws[0] * lws[1] * lws[2]);
  cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, threads, 0);
  printf("%s: %d registers, %d B shared, %d B local (spills), %d blocks/SM of %d threads, grid "
         "%zux%zux%zu\n",
         name, regs, shared, local, blocks, threads, gws[0] / lws[0], gws[1] / lws[1],
         gws[2] / lws[2]);

  /* __local arguments: NVIDIA OpenCL passes each as a .shared pointer
   * parameter; here they get consecutive 128-byte aligned slices of the
   * launch's dynamic shared memory, which follows the static shared memory
   * in the block's shared window (the replay's byte comparison below says
   * whether that is what the kernel expects). The parameter's width comes
   * from the entry's PTX declaration. */
  size_t dyn = 0;
  {
    const char *ep = strstr(ptx, ".entry ");
    int pi = 0;
    for (const char *q = ep ? strchr(ep, '(') : NULL; q && *q && *q != ')' && pi < na; q++) {
      if (strncmp(q, ".param .", 8)) continue;
      int w64 = !strncmp(q + 8, "u64", 3) || !strncmp(q + 8, "b64", 3);
      if (a[pi].kind == 2) {
        size_t off = ((size_t)shared + 127) / 128 * 128 + dyn;
        memset(a[pi].v, 0, sizeof a[pi].v);
        if (w64) {
          unsigned long long o = off;
          memcpy(a[pi].v, &o, 8);
        } else {
          unsigned o = (unsigned)off;
          memcpy(a[pi].v, &o, 4);
        }
        dyn += (a[pi].size + 127) / 128 * 128;
        printf("argument %d: __local %zu bytes at shared offset %zu (%s)\n", pi, a[pi].size, off,
               w64 ? "64-bit" : "32-bit");
      }
      pi++;
      q += 8;
    }
  }
  if (dyn) {
    CK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)dyn));
    cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, threads, dyn);
    printf("with %zu B of dynamic shared memory: %d blocks/SM\n", dyn, blocks);
  }
  void **params = calloc((size_t)na + 1, sizeof *params);
  for (int i = 0; i < na; i++) {
    if (a[i].kind == 1) {
      snprintf(p, sizeof p, "%s/arg%d.in", dir, i);
      a[i].in = slurp(p, &a[i].n);
      snprintf(p, sizeof p, "%s/arg%d.out", dir, i);
      size_t no = 0;
      a[i].out = slurp(p, &no);
      if (!a[i].in || !a[i].out || no != a[i].n) {
        fprintf(stderr, "argument %d: missing or mismatched dumps\n", i);
        return 1;
      }
      CK(cuMemAlloc(&a[i].d, a[i].n ? a[i].n : 1));
      CK(cuMemcpyHtoD(a[i].d, a[i].in, a[i].n));
      params[i] = &a[i].d;
    } else
      params[i] = a[i].v;
  }
  unsigned gx = (unsigned)(gws[0] / lws[0]), gy = (unsigned)(gws[1] / lws[1]),
           gz = (unsigned)(gws[2] / lws[2]);
  CK(cuLaunchKernel(fn, gx, gy, gz, (unsigned)lws[0], (unsigned)lws[1], (unsigned)lws[2],
                    (unsigned)dyn, 0, params, NULL));
  CK(cuCtxSynchronize());
  long bad = 0;
  for (int i = 0; i < na; i++) {
    if (a[i].kind != 1) continue;
    unsigned char *h = malloc(a[i].n ? a[i].n : 1);
    CK(cuMemcpyDtoH(h, a[i].d, a[i].n));
    long b = 0;
    for (size_t j = 0; j < a[i].n; j++) b += h[j] != a[i].out[j];
    if (b) printf("argument %d: %ld of %zu bytes differ from the OpenCL launch\n", i, b, a[i].n);
    /* The first few differing 4-byte words (offset, replay, OpenCL; as
     * floats too), to tell a replay artifact from the kernel's own. */
    for (size_t j = 0, shown = 0; b && j + 4 <= a[i].n && shown < 6; j += 4) {
      if (!memcmp(h + j, a[i].out + j, 4)) continue;
      float fr, fo;
      memcpy(&fr, h + j, 4);
      memcpy(&fo, a[i].out + j, 4);
      printf("  word at byte %zu: replay %08x (%g), OpenCL %08x (%g)\n", j,
             *(unsigned *)(void *)(h + j), (double)fr, *(unsigned *)(void *)(a[i].out + j),
             (double)fo);
      shown++;
    }
    bad += b;
    free(h);
  }
  printf("replay %s the OpenCL launch's buffers\n", bad ? "DIFFERS FROM" : "reproduces");

  CUdeviceptr flush;
  size_t fb = (size_t)128 << 20;
  CK(cuMemAlloc(&flush, fb));
  CUevent e0, e1;
  CK(cuEventCreate(&e0, 0));
  CK(cuEventCreate(&e1, 0));
  float *t = calloc((size_t)(runs > 0 ? runs : 1), sizeof *t);
  for (int r = -3; r < runs; r++) {
    CK(cuMemsetD32(flush, (unsigned)r, fb / 4));
    CK(cuEventRecord(e0, 0));
    CK(cuLaunchKernel(fn, gx, gy, gz, (unsigned)lws[0], (unsigned)lws[1], (unsigned)lws[2],
                      (unsigned)dyn, 0, params, NULL));
    CK(cuEventRecord(e1, 0));
    CK(cuEventSynchronize(e1));
    if (r >= 0) CK(cuEventElapsedTime(&t[r], e0, e1));
  }
  if (runs > 0) {
    qsort(t, (size_t)runs, sizeof *t, cmp_f);
    printf("median %.2f us, min %.2f us of %d runs (CUDA events)\n", 1e3 * t[runs / 2],
           1e3 * t[0], runs);
  }
  return bad ? 3 : 0;
}
