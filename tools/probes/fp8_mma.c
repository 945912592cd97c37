/* fp8_mma: does NVIDIA's OpenCL reach the FP8 tensor cores, how exact and
 * how fast? A standalone probe (not built by meson: NVIDIA sm_89+ only).
 *   cc -O2 tools/probes/fp8_mma.c -lOpenCL -lm -o fp8_mma &&
 *   ./fp8_mma tools/probes/fp8_mma.cl
 * 1. cvt.rn.f16x2.e4m3x2 (checked against the e4m3 table);
 * 2. e4m3 mma.sync m16n8k32 over 128-dim rows (2048 "keys" x 64 "heads",
 *    four k32 steps chained in the accumulator, or each added in f32):
 *    error against the exact (fp64) dot, against a serial f32 sum, and of
 *    a weighted-relu sum over the 64 heads (the indexer logits' form), for
 *    small integers (must be exact: checks the fragment layout), gaussian
 *    rows quantized with amax -> 448, the same spread over 2^-6..2^6, and
 *    rows with outlier channels;
 * 3. throughput of e4m3 m16n8k32 against bf16 and f16 m16n8k16 (eight
 *    independent accumulators a warp, 1-8 groups of 256 an SM).
 * Results (NVIDIA H100 80GB HBM3, driver 580.159.04): docs/PERFORMANCE.md,
 * "FP8 `mma.sync` from NVIDIA's OpenCL". */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define CK(x) do { cl_int e_ = (x); if (e_) { printf("ERR %d at %s:%d\n", e_, __FILE__, __LINE__); exit(1);} } while (0)
