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
 * launcher splits huge grids into several launches over rows and tiles.
 * A portable work-group computes one query row against a tile of TK keys:
 * a (TH heads x TK keys) block of dot products per head chunk, HG x KG
 * work-items (IL_W_NT or IL_NT), each holding RH heads x RK keys in registers
 * (il_tile). Per chunk of DC dims the query's TH x DC values and the tile's
 * TK x DC key values are decoded once into local memory (16 values per
 * segment: one 16-byte load of e4m3, or 8 bytes of e2m1 plus a scale byte;
 * the next chunk's bytes are loaded while this one is multiplied), then
 * every work-item does RH x RK FMAs per dim from RH / 4 + RK / 4 float4
 * local reads. After the dims, ReLU(score) * w folds the RH heads into RK
 * per-key partials; partials of the HG head groups meet in local memory
 * after each head chunk (the weights staged in local memory with the first
 * chunk). Tiles wholly outside a row's valid keys only write -inf (when
 * clean) and leave. Variants: "h64db" (8 x 8 per item, HG 8, KG 16: 64
 * heads x 128 keys, 128 items, DC 16; two chunk buffers, one barrier a
 * chunk) for H > 16 where it fits, "h64" (the same with one buffer, 32
 * KiB), "h16" (4 x 4, HG 4, KG 64: 16 x 256, 256 items, DC 16); "h64pre"
 * (FP8): h64db on operands decoded beforehand into f32 chunks by
 * il_predecode_q / _k (the query; for the ragged operator the keys too),
 * so that staging a chunk is float4 copies (two kernels each, the "1"
 * twin for H <= 64 and D = 128 with its loop counts as constants).
 *
 * Two matrix-engine families follow the portable kernels: the tile kernels
 * (*_tile: one body over cl/dsa_tile.h for every back-end, D = 128, H <=
 * 128, FP8 and MXFP4, ragged and paged) and the keys-as-M kernels (*_keys*,
 * variant "keys": one body over the layer's maps for every matrix back-end,
 * native or emulated; FP8 ragged and paged, D = 128, H <= 64). The
 * launcher's variant tables choose among keys, the tile kernels, and the
 * wide and narrow portable kernels (both within 32 KiB of local memory).
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
 * items of IL_W_RH heads x IL_W_RK keys with IL_W_DC dims per chunk, the
 * narrow one IL_N_*;
 * the NVIDIA path's MMA_NT, MMA_KT, MMA_SUB and MMA_PITCH below. */

/* Sixteen consecutive values of a row in two steps, so that the loads of
 * the next chunk are in flight while this one is multiplied: il_raw16 reads
 * the bytes at p (16 of e4m3, or 8 of e2m1 in .xy and the scale byte of
 * their 32-element block at sp in .z), il_dec16 decodes them. Absent rows
 * are zero bytes (zero values). */
DSA_INLINE uint4 il_raw16(__global const uchar *p, __global const uchar *sp, const int fp4,
                          int aligned) {
  if (!fp4) return dsa_load16(p, aligned);
  const uint2 x = dsa_load8(p, aligned);
  return (uint4)(x.x, x.y, (uint)*sp, 0u);
}

/* FP8 values are decoded exactly, scaled by 2^-8: each byte pair becomes
 * two f16 (dsa_e4m3x2_to_f16x2_scaled: e4m3 x 2^-8 is exact in f16,
 * subnormals included; the NaN codes 0x7F / 0xFF give +-480 x 2^-8, as
 * vLLM's logits kernels read them: the bits' value without the NaN rule)
 * widened by vload_half2, a few integer operations a pair where an fp32
 * decode of each byte took about ten (an int-to-float conversion among
 * them). Keys are staged so (qmul 1), the query times 2^16 (qmul): every
 * product q k, and so every sum, is exactly the unscaled one (H100, paged
 * B=64: 984 -> 876 us; docs/PERFORMANCE.md). */
