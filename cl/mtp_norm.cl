/* The MTP RMSNorms (include/dsacl/mtp_norm.h, docs/MTP_NORM.md): vLLM's
 * fused_mtp_input_rmsnorm and mtp_shared_head_rmsnorm in one kernel.
 *
 * Grid: one work-group of MTP_LANES (128) work-items per row, global
 * (128, rows). Row n is token t = n / (HC + 1), task k = n % (HC + 1):
 * k = 0 the enorm row inputs_embeds[t] (zeroed when use_pos and
 * positions[t] == 0), k >= 1 the hnorm row previous_hidden[t, k - 1]. The
 * shared-head norm is the same launch with HC = 0 and use_pos = 0. (vLLM's
 * grid is (T, HC + 1) with the same task numbering.)
 *
 * Lane l owns the V-element chunks c = l + 128 j (V = the largest power of
 * two dividing H, at most 8: the vector width Triton gives the row loads),
 * element d = V c + i. Two passes over the row: the sum of squares, then
 * the scaled values (read again; an output may be its input, and each
 * element is read and written by the same work-item after every read of
 * the first pass).
 *
 * Numerics (fixed on every device; FP_CONTRACT off, no fma):
 *   acc_l = +0, then acc_l = acc_l + x_d * x_d over the lane's elements in
 *           increasing d (Triton's in-thread order);
 *   ss    = within each group of 32 lanes s[i] += s[i ^ m] for
 *           m = 16, 8, 4, 2, 1 (a warp's butterfly), then
 *           (g0 + g2) + (g1 + g3) over the four groups (the cross-warp step);
 *   r     = dsa_rsqrt_cr(dsa_div_cr_u32(ss, H) + eps)  (correctly rounded);
 *   y_d   = bf16_rne((x_d * r) * w_d).
 * Where a row is one 32-wide sub-group (DSA_HAS_SG32) the group sums come
 * from xor shuffles, which form exactly that tree in every lane; elsewhere
 * lane 32g adds its group's 32 sums from local memory in the same tree. */
#pragma OPENCL FP_CONTRACT OFF
#include "dsa_common.h"
#include "dsa_norm.h"

/* MTP_LANES comes from the launcher (src/op_mtp_norm.c) as a build option. */
#if MTP_LANES != 128
#error "mtp_norm.cl: the reduction order needs MTP_LANES = 128 (four groups of 32)"
#endif

/* V (<= 8) bf16 values of a row at element e (16-byte loads when V = 8 and
 * the row is 16-byte aligned). */
DSA_INLINE void mtp_load_x(__global const uchar *row, uint e, int V, int al16, float *v) {
  if (V == 8 && al16) {
    const uint4 w = dsa_load16(row + 2u * e, 1);
    const uint u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
      v[2 * j] = dsa_bf16_to_f32((ushort)u[j]);
      v[2 * j + 1] = dsa_bf16_to_f32((ushort)(u[j] >> 16));
    }
  } else {
    __global const ushort *p = (__global const ushort *)(row + 2u * e);
#pragma unroll
    for (int j = 0; j < 8; j++) v[j] = j < V ? dsa_bf16_to_f32(p[j]) : 0.0f;
  }
}

/* V weights at element e: bf16 or f32. */
DSA_INLINE void mtp_load_w(__global const uchar *w, int f32, uint e, int V, int al16, float *v) {
  if (!f32) {
    mtp_load_x(w, e, V, al16, v);
  } else if (V == 8 && al16) {
    const uint4 a = dsa_load16(w + 4u * e, 1), b = dsa_load16(w + 4u * e + 16u, 1);
    v[0] = as_float(a.x), v[1] = as_float(a.y), v[2] = as_float(a.z), v[3] = as_float(a.w);
    v[4] = as_float(b.x), v[5] = as_float(b.y), v[6] = as_float(b.z), v[7] = as_float(b.w);
  } else {
    __global const float *p = (__global const float *)(w + 4u * e);
#pragma unroll
    for (int j = 0; j < 8; j++) v[j] = j < V ? p[j] : 0.0f;
  }
}

