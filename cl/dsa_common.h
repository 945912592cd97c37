/* Shared device helpers: number formats (bf16, e4m3fn, ue8m0), the fault
 * word, and unaligned/aligned vector access. Everything here is integer bit
 * manipulation where rounding matters, so results do not depend on the
 * device's float modes (denormal flushing, contraction). */
#ifndef DSA_COMMON_H
#define DSA_COMMON_H

/* static: C99 inline alone leaves no out-of-line definition to link. */
#define DSA_INLINE static inline
/* For a body that must be specialised at each call (its array sizes and
 * loop bounds come from literal arguments): inlined whatever the
 * compiler's size heuristics say, so those arrays live in registers. */
#define DSA_INLINE_ALWAYS static inline __attribute__((always_inline))

#include "dsa_nv.h"
#include "dsa_subgroup.h"

/* Fault bits (DSA_FAULT_*), cache token layouts (DSA_CACHE_<FORMAT>_DATA /
 * _SCALE bytes) and E2M1 modes (DSA_E2M1_*) come from the host as build
 * options, generated from the X-macro tables in include/dsacl/. */
#ifndef DSA_FAULT_SLOT_RANGE
#error "build options lack the host's enum tables (see dsa__build_options)"
#endif

DSA_INLINE void dsa_fault(__global volatile uint *faults, uint bit) { atomic_or(faults, bit); }

/* ---- bf16 ---------------------------------------------------------------- */

DSA_INLINE float dsa_bf16_to_f32(ushort h) { return as_float((uint)h << 16); }

/* ---- positions and cos/sin tables (API rule: every operator takes positions
 * as i64 or i32 and cos/sin as f32 or bf16; the host passes the two flags) */

/* The position at byte address p: i64, or i32 (sign-extended) when i32. */
DSA_INLINE long dsa_load_pos(__global const uchar *p, int i32) {
  return i32 ? (long)*(__global const int *)p : *(__global const long *)p;
}
/* Element i of a cos/sin row: f32, or bf16 (exact in f32) when bf16. */
DSA_INLINE float dsa_load_cs(__global const uchar *row, int bf16, uint i) {
  return bf16 ? dsa_bf16_to_f32(((__global const ushort *)row)[i])
              : ((__global const float *)row)[i];
}
/* Elements i .. i+7 of a cos/sin row (f32 rows: element-aligned vload8). */
DSA_INLINE float8 dsa_load_cs8(__global const uchar *row, int bf16, uint i) {
  if (bf16)
    return as_float8(convert_uint8(vload8(0, (__global const ushort *)row + i)) << 16);
  return vload8(0, (__global const float *)row + i);
}

/* Round to nearest even; every NaN becomes 0x7FC0 (the library's canonical
 * NaN, so results compare byte for byte across devices). */
