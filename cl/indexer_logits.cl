/* Indexer MQA logits (SPEC-reference §6.1-6.4): ragged prefill and paged
 * decode, FP8 (e4m3 q and k, f32 k scales) and MXFP4 (e2m1 x ue8m0 blocks).
 *
 *   logit(r, n) = sum_h max((sum_d Q[r,h,d] K[n,d]) * kscale[n], 0) * w[r,h]
 *
 * Query rows: r = b * next_n + i (ragged: next_n = 1, b = r). Keys:
 *   ragged  key n at kv + n * kv_rs (D e4m3 bytes, or D/2 packed e2m1 bytes
 *           with D/32 ue8m0 bytes at ksc + n * ksc_rs + q * ksc_ds)
 *   paged   key j of sequence b in block blk = block_tables[b][j / bs], row
 *           t = j % bs; the block starts at cache + c_off + blk * c_bstride:
 *           FP8   [0, bs*128) values (t at t*128), [bs*128, bs*132) f32 scales
 *           MXFP4 [0, bs*64)  values (t at t*64),  [bs*64, bs*68) 4 scale bytes
 *
 * Grid: 1-D, work-group g = (row - row0) * ntiles + (key tile - tile0): the
 * launcher splits huge grids into several launches over rows and tiles. A work-group computes one query row against a
 * tile of TK keys: a (TH heads x TK keys) block of dot products per head chunk,
 * 256 work-items as HG x KG, each holding 4 heads x 4 keys in registers. Per
 * chunk of DC dims the query's TH x DC values and the tile's TK x DC key values
 * are decoded once into local memory (16 values per segment: one 16-byte load
 * of e4m3, or 8 bytes of e2m1 plus a scale byte), then every work-item does 16
 * FMAs per dim from two float4 local reads. After the dims, ReLU(score) * w
 * folds the 4 heads into 4 per-key partials; partials of the HG head groups
 * meet in local memory at the end. Tiles wholly outside a row's valid keys
 * only write -inf (when clean) and leave. Variants: "h64" (HG 16, KG 16: 64
 * heads x 64 keys, DC 64) for H > 16, "h16" (HG 4, KG 64: 16 x 256, DC 16).
 *
 * The NVIDIA tensor-core path (DSA_HAS_NV_PTX) lives in the *_mma kernels at
 * the end of the file: FP8 paged and ragged with D = 128 and H <= 128. The
 * launcher's variant tables choose among nv-mma, the wide and the narrow
 * portable kernels (the wide one needs more than 32 KiB of local memory).
 *
 * PoCL note: no barrier sits inside data-dependent control flow, not even
 * uniform flow (PoCL 5 mishandled barriers after a data-dependent early
 * return or inside such a branch: later per-item conditions were evaluated
 * for the whole group). Empty tiles run the barriers with a zero-trip head
 * loop instead.
 */
#include "dsa_common.h"
#include "dsa_mxfp4.h"

/* Geometry (host-owned, src/op_indexer_logits.c, passed as build options):
 * IL_NT work-items per portable group; the wide variant IL_W_HG x IL_W_KG
 * (heads/4 x keys/4) with IL_W_DC dims per chunk, the narrow one IL_N_*;
 * the NVIDIA path's MMA_NT, MMA_KT, MMA_SUB and MMA_PITCH below. */

/* Exact e4m3 value; the NaN codes 0x7F / 0xFF decode to +-480 as in vLLM's
 * logits kernels (no special case: the bits' value without the NaN rule). */
DSA_INLINE float il_e4m3(uint b) {
  const uint m = b & 0x7Fu;
  const float nrm = as_float((m << 20) + (120u << 23));
  const float sub = (float)(m & 7u) * 0x1p-9f;
  return as_float(as_uint(m >= 8u ? nrm : sub) | ((b & 0x80u) << 24));
}

/* Sixteen consecutive values of a row starting at p (and, for MXFP4, the
 * scale byte of their 32-element block at sp). */
