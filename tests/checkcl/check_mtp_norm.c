/* MTP RMSNorms (input norm and shared head): every output byte exact
 * against tests/ref (as tests/test_mtp_norm.c), and no fault bits (the
 * operators read no index). The case is tools/cases/mtp_norm.c's. */
#include <stdio.h>
#include <stdlib.h>

#include "cases.h"
#include "checkcl.h"
#include "ref_mtp_norm.h"

#define FILL 0xA5 /* the outputs' starting bytes: every one must be written */

static int mn_case(cc_env *e, int head, int64_t t, int64_t h, int64_t hc, int w_bf16, char *msg,
                   size_t ms) {
  case_mtp c = {.head = head, .t = t, .h = h, .hc = hc, .w_bf16 = w_bf16};
  const case_dev d = {e->clctx, e->clq};
  const case_ops *ops = head ? &case_mtp_head_ops : &case_mtp_ops;
  const char *name = ops->op;
  cc_upload(e, ops, &c, case_mtp_gen_check(&c, &e->rng), FILL);
  int rc;
  if (cc_run(e, ops, &c, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "%s: %s", name, dsa_last_error());
  } else {
    const dsa_mtp_params p = case_mtp_params(&c);
    uint16_t *eo = cc_xmalloc((size_t)(t * h) * 2), *ho = NULL;
    if (head) {
      for (int64_t i = 0; i < t; i++)
        ref_mtp_rmsnorm_row(c.emb + i * h, c.we, !w_bf16, h, p.eps, eo + i * h);
    } else {
      ho = cc_xmalloc((size_t)(t * hc * h) * 2);
      ref_mtp_input_rmsnorm(c.emb, h, c.pos, 0, c.prev, hc * h, h, c.we, !w_bf16, c.wh, !w_bf16,
                            eo, h, ho, hc * h, h, t, hc, h, p.eps);
    }
    const case_mtp_want w = {eo, ho, 0, NULL, NULL};
    rc = case_mtp_check(&d, &c, &w, msg, ms) || case_faults(e->q, 0, name, msg, ms);
    free(eo), free(ho);
  }
  case_mtp_free(&c);
  return rc;
}

static const int64_t hs[] = {1, 2, 5, 16, 100, 255, 256, 1028, 3000, 4096, 7168};

static int check_input(cc_env *e, char *msg, size_t ms) {
  if (mn_case(e, 0, 1, 1, 0, 0, msg, ms) || mn_case(e, 0, 3, 7168, 4, 1, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (mn_case(e, 0, 1 + cc_rnd(e, 9), hs[cc_rnd(e, 11)], cc_rnd(e, 5), (int)cc_rnd(e, 2), msg,
                ms))
      return 1;
  return 0;
}

static int check_head(cc_env *e, char *msg, size_t ms) {
  if (mn_case(e, 1, 1, 1, 0, 0, msg, ms) || mn_case(e, 1, 5, 4096, 0, 1, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (mn_case(e, 1, 1 + cc_rnd(e, 12), hs[cc_rnd(e, 11)], 0, (int)cc_rnd(e, 2), msg, ms))
      return 1;
  return 0;
}

/* --bench: dsacl-bench's first row of each operator and its inputs. */
#define MN_ROW(t, h, qt) {t, qt, h},
static const int64_t mn_row[][3] = {CASE_MTP_ROWS(MN_ROW)};
static int gen(int head, int small, case_mtp *c) {
  *c = (case_mtp){.head = head, .t = mn_row[0][small], .h = mn_row[0][2]};
  return case_mtp_gen_bench(c);
}
static int b_gen_in(cc_env *e, int small, void *c) { return (void)e, gen(0, small, c); }
static int b_gen_head(cc_env *e, int small, void *c) { return (void)e, gen(1, small, c); }

const cc_op cc_ops_mtp_norm[] = {
    {"dsa_mtp_input_rmsnorm", check_input, "T=64 H=4096 HC=4", CC_BENCH(mtp, b_gen_in)},
    {"dsa_mtp_shared_head_rmsnorm", check_head, "T=64 H=4096", &case_mtp_head_ops,
     sizeof(case_mtp), b_gen_head},
    {0}};
