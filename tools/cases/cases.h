/* One case description per operator, shared by tests/checkcl (checkcl-cases),
 * dsacl-bench and dsacl-golden (issue 13 item 3). For each operator form a
 * case is a struct with
 *   - the shape and the host inputs (from a generator here: case_<op>_gen_check
 *     for checkcl's random cases, case_<op>_gen_bench for the timed ones; or
 *     borrowed from a golden's .npy arrays),
 *   - case_<op>_upload: device buffers and tensors over them,
 *   - case_<op>_call: the operator call (the one place its arguments are laid),
 *   - case_<op>_check: the comparison rule (byte-exact, or the tolerance) of
 *     the output against an expected one (tests/ref's, or a golden's),
 * and the DeepSeek-V4 shapes are an X-macro list (CASE_<OP>_ROWS) that
 * dsacl-bench's rows and checkcl --bench both expand.
 *
 * The expected output itself comes from tests/ref in checkcl and from the
 * golden files in dsacl-golden: the reference is the one piece that stays in
 * tests/checkcl, since the tools that ship do not link tests/ref. This
 * module uses the public API only and links into the library's shared and
 * static builds alike. */
#ifndef DSACL_TOOLS_CASES_H
#define DSACL_TOOLS_CASES_H

#include <dsacl/dsacl.h>
#include <dsacl/topk.h>

#include <stddef.h>
#include <stdint.h>

/* Where a case's buffers live. */
typedef struct case_dev {
  cl_context ctx;
  cl_command_queue q;
} case_dev;

/* A read-write buffer of bytes (0 allowed: one byte), written from init or
 * filled with fill; NULL on failure (and msg says why). */
cl_mem case_buf(const case_dev *d, size_t bytes, const void *init, unsigned char fill);
void case_release(cl_mem *m);
/* malloc, zeroed, never NULL for n = 0; NULL when out of memory. */
void *case_alloc(size_t n);

/* Byte compare: 0 equal, else 1 with "what: first difference at element i
 * (byte j): got 0x.., want 0x.." in msg. */
int case_cmp_bytes(const void *got, const void *want, size_t n, size_t esz, const char *what,
                   char *msg, size_t msz);
/* Reads bytes of m (blocking); 0 or 1 with msg. */
int case_read(const case_dev *d, cl_mem m, size_t bytes, void *dst, char *msg, size_t msz);
/* The queue's fault word against want; 0 or 1 with msg. */
int case_faults(dsa_queue *q, uint32_t want, const char *what, char *msg, size_t msz);

/* ---- indexer top-k (dsa_topk_prefill / dsa_topk_decode) --------------------
 * Rule: the indices byte for byte (the deterministic order of topk.h). */
typedef struct case_topk {
  int decode;      /* dsa_topk_decode, else dsa_topk_prefill */
  int bf16;        /* logits dtype: bf16, else f32 */
  int64_t rows, n; /* logits [rows, n] */
  int64_t b;       /* decode: sequences (rows = b * next_n) */
  int32_t next_n;  /* decode */
  int lens_rank;   /* decode: lengths [b] (1) or [b, next_n] (2) */
  int32_t k;
  /* Host inputs: logits (rows x n), decode lengths or prefill row starts,
   * prefill row ends. */
  void *logits;
  int32_t *lens, *ends;
  int owned; /* the host arrays are the case's (the generators') */
  cl_mem ml, ma, mb, mo;
  dsa_tensor tl, ta, tb, to;
} case_topk;

/* checkcl's random inputs (ties, -inf and NaN now and then; random lengths,
 * an out-of-range one when bad) for the shape already set. 0 or -1 (memory). */
int case_topk_gen_check(case_topk *c, uint64_t *rng, int bad);
/* dsacl-bench's inputs: uniform logits in [-10, 10] from a fixed seed, every
 * row using all n columns (decode, next_n 1, lengths [b]). */
int case_topk_gen_bench(case_topk *c);
/* Output buffer filled with out_fill (a golden's sentinel). 0 or 1 with msg. */
int case_topk_upload(const case_dev *d, case_topk *c, unsigned char out_fill, char *msg,
                     size_t msz);
dsa_status case_topk_call(dsa_queue *q, const case_topk *c, const dsa_events *ev);
int case_topk_check(const case_dev *d, const case_topk *c, const int32_t *want, char *msg,
                    size_t msz);
void case_topk_free(case_topk *c);
/* Bytes read (logits, lengths) and written (indices) by a decode row. */
double case_topk_bytes(const int64_t *p);

/* DeepSeek-V4 decode rows: X(rows, n, k, quick_rows, quick_n, bf16); the
 * first is checkcl --bench's shape. */
#define CASE_TOPK_ROWS(X)               \
  X(64, 32768, 512, 4, 8192, 0)         \
  X(64, 32768, 2048, 4, 8192, 0)        \
  X(8192, 8192, 512, 64, 4096, 0)       \
  X(8192, 8192, 2048, 64, 4096, 0)      \
  X(64, 32768, 512, 4, 8192, 1)         \
  X(8192, 8192, 512, 64, 4096, 1)
/* The prefill shape checkcl --bench times: X(rows, n, k, quick_rows, quick_n). */
#define CASE_TOPK_PREFILL_ROW(X) X(4096, 65536, 512, 16, 8192)

#endif
