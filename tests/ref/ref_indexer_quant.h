/* Host C reference for the indexer quantization family (SPEC-reference
 * §2.4-2.6, §3.2-3.3, §4, §5.1, §6.5), written from the SPEC: double
 * arithmetic for exact quantities, C float arithmetic where the SPEC names an
 * fp32 rounding point, table searches instead of bit tricks. */
#ifndef DSACL_TESTS_REF_INDEXER_QUANT_H
#define DSACL_TESTS_REF_INDEXER_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "ref.h"

enum { REF_E2M1_RNE = 0, REF_E2M1_LEGACY = 1 };

/* ---- E2M1 / MXFP4 (§2.4, §2.5) ------------------------------------------- */

/* Nibble of y (already divided by the block scale). */
uint8_t ref_e2m1_encode(double y, int mode);
double ref_e2m1_decode(uint8_t nibble); /* low nibble; 0x8 -> -0.0 */
/* Block exponent e (scale 2^e, byte e + 127) of a block whose amax is given
 * (NaN elements excluded by the caller). */
int ref_mxfp4_exponent(float amax, int mode);
/* Quantizes 32 values: 16 packed bytes (even element low), returns the byte. */
uint8_t ref_mxfp4_block(const float *x, int mode, uint8_t packed[16]);

/* GPT-J pair rotation (§2.6, NVIDIA spelling), results rounded through bf16. */
void ref_rope_pair(float e, float o, float c, float s, uint16_t *re, uint16_t *ro);

/* ---- indexer Q (§4) ------------------------------------------------------- */

typedef struct ref_indexer_q_args {
  int64_t T, H, D, R, P;
  const void *positions; int pos_i32; int64_t pos_stride;   /* elements */
  const uint16_t *q; int64_t q_st, q_sh;                    /* bf16, elements */
  const void *cos_sin; int cs_bf16; int64_t cs_rs;          /* elements */
  const void *w; int w_bf16; int64_t w_st, w_sh;            /* elements */
  float softmax_scale, head_scale;
  int mxfp4, mode;
  uint8_t *out_q; int64_t oq_st, oq_sh;                     /* bytes */
  uint8_t *out_s; int64_t os_st, os_sh;                     /* bytes (MXFP4) */
  float *out_w; int64_t ow_st, ow_sh;                       /* elements */
} ref_indexer_q_args;

/* Returns the fault bits (REF_FAULT_POSITION_RANGE). */
unsigned ref_indexer_q(const ref_indexer_q_args *a);

/* ---- indexer K cache (§3.2, §3.3, §5.1, §6.5) ------------------------------ */

typedef struct ref_idx_cache {
  uint8_t *base; /* block 0 */
  int64_t num_blocks;
  int32_t block_size;
  int64_t block_stride; /* bytes */
  int mxfp4;
} ref_idx_cache;

/* k rows of 128 bf16, k_rs elements apart. */
unsigned ref_indexer_k_insert(ref_idx_cache *c, const uint16_t *k, int64_t k_rs,
                              const int64_t *slots, int64_t n, int mode);
/* k_out rows k_rs bytes apart (128 or 64 bytes each); scales at
 * k_scale + i * ks_rs (bytes): 4 bytes per row (f32 or 4 ue8m0). */
unsigned ref_indexer_k_gather(const ref_idx_cache *c, const int32_t *bt, int64_t R, int64_t W,
                              int64_t bt_s0, int64_t bt_s1, const int32_t *cu, int64_t cu_s,
                              int64_t total, uint8_t *k_out, int64_t k_rs, uint8_t *k_scale,
                              int64_t ks_rs);

#endif
