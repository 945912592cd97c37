/* Index-building helpers (§10.1-10.5): every output byte-exact against
 * tests/ref (as tests/test_index_helpers.c), lens included, and the fault
 * word. Inputs are valid index data with a few -1 entries. The cases are
 * tools/cases/index_helpers.c's; outputs start as FILL on both sides. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "checkcl.h"
#include "ref_index_helpers.h"

#define FILL 0xEE

#define H(i) (c->in[i].host)
static ref_table tab(const case_ih_arr *a) {
  return (ref_table){a->present ? a->host : NULL, a->d0, a->d1, a->rs};
}

/* The reference's outputs for case c into want / wl; its fault word. */
static unsigned reference(const case_ih *c, void *want, int32_t *wl) {
  const int64_t t = c->out.d0, width = c->out.rs;
  switch (c->op) {
  case CASE_IH_SLOT:
    return ref_compressed_slot_mapping(H(0), H(1), tab(&c->in[2]), c->p.slot.compress_ratio,
                                       c->p.slot.block_size, want, t);
  case CASE_IH_SWA:
    return ref_swa_indices(H(0), H(1), c->in[2].present ? H(2) : NULL, tab(&c->in[3]),
                           c->p.swa.window, c->p.swa.block_size, want, width, width, wl, t);
  case CASE_IH_GTK:
    return ref_global_topk(H(0), c->in[0].d1, c->in[0].rs, H(1), tab(&c->in[2]),
                           c->in[3].present ? H(3) : NULL, c->p.gtk.block_size, want, width, wl,
                           t);
  case CASE_IH_C128:
    return ref_c128_topk(H(0), H(1), tab(&c->in[2]), H(3), c->p.c128.compress_ratio,
                         c->p.c128.block_size, want, width, width, wl, t);
  case CASE_IH_COMB:
    return ref_combine_topk_swa(H(0), c->in[0].rs, H(1), H(2), H(3), c->in[2].d0,
                                c->p.comb.window, c->p.comb.compress_ratio, c->p.comb.topk,
                                c->p.comb.M, c->p.comb.N, want, width, width, wl, t);
  case CASE_IH_MIXED: {
    const dsa_index_mixed_sparse_params *p = &c->p.mixed;
    const int64_t r = c->in[6].d0, td = c->in[0].d0, tp = c->in[4].d0;
    const ref_table sbt = tab(&c->in[8]);
    ref_mixed rm = {H(0), p->window, c->in[1].present ? H(1) : NULL, c->in[1].d1, c->in[1].rs,
                    c->in[2].present ? H(2) : NULL, H(3), H(4), c->in[4].d1, c->in[4].rs,
                    H(5), H(6), r, H(7), sbt, c->in[9].present ? tab(&c->in[9]) : sbt, td, tp,
                    p->window, p->compress_ratio, p->topk, p->swa_block_size,
                    p->compressed_block_size, p->decode_compressed_local};
    return ref_mixed_sparse(&rm, want, width, width, wl);
  }
  default:
    return ~0u;
  }
}

/* One case: random (gen_check), or the V4 bench shape (gen_bench). */
static int ih_case(cc_env *e, case_ih_op op, int v4, char *msg, size_t ms) {
  case_ih c = {.op = op};
  const case_dev d = {e->clctx, e->clq};
  const case_ops *ops = &case_ih_ops[op];
  cc_upload(e, ops, &c, v4 ? case_ih_gen_bench(&c) : case_ih_gen_check(&c, &e->rng), FILL);
  int rc;
  if (cc_run(e, ops, &c, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "%s: %s", case_ih_name(op), dsa_last_error());
  } else {
    const size_t ob = (size_t)(c.out.d0 * c.out.rs) * (c.out.dt == DSA_I64 ? 8 : 4);
    void *want = cc_xmalloc(ob);
    int32_t *wl = cc_xmalloc((size_t)c.out.d0 * 4);
    memset(want, FILL, ob), memset(wl, FILL, (size_t)c.out.d0 * 4);
    const unsigned wf = reference(&c, want, wl);
    const case_ih_want w = {want, wl};
    rc = case_ih_check(&d, &c, &w, msg, ms) || case_faults(e->q, wf, case_ih_name(op), msg, ms);
    free(want), free(wl);
  }
  case_ih_free(&c);
  return rc;
}

static int run(cc_env *e, case_ih_op op, char *msg, size_t ms) {
  if (ih_case(e, op, 1, msg, ms)) return 1; /* what --bench times, checked */
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (ih_case(e, op, 0, msg, ms)) return 1;
  return 0;
}
static int check_slot(cc_env *e, char *msg, size_t ms) { return run(e, CASE_IH_SLOT, msg, ms); }
static int check_swa(cc_env *e, char *msg, size_t ms) { return run(e, CASE_IH_SWA, msg, ms); }
static int check_gtk(cc_env *e, char *msg, size_t ms) { return run(e, CASE_IH_GTK, msg, ms); }
static int check_c128(cc_env *e, char *msg, size_t ms) { return run(e, CASE_IH_C128, msg, ms); }
static int check_comb(cc_env *e, char *msg, size_t ms) { return run(e, CASE_IH_COMB, msg, ms); }
static int check_mixed(cc_env *e, char *msg, size_t ms) { return run(e, CASE_IH_MIXED, msg, ms); }

/* --bench: the case's V4 shapes (case_ih_gen_bench; small changes nothing,
 * index building is cheap). */
#define GEN(name, which)                                \
  static int name(cc_env *e, int small, void *c) {      \
    (void)e, (void)small;                               \
    ((case_ih *)c)->op = which;                         \
    return case_ih_gen_bench(c);                        \
  }
GEN(b_slot, CASE_IH_SLOT)
GEN(b_swa, CASE_IH_SWA)
GEN(b_gtk, CASE_IH_GTK)
GEN(b_c128, CASE_IH_C128)
GEN(b_comb, CASE_IH_COMB)
GEN(b_mixed, CASE_IH_MIXED)
#define IH_BENCH(op, gen) &case_ih_ops[op], sizeof(case_ih), gen

const cc_op cc_ops_index_helpers[] = {
    {"dsa_index_compressed_slot_mapping", check_slot, "R=64 C4", IH_BENCH(CASE_IH_SLOT, b_slot)},
    {"dsa_index_swa", check_swa, "T=64 window=128", IH_BENCH(CASE_IH_SWA, b_swa)},
    {"dsa_index_global_topk", check_gtk, "T=64 K=512", IH_BENCH(CASE_IH_GTK, b_gtk)},
    {"dsa_index_c128_topk", check_c128, "T=64 K=256", IH_BENCH(CASE_IH_C128, b_c128)},
    {"dsa_index_combine_topk_swa", check_comb, "prefill 4x2048 K=512",
     IH_BENCH(CASE_IH_COMB, b_comb)},
    {"dsa_index_mixed_sparse", check_mixed, "64 decode + 4x2048 prefill",
     IH_BENCH(CASE_IH_MIXED, b_mixed)},
    {0}};
