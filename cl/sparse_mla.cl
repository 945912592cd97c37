/* Sparse MLA attention (SPEC-reference §9.1-9.4; cache layout §3.1).
 *
 * Per query token t and head h: s_j = scale * (q[t,h] . K_j) over the used
 * entries j, out = sum_j e^{s_j} K_j / (sum_j e^{s_j} + e^{sink_h}) (V = K,
 * all 512 dims), lse = ln sum_j e^{s_j}. fp32 accumulation, online softmax.
 *
 * Attention kernels (sparse_attn_bf16, sparse_mla_decode_fused): grid
 * (256, ceil(H/16), T), one work-group per (token, group of 16 heads): the
 * heads of a token share its KV entries, so each tile of NT = 8 entries
 * (8 x 512 fp32 in local memory, double-buffered) is fetched once and used
 * by all 16 heads. A token's entries form one virtual list: the first len_A
 * entries of set A, then the first len_B of set B (bf16 kernel: set A only).
 * Per tile:
 *   load   item (row r = tid/32, lane = tid%32) writes dims [16 lane, +16)
 *          of row r, fetched from global memory one tile ahead (registers),
 *          dequantized in the fused kernel (dsa_dequant4_e4m3_bf16);
 *   QK     item (h = tid/16, ds = tid%16) holds q[h] dims {64k + 4ds + i}
 *          (k < 8, i < 4) in registers, writes 8 partial dots;
 *   reduce items (h = tid/8, n = tid%8), tid < 128: logit, then the online
 *          softmax update (m, l kept in those items' registers);
 *   PV     item tid owns dims 2tid, 2tid+1 of all 16 heads (32 accumulators).
 * Masked entries have logit -inf and a zero row; a tile whose running max is
 * still -inf contributes nothing, so empty rows and fully masked first tiles
 * never produce NaN. NaN elements of K are read as 0 (as vLLM's reference).
 *
 * Variants (the launcher's tables): the *_mma kernels at the end of the file
 * (NVIDIA tensor cores, inline PTX, under DSA_HAS_NV_PTX); the portable
 * kernels with a double tile buffer (43 KB of local memory); the *_lm32
 * twins with one buffer for devices with OpenCL's guaranteed 32 KiB.
 *
 * sparse_mla_gather_pack (two-stage decode, first stage): grid (32, Ktot, T)
 * in (32, 8) groups: row (t, j) of the virtual list is dequantized into the
 * bf16 workspace row t*Ktot + j, and the combined index list (t*Ktot + j, or
 * -1 for an unused entry) and the lengths are written for sparse_attn_bf16.
 */
#include "dsa_mla.h"

/* Host-owned geometry (src/op_sparse_mla.c, build options): MLA_DIM (512,
 * the latent width) and WG work-items
 * and HG heads per portable group, NT entries per tile, DSL d-slices of the
 * QK step, PSTRIDE partial sums per head (padded against bank conflicts),
 * GROWS rows per gather group; the mma path's SM_* below. */
#if MLA_DIM != 512 || WG != 256 || HG != 16 || NT != 8 || DSL != 16
#error "sparse_mla.cl: the portable mappings need MLA_DIM 512, WG 256, HG 16, NT 8, DSL 16"
#endif

/* The argument groups of the attention kernels (cl/dsa_args.h), laid by the
 * launcher in this order. A set over a paged MLA cache: the cache, the
 * indices [T, K] with their width, the lengths [T]. */
#define SA_QUERY DSA_CTENSOR3(q), int n_heads
#define SA_SET(x) DSA_CPAGED(c##x), DSA_CTENSOR2(i##x), int k##x, DSA_CTENSOR1(l##x)
#define SA_OUTPUT                                                                             \
  DSA_CTENSOR1(sink), int has_sink, float scale, DSA_TENSOR3(out), DSA_TENSOR2(lse),            \
      int has_lse, DSA_FAULTS
#define SA_BF16_PARAMS                                                                        \
  SA_QUERY, DSA_CTENSOR2(kv), long n_rows, DSA_CTENSOR2(idx), int width, DSA_CTENSOR1(lens),    \
      int has_lens, SA_OUTPUT
#define SA_FUSED_PARAMS SA_QUERY, SA_SET(a), SA_SET(b), SA_OUTPUT
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
  return r;
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

/* Raw bytes of one lane (16 dims) of entry j of set s, one tile ahead. */
typedef struct {
  uint4 r0, r1;
  uint u;
  int valid;
} dsa_raw;

