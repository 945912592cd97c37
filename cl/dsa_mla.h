/* The fp8_ds_mla token layout (SPEC-reference §3.1) and its quantization
 * (§8.1), shared by the two kernels that write it: mla_cache_insert and the
 * KV rows of mla_qnorm. Both lay a row out the same way: 32 lanes, lane l
 * owning dims [16l, 16l+16), lanes 0..27 the seven 64-dim NoPE blocks (four
 * lanes each), lanes 28..31 the RoPE dims. */
#ifndef DSA_MLA_H
#define DSA_MLA_H

#include "dsa_common.h"

#define MLA_NOPE 448
#define MLA_DATA_BYTES DSA_CACHE_MLA_FP8_DATA /* host table: 576 */
#define NOPE_LANES 28 /* 448 / 16 */

/* bf16(1e-4): the quantizer's amax floor, held in bf16 as vLLM does. */
#define MLA_AMAX_FLOOR_BITS 0x38D20000u

/* The ue8m0 exponent of a NoPE block from the largest |x| key of its 64
 * dims (dsa_bf16_abs_key), and its byte in the cache. */
DSA_INLINE int mla_block_exp(uint amax_key) {
  return dsa_e4m3_scale_exp(max(amax_key, MLA_AMAX_FLOOR_BITS));
}
DSA_INLINE uchar mla_scale_byte(int e) { return (uchar)clamp(e + 127, 0, 255); }

/* NoPE lane `lane`'s 16 bf16 dims w[] (two per word) as e4m3 under block
 * exponent e, at data + 16 * lane. */
DSA_INLINE void mla_store_nope_lane(const uint *w, uint lane, int e, __global uchar *data,
                                    int aligned) {
  uint o[4];
#pragma unroll
  for (int j = 0; j < 4; j++) o[j] = dsa_bf16x4_to_e4m3_pow2(w[2 * j], w[2 * j + 1], e);
  dsa_store16(data + lane * 16u, (uint4)(o[0], o[1], o[2], o[3]), aligned);
}

/* NoPE lane `lane` of a token: the block's amax from the four lane maxima in
 * amax[] (the row's per-lane |x| keys), the lane's 16 dims stored as e4m3,
 * and, from the block's first lane, its ue8m0 byte in scale_bytes[lane / 4].
 * The scales go through local memory so that one lane can write all eight
 * at once (mla_store_scales, after a barrier). */
DSA_INLINE void mla_quant_nope_lane(__local const uint *amax, const uint *w, uint lane,
                                    __global uchar *data, int aligned,
                                    __local uchar *scale_bytes) {
  const uint g = lane & ~3u; /* first lane of this NoPE block */
  const uint m = max(max(amax[g], amax[g + 1]), max(amax[g + 2], amax[g + 3]));
  const int e = mla_block_exp(m);
  mla_store_nope_lane(w, lane, e, data, aligned);
  if ((lane & 3u) == 0u) scale_bytes[lane >> 2] = mla_scale_byte(e);
}

/* One 8-byte store of the seven scales and the zero pad byte. */
DSA_INLINE void mla_store_scales(__local const uchar *scale_bytes, __global uchar *dst,
                                 int aligned) {
  uint2 sb = (uint2)(0u);
#pragma unroll
  for (int j = 0; j < 4; j++) sb.x |= (uint)scale_bytes[j] << (8 * j);
#pragma unroll
  for (int j = 0; j < 3; j++) sb.y |= (uint)scale_bytes[4 + j] << (8 * j);
  dsa_store8(dst, sb, aligned);
}

#if DSA_HAS_SG32
/* The sub-group form of mla_quant_nope_lane + mla_store_scales, for a row
 * that is one 32-wide sub-group (cl/dsa_subgroup.h: an NVIDIA warp or an
 * Intel sub-group of 32): the four lanes of a NoPE block trade their amax keys m by
 * shuffles (so every lane of the warp calls this, valid row or not, RoPE
 * lanes included), then, for a valid row, the NoPE lanes store their e4m3
 * dims, each block's first lane its scale byte and lane 28 the zero pad. */
DSA_INLINE void mla_quant_nope_warp(uint m, const uint *w, uint lane, bool valid,
                                    __global uchar *data, __global uchar *scales, int aligned) {
  m = max(m, dsa_sg32_shfl_xor_u32(m, 1));
  m = max(m, dsa_sg32_shfl_xor_u32(m, 2));
  if (!valid) return;
  if (lane < NOPE_LANES) {
    const int e = mla_block_exp(m);
    mla_store_nope_lane(w, lane, e, data, aligned);
    if ((lane & 3u) == 0u) scales[lane >> 2] = mla_scale_byte(e);
  }
  if (lane == NOPE_LANES) scales[7] = 0;
}
#endif

#endif
