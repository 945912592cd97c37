/* Sparse MLA attention (SPEC-reference §9.1-9.4; cache layout §3.1).
 *
 * Per query token t and head h: s_j = scale * (q[t,h] . K_j) over the used
 * entries j, out = sum_j e^{s_j} K_j / (sum_j e^{s_j} + e^{sink_h}) (V = K,
 * all 512 dims), lse = ln sum_j e^{s_j}. fp32 accumulation, online softmax.
 *
 * The tile kernels (sparse_attn_bf16_tile, sparse_mla_decode_fused_tile,
 * the pick wherever they fit) have their own section below: one work-group
 * per (token, 32 heads), scores and P x V as matrix-tile atoms.
 *
 * Portable attention kernels (sparse_attn_bf16, sparse_mla_decode_fused): grid
 * (256, ceil(H/16), T), one work-group per (token, group of 16 heads): the
 * heads of a token share its KV entries, so each tile of NT = 8 entries
 * (8 x 512 bf16 pairs in local memory, NaN zeroed; a ring of three buffers,
 * or one) is fetched once and used by all 16 heads. A token's entries form
 * one virtual list: the first len_A entries of set A, then the first len_B
 * of set B (bf16 kernel: set A only). Per tile (attn_body's phases):
 *   stage  item (row r = tid/32, lane = tid%32) writes dims [16 lane, +16)
 *          of row r, fetched from global memory one tile ahead (registers),
 *          dequantized in the fused kernel (dsa_dequant4_e4m3_bf16), NaN
 *          halves zeroed (not on the gather's rows, kv_clean: it zeroed
 *          them once an entry);
 *   QK     item (heads 2 qh, 2 qh + 1 with qh = tid/32, ds = tid%32) holds
 *          both heads' dims {256k + 8ds + i} (k < 2, i < 8) in registers,
 *          writes 2 x 8 partial dots;
 *   reduce items (h = tid/8, n = tid%8) of one half of the group: logit
 *          (log2 units);
 *   softmax items (h = tid/8, n = tid%8), tid < 128: the online softmax
 *          update by exp2 (m and each item's share of l in registers);
 *   PV     item (tid/128, tid%128) owns dims [4 (tid%128), +4) of heads
 *          [8 (tid/128), +8) (32 accumulators).
 * Masked entries have logit -inf and a zero row; a tile whose running max is
 * still -inf contributes nothing, so empty rows and fully masked first tiles
 * never produce NaN. NaN elements of K are read as 0 (as vLLM's reference).
 *
 * Variants (the launcher's tables, best first): the *_tile kernels below
 * (one body over the matrix-tile layer cl/dsa_tile.h: NVIDIA mma.sync,
 * Intel DPAS, AMD MFMA/WMMA or portable, whichever the context's back-end
 * is; each entry dequantized once per 32 heads); the *_mma kernels at the
 * end of the file (NVIDIA tensor cores, inline PTX, under DSA_HAS_NV_PTX:
 * the previous NVIDIA path, kept as the fallback there while the tile form
 * is measured against it, docs/PERFORMANCE.md); the portable kernels with a
 * ring of three tile buffers (phases pipelined, 42 KB of local memory); the
 * *_lm32 twins with one buffer for devices with OpenCL's guaranteed 32 KiB
 * (26 KB).
 *
 * sparse_mla_gather_pack (two-stage decode, first stage): grid (32, Ktot, T)
 * in (32, 8) groups: row (t, j) of the virtual list is dequantized into the
 * bf16 workspace row t*Ktot + j (NaN halves zeroed when the attention is a
 * portable kernel, `clean`), and the combined index list (t*Ktot + j, or
 * -1 for an unused entry) and the lengths are written for sparse_attn_bf16.
 */
#include "dsa_mla.h"

/* Host-owned geometry (src/op_sparse_mla.c, build options): MLA_DIM (512,
 * the latent width) and WG work-items
 * and HG heads per portable group, NT entries per tile, DSL d-slices of the
 * QK step, PSTRIDE partial sums per head (swizzled against bank conflicts),
 * GROWS rows per gather group; the mma path's SM_* and the tile kernels'
 * MT_* below. */
#if MLA_DIM != 512 || WG != 256 || HG != 16 || NT != 8 || DSL != 32 || PSTRIDE != NT * DSL
#error "sparse_mla.cl: the portable mappings need MLA_DIM 512, WG 256, HG 16, NT 8, DSL 32"
#endif
#define PV_H (HG / 2) /* heads a PV item: 128 items x 4 dims cover 512, twice */
/* SA_NV_MAXRREG (NVIDIA only, src/op_sparse_mla.c): the portable attention
 * kernels and the fused tile decode go without reqd_work_group_size (its PTX
 * .reqntid makes ptxas ignore the cap), so the build's -cl-nv-maxrregcount
 * binds them (two groups an SM). SA_REQD(n): the attribute elsewhere. */
#ifndef SA_NV_MAXRREG
#define SA_NV_MAXRREG 0
#endif
#if SA_NV_MAXRREG
#define SA_REQD(n)
#else
#define SA_REQD(n) __attribute__((reqd_work_group_size(n, 1, 1)))
#endif
#define SA_WG_ATTR SA_REQD(WG)

/* The argument groups of the attention kernels (cl/dsa_args.h), laid by the
 * launcher in this order. A set over a paged MLA cache: the cache, the
 * indices [T, K] with their width, the lengths [T]. */
#define SA_QUERY DSA_CTENSOR3(q), int n_heads
#define SA_SET(x) DSA_CPAGED(c##x), DSA_CTENSOR2(i##x), int k##x, DSA_CTENSOR1(l##x), int hl##x
#define SA_OUTPUT                                                                             \
  DSA_CTENSOR1(sink), int has_sink, float scale, DSA_TENSOR3(out), DSA_TENSOR2(lse),            \
      int has_lse, DSA_FAULTS
#define SA_BF16_PARAMS                                                                        \
  SA_QUERY, DSA_CTENSOR2(kv), long n_rows, DSA_CTENSOR2(idx), int width, DSA_CTENSOR1(lens),    \
      int has_lens, int kv_clean, SA_OUTPUT
#define SA_FUSED_PARAMS SA_QUERY, SA_SET(a), SA_SET(b), SA_OUTPUT
/* A set's lengths are read when it has entries and was given lengths (hl):
 * an omitted lens tensor means every row uses the set's full width, as in
 * sparse_attn_bf16. */
#define SA_HAS_LEN(k, hl) ((k) > 0 && (hl))
/* The set structs of SA_SET(x) and of the bf16 kernel's KV matrix. */
#define SA_ISET(x)                                                                            \
  dsa_iset_make(i##x##_mem, i##x##_off, i##x##_s0, i##x##_s1, k##x, c##x##_mem, c##x##_off,      \
                c##x##_bstride, c##x##_nb * (long)c##x##_bs, c##x##_bs, c##x##_al >= 16)
#define SA_ISET_BF16                                                                          \
  dsa_iset_make(idx_mem, idx_off, idx_s0, idx_s1, width, kv_mem, kv_off, kv_s0, n_rows, 1,      \
                kv_al >= 16)
/* The query and output arguments of the bodies. */
#define SA_Q_ARGS q_mem, q_off, q_s0, q_s1
#define SA_OUT_ARGS                                                                           \
  sink_mem, sink_off, sink_s0, has_sink, scale, out_mem, out_off, out_s0, out_s1
#define SA_LSE_ARGS lse_mem, lse_off, lse_s0, lse_s1, has_lse, faults

/* One index set: the indices matrix, its lengths, and (fused) its cache. */
typedef struct {
  __global const uchar *idx;
  ulong idx_off, idx_ts, idx_cs; /* bytes */
  int width;                     /* K */
  __global const uchar *cache;   /* bf16 kernel: the KV buffer */
  ulong c_off, c_bstride;        /* bf16 kernel: c_bstride = row stride */
  long capacity;                 /* bf16 kernel: S */
  int block_size;
  uint bs_m, bs_l; /* the fused tile kernel's divisor (iset_fastdiv) */
  int c_aligned;
} dsa_iset;

/* A set over a paged MLA cache (capacity = blocks * block_size) or, with
 * block_size 1 and c_bstride the row stride, over a bf16 KV matrix. */
DSA_INLINE dsa_iset dsa_iset_make(__global const uchar *idx, ulong idx_off, ulong idx_ts,
                                  ulong idx_cs, int width, __global const uchar *cache,
                                  ulong c_off, ulong c_bstride, long capacity, int block_size,
                                  int c_aligned) {
  dsa_iset r;
  r.idx = idx, r.idx_off = idx_off, r.idx_ts = idx_ts, r.idx_cs = idx_cs, r.width = width;
  r.cache = cache, r.c_off = c_off, r.c_bstride = c_bstride, r.capacity = capacity;
  r.block_size = block_size, r.c_aligned = c_aligned;
  r.bs_m = r.bs_l = 0u;
  return r;
}

/* Slot -> (block, token in it). */
DSA_INLINE uint2 iset_block(const dsa_iset *s, uint slot) {
  const uint blk = slot / (uint)s->block_size;
  return (uint2)(blk, slot - blk * (uint)s->block_size);
}
/* The same without a division, for the fused tile kernel's copy records:
 * q = mul_hi(slot, m), block = (((slot - q) >> min(l, 1)) + q) >> max(l -
 * 1, 0), with l = ceil(log2 block_size) and m = 2^32 (2^l - block_size) /
 * block_size + 1 (iset_fastdiv, once a kernel): exact for every 32-bit slot
 * (the round-up method of Granlund-Montgomery; checked on the host for
 * block sizes 1 to 2^31 over slots up to 2^32 - 1). H200: -1.4 % in the
 * fused tile kernel; in the portable kernels (iset_block) it was 0.6 %
 * slower, and a branch to a shift for power-of-two sizes put 176 bytes on
 * the fused kernel's stack (docs/PERFORMANCE.md, session 19). */
DSA_INLINE void iset_fastdiv(dsa_iset *s) {
  const uint d = (uint)max(s->block_size, 1), l = d > 1u ? 32u - clz(d - 1u) : 0u;
  s->bs_m = (uint)((((ulong)1 << 32) * (((ulong)1 << l) - d)) / d) + 1u;
  s->bs_l = l;
}
DSA_INLINE uint2 iset_block_fast(const dsa_iset *s, uint slot) {
  const uint q = mul_hi(slot, s->bs_m);
  const uint blk = (((slot - q) >> min(s->bs_l, 1u)) + q) >> (max(s->bs_l, 1u) - 1u);
  return (uint2)(blk, slot - blk * (uint)s->block_size);
}

/* The clamped length of a set for token t; a length beyond [0, width] is a
 * fault. has_len == 0: the full width. */
DSA_INLINE int set_len(__global const uchar *lens, ulong l_off, ulong l_st, int has_len, int width,
                       ulong t, int *bad) {
  if (!has_len) return width;
  const int l = *(__global const int *)(lens + l_off + t * l_st);
  if (l < 0 || l > width) *bad = 1;
  return clamp(l, 0, width);
}

/* Raw bytes of one lane (16 dims) of entry j of set s, one tile ahead: u
 * holds the lane's scale byte at bit ush (the aligned word around it, read
 * as a word: the NVIDIA compiler masked a byte load right after it, so every
 * tile waited there for the read it meant to prefetch). */
typedef struct {
  uint4 r0, r1;
  uint u, ush;
  int valid;
} dsa_raw;

/* Index j of set s for token t, resolved: the slot (row) or -1 (an unused
 * entry; out of range is also a fault). */
DSA_INLINE int ref_lane(const dsa_iset *s, ulong t, int j, uint lane, int fused,
                        __global volatile uint *faults) {
  const int idx = *(__global const int *)(s->idx + s->idx_off + t * s->idx_ts + (ulong)j * s->idx_cs);
  const int valid = idx >= 0 && (long)idx < s->capacity;
  if (idx >= 0 && !valid && lane == 0)
    dsa_fault(faults, fused ? DSA_FAULT_SLOT_RANGE : DSA_FAULT_INDEX_RANGE);
  return valid ? idx : -1;
}

/* The raw bytes of lane `lane` of slot idx (>= 0) of set s. */
DSA_INLINE dsa_raw load_lane(const dsa_iset *s, int idx, uint lane, int fused) {
  dsa_raw o;
  o.r0 = o.r1 = (uint4)(0u);
  o.u = o.ush = 0u;
  o.valid = 1;
  if (!fused) {
    __global const uchar *src = s->cache + s->c_off + (ulong)idx * s->c_bstride + lane * 32u;
    o.r0 = dsa_load16(src, s->c_aligned);
    o.r1 = dsa_load16(src + 16, s->c_aligned);
    return o;
  }
  const uint2 bt = iset_block(s, (uint)idx);
  const uint blk = bt.x, tok = bt.y;
  const ulong base = s->c_off + (ulong)blk * s->c_bstride;
  __global const uchar *data = s->cache + base + (ulong)tok * MLA_DATA_BYTES;
  if (lane >= NOPE_LANES) {
    __global const uchar *src = data + MLA_NOPE + (lane - NOPE_LANES) * 32u;
    o.r0 = dsa_load16(src, s->c_aligned);
    o.r1 = dsa_load16(src + 16, s->c_aligned);
  } else {
    o.r0 = dsa_load16(data + lane * 16u, s->c_aligned);
    const ulong sc = base + (ulong)s->block_size * MLA_DATA_BYTES + (ulong)tok * 8u;
    if (s->c_aligned) {
      o.u = *(__global const uint *)(s->cache + sc + ((lane >> 2) & 4u));
      o.ush = 8u * ((lane >> 2) & 3u);
    } else {
      o.u = s->cache[sc + (lane >> 2)];
    }
  }
  return o;
}

/* The 16 bf16 of a lane as 8 words (dim 2i in the low half of word i). */
DSA_INLINE void lane_bf16(const dsa_raw *r, uint lane, int fused, uint w[8]) {
  if (fused && lane < NOPE_LANES) {
    const uint u = (r->u >> r->ush) & 0xFFu;
    const uint2 a = dsa_dequant4_e4m3_bf16(r->r0.x, u), b = dsa_dequant4_e4m3_bf16(r->r0.y, u);
    const uint2 c = dsa_dequant4_e4m3_bf16(r->r0.z, u), d = dsa_dequant4_e4m3_bf16(r->r0.w, u);
    w[0] = a.x, w[1] = a.y, w[2] = b.x, w[3] = b.y, w[4] = c.x, w[5] = c.y, w[6] = d.x, w[7] = d.y;
  } else {
    w[0] = r->r0.x, w[1] = r->r0.y, w[2] = r->r0.z, w[3] = r->r0.w;
    w[4] = r->r1.x, w[5] = r->r1.y, w[6] = r->r1.z, w[7] = r->r1.w;
  }
}

/* A bf16 pair with NaN halves zeroed. */
DSA_INLINE uint sm_nonan(uint x) {
  uint m = 0u;
  if ((x & 0x7FFFu) > 0x7F80u) m |= 0xFFFFu;
  if (((x >> 16) & 0x7FFFu) > 0x7F80u) m |= 0xFFFF0000u;
  return x & ~m;
}

/* sm_nonan's result with a few integer operations for both halves (the
 * portable kernels' stage and the gather; checked equal over all 2^32
 * words): a half's magnitude t (<= 0x7FFF) is a NaN iff t + 0x7F carries
 * into its bit 15 (no carry leaves the half); m holds bits 15 / 31 of the
 * NaN halves, (m << 1) - (m >> 15) their masks (0xFFFF, 0xFFFF0000 or both). */
DSA_INLINE uint sa_nonan(uint x) {
  const uint m = ((x & 0x7FFF7FFFu) + 0x007F007Fu) & 0x80008000u;
  return x & ~((m << 1) - (m >> 15));
}

/* Entry j of the token's virtual list (set A for j < len_a, then set B)
 * resolved: slot -1 for an unused entry. Resolving ahead of the load keeps
 * the index read off the path of the data read (the tile kernels). */
typedef struct {
  int slot, in_b;
} dsa_ref;

DSA_INLINE dsa_ref ref_entry(const dsa_iset *a, const dsa_iset *b, int len_a, int len, ulong t,
                             int j, uint lane, int fused, __global volatile uint *faults) {
  dsa_ref r;
  r.in_b = j >= len_a;
  r.slot = j >= len ? -1
           : j < len_a ? ref_lane(a, t, j, lane, fused, faults)
                       : ref_lane(b, t, j - len_a, lane, fused, faults);
  return r;
}

DSA_INLINE dsa_raw load_entry(const dsa_iset *a, const dsa_iset *b, dsa_ref r, uint lane,
                              int fused) {
  if (r.slot < 0) {
    dsa_raw o;
    o.r0 = o.r1 = (uint4)(0u);
    o.u = o.ush = 0u;
    o.valid = 0;
    return o;
  }
  return r.in_b ? load_lane(b, r.slot, lane, fused) : load_lane(a, r.slot, lane, fused);
}

/* Entry j read but not yet resolved: the raw index word and where it came
 * from. The tile kernels read the indices a tile ahead of the data and
 * resolve them (range check, fault) only when the data read needs the slot,
 * a tile later: a check right after the read waited for it there, two reads
 * a tile one after the other (the H200's SASS; the bf16 tile attention got
 * 10-14 % faster without those waits, docs/PERFORMANCE.md). */
typedef struct {
  int raw, used, in_b;
} dsa_lazy_ref;

DSA_INLINE dsa_lazy_ref ref_read(const dsa_iset *a, const dsa_iset *b, int len_a, int len,
                                 ulong t, int j) {
  dsa_lazy_ref r;
  r.in_b = j >= len_a;
  r.used = j < len;
  r.raw = -1;
  /* No select on the loaded word here (a use would wait for it). */
  if (r.used) {
    const int jj = r.in_b ? j - len_a : j;
    __global const uchar *ip = r.in_b ? b->idx : a->idx;
    const ulong off = r.in_b ? b->idx_off + t * b->idx_ts + (ulong)jj * b->idx_cs
                             : a->idx_off + t * a->idx_ts + (ulong)jj * a->idx_cs;
    r.raw = *(__global const int *)(ip + off);
  }
  return r;
}

/* A read index word checked: its slot, or -1 for an unused entry (used 0,
 * or a negative index) or one at or past its set's capacity cap, the
 * latter also a fault (fused: a cache slot, else a row index). Scalars
 * only: the gather's gp_slot calls it too (see the note above gp_guess). */
DSA_INLINE int ref_check(int raw, int used, long cap, uint lane, int fused,
                         __global volatile uint *faults) {
  const int live = used && raw >= 0;
  const int valid = live && (long)raw < cap;
  if (live && !valid && lane == 0)
    dsa_fault(faults, fused ? DSA_FAULT_SLOT_RANGE : DSA_FAULT_INDEX_RANGE);
  return valid ? raw : -1;
}

/* ref_read's entry resolved as ref_entry would have: the same slot, the same
 * fault for an index past the set's capacity. */
DSA_INLINE dsa_ref ref_resolve(const dsa_iset *a, const dsa_iset *b, dsa_lazy_ref l, uint lane,
                               int fused, __global volatile uint *faults) {
  dsa_ref r;
  r.in_b = l.in_b;
  r.slot = ref_check(l.raw, l.used, l.in_b ? b->capacity : a->capacity, lane, fused, faults);
  return r;
}

/* The resolved and loaded entry j. */
DSA_INLINE dsa_raw fetch_entry(const dsa_iset *a, const dsa_iset *b, int len_a, int len,
                              ulong t, int j, uint lane, int fused,
                              __global volatile uint *faults) {
  return load_entry(a, b, ref_entry(a, b, len_a, len, t, j, lane, fused, faults), lane, fused);
}

/* A head's softmax end: returns 1 / (l + e^{sink - m}) and sets *lse =
 * m + ln l; an empty row (m = -inf) or a head past n_heads (valid = 0)
 * gives 0 and -inf. sink_p: the head's sink (read only when has_sink).
 * Every attention kernel finishes its rows through it. */
DSA_INLINE float sa_finish(float m, float l, int valid, int has_sink,
                           __global const uchar *sink_p, float *lse) {
  float inv = 0.0f, lv = -INFINITY;
  if (m != -INFINITY && valid) {
    float den = l;
    if (has_sink)
      den += exp(*(__global const float *)sink_p - m); /* -inf: + 0; +inf or large: out 0 */
    inv = 1.0f / den;
    lv = m + log(l);
  }
  *lse = lv;
  return inv;
}

/* The phases of a tile (attn_body below runs them in one of two schedules).
 *
 * Stage: the entry row lr, lane `lane`, of raw as bf16 pairs into kt (NaN
 * halves zeroed), its valid flag into vmb[lr]. */
DSA_INLINE_ALWAYS void sa_stage(const dsa_raw *raw, uint lr, uint lane, int fused, int clean,
                                __local uint *kt, __local int *vmb) {
  uint w[8];
  lane_bf16(raw, lane, fused, w);
  /* clean: rows the gather already masked (sparse_mla_gather_pack). */
  if (!clean) {
#pragma unroll
    for (int i = 0; i < 8; i++) w[i] = sa_nonan(w[i]);
  }
  /* The two 16-byte stores in the order (lane / 4) % 2, so a quarter-warp's
   * 8 stores hit 32 distinct banks (as fd_lane). */
  const int sw = (int)((lane >> 2) & 1u);
  __local uint4 *dst = (__local uint4 *)(kt + lr * (MLA_DIM / 2) + lane * 8u);
  const uint4 lo = (uint4)(w[0], w[1], w[2], w[3]), hi = (uint4)(w[4], w[5], w[6], w[7]);
  dst[sw] = sw ? hi : lo;
  dst[1 - sw] = sw ? lo : hi;
  if (lane == 0) vmb[lr] = raw->valid;
}

/* QK: the item's partial dots of the tile in kt into part. */
DSA_INLINE_ALWAYS void sa_qk(const float4 *qf, __local const uint *kt, __local float *part,
                             uint qh, uint ds) {
  __local const uint4 *k4 = (__local const uint4 *)kt;
  /* 2 heads x 8 partial dots over this item's 16 dims. The partial of slice
   * ds is stored at ds ^ 4n of the (head, entry) row, so the reducer's 8
   * items of a head (entries n) read their float4 j at distinct banks (rows
   * are 32 floats apart: unswizzled, all 8 in one bank group). */
#pragma unroll
  for (int n = 0; n < NT; n++) {
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const uint4 w = k4[n * (MLA_DIM / 8) + k * 32 + ds];
      const float kv[8] = {as_float(w.x << 16), as_float(w.x & 0xFFFF0000u),
                           as_float(w.y << 16), as_float(w.y & 0xFFFF0000u),
                           as_float(w.z << 16), as_float(w.z & 0xFFFF0000u),
                           as_float(w.w << 16), as_float(w.w & 0xFFFF0000u)};
      const float4 a0 = qf[2 * k], b0 = qf[2 * k + 1];
      const float4 a1 = qf[4 + 2 * k], b1 = qf[4 + 2 * k + 1];
      s0 = mad(a0.x, kv[0], s0);
      s1 = mad(a1.x, kv[0], s1);
      s0 = mad(a0.y, kv[1], s0);
      s1 = mad(a1.y, kv[1], s1);
      s0 = mad(a0.z, kv[2], s0);
      s1 = mad(a1.z, kv[2], s1);
      s0 = mad(a0.w, kv[3], s0);
      s1 = mad(a1.w, kv[3], s1);
      s0 = mad(b0.x, kv[4], s0);
      s1 = mad(b1.x, kv[4], s1);
      s0 = mad(b0.y, kv[5], s0);
      s1 = mad(b1.y, kv[5], s1);
      s0 = mad(b0.z, kv[6], s0);
      s1 = mad(b1.z, kv[6], s1);
      s0 = mad(b0.w, kv[7], s0);
      s1 = mad(b1.w, kv[7], s1);
    }
    const uint sw = ds ^ (4u * (uint)n);
    part[(2 * qh) * PSTRIDE + n * DSL + sw] = s0;
    part[(2 * qh + 1) * PSTRIDE + n * DSL + sw] = s1;
  }
}

