/* Indexer top-k per row (SPEC-reference §7 with SPEC.md's deterministic
 * rule): rank by value descending (NaN = -inf, -0.0 = +0.0), ties by column
 * ascending; emit the first k in that order. Rows with n <= k emit
 * 0..n-1 then -1 without reading logits.
 *
 * Layout: logits f32, or bf16 when lbf16 (ranked by the exact f32 widening:
 * the same keys, so one rule), row r at logits_mem + logits_off + r *
 * logits_s0 (bytes), unit inner stride. Range sources by mode: 0 prefill (starts a[r], ends b[r]),
 * 1 decode 1-D lengths a[r / next_n], 2 decode 2-D lengths a[r / next_n][r %
 * next_n]. Output i32 at out_mem + out_off + r * out_s0 + j * out_s1 (bytes).
 *
 * Every element becomes one 64-bit word, key << 32 | ~column, where key is
 * the order-preserving image of the value: the rule is "the k largest words,
 * largest first", and words are unique, so every selection below is exact
 * and needs no separate tie pass.
 *
 * Three kernels (src/op_topk.c picks; every one gives the same bytes):
 *
 * topk_rows_<WG> (variants "row" and "wide", and the first pass of "split";
 *   one kernel per group size, so that the loads use immediate offsets;
 *   "wide" is one group of up to 1024 items per row for few rows, one
 *   launch where the split takes two): a work-group
 *   holds up to WG * TOPK_VPT columns in registers (item t: columns t,
 *   t + WG, ...: coalesced loads, all in flight at once), read once.
 *   topk_lrows_<WG> (variant "lrow", and split's first pass where it fits)
 *   is the same body with the keys in local memory instead (WG * TOPK_VPT
 *   words, one histogram instead of two), loaded 4 columns at a time
 *   (slot j of item t: column 4 ((j >> 2) WG + t) + (j & 3)), its loops
 *   running over the set bits of the masks only (TOPK_EACH). Its select first tries a sampled threshold (samp, a kernel
 *   argument: DSACL_TOPK_SAMPLE): a 1/8 sample's level-0 histogram puts a
 *   bin T a little below the m-th largest; if m .. arena_words keys have a
 *   digit >= T, those candidates go to local memory and radix levels over
 *   them find the m largest (exact: they hold every word above the m-th);
 *   else the radix select below runs. lrow then sorts by counting (the
 *   candidates whole, which skips their radix levels): each word's rank is
 *   the words in higher bins of a digit plus the larger ones in its bin,
 *   with the merge sort below as the fallback for crowded bins.
 *   topk_rows_512 (the few-row split's chunks: decode) and topk_rows_1024
 *   (wide: decode k = 2048) sort by counting too, with a side room of
 *   local memory that the host gives them (keys, keys_words) where that
 *   fits beside the arena (topk_rows_1024 in place: its room holds the
 *   bins only), and stop their select after level 0 where level 0's bin
 *   and the bins above it pad to at most 2 p2 words (TOPK_L0STOP): those
 *   candidates are sorted whole and the first m kept, the level that
 *   would split the bin skipped (H200, 64 x 32768: k = 512 24.7 -> 22.3
 *   us, bf16 31.4 -> 23.0, k = 2048 35.3 -> 24.5; the merge sort takes
 *   them, padded, where a crowded bin stops the counting sort). Where
 *   the time of topk_rows_512's chunks goes, phase by phase:
 *   tools/probes/topk_trace and docs/PERFORMANCE.md, session 22. The
 *   select is bound by
 *   latency (short phases between barriers), so what pays is more groups
 *   per compute unit (except where one group an SM is all the rows give:
 *   topk_rows_512 takes registers instead, TOPK_NV_CAP below): on an H200
 *   (ptxas) topk_lrows_256
 *   took 40 registers and 44 KiB of local memory (five groups per SM; 48
 *   on the H100 with the sampled select, 56 with the counting sort: four;
 *   48 again since round 9, see topk_rows_body's prologue: five),
 *   topk_rows_256 76 (it took 162 before the
 *   mask loops read their mask once, TOPK_EACH: one group per SM).
 *   Radix select on the word, with per-item bit masks of the elements still
 *   "alive": level 0 histograms the 14-bit key prefix (sign, exponent, 5
 *   mantissa bits) in a window of 2048 bins below the group's largest key
 *   (a max-reduction first), everything lower in bin 0, which takes no
 *   atomics (its count is what the others leave): a spread-out first digit,
 *   so the local atomics of random data rarely meet on one bin. Then key
 *   bits [7,18) and [0,7) (or the whole key, 11/11/10 bits, when bin 0 was
 *   taken), then 11 + 11 bits of the inverted column. Each level: local
 *   histogram of the alive elements, a group scan finding the bin that holds
 *   the rem-th largest, a mask update; it stops at the first bin holding
 *   exactly the rem still needed (for distinct values: after the last key
 *   level at the latest). The winners go to local memory at positions from
 *   a group scan (no atomics), padded to a power of two p2, and are merge-
 *   sorted descending with E = max(emin, p2 / WG) words per item (emin 4
 *   where lrow groups fill the device, else 2): each item sorts its E in
 *   registers (bitonic), then log2(p2 / E) rounds merge pairs of runs,
 *   each item finding its E outputs on the merge path by a binary search
 *   (one barrier a round with two local buffers). topk_rows with sub-
 *   groups of 32 sorts each 32-item row's 32 E words by a bitonic network
 *   of shuffles instead of the register sort and the first five rounds
 *   (not topk_rows_1024: capped at 64 registers, it sorts faster without).
 *   Group scans and the max use sub-group shuffles where the build has
 *   them (cl/dsa_subgroup.h: NVIDIA shfl.sync, AMD ds_bpermute, Intel
 *   sub-groups of 32; two barriers instead of 2 log2 WG), local memory
 *   otherwise. Row mode writes the columns; chunk mode (split) sorts the
 *   top min(k, chunk length) of one chunk of a row and writes the words to a
 *   scratch list; with split 2 the row's last group to finish (a per-row
 *   counter after a device-scope fence) then merges the row's lists in
 *   local memory as topk_merge does, in the same launch (H200, 64 x 32768
 *   k = 512: 28.2 us against 32.2 with the second launch).
 * topk_merge (second pass of "split" where the arena cannot hold a row's
 *   lists, or DSACL_TOPK_MERGE=kernel): chunk lists are sorted, and every
 *   element of the row's top k is in its chunk's list, with everything that
 *   outranks it in some list. So an element's rank in the row is its index
 *   in its own list plus, for each other list, the number of larger words
 *   there; ranks below k are written. An item ranks a few consecutive list
 *   entries: a binary search per other list for the first, a forward walk
 *   for the rest. No barriers.
 * topk_per_row ("stream", any row length, the portable fallback): one
 *   work-group per row, three radix-histogram passes over global memory with
 *   local atomics, a collect pass, a column-ordered tie pass and a bitonic
 *   sort of the k winners in local memory.
 */
#include "dsa_common.h"

/* TOPK_MAX_K (= DSA_TOPK_MAX_K), TOPK_MAX_WG, TOPK_VPT, TOPK_E_MAX,
 * TOPK_MERGE_Q, TOPK_SK_WG and TOPK_BINS (the radix histogram's bins, which
 * the host sizes local memory by) come from the launcher (src/op_topk.c)
 * as build options. */
/* topk_lrows: 4-column loads in flight per item and batch (a build option
 * for tuning). 8, all of a full item's, since the full groups' loads go
 * before their keys (8192 x 8192 k = 512, same calls: H100 2 -> 4 213.8-
 * 214.2 -> 199.6-200.0 us, 1: 235.2; H200 4 -> 8 197.0 -> 194.2, bf16
 * 204.5-204.8 -> 199.5; docs/PERFORMANCE.md, session 23); 2 before (4 was
 * slower with each key after its load). */
#ifndef TOPK_LK_VB
#define TOPK_LK_VB 8u
#endif
/* topk_lrows: loops over the set bits of the masks (1) or over all slots
 * (0, as topk_rows); a build option for tuning, like TOPK_LK_VB. */
#ifndef TOPK_LK_BITLOOP
#define TOPK_LK_BITLOOP 1
#endif
/* topk_lrows' sampled select: one key in 2^TOPK_SAMPLE_LOG sampled (2, 3, 4
 * or 5), and the sample's rank that sets the threshold: its expected share of
 * the m largest plus TOPK_SAMPLE_Z standard deviations plus 2. Build
 * options for tuning. */
/* TOPK_SAMPLE 0 (a build option) compiles the sampled select out. */
#ifndef TOPK_SAMPLE
#define TOPK_SAMPLE 1
#endif
/* 1/8 (since session 22; 1/16 before): H200, 8192 x 8192 k = 512 224.4 ->
 * 217.7 us, bf16 227.2 -> 215.5 (1/32: 246.3 / 259.4; with Z 1.5: 218.9 /
 * 219.4; docs/PERFORMANCE.md, session 22). Again in session 24, after the
 * sort's range from the threshold: 1/8 and Z 2 182.8 us, 1/4 186.3, Z 1.5
 * 184.7, Z 2.5 184.4; TOPK_CSORT_LIM 32 / 128 the same as 64. */
#ifndef TOPK_SAMPLE_LOG
#define TOPK_SAMPLE_LOG 3
#endif
#ifndef TOPK_SAMPLE_Z
#define TOPK_SAMPLE_Z 2.0f
#endif
#if TOPK_SAMPLE_LOG == 2
#define TOPK_SAMPLE_PAT 0x11111111u
#elif TOPK_SAMPLE_LOG == 3
#define TOPK_SAMPLE_PAT 0x01010101u
#elif TOPK_SAMPLE_LOG == 4
#define TOPK_SAMPLE_PAT 0x00010001u
#elif TOPK_SAMPLE_LOG == 5
#define TOPK_SAMPLE_PAT 0x00000001u
#else
#error "TOPK_SAMPLE_LOG: 2, 3, 4 or 5"
#endif

/* topk_lrows sorts its winners (or candidates) by counting (TOPK_CSORT 1)
 * with about TOPK_CSORT_RATIO bins a word, unless a bin gets TOPK_CSORT_LIM
 * words (at most 255; then the radix levels and the merge rounds sort).
 * Build options for tuning; TOPK_CSORT 0 compiles it out (PoCL builds
 * with it: dsa__topk_device_options, src/op_topk.c). */
#ifndef TOPK_CSORT
#define TOPK_CSORT 1
#endif
/* TOPK_GMERGE 0 compiles the split's merge in a row's last group out
 * (split 2 is then never launched): PoCL builds with it, where the merge's
 * barriers under data-dependent branches made its work-group compiler take
 * minutes per kernel (test_topk over 10 minutes against about 1.5;
 * dsa__topk_device_options and merge_in_group_ok, src/op_topk.c). */
/* TOPK_L0STOP 0 (a build option) compiles the register kernels' level-0
 * stop out (the candidates of level 0 sorted whole; topk_rows_body). */
#ifndef TOPK_L0STOP
#define TOPK_L0STOP 1
#endif
#ifndef TOPK_GMERGE
#define TOPK_GMERGE 1
#endif
/* One bin a word (the least power of two >= nw): H200, 8192 x 8192 k =
 * 512 (lrow) 245.6 -> 223.7 us, bf16 248.4 -> 226.3, 64 x 32768 k = 512
 * 21.0 -> 20.7 against two a word (half a word: the same within the
 * runs' spread; docs/PERFORMANCE.md, session 22). Fewer bins to clear and
 * scan; the walk within a bin grows a little. */
