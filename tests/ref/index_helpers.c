/* Index-building helpers reference, written from SPEC-reference §10 and the
 * contract in include/dsacl/index_helpers.h (entry by entry; no attempt to
 * follow the kernels' structure). */
#include "ref_index_helpers.h"

#include <stddef.h>

#define I32MAX 2147483647LL

/* Slot of local index idx >= 0 through row r of bt (block size bs). */
static int32_t map_slot(ref_table bt, int64_t r, int64_t idx, int32_t bs, unsigned *f) {
  int64_t bi = idx / bs;
  if (bi >= bt.width) {
    *f |= REF_FAULT_INDEX_RANGE;
    return -1;
  }
  int64_t blk = bt.d[r * bt.rs + bi];
  if (blk < 0) return -1;
  int64_t s = blk * bs + idx % bs;
  if (s > I32MAX) {
    *f |= REF_FAULT_SLOT_RANGE;
    return -1;
  }
  return (int32_t)s;
}

unsigned ref_compressed_slot_mapping(const int32_t *qsl, const int32_t *seq_lens, ref_table bt,
                                     int32_t ratio, int32_t bs, int64_t *out, int64_t t) {
  unsigned f = 0;
  for (int64_t i = 0; i < t; i++) out[i] = -1;
  for (int64_t r = 0; r < bt.rows; r++) {
    int64_t qs = qsl[r], qe = qsl[r + 1];
    for (int64_t tok = qs < 0 ? 0 : qs; tok < qe && tok < t; tok++) {
      int64_t p = (int64_t)seq_lens[r] - (qe - qs) + (tok - qs);
      if (p < 0) {
        f |= REF_FAULT_LENGTH_RANGE;
        continue;
      }
      if ((p + 1) % ratio) continue;
      int64_t c = p / ratio, bi = c / bs;
      if (bi >= bt.width) {
        f |= REF_FAULT_INDEX_RANGE;
        continue;
      }
      int64_t blk = bt.d[r * bt.rs + bi];
      if (blk >= 0) out[tok] = blk * bs + c % bs;
    }
  }
  return f;
}

unsigned ref_swa_indices(const int64_t *pos, const int32_t *t2r, const uint8_t *valid,
                         ref_table bt, int32_t window, int32_t bs, int32_t *out, int64_t width,
                         int64_t out_rs, int32_t *lens, int64_t t) {
  unsigned f = 0;
  for (int64_t i = 0; i < t; i++) {
    int32_t *row = out + i * out_rs;
    int64_t len = 0, start = 0, r = t2r[i], p = pos[i];
    if (!valid || valid[i]) {
      if (p < 0 || p >= I32MAX) f |= REF_FAULT_POSITION_RANGE;
      else if (r < 0 || r >= bt.rows) f |= REF_FAULT_INDEX_RANGE;
      else {
        start = p - window + 1 < 0 ? 0 : p - window + 1;
        len = p - start + 1;
      }
    }
    lens[i] = (int32_t)len;
    for (int64_t j = 0; j < width; j++) row[j] = j < len ? map_slot(bt, r, start + j, bs, &f) : -1;
  }
  return f;
}

unsigned ref_global_topk(const int32_t *topk, int64_t k, int64_t topk_rs, const int32_t *t2r,
                         ref_table bt, const uint8_t *valid, int32_t bs, int32_t *out,
                         int64_t out_rs, int32_t *lens, int64_t t) {
  unsigned f = 0;
  for (int64_t i = 0; i < t; i++) {
    int ok = !valid || valid[i];
    int64_t r = t2r[i], n = 0;
    int r_ok = r >= 0 && r < bt.rows;
    if (!r_ok && ok) f |= REF_FAULT_INDEX_RANGE;
    for (int64_t j = 0; j < k; j++) {
      int32_t v = topk[i * topk_rs + j], o = -1;
      if (v >= 0) {
        n++;
        if (r_ok) o = map_slot(bt, r, v, bs, &f);
      }
      out[i * out_rs + j] = o;
    }
    if (lens) lens[i] = ok && r_ok ? (int32_t)n : 0;
  }
  return f;
}

unsigned ref_c128_topk(const int64_t *pos, const int32_t *t2r, ref_table bt,
                       const uint8_t *valid, int32_t ratio, int32_t bs, int32_t *out, int64_t k,
                       int64_t out_rs, int32_t *lens, int64_t t) {
  unsigned f = 0;
  for (int64_t i = 0; i < t; i++) {
    int ok = !valid || valid[i];
    int64_t p = pos[i], n = 0, r = 0;
    if (p < 0 || p >= I32MAX) {
      if (ok) f |= REF_FAULT_POSITION_RANGE;
    } else {
      n = (p + 1) / ratio;
      if (n > k) n = k;
      if (bt.d) {
        r = t2r[i];
        if (r < 0 || r >= bt.rows) {
          if (ok) f |= REF_FAULT_INDEX_RANGE;
          n = 0;
        }
      }
    }
    for (int64_t j = 0; j < k; j++)
      out[i * out_rs + j] = j >= n ? -1 : bt.d ? map_slot(bt, r, j, bs, &f) : (int32_t)j;
    if (lens) lens[i] = ok ? (int32_t)n : 0;
  }
  return f;
}

