/* Matrix-tile layer: one sub-group-level multiply-accumulate "atom"
 *
 *     C[M x N] += A[M x K] * B[K x N]      bf16 x bf16 -> f32
 *
 * with a back-end per vendor, chosen at build time by DSA_TILE (host:
 * src/caps.c, DSACL_MMA). A kernel written over the layer is written once:
 * it stages its operands in local memory as bf16 pairs (uint words, the
 * lower-indexed element in the low half), A row-major (M rows of K), B as N
 * rows of K (each column of B contiguous: the keys of an attention or
 * logits tile), both with a pitch in words; it loads fragments, multiplies,
 * and reads the accumulator elements back with their (row, column).
 *
 *   back-end            DSA_TILE            lanes  M  N  K  instruction
 *   portable            DSA_TILE_PORTABLE     1    4  4  8  fma, one work-item
 *   NVIDIA mma.sync     DSA_TILE_NV          32   16  8 16  mma.m16n8k16 (sm_80+)
 *   Intel DPAS, SIMD16  DSA_TILE_INTEL16     16    8 16 16  intel_sub_group_bf16_bf16_matrix_mad_k16
 *   Intel DPAS, SIMD8   DSA_TILE_INTEL8       8    8  8 16  (same builtin, SIMD8 form: dg2)
 *   AMD MFMA, wave64    DSA_TILE_MFMA        64   16 16 16  v_mfma_f32_16x16x16bf16_1k (gfx90a, gfx94x)
 *   AMD WMMA, wave32    DSA_TILE_WMMA        32   16 16 16  v_wmma_f32_16x16x16_bf16 (gfx11)
 *
 * The lanes, M and N of this table (and A_REGS) are defined once, in the
 * host's DSA_TILE_MAP (src/internal.h); dsa__build_options passes the picked
 * back-end's in as build options. K and the fragment shapes follow from the
 * instruction and are defined below.
 *
 * DSA_TILE_EMU = 1 replaces the one vendor instruction by an exact emulation
 * with Intel sub-group shuffles over a sub-group of the same width (Intel's
 * OpenCL CPU runtime has sizes 8, 16, 32 and 64), following the vendor's
 * documented fragment layout: which lane holds which element. Everything but
 * the instruction (loads, lane arithmetic, accumulator coordinates, the
 * column reductions) is then the real back-end's code. Products of bf16 are
 * exact in f32; only the order of the f32 sums may differ from the hardware.
 *
 * Interface (every lane of a unit calls each function: uniform control):
 *   DSA_TILE_LANES, _M, _N, _K          the atom
 *   DSA_TILE_KERNEL                     kernel attribute (required sub-group size)
 *   DSA_TILE_A_REGS                     1: fragments are small enough that a
 *                                       kernel may keep A in registers
 *   dsa_tile_a / _b / _c                fragment types (structs of arrays)
 *   dsa_tile_lane()                     this work-item's lane in its unit
 *   dsa_tile_load_a(p, pitch)           A atom at p: row r, word w at p[r * pitch + w]
 *   dsa_tile_load_b(p, pitch)           B atom at p: column n, word w at p[n * pitch + w]
 *   dsa_tile_load_b2(p, pitch, off, b)  B atoms at p and p + off into b[0], b[1]
 *   dsa_tile_load_bt2(p, pitch, off, b) load_bt at p and p + off into b[0], b[1]
 *   dsa_tile_load_bt(p, pitch)          B atom stored the other way: row k (of K) at
 *                                       p[k * pitch], element n in half n % 2 of word
 *                                       n / 2 (B^T of load_b: the keys x dims tile of
 *                                       an attention read as P x V's B operand, so
 *                                       one staged copy serves QK and PV)
 *   dsa_tile_zero(), dsa_tile_mma(c, a, b)
 *   DSA_TILE_CE                         accumulator elements per lane: c.v[e]
 *   dsa_tile_row(e), dsa_tile_col(e)    their coordinates in the atom
 *   DSA_TILE_CPAIR                      1: c.v[2i] and c.v[2i + 1] are one row's
 *                                       columns 2c and 2c + 1 (an 8-byte store)
 *   DSA_TILE_CCOLS, dsa_tile_slot(e)    the distinct columns a lane holds and
 *   dsa_tile_slot_col(s)                which one element e is in
 *   dsa_tile_col_sum(v)                 sum of v over the lanes that hold the
 *                                       same columns (all of them get it)
 *   dsa_tile_col_leader()               the lane that writes such a sum
 *   DSA_TILE_MAX8, dsa_tile_max8(v)     1: the largest v over the 8 work-items
 *                                       8i .. 8i + 7 of a unit (shuffles; all
 *                                       of them get it); 0 (portable): none
 *   DSA_TILE_HAS_F16, dsa_tile_mma_h()  1: the same with f16 pairs (every
 *                                       matrix back-end; 0: portable)
 *   DSA_TILE_HAS_KP                     1: the keys kernel's maps below (every
 *                                       matrix back-end; 0: portable)
 * The keys kernel (cl/indexer_logits.cl, *_keys*: keys as A, FP8 rows read
 * straight from global memory; queries as B) takes the 128 dims in a
 * permuted order, one per back-end, chosen so that a lane's A elements are
 * contiguous bytes of its key rows; A and B take the same order, which a
 * dot product allows. Each map must cover the 128 dims once over the
 * 128 / K k-steps.
 *   DSA_TILE_KP_ROWS, dsa_tile_kp_row(h) the A rows (keys of an M-key m-tile)
 *                                       a lane loads, h < KP_ROWS
 *   DSA_TILE_KP_NLD, _KP_CHUNK,         per row, KP_NLD loads (dsa_tile_kp_load:
 *   dsa_tile_kp_k0(), dsa_tile_kp_load  16 bytes, or 8 in .xy) at byte
 *                                       kp_k0() + KP_CHUNK i
 *   dsa_tile_a_kp_e4m3(x, ks)           k-step ks's A fragment from those
 *                                       loads x[KP_ROWS][KP_NLD], f16 x 2^-8
 *   dsa_tile_kp_col(), DSA_TILE_KP_BNLD, the B column (head) a lane loads:
 *   _KP_BGL, _KP_BCHUNK, dsa_tile_kp_bk0() KP_BNLD 16-byte loads at kp_bk0() +
 *                                       KP_BCHUNK i, in groups of KP_BGL
 *   dsa_tile_b_kp_e4m3(x, s)            k-step s of a group (KM_KS / groups
 *                                       a group) from its loads x[KP_BGL]
 *   DSA_TILE_BW, DSA_TILE_B_SLOTS,      words of a B fragment; the distinct
 *   dsa_tile_b_slot()                   fragments of a unit (BW x SLOTS x 2 =
 *                                       N x K: each element once) and this
 *                                       lane's (lanes holding copies share)
 *   DSA_TILE_CROWS, dsa_tile_rslot(e),  the distinct C rows a lane holds, which
 *   dsa_tile_rslot_row(h)               one element e is in, and its row
 *   DSA_TILE_KP_OWN                     1: kp_row(h) == rslot_row(h), h <
 *                                       KP_ROWS == CROWS (a lane's loaded rows
 *                                       are its C rows: it can locate its keys
 *                                       itself)
 *   dsa_tile_row_sum(v), dsa_tile_row_leader()
 *                                       sum of v over the lanes holding the same
 *                                       C rows (a row's columns; all get it),
 *                                       and the lane that writes it
 *   (dsa_common.h: dsa_e4m3x2_to_f16x2_scaled, two e4m3 bytes as an f16 pair x 2^-8)
 *
 * A unit is DSA_TILE_LANES consecutive work-items of the linear local id
 * (a warp, a sub-group, a wave); work-groups are multiples of it.
 * dsa_async.h (asynchronous global -> local copies, NVIDIA ldmatrix) comes
 * with it. Include after dsa_common.h, in the programs that use it. */