DSA_INLINE void il_load16(__global const uchar *p, __global const uchar *sp, const int fp4,
                          int aligned, float *v) {
  if (!fp4) {
    const uint4 x = dsa_load16(p, aligned);
    const uint w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int j = 0; j < 16; j++) v[j] = il_e4m3((w[j >> 2] >> (8 * (j & 3))) & 0xFFu);
  } else {
    const uint2 x = dsa_load8(p, aligned);
    const float sc = dsa_ue8m0_to_f32(*sp);
    const uint w[2] = {x.x, x.y};
#pragma unroll
    for (int j = 0; j < 16; j++) v[j] = dsa_e2m1_to_f32((w[j >> 3] >> (4 * (j & 7))) & 0xFu) * sc;
  }
}

#define IL_PARAMS                                                                              \
  __global const uchar *qv, ulong qv_off, ulong qv_bs, ulong qv_rs, ulong qv_hs,               \
      __global const uchar *qsc, ulong qsc_off, ulong qsc_bs, ulong qsc_rs, ulong qsc_hs,      \
      ulong qsc_ds, int H, int D, int next_n, __global const uchar *w, ulong w_off,            \
      ulong w_rs, ulong w_hs, __global const uchar *kv, ulong kv_off, ulong kv_rs,             \
      __global const uchar *ksc, ulong ksc_off, ulong ksc_rs, ulong ksc_ds,                    \
      __global const uchar *lim, ulong lim_off, ulong lim_s0, ulong lim_s1,                    \
      __global const uchar *lim2, ulong lim2_off, ulong lim2_s0, int ctx_rank,                 \
      __global const uchar *cache, ulong c_off, long num_blocks, int bs, ulong c_bstride,      \
      __global const uchar *bt, ulong bt_off, ulong bt_rs, ulong bt_cs, long W, int ncols,     \
      int clean, __global uchar *out, ulong o_off, ulong o_rs, int out_bf16, int q_al,         \
      int k_al, int ntiles, int tile0, uint row0, __global volatile uint *faults

/* The kernels' parameter list, argument groups of cl/dsa_args.h laid by the
 * launcher in this order. The query (and its MXFP4 scales) is a rank-4 view
 * [B, next_n, H, D] (ragged: next_n = 1); k / k_scale are the ragged keys,
 * lim / lim2 the row limits (ragged ks / ke; paged context_lens, 1-D or
 * 2-D, and none), cache + bt the paged keys. */
#define IL_KARGS                                                                               \
  DSA_CTENSOR4(q), DSA_CTENSOR4(qs), int H, int D, int next_n, DSA_CTENSOR2(wt),               \
      DSA_CTENSOR2(kv), DSA_CTENSOR2(ksc), DSA_CTENSOR2(lim), DSA_CTENSOR1(lim2), int ctx_rank, \
      DSA_CPAGED(cache), DSA_CTENSOR2(bt), long W, int ncols, int clean, DSA_TENSOR2(out),      \
      int out_bf16, int ntiles, int tile0, uint row0, DSA_FAULTS

/* IL_KARGS as the bodies' IL_PARAMS; va: the vector width of a 16-value
 * load (16 bytes of e4m3, 8 of e2m1). */
#define IL_FROM_KARGS(PAGED, FP4)                                                              \
  q_mem, q_off, q_s0, q_s1, q_s2, qs_mem, qs_off, qs_s0, qs_s1, qs_s2, qs_s3, H, D, next_n,    \
      wt_mem, wt_off, wt_s0, wt_s1, kv_mem, kv_off, kv_s0, ksc_mem, ksc_off, ksc_s0, ksc_s1,   \
      lim_mem, lim_off, lim_s0, lim_s1, lim2_mem, lim2_off, lim2_s0, ctx_rank, cache_mem,      \
      cache_off, cache_nb, cache_bs, cache_bstride, bt_mem, bt_off, bt_s0, bt_s1, W, ncols,    \
      clean, out_mem, out_off, out_s0, out_bf16, q_al >= ((FP4) ? 8u : 16u),                   \
      ((PAGED) ? cache_al : kv_al) >= ((FP4) ? 8u : 16u), ntiles, tile0, row0, faults