DSA_INLINE dsa_raw fetch_lane(const dsa_iset *s, ulong t, int j, uint lane, int fused,
                             __global volatile uint *faults) {
  dsa_raw o;
  o.r0 = o.r1 = (uint4)(0u);
  o.u = 0u;
  const int idx = *(__global const int *)(s->idx + s->idx_off + t * s->idx_ts + (ulong)j * s->idx_cs);
  o.valid = idx >= 0 && (long)idx < s->capacity;
  if (idx >= 0 && !o.valid && lane == 0)
    dsa_fault(faults, fused ? DSA_FAULT_SLOT_RANGE : DSA_FAULT_INDEX_RANGE);
  if (!o.valid) return o;
  if (!fused) {
    __global const uchar *src = s->cache + s->c_off + (ulong)idx * s->c_bstride + lane * 32u;
    o.r0 = dsa_load16(src, s->c_aligned);
    o.r1 = dsa_load16(src + 16, s->c_aligned);
    return o;
  }
  const uint blk = (uint)idx / (uint)s->block_size, tok = (uint)idx - blk * (uint)s->block_size;
  const ulong base = s->c_off + (ulong)blk * s->c_bstride;
  __global const uchar *data = s->cache + base + (ulong)tok * MLA_DATA_BYTES;
  if (lane >= NOPE_LANES) {
    __global const uchar *src = data + MLA_NOPE + (lane - NOPE_LANES) * 32u;
    o.r0 = dsa_load16(src, s->c_aligned);
    o.r1 = dsa_load16(src + 16, s->c_aligned);
  } else {
    o.r0 = dsa_load16(data + lane * 16u, s->c_aligned);
    o.u = s->cache[base + (ulong)s->block_size * MLA_DATA_BYTES + (ulong)tok * 8u + (lane >> 2)];
  }
  return o;
}

/* The 16 bf16 of a lane as 8 words (dim 2i in the low half of word i). */
DSA_INLINE void lane_bf16(const dsa_raw *r, uint lane, int fused, uint w[8]) {
  if (fused && lane < NOPE_LANES) {
    const uint2 a = dsa_dequant4_e4m3_bf16(r->r0.x, r->u), b = dsa_dequant4_e4m3_bf16(r->r0.y, r->u);
    const uint2 c = dsa_dequant4_e4m3_bf16(r->r0.z, r->u), d = dsa_dequant4_e4m3_bf16(r->r0.w, r->u);
    w[0] = a.x, w[1] = a.y, w[2] = b.x, w[3] = b.y, w[4] = c.x, w[5] = c.y, w[6] = d.x, w[7] = d.y;
  } else {
    w[0] = r->r0.x, w[1] = r->r0.y, w[2] = r->r0.z, w[3] = r->r0.w;
    w[4] = r->r1.x, w[5] = r->r1.y, w[6] = r->r1.z, w[7] = r->r1.w;
  }
}

/* bf16 bits -> fp32, NaN read as 0 (vLLM zeroes NaN entries of gathered K). */
DSA_INLINE float kv_f32(uint bits16_hi) {
  const float f = as_float(bits16_hi);
  return isnan(f) ? 0.0f : f;
}

/* The resolved entry j of the token's virtual list: set A for j < len_a,
 * then set B. */
DSA_INLINE dsa_raw fetch_entry(const dsa_iset *a, const dsa_iset *b, int len_a, int len,
                              ulong t, int j, uint lane, int fused,
                              __global volatile uint *faults) {
  if (j >= len) {
    dsa_raw o;
    o.r0 = o.r1 = (uint4)(0u);
    o.u = 0u;
    o.valid = 0;
    return o;
  }
  return j < len_a ? fetch_lane(a, t, j, lane, fused, faults)
                   : fetch_lane(b, t, j - len_a, lane, fused, faults);
}