#ifndef TOPK_CSORT_RATIO
#define TOPK_CSORT_RATIO 1u
#endif
#ifndef TOPK_CSORT_LIM
#define TOPK_CSORT_LIM 64u
#endif
#if TOPK_CSORT_LIM > 255
#error "TOPK_CSORT_LIM: at most 255 (a byte per slot)"
#endif

/* Full unrolling keeps the per-item arrays in registers on GPUs; CPU
 * compilers do better with plain loops (PoCL took minutes to build the
 * unrolled kernels). TOPK_FORCE_UNROLL (define it in a copy of this file
 * read through DSACL_KERNEL_DIR) builds the GPU form on a CPU runtime. */
#if defined(DSA_DEVICE_CPU) && DSA_DEVICE_CPU && !defined(TOPK_FORCE_UNROLL)
#define TOPK_UNROLL
#else
#define TOPK_UNROLL _Pragma("unroll")
#endif

/* The register kernels that sort by counting in a side room of local
 * memory (topk_rows_body's sk): topk_rows_<WG> for WG >= TOPK_SK_WG (512,
 * from the host) on GPUs, the few-row split's chunks and wide (decode);
 * every size on CPU devices, whose register kernels stop at 128 items (the
 * driver's limit), so that the tests run that code there (src/op_topk.c
 * gives the room to the same kernels). */
#if defined(DSA_DEVICE_CPU) && DSA_DEVICE_CPU
#define TOPK_SK_ALL 1
#else
#define TOPK_SK_ALL 0
#endif

/* Order-preserving key: larger float -> larger key. NaN maps to -inf's key,
 * -0.0 to +0.0's, so both pairs tie and fall back to the column order.
 * Bits u >= 0 go to u + 2^31, u < 0 to -u (= ~u + 1, so that -0.0 meets
 * +0.0 at 2^31 without a compare), both plus 2^23 - 1, which wraps the
 * positive NaNs (above +inf) to the bottom, beside the negative NaNs below
 * -inf; the max lifts every NaN to -inf's key, 2^24 - 1. Four instructions
 * (shift, three-input logic op, three-input add, max) where the compare-
 * and-select form took seven (H100, docs/PERFORMANCE.md, session 23). Any
 * strictly increasing map gives the same words' order; key 0 stays below
 * every value (columns past a row's end), and a bf16 value's key has the
 * low half 0xFFFF (the counting sort's ks; topk_key_sel: 0 or 0xFFFF). */
DSA_INLINE uint topk_key(float x) {
  const uint u = as_uint(x), t = (uint)((int)u >> 31);
  return max(((u ^ (t | 0x80000000u)) - t) + 0x007FFFFFu, 0x00FFFFFFu);
}

/* The same order by compares and selects (NaN -> -inf's bits, -0.0 ->
 * +0.0's, then the sign flip): seven instructions, but topk_lrows' bf16
 * rows run faster with it (H200, 8192 x 8192 k = 512: 211.7 against 216.0
 * us; H100 214.2 against 218.5; not understood: the kernel's registers
 * are the same; docs/PERFORMANCE.md, session 23). Its keys differ from
 * topk_key's, which is fine: the words of one call come from one of them
 * (a split's merge compares words its first pass made), and only the
 * order of its words is read. A bf16 value's key has the low half 0 or
 * 0xFFFF by sign (the counting sort's ks). */
DSA_INLINE uint topk_key_sel(float x) {
  uint u = as_uint(x);
  u = (u & 0x7FFFFFFFu) > 0x7F800000u ? 0xFF800000u : u;
  u = u == 0x80000000u ? 0u : u;
  return u ^ ((uint)((int)u >> 31) | 0x80000000u);
}

/* max(a - b, 0) for a, b < 2^31, written so that compilers do not turn it
 * into llvm.usub.sat (Oclgrind cannot run that intrinsic). */
DSA_INLINE uint topk_subz(uint a, uint b) { return (uint)max((int)(a - b), 0); }

/* The bin that holds the rem-th largest key, when it is among this item's
 * bins [lo, hi) of histogram h (their keys sum; before = the keys of all
 * higher bins): sel = {bin, keys above it, keys in it}. One item matches;
 * the caller's barrier publishes sel. */
DSA_INLINE void topk_pick_bin(__local const uint *h, uint lo, uint hi, uint before, uint sum,
                              uint rem, __local uint *sel) {
  if (before < rem && rem <= before + sum) {
    uint acc = before;
    for (uint j = hi; j-- > lo;) {
      const uint cnt = h[j];
      if (acc + cnt >= rem) {
        sel[0] = j, sel[1] = acc, sel[2] = cnt;
        break;
      }
      acc += cnt;
    }
  }
}

/* Row r's clamped range [*s, *e); true if the range was bad (fault). Every
 * item reads the same words (broadcast). */
DSA_INLINE bool topk_range(ulong r, long n_cols, int mode, __global const uchar *a_mem,
                           ulong a_off, ulong a_s0, ulong a_s1, __global const uchar *b_mem,
                           ulong b_off, ulong b_s0, int next_n, long *s, long *e) {
  long start = 0, end;
  bool bad = false;
  if (mode == 0) {
    start = *(__global const int *)(a_mem + a_off + r * a_s0);
    end = *(__global const int *)(b_mem + b_off + r * b_s0);
  } else {
    const ulong bi = r / (ulong)next_n, i = r - bi * (ulong)next_n;
    const long len = *(__global const int *)(a_mem + a_off + bi * a_s0 + (mode == 2 ? i * a_s1 : 0ul));
    bad = len < 0 || len > n_cols; /* the length itself, as the logits check it */
    end = mode == 2 ? len : len - next_n + (long)i + 1;
    if (!bad && end < 0) end = 0; /* 1-D rule: queries before the context see nothing */
  }
  /* start >= end is an empty row, not a fault (the logits' rule too). */
  bad = bad || start < 0 || end > n_cols;
  *s = clamp(start, 0l, n_cols);
  *e = clamp(end, *s, n_cols);
  return bad;
}

#define TOPK_RANGE(r) \
  topk_range(r, n_cols, mode, a_mem, a_off, a_s0, a_s1, b_mem, b_off, b_s0, next_n, &rs, &re)

/* ==== group scans ========================================================== */

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

#if DSA_HAS_SG32
/* The same with sub-group shuffles: a butterfly scan inside each 32-wide
 * row, the row totals through tmp (32 entries), one barrier. Consecutive
 * calls must alternate between two tmp regions (the next call's writes then
 * come after every item passed this call's barrier). */
DSA_INLINE uint topk_scan_sg(uint v, __local uint *tmp, uint tid, uint wg, uint *total) {
  const uint lane = tid & 31u, w = tid >> 5, nw = wg >> 5;
  uint sum = v, pre = v;
  for (int m = 1; m < 32; m <<= 1) {
    const uint o = dsa_sg32_shfl_xor_u32(sum, m);
    if (lane & (uint)m) pre += o;
    sum += o;
  }
  if (lane == 0u) tmp[w] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint t = lane < nw ? tmp[lane] : 0u;
  uint before = lane < w ? t : 0u, all = t;
  for (int m = 1; m < 32; m <<= 1) {
    before += dsa_sg32_shfl_xor_u32(before, m);
    all += dsa_sg32_shfl_xor_u32(all, m);
  }
  *total = all;
  return before + pre - v;
}
#define TOPK_SCAN(v, par, total) topk_scan_sg(v, scan_tmp + 32u * (par), tid, wg, total)
#else
/* The loop bound is the run-time group size on CPU devices: with the
 * constant wg of topk_rows_128/256/512 (its barriers in an unrolled loop),
 * Intel's OpenCL CPU compiler 2026.2 crashes in its pass
 * "sycl-kernel-reduce-cross-barrier-values" (it reads heap memory it never
 * wrote: every time under MALLOC_PERTURB_, now and then without). The
 * value is the same (reqd_work_group_size). */
#if defined(DSA_DEVICE_CPU) && DSA_DEVICE_CPU
#define TOPK_SCAN(v, par, total) \
  topk_scan_excl(v, scan_tmp, tid, (uint)get_local_size(0), total)
#else
#define TOPK_SCAN(v, par, total) topk_scan_excl(v, scan_tmp, tid, wg, total)
#endif
#endif

/* ==== register-resident select and sort (topk_rows) ======================= */

/* One step of a binary lifting over a descending list L of len words: pos
 * (the words above x found so far) moves on by step where L's word there
 * is above x. The word is read unconditionally (0 past len), so that two
 * searches in one loop keep their loads in flight together. */
#define TOPK_LIFT(L, len, x, pos, step)                          \
  {                                                              \
    const uint np_ = (pos) + (step);                             \
    const ulong v_ = np_ <= (len) ? (L)[np_ - 1u] : 0ul;         \
    (pos) = np_ <= (len) && v_ > (x) ? np_ : (pos);              \
  }

/* Number of words above x in the descending list L of len words; top: a
 * power of two >= len (log2(top) + 1 steps). One body for each address
 * space (OpenCL 1.2 has no generic pointers): the split's merge reads the
 * lists in local memory (its row's last group) or in global memory
 * (topk_merge). */
#define TOPK_COUNT_ABOVE(NAME, AS)                                      \
  DSA_INLINE uint NAME(AS const ulong *L, uint len, ulong x, uint top) { \
    uint pos = 0u;                                                      \
    for (uint step = top; step > 0u; step >>= 1) TOPK_LIFT(L, len, x, pos, step) \
    return pos;                                                         \
  }
TOPK_COUNT_ABOVE(topk_count_above_l, __local)
TOPK_COUNT_ABOVE(topk_count_above, __global)

/* The counts of words above x0 in L0 (n0 words) and above x1 in L1 (n1):
 * the two liftings in one loop, so that their dependent local loads are in
 * flight together; top: a power of two >= n0, n1. */
DSA_INLINE uint2 topk_count_above2_l(__local const ulong *L0, uint n0, ulong x0,
                                     __local const ulong *L1, uint n1, ulong x1, uint top) {
  uint p0 = 0u, p1 = 0u;
  for (uint step = top; step > 0u; step >>= 1) {
    TOPK_LIFT(L0, n0, x0, p0, step)
    TOPK_LIFT(L1, n1, x1, p1, step)
  }
  return (uint2)(p0, p1);
}

/* Radix levels over the 64-bit word (key, 0x3FFFFF - column). Level 0 is
 * the 14-bit key prefix key >> 18 (sign, exponent, 5 mantissa bits: 32 bins
 * an octave, their edges one unit off by topk_key's offset) minus a base
 * that puts the group's largest key in bin 2047; everything further down
 * shares bin 0, which is never counted by atomics (its count is what the
 * others leave). After a bin b0 > 0 the prefix is fixed and levels 1, 2
 * take key bits [7,18) and [0,7); after bin 0 they take the whole key,
 * [21,32), [10,21), [0,10). The column follows in 11 + 11 bits (columns <
 * 2^22). */
