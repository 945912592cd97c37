/* Kernels of tools/probes/fp8_mma.c (NVIDIA sm_89+, inline PTX). */
__kernel void mma_e4m3(__global const uchar *A, __global const uchar *B, __global float *D, int promote) {
  /* A: keys [nk][128] e4m3; B: heads [64][128] e4m3; D: [nk][64] f32.
   * One warp per (16-key tile, 8-head tile). */
  const uint lane = get_local_id(0) & 31u, w = get_global_id(0) >> 5;
  const uint kt = w / 8u, ht = w % 8u;
  const uint g = lane >> 2, t = lane & 3u;
  float c[4] = {0, 0, 0, 0};
  for (int ks = 0; ks < 4; ++ks) {
    uint a[4], b[2];
    for (int r = 0; r < 4; ++r) {
      const uint row = kt * 16u + g + ((r & 1) ? 8u : 0u);
      const uint col = ks * 32u + t * 4u + ((r & 2) ? 16u : 0u);
      a[r] = *(__global const uint *)(A + row * 128u + col);
    }
    for (int r = 0; r < 2; ++r) {
      const uint head = ht * 8u + g;
      const uint k = ks * 32u + t * 4u + (r ? 16u : 0u);
      b[r] = *(__global const uint *)(B + head * 128u + k);
    }
    float d0, d1, d2, d3;
    const float z0 = promote ? 0.f : c[0], z1 = promote ? 0.f : c[1], z2 = promote ? 0.f : c[2], z3 = promote ? 0.f : c[3];
    __asm__ __volatile__("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
                         : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                           "f"(z0), "f"(z1), "f"(z2), "f"(z3));
    if (promote) { c[0] += d0; c[1] += d1; c[2] += d2; c[3] += d3; }
    else { c[0] = d0; c[1] = d1; c[2] = d2; c[3] = d3; }
  }
  for (int i = 0; i < 4; ++i) {
    const uint row = kt * 16u + g + (i >= 2 ? 8u : 0u), col = ht * 8u + t * 2u + (i & 1);
    D[row * 64u + col] = c[i];
  }
}
#ifdef CVT
__kernel void cvt_probe(__global const ushort *x, __global uint *y) {
  uint r; const ushort v = x[get_global_id(0)];
  __asm__("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(v));
  y[get_global_id(0)] = r;
}
#endif
/* Throughput: NACC chains a warp, each with its own operands, A changing
 * every iteration. (With identical operands sm_90's ptxas, which lowers the
 * e4m3 instruction to unpacks + f16 HMMAs from zero + FADDs, computed one
 * product for all chains: a false "1540 TFLOP/s".) */
#define NACC 8
/* One throughput kernel per instruction: NAME, the mma's PTX, and the
 * seed's byte mask for A (e4m3 bytes, or bf16/f16 halves). */
#define TPUT(NAME, INSN, MUL, MASK)                                                          \
  __kernel void NAME(int iters, __global float *out) {                                       \
    float c[NACC][4];                                                                        \
    for (int i = 0; i < NACC; ++i)                                                           \
      for (int j = 0; j < 4; ++j) c[i][j] = 0.f;                                             \
    uint a0 = get_local_id(0) * (MUL) & (MASK), a1 = a0 ^ 0x00100010u, a2 = a0 ^ 0x00200020u, \
         a3 = a0 ^ 0x00010002u;                                                              \
    const uint b0 = a0 ^ 0x00050005u, b1 = a1 ^ 0x00060006u;                                 \
    for (int it = 0; it < iters; ++it) {                                                     \
      a0 ^= (uint)it & 0x01010101u;                                                          \
      _Pragma("unroll") for (int i = 0; i < NACC; ++i)                                       \
        __asm__ __volatile__(INSN " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"  \
                             : "+f"(c[i][0]), "+f"(c[i][1]), "+f"(c[i][2]), "+f"(c[i][3])   \
                             : "r"(a0 ^ (uint)i), "r"(a1), "r"(a2), "r"(a3),               \
                               "r"(b0 ^ ((uint)i << 8)), "r"(b1));                         \
    }                                                                                        \
    float s = 0.f;                                                                           \
    for (int i = 0; i < NACC; ++i)                                                           \
      for (int j = 0; j < 4; ++j) s += c[i][j];                                              \
    out[get_global_id(0)] = s;                                                               \
  }
TPUT(tput_e4m3, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", 0x01010101u, 0x3F3F3F3Fu)
TPUT(tput_bf16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 0x00010001u, 0x3F003F00u)
TPUT(tput_f16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 0x00010001u, 0x3F003F00u)