__kernel __attribute__((reqd_work_group_size(MTP_LANES, 1, 1))) DSA_SG32_KERNEL void
mtp_rmsnorm(DSA_CTENSOR2(xe), DSA_CTENSOR1(pos), int pos_i64, int use_pos, DSA_CTENSOR3(xh),
            DSA_CTENSOR1(we), int we_f32, DSA_CTENSOR1(wh), int wh_f32, DSA_TENSOR2(oe),
            DSA_TENSOR3(oh), int H, int HC, float eps) {
#if DSA_HAS_SG32
  __local float grp[MTP_LANES / 32];
#else
  __local float part[MTP_LANES];
  __local float grp[MTP_LANES / 32];
#endif
  const uint lane = get_local_id(0);
  const ulong n = get_group_id(1); /* the host launches exactly one group per row */
  const ulong t = n / (ulong)(HC + 1), k = n - t * (ulong)(HC + 1);

  __global const uchar *src, *w;
  __global uchar *dst;
  int in_al, out_al, w_f32, w_al;
  bool zero = false;
  if (k == 0) {
    src = xe_mem + xe_off + t * xe_s0;
    dst = oe_mem + oe_off + t * oe_s0;
    in_al = xe_al, out_al = oe_al, w = we_mem + we_off, w_f32 = we_f32, w_al = we_al;
    if (use_pos) {
      __global const uchar *pp = pos_mem + pos_off + t * pos_s0;
      zero = pos_i64 ? *(__global const long *)pp == 0 : *(__global const int *)pp == 0;
    }
  } else {
    src = xh_mem + xh_off + t * xh_s0 + (k - 1) * xh_s1;
    dst = oh_mem + oh_off + t * oh_s0 + (k - 1) * oh_s1;
    in_al = xh_al, out_al = oh_al, w = wh_mem + wh_off, w_f32 = wh_f32, w_al = wh_al;
  }
  const int V = min(H & -H, 8);
  const uint step = MTP_LANES * (uint)V;
  const int in16 = in_al >= 16, out16 = out_al >= 16, w16 = w_al >= 16;

  /* Pass 1: the lane's sum of squares. A zeroed row sums +0s: skip it. */
  float acc = 0.0f;
  if (!zero) {
    for (uint e = lane * (uint)V; e < (uint)H; e += step) {
      float v[8];
      mtp_load_x(src, e, V, in16, v);
#pragma unroll
      for (int j = 0; j < 8; j++)
        if (j < V) acc = acc + v[j] * v[j];
    }
  }

  /* The fixed tree: groups of 32 first (m = 16 .. 1), then the groups. */
#if DSA_HAS_SG32
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) acc = acc + dsa_sg32_shfl_xor_f32(acc, m);
  if ((lane & 31u) == 0u) grp[lane >> 5] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
#else
  part[lane] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  if ((lane & 31u) == 0u) {
    float r[16];
#pragma unroll
    for (int i = 0; i < 16; i++) r[i] = part[lane + i] + part[lane + i + 16];
#pragma unroll
    for (int wd = 8; wd > 0; wd >>= 1) {
#pragma unroll
      for (int i = 0; i < wd; i++) r[i] = r[i] + r[i + wd];
    }
    grp[lane >> 5] = r[0];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
#endif
  const float ss = (grp[0] + grp[2]) + (grp[1] + grp[3]);
  const float rr = dsa_rsqrt_cr(dsa_div_cr_u32(ss, (uint)H) + eps);

  /* Pass 2: y = bf16((x * r) * w). */
  for (uint e = lane * (uint)V; e < (uint)H; e += step) {
    float v[8], wv[8];
    if (zero) {
#pragma unroll
      for (int j = 0; j < 8; j++) v[j] = 0.0f;
    } else {
      mtp_load_x(src, e, V, in16, v);
    }
    mtp_load_w(w, w_f32, e, V, w16, wv);
    ushort y[8];
#pragma unroll
    for (int j = 0; j < 8; j++) y[j] = dsa_f32_to_bf16((v[j] * rr) * wv[j]);
    if (V == 8 && out16) {
      dsa_store16(dst + 2u * e,
                  (uint4)((uint)y[0] | ((uint)y[1] << 16), (uint)y[2] | ((uint)y[3] << 16),
                          (uint)y[4] | ((uint)y[5] << 16), (uint)y[6] | ((uint)y[7] << 16)),
                  1);
    } else {
      __global ushort *p = (__global ushort *)(dst + 2u * e);
#pragma unroll
      for (int j = 0; j < 8; j++)
        if (j < V) p[j] = y[j];
    }
  }
}