#define IL_NAMES                                                                               \
  qv, qv_off, qv_bs, qv_rs, qv_hs, qsc, qsc_off, qsc_bs, qsc_rs, qsc_hs, qsc_ds, H, D, next_n,  \
      w, w_off, w_rs, w_hs, kv, kv_off, kv_rs, ksc, ksc_off, ksc_rs, ksc_ds, lim, lim_off,     \
      lim_s0, lim_s1, lim2, lim2_off, lim2_s0, ctx_rank, cache, c_off, num_blocks, bs,         \
      c_bstride, bt, bt_off, bt_rs, bt_cs, W, ncols, clean, out, o_off, o_rs, out_bf16, q_al,  \
      k_al, ntiles, tile0, row0, faults

/* Key states in the tile. */
#define IL_KEY_OK 0
#define IL_KEY_OUT 1    /* outside the row's range: -inf if clean, else untouched */
#define IL_KEY_MASKED 2 /* bad block id: always -inf */

DSA_INLINE void il_store(__global uchar *out, ulong o_off, ulong o_rs, uint r, int col,
                         float v, int out_bf16) {
  const ulong a = o_off + (ulong)r * o_rs;
  if (out_bf16)
    *(__global ushort *)(out + a + (ulong)col * 2u) = dsa_f32_to_bf16(v);
  else
    *(__global float *)(out + a + (ulong)col * 4u) = v;
}

/* The row's valid key range [lo, hi) (clamped) and whether it was faulty. */
DSA_INLINE int il_row_range(__global const uchar *lim, ulong lim_off, ulong lim_s0, ulong lim_s1,
                            __global const uchar *lim2, ulong lim2_off, ulong lim2_s0,
                            int ctx_rank, int paged, uint b, uint i, int next_n, int ncols,
                            long W, int bs, int *lo, int *hi) {
  if (!paged) {
    const int a = *(__global const int *)(lim + lim_off + (ulong)b * lim_s0);
    const int e = *(__global const int *)(lim2 + lim2_off + (ulong)b * lim2_s0);
    *lo = max(a, 0);
    *hi = min(e, ncols);
    return a < 0 || e > ncols;
  }
  const ulong ro = lim_off + (ulong)b * lim_s0 + (ctx_rank == 2 ? (ulong)i * lim_s1 : 0ul);
  const int c = *(__global const int *)(lim + ro);
  const long cap = min((long)ncols, W * (long)bs);
  const long l = ctx_rank == 2 ? (long)c : (long)c - (long)(next_n - 1) + (long)i;
  *lo = 0;
  *hi = (int)clamp(l, 0l, cap);
  return c < 0 || (long)c > cap;
}

/* Where key j of sequence b lives: its K bytes at *ko (from kv, or from the
 * cache through block-table row b when paged) and its scale: the fp32 value
 * in *sc (FP8) or the offset of its scale bytes in *so (MXFP4). A table
 * entry that is not a block of the cache masks the key and raises
 * DSA_FAULT_SLOT_RANGE. */
DSA_INLINE int il_locate_key(IL_PARAMS, const int paged, const int fp4, const uint b, const int j,
                             ulong *ko, ulong *so, float *sc) {
  if (!paged) {
    *ko = kv_off + (ulong)j * kv_rs;
    if (!fp4)
      *sc = *(__global const float *)(ksc + ksc_off + (ulong)j * ksc_rs);
    else
      *so = ksc_off + (ulong)j * ksc_rs;
    return IL_KEY_OK;
  }
  const int tb = j / bs, row = j - tb * bs;
  const int blk = *(__global const int *)(bt + bt_off + (ulong)b * bt_rs + (ulong)tb * bt_cs);
  if (blk < 0 || (long)blk >= num_blocks) {
    dsa_fault(faults, DSA_FAULT_SLOT_RANGE);
    return IL_KEY_MASKED;
  }
  const ulong base = c_off + (ulong)blk * c_bstride;
  if (!fp4) {
    *ko = base + (ulong)row * 128u;
    *sc = *(__global const float *)(cache + base + (ulong)bs * 128u + (ulong)row * 4u);
  } else {
    *ko = base + (ulong)row * 64u;
    *so = base + (ulong)bs * 64u + (ulong)row * 4u;
  }
  return IL_KEY_OK;
}

