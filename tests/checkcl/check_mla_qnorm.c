/* Q RMSNorm + RoPE and KV RoPE + insert: q_out and the whole cache image
 * byte-exact against tests/ref (as tests/test_mla_qnorm.c), and the fault
 * word. The case is tools/cases/mla_qnorm.c's; the reference runs on a copy
 * of the starting image. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "checkcl.h"
#include "ref_mla_qnorm.h"

static int qn_case(cc_env *e, int64_t t, int64_t h, int64_t nb, int32_t bs, int64_t npos, int bad,
                   char *msg, size_t ms) {
  case_qnorm c = {.bad = bad, .t = t, .h = h, .np = npos, .nb = nb, .bs = bs};
  const case_dev d = {e->clctx, e->clq};
  cc_upload(e, &case_qnorm_ops, &c, case_qnorm_gen_check(&c, &e->rng), 0);
  int rc;
  if (cc_run(e, &case_qnorm_ops, &c, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "dsa_mla_qnorm_rope_kv_insert: %s", dsa_last_error());
  } else {
    const size_t qb = (size_t)(t * h) * 1024, size = (size_t)(nb * c.stride);
    uint16_t *want = cc_xmalloc(qb);
    uint8_t *img = cc_xmalloc(size);
    memcpy(img, c.cache, size);
    ref_mla_cache ref = {img, nb, bs, c.stride};
    const dsa_mla_qnorm_rope_kv_insert_params p = case_qnorm_params(&c);
    const unsigned wf = ref_mla_qnorm_rope_kv_insert(&ref, c.q, h * 512, 512, want, h * 512, 512,
                                                     h, c.kv, 512, c.pos, c.cs, 64, npos, c.slots,
                                                     p.eps, t);
    const case_qnorm_want w = {want, img, 0, NULL};
    rc = case_qnorm_check(&d, &c, &w, msg, ms) || case_faults(e->q, wf, "qnorm", msg, ms);
    free(want), free(img);
  }
  case_qnorm_free(&c);
  return rc;
}

static int check_qnorm(cc_env *e, char *msg, size_t ms) {
  static const int64_t hs[] = {0, 1, 16, 64, 128};
  if (qn_case(e, 1, 1, 1, 1, 4, 0, msg, ms) || qn_case(e, 9, 64, 3, 16, 50, 1, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 2 : 10); it++)
    if (qn_case(e, 1 + cc_rnd(e, 12), hs[cc_rnd(e, 5)], 1 + cc_rnd(e, 4), 16, 1 + cc_rnd(e, 100),
                (int)cc_rnd(e, 2), msg, ms))
      return 1;
  return 0;
}

/* --bench: dsacl-bench's first row and its inputs. */
#define QN_ROW(t, h, qt) {t, qt, h},
static const int64_t qn_row[][3] = {CASE_QNORM_ROWS(QN_ROW)};
static int b_gen(cc_env *e, int small, void *p) {
  (void)e;
  case_qnorm *c = p;
  const double pool = small ? CASE_MLA_POOL_BYTES_QUICK : CASE_MLA_POOL_BYTES;
  *c = (case_qnorm){.t = qn_row[0][small], .h = qn_row[0][2],
                    .np = small ? CASE_QNORM_POS_QUICK : CASE_QNORM_POS,
                    .nb = (int64_t)ceil(pool / CASE_MLA_BENCH_STRIDE)};
  return case_qnorm_gen_bench(c);
}

const cc_op cc_ops_mla_qnorm[] = {
    {"dsa_mla_qnorm_rope_kv_insert", check_qnorm, "T=64 H=64", CC_BENCH(qnorm, b_gen)}, {0}};
