/*
 * dsacl — the RMSNorms of DeepSeek-V4's MTP (multi-token prediction) draft
 * layer: vLLM's fused_mtp_input_rmsnorm (enorm on the token embedding, its
 * row zeroed where positions[t] == 0, and hnorm on the target's
 * pre-hc_head residual, hc_mult rows per token) and mtp_shared_head_rmsnorm
 * (SharedHead.norm before the LM head). docs/MTP_NORM.md says what was read
 * in vLLM. Included by dsacl.h; relies on its types.
 *
 * Every row x of H bf16 values with weight w (H values, bf16 or f32) gives
 *   sq_d  = fl32(x_d * x_d);
 *   ss    = the sum of sq_d in fp32 in this fixed order (the order of
 *           Triton's tl.sum for one program of 4 warps): V = the largest
 *           power of two dividing H, at most 8; element d belongs to lane
 *           (d / V) mod 128; each lane adds its elements in increasing d
 *           onto +0; the 128 lane sums s[i] are then combined as
 *           s[i] += s[i ^ m] for m = 16, 8, 4, 2, 1, 64, 32 (the total is
 *           s[0]: within each group of 32 lanes first, then
 *           (g0 + g2) + (g1 + g3) over the four groups);
 *   mean  = ss / H, correctly rounded to fp32;
 *   r     = 1 / sqrt(fl32(mean + eps)), correctly rounded to fp32;
 *   y_d   = bf16_rne(fl32(fl32(x_d * r) * w_d))   (NaN -> 0x7FC0).
 * No residual add, no fma anywhere. fp32 denormals are kept (a device that
 * flushes them may differ on rows whose squares or products are subnormal).
 *
 * vLLM's Triton kernel divides with div.full.f32 (<= 2 ulp) and takes
 * rsqrt.approx.ftz.f32, so its outputs differ from these in rare values by
 * 1 bf16 ulp (as dsa_mla_qnorm_rope_kv_insert documents); everything else
 * (order of the two multiplications, masking, bf16 rounding) is the same.
 * This library's result is the same on every device.
 *
 * dsa_mtp_input_rmsnorm: for each token t,
 *   enorm_out[t, :]    = the row formula on inputs_embeds[t, :] with
 *                        enorm_weight, where every x_d is taken as +0 when
 *                        positions[t] == 0 (so y_d = fl32(+0 * r) * w_d:
 *                        -0 where w_d < 0, NaN where w_d is NaN or inf);
 *   hnorm_out[t, k, :] = the row formula on previous_hidden[t, k, :] with
 *                        hnorm_weight, for k < HC.
 * positions is only compared with 0 (any other value, negative included,
 * keeps the row): no index is read from memory, so no fault bits.
 *
 * dsa_mtp_shared_head_rmsnorm: out[t, :] = the row formula on x[t, :].
 *
 * Tensors: inputs_embeds / enorm_out bf16 [T, H]; previous_hidden /
 * hnorm_out bf16 [T, HC, H] (HC = vLLM's hc_mult, 4 in DeepSeek-V4; 0 and
 * 1 allowed); x / out bf16 [T, H]; positions i64 or i32 [T], any stride;
 * weights bf16 or f32 [H], unit stride (vLLM's V4 warm-up compiles f32
 * norm weights; a bf16 weight is exact in fp32, so both give the same
 * bytes for the same values). Row strides free, unit inner stride. An
 * output may be its input (the same buffer, offset and strides: in place);
 * it must not overlap it otherwise, nor overlap any other argument. 1 <= H
 * <= 2^24 (H = 7168 for V4 Pro, 4096 for V4 Flash); T * (HC + 1) < 2^31.
 * T = 0: nothing is written (a marker honours the events).
 */
#ifndef DSACL_MTP_NORM_H
#define DSACL_MTP_NORM_H

/* dsacl.h includes this file at its end; including it first works too. */
#include "dsacl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dsa_mtp_params {
  float eps; /* RMSNorm epsilon (vLLM: rms_norm_eps): finite, >= FLT_MIN; default 1e-6 */
  unsigned char reserved[28];
} dsa_mtp_params;

/* eps = 1e-6, reserved zeroed. */
DSA_API void dsa_mtp_params_default(dsa_mtp_params *p);

/* p may be NULL (defaults). */
DSA_API dsa_status dsa_mtp_input_rmsnorm(dsa_queue *queue, const dsa_tensor *inputs_embeds,
                                         const dsa_tensor *positions,
                                         const dsa_tensor *previous_hidden,
                                         const dsa_tensor *enorm_weight,
                                         const dsa_tensor *hnorm_weight,
                                         const dsa_tensor *enorm_out,
                                         const dsa_tensor *hnorm_out,
                                         const dsa_mtp_params *p, const dsa_events *ev);

DSA_API dsa_status dsa_mtp_shared_head_rmsnorm(dsa_queue *queue, const dsa_tensor *x,
                                               const dsa_tensor *weight, const dsa_tensor *out,
                                               const dsa_mtp_params *p,
                                               const dsa_events *ev);

#ifdef __cplusplus
}
#endif
#endif /* DSACL_MTP_NORM_H */