#ifndef DSA_TILE_H
#define DSA_TILE_H

#include "dsa_async.h"

/* The back-ends' codes (DSA_TILE_PORTABLE, _NV, _INTEL16, _INTEL8, _MFMA,
 * _WMMA) come from the host's table (src/internal.h DSA_TILE_MAP) as build
 * options, beside DSA_TILE, the picked one. */
#ifndef DSA_TILE_WMMA
#error "build options lack the host's tile back-end table (see dsa__build_options)"
#endif
/* So do the picked back-end's lanes, M, N and A_REGS: the host's table
 * (DSA_TILE_MAP) is their one home; K and the fragment shapes below follow
 * from the instruction. */
#if !defined(DSA_TILE_LANES) || !defined(DSA_TILE_M) || !defined(DSA_TILE_N) || \
    !defined(DSA_TILE_A_REGS)
#error "build options lack the tile back-end's geometry (see dsa__build_options)"
#endif

#ifndef DSA_TILE
#define DSA_TILE DSA_TILE_PORTABLE
#endif
#ifndef DSA_TILE_EMU
#define DSA_TILE_EMU 0
#endif

/* bf16 halves of a word, as f32 (exact). */
DSA_INLINE float dsa_tile_lo(uint w) { return as_float(w << 16); }
DSA_INLINE float dsa_tile_hi(uint w) { return as_float(w & 0xFFFF0000u); }
/* dsa_tile_load_bt's elements: bf16 bits of B[k][n], and the pair B[k][n],
 * B[k + 1][n] as a word (k in the low half), B row-major over K rows. */
DSA_INLINE uint dsa_tile_kn(__local const uint *p, uint pitch, uint k, uint n) {
  return (p[k * pitch + (n >> 1)] >> (16u * (n & 1u))) & 0xFFFFu;
}
DSA_INLINE uint dsa_tile_kn2(__local const uint *p, uint pitch, uint k, uint n) {
  return dsa_tile_kn(p, pitch, k, n) | (dsa_tile_kn(p, pitch, k + 1u, n) << 16);
}
/* Word s (0..3) of x; s is a constant after unrolling. */
DSA_INLINE uint dsa_tile_word4(const uint4 x, const int s) {
  return s == 0 ? x.x : s == 1 ? x.y : s == 2 ? x.z : x.w;
}
/* Byte i (0..15) of x, in the low 8 bits. */
DSA_INLINE uint dsa_tile_byte16(const uint4 x, const int i) {
  return (dsa_tile_word4(x, i >> 2) >> (8 * (i & 3))) & 0xFFu;
}

#if DSA_TILE == DSA_TILE_NV
/* ---- NVIDIA: mma.sync.m16n8k16 (PTX ISA "Matrix Fragments for mma.m16n8k16
 * with floating point type"); g = lane / 4, t = lane % 4:
 *   A: a0 (g, k 2t..2t+1), a1 (g + 8, 2t..), a2 (g, 2t + 8..), a3 (g + 8, 2t + 8..)
 *   B: b0 (k 2t..2t+1, column g), b1 (k 2t + 8.., g)
 *   C: c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1)
 * Emulated (DSA_TILE_EMU) on Intel sub-groups of 32: the warp's lanes are
 * the sub-group's, shfl.sync becomes intel_sub_group_shuffle_xor. */
#if !DSA_HAS_NV_PTX && !DSA_TILE_EMU
#error "DSA_TILE_NV needs NVIDIA inline PTX"
#endif
#define DSA_TILE_K 16
#define DSA_TILE_CE 4
#define DSA_TILE_CCOLS 2
#define DSA_TILE_CPAIR 1
typedef struct { uint v[4]; } dsa_tile_a;
typedef struct { uint v[2]; } dsa_tile_b;
typedef struct { float v[4]; } dsa_tile_c;
#if DSA_TILE_EMU
#define DSA_TILE_KERNEL __attribute__((intel_reqd_sub_group_size(DSA_TILE_LANES)))
DSA_INLINE uint dsa_tile_lane(void) { return get_sub_group_local_id(); }
DSA_INLINE float dsa_tile_shfl_xor(float v, int m) {
  return intel_sub_group_shuffle_xor(v, (uint)m);
}
#else
#define DSA_TILE_KERNEL
DSA_INLINE uint dsa_tile_lane(void) { return get_local_id(0) & 31u; }
DSA_INLINE float dsa_tile_shfl_xor(float v, int m) { return dsa_nv_shfl_xor_f32(v, m); }
#endif
DSA_INLINE dsa_tile_a dsa_tile_load_a(__local const uint *p, uint pitch) {
  const uint g = dsa_tile_lane() >> 2, t = dsa_tile_lane() & 3u;
  dsa_tile_a a;
  a.v[0] = p[g * pitch + t];
  a.v[1] = p[(g + 8u) * pitch + t];
  a.v[2] = p[g * pitch + t + 4u];
  a.v[3] = p[(g + 8u) * pitch + t + 4u];
  return a;
}
DSA_INLINE dsa_tile_b dsa_tile_load_b(__local const uint *p, uint pitch) {
  const uint g = dsa_tile_lane() >> 2, t = dsa_tile_lane() & 3u;
  dsa_tile_b b;
  b.v[0] = p[g * pitch + t];
  b.v[1] = p[g * pitch + t + 4u];
  return b;
}
#if !DSA_TILE_EMU
/* Two B atoms (columns at p and at p + off) by one ldmatrix .x4: matrices
 * (atom 0, k 0-7), (atom 0, k 8-15), (atom 1, k 0-7), (atom 1, k 8-15),
 * lane l giving row l % 8 of matrix l / 8 (16-byte aligned: p, off and
 * pitch multiples of 4 words); register j of lane (g, t) is that matrix's
 * row g, words t: b0 and b1 of each atom. One instruction where
 * dsa_tile_load_b takes two loads an atom. */
