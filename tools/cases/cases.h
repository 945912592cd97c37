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

#include <dsacl/compressor.h>
#include <dsacl/dsacl.h>
#include <dsacl/index_helpers.h>
#include <dsacl/indexer_logits.h>
#include <dsacl/indexer_quant.h>
#include <dsacl/mla_qnorm.h>
#include <dsacl/mtp_norm.h>
#include <dsacl/output_quant.h>
#include <dsacl/sparse_mla.h>
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

/* The generators' helpers over the one random generator (rng.h). */
int64_t case_rnd(uint64_t *rng, int64_t n); /* [0, n) */
double case_uniform(uint64_t *rng, double lo, double hi);
void case_fill_bytes(uint64_t *rng, void *p, size_t n);
/* The first k of a random permutation of [0, n) (n entries, the first k
 * steps of the shuffle: the stream dsacl-bench's rows always drew); NULL
 * when out of memory. */
int64_t *case_random_distinct(uint64_t *seed, int64_t n, int64_t k);
/* n slots for an insert into cap cache slots: distinct random slots (a
 * shuffle drawn as it goes), one in 12 -1 (skipped), one in 12 out of range
 * (cap .. cap + bad_span - 1), and -1 past cap; 0, or -1 when out of
 * memory. */
int case_insert_slots(uint64_t *rng, int64_t *slots, int64_t n, int64_t cap, int64_t bad_span);
uint16_t case_bf16(float f); /* round to nearest even; finite f */
double case_bf16_f(uint16_t h);

/* Byte compare: 0 equal, else 1 with "what: first difference at element i
 * (byte j): got 0x.., want 0x.." in msg. */
int case_cmp_bytes(const void *got, const void *want, size_t n, size_t esz, const char *what,
                   char *msg, size_t msz);
/* The case's ops defined from its typed functions (in the form's file). */
#define CASE_OPS(T, W, name)                                                                \
  static int T##_upload_v(const case_dev *d, void *c, unsigned char f, char *m, size_t n) { \
    return case_##T##_upload(d, c, f, m, n);                                                \
  }                                                                                         \
  static dsa_status T##_call_v(dsa_queue *q, const void *c, const dsa_events *ev) {         \
    return case_##T##_call(q, c, ev);                                                       \
  }                                                                                         \
  static int T##_check_v(const case_dev *d, const void *c, const void *w, char *m, size_t n) { \
    return case_##T##_check(d, c, (const W *)w, m, n);                                      \
  }                                                                                         \
  static void T##_free_v(void *c) { case_##T##_free(c); }                                   \
  const case_ops case_##T##_ops = {name, T##_upload_v, T##_call_v, T##_check_v, T##_free_v};

/* Reads bytes of m (blocking); 0 or 1 with msg. */
int case_read(const case_dev *d, cl_mem m, size_t bytes, void *dst, char *msg, size_t msz);
/* Reads bytes of m and byte-compares them with want (elements of esz
 * bytes); 0, or 1 with msg. */
int case_read_cmp(const case_dev *d, cl_mem m, size_t bytes, const void *want, size_t esz,
                  const char *what, char *msg, size_t msz);
/* The queue's fault word against want; 0 or 1 with msg. */
int case_faults(dsa_queue *q, uint32_t want, const char *what, char *msg, size_t msz);

/* Every form's upload / call / check / free, for the consumers' generic
 * drivers (golden_run_case, the bench rows' run and teardown). The typed
 * functions below are the same; a case struct passed as void * is the one
 * of the ops' form. */
typedef struct case_ops {
  const char *op; /* the public function, for messages */
  int (*upload)(const case_dev *d, void *c, unsigned char out_fill, char *msg, size_t msz);
  dsa_status (*call)(dsa_queue *q, const void *c, const dsa_events *ev);
  int (*check)(const case_dev *d, const void *c, const void *want, char *msg, size_t msz);
  void (*free)(void *c);
} case_ops;

/* The typed functions of form T and their case_T_ops:
 *   gen_check  checkcl's random inputs for the shape already set (0, or -1
 *              when out of memory); gen_bench  dsacl-bench's (the same)
 *   upload     device buffers and tensors, the output filled with out_fill
 *              (a golden's sentinel); 0, or 1 with msg
 *   call       the operator; check  the rule against want (W *): 0, or 1 with
 *              the first difference in msg
 *   free       the device buffers, and the host arrays when owned
 *   bytes      bytes read + written at a bench row's p; flops  its
 *              arithmetic (0 where not compute-bound)
 * A form's DeepSeek-V4 rows, CASE_<FORM>_ROWS(X), come before its struct;
 * their first row is checkcl --bench's shape. */
#define CASE_FORM(T, W)                                                                    \
  int case_##T##_gen_check(case_##T *c, uint64_t *rng);                                    \
  int case_##T##_gen_bench(case_##T *c);                                                   \
  double case_##T##_bytes(const int64_t *p);                                               \
  double case_##T##_flops(const int64_t *p);                                               \
  int case_##T##_upload(const case_dev *d, case_##T *c, unsigned char out_fill, char *msg, \
                        size_t msz);                                                       \
  dsa_status case_##T##_call(dsa_queue *q, const case_##T *c, const dsa_events *ev);       \
  int case_##T##_check(const case_dev *d, const case_##T *c, const W *want, char *msg,      \
                       size_t msz);                                                        \
  void case_##T##_free(case_##T *c);                                                       \
  extern const case_ops case_##T##_ops;