#define TOPK_LEVELS 6u
DSA_INLINE void topk_level(uint level, bool low, uint *sh, uint *msk, bool *colw) {
  const uint l = low ? level : (level >= 3u ? level + 1u : level); /* skip [0,10) */
  const uint kl = low ? l : (l == 1u ? 11u : l == 2u ? 12u : l);   /* 11, 12: [7,18), [0,7) */
  *colw = kl >= 4u && kl <= 5u;
  *sh = kl == 1u ? 21u : kl == 2u ? 10u : kl == 3u ? 0u : kl == 4u ? 11u : kl == 5u ? 0u
      : kl == 11u ? 7u : 0u;
  *msk = kl == 3u ? 0x3FFu : kl == 12u ? 0x7Fu : 0x7FFu;
}
#define TOPK_DIGIT(key, col) ((((colw) ? (0x3FFFFFu - (col)) : (key)) >> sh) & msk)
#define TOPK_DIGIT0(key) topk_subz((key) >> 18, base)

/* -DTOPK_AGG=1 (a build option, NVIDIA only): level 0's histogram in the
 * register kernels warp-aggregated (match.any: the lanes of a warp that hit
 * one bin add their count by one atomic of the lowest lane). Off: it lost
 * (H100, 64 x 32768 in one group of 1024 a row: 43.2 against 37.7 us at k =
 * 512, 46.2 against 39.2 at k = 2048; prefill k = 2048 833 against 770;
 * random rows rarely put two lanes of a warp in one bin of the windowed
 * first digit, and match.any costs more than the atomics it saves). */
#if !(DSA_HAS_NV_PTX && defined(DSA_NV_HAS_MATCH) && defined(TOPK_AGG) && TOPK_AGG)
#undef TOPK_AGG
#define TOPK_AGG 0
#endif

/* The least power of two >= max(n, 2), by the leading zeros of n - 1
 * rather than a doubling loop: the loop ran ten dependent trips a call, and
 * a group calls it up to six times on its critical path (H200 profile: 277
 * of topk_rows_512's 2548 instructions a warp, 143 of topk_lrows_256's
 * 2033; docs/PERFORMANCE.md, session 24). n <= 2^31 (n - 1 < 2^31, so the
 * shift is at most 31). */
DSA_INLINE uint topk_pow2(uint n) { return n <= 2u ? 2u : 1u << (32u - clz(n - 1u)); }

/* The counting sort's bins for nw words: about TOPK_CSORT_RATIO a word, a
 * power of two, at most TOPK_BINS (itself one). */
DSA_INLINE uint topk_csort_bins(uint nw) {
  return min(topk_pow2(TOPK_CSORT_RATIO * nw), (uint)TOPK_BINS);
}
/* Whether the counting sort takes nw words: at most 4 an item, its bins
 * (and, unless in place, the words as pairs) within the room. The level-0
 * stop asks the same before it keeps candidates for it. */
DSA_INLINE bool topk_csort_fits(uint nw, uint wg, uint room, bool inpl) {
  return nw <= 4u * wg && topk_csort_bins(nw) + (inpl ? 0u : 2u * nw) <= room;
}
/* Whether the register kernels' level-0 stop takes nca candidates (m
 * wanted; the counting sort's room and the arena's words): where they pad
 * to at most twice m's power of two and the sort and its fallback hold
 * them (below, TOPK_L0STOP). */
DSA_INLINE bool topk_l0_takes(uint nca, uint m, uint wg, uint room, bool inpl,
                              uint arena_words) {
  const uint p2c = topk_pow2(nca);
  return p2c <= 2u * topk_pow2(m) && topk_csort_fits(nca, wg, room, inpl) &&
         p2c <= arena_words && p2c <= wg * TOPK_E_MAX;
}

/* Largest alive key of the group (every item calls it). */
DSA_INLINE uint topk_group_max(uint v, __local uint *slot, uint tid) {
  if (tid == 0u) *slot = 0u;
  barrier(CLK_LOCAL_MEM_FENCE);
#if DSA_HAS_SG32
  for (int m = 1; m < 32; m <<= 1) v = max(v, dsa_sg32_shfl_xor_u32(v, m));
  if ((tid & 31u) == 0u) atomic_max(slot, v);
#else
  atomic_max(slot, v);
#endif
  barrier(CLK_LOCAL_MEM_FENCE);
  return *slot;
}

/* Sorts the E words of an item descending, in registers (bitonic). */
#define TOPK_REG_SORT(EE)                                                     \
  TOPK_UNROLL for (uint s_ = 2u; s_ <= (EE); s_ <<= 1) {                      \
    TOPK_UNROLL for (uint d_ = s_ >> 1; d_ > 0u; d_ >>= 1) {                  \
      TOPK_UNROLL for (uint e = 0u; e < (EE); e++) {                          \
        const uint f = e ^ d_;                                                \
        if (f > e) {                                                          \
          const ulong a_ = v[e], b_ = v[f];                                   \
          const bool desc_ = (e & s_) == 0u;                                  \
          v[e] = desc_ ? max(a_, b_) : min(a_, b_);                           \
          v[f] = desc_ ? min(a_, b_) : max(a_, b_);                           \
        }                                                                     \
      }                                                                       \
    }                                                                         \
  }

/* TOPK_NO_WARP_SORT (a build option, for tuning): the sort's first rounds in
 * local memory even where sub-groups of 32 exist. */
#if DSA_HAS_SG32 && !defined(TOPK_NO_WARP_SORT)
/* The value of v in lane (this lane ^ m) of the 32-item row. */
DSA_INLINE ulong topk_shfl_xor_u64(ulong v, uint m) {
  const uint lo = dsa_sg32_shfl_xor_u32((uint)v, (int)m);
  const uint hi = dsa_sg32_shfl_xor_u32((uint)(v >> 32), (int)m);
  return ((ulong)hi << 32) | (ulong)lo;
}
/* Sorts the 32 * EE words of each 32-item row descending (word e of lane l
 * is element l * EE + e): a bitonic network, in registers within an item
 * for distances below EE, by shuffles across the row above. Every item of
 * the row runs it (uniform control flow). It replaces the register sort and
 * the first log2(32) merge rounds of topk_sort (each a barrier and a binary
 * search in local memory). */
#define TOPK_WARP_SORT(EE)                                                    \
  {                                                                           \
    const uint lane_ = tid & 31u;                                             \
    TOPK_UNROLL for (uint s_ = 2u; s_ <= 32u * (EE); s_ <<= 1) {              \
      TOPK_UNROLL for (uint d_ = s_ >> 1; d_ > 0u; d_ >>= 1) {                \
        if (d_ >= (EE)) {                                                     \
          TOPK_UNROLL for (uint e = 0u; e < (EE); e++) {                      \
            const uint i_ = lane_ * (EE) + e;                                 \
            const ulong o_ = topk_shfl_xor_u64(v[e], d_ / (EE));              \
            const bool keep_max_ = ((i_ & s_) == 0u) == ((i_ & d_) == 0u);    \
            v[e] = keep_max_ ? max(v[e], o_) : min(v[e], o_);                 \
          }                                                                   \
        } else {                                                              \
          TOPK_UNROLL for (uint e = 0u; e < (EE); e++) {                      \
            const uint f = e ^ d_;                                            \
            if (f > e) {                                                      \
              const ulong a_ = v[e], b_ = v[f];                               \
              const bool desc_ = ((lane_ * (EE) + e) & s_) == 0u;             \
              v[e] = desc_ ? max(a_, b_) : min(a_, b_);                       \
              v[f] = desc_ ? min(a_, b_) : max(a_, b_);                       \
            }                                                                 \
          }                                                                   \
        }                                                                     \
      }                                                                       \
    }                                                                         \
  }
#define TOPK_WSORT 1
#else
#define TOPK_WSORT 0
#endif

/* Sorts the p2 words of buf descending (merge sort): item t sorts words
 * [tE, tE + E) in registers, then rounds merge pairs of sorted runs: item t
 * finds where its E outputs start on the merge path of its pair (a binary
 * search) and merges E words. Ping-pongs between buf and buf + p2 when dbl
 * (one barrier a round), else works in place (two). Returns the half that
 * holds the result. Every item of the group calls it. */
#define TOPK_SORT_FN(PFX, EE, FIRST, RUN0)                                                     \
  DSA_INLINE __local ulong *PFX##EE(__local ulong *buf, uint p2, uint tid, uint dbl) {   \
    const uint nt = p2 / (EE);                                                                 \
    const bool act = tid < nt;                                                                 \
    ulong v[EE];                                                                               \
    TOPK_UNROLL for (uint e = 0u; e < (EE); e++) v[e] = act ? buf[tid * (EE) + e] : 0ul;       \
    FIRST(EE)                                                                                  \
    __local ulong *src = buf, *dst = dbl ? buf + p2 : buf;                                     \
    if (!dbl) barrier(CLK_LOCAL_MEM_FENCE);                                                    \
    if (act) {                                                                                 \
      TOPK_UNROLL for (uint e = 0u; e < (EE); e++) dst[tid * (EE) + e] = v[e];                 \
    }                                                                                          \
    barrier(CLK_LOCAL_MEM_FENCE);                                                              \
    for (uint L = (RUN0); L < p2; L <<= 1) {                                                   \
      src = dst;                                                                               \
      dst = dbl ? (src == buf ? buf + p2 : buf) : buf;                                         \
      if (act) {                                                                               \
        const uint o0 = tid * (EE), pb = o0 & ~(2u * L - 1u), d = o0 - pb;                     \
        __local const ulong *X = src + pb, *Y = src + pb + L;                                  \
        uint lo = topk_subz(d, L), hi = min(d, L);                                             \
        while (lo < hi) { /* the first i with X[i] below Y[d - 1 - i] */                       \
          const uint mid = (lo + hi) >> 1;                                                     \
          if (X[mid] > Y[d - 1u - mid]) lo = mid + 1u;                                         \
          else hi = mid;                                                                       \
        }                                                                                      \
        uint i = lo, j = d - lo;                                                               \
        TOPK_UNROLL for (uint e = 0u; e < (EE); e++) {                                         \
          const ulong x = i < L ? X[i] : 0ul, y = j < L ? Y[j] : 0ul;                          \
          const bool tx = j >= L || (i < L && x > y);                                          \
          v[e] = tx ? x : y;                                                                   \
          i += tx ? 1u : 0u;                                                                   \
          j += tx ? 0u : 1u;                                                                   \
        }                                                                                      \
      }                                                                                        \
      if (!dbl) barrier(CLK_LOCAL_MEM_FENCE);                                                  \
      if (act) {                                                                               \
        TOPK_UNROLL for (uint e = 0u; e < (EE); e++) dst[tid * (EE) + e] = v[e];               \
      }                                                                                        \
      barrier(CLK_LOCAL_MEM_FENCE);                                                            \
    }                                                                                          \
    return dst;                                                                                \
  }
TOPK_SORT_FN(topk_sort, 2, TOPK_REG_SORT, 2u)
TOPK_SORT_FN(topk_sort, 4, TOPK_REG_SORT, 4u)
TOPK_SORT_FN(topk_sort, 8, TOPK_REG_SORT, 8u)
#if TOPK_E_MAX == 16
TOPK_SORT_FN(topk_sort, 16, TOPK_REG_SORT, 16u)
#elif TOPK_E_MAX != 8
#error "topk_rows sorts with at most 8 or 16 words per item"
#endif
#if TOPK_WSORT
/* topk_wsort<E>: the same with each 32-item row's 32 * E words sorted by
 * the warp network first (runs of 32 * E, then the merge rounds). */