/* Reduce (items tid < HG NT: head rh, entry rn): the logit of (rh, rn) from
 * its partials into sl (-inf for an unused entry). */
DSA_INLINE_ALWAYS void sa_reduce(__local const float *part, __local float *sl,
                                 __local const int *vmb, uint rh, uint rn, float scale) {
  __local const float4 *p4 = (__local const float4 *)(part + rh * PSTRIDE + rn * DSL);
  /* Slice group j (slices 4j..4j+3) sits at float4 j ^ rn (the swizzle in
   * sa_qk); summed in j's order. */
  const float4 a = ((p4[0 ^ rn] + p4[1 ^ rn]) + (p4[2 ^ rn] + p4[3 ^ rn])) +
                   ((p4[4 ^ rn] + p4[5 ^ rn]) + (p4[6 ^ rn] + p4[7 ^ rn]));
  const float s = (a.x + a.y) + (a.z + a.w);
  sl[rh * NT + rn] = vmb[rn] ? s * scale : -INFINITY;
}

/* Softmax (items tid < HG NT): the head's new running max over the tile's
 * logits in sl (log2 units: sa_reduce's scale carries log2 e, so exp2
 * throughout), p = 2^{s - m} into pl, the rescale alpha into al (item rn
 * 0). Each item keeps its own share of the running sum, over its entry of
 * every tile (l = l alpha + p; alpha is the head's, so the 8 shares add up
 * to the head's sum at the end): no pass summing the tile's p after the
 * barrier (8 local reads a tile on 16 items, on the reduce warps' path;
 * H200, forced portable T=64 H=64: 7 us, docs/PERFORMANCE.md). */
DSA_INLINE_ALWAYS void sa_softmax(__local const float *sl, __local float *pl, __local float *al,
                                  uint rh, uint rn, float *m_run, float *l_run) {
  __local const float4 *s4 = (__local const float4 *)(sl + rh * NT);
  const float4 s0 = s4[0], s1 = s4[1];
  const float mt = fmax(fmax(fmax(s0.x, s0.y), fmax(s0.z, s0.w)),
                        fmax(fmax(s1.x, s1.y), fmax(s1.z, s1.w)));
  const float m_new = fmax(*m_run, mt);
  const bool live = m_new != -INFINITY;
  const float p = live ? exp2(sl[rh * NT + rn] - m_new) : 0.0f;
  const float alpha = live ? exp2(*m_run - m_new) : 1.0f;
  pl[rn * HG + rh] = p;
  *l_run = mad(*l_run, alpha, p);
  if (rn == 0) al[rh] = alpha;
  *m_run = m_new;
}

/* PV: acc = acc * alpha + P . K over the item's 4 dims x 8 heads.
 * skip (the one-buffer schedule): the rescale is left out when all 8 alphas
 * are 1 (no head's running max moved this tile: most tiles once the max has
 * settled; x * 1 = x, so the result is the same), a branch uniform over the
 * warp (its items share ph). H200, forced portable at 32 KiB, T=64 H=64:
 * 251.6 against 254.6 us; in the ring (nbuf 3) the same test read 0.9 us
 * slower, so it stays off there (docs/PERFORMANCE.md, round 6). */
DSA_INLINE_ALWAYS void sa_pv(float acc[PV_H][4], __local const uint *kt,
                             __local const float *pl, __local const float *al, uint ph,
                             uint pd, int skip) {
  __local const float4 *a4 = (__local const float4 *)(al + ph * PV_H);
  float4 av[PV_H / 4];
  int same = 1;
#pragma unroll
  for (int h4 = 0; h4 < PV_H / 4; h4++) {
    av[h4] = a4[h4];
    if (skip)
      same &= av[h4].x == 1.0f && av[h4].y == 1.0f && av[h4].z == 1.0f && av[h4].w == 1.0f;
  }
  if (!skip || !same) {
#pragma unroll
    for (int h4 = 0; h4 < PV_H / 4; h4++) {
      const float4 a = av[h4];
#pragma unroll
      for (int c = 0; c < 4; c++) {
        acc[4 * h4][c] *= a.x;
        acc[4 * h4 + 1][c] *= a.y;
        acc[4 * h4 + 2][c] *= a.z;
        acc[4 * h4 + 3][c] *= a.w;
      }
    }
  }
#pragma unroll
  for (int n = 0; n < NT; n++) {
    const uint2 k2 = *(__local const uint2 *)(kt + n * (MLA_DIM / 2) + 2u * pd);
    const float kv[4] = {as_float(k2.x << 16), as_float(k2.x & 0xFFFF0000u),
                         as_float(k2.y << 16), as_float(k2.y & 0xFFFF0000u)};
    __local const float4 *pp = (__local const float4 *)(pl + n * HG + ph * PV_H);
#pragma unroll
    for (int h4 = 0; h4 < PV_H / 4; h4++) {
      const float4 p = pp[h4];
#pragma unroll
      for (int c = 0; c < 4; c++) {
        acc[4 * h4][c] = mad(p.x, kv[c], acc[4 * h4][c]);
        acc[4 * h4 + 1][c] = mad(p.y, kv[c], acc[4 * h4 + 1][c]);
        acc[4 * h4 + 2][c] = mad(p.z, kv[c], acc[4 * h4 + 2][c]);
        acc[4 * h4 + 3][c] = mad(p.w, kv[c], acc[4 * h4 + 3][c]);
      }
    }
  }
}

/* nbuf 3 (SA_NBUF): the phases pipelined over a ring of three tile buffers,
 * two barriers a tile. Step it runs, between its barriers,
 *   A: softmax of tile it-1 (items 0..127), stage tile it+1, QK of tile it;
 *   B: reduce of tile it (items 128..255), PV of tile it-1;
 * so the phases the 128 reduce items run alone (reduce, softmax) overlap the
 * whole group's (QK, PV), and a tile is read by PV a step after its QK
 * (buffer (it+1) % 3 was last read by PV of tile it-2, a barrier before).
 * The same arithmetic in the same order as nbuf 1.
 * nbuf 1 (the _lm32 kernels, 32 KiB devices): one buffer, the phases one
 * after the other, five barriers a tile. */
