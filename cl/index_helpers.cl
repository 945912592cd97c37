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

#define IH_LANES 64
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
__kernel void ih_compressed_slot_mapping(
    __global const uchar *qsl, ulong qsl_off, ulong qsl_st, __global const uchar *seq,
    ulong seq_off, ulong seq_st, __global const uchar *bt, ulong bt_off, ulong bt_rs,
    ulong bt_cs, int R, int W, int ratio, int bs, __global uchar *out, ulong out_off,
    ulong out_st, long T, __global volatile uint *faults) {
  const long t = get_global_id(0);
  if (t >= T) return;
  uint fb = 0;
  long slot = -1;
  const int r = ih_find_req(qsl, qsl_off, qsl_st, R, 0, t);
  if (r >= 0 && t < LD_I32(qsl, qsl_off + (ulong)(r + 1) * qsl_st)) {
    const long qs = LD_I32(qsl, qsl_off + (ulong)r * qsl_st);
    const long qe = LD_I32(qsl, qsl_off + (ulong)(r + 1) * qsl_st);
    const long p = (long)LD_I32(seq, seq_off + (ulong)r * seq_st) - (qe - qs) + (t - qs);
    if (p < 0) {
      fb |= DSA_FAULT_LENGTH_RANGE;
    } else if ((p + 1) % ratio == 0) {
      const long c = p / ratio;
      const long bi = c / bs;
      if (bi >= W) {
        fb |= DSA_FAULT_INDEX_RANGE;
      } else {
        const int blk = LD_I32(bt, bt_off + (ulong)r * bt_rs + (ulong)bi * bt_cs);
        if (blk >= 0) slot = (long)blk * bs + (c - bi * bs);
      }
    }
  }
  *(__global long *)(out + out_off + (ulong)t * out_st) = slot;
  ih_post(faults, fb);
}

/* ---- §10.2 SWA indices and lengths: one group per token ---------------------- */
__kernel __attribute__((reqd_work_group_size(IH_LANES, 1, 1))) void ih_swa_indices(
    __global const uchar *pos, ulong pos_off, ulong pos_st, __global const uchar *t2r,
    ulong t2r_off, ulong t2r_st, __global const uchar *valid, ulong valid_off, ulong valid_st,
    int has_valid, __global const uchar *bt, ulong bt_off, ulong bt_rs, ulong bt_cs, int R,
    int W, int window, int bs, __global uchar *idx, ulong idx_off, ulong idx_rs, ulong idx_cs,
    int width, __global uchar *lens, ulong lens_off, ulong lens_st,
    __global volatile uint *faults) {
  const ulong t = get_group_id(0);
  const int lane = get_local_id(0);
  uint fb = 0;
  const int ok_tok = has_valid ? valid[valid_off + t * valid_st] != 0 : 1;
  int len = 0, start = 0, r = 0;
  if (ok_tok) {
    const long p = LD_I64(pos, pos_off + t * pos_st);
    r = LD_I32(t2r, t2r_off + t * t2r_st);
    if (p < 0 || p >= IH_POS_LIMIT) {
      fb |= DSA_FAULT_POSITION_RANGE;
    } else if (r < 0 || r >= R) {
      fb |= DSA_FAULT_INDEX_RANGE;
    } else {
      start = max((int)p - window + 1, 0);
      len = (int)p - start + 1;
    }
  }
  if (lane == 0) ST_I32(lens, lens_off + t * lens_st, len);
  else fb = 0; /* the row-level faults are posted once, by lane 0 */
  const ulong row = bt_off + (ulong)r * bt_rs;
  for (int i = lane; i < width; i += IH_LANES) {
    const int v = i < len ? ih_map(bt, row, bt_cs, W, start + i, bs, &fb) : -1;
    ST_I32(idx, idx_off + t * idx_rs + (ulong)i * idx_cs, v);
  }
  ih_post(faults, fb);
}

