/* KV compressor: the state image (save) and the whole cache image
 * (compress, all three formats) byte-exact against tests/ref (as
 * tests/test_compressor.c), and the fault word. The case is
 * tools/cases/compressor.c's; the reference runs on its host arrays (the
 * state and cache images the device started from). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "checkcl.h"
#include "ref_compressor.h"

/* Save, then compress over the saved state; both images and faults. */
static int cp_case(cc_env *e, int fmt, int ratio, int64_t t, int bad, char *msg, size_t ms) {
  case_cp c = {.fmt = fmt, .ratio = ratio, .t = t, .bad = bad, .w_bf16 = (int)cc_rnd(e, 2)};
  const case_dev d = {e->clctx, e->clq};
  cc_upload(e, &case_cp_save_ops, &c, case_cp_save_gen_check(&c, &e->rng), 0);
  char what[96];
  snprintf(what, sizeof what, "fmt=%d ratio=%d T=%lld bad=%d", fmt, ratio, (long long)t, bad);
  const dsa_compressor_params p = case_cp_params(&c);
  ref_state rs = {c.st, c.nbs, (int32_t)c.bss, c.bss * 2 * c.sw, 2 * c.sw};
  int rc = 0;
  if (cc_run(e, &case_cp_save_ops, &c, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "%s: dsa_compressor_save_states: %s", what, dsa_last_error());
  } else {
    const unsigned wf = ref_compressor_save_states(&rs, c.kvs, 2 * c.sw, c.kvs + c.sw, 2 * c.sw,
                                                   c.ape, c.sw, c.pos, c.sl, t, ratio, c.sw);
    rc = case_cp_save_check(&d, &c, (const uint8_t *)c.st, msg, ms) ||
         case_faults(e->q, wf, "save", msg, ms);
  }
  if (!rc && cc_run(e, &case_cp_comp_ops, &c, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "%s: dsa_compressor_compress_insert: %s", what, dsa_last_error());
  }
  if (!rc) {
    float *wf32 = cc_xmalloc((size_t)c.hd * 4); /* the reference takes widened weights */
    for (int64_t i = 0; i < c.hd; i++)
      wf32[i] = c.w_bf16 ? (float)case_bf16_f(((const uint16_t *)c.nw)[i]) : ((float *)c.nw)[i];
    ref_compress_args ra = {&rs, c.bt, 1, c.nbs, c.nbs, 1, c.req, c.pos, c.sl, c.csl, t, wf32, c.cs,
                            64, c.np, p.eps, ratio, fmt, c.cache, c.cnb, c.cbs, c.cstride, NULL};
    const unsigned wf = ref_compressor_compress_insert(&ra);
    const case_cp_want w = {c.cache, 0};
    rc = case_cp_comp_check(&d, &c, &w, msg, ms) || case_faults(e->q, wf, "compress", msg, ms);
    free(wf32);
  }
  if (rc) { /* name the case */
    char m2[512];
    snprintf(m2, sizeof m2, "%s: %s", what, msg);
    snprintf(msg, ms, "%s", m2);
  }
  case_cp_save_free(&c);
  return rc;
}

static int check_save(cc_env *e, char *msg, size_t ms) {
  return cp_case(e, 1, 4, 17, 0, msg, ms) || cp_case(e, 2, 4, 9, 1, msg, ms) ||
         cp_case(e, 1, 128, 5, 0, msg, ms);
}
static int check_comp(cc_env *e, char *msg, size_t ms) {
  for (int it = 0; it < (e->quick ? 2 : 6); it++) {
    const int fmt = 1 + (int)cc_rnd(e, 3), ratio = fmt == 1 && cc_rnd(e, 2) ? 128 : 4;
    if (cp_case(e, fmt, ratio, ratio == 4 ? 8 + cc_rnd(e, 40) : 128 + cc_rnd(e, 200),
                (int)cc_rnd(e, 2), msg, ms))
      return 1;
  }
  return 0;
}

/* --bench: dsacl-bench's prefill rows (C4 main save, C128 main compress)
 * and their inputs. */
static int gen(int ratio, int small, case_cp *c) {
  *c = (case_cp){.t = small ? 256 : 8192, .fmt = 1, .ratio = ratio, .ctx = CASE_CP_CTX};
  return case_cp_save_gen_bench(c);
}
static int bs_gen(cc_env *e, int small, void *c) { return (void)e, gen(4, small, c); }
static int bc_gen(cc_env *e, int small, void *c) { return (void)e, gen(128, small, c); }

const cc_op cc_ops_compressor[] = {
    {"dsa_compressor_save_states", check_save, "C4 main T=8192", &case_cp_save_ops,
     sizeof(case_cp), bs_gen},
    {"dsa_compressor_compress_insert", check_comp, "C128 main T=8192", &case_cp_comp_ops,
     sizeof(case_cp), bc_gen},
    {0}};
