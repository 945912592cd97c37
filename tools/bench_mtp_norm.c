/* dsacl-bench rows for the MTP RMSNorms (dsa_mtp_input_rmsnorm,
 * dsa_mtp_shared_head_rmsnorm) at DeepSeek-V4 shapes: T = 64, 256, 4096
 * tokens, H = 4096 (Flash) and 7168 (Pro), HC = 4, f32 weights (as vLLM's
 * V4 warm-up compiles them). Memory-bound: bytes = rows read + written.
 * Shapes, inputs and the call are the shared case description's
 * (tools/cases/mtp_norm.c). */
#include "bench.h"

/* p = {T, H, HC (0: the shared-head operator)}. Outputs are separate
 * buffers, so every run does the same work on the same input. */
static int mn_setup(bench_env *e, const int64_t *p, void **out) {
  const int head = p[2] == 0;
  bench_case *b = bench_case_new(head ? &case_mtp_head_ops : &case_mtp_ops, sizeof(case_mtp), 0);
  if (!(*out = b)) return -1;
  case_mtp *c = b->c;
  *c = (case_mtp){.head = head, .t = p[0], .h = p[1]};
  return case_mtp_gen_bench(c) ? -1 : bench_case_upload(e, b);
}

#define MN_IN(t, h, qt)                                                                   \
  {"mtp_input_rmsnorm", "T=%lld H=%lld HC=%lld", {t, h, CASE_MTP_HC}, {qt, h, CASE_MTP_HC}, \
   mn_setup, bench_case_run, bench_case_teardown, case_mtp_bytes, case_mtp_flops},
#define MN_HEAD(t, h, qt)                                                                     \
  {"mtp_shared_head_rmsnorm", "T=%lld H=%lld", {t, h, 0}, {qt, h, 0}, mn_setup, bench_case_run, \
   bench_case_teardown, case_mtp_bytes, case_mtp_flops},

const bench_op bench_ops_mtp_norm[] = {
    CASE_MTP_ROWS(MN_IN) CASE_MTP_ROWS(MN_HEAD) {0},
};