/* ---- indexer top-k (dsa_topk_prefill / dsa_topk_decode) --------------------
 * Rule: the indices byte for byte (the deterministic order of topk.h). */
/* DeepSeek-V4 decode rows: X(rows, n, k, quick_rows, quick_n, bf16). */
#define CASE_TOPK_ROWS(X)               \
  X(64, 32768, 512, 4, 8192, 0)         \
  X(64, 32768, 2048, 4, 8192, 0)        \
  X(8192, 8192, 512, 64, 4096, 0)       \
  X(8192, 8192, 2048, 64, 4096, 0)      \
  X(64, 32768, 512, 4, 8192, 1)         \
  X(8192, 8192, 512, 64, 4096, 1)

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
  int bad;   /* gen_check: an out-of-range length */
  cl_mem ml, ma, mb, mo;
  dsa_tensor tl, ta, tb, to;
} case_topk;

/* gen_check: ties, -inf and NaN now and then; random lengths, an
 * out-of-range one when bad. gen_bench: uniform logits in [-10, 10] from a
 * fixed seed, every row using all n columns. bytes: logits and lengths read,
 * indices written by a decode row p = {rows, n, k, bf16}. */
CASE_FORM(topk, int32_t)

/* The prefill shape checkcl --bench times: X(rows, n, k, quick_rows, quick_n). */
#define CASE_TOPK_PREFILL_ROW(X) X(4096, 65536, 512, 16, 8192)


/* ---- indexer logits (dsa_indexer_logits / dsa_indexer_paged_logits) ---------
 * Rule (SPEC.md): over a call's finite expected entries, |got - want| <=
 * CASE_LOGITS_TOL * max|want| (max|want| = 0: <= CASE_LOGITS_TOL), bf16 output
 * also allowing its final rounding (2^-8 relative); a non-finite expected
 * entry (-inf past a row's keys) exactly matched. Calls run with clean = 1. */
#define CASE_LOGITS_TOL 1e-5
int case_logits_cmp(const void *got, int bf16, const double *want, int64_t rows, int64_t cols,
                    const char *what, char *msg, size_t msz);

/* Ragged prefill: q [m, h, d] (e4m3, or e2m1x2 [m, h, d/2] + ue8m0 scales
 * [m, h, d/32]), k [n, d] likewise (scales f32 [n] for FP8, ue8m0 [n, d/32]
 * for MXFP4), weights f32 [m, h], row key ranges [ks, ke), out [m, n]. */
/* X(m, n, h, quick_m, quick_n) */
#define CASE_LOGITS_ROWS(X) X(2048, 8192, 64, 64, 1024)

typedef struct case_logits {
  int fp4, bf16;
  int64_t m, h, d, n;
  uint8_t *q, *qs, *k, *kss; /* qs, kss: MXFP4 only */
  float *ksc, *w;            /* ksc: FP8 only */
  int32_t *ks, *ke;
  int owned;
  cl_mem mq, mqs, mk, mks, mw, mks0, mke, mo;
  dsa_tensor tq, tqs, tk, tks, tw, tks0, tke, to;
} case_logits;

/* gen_bench: random bytes, k scales 1/16 (MXFP4: every scale 2^0), weights
 * in [-1, 1], every row over all n keys. A bench row's p = {m, n, h} (d =
 * 128, FP8). */
CASE_FORM(logits, double)

/* Paged decode, D = 128: q [b, next_n, h, 128] e4m3 (or [.., 64] e2m1x2 +
 * ue8m0 scales [.., 4]), an indexer cache of nb blocks of bs tokens (stride
 * bytes apart; FP8 132 or MXFP4 68 bytes a token), weights f32
 * [b * next_n, h], context lengths [b] or [b, next_n], block table [b, w],
 * out [b * next_n, mml]. */
/* X(b, context, next_n, quick_b, quick_context); H = 64. */
#define CASE_PAGED_LOGITS_ROWS(X) \
  X(64, 32768, 1, 4, 2048)        \
  X(8, 32768, 1, 2, 2048)         \
  X(64, 32768, 2, 4, 2048)        \
  X(8, 32768, 2, 2, 2048)

typedef struct case_paged_logits {
  int fp4, bf16, ctx_rank;
  int64_t b, next_n, h, w, nb, mml, stride;
  int32_t bs;
  uint8_t *cache; /* nb * stride bytes; NULL: every byte cache_fill */
  unsigned char cache_fill;
  uint8_t *q, *qs;
  float *wt;
  int32_t *ctx, *table;
  int owned;
  cl_mem mc, mq, mqs, mw, mcl, mbt, mo;
  dsa_paged_cache pc;
  dsa_tensor tq, tqs, tw, tcl, tbt, to;
} case_paged_logits;