unsigned ref_combine_topk_swa(const int32_t *topk, int64_t topk_rs, const int32_t *qsl,
                              const int32_t *seq_lens, const int32_t *gather_lens, int64_t r,
                              int32_t window, int32_t ratio, int32_t topk_n, int64_t m,
                              int64_t n, int32_t *out, int64_t width, int64_t out_rs,
                              int32_t *lens, int64_t t) {
  unsigned f = 0;
  for (int64_t i = 0; i < t; i++) {
    int32_t *row = out + i * out_rs;
    for (int64_t j = 0; j < width; j++) row[j] = -1;
    lens[i] = 0;
  }
  if (r == 0) return f;
  int64_t base = qsl[0];
  /* Each token belongs to the last request whose start is <= it. */
  for (int64_t i = 0; i < t; i++) {
    int64_t b = -1;
    for (int64_t k = 0; k < r; k++)
      if (qsl[k] - base <= i) b = k;
    if (b < 0 || i >= qsl[b + 1] - base) continue;
    int64_t qs = qsl[b] - base, qe = qsl[b + 1] - base, seq = seq_lens[b];
    int64_t p = seq - (qe - qs) + (i - qs);
    if (p < 0) {
      f |= REF_FAULT_LENGTH_RANGE;
      continue;
    }
    int64_t tl = (p + 1) / ratio < topk_n ? (p + 1) / ratio : topk_n;
    int64_t sl = p + 1 < window ? p + 1 : window;
    int64_t gstart = seq - gather_lens[b];
    int32_t *row = out + i * out_rs;
    for (int64_t j = 0; j < tl; j++) {
      int64_t e = topk[i * topk_rs + j], v = e < 0 ? -1 : m * b + e;
      if (v > I32MAX) f |= REF_FAULT_SLOT_RANGE, v = -1;
      row[j] = (int32_t)v;
    }
    for (int64_t k = 0; k < sl; k++) {
      int64_t q = p - sl + 1 + k, v = -1;
      if (q < gstart) f |= REF_FAULT_LENGTH_RANGE;
      else v = m * b + n + (q - gstart);
      if (v > I32MAX) f |= REF_FAULT_SLOT_RANGE, v = -1;
      row[tl + k] = (int32_t)v;
    }
    lens[i] = (int32_t)(tl + sl);
  }
  return f;
}

unsigned ref_mixed_sparse(const ref_mixed *m, int32_t *out, int64_t width, int64_t out_rs,
                          int32_t *lens) {
  unsigned f = 0;
  int64_t p_w = width - m->window;
  for (int64_t t = 0; t < m->td; t++) {
    int32_t *row = out + t * out_rs;
    for (int64_t c = 0; c < m->window; c++) row[c] = m->dswa[t * m->dswa_rs + c];
    int local = m->local && m->kd > 0;
    int ok = !m->dvalid || m->dvalid[t];
    int64_t r = local ? m->t2r[t] : 0, cnt = 0;
    int r_ok = !local || (r >= 0 && r < m->r);
    if (!r_ok && ok) f |= REF_FAULT_INDEX_RANGE;
    for (int64_t j = 0; j < p_w; j++) {
      int32_t v = j < m->kd ? m->dci[t * m->dci_rs + j] : -1;
      if (local && v >= 0) {
        cnt++;
        v = r_ok ? map_slot(m->cbt, r, v, m->cbs, &f) : -1;
      }
      row[m->window + j] = v;
    }
    int64_t clen = m->kd == 0 ? 0 : local ? (ok ? cnt : 0) : m->dlens ? m->dlens[t] : m->kd;
    lens[t] = (int32_t)(m->window + clen);
  }
  for (int64_t t = m->td; t < m->td + m->tp; t++) {
    int32_t *row = out + t * out_rs;
    for (int64_t c = 0; c < width; c++) row[c] = -1;
    lens[t] = 0;
    int64_t r = m->t2r[t];
    if (r < 0 || r >= m->r) {
      f |= REF_FAULT_INDEX_RANGE;
      continue;
    }
    int64_t qs = m->qsl[r], qe = m->qsl[r + 1];
    int64_t p = (int64_t)m->seq_lens[r] - (qe - qs) + (t - qs);
    if (t < qs || t >= qe || p < 0) {
      f |= REF_FAULT_LENGTH_RANGE;
      continue;
    }
    int64_t sl = p + 1 < m->window ? p + 1 : m->window;
    int64_t tl = (p + 1) / m->ratio < m->topk ? (p + 1) / m->ratio : m->topk;
    for (int64_t c = 0; c < sl; c++) row[c] = map_slot(m->sbt, r, p - sl + 1 + c, m->sbs, &f);
    for (int64_t j = 0; j < tl && j < m->kp; j++) {
      int32_t e = m->pti[(t - m->td) * m->pti_rs + j];
      if (e >= 0) row[m->window + j] = map_slot(m->cbt, r, e, m->cbs, &f);
    }
    lens[t] = (int32_t)(m->window + tl);
  }
  return f;
}
