/* Indexer Q: RoPE + FP8 or MXFP4 quantization (SPEC-reference §4).
 *
 * Per (token t, head h): q[t, h, :D] bf16 (qin, byte strides qin_s0/_s1,
 * unit inner). The trailing R dims are GPT-J pairs rotated with row positions[t]
 * of cos_sin (cos in columns [0, R/2), sin in [R/2, R)) and rounded to bf16.
 *   FP8:   one e4m3 scale 2^e per head (amax over the D values, floor 1e-4);
 *          out_q [t, h, :D] bytes, out_w = ((w * 2^e) * ss) * hs.
 *   MXFP4: one ue8m0 byte per 32-dim block; out_q [t, h, :D/2] packed (even
 *          dim in the low nibble), out_s [t, h, :D/32], out_w = (w * ss) * hs.
 *
 * Grid: 1-D. A work-item owns one 32-dim block of one head (4 x 16-byte
 * loads, its 16 RoPE pairs are its own 16 words); ipd = D/32 items per head,
 * a work-group is hpg heads x ipd items (heads of consecutive tokens
 * flattened, t*H + h). FP8 reduces the block maxima of a head through local
 * memory (ipd values); MXFP4 needs no communication but passes the same
 * (cheap) barrier.
 *
 * Performance (NVIDIA H100/H200, T = 8192, H = 64, D = 128): the kernel is
 * bound by integer issue, not by memory (a work-item-per-16-byte-chunk
 * mapping with perfectly coalesced loads and warp-shuffle reductions was
 * measured 1.5x SLOWER: 4x the per-head overhead). What pays is fewer
 * integer ops per value: the FP8 encoder works on two bf16 per 32-bit word
 * (dsa_bf16x2_to_e4m3_pow2), the amax takes 15-bit magnitudes (NaN redone rarely), and on
 * NVIDIA the RoPE pair rounds both halves with one cvt.rn.bf16x2.f32.
 */
#include "dsa_mxfp4.h"

#pragma OPENCL FP_CONTRACT OFF

/* fp32 1e-4: the FP8 amax floor (§4.1). */
#define IQ_FP8_FLOOR_BITS 0x38D1B717u

DSA_INLINE float iq_load_f(__global const uchar *p, int bf16, uint i) {
  return bf16 ? dsa_bf16_to_f32(((__global const ushort *)p)[i]) : ((__global const float *)p)[i];
}

/* dsa_rope_pair_bf16 (dsa_mxfp4.h), with the two bf16 roundings done by one
 * cvt.rn.bf16x2.f32 on NVIDIA (sm_80+): the same RNE for every non-NaN value
 * (subnormals kept, overflow to inf); a NaN result (0x7FFF there, 0x7FC0
 * here) takes the portable path. */