/* gen_check: sets stride and mml = w * bs. gen_bench: context lengths all
 * mml (ctx_rank 1), the blocks a random permutation, the cache 0x3c
 * everywhere (e4m3 1.5 values and finite f32 scales), random q bytes (MXFP4:
 * q scales 2^0), weights in [-1, 1]; sets bs (64), w, nb and stride (64
 * tokens rounded up to a multiple of 576 bytes, as vLLM pads). A bench row's
 * p = {b, context, next_n, h}. */
CASE_FORM(paged_logits, double)

/* ---- sparse MLA decode (dsa_sparse_mla_decode, .._two_stage) -----------------
 * Rule (SPEC.md): out within 1e-2 * max(1, |want|) per element and relative
 * L2 <= 4e-3; lse within 1e-4 (-inf exactly where want has it). */
typedef struct case_attn_want {
  const double *out; /* [rows, 512] */
  const double *lse; /* [rows] */
} case_attn_want;
int case_attn_cmp(const uint16_t *got, const float *lse, const case_attn_want *want, int64_t rows,
                  const char *what, char *msg, size_t msz);

/* One index set over an fp8_ds_mla cache of nb blocks of bs tokens, stride
 * bytes apart: indices [t, k] (slots), lengths [t]. */
typedef struct case_mla_set {
  int64_t nb, stride, k;
  int32_t bs;
  uint8_t *cache; /* nb * stride bytes; NULL: every byte cache_fill (or the
                     main set's cache, when shares_cache) */
  unsigned char cache_fill;
  int shares_cache; /* extra set: indexes the main set's cache */
  int32_t *idx, *lens;
  cl_mem mc, mi, ml;
  dsa_paged_cache pc;
  dsa_tensor ti, tl;
  dsa_sparse_index_set set;
} case_mla_set;

/* q [t, h, 512] bf16, a main and/or an extra set, an optional sink [h],
 * out [t, h, 512] bf16 and lse [t, h]; two: the two-stage decode (its
 * workspace sized by the library). scale 0: the default softmax scale. */
/* X(t, h, k2, quick_t, quick_h); k1 = 128 (the SWA window). */
#define CASE_MLA_DECODE_ROWS(X) X(64, 64, 512, 4, 16) \
  X(128, 64, 512, 8, 16)                                \
  X(64, 128, 1024, 4, 16)                               \
  X(128, 128, 1024, 8, 16)

typedef struct case_mla_decode {
  int two, has1, has2, bad;
  int no_lse; /* the bench rows: no lse asked for */
  int64_t t, h;
  float scale;
  uint16_t *q;
  float *sink; /* NULL: none */
  case_mla_set s1, s2;
  int owned;
  cl_mem mq, ms, mo, me, mw;
  size_t mwb;
  dsa_tensor tq, ts, to, te;
} case_mla_decode;

/* gen_check: the sets' nb, bs, k set (k < 0: no set; the extra set's cache
 * its own), random valid caches (finite e4m3, scales 2^-4 .. 2^-1, RoPE bf16 in
 * [-1, 1]; the reference decodes them), slots with -1 and, when bad, out of
 * range ones, random lengths, q in [-2, 2], a sink in [-3, 3]. gen_bench:
 * the main set's nb set (the pool); one 0x3c-filled cache of 64-token blocks
 * (e4m3 1.5 values, finite scales, RoPE bf16 0x3c3c) that both sets index,
 * random valid slots, full lengths, q and sink in [-1, 1]. A bench row's
 * p = {t, h, k1, k2}. */
CASE_FORM(mla_decode, case_attn_want)
/* The bench pool: at least these many cache bytes (quick: the second). */
#define CASE_MLA_POOL_BYTES 600e6
#define CASE_MLA_POOL_BYTES_QUICK 64e6
#define CASE_MLA_BENCH_STRIDE 37440 /* 64 * 584 rounded up to a multiple of 576 */

/* ---- indexer Q RoPE + quantization (dsa_indexer_q_quant) --------------------
 * Rule: every output byte exact (out_q, MXFP4's out_scales, out_weights). */
typedef struct case_q_quant_want {
  const uint8_t *q, *scales; /* scales: MXFP4 only */
  const float *weights;
} case_q_quant_want;

/* X(name, mx, t, quick_t); H = 64, D = 128, 65536 positions (quick 4096). */
#define CASE_Q_QUANT_ROWS(X)                         \
  X("indexer_q_fp8", 0, 64, 16)                      \
  X("indexer_q_fp8", 0, 8192, 256)                   \
  X("indexer_q_mxfp4", 1, 64, 16)                    \
  X("indexer_q_mxfp4", 1, 8192, 256)

/* positions i64 [T] (< P), q bf16 [T, H, D], cos_sin f32 [P, R] (R RoPE
 * dims, cos then sin), weights [T, H] (bf16 or f32); out_q [T, H, D]
 * e4m3 or [T, H, D/2] e2m1x2 + out_scales ue8m0 [T, H, D/32]; out_weights
 * f32 [T, H]. scales 0: the defaults. */