DSA_INLINE ushort dsa_f32_to_bf16(float f) {
  uint u = as_uint(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (ushort)0x7FC0;
  return (ushort)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* Two floats to a bf16 pair (a in the low half, b in the high), as two
 * dsa_f32_to_bf16; on NVIDIA (sm_80+) one cvt.rn.bf16x2.f32, whose NaN is
 * 0x7FFF where dsa_f32_to_bf16 gives 0x7FC0: for callers whose NaNs do not
 * reach an output's bytes (the attention's P, whose NaN makes the row NaN,
 * which the output conversion writes as 0x7FC0). */
DSA_INLINE uint dsa_f32x2_to_bf16x2(float a, float b) {
#if DSA_HAS_NV_PTX && defined(DSA_NV_SM) && DSA_NV_SM >= 80
  uint r;
  __asm__("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  return r;
#else
  return (uint)dsa_f32_to_bf16(a) | ((uint)dsa_f32_to_bf16(b) << 16);
#endif
}

/* ---- e4m3fn (SPEC-reference §2.2) --------------------------------------- */

/* Round to nearest even on the e4m3 grid (subnormal step 2^-9), saturate
 * magnitudes >= 448 (and inf) to 448, keep the sign of zero: what
 * cvt.rn.satfinite.e4m3x2.f32 does. Every NaN gives 0x7F, whatever its sign:
 * vLLM's scaling multiply on NVIDIA yields the canonical positive NaN before
 * the conversion, and other devices must not differ. */
DSA_INLINE uchar dsa_f32_to_e4m3(float f) {
  uint u = as_uint(f);
  uint sign = (u >> 24) & 0x80u;
  uint a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (uchar)0x7Fu;
  if (a >= 0x43E00000u) return (uchar)(sign | 0x7Eu); /* >= 448 */
  if (a >= 0x3C800000u) {                             /* >= 2^-6: normal */
    uint r = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20; /* RNE to 3 mantissa bits */
    return (uchar)(sign | (r - (120u << 3)));         /* rebias 127 -> 7 */
  }
  /* Subnormal: q = rne(|x| * 2^9); |x| = mm * 2^(ef - 150). */
  uint ef = a >> 23;
  uint mm = (a & 0x7FFFFFu) | (ef ? 0x800000u : 0u);
  uint sh = 141u - (ef ? ef : 1u);
  if (sh > 24u) return (uchar)sign; /* below 2^-10: rounds to zero */
  uint q = (mm + (1u << (sh - 1u)) - 1u + ((mm >> sh) & 1u)) >> sh;
  return (uchar)(sign | q);
}

/* e4m3 of a bf16 value times 2^-e, for e >= -126 (e = ceil(log2(amax/448))
 * puts every finite product at or below 448). The product keeps the bf16's
 * 8-bit significand, so when it lands in e4m3's normal range the encoding is
 * the bf16 bits rebiased with the 7-bit mantissa rounded (RNE) to 3 bits:
 * integer work only. Zeros, e4m3 subnormals and NaN take dsa_f32_to_e4m3. */
DSA_INLINE uint dsa_bf16_to_e4m3_pow2(uint h, int e) {
  const uint v = h & 0x7FFFu;
  if (v > 0x7F80u) return 0x7Fu; /* NaN */
  /* +-inf saturates to +-448, as cvt.rn.satfinite (the NVIDIA path) does. */
  if (v == 0x7F80u) return ((h >> 8) & 0x80u) | 0x7Eu;
  if (v >= ((uint)(e + 121) << 7)) {
    const uint r = (v + 7u + ((v >> 4) & 1u)) >> 4;
    return ((h >> 8) & 0x80u) | min(r - ((uint)(e + 120) << 3), 0x7Eu);
  }
  return dsa_f32_to_e4m3(as_float((h & 0xFFFFu) << 16) * as_float((uint)(127 - e) << 23));
}

/* The two e4m3 bytes (low value in bits 0..7, high in 8..15) of the bf16
 * pair x (low half first) times 2^-e, where e came from
 * dsa_e4m3_scale_exp of an amax at least as large as both values (every
 * quantizer's case), so no finite value scales past 448 and the
 * per-value min() is moot.
 * NVIDIA sm_89+: the hardware's RNE, saturating e4m3 conversion (what
 * Triton's fp8 cast uses); the scaling by 2^-e is exact in fp32 (results
 * too small for fp32 are far below e4m3's half-ulp and round to zero, sign
 * kept). Elsewhere both halves at once when both land in e4m3's normal
 * range and are finite (the usual case): dsa_bf16_to_e4m3_pow2's rebias +
 * RNE to 3 mantissa bits then works per 16-bit lane without carries
 * between lanes. Otherwise per value.
 *   in range: (v | 0x8000) - lo keeps bit 15 iff v >= lo; v + 0x80 sets
 *   bit 15 iff v >= 0x7F80 (inf/NaN). */
DSA_INLINE uint dsa_bf16x2_to_e4m3_pow2(uint x, int e) {
#if DSA_HAS_NV_PTX && defined(DSA_NV_SM) && DSA_NV_SM >= 89
  const float s = as_float((uint)(127 - e) << 23);
  return dsa_nv_e4m3x2(as_float(x << 16) * s, as_float(x & 0xFFFF0000u) * s);
#else
  const uint v = x & 0x7FFF7FFFu;
  const uint lo = ((uint)(e + 121) << 7) * 0x10001u;
  const uint ok = ((v | 0x80008000u) - lo) & ~(v + 0x00800080u) & 0x80008000u;
  if (ok == 0x80008000u) {
    const uint r = (v + 0x00070007u + ((v >> 4) & 0x00010001u)) >> 4;
    const uint d = (r - ((uint)(e + 120) << 3) * 0x10001u) & 0x007F007Fu;
    const uint w = d | ((x >> 8) & 0x00800080u);
    return (w | (w >> 8)) & 0xFFFFu;
  }
  return dsa_bf16_to_e4m3_pow2(x & 0xFFFFu, e) | (dsa_bf16_to_e4m3_pow2(x >> 16, e) << 8);
#endif
}

/* Four bf16 (two per word, low half first) times 2^-e -> their four e4m3
 * bytes, little-endian in one word: the unit of the quantizers' stores.
 * Same precondition on e as dsa_bf16x2_to_e4m3_pow2. */
DSA_INLINE uint dsa_bf16x4_to_e4m3_pow2(uint lo, uint hi, int e) {
  return dsa_bf16x2_to_e4m3_pow2(lo, e) | (dsa_bf16x2_to_e4m3_pow2(hi, e) << 16);
}

/* Exact value; the NaN codes 0x7F/0xFF give NaN. */
DSA_INLINE float dsa_e4m3_to_f32(uint b) {
  uint s = (b & 0x80u) << 24;
  uint e = (b >> 3) & 15u, m = b & 7u;
  if (e == 15u && m == 7u) return as_float(s | 0x7FC00000u);
  float v = e ? as_float(((e + 120u) << 23) | (m << 20)) : (float)m * 0x1p-9f;
  return as_float(as_uint(v) | s);
}

/* ---- ue8m0 ---------------------------------------------------------------- */

/* 2^(u-127) for u in 1..254; u = 0 gives 0 and u = 255 gives +inf (what
 * vLLM's exp2(u - 127) with flush-to-zero gives). */
DSA_INLINE float dsa_ue8m0_to_f32(uint u) { return as_float((u & 0xFFu) << 23); }

/* ---- f16 (the matrix tiles' FP8 path) ---------------------------------- */

/* f16 bits (low 16 bits of h) as f32 (exact): the conversion instruction
 * through vload_half (core OpenCL C, half as storage, no cl_khr_fp16), as
 * the logits' vload_half2. Its bit-operation form made the emulated f16
 * MMAs (cl/dsa_tile.h, its one caller) a third slower on Intel's CPU
 * runtime (test_indexer_logits under nv-mma 27.3 -> 17.4 s, with the
 * emulation's operand words fetched once). */
DSA_INLINE float dsa_f16_to_f32(uint h) {
  const ushort b = (ushort)(h & 0xFFFFu);
  return vload_half(0, (const __private half *)&b);
}

#if DSA_HAS_NV_PTX
/* prmt in its sign mode (selector nibbles 8-B): bytes 0 and 1 of x
 * (dsa_nv_sext01) or 2 and 3 (dsa_nv_sext23) each sign-extended to a
 * 16-bit half, the first in the low half. One instruction; the e4m3 pair
 * conversions below shift and mask these halves. */
DSA_INLINE uint dsa_nv_sext01(uint x) {
  uint y;
  __asm__("prmt.b32 %0, %1, %2, 0x9180;" : "=r"(y) : "r"(x), "r"(0u));
  return y;
}
DSA_INLINE uint dsa_nv_sext23(uint x) {
  uint y;
  __asm__("prmt.b32 %0, %1, %2, 0xB3A2;" : "=r"(y) : "r"(x), "r"(0u));
  return y;
}
#endif

/* Two e4m3 bytes (the low 16 bits of x, the first in bits 0..7) as an f16
 * pair scaled by 2^-8, the first in the low half: e4m3 s.eeee.mmm moved into
 * f16 s.0eeee.mmm0000000 keeps every value, subnormals included, times
 * 2^-8 (the exponent biases 7 and 15), and the NaN codes read as +-480 *
 * 2^-8, as everywhere in dsacl. A few integer operations per pair, no table,
 * no conversion instruction; a kernel folds 2^8 back in after the product
 * (cl/dsa_tile.h's f16 multiply, the indexer logits). */
DSA_INLINE uint dsa_e4m3x2_to_f16x2_scaled(uint x) {
#if DSA_HAS_NV_PTX
  /* Three operations a pair: prmt puts byte 0 in byte 0 and its sign
   * replicated over byte 1 (selector nibble 8: sign mode), byte 1 likewise
   * in bytes 2 and 3, so each 16-bit half is the byte sign-extended; << 7
   * puts the byte's low 7 bits at 13..7 and a sign copy at 15 (and at 14,
   * and the low half's copies spill into the high half's bits 0..6), and
   * the mask 0xBF80 keeps 15 and 13..7 of each half. The same bits as the
   * carry form below (all 2^16 pairs, checked on the host with a model of
   * prmt), one operation a pair fewer. */
  return (dsa_nv_sext01(x) << 7) & 0xBF80BF80u;
#else
  /* Bytes 0 and 1 of x to bytes 0 and 2; then per 16-bit half b
   * (b + (b & 0x80)) << 7 = (b & 0x7F) << 7 | (b & 0x80) << 8 (the sign bit
   * carries into bit 8, no further). */
  const uint y = (x & 0xFFu) | ((x & 0xFF00u) << 8);
  return (y + (y & 0x00800080u)) << 7;
#endif
}
/* The same for bytes 2 and 3 of x (no shift first on NVIDIA). */
DSA_INLINE uint dsa_e4m3x2_to_f16x2_scaled_hi(uint x) {
#if DSA_HAS_NV_PTX
  return (dsa_nv_sext23(x) << 7) & 0xBF80BF80u;
#else
  return dsa_e4m3x2_to_f16x2_scaled(x >> 16);
#endif
}
/* The same values from a word of four bytes taken in another pairing:
 * bytes 0 and 2 (_even), bytes 1 and 3 (_odd), the lower-numbered byte in
 * the low half. No byte moves apart first: one shift and mask put a byte's
 * 8 bits at 14..7 of each half, and (_even) the sign carries from bit 14
 * to 15 (p + (p & bit 14)): 7 integer operations a word where the two calls
 * above take 13 without prmt. For a consumer that may take a word's
 * elements in the order 0, 2, 1, 3 (the portable logits' decode,
 * cl/indexer_logits.cl). Equal to dsa_e4m3x2_to_f16x2_scaled on every byte
 * pair (checked on the host, all 2^16; tests/test_indexer_logits.c runs
 * every code in every byte position through the logits kernels). */
DSA_INLINE uint dsa_e4m3x2_to_f16x2_scaled_even(uint w) {
  const uint p = (w << 7) & 0x7F807F80u;
  return p + (p & 0x40004000u);
}
DSA_INLINE uint dsa_e4m3x2_to_f16x2_scaled_odd(uint w) {
  /* The odd bytes' signs are already at bits 15 and 31: a shift and two
   * masks (3 operations, where the carry of _even takes 4; H200, forced
   * portable paged B = 64: 812.0 -> 809.8 us). */
  return ((w >> 1) & 0x3F803F80u) | (w & 0x80008000u);
}

/* Exact bf16 of e4m3 byte b times 2^(u-127), through fp32. */
DSA_INLINE uint dsa_dequant_e4m3_bf16(uint b, float scale) {
  return (uint)dsa_f32_to_bf16(dsa_e4m3_to_f32(b & 0xFFu) * scale);
}

/* Four e4m3 bytes (little-endian in x) times 2^(u-127) -> four bf16, two per
 * word. The product of a normal e4m3 value and a power of two is exact in
 * bf16: sign, exponent E-7+u-127 rebiased, the 3 mantissa bits. So for
 * normal codes and zeros the bf16 is pure integer arithmetic, two values per
 * 32-bit operation; a word with a subnormal or NaN code, or a scale byte
 * whose products could leave bf16's normal range, takes the exact fp32 path.
 * The dequantizing gathers are bound by this arithmetic, not by memory,
 * without the fast path. */
DSA_INLINE int dsa_dequant4_e4m3_special(uint x, uint u) {
  /* Per byte, t = its magnitude: NaN is t = 0x7F (t + 1 carries into bit
   * 7), a nonzero subnormal 1 <= t <= 7 (t + 0x7F reaches bit 7, t + 0x78
   * does not); no byte's sum carries into the next. Six operations a word
   * where a separate exponent test took nine; equal to it on every (x, u)
   * (tools/probes/dequant_prmt.c). u - 8 > 238 is u < 8 or u > 246. */
  const uint t = x & 0x7F7F7F7Fu;
  const uint special =
      ((t + 0x01010101u) | ((t + 0x7F7F7F7Fu) & ~(t + 0x78787878u))) & 0x80808080u;
  return special != 0u || u - 8u > 238u;
}
/* The integer path alone, for x and u where dsa_dequant4_e4m3_special is 0
 * (its bf16 exponent fields are at most 15 + 246 - 7 < 255: never NaN). */
DSA_INLINE uint2 dsa_dequant4_e4m3_bf16_fast(uint x, uint u) {
  const uint bias = ((u - 7u) << 7) * 0x00010001u; /* (E-7) + (u-127) + 127, per half */
  uint r[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const uint w = h ? (x >> 16) : x;
    const uint p = (w & 0xFFu) | ((w & 0xFF00u) << 8); /* bytes at bits 0 and 16 */
    const uint mag = p & 0x007F007Fu;
    const uint nz = ((mag + 0x007F007Fu) >> 7) & 0x00010001u;
    r[h] = (((mag << 4) + bias) & (nz * 0xFFFFu)) | ((p & 0x00800080u) << 8);
  }
  return (uint2)(r[0], r[1]);
}
/* The exact fp32 path for four bytes. */
DSA_INLINE uint2 dsa_dequant4_e4m3_bf16_exact(uint x, uint u) {
  const float sc = dsa_ue8m0_to_f32(u);
  return (uint2)(dsa_dequant_e4m3_bf16(x, sc) | (dsa_dequant_e4m3_bf16(x >> 8, sc) << 16),
                 dsa_dequant_e4m3_bf16(x >> 16, sc) | (dsa_dequant_e4m3_bf16(x >> 24, sc) << 16));
}
DSA_INLINE uint2 dsa_dequant4_e4m3_bf16(uint x, uint u) {
  if (dsa_dequant4_e4m3_special(x, u)) return dsa_dequant4_e4m3_bf16_exact(x, u);
  return dsa_dequant4_e4m3_bf16_fast(x, u);
}
/* The fast path by prmt (NVIDIA) for the fused attention's dequantization
 * (cl/sparse_mla.cl, fd_dequant), the integer chain of a latency-bound
 * kernel. Equal to dsa_dequant4_e4m3_bf16_fast on every (x, u) (checked on
 * the host with prmt emulated, all byte pairs in both halves, every u:
 * tools/probes/dequant_prmt.c). H200, fused T = 64 H = 64: 115.6 -> 111.7
 * us, the other shapes -3.6 %. The gathers keep the shift form: with this
 * one the slots gather ran 25.2 -> 26.9 us (session 17; session 18 found
 * the shorter special test above neutral there, so the conversion did it;
 * docs/PERFORMANCE.md). */
DSA_INLINE uint2 dsa_dequant4_e4m3_bf16_prmt(uint x, uint u) {
#if DSA_HAS_NV_PTX
  const uint bias = ((u - 7u) << 7) * 0x00010001u; /* (E-7) + (u-127) + 127, per half */
  uint r[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    /* Three prmt: the pair's bytes at bits 0 and 16 (p), the nonzero masks
     * (the sign of byte 0 and 2 of mag + 0x7F: set iff mag != 0, replicated
     * over each half), and the bytes at bits 8 and 24, whose top bits are
     * the signs: 8 operations a half where the masks-and-shifts form takes
     * ~15. */
    uint p, m, q;
    if (h) {
      __asm__("prmt.b32 %0, %1, %2, 0x4342;" : "=r"(p) : "r"(x), "r"(0u));
      __asm__("prmt.b32 %0, %1, %2, 0x3424;" : "=r"(q) : "r"(x), "r"(0u));
    } else {
      __asm__("prmt.b32 %0, %1, %2, 0x4140;" : "=r"(p) : "r"(x), "r"(0u));
      __asm__("prmt.b32 %0, %1, %2, 0x1404;" : "=r"(q) : "r"(x), "r"(0u));
    }
    const uint mag = p & 0x007F007Fu;
    __asm__("prmt.b32 %0, %1, %2, 0xAA88;" : "=r"(m) : "r"(mag + 0x007F007Fu), "r"(0u));
    r[h] = ((mag * 16u + bias) & m) | (q & 0x80008000u);
  }
  return (uint2)(r[0], r[1]);
#else
  return dsa_dequant4_e4m3_bf16_fast(x, u);
#endif
}

/* The fused attention's dequantization by conversion instructions (NVIDIA
 * sm_89+): e4m3 pairs to f16 pairs (cvt.rn.f16x2.e4m3x2, exact), each f16
 * to f32 (exact), times sc = dsa_ue8m0_to_f32(u) (mul.rn.f32, no flush),
 * and to bf16 pairs by RNE (cvt.rn.bf16x2.f32): the exact path's
 * arithmetic (dsa_dequant4_e4m3_bf16_exact: the same f32 product, RNE), in
 * 12 instructions a word where the integer path and its special test take
 * ~25. Only a NaN differs (here 0x7FFF, there 0x7FC0): for x and u where
 * dsa_dequant4_e4m3_nan is 0 there is none (an e4m3 NaN code, or u = 255
 * whose +inf scale makes 0 x inf). The fused attention only: in the
 * gathers it was slower than the integer path (H100, slots 64x640 33.8 ->
 * 35.2 us), as prmt was (session 17). */
DSA_INLINE int dsa_dequant4_e4m3_nan(uint x, uint u) {
  return (((x & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u) != 0u || u == 255u;
}
#if DSA_HAS_NV_PTX && defined(DSA_NV_SM) && DSA_NV_SM >= 89
#define DSA_DEQUANT_CVT 1
DSA_INLINE uint2 dsa_dequant4_e4m3_bf16_cvt(uint x, float sc) {
  uint lo, hi;
  __asm__("{\n\t"
          ".reg .b16 b0, b1;\n\t"
          ".reg .b32 h0, h1;\n\t"
          ".reg .f16 e0, e1, e2, e3;\n\t"
          ".reg .f32 f0, f1, f2, f3;\n\t"
          "mov.b32 {b0, b1}, %2;\n\t"
          "cvt.rn.f16x2.e4m3x2 h0, b0;\n\t"
          "cvt.rn.f16x2.e4m3x2 h1, b1;\n\t"
          "mov.b32 {e0, e1}, h0;\n\t"
          "mov.b32 {e2, e3}, h1;\n\t"
          "cvt.f32.f16 f0, e0;\n\t"
          "cvt.f32.f16 f1, e1;\n\t"
          "cvt.f32.f16 f2, e2;\n\t"
          "cvt.f32.f16 f3, e3;\n\t"
          "mul.rn.f32 f0, f0, %3;\n\t"
          "mul.rn.f32 f1, f1, %3;\n\t"
          "mul.rn.f32 f2, f2, %3;\n\t"
          "mul.rn.f32 f3, f3, %3;\n\t"
          "cvt.rn.bf16x2.f32 %0, f1, f0;\n\t"
          "cvt.rn.bf16x2.f32 %1, f3, f2;\n\t"
          "}"
          : "=r"(lo), "=r"(hi)
          : "r"(x), "f"(sc));
  return (uint2)(lo, hi);
}
/* The same products without conversion instructions: prmt (sign mode)
 * makes each byte of a pair a sign-extended 16-bit half, << 4 and the mask
 * 0x87F0 leave the sign at 15 and the byte's exponent and mantissa at 10..4:
 * a bf16 of the e4m3 value times 2^-120, exact for every code but NaN
 * (subnormal codes become bf16 subnormals 0.mmm x 2^-126, zero stays
 * zero); then one bf16 multiply by m2 = 2^(u - 7) in both halves
 * (dsa_dequant_hm_scale; fma.rn.bf16x2 with -0, sm_80+), exact where the
 * product is a normal bf16. 8 instructions a word on the ALU and FMA pipes
 * where the conversion form takes 12, 8 of them conversions. Valid where
 * dsa_dequant4_e4m3_hm_special is 0: no NaN code, 10 <= u <= 134 (the
 * multiplier's exponent field u + 120 <= 254; every product of a nonzero
 * code at least 2^-9 x 2^(u - 127) >= 2^-126, a normal). Equal to
 * dsa_dequant4_e4m3_bf16_exact there (tools/probes/dequant_cvt.c, on the
 * device: every byte pair in both halves, every such u). The fused
 * attention only: as the default of the gathers' dsa_dequant4_e4m3_bf16 it
 * made the slots gather slower (H200, 64x640 25.2 -> 29.3 us, 128x1152
 * 71.6 -> 77.0; the paged gather and the two-stage form unchanged;
 * session 26), as the conversion and prmt forms did before. */
DSA_INLINE int dsa_dequant4_e4m3_hm_special(uint x, uint u) {
  /* The cvt form's NaN test (its u = 255 lies outside [10, 134] too). */
  return dsa_dequant4_e4m3_nan(x, u) || u - 10u > 124u;
}
DSA_INLINE uint dsa_dequant_hm_scale(uint u) { return ((u + 120u) << 7) * 0x00010001u; }
DSA_INLINE uint2 dsa_dequant4_e4m3_bf16_hm(uint x, uint m2) {
  const uint y0 = (dsa_nv_sext01(x) << 4) & 0x87F087F0u, y1 = (dsa_nv_sext23(x) << 4) & 0x87F087F0u;
  uint lo, hi;
  __asm__("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(lo) : "r"(y0), "r"(m2), "r"(0x80008000u));
  __asm__("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(hi) : "r"(y1), "r"(m2), "r"(0x80008000u));
  return (uint2)(lo, hi);
}
#else
#define DSA_DEQUANT_CVT 0
#endif

/* e = ceil(log2(amax / 448)) exactly, for a positive normal amax given by its
 * bits. amax = m * 2^E with m in [1, 2) and 448 = 1.75 * 2^8, so the ratio is
 * (m / 1.75) * 2^(E-8) and its ceil-log2 is E-8, plus one when m > 1.75. */
DSA_INLINE int dsa_e4m3_scale_exp(uint amax_bits) {
  int E = (int)(amax_bits >> 23) - 127;
  return E - 8 + ((amax_bits & 0x7FFFFFu) > 0x600000u ? 1 : 0);
}

/* |x| of a bf16 as fp32 bits with NaN mapped to 0: the max over such keys is
 * the amax that ignores NaN (IEEE maxNum, as Triton's max.f32 does). */
DSA_INLINE uint dsa_bf16_abs_key(ushort h) {
  uint a = ((uint)h << 16) & 0x7FFFFFFFu;
  return a > 0x7F800000u ? 0u : a;
}

/* The larger key of the two bf16 in a word (loads give them in pairs). */
DSA_INLINE uint dsa_bf16x2_abs_key(uint w) {
  return max(dsa_bf16_abs_key((ushort)w), dsa_bf16_abs_key((ushort)(w >> 16)));
}

/* The largest dsa_bf16_abs_key of the 2n bf16 in w[0..n): the max of the
 * 15-bit magnitudes (two ops a word), redone per value only when that max
 * is a NaN (rare), which then drops out as dsa_bf16_abs_key says. */
DSA_INLINE uint dsa_bf16_amax_key(const uint *w, int n) {
  uint mv = 0u;
#pragma unroll
  for (int j = 0; j < n; j++) {
    const uint v = w[j] & 0x7FFF7FFFu;
    mv = max(mv, max(v & 0xFFFFu, v >> 16));
  }
  if (mv > 0x7F80u) {
    mv = 0u;
#pragma unroll
    for (int j = 0; j < n; j++) mv = max(mv, dsa_bf16x2_abs_key(w[j]) >> 16);
  }
  return mv << 16;
}

/* s / d for s >= 0, d > 0: in 32 bits when s fits, since a 64-bit division
 * is a long emulated sequence on GPUs (slot numbers past 2^31 are rare). */
DSA_INLINE long dsa_div_nonneg(long s, int d) {
  return s <= 0x7FFFFFFFL ? (long)((uint)s / (uint)d) : s / d;
}

/* ---- vector access ---------------------------------------------------------
 * Row bases that are 16-byte aligned get one 16-byte access; others fall back
 * to vload/vstore, which need only element alignment. The choice is a uniform
 * kernel argument, so the branch costs nothing. */
DSA_INLINE uint4 dsa_load16(__global const uchar *p, int aligned) {
  return aligned ? *(__global const uint4 *)p : as_uint4(vload16(0, p));
}
DSA_INLINE void dsa_store16(__global uchar *p, uint4 v, int aligned) {
  if (aligned)
    *(__global uint4 *)p = v;
  else
    vstore16(as_uchar16(v), 0, p);
}
DSA_INLINE uint2 dsa_load8(__global const uchar *p, int aligned) {
  return aligned ? *(__global const uint2 *)p : as_uint2(vload8(0, p));
}
DSA_INLINE void dsa_store8(__global uchar *p, uint2 v, int aligned) {
  if (aligned)
    *(__global uint2 *)p = v;
  else
    vstore8(as_uchar8(v), 0, p);
}

/* Kernel argument groups (tensors, paged caches) and their device structs. */
#include "dsa_args.h"

/* Orders this work-item's global writes before its later global accesses
 * for every work-group of the device (a hand-off to the last group to finish:
 * the top-k split's merge, the C128 compressor's tail).
 * OpenCL 1.2's mem_fence names no scope; on NVIDIA an acq_rel fence of
 * device (gpu) scope. CPU devices keep their caches coherent. */
DSA_INLINE void dsa_fence_device(void) {
#if DSA_HAS_NV_PTX && defined(DSA_NV_SM) && DSA_NV_SM >= 70
  /* The release (writer) and acquire (reader) fence of PTX's
   * message-passing pattern around the row counter's relaxed atomic
   * (sm_70+); membar.gl (fence.sc.gpu) and OpenCL's mem_fence before it
   * cost more (H200, 64 x 32768 k = 512: about 0.1-0.2 us;
   * docs/PERFORMANCE.md, session 22). */
  __asm__ __volatile__("fence.acq_rel.gpu;" ::: "memory");
#elif DSA_HAS_NV_PTX
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  __asm__ __volatile__("membar.gl;");
#else
  mem_fence(CLK_GLOBAL_MEM_FENCE);
#endif
}

/* A hand-off to the last of nact groups (every item calls it, after
 * writing its share of the group's results; the top-k split's lists, the
 * C128 compressor's sums): publishes them, counts the group on *cnt and
 * returns, in every item, whether this group counted last, whose items
 * may then read what every group wrote. NVIDIA (sm_70+):
 * the barrier orders the items' stores before item 0's fence, and PTX's
 * fences are cumulative (a release covers the writes its thread has
 * observed, the barrier's included), so one item fences, counts and, in
 * the last group, fences again before the barrier that lets the others
 * read (the pattern of CUDA's grid sync; H100, 64 x 32768 k = 512:
 * 20.8-21.2 -> 20.7-20.9 us, docs/PERFORMANCE.md, session 23). Elsewhere
 * every item fences: OpenCL 1.2's mem_fence orders one work-item's
 * accesses only. */
DSA_INLINE bool dsa_group_publish(__global uint *cnt, uint nact, __local uint *sel, uint tid) {
#if DSA_HAS_NV_PTX && defined(DSA_NV_SM) && DSA_NV_SM >= 70
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  if (tid == 0u) {
    dsa_fence_device();
    const uint v = atomic_inc(cnt);
    if (v == nact - 1u) dsa_fence_device();
    sel[0] = v;
  }
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  return sel[0] == nact - 1u;
#else
  dsa_fence_device();
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  if (tid == 0u) sel[0] = atomic_inc(cnt);
  barrier(CLK_LOCAL_MEM_FENCE);
  const bool last = sel[0] == nact - 1u;
  if (last) dsa_fence_device();
  return last;
#endif
}

#endif
