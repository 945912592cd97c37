/* Inverse RoPE + block-scaled FP8 quantization of the attention output
 * (SPEC-reference §8.6; vLLM fused_inv_rope_fp8_quant; semantics in
 * include/dsacl/output_quant.h and docs/OUTPUT_QUANT.md).
 *
 * Layout: o bf16 [T, H, 512]; out e4m3 [G, T, hpg * 512] (head h is slot
 * h % hpg of group h / hpg); scales f32 [G, 4 * hpg, Tp] or packed UE8M0 i32
 * [G, hpg, Tp], token axis innermost in vLLM's layout (any strides here).
 *
 * Grid: one row per (token t < Tp, head h), n = t * H + h; a row is OQ_LANES
 * = 32 lanes, lane l owning dims [16l, 16l + 16): lanes 0..27 NoPE, 28..31
 * the 32 RoPE pairs (8 each), lanes 8b..8b+7 quantization block b. A
 * work-group is (32, OQ_ROWS) rows; the eight lanes of a block trade their
 * |x| maxima through local memory (one barrier, passed by every row, live
 * or not). Rows t >= T only zero their scale entries (vLLM's TMA padding).
 *
 * Numerics (the same bytes on every device; nothing depends on contraction
 * or on the device's log2/division):
 *   rotation  e' = fma(e, c, fl(o*s)), o' = fma(o, c, -fl(e*s)) (fp32);
 *   amax      max of |x| as fp32 bit patterns (NaN keys 0: ignored), floored
 *             at fl32(1e-10);
 *   exponent  ceil(RN32(log2(fl32(amax * fl32(1/448))))) from the bits of
 *             the product (oq_scale_exp);
 *   bytes     x * 2^-e (exact) encoded RNE, saturating; NaN -> 0x7E. */
#pragma OPENCL FP_CONTRACT OFF
#include "dsa_common.h"

/* OQ_LANES and OQ_ROWS come from the launcher (src/op_output_quant.c). */
#if OQ_LANES != 32
#error "output_quant.cl: the lane mapping needs OQ_LANES = 32"
#endif
#define OQ_NOPE_LANES 28
#define OQ_EPS_BITS 0x2EDBE6FFu /* fl32(1e-10), vLLM's eps */
#define OQ_RCP448_BITS 0x3B124925u /* fl32(1/448) */

/* ceil(RN32(log2 r)) for r = fl32(amax * fl32(1/448)), amax >= fl32(1e-10)
 * (so r is normal) or +inf (gives 128: scale +inf). With r = (1 + j 2^-23)
 * 2^k, log2 r = k + log2(1 + j 2^-23), and its fp32 rounding exceeds k
 * exactly when log2(1 + j 2^-23) exceeds half the fp32 spacing just above k,
 * 2^(b - 24), where 2^b is the binade of the values just above k (b =
 * floor(log2 k) for k > 0; for k < 0 the binade of |k| - 0, one lower when
 * |k| is a power of two). That is j > floor(2^23 (2^(2^(b-24)) - 1)) =
 * floor(2^(b-1) ln 2 (1 + ~2^-20)): 0, 0, 0, 1, 2, 5, 11, 22 for b = -1..6
 * (none of those products lies within 0.05 of an integer). k = 0: any j > 0
 * gives k + 1. |k| <= 119 here, so b <= 6. */
DSA_INLINE int oq_scale_exp(float amax) {
  const uint u = as_uint(amax * as_float(OQ_RCP448_BITS));
  if (u >= 0x7F800000u) return 128;
  const int k = (int)(u >> 23) - 127;
  const uint j = u & 0x7FFFFFu;
  if (j == 0u) return k;
  if (k == 0) return 1;
  /* floor(log2 k), or for k < 0 floor(log2(|k| - 1)) (one lower exactly when
   * |k| is a power of two; k = -1: clz(0) = 32 gives -1). */
  const uint a = abs(k);
  const int b = 31 - (int)clz(k > 0 ? a : a - 1u);
  const uint jmax = b <= 1 ? 0u : b == 2 ? 1u : b == 3 ? 2u : b == 4 ? 5u : b == 5 ? 11u : 22u;
  return k + (j > jmax ? 1 : 0);
}

