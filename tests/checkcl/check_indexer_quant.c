/* Indexer quantization: Q RoPE + FP8/MXFP4 quant, K insert into the paged
 * indexer cache, K gather. Byte-exact against tests/ref (as
 * tests/test_indexer_q.c / test_indexer_k.c): every output byte (rows the
 * call must not write included) and the fault word. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "checkcl.h"
#include "ref_indexer_quant.h"

/* ---- Q: the case is tools/cases/indexer_quant.c's ---------------------------------- */

static case_q_quant *qq_make(cc_env *e, int64_t T, int64_t H, int64_t D, int64_t R, int64_t P,
                             int mx, int mode, int bad) {
  case_q_quant *s = cc_xmalloc(sizeof *s);
  *s = (case_q_quant){.mx = mx, .bad = bad, .e2m1 = mode ? DSA_E2M1_LEGACY : DSA_E2M1_RNE,
                      .t = T, .h = H, .d = D, .r = R, .np = P};
  cc_upload(e, &case_q_quant_ops, s, case_q_quant_gen_check(s, &e->rng), 0);
  return s;
}

static int q_case(cc_env *e, int64_t T, int64_t H, int64_t D, int64_t R, int64_t P, int mx,
                  int mode, int bad, char *msg, size_t ms) {
  case_q_quant *s = qq_make(e, T, H, D, R, P, mx, mode, bad);
  int rc;
  if (cc_run(e, &case_q_quant_ops, s, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "dsa_indexer_q_quant: %s", dsa_last_error());
  } else {
    const int64_t qd = mx ? D / 2 : D;
    uint8_t *oq = cc_xmalloc((size_t)(T * H * qd)), *os = cc_xmalloc((size_t)(T * H * (D / 32)));
    float *ow = cc_xmalloc((size_t)(T * H) * 4);
    const dsa_indexer_q_quant_params prm = case_q_quant_params(s);
    ref_indexer_q_args a = {T, H, D, R, P, s->pos, 0, 1, s->q, H * D, D, s->cs, 0, R, s->w, 0,
                            H, 1, prm.softmax_scale, prm.head_scale, mx, mode,
                            oq, H * qd, qd, os, H * (D / 32), D / 32, ow, H, 1};
    const unsigned want_f = ref_indexer_q(&a);
    rc = case_q_quant_check(&(case_dev){e->clctx, e->clq}, s, &(case_q_quant_want){oq, os, ow},
                            msg, ms) ||
         case_faults(e->q, want_f, "indexer q quant", msg, ms);
    free(oq), free(os), free(ow);
  }
  cc_case_free(&case_q_quant_ops, s);
  return rc;
}

static int check_q(cc_env *e, char *msg, size_t ms) {
  static const int64_t Hs[] = {1, 8, 64}, Ds[] = {32, 64, 128};
  if (q_case(e, 1, 1, 128, 64, 16, 0, 0, 0, msg, ms) || q_case(e, 5, 64, 128, 64, 99, 1, 0, 1, msg, ms) ||
      q_case(e, 3, 8, 64, 0, 4, 1, 1, 0, msg, ms))
    return 1;
  for (int it = 0; it < (e->quick ? 2 : 10); it++) {
    const int64_t D = Ds[cc_rnd(e, 3)];
    if (q_case(e, 1 + cc_rnd(e, 9), Hs[cc_rnd(e, 3)], D, 2 * cc_rnd(e, D / 2 + 1),
               1 + cc_rnd(e, 50), (int)cc_rnd(e, 2), (int)cc_rnd(e, 2), (int)cc_rnd(e, 2), msg, ms))
      return 1;
  }
  return 0;
}

/* --bench: dsacl-bench's FP8 row at T = 8192 (its second) and its inputs. */
#define Q_ROW(name, mx, t, qt) {mx, t, qt},
static const int64_t q_row[][3] = {CASE_Q_QUANT_ROWS(Q_ROW)};
static int b_q(cc_env *e, int small, void *p) {
  (void)e;
  const int64_t *r = q_row[1];
  case_q_quant *c = p;
  *c = (case_q_quant){.mx = (int)r[0], .t = small ? r[2] : r[1], .h = 64,
                      .np = small ? 4096 : 65536};
  return case_q_quant_gen_bench(c);
}

/* ---- K insert / gather -------------------------------------------------------------- */

/* The insert's case is tools/cases/indexer_quant.c's; the reference runs on
 * a copy of the starting image. */
static int kins_case(cc_env *e, int64_t n, int64_t nb, int32_t bs, int mx, int mode, char *msg,
                     size_t ms) {
  case_k_insert c = {.mx = mx, .e2m1 = mode ? DSA_E2M1_LEGACY : DSA_E2M1_RNE, .n = n, .nb = nb,
                     .bs = bs};
  const case_dev d = {e->clctx, e->clq};
  cc_upload(e, &case_k_insert_ops, &c, case_k_insert_gen_check(&c, &e->rng), 0);
  int rc;
  if (cc_run(e, &case_k_insert_ops, &c, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "dsa_indexer_k_insert: %s", dsa_last_error());
  } else {
    const size_t size = (size_t)(nb * c.stride);
    uint8_t *want = cc_xmalloc(size);
    memcpy(want, c.cache, size);
    ref_idx_cache rc_ = {want, nb, bs, c.stride, mx};
    const unsigned want_f = ref_indexer_k_insert(&rc_, c.k, 128, c.slots, n, mode);
    rc = case_k_insert_check(&d, &c, want, msg, ms) ||
         case_faults(e->q, want_f, "k insert", msg, ms);
    free(want);
  }
  case_k_insert_free(&c);
  return rc;
}

