/* Index-building helpers (SPEC-reference §10.1-10.5): integer work only.
 *
 * Tensors arrive as (buffer, byte offset, byte strides); every index is an
 * i32 (slot_mapping of §10.1 and positions are i64). Outputs are written in
 * full, so callers never pre-fill them.
 *
 * Grid: the row helpers (§10.2-10.5) run one work-group of IH_LANES items
 * per token row; item l serves columns l, l + IH_LANES, ... so consecutive
 * items touch consecutive words (coalesced). The compressed slot mapping
 * (§10.1) runs one item per token. Fault bits are gathered per item and
 * posted with one atomic at the end.
 */
#include "dsa_common.h"

/* IH_LANES comes from the launcher (src/op_index_helpers.c) as a build option. */
/* Entries an item of ih_global_topk has in flight: their loads (the entry,
 * then its block) issued for IH_B entries before any store, which the
 * compiler may not move a later load above (the buffers could alias). A
 * loop of load, dependent load, store per entry was a chain of 8 such
 * round trips at K = 512: H200, the decode step's global slots 10.8 ->
 * 9.8 us (L = 32768), 12.1 -> 10.9 (131072). ih_swa_indices (two entries
 * an item at window 128) got 0.5 us slower so: it keeps the plain loop
 * (docs/PERFORMANCE.md, session 18). */
#define IH_B 8
#define IH_INT_MAX 2147483647L
#define IH_POS_LIMIT 2147483647L /* positions must be < this (p + 1 fits i32) */

#define LD_I32(base, off) (*(__global const int *)((base) + (off)))
#define LD_I64(base, off) (*(__global const long *)((base) + (off)))
#define ST_I32(base, off, v) (*(__global int *)((base) + (off)) = (v))

/* Slot of local index idx (>= 0) through one block-table row: -1 for a
 * negative block id (unallocated page), -1 + fault when the column is past
 * the table's width or the slot does not fit in i32. */
DSA_INLINE int ih_map(__global const uchar *bt, ulong row_off, ulong col_stride, int width,
                      int idx, int bs, uint *fb) {
  const int bi = idx / bs;
  if (bi >= width) {
    *fb |= DSA_FAULT_INDEX_RANGE;
    return -1;
  }
  const int blk = LD_I32(bt, row_off + (ulong)bi * col_stride);
  if (blk < 0) return -1;
  const long slot = (long)blk * bs + (idx - bi * bs);
  if (slot > IH_INT_MAX) {
    *fb |= DSA_FAULT_SLOT_RANGE;
    return -1;
  }
  return (int)slot;
}

DSA_INLINE void ih_post(__global volatile uint *faults, uint fb) {
  if (fb) dsa_fault(faults, fb);
}

/* Largest r in [0, R) with qsl[r] - base <= t, or -1; the caller checks
 * t < qsl[r+1] - base (so a non-monotone qsl only loses tokens). */
