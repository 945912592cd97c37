/* DeepSeek-V4 KV compressor (SPEC-reference §8.5, §5.2, §5.3; exact
 * semantics in docs/COMPRESSOR.md): state saving and the fused compress ->
 * RMSNorm -> RoPE -> quantize -> insert.
 *
 * State cache: F32 [num_blocks, bs, 2*SW], row (s / bs, s % bs) =
 * [kv (SW) | score + ape (SW)], SW = coff * hd (coff = 2 for ratio 4).
 *
 * compressor_save_states: grid (W4 rounded up to 64, T); work-item (j, t)
 * copies floats [4j, 4j+4) of token t's kv (as bits) and writes
 * score + ape for the same four columns. No barriers.
 *
 * compressor_compress_512 / _128: one work-group per token, hd/4 lanes
 * (128 or 32); lane l owns dims [4l, 4l+4) through every stage.
 * compressor_compress_512w / _128w (variant "wide"): hd lanes, lane l owns
 * dim l through the softmax (the same operations per dim, so the same
 * bits), then lanes 0..hd/4-1 take four dims each from local memory for
 * the rest, as above. The window's
 * row addresses are resolved once into local memory (block-table lookups,
 * range checks); each lane then makes three passes over the rows for its
 * dims (max, sum of EXP2, weighted sum; EXP2 recomputed, it is
 * deterministic; at ratio 4 the eight rows are loaded once and the passes
 * run on registers), reduces the sum of squares as the fixed halving tree
 * of docs/COMPRESSOR.md, and quantizes: block maxima through local memory.
 * Tokens that do not close a window read only their metadata; on GPUs the
 * group then leaves before its first barrier, on CPU devices it still
 * passes every barrier (no early return there: see the note at the stores).
 * compressor_c128_part + compressor_c128_tail (variant "split", ratio 128,
 * head 512; at the end of this file): a window's dims over 16 work-groups,
 * the norm and the rest in a second kernel (layout and grids there).
 *
 * Numerics are device-independent: FP_CONTRACT off, fma only where written,
 * EXP2 by a fixed fma polynomial, the softmax division correctly rounded
 * (the device quotient when an exact residual test proves it, else integer
 * long division), 1/sqrt correctly rounded. */
#pragma OPENCL FP_CONTRACT OFF
#include "dsa_mla.h"
#include "dsa_mxfp4.h"
#include "dsa_norm.h"

/* CMP_SAVE_WG (save-states work-group width) and CMP_MAX_ROWS (rows of one
 * window: 2 * 4 or 128) come from src/op_compressor.c as build options. */

/* fp32 1e-4: the indexer FP8 amax floor (§5.2). */
#define CMP_IDX_FLOOR_BITS 0x38D1B717u
#define CMP_MASKED 0xFFFFFFFFFFFFFFFFul
/* Window rows per batch in the softmax (a divisor of 8 and of 128; CMP_B x
 * 4 <= 32, the slow-path bit mask). The wide kernel with its prefetch
 * measured within a few per cent at 2 and 8 (H200, 64 windows of 128 rows:
 * 77.2 / 74.4 / 72.3 us at 2 / 4 / 8, the T = 8192 prefill 172.7 / 189.0 /
 * 186.4; docs/PERFORMANCE.md, session 25). */
#ifndef CMP_B
#define CMP_B 4
#endif
/* CMP_R4 (a build option for A/B): the hd / 4 kernels take ratio 4's eight
 * rows in one round of loads (cmp_body). */
#ifndef CMP_R4
#define CMP_R4 1
#endif

__kernel void compressor_save_states(DSA_CTENSOR2(kv), DSA_CTENSOR2(sc), DSA_CTENSOR2(ape),
                                     DSA_CTENSOR1(pos), int pos_i32, DSA_CTENSOR1(slots),
                                     DSA_TENSOR3(st),
                                     long st_nb, int st_bs, int W4, int ratio, long T,
                                     DSA_FAULTS) {
  const uint j = get_global_id(0);
  const ulong t = get_global_id(1);
  if (t >= (ulong)T || j >= (uint)W4) return;
  const long slot = *(__global const long *)(slots_mem + slots_off + t * slots_s0);
  if (slot < 0) return;
  if (slot >= st_nb * (long)st_bs) {
    if (j == 0u) dsa_fault(faults, DSA_FAULT_SLOT_RANGE);
    return;
  }
  const long p = dsa_load_pos(pos_mem + pos_off + t * pos_s0, pos_i32);
  if (p < 0) {
    if (j == 0u) dsa_fault(faults, DSA_FAULT_POSITION_RANGE);
    return;
  }
  const long blk = dsa_div_nonneg(slot, st_bs);
  const long i = slot - blk * st_bs;
  __global uchar *row = st_mem + st_off + (ulong)blk * st_s0 + (ulong)i * st_s1 + j * 16u;
  const long ar = p % ratio;
  const uint4 k = dsa_load16(kv_mem + kv_off + t * kv_s0 + j * 16u, kv_al >= 16);
  const float4 s = as_float4(dsa_load16(sc_mem + sc_off + t * sc_s0 + j * 16u, sc_al >= 16));
  const float4 a =
      as_float4(dsa_load16(ape_mem + ape_off + (ulong)ar * ape_s0 + j * 16u, ape_al >= 16));
  const int al = st_al >= 16;
  dsa_store16(row, k, al);
  dsa_store16(row + (ulong)W4 * 16u, as_uint4(s + a), al);
}

/* ---- compress ---------------------------------------------------------------- */

/* docs/COMPRESSOR.md EXP2 (t <= 0): C_n = fl32(ln2^n / n!). */
DSA_INLINE float cmp_exp2(float t) {
  if (isnan(t)) return t;
  if (t < -126.0f) return 0.0f;
  const float k = rint(t);
  const float f = t - k;
  float a = 0x1.ffcbfcp-17f;
  a = fma(a, f, 0x1.430912p-13f);
  a = fma(a, f, 0x1.5d87fep-10f);
  a = fma(a, f, 0x1.3b2ab6p-7f);
  a = fma(a, f, 0x1.c6b08ep-5f);
  a = fma(a, f, 0x1.ebfbe0p-3f);
  a = fma(a, f, 0x1.62e430p-1f);
  const float pp = fma(a, f, 1.0f);
  return pp * as_float((uint)((int)k + 127) << 23);
}

/* Correctly rounded w / d for w >= 0 and d > 0 finite, both zero or normal
 * (the softmax weights: EXP2 never returns a subnormal, and d >= 1).
 *
 * Fast path: the device's division q (OpenCL allows 2.5 ulp), accepted only
 * when provably the rounded quotient: with the exact residual E = w - q d,
 * q = RN(w / d) iff -h_dn < E < h_up, h = half an ulp of q (above / below,
 * the one below halved at a power of two) times d; both bounds are exact
 * floats (q >= 2^-100, d >= 1), and fma's rounding of E is monotonic, so
 * RN(E) strictly inside the bounds implies E is (no tie can occur: a
 * midpoint has 25 significant bits, w only 24). Otherwise, integer long
 * division of the significands and rounding to nearest even on the float
 * grid, a subnormal quotient included. */
