/* MLA fp8_ds_mla cache reference: §3.1 layout, §8.1 quantize + insert,
 * §8.2 / §8.3 dequant-gather, with the library's decisions from dsacl.h
 * (slot < 0 skipped, slot >= capacity skipped with a fault; dequant scale byte
 * 0 -> 0.0, 255 -> +inf, NaN results -> 0x7FC0). */
#include "ref.h"

#include <math.h>
#include <string.h>

void ref_mla_quantize(const uint16_t *k, uint8_t out[REF_MLA_TOKEN_BYTES]) {
  uint8_t *scales = out + REF_MLA_DATA_BYTES;
  for (int q = 0; q < 7; q++) {
    double amax = 0.0;
    for (int d = 64 * q; d < 64 * q + 64; d++) {
      double a = fabs((double)ref_bf16_to_float(k[d]));
      if (a > amax) amax = a; /* NaN compares false: ignored */
    }
    if (amax < REF_MLA_AMAX_FLOOR) amax = REF_MLA_AMAX_FLOOR;
    /* An infinite amax has no finite ceil(log2); the byte clamps to 255.
     * Inputs with infinities are outside what the tests compare. */
    int e = isinf(amax) ? 128 : ref_ue8m0_exponent(amax, 448.0);
    for (int d = 64 * q; d < 64 * q + 64; d++)
      out[d] = ref_e4m3_encode(ldexp((double)ref_bf16_to_float(k[d]), -e));
    int byte = e + 127;
    scales[q] = (uint8_t)(byte < 0 ? 0 : byte > 255 ? 255 : byte);
  }
  scales[7] = 0;
  for (int i = 0; i < 64; i++) {
    out[REF_MLA_NOPE + 2 * i] = (uint8_t)(k[REF_MLA_NOPE + i] & 0xFF);
    out[REF_MLA_NOPE + 2 * i + 1] = (uint8_t)(k[REF_MLA_NOPE + i] >> 8);
  }
}

uint64_t ref_mla_data_offset(const ref_mla_cache *c, int64_t slot) {
  uint64_t blk = (uint64_t)(slot / c->block_size), t = (uint64_t)(slot % c->block_size);
  return blk * (uint64_t)c->block_stride + t * REF_MLA_DATA_BYTES;
}

uint64_t ref_mla_scale_offset(const ref_mla_cache *c, int64_t slot) {
  uint64_t blk = (uint64_t)(slot / c->block_size), t = (uint64_t)(slot % c->block_size);
  return blk * (uint64_t)c->block_stride + (uint64_t)c->block_size * REF_MLA_DATA_BYTES +
         t * REF_MLA_SCALE_BYTES;
}

static int64_t capacity(const ref_mla_cache *c) { return c->num_blocks * c->block_size; }

void ref_mla_dequant(const ref_mla_cache *c, int64_t slot, uint16_t *out) {
  const uint8_t *data = c->base + ref_mla_data_offset(c, slot);
  const uint8_t *scales = c->base + ref_mla_scale_offset(c, slot);
  for (int d = 0; d < REF_MLA_NOPE; d++) {
    uint8_t u = scales[d / 64];
    double scale = u == 0 ? 0.0 : u == 255 ? INFINITY : ldexp(1.0, u - 127);
    /* The product has <= 4 significant bits: exact in double, and its
     * conversion to float is exact too unless it overflows to inf. */
    float v = (float)(ref_e4m3_decode(data[d]) * scale);
    out[d] = isnan(v) ? 0x7FC0 : ref_bf16_from_float(v);
  }
  for (int i = 0; i < 64; i++)
    out[REF_MLA_NOPE + i] =
        (uint16_t)(data[REF_MLA_NOPE + 2 * i] | data[REF_MLA_NOPE + 2 * i + 1] << 8);
}

unsigned ref_mla_insert(ref_mla_cache *c, const uint16_t *k, int64_t k_row_stride,
                        const int64_t *slots, int64_t n) {
  unsigned faults = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t s = slots[i];
    if (s < 0) continue;
    if (s >= capacity(c)) {
      faults |= REF_FAULT_SLOT_RANGE;
      continue;
    }
    uint8_t tok[REF_MLA_TOKEN_BYTES];
    ref_mla_quantize(k + i * k_row_stride, tok);
    memcpy(c->base + ref_mla_data_offset(c, s), tok, REF_MLA_DATA_BYTES);
    memcpy(c->base + ref_mla_scale_offset(c, s), tok + REF_MLA_DATA_BYTES,
           REF_MLA_SCALE_BYTES);
  }
  return faults;
}

unsigned ref_mla_gather_slots(const ref_mla_cache *c, const int32_t *indices, int64_t s,
                              uint16_t *out, int64_t out_row_stride) {
  unsigned faults = 0;
  for (int64_t i = 0; i < s; i++) {
    uint16_t *row = out + i * out_row_stride;
    int64_t slot = indices[i];
    if (slot >= capacity(c)) faults |= REF_FAULT_SLOT_RANGE;
    if (slot < 0 || slot >= capacity(c))
      memset(row, 0, REF_MLA_DIM * sizeof *row);
    else
      ref_mla_dequant(c, slot, row);
  }
  return faults;
}

/* Following the dsa_mla_gather_paged comment. Inconsistent lengths of a
 * request (seq_len < 0, g < 0, g > seq_len) leave all its rows unwritten;
 * otherwise each row on its own: a destination past max_t or a block index
 * past the table's width writes nothing, a block id outside the cache writes
 * zeros; each sets a fault bit. A negative block id is "none": zeros, no
 * fault. */
unsigned ref_mla_gather_paged(const ref_mla_cache *c, const int32_t *seq_lens,
                              const int32_t *gather_lens, const int32_t *block_table,
                              int64_t r, int64_t w, int64_t bt_s0, int64_t offset,
                              uint16_t *out, int64_t max_t, int64_t out_s0, int64_t out_s1) {
  unsigned faults = 0;
  for (int64_t req = 0; req < r; req++) {
    int64_t seq = seq_lens[req], g = gather_lens ? gather_lens[req] : seq;
    if (seq < 0 || g < 0 || g > seq) {
      faults |= REF_FAULT_LENGTH_RANGE;
      continue;
    }
    if (offset + g > max_t) faults |= REF_FAULT_LENGTH_RANGE;
    int64_t start = seq - g;
    for (int64_t i = 0; i < g; i++) {
      int64_t pos = start + i, dst = offset + i;
      if (dst >= max_t) continue;
      int64_t bi = pos / c->block_size;
      if (bi >= w) {
        faults |= REF_FAULT_INDEX_RANGE;
        continue;
      }
      int64_t blk = block_table[req * bt_s0 + bi];
      uint16_t *row = out + req * out_s0 + dst * out_s1;
      if (blk >= c->num_blocks) faults |= REF_FAULT_SLOT_RANGE;
      if (blk < 0 || blk >= c->num_blocks)
        memset(row, 0, REF_MLA_DIM * sizeof *row);
      else
        ref_mla_dequant(c, blk * c->block_size + pos % c->block_size, row);
    }
  }
  return faults;
}