DSA_INLINE int ih_find_req(__global const uchar *qsl, ulong qsl_off, ulong qsl_st, int R,
                           long base, long t) {
  int lo = 0, hi = R; /* answer in [lo - 1, hi) */
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if ((long)LD_I32(qsl, qsl_off + (ulong)mid * qsl_st) - base <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo - 1;
}

/* Sum of per-item counts of a work-group (all items must call it). */
DSA_INLINE int ih_group_sum(__local int *buf, int v) {
  const uint l = get_local_id(0);
  buf[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint w = IH_LANES / 2; w > 0; w >>= 1) {
    if (l < w) buf[l] += buf[l + w];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return buf[0];
}

/* ---- §10.1 compressed slot mapping: one item per token ---------------------- */
__kernel void ih_compressed_slot_mapping(DSA_CTENSOR1(qsl), DSA_CTENSOR1(seq), DSA_CTENSOR2(bt),
    int R, int W, int ratio, int bs, DSA_TENSOR1(out), long T, DSA_FAULTS) {
  const long t = get_global_id(0);
  if (t >= T) return;
  uint fb = 0;
  long slot = -1;
  const int r = ih_find_req(qsl_mem, qsl_off, qsl_s0, R, 0, t);
  if (r >= 0 && t < LD_I32(qsl_mem, qsl_off + (ulong)(r + 1) * qsl_s0)) {
    const long qs = LD_I32(qsl_mem, qsl_off + (ulong)r * qsl_s0);
    const long qe = LD_I32(qsl_mem, qsl_off + (ulong)(r + 1) * qsl_s0);
    const long p = (long)LD_I32(seq_mem, seq_off + (ulong)r * seq_s0) - (qe - qs) + (t - qs);
    if (p < 0) {
      fb |= DSA_FAULT_LENGTH_RANGE;
    } else if ((p + 1) % ratio == 0) {
      const long c = p / ratio;
      const long bi = c / bs;
      if (bi >= W) {
        fb |= DSA_FAULT_INDEX_RANGE;
      } else {
        const int blk = LD_I32(bt_mem, bt_off + (ulong)r * bt_s0 + (ulong)bi * bt_s1);
        if (blk >= 0) slot = (long)blk * bs + (c - bi * bs);
      }
    }
  }
  *(__global long *)(out_mem + out_off + (ulong)t * out_s0) = slot;
  ih_post(faults, fb);
}

/* Token t's position (i64, or i32 with pos_i32) and request: token_to_req
 * omitted (has_t2r 0) means pure decode, token t is request t. */
#define IH_POS(t)                                      \
  (pos_i32 ? (long)LD_I32(pos_mem, pos_off + (t)*pos_s0) \
           : LD_I64(pos_mem, pos_off + (t)*pos_s0))
#define IH_REQ(t) (has_t2r ? LD_I32(t2r_mem, t2r_off + (t) * t2r_s0) : (int)(t))

/* ---- §10.2 SWA indices and lengths: one group per token ---------------------- */
__kernel __attribute__((reqd_work_group_size(IH_LANES, 1, 1)))
void ih_swa_indices(DSA_CTENSOR1(pos), int pos_i32, DSA_CTENSOR1(t2r), int has_t2r,
                    DSA_CTENSOR1(valid), int has_valid,
                    DSA_CTENSOR2(bt), int R, int W, int window, int bs, DSA_TENSOR2(idx), int width,
                    DSA_TENSOR1(lens), DSA_FAULTS) {
  const ulong t = get_group_id(0);
  const int lane = get_local_id(0);
  uint fb = 0;
  const int ok_tok = has_valid ? valid_mem[valid_off + t * valid_s0] != 0 : 1;
  int len = 0, start = 0, r = 0;
  if (ok_tok) {
    const long p = IH_POS(t);
    r = IH_REQ(t);
    if (p < 0 || p >= IH_POS_LIMIT) {
      fb |= DSA_FAULT_POSITION_RANGE;
    } else if (r < 0 || r >= R) {
      fb |= DSA_FAULT_INDEX_RANGE;
    } else {
      start = max((int)p - window + 1, 0);
      len = (int)p - start + 1;
    }
  }
  if (lane == 0) ST_I32(lens_mem, lens_off + t * lens_s0, len);
  else fb = 0; /* the row-level faults are posted once, by lane 0 */
  const ulong row = bt_off + (ulong)r * bt_s0;
  for (int i = lane; i < width; i += IH_LANES) {
    const int v = i < len ? ih_map(bt_mem, row, bt_s1, W, start + i, bs, &fb) : -1;
    ST_I32(idx_mem, idx_off + t * idx_s0 + (ulong)i * idx_s1, v);
  }
  ih_post(faults, fb);
}

/* ---- §10.3 top-k local -> global: one group per token ------------------------- */
__kernel __attribute__((reqd_work_group_size(IH_LANES, 1, 1)))
void ih_global_topk(DSA_CTENSOR2(tk), int K, DSA_CTENSOR1(t2r), int has_t2r, DSA_CTENSOR2(bt),
                    int R, int W,
                    int bs, DSA_CTENSOR1(valid), int has_valid, DSA_TENSOR2(out), DSA_TENSOR1(lens),
                    int has_lens, DSA_FAULTS) {
  __local int cnt[IH_LANES];
  const ulong t = get_group_id(0);
  const int lane = get_local_id(0);
  uint fb = 0;
  const int ok_tok = has_valid ? valid_mem[valid_off + t * valid_s0] != 0 : 1;
  const int r = IH_REQ(t);
  const int r_ok = r >= 0 && r < R;
  if (!r_ok && ok_tok && lane == 0) fb |= DSA_FAULT_INDEX_RANGE;
  const ulong row = bt_off + (ulong)(r_ok ? r : 0) * bt_s0;
  int n = 0;
  for (int j0 = lane; j0 < K; j0 += IH_B * IH_LANES) {
    int v[IH_B];
#pragma unroll
    for (int u = 0; u < IH_B; u++) {
      const int j = j0 + u * IH_LANES;
      v[u] = j < K ? LD_I32(tk_mem, tk_off + t * tk_s0 + (ulong)j * tk_s1) : -1;
    }
#pragma unroll
    for (int u = 0; u < IH_B; u++) {
      if (v[u] >= 0) {
        n++;
        v[u] = r_ok ? ih_map(bt_mem, row, bt_s1, W, v[u], bs, &fb) : -1;
      } else {
        v[u] = -1; /* any negative entry is unused */
      }
    }
#pragma unroll
    for (int u = 0; u < IH_B; u++) {
      const int j = j0 + u * IH_LANES;
      if (j < K) ST_I32(out_mem, out_off + t * out_s0 + (ulong)j * out_s1, v[u]);
    }
  }
  n = ih_group_sum(cnt, n);
  if (has_lens && lane == 0) ST_I32(lens_mem, lens_off + t * lens_s0, ok_tok && r_ok ? n : 0);
  ih_post(faults, fb);
}

/* ---- C128 dense form: one group per token ---------------------------------------- */
__kernel __attribute__((reqd_work_group_size(IH_LANES, 1, 1)))
void ih_c128_topk(DSA_CTENSOR1(pos), int pos_i32, DSA_CTENSOR1(t2r), int has_t2r, int global_form,
                  DSA_CTENSOR2(bt), int R,
                  int W, int ratio, int bs, DSA_CTENSOR1(valid), int has_valid, DSA_TENSOR2(out),
                  int K, DSA_TENSOR1(lens), int has_lens, DSA_FAULTS) {
  const ulong t = get_group_id(0);
  const int lane = get_local_id(0);
  uint fb = 0;
  const int ok_tok = has_valid ? valid_mem[valid_off + t * valid_s0] != 0 : 1;
  const long p = IH_POS(t);
  int n = 0, r = 0;
  if (p < 0 || p >= IH_POS_LIMIT) {
    if (ok_tok) fb |= DSA_FAULT_POSITION_RANGE;
  } else {
    n = min(((int)p + 1) / ratio, K);
    if (global_form) {
      r = IH_REQ(t);
      if (r < 0 || r >= R) {
        if (ok_tok) fb |= DSA_FAULT_INDEX_RANGE;
        n = 0;
      }
    }
  }
  if (lane == 0) {
    if (has_lens) ST_I32(lens_mem, lens_off + t * lens_s0, ok_tok ? n : 0);
  } else {
    fb = 0;
  }
  const ulong row = bt_off + (ulong)r * bt_s0;
  for (int i = lane; i < K; i += IH_LANES) {
    const int v = i >= n ? -1 : global_form ? ih_map(bt_mem, row, bt_s1, W, i, bs, &fb) : i;
    ST_I32(out_mem, out_off + t * out_s0 + (ulong)i * out_s1, v);
  }
  ih_post(faults, fb);
}

/* ---- §10.4 prefill top-k + SWA combination: one group per token ---------------- */
__kernel __attribute__((reqd_work_group_size(IH_LANES, 1, 1)))
void ih_combine_topk_swa(DSA_CTENSOR2(tk), DSA_CTENSOR1(qsl), DSA_CTENSOR1(seq), DSA_CTENSOR1(gl),
                         int R, int window, int ratio, int topk, long M, long N, DSA_TENSOR2(out),
                         int width, DSA_TENSOR1(lens), DSA_FAULTS) {
  const long t = get_group_id(0);
  const int lane = get_local_id(0);
  uint fb = 0;
  const long base = R > 0 ? LD_I32(qsl_mem, qsl_off) : 0;
  const int b = ih_find_req(qsl_mem, qsl_off, qsl_s0, R, base, t);
  int topk_len = 0, swa_len = 0;
  long p = 0, seq_len = 0, gstart = 0;
  if (b >= 0 && t < (long)LD_I32(qsl_mem, qsl_off + (ulong)(b + 1) * qsl_s0) - base) {
    const long qs = (long)LD_I32(qsl_mem, qsl_off + (ulong)b * qsl_s0) - base;
    const long qe = (long)LD_I32(qsl_mem, qsl_off + (ulong)(b + 1) * qsl_s0) - base;
    seq_len = LD_I32(seq_mem, seq_off + (ulong)b * seq_s0);
    p = seq_len - (qe - qs) + (t - qs);
    if (p < 0) {
      if (lane == 0) fb |= DSA_FAULT_LENGTH_RANGE;
    } else {
      topk_len = (int)min((p + 1) / ratio, (long)topk);
      swa_len = (int)min(p + 1, (long)window);
      gstart = seq_len - LD_I32(gl_mem, gl_off + (ulong)b * gl_s0);
    }
  }
  if (lane == 0) ST_I32(lens_mem, lens_off + (ulong)t * lens_s0, topk_len + swa_len);
  const long slab = M * (long)max(b, 0);
  const long first = p - swa_len + 1; /* position of SWA entry 0 */
  for (int c = lane; c < width; c += IH_LANES) {
    long v = -1;
    if (c < topk_len) {
      const int e = LD_I32(tk_mem, tk_off + (ulong)t * tk_s0 + (ulong)c * tk_s1);
      if (e >= 0) v = slab + e;
    } else if (c < topk_len + swa_len) {
      const long q = first + (c - topk_len);
      if (q < gstart) fb |= DSA_FAULT_LENGTH_RANGE;
      else v = slab + N + (q - gstart);
    }
    if (v > IH_INT_MAX) {
      fb |= DSA_FAULT_SLOT_RANGE;
      v = -1;
    }
    ST_I32(out_mem, out_off + (ulong)t * out_s0 + (ulong)c * out_s1, (int)v);
  }
  ih_post(faults, fb);
}

/* ---- §10.5 mixed sparse-index matrix: one group per token ---------------------- */
__kernel __attribute__((reqd_work_group_size(IH_LANES, 1, 1)))
void ih_mixed_sparse(DSA_CTENSOR2(dswa), DSA_CTENSOR2(dci), int Kd, DSA_CTENSOR1(dlens),
                     int has_dlens, DSA_CTENSOR1(dvalid), int has_dvalid, DSA_CTENSOR2(pti), int Kp,
                     DSA_CTENSOR1(qsl), DSA_CTENSOR1(seq), DSA_CTENSOR1(t2r), int R,
                     DSA_CTENSOR2(sbt), int Ws, int sbs, DSA_CTENSOR2(cbt), int Wc, int cbs, int Td,
                     int window, int ratio, int topk, int local_dec, DSA_TENSOR2(out), int P,
                     DSA_TENSOR1(lens), DSA_FAULTS) {
  __local int cnt[IH_LANES];
  const long t = get_group_id(0);
  const int lane = get_local_id(0);
  uint fb = 0;
  __global uchar *orow = out_mem + out_off + (ulong)t * out_s0;

  if (t < Td) {
    /* Uniform per group: every item takes this branch, so the barriers of
     * ih_group_sum are reached by all. */
    for (int c = lane; c < window; c += IH_LANES)
      ST_I32(orow, (ulong)c * out_s1, LD_I32(dswa_mem, dswa_off + (ulong)t * dswa_s0 + (ulong)c * dswa_s1));
    const int ok_tok = has_dvalid ? dvalid_mem[dvalid_off + (ulong)t * dvalid_s0] != 0 : 1;
    int r = 0, r_ok = 1;
    if (local_dec && Kd > 0) {
      r = LD_I32(t2r_mem, t2r_off + (ulong)t * t2r_s0);
      r_ok = r >= 0 && r < R;
      if (!r_ok && ok_tok && lane == 0) fb |= DSA_FAULT_INDEX_RANGE;
    }
    const ulong row = cbt_off + (ulong)(r_ok ? r : 0) * cbt_s0;
    int n = 0;
    for (int j = lane; j < P; j += IH_LANES) {
      int v = j < Kd ? LD_I32(dci_mem, dci_off + (ulong)t * dci_s0 + (ulong)j * dci_s1) : -1;
      if (local_dec && v >= 0) {
        n++;
        v = r_ok ? ih_map(cbt_mem, row, cbt_s1, Wc, v, cbs, &fb) : -1;
      }
      ST_I32(orow, (ulong)(window + j) * out_s1, v);
    }
    n = ih_group_sum(cnt, n);
    if (lane == 0) {
      const int clen = Kd == 0 ? 0
                       : local_dec ? (ok_tok ? n : 0)
                       : has_dlens ? LD_I32(dlens_mem, dlens_off + (ulong)t * dlens_s0)
                                   : Kd;
      ST_I32(lens_mem, lens_off + (ulong)t * lens_s0, window + clen);
    }
    ih_post(faults, fb);
    return;
  }

  const int r = LD_I32(t2r_mem, t2r_off + (ulong)t * t2r_s0);
  int ok = 0, swa_len = 0, topk_len = 0;
  long p = 0;
  if (r < 0 || r >= R) {
    if (lane == 0) fb |= DSA_FAULT_INDEX_RANGE;
  } else {
    const long qs = LD_I32(qsl_mem, qsl_off + (ulong)r * qsl_s0);
    const long qe = LD_I32(qsl_mem, qsl_off + (ulong)(r + 1) * qsl_s0);
    p = (long)LD_I32(seq_mem, seq_off + (ulong)r * seq_s0) - (qe - qs) + (t - qs);
    if (t < qs || t >= qe || p < 0) {
      if (lane == 0) fb |= DSA_FAULT_LENGTH_RANGE;
    } else {
      ok = 1;
      swa_len = (int)min(p + 1, (long)window);
      topk_len = (int)min((p + 1) / ratio, (long)topk);
    }
  }
  if (lane == 0) ST_I32(lens_mem, lens_off + (ulong)t * lens_s0, ok ? window + topk_len : 0);
  const int first = (int)p - swa_len + 1;
  const ulong srow = sbt_off + (ulong)(ok ? r : 0) * sbt_s0;
  const ulong crow = cbt_off + (ulong)(ok ? r : 0) * cbt_s0;
  for (int c = lane; c < window; c += IH_LANES) {
    const int v = c < swa_len ? ih_map(sbt_mem, srow, sbt_s1, Ws, first + c, sbs, &fb) : -1;
    ST_I32(orow, (ulong)c * out_s1, v);
  }
  const ulong prow = pti_off + (ulong)(t - Td) * pti_s0;
  const int kl = min(topk_len, Kp);
  for (int j = lane; j < P; j += IH_LANES) {
    int v = -1;
    if (j < kl) {
      const int e = LD_I32(pti_mem, prow + (ulong)j * pti_s1);
      if (e >= 0) v = ih_map(cbt_mem, crow, cbt_s1, Wc, e, cbs, &fb);
    }
    ST_I32(orow, (ulong)(window + j) * out_s1, v);
  }
  ih_post(faults, fb);
}
