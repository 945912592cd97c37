/* Q RMSNorm + RoPE and KV RoPE + insert into the SWA MLA cache
 * (SPEC-reference §8.4, §2.6-2.7, §8.1, layout §3.1).
 *
 * Rows: row n < T is token n's KV row (rotate the 64 RoPE dims, quantize,
 * insert: the structure of mla_cache_insert in mla_cache.cl); row T + m is
 * q row m = t * H + h. A row is 32 lanes; lane l owns dims [16l, 16l+16):
 * lanes 0..27 NoPE, lanes 28..31 the RoPE pairs 8(l-28) .. 8(l-28)+7. A
 * work-group is (32, 8): eight rows, which may mix KV and q rows, so both
 * kinds pass the same two barriers. On NVIDIA a row is one warp and trades
 * its sums and maxima by shuffles instead: no local memory, no barriers
 * (T = 8192, H = 64 on an H100: 879 -> 481 us).
 *
 * Numerics (deterministic on every device; nothing depends on contraction
 * or on the precision of the device's sqrt/division):
 *   ss   = sum of q_d^2 in fp32 in a fixed order: lane l adds its 16 squares
 *          in dim order, then the 32 lane sums are added as a tree
 *          (s[i] += s[i + w] for w = 16, 8, 4, 2, 1); squares of bf16 are
 *          exact in fp32, so fma or not gives the same.
 *   rho  = correctly rounded 1 / sqrt(ss * 2^-9 + eps) (dsa_rsqrt_cr, cl/dsa_norm.h).
 *   NoPE: bf16(q_d * rho). RoPE: e = q_e * rho, o = q_o * rho (fp32), then
 *   e' = fma(e, c, -fl(o * s)), o' = fma(e, s, fl(o * c)), bf16.
 *   KV: the same rotation on the bf16 values, then §8.1 on the row.
 */
#pragma OPENCL FP_CONTRACT OFF
#include "dsa_mla.h"
#include "dsa_norm.h"

/* LANES (32: a row's lane l owns dims [16l, 16l+16)) and ROWS come from the
 * launcher (src/op_mla_qnorm.c) as build options. */
#if LANES != 32
#error "mla_qnorm.cl: the lane mapping needs LANES = 32"
#endif

/* Rotates the 16 fp32 values of a RoPE lane (8 pairs) with cos/sin. */
DSA_INLINE void qn_rotate(float *v, const float *c, const float *s) {
#pragma unroll
  for (int i = 0; i < 8; i++) {
    const float e = v[2 * i], o = v[2 * i + 1];
    v[2 * i] = fma(e, c[i], -(o * s[i]));
    v[2 * i + 1] = fma(e, s[i], o * c[i]);
  }
}

DSA_INLINE uint4 qn_pack(const float *v, int h) {
  uint w[4];
#pragma unroll
  for (int j = 0; j < 4; j++)
    w[j] = (uint)dsa_f32_to_bf16(v[8 * h + 2 * j]) |
           ((uint)dsa_f32_to_bf16(v[8 * h + 2 * j + 1]) << 16);
  return (uint4)(w[0], w[1], w[2], w[3]);
}

/* Local memory of the portable row reductions: a kernel declares it (OpenCL
 * C 1.2 has no __local variables in functions) and hands the body its row. */
#if DSA_HAS_SG32
#define QN_LOCALS
#define QN_LOCAL_PARAMS
#define QN_LOCAL_ARGS
#else
#define QN_LOCALS                        \
  __local uint part[ROWS][LANES];        \
  __local uchar scale_bytes[ROWS][8];
#define QN_LOCAL_PARAMS , __local uint *part_row, __local uchar *sb_row
#define QN_LOCAL_ARGS , part[get_local_id(1)], scale_bytes[get_local_id(1)]
#endif

#define QN_PARAMS                                                                             \
  DSA_CTENSOR3(qin), DSA_TENSOR3(qout), int H, DSA_CTENSOR2(kv), DSA_CTENSOR1(pos), int pos_i32, \
      DSA_CTENSOR2(cs), int cs_bf16, long n_pos, DSA_CTENSOR1(slots), long T, float eps,     \
      DSA_PAGED(cache), DSA_FAULTS

/* The body, inlined into three kernels: positions and cos/sin dtypes as
 * arguments (any of i64/i32 x f32/bf16), and the i64 + f32 pair as constants.
 * The constants matter on NVIDIA: the dtype branches around the position and
 * cos/sin loads cost this memory-bound kernel 4 % (H200, T = 8192). al16 = 1:
 * the host found q_in, q_out, kv and the cache 16-byte aligned, so the
 * alignment tests and the vload/vstore fallbacks fold away (issue 13 item 6). */
