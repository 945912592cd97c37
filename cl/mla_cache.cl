/* MLA KV cache, fp8_ds_mla layout (SPEC-reference §3.1, §8.1-8.3).
 *
 * Block b of the cache starts at cache + off + b * block_stride (64-bit):
 *   [0, bs*576)          token t's data at t*576: 448 e4m3 NoPE bytes, then
 *                        64 bf16 RoPE values (128 bytes)
 *   [bs*576, bs*584)     token t's 8 scale bytes at bs*576 + 8t: ue8m0 of
 *                        NoPE block q (dims [64q, 64q+64)) in byte q, byte 7 = 0
 *
 * Grid: a row (token) is 32 lanes; lane l owns dims [16l, 16l+16): lanes
 * 0..27 the seven NoPE blocks (4 lanes per block), lanes 28..31 the RoPE
 * dims. A work-group is (32, 8): eight rows, so groups stay busy long
 * enough to hide their dependent loads (index, then data); the insert loops
 * over tokens (see its comment). Every access is 16 bytes when the caller's
 * bases allow it (see dsa_load16).
 */
#include "dsa_mla.h"

/* LANES, ROWS and GATHER_UNROLL come from the launcher (src/op_mla_cache.c)
 * as build options; the lane mapping above assumes LANES = 32. */
#if LANES != 32
#error "mla_cache.cl: the lane mapping needs LANES = 32"
#endif

/* The slot of token n, or -1 past the last token. */
DSA_INLINE long mla_insert_slot(__global const uchar *slots, ulong slot_off, ulong slot_stride,
                                ulong n, long n_tokens) {
  return n < (ulong)n_tokens ? *(__global const long *)(slots + slot_off + n * slot_stride) : -1;
}

/* Lane `lane`'s 32 bytes of row n of k, or zeros past the last token. */
DSA_INLINE void mla_insert_load(__global const uchar *k, ulong k_off, ulong k_row_stride, ulong n,
                                long n_tokens, uint lane, int aligned, uint4 *r0, uint4 *r1) {
  *r0 = *r1 = (uint4)(0u);
  if (n < (ulong)n_tokens) {
    __global const uchar *src = k + k_off + n * k_row_stride + lane * 32u;
    *r0 = dsa_load16(src, aligned);
    *r1 = dsa_load16(src + 16, aligned);
  }
}

/* Insert grid: row lr of group g takes tokens g*ROWS + lr, then every
 * G*ROWS (G = groups launched; the host caps G at a few per compute unit), and
 * loads its next token before quantizing the current one, so every row keeps
 * two tokens' loads in flight. The trip count is the same for all items of a
 * group, so the portable path's barriers are reached by every item.
 *
 * The body is inlined into two kernels: al16 = 1 when the host found k and
 * the cache 16-byte aligned (the common case), so the alignment tests and the
 * vload/vstore fallbacks fold away; al16 = 0 derives them from the arguments
 * (the flags derived per item are issue 13 item 6's suspect for a 4 %
 * slowdown on the GPU since the arguments became tensors). */
#if DSA_HAS_SG32
#define MCI_LOCALS
#define MCI_LOCAL_PARAMS
#define MCI_LOCAL_ARGS
#else
#define MCI_LOCALS                         \
  __local uint amax_part[ROWS][LANES];     \
  __local uchar scale_bytes[ROWS][8];
#define MCI_LOCAL_PARAMS , __local uint (*amax_part)[LANES], __local uchar (*scale_bytes)[8]
#define MCI_LOCAL_ARGS , amax_part, scale_bytes
#endif

#define MCI_PARAMS DSA_CTENSOR2(k), DSA_CTENSOR1(slots), long n_tokens, DSA_PAGED(cache), DSA_FAULTS
#define MCI_ARGS                                                                       \
  DSA_TENSOR2_ARGS(k), DSA_TENSOR1_ARGS(slots), n_tokens, DSA_PAGED_ARGS(cache), faults

