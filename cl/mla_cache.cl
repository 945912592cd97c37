/* MLA KV cache, fp8_ds_mla layout (SPEC-reference §3.1, §8.1-8.3).
 *
 * Block b of the cache starts at cache + off + b * block_stride (64-bit):
 *   [0, bs*576)          token t's data at t*576: 448 e4m3 NoPE bytes, then
 *                        64 bf16 RoPE values (128 bytes)
 *   [bs*576, bs*584)     token t's 8 scale bytes at bs*576 + 8t: ue8m0 of
 *                        NoPE block q (dims [64q, 64q+64)) in byte q, byte 7 = 0
 *
 * Grid: one 64-wide work-group per token (row); work-item i owns dims
 * [8i, 8i+8): items 0..55 the seven NoPE blocks (8 items per block), items
 * 56..63 the RoPE dims. Rows are independent, so global = (64, rows).
 */
#include "dsa_common.h"

#define MLA_DIM 512
#define MLA_NOPE 448
#define MLA_DATA_BYTES 576
#define MLA_TOKEN_BYTES 584

/* bf16(1e-4): the quantizer's amax floor, held in bf16 as vLLM does. */
#define MLA_AMAX_FLOOR_BITS 0x38D20000u

/* Byte address of token t's data and of its scale bytes inside block blk. */
DSA_INLINE ulong mla_block_base(ulong cache_off, long blk, ulong block_stride) {
  return cache_off + (ulong)blk * block_stride;
}

__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void mla_cache_insert(
    __global const uchar *k, ulong k_off, ulong k_row_stride, /* bytes */
    __global const uchar *slots, ulong slot_off, ulong slot_stride, /* bytes */
    __global uchar *cache, ulong cache_off, long num_blocks, int block_size,
    ulong block_stride, int k_aligned, int cache_aligned, __global volatile uint *faults) {
  __local uint amax_part[64];
  const uint i = get_local_id(0);
  const ulong n = get_global_id(1);

  const long slot = *(__global const long *)(slots + slot_off + n * slot_stride);
  const long capacity = num_blocks * (long)block_size;
  if (slot >= capacity && i == 0) dsa_fault(faults, DSA_FAULT_SLOT_RANGE);
  /* The same for the whole work-group; every item still reaches the one
   * barrier below (PoCL and others require it). */
  const bool valid = slot >= 0 && slot < capacity;
  const long blk = valid ? slot / block_size : 0;
  const long t = valid ? slot - blk * block_size : 0;
  const ulong base = mla_block_base(cache_off, blk, block_stride);
  __global uchar *data = cache + base + (ulong)t * MLA_DATA_BYTES;
  __global uchar *scales = cache + base + (ulong)block_size * MLA_DATA_BYTES + (ulong)t * 8u;

  const bool nope = i < MLA_NOPE / 8;
  uint4 raw = (uint4)(0u, 0u, 0u, 0u);
  if (valid) raw = dsa_load16(k + k_off + n * k_row_stride + i * 16u, k_aligned);

  ushort v[8];
  uint w[4] = {raw.x, raw.y, raw.z, raw.w};
  uint m = 0u;
  for (int j = 0; j < 4; j++) {
    v[2 * j] = (ushort)(w[j] & 0xFFFFu); /* little-endian: low half first */
    v[2 * j + 1] = (ushort)(w[j] >> 16);
    m = max(m, max(dsa_bf16_abs_key(v[2 * j]), dsa_bf16_abs_key(v[2 * j + 1])));
  }
  amax_part[i] = m;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!valid) return;
  if (!nope) {
    /* RoPE dims travel verbatim as bf16. */
    dsa_store16(data + MLA_NOPE + (i - MLA_NOPE / 8) * 16u, raw, cache_aligned);
    if (i == MLA_NOPE / 8) scales[7] = 0;
    return;
  }
  const uint g = i & ~7u; /* first item of this NoPE block */
  for (uint j = 0; j < 8; j++) m = max(m, amax_part[g + j]);
  m = max(m, MLA_AMAX_FLOOR_BITS);

  const int e = dsa_e4m3_scale_exp(m);
  const float inv = dsa_exp2_neg(e); /* x / 2^e, exact */
  uint2 out = (uint2)(0u, 0u);
  for (int j = 0; j < 4; j++) {
    uint b = dsa_f32_to_e4m3(dsa_bf16_to_f32(v[j]) * inv);
    out.x |= b << (8 * j);
    b = dsa_f32_to_e4m3(dsa_bf16_to_f32(v[j + 4]) * inv);
    out.y |= b << (8 * j);
  }
  dsa_store8(data + i * 8u, out, cache_aligned);
  if ((i & 7u) == 0u) scales[i >> 3] = (uchar)clamp(e + 127, 0, 255);
}

