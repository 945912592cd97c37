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

/* The shared case (tools/cases/output_quant.c) over the golden's arrays. */
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
  if (g < 1 || h % g || o->shape[2] != 512 || pos->shape[0] != t || cs->shape[1] != 64 ||
      wfp8->shape[0] != g || wfp8->shape[1] != t || wfp8->shape[2] != h / g * 512 ||
      wsc->shape[0] != g || wsc->shape[1] != (packed ? h / g : 4 * (h / g)) || wsc->shape[2] < t)
    return golden_fail(c, "inconsistent shapes (T=%lld H=%lld G=%lld)", (long long)t,
                       (long long)h, (long long)g);
  case_oq oc = {.packed = packed != 0, .t = t, .h = h, .g = g, .tp = wsc->shape[2],
                .np = cs->shape[0], .o = o->data, .pos = pos->data, .cs = cs->data};
  /* NaN/inf inputs are outside vLLM's contract: blocks holding one are
   * compared for information only (a note), every other block must match. */
  size_t noted = 0;
  const case_oq_want want = {wfp8->data, wsc->data, nonfinite != 0, &noted};
  /* A non-zero fill: every byte must be written (padding scales as 0). */
  const int rc = golden_run_case(c, &case_oq_ops, &oc, 0xA5, &want);
  if (!rc && noted)
    fprintf(stderr, "note: inv_rope_fp8_quant: %zu blocks with NaN/inf inputs differ from vLLM "
                    "(outside its contract)\n", noted);
  return rc;
}

const golden_op golden_ops_output_quant[] = {
    {"inv_rope_fp8_quant", run_inv_rope_fp8_quant},
    {NULL, NULL},
};
