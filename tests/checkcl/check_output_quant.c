/* Attention output inverse RoPE + FP8 quant: out and scales (padding
 * included) byte-exact against tests/ref (as tests/test_output_quant.c),
 * and the fault word. The case is tools/cases/output_quant.c's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "checkcl.h"
#include "ref_output_quant.h"

#define FILL 0xA5 /* the outputs' starting bytes: every one must be written */

static int oq_case(cc_env *e, int64_t t, int64_t h, int64_t g, int64_t npos, int packed, int bad,
                   char *msg, size_t ms) {
  case_oq c = {.packed = packed, .bad = bad, .t = t, .h = h, .g = g, .np = npos};
  const case_dev d = {e->clctx, e->clq};
  cc_upload(e, &case_oq_ops, &c, case_oq_gen_check(&c, &e->rng), FILL);
  int rc;
  if (cc_run(e, &case_oq_ops, &c, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "dsa_output_inv_rope_fp8_quant: %s", dsa_last_error());
  } else {
    const int64_t hpg = h / g, kk = packed ? hpg : 4 * hpg;
    const size_t fb = (size_t)(t * h) * 512, sb = (size_t)(g * kk * c.tp) * 4;
    uint8_t *out = cc_xmalloc(fb);
    void *sc = cc_xmalloc(sb);
    memset(out, FILL, fb), memset(sc, FILL, sb);
    const unsigned wf = ref_inv_rope_fp8_quant(c.o, h * 512, 512, t, h, c.pos, c.cs, 64, npos, g,
                                               out, t * hpg * 512, hpg * 512, sc, packed,
                                               kk * c.tp, c.tp, 1, c.tp);
    const case_oq_want w = {out, sc, 0, NULL};
    rc = case_oq_check(&d, &c, &w, msg, ms) || case_faults(e->q, wf, "output quant", msg, ms);
    free(out), free(sc);
  }
  case_oq_free(&c);
  return rc;
}

static int check_oq(cc_env *e, char *msg, size_t ms) {
  static const int64_t hs[] = {1, 8, 16, 64, 128};
  if (oq_case(e, 1, 1, 1, 4, 0, 0, msg, ms) || oq_case(e, 5, 16, 4, 50, 1, 1, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 3 : 12); it++) {
    const int64_t h = hs[cc_rnd(e, 5)], gs[] = {1, h >= 8 ? 8 : 1, h};
    if (oq_case(e, 1 + cc_rnd(e, 9), h, gs[cc_rnd(e, 3)], 1 + cc_rnd(e, 100), (int)cc_rnd(e, 2),
                (int)cc_rnd(e, 2), msg, ms))
      return 1;
  }
  return 0;
}

/* --bench: dsacl-bench's first row and its inputs. */
#define OQ_ROW(t, h, g, pk, qt) {t, qt, h, g, pk},
static const int64_t oq_row[][5] = {CASE_OQ_ROWS(OQ_ROW)};
static int b_gen(cc_env *e, int small, void *p) {
  (void)e;
  case_oq *c = p;
  *c = (case_oq){.t = oq_row[0][small], .h = oq_row[0][2], .g = oq_row[0][3],
                 .packed = (int)oq_row[0][4]};
  return case_oq_gen_bench(c);
}

const cc_op cc_ops_output_quant[] = {
    {"dsa_output_inv_rope_fp8_quant", check_oq, "T=64 H=64 G=8", CC_BENCH(oq, b_gen)}, {0}};