DSA_INLINE_ALWAYS void mci_body(MCI_PARAMS, int al16 MCI_LOCAL_PARAMS) {
  const uint lane = get_local_id(0), lr = get_local_id(1);
  const ulong step = (ulong)get_num_groups(1) * ROWS;
  const dsa_paged c = DSA_PAGED_OF(cache);
  const int k_aligned = al16 || k_al >= 16, cache_aligned = al16 || c.align >= 16;
  ulong n = (ulong)get_group_id(1) * ROWS + lr;
  long slot = mla_insert_slot(slots_mem, slots_off, slots_s0, n, n_tokens);
  uint4 raw0, raw1;
  mla_insert_load(k_mem, k_off, k_s0, n, n_tokens, lane, k_aligned, &raw0, &raw1);

  for (ulong base = n - lr; base < (ulong)n_tokens; base += step, n += step) {
    const long next_slot = mla_insert_slot(slots_mem, slots_off, slots_s0, n + step, n_tokens);
    uint4 next0, next1;
    mla_insert_load(k_mem, k_off, k_s0, n + step, n_tokens, lane, k_aligned, &next0, &next1);

    if (slot >= c.capacity && lane == 0) dsa_fault(faults, DSA_FAULT_SLOT_RANGE);
    /* Rows differ in validity, so every item stays in step (barriers,
     * shuffles) and only skips the memory work. */
    const bool valid = slot >= 0 && slot < c.capacity;
    __global uchar *data, *scales;
    dsa_paged_slot(&c, valid ? slot : 0, MLA_DATA_BYTES, 8u, &data, &scales);
    const uint w[8] = {raw0.x, raw0.y, raw0.z, raw0.w, raw1.x, raw1.y, raw1.z, raw1.w};
    uint m = dsa_bf16_amax_key(w, 8);
#if DSA_HAS_SG32
    mla_quant_nope_warp(m, w, lane, valid, data, scales, cache_aligned);
#else
    amax_part[lr][lane] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (valid && lane < NOPE_LANES)
      mla_quant_nope_lane(amax_part[lr], w, lane, data, cache_aligned, scale_bytes[lr]);
    barrier(CLK_LOCAL_MEM_FENCE);
    /* No third barrier: the next writes to amax_part/scale_bytes come after
     * the next iteration's first barrier, which these reads precede. */
    if (valid && lane == NOPE_LANES) mla_store_scales(scale_bytes[lr], scales, cache_aligned);
#endif
    if (valid && lane >= NOPE_LANES) { /* RoPE dims travel verbatim as bf16 */
      __global uchar *dst = data + MLA_NOPE + (lane - NOPE_LANES) * 32u;
      dsa_store16(dst, raw0, cache_aligned);
      dsa_store16(dst + 16, raw1, cache_aligned);
    }
    slot = next_slot;
    raw0 = next0;
    raw1 = next1;
  }
}

__kernel __attribute__((reqd_work_group_size(LANES, ROWS, 1))) DSA_SG32_KERNEL void
mla_cache_insert(MCI_PARAMS) {
  MCI_LOCALS
  mci_body(MCI_ARGS, 0 MCI_LOCAL_ARGS);
}

/* k and the cache 16-byte aligned (the launcher checked; the same arguments,
 * k_al and cache_al then unused). */
__kernel __attribute__((reqd_work_group_size(LANES, ROWS, 1))) DSA_SG32_KERNEL void
mla_cache_insert_a16(MCI_PARAMS) {
  MCI_LOCALS
  mci_body(MCI_ARGS, 1 MCI_LOCAL_ARGS);
}

/* Dequantizes lane `lane` of the token at data / scales (a slot already
 * range-checked) into 32 bytes. */
DSA_INLINE void mla_read_lane(__global const uchar *data, __global const uchar *scales,
                              uint lane, int aligned, uint4 *r0, uint4 *r1) {
  if (lane >= NOPE_LANES) {
    __global const uchar *src = data + MLA_NOPE + (lane - NOPE_LANES) * 32u;
    *r0 = dsa_load16(src, aligned);
    *r1 = dsa_load16(src + 16, aligned);
    return;
  }
  const uint u = scales[lane >> 2];
  const uint4 b = dsa_load16(data + lane * 16u, aligned);
  const uint2 o0 = dsa_dequant4_e4m3_bf16(b.x, u), o1 = dsa_dequant4_e4m3_bf16(b.y, u);
  const uint2 o2 = dsa_dequant4_e4m3_bf16(b.z, u), o3 = dsa_dequant4_e4m3_bf16(b.w, u);
  const uint o[8] = {o0.x, o0.y, o1.x, o1.y, o2.x, o2.y, o3.x, o3.y};
  *r0 = (uint4)(o[0], o[1], o[2], o[3]);
  *r1 = (uint4)(o[4], o[5], o[6], o[7]);
}

DSA_INLINE void mla_store_lane(__global uchar *dst, uint4 r0, uint4 r1, int aligned) {
  dsa_store16(dst, r0, aligned);
  dsa_store16(dst + 16, r1, aligned);
}