DSA_INLINE float cmp_div_slow(float w, float d) {
  const uint wb = as_uint(w), db = as_uint(d);
  const ulong mw = (ulong)((wb & 0x7FFFFFu) | 0x800000u);
  const ulong md = (ulong)((db & 0x7FFFFFu) | 0x800000u);
  const ulong num = mw << 26;
  ulong qq = num / md; /* in [2^25, 2^27) */
  uint st = (num - qq * md) != 0ul;
  int e2 = (int)((wb >> 23) & 0xFFu) - (int)((db >> 23) & 0xFFu) - 26; /* w/d = qq * 2^e2 */
  if (qq >= (1ul << 26)) {
    st |= (uint)(qq & 1ul);
    qq >>= 1;
    e2 += 1;
  }
  /* qq in [2^25, 2^26): biased exponent eb = e2 + 25 + 127; keep the bits at
   * or above the result's unit (2^(e2+2) when normal, 2^-149 when not). */
  const int eb = e2 + 152;
  const int sh = eb >= 1 ? 2 : 3 - eb;
  if (sh > 27) return 0.0f;
  const ulong keep = qq >> sh, rem = qq & ((1ul << sh) - 1ul), hf = 1ul << (sh - 1);
  const ulong r = keep + ((rem > hf || (rem == hf && (st || (keep & 1ul)))) ? 1ul : 0ul);
  if (eb < 1) return as_float((uint)r); /* a carry to 2^23 is the smallest normal */
  return as_float(((uint)(eb - 1) << 23) + (uint)r);
}

DSA_INLINE float cmp_div_cr(float w, float d) {
  if (isnan(w) || isnan(d)) return as_float(0x7FC00000u);
  if ((as_uint(w) & 0x7FFFFFFFu) == 0u) return w;
  const float q = w / d;
  const uint qb = as_uint(q);
  if (qb >= 0x0D800000u && qb < 0x7F800000u) { /* 2^-100 <= q, finite */
    const float e = fma(-q, d, w);
    const float ulp_half = as_float((qb & 0x7F800000u) - (24u << 23)); /* ulp(q) / 2 */
    const float h_up = ulp_half * d;
    const float h_dn = (qb & 0x7FFFFFu) ? h_up : h_up * 0.5f;
    if (e < h_up && -e < h_dn) return q;
  }
  return cmp_div_slow(w, d);
}

/* w / d from a guess r of 1/d: q = w r refined by one residual step, and
 * *exact set when the test of cmp_div_cr proves q the rounded quotient
 * (then it is what cmp_div_cr returns); otherwise the caller takes
 * cmp_div_cr. No branches, so a batch of them runs as independent chains.
 * w = 0 (a masked row) gives +0, exact. */
DSA_INLINE float cmp_div_guess(float w, float d, float r, bool *exact) {
  const float q0 = w * r;
  const float q = fma(fma(-q0, d, w), r, q0);
  const uint qb = as_uint(q);
  const float e = fma(-q, d, w);
  const float ulp_half = as_float((qb & 0x7F800000u) - (24u << 23));
  const float h_up = ulp_half * d;
  const float h_dn = (qb & 0x7FFFFFu) ? h_up : h_up * 0.5f;
  *exact = (w == 0.0f && !isnan(d)) ||
           (qb >= 0x0D800000u && qb < 0x7F800000u && e < h_up && -e < h_dn);
  return w == 0.0f ? w : q;
}

DSA_INLINE uint cmp_bf16x2(float a, float b) {
  return (uint)dsa_f32_to_bf16(a) | ((uint)dsa_f32_to_bf16(b) << 16);
}

/* Tensor / cache argument groups passed on to cmp_body and cmp_tail. */
#define CMP_T1(x) x##_mem, x##_off, x##_s0, x##_al
#define CMP_T2(x) x##_mem, x##_off, x##_s0, x##_s1, x##_al
#define CMP_T3(x) x##_mem, x##_off, x##_s0, x##_s1, x##_s2, x##_al
#define CMP_P(x) x##_mem, x##_off, x##_nb, x##_bs, x##_bstride, x##_al

/* The rest of a token's operator after the softmax-gated sum, for one of
 * HD / 4 lanes holding dims [4 lane, 4 lane + 4) in cv (tl false: a lane
 * past them, which stores nothing but passes every barrier): RMSNorm (the
 * fixed halving tree), RoPE, the quantizer and the stores into the cache
 * slot cslot (go false: nothing stored). red, keys: HD / 4 words each. */
