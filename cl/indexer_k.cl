/* Indexer K cache: quantize + insert (SPEC-reference §5.1, §5.3 standalone)
 * and the prefill gather (§6.5), FP8 and MXFP4 layouts (§3.2, §3.3).
 *
 * Block b starts at cache + off + b * block_stride (64-bit; dsa_paged):
 *   FP8:   [0, bs*128) token t's 128 e4m3 at t*128; [bs*128, bs*132) its f32
 *          scale (a power of two) at bs*128 + 4t.
 *   MXFP4: [0, bs*64) token t's 64 packed e2m1 at t*64; [bs*64, bs*68) its 4
 *          ue8m0 bytes at bs*64 + 4t (byte q = dims [32q, 32q+32)).
 *
 * Insert grid: (4, 64) work-groups; lane l of a row owns dims [32l, 32l+32)
 * (four 16-byte loads); FP8 reduces the four lane maxima of a row through
 * local memory, MXFP4 lanes are independent (one block each).
 * Gather grid: (ipr, 32) work-groups, ipr = 8 (FP8) or 4 (MXFP4) lanes of
 * 16 bytes per output row; lane 0 also copies the row's 4 scale bytes. The
 * request of a row is found by bisection over cu_seqlens (L1-resident).
 */
#include "dsa_mxfp4.h"

/* IK_ROWS and IKG_ROWS (rows per work-group of the insert and the gather)
 * come from the launcher (src/op_indexer_k.c) as build options. */
/* fp32 1e-4: the FP8 amax floor (§5.1). */
#define IK_FP8_FLOOR_BITS 0x38D1B717u

__kernel __attribute__((reqd_work_group_size(4, IK_ROWS, 1))) void indexer_k_insert(
    DSA_CTENSOR2(k), DSA_CTENSOR1(slots), long n_tokens, DSA_PAGED(cache), int mxfp4, int mode,
    DSA_FAULTS) {
  __local uint amax_part[IK_ROWS][4];
  const uint lane = get_local_id(0), lr = get_local_id(1);
  const ulong n = get_global_id(1);
  const bool in_range = n < (ulong)n_tokens;
  const long slot =
      in_range ? *(__global const long *)(slots_mem + slots_off + n * slots_s0) : -1;
  const dsa_paged c = DSA_PAGED_OF(cache);
  const int c_al = c.align >= 16;
  if (slot >= c.capacity && lane == 0u) dsa_fault(faults, DSA_FAULT_SLOT_RANGE);
  const bool valid = slot >= 0 && slot < c.capacity;

  uint wd[16];
  uint m = 0u;
  if (in_range) {
    __global const uchar *src = k_mem + k_off + n * k_s0 + lane * 64u;
#pragma unroll
    for (int v = 0; v < 4; v++) {
      const uint4 x = dsa_load16(src + 16 * v, k_al >= 16);
      wd[4 * v] = x.x, wd[4 * v + 1] = x.y, wd[4 * v + 2] = x.z, wd[4 * v + 3] = x.w;
    }
    m = dsa_bf16_amax_key(wd, 16);
  }
  __global uchar *data, *scale;
  dsa_paged_slot(&c, valid ? slot : 0,
                 mxfp4 ? DSA_CACHE_INDEXER_MXFP4_DATA : DSA_CACHE_INDEXER_FP8_DATA,
                 mxfp4 ? DSA_CACHE_INDEXER_MXFP4_SCALE : DSA_CACHE_INDEXER_FP8_SCALE, &data,
                 &scale);

  /* The barrier is unconditional (MXFP4 does not need it): PoCL mishandles
   * an early return after a barrier inside a uniform branch. */
  amax_part[lr][lane] = m;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!valid) return;
  if (!mxfp4) {
    m = max(max(amax_part[lr][0], amax_part[lr][1]), max(amax_part[lr][2], amax_part[lr][3]));
    const int e = dsa_e4m3_scale_exp(max(m, IK_FP8_FLOOR_BITS));
    uint ob[8];
#pragma unroll
    for (int j = 0; j < 8; j++) ob[j] = dsa_bf16x4_to_e4m3_pow2(wd[2 * j], wd[2 * j + 1], e);
    __global uchar *dst = data + lane * 32u;
    dsa_store16(dst, (uint4)(ob[0], ob[1], ob[2], ob[3]), c_al);
    dsa_store16(dst + 16, (uint4)(ob[4], ob[5], ob[6], ob[7]), c_al);
    if (lane == 0u) vstore4(as_uchar4((uint)(e + 127) << 23), 0, scale);
    return;
  }

  const int e = dsa_mxfp4_scale_exp(m, mode);
  dsa_store16(data + lane * 16u, dsa_bf16x32_to_e2m1(wd, e, mode), c_al);
  scale[lane] = (uchar)(e + 127);
}