#define DSA_TILE_HAS_B2 1
DSA_INLINE void dsa_tile_load_b2(__local const uint *p, uint pitch, uint off, dsa_tile_b *b) {
  const uint l = dsa_tile_lane();
  uint r[4];
  dsa_nv_ldsm_x4(r, p + (l >> 4) * off + (l & 7u) * pitch + ((l >> 3) & 1u) * 4u);
  b[0].v[0] = r[0], b[0].v[1] = r[1], b[1].v[0] = r[2], b[1].v[1] = r[3];
}
/* Two B atoms stored the other way (dsa_tile_load_bt at p and at p + off,
 * off a multiple of 4 words) by one ldmatrix .x4 .trans: lanes 0-15 give
 * atom 0's rows k, lanes 16-31 atom 1's. */
#define DSA_TILE_HAS_BT2 1
DSA_INLINE void dsa_tile_load_bt2(__local const uint *p, uint pitch, uint off, dsa_tile_b *b) {
  const uint l = dsa_tile_lane();
  uint r[4];
  dsa_nv_ldsm_x4_t(r, p + (l & 15u) * pitch + (l >> 4) * off);
  b[0].v[0] = r[0], b[0].v[1] = r[1], b[1].v[0] = r[2], b[1].v[1] = r[3];
}
#endif
/* b0 = (k 2t..2t+1, n g), b1 = (k 2t+8.., g): ldmatrix .trans of the two
 * 8 x 8 blocks (rows k 0-7 and 8-15, columns n 0-7; lanes 0-15 give their
 * row addresses, 16-byte aligned: p and pitch multiples of 4 words). */
DSA_INLINE dsa_tile_b dsa_tile_load_bt(__local const uint *p, uint pitch) {
  dsa_tile_b b;
#if DSA_TILE_EMU
  const uint g = dsa_tile_lane() >> 2, t = dsa_tile_lane() & 3u;
  b.v[0] = dsa_tile_kn2(p, pitch, 2u * t, g);
  b.v[1] = dsa_tile_kn2(p, pitch, 2u * t + 8u, g);
#else
  dsa_nv_ldsm_x2_t(b.v, p + (dsa_tile_lane() & 15u) * pitch);
#endif
  return b;
}
#if DSA_TILE_EMU
/* Half hi (0: bits 0-15, 1: bits 16-31) of a word of two bf16 (or f16). */
DSA_INLINE float dsa_tile_emu_h(uint w, int hi, const int f16) {
  return f16 ? dsa_f16_to_f32(hi ? w >> 16 : w) : (hi ? dsa_tile_hi(w) : dsa_tile_lo(w));
}
/* The instruction's definition over the fragment map above: element (r, n)
 * sums A[r][k] B[k][n] over k, A[r][k] from lane 4 (r % 8) + (k % 8) / 2,
 * register (r >= 8) + 2 (k >= 8), half k % 2; B[k][n] from lane
 * 4 n + (k % 8) / 2, register k >= 8, half k % 2. */
DSA_INLINE dsa_tile_c dsa_tile_emu_mma(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b,
                                       const int f16) {
  const uint g = dsa_tile_lane() >> 2, t = dsa_tile_lane() & 3u;
  /* k = 2p and 2p + 1 share a word: one shuffle of each operand a pair
   * (Intel's CPU compiler took minutes on the keys kernels' emulated MMAs
   * with a shuffle per k), and each word fetched once: rows g and g + 8 of
   * A (wa[h][p]), columns 2t and 2t + 1 of B (wb[h][p]), 32 shuffles where
   * fetching them per element took 64. The sum's order is unchanged. */
  uint wa[2][8], wb[2][8];
#pragma unroll
  for (int p = 0; p < 8; p++) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      wa[h][p] = intel_sub_group_shuffle(a.v[h + 2 * (p >> 2)], 4u * g + (uint)(p & 3));
      wb[h][p] = intel_sub_group_shuffle(b.v[p >> 2], 4u * (2u * t + (uint)h) + (uint)(p & 3));
    }
  }
#pragma unroll
  for (int e = 0; e < 4; e++) {
    float acc = c.v[e];
#pragma unroll
    for (int p = 0; p < 8; p++) {
      const uint x = wa[e >> 1][p], y = wb[e & 1][p];
      acc = fma(dsa_tile_emu_h(x, 0, f16), dsa_tile_emu_h(y, 0, f16), acc);
      acc = fma(dsa_tile_emu_h(x, 1, f16), dsa_tile_emu_h(y, 1, f16), acc);
    }
    c.v[e] = acc;
  }
  return c;
}
DSA_INLINE dsa_tile_c dsa_tile_mma(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b) {
  return dsa_tile_emu_mma(c, a, b, 0);
}
DSA_INLINE dsa_tile_c dsa_tile_mma_h(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b) {
  return dsa_tile_emu_mma(c, a, b, 1);
}
#else
DSA_INLINE dsa_tile_c dsa_tile_mma(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b) {
  dsa_nv_mma_bf16(c.v, a.v[0], a.v[1], a.v[2], a.v[3], b.v[0], b.v[1]);
  return c;
}
DSA_INLINE dsa_tile_c dsa_tile_mma_h(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b) {
  dsa_nv_mma_f16(c.v, a.v[0], a.v[1], a.v[2], a.v[3], b.v[0], b.v[1]);
  return c;
}
#endif
DSA_INLINE uint dsa_tile_row(int e) { return (dsa_tile_lane() >> 2) + 8u * (uint)(e >> 1); }
DSA_INLINE uint dsa_tile_col(int e) { return 2u * (dsa_tile_lane() & 3u) + (uint)(e & 1); }
DSA_INLINE int dsa_tile_slot(int e) { return e & 1; }
DSA_INLINE uint dsa_tile_slot_col(int s) { return 2u * (dsa_tile_lane() & 3u) + (uint)s; }
DSA_INLINE float dsa_tile_col_sum(float v) {
  v += dsa_tile_shfl_xor(v, 4);
  v += dsa_tile_shfl_xor(v, 8);
  return v + dsa_tile_shfl_xor(v, 16);
}
DSA_INLINE int dsa_tile_col_leader(void) { return dsa_tile_lane() < 4u; }
/* The sum over a C row's columns held by this unit (lanes 4g .. 4g + 3 hold
 * row g's and g + 8's), and the lane that holds it after. */
DSA_INLINE float dsa_tile_row_sum(float v) {
  v += dsa_tile_shfl_xor(v, 1);
  return v + dsa_tile_shfl_xor(v, 2);
}
DSA_INLINE int dsa_tile_row_leader(void) { return (dsa_tile_lane() & 3u) == 0u; }
#define DSA_TILE_HAS_F16 1
/* The keys kernel's maps (DSA_TILE_HAS_KP; the interface is in the header
 * comment). Lane (g, t) loads 16 bytes at 16 t + 64 i (i < 2) of A rows
 * g and g + 8 and of B column g; word s of load i is k-step 4 i + s: the
 * fragment map's k {2t, 2t + 1, 2t + 8, 2t + 9} are its four bytes. Its
 * accumulators hold rows g, g + 8 (the rows it loaded: KP_OWN) and columns
 * 2t, 2t + 1. */