DSA_INLINE uint iq_rope_pair_bf16(float e, float o, float c, float s) {
#if DSA_HAS_NV_PTX && (!defined(DSA_NV_SM) || DSA_NV_SM >= 80)
  const float os = o * s;
  const float es = e * s;
  const float re = fma(e, c, -os);
  const float ro = fma(o, c, es);
  uint r;
  __asm__("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(ro), "f"(re));
  if ((((r & 0x7FFF7FFFu) + 0x007F007Fu) & 0x80008000u) != 0u)
    r = (uint)dsa_f32_to_bf16(re) | ((uint)dsa_f32_to_bf16(ro) << 16);
  return r;
#else
  return dsa_rope_pair_bf16(e, o, c, s);
#endif
}

__kernel void indexer_q_quant(DSA_CTENSOR1(pos), int pos_i32, DSA_CTENSOR3(qin),
                              DSA_CTENSOR2(cs), int cs_bf16, long n_pos, int R, DSA_CTENSOR2(win),
                              int w_bf16, float softmax_scale, float head_scale, DSA_TENSOR3(oq),
                              DSA_TENSOR3(os), DSA_TENSOR2(ow), uint n_pairs, uint H, int D,
                              int hpg, int mxfp4, int mode, DSA_FAULTS,
                              __local uint *amax_part) {
  const int q_al = qin_al >= 16, oq_aligned = oq_al >= 16;
  /* Vector cos/sin loads need 16-byte aligned rows, halves and block starts. */
  const uint cs_esz = cs_bf16 ? 2u : 4u;
  const int cs_aligned = cs_al >= 16 && ((uint)(R >> 1) * cs_esz) % 16u == 0u &&
                         ((uint)((D - R) >> 1) * cs_esz) % 16u == 0u;
  const uint lid = get_local_id(0);
  const uint ipd = (uint)D >> 5;
  const uint hl = lid / ipd, blk = lid - hl * ipd;
  const uint pair = (uint)get_group_id(0) * (uint)hpg + hl;
  const bool valid = pair < n_pairs;
  const uint t = valid ? pair / H : 0u, h = valid ? pair - t * H : 0u;

  uint wd[16];
  uint m = 0u;
  if (valid) {
    __global const uchar *src = qin_mem + qin_off + (ulong)t * qin_s0 + (ulong)h * qin_s1 + blk * 64u;
#pragma unroll
    for (int v = 0; v < 4; v++) {
      const uint4 x = dsa_load16(src + 16 * v, q_al);
      wd[4 * v] = x.x, wd[4 * v + 1] = x.y, wd[4 * v + 2] = x.z, wd[4 * v + 3] = x.w;
    }
    const int nope = D - R, c0 = (int)blk * 32;
    if (c0 + 32 > nope) {
      const long p = pos_i32 ? (long)*(__global const int *)(pos_mem + pos_off + (ulong)t * pos_s0)
                             : *(__global const long *)(pos_mem + pos_off + (ulong)t * pos_s0);
      const bool pok = p >= 0 && p < n_pos;
      if (!pok && blk == ipd - 1u) dsa_fault(faults, DSA_FAULT_POSITION_RANGE);
      __global const uchar *row = cs_mem + cs_off + (ulong)(pok ? p : 0) * cs_s0;
      const uint esz = cs_bf16 ? 2u : 4u;
      float cv[16], sv[16];
      if (c0 >= nope) {
        /* Whole block inside the rope section: pairs i0 .. i0+15. */
        __global const uchar *cp = row + (uint)((c0 - nope) >> 1) * esz;
        __global const uchar *sp = cp + (uint)(R >> 1) * esz;
        if (cs_aligned && !cs_bf16) {
          /* 16-byte aligned rows (the usual case): 8 vector loads, not 32,
           * taken apart element by element. Not gathered into a float16 by
           * a vector literal ((float16)(c4[0], ..)): clang lowers one to
           * shufflevectors with undefined lanes (mask -1), and Oclgrind
           * 21.10's --uninitialized plugin reads its shadow out of bounds
           * on those (it tests the mask against the wrong constant) and
           * crashes (docs/PORTING.md, "Oclgrind"). The same loads and
           * values. */
          __global const float4 *c4 = (__global const float4 *)cp, *s4 = (__global const float4 *)sp;
#pragma unroll
          for (int v = 0; v < 4; v++) {
            const float4 a = c4[v], b = s4[v];
            cv[4 * v] = a.x, cv[4 * v + 1] = a.y, cv[4 * v + 2] = a.z, cv[4 * v + 3] = a.w;
            sv[4 * v] = b.x, sv[4 * v + 1] = b.y, sv[4 * v + 2] = b.z, sv[4 * v + 3] = b.w;
          }
        } else if (cs_aligned) {
          /* bf16: two pairs a word, the lower half first (as_ushort16 of the
           * words, widened: bits << 16). */
          __global const uint4 *c4 = (__global const uint4 *)cp, *s4 = (__global const uint4 *)sp;
#pragma unroll
          for (int v = 0; v < 2; v++) {
            const uint4 a = c4[v], b = s4[v];
            const uint aw[4] = {a.x, a.y, a.z, a.w}, bw[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
              cv[8 * v + 2 * i] = as_float(aw[i] << 16);
              cv[8 * v + 2 * i + 1] = as_float(aw[i] & 0xFFFF0000u);
              sv[8 * v + 2 * i] = as_float(bw[i] << 16);
              sv[8 * v + 2 * i + 1] = as_float(bw[i] & 0xFFFF0000u);
            }
          }
        } else {
          float16 c16, s16;
          if (cs_bf16) {
            c16 = as_float16(convert_uint16(vload16(0, (__global const ushort *)cp)) << 16);
            s16 = as_float16(convert_uint16(vload16(0, (__global const ushort *)sp)) << 16);
          } else {
            c16 = vload16(0, (__global const float *)cp);
            s16 = vload16(0, (__global const float *)sp);
          }
          cv[0] = c16.s0, cv[1] = c16.s1, cv[2] = c16.s2, cv[3] = c16.s3;
          cv[4] = c16.s4, cv[5] = c16.s5, cv[6] = c16.s6, cv[7] = c16.s7;
          cv[8] = c16.s8, cv[9] = c16.s9, cv[10] = c16.sa, cv[11] = c16.sb;
          cv[12] = c16.sc, cv[13] = c16.sd, cv[14] = c16.se, cv[15] = c16.sf;
          sv[0] = s16.s0, sv[1] = s16.s1, sv[2] = s16.s2, sv[3] = s16.s3;
          sv[4] = s16.s4, sv[5] = s16.s5, sv[6] = s16.s6, sv[7] = s16.s7;
          sv[8] = s16.s8, sv[9] = s16.s9, sv[10] = s16.sa, sv[11] = s16.sb;
          sv[12] = s16.sc, sv[13] = s16.sd, sv[14] = s16.se, sv[15] = s16.sf;
        }
      } else {
        /* The block straddles the NoPE/rope boundary. */
#pragma unroll
        for (int j = 0; j < 16; j++) {
          const int d = c0 + 2 * j;
          const uint i = (uint)((d - nope) >> 1);
          cv[j] = d >= nope ? iq_load_f(row, cs_bf16, i) : 1.0f;
          sv[j] = d >= nope ? iq_load_f(row, cs_bf16, i + (uint)(R >> 1)) : 0.0f;
        }
      }
#pragma unroll
      for (int j = 0; j < 16; j++) {
        const float c = pok ? cv[j] : 1.0f, s = pok ? sv[j] : 0.0f;
        if (c0 + 2 * j >= nope)
          wd[j] = iq_rope_pair_bf16(dsa_bf16_to_f32((ushort)wd[j]),
                                    dsa_bf16_to_f32((ushort)(wd[j] >> 16)), c, s);
      }
    }
    m = dsa_bf16_amax_key(wd, 16); /* amax of |x| over the 32 values, NaN ignored */
  }

  /* The barrier is unconditional (MXFP4 does not need it): PoCL mishandles
   * an early return after a barrier inside a uniform branch. */
  amax_part[lid] = m;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!valid) return;
  if (!mxfp4) {
    for (uint k = 0; k < ipd; k++) m = max(m, amax_part[hl * ipd + k]);
    const int e = dsa_e4m3_scale_exp(max(m, IQ_FP8_FLOOR_BITS));
    uint ob[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
      ob[j] = dsa_bf16x4_to_e4m3_pow2(wd[2 * j], wd[2 * j + 1], e);
    }
    __global uchar *dst = oq_mem + oq_off + (ulong)t * oq_s0 + (ulong)h * oq_s1 + blk * 32u;
    dsa_store16(dst, (uint4)(ob[0], ob[1], ob[2], ob[3]), oq_aligned);
    dsa_store16(dst + 16, (uint4)(ob[4], ob[5], ob[6], ob[7]), oq_aligned);
    if (blk == 0u) {
      const float w = iq_load_f(win_mem + win_off + (ulong)t * win_s0 + (ulong)h * win_s1, w_bf16, 0u);
      const float w1 = w * as_float((uint)(e + 127) << 23);
      const float w2 = w1 * softmax_scale;
      *(__global float *)(ow_mem + ow_off + (ulong)t * ow_s0 + (ulong)h * ow_s1) = w2 * head_scale;
    }
    return;
  }

  const int e = dsa_mxfp4_scale_exp(m, mode);
  dsa_store16(oq_mem + oq_off + (ulong)t * oq_s0 + (ulong)h * oq_s1 + blk * 16u,
              dsa_bf16x32_to_e2m1(wd, e, mode), oq_aligned);
  os_mem[os_off + (ulong)t * os_s0 + (ulong)h * os_s1 + blk] = (uchar)(e + 127);
  if (blk == 0u) {
    const float w = iq_load_f(win_mem + win_off + (ulong)t * win_s0 + (ulong)h * win_s1, w_bf16, 0u);
    const float w1 = w * softmax_scale;
    *(__global float *)(ow_mem + ow_off + (ulong)t * ow_s0 + (ulong)h * ow_s1) = w1 * head_scale;
  }
}