DSA_INLINE void attn_body(
    const dsa_iset *sa, const dsa_iset *sb, __global const uchar *lens_a, ulong la_off,
    ulong la_st, int has_len_a, __global const uchar *lens_b, ulong lb_off, ulong lb_st,
    int has_len_b, int fused, int clean, __global const uchar *qp, ulong q_off, ulong q_ts,
    ulong q_hs, int q_al, int n_heads, __global const uchar *sink, ulong sink_off, ulong sink_st,
    int has_sink, float scale, __global uchar *out, ulong o_off, ulong o_ts, ulong o_hs,
    int o_al, __global uchar *lse, ulong lse_off, ulong lse_ts, ulong lse_hs, int has_lse,
    __global volatile uint *faults, __local uint *ks, __local float *part, __local float *sl,
    __local float *pl, __local float *al, __local int *vm, __local float *fin, const int nbuf) {
  const uint tid = get_local_id(0);
  const int g = get_group_id(1);
  const ulong t = get_group_id(2);

  int bad = 0;
  const int len_a = set_len(lens_a, la_off, la_st, has_len_a, sa->width, t, &bad);
  const int len_b = fused ? set_len(lens_b, lb_off, lb_st, has_len_b, sb->width, t, &bad) : 0;
  if (bad && tid == 0 && g == 0) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
  const int len = len_a + len_b;
  const int ntiles = (len + NT - 1) / NT;
  /* The logits in log2 units (sa_softmax). */
  const float lsc = scale * M_LOG2E_F;

  const uint qh = tid / DSL, ds = tid % DSL;
  float4 qf[8];
#pragma unroll
  for (int k = 0; k < 8; k++) qf[k] = (float4)(0.0f);
  /* QK mapping: two heads an item (2 qh, 2 qh + 1), q in registers, dims
   * {256 k + 8 ds + i} (k < 2, i < 8): qf[4 e + 2k] holds head e's i < 4,
   * qf[4 e + 2k + 1] its i >= 4. Each unpacked K pair serves both heads (half
   * the local reads and the bf16 unpacks of one head an item, for the same
   * 32 multiply-adds an entry), and a warp reads 32 consecutive 16-byte
   * words. */
#pragma unroll
  for (int e = 0; e < 2; e++) {
    const int qhead = g * HG + 2 * (int)qh + e;
    if (qhead < n_heads) {
      __global const uchar *qrow = qp + q_off + t * q_ts + (ulong)qhead * q_hs;
#pragma unroll
      for (int k = 0; k < 4; k++) {
        const uint2 v = dsa_load8(qrow + ((k / 2) * 256 + ds * 8 + (k % 2) * 4) * 2, q_al);
        qf[4 * e + k] = (float4)(as_float(v.x << 16), as_float(v.x & 0xFFFF0000u),
                                 as_float(v.y << 16), as_float(v.y & 0xFFFF0000u));
      }
    }
  }

  /* Load mapping. */
  const uint lr = tid / 32, lane = tid % 32;
  /* Softmax mapping (tid < 128; also the one-buffer reduce): the running
   * max of head rh and item rn's share of its sum, private. */
  const uint rh = tid / NT, rn = tid % NT;
  const int red = tid < HG * NT;
  /* The ring's reduce runs on the group's other half (items 128..255 as
   * rh2, rn2), so step A's extra work (the softmax) and step B's (the
   * reduce) fall on different warps (H200: 249.6 against 255.1 us,
   * docs/PERFORMANCE.md). The one-buffer schedule keeps the first half. */
  const uint rt = tid ^ (WG / 2u);
  const uint rh2 = rt / NT, rn2 = rt % NT;
  const int red2 = rt < HG * NT;
  float m_run = -INFINITY, l_run = 0.0f;
  /* PV mapping: item (ph = tid / 128, pd = tid % 128) owns dims [4 pd, +4)
   * of heads [8 ph, +8): per entry one float4 of K and two of P. */
  const uint ph = tid / (WG / 2u), pd = tid % (WG / 2u);
  float acc[PV_H][4];
#pragma unroll
  for (int h = 0; h < PV_H; h++) acc[h][0] = acc[h][1] = acc[h][2] = acc[h][3] = 0.0f;

  const int tw = NT * MLA_DIM / 2; /* words a tile buffer */
  dsa_raw raw = fetch_entry(sa, sb, len_a, len, t, (int)lr, lane, fused, faults);
  if (nbuf == 3) {
    if (ntiles > 0) sa_stage(&raw, lr, lane, fused, clean, ks, vm);
    if (ntiles > 1) raw = fetch_entry(sa, sb, len_a, len, t, NT + (int)lr, lane, fused, faults);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int it = 0; it <= ntiles; it++) {
      const int b0 = it % 3, b1 = (it + 1) % 3, bp = (it + 2) % 3; /* bp: tile it-1 */
      /* A. The softmax first: its exp2 and local reads then overlap the
       * stage and QK rather than trailing them into the barrier (H200,
       * forced portable T=64 H=64: 247.0 against 248.4 us; after the stage,
       * 247.3; QK before the stage, 251.5; docs/PERFORMANCE.md, round 6). */
      if (it > 0 && red) sa_softmax(sl, pl, al, rh, rn, &m_run, &l_run);
      if (it + 1 < ntiles) {
        sa_stage(&raw, lr, lane, fused, clean, ks + b1 * tw, vm + b1 * NT);
        if (it + 2 < ntiles)
          raw = fetch_entry(sa, sb, len_a, len, t, (it + 2) * NT + (int)lr, lane, fused, faults);
      }
      if (it < ntiles) sa_qk(qf, ks + b0 * tw, part, qh, ds);
      barrier(CLK_LOCAL_MEM_FENCE);
      /* B (PV before the reduce: 252.5 us) */
      if (it < ntiles && red2) sa_reduce(part, sl, vm + b0 * NT, rh2, rn2, lsc);
      if (it > 0) sa_pv(acc, ks + bp * tw, pl, al, ph, pd, 0);
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  } else {
    for (int it = 0; it < ntiles; it++) {
      sa_stage(&raw, lr, lane, fused, clean, ks, vm);
      barrier(CLK_LOCAL_MEM_FENCE);
      if (it + 1 < ntiles)
        raw = fetch_entry(sa, sb, len_a, len, t, (it + 1) * NT + (int)lr, lane, fused, faults);
      sa_qk(qf, ks, part, qh, ds);
      barrier(CLK_LOCAL_MEM_FENCE);
      if (red) sa_reduce(part, sl, vm, rh, rn, lsc);
      barrier(CLK_LOCAL_MEM_FENCE);
      if (red) sa_softmax(sl, pl, al, rh, rn, &m_run, &l_run);
      barrier(CLK_LOCAL_MEM_FENCE);
      sa_pv(acc, ks, pl, al, ph, pd, 1);
      barrier(CLK_LOCAL_MEM_FENCE); /* ks, vm rewritten next */
    }
  }

  /* The head's sum: its 8 items' shares (sa_softmax; pl is free now). */
  if (red) pl[rn * HG + rh] = l_run;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (red && rn == 0) {
    l_run = 0.0f;
#pragma unroll
    for (int n = 0; n < NT; n++) l_run += pl[n * HG + rh];
  }
  /* Final: fin[h] = 1 / (l + e^{sink - m}) (0 for an empty row), lse:
   * sa_finish with m in log2 units, 1 / (l + 2^{sink log2 e - m}) and
   * lse = m ln 2 + ln l. */
  if (red && rn == 0) {
    const int head = g * HG + (int)rh;
    float inv = 0.0f, lv = -INFINITY;
    if (m_run != -INFINITY && head < n_heads) {
      float den = l_run;
      if (has_sink)
        den += exp2(*(__global const float *)(sink + sink_off + (ulong)head * sink_st) *
                        M_LOG2E_F - m_run);
      inv = 1.0f / den;
      lv = m_run * M_LN2_F + log(l_run);
    }
    fin[rh] = inv;
    if (has_lse && head < n_heads)
      *(__global float *)(lse + lse_off + t * lse_ts + (ulong)head * lse_hs) = lv;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
  for (int h = 0; h < PV_H; h++) {
    const int head = g * HG + (int)(ph * PV_H) + h;
    if (head < n_heads) {
      const float inv = fin[ph * PV_H + (uint)h];
      const uint v0 = (uint)dsa_f32_to_bf16(acc[h][0] * inv) |
                      ((uint)dsa_f32_to_bf16(acc[h][1] * inv) << 16);
      const uint v1 = (uint)dsa_f32_to_bf16(acc[h][2] * inv) |
                      ((uint)dsa_f32_to_bf16(acc[h][3] * inv) << 16);
      __global uchar *dst = out + o_off + t * o_ts + (ulong)head * o_hs + pd * 8u;
      if (o_al) {
        ((__global uint *)dst)[0] = v0;
        ((__global uint *)dst)[1] = v1;
      } else {
        vstore4((ushort4)((ushort)v0, (ushort)(v0 >> 16), (ushort)v1, (ushort)(v1 >> 16)), 0,
                (__global ushort *)dst);
      }
    }
  }
}

#define ATTN_LOCALS(NBUF)                                                            \
  /* float4 accesses below: 16-byte alignment is not implied by float. */     \
  __local uint ks[(NBUF) * NT * MLA_DIM / 2] __attribute__((aligned(16)));     \
  __local float part[HG * PSTRIDE] __attribute__((aligned(16)));               \
  __local float sl[HG * NT] __attribute__((aligned(16)));                      \
  __local float pl[NT * HG] __attribute__((aligned(16)));                      \
  __local float al[HG] __attribute__((aligned(16)));                           \
  __local float fin[HG] __attribute__((aligned(16)));                          \
  __local int vm[(NBUF) * NT]

/* NBUF 3: the ring of three tile buffers (42,208 B of local memory); 1: for
 * devices with OpenCL's guaranteed 32 KiB (25,760 B). */
#define SA_BF16_BODY(NBUF, CLEAN)                                                              \
  attn_body(&sa, &sa, lens_mem, lens_off, lens_s0, has_lens, lens_mem, lens_off, lens_s0, 0, 0, \
            CLEAN, SA_Q_ARGS, q_al >= 8u, n_heads, SA_OUT_ARGS, out_al >= 4u, SA_LSE_ARGS, ks,  \
            part, sl, pl, al, vm, fin, NBUF)
/* kv_clean (the gather's rows, NaN already zeroed) takes a copy of the body
 * built without the stage's NaN masking: a run-time test in the stage kept
 * most of its cost (H100: 271.7 us against 269.1, docs/PERFORMANCE.md). */
#define SA_BF16_BODIES(NBUF)                                                                   \
  if (kv_clean)                                                                                \
    SA_BF16_BODY(NBUF, 1);                                                                     \
  else                                                                                         \
    SA_BF16_BODY(NBUF, 0)
#define SA_BF16_KERNEL(NAME, NBUF)                                                             \
  __kernel SA_WG_ATTR void NAME(SA_BF16_PARAMS) {                                              \
    ATTN_LOCALS(NBUF);                                                                         \
    dsa_iset sa = SA_ISET_BF16;                                                                \
    SA_BF16_BODIES(NBUF);                                                                      \
  }

/* An absent set has width 0: its lengths are never read. */
#define SA_FUSED_KERNEL(NAME, NBUF)                                                            \
  __kernel SA_WG_ATTR void NAME(SA_FUSED_PARAMS) {                                             \
    ATTN_LOCALS(NBUF);                                                                         \
    dsa_iset sa = SA_ISET(a);                                                                  \
    dsa_iset sb = SA_ISET(b);                                                                  \
    attn_body(&sa, &sb, la_mem, la_off, la_s0, SA_HAS_LEN(ka, hla), lb_mem, lb_off, lb_s0,   \
              SA_HAS_LEN(kb, hlb), 1, 0,                                                       \
              SA_Q_ARGS, q_al >= 8u, n_heads, SA_OUT_ARGS, out_al >= 4u, SA_LSE_ARGS, ks, part, \
              sl, pl, al, vm, fin, NBUF);                                                      \
  }

SA_BF16_KERNEL(sparse_attn_bf16, 3)
SA_BF16_KERNEL(sparse_attn_bf16_lm32, 1)
SA_FUSED_KERNEL(sparse_mla_decode_fused, 3)
SA_FUSED_KERNEL(sparse_mla_decode_fused_lm32, 1)

/* ---- The gather's helpers. None of them takes or returns a struct by
 * value: Oclgrind 21.10 cannot run llvm.experimental.noalias.scope.decl
 * ("Undefined external function", WorkItem.cpp:1681) and refuses to create
 * any kernel of a program holding one. LLVM's inliner emits that call for
 * each noalias argument of a function it inlines, a struct return (sret)
 * among them; it stays when the memory it scopes does: mla9's gather (a
 * dsa_ref from an inlined ref_resolve passed by value to load_entry, which
 * its second caller left out of line in Oclgrind's optimised build) hit it,
 * and at -cl-opt-disable so does any DSA_INLINE_ALWAYS function returning a
 * struct (docs/TESTING.md, "Oclgrind and
 * llvm.experimental.noalias.scope.decl"). load_lane (returns a dsa_raw) stays
 * out of line there, as in the attention kernels. */

/* The index of entry j, read before the lengths are known: row j of the
 * list with both sets at full length (set A's j, else set B's j - ka). It is
 * the virtual list's entry whenever j < len_a or set A is full (len_a = ka,
 * as in every decode step past the window's fill); only a row of set B after
 * a short set A reads its index again, once the lengths are in (gp_slot).
 * So the index read (and the data read after it) does not wait for the
 * lengths (on its own within noise on the H200; measured and kept with
 * gp_lane, docs/PERFORMANCE.md, round 5). */
DSA_INLINE int gp_guess(__global const uchar *ia, ulong ia_off, ulong ia_ts, ulong ia_cs, int ka,
                        __global const uchar *ib, ulong ib_off, ulong ib_ts, ulong ib_cs,
                        ulong t, int j) {
  return j < ka ? *(__global const int *)(ia + ia_off + t * ia_ts + (ulong)j * ia_cs)
                : *(__global const int *)(ib + ib_off + t * ib_ts + (ulong)(j - ka) * ib_cs);
}

/* Entry j's slot from gp_guess's index once the lengths are known, as
 * ref_entry resolves it (fused): -1 for an unused entry or one past its
 * set's capacity (the latter also a fault). */
DSA_INLINE int gp_slot(int guess, __global const uchar *ib, ulong ib_off, ulong ib_ts,
                       ulong ib_cs, long cap_a, long cap_b, int ka, int len_a, int len, ulong t,
                       int j, uint lane, __global volatile uint *faults) {
  const int in_b = j >= len_a;
  int raw = guess;
  if (j < len && in_b && len_a != ka)
    raw = *(__global const int *)(ib + ib_off + t * ib_ts + (ulong)(j - len_a) * ib_cs);
  return ref_check(raw, j < len, in_b ? cap_b : cap_a, lane, 1, faults);
}

/* Lane `lane` of a gathered entry as 8 bf16 pairs; clean: NaN halves zeroed
 * (equal to lane_bf16 then sa_nonan on every word). A NaN can only come from
 * the dequantization's exact path (the integer path never makes one:
 * dsa_dequant4_e4m3_bf16_fast) or from the RoPE lanes' raw bf16, so only
 * those are masked, the RoPE lanes after one test of all 8 words: the warp
 * runs both lane kinds' code, and masking every word took ~40 integer
 * operations on each (H200, forced portable T=64 H=64: 248.8 against 250.1
 * us, docs/PERFORMANCE.md, round 5). */
DSA_INLINE void gp_lane(const dsa_raw *raw, uint lane, int clean, uint w[8]) {
  if (lane < NOPE_LANES) {
    const uint u = (raw->u >> raw->ush) & 0xFFu;
    const uint x[4] = {raw->r0.x, raw->r0.y, raw->r0.z, raw->r0.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      uint2 o;
      if (dsa_dequant4_e4m3_special(x[i], u)) {
        o = dsa_dequant4_e4m3_bf16_exact(x[i], u);
        if (clean) o = (uint2)(sa_nonan(o.x), sa_nonan(o.y));
      } else {
        o = dsa_dequant4_e4m3_bf16_fast(x[i], u);
      }
      w[2 * i] = o.x, w[2 * i + 1] = o.y;
    }
  } else {
    w[0] = raw->r0.x, w[1] = raw->r0.y, w[2] = raw->r0.z, w[3] = raw->r0.w;
    w[4] = raw->r1.x, w[5] = raw->r1.y, w[6] = raw->r1.z, w[7] = raw->r1.w;
    if (clean) {
      /* sa_nonan's carry test on all words at once: bit 15 or 31 of some
       * (w & 0x7FFF7FFF) + 0x007F007F is set iff some half is a NaN. */
      uint any = 0u;
#pragma unroll
      for (int i = 0; i < 8; i++) any |= (w[i] & 0x7FFF7FFFu) + 0x007F007Fu;
      if (any & 0x80008000u) {
#pragma unroll
        for (int i = 0; i < 8; i++) w[i] = sa_nonan(w[i]);
      }
    }
  }
}

/* Two-stage decode, stage 1: gather the used entries and pack the indices
 * into the workspace: rows [T*Ktot, 512] bf16 (1024-byte rows), indices
 * [T, Ktot] i32, lengths [T] i32. */
__kernel __attribute__((reqd_work_group_size(32, GROWS, 1))) void sparse_mla_gather_pack(
    SA_SET(a), SA_SET(b), DSA_TENSOR2(wsr), DSA_TENSOR2(wsi), DSA_TENSOR1(wsl), int clean,
    DSA_FAULTS) {
  const uint lane = get_local_id(0);
  const int j = get_global_id(1);
  const ulong t = get_global_id(2);
  const int ktot = ka + kb;
  if (j >= ktot) return;
  dsa_iset sa = SA_ISET(a);
  dsa_iset sb = SA_ISET(b);
  const int guess = gp_guess(ia_mem, ia_off, ia_s0, ia_s1, ka, ib_mem, ib_off, ib_s0, ib_s1, t, j);
  int bad = 0;
  const int len_a = set_len(la_mem, la_off, la_s0, SA_HAS_LEN(ka, hla), ka, t, &bad);
  const int len_b = set_len(lb_mem, lb_off, lb_s0, SA_HAS_LEN(kb, hlb), kb, t, &bad);
  const int len = len_a + len_b;
  const int slot = gp_slot(guess, ib_mem, ib_off, ib_s0, ib_s1, sa.capacity, sb.capacity, ka,
                           len_a, len, t, j, lane, faults);
  const ulong row = t * (ulong)ktot + (ulong)j;
  if (j == 0 && lane == 0) {
    if (bad) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
    *(__global int *)(wsl_mem + wsl_off + t * wsl_s0) = len;
  }
  /* The data read is issued before the index store (mla9's measured order;
   * the store first read the same, docs/PERFORMANCE.md, round 6). */
  dsa_raw raw;
  if (slot >= 0) raw = j >= len_a ? load_lane(&sb, slot, lane, 1) : load_lane(&sa, slot, lane, 1);
  if (lane == 0)
    *(__global int *)(wsi_mem + wsi_off + t * wsi_s0 + (ulong)j * wsi_s1) = slot >= 0 ? (int)row : -1;
  if (slot < 0) return;
  /* clean (the attention is a portable kernel): NaN halves zeroed here,
   * once an entry, and that kernel's stage skips it (kv_clean). The tile
   * kernels mask their own tiles: left as it was for them. */
  uint w[8];
  gp_lane(&raw, lane, clean, w);
  __global uchar *dst = wsr_mem + wsr_off + row * wsr_s0 + lane * 32u;
  dsa_store16(dst, (uint4)(w[0], w[1], w[2], w[3]), wsr_al >= 16);
  dsa_store16(dst + 16, (uint4)(w[4], w[5], w[6], w[7]), wsr_al >= 16);
}

/* ---- Tile kernels (cl/dsa_tile.h): one body for every matrix back-end ------
 * sparse_attn_bf16_tile, sparse_mla_decode_fused_tile: same arguments (the
 * fused one with its split-K arguments after them), grid (MT_WG x splits,
 * ceil(H / MT_HG), T), one work-group per (token, MT_HG heads, split); its
 * units (DSA_TILE_LANES work-items each) issue the tile atoms. Per tile of
 * MT_NT = 16 entries of the virtual list (the bf16 kernel's stage here;
 * the fused kernel's copy ring and single bf16 copy: below, before
 * fd_issue):
 *   stage  item (pair p = tid % 8, segment l = tid / 8) dequantizes entries
 *          2p, 2p+1, dims [16 l, +16) to bf16 once for all the group's heads
 *          (NaN -> 0, masked -> 0) and writes them twice: kd[entry][dim pair]
 *          (QK's B operand, MT_KDP words a row) and vt[dim][entry pair] (PV's
 *          B operand, 8 words a row, each 16 rows followed by 8 pad words:
 *          the 32 stores of a warp, 8 pairs x 4 segments, hit distinct
 *          banks; 4-way conflicts without, 9 % slower fused on the H100);
 *   QK     unit (row block rb, key group kg, dim slice ds) multiplies the
 *          query rows [rb M, +M) (A: fragments kept in registers where
 *          DSA_TILE_A_REGS, else read from local memory) by the keys of its
 *          blocks over dims [ds MT_DSD, +MT_DSD); partial logits to `part`;
 *   soft   item (head h = tid / 8, keys 2q, 2q+1, q = tid % 8): the sum of the
 *          MT_DS partials, scale, mask; the head's max over its 16 logits by
 *          sub-group shuffles (dsa_tile_max8; the bf16 kernel, and the fused
 *          one with FD_SHFL) or through sl and a barrier; then the online
 *          softmax in fp32 (the fused kernel's in log2 units): a lazy
 *          running max (MT_LAZY: moved only by more than MT_TAU, so the
 *          P V rescale is skipped in most tiles; the same in the 8 items
 *          of a head), this item's share of the running sum (the shares are
 *          added at the end), alpha per head, and P split into bf16 hi + lo
 *          (P as one bf16 is 2^-9 relative per weight: outside SPEC.md's
 *          tolerance at large |V|; hi + lo keeps ~16 bits);
 *   PV     unit (row block rb, dim slice ps): O[rows x dims [ps MT_PD, +MT_PD)]
 *          = O * alpha + P_hi . V + P_lo . V, fp32 accumulators in the atoms'
 *          C fragments (registers, MT_HG * 512 / MT_WG a work-item).
 * Five barriers a tile (stage | QK | logits | P | PV), four with the
 * shuffled max. The output is staged
 * as bf16 in the tile buffer and written in 16-byte pieces. Each item
 * reads its two entries' indices one tile ahead of their data read and
 * checks them (ref_resolve) only when that read needs them. Local memory:
 * src/op_sparse_mla.c (mt_local_bytes); 47,680 B on
 * NVIDIA (48 KiB there), 89,152 B on the portable back-end (Q in local
 * memory, 8 dim slices), which therefore leaves the 48/64 KiB GPUs to the
 * portable kernels above. */
#include "dsa_tile.h"

#if MT_NT != 16 || MT_HG * MT_NT / 2 != MT_WG || MT_NT / 2 * 32 != MT_WG || MT_KDP % 4
#error "sparse_mla.cl: the tile mappings need MT_NT 16, MT_HG * 8 = 32 * 8 = MT_WG items"
#endif
#define MT_U (MT_WG / DSA_TILE_LANES)    /* units */
/* The tile kernels' softmax (tile_body): the lazy running max (MT_LAZY)
 * and, in the fused kernel, log2 units (MT_EXP2), each 1 on, 0 off (build
 * options for measurements); MT_TAU, MT_TAU2 its step in e and 2 units. */
#ifndef MT_LAZY
#define MT_LAZY 1
#endif
/* FD_VOTE 1 (NVIDIA, the lazy max): the fused kernel's softmax takes one
 * warp vote on whether a logit of the warp moves the lazy max, and skips
 * the shuffled max where none does (H200 -0.3 to -0.9 %); P x V's rescale
 * test reads its row block's four votes (in fin's room: NVIDIA's warps of
 * 32 hold 4 heads, 4 warps a row block of 16) instead of 16 alphas (-0.5
 * to -0.7 %). 0: the shuffles and the alphas' test. */
#ifndef FD_VOTE
#define FD_VOTE 1
#endif
#if FD_VOTE && !(DSA_TILE_MAX8 && DSA_HAS_NV_PTX && MT_LAZY)
#undef FD_VOTE
#define FD_VOTE 0
#endif
#if FD_VOTE && (DSA_TILE_M != 16 || MT_NT != 16 || MT_WG / 32 > MT_HG)
#error "sparse_mla.cl: the votes need 16-row blocks of 4 warps of 32"
#endif
#ifndef MT_EXP2
#define MT_EXP2 1
#endif
#define MT_TAU 8.0f   /* e^8 */
#define MT_TAU2 11.0f /* 2^11 */
/* e^x, or 2^x where the softmax is in log2 units (e2): native_exp2, one
 * MUFU.EX2 on NVIDIA (dsa_nv_ex2) where exp2 adds a range test and two
 * predicated multiplies (its subnormal results; ~2^-22 relative either
 * way, and P is kept to ~16 bits as bf16 hi + lo). */
DSA_INLINE float mt_exp(float x, int e2) {
#if DSA_HAS_NV_PTX
  return e2 ? dsa_nv_ex2(x) : exp(x);
#else
  return e2 ? native_exp2(x) : exp(x);
#endif
}
#define MT_RB (MT_HG / DSA_TILE_M)       /* row blocks */
#define MT_NBK (MT_NT / DSA_TILE_N)      /* key blocks */
#if DSA_TILE_A_REGS
#define MT_KG 1 /* a unit takes every key block: its q fragments serve them all */
#else
#define MT_KG MT_NBK
#endif
#define MT_NKB (MT_NBK / MT_KG)         /* key blocks per unit */
#define MT_DS (MT_U / (MT_RB * MT_KG))   /* QK dim slices */
#define MT_DSD (MLA_DIM / MT_DS)
#define MT_KS (MT_DSD / DSA_TILE_K)      /* QK k-steps */
#define MT_PS (MT_U / MT_RB)             /* PV dim slices */
#define MT_PD (MLA_DIM / MT_PS)
#define MT_PJ (MT_PD / DSA_TILE_N)       /* PV atoms per unit */
#define MT_PK (MT_NT / DSA_TILE_K)       /* PV k-steps */
#define MT_VTP (MT_NT / 2)               /* vt row: the tile's entry pairs */
#define MT_PP (MT_NT / 2 + 4)            /* P row */
#define MT_VTG (16 * MT_VTP + 8)         /* words per 16 vt rows (padded) */
#define MT_KV_WORDS (MT_NT * MT_KDP + MLA_DIM / 16 * MT_VTG)
#define MT_KBUF (MT_KV_WORDS > MT_HG * MT_KDP ? MT_KV_WORDS : MT_HG * MT_KDP)
#if MT_U % (MT_RB * MT_KG) || MT_DS < 1 || MT_DSD % DSA_TILE_K || MT_U % MT_RB || \
    MT_PD % DSA_TILE_N || MT_NT % DSA_TILE_K || MT_NT % DSA_TILE_N
#error "sparse_mla.cl: tile geometry does not divide"
#endif

/* Entries 2p, 2p+1 (raw r0, r1), dims [16 l, +16), into kd and vt. */
DSA_INLINE void mt_stage(const dsa_raw *r0, const dsa_raw *r1, uint p, uint l, int fused,
                         __local uint *kd, __local uint *vt, __local int *vm) {
  uint w0[8], w1[8];
  lane_bf16(r0, l, fused, w0);
  lane_bf16(r1, l, fused, w1);
#pragma unroll
  for (int i = 0; i < 8; i++) {
    w0[i] = r0->valid ? sm_nonan(w0[i]) : 0u;
    w1[i] = r1->valid ? sm_nonan(w1[i]) : 0u;
  }
  __local uint4 *d0 = (__local uint4 *)(kd + (2u * p) * MT_KDP + l * 8u);
  __local uint4 *d1 = (__local uint4 *)(kd + (2u * p + 1u) * MT_KDP + l * 8u);
  d0[0] = (uint4)(w0[0], w0[1], w0[2], w0[3]);
  d0[1] = (uint4)(w0[4], w0[5], w0[6], w0[7]);
  d1[0] = (uint4)(w1[0], w1[1], w1[2], w1[3]);
  d1[1] = (uint4)(w1[4], w1[5], w1[6], w1[7]);
  __local uint *v = vt + l * MT_VTG + p;
#pragma unroll
  for (int j = 0; j < 8; j++) {
    v[(2 * j) * MT_VTP] = (w0[j] & 0xFFFFu) | (w1[j] << 16);
    v[(2 * j + 1) * MT_VTP] = (w0[j] >> 16) | (w1[j] & 0xFFFF0000u);
  }
  if (l == 0u) vm[2u * p] = r0->valid, vm[2u * p + 1u] = r1->valid;
}

/* The end of a tile body: the head's running sum from its 8 shares (item
 * (head sg, pair sp) holds one in l_part), then the unsplit finish (sink,
 * lse, the bf16 rows staged in kbuf and written in 16-byte pieces) or a
 * split's partial rows and (m, l). Called by every item after the loop. */
DSA_INLINE_ALWAYS void mt_finish(const dsa_tile_c *acc, float m_run, float l_part, uint tid,
                                 uint sg, uint sp, uint rb, uint ps, int g, ulong t, int split,
                                 int n_heads, __global const uchar *sink, ulong sink_off,
                                 ulong sink_st, int has_sink, __global uchar *out, ulong o_off,
                                 ulong o_ts, ulong o_hs, int o16, __global uchar *lse,
                                 ulong lse_off, ulong lse_ts, ulong lse_hs, int has_lse,
                                 const int nsplit, __global uchar *ws, __local uint *kbuf,
                                 __local float *sl, __local float *fin) {
  sl[sg * (MT_NT / 2) + sp] = l_part;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (nsplit > 1) {
    const ulong prow = (t * (ulong)nsplit + (ulong)split) * (ulong)n_heads; /* rows of heads */
    const int head = g * MT_HG + (int)sg;
    if (sp == 0u && head < n_heads) {
      float l_run = 0.0f;
#pragma unroll
      for (int i = 0; i < MT_NT / 2; i++) l_run += sl[sg * (MT_NT / 2) + (uint)i];
      __global float *ml = (__global float *)(ws + get_num_groups(2) * (ulong)nsplit *
                                                       (ulong)n_heads * (MLA_DIM * 4)) +
                           (prow + (ulong)head) * 2u;
      ml[0] = m_run;
      ml[1] = l_run;
    }
    /* The partial rows; where a lane's elements 2i, 2i + 1 are one row's
     * consecutive columns (DSA_TILE_CPAIR), as one 8-byte store. (Session
     * 18's profile: the scalar stores' block took 8.5 % of the stall
     * samples at T=64 H=64, 64 STG a work-item.) */
#pragma unroll
    for (int j = 0; j < MT_PJ; j++)
#pragma unroll
      for (int e = 0; e < DSA_TILE_CE; e += 1 + DSA_TILE_CPAIR) {
        const int hd = g * MT_HG + (int)(rb * DSA_TILE_M + dsa_tile_row(e));
        const uint col = ps * MT_PD + (uint)j * DSA_TILE_N + dsa_tile_col(e);
        __global float *pr = (__global float *)ws + (prow + (ulong)hd) * MLA_DIM + col;
        if (hd < n_heads) {
#if DSA_TILE_CPAIR
          *(__global float2 *)pr = (float2)(acc[j].v[e], acc[j].v[e + 1]);
#else
          *pr = acc[j].v[e];
#endif
        }
      }
    return; /* after the last barrier */
  }
  if (sp == 0u) {
    const int head = g * MT_HG + (int)sg;
    float l_run = 0.0f;
#pragma unroll
    for (int i = 0; i < MT_NT / 2; i++) l_run += sl[sg * (MT_NT / 2) + (uint)i];
    float lv;
    const float inv = sa_finish(m_run, l_run, head < n_heads, has_sink,
                                sink + sink_off + (ulong)head * sink_st, &lv);
    fin[sg] = inv;
    if (has_lse && head < n_heads)
      *(__global float *)(lse + lse_off + t * lse_ts + (ulong)head * lse_hs) = lv;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  /* The output rows as bf16 in the tile buffer (256 words a row). */
  {
    __local ushort *os = (__local ushort *)kbuf;
#pragma unroll
    for (int j = 0; j < MT_PJ; j++)
#pragma unroll
      for (int e = 0; e < DSA_TILE_CE; e++) {
        const uint row = rb * DSA_TILE_M + dsa_tile_row(e);
        const uint col = ps * MT_PD + (uint)j * DSA_TILE_N + dsa_tile_col(e);
        os[row * MLA_DIM + col] = dsa_f32_to_bf16(acc[j].v[e] * fin[row]);
      }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint idx = tid; idx < MT_HG * 64u; idx += MT_WG) {
    const uint h = idx >> 6, c = idx & 63u;
    const int head = g * MT_HG + (int)h;
    if (head < n_heads)
      dsa_store16(out + o_off + t * o_ts + (ulong)head * o_hs + c * 16u,
                  *(__local const uint4 *)(kbuf + h * (MLA_DIM / 2) + c * 4u), o16);
  }
}

/* ---- The fused decode's copy ring (sparse_mla_decode_fused_tile) ----------
 * tile_body with fused = 1 fetches the cache entries by asynchronous copies
 * (cl/dsa_async.h: cp.async on NVIDIA, a plain load and store elsewhere)
 * into a ring of MT_ST raw tiles in local memory. The register prefetch it
 * replaces (the bf16 kernel's, one tile ahead) held ~20 registers an item
 * and waited for its data at the stage's stores: half of the old fused
 * tile's time was that wait (docs/PERFORMANCE.md). A raw entry is its 576
 * data bytes and 8 scale bytes (FD_EB = 592 with padding; FP8 is half the
 * size of bf16, so two slots fit next to the bf16 tile in 48 KiB), copied
 * by 16 items (item (ce = tid / 16, cq = tid % 16): 16-byte pieces cq,
 * cq + 16, cq + 32 < 36, the scales by cq = 15). Per tile it:
 *   dequant   slot it % MT_ST into kd, one bf16 copy (fd_dequant: warp w
 *             takes entries w and w + 8 in two rounds, NaN -> 0, unused
 *             -> 0), and the masks into vk for the logits step; barrier;
 *   issue     tile it + MT_ST into the slot just emptied, from its copy
 *             records (fd_record: addresses resolved a tile or two ahead,
 *             two tiles at a time by one warp at even tiles), so MT_ST tiles
 *             are in flight through QK, softmax and P x V; at even tiles the
 *             next two tiles' index reads (in the P x V phase);
 *   QK, logits, softmax, P x V   as for the bf16 kernel, except that P x V
 *             reads V as kd's rows transposed (dsa_tile_load_bt: ldmatrix
 *             .trans on NVIDIA), so there is no transposed copy vt, and P
 *             hi and lo live in the logits' space (FD_PW: sl with FD_SHFL,
 *             the head's max by shuffles; else the partials');
 *   wait      for tile it + 1's copies (cp.async.wait_group MT_ST - 1),
 *             barrier.
 * Local memory (FD_LOCAL_BYTES, the host's fd_local_bytes): max(kd + ring,
 * query rows, bf16 output rows) + partials + logits + alpha + 1/l + the
 * ring's and the tile's masks + the copy records: 48,272 B on NVIDIA. The
 * portable back-end's form (query rows in local memory, 8 dim slices) is
 * 88 KB, so 48/64 KiB
 * devices without a matrix back-end keep the portable kernels. */
/* FD_EB (ring bytes an entry, 592) comes from the launcher
 * (src/op_sparse_mla.c), which sizes the ring's local memory by it. */
#define FD_RING (MT_ST * MT_NT * FD_EB / 4) /* ring words */
/* The copy records (fd_record): FD_NB tiles' at a time, by the first FD_RB
 * items, every FD_NB tiles, into FD_RS = FD_NB + 1 tiles' slots (the batch
 * writes tiles it + MT_ST + 1 .. + FD_NB while tile it + MT_ST's are read:
 * the slot it overwrites was read a tile before). */
#ifndef FD_NB
#define FD_NB 2
#endif
/* FD_NB 4 (two warps every four tiles; 100 B of spills) measured no
 * faster than 2 (docs/PERFORMANCE.md, session 20). */
#define FD_RS (FD_NB + 1)
#define FD_RB (FD_NB * MT_NT)
#define FD_KV (MT_NT * MT_KDP + FD_RING)
#define FD_KBUF0 (FD_KV > MT_HG * MT_KDP ? FD_KV : MT_HG * MT_KDP)
#define FD_KBUF (FD_KBUF0 > MT_HG * MLA_DIM / 2 ? FD_KBUF0 : MT_HG * MLA_DIM / 2)
/* P hi and lo (2 MT_HG MT_PP words) share the logits' space where the
 * softmax takes its max by shuffles (FD_SHFL; sl is then free during the
 * loop), else the partials' (free once the logits are summed, a barrier
 * before). */
#if DSA_TILE_MAX8 && FD_SHFL
#define FD_PART (MT_DS * MT_HG * MT_NT)
#define FD_SL (MT_HG * MT_NT > 2 * MT_HG * MT_PP ? MT_HG * MT_NT : 2 * MT_HG * MT_PP)
#define FD_PW sl
#else
#define FD_PART                                                                        \
  (MT_DS * MT_HG * MT_NT > 2 * MT_HG * MT_PP ? MT_DS * MT_HG * MT_NT : 2 * MT_HG * MT_PP)
#define FD_SL (MT_HG * MT_NT)
#define FD_PW part
#endif
#if MT_WG != 16 * MT_NT || MT_ST < 1 || (MT_NT * MT_KDP) % 4 || MT_NT % (MT_WG / 32)
#error "sparse_mla.cl: the fused tile kernel's copy mapping needs MT_WG = 16 MT_NT, MT_ST >= 1"
#endif

/* Entry slot r's data and scale addresses in its set's cache (fused tile
 * kernel: the division-free block, iset_block_fast). */
DSA_INLINE ulong2 fd_addr(const dsa_iset *a, const dsa_iset *b, dsa_ref r) {
  const dsa_iset *s = r.in_b ? b : a;
  const uint2 bt = iset_block_fast(s, (uint)r.slot);
  const ulong base = s->c_off + (ulong)bt.x * s->c_bstride;
  return (ulong2)((ulong)(s->cache + base + (ulong)bt.y * MLA_DATA_BYTES),
                  (ulong)(s->cache + base + (ulong)s->block_size * MLA_DATA_BYTES +
                          (ulong)bt.y * 8u));
}

/* Item q's (0..15) pieces of the entry at ad (data, scale addresses) into
 * the ring slot at rs (FD_EB bytes an entry), where `used` (an unused
 * entry's addresses are never dereferenced): asynchronous copies,
 * predicated rather than branched around (NVIDIA: a branch over an asm
 * statement stays a branch; H200 -0.3 to -1.0 % in the copies from the
 * records, session 20), or plain loads done here for an unaligned cache (a
 * view at an odd offset). */
DSA_INLINE void fd_copy(ulong2 ad, int aligned, int used, uint q, __local uchar *rs) {
  __global const uchar *data = (__global const uchar *)ad.x, *sc = (__global const uchar *)ad.y;
  if (!used || aligned) {
    dsa_async_copy16_if(rs + 16u * q, data + 16u * q, used);
    dsa_async_copy16_if(rs + 16u * (q + 16u), data + 16u * (q + 16u), used);
    dsa_async_copy16_if(rs + 16u * (q + 32u), data + 16u * (q + 32u), used && q < 4u);
    dsa_async_copy8_if(rs + MLA_DATA_BYTES, sc, used && q == 15u);
  } else {
    *(__local uint4 *)(rs + 16u * q) = dsa_load16(data + 16u * q, 0);
    *(__local uint4 *)(rs + 16u * (q + 16u)) = dsa_load16(data + 16u * (q + 16u), 0);
    if (q < 4u) *(__local uint4 *)(rs + 16u * (q + 32u)) = dsa_load16(data + 16u * (q + 32u), 0);
    if (q == 15u) *(__local uint2 *)(rs + MLA_DATA_BYTES) = dsa_load8(sc, 0);
  }
}

/* Issue item q's pieces of resolved entry r (slot < 0: nothing, masked). */
DSA_INLINE void fd_issue(const dsa_iset *a, const dsa_iset *b, dsa_ref r, uint q,
                         __local uchar *rs) {
  if (r.slot >= 0) fd_copy(fd_addr(a, b, r), (r.in_b ? b : a)->c_aligned, 1, q, rs);
}

/* The copy records: one warp resolves FD_NB tiles' 16 indices each and
 * computes each entry's data and scale addresses one to FD_NB tiles before
 * the copies go out (lane e: entry e % 16 of tile e / 16 of the batch;
 * unused: flag 0); every item then issues its
 * pieces from the record. Where each item resolved and addressed its own
 * entry, every warp ran the same ~100 instructions a tile (set selects,
 * block and token, 64-bit products). Flags: 1 used, 2 aligned cache. */
DSA_INLINE void fd_record(const dsa_iset *a, const dsa_iset *b, dsa_ref r, __local ulong2 *rec,
                          __local int *fl) {
  if (r.slot < 0) {
    *rec = (ulong2)(0ul); /* read by fd_copy, never dereferenced */
    *fl = 0;
    return;
  }
  *rec = fd_addr(a, b, r);
  *fl = 1 | ((r.in_b ? b : a)->c_aligned ? 2 : 0);
}
DSA_INLINE void fd_issue_rec(__local const ulong2 *rec, int fl, uint q, __local uchar *rs) {
  fd_copy(*rec, fl & 2, fl & 1, q, rs);
}

/* Dim lane L (dims [16 L, +16)) of the ring entry at rs into its kd row,
 * NaN -> 0, unused (valid 0) -> 0. A NoPE lane tests its four words once
 * (dsa_dequant4_e4m3_special) and takes the integer path for all four (one
 * scale block, no NaN to zero: that path's exponent fields stay below 255)
 * or the exact one, NaN zeroed; a RoPE lane zeroes NaN in its 16 bf16. The
 * two 16-byte stores go in the order (l / 4) % 2 of the work-item's lane l
 * in its warp, so a quarter-warp's 8 stores hit 32 distinct banks (in lane
 * order, lanes l and l + 4 shared banks: twice the wavefronts). */
DSA_INLINE void fd_store(const uint *w, uint L, uint l, __local uint *row) {
  const int sw = (int)((l >> 2) & 1u);
  __local uint4 *d = (__local uint4 *)(row + L * 8u);
  const uint4 lo = (uint4)(w[0], w[1], w[2], w[3]), hi = (uint4)(w[4], w[5], w[6], w[7]);
  d[sw] = sw ? hi : lo;
  d[1 - sw] = sw ? lo : hi;
}
DSA_INLINE void fd_lane(__local const uchar *rs, int valid, uint L, uint l, __local uint *row) {
  uint w[8];
  if (!valid) {
#pragma unroll
    for (int i = 0; i < 8; i++) w[i] = 0u;
  } else if (L < NOPE_LANES) {
    const uint4 x = *(__local const uint4 *)(rs + 16u * L);
    const uint u = rs[MLA_DATA_BYTES + (L >> 2)];
    const uint xs[4] = {x.x, x.y, x.z, x.w};
    const int sp = dsa_dequant4_e4m3_special(x.x, u) | dsa_dequant4_e4m3_special(x.y, u) |
                   dsa_dequant4_e4m3_special(x.z, u) | dsa_dequant4_e4m3_special(x.w, u);
    if (!sp) {
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const uint2 v = dsa_dequant4_e4m3_bf16_prmt(xs[i], u);
        w[2 * i] = v.x, w[2 * i + 1] = v.y;
      }
    } else {
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const uint2 v = dsa_dequant4_e4m3_bf16(xs[i], u);
        w[2 * i] = sm_nonan(v.x), w[2 * i + 1] = sm_nonan(v.y);
      }
    }
  } else {
    const uint4 x0 = *(__local const uint4 *)(rs + MLA_NOPE + 32u * (L - NOPE_LANES));
    const uint4 x1 = *(__local const uint4 *)(rs + MLA_NOPE + 32u * (L - NOPE_LANES) + 16u);
    w[0] = sm_nonan(x0.x), w[1] = sm_nonan(x0.y), w[2] = sm_nonan(x0.z);
    w[3] = sm_nonan(x0.w), w[4] = sm_nonan(x1.x), w[5] = sm_nonan(x1.y);
    w[6] = sm_nonan(x1.z), w[7] = sm_nonan(x1.w);
  }
  fd_store(w, L, l, row);
}

