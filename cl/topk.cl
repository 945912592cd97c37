/* Indexer top-k per row (SPEC-reference §7 with SPEC.md's deterministic
 * rule): rank by value descending (NaN = -inf, -0.0 = +0.0), ties by column
 * ascending; emit the first k in that order. Rows with n <= k emit
 * 0..n-1 then -1 without reading logits.
 *
 * Layout: logits f32, row r at logits_mem + logits_off + r * logits_s0 (bytes), unit inner
 * stride. Range sources by mode: 0 prefill (starts a[r], ends b[r]),
 * 1 decode 1-D lengths a[r / next_n], 2 decode 2-D lengths a[r / next_n][r %
 * next_n]. Output i32 at out_mem + out_off + r * out_s0 + j * out_s1 (bytes).
 *
 * Grid: one work-group per row (group id = row), WG items, WG a power of two
 * in [64, TOPK_MAX_WG] chosen by the host. Algorithm (radix select on an
 * order-preserving uint key, all in local memory):
 *   levels 0..2: histogram of key bits [21,32), [10,21), [0,10) among the
 *     elements whose higher bits equal the prefix found so far (local
 *     atomics), then a group scan finds the bin holding the k-th largest.
 *     When that bin holds exactly the number still needed, the selection is
 *     complete early ("all_eq"); otherwise after level 2 the k-th key T is
 *     known exactly.
 *   collect: elements above the prefix (and all of the prefix bin when
 *     all_eq) go to a local buffer through an atomic counter: the order of
 *     arrival does not matter, the sort below fixes it.
 *   ties at T (not all_eq): a chunked pass in column order with a group
 *     scan takes the lowest columns among key == T: deterministic.
 *   sort: bitonic sort of the k packed (key << 32 | ~column) words,
 *     descending = value descending then column ascending, up to four
 *     network steps per pass in registers (16-word groups); write columns.
 * Passes over the row read global memory (the row stays in L1/L2 between
 * passes); each item reads columns tid, tid + WG, ... (coalesced), four
 * loads in flight per item.
 */
#include "dsa_common.h"

/* TOPK_MAX_K (= DSA_TOPK_MAX_K) and TOPK_MAX_WG come from the launcher
 * (src/op_topk.c) as build options. */
#define TOPK_BINS 2048

/* Order-preserving key: larger float -> larger key. NaN maps to -inf's key,
 * -0.0 to +0.0's, so both pairs tie and fall back to the column order. */