/* ---- §10.3 top-k local -> global: one group per token ------------------------- */
__kernel __attribute__((reqd_work_group_size(IH_LANES, 1, 1))) void ih_global_topk(
    __global const uchar *tk, ulong tk_off, ulong tk_rs, ulong tk_cs, int K,
    __global const uchar *t2r, ulong t2r_off, ulong t2r_st, __global const uchar *bt,
    ulong bt_off, ulong bt_rs, ulong bt_cs, int R, int W, int bs, __global const uchar *valid,
    ulong valid_off, ulong valid_st, int has_valid, __global uchar *out, ulong out_off,
    ulong out_rs, ulong out_cs, __global uchar *lens, ulong lens_off, ulong lens_st,
    int has_lens, __global volatile uint *faults) {
  __local int cnt[IH_LANES];
  const ulong t = get_group_id(0);
  const int lane = get_local_id(0);
  uint fb = 0;
  const int ok_tok = has_valid ? valid[valid_off + t * valid_st] != 0 : 1;
  const int r = LD_I32(t2r, t2r_off + t * t2r_st);
  const int r_ok = r >= 0 && r < R;
  if (!r_ok && ok_tok && lane == 0) fb |= DSA_FAULT_INDEX_RANGE;
  const ulong row = bt_off + (ulong)(r_ok ? r : 0) * bt_rs;
  int n = 0;
  for (int j = lane; j < K; j += IH_LANES) {
    const int i = LD_I32(tk, tk_off + t * tk_rs + (ulong)j * tk_cs);
    int v = -1;
    if (i >= 0) {
      n++;
      if (r_ok) v = ih_map(bt, row, bt_cs, W, i, bs, &fb);
    }
    ST_I32(out, out_off + t * out_rs + (ulong)j * out_cs, v);
  }
  n = ih_group_sum(cnt, n);
  if (has_lens && lane == 0) ST_I32(lens, lens_off + t * lens_st, ok_tok && r_ok ? n : 0);
  ih_post(faults, fb);
}

/* ---- C128 dense form: one group per token ---------------------------------------- */
__kernel __attribute__((reqd_work_group_size(IH_LANES, 1, 1))) void ih_c128_topk(
    __global const uchar *pos, ulong pos_off, ulong pos_st, __global const uchar *t2r,
    ulong t2r_off, ulong t2r_st, int global_form, __global const uchar *bt, ulong bt_off,
    ulong bt_rs, ulong bt_cs, int R, int W, int ratio, int bs, __global const uchar *valid,
    ulong valid_off, ulong valid_st, int has_valid, __global uchar *out, ulong out_off,
    ulong out_rs, ulong out_cs, int K, __global uchar *lens, ulong lens_off, ulong lens_st,
    int has_lens, __global volatile uint *faults) {
  const ulong t = get_group_id(0);
  const int lane = get_local_id(0);
  uint fb = 0;
  const int ok_tok = has_valid ? valid[valid_off + t * valid_st] != 0 : 1;
  const long p = LD_I64(pos, pos_off + t * pos_st);
  int n = 0, r = 0;
  if (p < 0 || p >= IH_POS_LIMIT) {
    if (ok_tok) fb |= DSA_FAULT_POSITION_RANGE;
  } else {
    n = min(((int)p + 1) / ratio, K);
    if (global_form) {
      r = LD_I32(t2r, t2r_off + t * t2r_st);
      if (r < 0 || r >= R) {
        if (ok_tok) fb |= DSA_FAULT_INDEX_RANGE;
        n = 0;
      }
    }
  }
  if (lane == 0) {
    if (has_lens) ST_I32(lens, lens_off + t * lens_st, ok_tok ? n : 0);
  } else {
    fb = 0;
  }
  const ulong row = bt_off + (ulong)r * bt_rs;
  for (int i = lane; i < K; i += IH_LANES) {
    const int v = i >= n ? -1 : global_form ? ih_map(bt, row, bt_cs, W, i, bs, &fb) : i;
    ST_I32(out, out_off + t * out_rs + (ulong)i * out_cs, v);
  }
  ih_post(faults, fb);
}