#define DSA_TILE_HAS_KP 1
#define DSA_TILE_KP_ROWS 2
#define DSA_TILE_KP_NLD 2
#define DSA_TILE_KP_CHUNK 64
#define DSA_TILE_KP_BNLD 2
#define DSA_TILE_KP_BGL 1
#define DSA_TILE_KP_BCHUNK 64
#define DSA_TILE_KP_OWN 1
#define DSA_TILE_CROWS 2
#define DSA_TILE_BW 2
#define DSA_TILE_B_SLOTS 32
DSA_INLINE uint dsa_tile_kp_row(int h) { return (dsa_tile_lane() >> 2) + 8u * (uint)h; }
DSA_INLINE uint dsa_tile_kp_col(void) { return dsa_tile_lane() >> 2; }
DSA_INLINE uint dsa_tile_kp_k0(void) { return 16u * (dsa_tile_lane() & 3u); }
DSA_INLINE uint dsa_tile_kp_bk0(void) { return 16u * (dsa_tile_lane() & 3u); }
DSA_INLINE uint4 dsa_tile_kp_load(__global const uchar *p, int al) { return dsa_load16(p, al); }
DSA_INLINE uint dsa_tile_b_slot(void) { return dsa_tile_lane(); }
/* Words of four e4m3 elements (rows kp_row(0), kp_row(1); B: column
 * kp_col()) as one k-step's f16 fragments, x 2^-8 (dsa_e4m3x2_to_f16x2_scaled:
 * exact; the kernel folds 2^16 back in after the product). */
DSA_INLINE_ALWAYS dsa_tile_a dsa_tile_a_kp_e4m3(const uint4 x[DSA_TILE_KP_ROWS][DSA_TILE_KP_NLD],
                                                const int ks) {
  const uint w0 = dsa_tile_word4(x[0][ks >> 2], ks & 3), w1 = dsa_tile_word4(x[1][ks >> 2], ks & 3);
  dsa_tile_a a;
  a.v[0] = dsa_e4m3x2_to_f16x2_scaled(w0);
  a.v[1] = dsa_e4m3x2_to_f16x2_scaled(w1);
  a.v[2] = dsa_e4m3x2_to_f16x2_scaled_hi(w0);
  a.v[3] = dsa_e4m3x2_to_f16x2_scaled_hi(w1);
  return a;
}
DSA_INLINE_ALWAYS dsa_tile_b dsa_tile_b_kp_e4m3(const uint4 x[DSA_TILE_KP_BGL], const int s) {
  const uint w = dsa_tile_word4(x[0], s);
  dsa_tile_b b;
  b.v[0] = dsa_e4m3x2_to_f16x2_scaled(w);
  b.v[1] = dsa_e4m3x2_to_f16x2_scaled_hi(w);
  return b;
}
DSA_INLINE int dsa_tile_rslot(int e) { return e >> 1; }
DSA_INLINE uint dsa_tile_rslot_row(int h) { return (dsa_tile_lane() >> 2) + 8u * (uint)h; }
#define DSA_TILE_MAX8 1
DSA_INLINE float dsa_tile_max8(float v) {
  v = fmax(v, dsa_tile_shfl_xor(v, 1));
  v = fmax(v, dsa_tile_shfl_xor(v, 2));
  return fmax(v, dsa_tile_shfl_xor(v, 4));
}

#elif DSA_TILE == DSA_TILE_INTEL16 || DSA_TILE == DSA_TILE_INTEL8
/* ---- Intel DPAS (cl_intel_subgroup_matrix_multiply_accumulate), M = 8.
 * The sub-group is N wide; lane n holds column n of B (int8: k = 2j in the
 * low half of word j, 2j + 1 in the high half) and of C (float8: row m in
 * element m). A (8 rows): SIMD16, short8, lane n holds column k = n of every
 * row; SIMD8, int8, lane n holds the pair k = 2n, 2n + 1 of every row. */
#define DSA_TILE_KERNEL __attribute__((intel_reqd_sub_group_size(DSA_TILE_LANES)))
#if DSA_TILE == DSA_TILE_INTEL16
typedef struct { ushort v[8]; } dsa_tile_a;
#else
typedef struct { uint v[8]; } dsa_tile_a;
#endif
#define DSA_TILE_K 16
#define DSA_TILE_CE 8
#define DSA_TILE_CCOLS 1
#define DSA_TILE_CPAIR 0
typedef struct { uint v[8]; } dsa_tile_b;
typedef struct { float v[8]; } dsa_tile_c;
DSA_INLINE uint dsa_tile_lane(void) { return get_sub_group_local_id(); }
DSA_INLINE dsa_tile_a dsa_tile_load_a(__local const uint *p, uint pitch) {
  const uint n = dsa_tile_lane();
  dsa_tile_a a;
#pragma unroll
  for (int m = 0; m < 8; m++) {
#if DSA_TILE == DSA_TILE_INTEL16
    a.v[m] = (ushort)(p[(uint)m * pitch + (n >> 1)] >> (16u * (n & 1u)));
#else
    a.v[m] = p[(uint)m * pitch + n];
#endif
  }
  return a;
}
DSA_INLINE dsa_tile_b dsa_tile_load_b(__local const uint *p, uint pitch) {
  const uint n = dsa_tile_lane();
  dsa_tile_b b;
#pragma unroll
  for (int j = 0; j < 8; j++) b.v[j] = p[n * pitch + (uint)j];
  return b;
}
DSA_INLINE dsa_tile_b dsa_tile_load_bt(__local const uint *p, uint pitch) {
  const uint n = dsa_tile_lane();
  dsa_tile_b b;
#pragma unroll
  for (int j = 0; j < 8; j++) b.v[j] = dsa_tile_kn2(p, pitch, 2u * (uint)j, n);
  return b;
}
#if DSA_TILE_EMU
/* The builtin's definition (the extension's coding sample; bf16, or f16
 * with f16): row m of A is spread over the sub-group, so lane n's result for
 * row m is the sum over k of A[m][k] (from the lane holding k) times its own
 * B[k][n]. */
