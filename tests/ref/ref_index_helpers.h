/* Host C reference for the index-building helpers (SPEC-reference §10.1-10.5
 * and the library's decisions documented in include/dsacl/index_helpers.h).
 * Plain C11. Matrices are row-major with explicit row strides in elements;
 * every function returns the fault bits (REF_FAULT_* of ref.h) it records. */
#ifndef DSACL_TESTS_REF_INDEX_HELPERS_H
#define DSACL_TESTS_REF_INDEX_HELPERS_H

#include <stdint.h>

#include "ref.h"

/* A block table [rows, width] with row stride rs. */
typedef struct ref_table {
  const int32_t *d;
  int64_t rows, width, rs;
} ref_table;

unsigned ref_compressed_slot_mapping(const int32_t *qsl, const int32_t *seq_lens, ref_table bt,
                                     int32_t ratio, int32_t bs, int64_t *out, int64_t t);

unsigned ref_swa_indices(const int64_t *pos, const int32_t *t2r, const uint8_t *valid,
                         ref_table bt, int32_t window, int32_t bs, int32_t *out, int64_t width,
                         int64_t out_rs, int32_t *lens, int64_t t);

unsigned ref_global_topk(const int32_t *topk, int64_t k, int64_t topk_rs, const int32_t *t2r,
                         ref_table bt, const uint8_t *valid, int32_t bs, int32_t *out,
                         int64_t out_rs, int32_t *lens, int64_t t);

/* bt.d == NULL: the local form. */
unsigned ref_c128_topk(const int64_t *pos, const int32_t *t2r, ref_table bt,
                       const uint8_t *valid, int32_t ratio, int32_t bs, int32_t *out, int64_t k,
                       int64_t out_rs, int32_t *lens, int64_t t);

unsigned ref_combine_topk_swa(const int32_t *topk, int64_t topk_rs, const int32_t *qsl,
                              const int32_t *seq_lens, const int32_t *gather_lens, int64_t r,
                              int32_t window, int32_t ratio, int32_t topk_n, int64_t m,
                              int64_t n, int32_t *out, int64_t width, int64_t out_rs,
                              int32_t *lens, int64_t t);

typedef struct ref_mixed {
  const int32_t *dswa; int64_t dswa_rs;          /* [td, window] */
  const int32_t *dci; int64_t kd, dci_rs;        /* [td, kd] or NULL */
  const int32_t *dlens;                          /* [td] or NULL */
  const uint8_t *dvalid;                         /* [td] or NULL */
  const int32_t *pti; int64_t kp, pti_rs;        /* [tp, kp] */
  const int32_t *qsl, *seq_lens; int64_t r;
  const int32_t *t2r;
  ref_table sbt, cbt;
  int64_t td, tp;
  int32_t window, ratio, topk, sbs, cbs, local;
} ref_mixed;
unsigned ref_mixed_sparse(const ref_mixed *m, int32_t *out, int64_t width, int64_t out_rs,
                          int32_t *lens);

#endif