typedef struct case_q_quant {
  int mx, w_bf16, bad;
  dsa_e2m1_mode e2m1;
  int64_t t, h, d, r, np;
  float softmax_scale, head_scale;
  int64_t *pos;
  uint16_t *q;
  float *cs;
  void *w;
  int owned;
  cl_mem mp, mq, mc, mw, moq, mos, mow;
  dsa_tensor tp, tq, tc, tw, toq, tos, tow;
} case_q_quant;

/* gen_check: q in 32-wide blocks of random scale (2^-15 .. 2^14), positions
 * (out of range now and then when bad), f32 weights in [-2, 2]. gen_bench
 * (d = 128, r = 64): q in [-4, 4], bf16 weights in [-1, 1], random
 * positions. Both: the cos/sin table of base 10000. A bench row's p =
 * {t, h, positions, mx}. */
CASE_FORM(q_quant, case_q_quant_want)
/* The parameters a call gets (the reference needs the same). */
dsa_indexer_q_quant_params case_q_quant_params(const case_q_quant *c);

/* ---- indexer K quantize + insert (dsa_indexer_k_insert) ----------------------
 * Rule: the whole cache image byte for byte (written slots and the rest). */
/* X(n, quick_n): FP8 into a >= 600 MB pool (quick 64 MB) of 64-token blocks. */
#define CASE_K_INSERT_ROWS(X) X(64, 64) X(8192, 1024)
#define CASE_K_POOL_BYTES 600e6
#define CASE_K_POOL_BYTES_QUICK 64e6

/* k bf16 [n, 128], slots i64 [n], an indexer cache of nb blocks of bs tokens
 * (FP8, or MXFP4 when mx), stride bytes apart, starting as cache (NULL:
 * every byte cache_fill). */
typedef struct case_k_insert {
  int mx;
  dsa_e2m1_mode e2m1;
  int64_t n, nb, stride;
  int32_t bs;
  uint16_t *k;
  int64_t *slots;
  uint8_t *cache;
  unsigned char cache_fill;
  int owned;
  cl_mem mk, ms, mc;
  dsa_paged_cache pc;
  dsa_tensor tk, ts;
} case_k_insert;

/* gen_check: nb, bs, mx set; the stride a token multiple plus 0, 4 or 8
 * bytes, a random cache image, k in 32-wide blocks of random scale, slots a
 * random permutation with -1 and out-of-range ones now and then (and -1
 * past the capacity). gen_bench: nb set (the pool); bs 64, stride 8640, the
 * cache zeroed, k in [-4, 4], distinct random slots. A bench row's p = {n}. */
CASE_FORM(k_insert, uint8_t)

/* ---- MLA fp8_ds_mla cache: insert, gather by slot, gather through block
 * tables (dsa_mla_cache_insert, dsa_mla_gather_slots, dsa_mla_gather_paged)
 * Rule: byte for byte, the whole cache image after an insert (written slots
 * and the rest) and the whole output buffer after a gather (the rows a call
 * must not touch included). A token is 584 bytes (576 + 8 scale bytes); the
 * bench rows' pool is CASE_MLA_POOL_BYTES of CASE_MLA_BENCH_STRIDE-byte
 * blocks of 64 tokens filled with 0x3c (the gathers do the same work for
 * every byte pattern). */
#define CASE_MLA_TOKEN_BYTES 584

/* X(n, quick_n, whole): whole = 0: n distinct slots from the whole pool
 * (decode: one token a request, anywhere); 1: n tokens filling whole blocks
 * taken in random order (prefill: a request's tokens in consecutive slots). */
#define CASE_MLA_INSERT_ROWS(X) X(64, 64, 0) X(8192, 1024, 0) X(8192, 1024, 1)

/* k bf16 [n, 512], slots i64 [n], a cache of nb blocks of bs tokens stride
 * bytes apart, starting as cache (NULL: every byte cache_fill). */
typedef struct case_mla_insert {
  int whole; /* gen_bench: whole blocks */
  int64_t n, nb, stride;
  int32_t bs;
  uint16_t *k;
  int64_t *slots;
  uint8_t *cache;
  unsigned char cache_fill;
  int owned;
  cl_mem mk, ms, mc;
  dsa_paged_cache pc;
  dsa_tensor tk, ts;
} case_mla_insert;

/* gen_check: nb, bs set; the stride a token multiple plus 0, 16 or 32
 * bytes, a random cache image, k rows of 64-dim blocks of random scale
 * (zero blocks now and then) and RoPE dims in [-4, 4], distinct slots with
 * -1 and out-of-range ones now and then. gen_bench: nb set (the pool);
 * bs 64, CASE_MLA_BENCH_STRIDE, the cache 0x3c, k in [-4, 4]. A bench
 * row's p = {n, whole}. */
CASE_FORM(mla_insert, uint8_t)
/* gen_check's k row [512]: per 64-dim block a random scale (zeros now and
 * then), the RoPE dims random finite bf16. */
void case_mla_k_row(uint64_t *rng, uint16_t *row);

/* X(t, k, quick_t, quick_k): s = t * k slots. */
#define CASE_MLA_SLOTS_ROWS(X) X(64, 640, 16, 64) X(128, 1152, 32, 128)

/* indices i32 [s] (slots), the cache, out bf16 [s, 512] starting as out_in
 * (NULL: every byte the upload's out_fill). */