/* ---- §10.4 prefill top-k + SWA combination: one group per token ---------------- */
__kernel __attribute__((reqd_work_group_size(IH_LANES, 1, 1))) void ih_combine_topk_swa(
    __global const uchar *tk, ulong tk_off, ulong tk_rs, ulong tk_cs,
    __global const uchar *qsl, ulong qsl_off, ulong qsl_st, __global const uchar *seq,
    ulong seq_off, ulong seq_st, __global const uchar *gl, ulong gl_off, ulong gl_st, int R,
    int window, int ratio, int topk, long M, long N, __global uchar *out, ulong out_off,
    ulong out_rs, ulong out_cs, int width, __global uchar *lens, ulong lens_off,
    ulong lens_st, __global volatile uint *faults) {
  const long t = get_group_id(0);
  const int lane = get_local_id(0);
  uint fb = 0;
  const long base = R > 0 ? LD_I32(qsl, qsl_off) : 0;
  const int b = ih_find_req(qsl, qsl_off, qsl_st, R, base, t);
  int topk_len = 0, swa_len = 0;
  long p = 0, seq_len = 0, gstart = 0;
  if (b >= 0 && t < (long)LD_I32(qsl, qsl_off + (ulong)(b + 1) * qsl_st) - base) {
    const long qs = (long)LD_I32(qsl, qsl_off + (ulong)b * qsl_st) - base;
    const long qe = (long)LD_I32(qsl, qsl_off + (ulong)(b + 1) * qsl_st) - base;
    seq_len = LD_I32(seq, seq_off + (ulong)b * seq_st);
    p = seq_len - (qe - qs) + (t - qs);
    if (p < 0) {
      if (lane == 0) fb |= DSA_FAULT_LENGTH_RANGE;
    } else {
      topk_len = (int)min((p + 1) / ratio, (long)topk);
      swa_len = (int)min(p + 1, (long)window);
      gstart = seq_len - LD_I32(gl, gl_off + (ulong)b * gl_st);
    }
  }
  if (lane == 0) ST_I32(lens, lens_off + (ulong)t * lens_st, topk_len + swa_len);
  const long slab = M * (long)max(b, 0);
  const long first = p - swa_len + 1; /* position of SWA entry 0 */
  for (int c = lane; c < width; c += IH_LANES) {
    long v = -1;
    if (c < topk_len) {
      const int e = LD_I32(tk, tk_off + (ulong)t * tk_rs + (ulong)c * tk_cs);
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
    ST_I32(out, out_off + (ulong)t * out_rs + (ulong)c * out_cs, (int)v);
  }
  ih_post(faults, fb);
}

/* ---- §10.5 mixed sparse-index matrix: one group per token ---------------------- */
__kernel __attribute__((reqd_work_group_size(IH_LANES, 1, 1))) void ih_mixed_sparse(
    __global const uchar *dswa, ulong dswa_off, ulong dswa_rs, ulong dswa_cs,
    __global const uchar *dci, ulong dci_off, ulong dci_rs, ulong dci_cs, int Kd,
    __global const uchar *dlens, ulong dlens_off, ulong dlens_st, int has_dlens,
    __global const uchar *dvalid, ulong dvalid_off, ulong dvalid_st, int has_dvalid,
    __global const uchar *pti, ulong pti_off, ulong pti_rs, ulong pti_cs, int Kp,
    __global const uchar *qsl, ulong qsl_off, ulong qsl_st, __global const uchar *seq,
    ulong seq_off, ulong seq_st, __global const uchar *t2r, ulong t2r_off, ulong t2r_st,
    int R, __global const uchar *sbt, ulong sbt_off, ulong sbt_rs, ulong sbt_cs, int Ws,
    int sbs, __global const uchar *cbt, ulong cbt_off, ulong cbt_rs, ulong cbt_cs, int Wc,
    int cbs, int Td, int window, int ratio, int topk, int local_dec, __global uchar *out,
    ulong out_off, ulong out_rs, ulong out_cs, int P, __global uchar *lens, ulong lens_off,
    ulong lens_st, __global volatile uint *faults) {
  __local int cnt[IH_LANES];
  const long t = get_group_id(0);
  const int lane = get_local_id(0);
  uint fb = 0;
  __global uchar *orow = out + out_off + (ulong)t * out_rs;

  if (t < Td) {
    /* Uniform per group: every item takes this branch, so the barriers of
     * ih_group_sum are reached by all. */
    for (int c = lane; c < window; c += IH_LANES)
      ST_I32(orow, (ulong)c * out_cs, LD_I32(dswa, dswa_off + (ulong)t * dswa_rs + (ulong)c * dswa_cs));
    const int ok_tok = has_dvalid ? dvalid[dvalid_off + (ulong)t * dvalid_st] != 0 : 1;
    int r = 0, r_ok = 1;
    if (local_dec && Kd > 0) {
      r = LD_I32(t2r, t2r_off + (ulong)t * t2r_st);
      r_ok = r >= 0 && r < R;
      if (!r_ok && ok_tok && lane == 0) fb |= DSA_FAULT_INDEX_RANGE;
    }
    const ulong row = cbt_off + (ulong)(r_ok ? r : 0) * cbt_rs;
    int n = 0;
    for (int j = lane; j < P; j += IH_LANES) {
      int v = j < Kd ? LD_I32(dci, dci_off + (ulong)t * dci_rs + (ulong)j * dci_cs) : -1;
      if (local_dec && v >= 0) {
        n++;
        v = r_ok ? ih_map(cbt, row, cbt_cs, Wc, v, cbs, &fb) : -1;
      }
      ST_I32(orow, (ulong)(window + j) * out_cs, v);
    }
    n = ih_group_sum(cnt, n);
    if (lane == 0) {
      const int clen = Kd == 0 ? 0
                       : local_dec ? (ok_tok ? n : 0)
                       : has_dlens ? LD_I32(dlens, dlens_off + (ulong)t * dlens_st)
                                   : Kd;
      ST_I32(lens, lens_off + (ulong)t * lens_st, window + clen);
    }
    ih_post(faults, fb);
    return;
  }

  const int r = LD_I32(t2r, t2r_off + (ulong)t * t2r_st);
  int ok = 0, swa_len = 0, topk_len = 0;
  long p = 0;
  if (r < 0 || r >= R) {
    if (lane == 0) fb |= DSA_FAULT_INDEX_RANGE;
  } else {
    const long qs = LD_I32(qsl, qsl_off + (ulong)r * qsl_st);
    const long qe = LD_I32(qsl, qsl_off + (ulong)(r + 1) * qsl_st);
    p = (long)LD_I32(seq, seq_off + (ulong)r * seq_st) - (qe - qs) + (t - qs);
    if (t < qs || t >= qe || p < 0) {
      if (lane == 0) fb |= DSA_FAULT_LENGTH_RANGE;
    } else {
      ok = 1;
      swa_len = (int)min(p + 1, (long)window);
      topk_len = (int)min((p + 1) / ratio, (long)topk);
    }
  }
  if (lane == 0) ST_I32(lens, lens_off + (ulong)t * lens_st, ok ? window + topk_len : 0);
  const int first = (int)p - swa_len + 1;
  const ulong srow = sbt_off + (ulong)(ok ? r : 0) * sbt_rs;
  const ulong crow = cbt_off + (ulong)(ok ? r : 0) * cbt_rs;
  for (int c = lane; c < window; c += IH_LANES) {
    const int v = c < swa_len ? ih_map(sbt, srow, sbt_cs, Ws, first + c, sbs, &fb) : -1;
    ST_I32(orow, (ulong)c * out_cs, v);
  }
  const ulong prow = pti_off + (ulong)(t - Td) * pti_rs;
  const int kl = min(topk_len, Kp);
  for (int j = lane; j < P; j += IH_LANES) {
    int v = -1;
    if (j < kl) {
      const int e = LD_I32(pti, prow + (ulong)j * pti_cs);
      if (e >= 0) v = ih_map(cbt, crow, cbt_cs, Wc, e, cbs, &fb);
    }
    ST_I32(orow, (ulong)(window + j) * out_cs, v);
  }
  ih_post(faults, fb);
}
