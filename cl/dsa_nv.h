/* NVIDIA inline PTX helpers, for kernels built with DSA_HAS_NV_PTX (NVIDIA's
 * OpenCL driver compiles OpenCL C to PTX and accepts asm statements);
 * DSA_NV_SM is the device's compute capability (90 for sm_90). A warp is 32
 * consecutive work-items of a work-group, x fastest. The mma and shuffle
 * helpers need every lane of the warp to execute them (the .sync forms, full
 * mask). Included by dsa_common.h. */
#ifndef DSA_NV_H
#define DSA_NV_H

#if DSA_HAS_NV_PTX

/* c += a * b for one m16n8k16 tile: A (row) and B (col) of element type T
 * (bf16, or f16: pairs in each word, the lower-indexed element in the low
 * half), fp32 C. One definition per type, the PTX type spliced in. */
#define DSA_NV_MMA_M16N8K16(NAME, T)                                                          \
  DSA_INLINE void NAME(float *c, const uint a0, const uint a1, const uint a2, const uint a3,  \
                       const uint b0, const uint b1) {                                        \
    float d0, d1, d2, d3;                                                                     \
    __asm__ __volatile__("mma.sync.aligned.m16n8k16.row.col.f32." T "." T                      \
                         ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"     \
                         : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)                             \
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c[0]),   \
                           "f"(c[1]), "f"(c[2]), "f"(c[3]));                                  \
    c[0] = d0, c[1] = d1, c[2] = d2, c[3] = d3;                                               \
  }
DSA_NV_MMA_M16N8K16(dsa_nv_mma_bf16, "bf16")
DSA_NV_MMA_M16N8K16(dsa_nv_mma_f16, "f16")

/* 2^x by one MUFU.EX2 (ex2.approx.ftz: ~2^-22 relative, subnormal results
 * flushed): what NVIDIA's driver makes of native_exp2, spelled out because
 * libclc's nvptx target (the offline compile check) has no native_exp2. */
DSA_INLINE float dsa_nv_ex2(float x) {
  float r;
  __asm__("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

/* 1 where p is nonzero in any lane of the warp (vote.sync.any, full mask:
 * every lane must execute it). */
DSA_INLINE int dsa_nv_any(int p) {
  int r;
  __asm__ __volatile__(
      "{ .reg .pred a, b; setp.ne.s32 a, %1, 0; vote.sync.any.pred b, a, 0xffffffff; "
      "selp.s32 %0, 1, 0, b; }"
      : "=r"(r)
      : "r"(p));
  return r;
}

/* The value of lane (this lane ^ m). */
DSA_INLINE float dsa_nv_shfl_xor_f32(float v, int m) {
  float r;
  __asm__ __volatile__("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(m));
  return r;
}

DSA_INLINE uint dsa_nv_shfl_xor_u32(uint v, int m) {
  uint r;
  __asm__ __volatile__("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(m));
  return r;
}

#if defined(DSA_NV_SM) && DSA_NV_SM >= 70
#define DSA_NV_HAS_MATCH 1
/* The lanes of the warp whose v equals this lane's (a bit mask, this lane's
 * bit set): match.any, sm_70 and later. For warp-aggregated atomics: the
 * lowest lane of each class adds its popcount once. */
DSA_INLINE uint dsa_nv_match_any_u32(uint v) {
  uint r;
  __asm__ __volatile__("match.any.sync.b32 %0, %1, 0xffffffff;" : "=r"(r) : "r"(v));
  return r;
}
#endif

#if defined(DSA_NV_SM) && DSA_NV_SM >= 89
/* e4m3 bytes of two floats (lo in bits 0..7, hi in 8..15): round to nearest
 * even, finite values saturate at +-448, NaN gives 0x7F. */
DSA_INLINE uint dsa_nv_e4m3x2(float lo, float hi) {
  uint r;
  __asm__("{ .reg .b16 t; cvt.rn.satfinite.e4m3x2.f32 t, %1, %2; cvt.u32.u16 %0, t; }"
          : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
#endif

#endif
#endif