typedef struct case_mla_slots {
  int64_t s, nb, stride;
  int32_t bs;
  uint8_t *cache;
  unsigned char cache_fill;
  int32_t *idx;
  uint16_t *out_in;
  int owned;
  cl_mem mc, mi, mo;
  dsa_paged_cache pc;
  dsa_tensor ti, to;
} case_mla_slots;

/* gen_check: s, nb, bs set; the stride as the insert's, random cache bytes
 * (the runner writes valid tokens over them with the reference insert),
 * indices with negative and out-of-range ones now and then, out_in random.
 * gen_bench: nb set; the pool, random slots. A bench row's p = {t, k, s}. */
CASE_FORM(mla_slots, uint16_t)

/* X(r, t, quick_r, quick_t): r requests of t tokens. */
#define CASE_MLA_PAGED_ROWS(X) X(4, 8192, 2, 1024)

/* seq_lens i32 [r], gather_lens i32 [r] (when has_gl), block table i32
 * [r, w], the cache, out bf16 [r, max_t, 512] starting as out_in (NULL:
 * out_fill), written from row offset. */
typedef struct case_mla_paged {
  int has_gl;
  int64_t r, w, max_t, offset, nb, stride;
  int32_t bs;
  uint8_t *cache;
  unsigned char cache_fill;
  int32_t *seq, *gl, *table;
  uint16_t *out_in;
  int owned;
  cl_mem mc, msq, mgl, mbt, mo;
  dsa_paged_cache pc;
  dsa_tensor tsq, tgl, tbt, to;
} case_mla_paged;

/* gen_check: r, w, nb, bs, has_gl set; the stride and cache as the
 * gathers', random lengths (gather lengths <= seq lengths), table entries
 * with -1 and out-of-range ones now and then, a random offset, max_t, out_in
 * random. gen_bench: r, nb and max_t (= t) set; w = t / 64 rounded up,
 * distinct random blocks (-1 when the pool is too small), full lengths. A
 * bench row's p = {r, t}. */
CASE_FORM(mla_paged, uint16_t)

/* ---- MLA Q RMSNorm + RoPE and KV RoPE + insert (dsa_mla_qnorm_rope_kv_insert)
 * Rule: the whole cache image byte for byte, then q_out within want's q_ulp
 * bf16 ulps (0 against tests/ref; 1 against vLLM, whose rsqrt is
 * approximate: SPEC.md). */
typedef struct case_qnorm_want {
  const uint16_t *q_out; /* [t, h, 512] */
  const uint8_t *cache;  /* nb * stride bytes */
  int q_ulp;
  size_t *off1; /* not NULL: set to the count of q_out values 1 ulp off */
} case_qnorm_want;

/* X(t, h, quick_t): 65536 cos_sin rows (quick 4096), the bench pool
 * (CASE_MLA_POOL_BYTES of CASE_MLA_BENCH_STRIDE-byte blocks, zeroed). */
#define CASE_QNORM_ROWS(X) X(64, 64, 16) X(8192, 64, 256)
#define CASE_QNORM_POS 65536
#define CASE_QNORM_POS_QUICK 4096

/* q_in bf16 [t, h, 512], kv bf16 [t, 512], positions i64 [t] (< np),
 * cos_sin f32 [np, 64], slot_mapping i64 [t], a cache of nb blocks of bs
 * tokens stride bytes apart starting as cache (NULL: every byte
 * cache_fill); q_out a buffer of its own or, when in_place, q_in's (as
 * vLLM runs it). eps 0: the default. */
typedef struct case_qnorm {
  int in_place, bad;
  int64_t t, h, np, nb, stride;
  int32_t bs;
  float eps;
  uint16_t *q, *kv;
  int64_t *pos, *slots;
  float *cs;
  uint8_t *cache;
  unsigned char cache_fill;
  int owned;
  cl_mem mq, mo, mkv, mp, mcs, msl, mc;
  dsa_paged_cache pc;
  dsa_tensor tq, to, tkv, tp, tcs, tsl;
} case_qnorm;

/* gen_check: t, h, nb, bs, np, bad set; stride bs * 584, q rows of random
 * scale (2^-10 .. 2^9), kv in [-3, 3], random positions and distinct slots
 * (-1 now and then; out-of-range positions and slots when bad), a random
 * cache image. gen_bench: t, h, np, nb set; bs 64, CASE_MLA_BENCH_STRIDE,
 * q and kv in [-4, 4], distinct slots, random positions, the cache zeroed.
 * Both: the cos/sin table of base 10000. A bench row's p = {t, h, np}. */
CASE_FORM(qnorm, case_qnorm_want)
/* The parameters a call gets (the reference needs the same). */
dsa_mla_qnorm_rope_kv_insert_params case_qnorm_params(const case_qnorm *c);

/* ---- attention output inverse RoPE + FP8 quant (dsa_output_inv_rope_fp8_quant)
 * Rule: out and scales byte for byte, padding scales (tokens t .. tp - 1)
 * included; with nonfinite (a golden whose o holds NaN/inf, outside vLLM's
 * contract) the 128-dim blocks holding one are counted in *noted instead. */