/* Dequantize ring slot rs0 (masks vms) into kd (masks vk): warp w = tid /
 * 32 takes entries w and w + 8, 64 dim lanes (56 NoPE, 8 RoPE) in two
 * rounds of its 32 work-items: first the NoPE lanes of entry w and lanes
 * 0-3 of entry w + 8, then lanes 4-27 of entry w + 8 and the RoPE lanes of
 * both. A RoPE lane (NaN zeroing of 16 bf16) and a NoPE lane (dequantizing
 * 16 e4m3) take different code, so a warp mixing them runs both: one mixed
 * round in two, where one entry a round (lanes 28-31 RoPE) made both
 * mixed. With one work-group of 8 warps an SM this step is bound by the
 * latency of each work-item's chain of integer operations, so both rounds
 * run as one block: all their reads first (in two calls of fd_lane, the
 * second round's reads waited for the first round's stores, which the
 * compiler cannot tell from the ring), then the two integer paths side by
 * side, the RoPE lanes' NaN zeroing by a select; a lane with an e4m3 NaN,
 * subnormal or extreme scale in either round takes fd_lane's exact path
 * for both (same results). 3.5-4 % of the fused decode on an H100
 * (docs/PERFORMANCE.md, mla5). On NVIDIA sm_89+ (FD_CVT) the common path
 * has no integer chain of that kind: since session 26 prmt, shift, mask and
 * one bf16 multiply a pair (dsa_dequant4_e4m3_bf16_hm, FD_CVT 2: -1.8 to
 * -2.8 % against the conversion instructions' form, FD_CVT 1, which was
 * -7 to -9 % against the integer one in session 19); only a NaN word or a
 * scale byte outside [10, 134] takes fd_lane. Selects to mask unused
 * entries (16 a lane) and the RoPE lanes' NaN test before the zeroing cut
 * the block from 187 to ~140 instructions a warp and measured no faster
 * (session 26): the block is bound by its latency, not its count. */
