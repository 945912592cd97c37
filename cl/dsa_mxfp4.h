/* MXFP4 device helpers: E2M1 encode (two rounding modes) and decode, the
 * 32-element block exponent, and the GPT-J interleaved RoPE pair
 * (SPEC-reference §2.4-2.6). Integer bit work wherever rounding matters, so
 * results do not depend on denormal flushing or contraction. */
#ifndef DSA_MXFP4_H
#define DSA_MXFP4_H

#include "dsa_common.h"

/* E2M1 rounding modes DSA_E2M1_RNE / DSA_E2M1_LEGACY: build options from
 * DSA_E2M1_MODE_MAP (include/dsacl/indexer_quant.h). */

/* ---- decode --------------------------------------------------------------- */

/* Exact value of the low nibble: codes 0..7 = {0, .5, 1, 1.5, 2, 3, 4, 6},
 * bit 3 = sign (0x8 decodes to -0.0). Built from bits: code c >= 2 has
 * exponent (c >> 1) - 1 and one mantissa bit c & 1; code 1 is 0.5. */
DSA_INLINE float dsa_e2m1_to_f32(uint nibble) {
  const uint c = nibble & 7u;
  const uint s = (nibble & 8u) << 28;
  const uint mag = c >= 2u ? ((((c >> 1) + 126u) << 23) | ((c & 1u) << 22))
                           : (c ? 0x3F000000u : 0u);
  return as_float(s | mag);
}

/* ---- block exponent ------------------------------------------------------- */

/* RNE mode floor 6 * 2^-126 and legacy floor fl32(1e-4), as fp32 bits. */
#define DSA_MXFP4_FLOOR_RNE_BITS 0x01C00000u
#define DSA_MXFP4_FLOOR_LEGACY_BITS 0x38D1B717u

/* e = ceil(log2(r)) of the fp32 ratio r of a block's amax (|x| bits, NaN
 * already mapped to 0) to 6, clamped to [-127, 127]; the scale byte is e + 127.
 *   RNE:    amax' = max(amax, 6*2^-126), r = fl32(amax' * fl32(1/6))
 *   legacy: amax' = max(amax, 1e-4),     r = amax' / 6 correctly rounded
 * Both are the same integer rule for a normal amax' = m * 2^E, m in [1, 2):
 * r is 2m/3 * 2^(E-2); for m < 1.5 it lies in [2^(E-3), 2^(E-2)) and is never a
 * power of two, m = 1.5 gives exactly 2^(E-2) (fl32(1/6) = (1/6)(1 + 2^-25)
 * moves 1.5/6 by less than half an ulp), and m > 1.5 puts it in
 * (2^(E-2), 2^(E-1)): e = E - 2 + [m > 1.5]. Rounding never crosses a power
 * of two, since the nearest candidates (m = 1.5 -/+ 2^-23) land well inside
 * an ulp step (checked exhaustively against float arithmetic by the test
 * reference). amax' = +inf gives 127. */
DSA_INLINE int dsa_mxfp4_scale_exp(uint amax_bits, int mode) {
  const uint floor_bits = mode == DSA_E2M1_LEGACY ? DSA_MXFP4_FLOOR_LEGACY_BITS
                                                  : DSA_MXFP4_FLOOR_RNE_BITS;
  const uint a = max(amax_bits, floor_bits);
  if (a >= 0x7F800000u) return 127;
  const int E = (int)(a >> 23) - 127;
  return min(E - 2 + ((a & 0x7FFFFFu) > 0x400000u ? 1 : 0), 127);
}

/* ---- encode --------------------------------------------------------------- */