typedef struct case_oq_want {
  const uint8_t *out; /* [g, t, hpg * 512] */
  const void *scales; /* f32 [g, 4 hpg, tp] or i32 [g, hpg, tp] */
  int nonfinite;
  size_t *noted; /* with nonfinite: the differing NaN/inf blocks */
} case_oq_want;

/* X(t, h, g, packed, quick_t): 65536 cos_sin rows. */
#define CASE_OQ_ROWS(X)   \
  X(64, 64, 8, 0, 8)      \
  X(256, 64, 8, 0, 16)    \
  X(64, 128, 16, 1, 8)    \
  X(256, 128, 16, 1, 16)  \
  X(4096, 64, 8, 0, 32)   \
  X(4096, 128, 16, 1, 32)
#define CASE_OQ_POS 65536

/* o bf16 [t, h, 512], positions i64 [t] (< np), cos_sin f32 [np, 64], out
 * e4m3 [g, t, h / g * 512], scales f32 [g, 4 h / g, tp] or (packed) i32
 * [g, h / g, tp], tp >= t. */
typedef struct case_oq {
  int packed, bad;
  int64_t t, h, g, tp, np;
  uint16_t *o;
  int64_t *pos;
  float *cs;
  int owned;
  cl_mem mo, mp, mcs, mf, msc;
  dsa_tensor to, tpos, tcs, tf, tsc;
} case_oq;

/* gen_check: t, h, g, np, packed, bad set; tp = t + 0 .. 4, per 128-dim
 * block a random scale (1e-30 .. 1e37), zero blocks, subnormals and (one
 * row in 16) NaN/inf now and then, out-of-range positions when bad.
 * gen_bench: t, h, g, packed set; np 65536, tp = t rounded up to 4, o in
 * [-4, 4], random positions. Both: the cos/sin table of base 10000. A bench
 * row's p = {t, h, g, packed}. */
CASE_FORM(oq, case_oq_want)

/* ---- indexer K gather (dsa_indexer_k_gather) ----------------------------------
 * Rule: k_out and k_scale byte for byte, rows the call must leave untouched
 * included. */
typedef struct case_k_gather_want {
  const uint8_t *k;     /* [total, 128] e4m3 or [total, 64] e2m1x2 */
  const uint8_t *scale; /* [total] f32 or [total, 4] ue8m0 */
} case_k_gather_want;

/* X(r, t, quick_r, quick_t): r requests of t compressed rows, FP8, from a
 * CASE_K_POOL_BYTES pool of 64-token blocks (no dsacl-bench row yet:
 * checkcl-cases --bench times it). */
#define CASE_K_GATHER_ROWS(X) X(4, 8192, 2, 1024)

/* cu_seqlens i32 [r + 1], block table i32 [r, w], an indexer cache of nb
 * blocks of bs tokens (FP8, or MXFP4 when mx) stride bytes apart (cache
 * NULL: every byte cache_fill), k_out and k_scale of total rows starting as
 * out_in and sc_in (NULL: the upload's out_fill). */
typedef struct case_k_gather {
  int mx;
  int64_t r, w, total, nb, stride;
  int32_t bs;
  uint8_t *cache;
  unsigned char cache_fill;
  int32_t *cu, *table;
  uint8_t *out_in, *sc_in;
  int owned;
  cl_mem mc, mcu, mbt, mo, ms;
  dsa_paged_cache pc;
  dsa_tensor tcu, tbt, to, ts;
} case_k_gather;

/* gen_check: r, w, nb, bs, mx set; the stride a token multiple plus 0, 4 or
 * 8 bytes, a random cache image, table entries with -1 and out-of-range ones
 * now and then, random lengths (up to w * bs each), total = cu[r] + 0 .. 2,
 * out_in and sc_in random. gen_bench: r, nb and total (= r * t) set; FP8,
 * bs 64, stride 8640, the cache 0x3c, w = t / 64 rounded up, distinct random
 * blocks, every request t rows. A bench row's p = {r, t}. */
CASE_FORM(k_gather, case_k_gather_want)

/* ---- MTP RMSNorms (dsa_mtp_input_rmsnorm, dsa_mtp_shared_head_rmsnorm) -------
 * Rule: want's ulp 0 (tests/ref): every output byte exact. ulp 1 (vLLM,
 * whose division and rsqrt are approximate: mtp_norm.h): values within 1
 * bf16 ulp (counted in the off1 counters), NaN matching NaN whatever its
 * payload, a sign of zero or anything further a failure. */
typedef struct case_mtp_want {
  const uint16_t *eo; /* enorm_out [t, h] (the shared head's out) */
  const uint16_t *ho; /* hnorm_out [t, hc, h]; input norm only */
  int ulp;
  size_t *off1_e, *off1_h; /* not NULL: set to the counts 1 ulp off */
} case_mtp_want;

/* X(t, h, quick_t): V4 Flash (H = 4096) and Pro (7168); the input norm
 * with HC = CASE_MTP_HC, the shared head with HC = 0. */
