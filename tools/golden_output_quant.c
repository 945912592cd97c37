/* Golden runner for the attention-output family: inverse RoPE + block-scaled
 * FP8 quantization (vLLM fused_inv_rope_fp8_quant; cases written by
 * tools/golden-gen/inv_rope_fp8_quant.py).
 *
 * Case: o u2 [T, H, 512] (bf16 bits), positions i8 [T], cos_sin f4 [P, 64];
 * meta n_groups (G), tma_aligned_scales (0: f32 scales, 1: packed i32),
 * nonfinite (optional, 1 when o holds NaN/inf); expected out_fp8 u1
 * [G, T, hpg * 512] and out_scales f4 [G, 4 hpg, Tp] or i4 [G, hpg, Tp]
 * (vLLM's buffers in memory order, padding columns included). */
#include "golden.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 when block b (128 dims) of head (t, h) holds a NaN or inf input. */
static int block_nonfinite(const uint16_t *o, int64_t h_count, int64_t t, int64_t h, int b) {
  const uint16_t *v = o + (t * h_count + h) * 512 + 128 * b;
  for (int d = 0; d < 128; d++)
    if ((v[d] & 0x7F80) == 0x7F80) return 1;
  return 0;
}

static int read_back(gcase *c, cl_mem m, size_t n, void **out) {
  *out = malloc(n ? n : 1);
  if (!*out) return golden_fail(c, "out of memory");
  cl_int e = clEnqueueReadBuffer(dsa_queue_cl(c->q), m, CL_TRUE, 0, n, *out, 0, NULL, NULL);
  if (e != CL_SUCCESS) {
    free(*out);
    *out = NULL;
    return golden_fail(c, "reading an output: OpenCL error %d", (int)e);
  }
  return 0;
}

static int run_inv_rope_fp8_quant(gcase *c) {
  int64_t g = 0, packed = 0, nonfinite = 0;
  if (golden_meta_i64(c, "n_groups", &g) || golden_meta_i64(c, "tma_aligned_scales", &packed))
    return -1;
  if (npy_meta_get(&c->meta, "nonfinite") && golden_meta_i64(c, "nonfinite", &nonfinite)) return -1;
  npy_array *o = golden_load(c, "o", NPY_U2, 3), *pos = golden_load(c, "positions", NPY_I8, 1),
            *cs = golden_load(c, "cos_sin", NPY_F4, 2),
            *wfp8 = golden_load(c, "out_fp8", NPY_U1, 3),
            *wsc = golden_load(c, "out_scales", packed ? NPY_I4 : NPY_F4, 3);
  if (c->failed) return -1;
  const int64_t t = o->shape[0], h = o->shape[1];
  if (g < 1 || h % g || wfp8->shape[0] != g || wfp8->shape[1] != t ||
      wfp8->shape[2] != h / g * 512 || wsc->shape[0] != g)
    return golden_fail(c, "inconsistent shapes (T=%lld H=%lld G=%lld)", (long long)t,
                       (long long)h, (long long)g);
  cl_mem om = golden_to_device(c, o->data, o->nbytes),
         pm = golden_to_device(c, pos->data, pos->nbytes),
         csm = golden_to_device(c, cs->data, cs->nbytes),
         /* Non-zero fills: every byte must be written (padding scales as 0). */
      fm = golden_filled(c, wfp8->nbytes, 0xA5), sm = golden_filled(c, wsc->nbytes, 0x5A);
  if (c->failed) return -1;
  dsa_tensor ot = golden_tensor_of(om, o, DSA_BF16), pt = golden_tensor_of(pm, pos, DSA_I64),
             cst = golden_tensor_of(csm, cs, DSA_F32), ft = golden_tensor_of(fm, wfp8, DSA_E4M3),
             st = golden_tensor_of(sm, wsc, packed ? DSA_I32 : DSA_F32);
  if (golden_op_status(c, "dsa_output_inv_rope_fp8_quant",
                       dsa_output_inv_rope_fp8_quant(c->q, &ot, &pt, &cst, &ft, &st, NULL)) ||
      golden_no_faults(c))
    return -1;
  if (!nonfinite)
    return golden_compare(c, "out_fp8", fm, wfp8) || golden_compare(c, "out_scales", sm, wsc)
               ? -1
               : 0;

  /* NaN/inf inputs are outside vLLM's contract: blocks holding one are
   * compared for information only (a note), every other block must match. */
  uint8_t *got = NULL;
  uint32_t *gsc = NULL;
  if (read_back(c, fm, wfp8->nbytes, (void **)&got) ||
      read_back(c, sm, wsc->nbytes, (void **)&gsc)) {
    free(got);
    return -1;
  }
  const uint8_t *want = wfp8->data;
  const uint32_t *wantsc = wsc->data;
  const int64_t hpg = h / g, tp = wsc->shape[2], kk = wsc->shape[1];
  size_t bad = 0, noted = 0;
  char first[160] = "";
  for (int64_t ti = 0; ti < t; ti++)
    for (int64_t hh = 0; hh < h; hh++)
      for (int b = 0; b < 4; b++) {
        const int64_t gi = hh / hpg, hi = hh % hpg;
        const size_t base = (size_t)((gi * t + ti) * hpg * 512 + hi * 512 + 128 * b);
        const int64_t k = packed ? hi : 4 * hi + b;
        const size_t si = (size_t)((gi * kk + k) * tp + ti);
        int differs = memcmp(got + base, want + base, 128) != 0;
        if (packed) {
          const uint32_t m = 0xFFu << (8 * b);
          differs |= (gsc[si] & m) != (wantsc[si] & m);
        } else {
          differs |= gsc[si] != wantsc[si];
        }
        if (!differs) continue;
        if (block_nonfinite(o->data, h, ti, hh, b)) {
          noted++;
        } else if (!bad++) {
          snprintf(first, sizeof first, "token %lld head %lld block %d", (long long)ti,
                   (long long)hh, b);
        }
      }
  /* The padding columns too. */
  for (int64_t gi = 0; gi < g; gi++)
    for (int64_t k = 0; k < kk; k++)
      for (int64_t ti = t; ti < tp; ti++)
        if (gsc[(gi * kk + k) * tp + ti] != 0 && !bad++)
          snprintf(first, sizeof first, "padding scale g %lld k %lld t %lld", (long long)gi,
                   (long long)k, (long long)ti);
  free(got);
  free(gsc);
  if (noted)
    fprintf(stderr, "note: inv_rope_fp8_quant: %zu blocks with NaN/inf inputs differ from vLLM "
                    "(outside its contract)\n", noted);
  return bad ? golden_fail(c, "%zu finite blocks differ, first: %s", bad, first) : 0;
}

const golden_op golden_ops_output_quant[] = {
    {"inv_rope_fp8_quant", run_inv_rope_fp8_quant},
    {NULL, NULL},
};