TOPK_SORT_FN(topk_wsort, 2, TOPK_WARP_SORT, 64u)
TOPK_SORT_FN(topk_wsort, 4, TOPK_WARP_SORT, 128u)
TOPK_SORT_FN(topk_wsort, 8, TOPK_WARP_SORT, 256u)
#if TOPK_E_MAX == 16
TOPK_SORT_FN(topk_wsort, 16, TOPK_WARP_SORT, 512u)
#endif
#endif

/* topk_rows_<WG>. Grid: rows * nchunks groups of WG items (WG a power of
 * two in [64, TOPK_MAX_WG], WG * TOPK_VPT >= the columns a group holds,
 * p2 / WG <= TOPK_E_MAX). split 0: one group per row (nchunks 1), writes out; split 1:
 * group (r, c) takes columns [c * chunk, (c + 1) * chunk) of row r's range
 * and writes its top min(k, length) words, sorted, to scratch list
 * (r * nchunks + c) of k words; topk_merge reports faults and writes out.
 * split 2: the same, then the row's last group merges (cnt: one counter a
 * row, zero before the launch and after it); chunk 0's group reports
 * faults and writes rows of n <= k, and a row within one chunk is written
 * by its one group.
 * arena: local memory of max(2 * TOPK_BINS * 4, (dbl ? 2 : 1) * p2max * 8)
 * bytes (arena_words words), then 4 * (TOPK_MAX_WG + 4) bytes of scan space. */
#define TOPK_ROWS_PARAMS                                                                     \
  DSA_CTENSOR2(logits), int lbf16, long n_cols, int mode, DSA_CTENSOR2(a), DSA_CTENSOR1(b),  \
      int next_n, DSA_TENSOR2(out), int k, __global ulong *scratch, __global uint *cnt,         \
      uint chunk, uint nchunks, int split,                                                     \
      uint emin, __local ulong *arena, uint arena_words, uint dbl, __local uint *keys,           \
      uint keys_words, uint samp, DSA_FAULTS
#define TOPK_ROWS_ARGS                                                                         \
  logits_mem, logits_off, logits_s0, logits_s1, logits_al, lbf16, n_cols, mode, a_mem, a_off,  \
      a_s0, a_s1, a_al, b_mem, b_off, b_s0, b_al, next_n, out_mem, out_off, out_s0, out_s1, out_al, k, \
      scratch, cnt, chunk, nchunks, split, emin, arena, arena_words, dbl, keys, keys_words, samp, \
      faults

/* The body of every topk_rows_<WG> kernel: wg is a compile-time constant
 * there, so the TOPK_VPT loads of an item address one base register with
 * immediate offsets, and reqd_work_group_size bounds the registers. */