#define CASE_MTP_ROWS(X) \
  X(64, 4096, 8)         \
  X(256, 4096, 16)       \
  X(4096, 4096, 32)      \
  X(64, 7168, 8)         \
  X(256, 7168, 16)       \
  X(4096, 7168, 32)
#define CASE_MTP_HC 4

/* The input norm (head 0): inputs_embeds bf16 [t, h], positions i64 [t],
 * previous_hidden bf16 [t, hc, h], enorm and hnorm weights [h] (f32, or
 * bf16 when w_bf16; shared_w: one weight buffer passed as both), outputs
 * enorm_out [t, h] and hnorm_out [t, hc, h]. The shared head (head 1): x =
 * emb [t, h], weight we, out = enorm_out. eps 0: the default. */
typedef struct case_mtp {
  int head, w_bf16, shared_w;
  int64_t t, h, hc;
  float eps;
  uint16_t *emb, *prev;
  int64_t *pos;
  void *we, *wh; /* wh: not with shared_w or head */
  int owned;
  cl_mem me, mp, mh, mwe, mwh, meo, mho;
  dsa_tensor te, tp, th, twe, twh, teo, tho;
} case_mtp;

/* gen_check: head, t, h, hc, w_bf16 set; rows of random scale (2^-20 ..
 * 2^19; zero rows now and then), positions 0 now and then (the masked
 * embedding), weights in [-1.5, 1.5] (zeros now and then). gen_bench: head,
 * t, h set (hc CASE_MTP_HC, or 0 for the head); emb and prev in [-4, 4],
 * one f32 weight in [0.5, 1.5] shared by both norms, positions i % 97. A
 * bench row's p = {t, h, hc (0: the shared head)}. */
CASE_FORM(mtp, case_mtp_want)
/* The parameters a call gets (the reference needs the same). */
dsa_mtp_params case_mtp_params(const case_mtp *c);
/* case_mtp_ops names dsa_mtp_input_rmsnorm; this one the shared head. */
extern const case_ops case_mtp_head_ops;

/* ---- KV compressor (dsa_compressor_save_states, dsa_compressor_compress_insert)
 * One case struct for both operators (checkcl runs the save, then the
 * compress over the saved state); two forms over it, cp_save and cp_comp.
 * Rule: save: the whole state image byte for byte. Compress: against
 * tests/ref the whole cache image byte for byte; against vLLM (tol, its
 * softmax and rsqrt are approximate: docs/COMPRESSOR.md) a token record
 * either image changed is compared by value (every decoded value within one
 * code (e4m3, e2m1) or one bf16 ulp, at most 2 % of the values differing at
 * all), every other byte exactly. */
typedef struct case_cp_want {
  const uint8_t *cache; /* the cache image after the call */
  int tol;
} case_cp_want;

/* X(t, fmt, ratio, decode, quick_t); fmt 1 MLA (hd 512), 2 indexer FP8,
 * 3 indexer MXFP4 (hd 128). Prefill: one request at positions 0..T-1;
 * decode: T requests at a window end near a context of CASE_CP_CTX tokens
 * (quick CASE_CP_CTX_QUICK). */
#define CASE_CP_SAVE_ROWS(X) \
  X(64, 1, 4, 1, 8)          \
  X(8192, 1, 4, 0, 256)      \
  X(8192, 1, 128, 0, 256)    \
  X(8192, 2, 4, 0, 256)
#define CASE_CP_COMP_ROWS(X) \
  X(64, 1, 4, 1, 8)          \
  X(64, 1, 128, 1, 8)        \
  X(8192, 1, 4, 0, 256)      \
  X(8192, 1, 128, 0, 256)    \
  X(64, 2, 4, 1, 8)          \
  X(8192, 2, 4, 0, 256)      \
  X(8192, 3, 4, 0, 256)
#define CASE_CP_CTX 4096
#define CASE_CP_CTX_QUICK 512
#define CASE_CP_POS 65536 /* gen_bench's cos_sin rows */

/* kv_score f32 [t, 2 sw] (kv the first sw columns, score the next: vLLM's
 * projection), ape f32 [ratio, sw], positions and slot_mapping i64 [t], the
 * state f32 [nbs, bss, 2 sw] (in place), and for the compress: block table
 * i32 [r, w], token_to_req i32 [t], norm weight [hd] (f32, or bf16 when
 * w_bf16), cos_sin f32 [np, 64], cache_slot_mapping i64 [t], a cache of
 * format fmt of cnb blocks of cbs tokens cstride bytes apart (in place;
 * cache NULL: every byte cache_fill). Arrays left NULL are not uploaded (a
 * golden's save has no cache). eps 0: the default. */
typedef struct case_cp {
  int fmt, ratio, w_bf16, decode, bad;
  int64_t t, hd, sw, nbs, bss, r, w, np, cnb, cstride, ctx;
  int32_t cbs;
  float eps;
  float *kvs, *ape, *st, *cs;
  void *nw;
  int64_t *pos, *sl, *csl;
  int32_t *bt, *req;
  uint8_t *cache;
  unsigned char cache_fill;
  int owned;
  cl_mem mkvs, mape, mst, mpos, msl, mbt, mreq, mw, mcs, mcsl, mc;
  dsa_paged_cache pc;
  dsa_tensor tkv, tsc, tape, tst, tpos, tsl, tbt, treq, tw, tcs, tcsl;
} case_cp;
typedef case_cp case_cp_save;
typedef case_cp case_cp_comp;