DSA_INLINE long ik_cu(__global const uchar *cu, ulong cu_off, ulong cu_st, int r) {
  return (long)*(__global const int *)(cu + cu_off + (ulong)r * cu_st);
}

__kernel void indexer_k_gather(DSA_CPAGED(cache), int mxfp4, DSA_CTENSOR2(bt), long W,
                               DSA_CTENSOR1(cu), int R, DSA_TENSOR2(ko), DSA_TENSOR2(ks),
                               long total, DSA_FAULTS) {
  const uint lane = get_local_id(0);
  const long i = (long)get_global_id(1);
  if (i >= total) return; /* no barrier in this kernel */
  const dsa_paged c = DSA_PAGED_OF(cache);
  const long last = ik_cu(cu_mem, cu_off, cu_s0, R);
  if (i == 0 && lane == 0u && last > total) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);

  int lo = 0, hi = R;
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (ik_cu(cu_mem, cu_off, cu_s0, mid) <= i) lo = mid;
    else hi = mid;
  }
  const long start = ik_cu(cu_mem, cu_off, cu_s0, lo);
  const long end = lo + 1 == R ? last : ik_cu(cu_mem, cu_off, cu_s0, lo + 1);
  if (i < start || i >= end) {
    const bool uncovered = i < ik_cu(cu_mem, cu_off, cu_s0, 0) || (lo == R - 1 && i >= end);
    if (!uncovered && lane == 0u) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
    return;
  }
  const uint j = (uint)(i - start);
  const uint lb = j / (uint)c.block_size, t = j - lb * (uint)c.block_size;
  if ((long)lb >= W) {
    if (lane == 0u) dsa_fault(faults, DSA_FAULT_INDEX_RANGE);
    return;
  }
  const long blk =
      *(__global const int *)(bt_mem + bt_off + (ulong)lo * bt_s0 + (ulong)lb * bt_s1);
  const bool ok = blk >= 0 && blk < c.num_blocks;
  if (blk >= c.num_blocks && lane == 0u) dsa_fault(faults, DSA_FAULT_SLOT_RANGE);
  __global uchar *data, *scale;
  dsa_paged_at(&c, ok ? blk : 0, t,
               mxfp4 ? DSA_CACHE_INDEXER_MXFP4_DATA : DSA_CACHE_INDEXER_FP8_DATA,
               mxfp4 ? DSA_CACHE_INDEXER_MXFP4_SCALE : DSA_CACHE_INDEXER_FP8_SCALE, &data,
               &scale);
  const uint4 v = ok ? dsa_load16(data + lane * 16u, c.align >= 16) : (uint4)(0u);
  dsa_store16(ko_mem + ko_off + (ulong)i * ko_s0 + lane * 16u, v, ko_al >= 16);
  if (lane == 0u) {
    const uchar4 s = ok ? vload4(0, scale) : (uchar4)(0);
    vstore4(s, 0, ks_mem + ks_off + (ulong)i * ks_s0);
  }
}