/* Each item serves GATHER_UNROLL rows, ROWS apart, issuing all their index
 * loads and then all their data loads: more bytes in flight per item is what
 * a random-access gather needs to approach the copy bandwidth. */

__kernel __attribute__((reqd_work_group_size(LANES, ROWS, 1))) void mla_gather_slots(
    DSA_CPAGED(cache), DSA_CTENSOR1(idx), long n_rows, DSA_TENSOR2(out), DSA_FAULTS) {
  const uint lane = get_local_id(0);
  const ulong r0 = get_group_id(1) * (ROWS * GATHER_UNROLL) + get_local_id(1);
  const dsa_paged c = DSA_PAGED_OF(cache);
  const int cache_aligned = c.align >= 16, out_aligned = out_al >= 16;
  long s[GATHER_UNROLL];
  #pragma unroll
  for (int u = 0; u < GATHER_UNROLL; u++) {
    const ulong r = r0 + u * ROWS;
    s[u] = r < (ulong)n_rows ? *(__global const int *)(idx_mem + idx_off + r * idx_s0) : -1;
  }
  uint4 v[GATHER_UNROLL][2];
  #pragma unroll
  for (int u = 0; u < GATHER_UNROLL; u++) {
    v[u][0] = v[u][1] = (uint4)(0u);
    if (s[u] >= c.capacity) {
      if (lane == 0) dsa_fault(faults, DSA_FAULT_SLOT_RANGE);
    } else if (s[u] >= 0) {
      __global uchar *data, *scales;
      dsa_paged_slot(&c, s[u], MLA_DATA_BYTES, 8u, &data, &scales);
      mla_read_lane(data, scales, lane, cache_aligned, &v[u][0], &v[u][1]);
    }
  }
  #pragma unroll
  for (int u = 0; u < GATHER_UNROLL; u++) {
    const ulong r = r0 + u * ROWS;
    if (r < (ulong)n_rows)
      mla_store_lane(out_mem + out_off + r * out_s0 + lane * 32u, v[u][0], v[u][1],
                     out_aligned);
  }
}

/* Prefill gather through block tables (§8.2). Grid (32, maxT, R): row j of
 * request r holds i = j - offset when 0 <= i < g. */
__kernel __attribute__((reqd_work_group_size(LANES, ROWS, 1))) void mla_gather_paged(
    DSA_CPAGED(cache), DSA_CTENSOR1(seq_lens), DSA_CTENSOR1(gather_lens), int has_gather_lens,
    DSA_CTENSOR2(table), long table_width, long offset, DSA_TENSOR3(out), long max_tokens,
    DSA_FAULTS) {
  const uint lane = get_local_id(0);
  const long j = get_global_id(1);
  const ulong r = get_global_id(2);
  if (j >= max_tokens) return;
  const dsa_paged c = DSA_PAGED_OF(cache);
  const long seq = *(__global const int *)(seq_lens_mem + seq_lens_off + r * seq_lens_s0);
  const long g = has_gather_lens
                     ? *(__global const int *)(gather_lens_mem + gather_lens_off +
                                               r * gather_lens_s0)
                     : seq;
  if (seq < 0 || g < 0 || g > seq) {
    if (lane == 0 && j == 0) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
    return;
  }
  if (lane == 0 && j == 0 && offset + g > max_tokens) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
  const long row = j - offset;
  if (row < 0 || row >= g) return;
  const long pos = seq - g + row;
  const long lb = pos / c.block_size;
  if (lb >= table_width) {
    if (lane == 0) dsa_fault(faults, DSA_FAULT_INDEX_RANGE);
    return;
  }
  const long blk =
      *(__global const int *)(table_mem + table_off + r * table_s0 + (ulong)lb * table_s1);
  uint4 r0 = (uint4)(0u), r1 = (uint4)(0u);
  if (blk >= c.num_blocks) {
    if (lane == 0) dsa_fault(faults, DSA_FAULT_SLOT_RANGE);
  } else if (blk >= 0) {
    __global uchar *data, *scales;
    dsa_paged_at(&c, blk, pos - lb * c.block_size, MLA_DATA_BYTES, 8u, &data, &scales);
    mla_read_lane(data, scales, lane, c.align >= 16, &r0, &r1);
  }
  mla_store_lane(out_mem + out_off + r * out_s0 + (ulong)j * out_s1 + lane * 32u, r0, r1,
                 out_al >= 16);
}