/* The e4m3 byte of x / 2^e (e from oq_scale_exp). */
DSA_INLINE uint oq_quant(float x, int e) {
  const uint a = as_uint(x) & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7Eu; /* NaN: the clamp's min drops it */
  if (e == 128) return a == 0x7F800000u ? 0x7Eu : (as_uint(x) >> 24) & 0x80u; /* x / inf */
  return dsa_f32_to_e4m3(x * as_float((uint)(127 - e) << 23));
}

/* |x| key: fp32 bits of |x|, NaN -> 0. */
DSA_INLINE uint oq_key(float x) {
  const uint a = as_uint(x) & 0x7FFFFFFFu;
  return a > 0x7F800000u ? 0u : a;
}

DSA_INLINE uint oq_scale_bits(int e) { return e == 128 ? 0x7F800000u : (uint)(e + 127) << 23; }

#define OQ_PARAMS                                                                           \
  DSA_CTENSOR3(o), DSA_CTENSOR1(pos), int pos_i32, DSA_CTENSOR2(cs), int cs_bf16, long n_pos, \
      DSA_TENSOR3(out), DSA_TENSOR3(sc), int H, int hpg, long T, long Tp, int packed, DSA_FAULTS

/* The body, inlined into two kernels: positions and cos/sin dtypes as
 * arguments, and the i64 + f32 pair as constants (the dtype branches around
 * the position and cos/sin loads cost 6-8 % on the H200). part_row: this
 * row's OQ_LANES words of the group's local memory. */
DSA_INLINE_ALWAYS void oq_body(OQ_PARAMS, __local uint *part_row) {
  const uint lane = get_local_id(0);
  const ulong n = get_global_id(1);
  /* Host guarantees Tp * H < 2^31. */
  const bool row = n < (ulong)Tp * (ulong)H;
  uint t = 0u, h = 0u;
  if (row) {
    t = (uint)n / (uint)H;
    h = (uint)n - t * (uint)H;
  }
  const bool live = row && (long)t < T;
  const uint g = row ? h / (uint)hpg : 0u, hi = row ? h - g * (uint)hpg : 0u;

  float v[16]; /* zeroed: Oclgrind tracks the rows that never load as uninitialized */
#pragma unroll
  for (int j = 0; j < 16; j++) v[j] = 0.0f;
  uint key = 0u;
  if (live) {
    const long p = dsa_load_pos(pos_mem + pos_off + (ulong)t * pos_s0, pos_i32);
    const bool pos_ok = p >= 0 && p < n_pos;
    if (!pos_ok && lane == 0u) dsa_fault(faults, DSA_FAULT_POSITION_RANGE);
    __global const uchar *src = o_mem + o_off + (ulong)t * o_s0 + (ulong)h * o_s1 + lane * 32u;
    const int al = o_al >= 16;
    const uint4 r0 = dsa_load16(src, al), r1 = dsa_load16(src + 16, al);
    const uint w[8] = {r0.x, r0.y, r0.z, r0.w, r1.x, r1.y, r1.z, r1.w};
#pragma unroll
    for (int j = 0; j < 8; j++) {
      v[2 * j] = dsa_bf16_to_f32((ushort)w[j]);
      v[2 * j + 1] = dsa_bf16_to_f32((ushort)(w[j] >> 16));
    }
    if (lane >= OQ_NOPE_LANES && pos_ok) {
      __global const uchar *crow = cs_mem + cs_off + (ulong)p * cs_s0;
      const float8 cv = dsa_load_cs8(crow, cs_bf16, 8u * (lane - OQ_NOPE_LANES));
      const float8 sv = dsa_load_cs8(crow, cs_bf16, 32u + 8u * (lane - OQ_NOPE_LANES));
      const float c[8] = {cv.s0, cv.s1, cv.s2, cv.s3, cv.s4, cv.s5, cv.s6, cv.s7};
      const float s[8] = {sv.s0, sv.s1, sv.s2, sv.s3, sv.s4, sv.s5, sv.s6, sv.s7};
#pragma unroll
      for (int i = 0; i < 8; i++) {
        const float e = v[2 * i], od = v[2 * i + 1];
        v[2 * i] = fma(e, c[i], od * s[i]);
        v[2 * i + 1] = fma(od, c[i], -(e * s[i]));
      }
    }
#pragma unroll
    for (int j = 0; j < 16; j++) key = max(key, oq_key(v[j]));
  }
  part_row[lane] = key;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!row) return;

  __global uchar *scrow = sc_mem + sc_off + (ulong)g * sc_s0 + (ulong)t * sc_s2;
  if (!live) { /* padding token: zero scales */
    if (packed) {
      if (lane == 0u) *(__global uint *)(scrow + (ulong)hi * sc_s1) = 0u;
    } else if (lane < 4u) {
      *(__global uint *)(scrow + (ulong)(4u * hi + lane) * sc_s1) = 0u;
    }
    return;
  }

  /* This lane's block exponent. */
  const uint blk = lane >> 3;
  uint m = OQ_EPS_BITS;