DSA_INLINE uint topk_key(float x) {
  uint u = as_uint(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) u = 0xFF800000u;
  if (u == 0x80000000u) u = 0u;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Exclusive scan of v over the group (tmp holds wg entries); *total = sum.
 * Every item must call it; it ends with a barrier, so tmp is free again. */
DSA_INLINE uint topk_scan_excl(uint v, __local uint *tmp, uint tid, uint wg, uint *total) {
  tmp[tid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint off = 1u; off < wg; off <<= 1) {
    const uint x = tid >= off ? tmp[tid - off] : 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    tmp[tid] += x;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const uint incl = tmp[tid];
  *total = tmp[wg - 1u];
  barrier(CLK_LOCAL_MEM_FENCE);
  return incl - v;
}

/* Candidate buffer index, skewed by one word per 16 so that the sort's
 * 16-word register groups do not all start in the same memory bank. */
#define TOPK_SK(i) ((i) + ((i) >> 4))

/* One pass of the bitonic network in registers: the M consecutive steps with
 * strides 2^(ld+M-1) .. 2^ld of the merge of blocks of `size`. The 2^M words
 * {base + j * 2^ld} are closed under those steps, so each item loads a group,
 * runs M * 2^(M-1) compare-exchanges on it and stores it back: one barrier
 * and two local accesses per word for M steps. Within a group every pair
 * sorts the same way (descending where bit `size` of the position is 0). */
#define TOPK_SORT_PASS(M)                                                                   \
  DSA_INLINE void topk_sort_pass##M(__local ulong *buf, uint p2, uint size, uint ld, uint tid, \
                                    uint wg) {                                              \
    for (uint g = tid; g < (p2 >> (M)); g += wg) {                                          \
      const uint base = ((g >> ld) << (ld + (M))) + (g & ((1u << ld) - 1u));                \
      const bool desc = (base & size) == 0u;                                                \
      ulong v[1 << (M)];                                                                    \
      _Pragma("unroll") for (uint j = 0u; j < (1u << (M)); j++)                             \
        v[j] = buf[TOPK_SK(base + (j << ld))];                                              \
      _Pragma("unroll") for (uint t = 0u; t < (M); t++) {                                   \
        const uint hs = (1u << (M)) >> (t + 1u);                                            \
        _Pragma("unroll") for (uint j = 0u; j < (1u << (M)); j++) {                         \
          if ((j & hs) == 0u) {                                                             \
            const ulong x = v[j], y = v[j + hs];                                            \
            const bool sw = desc ? x < y : x > y;                                           \
            v[j] = sw ? y : x;                                                              \
            v[j + hs] = sw ? x : y;                                                         \
          }                                                                                 \
        }                                                                                   \
      }                                                                                     \
      _Pragma("unroll") for (uint j = 0u; j < (1u << (M)); j++)                             \
        buf[TOPK_SK(base + (j << ld))] = v[j];                                              \
    }                                                                                       \
  }
TOPK_SORT_PASS(1)
TOPK_SORT_PASS(2)
TOPK_SORT_PASS(3)
TOPK_SORT_PASS(4)

#define TOPK_HIST(v)                                                  \
  do {                                                                \
    const uint key_ = topk_key(v);                                    \
    if ((key_ & fmask) == fval) atomic_inc(&hist[(key_ >> shift) & (nbins - 1u)]); \
  } while (0)

#define TOPK_COLLECT(v, col)                                          \
  do {                                                                \
    const uint key_ = topk_key(v);                                    \
    const uint m_ = key_ & fmask;                                     \
    if (m_ > fval || (all_eq && m_ == fval)) {                        \
      const uint slot_ = atomic_inc(&count);                          \
      buf[TOPK_SK(slot_)] = ((ulong)key_ << 32) | (ulong)(~(uint)(col)); \
    }                                                                 \
  } while (0)

__kernel void topk_per_row(DSA_CTENSOR2(logits), long n_cols, int mode, DSA_CTENSOR2(a),
                           DSA_CTENSOR1(b), int next_n, DSA_TENSOR2(out), int k, DSA_FAULTS) {
  __local uint hist[TOPK_BINS];
  __local ulong buf[TOPK_SK(TOPK_MAX_K)];
  __local uint tmp[TOPK_MAX_WG];
  __local uint sel[3];
  __local uint count;

  const uint tid = get_local_id(0), wg = get_local_size(0);
  const ulong r = get_group_id(0);

  /* The row's range; every item reads the same words (broadcast). */
  long start = 0, end;
  bool bad = false;
  if (mode == 0) {
    start = *(__global const int *)(a_mem + a_off + r * a_s0);
    end = *(__global const int *)(b_mem + b_off + r * b_s0);
  } else {
    const ulong bi = r / (ulong)next_n, i = r - bi * (ulong)next_n;
    const long len = *(__global const int *)(a_mem + a_off + bi * a_s0 + (mode == 2 ? i * a_s1 : 0ul));
    bad = len < 0;
    end = mode == 2 ? len : len - next_n + (long)i + 1;
    if (!bad && end < 0) end = 0; /* 1-D rule: queries before the context see nothing */
  }
  bad = bad || start < 0 || end > n_cols || start > end;
  if (bad && tid == 0u) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
  const long s = clamp(start, 0l, n_cols), e = clamp(end, s, n_cols);
  const uint n = (uint)(e - s);
  __global uchar *orow = out_mem + out_off + r * out_s0;

  if (n <= (uint)k) { /* the whole group leaves together */
    for (uint j = tid; j < (uint)k; j += wg)
      *(__global int *)(orow + j * out_s1) = j < n ? (int)j : -1;
    return;
  }

  __global const float *row = (__global const float *)(logits_mem + logits_off + r * logits_s0) + s;

  /* ---- radix select: find the prefix (fval under fmask) of the k-th key ---- */
  uint fmask = 0u, fval = 0u, rem = (uint)k;
  bool all_eq = false;
  /* Single-exit loops around barriers (PoCL's region builder needs them). */
  for (uint level = 0u; level < 3u; level++) {
    const uint shift = level == 0 ? 21u : level == 1 ? 10u : 0u;
    const uint nbins = level == 2 ? 1024u : 2048u;
    for (uint j = tid; j < nbins; j += wg) hist[j] = 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    uint i = tid;
    for (; i + 3u * wg < n; i += 4u * wg) {
      const float v0 = row[i], v1 = row[i + wg], v2 = row[i + 2u * wg], v3 = row[i + 3u * wg];
      TOPK_HIST(v0);
      TOPK_HIST(v1);
      TOPK_HIST(v2);
      TOPK_HIST(v3);
    }
    for (; i < n; i += wg) TOPK_HIST(row[i]);
    barrier(CLK_LOCAL_MEM_FENCE);

    /* Item t owns the bins [hi - per, hi), counted from the top. */
    const uint per = nbins / wg, hi = nbins - tid * per;
    uint sum = 0u;
    for (uint j = hi - per; j < hi; j++) sum += hist[j];
    uint total;
    const uint before = topk_scan_excl(sum, tmp, tid, wg, &total);
    if (before < rem && rem <= before + sum) {
      uint acc = before;
      for (uint j = hi; j-- > hi - per;) {
        const uint h = hist[j];
        if (acc + h >= rem) {
          sel[0] = j, sel[1] = acc, sel[2] = h;
          break;
        }
        acc += h;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint bin = sel[0];
    rem -= sel[1];
    all_eq = sel[2] == rem;
    fval |= bin << shift;
    fmask |= (nbins - 1u) << shift;
    level = all_eq ? 3u : level;
  }

  /* ---- collect the selected candidates ---- */
  if (tid == 0u) count = 0u;
  barrier(CLK_LOCAL_MEM_FENCE);
  {
    uint i = tid;
    for (; i + 3u * wg < n; i += 4u * wg) {
      const float v0 = row[i], v1 = row[i + wg], v2 = row[i + 2u * wg], v3 = row[i + 3u * wg];
      TOPK_COLLECT(v0, i);
      TOPK_COLLECT(v1, i + wg);
      TOPK_COLLECT(v2, i + 2u * wg);
      TOPK_COLLECT(v3, i + 3u * wg);
    }
    for (; i < n; i += wg) TOPK_COLLECT(row[i], i);
  }
  barrier(CLK_LOCAL_MEM_FENCE);

  if (!all_eq) {
    /* fval is the k-th key T; take the rem lowest columns with key == T,
     * chunk by chunk in column order (item t: columns c0 + 4t .. 4t+3). */
    const uint base = (uint)k - rem;
    uint taken = 0u;
    for (uint c0 = 0u; c0 < n; c0 += 4u * wg) {
      const uint i0 = c0 + 4u * tid;
      uint flags = 0u, c = 0u;
#pragma unroll
      for (uint qq = 0u; qq < 4u; qq++) {
        const uint i = i0 + qq;
        if (i < n && topk_key(row[i]) == fval) flags |= 1u << qq, c++;
      }
      uint tot;
      uint pos = taken + topk_scan_excl(c, tmp, tid, wg, &tot);
#pragma unroll
      for (uint qq = 0u; qq < 4u; qq++) {
        if ((flags >> qq) & 1u) {
          if (pos < rem) buf[TOPK_SK(base + pos)] = ((ulong)fval << 32) | (ulong)(~(i0 + qq));
          pos++;
        }
      }
      taken += tot;
      c0 = taken >= rem ? n : c0; /* done: leave after this chunk */
    }
  }

  /* ---- sort the k candidates, descending; pads (0) sink to the end ---- */
  uint p2 = 1u;
  while (p2 < (uint)k) p2 <<= 1;
  for (uint j = (uint)k + tid; j < p2; j += wg) buf[TOPK_SK(j)] = 0ul;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint ls = 1u; ls <= 11u; ls++) { /* merge size 2^ls */
    const uint size = 1u << ls;
    uint steps = size <= p2 ? ls : 0u; /* strides 2^(steps-1) .. 1 still to do */
    while (steps > 0u) {
      const uint m = (steps & 3u) ? (steps & 3u) : 4u, ld = steps - m;
      if (m == 4u) topk_sort_pass4(buf, p2, size, ld, tid, wg);
      else if (m == 3u) topk_sort_pass3(buf, p2, size, ld, tid, wg);
      else if (m == 2u) topk_sort_pass2(buf, p2, size, ld, tid, wg);
      else topk_sort_pass1(buf, p2, size, ld, tid, wg);
      barrier(CLK_LOCAL_MEM_FENCE);
      steps -= m;
    }
  }
  for (uint j = tid; j < (uint)k; j += wg)
    *(__global int *)(orow + j * out_s1) = (int)(~(uint)buf[TOPK_SK(j)]);
}