DSA_INLINE float dsa_tile_h16(uint h, const int f16) {
  return f16 ? dsa_f16_to_f32(h) : as_float(h << 16);
}
DSA_INLINE dsa_tile_c dsa_tile_emu_mma(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b,
                                       const int f16) {
#pragma unroll
  for (int m = 0; m < 8; m++) {
    float acc = c.v[m];
#if DSA_TILE == DSA_TILE_INTEL16
#pragma unroll
    for (int k = 0; k < 16; k++) {
      const uint x = intel_sub_group_shuffle((uint)a.v[m], (uint)k);
      const uint bk = b.v[k >> 1] >> (16 * (k & 1));
      acc = fma(dsa_tile_h16(x, f16), dsa_tile_h16(bk, f16), acc);
    }
#else
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const uint x = intel_sub_group_shuffle(a.v[m], (uint)j);
      acc = fma(dsa_tile_h16(x, f16), dsa_tile_h16(b.v[j], f16), acc);
      acc = fma(dsa_tile_h16(x >> 16, f16), dsa_tile_h16(b.v[j] >> 16, f16), acc);
    }
#endif
    c.v[m] = acc;
  }
  return c;
}
DSA_INLINE dsa_tile_c dsa_tile_mma(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b) {
  return dsa_tile_emu_mma(c, a, b, 0);
}
DSA_INLINE dsa_tile_c dsa_tile_mma_h(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b) {
  return dsa_tile_emu_mma(c, a, b, 1);
}
#else
/* Debian's ocloc (22.43) does not declare the builtins; these are the
 * extension's prototypes (bf16, and f16 for the keys kernel). */
#if DSA_TILE == DSA_TILE_INTEL16
float8 __attribute__((overloadable)) intel_sub_group_bf16_bf16_matrix_mad_k16(short8 a, int8 b,
                                                                              float8 acc);
float8 __attribute__((overloadable)) intel_sub_group_f16_f16_matrix_mad_k16(short8 a, int8 b,
                                                                            float8 acc);
#define DSA_TILE_AV(a) as_short8(vload8(0, (a).v))
#else
float8 __attribute__((overloadable)) intel_sub_group_bf16_bf16_matrix_mad_k16(int8 a, int8 b,
                                                                              float8 acc);
float8 __attribute__((overloadable)) intel_sub_group_f16_f16_matrix_mad_k16(int8 a, int8 b,
                                                                            float8 acc);
#define DSA_TILE_AV(a) as_int8(vload8(0, (a).v))
#endif
DSA_INLINE dsa_tile_c dsa_tile_mma(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b) {
  vstore8(intel_sub_group_bf16_bf16_matrix_mad_k16(DSA_TILE_AV(a), as_int8(vload8(0, b.v)),
                                                   vload8(0, c.v)),
          0, c.v);
  return c;
}
DSA_INLINE dsa_tile_c dsa_tile_mma_h(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b) {
  vstore8(intel_sub_group_f16_f16_matrix_mad_k16(DSA_TILE_AV(a), as_int8(vload8(0, b.v)),
                                                 vload8(0, c.v)),
          0, c.v);
  return c;
}
#undef DSA_TILE_AV
#endif
DSA_INLINE uint dsa_tile_row(int e) { return (uint)e; }
DSA_INLINE uint dsa_tile_col(int e) { return (void)e, dsa_tile_lane(); }
DSA_INLINE int dsa_tile_slot(int e) { return (void)e, 0; }
DSA_INLINE uint dsa_tile_slot_col(int s) { return (void)s, dsa_tile_lane(); }
DSA_INLINE float dsa_tile_col_sum(float v) { return v; }
DSA_INLINE int dsa_tile_col_leader(void) { return 1; }
#define DSA_TILE_MAX8 1
DSA_INLINE float dsa_tile_max8(float v) {
  v = fmax(v, intel_sub_group_shuffle_xor(v, 1u));
  v = fmax(v, intel_sub_group_shuffle_xor(v, 2u));
  return fmax(v, intel_sub_group_shuffle_xor(v, 4u));
}
#define DSA_TILE_HAS_F16 1
/* The keys kernel's maps (DSA_TILE_HAS_KP). A is 8 key rows spread over the
 * sub-group, so every lane loads all 8 rows (KP_ROWS 8: the rows its C
 * elements hold, KP_OWN) at its own bytes, and B is a whole column a lane.
 *   SIMD16: lane n holds A[m][k = n] of k-step s; its physical dim is 8 n + s,
 *     so a lane loads 8 bytes at 8 n of each row (byte s is k-step s), and
 *     B column n's k = 2j, 2j + 1 are dims 16 j + s and 16 j + 8 + s
 *     (bytes s and 8 + s of the column's 16-byte load j).
 *   SIMD8: lane n holds A[m][k = 2n, 2n + 1]: dims 16 n + 2s, + 1, so a lane
 *     loads 16 bytes at 16 n of each row (byte pair s is k-step s), and B's
 *     k = 2j, 2j + 1 are dims 16 j + 2s, + 1 (pair s of load j).
 * Each map covers the 128 dims once over the 8 k-steps. C: lane n holds
 * column n of rows 0..7, so a row's sum over its columns is a sum over the
 * sub-group, which every lane gets; lane 0 writes it. */
#define DSA_TILE_HAS_KP 1
#define DSA_TILE_KP_ROWS 8
#define DSA_TILE_KP_NLD 1
#define DSA_TILE_KP_CHUNK 0
#define DSA_TILE_KP_BNLD 8
#define DSA_TILE_KP_BGL 8
#define DSA_TILE_KP_BCHUNK 16
#define DSA_TILE_KP_OWN 1
#define DSA_TILE_CROWS 8
#define DSA_TILE_BW 8
#define DSA_TILE_B_SLOTS DSA_TILE_LANES
DSA_INLINE uint dsa_tile_kp_row(int h) { return (uint)h; }
DSA_INLINE uint dsa_tile_kp_col(void) { return dsa_tile_lane(); }
DSA_INLINE uint dsa_tile_kp_bk0(void) { return 0u; }
DSA_INLINE uint dsa_tile_b_slot(void) { return dsa_tile_lane(); }
#if DSA_TILE == DSA_TILE_INTEL16
DSA_INLINE uint dsa_tile_kp_k0(void) { return 8u * dsa_tile_lane(); }
DSA_INLINE uint4 dsa_tile_kp_load(__global const uchar *p, int al) {
  return (uint4)(dsa_load8(p, al), 0u, 0u);
}
DSA_INLINE_ALWAYS dsa_tile_a dsa_tile_a_kp_e4m3(const uint4 x[DSA_TILE_KP_ROWS][DSA_TILE_KP_NLD],
                                                const int ks) {
  dsa_tile_a a;
#pragma unroll
  for (int m = 0; m < 8; m++)
    a.v[m] = (ushort)dsa_e4m3x2_to_f16x2_scaled(dsa_tile_byte16(x[m][0], ks));
  return a;
}
DSA_INLINE_ALWAYS dsa_tile_b dsa_tile_b_kp_e4m3(const uint4 x[DSA_TILE_KP_BGL], const int ks) {
  dsa_tile_b b;
#pragma unroll
  for (int j = 0; j < 8; j++)
    b.v[j] = dsa_e4m3x2_to_f16x2_scaled(dsa_tile_byte16(x[j], ks) |
                                        (dsa_tile_byte16(x[j], 8 + ks) << 8));
  return b;
}
#else
DSA_INLINE uint dsa_tile_kp_k0(void) { return 16u * dsa_tile_lane(); }
DSA_INLINE uint4 dsa_tile_kp_load(__global const uchar *p, int al) { return dsa_load16(p, al); }
/* Byte pair s (bytes 2s, 2s + 1) of x, in the low 16 bits. */
DSA_INLINE uint dsa_tile_pair16(const uint4 x, const int s) {
  return dsa_tile_word4(x, s >> 1) >> (16 * (s & 1));
}
DSA_INLINE_ALWAYS dsa_tile_a dsa_tile_a_kp_e4m3(const uint4 x[DSA_TILE_KP_ROWS][DSA_TILE_KP_NLD],
                                                const int ks) {
  dsa_tile_a a;
#pragma unroll
  for (int m = 0; m < 8; m++) a.v[m] = dsa_e4m3x2_to_f16x2_scaled(dsa_tile_pair16(x[m][0], ks));
  return a;
}
DSA_INLINE_ALWAYS dsa_tile_b dsa_tile_b_kp_e4m3(const uint4 x[DSA_TILE_KP_BGL], const int ks) {
  dsa_tile_b b;
#pragma unroll
  for (int j = 0; j < 8; j++) b.v[j] = dsa_e4m3x2_to_f16x2_scaled(dsa_tile_pair16(x[j], ks));
  return b;
}
#endif
DSA_INLINE int dsa_tile_rslot(int e) { return e; }
DSA_INLINE uint dsa_tile_rslot_row(int h) { return (uint)h; }
DSA_INLINE float dsa_tile_row_sum(float v) {
#pragma unroll
  for (uint m = 1u; m < DSA_TILE_LANES; m <<= 1) v += intel_sub_group_shuffle_xor(v, m);
  return v;
}
DSA_INLINE int dsa_tile_row_leader(void) { return dsa_tile_lane() == 0u; }

