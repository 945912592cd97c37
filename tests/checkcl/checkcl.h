/* checkcl: a checkasm-style runner. Every operator has one case description
 * (check_<family>.c): its cases against tests/ref, and a DeepSeek-V4 shape
 * for --bench. checkcl.c loops over capability masks, records which variant
 * each call picked (dsa__queue_last_variant) and times every variant. */
#ifndef DSACL_CHECKCL_H
#define DSACL_CHECKCL_H

#include <dsacl/dsacl.h>

#include "cases.h"
#include <stddef.h>
#include <stdint.h>

typedef struct cc_env {
  dsa_context *ctx;
  dsa_queue *q;
  cl_context clctx;
  cl_command_queue clq;
  uint64_t rng; /* the one RNG (dsa_test_rand) */
  int quick;
  /* Variants seen during the current operator's cases ("op: variant"). */
  char seen[8][96];
  int nseen;
  char last[96]; /* variant of the last call */
} cc_env;

/* One operator's description. check runs its cases and returns 0, or 1 with
 * the first difference (and the case) in msg. --bench times the operator's
 * case form (tools/cases): bench_gen sets the DeepSeek-V4 shape (small: a
 * shape that takes seconds on a CPU device) in a zeroed case struct of
 * bench_size bytes and draws its inputs (0, or nonzero on failure);
 * checkcl.c then runs bench_ops' upload, call (with ev.done) and free, the
 * one bench wrapper of every operator. */
typedef struct cc_op {
  const char *name; /* the public operator */
  int (*check)(cc_env *e, char *msg, size_t n);
  const char *bench_shape; /* in words */
  const case_ops *bench_ops;
  size_t bench_size;
  int (*bench_gen)(cc_env *e, int small, void *c);
} cc_op;
/* The bench fields of case form T (case_T, case_T_ops) with generator gen. */
#define CC_BENCH(T, gen) &case_##T##_ops, sizeof(case_##T), gen

/* Call after every operator call of a case: records the variant it picked
 * and clears the record. */
void cc_after_call(cc_env *e);

/* ---- a case's steps over its form's case ops (checks and bench alike) -----
 * cc_upload: c's inputs have been drawn (gen: the form's generator result,
 * 0, or nonzero when out of memory); uploads them, the outputs filled with
 * fill. A failure here is the harness's, not the operator's: the program
 * stops (exit 2) naming the form.
 * cc_run: the operator on c, ev.done = done (may be NULL), the variant it
 * picked recorded (cc_after_call).
 * cc_case_free: ops->free(c), then free(c) (a case from cc_xmalloc). */
void cc_upload(cc_env *e, const case_ops *ops, void *c, int gen, unsigned char fill);
dsa_status cc_run(cc_env *e, const case_ops *ops, const void *c, cl_event *done);
void cc_case_free(const case_ops *ops, void *c);

/* ---- helpers ------------------------------------------------------------- */
int64_t cc_rnd(cc_env *e, int64_t n);         /* [0, n) */
double cc_uniform(cc_env *e, double lo, double hi);
uint16_t cc_bf16(float f);
float cc_bf16_f(uint16_t h);
void cc_fill_bytes(cc_env *e, void *p, size_t n);
void *cc_xmalloc(size_t n); /* zeroed, never NULL */
/* A device buffer holding bytes (init may be NULL: zero). */
cl_mem cc_buf(cc_env *e, size_t bytes, const void *init);
void cc_read(cc_env *e, cl_mem m, size_t bytes, void *dst);
void cc_free(cl_mem *m);
dsa_tensor cc_t(cl_mem m, dsa_dtype dt, int nd, const int64_t *shape);
uint32_t cc_faults(cc_env *e);
/* Byte compare: 0 equal, else 1 with "what: first difference at byte i
 * (element i/esz): got .. want .." in msg. */
int cc_cmp_bytes(const void *got, const void *want, size_t n, size_t esz, const char *what,
                 char *msg, size_t msz);

#define CC_FAIL(msg, n, ...) (snprintf((msg), (n), __VA_ARGS__), 1)
#define CC_CALL(e, msg, n, expr)                                                          \
  do {                                                                                    \
    dsa_status s_ = (expr);                                                               \
    cc_after_call(e);                                                                     \
    if (s_ != DSA_OK)                                                                     \
      return CC_FAIL(msg, n, "%s -> %s: %s", #expr, dsa_status_name(s_), dsa_last_error()); \
  } while (0)

/* Families. */
extern const cc_op cc_ops_mla_cache[];
extern const cc_op cc_ops_indexer_logits[];
extern const cc_op cc_ops_topk[];
extern const cc_op cc_ops_index_helpers[];
extern const cc_op cc_ops_mla_qnorm[];
extern const cc_op cc_ops_sparse_mla[];
extern const cc_op cc_ops_indexer_quant[];
extern const cc_op cc_ops_compressor[];
extern const cc_op cc_ops_output_quant[];
extern const cc_op cc_ops_mtp_norm[];

#endif
