/* Inverse RoPE + FP8 output quantization: reference (see ref_output_quant.h). */
#include "ref_output_quant.h"

#include <math.h>
#include <string.h>

#define OQ_DIM 512
#define OQ_ROPE0 448
#define OQ_BLOCK 128

static float f32_of_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

int ref_oq_scale_exp(float amax) {
  /* fl32(1/448) and the product, both rounded to fp32 (C float arithmetic). */
  const float rcp = (float)(1.0 / 448.0);
  volatile float r = amax * rcp;
  if (isinf(r)) return 128;
  float l = (float)log2l((long double)r);
  return (int)ceilf(l);
}

/* x / 2^e as e4m3, NaN (and inf / inf) -> 0x7E: clamp(v, -448, 448) with a
 * NaN dropped, as min.xorsign.abs(v, 448) does. */
static uint8_t quant(float x, int e) {
  if (e == 128) {
    if (isnan(x) || isinf(x)) return 0x7E;
    return signbit(x) ? 0x80 : 0x00;
  }
  if (isnan(x)) return 0x7E;
  double v = ldexp((double)x, -e); /* exact */
  if (v > 448) v = 448;
  if (v < -448) v = -448;
  return ref_e4m3_encode(v);
}

unsigned ref_inv_rope_fp8_quant(const uint16_t *o, int64_t o_ts, int64_t o_hs, int64_t t,
                                int64_t h, const int64_t *pos, const float *cos_sin,
                                int64_t cs_rs, int64_t n_pos, int64_t g, uint8_t *out,
                                int64_t out_gs, int64_t out_ts, void *scales, int packed,
                                int64_t sc_gs, int64_t sc_ks, int64_t sc_ts, int64_t tp) {
  unsigned faults = 0;
  const int64_t hpg = h / g;
  const float eps = (float)1e-10;
  for (int64_t ti = 0; ti < tp; ti++) {
    const int64_t p = ti < t ? pos[ti] : 0;
    const int rotate = ti < t && p >= 0 && p < n_pos;
    if (ti < t && !rotate) faults |= REF_FAULT_POSITION_RANGE;
    for (int64_t hh = 0; hh < h; hh++) {
      const int64_t gi = hh / hpg, hi = hh % hpg;
      int ex[4] = {0, 0, 0, 0};
      if (ti < t) {
        float x[OQ_DIM];
        const uint16_t *src = o + ti * o_ts + hh * o_hs;
        for (int d = 0; d < OQ_DIM; d++) x[d] = ref_bf16_to_float(src[d]);
        if (rotate) {
          const float *row = cos_sin + p * cs_rs;
          for (int i = 0; i < 32; i++) {
            const float c = row[i], s = row[32 + i];
            const float e = x[OQ_ROPE0 + 2 * i], od = x[OQ_ROPE0 + 2 * i + 1];
            volatile float os = od * s, es = e * s;
            x[OQ_ROPE0 + 2 * i] = fmaf(e, c, os);
            x[OQ_ROPE0 + 2 * i + 1] = fmaf(od, c, -es);
          }
        }
        for (int b = 0; b < 4; b++) {
          float amax = 0.0f;
          for (int d = b * OQ_BLOCK; d < (b + 1) * OQ_BLOCK; d++)
            if (!isnan(x[d]) && fabsf(x[d]) > amax) amax = fabsf(x[d]);
          if (!(amax > eps)) amax = eps;
          ex[b] = ref_oq_scale_exp(amax);
          for (int d = b * OQ_BLOCK; d < (b + 1) * OQ_BLOCK; d++)
            out[gi * out_gs + ti * out_ts + hi * OQ_DIM + d] = quant(x[d], ex[b]);
        }
      }
      if (packed) {
        uint32_t w = 0;
        if (ti < t)
          for (int b = 0; b < 4; b++) w |= (uint32_t)(ex[b] == 128 ? 0xFF : ex[b] + 127) << (8 * b);
        ((uint32_t *)scales)[gi * sc_gs + hi * sc_ks + ti * sc_ts] = w;
      } else {
        for (int b = 0; b < 4; b++) {
          const float sc = ti >= t        ? 0.0f
                           : ex[b] == 128 ? f32_of_bits(0x7F800000u)
                                          : ldexpf(1.0f, ex[b]);
          ((float *)scales)[gi * sc_gs + (hi * 4 + b) * sc_ks + ti * sc_ts] = sc;
        }
      }
    }
  }
  return faults;
}