__attribute__((always_inline)) DSA_INLINE void topk_rows_body(TOPK_ROWS_PARAMS, const uint wg,
                                                              const bool lk) {
  __local uint *hist = (__local uint *)arena;          /* 2 x TOPK_BINS (lk: 1) */
  __local uint *scan_tmp = (__local uint *)(arena + arena_words); /* TOPK_MAX_WG */
  __local uint *sel = scan_tmp + TOPK_MAX_WG;           /* 4 words */
  __local ulong *buf = arena;                           /* the sort buffer (after select) */

  const uint tid = get_local_id(0);
  /* keys[]'s room for the counting sort (and lrow's candidate levels), in
   * words: lrow's keys, dead by then; topk_rows_512 (the few-row split's
   * chunk kernel; every register kernel on a CPU, TOPK_SK_ALL) the host's
   * side room, keys_words (0 where it did not fit). No other register
   * kernel (sk false: the code is compiled out there). H200: topk_rows_512
   * 82 -> 86 registers, 64 x 32768 k = 512 28.6 -> 26.4 us; topk_rows_256
   * with it measured no faster at the decode step's 64 x 8192 and 1 %
   * slower at 8192 x 8192 k = 2048 (745 -> 752 us; docs/PERFORMANCE.md,
   * session 18). */
  const bool sk = lk || wg >= (uint)TOPK_SK_WG || TOPK_SK_ALL;
  const uint room = lk ? wg * TOPK_VPT : sk ? keys_words : 0u;
  /* The counting sort in place (its room holds the bins only; the words go
   * back to buf): topk_rows_<TOPK_MAX_WG>, whose arena leaves no room for
   * the words as pairs at k = 2048 (48 KiB), and on CPUs topk_rows_64, so
   * that the tests run both forms. Elsewhere the words by bin are listed
   * as pairs in the room. */
#if TOPK_SK_ALL /* (an #if: clang warns of a constant operand of || or &&) */
  const bool inpl = !lk && (wg == (uint)TOPK_MAX_WG || wg == 64u);
#else
  const bool inpl = !lk && wg == (uint)TOPK_MAX_WG;
#endif
  const ulong g = get_group_id(0), r = g / nchunks;
  const uint c = (uint)(g - r * nchunks);
  /* Set before the range read rather than after the early returns: with
   * them there ptxas gave topk_lrows_256 58 registers, here 48 (five
   * groups an SM instead of four; H200, 8192 x 8192 k = 512: 293.8 ->
   * 272.6 us; docs/PERFORMANCE.md, top-k round 9). Why is not known:
   * check that kernel's registers after changing this prologue. */
  const uint cs = c * chunk;
  __global const uchar *rowb = logits_mem + logits_off + r * logits_s0;
  uint kv[TOPK_VPT]; /* lk: unused, the keys live in keys[] */
  long rs, re;
  const bool bad = TOPK_RANGE(r);
  /* split 2 (no topk_merge): chunk 0's group reports and writes short rows */
  const bool lead = !split || (split == 2 && c == 0u);
  if (lead && bad && tid == 0u) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
  const uint n = (uint)(re - rs);

  if (n <= (uint)k) { /* the whole group leaves together */
    if (lead) {
      __global uchar *orow = out_mem + out_off + r * out_s0;
      for (uint j = tid; j < (uint)k; j += wg)
        *(__global int *)(orow + j * out_s1) = j < n ? (int)j : -1;
    }
    return;
  }
  const uint nc = split ? min(topk_subz(n, cs), chunk) : n; /* columns of this group */
  if (nc == 0u) return;
  const uint m = min((uint)k, nc); /* words this group keeps */

  /* ---- load: item tid holds columns tid + j * wg ---- */
  uint alive = 0u, kmax = 0u;
  /* Every slot of every item a column (TOPK_VPT == 32: alive's bits). */
  const bool full = nc >= wg * TOPK_VPT;
#define TOPK_KV(j) (lk ? keys[(j) * wg + tid] : kv[j])
/* Runs the statements for each j whose bit is set in BITS (read once).
 * Registers (kv[]) need a fully unrolled loop over all TOPK_VPT slots, each
 * tested; keys in local memory allow a rolled loop over the set bits only:
 * after the first level few are left, and the code stays small. BODY is
 * a braced block without commas outside parentheses (OpenCL C 1.2 has no
 * variadic macros). */
#define TOPK_EACH(BITS, BODY)                                             \
  if (lk && TOPK_LK_BITLOOP) {                                            \
    for (uint a_ = (BITS); a_ != 0u; a_ &= a_ - 1u) {                     \
      const uint j = 31u - clz(a_ & (0u - a_));                           \
      BODY                                                                \
    }                                                                     \
  } else {                                                                \
    const uint b_ = (BITS);                                               \
    TOPK_UNROLL for (uint j = 0u; j < TOPK_VPT; j++) {                    \
      if ((b_ >> j) & 1u) BODY                                            \
    }                                                                     \
  }
  /* lk: item tid's slot j holds column 4 * ((j >> 2) * wg + tid) + (j &
   * 3), so that one load takes 4 consecutive columns (16 bytes of f32, 8 of
   * bf16; TOPK_LK_VB of them in flight per batch: a rolled outer loop, so
   * that few registers hold loads in flight and more groups share a compute
   * unit), while the keys stay at keys[j * wg + tid] (conflict-free local
   * accesses in every pass). Rows not aligned to 4 columns (or logits not
   * aligned to 16 bytes) take the same columns by single loads. Only the
   * columns change: the words, and so the results, are the same (H100,
   * 8192 x 8192 k = 512: the load 115 -> 106 us; docs/PERFORMANCE.md). */
  const bool vec = lk && logits_al >= (lbf16 ? 8u : 16u) && (((ulong)rs + cs) & 3ul) == 0ul;
#define TOPK_COL(j) (lk ? ((((j) >> 2) * wg + tid) << 2) | ((j) & 3u) : (j) * wg + tid)
#define TOPK_LOAD_VKEYS(VT, T, VAL, KF)                                             \
  {                                                                                 \
    __global const T *row = (__global const T *)rowb + rs + cs;                     \
    if (vec && full) { /* no tails: the batch's loads, then its keys */             \
      _Pragma("unroll 1") for (uint i0 = 0u; i0 < TOPK_VPT / 4u; i0 += TOPK_LK_VB) { \
        VT x[TOPK_LK_VB];                                                           \
        TOPK_UNROLL for (uint ii = 0u; ii < TOPK_LK_VB; ii++)                       \
          x[ii] = *(__global const VT *)(row + (((i0 + ii) * wg + tid) << 2));      \
        TOPK_UNROLL for (uint ii = 0u; ii < TOPK_LK_VB; ii++) {                     \
          /* one address, the other three by constant offsets */                    \
          __local uint *kp = keys + 4u * (i0 + ii) * wg + tid;                      \
          const uint k0 = KF(VAL(x[ii].s0)), k1 = KF(VAL(x[ii].s1));                \
          const uint k2 = KF(VAL(x[ii].s2)), k3 = KF(VAL(x[ii].s3));                \
          kp[0] = k0, kp[wg] = k1, kp[2u * wg] = k2, kp[3u * wg] = k3;              \
          kmax = max(kmax, max(max(k0, k1), max(k2, k3)));                          \
        }                                                                           \
      }                                                                             \
    } else {                                                                        \
      _Pragma("unroll 1") for (uint i0 = 0u; i0 < TOPK_VPT / 4u; i0 += TOPK_LK_VB) { \
        TOPK_UNROLL for (uint ii = 0u; ii < TOPK_LK_VB; ii++) {                     \
          const uint i = i0 + ii, c4 = (i * wg + tid) << 2;                         \
          VT x = (VT)(0);                                                           \
          uint k0, k1, k2, k3;                                                      \
          if (vec && c4 + 4u <= nc) { /* four columns: no masks */                  \
            x = *(__global const VT *)(row + c4);                                   \
            k0 = KF(VAL(x.s0)), k1 = KF(VAL(x.s1));                                 \
            k2 = KF(VAL(x.s2)), k3 = KF(VAL(x.s3));                                 \
          } else { /* unaligned, or the row's tail: no read past its end */         \
            if (c4 < nc) x.s0 = row[c4];                                            \
            if (c4 + 1u < nc) x.s1 = row[c4 + 1u];                                  \
            if (c4 + 2u < nc) x.s2 = row[c4 + 2u];                                  \
            if (c4 + 3u < nc) x.s3 = row[c4 + 3u];                                  \
            /* the keys, then the columns past nc zeroed: selects, not a            \
             * branch around each key (docs/PERFORMANCE.md, session 17) */          \
            const uint q0 = KF(VAL(x.s0)), q1 = KF(VAL(x.s1));                      \
            const uint q2 = KF(VAL(x.s2)), q3 = KF(VAL(x.s3));                      \
            k0 = c4 < nc ? q0 : 0u, k1 = c4 + 1u < nc ? q1 : 0u;                    \
            k2 = c4 + 2u < nc ? q2 : 0u, k3 = c4 + 3u < nc ? q3 : 0u;               \
          }                                                                         \
          keys[4u * i * wg + tid] = k0;                                             \
          keys[(4u * i + 1u) * wg + tid] = k1;                                      \
          keys[(4u * i + 2u) * wg + tid] = k2;                                      \
          keys[(4u * i + 3u) * wg + tid] = k3;                                      \
          kmax = max(kmax, max(max(k0, k1), max(k2, k3)));                          \
        }                                                                           \
      }                                                                             \
    }                                                                               \
  }
  /* The register kernels: two copies of the loop rather than a choice per
   * element; each keeps its loads independent and in flight together.
   * A full group (every slot a column: the split's decode chunks) loads
   * all its values before the first key: with the loads bounds-checked
   * and each key after its load, ptxas issued them in batches of about
   * six, each waiting for its first value (H100 profile, topk_rows_512;
   * docs/PERFORMANCE.md, session 23).
   * (Issuing a decode row's loads before its length is read, rows
   * starting at column 0 there, measured no faster: H200, 64 x 32768 k =
   * 512, 29.2 us either way; docs/PERFORMANCE.md.) */
#define TOPK_LOAD_KEYS(T, VAL, KF)                                              \
  {                                                                             \
    __global const T *row = (__global const T *)rowb + rs + cs;                 \
    if (full) {                                                                 \
      T x[TOPK_VPT];                                                            \
      TOPK_UNROLL for (uint j = 0u; j < TOPK_VPT; j++) x[j] = row[j * wg + tid]; \
      TOPK_UNROLL for (uint j = 0u; j < TOPK_VPT; j++) {                        \
        kv[j] = KF(VAL(x[j]));                                                  \
        kmax = max(kmax, kv[j]);                                                \
      }                                                                         \
    } else {                                                                    \
      TOPK_UNROLL for (uint j = 0u; j < TOPK_VPT; j++) {                        \
        const uint col = j * wg + tid;                                          \
        const uint key = col < nc ? KF(VAL(row[col])) : 0u;                     \
        kv[j] = key;                                                            \
        kmax = max(kmax, key);                                                  \
      }                                                                         \
    }                                                                           \
  }
#define TOPK_F32(x) (x)
  if (lk && lbf16) {
    TOPK_LOAD_VKEYS(ushort4, ushort, dsa_bf16_to_f32, topk_key_sel)
  } else if (lk) {
    TOPK_LOAD_VKEYS(float4, float, TOPK_F32, topk_key)
  } else if (lbf16) {
    TOPK_LOAD_KEYS(ushort, dsa_bf16_to_f32, topk_key)
  } else {
    TOPK_LOAD_KEYS(float, TOPK_F32, topk_key)
  }
#undef TOPK_F32
#undef TOPK_LOAD_KEYS
#undef TOPK_LOAD_VKEYS
  /* Every slot alive in a full group: one select instead of TOPK_VPT
   * compares (lrow: 143 of its 2443 instructions a warp, H100). */
  if (full) {
    alive = TOPK_VPT == 32u ? 0xFFFFFFFFu : (1u << TOPK_VPT) - 1u;
  } else {
    TOPK_UNROLL
    for (uint j = 0u; j < TOPK_VPT; j++) alive |= TOPK_COL(j) < nc ? 1u << j : 0u;
  }
  uint win = 0u;
  /* The sampled select's candidates (0: the radix select ran): their count,
   * this item's first position among them, the threshold bin. */
  uint ncand = 0u, cpos = 0u, tb = 0u;
  /* The register kernels' level-0 stop: ncand (> m) candidates in win,
   * sorted whole (TOPK_L0STOP). */
  bool whole = false;
  /* Whether level 0's stop takes its candidates (decided with the masks,
   * read where the level ends). */
  bool take0 = false;
  /* ... and a lower bound of the candidates' keys (the level-0 stop's and
   * the sampled select's): the bin's or the threshold's first key. */
  uint cmin = 0u;

  /* ---- radix select: the m largest words ---- */
  if (nc <= (uint)k) {
    win = alive;
  } else {
    for (uint j = tid; j < TOPK_BINS; j += wg) hist[j] = 0u;
    kmax = topk_group_max(kmax, sel + 3, tid); /* its barriers order the clearing */
    const uint base = topk_subz(kmax >> 18, 2047u);
    /* Sampled select (samp 1; exact whatever the data): the level-0 digit
     * of a 1/2^TOPK_SAMPLE_LOG sample (1/8: slots j = tid mod 8, that + 8,
     * + 16, + 24, so every part of the row is sampled) gives a bin T that
     * the sample puts a little below the m-th largest; the c alive keys
     * whose digit is >= T are counted in one pass without atomics. If m <=
     * c <= the arena's words, they hold the m largest words (the m-th largest word of the group is at least
     * the m-th largest of those c, whose digit is >= T): they are copied to
     * local memory and the m largest of them selected there (radix levels
     * over a few candidates per item, after the collect below). Otherwise
     * (or samp 2, the tests' forced fallback) the radix select below runs
     * from a clean histogram. It replaces level 0's two walks over every
     * key (histogram with atomics, mask update) by one walk with a compare
     * (H100, 8192 x 8192 k = 512: the select 131 -> 70 us, in all 362 ->
     * 337 us; docs/PERFORMANCE.md, round 7). */
    /* lk only: in the register kernels the extra code cost more than it
     * saved (topk_rows_256's registers grew from 76 to 128, round 7;
     * topk_rows_512 with it beside the counting sort, H200, 64 x 32768
     * k = 512: 27.4 against 26.4 us, and the decode step's top-k at
     * 131072 27.2 against 23.9; docs/PERFORMANCE.md, session 18). */
    if (TOPK_SAMPLE && lk && samp != 0u && nc >= 4u * m && arena_words >= 2u * m) {
      const uint smask =
          alive & (TOPK_SAMPLE_PAT << (tid & ((1u << TOPK_SAMPLE_LOG) - 1u)));
      TOPK_EACH(smask, {
        const uint d = TOPK_DIGIT0(TOPK_KV(j));
        if (d != 0u) atomic_inc(&hist[d]);
      })
      barrier(CLK_LOCAL_MEM_FENCE);
      /* q: the sample's share of m plus TOPK_SAMPLE_Z (2) standard
       * deviations and 2, so that c >= m in all but a few rows (a binomial
       * estimate, not measured per row) and c stays within the arena. */
      const float mf = (float)m / (float)(1u << TOPK_SAMPLE_LOG);
      const uint q = (uint)(mf + TOPK_SAMPLE_Z * sqrt(mf)) + 2u;
      const uint per = max(TOPK_BINS / wg, 1u);
      const uint hi = topk_subz(TOPK_BINS, tid * per), lo = topk_subz(hi, per);
      uint sum = 0u;
      for (uint j = lo; j < hi; j++) sum += hist[j];
      uint total;
      const uint before = TOPK_SCAN(sum, 0u, &total);
      if (before < q && q <= before + sum) {
        uint acc = before;
        for (uint j = hi; j-- > lo;) {
          const uint cnt = hist[j];
          if (acc + cnt >= q) {
            sel[0] = j;
            break;
          }
          acc += cnt;
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      tb = total >= q ? sel[0] : 0u; /* 0: the sample says nothing */
      uint cm = 0u;
      if (tb != 0u) {
        /* TOPK_DIGIT0(key) >= tb >= 1 <=> key >= (base + tb) << 18 (base +
         * tb <= kmax >> 18 < 2^14: no overflow), one compare a key. Every
         * slot is alive here but for a row's tail, so the slots are walked
         * in order (unrolled: constant offsets and bits) rather than bit by
         * bit, whose chain (bit -> index -> load -> digit) was 16 % of
         * topk_lrows_256's instructions (H200, 8192 x 8192 k = 512;
         * docs/PERFORMANCE.md, session 17). Same words, same set. */
        /* (lk only, as the whole sampled select. alive is still every slot
         * below nc, and the others' key is 0 < thr: no test of alive.) */
        const uint thr = (base + tb) << 18;
        TOPK_UNROLL for (uint j = 0u; j < TOPK_VPT; j++)
          cm |= keys[j * wg + tid] >= thr ? 1u << j : 0u;
      }
      uint c_all;
      const uint cp = TOPK_SCAN(popcount(cm), 1u, &c_all);
      if (tb != 0u && samp == 1u && c_all >= m && c_all <= arena_words && c_all <= 32u * wg &&
          4u * m + TOPK_BINS <= wg * TOPK_VPT) {
        win = cm;
        ncand = c_all;
        cpos = cp;
        cmin = (base + tb) << 18; /* the candidates' lower bound: the sort's range */
      } else { /* the radix select, from a clean histogram */
        for (uint j = tid; j < TOPK_BINS; j += wg) hist[j] = 0u;
        barrier(CLK_LOCAL_MEM_FENCE);
      }
    }
  }
  if (nc > (uint)k && ncand == 0u) {
    const uint base = topk_subz(kmax >> 18, 2047u);
    uint rem = (uint)k, seen = nc; /* seen: alive elements at this level */
    bool low = false;              /* bin 0 taken at level 0: whole-key levels */
    /* Single-exit loop around barriers (PoCL's region builder needs it). */
    for (uint level = 0u; level < TOPK_LEVELS; level++) {
      uint sh = 0u, msk = 0x7FFu;
      bool colw = false;
      if (level > 0u) topk_level(level, low, &sh, &msk, &colw);
      /* lk: one histogram (the keys took the room of the other) */
      __local uint *h = hist + (lk ? 0u : (level & 1u) * TOPK_BINS);
      __local uint *hn = hist + (lk ? 0u : ((level & 1u) ^ 1u) * TOPK_BINS);
      if (level == 0u) {
#if TOPK_AGG
        if (!lk) { /* every lane runs match.any for every slot */
          const uint below = (1u << (tid & 31u)) - 1u;
          TOPK_UNROLL for (uint j = 0u; j < TOPK_VPT; j++) {
            const uint d = (alive >> j) & 1u ? TOPK_DIGIT0(kv[j]) : 0u;
            const uint peers = dsa_nv_match_any_u32(d);
            if (d != 0u && (peers & below) == 0u) atomic_add(&h[d], popcount(peers));
          }
        } else
#endif
        if (!lk) {
          /* The register kernels by the key's 14-bit prefix p: digit 0 <=>
           * p <= base. alive is every slot below nc here and the others'
           * key is 0, so no test of alive, and one branch a slot instead of
           * TOPK_EACH's two (H200, 64 x 32768 k = 512 with the mask update
           * below: -0.1 to -0.3 us; 8192 x 8192 k = 2048 (topk_rows_256)
           * 747 -> 739 us; docs/PERFORMANCE.md, session 22). */
          TOPK_UNROLL for (uint j = 0u; j < TOPK_VPT; j++) {
            const uint p = kv[j] >> 18;
            if (p > base) atomic_inc(&h[p - base]);
          }
        } else {
          TOPK_EACH(alive, {
            const uint d = TOPK_DIGIT0(TOPK_KV(j));
            if (d != 0u) atomic_inc(&h[d]);
          })
        }
      } else {
        TOPK_EACH(alive, { atomic_inc(&h[TOPK_DIGIT(TOPK_KV(j), TOPK_COL(j))]); })
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      /* Item t owns the bins [lo, hi), per of them counted from the top
       * (none past the bottom when there are fewer bins than items); it
       * also clears its share of the next level's histogram (last read
       * before the previous level's final barrier). */
      const uint nbins = msk + 1u, per = max(nbins / wg, 1u);
      const uint hi = topk_subz(nbins, tid * per), lo = topk_subz(hi, per);
      uint sum = 0u;
      for (uint j = lo; j < hi; j++) sum += h[j];
      if (!lk) {
        for (uint j = tid; j < TOPK_BINS; j += wg) hn[j] = 0u;
      }
      uint total;
      const uint before = TOPK_SCAN(sum, level & 1u, &total);
      topk_pick_bin(h, lo, hi, before, sum, rem, sel);
      barrier(CLK_LOCAL_MEM_FENCE);
      /* Level 0 counts no bin 0: when the others hold fewer than rem, the
       * bin is 0 and holds the rest (every item knows total). */
      const bool b0 = level == 0u && rem > total;
      const uint bin = b0 ? 0u : sel[0], above = b0 ? total : sel[1],
                 cnt = b0 ? seen - total : sel[2];
      if (lk) { /* nobody reads h past the barrier above; cleared for the next level */
        for (uint j = tid; j < TOPK_BINS; j += wg) h[j] = 0u;
      }
      if (level == 0u) {
        if (!lk) {
          /* digit > bin <=> p > kb = base + bin; digit == bin <=> p == kb
           * (bin >= 1) or p <= base (bin 0): two compares a slot, masks
           * built without branches. Where level 0 ends the select (its bin
           * holds exactly what is left, or the level-0 stop below takes the
           * bin and those above as candidates: the usual decode chunk), the
           * winners or candidates are the alive keys of digit >= bin, i.e.
           * key >= lo << 18 (bin 0: all): one compare a slot, the stop's
           * test moved before the masks (H200 profile, topk_rows_512: the
           * two masks 242 of 2548 instructions a warp; docs/PERFORMANCE.md,
           * session 24). alive is not read after the select. */
          const uint kb = base + bin, lo = bin ? kb : 0u;
#if TOPK_CSORT && TOPK_L0STOP
          take0 = sk && topk_l0_takes((uint)k - (rem - above) + cnt, m, wg, room, inpl,
                                      arena_words);
#endif
          if (cnt == rem - above || take0) {
            const uint t = lo << 18;
            uint ge = 0u;
            TOPK_UNROLL for (uint j = 0u; j < TOPK_VPT; j++) ge |= kv[j] >= t ? 1u << j : 0u;
            win |= alive & ge;
            alive = 0u;
          } else {
            uint gtm = 0u, eqm = 0u;
            TOPK_UNROLL for (uint j = 0u; j < TOPK_VPT; j++) {
              const uint p = kv[j] >> 18;
              gtm |= p > kb ? 1u << j : 0u;
              eqm |= p - lo <= kb - lo ? 1u << j : 0u;
            }
            win |= alive & gtm;
            alive &= eqm;
          }
        } else {
          TOPK_EACH(alive, {
            const uint d = TOPK_DIGIT0(TOPK_KV(j));
            if (d != bin) {
              alive &= ~(1u << j);
              if (d > bin) win |= 1u << j;
            }
          })
        }
        low = bin == 0u;
      } else {
        TOPK_EACH(alive, {
          const uint d = TOPK_DIGIT(TOPK_KV(j), TOPK_COL(j));
          if (d != bin) {
            alive &= ~(1u << j);
            if (d > bin) win |= 1u << j;
          }
        })
      }
      rem -= above;
      seen = cnt;
      if (cnt == rem) { /* everything left in the bin is in: done */
        win |= alive;
        level = TOPK_LEVELS;
      }
#if TOPK_CSORT && TOPK_L0STOP
      /* The register kernels with the counting sort (sk): when level 0's
       * bin and the bins above it hold few words, they are all kept as
       * candidates and sorted whole (the first m of the sorted list are
       * the m largest), which skips the levels that would split the bin.
       * Only where they pad to at most twice m's power of two (a sort of
       * about the size it replaces; topk_rows_1024's arena holds that many
       * for the fallback), the counting sort takes them and, should a
       * crowded bin send it to the merge sort, the arena holds them
       * padded. */
      else if (take0) { /* level 0 of a register kernel (set with its masks) */
        win |= alive;
        ncand = (uint)k - rem + cnt;
        whole = true;
        cmin = bin ? (base + bin) << 18 : 0u;
        level = TOPK_LEVELS;
      }
#endif
      if (lk) barrier(CLK_LOCAL_MEM_FENCE); /* the clearing before the next atomics */
    }
  }

  /* ---- collect the m winners at scanned positions, pad to p2 (the
   * sampled select: its ncand candidates, unpadded, selected below) ---- */
  const uint p2 = topk_pow2(whole ? ncand : m);
  /* emin (2 or 4, from the host): 4 words per item where groups fill the
   * device saves a merge round for half the items (H200, 8192 x 8192 k =
   * 512 on lrow: 358.2 against 364.2 us); 2 where latency counts. */
  const uint E = min(max(emin, p2 / wg), p2);
  /* The level-0 stop's candidates may need all of the arena: merged in
   * place then. */
  const uint dblc = dbl && 2u * p2 <= arena_words ? 1u : 0u;
  {
    uint total;
    /* The sampled select scanned its candidates already (parity 1). */
    const uint pos = ncand && !whole ? cpos : TOPK_SCAN(popcount(win), 0u, &total);
    /* The last histogram reads ended before the select's final barrier, and
     * the scan above has a barrier too: buf (aliasing hist) is free. One
     * pointer stepped past each word written (with buf[pos++], NVIDIA's
     * compiler reloaded buf's base and made the address for each of the
     * register kernels' 32 predicated slots). */
    __local ulong *bp = buf + pos;
    TOPK_EACH(win, {
      *bp = ((ulong)TOPK_KV(j) << 32) | (ulong)(~(cs + TOPK_COL(j)));
      bp++;
    })
    if (!ncand || whole) {
      for (uint i = (whole ? ncand : m) + tid; i < p2; i += wg) buf[i] = 0ul;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  __local ulong *res = buf;
  bool sorted = false; /* the counting sort did it */
#if TOPK_CSORT
  {
    /* lrow: the nw words in buf (the m winners, or the sampled select's
     * candidates) sorted by counting instead of the merge rounds (round 7
     * measured those at 92 of 337 us, H100, 8192 x 8192 k = 512: seven
     * rounds of binary searches in local memory); the candidates sorted
     * whole, so that their radix levels (below) are skipped too. Each
     * word's rank is the number of words in higher bins of a digit plus the
     * number of larger words in its own bin: a local atomic (its return
     * value is the word's slot in the bin), one group scan of the bins,
     * each word placed at its bin's start plus its slot, then ranked within
     * its bin (its words compared) and stored at buf[rank]. The digit is
     * v >> sh, v = (key' - kmin') * nc + (nc - 1 - column), key' = key >>
     * ks (ks 16 for bf16, whose keys' low half is 0xFFFF: topk_key):
     * strictly increasing with the word, from 0 to (span' + 1) * nc - 1
     * (kmin', span' from a group min/max), shifted into nb >=
     * TOPK_CSORT_RATIO * nw bins. So equal keys spread by column (bf16 rows
     * repeat values: 25 times each near the 512th of 8192 uniform ones);
     * lrow's f32 words take v = key - kmin (below: their values rarely
     * repeat, and the product cost more than the spread gave).
     * (A 32-bit v, the key shifted until the column fits beside it, spread
     * the same and ran 10 us slower at 8192 x 8192 k = 512, H100.) No
     * barrier rounds, and few local accesses while bins hold few words. A
     * bin of
     * TOPK_CSORT_LIM or more sends the group to the radix levels and the
     * merge sort below, on buf as it was (the bins live in the keys' room,
     * dead by now). Exact either way: the same bytes. */
    const uint nw = ncand ? ncand : m, nb = topk_csort_bins(nw);
    if (sk && topk_csort_fits(nw, wg, room, inpl)) {
      __local uint *cb = keys;      /* nb bins: counts, then starts */
      __local uint *cw = keys + nb; /* !inpl: the words by bin, as pairs */
      const uint ks = lbf16 ? 16u : 0u;
      for (uint j = tid; j < nb; j += wg) cb[j] = 0u;
      if (tid == 0u) sel[0] = 0u, sel[1] = 0xFFFFFFFFu, sel[2] = 0u;
      /* The digit's range: the level-0 stop's candidates and the sampled
       * select's lie in [cmin, kmax] (the bin's or the threshold's first
       * key; the group's largest key is among them), which saves a pass
       * over the words, the reduction and a barrier (H200: 64 x 32768 k =
       * 512, docs/PERFORMANCE.md, session 22; lrow's 8192 x 8192 k = 512
       * 196.0 -> 189.1 us, session 24); the m winners of the radix select
       * take their exact min and max. A wider range than the words' own
       * changes only how they spread over the bins, not the order. */
      uint kmn = cmin >> ks, kmx = kmax >> ks;
      barrier(CLK_LOCAL_MEM_FENCE); /* orders the clearing of the bins and sel */
      if (ncand == 0u) {
        kmn = 0xFFFFFFFFu, kmx = 0u;
        for (uint i = tid; i < nw; i += wg) {
          const uint key = (uint)(buf[i] >> 32) >> ks;
          kmn = min(kmn, key);
          kmx = max(kmx, key);
        }
        /* The group's min and max key: topk_group_max's reduction for
         * both at once, behind one barrier (the one above orders the
         * clearing) where two calls would take two pairs. */
#if DSA_HAS_SG32
        for (int s = 1; s < 32; s <<= 1) {
          kmn = min(kmn, dsa_sg32_shfl_xor_u32(kmn, s));
          kmx = max(kmx, dsa_sg32_shfl_xor_u32(kmx, s));
        }
        if ((tid & 31u) == 0u)
#endif
        {
          atomic_min(sel + 1, kmn);
          atomic_max(sel + 2, kmx);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        kmn = sel[1], kmx = sel[2];
      }
      const uint kmin = kmn, lb = 31u - clz(nb), cl = nc - 1u + cs;
      /* lrow's f32 keys (ks 0): the digit from the key alone, (key - kmin)
       * >> sh, three instructions instead of the 64-bit product's ten,
       * three times a word; f32 values rarely repeat, and a bin that
       * crowds anyway (TOPK_CSORT_LIM) sends the group to the exact
       * fallback. H200, 8192 x 8192 k = 512: 182.6-182.8 -> 178.1-178.5
       * us (docs/PERFORMANCE.md, session 24). bf16 rows keep the columns'
       * spread (their values repeat); so do the register kernels, where it
       * measured no faster (64 x 32768 k = 512: 1.2 words an item). */
      const bool kd = lk && ks == 0u;
      const ulong top = kd ? (ulong)(kmx - kmin) : ((ulong)(kmx - kmin) + 1ul) * nc - 1ul;
      const uint sh = topk_subz(64u - (uint)clz(top), lb);
#define TOPK_CS_DIGIT(w)                                                                         \
  (kd ? ((uint)((w) >> 32) - kmin) >> sh                                                         \
      : (uint)((((ulong)(((uint)((w) >> 32) >> ks) - kmin) * nc) + (ulong)(cl - ~(uint)(w))) >> \
               sh))
      uint slots = 0u; /* a byte per word: its slot in its bin */
      /* inpl: the item's (at most 4) words stay in registers (wr) and go
       * back to buf itself, by bins, once every item has read it. The pairs
       * form keeps session 18's rolled loops: with both forms in one loop
       * unrolled over the 4 words, the decode step's top-k at 131072
       * (topk_rows_512, pairs) ran 1-2 us slower (H200, 25.1 against 23.3
       * us; docs/PERFORMANCE.md, session 21). */
      ulong wr[4];
      if (inpl) {
        TOPK_UNROLL for (uint q = 0u; q < 4u; q++) {
          const uint i = tid + q * wg;
          wr[q] = 0ul;
          if (i < nw) {
            const ulong w = buf[i];
            const uint sl = atomic_inc(&cb[TOPK_CS_DIGIT(w)]);
            if (sl >= TOPK_CSORT_LIM) atomic_or(sel, 1u);
            slots |= min(sl, 255u) << (8u * q);
            wr[q] = w;
          }
        }
      } else {
        for (uint i = tid, q = 0u; i < nw; i += wg, q += 8u) {
          const uint sl = atomic_inc(&cb[TOPK_CS_DIGIT(buf[i])]);
          if (sl >= TOPK_CSORT_LIM) atomic_or(sel, 1u);
          slots |= min(sl, 255u) << q;
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      if (sel[0] == 0u) { /* the same for every item */
        /* Each bin's start: the words in the bins above it (item t owns per
         * bins counted from the top, as the select's scans). */
        const uint per = max(nb / wg, 1u);
        const uint hi = topk_subz(nb, tid * per), lo = topk_subz(hi, per);
        uint sum = 0u;
        for (uint j = lo; j < hi; j++) sum += cb[j];
        uint total;
        uint acc = TOPK_SCAN(sum, 0u, &total);
        for (uint j = hi; j-- > lo;) {
          const uint cnt = cb[j];
          cb[j] = acc;
          acc += cnt;
        }
        /* (buf's last reads, the loop above, are behind the scan's barrier.) */
        barrier(CLK_LOCAL_MEM_FENCE);
        if (inpl) {
          TOPK_UNROLL for (uint q = 0u; q < 4u; q++) {
            if (tid + q * wg < nw)
              buf[cb[TOPK_CS_DIGIT(wr[q])] + ((slots >> (8u * q)) & 255u)] = wr[q];
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          /* Entry i of the list by bins: its rank is its bin's start plus
           * the larger words in its bin (bin d - 1 starts where d ends),
           * found before any word moves. */
          uint rv[4];
          TOPK_UNROLL for (uint q = 0u; q < 4u; q++) {
            const uint i = tid + q * wg;
            rv[q] = 0u;
            if (i < nw) {
              const ulong w = buf[i];
              const uint d = TOPK_CS_DIGIT(w);
              const uint b = cb[d], e = d > 0u ? cb[d - 1u] : nw;
              uint rk = b;
              for (uint j = b; j < e; j++) rk += buf[j] > w ? 1u : 0u;
              wr[q] = w;
              rv[q] = rk;
            }
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          TOPK_UNROLL for (uint q = 0u; q < 4u; q++) {
            if (tid + q * wg < nw) buf[rv[q]] = wr[q];
          }
        } else {
          for (uint i = tid, q = 0u; i < nw; i += wg, q += 8u) {
            const ulong w = buf[i];
            const uint p = cb[TOPK_CS_DIGIT(w)] + ((slots >> q) & 255u);
            cw[2u * p] = (uint)w;
            cw[2u * p + 1u] = (uint)(w >> 32);
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          /* The same ranks from the list by bins as pairs. */
          for (uint i = tid; i < nw; i += wg) {
            const ulong w = ((ulong)cw[2u * i + 1u] << 32) | (ulong)cw[2u * i];
            const uint d = TOPK_CS_DIGIT(w);
            const uint b = cb[d], e = d > 0u ? cb[d - 1u] : nw;
            uint rk = b;
            for (uint j = b; j < e; j++)
              rk += (((ulong)cw[2u * j + 1u] << 32) | (ulong)cw[2u * j]) > w ? 1u : 0u;
            buf[rk] = w;
          }
        }
#undef TOPK_CS_DIGIT
        barrier(CLK_LOCAL_MEM_FENCE);
        sorted = true;
      }
    }
  }
#endif
  if (lk && ncand != 0u && !sorted) {
    /* The sampled select's ncand (> m) candidates in buf, words >= wlo =
     * the threshold bin's first key, to the m largest: radix levels over
     * (word - wlo) in 11-bit digits from the top of the range (item t
     * takes entries t, t + wg, ...: a mask of at most 32), each a histogram
     * of the alive candidates in the keys' room (dead now), a scan and a
     * mask update, until the bin holding the rem-th largest holds exactly
     * rem (words are unique, so at the last digit at the latest). The
     * candidates stay in local memory (registers cost occupancy: with
     * them in registers topk_lrows_256 took 63 registers against 40 and
     * lost, H100). The m winners go to the keys' room as pairs of words,
     * then back to buf, padded, for the sort. */
    __local uint *ch = keys, *wout = keys + TOPK_BINS;
    const uint nq = (ncand + wg - 1u) / wg;
    uint calive = 0u, cwin = 0u;
    for (uint i = 0u; i < nq; i++) calive |= tid + i * wg < ncand ? 1u << i : 0u;
    ulong wlo = (ulong)((tb + topk_subz(kmax >> 18, 2047u)) << 18) << 32;
    const ulong range = (((ulong)kmax << 32) | 0xFFFFFFFFul) - wlo;
    uint sh = topk_subz(64u - (uint)clz(range), 11u), rem = m;
    for (uint level = 0u; level < 6u; level++) {
      for (uint j = tid; j < TOPK_BINS; j += wg) ch[j] = 0u;
      barrier(CLK_LOCAL_MEM_FENCE);
      for (uint a = calive; a != 0u; a &= a - 1u) {
        const uint i = 31u - clz(a & (0u - a));
        atomic_inc(&ch[(uint)((buf[tid + i * wg] - wlo) >> sh)]);
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      const uint per = max(TOPK_BINS / wg, 1u);
      const uint hi = topk_subz(TOPK_BINS, tid * per), lo = topk_subz(hi, per);
      uint sum = 0u;
      for (uint j = lo; j < hi; j++) sum += ch[j];
      uint total;
      const uint before = TOPK_SCAN(sum, 0u, &total);
      topk_pick_bin(ch, lo, hi, before, sum, rem, sel);
      barrier(CLK_LOCAL_MEM_FENCE);
      const uint bin = sel[0], above = sel[1], cnt = sel[2];
      for (uint a = calive; a != 0u; a &= a - 1u) {
        const uint i = 31u - clz(a & (0u - a));
        const uint d = (uint)((buf[tid + i * wg] - wlo) >> sh);
        if (d != bin) {
          calive &= ~(1u << i);
          if (d > bin) cwin |= 1u << i;
        }
      }
      rem -= above;
      wlo += (ulong)bin << sh;
      sh = topk_subz(sh, 11u);
      if (cnt == rem) {
        cwin |= calive;
        level = 6u;
      }
      barrier(CLK_LOCAL_MEM_FENCE); /* sel and ch read before the next level */
    }
    uint total;
    uint pos = TOPK_SCAN(popcount(cwin), 0u, &total);
    for (uint a = cwin; a != 0u; a &= a - 1u) {
      const uint i = 31u - clz(a & (0u - a));
      const ulong w = buf[tid + i * wg];
      wout[2u * pos] = (uint)w;
      wout[2u * pos + 1u] = (uint)(w >> 32);
      pos++;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint i = tid; i < p2; i += wg)
      buf[i] = i < m ? ((ulong)wout[2u * i + 1u] << 32) | (ulong)wout[2u * i] : 0ul;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#if TOPK_E_MAX == 16
#define TOPK_SORT16(PFX) else if (E == 16u) res = PFX##16(buf, p2, tid, dblc);
#else
#define TOPK_SORT16(PFX)
#endif
#define TOPK_SORT_BY(PFX)                                   \
  if (E == 2u) res = PFX##2(buf, p2, tid, dblc);            \
  else if (E == 4u) res = PFX##4(buf, p2, tid, dblc);       \
  TOPK_SORT16(PFX)                                          \
  else res = PFX##8(buf, p2, tid, dblc);
  /* The warp network in the register kernel only: in topk_lrows it cost
   * more than it saved (H200, 8192 x 8192 k = 512: 449.8 against 358.3
   * us; the register kernel at k = 2048: 746.2 against 846.7). Nor in
   * topk_rows_1024 (64 registers at most; H100, 64 x 32768 in one group a
   * row: 35.8 against 37.9 us at k = 512, 38.2 against 38.9 at 2048). */
  if (!sorted) {
#if TOPK_WSORT
    if (!lk && wg < 1024u) {
      TOPK_SORT_BY(topk_wsort)
    } else
#endif
    {
      TOPK_SORT_BY(topk_sort)
    }
  }
#undef TOPK_SORT_BY
#undef TOPK_SORT16

  /* split 2 and a row within one chunk: its one group writes the row */
  __global uchar *orow = out_mem + out_off + r * out_s0;
  if (!split || (split == 2 && n <= chunk)) {
    for (uint i = tid; i < (uint)k; i += wg)
      *(__global int *)(orow + i * out_s1) = (int)(~(uint)res[i]);
  } else {
    __global ulong *list = scratch + (r * nchunks + c) * (ulong)k;
    for (uint i = tid; i < m; i += wg) list[i] = res[i];
#if TOPK_GMERGE
    if (split == 2) {
      /* The merge in the row's last group to finish (no topk_merge
       * launch): each group publishes its list (a device-scope fence, then
       * one atomic on the row's counter); the group that counts last holds
       * every list, ranks them as topk_merge does (in local memory) and
       * resets the counter for the next launch. No group waits for
       * another, so nothing assumes that groups run concurrently. */
      const uint nact = (n + chunk - 1u) / chunk; /* the chunks with columns */
      if (dsa_group_publish(cnt + r, nact, sel, tid)) { /* the same for every item */
        if (tid == 0u) atomic_xchg(&cnt[r], 0u);
        /* List o at lists + o * lw (the host checked nchunks * lw <=
         * arena_words; the arena's last reader, the list copy above, is
         * behind the barrier). Read past the cache (volatile): other groups
         * wrote them. With two lists and this group's sorted by counting
         * (in buf = arena, its first m words), only the other list is read,
         * to lists + lw, and this one stands first: the merge is the same
         * either way round (H100, 64 x 32768 k = 2048: 24.5-24.7 -> 23.9-
         * 24.2 us; docs/PERFORMANCE.md, session 23). */
        const uint lw = min((uint)k, chunk);
        __local ulong *lists = arena;
        volatile __global const ulong *src = scratch + r * nchunks * (ulong)k;
        const bool own = nact == 2u && sorted;
        if (own) {
          /* This list past its m words zeroed, as the read below zeroes
           * the other's: every item compares its entries (x0, x1 below),
           * used or not. */
          const uint oc = 1u - c;
          for (uint i = tid; i < lw; i += wg) {
            lists[lw + i] = i < min(lw, n - oc * chunk) ? src[(ulong)oc * k + i] : 0ul;
            if (i >= m) lists[i] = 0ul;
          }
        } else
        for (uint e = tid; e < nact * lw; e += wg) {
          const uint o = e / lw, i = e - o * lw;
          lists[e] = i < min(lw, n - o * chunk) ? src[(ulong)o * k + i] : 0ul;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (nact == 2u) {
          /* Two lists (the few-row split: decode): item t ranks entry t of
           * each against the other, both searches in one loop (H200, 64 x
           * 32768 k = 512: the merge 2.5 -> 2.0 us of the row's last group,
           * the kernel -0.5 us; docs/PERFORMANCE.md, session 22). */
          const uint c0 = own ? c : 0u; /* the chunk whose list is first */
          const uint n0 = min(lw, n - c0 * chunk), n1 = min(lw, n - (1u - c0) * chunk);
          const uint top = topk_pow2(lw);
          for (uint i = tid; i < lw; i += wg) {
            const ulong x0 = lists[i], x1 = lists[lw + i];
            const uint2 ab = topk_count_above2_l(lists + lw, n1, x0, lists, n0, x1, top);
            if (i < n0 && i + ab.x < (uint)k)
              *(__global int *)(orow + (i + ab.x) * out_s1) = (int)(~(uint)x0);
            if (i < n1 && i + ab.y < (uint)k)
              *(__global int *)(orow + (i + ab.y) * out_s1) = (int)(~(uint)x1);
          }
        } else
        for (uint e = tid, top = topk_pow2(lw); e < nact * lw; e += wg) {
          const uint o = e / lw, i = e - o * lw;
          if (i < min(lw, n - o * chunk)) {
            const ulong x = lists[e];
            uint rank = i;
            for (uint o2 = 0u; o2 < nact; o2++)
              if (o2 != o)
                rank += topk_count_above_l(lists + o2 * lw, min(lw, n - o2 * chunk), x, top);
            if (rank < (uint)k) *(__global int *)(orow + rank * out_s1) = (int)(~(uint)x);
          }
        }
      }
    }
#endif
  }
}

#undef TOPK_KV
#undef TOPK_COL
#undef TOPK_EACH

#define TOPK_ROWS_KERNEL(W)                                                           \
  __kernel __attribute__((reqd_work_group_size(W, 1, 1))) DSA_SG32_KERNEL void topk_rows_##W( \
      TOPK_ROWS_PARAMS) {                                                                     \
    topk_rows_body(TOPK_ROWS_ARGS, W##u, false);                                              \
  }
/* TOPK_NV_CAP (NVIDIA, from src/op_topk.c with -cl-nv-maxrregcount at that
 * value): topk_rows_512 without reqd_work_group_size, which ptxas turns
 * into .reqntid and then ignores the cap for. With the attribute NVIDIA's
 * compiler gave it 64 registers and 28 bytes of spills (two groups an SM,
 * which the few-row split's one group an SM does not use); under the cap
 * 106, none spilled: H200, 64 x 32768 k = 512 21.8 -> 21.3 us, bf16 22.8
 * -> 22.3 (docs/PERFORMANCE.md, session 22). The kernel body takes its
 * group size as a literal either way; the host launches 512. */
#ifdef TOPK_NV_CAP
#define TOPK_ROWS_KERNEL_NR(W)                                                          \
  __kernel DSA_SG32_KERNEL void topk_rows_##W(TOPK_ROWS_PARAMS) {                         \
    topk_rows_body(TOPK_ROWS_ARGS, W##u, false);                                        \
  }
#else
#define TOPK_ROWS_KERNEL_NR TOPK_ROWS_KERNEL
#endif
/* topk_lrows_<WG>: the same with the keys in local memory (keys[], WG *
 * TOPK_VPT words) instead of registers: about 32 registers fewer per item,
 * so more groups share a compute unit (their latencies overlap) where the
 * local memory holds them; one histogram. */
#define TOPK_LROWS_KERNEL(W)                                                                  \
  __kernel __attribute__((reqd_work_group_size(W, 1, 1))) DSA_SG32_KERNEL void topk_lrows_##W( \
      TOPK_ROWS_PARAMS) {                                                                     \
    topk_rows_body(TOPK_ROWS_ARGS, W##u, true);                                               \
  }
TOPK_ROWS_KERNEL(64)
TOPK_ROWS_KERNEL(128)
TOPK_ROWS_KERNEL(256)
TOPK_ROWS_KERNEL_NR(512)
TOPK_ROWS_KERNEL(1024)
TOPK_LROWS_KERNEL(64)
TOPK_LROWS_KERNEL(128)
TOPK_LROWS_KERNEL(256)
TOPK_LROWS_KERNEL(512)
#if TOPK_MAX_WG != 1024
#error "topk_rows_<WG> kernels exist for 64 .. 1024"
#endif

/* ==== merge of the chunk lists (split's second pass) ====================== */

/* Grid: rows * nchunks * pieces groups of WG items; item t of group (r, c,
 * p) ranks the mq (1 .. TOPK_MERGE_Q) consecutive entries from
 * (p * WG + t) * mq of list (r, c): one binary search per other list for
 * the first, then a forward walk (the lists are sorted, so the counts only
 * grow). Rows with n <= k: the groups of chunk 0 write 0..n-1, -1. */
__kernel void topk_merge(long n_cols, int mode, DSA_CTENSOR2(a), DSA_CTENSOR1(b), int next_n,
                         DSA_TENSOR2(out), int k, __global const ulong *scratch, uint chunk,
                         uint nchunks, uint pieces, uint mq, DSA_FAULTS) {
  const uint tid = get_local_id(0), wg = get_local_size(0);
  const ulong g = get_group_id(0), r = g / ((ulong)nchunks * pieces);
  const uint rest = (uint)(g - r * nchunks * pieces), c = rest / pieces, p = rest - c * pieces;
  long rs, re;
  const bool bad = TOPK_RANGE(r);
  if (bad && c == 0u && p == 0u && tid == 0u) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
  const uint n = (uint)(re - rs);
  __global uchar *orow = out_mem + out_off + r * out_s0;
  const uint i0 = (p * wg + tid) * mq;
  if (n <= (uint)k) {
    if (c == 0u) {
      for (uint i = i0; i < min(i0 + mq, (uint)k); i++)
        *(__global int *)(orow + i * out_s1) = i < n ? (int)i : -1;
    }
    return;
  }
  const uint len = min((uint)k, min(topk_subz(n, c * chunk), chunk));
  if (i0 >= len) return;
  const uint q_n = min(mq, len - i0);
  __global const ulong *lists = scratch + r * nchunks * (ulong)k;
  ulong x[TOPK_MERGE_Q];
  uint rank[TOPK_MERGE_Q];
  const uint top = topk_pow2(min((uint)k, chunk)); /* every list's length at most */
  TOPK_UNROLL
  for (uint q = 0u; q < TOPK_MERGE_Q; q++) {
    x[q] = q < q_n ? lists[(ulong)c * k + i0 + q] : 0ul;
    rank[q] = i0 + q;
  }
  for (uint o = 0u; o < nchunks; o++) {
    const uint lo = min((uint)k, min(topk_subz(n, o * chunk), chunk));
    if (o == c || lo == 0u) continue;
    __global const ulong *L = lists + (ulong)o * k;
    uint pos = topk_count_above(L, lo, x[0], top);
    rank[0] += pos;
    TOPK_UNROLL
    for (uint q = 1u; q < TOPK_MERGE_Q; q++) {
      if (q < q_n) {
        while (pos < lo && L[pos] > x[q]) pos++;
      }
      rank[q] += pos;
    }
  }
  TOPK_UNROLL
  for (uint q = 0u; q < TOPK_MERGE_Q; q++)
    if (q < q_n && rank[q] < (uint)k) *(__global int *)(orow + rank[q] * out_s1) = (int)(~(uint)x[q]);
}

/* ==== stream: the fallback for any row length ============================= */

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

/* Grid: one work-group per row (group id = row), WG items, WG a power of
 * two in [64, TOPK_MAX_WG] chosen by the host. Levels 0..2: histogram of
 * key bits [21,32), [10,21), [0,10) among the elements whose higher bits
 * equal the prefix found so far, a group scan finds the bin holding the
 * k-th largest (done early when that bin holds exactly the number still
 * needed: "all_eq"); collect (atomic counter, order fixed by the sort);
 * ties at the k-th key T: a chunked pass in column order with a group scan
 * takes the lowest columns; bitonic sort of the k words, up to four network
 * steps per pass in registers. Each pass re-reads the row (four loads in
 * flight per item). */
__kernel void topk_per_row(DSA_CTENSOR2(logits), int lbf16, long n_cols, int mode, DSA_CTENSOR2(a),
                           DSA_CTENSOR1(b), int next_n, DSA_TENSOR2(out), int k, DSA_FAULTS) {
  __local uint hist[TOPK_BINS];
  __local ulong buf[TOPK_SK(TOPK_MAX_K)];
  __local uint tmp[TOPK_MAX_WG];
  __local uint sel[3];
  __local uint count;

  const uint tid = get_local_id(0), wg = get_local_size(0);
  const ulong r = get_group_id(0);

  long rs, re;
  const bool bad = TOPK_RANGE(r);
  if (bad && tid == 0u) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
  const uint n = (uint)(re - rs);
  __global uchar *orow = out_mem + out_off + r * out_s0;

  if (n <= (uint)k) { /* the whole group leaves together */
    for (uint j = tid; j < (uint)k; j += wg)
      *(__global int *)(orow + j * out_s1) = j < n ? (int)j : -1;
    return;
  }

  /* Column i's value: f32, or bf16 widened (exact), chosen per group. */
  __global const uchar *rowb = logits_mem + logits_off + r * logits_s0;
  __global const float *rowf = (__global const float *)rowb + rs;
  __global const ushort *rowh = (__global const ushort *)rowb + rs;
#define row_at(i) (lbf16 ? dsa_bf16_to_f32(rowh[i]) : rowf[i])

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
      const float v0 = row_at(i), v1 = row_at(i + wg), v2 = row_at(i + 2u * wg),
                  v3 = row_at(i + 3u * wg);
      TOPK_HIST(v0);
      TOPK_HIST(v1);
      TOPK_HIST(v2);
      TOPK_HIST(v3);
    }
    for (; i < n; i += wg) TOPK_HIST(row_at(i));
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
      const float v0 = row_at(i), v1 = row_at(i + wg), v2 = row_at(i + 2u * wg),
                  v3 = row_at(i + 3u * wg);
      TOPK_COLLECT(v0, i);
      TOPK_COLLECT(v1, i + wg);
      TOPK_COLLECT(v2, i + 2u * wg);
      TOPK_COLLECT(v3, i + 3u * wg);
    }
    for (; i < n; i += wg) TOPK_COLLECT(row_at(i), i);
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
        if (i < n && topk_key(row_at(i)) == fval) flags |= 1u << qq, c++;
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
#undef row_at