DSA_INLINE void il_dec16(const uint4 x, const int fp4, float *v, const float qmul) {
  if (!fp4) {
    const uint w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
      /* Bytes 0 and 2, then 1 and 3, as the f16 pairs (7 integer
       * operations a word, 13 by pairs 0-1 and 2-3). */
      const uint h[2] = {dsa_e4m3x2_to_f16x2_scaled_even(w[j]),
                         dsa_e4m3x2_to_f16x2_scaled_odd(w[j])};
      const float2 a = vload_half2(0, (const __private half *)&h[0]) * qmul;
      const float2 b = vload_half2(0, (const __private half *)&h[1]) * qmul;
      v[4 * j] = a.x, v[4 * j + 2] = a.y, v[4 * j + 1] = b.x, v[4 * j + 3] = b.y;
    }
  } else {
    const float sc = dsa_ue8m0_to_f32(x.z);
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
  /* One address for either element size (col >= 0 in every caller): the
   * keys kernels' stores made both, 3 instructions each (session 27's
   * SASS). */
  __global uchar *p = out + o_off + (ulong)r * o_rs + (ulong)(uint)col * (out_bf16 ? 2u : 4u);
  if (out_bf16)
    *(__global ushort *)p = dsa_f32_to_bf16(v);
  else
    *(__global float *)p = v;
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

/* The raw bytes of key segment kd (its 16 dims from kd) of the key whose
 * bytes are at kbase + ko (its MXFP4 scales at sbase + so, sds apart). */
DSA_INLINE uint4 il_kraw(__global const uchar *kbase, __global const uchar *sbase, ulong ko,
                         ulong so, ulong sds, int kd, int fp4, int k_al) {
  return il_raw16(kbase + ko + (ulong)(fp4 ? kd / 2 : kd), sbase + so + (ulong)(kd / 32) * sds,
                  fp4, k_al);
}

/* Key t's logit v (tile start n0): stored where the key is a column, and
 * where it is valid or the row is cleaned (-inf unless valid). */
DSA_INLINE void il_store_key(__global uchar *out, ulong o_off, ulong o_rs, uint r, int n0, int t,
                             __local const int *kstate, int ncols, int clean, float v,
                             int out_bf16) {
  const int col = n0 + t, st = kstate[t];
  if (col < ncols && (st != IL_KEY_OUT || clean))
    il_store(out, o_off, o_rs, r, col, st == IL_KEY_OK ? v : -INFINITY, out_bf16);
}

/* The raw bytes of the query segment of head h at dims d of this row. */
DSA_INLINE uint4 il_qraw(IL_PARAMS, const int fp4, const ulong qrow, const ulong qsrow,
                         const int h, const int d) {
  return il_raw16(qv + qrow + (ulong)h * qv_hs + (ulong)(fp4 ? d / 2 : d),
                  qsc + qsrow + (ulong)h * qsc_hs + (ulong)(d / 32) * qsc_ds, fp4, q_al);
}

/* PRE: the float4 of the pre-decoded query (keys) chunk at dim nd that
 * this item copies (il_tile: u-th at lid + u NT; a key float4 j holds dim
 * j / (TK / 4), keys 4 (j % (TK / 4)) + 0..3). */
#define IL_PRE_LOADQ(nd)                                                                      \
  do {                                                                                        \
    __global const float4 *src_ = pqi + (ulong)((nd) / DC) * (ulong)QV4;                      \
    pq0 = src_[0];                                                                            \
    if (QPI > 1) pq1 = src_[NT];                                                              \
  } while (0)
#define IL_PRE_KSRC(u, nd) pki[(ulong)((nd) + (u) * (NT / (TK / 4))) * np4]
#define IL_PRE_LOADK(nd)                                                                      \
  do {                                                                                        \
    pk0 = IL_PRE_KSRC(0, nd);                                                                 \
    if (KPI4 > 1) pk1 = IL_PRE_KSRC(1, nd);                                                   \
    if (KPI4 > 2) pk2 = IL_PRE_KSRC(2, nd);                                                   \
    if (KPI4 > 3) pk3 = IL_PRE_KSRC(3, nd);                                                   \
  } while (0)

/* The tile's work; skip: no key of the tile is valid (the group only writes
 * -inf, or nothing).
 *
 * Register tile: work-item (hg, kg) holds RH heads x RK keys, as float4
 * columns: its heads are 4 hg + {0..3} + 4 HG i (i < RH / 4) and its keys
 * 4 kg + {0..3} + 4 KG j, so at each dim its RH / 4 + RK / 4 float4 reads
 * from the [dim][head] and [dim][key] chunks in local memory feed RH x RK
 * FMAs (8 x 8: 64 FMAs per 16 floats read; 4 x 4 was 16 per 8, bound by
 * local-memory bandwidth). Items are laid as blocks of 32 = 4 head groups x
 * 8 key groups, so a warp (NVIDIA) reads 4 distinct float4 of heads and 8 of
 * keys per read instruction: one 128-byte wavefront each, conflict-free.
 * The head-group partials (red) reuse the key chunk's local memory once the
 * dims are done (PRE: their own). A group of NT = HG x KG items has TK = NT
 * or 2 NT keys: an item locates, reduces and stores TK / NT of them, and
 * stages TK x DC / 16 / NT key segments of 16 dims a chunk. */
DSA_INLINE_ALWAYS void il_tile(IL_PARAMS, __local float *qs, __local float *ks,
                               __local float *red, __local float *wl, __local ulong *koff,
                               __local ulong *ksoff, __local float *kscale, __local int *kstate,
                               const int HG, const int KG, const int RH, const int RK,
                               const int DC, const int NB, const int paged, const int fp4,
                               const uint lid, const uint r, const int n0, const uint b,
                               const uint i, const int lo, const int hi, const int skip,
                               const int PRE, const int H1, __global const float4 *pq,
                               __global const float4 *pk, const ulong pk_np) {
  const int NT = HG * KG, TH = RH * HG, TK = RK * KG, SEGK = DC / 16;
  /* PRE (il_predecode_*): the query (PRE 1) and the keys (PRE 2) come as
   * floats already in the chunks' layout; staging a chunk is QV4 (KV4)
   * float4 copies, QPI (KPI4) an item. */
  const int QV4 = TH * DC / 4, KV4 = TK * DC / 4;
  const int QPI = PRE ? QV4 / NT : 1, KPI4 = PRE == 2 ? KV4 / NT : 1;
  /* PRE: the head-group partials have their own local memory (red is not
   * ks), so neither the barrier before the epilogue nor the one after the
   * partials' sum is needed (H200 with PRE: paged B = 64 815 -> 811 us,
   * prefill 6171 -> 5991; on h64db it measured slower: 813 -> 823 and
   * 6350 -> 6428). */
  const int RSEP = PRE != 0;
  /* The dims as a constant where they are known: paged, 128 (the cache's
   * rows), and in the H1 kernels (H <= TH: the loop's one head chunk is a
   * constant too). The ragged operator takes any D (a multiple of 32), so
   * its H1 twin is picked for D = 128 only. The chunk and head loops then
   * have trip counts the compiler knows; the same work in the same order,
   * so the same logits. H200, paged h64pre B = 64: 809.6 -> 781.8 us (each
   * alone 806.8 / 801.6; unrolling the chunk loop by 2 or 8 was slower, 816
   * / 1067). H100, ragged h64pre prefill 5988 -> 5794 us; paged h64 (27
   * KiB) 817.8 -> 809.3; h64db unchanged. The head chunks' count nhc as a
   * constant too (the query's chunk offset) gained nothing in the ragged
   * twin and took the paged one from 127 registers to 130 (three groups an
   * SM: B = 64 782 -> 837-842 us). docs/PERFORMANCE.md. */
  const int DD = paged || H1 ? 128 : D;
  const int nch = (DD + DC - 1) / DC, nhc = (H + TH - 1) / TH;
  const int KPI = TK / NT, KSEG = TK * SEGK / NT; /* 1 or 2 each (IL_GEOM_BAD) */
  /* Floats of one chunk buffer of each (NB 2: two of each, the chunk staged
   * while the last is multiplied; one barrier a chunk, not two). */
  const int QSZ = TH * DC, KSZ = TK * (DC > HG ? DC : HG);

  /* Where each key of the tile lives. */
#pragma unroll
  for (int j = 0; j < KPI; j++) {
    const int t = (int)lid + j * NT;
    const int jj = n0 + t;
    int st = !skip && jj >= lo && jj < hi ? IL_KEY_OK : IL_KEY_OUT;
    ulong ko = 0, so = 0;
    float sc = 1.0f;
    if (st == IL_KEY_OK) st = il_locate_key(IL_NAMES, paged, fp4, b, jj, &ko, &so, &sc);
    koff[t] = ko;
    ksoff[t] = so;
    kscale[t] = sc;
    kstate[t] = st;
  }
  barrier(CLK_LOCAL_MEM_FENCE);

  __global const uchar *kbase = paged ? cache : kv;
  __global const uchar *sbase = paged ? cache : ksc;
  const ulong sds = paged ? 1ul : ksc_ds;
  /* Blocks of 32 items: 4 head groups x 8 key groups (see above). */
  const uint blk = lid / 32u, ln = lid % 32u, nkb = (uint)KG / 8u;
  const uint hg = (blk / nkb) * 4u + ln / 8u, kg = (blk % nkb) * 8u + ln % 8u;
  const ulong qrow = qv_off + (ulong)b * qv_bs + (ulong)i * qv_rs;
  const ulong qsrow = qsc_off + (ulong)b * qsc_bs + (ulong)i * qsc_rs;
  /* This item's staging work per chunk: query segment lid (head qh, 16
   * dims at qd; items past TH x SEGK stage none), key segments lid (key
   * kk0, 16 dims at kd0) and, when KSEG is 2, lid + NT (kk1, kd1). Scalars,
   * not arrays indexed by a loop: small arrays stayed in memory with clang
   * 15. (Spreading the query's staging over every item, 4 or 8 values each,
   * ran 12-14 % slower on the H100: docs/PERFORMANCE.md.) */
  const int qst = (int)lid < TH * SEGK, qh = (int)lid / SEGK, qd = ((int)lid - qh * SEGK) * 16;
  const int kk0 = (int)lid / SEGK, kd0 = ((int)lid - kk0 * SEGK) * 16;
  const int kk1 = KSEG > 1 ? ((int)lid + NT) / SEGK : 0;
  const int kd1 = KSEG > 1 ? ((int)lid + NT - kk1 * SEGK) * 16 : 0;
  const int kok0 = kstate[kk0] == IL_KEY_OK, kok1 = KSEG > 1 && kstate[kk1] == IL_KEY_OK;
  /* Items t < TK (lid, and lid + NT when KPI is 2): key t's logit over the
   * head chunks so far. The head-group partials meet per chunk (through
   * red), so no per-key partials stay live in registers across the FMAs (8
   * registers at 8 x 8: NVIDIA's compiler then went past 128, one group an
   * SM). */
  float tot0 = 0.0f, tot1 = 0.0f;

  const int hend = skip ? 0 : H1 ? TH : H;
  for (int hc = 0; hc < hend; hc += TH) {
    /* acc[a][c]: head a, key c of the item (RK up to 16). The zeroing has
     * constant bounds: bounded by RH and RK, clang 15 left the loop of RK =
     * 16 rolled and the accumulators in memory. */
    float acc[8][16];
#pragma unroll
    for (int a = 0; a < 8; a++)
#pragma unroll
      for (int c = 0; c < 16; c++) acc[a][c] = 0.0f;

    const int h = hc + qh, qok = qst && h < H;
    /* Raw bytes of chunk 0, then inside the loop those of the next chunk
     * are loaded before this one's FMAs. */
    uint4 xq = (uint4)(0u), xk0 = (uint4)(0u), xk1 = (uint4)(0u);
    /* PRE: the head chunk's query chunks from pq (row r, head chunk hc /
     * TH: nch chunks of QV4 float4), the keys' chunk c at pk + c * DC *
     * pk_np / 4 + n0 / 4, a dim's TK keys pk_np / 4 float4 apart. */
    float4 pq0 = (float4)(0.0f), pq1 = pq0, pk0 = pq0, pk1 = pq0, pk2 = pq0, pk3 = pq0;
    __global const float4 *pqr = pq + ((ulong)r * (ulong)nhc + (ulong)(hc / TH)) * (ulong)nch * QV4;
    __global const float4 *pqi = pqr + lid;
    const ulong np4 = pk_np / 4;
    __global const float4 *pki =
        pk + (ulong)(n0 / 4) + (lid / (uint)(TK / 4)) * np4 + lid % (uint)(TK / 4);
    if (PRE)
      IL_PRE_LOADQ(0);
    else if (qok && qd < DD)
      xq = il_qraw(IL_NAMES, fp4, qrow, qsrow, h, qd);
    if (PRE != 2) {
      if (kok0 && kd0 < DD) xk0 = il_kraw(kbase, sbase, koff[kk0], ksoff[kk0], sds, kd0, fp4, k_al);
      if (kok1 && kd1 < DD) xk1 = il_kraw(kbase, sbase, koff[kk1], ksoff[kk1], sds, kd1, fp4, k_al);
    }
    /* The head chunk's weights, read by the epilogue: staged while chunk 0's
     * bytes are in flight, ordered by the dims' first barrier (the last
     * epilogue's reads are behind its barriers). */
    if ((int)lid < TH)
      wl[lid] = hc + (int)lid < H ? *(__global const float *)(w + w_off + (ulong)r * w_rs +
                                                               (ulong)(hc + (int)lid) * w_hs)
                                  : 0.0f;

    for (int dc = 0; dc < DD; dc += DC) {
      /* NB 2: chunk c in buffer c % 2, whose last reader (chunk c - 2's
       * products) is behind chunk c - 1's barrier. */
      const int bsel = NB == 2 ? (dc / DC) & 1 : 0;
      __local float *qb = qs + bsel * QSZ, *kb = ks + bsel * KSZ;
      {
        float v[16];
        if (PRE) {
          __local float4 *q4 = (__local float4 *)qb + lid;
          q4[0] = pq0;
          if (QPI > 1) q4[NT] = pq1;
        } else if (qst) {
          il_dec16(xq, fp4, v, 65536.0f);
#pragma unroll
          for (int e = 0; e < 16; e++) qb[(qd + e) * TH + qh] = v[e];
        }
        if (PRE == 2) {
          /* Loaded here, not during the last chunk's products: held across
           * them, 16 more registers gave 141 (three groups an SM, not four;
           * prefill 6594 us against 6171 without RSEP on the H200). */
          IL_PRE_LOADK(dc);
          __local float4 *k4 = (__local float4 *)kb + lid;
          k4[0] = pk0;
          if (KPI4 > 1) k4[NT] = pk1;
          if (KPI4 > 2) k4[2 * NT] = pk2;
          if (KPI4 > 3) k4[3 * NT] = pk3;
        } else {
          il_dec16(xk0, fp4, v, 1.0f);
#pragma unroll
          for (int e = 0; e < 16; e++) kb[(kd0 + e) * TK + kk0] = v[e];
          if (KSEG > 1) {
            il_dec16(xk1, fp4, v, 1.0f);
#pragma unroll
            for (int e = 0; e < 16; e++) kb[(kd1 + e) * TK + kk1] = v[e];
          }
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      {
        const int nd = dc + DC;
        /* (PRE: nothing past the last chunk.) */
        if (PRE) {
          if (nd < DD) IL_PRE_LOADQ(nd);
        } else {
          xq = (uint4)(0u);
          if (qok && nd + qd < DD) xq = il_qraw(IL_NAMES, fp4, qrow, qsrow, h, nd + qd);
        }
        if (PRE != 2) {
          xk0 = (uint4)(0u);
          xk1 = (uint4)(0u);
          if (kok0 && nd + kd0 < DD)
            xk0 = il_kraw(kbase, sbase, koff[kk0], ksoff[kk0], sds, nd + kd0, fp4, k_al);
          if (kok1 && nd + kd1 < DD)
            xk1 = il_kraw(kbase, sbase, koff[kk1], ksoff[kk1], sds, nd + kd1, fp4, k_al);
        }
      }
      __local const float4 *qa = (__local const float4 *)qb + hg;
      __local const float4 *ka = (__local const float4 *)kb + kg;
#pragma unroll
      for (int d = 0; d < DC; d++) {
        /* The heads whole, the keys a float4 at a time (fewer operand
         * registers live: 8 + 4 rather than 8 + 8). */
        float xa[8];
#pragma unroll
        for (int u = 0; u < RH / 4; u++) {
          const float4 x = qa[d * (TH / 4) + u * HG];
          xa[4 * u] = x.x, xa[4 * u + 1] = x.y, xa[4 * u + 2] = x.z, xa[4 * u + 3] = x.w;
        }
#pragma unroll
        for (int u = 0; u < RK / 4; u++) {
          const float4 y = ka[d * (TK / 4) + u * KG];
          const float ya[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
          for (int a = 0; a < RH; a++)
#pragma unroll
            for (int c = 0; c < 4; c++) acc[a][4 * u + c] = fma(xa[a], ya[c], acc[a][4 * u + c]);
        }
      }
      if (NB == 1) barrier(CLK_LOCAL_MEM_FENCE);
    }
    /* red below aliases ks (unless RSEP) */
    if (NB == 2 && !RSEP) barrier(CLK_LOCAL_MEM_FENCE);

    float wv[8];
#pragma unroll
    for (int a = 0; a < RH; a++) wv[a] = wl[(a / 4) * 4 * HG + (int)hg * 4 + a % 4];
    /* red aliases ks: every read of the chunks is behind the dims' last
     * barrier, and the next head chunk stages after the second one here. */
#pragma unroll
    for (int c = 0; c < RK; c++) {
      const int t = (c / 4) * 4 * KG + (int)kg * 4 + c % 4;
      const float s = kscale[t];
      float part = 0.0f;
#pragma unroll
      for (int a = 0; a < RH; a++) part = fma(fmax(acc[a][c] * s, 0.0f), wv[a], part);
      red[hg * TK + t] = part;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    {
      float sum = 0.0f;
      for (int g = 0; g < HG; g++) sum += red[g * TK + (int)lid];
      tot0 += sum;
    }
    if (KPI > 1) {
      float sum = 0.0f;
      for (int g = 0; g < HG; g++) sum += red[g * TK + (int)lid + NT];
      tot1 += sum;
    }
    /* RSEP (NB 2): the next head chunk's red writes are behind its dims'
     * barriers, its chunk-0 staging goes to the buffer whose last reader
     * (chunk nch - 2) is behind chunk nch - 1's barrier, and its weights'
     * staging after every wl read (before the red barrier above). */
    if (!RSEP) barrier(CLK_LOCAL_MEM_FENCE);
  }

  il_store_key(out, o_off, o_rs, r, n0, (int)lid, kstate, ncols, clean, tot0, out_bf16);
  if (KPI > 1)
    il_store_key(out, o_off, o_rs, r, n0, (int)lid + NT, kstate, ncols, clean, tot1, out_bf16);
}

DSA_INLINE_ALWAYS void il_body(IL_PARAMS, __local float *qs, __local float *ks,
                               __local float *red, __local float *wl, __local ulong *koff,
                               __local ulong *ksoff,
                               __local float *kscale, __local int *kstate, const int HG,
                               const int KG, const int RH, const int RK, const int DC,
                               const int NB, const int paged, const int fp4, const int PRE,
                               const int H1, __global const float4 *pq,
                               __global const float4 *pk, const ulong pk_np) {
  const int TK = RK * KG;
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
  il_tile(IL_NAMES, qs, ks, red, wl, koff, ksoff, kscale, kstate, HG, KG, RH, RK, DC, NB, paged,
          fp4, lid, r, n0, b, i, lo, hi, skip, PRE, H1, pq, pk, pk_np);
}

/* Local memory: NB chunks of TH x DC query and TK x DC key values, the
 * head-group partials (HG x TK) in the key chunks' place when they fit, the
 * head chunk's TH weights (src/op_indexer_logits.c, tile_local_bytes,
 * counts the same). */
#define IL_KS_FLOATS(HG, KG, RK, DC)                                                          \
  ((RK) * (KG) * ((DC) > (HG) ? (DC) : (HG)))
#define IL_KERNEL(NAME, ATTR, HG, KG, RH, RK, DC, NB, PAGED, FP4)                             \
  __kernel ATTR void NAME(IL_KARGS) {                                                          \
    __local float4 qs[(NB) * (RH * HG) * DC / 4];                                              \
    __local float4 ks[(NB) * IL_KS_FLOATS(HG, KG, RK, DC) / 4];                                \
    __local float wl[RH * HG];                                                                 \
    __local ulong koff[RK * KG], ksoff[RK * KG];                                               \
    __local float kscale[RK * KG];                                                             \
    __local int kstate[RK * KG];                                                               \
    il_body(IL_FROM_KARGS(PAGED, FP4), (__local float *)qs, (__local float *)ks,               \
            (__local float *)ks, wl, koff, ksoff, kscale, kstate, HG, KG, RH, RK, DC, NB,      \
            PAGED, FP4, 0, 0, 0, 0, 0);                                                        \
  }
/* The wide tile (two chunk buffers) on operands decoded beforehand
 * (il_predecode_q / _k into the queue's scratch): pq the query's chunks,
 * pq + pk_off (float4) the keys' (PRE 2; pk_np floats a dim); FP8 only. */
#define IL_KERNEL_PRE(NAME, PAGED, PRE, H1)                                                   \
  __kernel IL_W_ATTR void NAME(IL_KARGS, __global const float4 *pq, ulong pk_off,              \
                               ulong pk_np) {                                                  \
    __local float4 qs[2 * (IL_W_RH * IL_W_HG) * IL_W_DC / 4];                                  \
    __local float4 ks[2 * IL_KS_FLOATS(IL_W_HG, IL_W_KG, IL_W_RK, IL_W_DC) / 4];               \
    __local float wl[IL_W_RH * IL_W_HG];                                                       \
    __local ulong koff[IL_W_RK * IL_W_KG], ksoff[IL_W_RK * IL_W_KG];                           \
    __local float kscale[IL_W_RK * IL_W_KG];                                                   \
    __local int kstate[IL_W_RK * IL_W_KG];                                                     \
    __local float red[IL_W_HG * IL_W_RK * IL_W_KG];                                            \
    il_body(IL_FROM_KARGS(PAGED, 0), (__local float *)qs, (__local float *)ks, red, wl, koff,  \
            ksoff, kscale, kstate, IL_W_HG, IL_W_KG, IL_W_RH,                                  \
            IL_W_RK, IL_W_DC, 2, PAGED, 0, PRE, H1, pq, pq + pk_off, pk_np);                  \
  }

/* The geometry must tile: NT items in 32-item blocks of 4 head x 8 key
 * groups, NT or 2 NT keys a group (an item locates and stores 1 or 2), 1 or
 * 2 key segments of 16 dims per item and chunk, at most one query
 * segment. */
#define IL_GEOM_BAD(NT, HG, KG, RH, RK, DC)                                                   \
  ((HG) * (KG) != (NT) || (HG) % 4 || (KG) % 8 || ((RH) != 4 && (RH) != 8) ||              \
   ((RK) != 4 && (RK) != 8 && (RK) != 16) || (DC) % 16 ||                                    \
   ((RK) * (KG) != (NT) && (RK) * (KG) != 2 * (NT)) ||                                       \
   ((RK) * (KG) * (DC) / 16 != (NT) && (RK) * (KG) * (DC) / 16 != 2 * (NT)) ||               \
   (RH) * (HG) * (DC) / 16 > (NT))
#if IL_GEOM_BAD(IL_W_NT, IL_W_HG, IL_W_KG, IL_W_RH, IL_W_RK, IL_W_DC) ||                     \
    IL_GEOM_BAD(IL_NT, IL_N_HG, IL_N_KG, IL_N_RH, IL_N_RK, IL_N_DC)
#error "indexer_logits.cl: portable tile geometry does not divide"
#endif

#define IL_W_ATTR __attribute__((reqd_work_group_size(IL_W_NT, 1, 1)))
#define IL_N_ATTR __attribute__((reqd_work_group_size(IL_NT, 1, 1)))
#define IL_WIDE(NAME, NB, PAGED, FP4)                                                         \
  IL_KERNEL(NAME, IL_W_ATTR, IL_W_HG, IL_W_KG, IL_W_RH, IL_W_RK, IL_W_DC, NB, PAGED, FP4)
#define IL_NARROW(NAME, PAGED, FP4)                                                           \
  IL_KERNEL(NAME, IL_N_ATTR, IL_N_HG, IL_N_KG, IL_N_RH, IL_N_RK, IL_N_DC, 1, PAGED, FP4)

/* The wide tile twice: with two chunk buffers (27,904 B at 128 items:
 * every 32 KiB device) and with one (15,616 B, for less). */
IL_WIDE(mqa_logits_h64db, 2, 0, 0)
IL_WIDE(mqa_logits_h64, 1, 0, 0)
IL_NARROW(mqa_logits_h16, 0, 0)
IL_WIDE(paged_mqa_logits_h64db, 2, 1, 0)
IL_WIDE(paged_mqa_logits_h64, 1, 1, 0)
IL_NARROW(paged_mqa_logits_h16, 1, 0)
IL_WIDE(mqa_logits_mxfp4_h64db, 2, 0, 1)
IL_WIDE(mqa_logits_mxfp4_h64, 1, 0, 1)
IL_NARROW(mqa_logits_mxfp4_h16, 0, 1)
IL_WIDE(paged_mqa_logits_mxfp4_h64db, 2, 1, 1)
IL_WIDE(paged_mqa_logits_mxfp4_h64, 1, 1, 1)
IL_NARROW(paged_mqa_logits_mxfp4_h16, 1, 1)

#if IL_W_RH * IL_W_HG * IL_W_DC / 4 > 2 * IL_W_NT || IL_W_RK * IL_W_KG * IL_W_DC / 4 > 4 * IL_W_NT || \
    (IL_W_RH * IL_W_HG * IL_W_DC / 4) % IL_W_NT || (IL_W_RK * IL_W_KG * IL_W_DC / 4) % IL_W_NT || \
    (IL_W_RH * IL_W_HG) % 64 || (IL_W_RK * IL_W_KG) % 64
#error "indexer_logits.cl: the predecoded chunks are not 1-2 (query) and 1-4 (keys) float4 an item, or TH, TK not multiples of the predecode's 64-item groups"
#endif

/* Prefill: the keys decoded once for all query rows (each key chunk is
 * otherwise decoded again by every row's group), the query once for all
 * key tiles; paged: the query (its keys serve one row). The wide tile's
 * staging is then float4 copies (H200, forced portable: docs/PERFORMANCE.md,
 * "Portable logits, round 4"). */
IL_KERNEL_PRE(mqa_logits_h64pre, 0, 2, 0)
IL_KERNEL_PRE(mqa_logits_h64pre1, 0, 2, 1)
IL_KERNEL_PRE(paged_mqa_logits_h64pre, 1, 1, 0)
IL_KERNEL_PRE(paged_mqa_logits_h64pre1, 1, 1, 1)

/* pq: query row r (= b next_n + i), head h, dim d at float
 *   ((r nhc + h / TH) nch + d / DC) TH DC + (d % DC) TH + h % TH
 * times 2^8 (with the keys' 2^-8, products and sums are the unscaled ones,
 * as il_dec16's staging), zeros for h >= H: the wide tile's chunks in
 * order. One work-item a (head of a chunk, 16 dims, sequence); consecutive
 * items take consecutive heads, so each dim's stores are contiguous. */
__kernel void il_predecode_q(DSA_CTENSOR4(q), int H, int D, int next_n, __global float *pq) {
  const int TH = IL_W_RH * IL_W_HG, DC = IL_W_DC, SEGC = DC / 16;
  const int nhc = (H + TH - 1) / TH, nch = (D + DC - 1) / DC;
  /* Grid (TH, D / 16, B): head hh of every head chunk, an item's next_n
   * rows and head chunks in loops; no quotient and remainder of a variable
   * pair (LLVM's freeze, which Oclgrind 21.10's --uninitialized cannot
   * run), the segment's chunk by a constant (DC 16: itself). */
  const int hh = (int)get_global_id(0), s = (int)get_global_id(1);
  const uint b = (uint)get_global_id(2);
  const int c = s / SEGC, d0 = (s - c * SEGC) * 16;
  for (int i = 0; i < next_n; i++) {
    const ulong r = (ulong)b * (ulong)next_n + (ulong)i;
    for (int hc = 0; hc < nhc; hc++) {
      const int h = hc * TH + hh;
      uint4 x = (uint4)(0u);
      if (h < H) {
        __global const uchar *p = q_mem + q_off + (ulong)b * q_s0 + (ulong)i * q_s1 +
                                  (ulong)h * q_s2 + (ulong)(16 * s);
        x = il_raw16(p, p, 0, q_al >= 16u);
      }
      float v[16];
      il_dec16(x, 0, v, 65536.0f);
      __global float *o = pq + ((r * (ulong)nhc + (ulong)hc) * (ulong)nch + (ulong)c) *
                                   (ulong)(TH * DC) + (ulong)(d0 * TH + hh);
#pragma unroll
      for (int e = 0; e < 16; e++) o[e * TH] = v[e];
    }
  }
}

/* pk (pk_off floats into pk_mem): key n, dim d at float d np + n (x 2^-8,
 * as il_dec16 stages keys), zeros for n >= N up to np (a whole number of
 * tiles). One work-item a (key, 16 dims). */
__kernel void il_predecode_k(DSA_CTENSOR2(kv), int N, ulong np, __global float *pk_mem,
                             ulong pk_off) {
  __global float *pk = pk_mem + pk_off;
  /* Grid (np, D / 16). */
  const ulong n = get_global_id(0);
  const int s = (int)get_global_id(1);
  uint4 x = (uint4)(0u);
  if (n < (ulong)N) {
    __global const uchar *p = kv_mem + kv_off + n * kv_s0 + (ulong)(16 * s);
    x = il_raw16(p, p, 0, kv_al >= 16u);
  }
  float v[16];
  il_dec16(x, 0, v, 1.0f);
#pragma unroll
  for (int e = 0; e < 16; e++) pk[(ulong)(16 * s + e) * np + n] = v[e];
}


/* ---- Tile kernels (cl/dsa_tile.h): one body for every matrix back-end ------
 * D = 128, H <= 128, FP8 and MXFP4, ragged and paged.
 *
 * A work-group takes a row group: tq query tokens (tq = TL_RMAX / HP, HP = H
 * rounded up to 16; paged: tokens of one sequence, so every next_n token
 * shares each key tile) and a tile of TL_SUB x TL_KT keys. The scores are
 * one matrix product per sub-tile: A = the tokens' queries, row t * HP + h
 * (heads padded with zeros), B = the sub-tile's keys, both staged in local
 * memory as bf16 (e4m3 and e2m1 x ue8m0 values are exact in bf16) at
 * TL_PITCH words per row of 128 dims. The group's units (warps, sub-groups,
 * waves, or single work-items: cl/dsa_tile.h) split the atoms: unit u takes
 * row blocks ur + TL_UR j (j < TL_MBU) and key blocks uk + TL_UK jj; when
 * the back-end allows (DSA_TILE_A_REGS) the A fragments stay in registers
 * for the whole group, staged once through the key buffer, else A keeps its
 * own local buffer. Where the back-end multiplies f16 (DSA_TILE_HAS_F16:
 * NVIDIA), FP8 operands are staged as f16 pairs scaled by 2^-8 (a shift,
 * dsa_e4m3x2_to_f16x2_scaled) and the epilogue multiplies 2^16 back in. A
 * unit runs TL_KP key blocks per pass against its TL_MBU row blocks. Per atom the epilogue applies k_scale, ReLU and the
 * weights and sums the column over the atom's rows (all of one token: HP is
 * a multiple of M); per-row-block partials meet in local memory, and the
 * token's logit is their sum over its HP / M row blocks.
 *
 * Host constants (src/op_indexer_logits.c): TL_NT work-items, TL_SUB
 * sub-tiles per group, TL_PITCH words per staged row; TL_KT_REGS /
 * TL_RMAX_REGS keys per sub-tile and rows per group for back-ends that keep
 * A in registers, TL_KT_LOCAL / TL_RMAX_LOCAL for the portable one (A in
 * local memory: both buffers within 32 KiB). */
#include "dsa_tile.h"

/* Two geometries (flavours) of the same body: 1, groups of TL_NT items over
 * at most TL_RMAX1 rows (one token of up to 64 heads: paged next_n = 1),
 * and 2, TL_NT2 items over TL_RMAX2 rows (several tokens share each key
 * tile). The portable back-end (A in local memory) has one geometry. */
#if DSA_TILE_A_REGS
#define TL_KT TL_KT_REGS
#define TL_NT1 TL_NT
#define TL_RMAX1 TL_RMAX1_REGS
#define TL_RMAX2 TL_RMAX_REGS
#else
#define TL_KT TL_KT_LOCAL
#define TL_NT1 TL_NT
#define TL_RMAX1 TL_RMAX_LOCAL
#undef TL_NT2
#define TL_NT2 TL_NT
#define TL_RMAX2 TL_RMAX_LOCAL
#endif
#define TL_U_OF(nt) ((nt) / DSA_TILE_LANES)               /* units per group */
#define TL_RB_OF(r) ((r) / DSA_TILE_M)                    /* row blocks, at most */
#define TL_MBU_OF(nt, r) (TL_RB_OF(r) > TL_U_OF(nt) ? TL_RB_OF(r) / TL_U_OF(nt) : 1)
#define TL_MAX(a, b) ((a) > (b) ? (a) : (b))
#define TL_MBU_MAX TL_MAX(TL_MBU_OF(TL_NT1, TL_RMAX1), TL_MBU_OF(TL_NT2, TL_RMAX2))
#define TL_SEGS_MAX (TL_KT * 8 / (TL_NT1 < TL_NT2 ? TL_NT1 : TL_NT2)) /* key loads per item */
#define TL_QMAX_MAX (TL_MAX(TL_RMAX1, TL_RMAX2) / 16)     /* tokens per group, at most */
#define TL_NB (TL_KT / DSA_TILE_N)                        /* key blocks per sub-tile */
#define TL_KS (128 / DSA_TILE_K)                          /* k-steps over D = 128 */
#define TL_BAD(nt, r)                                                                      \
  ((nt) % DSA_TILE_LANES || (TL_RB_OF(r) > TL_U_OF(nt) && TL_RB_OF(r) % TL_U_OF(nt)) ||   \
   (r) % TL_KT || TL_KT * 8 % (nt))
#if TL_BAD(TL_NT1, TL_RMAX1) || TL_BAD(TL_NT2, TL_RMAX2)
#error "indexer_logits.cl: tile geometry does not divide"
#endif

/* bf16 bits of an e4m3 byte's value (NaN codes as +-480, like il_dec16). */
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

/* Sixteen values of a row (a segment of 16 dims) as 8 bf16-pair words in
 * local memory, from their raw bytes x: 16 e4m3 bytes, or (fp4) 8 bytes of
 * e2m1 in x.xy and the block's ue8m0 scale byte in x.z. Zeros decode to
 * zeros (absent rows are staged from x = 0). */
DSA_INLINE void tl_stage_words(__local uint *dst, const uint4 x, const int fp4, const int h16) {
  uint4 lo, hi;
  if (h16) {
    /* f16 pairs scaled by 2^-8 (DSA_TILE_HAS_F16: a few integer operations
     * a pair instead of the bf16 path's per-value decode). */
    lo = (uint4)(dsa_e4m3x2_to_f16x2_scaled(x.x), dsa_e4m3x2_to_f16x2_scaled_hi(x.x),
                 dsa_e4m3x2_to_f16x2_scaled(x.y), dsa_e4m3x2_to_f16x2_scaled_hi(x.y));
    hi = (uint4)(dsa_e4m3x2_to_f16x2_scaled(x.z), dsa_e4m3x2_to_f16x2_scaled_hi(x.z),
                 dsa_e4m3x2_to_f16x2_scaled(x.w), dsa_e4m3x2_to_f16x2_scaled_hi(x.w));
  } else if (!fp4) {
    lo = (uint4)(il_bf16x2_of_e4m3x2(x.x), il_bf16x2_of_e4m3x2(x.x >> 16),
                 il_bf16x2_of_e4m3x2(x.y), il_bf16x2_of_e4m3x2(x.y >> 16));
    hi = (uint4)(il_bf16x2_of_e4m3x2(x.z), il_bf16x2_of_e4m3x2(x.z >> 16),
                 il_bf16x2_of_e4m3x2(x.w), il_bf16x2_of_e4m3x2(x.w >> 16));
  } else {
    /* e2m1 x 2^(s - 127): exact in f32 and in bf16 (truncation keeps it). */
    const float sc = dsa_ue8m0_to_f32(x.z);
    const uint w[2] = {x.x, x.y};
    uint o[8];
#pragma unroll
    for (int e = 0; e < 8; e++) {
      const uint nb = w[e >> 2] >> (8 * (e & 3));
      const float a = dsa_e2m1_to_f32(nb & 0xFu) * sc, b = dsa_e2m1_to_f32((nb >> 4) & 0xFu) * sc;
      o[e] = (as_uint(a) >> 16) | (as_uint(b) & 0xFFFF0000u);
    }
    lo = (uint4)(o[0], o[1], o[2], o[3]);
    hi = (uint4)(o[4], o[5], o[6], o[7]);
  }
  ((__local uint4 *)dst)[0] = lo;
  ((__local uint4 *)dst)[1] = hi;
}

/* Stages query rows [first, first + n) of the group (row t * HP + h) at
 * dst (TL_PITCH words per row): bf16, or f16 pairs (h16). */
DSA_INLINE void tl_stage_q(IL_PARAMS, __local uint *dst, const int first, const int n,
                           const int HP, const int nq, const uint r_base, const int fp4,
                           const int h16, const uint lid, const int NT) {
  for (int idx = (int)lid; idx < n * 8; idx += NT) {
    const int rr = idx >> 3, seg = idx & 7, row = first + rr;
    const int t = row / HP, h = row - t * HP;
    const int ok = t < nq && h < H;
    const uint r = r_base + (uint)(ok ? t : 0);
    const uint b = r / (uint)next_n, i = r - b * (uint)next_n;
    const ulong qrow = qv_off + (ulong)b * qv_bs + (ulong)i * qv_rs + (ulong)(ok ? h : 0) * qv_hs;
    const ulong qsrow = qsc_off + (ulong)b * qsc_bs + (ulong)i * qsc_rs +
                        (ulong)(ok ? h : 0) * qsc_hs + (ulong)(seg >> 1) * qsc_ds;
    uint4 x = (uint4)(0u);
    if (ok) {
      __global const uchar *p = qv + qrow + (ulong)(fp4 ? seg * 8 : seg * 16);
      if (!fp4) {
        x = dsa_load16(p, q_al);
      } else {
        const uint2 y = dsa_load8(p, q_al);
        x = (uint4)(y.x, y.y, qsc[qsrow], 0u);
      }
    }
    tl_stage_words(dst + rr * TL_PITCH + seg * 8, x, fp4, h16);
  }
}

DSA_INLINE_ALWAYS void tl_body(IL_PARAMS, const int tq, const int nrows, __local uint *stg,
                        __local uint *qst, __local float *red, __local ulong *koff,
                        __local ulong *ksoff, __local float *kscale, __local int *kstate,
                        __local int *tlo, __local int *thi, const int paged, const int fp4,
                        const int NT, const int RMAX) {
  /* The flavour's geometry: literals at each kernel's call, so after
   * inlining every bound below is a constant and the arrays sized for the
   * larger flavour shrink to what this one uses. */
  const int TU = NT / DSA_TILE_LANES, TRB = RMAX / DSA_TILE_M;
  const int TMBU = TRB > TU ? TRB / TU : 1, TQMAX = RMAX / 16, TSEGS = TL_KT * 8 / NT;
  const uint lid = get_local_id(0), unit = lid / DSA_TILE_LANES;
  const uint g = get_group_id(0), grow = g / (uint)ntiles;
  const uint rg = row0 + grow;
  const int n0 = (tile0 + (int)(g - grow * (uint)ntiles)) * (TL_KT * TL_SUB);
  const int HP = (H + 15) & ~15;

  /* The group's tokens: rows r_base .. r_base + nq - 1. */
  uint r_base;
  int nq;
  if (paged) {
    const int chunks = (next_n + tq - 1) / tq;
    const uint b = rg / (uint)chunks;
    const int i0 = (int)(rg - b * (uint)chunks) * tq;
    r_base = b * (uint)next_n + (uint)i0;
    nq = min(tq, next_n - i0);
  } else {
    r_base = rg * (uint)tq;
    nq = min(tq, nrows - (int)r_base);
  }
  const int nmb = nq * HP / DSA_TILE_M;
  /* Units: ur along the row blocks (rb = ur + UR j), uk along the key
   * blocks (kb = uk + UK jj); with fewer row blocks than units, several
   * units share a row block and split its keys. Units past UR x UK idle. */
  const int UR = clamp((nmb + TMBU - 1) / TMBU, 1, TU), UK = TU / UR;
  const int ur = (int)unit % UR, uk = (int)unit / UR;
  /* FP8 operands as f16 pairs where the back-end multiplies f16 (exact:
   * e4m3 values are f16 values; 2^-8-scaled by the shift that converts). */
  const int h16 = DSA_TILE_HAS_F16 && !fp4;
  const uint bseq = r_base / (uint)next_n; /* paged: the tokens' sequence */

  if ((int)lid < TQMAX) {
    int lo = 0, hi = 0;
    if ((int)lid < nq) {
      const uint r = r_base + lid, b = r / (uint)next_n, i = r - b * (uint)next_n;
      const int bad = il_row_range(lim, lim_off, lim_s0, lim_s1, lim2, lim2_off, lim2_s0,
                                   ctx_rank, paged, b, i, next_n, ncols, W, bs, &lo, &hi);
      if (bad && n0 == 0) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
    }
    tlo[lid] = lo;
    thi[lid] = hi;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  int lo = INT_MAX, hi = INT_MIN;
  for (int t = 0; t < nq; t++)
    if (tlo[t] < thi[t]) lo = min(lo, tlo[t]), hi = max(hi, thi[t]);
  /* No valid key in the tile: every barrier still runs, loops have no trips
   * (PoCL, see the file's head). */
  const int skip = n0 >= hi || n0 + TL_KT * TL_SUB <= lo;

  /* Weights of this lane's accumulator rows. */
  float wv[TL_MBU_MAX][DSA_TILE_CE];
#pragma unroll
  for (int j = 0; j < TMBU; j++) {
    const int rb = uk < UK ? ur + UR * j : nmb;
#pragma unroll
    for (int e = 0; e < DSA_TILE_CE; e++) {
      const int row = rb * DSA_TILE_M + (int)dsa_tile_row(e);
      const int t = row / HP, h = row - t * HP;
      wv[j][e] = !skip && rb < nmb && h < H
                     ? *(__global const float *)(w + w_off + (ulong)(r_base + (uint)t) * w_rs +
                                                 (ulong)h * w_hs)
                     : 0.0f;
    }
  }

#if DSA_TILE_A_REGS
  /* The query fragments, staged in pieces through the key buffer. */
  dsa_tile_a qa[TL_MBU_MAX][TL_KS];
  for (int pc = 0; pc < RMAX / TL_KT; pc++) {
    const int rows = skip ? 0 : clamp(nq * HP - pc * TL_KT, 0, TL_KT);
    tl_stage_q(IL_NAMES, stg, pc * TL_KT, rows, HP, nq, r_base, fp4, h16, lid, NT);
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int j = 0; j < TMBU; j++) {
      const int rb0 = (ur + UR * j) * DSA_TILE_M - pc * TL_KT;
      if (rb0 >= 0 && rb0 < rows) {
#pragma unroll
        for (int ks = 0; ks < TL_KS; ks++)
          qa[j][ks] = dsa_tile_load_a(stg + rb0 * TL_PITCH + ks * (DSA_TILE_K / 2), TL_PITCH);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#else
  tl_stage_q(IL_NAMES, qst, 0, skip ? 0 : nq * HP, HP, nq, r_base, fp4, 0, lid, NT);
#endif

  __global const uchar *kbase = paged ? cache : kv;
  __global const uchar *sbase = paged ? cache : ksc;
  const ulong sds = paged ? 1ul : ksc_ds;
  for (int sub = 0; sub < TL_SUB; sub++) {
    const int k0 = n0 + sub * TL_KT;
    const int sub_skip = skip || k0 >= hi || k0 + TL_KT <= lo;
    if ((int)lid < TL_KT) {
      const int t = (int)lid, j = k0 + t;
      int st = !sub_skip && j >= lo && j < hi ? IL_KEY_OK : IL_KEY_OUT;
      ulong ko = 0, so = 0;
      float sc = 1.0f;
      if (st == IL_KEY_OK) st = il_locate_key(IL_NAMES, paged, fp4, bseq, j, &ko, &so, &sc);
      koff[t] = ko;
      ksoff[t] = so;
      kscale[t] = sc;
      kstate[t] = st;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* TL_KT keys x 8 segments of 16 dims: every load of the item first
     * (memory-level parallelism), then the conversions and stores. */
    {
      uint4 x[TL_SEGS_MAX];
#pragma unroll
      for (int u = 0; u < TSEGS; u++) {
        const int idx = (int)lid + NT * u, kk = idx >> 3, seg = idx & 7;
        const int ok = !sub_skip && kstate[kk] == IL_KEY_OK;
        __global const uchar *kp = kbase + koff[kk] + (ulong)(fp4 ? seg * 8 : seg * 16);
        x[u] = (uint4)(0u);
        if (ok) {
          if (!fp4) {
            x[u] = dsa_load16(kp, k_al);
          } else {
            const uint2 y = dsa_load8(kp, k_al);
            x[u] = (uint4)(y.x, y.y, *(sbase + ksoff[kk] + (ulong)(seg >> 1) * sds), 0u);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < TSEGS; u++) {
        const int idx = (int)lid + NT * u, kk = idx >> 3, seg = idx & 7;
        tl_stage_words(stg + kk * TL_PITCH + seg * 8, x[u], fp4, h16);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* Unit (ur, uk): key blocks kb = uk + UK jj, each against its row
     * blocks rb = ur + UR j, TL_KP key blocks per pass: every B fragment
     * feeds TL_MBU atoms, and TL_KP x TL_MBU independent accumulations keep
     * the matrix unit busy while the next loads are in flight. */
    for (int kb0 = uk; kb0 < (sub_skip || uk >= UK ? 0 : TL_NB); kb0 += UK * TL_KP) {
      dsa_tile_c c[TL_KP][TL_MBU_MAX];
#pragma unroll
      for (int q = 0; q < TL_KP; q++)
#pragma unroll
        for (int j = 0; j < TMBU; j++) c[q][j] = dsa_tile_zero();
#pragma unroll
      for (int ks = 0; ks < TL_KS; ks++) {
#pragma unroll
        for (int q = 0; q < TL_KP; q++) {
          const int kb = kb0 + UK * q;
          if (kb >= TL_NB) continue; /* uniform in the unit */
          const dsa_tile_b b = dsa_tile_load_b(
              stg + kb * DSA_TILE_N * TL_PITCH + ks * (DSA_TILE_K / 2), TL_PITCH);
#pragma unroll
          for (int j = 0; j < TMBU; j++) {
            const int rb = ur + UR * j;
            if (rb >= nmb) continue; /* uniform in the unit */
#if DSA_TILE_A_REGS
            const dsa_tile_a a = qa[j][ks];
#else
            const dsa_tile_a a = dsa_tile_load_a(
                qst + rb * DSA_TILE_M * TL_PITCH + ks * (DSA_TILE_K / 2), TL_PITCH);
#endif
#if DSA_TILE_HAS_F16
            if (h16)
              c[q][j] = dsa_tile_mma_h(c[q][j], a, b);
            else
#endif
              c[q][j] = dsa_tile_mma(c[q][j], a, b);
          }
        }
      }
      /* Epilogue per atom: k_scale (f16: 2^16 first, exact, undoing the
       * operands' 2^-8), ReLU, weights, the column summed over the atom's
       * rows; partials meet in red. */
      const float unscale = h16 ? 0x1p16f : 1.0f;
#pragma unroll
      for (int q = 0; q < TL_KP; q++) {
        const int kb = kb0 + UK * q;
        if (kb >= TL_NB) continue; /* uniform in the unit */
#pragma unroll
        for (int j = 0; j < TMBU; j++) {
          const int rb = ur + UR * j;
          if (rb >= nmb) continue; /* uniform in the unit */
          float p[DSA_TILE_CCOLS];
#pragma unroll
          for (int s = 0; s < DSA_TILE_CCOLS; s++) p[s] = 0.0f;
#pragma unroll
          for (int e = 0; e < DSA_TILE_CE; e++) {
            const float ksc_e = kscale[kb * DSA_TILE_N + (int)dsa_tile_col(e)];
            p[dsa_tile_slot(e)] += fmax(c[q][j].v[e] * unscale * ksc_e, 0.0f) * wv[j][e];
          }
#pragma unroll
          for (int s = 0; s < DSA_TILE_CCOLS; s++) {
            const float v = dsa_tile_col_sum(p[s]);
            if (dsa_tile_col_leader())
              red[rb * TL_KT + kb * DSA_TILE_N + (int)dsa_tile_slot_col(s)] = v;
          }
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const int per = HP / DSA_TILE_M;
    for (int idx = (int)lid; idx < nq * TL_KT; idx += NT) {
      const int t = idx / TL_KT, kk = idx - t * TL_KT, col = k0 + kk;
      float sum = 0.0f;
      for (int rb = t * per; rb < (t + 1) * per; rb++) sum += red[rb * TL_KT + kk];
      const int st = col >= tlo[t] && col < thi[t] ? kstate[kk] : IL_KEY_OUT;
      if (col < ncols && (st != IL_KEY_OUT || clean))
        il_store(out, o_off, o_rs, r_base + (uint)t, col, st == IL_KEY_OK ? sum : -INFINITY,
                 out_bf16);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* NAME (flavour 2) and NAME##1 (flavour 1). */
#define IL_TILE_KERNEL1(NAME, PAGED, FP4, NT, RMAX)                                          \
  __kernel __attribute__((reqd_work_group_size(NT, 1, 1))) DSA_TILE_KERNEL void NAME(          \
      IL_KARGS, int tq, int nrows) {                                                           \
    __local uint4 stg[TL_KT * TL_PITCH / 4];                                                   \
    __local uint4 qst[DSA_TILE_A_REGS ? 1 : (RMAX) * TL_PITCH / 4];                            \
    __local float red[TL_RB_OF(RMAX) * TL_KT];                                                 \
    __local ulong koff[TL_KT], ksoff[TL_KT];                                                   \
    __local float kscale[TL_KT];                                                               \
    __local int kstate[TL_KT], tlo[(RMAX) / 16], thi[(RMAX) / 16];                             \
    tl_body(IL_FROM_KARGS(PAGED, FP4), tq, nrows, (__local uint *)stg, (__local uint *)qst,    \
            red, koff, ksoff, kscale, kstate, tlo, thi, PAGED, FP4, NT, RMAX);                 \
  }
/* The portable back-end has one geometry: no second kernel (two identical
 * ones also confuse Oclgrind, which then counts both kernels' local memory
 * for one of them). */
#if DSA_TILE_A_REGS
#define IL_TILE_KERNEL(NAME, PAGED, FP4)                                                      \
  IL_TILE_KERNEL1(NAME, PAGED, FP4, TL_NT2, TL_RMAX2)                                         \
  IL_TILE_KERNEL1(NAME##1, PAGED, FP4, TL_NT1, TL_RMAX1)
#else
#define IL_TILE_KERNEL(NAME, PAGED, FP4) IL_TILE_KERNEL1(NAME, PAGED, FP4, TL_NT2, TL_RMAX2)
#endif

IL_TILE_KERNEL(mqa_logits_tile, 0, 0)
IL_TILE_KERNEL(paged_mqa_logits_tile, 1, 0)
IL_TILE_KERNEL(mqa_logits_mxfp4_tile, 0, 1)
IL_TILE_KERNEL(paged_mqa_logits_mxfp4_tile, 1, 1)

/* ---- Keys as the M dimension (FP8 paged and ragged, every matrix back-end) --
 * Variant "keys" (src/op_indexer_logits.c): one body over cl/dsa_tile.h's
 * keys maps (DSA_TILE_HAS_KP: NVIDIA mma.sync, Intel DPAS SIMD16 / SIMD8,
 * AMD MFMA wave64 / WMMA wave32, native or emulated on Intel sub-groups;
 * not the portable back-end, see refuse_keys). The text below says what
 * each step is on NVIDIA (M 16, N 8, warps of 32); the geometry follows
 * the back-end's M, N and lanes: m-tiles of M keys, KM_COLS / N n-tiles a
 * unit, the maps' rows, loads and row sums (dsa_tile.h says which lane
 * holds what on each).
 *
 * The score tile is computed transposed: A = keys (16 x 16 dims per
 * mma.m16n8k16), B = the queries (16 dims x 8 heads). Then
 *   - each lane's accumulators are 2 keys x 2 heads per n-tile, so ReLU,
 *     k_scale and the weights and the sum over the warp's heads happen in
 *     the lane (across n-tiles) and in two quad shuffles
 *     (dsa_tile_row_sum; DPAS: a sum over the sub-group, C columns being
 *     lanes; MFMA/WMMA: over the 16 lanes of a row group): no per-key
 *     reduction of row blocks through local memory;
 *   - the A fragments come straight from global memory into registers, no
 *     staging or barrier: the dims are taken in a permuted order such that
 *     a lane's A values are contiguous bytes of the key row. Lane (g, t)
 *     (g = lane / 4, t = lane % 4) holds, at k-step s of a 64-dim chunk c,
 *     logical dims {2t, 2t + 1, 2t + 8, 2t + 9} (the PTX fragment map);
 *     those are physical dims 64c + 16t + 4s + {0, 1, 2, 3}. So one 16-byte
 *     load of key row g (and one of row g + 8) per chunk feeds 4 k-steps,
 *     and the same map on B (b0: dims 2t, 2t + 1; b1: 2t + 8, 2t + 9 of
 *     column g) reads the query row at the same physical bytes. A dot
 *     product does not care in which order the dims come.
 *   - the loads of a warp's next 16-key chunk are issued before the MMAs of
 *     this one (software pipelining in registers). A cp.async ring of key
 *     slots in local memory (cl/dsa_async.h) was measured 3-8 % slower in
 *     every geometry tried (docs/PERFORMANCE.md, round 3): with the keys
 *     read from L1 instead of memory the kernel is only 3 % faster, so the
 *     key stream's latency is not what bounds it.
 * e4m3 -> f16 is the shift of dsa_e4m3x2_to_f16x2_scaled (x 2^-8 on both
 * operands, 2^16 back in the epilogue, exact).
 *
 * A group: KM_NT work-items (KM_NT / LANES units), tq tokens of one sequence
 * (ragged prefill: tq consecutive query rows, each masked to its own key
 * range [ks, ke); the group's keys are located once for all of them) and
 * KM_KPG keys. Columns (token t, head h) are t * HP + h, HP = H rounded
 * up to KM_COLS (64); warp w takes column slice cs = w % NS (NS = tq
 * HP / KM_COLS slices of KM_NTW = KM_COLS / N n-tiles, 16 KM_NTW registers
 * of B fragments) and key chunks kslc + NKS i (NKS = warps / NS). With 64
 * columns (the default) a warp holds all 64 heads of a token and no two warps load
 * the same key row: only next_n = 2 shares a chunk, one warp per token.
 * Per key and slice a partial sum goes to local memory; after the loop's
 * end (the one barrier after the set-up), a token's logit is the sum of
 * its HP / KM_COLS slices.
 *
 * Measured (H200, docs/PERFORMANCE.md): B = 64 next_n = 1 332 -> 231 us
 * against the tile kernel with B in registers (236 registers, 8 warps an
 * SM); -> 175 us with B in local memory (KM_QL, 121 registers, 16 warps);
 * -> 145 us with the set-up's block-table reads batched (KM_BTP), the prmt
 * e4m3 -> f16 and the folded epilogue.
 * More chunks in flight a warp (KM_PF 2, 3), L2 prefetches and e4m3
 * mma.m16n8k32 (2.1x slower on sm_90; removed, docs/PERFORMANCE.md) did not
 * help, nor the keys through the hardware's e4m3 converter with the NaN
 * codes sent to this integer form (H100/H200: at most 1 % on next_n = 1,
 * slower elsewhere; branch nvcvt, docs/PERFORMANCE.md). */
#if DSA_TILE_HAS_KP
#define KM_W (KM_NT / DSA_TILE_LANES)  /* units (warps) per group */
#define KM_CH (DSA_TILE_M * KM_MT)     /* keys per chunk */
#define KM_NCH (KM_KPG / KM_CH)        /* chunks per group */
#define KM_NTW (KM_COLS / DSA_TILE_N)  /* n-tiles per unit */
#define KM_KS (128 / DSA_TILE_K)       /* k-steps over D = 128 */
/* Row slot h's offset from slot 0 in the m-tile (NVIDIA: 8 h). */
#define KM_DR(h) ((int)(dsa_tile_rslot_row(h) - dsa_tile_rslot_row(0)))
#define KM_BG (DSA_TILE_KP_BNLD / DSA_TILE_KP_BGL) /* B load groups */
#define KM_BKS (KM_KS / KM_BG)                      /* k-steps a B load group */

#if KM_NT % DSA_TILE_LANES || KM_KPG % KM_CH || KM_COLS % DSA_TILE_N || (KM_W & (KM_W - 1))
#error "indexer_logits.cl: keys geometry does not divide"
#endif
/* The B fragments in local memory hold each f16 element once (qf's size,
 * km_local_bytes on the host), and a lane's weights are one pair of
 * columns at most (wf). */
#if DSA_TILE_BW * DSA_TILE_B_SLOTS * 2 != DSA_TILE_N * DSA_TILE_K || DSA_TILE_BW % 2 ||        \
    DSA_TILE_CCOLS > 2 || DSA_TILE_N % 2
#error "indexer_logits.cl: the tile back-end's keys maps do not fit the kernel"
#endif
/* KM_QL 1: the B fragments (f16, fragment order) and the weights live in
 * local memory instead of registers (236 -> 121 registers a lane: 16 warps
 * an SM instead of 8), one token's slice per warp (KM_NTW 8), each lane's
 * logits stored straight from the loop. KM_PF: chunks whose loads are in
 * flight ahead of the MMAs (1: the next one; 2 and 3 measured slower). */
#if KM_QL && KM_COLS != 64
#error "indexer_logits.cl: KM_QL needs KM_COLS 64"
#endif
/* Tokens a warp (km_body's tpw, a literal per kernel; 2 needs KM_QL): 2
 * lets one warp take both tokens of a group against each key chunk, its A
 * fragments (keys) loaded from memory and converted once for both. H200,
 * 2 tokens a group: prefill M = 2048 1001 -> 913 us, paged next_n = 2
 * 274 -> 251 us; at next_n = 1 (one token) the kernel built for 2 was 4 %
 * slower, so those keep 1 (docs/PERFORMANCE.md, pre5). */
#if KM_PF < 1
#error "indexer_logits.cl: KM_PF >= 1"
#endif
/* KM_FOLD 1: the epilogue sums ReLU(acc) w over the lane's heads and
 * multiplies the row's sum by its k_scale once, instead of each product
 * (one multiply an accumulator fewer: 32 a 16-key chunk and token on
 * NVIDIA). ReLU(acc s) = s ReLU(acc) for s > 0, and with s a power of two
 * (the quantizers' scales) in the normal range every rounding scales with
 * it, so the logits keep their bits; other positive scales round once
 * differently (SPEC-reference §6.1: any order). A lane whose rows' scales
 * are not all positive normal floats (zero, negative, NaN, infinite,
 * subnormal: only a foreign cache has them) multiplies its accumulators
 * by the scales first (a branch of its own, not taken with sane caches),
 * which is the per-product form, the spec's formula as written. */
#ifndef KM_FOLD
#define KM_FOLD 1
#endif
#ifndef KM_BTP
#define KM_BTP 1
#endif
/* The uint2 index of (token tk, n-tile nt, k-step ks, word pair w2, slot)
 * in the B fragments' local copy. */
#define KM_QF(tk, nt, ks, w2, slot)                                                          \
  (((((tk) * KM_NTW + (nt)) * KM_KS + (ks)) * (DSA_TILE_BW / 2) + (w2)) * DSA_TILE_B_SLOTS +   \
   (slot))
/* KM_RR (paged, not ll; needs KM_BTP): the set-up without the row ranges'
 * barrier. Every work-item reads its group's row ranges itself (nq <= 2
 * words a group, broadcast reads), so its block-table entries (read before
 * the ranges are known: every key of the tile below ncols and W blocks, a
 * superset of those in range) and then the scales of the valid blocks are
 * in flight with the ranges and the queries; the ranges mask afterwards.
 * The set-up had four dependent steps before the loop's first key load
 * (ranges, barrier, entries, scales); now two (entries, scales). H100,
 * plog8 (docs/PERFORMANCE.md): B = 8 next_n = 1 26.0 -> 25.6 us, next_n =
 * 2 40.6 -> 39.9, B = 64 unchanged. */
#ifndef KM_RR
#define KM_RR 1
#endif
#if KM_RR && !KM_BTP
#error "indexer_logits.cl: KM_RR needs KM_BTP"
#endif
/* KM_LL: the kernel kinds whose km_body has ll (each lane locates its own
 * keys, below; needs KM_QL, KM_MT 1, KM_PF 1): 1 paged one token a warp
 * (_keys, _keys2), 2 paged two (_t2), 4 ragged (mqa_logits_keys*). H100,
 * plog4: ragged prefill M = 2048 885.7 -> 865.9 us; paged next_n = 1 147.3
 * -> 157.3 and next_n = 2 246.7 -> 251.8 (the block-table stage costs more
 * in the loop than the set-up it removes), so ragged only. */
#define KM_LL_OK (KM_QL && KM_MT == 1 && KM_PF == 1 && DSA_TILE_KP_OWN)
#ifndef KM_LL
#define KM_LL (KM_LL_OK ? 4 : 0)
#endif
#if KM_LL && !KM_LL_OK
#error "indexer_logits.cl: KM_LL needs KM_QL, KM_MT 1 and KM_PF 1"
#endif
#if KM_BTP && KM_KPG % KM_NT
#error "indexer_logits.cl: KM_BTP needs KM_NT to divide KM_KPG"
#endif
#define KM_TQ (128 / KM_COLS) /* most tokens a group (H <= 64 with KM_COLS 64: 2) */
#if KM_QL
#define KM_ST uchar
#else
#define KM_ST int
#endif

/* The lane's bytes of chunk c: of each m-tile, its KP_ROWS key rows
 * (dsa_tile_kp_row; NVIDIA: rows g and g + 8), KP_NLD loads each at
 * dsa_tile_kp_k0() + KP_CHUNK i (NVIDIA: 16 bytes at 16 t of each 64-dim
 * half); zeros for keys not loaded. */
#define KM_R DSA_TILE_KP_ROWS
#define KM_L DSA_TILE_KP_NLD
DSA_INLINE_ALWAYS void km_load(uint4 x[KM_MT][KM_R][KM_L], __global const uchar *cache,
                               __local const ulong *koff, __local const KM_ST *kstate,
                               const int c, const int k_al, int *okm) {
  int o = 0;
#pragma unroll
  for (int m = 0; m < KM_MT; m++)
#pragma unroll
    for (int hr = 0; hr < KM_R; hr++) {
      const int kk = c * KM_CH + m * DSA_TILE_M + (int)dsa_tile_kp_row(hr);
      const int ok = kstate[kk] == IL_KEY_OK;
      o |= ok << (m * KM_R + hr);
      __global const uchar *kp = cache + koff[kk] + (ulong)dsa_tile_kp_k0();
#pragma unroll
      for (int c2 = 0; c2 < KM_L; c2++)
        x[m][hr][c2] = ok ? dsa_tile_kp_load(kp + DSA_TILE_KP_CHUNK * c2, k_al) : (uint4)(0u);
    }
  *okm = o;
}

#if KM_LL_OK
/* ll: a lane locates its own keys in registers instead of the group's
 * set-up locating all KM_KPG keys into local memory before a barrier. A
 * lane loads key rows dsa_tile_kp_row(h) of a chunk (NVIDIA: g and g + 8)
 * and, where the back-end says so (DSA_TILE_KP_OWN), its accumulators hold
 * the same rows in the same order (dsa_tile_rslot_row(h)), so the
 * block-table entry, the scale and the state of those keys are all it
 * needs, and no other lane's. Two stages a chunk ahead of its products: km_ll_bt reads the
 * block-table entries (paged; chunk c + 2 NKS), km_ll_load the keys and
 * scales (chunk c + NKS). The block-table position (tb, r) of the bt
 * stage's chunk advances by NKS chunks without a division (one at the
 * start). The group keeps one barrier (row ranges and B fragments) and
 * 13 KiB less local memory (no offsets, scales and states). */
typedef struct {
  int tb, r, dtb, dr; /* the bt stage's chunk base: block tb, row r; its step */
  int blk[KM_R], row[KM_R]; /* the bt stage's output for the lane's rows */
} km_ll;

DSA_INLINE_ALWAYS void km_ll_init(km_ll *s, const int paged, const int bs, const int jc,
                                  const int step) {
#pragma unroll
  for (int hr = 0; hr < KM_R; hr++) s->blk[hr] = s->row[hr] = 0; /* ragged: read, never used */
  s->tb = s->r = s->dtb = s->dr = 0;
  if (!paged) return;
  s->tb = jc / bs;
  s->r = jc - s->tb * bs;
  s->dtb = step / bs;
  s->dr = step - s->dtb * bs;
}

DSA_INLINE_ALWAYS void km_ll_bt(km_ll *s, const int paged, __global const uchar *bt,
                                const ulong bt_row, const ulong bt_cs, const int bs,
                                const int jc, const int lo, const int hi) {
  if (!paged) return;
#pragma unroll
  for (int hr = 0; hr < KM_R; hr++) {
    const int d = (int)dsa_tile_kp_row(hr), j = jc + d;
    int row = s->r + d, tb = s->tb;
    while (row >= bs) row -= bs, tb++; /* once at most where bs >= 16 */
    s->row[hr] = row;
    s->blk[hr] = j >= lo && j < hi ? *(__global const int *)(bt + bt_row + (ulong)tb * bt_cs) : 0;
  }
  s->r += s->dr;
  s->tb += s->dtb;
  if (s->r >= bs) s->r -= bs, s->tb++;
}

/* Chunk jc's rows of the lane (NVIDIA: two; 16 bytes of each 64-dim half),
 * their scales, and the rows whose block-table entry was bad (bit hr;
 * faulted; -inf). */
DSA_INLINE_ALWAYS void km_ll_load(const km_ll *s, const int paged, __global const uchar *kbase,
                                  const ulong c_off, const long num_blocks, const int bs,
                                  const ulong c_bstride, const ulong kv_off, const ulong kv_rs,
                                  __global const uchar *ksc, const ulong ksc_off,
                                  const ulong ksc_rs, __global volatile uint *faults,
                                  const int jc, const int lo, const int hi, const int k_al,
                                  uint4 x[KM_R][KM_L], float sc[KM_R], int *msk) {
  int m = 0;
#pragma unroll
  for (int hr = 0; hr < KM_R; hr++) {
    const int j = jc + (int)dsa_tile_kp_row(hr), in = j >= lo && j < hi;
    const int blk = s->blk[hr];
    const int bad = paged && in && (blk < 0 || (long)blk >= num_blocks);
    if (bad) dsa_fault(faults, DSA_FAULT_SLOT_RANGE);
    const int ok = in && !bad;
    ulong ko;
    __global const float *sp;
    if (paged) {
      const ulong base = c_off + (ulong)(ok ? blk : 0) * c_bstride;
      ko = base + (ulong)s->row[hr] * 128u;
      sp = (__global const float *)(kbase + base + (ulong)bs * 128u + (ulong)s->row[hr] * 4u);
    } else {
      ko = kv_off + (ulong)(ok ? j : 0) * kv_rs;
      sp = (__global const float *)(ksc + ksc_off + (ulong)(ok ? j : 0) * ksc_rs);
    }
    __global const uchar *kp = kbase + ko + (ulong)dsa_tile_kp_k0();
#pragma unroll
    for (int c2 = 0; c2 < KM_L; c2++)
      x[hr][c2] = ok ? dsa_tile_kp_load(kp + DSA_TILE_KP_CHUNK * c2, k_al) : (uint4)(0u);
    sc[hr] = ok ? *sp : 0.0f;
    m |= bad << hr;
  }
  *msk = m;
}
#endif

/* Load group c2 of a lane's query row (at qrow, from dims k0 on): the
 * DSA_TILE_KP_BGL 16-byte loads from which dsa_tile_b_kp_e4m3 makes KM_BKS
 * k-steps; zeros where !ok (a token or head past the end). */
DSA_INLINE void km_qload(__global const uchar *qv, const ulong qrow, const int c2, const uint k0,
                         const int ok, const int q_al, uint4 *xq) {
#pragma unroll
  for (int i = 0; i < DSA_TILE_KP_BGL; i++) {
    __global const uchar *qp =
        qv + qrow + (ulong)(DSA_TILE_KP_BCHUNK * (c2 * DSA_TILE_KP_BGL + i) + (int)k0);
    xq[i] = ok ? dsa_load16(qp, q_al) : (uint4)(0u);
  }
}

#if KM_QL
/* The B fragments of a warp's tokens into local memory in fragment order,
 * [token][n-tile][k-step][word pair][slot] (NVIDIA: one pair, b0 and b1, a
 * lane), and their weights, [token][n-tile][column pair]; the warps of a
 * slice split its n-tiles. A lane loads its B column's query row
 * (dsa_tile_kp_col) at dsa_tile_kp_bk0() + KP_BCHUNK i and converts
 * KM_KS k-steps from it. Needs no row range: ll calls it before the
 * group's first barrier, which then publishes it with the ranges. */
DSA_INLINE_ALWAYS void km_qfill(IL_PARAMS, __local uint2 *qf, __local float2 *wf, const int tok,
                                const int nq, const uint r_base, const int h0, const int kslc,
                                const int NKS, const int TPW) {
  const uint lane = dsa_tile_lane(), slot = dsa_tile_b_slot(), gq = dsa_tile_kp_col();
  const uint k0 = dsa_tile_kp_bk0();
  for (int pn = kslc; pn < TPW * KM_NTW; pn += NKS) {
    const int u = pn / KM_NTW, nt = pn - u * KM_NTW, tk = tok + u, tk_ok = tk < nq;
    const uint rk = r_base + (uint)(tk_ok ? tk : 0);
    const uint bk = rk / (uint)next_n, ik = rk - bk * (uint)next_n;
    const int h = h0 + nt * DSA_TILE_N + (int)gq;
    const int ok = tk_ok && h < H;
    const ulong qrow = qv_off + (ulong)bk * qv_bs + (ulong)ik * qv_rs + (ulong)(ok ? h : 0) * qv_hs;
    /* Groups of KP_BGL loads, each making KM_BKS k-steps (NVIDIA: a 16-byte
     * load, four k-steps). */
    for (int c2 = 0; c2 < KM_BG; c2++) {
      uint4 xq[DSA_TILE_KP_BGL];
      km_qload(qv, qrow, c2, k0, ok, q_al, xq);
      /* One lane a slot writes (WMMA: lanes r and r + 16 hold the same). */
      if (DSA_TILE_B_SLOTS == DSA_TILE_LANES || lane < DSA_TILE_B_SLOTS) {
#pragma unroll
        for (int s = 0; s < KM_BKS; s++) {
          const dsa_tile_b bq = dsa_tile_b_kp_e4m3(xq, s);
#pragma unroll
          for (int w2 = 0; w2 < DSA_TILE_BW / 2; w2++)
            qf[KM_QF(tk, nt, c2 * KM_BKS + s, w2, (int)slot)] =
                (uint2)(bq.v[2 * w2], bq.v[2 * w2 + 1]);
        }
      }
    }
    /* Lane i < N / 2 writes the weights of columns 2i, 2i + 1. */
    if (lane < DSA_TILE_N / 2u) {
      float we[2];
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int hc = h0 + nt * DSA_TILE_N + 2 * (int)lane + e;
        we[e] = tk_ok && hc < H
                    ? *(__global const float *)(w + w_off + (ulong)rk * w_rs + (ulong)hc * w_hs)
                    : 0.0f;
      }
      wf[(tk * KM_NTW + nt) * (DSA_TILE_N / 2) + (int)lane] = (float2)(we[0], we[1]);
    }
  }
}
#endif

DSA_INLINE_ALWAYS void km_body(IL_PARAMS, const int paged, const int tpw, const int ll, const int knt,
                               const int tq, const int nrows, __local ulong *koff,
                               __local float *kscale, __local KM_ST *kstate, __local float *red,
                               __local uint2 *qf, __local float2 *wf, __local int *tlo,
                               __local int *thi) {
  const uint lid = get_local_id(0), warp = lid / DSA_TILE_LANES;
  const uint g = get_group_id(0), grow = g / (uint)ntiles;
  const uint rg = row0 + grow;
  const int n0 = (tile0 + (int)(g - grow * (uint)ntiles)) * KM_KPG;
  const int HP = (H + KM_COLS - 1) / KM_COLS * KM_COLS;
  /* The group's tokens: rows r_base .. r_base + nq - 1, of sequence b
   * (paged: tq tokens of its next_n); ragged: tq consecutive query rows,
   * each with its own key range, sharing the group's keys. */
  const int nchunk = (next_n + tq - 1) / tq;
  const uint b = paged ? rg / (uint)nchunk : 0u;
  const int i0 = paged ? (int)(rg - b * (uint)nchunk) * tq : 0;
  const uint r_base = paged ? b * (uint)next_n + (uint)i0 : rg * (uint)tq;
  const int nq = paged ? min(tq, next_n - i0) : min(tq, nrows - (int)r_base);
  __global const uchar *kbase = paged ? cache : kv;
  /* Slices: the host keeps tq * HP / KM_COLS a power of two dividing KM_W.
   * A warp takes TPW consecutive slices (tpw where every slice is a
   * token: H <= KM_COLS), tokens tok .. tok + TPW - 1. */
  const int NS = tq * HP / KM_COLS, KT = KM_QL ? tpw : 1;
  const int TPW = KT > 1 && NS == tq ? min(KT, tq) : 1;
  const int NKS = knt / DSA_TILE_LANES / (NS / TPW);
  const int cs = (int)warp % (NS / TPW) * TPW, kslc = (int)warp / (NS / TPW);
  const int tok = cs * KM_COLS / HP, h0 = cs * KM_COLS - tok * HP;

#define KM_TU (KM_KPG / KM_NT)
#if KM_RR
  /* KM_RR: the entries and the row ranges first (reads in flight together),
   * then the queries, then the scales of the entries' blocks. */
  int blk_e[KM_TU], row_e[KM_TU];
#pragma unroll
  for (int u = 0; u < KM_TU; u++) {
    const int t = (int)lid + u * knt, j = n0 + t, tb = paged && !ll ? j / bs : 0;
    row_e[u] = j - tb * bs;
    blk_e[u] = paged && !ll && t < KM_KPG && j < ncols && (long)tb < W
                   ? *(__global const int *)(bt + bt_off + (ulong)b * bt_rs + (ulong)tb * bt_cs)
                   : 0;
  }
  int rl0 = 0, rh0 = 0, rbad0 = 0, rl1 = 0, rh1 = 0, rbad1 = 0; /* tokens 0, 1 (nq <= 2) */
  if (paged && !ll) {
    const uint rb = r_base / (uint)next_n, i = r_base - rb * (uint)next_n;
    rbad0 = il_row_range(lim, lim_off, lim_s0, lim_s1, lim2, lim2_off, lim2_s0, ctx_rank, paged,
                         rb, i, next_n, ncols, W, bs, &rl0, &rh0);
    if (nq > 1) {
      const uint r = r_base + 1u, rb1 = r / (uint)next_n, i1 = r - rb1 * (uint)next_n;
      rbad1 = il_row_range(lim, lim_off, lim_s0, lim_s1, lim2, lim2_off, lim2_s0, ctx_rank,
                           paged, rb1, i1, next_n, ncols, W, bs, &rl1, &rh1);
    }
  }
#endif
#if KM_QL
  /* ll: the queries' fragments first: their loads overlap the row ranges'
   * and one barrier publishes both. KM_RR: the same for every kernel. */
#if KM_RR
  km_qfill(IL_NAMES, qf, wf, tok, nq, r_base, h0, kslc, NKS, TPW);
#else
  if (ll) km_qfill(IL_NAMES, qf, wf, tok, nq, r_base, h0, kslc, NKS, TPW);
#endif
#endif
#if KM_RR
  float sc_e[KM_TU];
#pragma unroll
  for (int u = 0; u < KM_TU; u++) {
    const int okb = blk_e[u] >= 0 && (long)blk_e[u] < num_blocks;
    sc_e[u] = paged && !ll && okb
                  ? *(__global const float *)(cache + c_off + (ulong)(okb ? blk_e[u] : 0) * c_bstride +
                                              (ulong)bs * 128u + (ulong)row_e[u] * 4u)
                  : 0.0f;
  }
#endif
  int lo = INT_MAX, hi = INT_MIN;
#if KM_RR
  if (paged && !ll) {
    /* The ranges for later readers (published by the set-up's barrier). */
    if ((int)lid < 4) {
      tlo[lid] = lid == 0 ? rl0 : lid == 1 ? rl1 : 0;
      thi[lid] = lid == 0 ? rh0 : lid == 1 ? rh1 : 0;
    }
    if (((lid == 0 && rbad0) || (lid == 1 && rbad1)) && n0 == 0)
      dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
    if (rl0 < rh0) lo = rl0, hi = rh0; /* nq >= 1 */
    if (nq > 1 && rl1 < rh1) lo = min(lo, rl1), hi = max(hi, rh1);
  } else
#endif
  {
  if ((int)lid < 4) {
    int lo = 0, hi = 0;
    if ((int)lid < nq) {
      const uint r = r_base + lid, rb = r / (uint)next_n, i = r - rb * (uint)next_n;
      const int bad = il_row_range(lim, lim_off, lim_s0, lim_s1, lim2, lim2_off, lim2_s0,
                                   ctx_rank, paged, rb, i, next_n, ncols, W, bs, &lo, &hi);
      if (bad && n0 == 0) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
    }
    tlo[lid] = lo;
    thi[lid] = hi;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int t = 0; t < nq; t++)
    if (tlo[t] < thi[t]) lo = min(lo, tlo[t]), hi = max(hi, thi[t]);
  }

  /* Where each key of the group lives (block-table reads once per key).
   * KM_BTP: il_locate_key's work (paged FP8) in three unrolled passes, all
   * block-table reads, then all scale reads, then the stores and faults, so
   * a work-item has its KM_KPG / KM_NT keys' reads in flight together
   * instead of two dependent global reads a key one after the other (the
   * fault's atomic and the local stores between them kept the compiler
   * from overlapping the iterations). */
  if (!ll) {
  if (!paged) {
    /* Ragged: key j at kv + j kv_rs, its scale at ksc + j ksc_rs; the scale
     * reads of an item first, then the stores (reads in flight together). */
    float sc[KM_TU];
#pragma unroll
    for (int u = 0; u < KM_TU; u++) {
      const int t = (int)lid + u * knt, j = n0 + t;
      sc[u] = t < KM_KPG && j >= lo && j < hi
                  ? *(__global const float *)(ksc + ksc_off + (ulong)j * ksc_rs)
                  : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < KM_TU; u++) {
      const int t = (int)lid + u * knt, j = n0 + t, in = j >= lo && j < hi;
      if (t < KM_KPG) {
        koff[t] = in ? kv_off + (ulong)j * kv_rs : 0ul;
        kscale[t] = sc[u];
        kstate[t] = (KM_ST)(in ? IL_KEY_OK : IL_KEY_OUT);
      }
    }
  } else
#if KM_BTP
  {
    int kin[KM_TU], blk[KM_TU], row[KM_TU];
#pragma unroll
    for (int u = 0; u < KM_TU; u++) {
      const int t = (int)lid + u * knt, j = n0 + t;
      kin[u] = t < KM_KPG && j >= lo && j < hi;
#if KM_RR
      row[u] = row_e[u];
      blk[u] = kin[u] ? blk_e[u] : 0;
#else
      const int tb = j / bs;
      row[u] = j - tb * bs;
      blk[u] = kin[u] ? *(__global const int *)(bt + bt_off + (ulong)b * bt_rs + (ulong)tb * bt_cs)
                      : 0;
#endif
    }
    float sc[KM_TU];
    ulong ko[KM_TU];
#pragma unroll
    for (int u = 0; u < KM_TU; u++) {
      const int ok = kin[u] && blk[u] >= 0 && (long)blk[u] < num_blocks;
      const ulong base = c_off + (ulong)(ok ? blk[u] : 0) * c_bstride;
      ko[u] = ok ? base + (ulong)row[u] * 128u : 0;
#if KM_RR
      sc[u] = ok ? sc_e[u] : 0.0f;
#else
      sc[u] = ok ? *(__global const float *)(cache + base + (ulong)bs * 128u + (ulong)row[u] * 4u)
                 : 0.0f;
#endif
    }
#pragma unroll
    for (int u = 0; u < KM_TU; u++) {
      const int t = (int)lid + u * knt;
      const int bad = kin[u] && (blk[u] < 0 || (long)blk[u] >= num_blocks);
      if (bad) dsa_fault(faults, DSA_FAULT_SLOT_RANGE);
      if (t < KM_KPG) {
        koff[t] = ko[u];
        kscale[t] = sc[u];
        kstate[t] = (KM_ST)(!kin[u] ? IL_KEY_OUT : bad ? IL_KEY_MASKED : IL_KEY_OK);
      }
    }
  }
#else
  for (int t = (int)lid; t < KM_KPG; t += knt) {
    const int j = n0 + t;
    int st = j >= lo && j < hi ? IL_KEY_OK : IL_KEY_OUT;
    ulong ko = 0, so = 0;
    float sc = 0.0f;
    if (st == IL_KEY_OK) st = il_locate_key(IL_NAMES, 1, 0, b, j, &ko, &so, &sc);
    koff[t] = ko;
    kscale[t] = sc;
    kstate[t] = (KM_ST)st;
  }
#endif
#undef KM_TU
  }

  /* The chunks holding valid keys (empty range: no trip). */
  const int c_lo = lo >= hi ? 0 : max(lo - n0, 0) / KM_CH;
  const int c_hi = lo >= hi ? 0 : clamp((hi - n0 + KM_CH - 1) / KM_CH, 0, KM_NCH);
  int c = c_lo + kslc;
#if KM_LL_OK
  /* ll: this lane's first chunk located (block-table entries) and its
   * keys loaded, before the loop without a second barrier. */
  const ulong bt_row = bt_off + (ulong)b * bt_rs;
  km_ll lls;
  if (ll) {
    km_ll_init(&lls, paged, bs, n0 + c * KM_CH, NKS * KM_CH);
    if (c < c_hi) km_ll_bt(&lls, paged, bt, bt_row, bt_cs, bs, n0 + c * KM_CH, lo, hi);
  }
#endif

  const int tok_ok = tok < nq;
  const uint r = r_base + (uint)(tok_ok ? tok : 0);
  const uint bq_ = r / (uint)next_n, ii = r - bq_ * (uint)next_n; /* the token's (b, i) */
#if KM_QL
  /* The tokens' B fragments (km_qfill; one 8-byte read per lane and MMA, a
   * warp's 256 contiguous bytes, no bank conflicts), here unless ll built
   * them before the first barrier. */
  (void)red, (void)bq_, (void)ii, (void)r;
  /* The row ranges of the warp's tokens (read once). */
#if KM_RR
  /* (KM_RR: tlo / thi are published by the barrier below; the work-item's
   * own copy.) */
#define KM_TLO(t) (paged && !ll ? ((t) ? rl1 : rl0) : tlo[t])
#define KM_THI(t) (paged && !ll ? ((t) ? rh1 : rh0) : thi[t])
#else
#define KM_TLO(t) tlo[t]
#define KM_THI(t) thi[t]
#endif
  const int lo0 = tok_ok ? KM_TLO(tok) : 0, hi0 = tok_ok ? KM_THI(tok) : 0;
  const int lo1 = TPW > 1 && tok + 1 < nq ? KM_TLO(tok + 1) : 0;
  const int hi1 = TPW > 1 && tok + 1 < nq ? KM_THI(tok + 1) : 0;
#undef KM_TLO
#undef KM_THI
#if !KM_RR
  if (!ll) km_qfill(IL_NAMES, qf, wf, tok, nq, r_base, h0, kslc, NKS, TPW);
#endif
#else
  /* This warp's B fragments (its KM_COLS columns, all k-steps) and weights. */
  (void)qf, (void)wf;
  const uint gq = dsa_tile_kp_col(), k0 = dsa_tile_kp_bk0();
  dsa_tile_b qb[KM_NTW][KM_KS];
  float wv[KM_NTW][DSA_TILE_CCOLS];
#pragma unroll
  for (int nt = 0; nt < KM_NTW; nt++) {
    const int h = h0 + nt * DSA_TILE_N + (int)gq;
    const int ok = tok_ok && h < H;
    const ulong qrow = qv_off + (ulong)bq_ * qv_bs + (ulong)ii * qv_rs + (ulong)(ok ? h : 0) * qv_hs;
#pragma unroll
    for (int c2 = 0; c2 < KM_BG; c2++) {
      uint4 xq[DSA_TILE_KP_BGL];
      km_qload(qv, qrow, c2, k0, ok, q_al, xq);
#pragma unroll
      for (int s = 0; s < KM_BKS; s++) qb[nt][c2 * KM_BKS + s] = dsa_tile_b_kp_e4m3(xq, s);
    }
#pragma unroll
    for (int e = 0; e < DSA_TILE_CCOLS; e++) {
      const int hc = h0 + nt * DSA_TILE_N + (int)dsa_tile_slot_col(e);
      wv[nt][e] = tok_ok && hc < H
                      ? *(__global const float *)(w + w_off + (ulong)r * w_rs + (ulong)hc * w_hs)
                      : 0.0f;
    }
  }
#endif
  /* A ring of KM_PF chunks in flight: [slot][m-tile][the lane's rows][its
   * loads of a row] (NVIDIA: rows g, g + 8; 64-dim halves). */
  uint4 x[KM_PF][KM_MT][KM_R][KM_L];
  /* The keys' OK bits of each slot's chunk (km_load: bit m KM_R + hr), so
   * that the store needs no kstate read where the lane stores the rows it
   * loaded (DSA_TILE_KP_OWN). H200, same call: B = 64 next_n = 2 251.5 ->
   * 248.0 us, next_n = 1 144.1 -> 143.7 (docs/PERFORMANCE.md, session 18). */
  int xok[KM_PF];
#pragma unroll
  for (int p = 0; p < KM_PF; p++) xok[p] = 0;
  float xsc[KM_R];
#pragma unroll
  for (int hr = 0; hr < KM_R; hr++) xsc[hr] = 0.0f;
  int xmsk = 0;
#if KM_LL_OK
  if (ll) {
    if (c < c_hi)
      km_ll_load(&lls, paged, kbase, c_off, num_blocks, bs, c_bstride, kv_off, kv_rs, ksc,
                 ksc_off, ksc_rs, faults, n0 + c * KM_CH, lo, hi, k_al, x[0][0], xsc, &xmsk);
    if (c + NKS < c_hi)
      km_ll_bt(&lls, paged, bt, bt_row, bt_cs, bs, n0 + (c + NKS) * KM_CH, lo, hi);
  } else
#endif
  {
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int p = 0; p < KM_PF; p++)
      if (c + p * NKS < c_hi) km_load(x[p], kbase, koff, kstate, c + p * NKS, k_al, &xok[p]);
  }
  for (; c < c_hi; c += NKS) {
    uint4 cur[KM_MT][KM_R][KM_L];
#pragma unroll
    for (int m = 0; m < KM_MT; m++)
#pragma unroll
      for (int hr = 0; hr < KM_R; hr++)
#pragma unroll
        for (int c2 = 0; c2 < KM_L; c2++) {
          cur[m][hr][c2] = x[0][m][hr][c2];
#pragma unroll
          for (int p = 0; p + 1 < KM_PF; p++) x[p][m][hr][c2] = x[p + 1][m][hr][c2];
        }
    const int cok = xok[0];
#pragma unroll
    for (int p = 0; p + 1 < KM_PF; p++) xok[p] = xok[p + 1];
    (void)cok;
    float csc[KM_R];
#pragma unroll
    for (int hr = 0; hr < KM_R; hr++) csc[hr] = xsc[hr];
    const int cmsk = xmsk;
    (void)csc;
#if KM_LL_OK
    if (ll) {
      if (c + NKS < c_hi)
        km_ll_load(&lls, paged, kbase, c_off, num_blocks, bs, c_bstride, kv_off, kv_rs,
                   ksc, ksc_off, ksc_rs, faults, n0 + (c + NKS) * KM_CH, lo, hi, k_al,
                   x[0][0], xsc, &xmsk);
      if (c + 2 * NKS < c_hi)
        km_ll_bt(&lls, paged, bt, bt_row, bt_cs, bs, n0 + (c + 2 * NKS) * KM_CH, lo, hi);
    } else
#endif
    if (c + KM_PF * NKS < c_hi)
      km_load(x[KM_PF - 1], kbase, koff, kstate, c + KM_PF * NKS, k_al, &xok[KM_PF - 1]);
#pragma unroll
    for (int m = 0; m < KM_MT; m++) {
      /* The chunk's A fragments, converted once for the warp's tokens
       * (KT 1: inside the k loop, next to their products). */
      dsa_tile_a af[KM_KS];
      if (KT > 1) {
#pragma unroll
        for (int ks = 0; ks < KM_KS; ks++) af[ks] = dsa_tile_a_kp_e4m3(cur[m], ks);
      }
#pragma unroll
      for (int u = 0; u < 2; u++) {
        if (u >= TPW) continue; /* uniform in the group */
        const int tk = tok + u, tk_ok = tk < nq;
        dsa_tile_c acc[KM_NTW];
#pragma unroll
        for (int nt = 0; nt < KM_NTW; nt++) acc[nt] = dsa_tile_zero();
        const float sc = 0x1p8f;
#pragma unroll
        for (int ks = 0; ks < KM_KS; ks++) {
          const dsa_tile_a a = KT > 1 ? af[ks] : dsa_tile_a_kp_e4m3(cur[m], ks);
#pragma unroll
          for (int nt = 0; nt < KM_NTW; nt++) {
            dsa_tile_b bf;
#if KM_QL
#pragma unroll
            for (int w2 = 0; w2 < DSA_TILE_BW / 2; w2++) {
              const uint2 q2 = qf[KM_QF(tk, nt, ks, w2, (int)dsa_tile_b_slot())];
              bf.v[2 * w2] = q2.x;
              bf.v[2 * w2 + 1] = q2.y;
            }
#else
            bf = qb[nt][ks];
#endif
            acc[nt] = dsa_tile_mma_h(acc[nt], a, bf);
          }
        }
        /* Epilogue: k_scale (2^16 first, exact), ReLU, weights, the lane's
         * heads, then the row's other lanes (dsa_tile_row_sum). The lane's
         * accumulators hold DSA_TILE_CROWS rows, row slot h at kk + KM_DR(h),
         * kk the first (NVIDIA: kk = the m-tile's g, and kk + 8). */
        const int kk = c * KM_CH + m * DSA_TILE_M + (int)dsa_tile_rslot_row(0);
        /* The operands' 2^-16 comes back in two halves: 2^8 folded into the
         * key's scale (acc (2^8 s): one rounding, as acc 2^8 s; folded, it
         * saves a multiply an element, H200 B = 64 next_n = 1: -3 %), and
         * 2^8 into the row's sum (exact). Folding all of 2^16 overflowed
         * from s = 2^112 on, where the logits need not (the quantizer's s
         * = amax / 448 reaches 2^119.2); 2^8 s stays finite below 2^120.
         * Either way the terms are the same values times a power of two, so
         * the same bits outside the subnormal range. */
        float sr[DSA_TILE_CROWS], p[DSA_TILE_CROWS];
#pragma unroll
        for (int hr = 0; hr < DSA_TILE_CROWS; hr++) {
#if KM_LL_OK
          sr[hr] = (ll ? csc[hr] : kscale[kk + KM_DR(hr)]) * sc;
#else
          sr[hr] = kscale[kk + KM_DR(hr)] * sc;
#endif
          p[hr] = 0.0f;
        }
#if KM_FOLD
        /* The lane's rows take k_scale after the head sum where each is a
         * positive normal float (KM_FOLD, above). The lanes whose sums meet
         * in dsa_tile_row_sum hold the same rows in every back-end's map
         * (NVIDIA: the four lanes of g, rows g and g + 8; Intel: every lane,
         * all 8; AMD: the 16 lanes of one lane / 16), so they decide alike
         * and a row's sum meets one form. */
        int fold = 1;
#pragma unroll
        for (int hr = 0; hr < DSA_TILE_CROWS; hr++)
          fold &= sr[hr] >= FLT_MIN && sr[hr] <= FLT_MAX;
        if (!fold) { /* per lane: no shuffle inside */
#pragma unroll
          for (int nt = 0; nt < KM_NTW; nt++)
#pragma unroll
            for (int e = 0; e < DSA_TILE_CE; e++) acc[nt].v[e] *= sr[dsa_tile_rslot(e)];
        }
#endif
#pragma unroll
        for (int nt = 0; nt < KM_NTW; nt++) {
#if KM_QL
          /* The lane's columns (at most a pair: the kernel's #error). */
          const float2 w2 =
              wf[(tk * KM_NTW + nt) * (DSA_TILE_N / 2) + (int)dsa_tile_slot_col(0) / 2];
          float wv_[DSA_TILE_CCOLS];
#pragma unroll
          for (int s2 = 0; s2 < DSA_TILE_CCOLS; s2++)
            wv_[s2] = dsa_tile_slot_col(s2) & 1u ? w2.y : w2.x;
#else
          float wv_[DSA_TILE_CCOLS];
#pragma unroll
          for (int s2 = 0; s2 < DSA_TILE_CCOLS; s2++) wv_[s2] = wv[nt][s2];
#endif
          /* Column slot outer (NVIDIA: p0, p1 of column 2t, then of 2t + 1). */
#pragma unroll
          for (int s2 = 0; s2 < DSA_TILE_CCOLS; s2++)
#pragma unroll
            for (int e = 0; e < DSA_TILE_CE; e++) {
              if (dsa_tile_slot(e) != s2) continue; /* constant after unrolling */
              const int h = dsa_tile_rslot(e);
#if KM_FOLD
              p[h] += fmax(acc[nt].v[e], 0.0f) * wv_[s2];
#else
              p[h] += fmax(acc[nt].v[e] * sr[h], 0.0f) * wv_[s2];
#endif
            }
        }
#pragma unroll
        for (int hr = 0; hr < DSA_TILE_CROWS; hr++) {
#if KM_FOLD
          p[hr] = dsa_tile_row_sum(p[hr]) * (fold ? sr[hr] : 1.0f) * 0x1p8f;
#else
          p[hr] = dsa_tile_row_sum(p[hr]) * 0x1p8f;
#endif
        }
#if KM_QL
        /* The warp holds all heads of its token: these are the logits. */
        if (dsa_tile_row_leader() && tk_ok) {
          const int my_lo = u ? lo1 : lo0, my_hi = u ? hi1 : hi0;
#pragma unroll
          for (int hr = 0; hr < DSA_TILE_CROWS; hr++) {
            const int k2 = kk + KM_DR(hr), col = n0 + k2;
            /* In the token's range the key is OK or MASKED (kstate's OUT is
             * outside the group's union of ranges, which holds it). */
            const int st = col < my_lo || col >= my_hi ? IL_KEY_OUT
                           : ll ? ((cmsk >> hr) & 1 ? IL_KEY_MASKED : IL_KEY_OK)
#if DSA_TILE_KP_OWN
                                : ((cok >> (m * KM_R + hr)) & 1 ? IL_KEY_OK : IL_KEY_MASKED);
#else
                                : (int)kstate[k2];
#endif
            if (col < ncols && (st != IL_KEY_OUT || clean))
              il_store(out, o_off, o_rs, r_base + (uint)tk, col,
                       st == IL_KEY_OK ? p[hr] : -INFINITY, out_bf16);
          }
        }
#else
        (void)tk_ok;
        if (dsa_tile_row_leader()) {
#pragma unroll
          for (int hr = 0; hr < DSA_TILE_CROWS; hr++)
            red[cs * KM_KPG + kk + KM_DR(hr)] = p[hr];
        }
#endif
      }
    }
  }
#if KM_QL
  /* Chunks without valid keys (not in the loop): -inf when clean. */
  if (clean)
    for (int idx = (int)lid; idx < nq * KM_KPG; idx += knt) {
      const int t = idx / KM_KPG, kk = idx - t * KM_KPG, col = n0 + kk, ch = kk / KM_CH;
      if ((ch < c_lo || ch >= c_hi) && col < ncols)
        il_store(out, o_off, o_rs, r_base + (uint)t, col, -INFINITY, out_bf16);
    }
#else
  barrier(CLK_LOCAL_MEM_FENCE);

  const int per = HP / KM_COLS;
  for (int idx = (int)lid; idx < nq * KM_KPG; idx += knt) {
    const int t = idx / KM_KPG, kk = idx - t * KM_KPG, col = n0 + kk;
    float sum = 0.0f;
    for (int sl = t * per; sl < (t + 1) * per; sl++) sum += red[sl * KM_KPG + kk];
    const int st = col >= tlo[t] && col < thi[t] ? kstate[kk] : IL_KEY_OUT;
    if (col < ncols && (st != IL_KEY_OUT || clean))
      il_store(out, o_off, o_rs, r_base + (uint)t, col, st == IL_KEY_OK ? sum : -INFINITY,
               out_bf16);
  }
#endif
}

/* Two group sizes, one body: KM_NT work-items, and (_keys2) 2 KM_NT for
 * grids too small to fill the device otherwise (the host picks). LL:
 * km_body's ll (no per-key arrays then). */
#if KM_QL
#define KM_KERNEL(NAME, NT, PAGED, TPW, LL, NTOK)                                             \
  __kernel __attribute__((reqd_work_group_size(NT, 1, 1))) DSA_TILE_KERNEL void NAME(         \
      IL_KARGS, int tq, int nrows) {                                                          \
    __local ulong koff[(LL) ? 1 : KM_KPG];                                                    \
    __local float kscale[(LL) ? 1 : KM_KPG];                                                  \
    __local KM_ST kstate[(LL) ? 1 : KM_KPG];                                                  \
    __local uint2 qf[(NTOK) * KM_NTW * KM_KS * (DSA_TILE_BW / 2) * DSA_TILE_B_SLOTS];          \
    __local float2 wf[(NTOK) * KM_NTW * (DSA_TILE_N / 2)];                                    \
    __local int tlo[4], thi[4];                                                               \
    km_body(IL_FROM_KARGS(PAGED, 0), PAGED, TPW, LL, NT, tq, nrows, koff, kscale, kstate, 0,  \
            qf, wf, tlo, thi);                                                                \
  }
#else
#define KM_KERNEL(NAME, NT, PAGED, TPW, LL, NTOK)                                             \
  __kernel __attribute__((reqd_work_group_size(NT, 1, 1))) DSA_TILE_KERNEL void NAME(         \
      IL_KARGS, int tq, int nrows) {                                                          \
    __local ulong koff[KM_KPG];                                                               \
    __local float kscale[KM_KPG];                                                             \
    __local KM_ST kstate[KM_KPG];                                                             \
    __local float red[KM_TQ * KM_KPG];                                                        \
    __local int tlo[4], thi[4];                                                               \
    km_body(IL_FROM_KARGS(PAGED, 0), PAGED, TPW, 0, NT, tq, nrows, koff, kscale, kstate, red, \
            0, 0, tlo, thi);                                                                  \
  }
#endif
/* Paged: one token a warp for next_n = 1 (_keys, _keys2), two for tq = 2
 * (_t2); ragged prefill: two. NTOK: the tokens whose B fragments a group
 * holds. The one-token kernels run only where a group has one (tq = 1:
 * src/op_indexer_logits.c picks _t2 otherwise), so they hold one: 46,592 ->
 * 29,952 B of local memory, which with NVIDIA's compiler at 96 registers
 * (106 before) gives 5 groups an SM instead of 4. H200, B = 64 next_n = 1:
 * 146.9 -> 145.4 us (docs/PERFORMANCE.md, session 17). */
KM_KERNEL(paged_mqa_logits_keys, KM_NT, 1, 1, KM_LL & 1, 1)
KM_KERNEL(paged_mqa_logits_keys2, 2 * KM_NT, 1, 1, KM_LL & 1, 1)
KM_KERNEL(paged_mqa_logits_keys_t2, KM_NT, 1, 2, KM_LL & 2, KM_TQ)
KM_KERNEL(paged_mqa_logits_keys2_t2, 2 * KM_NT, 1, 2, KM_LL & 2, KM_TQ)
KM_KERNEL(mqa_logits_keys, KM_NT, 0, 2, KM_LL & 4, KM_TQ)
KM_KERNEL(mqa_logits_keys2, 2 * KM_NT, 0, 2, KM_LL & 4, KM_TQ)
#endif