#if MT_NT != 2 * (MT_WG / 32) || NOPE_LANES != 28
#error "sparse_mla.cl: fd_dequant maps 2 entries (56 + 8 dim lanes) onto each warp"
#endif
/* FD_CVT (DSA_DEQUANT_CVT, NVIDIA sm_89+): 2 the bf16 multiply's form (the
 * default there), 1 the conversion instructions' form; 0 (elsewhere, or
 * forced) the integer path. */
#ifndef FD_CVT
#define FD_CVT (DSA_DEQUANT_CVT ? 2 : 0)
#endif
#if FD_CVT && !DSA_DEQUANT_CVT
#error "sparse_mla.cl: FD_CVT needs DSA_DEQUANT_CVT"
#endif
DSA_INLINE void fd_dequant(__local const uchar *rs0, __local const int *vms, uint tid,
                           __local uint *kd, __local int *vk) {
  const uint w = tid / 32u, l = tid % 32u;
  /* Round 0: NoPE lane L0 of entry e0 (every lane NoPE); round 1: NoPE lane
   * L1 of entry e1 (l < 24) or RoPE lane L1 (l >= 24). */
  const uint e0 = l < 28u ? w : w + 8u, L0 = l < 28u ? l : l - 28u;
  const uint e1 = l >= 24u && l < 28u ? w : w + 8u, L1 = l < 24u ? l + 4u : 28u + (l & 3u);
  const int rope1 = l >= 24u;
  __local const uchar *r0 = rs0 + e0 * FD_EB, *r1 = rs0 + e1 * FD_EB;
  /* Every read of both rounds before any store (the compiler cannot tell
   * the ring from kd), so that the two rounds' arithmetic interleaves. */
  const int v0 = vms[e0], v1 = vms[e1];
  const uint4 x0 = *(__local const uint4 *)(r0 + 16u * L0);
  const uint u0 = r0[MLA_DATA_BYTES + (L0 >> 2)];
  __local const uchar *p1 = r1 + (rope1 ? MLA_NOPE + 32u * (L1 - NOPE_LANES) : 16u * L1);
  const uint4 x1 = *(__local const uint4 *)p1;
  const uint4 y1 = rope1 ? *(__local const uint4 *)(p1 + 16u) : (uint4)(0u);
  const uint u1 = r1[MLA_DATA_BYTES + ((L1 & 31u) >> 2)]; /* RoPE lanes: unused (scale bytes 7) */
  if (l == 0u) vk[w] = vms[w], vk[w + 8u] = vms[w + 8u]; /* the ring's masks are rewritten first */
  const uint a0[4] = {x0.x, x0.y, x0.z, x0.w}, a1[4] = {x1.x, x1.y, x1.z, x1.w};
  const uint b1[4] = {y1.x, y1.y, y1.z, y1.w};
  int sp0 = 0, sp1 = 0;
#if FD_CVT == 2
  /* The bf16 multiply's form: a NaN code, or u outside [10, 134], takes
   * fd_lane's exact path. (Unused entries and the RoPE lanes multiply by a
   * stale or unused scale byte's m: the selects below drop those words.) */
  const uint m0 = dsa_dequant_hm_scale(u0), m1 = dsa_dequant_hm_scale(u1);
#pragma unroll
  for (int i = 0; i < 4; i++)
    sp0 |= dsa_dequant4_e4m3_hm_special(a0[i], u0), sp1 |= dsa_dequant4_e4m3_hm_special(a1[i], u1);
#elif FD_CVT
  /* The conversion instructions' form: only a NaN (code or u = 255) takes
   * fd_lane's exact path. */
  const float sc0 = dsa_ue8m0_to_f32(u0), sc1 = dsa_ue8m0_to_f32(u1);
#pragma unroll
  for (int i = 0; i < 4; i++)
    sp0 |= dsa_dequant4_e4m3_nan(a0[i], u0), sp1 |= dsa_dequant4_e4m3_nan(a1[i], u1);
#else
#pragma unroll
  for (int i = 0; i < 4; i++)
    sp0 |= dsa_dequant4_e4m3_special(a0[i], u0), sp1 |= dsa_dequant4_e4m3_special(a1[i], u1);
#endif
  /* (An unused entry's ring bytes are stale: its lanes store zeros.) */
  if (!((v0 && sp0) || (v1 && !rope1 && sp1))) {
    /* The common case as one block: both rounds' integer paths side by
     * side; a RoPE lane of round 1 takes its NaN-zeroed bf16 by a select. */
    uint w0[8], w1[8];
#pragma unroll
    for (int i = 0; i < 4; i++) {
#if FD_CVT == 2
      const uint2 f0 = dsa_dequant4_e4m3_bf16_hm(a0[i], m0);
      const uint2 f1 = dsa_dequant4_e4m3_bf16_hm(a1[i], m1);
#elif FD_CVT
      const uint2 f0 = dsa_dequant4_e4m3_bf16_cvt(a0[i], sc0);
      const uint2 f1 = dsa_dequant4_e4m3_bf16_cvt(a1[i], sc1);
#else
      const uint2 f0 = dsa_dequant4_e4m3_bf16_prmt(a0[i], u0);
      const uint2 f1 = dsa_dequant4_e4m3_bf16_prmt(a1[i], u1);
#endif
      w0[2 * i] = v0 ? f0.x : 0u, w0[2 * i + 1] = v0 ? f0.y : 0u;
      w1[2 * i] = f1.x, w1[2 * i + 1] = f1.y;
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
      w1[i] = v1 ? (rope1 ? sm_nonan(a1[i]) : w1[i]) : 0u;
      w1[4 + i] = v1 ? (rope1 ? sm_nonan(b1[i]) : w1[4 + i]) : 0u;
    }
    fd_store(w0, L0, l, kd + e0 * MT_KDP);
    fd_store(w1, L1, l, kd + e1 * MT_KDP);
  } else {
    fd_lane(r0, v0, L0, l, kd + e0 * MT_KDP);
    fd_lane(r1, v1, L1, l, kd + e1 * MT_KDP);
  }
}