DSA_INLINE_ALWAYS void qn_body(QN_PARAMS, int al16 QN_LOCAL_PARAMS) {
  const uint lane = get_local_id(0);
  const ulong n = get_global_id(1);
  const dsa_paged kvc = DSA_PAGED_OF(cache);
  /* Only rows that exist are addressed: with H = 0 the q strides are moot. */
  const int q_aligned = al16 || (qin_al >= 16 && qout_al >= 16);
  const int kv_aligned = al16 || kv_al >= 16, cache_aligned = al16 || kvc.align >= 16;
  const ulong nrows = (ulong)T * (ulong)(H + 1);
  const bool live = n < nrows;
  const bool is_kv = n < (ulong)T;
  ulong t = 0, h = 0;
  if (live) {
    if (is_kv) {
      t = n;
    } else {
      const uint m = (uint)(n - (ulong)T); /* host guarantees T * (H + 1) < 2^31 */
      t = m / (uint)H;
      h = m - (uint)t * (uint)H;
    }
  }

  /* Position and, on RoPE lanes, its cos/sin. */
  const long p = live ? dsa_load_pos(pos_mem + pos_off + t * pos_s0, pos_i32) : 0;
  const bool pos_ok = p >= 0 && p < n_pos;
  if (live && is_kv && !pos_ok && lane == 0) dsa_fault(faults, DSA_FAULT_POSITION_RANGE);
  float c[8], s[8];
#pragma unroll
  for (int i = 0; i < 8; i++) c[i] = 1.0f, s[i] = 0.0f;
  if (live && pos_ok && lane >= NOPE_LANES) {
    __global const uchar *row = cs_mem + cs_off + (ulong)p * cs_s0;
    const float8 cv = dsa_load_cs8(row, cs_bf16, 8u * (lane - NOPE_LANES));
    const float8 sv = dsa_load_cs8(row, cs_bf16, 32u + 8u * (lane - NOPE_LANES));
    c[0] = cv.s0, c[1] = cv.s1, c[2] = cv.s2, c[3] = cv.s3;
    c[4] = cv.s4, c[5] = cv.s5, c[6] = cv.s6, c[7] = cv.s7;
    s[0] = sv.s0, s[1] = sv.s1, s[2] = sv.s2, s[3] = sv.s3;
    s[4] = sv.s4, s[5] = sv.s5, s[6] = sv.s6, s[7] = sv.s7;
  }

  /* KV: slot (loaded alongside the data, as in mla_cache_insert). */
  long slot = -1;
  if (live && is_kv) slot = *(__global const long *)(slots_mem + slots_off + t * slots_s0);
  if (live && is_kv && slot >= kvc.capacity && lane == 0) dsa_fault(faults, DSA_FAULT_SLOT_RANGE);
  const bool kv_valid = live && is_kv && slot >= 0 && slot < kvc.capacity && pos_ok;

  uint4 raw0 = (uint4)(0u), raw1 = (uint4)(0u);
  if (live) {
    __global const uchar *src = is_kv ? kv_mem + kv_off + t * kv_s0 + lane * 32u
                                      : qin_mem + qin_off + t * qin_s0 + h * qin_s1 + lane * 32u;
    const int al = is_kv ? kv_aligned : q_aligned;
    raw0 = dsa_load16(src, al);
    raw1 = dsa_load16(src + 16, al);
  }
  const uint w[8] = {raw0.x, raw0.y, raw0.z, raw0.w, raw1.x, raw1.y, raw1.z, raw1.w};
  float v[16];
#pragma unroll
  for (int j = 0; j < 8; j++) {
    v[2 * j] = dsa_bf16_to_f32((ushort)w[j]);
    v[2 * j + 1] = dsa_bf16_to_f32((ushort)(w[j] >> 16));
  }

  /* Per row: KV rows need each NoPE block's amax key, q rows the sum of
   * squares in the fixed tree order. */
  uint m = 0u;
  float ss = 0.0f;
  if (is_kv) {
    if (lane < NOPE_LANES) m = dsa_bf16_amax_key(w, 8);
  } else {
#pragma unroll
    for (int j = 0; j < 16; j++) ss = ss + v[j] * v[j];
  }
#if DSA_HAS_SG32
  /* A row is one 32-wide sub-group (cl/dsa_subgroup.h). The butterfly over 16, 8, 4, 2, 1 forms exactly the
   * tree of the numerics note in lane 0 (s[i] + s[i + 16], ...), and every
   * other lane the same sums with operands swapped, which fp addition does
   * not notice: all lanes end with lane 0's total. (KV block maxima are
   * traded in mla_quant_nope_warp below.) */
#pragma unroll
  for (int wd = 16; wd > 0; wd >>= 1) ss = ss + dsa_sg32_shfl_xor_f32(ss, wd);
#else
  part_row[lane] = is_kv ? m : as_uint(ss);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (live && !is_kv) {
    float r[16];
#pragma unroll
    for (int i = 0; i < 16; i++) r[i] = as_float(part_row[i]) + as_float(part_row[i + 16]);
#pragma unroll
    for (int wd = 8; wd > 0; wd >>= 1) {
#pragma unroll
      for (int i = 0; i < wd; i++) r[i] = r[i] + r[i + wd];
    }
    ss = r[0];
  }
#endif

  if (live && !is_kv) {
    const float rho = dsa_rsqrt_cr(ss * 0x1p-9f + eps);
#pragma unroll
    for (int j = 0; j < 16; j++) v[j] = v[j] * rho;
    if (lane >= NOPE_LANES && pos_ok) qn_rotate(v, c, s);
    __global uchar *dst = qout_mem + qout_off + t * qout_s0 + h * qout_s1 + lane * 32u;
    dsa_store16(dst, qn_pack(v, 0), q_aligned);
    dsa_store16(dst + 16, qn_pack(v, 1), q_aligned);
  }

  __global uchar *data, *scales;
  dsa_paged_slot(&kvc, kv_valid ? slot : 0, MLA_DATA_BYTES, 8u, &data, &scales);
#if DSA_HAS_SG32
  mla_quant_nope_warp(m, w, lane, kv_valid, data, scales, cache_aligned);
  if (!kv_valid) return;
#else
  if (kv_valid && lane < NOPE_LANES)
    mla_quant_nope_lane(part_row, w, lane, data, cache_aligned, sb_row);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!kv_valid) return;
  if (lane == NOPE_LANES) mla_store_scales(sb_row, scales, cache_aligned);
