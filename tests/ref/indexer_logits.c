/* fp64 reference for the indexer MQA logits (SPEC-reference §6.1–6.4). Each
 * logit is summed in double in the SPEC's order: per head the dot product,
 * times k_scale, ReLU, times the head weight, summed over heads. */
#include "ref_indexer_logits.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double ref_il_e4m3(uint8_t b) {
  if ((b & 0x7F) == 0x7F) return (b & 0x80) ? -480.0 : 480.0;
  return ref_e4m3_decode(b);
}

double ref_il_e2m1(unsigned nibble) {
  static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  double v = mag[nibble & 7];
  return (nibble & 8) ? -v : v;
}

double ref_il_ue8m0(uint8_t u) {
  if (u == 0) return 0.0;
  if (u == 255) return INFINITY;
  return ldexp(1.0, (int)u - 127);
}

double ref_il_mxfp4(const uint8_t *packed, const uint8_t *scales, int64_t e) {
  uint8_t byte = packed[e / 2];
  unsigned nib = (e & 1) ? (byte >> 4) : (byte & 0xF);
  return ref_il_e2m1(nib) * ref_il_ue8m0(scales[e / 32]);
}

/* Decoded query row [h][d]. */
static void decode_q(int fp4, int64_t h, int64_t d, const uint8_t *q, const uint8_t *qs,
                     double *out) {
  for (int64_t i = 0; i < h; i++)
    for (int64_t e = 0; e < d; e++)
      out[i * d + e] = fp4 ? ref_il_mxfp4(q + i * (d / 2), qs + i * (d / 32), e)
                           : ref_il_e4m3(q[i * d + e]);
}

static double logit(const double *q, const double *k, double kscale, const float *w, int64_t h,
                    int64_t d) {
  double sum = 0;
  for (int64_t i = 0; i < h; i++) {
    double dot = 0;
    for (int64_t e = 0; e < d; e++) dot += q[i * d + e] * k[e];
    double s = dot * kscale;
    sum += (s > 0 ? s : 0) * (double)w[i];
  }
  return sum;
}

unsigned ref_mqa_logits(int fp4, int64_t m, int64_t h, int64_t d, int64_t n, const uint8_t *q,
                        const uint8_t *q_scale, const uint8_t *k, const void *k_scale,
                        const float *w, const int32_t *ks, const int32_t *ke, int clean,
                        double *out) {
  unsigned faults = 0;
  double *qd = malloc((size_t)(h * d) * sizeof *qd), *kd = malloc((size_t)d * sizeof *kd);
  for (int64_t r = 0; r < m; r++) {
    decode_q(fp4, h, d, q + r * h * (fp4 ? d / 2 : d), fp4 ? q_scale + r * h * (d / 32) : NULL,
             qd);
    int64_t lo = ks[r], hi = ke[r];
    if (lo < 0 || hi > n) faults |= REF_FAULT_LENGTH_RANGE;
    if (lo < 0) lo = 0;
    if (hi > n) hi = n;
    for (int64_t c = 0; c < n; c++) {
      double *o = &out[r * n + c];
      if (c < lo || c >= hi) {
        *o = clean ? -INFINITY : NAN;
        continue;
      }
      double sc;
      if (fp4) {
        const uint8_t *ksb = (const uint8_t *)k_scale + c * (d / 32);
        for (int64_t e = 0; e < d; e++) kd[e] = ref_il_mxfp4(k + c * (d / 2), ksb, e);
        sc = 1.0;
      } else {
        for (int64_t e = 0; e < d; e++) kd[e] = ref_il_e4m3(k[c * d + e]);
        sc = ((const float *)k_scale)[c];
      }
      *o = logit(qd + 0, kd, sc, w + r * h, h, d);
    }
  }
  free(qd);
  free(kd);
  return faults;
}

unsigned ref_paged_mqa_logits(int fp4, int64_t b, int64_t next_n, int64_t h, const uint8_t *q,
                              const uint8_t *q_scale, const ref_il_cache *c, const float *w,
                              const int32_t *ctx, int ctx_rank, const int32_t *bt, int64_t wdt,
                              int64_t mml, int clean, double *out) {
  const int64_t d = 128, bs = c->block_size;
  unsigned faults = 0;
  double *qd = malloc((size_t)(h * d) * sizeof *qd), *kd = malloc((size_t)d * sizeof *kd);
  int64_t cap = wdt * bs < mml ? wdt * bs : mml;
  for (int64_t s = 0; s < b; s++) {
    for (int64_t i = 0; i < next_n; i++) {
      const int64_t r = s * next_n + i;
      decode_q(fp4, h, d, q + r * h * (fp4 ? d / 2 : d),
               fp4 ? q_scale + r * h * (d / 32) : NULL, qd);
      int64_t cl = ctx_rank == 2 ? ctx[s * next_n + i] : ctx[s];
      if (cl < 0 || cl > cap) faults |= REF_FAULT_LENGTH_RANGE;
      /* 1-D: j < ctx and j <= ctx - next_n + i (query i at position ctx - next_n + i). */
      int64_t lim = ctx_rank == 2 ? cl : cl - (next_n - 1 - i);
      if (lim < 0) lim = 0;
      if (lim > cap) lim = cap;
      for (int64_t j = 0; j < mml; j++) {
        double *o = &out[r * mml + j];
        if (j >= lim) {
          *o = clean ? -INFINITY : NAN;
          continue;
        }
        int64_t blk = bt[s * wdt + j / bs], t = j % bs;
        if (blk < 0 || blk >= c->num_blocks) {
          faults |= REF_FAULT_SLOT_RANGE;
          *o = -INFINITY;
          continue;
        }
        const uint8_t *base = c->base + blk * c->block_stride;
        double sc = 1.0;
        if (fp4) {
          for (int64_t e = 0; e < d; e++)
            kd[e] = ref_il_mxfp4(base + t * 64, base + bs * 64 + t * 4, e);
        } else {
          for (int64_t e = 0; e < d; e++) kd[e] = ref_il_e4m3(base[t * 128 + e]);
          float f;
          memcpy(&f, base + bs * 128 + t * 4, 4);
          sc = f;
        }
        *o = logit(qd, kd, sc, w + r * h, h, d);
      }
    }
  }
  free(qd);
  free(kd);
  return faults;
}