#pragma unroll
  for (int i = 0; i < 8; i++) m = max(m, part_row[8u * blk + i]);
  const int e = oq_scale_exp(as_float(m));

  uint q[4];
#pragma unroll
  for (int j = 0; j < 4; j++)
    q[j] = oq_quant(v[4 * j], e) | (oq_quant(v[4 * j + 1], e) << 8) |
           (oq_quant(v[4 * j + 2], e) << 16) | (oq_quant(v[4 * j + 3], e) << 24);
  __global uchar *dst = out_mem + out_off + (ulong)g * out_s0 + (ulong)t * out_s1 +
                        (ulong)hi * 512u + lane * 16u;
  dsa_store16(dst, (uint4)(q[0], q[1], q[2], q[3]), out_al >= 16);

  if (packed) {
    if (lane == 0u) {
      uint word = 0u;
#pragma unroll
      for (int b = 0; b < 4; b++) {
        uint mb = OQ_EPS_BITS;
#pragma unroll
        for (int i = 0; i < 8; i++) mb = max(mb, part_row[8 * b + i]);
        word |= ((oq_scale_bits(oq_scale_exp(as_float(mb))) >> 23) & 0xFFu) << (8 * b);
      }
      *(__global uint *)(scrow + (ulong)hi * sc_s1) = word;
    }
  } else if ((lane & 7u) == 0u) {
    *(__global uint *)(scrow + (ulong)(4u * hi + blk) * sc_s1) = oq_scale_bits(e);
  }
}

#define OQ_ARGS1 DSA_TENSOR3_ARGS(o), DSA_TENSOR1_ARGS(pos)
#define OQ_ARGS2 DSA_TENSOR2_ARGS(cs)
#define OQ_ARGS3 \
  n_pos, DSA_TENSOR3_ARGS(out), DSA_TENSOR3_ARGS(sc), H, hpg, T, Tp, packed, faults

/* Any position / cos-sin dtypes (the flags as given). */
__kernel __attribute__((reqd_work_group_size(OQ_LANES, OQ_ROWS, 1))) void
output_inv_rope_fp8_quant(OQ_PARAMS) {
  __local uint part[OQ_ROWS][OQ_LANES];
  oq_body(OQ_ARGS1, pos_i32, OQ_ARGS2, cs_bf16, OQ_ARGS3, part[get_local_id(1)]);
}

/* i64 positions, f32 cos/sin (the launcher's pick for them; the same
 * arguments, the two flags ignored). */
__kernel __attribute__((reqd_work_group_size(OQ_LANES, OQ_ROWS, 1))) void
output_inv_rope_fp8_quant_i64f32(OQ_PARAMS) {
  __local uint part[OQ_ROWS][OQ_LANES];
  (void)pos_i32, (void)cs_bf16;
  oq_body(OQ_ARGS1, 0, OQ_ARGS2, 0, OQ_ARGS3, part[get_local_id(1)]);
}