/* The tile's work; skip: no key of the tile is valid (the group only writes
 * -inf, or nothing). */
DSA_INLINE void il_tile(IL_PARAMS, __local float *qs, __local float *ks, __local float *red,
                        __local ulong *koff, __local ulong *ksoff, __local float *kscale,
                        __local int *kstate, const int HG, const int KG, const int DC,
                        const int paged, const int fp4, const uint lid, const uint r,
                        const int n0, const uint b, const uint i, const int lo, const int hi,
                        const int skip) {
  const int TH = 4 * HG, TK = 4 * KG, SEGK = DC / 16;

  /* Where each key of the tile lives. */
  if ((int)lid < TK) { /* TK <= IL_NT */
    const int t = (int)lid;
    const int j = n0 + t;
    int st = !skip && j >= lo && j < hi ? IL_KEY_OK : IL_KEY_OUT;
    ulong ko = 0, so = 0;
    float sc = 1.0f;
    if (st == IL_KEY_OK) st = il_locate_key(IL_NAMES, paged, fp4, b, j, &ko, &so, &sc);
    koff[t] = ko;
    ksoff[t] = so;
    kscale[t] = sc;
    kstate[t] = st;
  }
  barrier(CLK_LOCAL_MEM_FENCE);

  __global const uchar *kbase = paged ? cache : kv;
  __global const uchar *sbase = paged ? cache : ksc;
  const ulong sds = paged ? 1ul : ksc_ds;
  const uint hg = lid / (uint)KG, kg = lid - hg * (uint)KG;
  const ulong qrow = qv_off + (ulong)b * qv_bs + (ulong)i * qv_rs;
  const ulong qsrow = qsc_off + (ulong)b * qsc_bs + (ulong)i * qsc_rs;
  float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};

  const int hend = skip ? 0 : H;
  for (int hc = 0; hc < hend; hc += TH) {
    float acc[4][4];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
      for (int c = 0; c < 4; c++) acc[a][c] = 0.0f;

    for (int dc = 0; dc < D; dc += DC) {
      if ((int)lid < TH * SEGK) { /* <= IL_NT */
        const int s = (int)lid;
        const int hh = s / SEGK, sg = s - hh * SEGK, h = hc + hh, d0 = dc + sg * 16;
        float v[16];
        if (h < H && d0 < D) {
          const ulong ho = qrow + (ulong)h * qv_hs + (ulong)(fp4 ? d0 / 2 : d0);
          il_load16(qv + ho, qsc + qsrow + (ulong)h * qsc_hs + (ulong)(d0 / 32) * qsc_ds, fp4,
                    q_al, v);
        } else {
#pragma unroll
          for (int e = 0; e < 16; e++) v[e] = 0.0f;
        }
#pragma unroll
        for (int e = 0; e < 16; e++) qs[(sg * 16 + e) * TH + hh] = v[e];
      }
      if ((int)lid < TK * SEGK) { /* == IL_NT */
        const int s = (int)lid;
        const int kk = s / SEGK, sg = s - kk * SEGK, d0 = dc + sg * 16;
        float v[16];
        if (kstate[kk] == IL_KEY_OK && d0 < D) {
          il_load16(kbase + koff[kk] + (ulong)(fp4 ? d0 / 2 : d0),
                    sbase + ksoff[kk] + (ulong)(d0 / 32) * sds, fp4, k_al, v);
        } else {
#pragma unroll
          for (int e = 0; e < 16; e++) v[e] = 0.0f;
        }
#pragma unroll
        for (int e = 0; e < 16; e++) ks[(sg * 16 + e) * TK + kk] = v[e];
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      __local const float4 *qa = (__local const float4 *)qs + hg;
      __local const float4 *ka = (__local const float4 *)ks + kg;
      for (int d = 0; d < DC; d++) {
        const float4 x = qa[d * HG], y = ka[d * KG];
        const float xa[4] = {x.x, x.y, x.z, x.w}, ya[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
          for (int c = 0; c < 4; c++) acc[a][c] = fma(xa[a], ya[c], acc[a][c]);
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }

    float wv[4];
#pragma unroll
    for (int a = 0; a < 4; a++) {
      const int h = hc + (int)hg * 4 + a;
      wv[a] = h < H ? *(__global const float *)(w + w_off + (ulong)r * w_rs + (ulong)h * w_hs)
                    : 0.0f;
    }
#pragma unroll
    for (int c = 0; c < 4; c++) {
      const float s = kscale[kg * 4 + c];
#pragma unroll
      for (int a = 0; a < 4; a++) part[c] = fma(fmax(acc[a][c] * s, 0.0f), wv[a], part[c]);
    }
  }

#pragma unroll
  for (int c = 0; c < 4; c++) red[hg * TK + kg * 4 + c] = part[c];
  barrier(CLK_LOCAL_MEM_FENCE);
  if ((int)lid < TK) {
    const int t = (int)lid;
    const int col = n0 + t;
    const int st = kstate[t];
    float sum = 0.0f;
    for (int g = 0; g < HG; g++) sum += red[g * TK + t];
    if (col < ncols && (st != IL_KEY_OUT || clean))
      il_store(out, o_off, o_rs, r, col, st == IL_KEY_OK ? sum : -INFINITY, out_bf16);
  }
}

DSA_INLINE void il_body(IL_PARAMS, __local float *qs, __local float *ks, __local float *red,
                        __local ulong *koff, __local ulong *ksoff, __local float *kscale,
                        __local int *kstate, const int HG, const int KG, const int DC,
                        const int paged, const int fp4) {
  const int TK = 4 * KG;
  const uint lid = get_local_id(0);
  const uint g = get_group_id(0), gr = g / (uint)ntiles;
  const uint r = row0 + gr;
  const int n0 = (tile0 + (int)(g - gr * (uint)ntiles)) * TK;
  const uint b = r / (uint)next_n, i = r - b * (uint)next_n;

  int lo, hi;
  const int bad = il_row_range(lim, lim_off, lim_s0, lim_s1, lim2, lim2_off, lim2_s0, ctx_rank,
                               paged, b, i, next_n, ncols, W, bs, &lo, &hi);
  if (bad && n0 == 0 && lid == 0) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);

  /* A tile with no valid key still runs every barrier, with no trip through
   * the head loop: PoCL (5.x) mishandles barriers inside a branch (or after a
   * return) whose condition it cannot prove uniform; there it evaluated later
   * per-item conditions for the whole group. Loop bounds are fine. */
  const int skip = n0 >= hi || n0 + TK <= lo;
  il_tile(IL_NAMES, qs, ks, red, koff, ksoff, kscale, kstate, HG, KG, DC, paged, fp4, lid, r,
          n0, b, i, lo, hi, skip);
}

#define IL_KERNEL(NAME, HG, KG, DC, PAGED, FP4)                                               \
  __kernel __attribute__((reqd_work_group_size(IL_NT, 1, 1))) void NAME(IL_KARGS) {           \
    __local float4 qs[(4 * HG) * DC / 4];                                                      \
    __local float4 ks[(4 * KG) * DC / 4];                                                      \
    __local float red[HG * 4 * KG];                                                            \
    __local ulong koff[4 * KG], ksoff[4 * KG];                                                 \
    __local float kscale[4 * KG];                                                              \
    __local int kstate[4 * KG];                                                                \
    il_body(IL_FROM_KARGS(PAGED, FP4), (__local float *)qs, (__local float *)ks, red, koff,    \
            ksoff, kscale, kstate, HG, KG, DC, PAGED, FP4);                                    \
  }

IL_KERNEL(mqa_logits_h64, IL_W_HG, IL_W_KG, IL_W_DC, 0, 0)
IL_KERNEL(mqa_logits_h16, IL_N_HG, IL_N_KG, IL_N_DC, 0, 0)
IL_KERNEL(paged_mqa_logits_h64, IL_W_HG, IL_W_KG, IL_W_DC, 1, 0)
IL_KERNEL(paged_mqa_logits_h16, IL_N_HG, IL_N_KG, IL_N_DC, 1, 0)
IL_KERNEL(mqa_logits_mxfp4_h64, IL_W_HG, IL_W_KG, IL_W_DC, 0, 1)
IL_KERNEL(mqa_logits_mxfp4_h16, IL_N_HG, IL_N_KG, IL_N_DC, 0, 1)
IL_KERNEL(paged_mqa_logits_mxfp4_h64, IL_W_HG, IL_W_KG, IL_W_DC, 1, 1)
IL_KERNEL(paged_mqa_logits_mxfp4_h16, IL_N_HG, IL_N_KG, IL_N_DC, 1, 1)

/* ---- NVIDIA tensor-core path ------------------------------------------------
 * FP8 logits with D = 128 and H <= 128 through mma.sync m16n8k16 bf16 (sm_80+;
 * e4m3 values are exact in bf16, products exact in the fp32 accumulators).
 * Work-group: 128 work-items = 4 warps (local id x -> lane), 256 keys in four
 * sub-tiles of 64. Warp w owns head blocks w and w + 4 (16 heads each) and
 * keeps their query fragments in registers for the whole group. Per sub-tile
 * the keys are staged as bf16 rows in local memory (68-word pitch: the
 * fragment reads hit 32 distinct banks); each warp runs 8 key blocks x 8
 * k-steps of mma per head block, applies k_scale, ReLU and the weights to
 * its accumulators, and the partial sums meet through shuffles (over the 8
 * row groups of a fragment) and local memory (over the 4 warps).
 * Fragment layouts (PTX ISA, mma.m16n8k16 .bf16), g = lane / 4, t = lane % 4:
 *   A regs: (row g, cols 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)
 *   B regs: (rows 2t..2t+1, col g), (rows 2t+8.., col g)
 *   C: c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1). */
#if DSA_HAS_NV_PTX && (!defined(DSA_NV_SM) || DSA_NV_SM >= 80)
#define IL_HAS_MMA 1
/* MMA_NT (128), MMA_KT (64 keys per sub-tile), MMA_SUB (4) and MMA_PITCH (68
 * words per staged key row: 64 bf16 pairs + 4) come from the launcher. */
#if MMA_NT != 128 || MMA_KT != 64
#error "indexer_logits.cl: the mma path's warp mapping needs MMA_NT = 128, MMA_KT = 64"
#endif
#define MMA_MAXHB 2

/* bf16 bits of an e4m3 byte's value (NaN codes as +-480, like il_e4m3). */
DSA_INLINE uint il_bf16_of_e4m3(uint b) {
  const uint m = b & 0x7Fu;
  const uint nrm = (m << 4) + (120u << 7);
  const uint sub = as_uint((float)(m & 7u) * 0x1p-9f) >> 16;
  return (m >= 8u ? nrm : sub) | ((b & 0x80u) << 8);
}

/* Two consecutive e4m3 bytes (little-endian in the low 16 bits of x) as a
 * bf16 pair, the first in the low half. */
DSA_INLINE uint il_bf16x2_of_e4m3x2(uint x) {
  return il_bf16_of_e4m3(x & 0xFFu) | (il_bf16_of_e4m3((x >> 8) & 0xFFu) << 16);
}

DSA_INLINE void il_mma_body(IL_PARAMS, __local uint *kst, __local float *red, __local ulong *koff,
                            __local float *kscale, __local int *kstate, const int paged) {
  const uint lid = get_local_id(0), warp = lid >> 5, lane = lid & 31u;
  const uint gq = lane >> 2, tq = lane & 3u;
  const uint g = get_group_id(0), gr = g / (uint)ntiles;
  const uint r = row0 + gr;
  const int n0 = (tile0 + (int)(g - gr * (uint)ntiles)) * (MMA_KT * MMA_SUB);
  const uint b = r / (uint)next_n, i = r - b * (uint)next_n;

  int lo, hi;
  const int bad = il_row_range(lim, lim_off, lim_s0, lim_s1, lim2, lim2_off, lim2_s0, ctx_rank,
                               paged, b, i, next_n, ncols, W, bs, &lo, &hi);
  if (bad && n0 == 0 && lid == 0) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
  const int skip = n0 >= hi || n0 + MMA_KT * MMA_SUB <= lo;
  const int nhb = (H + 15) / 16;

  /* This warp's query fragments (bf16 pairs) and weights. */
  uint qa[MMA_MAXHB][8][4];
  float wv[MMA_MAXHB][2];
  const ulong qrow = qv_off + (ulong)b * qv_bs + (ulong)i * qv_rs;
#pragma unroll
  for (int j = 0; j < MMA_MAXHB; j++) {
    const int h0 = (int)(warp + 4u * (uint)j) * 16 + (int)gq, h1 = h0 + 8;
    const int ok0 = !skip && h0 < H, ok1 = !skip && h1 < H;
    __global const uchar *q0 = qv + qrow + (ulong)(ok0 ? h0 : 0) * qv_hs;
    __global const uchar *q1 = qv + qrow + (ulong)(ok1 ? h1 : 0) * qv_hs;
#pragma unroll
    for (int ks = 0; ks < 8; ks++) {
      const int d = ks * 16 + 2 * (int)tq;
      qa[j][ks][0] = ok0 ? il_bf16x2_of_e4m3x2(q0[d] | ((uint)q0[d + 1] << 8)) : 0u;
      qa[j][ks][1] = ok1 ? il_bf16x2_of_e4m3x2(q1[d] | ((uint)q1[d + 1] << 8)) : 0u;
      qa[j][ks][2] = ok0 ? il_bf16x2_of_e4m3x2(q0[d + 8] | ((uint)q0[d + 9] << 8)) : 0u;
      qa[j][ks][3] = ok1 ? il_bf16x2_of_e4m3x2(q1[d + 8] | ((uint)q1[d + 9] << 8)) : 0u;
    }
    wv[j][0] = ok0 ? *(__global const float *)(w + w_off + (ulong)r * w_rs + (ulong)h0 * w_hs)
                   : 0.0f;
    wv[j][1] = ok1 ? *(__global const float *)(w + w_off + (ulong)r * w_rs + (ulong)h1 * w_hs)
                   : 0.0f;
  }

  __global const uchar *kbase = paged ? cache : kv;
  for (int sub = 0; sub < MMA_SUB; sub++) {
    const int k0 = n0 + sub * MMA_KT;
    const int sub_skip = k0 >= hi || k0 + MMA_KT <= lo;
    if (lid < MMA_KT) {
      const int t = (int)lid, j = k0 + t;
      int st = !sub_skip && j >= lo && j < hi ? IL_KEY_OK : IL_KEY_OUT;
      ulong ko = 0, so = 0; /* FP8 only: no scale-byte offset */
      float sc = 1.0f;
      if (st == IL_KEY_OK) st = il_locate_key(IL_NAMES, paged, 0, b, j, &ko, &so, &sc);
      koff[t] = ko;
      kscale[t] = sc;
      kstate[t] = st;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* 64 keys x 8 segments of 16 bytes: four per work-item, all loads first. */
    uint4 x[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const uint idx = lid + MMA_NT * (uint)u, kk = idx >> 3, seg = idx & 7u;
      x[u] = kstate[kk] == IL_KEY_OK ? dsa_load16(kbase + koff[kk] + seg * 16u, k_al)
                                     : (uint4)(0u);
    }
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const uint idx = lid + MMA_NT * (uint)u, kk = idx >> 3, seg = idx & 7u;
      __local uint4 *dst = (__local uint4 *)(kst + kk * MMA_PITCH + seg * 8u);
      dst[0] = (uint4)(il_bf16x2_of_e4m3x2(x[u].x), il_bf16x2_of_e4m3x2(x[u].x >> 16),
                       il_bf16x2_of_e4m3x2(x[u].y), il_bf16x2_of_e4m3x2(x[u].y >> 16));
      dst[1] = (uint4)(il_bf16x2_of_e4m3x2(x[u].z), il_bf16x2_of_e4m3x2(x[u].z >> 16),
                       il_bf16x2_of_e4m3x2(x[u].w), il_bf16x2_of_e4m3x2(x[u].w >> 16));
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    float p[8][2];
#pragma unroll
    for (int kb = 0; kb < 8; kb++) p[kb][0] = p[kb][1] = 0.0f;
#pragma unroll
    for (int j = 0; j < MMA_MAXHB; j++) {
      if (sub_skip || (int)(warp + 4u * (uint)j) >= nhb) continue; /* warp-uniform */
#pragma unroll
      for (int kb = 0; kb < 8; kb++) {
        float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        __local const uint *krow = kst + (uint)(kb * 8 + (int)gq) * MMA_PITCH + tq;
#pragma unroll
        for (int ks = 0; ks < 8; ks++)
          dsa_nv_mma_bf16(c, qa[j][ks][0], qa[j][ks][1], qa[j][ks][2], qa[j][ks][3], krow[ks * 8],
                 krow[ks * 8 + 4]);
        const float s0 = kscale[kb * 8 + 2 * (int)tq], s1 = kscale[kb * 8 + 2 * (int)tq + 1];
        p[kb][0] += fmax(c[0] * s0, 0.0f) * wv[j][0] + fmax(c[2] * s0, 0.0f) * wv[j][1];
        p[kb][1] += fmax(c[1] * s1, 0.0f) * wv[j][0] + fmax(c[3] * s1, 0.0f) * wv[j][1];
      }
    }
#pragma unroll
    for (int kb = 0; kb < 8; kb++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        float v = p[kb][e];
        v += dsa_nv_shfl_xor_f32(v, 4);
        v += dsa_nv_shfl_xor_f32(v, 8);
        v += dsa_nv_shfl_xor_f32(v, 16);
        if (gq == 0u) red[warp * MMA_KT + (uint)kb * 8u + 2u * tq + (uint)e] = v;
      }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < MMA_KT) {
      const int col = k0 + (int)lid;
      const int st = kstate[lid];
      const float sum = (red[lid] + red[MMA_KT + lid]) + (red[2 * MMA_KT + lid] + red[3 * MMA_KT + lid]);
      if (col < ncols && (st != IL_KEY_OUT || clean))
        il_store(out, o_off, o_rs, r, col, st == IL_KEY_OK ? sum : -INFINITY, out_bf16);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

#define IL_MMA_KERNEL(NAME, PAGED)                                                            \
  __kernel __attribute__((reqd_work_group_size(MMA_NT, 1, 1))) void NAME(IL_KARGS) {          \
    __local uint4 kst[MMA_KT * MMA_PITCH / 4];                                                 \
    __local float red[4 * MMA_KT];                                                             \
    __local ulong koff[MMA_KT];                                                                \
    __local float kscale[MMA_KT];                                                              \
    __local int kstate[MMA_KT];                                                                \
    il_mma_body(IL_FROM_KARGS(PAGED, 0), (__local uint *)kst, red, koff, kscale, kstate,       \
                PAGED);                                                                        \
  }

IL_MMA_KERNEL(mqa_logits_mma, 0)
IL_MMA_KERNEL(paged_mqa_logits_mma, 1)
#endif