#elif DSA_TILE == DSA_TILE_MFMA || DSA_TILE == DSA_TILE_WMMA
/* ---- AMD. r = lane % 16.
 * MFMA 16x16x16 bf16_1k, wave64, q = lane / 16 (0..3) (CDNA3 ISA, "Matrix
 * fused multiply add", and AMD's matrix instruction calculator):
 *   A: short4, row r, k 4q..4q+3;  B: short4, column r, k 4q..4q+3;
 *   C: float4, element j at row 4q + j, column r.
 * WMMA 16x16x16 bf16, wave32, h = lane / 16 (0..1) (RDNA3 ISA, "Wave Matrix
 * Multiply Accumulate"): A: short16, row r, k 0..15 (lanes r and r + 16 hold
 * the same); B: short16, column r, k 0..15; C: float8, element j at row
 * 2j + h, column r. */
#if DSA_TILE == DSA_TILE_MFMA
#define DSA_TILE_CE 4
#define DSA_TILE_AW 2 /* words of A (and of B) per lane */
#else
#define DSA_TILE_CE 8
#define DSA_TILE_AW 8
#endif
#define DSA_TILE_K 16
#define DSA_TILE_CCOLS 1
#define DSA_TILE_CPAIR 0
typedef struct { uint v[DSA_TILE_AW]; } dsa_tile_a;
typedef struct { uint v[DSA_TILE_AW]; } dsa_tile_b;
typedef struct { float v[DSA_TILE_CE]; } dsa_tile_c;
#if DSA_TILE_EMU
#define DSA_TILE_KERNEL __attribute__((intel_reqd_sub_group_size(DSA_TILE_LANES)))
DSA_INLINE uint dsa_tile_lane(void) { return get_sub_group_local_id(); }
DSA_INLINE float dsa_tile_xor_sum(float v, uint m) {
  return v + intel_sub_group_shuffle_xor(v, m);
}
DSA_INLINE float dsa_tile_xor_max(float v, uint m) {
  return fmax(v, intel_sub_group_shuffle_xor(v, m));
}
#else
#define DSA_TILE_KERNEL
DSA_INLINE uint dsa_tile_lane(void) {
  return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
}
DSA_INLINE float dsa_tile_xor_sum(float v, uint m) {
  return v + as_float(__builtin_amdgcn_ds_bpermute((int)((dsa_tile_lane() ^ m) << 2),
                                                   as_int(v)));
}
DSA_INLINE float dsa_tile_xor_max(float v, uint m) {
  return fmax(v, as_float(__builtin_amdgcn_ds_bpermute((int)((dsa_tile_lane() ^ m) << 2),
                                                       as_int(v))));
}
#endif
DSA_INLINE dsa_tile_a dsa_tile_load_a(__local const uint *p, uint pitch) {
  const uint r = dsa_tile_lane() & 15u;
#if DSA_TILE == DSA_TILE_MFMA
  const uint w0 = 2u * (dsa_tile_lane() >> 4);
#else
  const uint w0 = 0u;
#endif
  dsa_tile_a a;
#pragma unroll
  for (int w = 0; w < DSA_TILE_AW; w++) a.v[w] = p[r * pitch + w0 + (uint)w];
  return a;
}
DSA_INLINE dsa_tile_b dsa_tile_load_b(__local const uint *p, uint pitch) {
  dsa_tile_a t = dsa_tile_load_a(p, pitch); /* same shape: column r = row r of p */
  dsa_tile_b b;
#pragma unroll
  for (int w = 0; w < DSA_TILE_AW; w++) b.v[w] = t.v[w];
  return b;
}
/* Column r = lane % 16, the same k as load_b's words (MFMA: k 4q + 2w). */
DSA_INLINE dsa_tile_b dsa_tile_load_bt(__local const uint *p, uint pitch) {
  const uint r = dsa_tile_lane() & 15u;
#if DSA_TILE == DSA_TILE_MFMA
  const uint k0 = 4u * (dsa_tile_lane() >> 4);
#else
  const uint k0 = 0u;
#endif
  dsa_tile_b b;
#pragma unroll
  for (int w = 0; w < DSA_TILE_AW; w++) b.v[w] = dsa_tile_kn2(p, pitch, k0 + 2u * (uint)w, r);
  return b;
}
#if DSA_TILE_EMU
/* The element of A (or B) at (index i, k) is held by the lane that loaded
 * row (or column) i with that k: MFMA lane i + 16 (k / 4), word (k % 4) / 2;
 * WMMA lane i, word k / 2. bf16, or f16 with f16. */
