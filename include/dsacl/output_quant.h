/*
 * dsacl — inverse RoPE + block-scaled FP8 quantization of the attention
 * output for the grouped O projection (SPEC-reference §8.6; vLLM
 * fused_inv_rope_fp8_quant, semantics note docs/OUTPUT_QUANT.md).
 * Included by dsacl.h; relies on its types.
 *
 * Heads are split into G groups of hpg = H / G consecutive heads (the wo_a
 * groups: head h is head h % hpg of group h / hpg). Per token t < T and head
 * h, with x = fp32(o[t, h, :]) (512 values) and p = positions[t]:
 *  - inverse RoPE on dims [448, 512) (GPT-J pairs (448+2i, 449+2i), cos =
 *    cos_sin[p, i], sin = cos_sin[p, 32 + i], fp32), in this spelling:
 *      e' = fma(e, c, fl(o * s)),   o' = fma(o, c, -fl(e * s))
 *    (no bf16 rounding afterwards);
 *  - four 128-value quantization blocks b = 0..3 (dims [128b, 128b + 128);
 *    block 3 holds NoPE dims 384..447 and the rotated dims 448..511):
 *      amax  = max |x| over the block, NaN ignored, then max(amax, fl32(1e-10))
 *      r     = fl32(amax * fl32(1/448))                 (0x3B124925)
 *      e     = ceil(RN32(log2 r))  (log2 modelled as correctly rounded: for r
 *              a few ulps above a power of two 2^k this is k, not k + 1; the
 *              clamp below then saturates the block's largest value)
 *      scale = 2^e (fp32; +inf when amax is +inf)
 *      byte  = e4m3(clamp(x / scale, -448, 448)): RNE on the e4m3 grid,
 *              sign of zero kept;
 *    written to out[g, t, 512 * (h % hpg) + d];
 *  - the block scales: f32 scales[g, 4 * (h % hpg) + b, t] = scale, or, when
 *    scales is i32 (DeepGEMM's packed UE8M0, vLLM tma_aligned_scales=True),
 *    scales[g, h % hpg, t] = sum over b of ((bits(scale) >> 23) & 0xFF) << 8b;
 *  - tokens T <= t < Tp (scales' last extent, vLLM's TMA padding of T to a
 *    multiple of 4): their scale entries are written 0; out has no such rows.
 *  - p < 0 or p >= cos_sin's shape[0]: DSA_FAULT_POSITION_RANGE; the token's
 *    heads are quantized without rotation (vLLM reads outside its table).
 * Non-finite inputs (outside vLLM's contract; this library's choice, which
 * is what the sm_90 code path gives as far as read, see the note): a NaN
 * value quantizes to 0x7E (+448: Triton's symmetric clamp becomes
 * min.xorsign.abs, which drops the NaN); an inf makes its block's scale +inf
 * (byte 0xFF when packed), its finite values +-0 and its inf/NaN values 0x7E.
 * Subnormal inputs assume a device with fp32 denormals (else the sign of a
 * zero code may differ).
 *
 * Tensors: o bf16 [T, H, 512] (strides free, unit inner; vLLM passes a
 * head slice of a padded buffer), positions i64 or i32 [T], cos_sin f32 or
 * bf16 [P, 64]
 * (row stride free, unit inner), out e4m3 [G, T, hpg * 512] (strides free,
 * unit inner; vLLM's o_fp8 is out.transpose(0, 1), dense [G, T, D] memory),
 * scales f32 [G, hpg * 4, Tp] or i32 [G, hpg, Tp] with Tp >= T (strides free;
 * vLLM's o_scale is scales.permute(2, 0, 1)[:T] with Tp = round_up(T, 4) and
 * the token axis contiguous). G >= 1 divides H; Tp * H < 2^31. Outputs must
 * not overlap each other or the inputs. T = 0 writes only the padding scales.
 */
#ifndef DSACL_OUTPUT_QUANT_H
#define DSACL_OUTPUT_QUANT_H

/* dsacl.h includes this file at its end; including it first works too. */
#include "dsacl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* No field yet: room to grow within 1.x (a field's zero keeps today's
 * behaviour). Non-zero reserved bytes: DSA_ERR_INVALID_ARGUMENT. */
typedef struct dsa_output_inv_rope_fp8_quant_params {
  unsigned char reserved[32];
} dsa_output_inv_rope_fp8_quant_params;

/* reserved zeroed. */
DSA_API void dsa_output_inv_rope_fp8_quant_params_default(
    dsa_output_inv_rope_fp8_quant_params *p);

/* p may be NULL (defaults). */
DSA_API dsa_status dsa_output_inv_rope_fp8_quant(dsa_queue *queue, const dsa_tensor *o,
                                                 const dsa_tensor *positions,
                                                 const dsa_tensor *cos_sin,
                                                 const dsa_tensor *out,
                                                 const dsa_tensor *scales,
                                                 const dsa_output_inv_rope_fp8_quant_params *p,
                                                 const dsa_events *ev);

#ifdef __cplusplus
}
#endif
#endif /* DSACL_OUTPUT_QUANT_H */
