/* fp64 reference for the indexer MQA logits (SPEC-reference §6.1–6.4),
 * written from the SPEC, never from the kernels. Plain C11, no OpenCL.
 * Inputs are dense row-major host arrays. */
#ifndef DSACL_TESTS_REF_INDEXER_LOGITS_H
#define DSACL_TESTS_REF_INDEXER_LOGITS_H

#include <stdint.h>

#include "ref.h"

/* e4m3 value as the logits kernels read it: exact, with the NaN codes
 * 0x7F / 0xFF as +480 / -480 (vLLM's decode table, §2.2). */
double ref_il_e4m3(uint8_t b);
/* e2m1 nibble (low 4 bits): {0, .5, 1, 1.5, 2, 3, 4, 6}, bit 3 = sign. */
double ref_il_e2m1(unsigned nibble);
/* ue8m0 byte: 2^(u-127); u = 0 gives 0 and u = 255 gives +inf (vLLM's
 * exp2 with flush to zero). */
double ref_il_ue8m0(uint8_t u);
/* Element e of an MXFP4 row: packed [D/2] bytes (even element in the low
 * nibble), scales [D/32]. */
double ref_il_mxfp4(const uint8_t *packed, const uint8_t *scales, int64_t e);

/* Output convention of the reference: out[r * cols + c] is the logit, or
 * -INFINITY where the kernel must write -inf, or NAN where it must not write
 * (outside the range with clean = 0). Functions return the fault bits. */

/* Ragged prefill. FP8 (fp4 = 0): q [M,H,D] e4m3, k [N,D] e4m3, k_scale f32 [N]
 * (q_scale unused). MXFP4: q [M,H,D/2], q_scale [M,H,D/32], k [N,D/2],
 * k_scale bytes [N,D/32]. w [M,H], ks/ke [M]. out [M,N]. */
unsigned ref_mqa_logits(int fp4, int64_t m, int64_t h, int64_t d, int64_t n, const uint8_t *q,
                        const uint8_t *q_scale, const uint8_t *k, const void *k_scale,
                        const float *w, const int32_t *ks, const int32_t *ke, int clean,
                        double *out);

/* A paged indexer cache image (byte 0 = block 0), §3.2 (FP8) or §3.3 (MXFP4). */
typedef struct ref_il_cache {
  const uint8_t *base;
  int64_t num_blocks;
  int32_t block_size;
  int64_t block_stride; /* bytes */
} ref_il_cache;

/* Paged decode, D = 128. q [B,next_n,H,128] e4m3, or [B,next_n,H,64] packed +
 * q_scale [B,next_n,H,4]. w [B*next_n,H]. ctx [B] (ctx_rank 1) or [B,next_n]
 * (ctx_rank 2). bt [B,W]. out [B*next_n, mml]. */
unsigned ref_paged_mqa_logits(int fp4, int64_t b, int64_t next_n, int64_t h, const uint8_t *q,
                              const uint8_t *q_scale, const ref_il_cache *c, const float *w,
                              const int32_t *ctx, int ctx_rank, const int32_t *bt, int64_t wdt,
                              int64_t mml, int clean, double *out);

#endif