#endif
  if (lane >= NOPE_LANES) {
    qn_rotate(v, c, s);
    __global uchar *dst = data + MLA_NOPE + (lane - NOPE_LANES) * 32u;
    dsa_store16(dst, qn_pack(v, 0), cache_aligned);
    dsa_store16(dst + 16, qn_pack(v, 1), cache_aligned);
  }
}

#define QN_ARGS                                                                                \
  DSA_TENSOR3_ARGS(qin), DSA_TENSOR3_ARGS(qout), H, DSA_TENSOR2_ARGS(kv), DSA_TENSOR1_ARGS(pos)
#define QN_ARGS2                                                                               \
  DSA_TENSOR2_ARGS(cs)
#define QN_ARGS3                                                                               \
  n_pos, DSA_TENSOR1_ARGS(slots), T, eps, DSA_PAGED_ARGS(cache), faults

/* Any position / cos-sin dtypes (the flags as given). */
__kernel __attribute__((reqd_work_group_size(LANES, ROWS, 1))) DSA_SG32_KERNEL void
mla_qnorm_rope_kv_insert(QN_PARAMS) {
  QN_LOCALS
  qn_body(QN_ARGS, pos_i32, QN_ARGS2, cs_bf16, QN_ARGS3, 0 QN_LOCAL_ARGS);
}

/* i64 positions, f32 cos/sin (the launcher's pick for them; the same
 * arguments, the two flags ignored). */
__kernel __attribute__((reqd_work_group_size(LANES, ROWS, 1))) DSA_SG32_KERNEL void
mla_qnorm_rope_kv_insert_i64f32(QN_PARAMS) {
  QN_LOCALS
  (void)pos_i32, (void)cs_bf16;
  qn_body(QN_ARGS, 0, QN_ARGS2, 0, QN_ARGS3, 0 QN_LOCAL_ARGS);
}

/* The same with every 16-byte operand aligned (the launcher checked). */
__kernel __attribute__((reqd_work_group_size(LANES, ROWS, 1))) DSA_SG32_KERNEL void
mla_qnorm_rope_kv_insert_i64f32_a16(QN_PARAMS) {
  QN_LOCALS
  (void)pos_i32, (void)cs_bf16;
  qn_body(QN_ARGS, 0, QN_ARGS2, 0, QN_ARGS3, 1 QN_LOCAL_ARGS);
}