DSA_INLINE_ALWAYS void cmp_tail(const int HD, const bool tl, const float cv[4], const bool go,
                                const long cslot, const long pc, DSA_CTENSOR1(w), int w_bf16,
                                DSA_CTENSOR2(cs), int cs_bf16, DSA_PAGED(cache), int fmt,
                                float eps, __local float *red, __local uint *keys) {
  const int LANES = HD / 4;
  const uint lane = get_local_id(0);
  const dsa_paged c = DSA_PAGED_OF(cache);
  /* RMSNorm: lane sum of its four squares, then the halving tree. */
  float a = cv[0] * cv[0];
  a = a + cv[1] * cv[1];
  a = a + cv[2] * cv[2];
  a = a + cv[3] * cv[3];
  if (tl) red[lane] = a;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int wd = LANES / 2; wd >= 1; wd >>= 1) {
    if ((int)lane < wd) red[lane] = red[lane] + red[lane + wd];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float var = red[0] * (HD == 512 ? 0x1p-9f : 0x1p-7f);
  const float rho = dsa_rsqrt_cr(var + eps);
  float n[4];
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const ulong d = tl ? (ulong)lane * 4u + (ulong)k : 0ul;
    __global const uchar *wp = w_mem + w_off + d * w_s0;
    const float g = w_bf16 ? dsa_bf16_to_f32(*(__global const ushort *)wp)
                           : *(__global const float *)wp;
    n[k] = (cv[k] * rho) * g;
  }

  /* RoPE: lane's pairs (2 lane, 2 lane + 1); RoPE section = last 64 dims.
   * Head 128 rotates every pair, (1, 0) before the section (vLLM's masked
   * loads); head 512 only its RoPE lanes. */
  const int rope_lane = tl && (int)lane >= (HD - 64) / 4;
  float rt[4] = {n[0], n[1], n[2], n[3]};
  if (go && (rope_lane || HD == 128)) {
    float cc[2] = {1.0f, 1.0f}, ss[2] = {0.0f, 0.0f};
    if (rope_lane) {
      const int i0 = 2 * (int)lane - (HD - 64) / 2;
      __global const uchar *row = cs_mem + cs_off + (ulong)pc * cs_s0;
      cc[0] = dsa_load_cs(row, cs_bf16, (uint)i0), cc[1] = dsa_load_cs(row, cs_bf16, (uint)i0 + 1u);
      ss[0] = dsa_load_cs(row, cs_bf16, 32u + (uint)i0);
      ss[1] = dsa_load_cs(row, cs_bf16, 33u + (uint)i0);
    }
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const float e = n[2 * k], o = n[2 * k + 1];
      const float os = o * ss[k], es = e * ss[k];
      rt[2 * k] = fma(e, cc[k], -os);
      rt[2 * k + 1] = fma(o, cc[k], es);
    }
  }

  __global uchar *data, *scales;
  const uint tdata = HD == 512 ? (uint)MLA_DATA_BYTES
                     : fmt == 2 ? (uint)DSA_CACHE_INDEXER_FP8_DATA
                                : (uint)DSA_CACHE_INDEXER_MXFP4_DATA;
  const uint tscale = HD == 512 ? (uint)DSA_CACHE_MLA_FP8_SCALE
                      : fmt == 2 ? (uint)DSA_CACHE_INDEXER_FP8_SCALE
                                 : (uint)DSA_CACHE_INDEXER_MXFP4_SCALE;
  dsa_paged_slot(&c, go ? cslot : 0, tdata, tscale, &data, &scales);

  /* The bf16 words the quantizer sees: MLA NoPE unrotated, indexer rotated. */
  const uint lo = HD == 512 ? cmp_bf16x2(n[0], n[1]) : cmp_bf16x2(rt[0], rt[1]);
  const uint hi = HD == 512 ? cmp_bf16x2(n[2], n[3]) : cmp_bf16x2(rt[2], rt[3]);
  if (tl) keys[lane] = max(dsa_bf16x2_abs_key(lo), dsa_bf16x2_abs_key(hi));
  /* What this lane stores, decided before the barrier: 0 nothing, 1 MLA
   * RoPE, 2 MLA NoPE, 3 indexer FP8, 4 indexer MXFP4. */
  const int role = !go || !tl ? 0 : HD == 512 ? (rope_lane ? 1 : 2) : fmt == 2 ? 3 : 4;
  barrier(CLK_LOCAL_MEM_FENCE);
  /* No return anywhere in this kernel on CPU devices: PoCL 5 (pthread)
   * mishandles a uniform early return, even one before the first barrier
   * (private values of other work-items were mixed up: lanes stored one
   * another's dims). There, tokens that do not close a window run the whole
   * body on zeros with go = false and store nothing (GPUs return before the
   * first barrier; later failures, as here, store nothing). */
  if (role == 0) {
  } else if (role == 1) {
    const uint q = lane - (uint)(HD - 64) / 4u;
      dsa_store8(data + MLA_NOPE + 8u * q,
               (uint2)(cmp_bf16x2(rt[0], rt[1]), cmp_bf16x2(rt[2], rt[3])), c.align >= 8);
    if (q == 0u) scales[7] = 0;
  } else if (role == 2) {
    const uint b = lane / 16u;
      uint m = 0u;
    for (uint i = 0; i < 16u; i++) m = max(m, keys[16u * b + i]);
    const int e = mla_block_exp(m);
    vstore4(as_uchar4(dsa_bf16x4_to_e4m3_pow2(lo, hi, e)), 0, data + 4u * lane);
    if ((lane & 15u) == 0u) scales[b] = mla_scale_byte(e);
  } else if (role == 3) {
    uint m = 0u;
    for (uint i = 0; i < 32u; i++) m = max(m, keys[i]);
    const int e = dsa_e4m3_scale_exp(max(m, CMP_IDX_FLOOR_BITS));
    vstore4(as_uchar4(dsa_bf16x4_to_e4m3_pow2(lo, hi, e)), 0, data + 4u * lane);
    if (lane == 0u) vstore4(as_uchar4((uint)(e + 127) << 23), 0, scales);
  } else {
    const uint b = lane / 8u;
    uint m = 0u;
    for (uint i = 0; i < 8u; i++) m = max(m, keys[8u * b + i]);
    const int e = dsa_mxfp4_scale_exp(m, DSA_E2M1_RNE);
    const uint n0 = dsa_bf16_to_e2m1(lo & 0xFFFFu, e, DSA_E2M1_RNE);
    const uint n1 = dsa_bf16_to_e2m1(lo >> 16, e, DSA_E2M1_RNE);
    const uint n2 = dsa_bf16_to_e2m1(hi & 0xFFFFu, e, DSA_E2M1_RNE);
    const uint n3 = dsa_bf16_to_e2m1(hi >> 16, e, DSA_E2M1_RNE);
    vstore2((uchar2)((uchar)(n0 | (n1 << 4)), (uchar)(n2 | (n3 << 4))), 0, data + 2u * lane);
    if ((lane & 7u) == 0u) scales[b] = (uchar)(e + 127);
  }
}

/* The token checks of docs/COMPRESSOR.md (1-4), in their order: whether
 * token t closes a window it may compute; *p its position, *r its request
 * (token_to_req omitted, has_req 0: pure decode, token t is request t),
 * *fbit the fault of the failed check (0: none). */
DSA_INLINE bool cmp_token(const ulong t, const int ratio, DSA_CTENSOR1(slots), DSA_CTENSOR1(pos),
                          int pos_i32, DSA_CTENSOR1(req), int has_req, long bt_rows, long *p,
                          long *r, uint *fbit) {
  bool go = *(__global const long *)(slots_mem + slots_off + t * slots_s0) >= 0;
  *p = dsa_load_pos(pos_mem + pos_off + t * pos_s0, pos_i32);
  *fbit = 0u;
  *r = 0;
  if (go && *p < 0) go = false, *fbit = DSA_FAULT_POSITION_RANGE;
  if (go && (*p + 1) % ratio != 0) go = false;
  if (go) {
    *r = has_req ? *(__global const int *)(req_mem + req_off + t * req_s0) : (long)t;
    if (*r < 0 || *r >= bt_rows) go = false, *fbit = DSA_FAULT_INDEX_RANGE;
  }
  return go;
}

/* Window row i of N (position p - N + 1 + i, request r): the byte offset
 * (from st_mem) of its kv column base (col0 bytes in), or CMP_MASKED for a
 * position before 0; a block index past the table (2 i) or a block id out
 * of range (2 i + 1) goes to *badrow, the lowest wins (docs/COMPRESSOR.md
 * 5). */
DSA_INLINE ulong cmp_row_off(const int i, const int N, const long p, const long r,
                             const ulong col0, DSA_CTENSOR2(bt), long bt_w, long st_nb, int st_bs,
                             ulong st_off, ulong st_s0, ulong st_s1, __local int *badrow) {
  const long qi = p - N + 1 + i;
  if (qi < 0) return CMP_MASKED;
  const long jb = dsa_div_nonneg(qi, st_bs);
  if (jb >= bt_w) {
    atomic_min(badrow, 2 * i);
    return CMP_MASKED;
  }
  const long b = *(__global const int *)(bt_mem + bt_off + (ulong)r * bt_s0 + (ulong)jb * bt_s1);
  if (b < 0 || b >= st_nb) {
    atomic_min(badrow, 2 * i + 1);
    return CMP_MASKED;
  }
  return st_off + (ulong)b * st_s0 + (ulong)(qi - jb * st_bs) * st_s1 + col0;
}