static cl_context ctx; static cl_device_id dev; static cl_command_queue q; static char *src;
static cl_program build(const char *opt) {
  cl_int e; cl_program p = clCreateProgramWithSource(ctx, 1, (const char **)&src, NULL, &e); CK(e);
  e = clBuildProgram(p, 1, &dev, opt, NULL, NULL);
  static char log[200000]; clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
  if (e) { printf("build '%s' failed %d:\n%.3000s\n", opt, e, log); return NULL; }
  return p;
}
static double e4m3_dec(unsigned b) {
  int s = b >> 7, E = (b >> 3) & 15, m = b & 7;
  double v = E ? ldexp(1.0 + m / 8.0, E - 7) : ldexp(m / 8.0, -6);
  return s ? -v : v;
}
static unsigned enc(double x) { /* RNE, saturating to 448, by search */
  unsigned best = 0; double bd = 1e300;
  for (unsigned b = 0; b < 256; ++b) { if ((b & 0x7F) == 0x7F) continue; double d = fabs(e4m3_dec(b) - x);
    if (d < bd || (d == bd && !(b & 1))) { bd = d; best = b; } }
  return best;
}
static double gauss(void) { double u = (rand() + 1.0) / (RAND_MAX + 2.0), v = (rand() + 1.0) / (RAND_MAX + 2.0); return sqrt(-2 * log(u)) * cos(6.283185307179586 * v); }
static void fill_rows(unsigned char *X, int rows, int mode) {
  double tmp[128];
  for (int r = 0; r < rows; ++r) {
    double amax = 0;
    for (int k = 0; k < 128; ++k) {
      double v = gauss();
      if (mode == 2) v *= ldexp(1.0, rand() % 13 - 6);
      if (mode == 3) v = (k % 8 == 0) ? v * 30 : v; /* outlier channels */
      tmp[k] = v; if (fabs(v) > amax) amax = fabs(v);
    }
    for (int k = 0; k < 128; ++k) {
      if (mode == 0) X[r * 128 + k] = enc((double)(rand() % 9 - 4));
      else X[r * 128 + k] = enc(tmp[k] / amax * 448.0);
    }
  }
}
int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: fp8_mma fp8_mma.cl\n"); return 2; }
  FILE *f = fopen(argv[1], "rb");
  if (!f) { perror(argv[1]); return 2; }
  fseek(f, 0, 2); long n = ftell(f); rewind(f);
  src = calloc(n + 1, 1); if (fread(src, 1, n, f) != (size_t)n) return 1; fclose(f);
  cl_platform_id pl; CK(clGetPlatformIDs(1, &pl, NULL)); CK(clGetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  cl_int e; ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e); CK(e);
  q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &e); CK(e);
  cl_program pc = build("-DCVT");
  if (pc) {
    unsigned short in[256]; unsigned out[256]; for (int i = 0; i < 256; ++i) in[i] = (unsigned short)(i | ((255 - i) << 8));
    cl_mem bi = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, sizeof in, in, &e), bo = clCreateBuffer(ctx, 0, sizeof out, NULL, &e);
    cl_kernel k = clCreateKernel(pc, "cvt_probe", &e); CK(e);
    clSetKernelArg(k, 0, sizeof bi, &bi); clSetKernelArg(k, 1, sizeof bo, &bo);
    size_t g = 256; CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL));
    CK(clEnqueueReadBuffer(q, bo, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    int bad = 0;
    for (int i = 0; i < 256; ++i) { /* check low half against e4m3 value */
      unsigned h = out[i] & 0xFFFF; int s = h >> 15, E = (h >> 10) & 31, m = h & 1023;
      double v = E ? ldexp(1 + m / 1024.0, E - 15) : ldexp(m / 1024.0, -14); if (s) v = -v;
      double ex = e4m3_dec(i & 0xFF);
      if ((i & 0x7F) != 0x7F && v != ex) bad++;
    }
    printf("cvt.rn.f16x2.e4m3x2: accepted, %d mismatches of 254\n", bad);
  }
  cl_program p = build("");
  if (!p) return 1;
  const int NK = 2048, NH = 64;
  unsigned char *A = malloc(NK * 128), *B = malloc(NH * 128);
  float *D = malloc(sizeof(float) * NK * NH);
  cl_mem bA = clCreateBuffer(ctx, 0, NK * 128, NULL, &e), bB = clCreateBuffer(ctx, 0, NH * 128, NULL, &e),
         bD = clCreateBuffer(ctx, 0, sizeof(float) * NK * NH, NULL, &e);
  cl_kernel km = clCreateKernel(p, "mma_e4m3", &e); CK(e);
  double w[64]; for (int h = 0; h < 64; ++h) w[h] = (rand() / (double)RAND_MAX) * 2 - 1;
  const char *names[] = {"small ints", "gaussian amax->448", "gaussian x 2^U(-6,6)", "outlier channels"};
  for (int mode = 0; mode < 4; ++mode) {
    srand(1234 + mode);
    fill_rows(A, NK, mode); fill_rows(B, NH, mode);
    CK(clEnqueueWriteBuffer(q, bA, CL_TRUE, 0, NK * 128, A, 0, NULL, NULL));
    CK(clEnqueueWriteBuffer(q, bB, CL_TRUE, 0, NH * 128, B, 0, NULL, NULL));
    for (int promote = 0; promote < 2; ++promote) {
      clSetKernelArg(km, 0, sizeof bA, &bA); clSetKernelArg(km, 1, sizeof bB, &bB); clSetKernelArg(km, 2, sizeof bD, &bD);
      clSetKernelArg(km, 3, sizeof(int), &promote);
      size_t g = (size_t)(NK / 16) * 8 * 32, l = 128;
      CK(clEnqueueNDRangeKernel(q, km, 1, NULL, &g, &l, 0, NULL, NULL));
      CK(clEnqueueReadBuffer(q, bD, CL_TRUE, 0, sizeof(float) * NK * NH, D, 0, NULL, NULL));
      double maxex = 0, maxd = 0, maxrel_abs = 0, maxl = 0, maxdl = 0, maxd_f32 = 0; long nexact = 0;
      for (int k = 0; k < NK; ++k) {
        double lg = 0, lgg = 0;
        for (int h = 0; h < NH; ++h) {
          double ex = 0, sa = 0; float f32 = 0.f;
          for (int d = 0; d < 128; ++d) { double pr = e4m3_dec(A[k * 128 + d]) * e4m3_dec(B[h * 128 + d]); ex += pr; sa += fabs(pr); f32 += (float)pr; }
          double got = D[k * 64 + h];
          if (got == (float)ex) nexact++;
          if (fabs(ex) > maxex) maxex = fabs(ex);
          if (fabs(got - ex) > maxd) maxd = fabs(got - ex);
          if (fabs((double)f32 - ex) > maxd_f32) maxd_f32 = fabs((double)f32 - ex);
          if (sa > 0 && fabs(got - ex) / sa > maxrel_abs) maxrel_abs = fabs(got - ex) / sa;
          lg += w[h] * (ex > 0 ? ex : 0); lgg += w[h] * (got > 0 ? got : 0);
        }
        if (fabs(lg) > maxl) maxl = fabs(lg);
        if (fabs(lg - lgg) > maxdl) maxdl = fabs(lg - lgg);
      }
      printf("%-24s promote=%d: exact-as-f32 %ld/%d, max|d|/max|dot| %.3g (serial f32 sum: %.3g), max |d|/sum|p| %.3g, logits max|d|/max|ref| %.3g\n",
             names[mode], promote, nexact, NK * NH, maxd / maxex, maxd_f32 / maxex, maxrel_abs, maxdl / maxl);
    }
  }
  /* throughput */
  const char *kn[] = {"tput_e4m3", "tput_bf16", "tput_f16"}; const double fl[] = {8192, 4096, 4096};
  cl_mem bo = clCreateBuffer(ctx, 0, sizeof(float) * 132 * 8 * 256, NULL, &e);
  for (int i = 0; i < 3; ++i) {
    cl_kernel k = clCreateKernel(p, kn[i], &e); CK(e);
    int iters = 2048; clSetKernelArg(k, 0, sizeof(int), &iters); clSetKernelArg(k, 1, sizeof bo, &bo);
    for (int wgs = 1; wgs <= 8; wgs *= 2) {
      size_t l = 256, g = (size_t)132 * wgs * l; double best = 1e30;
      for (int r = 0; r < 6; ++r) {
        cl_event ev; CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, &ev)); CK(clWaitForEvents(1, &ev));
        cl_ulong a, b; clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, 8, &a, NULL); clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, 8, &b, NULL);
        clReleaseEvent(ev); double us = (b - a) / 1e3; if (r && us < best) best = us;
      }
      double flop = (double)g / 32 * iters * 8 * fl[i];
      printf("%s: %d WG/SM of 256: %.1f us, %.1f TFLOP/s\n", kn[i], wgs, best, flop / best / 1e6);
    }
  }
  return 0;
}