DSA_INLINE float dsa_tile_h16(uint h, const int f16) {
  return f16 ? dsa_f16_to_f32(h) : as_float(h << 16);
}
DSA_INLINE dsa_tile_c dsa_tile_emu_mma(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b,
                                       const int f16) {
  const uint lane = dsa_tile_lane(), r = lane & 15u;
#if DSA_TILE == DSA_TILE_MFMA
  /* Column r of B, fetched once for the lane's four rows. */
  uint wbs[8];
#pragma unroll
  for (int p = 0; p < 8; p++)
    wbs[p] = intel_sub_group_shuffle(b.v[p & 1], r + (uint)(p >> 1) * 16u);
#endif
#pragma unroll
  for (int e = 0; e < DSA_TILE_CE; e++) {
#if DSA_TILE == DSA_TILE_MFMA
    const uint row = 4u * (lane >> 4) + (uint)e;
#else
    const uint row = 2u * (uint)e + (lane >> 4);
#endif
    float acc = c.v[e];
    /* k = 2p and 2p + 1 share a word: one shuffle of each operand a pair
     * (the sum's order is unchanged). */
#pragma unroll
    for (int p = 0; p < 8; p++) {
#if DSA_TILE == DSA_TILE_MFMA
      const uint wa = intel_sub_group_shuffle(a.v[p & 1], row + (uint)(p >> 1) * 16u);
      const uint wb = wbs[p];
#else
      const uint wa = intel_sub_group_shuffle(a.v[p], row);
      const uint wb = b.v[p];
#endif
      acc = fma(dsa_tile_h16(wa, f16), dsa_tile_h16(wb, f16), acc);
      acc = fma(dsa_tile_h16(wa >> 16, f16), dsa_tile_h16(wb >> 16, f16), acc);
    }
    c.v[e] = acc;
  }
  return c;
}
DSA_INLINE dsa_tile_c dsa_tile_mma(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b) {
  return dsa_tile_emu_mma(c, a, b, 0);
}
DSA_INLINE dsa_tile_c dsa_tile_mma_h(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b) {
  return dsa_tile_emu_mma(c, a, b, 1);
}
#elif DSA_TILE == DSA_TILE_MFMA
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
DSA_INLINE dsa_tile_c dsa_tile_mma(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b) {
  const float4 d = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(
      as_short4(vload2(0, a.v)), as_short4(vload2(0, b.v)), vload4(0, c.v), 0, 0, 0);
  vstore4(d, 0, c.v);
  return c;
}
DSA_INLINE dsa_tile_c dsa_tile_mma_h(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b) {
  const float4 d = __builtin_amdgcn_mfma_f32_16x16x16f16(
      as_half4(vload2(0, a.v)), as_half4(vload2(0, b.v)), vload4(0, c.v), 0, 0, 0);
  vstore4(d, 0, c.v);
  return c;
}
#else
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
DSA_INLINE dsa_tile_c dsa_tile_mma(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b) {
  const float8 d = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(
      as_short16(vload8(0, a.v)), as_short16(vload8(0, b.v)), vload8(0, c.v));
  vstore8(d, 0, c.v);
  return c;
}
DSA_INLINE dsa_tile_c dsa_tile_mma_h(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b) {
  const float8 d = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(
      as_half16(vload8(0, a.v)), as_half16(vload8(0, b.v)), vload8(0, c.v));
  vstore8(d, 0, c.v);
  return c;
}
#endif
DSA_INLINE uint dsa_tile_row(int e) {
#if DSA_TILE == DSA_TILE_MFMA
  return 4u * (dsa_tile_lane() >> 4) + (uint)e;
#else
  return 2u * (uint)e + (dsa_tile_lane() >> 4);
#endif
}
DSA_INLINE uint dsa_tile_col(int e) { return (void)e, dsa_tile_lane() & 15u; }
DSA_INLINE int dsa_tile_slot(int e) { return (void)e, 0; }
DSA_INLINE uint dsa_tile_slot_col(int s) { return (void)s, dsa_tile_lane() & 15u; }
DSA_INLINE float dsa_tile_col_sum(float v) {
  v = dsa_tile_xor_sum(v, 16u);
#if DSA_TILE == DSA_TILE_MFMA
  v = dsa_tile_xor_sum(v, 32u);
#endif
  return v;
}
DSA_INLINE int dsa_tile_col_leader(void) { return dsa_tile_lane() < 16u; }
#define DSA_TILE_MAX8 1
DSA_INLINE float dsa_tile_max8(float v) {
  v = dsa_tile_xor_max(v, 1u);
  v = dsa_tile_xor_max(v, 2u);
  return dsa_tile_xor_max(v, 4u);
}
#define DSA_TILE_HAS_F16 1
/* The keys kernel's maps (DSA_TILE_HAS_KP). r = lane % 16 loads A row r and
 * B column r (lanes hold k-contiguous elements of one row or column):
 *   MFMA: lane (r, q) holds k 4q..4q + 3 of k-step s; those are dims
 *     64 (s / 4) + 16 q + 4 (s % 4) + 0..3, so it loads 16 bytes at 16 q +
 *     64 i (i < 2) of row r (word s % 4 of load s / 4 is k-step s), the
 *     same for B. C: rows 4q..4q + 3 of column r.
 *   WMMA: lanes r and r + 16 both hold all 16 k of row r (the instruction
 *     wants A and B replicated in the two halves); k-step s is dims 16 s ..
 *     16 s + 15, one 16-byte load each (8 loads of the row). C: rows 2j + h
 *     (h = lane / 16) of column r. B's two halves are the same words: the
 *     kernel keeps 16 slots of B fragments (lanes r and r + 16 read one).
 * The rows a lane loads are not the rows its accumulators hold (KP_OWN 0:
 * the kernel locates keys for the whole group). A row's sum over its
 * columns: the 16 lanes of the same q (h), lane r = 0 writes it. */