/* Nibble of y = x * 2^-e for x given by its fp32 bits and e in [-127, 127],
 * without forming y: v = 2 * floor(|y| * 4) + [fraction != 0] (capped) is
 * computed from x's significand by an integer shift, and the E2M1 thresholds
 * {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5} = {1, 3, 5, 7, 10, 14, 20} quarters
 * become comparisons on v: |y| > T  <=>  v > 2T, |y| >= T  <=>  v >= 2T.
 *   RNE (cvt.rn.satfinite.e2m1x2): ties to even code, sign always copied
 *     (-0.0 -> 0x8); code = [v>2]+[v>=6]+[v>10]+[v>=14]+[v>20]+[v>=28]+[v>40].
 *   legacy (_e2m1_nibble): every threshold strictly exceeded, ties to the
 *     lower code; sign only when the code is non-zero.
 * NaN gives 0x7 in both modes (the legacy compare chain falls through to
 * code 7 with no sign; assumed for the PTX instruction). */
DSA_INLINE uint dsa_e2m1_encode_bits(uint xbits, int e, int mode) {
  const uint a = xbits & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 7u;
  const uint ex = a >> 23;
  const uint m = (a & 0x7FFFFFu) | (ex ? 0x800000u : 0u);
  /* |y| * 4 = m * 2^(ex' - 150 + 2 - e), ex' = max(ex, 1); right shift sh. */
  const int sh = 148 + e - (int)(ex ? ex : 1u);
  uint v;
  if (sh <= 0 || ex == 255u) {
    v = 63u; /* |y| >= 2^22 or infinite: far above 6 */
  } else if (sh >= 25) {
    v = m ? 1u : 0u; /* below a quarter */
  } else {
    const uint q = m >> sh;
    const uint sticky = (m & ((1u << sh) - 1u)) ? 1u : 0u;
    v = 2u * min(q, 31u) + sticky;
  }
  uint code;
  if (mode == DSA_E2M1_LEGACY) {
    code = (v >= 3u) + (v >= 7u) + (v >= 11u) + (v >= 15u) + (v >= 21u) + (v >= 29u) + (v >= 41u);
    return code | ((xbits >> 28) & 8u & (code ? 8u : 0u));
  }
  code = (v >= 3u) + (v >= 6u) + (v >= 11u) + (v >= 14u) + (v >= 21u) + (v >= 28u) + (v >= 41u);
  return code | ((xbits >> 28) & 8u);
}

/* Nibble of a bf16 value h times 2^-e. */
DSA_INLINE uint dsa_bf16_to_e2m1(uint h, int e, int mode) {
  return dsa_e2m1_encode_bits((h & 0xFFFFu) << 16, e, mode);
}

/* The same rule for a whole block of bf16 values at once: the E2M1 decision
 * points T * 2^e, T in quarters Q = {1, 3, 5, 7, 10, 14, 20}, are exact bf16
 * values for every e in [-126, 127] (at most 3 significant bits, subnormals
 * included), and non-negative bf16 bit patterns order like their values. So
 * each threshold becomes one integer "|h| >= g" per element; a strict
 * threshold is the next bit pattern (+1). A threshold past the finite range
 * is 0x7F80: only inf reaches it. NaN (above 0x7F80) passes all seven:
 * code 7, and the sign is dropped for it. */
typedef struct dsa_e2m1_thr {
  uint g[7];
  uint g2[7]; /* g in both 16-bit halves, for dsa_bf16x2_to_e2m1_t */
} dsa_e2m1_thr;

DSA_INLINE dsa_e2m1_thr dsa_e2m1_thresholds(int e, int mode) {
  /* Q = 1.f * 2^p: p and the 7-bit f of each quarter count. */
  const int qp[7] = {0, 1, 2, 2, 3, 3, 4};
  const uint qf[7] = {0x00u, 0x40u, 0x20u, 0x60u, 0x20u, 0x60u, 0x20u};
  const uint qv[7] = {1u, 3u, 5u, 7u, 10u, 14u, 20u};
  /* RNE: strict at 0.25, 1.25, 2.5, 5 (ties go down there), >= elsewhere;
   * legacy: strict everywhere. */
  const uint strict_rne[7] = {1u, 0u, 1u, 0u, 1u, 0u, 1u};
  dsa_e2m1_thr t;
#pragma unroll
  for (int k = 0; k < 7; k++) {
    const int biased = qp[k] + e - 2 + 127;
    uint bits;
    if (biased >= 255)
      bits = 0x7F80u;
    else if (biased >= 1)
      bits = ((uint)biased << 7) | qf[k];
    else
      bits = qv[k] << (e + 131); /* subnormal: Q * 2^(e-2) / 2^-133 */
    const uint strict = mode == DSA_E2M1_LEGACY ? 1u : strict_rne[k];
    t.g[k] = min(bits + (bits < 0x7F80u ? strict : 0u), 0x7F80u);
    t.g2[k] = t.g[k] * 0x10001u;
  }
  return t;
}