DSA_INLINE void attn_body(
    const dsa_iset *sa, const dsa_iset *sb, __global const uchar *lens_a, ulong la_off,
    ulong la_st, int has_len_a, __global const uchar *lens_b, ulong lb_off, ulong lb_st,
    int has_len_b, int fused, __global const uchar *qp, ulong q_off, ulong q_ts, ulong q_hs,
    int q_al, int n_heads, __global const uchar *sink, ulong sink_off, ulong sink_st,
    int has_sink, float scale, __global uchar *out, ulong o_off, ulong o_ts, ulong o_hs,
    int o_al, __global uchar *lse, ulong lse_off, ulong lse_ts, ulong lse_hs, int has_lse,
    __global volatile uint *faults, __local float *ks, __local float *part, __local float *sl,
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

  /* QK mapping: q in registers. */
  const uint qh = tid / DSL, ds = tid % DSL;
  const int qhead = g * HG + (int)qh;
  float4 qf[8];
#pragma unroll
  for (int k = 0; k < 8; k++) qf[k] = (float4)(0.0f);
  if (qhead < n_heads) {
    __global const uchar *qrow = qp + q_off + t * q_ts + (ulong)qhead * q_hs;
#pragma unroll
    for (int k = 0; k < 8; k++) {
      const uint2 v = dsa_load8(qrow + (k * 64 + ds * 4) * 2, q_al);
      qf[k] = (float4)(as_float(v.x << 16), as_float(v.x & 0xFFFF0000u), as_float(v.y << 16),
                       as_float(v.y & 0xFFFF0000u));
    }
  }

  /* Load mapping. */
  const uint lr = tid / 32, lane = tid % 32;
  /* Reduce mapping (tid < 128): private running max and sum of head rh. */
  const uint rh = tid / NT, rn = tid % NT;
  float m_run = -INFINITY, l_run = 0.0f;
  /* PV mapping. */
  float acc[HG][2];
#pragma unroll
  for (int h = 0; h < HG; h++) acc[h][0] = acc[h][1] = 0.0f;

  dsa_raw raw = fetch_entry(sa, sb, len_a, len, t, (int)lr, lane, fused, faults);
  for (int it = 0; it < ntiles; it++) {
    /* Two tile buffers (the next tile is written while the last is read), or
     * one (32 KiB devices) and a barrier at the end of the step. */
    const int buf = nbuf == 2 ? it & 1 : 0;
    __local float *kt = ks + buf * (NT * MLA_DIM);
    {
      uint w[8];
      lane_bf16(&raw, lane, fused, w);
      __local float4 *dst = (__local float4 *)(kt + lr * MLA_DIM + lane * 16);
#pragma unroll
      for (int i = 0; i < 4; i++)
        dst[i] = (float4)(kv_f32(w[2 * i] << 16), kv_f32(w[2 * i] & 0xFFFF0000u),
                          kv_f32(w[2 * i + 1] << 16), kv_f32(w[2 * i + 1] & 0xFFFF0000u));
      if (lane == 0) vm[buf * NT + lr] = raw.valid;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (it + 1 < ntiles)
      raw = fetch_entry(sa, sb, len_a, len, t, (it + 1) * NT + (int)lr, lane, fused, faults);

    /* QK: 8 partial dots over this item's 32 dims. */
    {
      __local const float4 *k4 = (__local const float4 *)kt;
#pragma unroll
      for (int n = 0; n < NT; n++) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < 8; k++) {
          const float4 kv = k4[n * (MLA_DIM / 4) + k * 16 + ds];
          s = mad(qf[k].x, kv.x, s);
          s = mad(qf[k].y, kv.y, s);
          s = mad(qf[k].z, kv.z, s);
          s = mad(qf[k].w, kv.w, s);
        }
        part[qh * PSTRIDE + n * DSL + ds] = s;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    if (tid < HG * NT) {
      __local const float4 *p4 = (__local const float4 *)(part + rh * PSTRIDE + rn * DSL);
      const float4 a = p4[0] + p4[1] + p4[2] + p4[3];
      const float s = (a.x + a.y) + (a.z + a.w);
      sl[rh * NT + rn] = vm[buf * NT + rn] ? s * scale : -INFINITY;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    if (tid < HG * NT) {
      __local const float4 *s4 = (__local const float4 *)(sl + rh * NT);
      const float4 s0 = s4[0], s1 = s4[1];
      const float mt = fmax(fmax(fmax(s0.x, s0.y), fmax(s0.z, s0.w)),
                            fmax(fmax(s1.x, s1.y), fmax(s1.z, s1.w)));
      const float m_new = fmax(m_run, mt);
      const bool live = m_new != -INFINITY;
      pl[rn * HG + rh] = live ? exp(sl[rh * NT + rn] - m_new) : 0.0f;
      if (rn == 0) {
        const float alpha = live ? exp(m_run - m_new) : 1.0f;
        l_run *= alpha;
        al[rh] = alpha;
      }
      m_run = m_new;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* The head's sum takes this tile's p from local memory (read before the
     * next tile's reduce step rewrites them): one exp per item, not nine. */
    if (tid < HG * NT && rn == 0) {
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < NT; n++) sum += pl[n * HG + rh];
      l_run += sum;
    }

    /* PV: acc = acc * alpha + P . K over this item's two dims. */
    {
      __local const float4 *a4 = (__local const float4 *)al;
#pragma unroll
      for (int h4 = 0; h4 < HG / 4; h4++) {
        const float4 a = a4[h4];
        acc[4 * h4][0] *= a.x, acc[4 * h4][1] *= a.x;
        acc[4 * h4 + 1][0] *= a.y, acc[4 * h4 + 1][1] *= a.y;
        acc[4 * h4 + 2][0] *= a.z, acc[4 * h4 + 2][1] *= a.z;
        acc[4 * h4 + 3][0] *= a.w, acc[4 * h4 + 3][1] *= a.w;
      }
#pragma unroll
      for (int n = 0; n < NT; n++) {
        const float2 kv = *(__local const float2 *)(kt + n * MLA_DIM + 2 * tid);
        __local const float4 *pp = (__local const float4 *)(pl + n * HG);
#pragma unroll
        for (int h4 = 0; h4 < HG / 4; h4++) {
          const float4 p = pp[h4];
          acc[4 * h4][0] = mad(p.x, kv.x, acc[4 * h4][0]);
          acc[4 * h4][1] = mad(p.x, kv.y, acc[4 * h4][1]);
          acc[4 * h4 + 1][0] = mad(p.y, kv.x, acc[4 * h4 + 1][0]);
          acc[4 * h4 + 1][1] = mad(p.y, kv.y, acc[4 * h4 + 1][1]);
          acc[4 * h4 + 2][0] = mad(p.z, kv.x, acc[4 * h4 + 2][0]);
          acc[4 * h4 + 2][1] = mad(p.z, kv.y, acc[4 * h4 + 2][1]);
          acc[4 * h4 + 3][0] = mad(p.w, kv.x, acc[4 * h4 + 3][0]);
          acc[4 * h4 + 3][1] = mad(p.w, kv.y, acc[4 * h4 + 3][1]);
        }
      }
    }
    if (nbuf == 1) barrier(CLK_LOCAL_MEM_FENCE); /* kt, vm rewritten next */
  }

  /* Final: fin[h] = 1 / (l + e^{sink - m}) (0 for an empty row), lse. */
  if (tid < HG * NT && rn == 0) {
    const int head = g * HG + (int)rh;
    float inv = 0.0f, lv = -INFINITY;
    if (m_run != -INFINITY && head < n_heads) {
      float den = l_run;
      if (has_sink) {
        const float sk = *(__global const float *)(sink + sink_off + (ulong)head * sink_st);
        den += exp(sk - m_run); /* -inf: + 0; +inf or a large sink: inf -> out 0 */
      }
      inv = 1.0f / den;
      lv = m_run + log(l_run);
    }
    fin[rh] = inv;
    if (has_lse && head < n_heads)
      *(__global float *)(lse + lse_off + t * lse_ts + (ulong)head * lse_hs) = lv;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
  for (int h = 0; h < HG; h++) {
    const int head = g * HG + h;
    if (head < n_heads) {
      const float inv = fin[h];
      const uint v = (uint)dsa_f32_to_bf16(acc[h][0] * inv) |
                     ((uint)dsa_f32_to_bf16(acc[h][1] * inv) << 16);
      __global uchar *dst = out + o_off + t * o_ts + (ulong)head * o_hs + tid * 4u;
      if (o_al)
        *(__global uint *)dst = v;
      else
        vstore2((ushort2)((ushort)v, (ushort)(v >> 16)), 0, (__global ushort *)dst);
    }
  }
}

#define ATTN_LOCALS(NBUF)                                                            \
  /* float4 accesses below: 16-byte alignment is not implied by float. */     \
  __local float ks[(NBUF) * NT * MLA_DIM] __attribute__((aligned(16)));        \
  __local float part[HG * PSTRIDE] __attribute__((aligned(16)));               \
  __local float sl[HG * NT] __attribute__((aligned(16)));                      \
  __local float pl[NT * HG] __attribute__((aligned(16)));                      \
  __local float al[HG] __attribute__((aligned(16)));                           \
  __local float fin[HG] __attribute__((aligned(16)));                          \
  __local int vm[(NBUF) * NT]

/* NBUF 2: the tile buffer doubled (43 KB of local memory); 1: for devices
 * with OpenCL's guaranteed 32 KiB. */
#define SA_BF16_KERNEL(NAME, NBUF)                                                             \
  __kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void NAME(SA_BF16_PARAMS) {         \
    ATTN_LOCALS(NBUF);                                                                         \
    dsa_iset sa = SA_ISET_BF16;                                                                \
    attn_body(&sa, &sa, lens_mem, lens_off, lens_s0, has_lens, lens_mem, lens_off, lens_s0, 0, \
              0, SA_Q_ARGS, q_al >= 8u, n_heads, SA_OUT_ARGS, out_al >= 4u, SA_LSE_ARGS, ks,    \
              part, sl, pl, al, vm, fin, NBUF);                                                \
  }

/* An absent set has width 0: its lengths are never read. */
#define SA_FUSED_KERNEL(NAME, NBUF)                                                            \
  __kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void NAME(SA_FUSED_PARAMS) {        \
    ATTN_LOCALS(NBUF);                                                                         \
    dsa_iset sa = SA_ISET(a);                                                                  \
    dsa_iset sb = SA_ISET(b);                                                                  \
    attn_body(&sa, &sb, la_mem, la_off, la_s0, ka > 0, lb_mem, lb_off, lb_s0, kb > 0, 1,       \
              SA_Q_ARGS, q_al >= 8u, n_heads, SA_OUT_ARGS, out_al >= 4u, SA_LSE_ARGS, ks, part, \
              sl, pl, al, vm, fin, NBUF);                                                      \
  }

SA_BF16_KERNEL(sparse_attn_bf16, 2)
SA_BF16_KERNEL(sparse_attn_bf16_lm32, 1)
SA_FUSED_KERNEL(sparse_mla_decode_fused, 2)
SA_FUSED_KERNEL(sparse_mla_decode_fused_lm32, 1)

/* Two-stage decode, stage 1: gather the used entries and pack the indices
 * into the workspace: rows [T*Ktot, 512] bf16 (1024-byte rows), indices
 * [T, Ktot] i32, lengths [T] i32. */
__kernel __attribute__((reqd_work_group_size(32, GROWS, 1))) void sparse_mla_gather_pack(
    SA_SET(a), SA_SET(b), DSA_TENSOR2(wsr), DSA_TENSOR2(wsi), DSA_TENSOR1(wsl), DSA_FAULTS) {
  const uint lane = get_local_id(0);
  const int j = get_global_id(1);
  const ulong t = get_global_id(2);
  const int ktot = ka + kb;
  if (j >= ktot) return;
  dsa_iset sa = SA_ISET(a);
  dsa_iset sb = SA_ISET(b);
  int bad = 0;
  const int len_a = set_len(la_mem, la_off, la_s0, ka > 0, ka, t, &bad);
  const int len_b = set_len(lb_mem, lb_off, lb_s0, kb > 0, kb, t, &bad);
  const int len = len_a + len_b;
  const ulong row = t * (ulong)ktot + (ulong)j;
  if (j == 0 && lane == 0) {
    if (bad) dsa_fault(faults, DSA_FAULT_LENGTH_RANGE);
    *(__global int *)(wsl_mem + wsl_off + t * wsl_s0) = len;
  }
  const dsa_raw raw = fetch_entry(&sa, &sb, len_a, len, t, j, lane, 1, faults);
  if (lane == 0)
    *(__global int *)(wsi_mem + wsi_off + t * wsi_s0 + (ulong)j * wsi_s1) = raw.valid ? (int)row : -1;
  if (!raw.valid) return;
  uint w[8];
  lane_bf16(&raw, lane, 1, w);
  __global uchar *dst = wsr_mem + wsr_off + row * wsr_s0 + lane * 32u;
  dsa_store16(dst, (uint4)(w[0], w[1], w[2], w[3]), wsr_al >= 16);
  dsa_store16(dst + 16, (uint4)(w[4], w[5], w[6], w[7]), wsr_al >= 16);
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

/* A bf16 pair with NaN halves zeroed. */
DSA_INLINE uint sm_nonan(uint x) {
  uint m = 0u;
  if ((x & 0x7FFFu) > 0x7F80u) m |= 0xFFFFu;
  if (((x >> 16) & 0x7FFFu) > 0x7F80u) m |= 0xFFFF0000u;
  return x & ~m;
}

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
    float inv = 0.0f, lv = -INFINITY;
    if (m_run != -INFINITY && head < n_heads) {
      float den = l_run;
      if (has_sink) {
        const float sk = *(__global const float *)(sink + sink_off + (ulong)head * sink_st);
        den += exp(sk - m_run);
      }
      inv = 1.0f / den;
      lv = m_run + log(l_run);
    }
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
  mma_body(&sa, &sb, la_mem, la_off, la_s0, ka > 0, lb_mem, lb_off, lb_s0, kb > 0, 1, SA_Q_ARGS,
           n_heads, SA_OUT_ARGS, SA_LSE_ARGS, (__local uint *)kd4, (__local uint *)kv4, part, pw,
           al, vm, fin);
}
#endif