/* gen_check (either form): fmt, ratio, t, bad set; one request at positions
 * 0..t-1 over a state of bss = 4 (ratio 4) or 8 token blocks in reverse
 * order, kv in [-3, 3], ape in [-1, 1], the state in [-4, 4], f32 weights in
 * [-1.5, 1.5], slots -1 one in 16, cache slots at window ends (out of range
 * one in 8 when bad, and cos_sin then too short for the later windows), a
 * random cache image. gen_bench: t, fmt, ratio, decode and ctx set; vLLM's
 * padded page strides, the cache zeroed. A bench row's p = {t, fmt, ratio,
 * decode}. */
CASE_FORM(cp_save, uint8_t)
CASE_FORM(cp_comp, case_cp_want)
/* The parameters a call gets (the reference needs the same). */
dsa_compressor_params case_cp_params(const case_cp *c);

/* ---- index-building helpers (dsa_index_compressed_slot_mapping, _swa,
 * _global_topk, _c128_topk, _combine_topk_swa, _mixed_sparse) ------------
 * Integer tables in, integer tables out: one struct for the six, its op
 * picking the call. Rule: out and lens byte for byte, the whole buffers
 * (entries the operator must leave alone included). No bench rows (index
 * building is a few microseconds of a decode step). */
typedef enum case_ih_op {
  CASE_IH_SLOT,  /* in: query_start_loc [r+1], seq_lens [r], block_table [r, w];
                    out: slot_mapping i64 [t]; no lens */
  CASE_IH_SWA,   /* in: positions i64 [t], token_to_req [t], is_valid_token u8
                    [t] (optional), block_table [r, w]; out [t, width] */
  CASE_IH_GTK,   /* in: topk_local [t, k], token_to_req, block_table,
                    is_valid_token (optional); out [t, k] */
  CASE_IH_C128,  /* in: positions i64 [t], token_to_req, block_table
                    (optional), is_valid_token; out [t, k] */
  CASE_IH_COMB,  /* in: topk [t, kt] (optional), query_start_loc, seq_lens,
                    gather_lens; out [t, width] */
  CASE_IH_MIXED, /* in: dsa_index_mixed_sparse_inputs' ten, in its order */
  CASE_IH_OPS
} case_ih_op;

/* One array: i32 unless dt says otherwise, [d0] (d1 < 0) or [d0, d1] with
 * row stride rs elements (host data d0 * rs elements); absent: NULL is
 * passed. */
typedef struct case_ih_arr {
  void *host;
  int present;
  dsa_dtype dt;
  int64_t d0, d1, rs;
  cl_mem m;
  dsa_tensor t;
} case_ih_arr;

typedef struct case_ih_want {
  const void *out;      /* out's d0 * rs elements */
  const int32_t *lens;  /* [t]; not for CASE_IH_SLOT */
} case_ih_want;

typedef struct case_ih {
  case_ih_op op;
  union {
    dsa_index_compressed_slot_mapping_params slot;
    dsa_index_swa_params swa;
    dsa_index_global_topk_params gtk;
    dsa_index_c128_topk_params c128;
    dsa_index_combine_topk_swa_params comb;
    dsa_index_mixed_sparse_params mixed;
  } p;
  case_ih_arr in[10], out, lens; /* lens: d0 = t */
  void *own[16];                 /* host arrays the generator allocated */
  int nown;
} case_ih;

/* gen_check: op set; the shapes and parameters drawn too (valid index data
 * with -1 entries now and then; optional inputs present or not), as
 * tests/checkcl drew them. The generic ops' names: case_ih_name(op). */
int case_ih_gen_check(case_ih *c, uint64_t *rng);
int case_ih_upload(const case_dev *d, case_ih *c, unsigned char out_fill, char *msg, size_t msz);
dsa_status case_ih_call(dsa_queue *q, const case_ih *c, const dsa_events *ev);
int case_ih_check(const case_dev *d, const case_ih *c, const case_ih_want *want, char *msg,
                  size_t msz);
void case_ih_free(case_ih *c);
const char *case_ih_name(case_ih_op op);
/* gen_bench: op set; DeepSeek-V4 decode shapes: 64 requests of one token
 * at a 32K context (slot mapping C4 with 64-row blocks, SWA window 128,
 * global top-k K = 512, C128 K = 256 with 2-row blocks); the combination a
 * prefill of 4 requests of 2048 tokens (top-k 512, window 128); the mixed
 * matrix those 64 decode tokens beside that prefill. Fixed seeds, distinct
 * random blocks. No dsacl-bench row: checkcl-cases --bench times them. */
int case_ih_gen_bench(case_ih *c);
/* The generic drivers' ops (golden_run_case), one per operator. */
extern const case_ops case_ih_ops[CASE_IH_OPS];
/* The tensor of in[i] as the call passes it (NULL when absent). */
const dsa_tensor *case_ih_in(const case_ih *c, int i);

#endif