/* Nibble of bf16 h times 2^-e, with t = dsa_e2m1_thresholds(e, mode). */
DSA_INLINE uint dsa_bf16_to_e2m1_t(uint h, const dsa_e2m1_thr *t, int mode) {
  const uint a = h & 0x7FFFu;
  const uint code = (a >= t->g[0]) + (a >= t->g[1]) + (a >= t->g[2]) + (a >= t->g[3]) +
                    (a >= t->g[4]) + (a >= t->g[5]) + (a >= t->g[6]);
  const uint sign = (h >> 12) & 8u & (a <= 0x7F80u ? 8u : 0u);
  return code | (mode == DSA_E2M1_LEGACY ? (code ? sign : 0u) : sign);
}

/* dsa_bf16_to_e2m1_t on both bf16 of a word at once -> one byte, the low
 * half's nibble low. Each threshold test is one subtraction on the pair:
 * (|h| | 0x8000) - g keeps bit 15 iff |h| >= g, and stays in [0x80, 0xFFFF]
 * (|h| <= 0x7FFF, g <= 0x7F80), so no borrow crosses into the high half. The
 * seven tests sum to the code in bits 0..2 and 16..18. NaN is |h| >= 0x7F81. */
DSA_INLINE uint dsa_bf16x2_to_e2m1_t(uint x, const dsa_e2m1_thr *t, int mode) {
  const uint a = (x & 0x7FFF7FFFu) | 0x80008000u;
  uint code = 0u;
#pragma unroll
  for (int k = 0; k < 7; k++) code += ((a - t->g2[k]) >> 15) & 0x00010001u;
  const uint nan = ((a - 0x7F817F81u) >> 15) & 0x00010001u;
  uint sign = (x >> 15) & 0x00010001u & ~nan;
  if (mode == DSA_E2M1_LEGACY) sign &= ((a - t->g2[0]) >> 15); /* only when code != 0 */
  const uint r = code | (sign << 3);
  return (r & 0xFu) | ((r >> 12) & 0xF0u);
}

/* One 32-element block: bf16 values (two per word, low half first) times
 * 2^-e -> 16 bytes of nibbles, element 2i in the low nibble of byte i. The
 * thresholds are built once for the block, not per value. */
DSA_INLINE uint4 dsa_bf16x32_to_e2m1(const uint *wd, int e, int mode) {
  const dsa_e2m1_thr thr = dsa_e2m1_thresholds(e, mode);
  uint ob[4];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    uint v = 0u;
#pragma unroll
    for (int b = 0; b < 4; b++) v |= dsa_bf16x2_to_e2m1_t(wd[4 * j + b], &thr, mode) << (8 * b);
    ob[j] = v;
  }
  return (uint4)(ob[0], ob[1], ob[2], ob[3]);
}

/* ---- RoPE (§2.6) ------------------------------------------------------------ */

/* GPT-J pair (e, o) rotated by (c, s) exactly as vLLM's NVIDIA code does:
 * e' = fma(e, c, -fl32(o*s)), o' = fma(o, c, fl32(e*s)). The products are
 * separate statements passed as fma() arguments, so no contraction can fuse
 * them. Returns (e', o') rounded to bf16 (the bits), e' in the low half. */
DSA_INLINE uint dsa_rope_pair_bf16(float e, float o, float c, float s) {
  const float os = o * s;
  const float es = e * s;
  const float re = fma(e, c, -os);
  const float ro = fma(o, c, es);
  return (uint)dsa_f32_to_bf16(re) | ((uint)dsa_f32_to_bf16(ro) << 16);
}

#endif
