/* fp64 sparse MLA attention reference (see ref_sparse_mla.h). */
#include "ref_sparse_mla.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double kval(uint16_t h) {
  double v = ref_bf16_to_float(h);
  return isnan(v) ? 0.0 : v;
}

void ref_attn_one(const uint16_t *q, const uint16_t *const *rows, int64_t n, double scale,
                  const float *sink, double *out, double *lse) {
  memset(out, 0, REF_MLA_DIM * sizeof *out);
  *lse = -INFINITY;
  if (n == 0) return;
  double *s = malloc((size_t)n * sizeof *s), m = -INFINITY;
  for (int64_t j = 0; j < n; j++) {
    double d = 0;
    for (int i = 0; i < REF_MLA_DIM; i++) d += ref_bf16_to_float(q[i]) * kval(rows[j][i]);
    s[j] = scale * d;
    if (s[j] > m) m = s[j];
  }
  double l = 0;
  for (int64_t j = 0; j < n; j++) {
    double p = exp(s[j] - m);
    l += p;
    for (int i = 0; i < REF_MLA_DIM; i++) out[i] += p * kval(rows[j][i]);
  }
  /* e^{sink - m} relative to the largest logit: -inf adds 0, +inf (or an
   * overflow) makes the output 0. */
  double den = l + (sink ? exp((double)*sink - m) : 0.0);
  for (int i = 0; i < REF_MLA_DIM; i++) out[i] = isinf(den) ? 0.0 : out[i] / den;
  *lse = m + log(l);
  free(s);
}

static int64_t clamp_len(int64_t l, int64_t k, unsigned *faults) {
  if (l < 0 || l > k) *faults |= REF_FAULT_LENGTH_RANGE;
  return l < 0 ? 0 : l > k ? k : l;
}

unsigned ref_sparse_attn_bf16(const uint16_t *q, int64_t t, int64_t h, int64_t q_s0,
                              int64_t q_s1, const uint16_t *kv, int64_t s, int64_t kv_s0,
                              const int32_t *idx, int64_t k, int64_t i_s0, int64_t i_s1,
                              const int32_t *lens, const float *sink, double scale, double *out,
                              double *lse) {
  unsigned faults = 0;
  const uint16_t **rows = malloc((size_t)(k ? k : 1) * sizeof *rows);
  for (int64_t ti = 0; ti < t; ti++) {
    int64_t len = lens ? clamp_len(lens[ti], k, &faults) : k, n = 0;
    for (int64_t j = 0; j < len; j++) {
      int64_t x = idx[ti * i_s0 + j * i_s1];
      if (x >= s) faults |= REF_FAULT_INDEX_RANGE;
      if (x >= 0 && x < s) rows[n++] = kv + x * kv_s0;
    }
    for (int64_t hi = 0; hi < h; hi++)
      ref_attn_one(q + ti * q_s0 + hi * q_s1, rows, n, scale, sink ? sink + hi : NULL,
                   out + (ti * h + hi) * REF_MLA_DIM, lse + ti * h + hi);
  }
  free(rows);
  return faults;
}

/* Dequantizes the used entries of set st for token ti into buf (n rows). */
static void gather_set(const ref_mla_set *st, int64_t ti, uint16_t *buf, int64_t *n,
                       unsigned *faults) {
  if (!st || st->k == 0) return;
  const int64_t cap = st->cache->num_blocks * st->cache->block_size;
  int64_t len = clamp_len(st->lens[ti], st->k, faults);
  for (int64_t j = 0; j < len; j++) {
    int64_t x = st->idx[ti * st->s0 + j * st->s1];
    if (x >= cap) *faults |= REF_FAULT_SLOT_RANGE;
    if (x >= 0 && x < cap) ref_mla_dequant(st->cache, x, buf + (*n)++ * REF_MLA_DIM);
  }
}

unsigned ref_sparse_mla_decode(const uint16_t *q, int64_t t, int64_t h, int64_t q_s0,
                               int64_t q_s1, const ref_mla_set *main_set,
                               const ref_mla_set *extra_set, const float *sink, double scale,
                               double *out, double *lse) {
  unsigned faults = 0;
  int64_t kmax = (main_set ? main_set->k : 0) + (extra_set ? extra_set->k : 0);
  uint16_t *buf = malloc((size_t)(kmax ? kmax : 1) * REF_MLA_DIM * sizeof *buf);
  const uint16_t **rows = malloc((size_t)(kmax ? kmax : 1) * sizeof *rows);
  for (int64_t ti = 0; ti < t; ti++) {
    int64_t n = 0;
    gather_set(main_set, ti, buf, &n, &faults);
    gather_set(extra_set, ti, buf, &n, &faults);
    for (int64_t j = 0; j < n; j++) rows[j] = buf + j * REF_MLA_DIM;
    for (int64_t hi = 0; hi < h; hi++)
      ref_attn_one(q + ti * q_s0 + hi * q_s1, rows, n, scale, sink ? sink + hi : NULL,
                   out + (ti * h + hi) * REF_MLA_DIM, lse + ti * h + hi);
  }
  free(buf);
  free(rows);
  return faults;
}