/* Dequantize the 8 dims of work-item i of one token into 16 bytes of bf16. */
DSA_INLINE uint4 mla_dequant8(__global const uchar *data, __global const uchar *scales, uint i,
                              int aligned) {
  if (i >= MLA_NOPE / 8) return dsa_load16(data + MLA_NOPE + (i - MLA_NOPE / 8) * 16u, aligned);
  const float s = dsa_ue8m0_to_f32(scales[i >> 3]);
  const uint2 b = dsa_load8(data + i * 8u, aligned);
  uint o[4];
  for (int j = 0; j < 4; j++) {
    uint src = j < 2 ? b.x : b.y;
    uint lo = (src >> (16 * (j & 1))) & 0xFFu, hi = (src >> (16 * (j & 1) + 8)) & 0xFFu;
    o[j] = (uint)dsa_f32_to_bf16(dsa_e4m3_to_f32(lo) * s) |
           ((uint)dsa_f32_to_bf16(dsa_e4m3_to_f32(hi) * s) << 16);
  }
  return (uint4)(o[0], o[1], o[2], o[3]);
}

/* Reads slot s (already range-checked) and returns work-item i's 16 bytes. */
DSA_INLINE uint4 mla_read_slot(__global const uchar *cache, ulong cache_off, long s, int block_size,
                               ulong block_stride, uint i, int aligned) {
  const long blk = s / block_size;
  const long t = s - blk * block_size;
  const ulong base = mla_block_base(cache_off, blk, block_stride);
  return mla_dequant8(cache + base + (ulong)t * MLA_DATA_BYTES,
                      cache + base + (ulong)block_size * MLA_DATA_BYTES + (ulong)t * 8u, i,
                      aligned);
}

__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void mla_gather_slots(
    __global const uchar *cache, ulong cache_off, long num_blocks, int block_size,
    ulong block_stride, __global const uchar *idx, ulong idx_off, ulong idx_stride, /* bytes */
    __global uchar *out, ulong out_off, ulong out_row_stride,                        /* bytes */
    int cache_aligned, int out_aligned, __global volatile uint *faults) {
  const uint i = get_local_id(0);
  const ulong r = get_global_id(1);
  const long s = *(__global const int *)(idx + idx_off + r * idx_stride);
  uint4 v = (uint4)(0u, 0u, 0u, 0u);
  if (s >= num_blocks * (long)block_size) {
    if (i == 0) dsa_fault(faults, DSA_FAULT_SLOT_RANGE);
  } else if (s >= 0) {
    v = mla_read_slot(cache, cache_off, s, block_size, block_stride, i, cache_aligned);
  }
  dsa_store16(out + out_off + r * out_row_stride + i * 16u, v, out_aligned);
}

/* Prefill gather through block tables (§8.2). Grid (64, maxT, R): row j of
 * request r holds i = j - offset when 0 <= i < g. */
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void mla_gather_paged(
    __global const uchar *cache, ulong cache_off, long num_blocks, int block_size,
    ulong block_stride, __global const uchar *seq_lens, ulong sl_off, ulong sl_stride,
    __global const uchar *gather_lens, ulong gl_off, ulong gl_stride, int has_gather_lens,
    __global const uchar *table, ulong tb_off, ulong tb_row_stride, ulong tb_col_stride,
    long table_width, long offset, __global uchar *out, ulong out_off, ulong out_req_stride,
    ulong out_row_stride, long max_tokens, int cache_aligned, int out_aligned,
    __global volatile uint *faults) {
  const uint i = get_local_id(0);
  const long j = get_global_id(1);
  const ulong r = get_global_id(2);
  const long seq = *(__global const int *)(seq_lens + sl_off + r * sl_stride);
  const long g =
      has_gather_lens ? *(__global const int *)(gather_lens + gl_off + r * gl_stride) : seq;
  if (seq < 0 || g < 0 || g > seq) {
    if (i == 0 && j == 0) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
    return;
  }
  if (i == 0 && j == 0 && offset + g > max_tokens) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
  const long row = j - offset;
  if (row < 0 || row >= g) return;
  const long pos = seq - g + row;
  const long lb = pos / block_size;
  if (lb >= table_width) {
    if (i == 0) dsa_fault(faults, DSA_FAULT_INDEX_RANGE);
    return;
  }
  const long blk =
      *(__global const int *)(table + tb_off + r * tb_row_stride + (ulong)lb * tb_col_stride);
  uint4 v = (uint4)(0u, 0u, 0u, 0u);
  if (blk >= num_blocks) {
    if (i == 0) dsa_fault(faults, DSA_FAULT_SLOT_RANGE);
  } else if (blk >= 0) {
    v = mla_read_slot(cache, cache_off, blk * block_size + (pos - lb * block_size), block_size,
                      block_stride, i, cache_aligned);
  }
  dsa_store16(out + out_off + r * out_req_stride + (ulong)j * out_row_stride + i * 16u, v,
              out_aligned);
}
