/* Host C reference for the DeepSeek-V4 KV compressor (docs/COMPRESSOR.md,
 * SPEC-reference §8.5 / §5.2 / §5.3): state saving and the fused
 * compress -> RMSNorm -> RoPE -> quantize -> insert. Written from
 * docs/COMPRESSOR.md, never from the kernels; the quantizers are the
 * existing references (ref_mla_quantize, ref_indexer_k_insert). */
#ifndef DSACL_TESTS_REF_COMPRESSOR_H
#define DSACL_TESTS_REF_COMPRESSOR_H

#include <stdint.h>

#include "ref.h"

/* Cache formats, the values of dsa_cache_format. */
enum { REF_CACHE_MLA_FP8 = 1, REF_CACHE_INDEXER_FP8 = 2, REF_CACHE_INDEXER_MXFP4 = 3 };

/* docs/COMPRESSOR.md "EXP2": dsacl's exp2 for t <= 0 (7th-order Taylor in
 * fma Horner form around rint(t)). */
float ref_cmp_exp2(float t);

/* The fp32 state cache [nb, bs, row] with strides s0, s1 in floats. */
typedef struct ref_state {
  float *base;
  int64_t nb;
  int32_t bs;
  int64_t s0, s1;
} ref_state;

/* kv, score [T, W] (row strides in floats), ape [ratio, W]. Returns faults. */
unsigned ref_compressor_save_states(ref_state *st, const float *kv, int64_t kv_rs,
                                    const float *score, int64_t sc_rs, const float *ape,
                                    int64_t ape_rs, const int64_t *pos, const int64_t *slots,
                                    int64_t T, int ratio, int64_t W);

typedef struct ref_compress_args {
  const ref_state *st;
  const int32_t *bt; int64_t R, Wb, bt_s0, bt_s1; /* block table, strides in elements */
  const int32_t *tok_req;
  const int64_t *pos, *slots, *cslots;
  int64_t T;
  const float *weight;                /* hd values, already widened */
  const float *cs; int64_t cs_rs, n_pos;
  float eps;
  int ratio;
  int format;                         /* REF_CACHE_* */
  uint8_t *cache; int64_t c_nb; int32_t c_bs; int64_t c_bstride;
  /* Optional: the fp32 compressed vector c[hd] of every written token (T x hd). */
  float *c_out;
} ref_compress_args;

unsigned ref_compressor_compress_insert(const ref_compress_args *a);

#endif