#define DSA_TILE_HAS_KP 1
#define DSA_TILE_KP_ROWS 1
#define DSA_TILE_KP_BNLD DSA_TILE_KP_NLD
#define DSA_TILE_KP_BGL 1
#define DSA_TILE_KP_BCHUNK DSA_TILE_KP_CHUNK
#define DSA_TILE_KP_OWN 0
#define DSA_TILE_CROWS DSA_TILE_CE
#define DSA_TILE_BW DSA_TILE_AW
DSA_INLINE uint dsa_tile_kp_row(int h) { return (void)h, dsa_tile_lane() & 15u; }
DSA_INLINE uint dsa_tile_kp_col(void) { return dsa_tile_lane() & 15u; }
DSA_INLINE uint4 dsa_tile_kp_load(__global const uchar *p, int al) { return dsa_load16(p, al); }
#if DSA_TILE == DSA_TILE_MFMA
#define DSA_TILE_KP_NLD 2
#define DSA_TILE_KP_CHUNK 64
#define DSA_TILE_B_SLOTS 64
DSA_INLINE uint dsa_tile_kp_k0(void) { return 16u * (dsa_tile_lane() >> 4); }
DSA_INLINE uint dsa_tile_b_slot(void) { return dsa_tile_lane(); }
DSA_INLINE uint dsa_tile_rslot_row(int h) { return 4u * (dsa_tile_lane() >> 4) + (uint)h; }
/* Four e4m3 bytes (word s % 4 of load s / 4) as an f16 short4. */
DSA_INLINE_ALWAYS void dsa_tile_kp_words(uint *v, const uint4 *x, const int ks) {
  const uint w = dsa_tile_word4(x[ks >> 2], ks & 3);
  v[0] = dsa_e4m3x2_to_f16x2_scaled(w);
  v[1] = dsa_e4m3x2_to_f16x2_scaled_hi(w);
}
#else
#define DSA_TILE_KP_NLD 8
#define DSA_TILE_KP_CHUNK 16
#define DSA_TILE_B_SLOTS 16
DSA_INLINE uint dsa_tile_kp_k0(void) { return 0u; }
DSA_INLINE uint dsa_tile_b_slot(void) { return dsa_tile_lane() & 15u; }
DSA_INLINE uint dsa_tile_rslot_row(int h) { return 2u * (uint)h + (dsa_tile_lane() >> 4); }
/* Sixteen e4m3 bytes (load s) as an f16 short16. */
DSA_INLINE_ALWAYS void dsa_tile_kp_words(uint *v, const uint4 *x, const int ks) {
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const uint w = dsa_tile_word4(x[ks], i);
    v[2 * i] = dsa_e4m3x2_to_f16x2_scaled(w);
    v[2 * i + 1] = dsa_e4m3x2_to_f16x2_scaled_hi(w);
  }
}
#endif
DSA_INLINE uint dsa_tile_kp_bk0(void) { return dsa_tile_kp_k0(); }
DSA_INLINE_ALWAYS dsa_tile_a dsa_tile_a_kp_e4m3(const uint4 x[DSA_TILE_KP_ROWS][DSA_TILE_KP_NLD],
                                                const int ks) {
  dsa_tile_a a;
  dsa_tile_kp_words(a.v, x[0], ks);
  return a;
}
DSA_INLINE_ALWAYS dsa_tile_b dsa_tile_b_kp_e4m3(const uint4 x[DSA_TILE_KP_BGL], const int s) {
  dsa_tile_b b;
  dsa_tile_kp_words(b.v, x, s); /* MFMA: word s of the load; WMMA: s = 0 */
  return b;
}
DSA_INLINE int dsa_tile_rslot(int e) { return e; }
DSA_INLINE float dsa_tile_row_sum(float v) {
  v = dsa_tile_xor_sum(v, 1u);
  v = dsa_tile_xor_sum(v, 2u);
  v = dsa_tile_xor_sum(v, 4u);
  return dsa_tile_xor_sum(v, 8u);
}
DSA_INLINE int dsa_tile_row_leader(void) { return (dsa_tile_lane() & 15u) == 0u; }

#else
/* ---- portable: one work-item is a unit; a 4 x 4 atom over 8 k, the
 * operands converted to f32 once per load (register blocking: each loaded
 * value feeds four FMAs). */
#define DSA_TILE_K 8
#define DSA_TILE_KERNEL
#define DSA_TILE_CE 16
#define DSA_TILE_CCOLS 4
#define DSA_TILE_CPAIR 1
typedef struct { float v[4][8]; } dsa_tile_a;
typedef struct { float v[4][8]; } dsa_tile_b;
typedef struct { float v[16]; } dsa_tile_c;
DSA_INLINE uint dsa_tile_lane(void) { return 0u; }
DSA_INLINE dsa_tile_a dsa_tile_load_a(__local const uint *p, uint pitch) {
  dsa_tile_a a;
#pragma unroll
  for (int m = 0; m < 4; m++) {
    const uint4 x = *(__local const uint4 *)(p + (uint)m * pitch);
    const uint w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
      a.v[m][2 * j] = dsa_tile_lo(w[j]);
      a.v[m][2 * j + 1] = dsa_tile_hi(w[j]);
    }
  }
  return a;
}
DSA_INLINE dsa_tile_b dsa_tile_load_b(__local const uint *p, uint pitch) {
  const dsa_tile_a t = dsa_tile_load_a(p, pitch);
  dsa_tile_b b;
#pragma unroll
  for (int n = 0; n < 4; n++)
#pragma unroll
    for (int k = 0; k < 8; k++) b.v[n][k] = t.v[n][k];
  return b;
}
DSA_INLINE dsa_tile_b dsa_tile_load_bt(__local const uint *p, uint pitch) {
  dsa_tile_b b;
#pragma unroll
  for (int k = 0; k < 8; k++) {
    const uint2 x = *(__local const uint2 *)(p + (uint)k * pitch); /* n 0..3 */
    b.v[0][k] = dsa_tile_lo(x.x), b.v[1][k] = dsa_tile_hi(x.x);
    b.v[2][k] = dsa_tile_lo(x.y), b.v[3][k] = dsa_tile_hi(x.y);
  }
  return b;
}
DSA_INLINE dsa_tile_c dsa_tile_mma(dsa_tile_c c, const dsa_tile_a a, const dsa_tile_b b) {
#pragma unroll
  for (int k = 0; k < 8; k++)
#pragma unroll
    for (int m = 0; m < 4; m++)
#pragma unroll
      for (int n = 0; n < 4; n++) c.v[m * 4 + n] = fma(a.v[m][k], b.v[n][k], c.v[m * 4 + n]);
  return c;
}
DSA_INLINE uint dsa_tile_row(int e) { return (uint)e >> 2; }
DSA_INLINE uint dsa_tile_col(int e) { return (uint)e & 3u; }
DSA_INLINE int dsa_tile_slot(int e) { return e & 3; }
DSA_INLINE uint dsa_tile_slot_col(int s) { return (uint)s; }
DSA_INLINE float dsa_tile_col_sum(float v) { return v; }
DSA_INLINE int dsa_tile_col_leader(void) { return 1; }
#endif

#ifndef DSA_TILE_HAS_F16
#define DSA_TILE_HAS_F16 0
#endif
#ifndef DSA_TILE_HAS_KP
#define DSA_TILE_HAS_KP 0
#endif
#ifndef DSA_TILE_MAX8
#define DSA_TILE_MAX8 0
#endif
#ifndef DSA_TILE_HAS_BT2
#define DSA_TILE_HAS_BT2 0
/* Two B atoms stored the other way, at p and p + off. */
DSA_INLINE void dsa_tile_load_bt2(__local const uint *p, uint pitch, uint off, dsa_tile_b *b) {
  b[0] = dsa_tile_load_bt(p, pitch);
  b[1] = dsa_tile_load_bt(p + off, pitch);
}
#endif
#ifndef DSA_TILE_HAS_B2
#define DSA_TILE_HAS_B2 0
/* Two B atoms, at p and at p + off (one instruction where a back-end has
 * it: DSA_TILE_HAS_B2). */
DSA_INLINE void dsa_tile_load_b2(__local const uint *p, uint pitch, uint off, dsa_tile_b *b) {
  b[0] = dsa_tile_load_b(p, pitch);
  b[1] = dsa_tile_load_b(p + off, pitch);
}
#endif

DSA_INLINE dsa_tile_c dsa_tile_zero(void) {
  dsa_tile_c c;
#pragma unroll
  for (int e = 0; e < DSA_TILE_CE; e++) c.v[e] = 0.0f;
  return c;
}

#endif
