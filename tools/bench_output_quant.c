/* dsacl-bench rows for inverse RoPE + block-scaled FP8 quantization of the
 * attention output (dsa_output_inv_rope_fp8_quant) at DeepSeek-V4 shapes:
 * decode (T = 64..256) and prefill (T = 4096) with 64 heads in 8 groups
 * (V4-Flash) and 128 heads in 16 groups (V4-Pro), f32 and packed scales.
 * Shapes, inputs and the call are the shared case description's
 * (tools/cases/output_quant.c). */
#include "bench.h"

/* p = {T, H, G, packed}. */
static int oq_setup(bench_env *e, const int64_t *p, void **out) {
  bench_case *b = bench_case_new(&case_oq_ops, sizeof(case_oq), 0);
  if (!(*out = b)) return -1;
  case_oq *c = b->c;
  *c = (case_oq){.t = p[0], .h = p[1], .g = p[2], .packed = p[3] != 0};
  return case_oq_gen_bench(c) ? -1 : bench_case_upload(e, b);
}

#define OQ_OP(t, h, g, pk, qt)                                                                   \
  {"output_inv_rope_fp8_quant", "T=%lld H=%lld G=%lld packed=%lld", {t, h, g, pk},             \
   {qt, h, g, pk}, oq_setup, bench_case_run, bench_case_teardown, case_oq_bytes, case_oq_flops},

const bench_op bench_ops_output_quant[] = {
    CASE_OQ_ROWS(OQ_OP)
    {0},
};