DSA_INLINE void tile_body(
    const dsa_iset *sa, const dsa_iset *sb, __global const uchar *lens_a, ulong la_off,
    ulong la_st, int has_len_a, __global const uchar *lens_b, ulong lb_off, ulong lb_st,
    int has_len_b, int fused, __global const uchar *qp, ulong q_off, ulong q_ts, ulong q_hs,
    int q16, int n_heads, __global const uchar *sink, ulong sink_off, ulong sink_st,
    int has_sink, float scale, __global uchar *out, ulong o_off, ulong o_ts, ulong o_hs,
    int o16, __global uchar *lse, ulong lse_off, ulong lse_ts, ulong lse_hs, int has_lse,
    __global volatile uint *faults, const int nsplit, const int chunk, __global uchar *ws,
    __local uint *kbuf, __local uchar *ring, __local uint *qst, __local uint *pw,
    __local float *part, __local float *sl, __local float *al, __local float *fin,
    __local int *vm, __local ulong2 *rec, __local int *rfl) {
  const uint tid = get_local_id(0), unit = tid / DSA_TILE_LANES;
  const int g = get_group_id(1);
  const ulong t = get_group_id(2);

  int bad = 0;
  const int len_a = set_len(lens_a, la_off, la_st, has_len_a, sa->width, t, &bad);
  const int len_b = fused ? set_len(lens_b, lb_off, lb_st, has_len_b, sb->width, t, &bad) : 0;
  if (bad && tid == 0 && g == 0) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
  /* Split-K: this work-group's entries [j0, len) of the virtual list. */
  const int split = (int)get_group_id(0), j0 = split * chunk;
  const int len = nsplit > 1 ? min(len_a + len_b, j0 + chunk) : len_a + len_b;
  const int ntiles = (max(len - j0, 0) + MT_NT - 1) / MT_NT;

  /* Fused: the first tiles' index reads (the ring's MT_ST tiles, tile
   * MT_ST's records, the indices of the FD_NB tiles after it) go out
   * before the query rows are staged: they need only the lengths, so their
   * latency overlaps the query's load and two barriers instead of
   * following them (H200: -0.4 to -0.8 us at the four bench shapes,
   * docs/PERFORMANCE.md, session 27). */
  const uint ce = tid / 16u, cq = tid % 16u; /* the ring's copy mapping (below) */
  dsa_lazy_ref fr[MT_ST], frec, fn0;
  if (fused) {
#pragma unroll
    for (int i = 0; i < MT_ST; i++)
      fr[i] = ref_read(sa, sb, len_a, len, t, j0 + i * MT_NT + (int)ce);
    if (tid < MT_NT) frec = ref_read(sa, sb, len_a, len, t, j0 + MT_ST * MT_NT + (int)tid);
    if (tid < FD_RB) fn0 = ref_read(sa, sb, len_a, len, t, j0 + (MT_ST + 1) * MT_NT + (int)tid);
  }
  /* The group's query rows as bf16 pairs (MT_KDP words a row; absent heads
   * zero): in the tile buffer while the fragments are loaded, or for good. */
#if DSA_TILE_A_REGS
  __local uint *qs = kbuf;
  (void)qst;
#else
  __local uint *qs = qst;
#endif
  for (uint idx = tid; idx < MT_HG * 64u; idx += MT_WG) {
    const uint h = idx >> 6, c = idx & 63u;
    const int head = g * MT_HG + (int)h;
    uint4 v = (uint4)(0u);
    if (head < n_heads) v = dsa_load16(qp + q_off + t * q_ts + (ulong)head * q_hs + c * 16u, q16);
    *(__local uint4 *)(qs + h * MT_KDP + c * 4u) = v;
  }
  barrier(CLK_LOCAL_MEM_FENCE);

  /* Unit roles. QK: row block rb, key group kg, dim slice ds; PV: rb and
   * dim slice ps. */
  const uint rb = unit % MT_RB, kg = (unit / MT_RB) % MT_KG, ds = unit / (MT_RB * MT_KG);
  const uint ps = unit / MT_RB;
  const uint qoff = rb * DSA_TILE_M * MT_KDP + ds * (MT_DSD / 2);
#if DSA_TILE_A_REGS
  dsa_tile_a qa[MT_KS];
#pragma unroll
  for (int ks = 0; ks < MT_KS; ks++)
    qa[ks] = dsa_tile_load_a(qs + qoff + (uint)ks * (DSA_TILE_K / 2), MT_KDP);
  barrier(CLK_LOCAL_MEM_FENCE); /* the tile buffer is rewritten next */
#endif

  /* Stage and softmax items; the logits' scale (e2: in log2 units). */
  const uint sp = tid % (MT_NT / 2), sg = tid / (MT_NT / 2);
  const int e2 = MT_EXP2 && fused;
  const float sc = e2 ? scale * M_LOG2E_F : scale;
  float m_run = -INFINITY, l_part = 0.0f;
  dsa_tile_c acc[MT_PJ];
#pragma unroll
  for (int j = 0; j < MT_PJ; j++) acc[j] = dsa_tile_zero();

  __local uint *kd = kbuf, *vt = kbuf + MT_NT * MT_KDP;
#if FD_VOTE
  /* The warps' votes (FD_VOTE), in fin, which only the finish uses. */
  __local int *vf = (__local int *)fin;
#endif
  /* bf16: entries 2sp, 2sp+1 of a tile: the raw bytes of the next tile to
   * stage and the slots of the one after (the index reads run a tile ahead
   * of the data reads that need them). Fused: the ring's copy mapping
   * (entry ce, piece cq), tile 0 in flight, the index of tile 1 read. */
  const int e0 = j0 + (int)(2u * sp);
  dsa_raw r0, r1;
  dsa_lazy_ref n0, n1;
  if (fused) {
#pragma unroll
    for (int i = 0; i < MT_ST; i++) {
      const dsa_ref r = ref_resolve(sa, sb, fr[i], cq, 1, faults);
      fd_issue(sa, sb, r, cq, ring + ((uint)i * MT_NT + ce) * FD_EB);
      if (cq == 0u) vm[i * MT_NT + (int)ce] = r.slot >= 0;
      dsa_async_commit();
    }
    /* Tile MT_ST's records (slot MT_ST % FD_RS) by the first MT_NT items;
     * the first FD_RB items then hold the indices of tiles MT_ST + 1 ..
     * MT_ST + FD_NB (item i: tile MT_ST + 1 + i / MT_NT, entry i % MT_NT). */
    if (tid < MT_NT) {
      const uint ri = (MT_ST % FD_RS) * MT_NT + tid;
      fd_record(sa, sb, ref_resolve(sa, sb, frec, 0u, 1, faults), rec + ri, rfl + ri);
    }
    if (tid < FD_RB) n0 = fn0;
    dsa_async_wait(MT_ST - 1);
    barrier(CLK_LOCAL_MEM_FENCE);
  } else {
    r0 = fetch_entry(sa, sb, len_a, len, t, e0, sg, fused, faults);
    r1 = fetch_entry(sa, sb, len_a, len, t, e0 + 1, sg, fused, faults);
    n0 = ref_read(sa, sb, len_a, len, t, MT_NT + e0);
    n1 = ref_read(sa, sb, len_a, len, t, MT_NT + e0 + 1);
  }
  for (int it = 0; it < ntiles; it++) {
    const uint slot = (uint)it % MT_ST;
    if (fused)
      fd_dequant(ring + slot * (MT_NT * FD_EB), vm + slot * MT_NT, tid, kd, vm + MT_ST * MT_NT);
    else
      mt_stage(&r0, &r1, sp, sg, fused, kd, vt, vm);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (fused) {
      /* Tile it + MT_ST into the slot just dequantized (MT_ST tiles in
       * flight through the steps below); waited for at the loop's end. */
      /* From the records written 1 .. FD_NB tiles ago (slot (it + MT_ST)
       * % FD_RS); every FD_NB tiles the first FD_RB items then write tiles
       * it + MT_ST + 1 .. + FD_NB (slots the issue reads later, barriers
       * between; the one they overwrite was read a tile ago). FD_NB 2:
       * two tiles' records a warp every other tile, where
       * half a warp wrote one tile's every tile: the warp that writes them
       * comes last to the QK barrier (the wait there was 7.8 % of the
       * kernel's stall samples, session 19's profile), now half as often:
       * H200 -1.5 to -2.3 % (docs/PERFORMANCE.md, session 20). */
      if (it + MT_ST < ntiles) {
        const uint ri = ((uint)(it + MT_ST) % FD_RS) * MT_NT + ce;
        const int fl = rfl[ri];
        fd_issue_rec(rec + ri, fl, cq, ring + (slot * MT_NT + ce) * FD_EB);
        if (cq == 0u) vm[slot * MT_NT + ce] = fl & 1;
      }
      dsa_async_commit();
      if (!(it % FD_NB) && tid < FD_RB && it + MT_ST + 1 + (int)(tid / MT_NT) < ntiles) {
        const uint ri = ((uint)(it + MT_ST + 1) + tid / MT_NT) % FD_RS * MT_NT + tid % MT_NT;
        fd_record(sa, sb, ref_resolve(sa, sb, n0, 0u, 1, faults), rec + ri, rfl + ri);
      }
    } else if (it + 1 < ntiles) {
      r0 = load_entry(sa, sb, ref_resolve(sa, sb, n0, sg, fused, faults), sg, fused);
      r1 = load_entry(sa, sb, ref_resolve(sa, sb, n1, sg, fused, faults), sg, fused);
      const int j0 = (it + 2) * MT_NT + e0;
      n0 = ref_read(sa, sb, len_a, len, t, j0);
      n1 = ref_read(sa, sb, len_a, len, t, j0 + 1);
    }

    /* QK: partial logits of this unit's rows over its dims, its key blocks
     * kg + MT_KG i side by side (independent accumulator chains). */
    {
      dsa_tile_c c[MT_NKB];
#pragma unroll
      for (int i = 0; i < MT_NKB; i++) c[i] = dsa_tile_zero();
#if MT_NKB == 2
      /* The fused kernel's odd k-steps (four MMA chains, not two). */
      dsa_tile_c c2[2];
      c2[0] = c2[1] = dsa_tile_zero();
#endif
      __local const uint *kp = kd + kg * DSA_TILE_N * MT_KDP + ds * (MT_DSD / 2);
#pragma unroll
      for (int ks = 0; ks < MT_KS; ks++) {
#if DSA_TILE_A_REGS
        const dsa_tile_a a = qa[ks];
#else
        const dsa_tile_a a = dsa_tile_load_a(qs + qoff + (uint)ks * (DSA_TILE_K / 2), MT_KDP);
#endif
#if MT_NKB == 2
        /* The fused kernel loads both key blocks' atoms at once (one
         * ldmatrix on NVIDIA: H100 -1 to -2 %) and keeps the odd k-steps in
         * a second pair of accumulators (H200 -0.3 to -0.8 %, once P x V's
         * paired loads had cut the spills); the bf16 kernel (176 registers)
         * lost with the first (docs/PERFORMANCE.md, session 19). */
        if (fused) {
          dsa_tile_b b[2];
          dsa_tile_load_b2(kp + (uint)ks * (DSA_TILE_K / 2), MT_KDP, MT_KG * DSA_TILE_N * MT_KDP,
                           b);
          if (ks & 1) {
            c2[0] = dsa_tile_mma(c2[0], a, b[0]);
            c2[1] = dsa_tile_mma(c2[1], a, b[1]);
            continue;
          }
          c[0] = dsa_tile_mma(c[0], a, b[0]);
          c[1] = dsa_tile_mma(c[1], a, b[1]);
          continue;
        }
#endif
#pragma unroll
        for (int i = 0; i < MT_NKB; i++)
          c[i] = dsa_tile_mma(c[i], a,
                              dsa_tile_load_b(kp + (uint)(i * MT_KG * DSA_TILE_N) * MT_KDP +
                                                  (uint)ks * (DSA_TILE_K / 2),
                                              MT_KDP));
      }
#if MT_NKB == 2
      if (fused)
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
          for (int e = 0; e < DSA_TILE_CE; e++) c[i].v[e] += c2[i].v[e];
#endif
      /* The fused kernel stores pairs of one row's columns as 8 bytes where
       * DSA_TILE_CPAIR (-0.3 %); the bf16 kernel (176 registers) lost with
       * it and log2 units together (docs/PERFORMANCE.md, session 19). */
      const int cpair = DSA_TILE_CPAIR && fused;
#pragma unroll
      for (int i = 0; i < MT_NKB; i++)
#pragma unroll
        for (int e = 0; e < DSA_TILE_CE; e++) {
          __local float *pp = part + (ds * MT_HG + rb * DSA_TILE_M + dsa_tile_row(e)) * MT_NT +
                              (kg + (uint)(i * MT_KG)) * DSA_TILE_N + dsa_tile_col(e);
          if (!cpair)
            *pp = c[i].v[e];
          else if (!(e & 1))
            *(__local float2 *)pp = (float2)(c[i].v[e], c[i].v[e + 1 < DSA_TILE_CE ? e + 1 : e]);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* Logits of keys 2sp, 2sp+1 of head sg. */
    float2 s = *(__local const float2 *)(part + sg * MT_NT + 2u * sp);
#pragma unroll
    for (int d = 1; d < MT_DS; d++)
      s += *(__local const float2 *)(part + ((uint)d * MT_HG + sg) * MT_NT + 2u * sp);
    {
      __local const int *vs = vm + (fused ? MT_ST * MT_NT : 0); /* fused: the dequant's copy */
      s.x = vs[2u * sp] ? s.x * sc : -INFINITY;
      s.y = vs[2u * sp + 1u] ? s.y * sc : -INFINITY;
    }
    /* The head's largest logit of the tile. With sub-group shuffles
     * (DSA_TILE_MAX8) the head's 8 items are 8 lanes of one unit: no round
     * trip through local memory, one barrier fewer; the bf16 kernel takes
     * that (2-3 % on the H200), the fused one with FD_SHFL (on since
     * session 18: 1 % faster with two groups an SM, 8 % slower with one;
     * docs/PERFORMANCE.md). */
    float mt;
#if FD_VOTE
    /* Fused, NVIDIA: the lazy max moves only where a logit passes m_run +
     * its step, so where none of the warp's does (one vote), every head of
     * the warp keeps m_run and the shuffled max is not needed (mt = m_run
     * gives the same m_new below). The vote is also the warp's flag for
     * P x V (vf): some head of it moved its max. */
    int vup = 1;
    if (fused)
      vup = dsa_nv_any(s.x > m_run + (e2 ? MT_TAU2 : MT_TAU) ||
                       s.y > m_run + (e2 ? MT_TAU2 : MT_TAU));
    if (fused && (tid & 31u) == 0u) vf[tid >> 5] = vup;
    if (fused && !vup)
      mt = m_run;
    else
#endif
#if DSA_TILE_MAX8
    if (!fused || FD_SHFL)
      mt = dsa_tile_max8(fmax(s.x, s.y));
    else
#endif
    {
      *(__local float2 *)(sl + sg * MT_NT + 2u * sp) = s;
      barrier(CLK_LOCAL_MEM_FENCE);
      __local const float4 *s4 = (__local const float4 *)(sl + sg * MT_NT);
      const float4 x0 = s4[0], x1 = s4[1], x2 = s4[2], x3 = s4[3];
      const float4 mx = fmax(fmax(x0, x1), fmax(x2, x3));
      mt = fmax(fmax(mx.x, mx.y), fmax(mx.z, mx.w));
    }

    /* Online softmax over the head's 16 logits; the fused kernel's in log2
     * units (e2: the logits scaled by scale log2 e, so that P is one exp2;
     * m_run goes to mt_finish as m ln 2). The running max is lazy
     * (MT_LAZY): it moves only where the tile's max passes it by more than
     * MT_TAU (e units) or MT_TAU2 (2 units), so P <= 2^11 (exact enough as
     * bf16 hi + lo, no overflow in the sums) and
     * alpha is exactly 1 in most tiles once the first has set m; the result
     * is the same up to rounding (out = acc / l, lse = m + ln l, with one m
     * for both). */
    {
#if MT_LAZY
      const float m_new = mt > m_run + (e2 ? MT_TAU2 : MT_TAU) ? fmax(m_run, mt) : m_run;
#else
      const float m_new = fmax(m_run, mt);
#endif
      const bool live = m_new != -INFINITY;
      const float p0 = live ? mt_exp(s.x - m_new, e2) : 0.0f;
      const float p1 = live ? mt_exp(s.y - m_new, e2) : 0.0f;
      /* (Exactly 1 where the max stayed: the lazy rescale tests alpha.) */
      const float alpha = live && m_new != m_run ? mt_exp(m_run - m_new, e2) : 1.0f;
      l_part = l_part * alpha + (p0 + p1);
      m_run = m_new;
      const uint hi = dsa_f32x2_to_bf16x2(p0, p1);
      pw[sg * MT_PP + sp] = hi;
      pw[MT_HG * MT_PP + sg * MT_PP + sp] =
          dsa_f32x2_to_bf16x2(p0 - as_float(hi << 16), p1 - as_float(hi & 0xFFFF0000u));
      if (sp == 0u) al[sg] = alpha;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* The fused kernel's next index read (the record items') in this phase,
     * not beside the records: the first warp's extra work split over two
     * barrier intervals (H200 -0.4 to -1 %: that warp came last to the QK
     * barrier). */
    if (fused && !(it % FD_NB) && tid < FD_RB && it + MT_ST + FD_NB + 1 < ntiles)
      n0 = ref_read(sa, sb, len_a, len, t, j0 + (it + MT_ST + FD_NB + 1) * MT_NT + (int)tid);
    /* PV over this unit's rows and dims. */
    {
      dsa_tile_a ph[MT_PK], pl[MT_PK];
#pragma unroll
      for (int k = 0; k < MT_PK; k++) {
        ph[k] = dsa_tile_load_a(pw + rb * DSA_TILE_M * MT_PP + (uint)k * (DSA_TILE_K / 2), MT_PP);
        pl[k] = dsa_tile_load_a(pw + MT_HG * MT_PP + rb * DSA_TILE_M * MT_PP +
                                    (uint)k * (DSA_TILE_K / 2),
                                MT_PP);
      }
      /* The rescale, where one of the unit's rows moved its max (the same
       * for every lane of the unit: a uniform branch; with MT_LAZY, the
       * first tile and rarely another). x * 1 = x: the same bytes. */
      bool moved = true;
#if FD_VOTE
      if (fused) {
        /* The row block's warps' votes (a warp holds 4 heads' logits): one
         * 16-byte read, where the alphas' test took four and 16 compares. */
        const int4 f = *(__local const int4 *)(vf + rb * (DSA_TILE_M / 4));
        moved = (f.x | f.y | f.z | f.w) != 0;
      } else
#endif
#if MT_LAZY
      {
        __local const float4 *a4 = (__local const float4 *)(al + rb * DSA_TILE_M);
        moved = false;
#pragma unroll
        for (int q = 0; q < DSA_TILE_M / 4; q++) {
          const float4 x = a4[q];
          moved |= x.x != 1.0f || x.y != 1.0f || x.z != 1.0f || x.w != 1.0f;
        }
      }
#endif
      if (moved) {
        float ae[DSA_TILE_CE];
#pragma unroll
        for (int e = 0; e < DSA_TILE_CE; e++) ae[e] = al[rb * DSA_TILE_M + dsa_tile_row(e)];
#pragma unroll
        for (int j = 0; j < MT_PJ; j++)
#pragma unroll
          for (int e = 0; e < DSA_TILE_CE; e++) acc[j].v[e] *= ae[e];
      }
      __local const uint *vp = vt;
#pragma unroll
      for (int j = 0; j < MT_PJ; j++) {
#if MT_PJ % 2 == 0 && DSA_TILE_N == 8
        /* The fused kernel takes atoms j and j + 1 (dims 8 apart) by one
         * dsa_tile_load_bt2 (ldmatrix .x4 .trans on NVIDIA) and interleaves
         * their two MMA chains: H200 -4 to -6 %, 100 -> 68 B of spills. */
        if (fused) {
          if (j & 1) continue;
#pragma unroll
          for (int k = 0; k < MT_PK; k++) {
            const uint d0 = ps * MT_PD + (uint)j * DSA_TILE_N;
            dsa_tile_b b[2];
            dsa_tile_load_bt2(kd + (uint)k * DSA_TILE_K * MT_KDP + (d0 >> 1), MT_KDP, 4u, b);
            acc[j] = dsa_tile_mma(acc[j], ph[k], b[0]);
            acc[j + 1] = dsa_tile_mma(acc[j + 1], ph[k], b[1]);
            acc[j] = dsa_tile_mma(acc[j], pl[k], b[0]);
            acc[j + 1] = dsa_tile_mma(acc[j + 1], pl[k], b[1]);
          }
          continue;
        }
#endif
        dsa_tile_c c = acc[j];
#pragma unroll
        for (int k = 0; k < MT_PK; k++) {
          const uint d0 = ps * MT_PD + (uint)j * DSA_TILE_N; /* N divides 16 */
          /* Fused: V is kd's rows read transposed (no vt copy). */
          const dsa_tile_b b =
              fused ? dsa_tile_load_bt(kd + (uint)k * DSA_TILE_K * MT_KDP + (d0 >> 1), MT_KDP)
                    : dsa_tile_load_b(vp + (d0 >> 4) * MT_VTG + (d0 & 15u) * MT_VTP +
                                          (uint)k * (DSA_TILE_K / 2),
                                      MT_VTP);
          c = dsa_tile_mma(c, ph[k], b);
          c = dsa_tile_mma(c, pl[k], b);
        }
        acc[j] = c;
      }
    }
    /* kd, vt, vm, pw rewritten next; fused: tile it + 1 has landed. */
    dsa_async_wait(MT_ST - 1);
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  mt_finish(acc, e2 ? m_run * M_LN2_F : m_run, l_part, tid, sg, sp, rb, ps, g, t, split, n_heads,
            sink, sink_off, sink_st, has_sink, out, o_off, o_ts, o_hs, o16, lse, lse_off, lse_ts,
            lse_hs, has_lse, nsplit, ws, kbuf, sl, fin);
}

#if DSA_TILE_A_REGS
#define MT_QST_WORDS 4 /* unused */
#else
#define MT_QST_WORDS (MT_HG * MT_KDP)
#endif
#define MT_LOCALS                                                            \
  __local uint4 kbuf4[MT_KBUF / 4];                                          \
  __local uint4 qst4[MT_QST_WORDS / 4];                                      \
  __local uint4 pw4[2 * MT_HG * MT_PP / 4];                                  \
  __local float part[MT_DS * MT_HG * MT_NT] __attribute__((aligned(16)));    \
  __local float sl[MT_HG * MT_NT] __attribute__((aligned(16)));              \
  __local float al[MT_HG] __attribute__((aligned(16)));                      \
  __local float fin[MT_HG];                                                  \
  __local int vm[MT_NT]

/* MT_LOCALS in bytes (the host's mt_local_bytes): kernels that would not fit
 * the device are left out of the program (the launcher refuses the variant
 * there), so the rest of the program still builds. */
#define MT_LOCAL_BYTES                                                                     \
  (4 * (MT_KBUF + MT_QST_WORDS + 2 * MT_HG * MT_PP + MT_DS * MT_HG * MT_NT + MT_HG * MT_NT + \
        2 * MT_HG + MT_NT))
#if MT_LOCAL_BYTES <= DSA_LOCAL_MEM_BYTES
__kernel __attribute__((reqd_work_group_size(MT_WG, 1, 1))) DSA_TILE_KERNEL void
sparse_attn_bf16_tile(SA_BF16_PARAMS) {
  MT_LOCALS;
  dsa_iset sa = SA_ISET_BF16;
  tile_body(&sa, &sa, lens_mem, lens_off, lens_s0, has_lens, lens_mem, lens_off, lens_s0, 0, 0,
            SA_Q_ARGS, q_al >= 16u, n_heads, SA_OUT_ARGS, out_al >= 16u, SA_LSE_ARGS, 1, 0,
            (__global uchar *)0, (__local uint *)kbuf4, (__local uchar *)kbuf4,
            (__local uint *)qst4, (__local uint *)pw4, part, sl, al, fin, vm, (__local ulong2 *)0,
            (__local int *)0);
}

#endif

#define FD_LOCALS                                                            \
  __local uint4 kbuf4[FD_KBUF / 4];                                          \
  __local uint4 qst4[MT_QST_WORDS / 4];                                      \
  __local float part[FD_PART] __attribute__((aligned(16)));                  \
  __local float sl[FD_SL] __attribute__((aligned(16)));                     \
  __local float al[MT_HG] __attribute__((aligned(16)));                      \
  __local float fin[MT_HG];                                                  \
  __local int vm[(MT_ST + 1) * MT_NT];                                       \
  __local ulong2 rec[FD_RS * MT_NT];                                         \
  __local int rfl[FD_RS * MT_NT]
/* FD_LOCALS in bytes (the host's fd_local_bytes). */
#define FD_LOCAL_BYTES                                                                    \
  (4 * (FD_KBUF + MT_QST_WORDS + FD_PART + FD_SL + 2 * MT_HG + (MT_ST + 1) * MT_NT) + \
   16 * FD_RS * MT_NT + 4 * FD_RS * MT_NT)

/* The fused kernel also splits the keys (flash-decoding): nsplit > 1
 * work-groups along x per (token, heads), each over `chunk` entries (a
 * multiple of MT_NT) of the virtual list, write partial rows to ws:
 * o [T, nsplit, H, 512] f32 (unscaled), then (m, l) [T, nsplit, H, 2] f32;
 * sparse_mla_split_combine finishes. */
#if FD_LOCAL_BYTES <= DSA_LOCAL_MEM_BYTES
/* NVIDIA (SA_NV_MAXRREG: the program's -cl-nv-maxrregcount=128): the
 * kernel goes without reqd_work_group_size (SA_REQD), whose PTX .reqntid
 * makes ptxas ignore the cap. With it: 214 registers, one group an SM;
 * without: 128 (136 bytes spilled), two groups an SM, and the host splits the keys of
 * few tokens so that two groups an SM are busy (split_plan). H200, T = 64 /
 * 128 tokens x H = 64 / 128 heads: 112.4 / 217.1 / 372.6 / 733 -> 106.2 /
 * 175.3 / 295.5 / 580 us (docs/PERFORMANCE.md, session 18). The bf16 tile
 * kernel keeps its attribute: capped, it was slower (134.7 -> 172.0 us at
 * T = 64 H = 64, the same at H = 128). */
__kernel SA_REQD(MT_WG) DSA_TILE_KERNEL void
sparse_mla_decode_fused_tile(SA_FUSED_PARAMS, int nsplit, int chunk, __global uchar *ws) {
  FD_LOCALS;
  dsa_iset sa = SA_ISET(a);
  dsa_iset sb = SA_ISET(b);
  iset_fastdiv(&sa);
  iset_fastdiv(&sb);
  /* P hi and lo: FD_PW. */
  tile_body(&sa, &sb, la_mem, la_off, la_s0, SA_HAS_LEN(ka, hla), lb_mem, lb_off, lb_s0,
            SA_HAS_LEN(kb, hlb), 1, SA_Q_ARGS, q_al >= 16u, n_heads, SA_OUT_ARGS, out_al >= 16u,
            SA_LSE_ARGS, nsplit, chunk, ws, (__local uint *)kbuf4,
            (__local uchar *)(kbuf4 + MT_NT * MT_KDP / 4), (__local uint *)qst4,
            (__local uint *)FD_PW, part, sl, al, fin, vm, rec, rfl);
}
#endif

/* Split row r's share of item i's 8 dims and of the sum l, weighted by
 * e^{m_r - M}. */
DSA_INLINE void sc_add(__global const float *po, __global const float *ml, const ulong r,
                       const float M, const uint i, float *l, float *o) {
  const float w = exp(ml[r * 2u] - M);
  *l += ml[r * 2u + 1u] * w;
  const float4 a = vload4(0, po + r * MLA_DIM + 8u * i);
  const float4 b = vload4(1, po + r * MLA_DIM + 8u * i);
  o[0] += a.x * w, o[1] += a.y * w, o[2] += a.z * w, o[3] += a.w * w;
  o[4] += b.x * w, o[5] += b.y * w, o[6] += b.z * w, o[7] += b.w * w;
}

/* Split-K, second stage: grid (64, H, T), item i dims [8i, +8) of head h of
 * token t: the partial rows of the nsplit splits weighted by e^{m_s - M}
 * (M their largest running max), divided by sum_s l_s e^{m_s - M} +
 * e^{sink - M}; lse = M + ln sum_s l_s e^{m_s - M}. Splits with no used
 * entry have m = -inf and weigh 0; a row with none at all gives zeros and
 * lse -inf, as the unsplit kernel. Faults: unused (the first stage's). */
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void sparse_mla_split_combine(
    int n_heads, int nsplit, __global const uchar *ws, SA_OUTPUT) {
  (void)scale, (void)faults;
  const uint i = get_local_id(0);
  const int h = get_group_id(1);
  const ulong t = get_group_id(2);
  const ulong row0 = t * (ulong)nsplit * (ulong)n_heads + (ulong)h; /* split s: + s H */
  __global const float *po = (__global const float *)ws;
  __global const float *ml = (__global const float *)(ws + get_num_groups(2) * (ulong)nsplit *
                                                               (ulong)n_heads * (MLA_DIM * 4));
  float m = -INFINITY;
  for (int s = 0; s < nsplit; s++) m = fmax(m, ml[(row0 + (ulong)s * (ulong)n_heads) * 2u]);
  float l = 0.0f, o[8];
#pragma unroll
  for (int k = 0; k < 8; k++) o[k] = 0.0f;
  /* No branch per split (an empty split's m is -inf: its weight exp(-inf)
   * is 0, and its rows and l are zeros, which add nothing), so the loads of
   * several splits can be in flight together: session 18's profile had
   * this kernel at 40 % of DRAM bandwidth, half its stalls on the FFMAs
   * waiting for them. */
  /* Four splits an iteration by hand (the same sums in the same order):
   * `#pragma unroll 4` on this loop of unknown trip count with exp in it was
   * applied by NVIDIA's compiler, but PoCL and clang for gfx1100 (no device
   * libraries, exp a call) warned that they could not unroll it. */
  if (m != -INFINITY) {
    int s = 0;
    for (; s + 4 <= nsplit; s += 4) {
      sc_add(po, ml, row0 + (ulong)s * (ulong)n_heads, m, i, &l, o);
      sc_add(po, ml, row0 + (ulong)(s + 1) * (ulong)n_heads, m, i, &l, o);
      sc_add(po, ml, row0 + (ulong)(s + 2) * (ulong)n_heads, m, i, &l, o);
      sc_add(po, ml, row0 + (ulong)(s + 3) * (ulong)n_heads, m, i, &l, o);
    }
    for (; s < nsplit; s++) sc_add(po, ml, row0 + (ulong)s * (ulong)n_heads, m, i, &l, o);
  }
  float lv;
  const float inv = sa_finish(m, l, 1, has_sink, sink_mem + sink_off + (ulong)h * sink_s0, &lv);
  uint w[4];
#pragma unroll
  for (int k = 0; k < 4; k++)
    w[k] = (uint)dsa_f32_to_bf16(o[2 * k] * inv) |
           ((uint)dsa_f32_to_bf16(o[2 * k + 1] * inv) << 16);
  dsa_store16(out_mem + out_off + t * out_s0 + (ulong)h * out_s1 + i * 16u,
              (uint4)(w[0], w[1], w[2], w[3]), out_al >= 16u);
  if (i == 0u && has_lse)
    *(__global float *)(lse_mem + lse_off + t * lse_s0 + (ulong)h * lse_s1) = lv;
}

/* ---- NVIDIA tensor-core path (DSA_HAS_NV_PTX) ---------------------------
 * sparse_attn_bf16_mma, sparse_mla_decode_fused_mma: same arguments, grid
 * (SM_WI, ceil(H/16), T) (SM_WI = 32 SM_NW, both host-owned), one
 * work-group per (token, 16 heads), SM_NW warps.
 * Per tile of SM_NT = 16 entries of the virtual list:
 *   load  item unit (pair p = idx/32, lane l = idx%32) dequantizes entries
 *         2p, 2p+1, dims [16 l, +16) to bf16 (NaN -> 0, masked -> 0) and
 *         writes them twice: kd[entry][dim pair] (QK's B operand, pitch 260
 *         words) and kv[entry pair][dim] (PV's B operand, pitch 520 words);
 *   QK    warp w: S_w[16 heads x 16 entries] over its dims [w DPW, +DPW) with
 *         mma.m16n8k16 bf16 (q fragments in registers), partials to local;
 *   soft  items tid < 128 (head tid/8, entries 2(tid%8), +1): sum of the
 *         partials, scale, mask, online softmax in fp32 (running max and sum
 *         in those items' registers, shuffles over the 8 items of a head);
 *         P split into bf16 hi + lo parts in local memory, alpha per head;
 *   PV    warp w: O[16 heads x dims [w DPW, +DPW)] = O * alpha + P_hi . V +
 *         P_lo . V, fp32 accumulators in mma C fragments (P in one bf16
 *         gave 10 tolerance failures in test_sparse_mla, all gone with hi + lo).
 * The output is staged in local memory as bf16 and written in 16-byte rows.
 * Fragment layouts (PTX ISA, mma.m16n8k16 .bf16), g = lane / 4, t = lane % 4:
 *   A: (g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)
 *   B: (k 2t..2t+1, n g), (k 2t+8.., n g); C: (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1). */
#if DSA_HAS_NV_PTX && (!defined(DSA_NV_SM) || DSA_NV_SM >= 80)
/* Host-owned: SM_NW warps, SM_NT entries per tile, SM_KDP words per kd row
 * (256 dim pairs + 4, bank spread), SM_KVP words per kv row (512 dims + 8),
 * SM_PP floats per partial row. */
#if SM_NT != 16
#error "sparse_mla.cl: the mma path's softmax mapping needs SM_NT = 16"
#endif
#define SM_WI (32 * SM_NW)
#define SM_DPW (MLA_DIM / SM_NW)
#define SM_KS (SM_DPW / 16)
#define SM_NTL (SM_DPW / 8)
#define SM_UNITS (256 / SM_WI)

DSA_INLINE uint sm_q2(__global const uchar *p) { return as_uint(vload4(0, p)); }

DSA_INLINE void mma_body(
    const dsa_iset *sa, const dsa_iset *sb, __global const uchar *lens_a, ulong la_off,
    ulong la_st, int has_len_a, __global const uchar *lens_b, ulong lb_off, ulong lb_st,
    int has_len_b, int fused, __global const uchar *qp, ulong q_off, ulong q_ts, ulong q_hs,
    int n_heads, __global const uchar *sink, ulong sink_off, ulong sink_st,
    int has_sink, float scale, __global uchar *out, ulong o_off, ulong o_ts, ulong o_hs,
    __global uchar *lse, ulong lse_off, ulong lse_ts, ulong lse_hs, int has_lse,
    __global volatile uint *faults, __local uint *kd, __local uint *kv, __local float *part,
    __local uint *pw, __local float *al, __local int *vm, __local float *fin) {
  const uint tid = get_local_id(0), warp = tid >> 5, ln = tid & 31u, gq = ln >> 2, tq = ln & 3u;
  const int g = get_group_id(1);
  const ulong t = get_group_id(2);

  int bad = 0;
  const int len_a = set_len(lens_a, la_off, la_st, has_len_a, sa->width, t, &bad);
  const int len_b = fused ? set_len(lens_b, lb_off, lb_st, has_len_b, sb->width, t, &bad) : 0;
  if (bad && tid == 0 && g == 0) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
  const int len = len_a + len_b;
  const int ntiles = (len + SM_NT - 1) / SM_NT;

  /* Query fragments of heads gq and gq + 8 over this warp's dims. */
  uint qa[SM_KS][4];
  {
    const int h0 = g * HG + (int)gq, h1 = h0 + 8;
    const int ok0 = h0 < n_heads, ok1 = h1 < n_heads;
    __global const uchar *q0 = qp + q_off + t * q_ts + (ulong)(ok0 ? h0 : 0) * q_hs;
    __global const uchar *q1 = qp + q_off + t * q_ts + (ulong)(ok1 ? h1 : 0) * q_hs;
#pragma unroll
    for (int ks = 0; ks < SM_KS; ks++) {
      const uint d = (warp * SM_DPW + (uint)ks * 16u + 2u * tq) * 2u;
      qa[ks][0] = ok0 ? sm_q2(q0 + d) : 0u;
      qa[ks][1] = ok1 ? sm_q2(q1 + d) : 0u;
      qa[ks][2] = ok0 ? sm_q2(q0 + d + 16) : 0u;
      qa[ks][3] = ok1 ? sm_q2(q1 + d + 16) : 0u;
    }
  }

  float m_run = -INFINITY, l_run = 0.0f;
  float acc[SM_NTL][4];
#pragma unroll
  for (int j = 0; j < SM_NTL; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  dsa_raw raw[SM_UNITS][2];
#pragma unroll
  for (int u = 0; u < SM_UNITS; u++) {
    const uint idx = tid + SM_WI * (uint)u, p = idx >> 5, l = idx & 31u;
#pragma unroll
    for (int e = 0; e < 2; e++)
      raw[u][e] = fetch_entry(sa, sb, len_a, len, t, (int)(2u * p) + e, l, fused, faults);
  }
  for (int it = 0; it < ntiles; it++) {
#pragma unroll
    for (int u = 0; u < SM_UNITS; u++) {
      const uint idx = tid + SM_WI * (uint)u, p = idx >> 5, l = idx & 31u;
      uint w0[8], w1[8];
      lane_bf16(&raw[u][0], l, fused, w0);
      lane_bf16(&raw[u][1], l, fused, w1);
      const int v0 = raw[u][0].valid, v1 = raw[u][1].valid;
#pragma unroll
      for (int i = 0; i < 8; i++) {
        w0[i] = v0 ? sm_nonan(w0[i]) : 0u;
        w1[i] = v1 ? sm_nonan(w1[i]) : 0u;
      }
      __local uint4 *d0 = (__local uint4 *)(kd + (2u * p) * SM_KDP + l * 8u);
      __local uint4 *d1 = (__local uint4 *)(kd + (2u * p + 1u) * SM_KDP + l * 8u);
      d0[0] = (uint4)(w0[0], w0[1], w0[2], w0[3]);
      d0[1] = (uint4)(w0[4], w0[5], w0[6], w0[7]);
      d1[0] = (uint4)(w1[0], w1[1], w1[2], w1[3]);
      d1[1] = (uint4)(w1[4], w1[5], w1[6], w1[7]);
      __local uint4 *dv = (__local uint4 *)(kv + p * SM_KVP + l * 16u);
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const uint a = w0[2 * i], b = w1[2 * i], c = w0[2 * i + 1], d = w1[2 * i + 1];
        dv[i] = (uint4)((a & 0xFFFFu) | (b << 16), (a >> 16) | (b & 0xFFFF0000u),
                        (c & 0xFFFFu) | (d << 16), (c >> 16) | (d & 0xFFFF0000u));
      }
      if (l == 0u) vm[2u * p] = v0, vm[2u * p + 1u] = v1;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (it + 1 < ntiles) {
#pragma unroll
      for (int u = 0; u < SM_UNITS; u++) {
        const uint idx = tid + SM_WI * (uint)u, p = idx >> 5, l = idx & 31u;
#pragma unroll
        for (int e = 0; e < 2; e++)
          raw[u][e] = fetch_entry(sa, sb, len_a, len, t, (it + 1) * SM_NT + (int)(2u * p) + e, l,
                                  fused, faults);
      }
    }

    /* QK: this warp's partial logits. */
    {
      float c[2][4];
#pragma unroll
      for (int nt = 0; nt < 2; nt++) {
        c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.0f;
        __local const uint *kr = kd + ((uint)nt * 8u + gq) * SM_KDP + warp * (SM_DPW / 2) + tq;
#pragma unroll
        for (int ks = 0; ks < SM_KS; ks++)
          dsa_nv_mma_bf16(c[nt], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], kr[ks * 8], kr[ks * 8 + 4]);
      }
#pragma unroll
      for (int nt = 0; nt < 2; nt++) {
        __local float *pr = part + (warp * HG + gq) * SM_PP + (uint)nt * 8u + 2u * tq;
        *(__local float2 *)pr = (float2)(c[nt][0], c[nt][1]);
        *(__local float2 *)(pr + 8 * SM_PP) = (float2)(c[nt][2], c[nt][3]);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    if (tid < 128u) { /* whole warps: the shuffles see full warps */
      const uint h = tid >> 3, q2 = tid & 7u;
      float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
      for (int w = 0; w < SM_NW; w++) {
        const float2 v = *(__local const float2 *)(part + ((uint)w * HG + h) * SM_PP + 2u * q2);
        s0 += v.x, s1 += v.y;
      }
      s0 = vm[2u * q2] ? s0 * scale : -INFINITY;
      s1 = vm[2u * q2 + 1u] ? s1 * scale : -INFINITY;
      float mt = fmax(s0, s1);
      mt = fmax(mt, dsa_nv_shfl_xor_f32(mt, 1));
      mt = fmax(mt, dsa_nv_shfl_xor_f32(mt, 2));
      mt = fmax(mt, dsa_nv_shfl_xor_f32(mt, 4));
      const float m_new = fmax(m_run, mt);
      const bool live = m_new != -INFINITY;
      const float p0 = live ? exp(s0 - m_new) : 0.0f, p1 = live ? exp(s1 - m_new) : 0.0f;
      const float alpha = live ? exp(m_run - m_new) : 1.0f;
      float ls = p0 + p1;
      ls += dsa_nv_shfl_xor_f32(ls, 1);
      ls += dsa_nv_shfl_xor_f32(ls, 2);
      ls += dsa_nv_shfl_xor_f32(ls, 4);
      l_run = l_run * alpha + ls;
      m_run = m_new;
      /* P = hi + lo, both bf16: the product with V keeps ~16 mantissa bits. */
      const uint hi0 = dsa_f32_to_bf16(p0), hi1 = dsa_f32_to_bf16(p1);
      pw[h * 8u + q2] = hi0 | (hi1 << 16);
      pw[HG * 8 + h * 8u + q2] = (uint)dsa_f32_to_bf16(p0 - as_float(hi0 << 16)) |
                                 ((uint)dsa_f32_to_bf16(p1 - as_float(hi1 << 16)) << 16);
      if (q2 == 0u) al[h] = alpha;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* PV over this warp's dims. */
    {
      const uint a0 = pw[gq * 8u + tq], a1 = pw[(gq + 8u) * 8u + tq];
      const uint a2 = pw[gq * 8u + tq + 4u], a3 = pw[(gq + 8u) * 8u + tq + 4u];
      __local const uint *pl = pw + HG * 8;
      const uint e0 = pl[gq * 8u + tq], e1 = pl[(gq + 8u) * 8u + tq];
      const uint e2 = pl[gq * 8u + tq + 4u], e3 = pl[(gq + 8u) * 8u + tq + 4u];
      const float al0 = al[gq], al1 = al[gq + 8u];
      __local const uint *vr = kv + tq * SM_KVP + warp * SM_DPW + gq;
#pragma unroll
      for (int j = 0; j < SM_NTL; j++) {
        acc[j][0] *= al0, acc[j][1] *= al0, acc[j][2] *= al1, acc[j][3] *= al1;
        const uint b0 = vr[j * 8], b1 = vr[4 * SM_KVP + j * 8];
        dsa_nv_mma_bf16(acc[j], a0, a1, a2, a3, b0, b1);
        dsa_nv_mma_bf16(acc[j], e0, e1, e2, e3, b0, b1);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  /* Final: fin[h] = 1 / (l + e^{sink - m}) (0 for an empty row), lse. */
  if (tid < 128u && (tid & 7u) == 0u) {
    const uint h = tid >> 3;
    const int head = g * HG + (int)h;
    float lv;
    const float inv = sa_finish(m_run, l_run, head < n_heads, has_sink,
                                sink + sink_off + (ulong)head * sink_st, &lv);
    fin[h] = inv;
    if (has_lse && head < n_heads)
      *(__global float *)(lse + lse_off + t * lse_ts + (ulong)head * lse_hs) = lv;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  {
    const float f0 = fin[gq], f1 = fin[gq + 8u];
#pragma unroll
    for (int j = 0; j < SM_NTL; j++) {
      const uint wd = (warp * SM_DPW + (uint)j * 8u + 2u * tq) >> 1;
      kd[gq * SM_KDP + wd] =
          (uint)dsa_f32_to_bf16(acc[j][0] * f0) | ((uint)dsa_f32_to_bf16(acc[j][1] * f0) << 16);
      kd[(gq + 8u) * SM_KDP + wd] =
          (uint)dsa_f32_to_bf16(acc[j][2] * f1) | ((uint)dsa_f32_to_bf16(acc[j][3] * f1) << 16);
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int o16 = ((o_off | o_ts | o_hs) & 15u) == 0u;
  for (uint idx = tid; idx < HG * 64u; idx += SM_WI) {
    const uint h = idx >> 6, c = idx & 63u;
    const int head = g * HG + (int)h;
    if (head < n_heads)
      dsa_store16(out + o_off + t * o_ts + (ulong)head * o_hs + c * 16u,
                  *(__local const uint4 *)(kd + h * SM_KDP + c * 4u), o16);
  }
}

#define SM_LOCALS                                                 \
  __local uint4 kd4[SM_NT * SM_KDP / 4];                          \
  __local uint4 kv4[SM_NT / 2 * SM_KVP / 4];                      \
  __local float part[SM_NW * HG * SM_PP] __attribute__((aligned(16))); \
  __local uint pw[2 * HG * 8];                                        \
  __local float al[HG];                                           \
  __local float fin[HG];                                          \
  __local int vm[SM_NT]

__kernel __attribute__((reqd_work_group_size(SM_WI, 1, 1))) void sparse_attn_bf16_mma(
    SA_BF16_PARAMS) {
  SM_LOCALS;
  dsa_iset sa = SA_ISET_BF16;
  mma_body(&sa, &sa, lens_mem, lens_off, lens_s0, has_lens, lens_mem, lens_off, lens_s0, 0, 0,
           SA_Q_ARGS, n_heads, SA_OUT_ARGS, SA_LSE_ARGS, (__local uint *)kd4, (__local uint *)kv4,
           part, pw, al, vm, fin);
}

__kernel __attribute__((reqd_work_group_size(SM_WI, 1, 1))) void sparse_mla_decode_fused_mma(
    SA_FUSED_PARAMS) {
  SM_LOCALS;
  dsa_iset sa = SA_ISET(a);
  dsa_iset sb = SA_ISET(b);
  mma_body(&sa, &sb, la_mem, la_off, la_s0, SA_HAS_LEN(ka, hla), lb_mem, lb_off, lb_s0,
           SA_HAS_LEN(kb, hlb), 1, SA_Q_ARGS,
           n_heads, SA_OUT_ARGS, SA_LSE_ARGS, (__local uint *)kd4, (__local uint *)kv4, part, pw,
           al, vm, fin);
}
#endif