/* The whole operator for one token; HD (512 or 128) and WIDE are literals
 * at each call, so LANES and the loops are constants. fmt: 1 MLA, 2 FP8, 3
 * MXFP4. WIDE: HD lanes, one dim each in the softmax (cbuf: HD floats). */
DSA_INLINE_ALWAYS void cmp_body(const int HD, const int WIDE, DSA_CTENSOR3(st), long st_nb,
                                int st_bs, DSA_CTENSOR2(bt), long bt_rows, long bt_w,
                                DSA_CTENSOR1(req), int has_req,
                                DSA_CTENSOR1(pos), int pos_i32, DSA_CTENSOR1(slots),
                                DSA_CTENSOR1(w), int w_bf16, DSA_CTENSOR2(cs), int cs_bf16,
                                long n_pos, DSA_CTENSOR1(cslots),
                                DSA_PAGED(cache), int fmt, int ratio, float eps, DSA_FAULTS,
                                __local ulong *rowoff, __local float *red, __local uint *keys,
                                __local int *badrow, __local float *cbuf) {
  const int LANES = HD / 4;            /* lanes of the tail: four dims each */
  const int NL = WIDE ? HD : LANES;    /* the group's lanes */
  const int DPL = WIDE ? 1 : 4;        /* dims a lane in the softmax */
  const uint lane = get_local_id(0);
  const ulong t = get_group_id(1);
  const int overlap = ratio == 4;
  const int N = (1 + overlap) * ratio;
  const ulong SW = (ulong)(1 + overlap) * (ulong)HD;
  const dsa_paged c = DSA_PAGED_OF(cache);

  /* Uniform token checks, in the documented order; lane 0 reports. */
  long p, r;
  uint fbit;
  bool go = cmp_token(t, ratio, CMP_T1(slots), CMP_T1(pos), pos_i32, CMP_T1(req), has_req,
                      bt_rows, &p, &r, &fbit);
#if !DSA_DEVICE_CPU
  /* GPUs: a token that closes no window (or failed the checks above) leaves
   * here, before the first barrier, the whole group at once (go is the
   * same in every lane). In a prefill most groups are such tokens (8128 of
   * 8192 at ratio 128); running the body on zeros through every barrier,
   * they held the compute units' slots ahead of the windows' groups. CPU
   * devices keep the no-return form (the note at the stores: PoCL). */
  if (!go) {
    if (lane == 0u && fbit) dsa_fault(faults, fbit);
    return;
  }
#endif
  if (lane == 0u) *badrow = 0x7FFFFFFF;
  barrier(CLK_LOCAL_MEM_FENCE);

  /* Window rows: byte offsets (from st_mem) of each row's kv column base. */
  if (go) {
    for (int i = (int)lane; i < N; i += NL)
      rowoff[i] = cmp_row_off(i, N, p, r, (overlap && i >= ratio) ? (ulong)HD * 4u : 0ul,
                              CMP_T2(bt), bt_w, st_nb, st_bs, st_off, st_s0, st_s1, badrow);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (go && *badrow != 0x7FFFFFFF)
    go = false, fbit = (*badrow & 1) ? DSA_FAULT_SLOT_RANGE : DSA_FAULT_INDEX_RANGE;
  long cslot = -1, pc = 0;
  if (go) {
    cslot = *(__global const long *)(cslots_mem + cslots_off + t * cslots_s0);
    if (cslot < 0) go = false;
    else if (cslot >= c.capacity) go = false, fbit = DSA_FAULT_SLOT_RANGE;
  }
  if (go) {
    pc = p / ratio * ratio;
    if (pc >= n_pos) go = false, fbit = DSA_FAULT_POSITION_RANGE;
  }
  if (lane == 0u && fbit) dsa_fault(faults, fbit);

  /* Softmax-gated sum of the rows for the lane's DPL dims ([4 lane, 4 lane +
   * 4), or dim lane when WIDE), CMP_B rows at a time: a batch's loads are
   * issued together, its CMP_B x DPL weights
   * (EXP2 and the division) computed as independent chains, and only then
   * folded into den / c in row order, as docs/COMPRESSOR.md sums. (One row
   * at a time, a lane's work was one dependent chain: the 64 groups of a
   * ratio-128 decode step took 328 us on an H100.) A masked row adds +0,
   * which leaves the sums unchanged: they start at +0 and never become -0. */
  const float L2E = 0x1.715476p+0f;
  float cv[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  /* A lane's DPL floats at p (the rest of the float4 unused when 1). */
#define CMP_LD(p) (DPL == 4 ? vload4(0, (__global const float *)(p)) \
                            : (float4)(*(__global const float *)(p), 0.0f, 0.0f, 0.0f))
  if (CMP_R4 && go && N == 8) {
    /* Ratio 4 (N = 8 rows): every row's loads at once, then the three
     * passes on registers: one round of memory latency instead of the
     * batches' six (two batches a pass, EXP2 recomputed in the third). The
     * same operations per dim in the same order. H200, C4 main, T = 64
     * decode 17.8 -> 14.4 us, T = 8192 prefill 70.1 -> 55.5 (hd / 4
     * lanes; docs/PERFORMANCE.md, session 28). */
    const ulong col = (ulong)lane * (ulong)(4 * DPL), sco = SW * 4u + col;
    float4 s8[8], k8[8];
    bool ok8[8];
#pragma unroll
    for (int b = 0; b < 8; b++) {
      const ulong off = rowoff[b];
      ok8[b] = off != CMP_MASKED;
      __global const uchar *row = st_mem + (ok8[b] ? off : 0ul);
      s8[b] = ok8[b] ? CMP_LD(row + sco) : (float4)(-INFINITY);
      k8[b] = ok8[b] ? CMP_LD(row + col) : (float4)(0.0f);
    }
    float m[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    float w[8][4], den[4] = {0.0f, 0.0f, 0.0f, 0.0f}, rd[4];
#pragma unroll
    for (int b = 0; b < 8; b++) {
      const float sv[4] = {s8[b].x, s8[b].y, s8[b].z, s8[b].w};
#pragma unroll
      for (int k = 0; k < DPL; k++) m[k] = fmax(m[k], sv[k]);
    }
#pragma unroll
    for (int b = 0; b < 8; b++) {
      const float sv[4] = {s8[b].x, s8[b].y, s8[b].z, s8[b].w};
#pragma unroll
      for (int k = 0; k < DPL; k++) w[b][k] = ok8[b] ? cmp_exp2((sv[k] - m[k]) * L2E) : 0.0f;
    }
#pragma unroll
    for (int b = 0; b < 8; b++)
#pragma unroll
      for (int k = 0; k < DPL; k++) den[k] = den[k] + w[b][k];
#pragma unroll
    for (int k = 0; k < DPL; k++) rd[k] = 1.0f / den[k]; /* a first guess only */
    bool slow = false;
#pragma unroll
    for (int b = 0; b < 8; b++) {
      const float kvv[4] = {k8[b].x, k8[b].y, k8[b].z, k8[b].w};
#pragma unroll
      for (int k = 0; k < DPL; k++) {
        bool exact;
        const float pw = cmp_div_guess(w[b][k], den[k], rd[k], &exact);
        slow |= ok8[b] && !exact;
        cv[k] = cv[k] + kvv[k] * pw; /* masked: 0 * 0 */
      }
    }
    if (slow) { /* rare: a quotient the guess could not prove rounded. The
                 * lane's sums again, every quotient by cmp_div_cr (which
                 * returns the guess where it was proved), in a rolled loop:
                 * 32 inlined copies of the long division made the kernel
                 * 1.5x slower on an H200. */
      cv[0] = cv[1] = cv[2] = cv[3] = 0.0f;
#pragma unroll 1
      for (int b = 0; b < 8; b++) {
        const ulong off = rowoff[b];
        if (off == CMP_MASKED) continue; /* adds +0 */
        const float4 s4 = CMP_LD(st_mem + off + sco), k4 = CMP_LD(st_mem + off + col);
        const float sv[4] = {s4.x, s4.y, s4.z, s4.w}, kvv[4] = {k4.x, k4.y, k4.z, k4.w};
#pragma unroll
        for (int k = 0; k < DPL; k++)
          cv[k] = cv[k] + kvv[k] * cmp_div_cr(cmp_exp2((sv[k] - m[k]) * L2E), den[k]);
      }
    }
  } else if (go) {
    const ulong col = (ulong)lane * (ulong)(4 * DPL);
    const ulong sco = SW * 4u + col;
    float m[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    /* WIDE: each pass loads the next batch before the arithmetic on this
     * one, so a batch's loads wait behind the work instead of the work
     * behind them (a lane walks its window in 3 x N / CMP_B rounds). H200,
     * 64 windows of 128 rows: 124.4 -> 74.2 us. Not in the hd / 4 kernels:
     * there (80 -> 120 registers) the ratio-4 prefill rows lost 14-29 %
     * (HD 512 81.3 -> 92.7 us, HD 128 29.5 -> 38.0). Rows past N and masked
     * rows load nothing: fill. */
    const int PF = WIDE;
#define CMP_BATCH(dst, i0, base, fill)                                        \
  _Pragma("unroll") for (int b = 0; b < CMP_B; b++) {                         \
    const ulong off_ = (i0) + b < N ? rowoff[(i0) + b] : CMP_MASKED;          \
    dst[b] = off_ != CMP_MASKED ? CMP_LD(st_mem + off_ + (base)) : (fill);    \
  }
    float4 ns[CMP_B], nk[CMP_B];
    if (PF) CMP_BATCH(ns, 0, sco, (float4)(-INFINITY)) /* fmax(m, -inf) = m */
    for (int i0 = 0; i0 < N; i0 += CMP_B) {
      float4 sb[CMP_B];
      if (PF) {
#pragma unroll
        for (int b = 0; b < CMP_B; b++) sb[b] = ns[b];
        CMP_BATCH(ns, i0 + CMP_B, sco, (float4)(-INFINITY))
      } else {
        CMP_BATCH(sb, i0, sco, (float4)(-INFINITY))
      }
#pragma unroll
      for (int b = 0; b < CMP_B; b++) {
        const float sv[4] = {sb[b].x, sb[b].y, sb[b].z, sb[b].w};
#pragma unroll
        for (int k = 0; k < DPL; k++) m[k] = fmax(m[k], sv[k]);
      }
    }
    float den[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (PF) CMP_BATCH(ns, 0, sco, (float4)(0.0f))
    for (int i0 = 0; i0 < N; i0 += CMP_B) {
      float4 sb[CMP_B];
      if (PF) {
#pragma unroll
        for (int b = 0; b < CMP_B; b++) sb[b] = ns[b];
        CMP_BATCH(ns, i0 + CMP_B, sco, (float4)(0.0f))
      } else {
        CMP_BATCH(sb, i0, sco, (float4)(0.0f))
      }
      float w[CMP_B][4];
#pragma unroll
      for (int b = 0; b < CMP_B; b++) {
        const bool ok = i0 + b < N && rowoff[i0 + b] != CMP_MASKED;
        const float sv[4] = {sb[b].x, sb[b].y, sb[b].z, sb[b].w};
#pragma unroll
        for (int k = 0; k < DPL; k++) w[b][k] = ok ? cmp_exp2((sv[k] - m[k]) * L2E) : 0.0f;
      }
#pragma unroll
      for (int b = 0; b < CMP_B; b++)
#pragma unroll
        for (int k = 0; k < DPL; k++) den[k] = den[k] + w[b][k];
    }
    float rd[4];
#pragma unroll
    for (int k = 0; k < DPL; k++) rd[k] = 1.0f / den[k]; /* a first guess only */
    if (PF) {
      CMP_BATCH(ns, 0, sco, (float4)(0.0f))
      CMP_BATCH(nk, 0, col, (float4)(0.0f))
    }
    for (int i0 = 0; i0 < N; i0 += CMP_B) {
      float4 sb[CMP_B], kb[CMP_B];
      if (PF) {
#pragma unroll
        for (int b = 0; b < CMP_B; b++) sb[b] = ns[b], kb[b] = nk[b];
        CMP_BATCH(ns, i0 + CMP_B, sco, (float4)(0.0f))
        CMP_BATCH(nk, i0 + CMP_B, col, (float4)(0.0f))
      } else {
        CMP_BATCH(sb, i0, sco, (float4)(0.0f))
        CMP_BATCH(kb, i0, col, (float4)(0.0f))
      }
      float pr[CMP_B][4];
      uint slow = 0u;
#pragma unroll
      for (int b = 0; b < CMP_B; b++) {
        const bool ok = i0 + b < N && rowoff[i0 + b] != CMP_MASKED;
        const float sv[4] = {sb[b].x, sb[b].y, sb[b].z, sb[b].w};
        const float kvv[4] = {kb[b].x, kb[b].y, kb[b].z, kb[b].w};
#pragma unroll
        for (int k = 0; k < DPL; k++) {
          const float e2 = ok ? cmp_exp2((sv[k] - m[k]) * L2E) : 0.0f;
          bool exact;
          const float pw = cmp_div_guess(e2, den[k], rd[k], &exact);
          slow |= (ok && !exact) ? 1u << (b * DPL + k) : 0u;
          pr[b][k] = kvv[k] * pw; /* masked: 0 * 0 */
        }
      }
      if (slow) { /* rare: a quotient the guess could not prove rounded */
#pragma unroll
        for (int b = 0; b < CMP_B; b++) {
          if (!((slow >> (b * DPL)) & ((1u << DPL) - 1u))) continue;
          const ulong off = i0 + b < N ? rowoff[i0 + b] : CMP_MASKED;
          const float4 s4 = CMP_LD(st_mem + off + sco);
          const float4 k4 = CMP_LD(st_mem + off + col);
          const float sv[4] = {s4.x, s4.y, s4.z, s4.w}, kvv[4] = {k4.x, k4.y, k4.z, k4.w};
#pragma unroll
          for (int k = 0; k < DPL; k++)
            if ((slow >> (b * DPL + k)) & 1u)
              pr[b][k] = kvv[k] * cmp_div_cr(cmp_exp2((sv[k] - m[k]) * L2E), den[k]);
        }
      }
#pragma unroll
      for (int b = 0; b < CMP_B; b++)
#pragma unroll
        for (int k = 0; k < DPL; k++) cv[k] = cv[k] + pr[b][k];
    }
  }
#undef CMP_BATCH
#undef CMP_LD
  /* WIDE: lanes 0..LANES-1 take dims [4 lane, 4 lane + 4) for the rest; the
   * others store nothing (tl false) but pass every barrier. */
  const bool tl = !WIDE || (int)lane < LANES;
  if (WIDE) {
    cbuf[lane] = cv[0];
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int k = 0; k < 4; k++) cv[k] = tl ? cbuf[tl ? 4 * lane + (uint)k : 0u] : 0.0f;
  }

  cmp_tail(HD, tl, cv, go, cslot, pc, CMP_T1(w), w_bf16, CMP_T2(cs), cs_bf16, CMP_P(cache), fmt,
           eps, red, keys);
}

#define CMP_KERNEL(NAME, HDV, WIDEV)                                                          \
  __kernel __attribute__((reqd_work_group_size(WIDEV ? HDV : HDV / 4, 1, 1))) void NAME(      \
      DSA_CTENSOR3(st), long st_nb, int st_bs, DSA_CTENSOR2(bt), long bt_rows, long bt_w,    \
      DSA_CTENSOR1(req), int has_req, DSA_CTENSOR1(pos), int pos_i32, DSA_CTENSOR1(slots),   \
      DSA_CTENSOR1(w), int w_bf16, DSA_CTENSOR2(cs), int cs_bf16, long n_pos,                \
      DSA_CTENSOR1(cslots), DSA_PAGED(cache), int fmt,                                        \
      int ratio, float eps, DSA_FAULTS) {                                                     \
    __local ulong rowoff[CMP_MAX_ROWS];                                                       \
    __local float red[HDV / 4];                                                               \
    __local uint keys[HDV / 4];                                                               \
    __local int badrow;                                                                       \
    __local float cbuf[WIDEV ? HDV : 1];                                                      \
    cmp_body(HDV, WIDEV, CMP_T3(st), st_nb, st_bs, CMP_T2(bt), bt_rows, bt_w, CMP_T1(req),    \
             has_req, CMP_T1(pos), pos_i32, CMP_T1(slots), CMP_T1(w), w_bf16, CMP_T2(cs),     \
             cs_bf16, n_pos, CMP_T1(cslots),                                                  \
             CMP_P(cache), fmt, ratio, eps, faults, rowoff, red, keys, &badrow, cbuf);        \
  }

CMP_KERNEL(compressor_compress_512, 512, 0)
CMP_KERNEL(compressor_compress_128, 128, 0)
CMP_KERNEL(compressor_compress_512w, 512, 1)
CMP_KERNEL(compressor_compress_128w, 128, 1)

/* ---- Ratio 128, head 512, a window's dims over work-groups (variant "split")
 * One C128 window is 128 rows x 512 dims of score and kv (512 KB). The
 * kernels above give a window one work-group, which walks its rows in
 * dependent rounds of loads: 64 windows took 74 us on an H200 (a
 * window's time, not its bytes: one alone takes as long) and left 68 of
 * the 132 SMs idle. Here:
 *
 * compressor_c128_part: grid (CMP_PWG * CMP_NS, T), group (s, i) takes
 *   dims [CMP_SD s, CMP_SD (s + 1)) of token t = t0 + i's window (the
 *   host launches the tokens in slices of T, ws's rows). Item i holds rows
 *   i / 8 + 32 j (j < 4), dims CMP_SD s + 4 (i % 8) + [0, 4) of score and
 *   kv: all eight 16-byte loads of an item in flight at once, a row's
 *   slice one 128-byte line over 8 items. Then, per dim, the operations of
 *   docs/COMPRESSOR.md in its order: the max (a tree: fmax ignores NaN, and
 *   a zero max of either sign gives every s the same s - m, hence the same
 *   weights), EXP2 of the item's 16 elements, den summed in row order by
 *   one item a dim from local memory, the correctly rounded quotients and
 *   the products by every item, c[d] summed in row order by one item a
 *   dim into ws[i][d]. Split 0 reports the token's faults and writes its
 *   verdict (a word a token after the T x 512 floats of ws).
 * compressor_c128_part_tb: the same with TB tokens a row of groups (grid
 *   (CMP_PWG * CMP_NS, ceil(nt / TB)); a prefill): the row's tokens are
 *   checked at once and those that close a window computed one after
 *   another (cmp_part_window is the one window body of both kernels).
 * With fuse, the token's last part group to finish (an arrival counter a
 *   token, dsa_group_publish) runs cmp_tail itself on 128 of its items and
 *   the second kernel is not launched.
 * compressor_c128_tail: grid (128, T), a token a group: cmp_tail on the
 *   token's 512 sums in ws (the same lanes and tree as the kernels above).
 *
 * The same operations per dim in the same order as cmp_body, so the same
 * bytes. Local memory: 17.3 KB a group (_tb: 22.3 KB). */
#define CMP_SD 32                /* dims a group */
#define CMP_NS (512 / CMP_SD)    /* groups a window */
#define CMP_PWG 256              /* items a group: 128 rows x 8 float4 / 4 */
#define CMP_PR 128               /* rows of a ratio-128 window */

/* The scratch ws of a slice of T tokens: row tw's 512 sums c[d] at ws + 512
 * tw, then the tokens' verdicts (1: store the window), a word each. */
#define CMP_STAT(ws, T) ((__global int *)((ws) + (ulong)(T) * 512u))

/* The tail of token t (ws row tw) from its sums in ws, on 128 work-items
 * (tl false: one past them); ok false stores nothing. pc: the window's
 * first position. */
DSA_INLINE_ALWAYS void cmp_ws_tail(const ulong tw, const ulong t, const bool ok, const long pc,
                                   const bool tl, __global const float *ws,
                                   DSA_CTENSOR1(cslots), DSA_CTENSOR1(w), int w_bf16,
                                   DSA_CTENSOR2(cs), int cs_bf16, DSA_PAGED(cache), float eps,
                                   __local float *red, __local uint *keys) {
  float cv[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  long cslot = 0;
  if (ok && tl) {
    const float4 c4 = vload4(get_local_id(0), ws + tw * 512u);
    cv[0] = c4.x, cv[1] = c4.y, cv[2] = c4.z, cv[3] = c4.w;
    cslot = *(__global const long *)(cslots_mem + cslots_off + t * cslots_s0);
  }
  cmp_tail(512, tl, cv, ok, cslot, pc, CMP_T1(w), w_bf16, CMP_T2(cs), cs_bf16, CMP_P(cache), 1,
           eps, red, keys);
}

/* The kernels' arguments (one list for both forms, so that the host sets
 * them alike), and what cmp_part_window passes on. */
#define CMP_PART_PARAMS                                                                      \
  DSA_CTENSOR3(st), long st_nb, int st_bs, DSA_CTENSOR2(bt), long bt_rows, long bt_w,    \
      DSA_CTENSOR1(req), int has_req, DSA_CTENSOR1(pos), int pos_i32, DSA_CTENSOR1(slots),    \
      long n_pos, DSA_CTENSOR1(cslots), DSA_PAGED(cache), __global float *ws, long t0, long T, \
      long nt, int TB, DSA_CTENSOR1(w), int w_bf16, DSA_CTENSOR2(cs), int cs_bf16, float eps, \
      __global uint *cnt, int fuse, DSA_FAULTS
#define CMP_PART_LOCALS                                                                      \
  __local ulong rowoff[CMP_PR];                                                             \
  __local uint sel;                                                                         \
  __local float4 buf[CMP_PR * CMP_SD / 4]; /* partial maxima, weights, then products */     \
  __local float vm[CMP_SD], vd[CMP_SD];    /* the dims' max and den */                      \
  __local int badrow
#define CMP_WIN_ARGS                                                                         \
  CMP_T3(st), st_nb, st_bs, CMP_T2(bt), bt_w, n_pos, CMP_T1(cslots), CMP_P(cache), ws, T,   \
      CMP_T1(w), w_bf16, CMP_T2(cs), cs_bf16, eps, cnt, fuse, faults, rowoff, &sel, buf, vm, \
      vd, &badrow

/* Group (sp, .)'s share of one window: dims [CMP_SD sp, CMP_SD (sp + 1)) of
 * token t (ws row tw) at position p of request r. go false (CPU devices:
 * a token that closes no window, fbit its fault) runs every barrier and
 * computes nothing; split 0 reports the token's faults and verdict. */
DSA_INLINE_ALWAYS void cmp_part_window(
    const ulong tw, const ulong t, const long p, const long r, bool go, uint fbit,
    DSA_CTENSOR3(st), long st_nb, int st_bs, DSA_CTENSOR2(bt), long bt_w, long n_pos,
    DSA_CTENSOR1(cslots), DSA_PAGED(cache), __global float *ws, long T, DSA_CTENSOR1(w),
    int w_bf16, DSA_CTENSOR2(cs), int cs_bf16, float eps, __global uint *cnt, int fuse,
    DSA_FAULTS, __local ulong *rowoff, __local uint *sel_, __local float4 *buf,
    __local float *vm, __local float *vd, __local int *badrow_) {
  const uint lane = get_local_id(0), sp = get_group_id(0);
  const dsa_paged c = DSA_PAGED_OF(cache);
  __global int *stat = CMP_STAT(ws, T);
  const bool rep = sp == 0u && lane == 0u; /* reports for the token */
  if (lane == 0u) *badrow_ = 0x7FFFFFFF;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (go && lane < (uint)CMP_PR)
    rowoff[lane] = cmp_row_off((int)lane, CMP_PR, p, r, 0ul, CMP_T2(bt), bt_w, st_nb, st_bs,
                               st_off, st_s0, st_s1, badrow_);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (go && *badrow_ != 0x7FFFFFFF)
    go = false, fbit = (*badrow_ & 1) ? DSA_FAULT_SLOT_RANGE : DSA_FAULT_INDEX_RANGE;
  /* The rows are known: their loads (below) do not wait for the last two
   * checks, which only the verdict needs (split 0 makes it; a window whose
   * token fails them is computed and not stored). */
  if (rep) {
    bool ok = go;
    if (ok) {
      const long cslot = *(__global const long *)(cslots_mem + cslots_off + t * cslots_s0);
      if (cslot < 0) ok = false;
      else if (cslot >= c.capacity) ok = false, fbit = DSA_FAULT_SLOT_RANGE;
    }
    if (ok && p / CMP_PR * CMP_PR >= n_pos) ok = false, fbit = DSA_FAULT_POSITION_RANGE;
    if (fbit) dsa_fault(faults, fbit);
    stat[tw] = ok;
  }

  /* The item's 4 rows x 4 dims of score (masked rows: -inf, which no max
   * takes) and kv (masked: 0). */
  const uint cg = lane % 8u, rq = lane / 8u;
  const ulong col = ((ulong)sp * CMP_SD + 4u * cg) * 4u, sco = 512u * 4u + col;
  float4 sv[4], kv[4];
  bool ok[4];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const ulong off = go ? rowoff[rq + 32u * (uint)j] : CMP_MASKED;
    ok[j] = off != CMP_MASKED;
    __global const uchar *row = st_mem + (ok[j] ? off : 0ul);
    sv[j] = ok[j] ? vload4(0, (__global const float *)(row + sco)) : (float4)(-INFINITY);
    kv[j] = ok[j] ? vload4(0, (__global const float *)(row + col)) : (float4)(0.0f);
  }
  /* The max: the item's rows, then the 32 items of each dim group. */
  buf[lane] = fmax(fmax(sv[0], sv[1]), fmax(sv[2], sv[3]));
  barrier(CLK_LOCAL_MEM_FENCE);
  __local const float *bf = (__local const float *)buf;
  if (lane < (uint)CMP_SD) { /* dim lane: entries (q, lane / 4) of item q * 8 + lane / 4 */
    float m = -INFINITY;
#pragma unroll 8
    for (int q = 0; q < 32; q++) m = fmax(m, bf[q * 32 + (int)lane]);
    vm[lane] = m;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  /* The weights, stored at (row, dim): float4 (row * 8 + cg). */
  const float L2E = 0x1.715476p+0f;
  const float mv[4] = {vm[4u * cg], vm[4u * cg + 1u], vm[4u * cg + 2u], vm[4u * cg + 3u]};
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const float s4[4] = {sv[j].x, sv[j].y, sv[j].z, sv[j].w};
    float w4[4];
#pragma unroll
    for (int k = 0; k < 4; k++) w4[k] = ok[j] ? cmp_exp2((s4[k] - mv[k]) * L2E) : 0.0f;
    buf[(rq + 32u * (uint)j) * 8u + cg] = (float4)(w4[0], w4[1], w4[2], w4[3]);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lane < (uint)CMP_SD) { /* den in row order (masked rows add +0) */
    float den = 0.0f;
#pragma unroll 8
    for (int i = 0; i < CMP_PR; i++) den = den + bf[i * CMP_SD + (int)lane];
    vd[lane] = den;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  /* Quotients (correctly rounded, cmp_body's fast test first) and products. */
  const float dv[4] = {vd[4u * cg], vd[4u * cg + 1u], vd[4u * cg + 2u], vd[4u * cg + 3u]};
  float rd[4];
#pragma unroll
  for (int k = 0; k < 4; k++) rd[k] = 1.0f / dv[k]; /* a first guess only */
  /* The weights back from local memory (not held in registers across the
   * sum: fewer registers, more groups an SM); each item rewrites only its
   * own entries. */
  bool slow = false;
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const float4 w4 = buf[(rq + 32u * (uint)j) * 8u + cg];
    const float wv[4] = {w4.x, w4.y, w4.z, w4.w}, k4[4] = {kv[j].x, kv[j].y, kv[j].z, kv[j].w};
    float pr[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      bool exact;
      pr[k] = k4[k] * cmp_div_guess(wv[k], dv[k], rd[k], &exact); /* masked: 0 * 0 */
      slow |= ok[j] && !exact;
    }
    buf[(rq + 32u * (uint)j) * 8u + cg] = (float4)(pr[0], pr[1], pr[2], pr[3]);
  }
  if (slow) { /* rare: a quotient the guess could not prove rounded; the
               * item's products again by cmp_div_cr (the guess where it
               * was proved), rolled: inlined 16 times, the long division
               * cost registers in every group (cmp_body's note) */
#pragma unroll 1
    for (int j = 0; j < 4; j++) {
      const uint r = rq + 32u * (uint)j;
      const ulong off = rowoff[r];
      if (off == CMP_MASKED) continue; /* its products are +0 */
      const float4 s4 = vload4(0, (__global const float *)(st_mem + off + sco));
      const float4 k4 = vload4(0, (__global const float *)(st_mem + off + col));
      const float sv1[4] = {s4.x, s4.y, s4.z, s4.w}, kv1[4] = {k4.x, k4.y, k4.z, k4.w};
      float pr[4];
#pragma unroll
      for (int k = 0; k < 4; k++)
        pr[k] = kv1[k] * cmp_div_cr(cmp_exp2((sv1[k] - mv[k]) * L2E), dv[k]);
      buf[r * 8u + cg] = (float4)(pr[0], pr[1], pr[2], pr[3]);
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (go && lane < (uint)CMP_SD) { /* c[d] in row order */
    float cv = 0.0f;
#pragma unroll 8
    for (int i = 0; i < CMP_PR; i++) cv = cv + bf[i * CMP_SD + (int)lane];
    ws[tw * 512u + (ulong)sp * CMP_SD + lane] = cv;
  }
  /* fuse: the token's last group to finish takes its tail here, instead of
   * compressor_c128_tail (one launch fewer; where a device-scope fence is
   * known, src/op_compressor.c). go is the same in every group of the
   * token, so all of them count or none. */
  if (fuse && go && dsa_group_publish(cnt + tw, CMP_NS, sel_, lane)) {
    if (lane == 0u) cnt[tw] = 0u; /* zero for the next launch */
    cmp_ws_tail(tw, t, stat[tw] != 0, p / CMP_PR * CMP_PR, lane < 128u, ws, CMP_T1(cslots),
                CMP_T1(w), w_bf16, CMP_T2(cs), cs_bf16, CMP_P(cache), eps,
                (__local float *)buf, (__local uint *)buf + 128);
  }
}

/* compressor_c128_part: a token a work-group row (the host's form up to
 * CMP_TB_T tokens a slice: decode). A token that closes no window leaves
 * before the first barrier on GPUs (CPU devices run on with go false:
 * cmp_body's note). */
__kernel __attribute__((reqd_work_group_size(CMP_PWG, 1, 1))) void compressor_c128_part(
    CMP_PART_PARAMS) {
  CMP_PART_LOCALS;
  const ulong tw = get_group_id(1), t = (ulong)t0 + tw; /* ws row, token */
  long p, r;
  uint fbit;
  const bool go = cmp_token(t, CMP_PR, CMP_T1(slots), CMP_T1(pos), pos_i32, CMP_T1(req),
                            has_req, bt_rows, &p, &r, &fbit);
  (void)nt, (void)TB;
#if !DSA_DEVICE_CPU
  if (!go) { /* the whole group (go is uniform) */
    if (get_group_id(0) == 0u && get_local_id(0) == 0u) {
      if (fbit) dsa_fault(faults, fbit);
      CMP_STAT(ws, T)[tw] = 0;
    }
    return;
  }
#endif
  cmp_part_window(tw, t, p, r, go, fbit, CMP_WIN_ARGS);
}

/* compressor_c128_part_tb: TB tokens a work-group row (a prefill: most of
 * them close no window). The row's tokens are checked at once, one a
 * work-item; those that close a window go to a list (in any order: each is
 * computed alone) and the group takes them one after another; split 0
 * reports the others' faults and verdicts. A group whose tokens close no
 * window costs one round of reads. H200, T = 8192 (64 windows): 131,072
 * groups of one token 189 us, TB 8 / 32 / 128: 90.2 / 54.1 / 45.8 us. */
__kernel __attribute__((reqd_work_group_size(CMP_PWG, 1, 1))) void compressor_c128_part_tb(
    CMP_PART_PARAMS) {
  CMP_PART_LOCALS;
  __local int nlist;
  __local int lt[CMP_PWG];               /* the row's tokens that close a window, */
  __local long lp[CMP_PWG], lr[CMP_PWG]; /* their positions and requests */
  const uint lane = get_local_id(0);
  const ulong tb0 = (ulong)get_group_id(1) * (ulong)TB;
  if (lane == 0u) nlist = 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lane < (uint)TB && tb0 + lane < (ulong)nt) {
    long p, r;
    uint fbit;
    if (cmp_token((ulong)t0 + tb0 + lane, CMP_PR, CMP_T1(slots), CMP_T1(pos), pos_i32,
                  CMP_T1(req), has_req, bt_rows, &p, &r, &fbit)) {
      const int i = atomic_inc(&nlist);
      lt[i] = (int)lane, lp[i] = p, lr[i] = r;
    } else if (get_group_id(0) == 0u) {
      if (fbit) dsa_fault(faults, fbit);
      CMP_STAT(ws, T)[tb0 + lane] = 0;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int nl = nlist;
  for (int li = 0; li < nl; li++) { /* nl is the group's: the barriers inside are uniform */
    const ulong tw = tb0 + (ulong)lt[li];
    cmp_part_window(tw, (ulong)t0 + tw, lp[li], lr[li], true, 0u, CMP_WIN_ARGS);
  }
}

__kernel __attribute__((reqd_work_group_size(128, 1, 1))) void compressor_c128_tail(
    DSA_CTENSOR1(pos), int pos_i32, DSA_CTENSOR1(w), int w_bf16, DSA_CTENSOR2(cs), int cs_bf16,
    DSA_CTENSOR1(cslots), DSA_PAGED(cache), float eps, __global const float *ws, long t0,
    long T) {
  __local float red[128];
  __local uint keys[128];
  const ulong tw = get_group_id(1), t = (ulong)t0 + tw; /* ws row, token */
  const bool go = CMP_STAT(ws, T)[tw] != 0;
#if !DSA_DEVICE_CPU
  if (!go) return; /* the whole group */
#endif
  const long pc =
      go ? dsa_load_pos(pos_mem + pos_off + t * pos_s0, pos_i32) / CMP_PR * CMP_PR : 0;
  cmp_ws_tail(tw, t, go, pc, true, ws, CMP_T1(cslots), CMP_T1(w), w_bf16, CMP_T2(cs), cs_bf16,
              CMP_P(cache), eps, red, keys);
}
