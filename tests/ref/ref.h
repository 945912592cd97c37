/* Host C reference for the operators, written from SPEC.md / SPEC-reference.md
 * and never from the kernels. Plain C11, no OpenCL: the tests compare the
 * library's output against these functions byte for byte. */
#ifndef DSACL_TESTS_REF_H
#define DSACL_TESTS_REF_H

#include <stddef.h>
#include <stdint.h>

/* Same values as dsa_fault_bits in dsacl.h (kept separate: no OpenCL here). */
enum {
  REF_FAULT_SLOT_RANGE = 1u << 0,
  REF_FAULT_POSITION_RANGE = 1u << 1,
  REF_FAULT_INDEX_RANGE = 1u << 2,
  REF_FAULT_LENGTH_RANGE = 1u << 3
};

/* ---- numerics (§2.1–2.3) ------------------------------------------------ */

uint16_t ref_bf16_from_float(float x); /* RNE; NaN stays a (quiet) NaN */
float ref_bf16_to_float(uint16_t h);   /* exact */
/* e4m3fn encoder: RNE on the e4m3 grid (subnormals included), |x| > 448 and
 * ±inf saturate to ±448, every NaN -> 0x7F, -0 -> 0x80. */
uint8_t ref_e4m3_encode(double x);
double ref_e4m3_decode(uint8_t b); /* NaN codes 0x7F / 0xFF -> NaN */
/* Smallest e with qmax * 2^e >= amax (= exact ceil(log2(amax / qmax))) for a
 * finite amax > 0. */
int ref_ue8m0_exponent(double amax, double qmax);

/* ---- MLA fp8_ds_mla cache (§3.1, §8.1–8.3) ------------------------------ */

#define REF_MLA_DIM 512
#define REF_MLA_NOPE 448
#define REF_MLA_DATA_BYTES 576
#define REF_MLA_SCALE_BYTES 8
#define REF_MLA_TOKEN_BYTES 584
#define REF_MLA_AMAX_FLOOR 1.0013580322265625e-4 /* bf16(1e-4) */

/* The cache as the reference sees it: a host image whose byte 0 is block 0. */
typedef struct ref_mla_cache {
  uint8_t *base;
  int64_t num_blocks;
  int32_t block_size;
  int64_t block_stride; /* bytes */
} ref_mla_cache;

/* One token's 584 logical bytes: data [0, 576) then the 8 scale bytes. */
void ref_mla_quantize(const uint16_t *k, uint8_t out[REF_MLA_TOKEN_BYTES]);
/* Byte offsets (from block 0) of a slot's 576 data and 8 scale bytes. */
uint64_t ref_mla_data_offset(const ref_mla_cache *c, int64_t slot);
uint64_t ref_mla_scale_offset(const ref_mla_cache *c, int64_t slot);
/* Dequantizes one in-range slot into 512 bf16. */
void ref_mla_dequant(const ref_mla_cache *c, int64_t slot, uint16_t *out);

/* All return the fault bits the operation records. k rows are k_row_stride
 * elements apart; out rows out_row_stride elements apart. */
unsigned ref_mla_insert(ref_mla_cache *c, const uint16_t *k, int64_t k_row_stride,
                        const int64_t *slots, int64_t n);
unsigned ref_mla_gather_slots(const ref_mla_cache *c, const int32_t *indices, int64_t s,
                              uint16_t *out, int64_t out_row_stride);
/* out is [r, max_t, 512] with strides (in elements) out_s0, out_s1 (inner 1);
 * block_table is [r, w] with row stride bt_s0. gather_lens may be NULL. */
unsigned ref_mla_gather_paged(const ref_mla_cache *c, const int32_t *seq_lens,
                              const int32_t *gather_lens, const int32_t *block_table,
                              int64_t r, int64_t w, int64_t bt_s0, int64_t offset,
                              uint16_t *out, int64_t max_t, int64_t out_s0, int64_t out_s1);

#endif
