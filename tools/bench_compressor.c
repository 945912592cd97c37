/* dsacl-bench rows for the DeepSeek-V4 KV compressor: state saving
 * (dsa_compressor_save_states) and the fused compress -> norm -> RoPE ->
 * quantize -> insert (dsa_compressor_compress_insert), at decode and prefill
 * shapes of the C4 (main and indexer heads) and C128 layers. Shapes, inputs
 * and the calls are the shared case description's
 * (tools/cases/compressor.c). */
#include "bench.h"

/* p = {T, format (1 MLA, 2 indexer FP8, 3 indexer MXFP4), ratio, decode}. */
static int cb_setup(bench_env *e, const int64_t *p, void **out, const case_ops *ops) {
  /* The compress call is two kernels at ratio 128 (variant split): its
   * time spans from a marker before the first (span 1; ratio 4 is one). */
  bench_case *b = bench_case_new(ops, sizeof(case_cp), ops == &case_cp_comp_ops && p[2] == 128);
  if (!(*out = b)) return -1;
  case_cp *c = b->c;
  *c = (case_cp){.t = p[0], .fmt = (int)p[1], .ratio = (int)p[2], .decode = (int)p[3],
                 .ctx = e->quick ? CASE_CP_CTX_QUICK : CASE_CP_CTX};
  return case_cp_save_gen_bench(c) ? -1 : bench_case_upload(e, b);
}
static int cb_setup_save(bench_env *e, const int64_t *p, void **out) {
  return cb_setup(e, p, out, &case_cp_save_ops);
}
static int cb_setup_comp(bench_env *e, const int64_t *p, void **out) {
  return cb_setup(e, p, out, &case_cp_comp_ops);
}

#define CB_SAVE(t, f, r, d, qt)                                                                \
  {"compressor_save", "T=%lld fmt=%lld ratio=%lld decode=%lld", {t, f, r, d}, {qt, f, r, d},   \
   cb_setup_save, bench_case_run, bench_case_teardown, case_cp_save_bytes, case_cp_save_flops},
#define CB_COMP(t, f, r, d, qt)                                                                \
  {"compressor_compress", "T=%lld fmt=%lld ratio=%lld decode=%lld", {t, f, r, d}, {qt, f, r, d}, \
   cb_setup_comp, bench_case_run, bench_case_teardown, case_cp_comp_bytes, case_cp_comp_flops},

const bench_op bench_ops_compressor[] = {
    CASE_CP_SAVE_ROWS(CB_SAVE) CASE_CP_COMP_ROWS(CB_COMP) {0},
};