/* --bench: dsacl-bench's N = 8192 row (its second) and its inputs. */
#define K_ROW(n, qn) {n, qn},
static const int64_t k_row[][2] = {CASE_K_INSERT_ROWS(K_ROW)};
static int b_k(cc_env *e, int small, void *p) {
  (void)e;
  case_k_insert *c = p;
  const double pool = small ? CASE_K_POOL_BYTES_QUICK : CASE_K_POOL_BYTES;
  *c = (case_k_insert){.n = k_row[1][small], .nb = (int64_t)ceil(pool / 8640)};
  return case_k_insert_gen_bench(c);
}

static int check_kins(cc_env *e, char *msg, size_t ms) {
  static const int32_t bss[] = {1, 3, 16, 64};
  if (kins_case(e, 1, 1, 1, 0, 0, msg, ms) || kins_case(e, 40, 3, 16, 1, 0, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (kins_case(e, 1 + cc_rnd(e, 80), 1 + cc_rnd(e, 6), bss[cc_rnd(e, 4)], (int)cc_rnd(e, 2),
                  (int)cc_rnd(e, 2), msg, ms))
      return 1;
  return 0;
}

/* The gather's case is tools/cases/indexer_quant.c's; the reference writes
 * into copies of the starting outputs. */
static int kgat_case(cc_env *e, int64_t R, int64_t W, int64_t nb, int32_t bs, int mx, char *msg,
                     size_t ms) {
  case_k_gather c = {.mx = mx, .r = R, .w = W, .nb = nb, .bs = bs};
  const case_dev d = {e->clctx, e->clq};
  cc_upload(e, &case_k_gather_ops, &c, case_k_gather_gen_check(&c, &e->rng), 0);
  int rc;
  if (cc_run(e, &case_k_gather_ops, &c, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "dsa_indexer_k_gather: %s", dsa_last_error());
  } else {
    const int64_t kb = mx ? 64 : 128;
    const size_t ob = (size_t)(c.total * kb), sb = (size_t)c.total * 4;
    uint8_t *want = cc_xmalloc(ob), *wsc = cc_xmalloc(sb);
    memcpy(want, c.out_in, ob), memcpy(wsc, c.sc_in, sb);
    const ref_idx_cache ref = {c.cache, nb, bs, c.stride, mx};
    const unsigned want_f = ref_indexer_k_gather(&ref, c.table, R, W, W, 1, c.cu, 1, c.total,
                                                 want, kb, wsc, 4);
    const case_k_gather_want w = {want, wsc};
    rc = case_k_gather_check(&d, &c, &w, msg, ms) ||
         case_faults(e->q, want_f, "k gather", msg, ms);
    free(want), free(wsc);
  }
  case_k_gather_free(&c);
  return rc;
}

/* --bench: the case's DeepSeek-V4 prefill row. */
#define KG_ROW(r, t, qr, qt) {r, t, qr, qt},
static const int64_t kg_row[][4] = {CASE_K_GATHER_ROWS(KG_ROW)};
static int b_kg(cc_env *e, int small, void *p) {
  (void)e;
  case_k_gather *c = p;
  const double pool = small ? CASE_K_POOL_BYTES_QUICK : CASE_K_POOL_BYTES;
  const int64_t r = kg_row[0][2 * small], t = kg_row[0][1 + 2 * small];
  *c = (case_k_gather){.r = r, .total = r * t, .nb = (int64_t)ceil(pool / 8640)};
  return case_k_gather_gen_bench(c);
}

static int check_kgat(cc_env *e, char *msg, size_t ms) {
  static const int32_t bss[] = {1, 4, 16, 64};
  if (kgat_case(e, 1, 1, 1, 1, 0, msg, ms) || kgat_case(e, 3, 4, 6, 16, 1, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (kgat_case(e, 1 + cc_rnd(e, 4), 1 + cc_rnd(e, 4), 1 + cc_rnd(e, 8), bss[cc_rnd(e, 4)],
                  (int)cc_rnd(e, 2), msg, ms))
      return 1;
  return 0;
}

const cc_op cc_ops_indexer_quant[] = {
    {"dsa_indexer_q_quant", check_q, "T=8192 H=64 D=128 R=64", CC_BENCH(q_quant, b_q)},
    {"dsa_indexer_k_insert", check_kins, "N=8192 FP8", CC_BENCH(k_insert, b_k)},
    {"dsa_indexer_k_gather", check_kgat, "R=4 T=8192 FP8", CC_BENCH(k_gather, b_kg)},
    {0}};
