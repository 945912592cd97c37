/* dsacl-demo: one DeepSeek-V4-Flash decode step of the sparse-attention path
 * on synthetic data: the caches filled (the C4 ones by the compressor, as a
 * prefill fills them), then examples/decode_step.c's
 * decode_step() (the calls a server makes) run on the device, every stage
 * checked against the C reference of tests/ref afterwards (from the
 * caller-owned intermediates it leaves) and timed with OpenCL profiling
 * events.
 *
 *   dsacl-demo [--device N|NAME] [--json] [--quick | --full] [--sample N]
 *              [--seqs B] [--context L] [--heads H] [--topk K] [--window W]
 *              [--seed S]
 *
 * The batch: B sequences, sequence b holds L_b = max(1, L - 3b) tokens (the
 * first exactly L; the others a little shorter, so that rows differ in their
 * lengths and masks), and this step decodes its last token, at position
 * p_b = L_b - 1 (next_n = 1). Paging: SWA cache 64 tokens per block,
 * compressed (C4) MLA cache and indexer K cache 64 compressed rows per block,
 * all three with the padded page strides vLLM uses; physical blocks are handed
 * out in a random order. The two compressed caches share one block table (one
 * storage block of 64 compressed rows = 256 tokens, as in vLLM). Compressor
 * state caches (fp32, one per head: C4 main hd 512 and C4 indexer hd 128)
 * 4 rows per block, a ring of 65 blocks per sequence (see stage 1b's comment
 * in main: the prefill runs in chunks of 256 positions per sequence).
 *
 * Stages (docs/DECODE.md walks through the same calls):
 *   1a  SWA MLA cache: dsa_mla_cache_insert of the past tokens 0 .. L_b - 2
 *   then, per prefill chunk (positions [256k, 256k + 256) of every sequence;
 *   random fp32 projected kv | score rows, random ape and bf16 norm weights):
 *   1b  dsa_index_compressed_slot_mapping: the C4 / indexer cache slot of each
 *       token that closes a window of 4, -1 for the others
 *   1c  dsa_compressor_save_states, C4 main head (hd 512): fp32 state rows
 *   1d  the same for the C4 indexer head (hd 128)
 *   1e  dsa_compressor_compress_insert -> C4 MLA cache (DSA_CACHE_MLA_FP8)
 *   1f  dsa_compressor_compress_insert -> indexer K cache (DSA_CACHE_INDEXER_FP8)
 *       (floor(L_b / 4) compressed rows per sequence in all)
 *   2   dsa_indexer_q_quant: indexer Q RoPE + FP8 quant (64 heads x 128)
 *   3   dsa_indexer_paged_logits, 2-D context lengths floor(L_b / 4)
 *   4   dsa_topk_decode, k = topk
 *   5   dsa_index_global_topk: local compressed rows -> C4 cache slots
 *   6   dsa_index_swa: the window's SWA slots and lengths
 *   7   dsa_mla_qnorm_rope_kv_insert: q RMSNorm + RoPE, kv RoPE + insert of
 *       the new token into the SWA cache
 *   8a  dsa_sparse_mla_decode (fused) with attention sink
 *   8b  dsa_sparse_mla_decode_two_stage (same inputs; not in decode_step())
 *   9   dsa_output_inv_rope_fp8_quant: inverse RoPE of dims 448..511 and FP8
 *       quant of the fused output for the O projection (G = H / 8 groups)
 * Checks (default mode: every row): the exact stages (1, 2, 4-7, 9) compare
 * bytes with the reference run on the same inputs (inputs that came out of an
 * earlier device stage are read back from the device; the state caches after
 * every chunk, the C4 and indexer caches whole after the last); logits:
 * max |d| / max |ref| <= 1e-5 over finite entries and the -inf mask identical; attention: SPEC.md's tolerance against
 * the fp64 reference (elementwise |d| <= 1e-2 max(1, |ref|), relative L2 <=
 * 4e-3, lse within 1e-4, relative above |lse| = 16: ref_lse_tol), and fused
 * vs two-stage with the same bounds. No stage may raise a fault bit
 * (dsa_queue_faults).
 *
 * Sample mode (--sample N; --full sets it with N = 4 and the DeepSeek-V4-Flash
 * layer at full context: B = 64, L = 131072 = 32768 compressed rows a
 * sequence, H = 64, top-k 512, window 128). The same calls run on the same
 * kind of data, but the C reference of the whole batch (minutes at that size,
 * and a host mirror of every cache) is replaced by a check of a sample:
 *   - sampled sequences: min(N, B) of them, the first, the last and random
 *     ones (from --seed); their decode tokens are the sampled rows of stages
 *     2-9. Per sampled sequence up to 16 of its prefill chunks are checked:
 *     the first, the last and random ones (chunk k = positions [256k,
 *     256k + 256) = compressed block k of both caches). Both lists are printed
 *     (table header, and "checked" in --json).
 *   - caches are filled on the device only; there is no host image of a whole
 *     cache and no whole-cache read-back. The SWA cache holds only the blocks
 *     of each decode token's window (positions L_b - W .. L_b - 1; older block-
 *     table entries -1, as a server that freed them leaves them; dsacl-bench's
 *     decode_step row does the same), and 1a inserts only those past tokens.
 *     The prefill's kv|score rows come from one pool per head (1.25 x the
 *     256 B rows a chunk holds, random, uploaded once); chunk k reads its rows
 *     from a per-chunk offset, so the reference can find any token's row. The
 *     state-ring chunking is unchanged.
 *   - 1a: the sampled sequences' SWA blocks (read back block by block)
 *     against their reference image (their tokens only), byte for byte.
 *   - 1b: every token's slot in every chunk (it is metadata; cheap), as in
 *     the default mode.
 *   - 1c-1f: for every checked chunk of a sampled sequence, right after the
 *     chunk's calls: the state rows of positions 256k - 4 .. chunk end (the
 *     ring's live rows for that sequence: the chunk's own and the previous
 *     chunk's last block, which the chunk's first window reads), and the
 *     whole compressed block k of the C4 and indexer caches (every byte of
 *     the page, padding and unwritten rows included), against the reference
 *     run from scratch on the pool rows of those positions (save_states into
 *     a state image of their own, then compress + insert of every window the
 *     chunk closes). A window that read another chunk's, another sequence's or
 *     an overwritten ring row differs.
 *   - 2-9: per sampled row only, the reference of that row over the inputs
 *     the device left for that row, read back row by row (its indexer q and
 *     weights, logits row, top-k row, C4 and SWA slot rows and lengths, q,
 *     fused output) plus its sequence's cache blocks (indexer and C4 blocks
 *     read back after the prefill, SWA blocks after stage 7) renumbered into
 *     caches of their own. Exact stages compare bytes of those rows (7 also
 *     the sequence's SWA blocks after the new token's insert; 9 the token's
 *     columns of every group's e4m3 output and scales); logits and attention
 *     use the tolerances above, 8b also against 8a.
 * Not checked in sample mode: rows and blocks of the other sequences, the
 * other prefill chunks of a sampled sequence (their state rows and
 * compressed blocks; the blocks are still the inputs of that sequence's
 * logits and attention references, taken from the device as they are), the
 * blocks no sequence owns (a stray write there goes unseen), the padded
 * token columns T .. Tp - 1 of the output scales, and the older SWA
 * positions (not in the cache). Still checked for the whole batch: the fault
 * bits of every stage (dsa_queue_faults) and every slot of 1b.
 *
 * Memory: every device buffer is named; one larger than the device's
 * CL_DEVICE_MAX_MEM_ALLOC_SIZE, or buffers together larger than its
 * CL_DEVICE_GLOBAL_MEM_SIZE, end the demo in setup with the buffer's name
 * (at --full the largest is the C4 MLA cache, 32832 blocks x 37440 B =
 * 1.2 GB, under PoCL's 2 GiB; the default mode's whole SWA cache at that
 * size, 4.9 GB, is not). Host sizes are computed in checked 64-bit
 * arithmetic.
 *
 * Output: a table (stage, device us, check) and a last line `PASS` (exit 0)
 * or `FAIL: <stage>` (exit 1); with --json one JSON document instead. Exit 77
 * when there is no OpenCL device at all (meson's "skipped").
 *
 * Device times are START of a marker enqueued just before the stage .. END of
 * the stage's completion event (an operator may run several kernels); the
 * chunked stages 1b-1f add up their calls. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dsacl/dsacl.h>

#include "decode_step.h"
#include "json.h"
#include "rng.h"
#include "ref.h"
#include "ref_compressor.h"
#include "ref_index_helpers.h"
#include "ref_indexer_logits.h"
#include "ref_indexer_quant.h"
#include "ref_mla_qnorm.h"
#include "ref_output_quant.h"
#include "ref_sparse_mla.h"
#include "ref_topk.h"

/* The two-stage decode's workspace: bytes [off, off + n) of m as a u8 tensor. */
#define WS_BYTES(m, off, n)                                                        \
  (&(dsa_tensor){.mem = (m), .offset = (off), .dtype = DSA_U8, .ndim = 1,          \
                 .shape = {(int64_t)(n)}, .stride = {1}})

/* ---- model constants (DeepSeek-V4-Flash, SPEC-reference §1) ------------------ */

enum {
  MLA_DIM = 512,
  IDX_HEADS = 64,
  IDX_DIM = 128,
  ROPE_DIM = 64,
  RATIO = 4,
  SWA_BS = 64,  /* SWA cache: tokens per block */
  CMP_BS = 64,  /* C4 MLA cache and indexer cache: compressed rows per block */
  NEXT_N = 1,
  ST_BS = 4,    /* compressor state cache: rows (tokens) per block (vLLM, C4) */
  CHUNK = 256,  /* prefill chunk: positions of a sequence per compressor call */
  RING = CHUNK / ST_BS + 1, /* state blocks a sequence keeps: a chunk's + 1 */
  HPG = 8       /* output quant: heads per wo_a group (V4-Flash 64 = 8 x 8) */
};
/* Page strides as vLLM pads them (SPEC-reference §1): 64 * 584 -> 37440,
 * 64 * 132 -> 8640. */
#define MLA_STRIDE 37440
#define IDX_STRIDE 8640
#define ROPE_THETA 10000.0

/* ---- output ---------------------------------------------------------------------- */

#define MAX_STAGES 16
typedef struct stage {
  const char *id, *name;
  double us; /* device time; < 0: not timed */
  int ok;
  char detail[200];
} stage;

static stage stages[MAX_STAGES];
static int nstages;
static int json;
static char device_name[512] = "?";
static char sizes_line[300];

static stage *stage_new(const char *id, const char *name) {
  stage *s = &stages[nstages++];
  s->id = id, s->name = name, s->us = -1, s->ok = 1, s->detail[0] = '\0';
  return s;
}

static void stage_note(stage *s, int ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void stage_note(stage *s, int ok, const char *fmt, ...) {
  size_t n = strlen(s->detail);
  if (n && n + 2 < sizeof s->detail) strcat(s->detail, "; "), n += 2;
  va_list ap;
  va_start(ap, fmt);
  if (n < sizeof s->detail) vsnprintf(s->detail + n, sizeof s->detail - n, fmt, ap);
  va_end(ap);
  if (!ok) s->ok = 0;
}

static void json_str(const char *s) { json_write_str(stdout, s); }

typedef struct config {
  int64_t seqs, context, heads, topk, window;
  uint64_t seed;
  int quick, full;
  int two_queues; /* --two-queues: decode_step_two_queues() with a side queue */
  int64_t sample; /* > 0: check that many sequences (sample mode); 0: all */
} config;
static config cfg;
static double step_span_us = -1; /* the timed decode step's span; < 0: not measured */

/* Sample mode (see "sample mode" below). */
enum { CHECK_CHUNKS = 16 }; /* prefill chunks (= compressed blocks) checked a sequence */

typedef struct sampled {
  int64_t b;                  /* the sequence; its decode token is row t = b */
  int64_t nck;                /* its prefill chunks */
  uint8_t *chk;               /* [nck]: chunk k is checked */
  int64_t sj0, snb;           /* its SWA block-table entries sj0 .. sj0 + snb - 1 */
  uint8_t *swa_ref, *swa_dev; /* those blocks: reference image, device read-back */
  int64_t cnb;                /* its compressed block-table entries 0 .. cnb - 1 */
  uint8_t *c4_dev, *ik_dev;   /* those blocks of the C4 and indexer caches (device) */
} sampled;

static int smode;
static int64_t nsmp;
static sampled *sq;

/* Which rows sample mode checks, for the table's header. */
static void print_checked(FILE *f) {
  if (!smode) {
    fprintf(f, "check:  every row of every stage\n");
    return;
  }
  fprintf(f, "check:  sample of %lld of %lld sequences (and their decode rows):", (long long)nsmp,
          (long long)cfg.seqs);
  for (int64_t i = 0; i < nsmp; i++) fprintf(f, " %lld", (long long)sq[i].b);
  fprintf(f, "\n        prefill chunks (= C4 / indexer blocks) checked:\n");
  for (int64_t i = 0; i < nsmp; i++) {
    fprintf(f, "        seq %lld:", (long long)sq[i].b);
    for (int64_t k = 0; k < sq[i].nck; k++)
      if (sq[i].chk[k]) fprintf(f, " %lld", (long long)k);
    fprintf(f, " (of %lld)\n", (long long)sq[i].nck);
  }
}

static cl_ulong max_alloc, global_mem, dev_bytes, dev_peak; /* device memory, bytes */
static double host_s0;
static double now_s(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Prints everything and returns the exit code. */
static int finish(const config *cfg, double warmup_s, const char *fatal_stage) {
  const char *failed = fatal_stage;
  char failed_buf[80];
  double step_us = 0;
  for (int i = 0; i < nstages; i++) {
    if (!stages[i].ok && !failed) {
      snprintf(failed_buf, sizeof failed_buf, "%s %s", stages[i].id, stages[i].name);
      failed = failed_buf;
    }
    if (stages[i].us > 0 && stages[i].id[0] >= '2' && strcmp(stages[i].id, "8b"))
      step_us += stages[i].us;
  }
  double host_s = now_s() - host_s0;
  if (json) {
    printf("{\n  \"tool\": \"dsacl-demo\",\n  \"version\": ");
    json_str(dsa_version_string());
    printf(",\n  \"device\": ");
    json_str(device_name);
    printf(",\n  \"batch\": ");
    json_str(sizes_line);
    printf(",\n  \"sizes\": {\"seqs\": %lld, \"context\": %lld, \"heads\": %lld, "
           "\"indexer_heads\": %d, \"indexer_dim\": %d, \"topk\": %lld, \"window\": %lld, "
           "\"compress_ratio\": %d, \"swa_block_size\": %d, \"c4_block_size\": %d, "
           "\"indexer_block_size\": %d, \"state_block_size\": %d, \"prefill_chunk\": %d, "
           "\"o_groups\": %lld, \"next_n\": %d, \"seed\": %llu, \"quick\": %s, "
           "\"full\": %s, \"sample\": %lld, \"context_min\": %lld},\n",
           (long long)cfg->seqs, (long long)cfg->context, (long long)cfg->heads, IDX_HEADS,
           IDX_DIM, (long long)cfg->topk, (long long)cfg->window, RATIO, SWA_BS, CMP_BS, CMP_BS,
           ST_BS, CHUNK, (long long)(cfg->heads % HPG ? 1 : cfg->heads / HPG), NEXT_N,
           (unsigned long long)cfg->seed, cfg->quick ? "true" : "false",
           cfg->full ? "true" : "false", (long long)cfg->sample,
           (long long)(cfg->context - 3 * (cfg->seqs - 1) < 1
                           ? 1
                           : cfg->context - 3 * (cfg->seqs - 1)));
    /* Which rows were checked: all, or the sample's sequences (their decode
     * rows) and per sequence its prefill chunks checked. */
    if (smode && sq) {
      printf("  \"checked\": {\"mode\": \"sample\", \"sequences\": [");
      for (int64_t i = 0; i < nsmp; i++) printf("%s%lld", i ? ", " : "", (long long)sq[i].b);
      printf("], \"prefill_chunks\": {");
      for (int64_t i = 0; i < nsmp; i++) {
        printf("%s\"%lld\": [", i ? ", " : "", (long long)sq[i].b);
        for (int64_t k = 0, n = 0; k < sq[i].nck; k++)
          if (sq[i].chk[k]) printf("%s%lld", n++ ? ", " : "", (long long)k);
        printf("]");
      }
      printf("}, \"prefill_chunks_per_sequence\": %d},\n", CHECK_CHUNKS);
    } else {
      printf("  \"checked\": {\"mode\": \"%s\"},\n", smode ? "sample" : "all");
    }
    printf("  \"device_peak_bytes\": %llu,\n", (unsigned long long)dev_peak);
    printf("  \"warmup_s\": %.3f,\n  \"stages\": [\n", warmup_s);
    for (int i = 0; i < nstages; i++) {
      printf("    {\"stage\": ");
      json_str(stages[i].id);
      printf(", \"name\": ");
      json_str(stages[i].name);
      if (stages[i].us >= 0)
        printf(", \"device_us\": %.1f", stages[i].us);
      else
        printf(", \"device_us\": null");
      printf(", \"check\": \"%s\", \"detail\": ", stages[i].ok ? "ok" : "FAIL");
      json_str(stages[i].detail);
      printf("}%s\n", i + 1 < nstages ? "," : "");
    }
    printf("  ],\n  \"decode_step_device_us\": %.1f,\n", step_us);
    if (step_span_us >= 0)
      printf("  \"decode_step_span_us\": %.1f,\n", step_span_us);
    else
      printf("  \"decode_step_span_us\": null,\n");
    printf("  \"two_queues\": %s,\n  \"host_s\": %.2f,\n  \"result\": ",
           cfg->two_queues ? "true" : "false", host_s);
    if (failed) {
      char r[128];
      snprintf(r, sizeof r, "FAIL: %s", failed);
      json_str(r);
    } else {
      json_str("PASS");
    }
    printf("\n}\n");
  } else {
    if (nstages) printf("%-40s %12s  %s\n", "stage", "device us", "check");
    for (int i = 0; i < nstages; i++) {
      char name[64], us[32];
      snprintf(name, sizeof name, "%-3s %s", stages[i].id, stages[i].name);
      if (stages[i].us >= 0)
        snprintf(us, sizeof us, "%.1f", stages[i].us);
      else
        snprintf(us, sizeof us, "-");
      printf("%-40s %12s  %s  %s\n", name, us, stages[i].ok ? "ok  " : "FAIL", stages[i].detail);
    }
    if (nstages) {
      printf("decode step (stages 2-9, fused attention): %.1f us device time", step_us);
      if (step_span_us >= 0)
        printf(", %.1f us from stage 2's start to stage 9's end%s", step_span_us,
               cfg->two_queues ? " (two queues: the stages overlap)" : "");
      printf("\n");
      printf("host time %.2f s (programs ready in %.2f s), device buffers peak %.1f MiB\n",
             host_s, warmup_s, (double)dev_peak / (1u << 20));
    }
    if (failed)
      printf("FAIL: %s\n", failed);
    else
      printf("PASS\n");
  }
  fflush(stdout);
  return failed ? 1 : 0;
}

/* ---- setup helpers: a setup failure ends the demo as "FAIL: setup" ---------------- */

static double warmup_s;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "dsacl-demo: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(finish(&cfg, warmup_s, "setup"));
}

/* Checked 64-bit size arithmetic: every host-side size goes through these,
 * and an overflow (or a negative count) ends the demo in setup. */
static int64_t mul_ck(int64_t a, int64_t b) {
  int64_t r;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    die("size overflow: %lld x %lld", (long long)a, (long long)b);
  return r;
}
static int64_t add_ck(int64_t a, int64_t b) {
  int64_t r;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r))
    die("size overflow: %lld + %lld", (long long)a, (long long)b);
  return r;
}
/* a * b * c (elements times element bytes) as a size_t. */
static size_t nb3(int64_t a, int64_t b, int64_t c) {
  const int64_t n = mul_ck(mul_ck(a, b), c);
  if ((uint64_t)n > (uint64_t)SIZE_MAX) die("size %lld does not fit size_t", (long long)n);
  return (size_t)n;
}
static size_t nb2(int64_t a, int64_t b) { return nb3(a, b, 1); }

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) die("out of host memory (%zu bytes)", n);
  return p;
}
static void *xcalloc(size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (!p) die("out of host memory (%zu bytes)", n);
  return p;
}

static dsa_context *ctx;
static dsa_queue *queue, *side_queue;
static cl_context clctx;
static cl_command_queue clq;


static void mib(char *out, size_t n, cl_ulong bytes) {
  snprintf(out, n, "%llu bytes = %.1f MiB", (unsigned long long)bytes,
           (double)bytes / (1u << 20));
}

/* A device buffer of size bytes (from init, else zeroed), named in the
 * errors: one larger than the device's CL_DEVICE_MAX_MEM_ALLOC_SIZE, or
 * buffers adding up to more than CL_DEVICE_GLOBAL_MEM_SIZE, end the demo
 * before OpenCL is asked. */
static cl_mem buf_new(const char *name, size_t size, const void *init) {
  char a[64], b[64];
  if (max_alloc && size > max_alloc) {
    mib(a, sizeof a, size), mib(b, sizeof b, max_alloc);
    die("buffer '%s' needs %s, more than the device's CL_DEVICE_MAX_MEM_ALLOC_SIZE (%s); "
        "use fewer --seqs or a shorter --context%s",
        name, a, b, smode ? "" : " (or --sample N: the SWA cache then holds the windows only)");
  }
  if (global_mem && size > global_mem - dev_bytes) {
    mib(a, sizeof a, dev_bytes + (cl_ulong)size), mib(b, sizeof b, global_mem);
    die("buffer '%s' brings the demo's device buffers to %s, more than the device's "
        "CL_DEVICE_GLOBAL_MEM_SIZE (%s)",
        name, a, b);
  }
  cl_int err;
  cl_mem m = clCreateBuffer(clctx, CL_MEM_READ_WRITE, size ? size : 16, NULL, &err);
  if (!m) die("clCreateBuffer('%s', %zu bytes): OpenCL error %d", name, size, (int)err);
  if (init && size) {
    err = clEnqueueWriteBuffer(clq, m, CL_TRUE, 0, size, init, 0, NULL, NULL);
    if (err != CL_SUCCESS) die("clEnqueueWriteBuffer('%s'): OpenCL error %d", name, (int)err);
  } else if (size) {
    const uint8_t zero = 0;
    err = clEnqueueFillBuffer(clq, m, &zero, 1, 0, size, 0, NULL, NULL);
    if (err != CL_SUCCESS) die("clEnqueueFillBuffer('%s'): OpenCL error %d", name, (int)err);
  }
  dev_bytes += size ? size : 16;
  if (dev_bytes > dev_peak) dev_peak = dev_bytes;
  return m;
}

static void buf_free(cl_mem m) {
  size_t size = 0;
  if (!m) return;
  if (clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, NULL) == CL_SUCCESS)
    dev_bytes -= size <= dev_bytes ? size : dev_bytes;
  clReleaseMemObject(m);
}

static void buf_read(cl_mem m, size_t size, void *dst) {
  if (!size) return;
  cl_int err = clEnqueueReadBuffer(clq, m, CL_TRUE, 0, size, dst, 0, NULL, NULL);
  if (err != CL_SUCCESS) die("clEnqueueReadBuffer: OpenCL error %d", (int)err);
}

/* ---- deterministic synthetic data --------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rnd64(void) { return rng64_next(&rng_state); } /* tools/common/rng.h */
static double uniform(void) { return rng64_uniform(&rng_state); }
/* Roughly normal, unit variance (sum of four uniforms). */
static double gauss(void) {
  return (uniform() + uniform() + uniform() + uniform() - 2.0) * 1.7320508075688772;
}
static uint16_t *random_bf16(size_t n, double amp) {
  uint16_t *x = xmalloc(nb2((int64_t)n, 2));
  for (size_t i = 0; i < n; i++) x[i] = ref_bf16_from_float((float)(gauss() * amp));
  return x;
}
/* A random permutation of [0, n). */
static int32_t *permutation(int64_t n) {
  int32_t *p = xmalloc(nb2(n, 4));
  for (int64_t i = 0; i < n; i++) p[i] = (int32_t)i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)(rnd64() % (uint64_t)(i + 1));
    int32_t t = p[i];
    p[i] = p[j], p[j] = t;
  }
  return p;
}

/* ---- timing ------------------------------------------------------------------------- */

static cl_event t_begin;

static void time_begin(void) {
  cl_int err = clEnqueueMarkerWithWaitList(clq, 0, NULL, &t_begin);
  if (err != CL_SUCCESS) die("clEnqueueMarkerWithWaitList: OpenCL error %d", (int)err);
}

/* Waits for done, stores START(marker)..END(done) in s->us, releases both. */
static void time_end(stage *s, cl_event done) {
  cl_ulong t0 = 0, t1 = 0;
  cl_int err = clWaitForEvents(1, &done);
  if (err == CL_SUCCESS)
    err = clGetEventProfilingInfo(t_begin, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
  if (err == CL_SUCCESS)
    err = clGetEventProfilingInfo(done, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
  if (err == CL_SUCCESS && t1 >= t0) /* accumulates over a stage's calls */
    s->us = (s->us > 0 ? s->us : 0) + (double)(t1 - t0) * 1e-3;
  else
    stage_note(s, 1, "no profiling time (OpenCL error %d)", (int)err);
  clReleaseEvent(t_begin);
  clReleaseEvent(done);
  t_begin = NULL;
}

/* An operator call: on an error the stage fails and the demo ends. */
static void op_call(stage *s, dsa_status st, const char *what) {
  if (st == DSA_OK) return;
  fprintf(stderr, "dsacl-demo: %s -> %s: %s\n", what, dsa_status_name(st), dsa_last_error());
  stage_note(s, 0, "%s: %s", what, dsa_status_name(st));
  exit(finish(&cfg, warmup_s, NULL));
}
#define OP(s, call) op_call((s), (call), #call)

/* Every stage runs its operator twice: an untimed launch (on PoCL the first
 * launch of a kernel includes its code generation; GPUs have first-launch
 * costs too) and the timed one. Both write the same bytes. The call names
 * `evp` as its dsa_events argument. */
static cl_event done;
static dsa_events ev = {0, NULL, &done};
static dsa_events *evp;
#define TIMED(s, call)   \
  do {                   \
    evp = NULL;          \
    OP(s, call);         \
    clFinish(clq);       \
    time_begin();        \
    evp = &ev;           \
    OP(s, call);         \
    time_end(s, done);   \
  } while (0)
/* A stage of several calls (the prefill's chunks): the untimed launch for
 * the first only; the device times add up. */
#define TIMED_CHUNK(k, s, call) \
  do {                          \
    if ((k) == 0) {             \
      evp = NULL;               \
      OP(s, call);              \
      clFinish(clq);            \
    }                           \
    time_begin();               \
    evp = &ev;                  \
    OP(s, call);                \
    time_end(s, done);          \
  } while (0)

static void check_faults(stage *s) {
  /* --two-queues: the side queue's fault word too */
  for (int i = 0; i < 2; i++) {
    dsa_queue *fq = i ? side_queue : queue;
    uint32_t bits = 0;
    if (!fq) continue;
    dsa_status st = dsa_queue_faults(fq, &bits);
    if (st != DSA_OK)
      stage_note(s, 0, "dsa_queue_faults: %s", dsa_status_name(st));
    else if (bits)
      stage_note(s, 0, "fault bits 0x%x%s", (unsigned)bits, i ? " (side queue)" : "");
  }
}

/* ---- checks -------------------------------------------------------------------------- */

static void check_bytes(stage *s, const char *what, const void *got, const void *want,
                        size_t n) {
  const uint8_t *a = got, *b = want;
  size_t diff = 0, first = 0;
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i] && !diff++) first = i;
  if (diff)
    stage_note(s, 0, "%s: %zu of %zu bytes differ, first at %zu (0x%02x, want 0x%02x)", what,
               diff, n, first, a[first], b[first]);
  else if (n >= (1u << 20))
    stage_note(s, 1, "%s: %.1f MiB equal", what, (double)n / (1u << 20));
  else
    stage_note(s, 1, "%s: %zu bytes equal", what, n);
}

/* n logits against the fp64 reference: max |d| / max |ref| <= 1e-5 over the
 * finite entries, and -inf exactly where the reference has it. */
static void check_logits(stage *s, const float *got, const double *want, size_t n) {
  double maxref = 0, maxd = 0;
  size_t mask_bad = 0, n_inf = 0;
  for (size_t i = 0; i < n; i++) {
    double w = want[i], g = got[i];
    if (isinf(w)) {
      n_inf++;
      if (!(isinf(g) && g < 0)) mask_bad++;
    } else if (!isfinite(g)) {
      mask_bad++;
    } else {
      if (fabs(w) > maxref) maxref = fabs(w);
      if (fabs(g - w) > maxd) maxd = fabs(g - w);
    }
  }
  double rel = maxref > 0 ? maxd / maxref : maxd;
  stage_note(s, mask_bad == 0, "-inf mask %s (%zu of %zu)", mask_bad ? "DIFFERS" : "identical",
             n_inf, n);
  stage_note(s, rel <= 1e-5, "max |d|/max |ref| %.1e%s", rel, rel <= 1e-5 ? "" : " > 1e-5");
}

/* bf16 [rows, 512] against double; lse (may be NULL) against double. */
static void check_attention(stage *s, const char *what, const uint16_t *got, const double *want,
                            int64_t rows, const float *lse_got, const double *lse_want) {
  double worst = 0, d2 = 0, r2 = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < rows * MLA_DIM; i++) {
    double g = ref_bf16_to_float(got[i]), w = want[i];
    double d = fabs(g - w), lim = 1e-2 * fmax(1.0, fabs(w));
    if (!(d <= lim)) bad++;
    if (d / lim > worst || isnan(d)) worst = isnan(d) ? INFINITY : d / lim;
    d2 += (g - w) * (g - w), r2 += w * w;
  }
  double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
  int ok = bad == 0 && rel <= 4e-3;
  double lse_worst = 0;
  int64_t lse_bad = 0;
  if (lse_got)
    for (int64_t r = 0; r < rows; r++) {
      double g = lse_got[r], w = lse_want[r];
      int fine = isinf(w) ? (isinf(g) && (g < 0) == (w < 0)) : fabs(g - w) <= ref_lse_tol(w);
      if (!fine) lse_bad++;
      if (isfinite(w) && fabs(g - w) > lse_worst) lse_worst = fabs(g - w);
    }
  ok = ok && lse_bad == 0;
  if (lse_got)
    stage_note(s, ok, "%s: max |d|/tol %.3g, rel L2 %.2e, lse max |d| %.1e%s", what, worst, rel,
               lse_worst, bad || lse_bad ? " (beyond tolerance)" : "");
  else
    stage_note(s, ok, "%s: max |d|/tol %.3g, rel L2 %.2e%s", what, worst, rel,
               bad ? " (beyond tolerance)" : "");
}

/* ---- sample mode (--sample N, --full) ---------------------------------------------- */
/* The caches are filled on the device only and every stage's reference runs
 * for a few sequences (the first, the last and seeded random ones) and their
 * decode rows, over inputs read back from the device for those rows alone;
 * the header comment says what is and is not checked. */

/* Picks min(cfg.sample, B) sequences (0, B - 1, then seeded random ones,
 * ascending) and, per sequence, up to CHECK_CHUNKS of its prefill chunks
 * (the first, the last, seeded random ones). Its own random stream: the
 * data do not depend on the sample. */
static void pick_sample(int64_t B, const int32_t *seq_len) {
  uint64_t rs = cfg.seed * 0xD1B54A32D192ED03ull + 0x5A3B;
  nsmp = cfg.sample < B ? cfg.sample : B;
  sq = xcalloc(nb2(nsmp, sizeof *sq));
  uint8_t *taken = xcalloc(nb2(B, 1));
  int64_t n = 1;
  taken[0] = 1;
  if (nsmp > 1) taken[B - 1] = 1, n++;
  while (n < nsmp) {
    const int64_t b = (int64_t)(rng64_next(&rs) % (uint64_t)B);
    if (!taken[b]) taken[b] = 1, n++;
  }
  n = 0;
  for (int64_t b = 0; b < B; b++) {
    if (!taken[b]) continue;
    sampled *x = &sq[n++];
    x->b = b;
    x->nck = (seq_len[b] + CHUNK - 1) / CHUNK;
    x->chk = xcalloc(nb2(x->nck, 1));
    int64_t m = 1, want = x->nck < CHECK_CHUNKS ? x->nck : CHECK_CHUNKS;
    x->chk[0] = 1;
    if (want > 1) x->chk[x->nck - 1] = 1, m++;
    while (m < want) {
      const int64_t k = (int64_t)(rng64_next(&rs) % (uint64_t)x->nck);
      if (!x->chk[k]) x->chk[k] = 1, m++;
    }
  }
  free(taken);
}

static void buf_read_at(cl_mem m, size_t offset, size_t size, void *dst) {
  if (!size) return;
  cl_int err = clEnqueueReadBuffer(clq, m, CL_TRUE, offset, size, dst, 0, NULL, NULL);
  if (err != CL_SUCCESS) die("clEnqueueReadBuffer: OpenCL error %d", (int)err);
}

/* Column block [col, col + width) bytes of rows rows (row pitch bytes) into
 * dst, packed. */
static void buf_read_cols(cl_mem m, size_t col, size_t width, size_t rows, size_t pitch,
                          void *dst) {
  if (!width || !rows) return;
  const size_t org[3] = {col, 0, 0}, host[3] = {0, 0, 0}, reg[3] = {width, rows, 1};
  cl_int err = clEnqueueReadBufferRect(clq, m, CL_TRUE, org, host, reg, pitch, 0, width, 0, dst,
                                       0, NULL, NULL);
  if (err != CL_SUCCESS) die("clEnqueueReadBufferRect: OpenCL error %d", (int)err);
}

/* Blocks bt_row[j0 .. j0 + n) of a paged cache (stride bytes a block) from
 * m into dst, packed in table order (a -1 entry reads as zeros). */
static void read_blocks(cl_mem m, int64_t stride, const int32_t *bt_row, int64_t j0, int64_t n,
                        uint8_t *dst) {
  for (int64_t i = 0; i < n; i++) {
    const int64_t phys = bt_row[j0 + i];
    uint8_t *d = dst + nb2(i, stride);
    if (phys < 0) {
      memset(d, 0, (size_t)stride);
      continue;
    }
    cl_int err = clEnqueueReadBuffer(clq, m, CL_FALSE, nb2(phys, stride), (size_t)stride, d, 0,
                                     NULL, NULL);
    if (err != CL_SUCCESS) die("clEnqueueReadBuffer (cache block): OpenCL error %d", (int)err);
  }
  if (clFinish(clq) != CL_SUCCESS) die("clFinish failed");
}

/* A slot of the cache (bs rows a block) as a slot of the packed image of
 * bt_row[j0 .. j0 + n): -1 stays -1, a slot in none of those blocks is -2. */
static int32_t local_slot(int64_t slot, const int32_t *bt_row, int64_t j0, int64_t n, int bs) {
  if (slot < 0) return -1;
  for (int64_t i = 0; i < n; i++)
    if (bt_row[j0 + i] == slot / bs) return (int32_t)(i * bs + slot % bs);
  return -2;
}

/* Roughly normal, unit variance, from one 64-bit draw (its four 16-bit
 * quarters summed): the sample mode's prefill pool is large. */
static float gauss16(void) {
  const uint64_t r = rnd64();
  const double s = (double)(r & 0xFFFF) + (double)(r >> 16 & 0xFFFF) +
                   (double)(r >> 32 & 0xFFFF) + (double)(r >> 48);
  return (float)((s * 0x1p-16 - 2.0) * 1.7320508075688772);
}

/* Sample mode's prefill input: per head one pool of pool_rows = TC + x
 * projected kv | score rows (fp32, on the device once); chunk k reads its
 * T_k rows from row pool_off(k) on, so the reference can find the row of
 * any token (pool_row) without keeping a chunk's data. */
typedef struct prefill_check {
  int64_t B, Wst, Wc1, P, x;
  const int32_t *seq_len, *cmp_bt;
  int32_t *lbt;                     /* [Wst] scratch, all -1 between calls */
  const float *pool[2], *ape[2], *nw[2], *cos_sin;
  float eps;
  cl_mem state_m[2], cache_m[2];
  /* tallies: state rows compared / differing, cache blocks and rows compared */
  int64_t st_rows[2], st_bad[2], blocks[2], blk_bad[2], rows[2];
  char st_first[2][96], blk_first[2][96];
  unsigned ref_f;
} prefill_check;

static int64_t pool_off(int64_t k, int64_t x) {
  return (int64_t)((uint64_t)k * 40503u % (uint64_t)(x + 1));
}

/* The pool row that token (b, q) of the prefill read. */
static int64_t pool_row(const prefill_check *c, int64_t b, int64_t q) {
  const int64_t k = q / CHUNK;
  int64_t i = q - k * CHUNK;
  for (int64_t r = 0; r < b; r++) { /* the tokens of sequences before b in chunk k */
    const int64_t n = c->seq_len[r] - k * CHUNK;
    i += n < 0 ? 0 : n > CHUNK ? CHUNK : n;
  }
  return pool_off(k, c->x) + i;
}

_Static_assert(CHUNK == RATIO * CMP_BS, "a prefill chunk fills one compressed block");

/* Chunk k of sequence b, right after its calls: its state rows (positions
 * 256k - 4 .. the chunk's end: the previous chunk's last block, which this
 * chunk's first window reads, and the chunk's own) and its compressed block
 * in both caches, against the reference run from scratch on the same pool
 * rows: save_states of those positions into a state image of their own, then
 * compress + insert of every window the chunk closes into a one-block image.
 * A window that read another chunk's or another sequence's state rows, or a
 * ring slot the chunk had overwritten, differs. */
static void check_prefill_chunk(prefill_check *c, int64_t b, int64_t k) {
  enum { NQ = CHUNK + ST_BS };
  const int64_t len = c->seq_len[b];
  const int64_t qa = k * CHUNK - ST_BS > 0 ? k * CHUNK - ST_BS : 0;
  const int64_t qe = len < (k + 1) * CHUNK ? len : (k + 1) * CHUNK;
  const int64_t nq = qe - qa, ja = qa / ST_BS, nlb = (qe - 1) / ST_BS - ja + 1;
  int64_t qpos[NQ], lslot[NQ], cslot[NQ], prow[NQ];
  int32_t treq[NQ];
  if (nq <= 0 || nq > NQ) die("check_prefill_chunk: %lld positions", (long long)nq);
  for (int64_t i = 0; i < nq; i++) {
    const int64_t q = qa + i;
    qpos[i] = q, treq[i] = 0;
    lslot[i] = (q / ST_BS - ja) * ST_BS + q % ST_BS;
    cslot[i] = q % RATIO == RATIO - 1 && q >= k * CHUNK ? q / RATIO - k * CMP_BS : -1;
    prow[i] = pool_row(c, b, q);
  }
  const int64_t phys = k < c->Wc1 ? c->cmp_bt[b * c->Wc1 + k] : -1;
  for (int h = 0; h < 2; h++) {
    const int64_t hd = h ? IDX_DIM : MLA_DIM, SW = 2 * hd, RW = 2 * SW; /* row: kv | score */
    float *rows = xmalloc(nb3(nq, RW, 4));
    for (int64_t i = 0; i < nq; i++)
      memcpy(rows + i * RW, c->pool[h] + prow[i] * RW, nb2(RW, 4));
    float *lst = xcalloc(nb3(mul_ck(nlb, ST_BS), RW, 4));
    ref_state rs = {lst, nlb, ST_BS, ST_BS * RW, RW};
    c->ref_f |= ref_compressor_save_states(&rs, rows, RW, rows + SW, RW, c->ape[h], SW, qpos,
                                           lslot, nq, RATIO, SW);
    /* The device's state ring of sequence b (RING blocks from block b * RING). */
    const size_t ring_bytes = nb3(RING * ST_BS, RW, 4);
    float *ring = xmalloc(ring_bytes);
    buf_read_at(c->state_m[h], nb2(b, (int64_t)ring_bytes), ring_bytes, ring);
    for (int64_t i = 0; i < nq; i++) {
      const int64_t q = qpos[i];
      const float *dev = ring + ((q / ST_BS) % RING * ST_BS + q % ST_BS) * RW;
      if (memcmp(dev, lst + lslot[i] * RW, nb2(RW, 4)) && !c->st_bad[h]++)
        snprintf(c->st_first[h], sizeof c->st_first[h], "seq %lld chunk %lld position %lld",
                 (long long)b, (long long)k, (long long)q);
    }
    c->st_rows[h] += nq;
    if (phys >= 0) {
      const int64_t stride = h ? IDX_STRIDE : MLA_STRIDE;
      uint8_t *img = xcalloc(nb2(stride, 1)), *dev = xmalloc(nb2(stride, 1));
      for (int64_t j = ja; j < ja + nlb; j++) c->lbt[j] = (int32_t)(j - ja);
      /* The chunk's own tokens (the ones before it would read rows before qa). */
      const int64_t i0 = k * CHUNK - qa;
      ref_compress_args ca = {&rs, c->lbt, 1, c->Wst, c->Wst, 1, treq + i0, qpos + i0,
                              lslot + i0, cslot + i0, nq - i0,
                              c->nw[h], c->cos_sin, ROPE_DIM, c->P, c->eps, RATIO,
                              h ? REF_CACHE_INDEXER_FP8 : REF_CACHE_MLA_FP8, img, 1, CMP_BS,
                              stride, NULL};
      c->ref_f |= ref_compressor_compress_insert(&ca);
      for (int64_t j = ja; j < ja + nlb; j++) c->lbt[j] = -1;
      buf_read_at(c->cache_m[h], nb2(phys, stride), (size_t)stride, dev);
      if (memcmp(dev, img, (size_t)stride) && !c->blk_bad[h]++) {
        int64_t at = 0;
        while (dev[at] == img[at]) at++;
        snprintf(c->blk_first[h], sizeof c->blk_first[h],
                 "seq %lld block %lld byte %lld (0x%02x, want 0x%02x)", (long long)b,
                 (long long)k, (long long)at, dev[at], img[at]);
      }
      c->blocks[h]++;
      for (int64_t i = 0; i < nq; i++) c->rows[h] += cslot[i] >= 0;
      free(img), free(dev);
    }
    free(rows), free(lst), free(ring);
  }
}

/* ---- the demo ------------------------------------------------------------------------ */

static int all_digits(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (!isdigit((unsigned char)*s)) return 0;
  return 1;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: dsacl-demo [--device N|NAME] [--json] [--quick | --full] [--sample N]\n"
          "                  [--seqs B] [--context L] [--heads H] [--topk K] [--window W]\n"
          "                  [--seed S] [--two-queues]\n"
          "One DeepSeek-V4-Flash decode step of the sparse-attention path on synthetic\n"
          "data (the compressed caches filled by the compressor, the output quantized\n"
          "for the O projection), each stage on the device, checked against the C\n"
          "reference and timed.\n"
          "defaults: --seqs 16 --context 4096 --heads 64 --topk 512 --window 128\n"
          "--quick:  --seqs 4 --context 1024 --heads 16 --topk 128 --window 128\n"
          "--full:   --seqs 64 --context 131072 --heads 64 --topk 512 --window 128\n"
          "          --sample 4 (the V4-Flash layer at full context: 32768 compressed\n"
          "          rows a sequence)\n"
          "(explicit flags override either set). Sequence b holds max(1, L - 3b) tokens.\n"
          "--two-queues: the step by decode_step_two_queues() (the SWA indices and the\n"
          "          q-norm insert on a second queue, beside the indexer's stages).\n"
          "--sample N: sample mode. Check N sequences (the first, the last, random ones\n"
          "          from --seed; their decode rows in stages 2-9) and up to %d prefill\n"
          "          chunks of each, instead of every row: the caches are filled on the\n"
          "          device only (the SWA cache holds just each window's blocks), each\n"
          "          stage's reference runs for the sampled rows over their inputs read\n"
          "          back from the device. Without it every row of every stage is\n"
          "          checked. tests/dsacl-demo.c's header says what is and is not.\n"
          "Exit: 0 PASS, 1 FAIL, 77 no OpenCL device.\n",
          CHECK_CHUNKS);
}

static int64_t parse_int(const char *flag, const char *v, int64_t lo, int64_t hi) {
  char *end;
  long long x = v ? strtoll(v, &end, 10) : 0;
  if (!v || *end || x < lo || x > hi) {
    fprintf(stderr, "dsacl-demo: %s needs an integer in [%lld, %lld]\n", flag, (long long)lo,
            (long long)hi);
    exit(2);
  }
  return x;
}

int main(int argc, char **argv) {
  host_s0 = now_s();
  const char *device = NULL;
  int64_t seqs = -1, context = -1, heads = -1, topk = -1, window = -1, sample = -1;
  cfg.seed = 20250501;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--json")) {
      json = 1;
    } else if (!strcmp(a, "--quick")) {
      cfg.quick = 1;
    } else if (!strcmp(a, "--full")) {
      cfg.full = 1;
    } else if (!strcmp(a, "--two-queues")) {
      cfg.two_queues = 1;
    } else if (!strcmp(a, "--sample")) {
      sample = parse_int(a, v, 1, 4096), i++;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--device") && v) {
      device = v, i++;
    } else if (!strcmp(a, "--seqs")) {
      seqs = parse_int(a, v, 1, 4096), i++;
    } else if (!strcmp(a, "--context")) {
      context = parse_int(a, v, 1, 1 << 20), i++;
    } else if (!strcmp(a, "--heads")) {
      heads = parse_int(a, v, 1, 256), i++;
    } else if (!strcmp(a, "--topk")) {
      topk = parse_int(a, v, 1, DSA_TOPK_MAX_K), i++;
    } else if (!strcmp(a, "--window")) {
      window = parse_int(a, v, 1, 1 << 16), i++;
    } else if (!strcmp(a, "--seed")) {
      cfg.seed = (uint64_t)parse_int(a, v, 0, INT64_MAX), i++;
    } else {
      fprintf(stderr, "dsacl-demo: unknown or incomplete argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (cfg.quick && cfg.full) {
    fprintf(stderr, "dsacl-demo: --quick and --full exclude each other\n");
    return 2;
  }
  cfg.seqs = seqs > 0 ? seqs : cfg.quick ? 4 : cfg.full ? 64 : 16;
  cfg.context = context > 0 ? context : cfg.quick ? 1024 : cfg.full ? 131072 : 4096;
  cfg.heads = heads > 0 ? heads : cfg.quick ? 16 : 64;
  cfg.topk = topk > 0 ? topk : cfg.quick ? 128 : 512;
  cfg.window = window > 0 ? window : 128;
  cfg.sample = sample > 0 ? sample : cfg.full ? 4 : 0;
  smode = cfg.sample > 0;
  rng_state = cfg.seed * 0x9E3779B97F4A7C15ull + 1;

  const int64_t B = cfg.seqs, L = cfg.context, H = cfg.heads, K = cfg.topk, W = cfg.window;
  const int64_t T = B * NEXT_N;

  /* ---- device --------------------------------------------------------------------- */
  dsa_context_options o;
  dsa_context_options_default(&o);
  if (device && all_digits(device))
    o.device_index = atoi(device);
  else if (device)
    o.device_name = device;
  dsa_status st = dsa_context_create(&ctx, &o);
  if (st == DSA_ERR_NO_DEVICE) {
    fprintf(stderr, "dsacl-demo: no OpenCL device: %s\n", dsa_last_error());
    finish(&cfg, 0, "device");
    return device ? 1 : 77; /* none at all: meson's "skipped" */
  }
  if (st != DSA_OK) die("dsa_context_create: %s: %s", dsa_status_name(st), dsa_last_error());
  if ((st = dsa_queue_create(&queue, ctx, DSA_QUEUE_PROFILING)) != DSA_OK)
    die("dsa_queue_create: %s: %s", dsa_status_name(st), dsa_last_error());
  snprintf(device_name, sizeof device_name, "%s", dsa_context_device_name(ctx));
  clctx = dsa_context_cl_context(ctx);
  clq = dsa_queue_cl(queue);
  if (cfg.two_queues && (st = dsa_queue_create(&side_queue, ctx, DSA_QUEUE_PROFILING)) != DSA_OK)
    die("dsa_queue_create: %s: %s", dsa_status_name(st), dsa_last_error());
  {
    cl_device_id dev = dsa_context_cl_device(ctx);
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL) !=
        CL_SUCCESS)
      max_alloc = 0; /* unknown: OpenCL decides */
    if (clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global_mem, &global_mem, NULL) !=
        CL_SUCCESS)
      global_mem = 0;
  }
  double t_w = now_s();
  if ((st = dsa_context_warmup(ctx)) != DSA_OK)
    die("dsa_context_warmup: %s: %s", dsa_status_name(st), dsa_last_error());
  warmup_s = now_s() - t_w;

  /* ---- the batch and its paging ------------------------------------------------------ */
  int32_t *seq_len = xmalloc(nb2(B, 4)), *n_cmp = xmalloc(nb2(B, 4));
  int64_t *pos = xmalloc(nb2(T, 8));
  int32_t *tok_req = xmalloc(nb2(T, 4));
  /* The past tokens in the SWA cache: all of them, or in sample mode only
   * the window's (first_past .. L_b - 2; the bench does the same), the
   * older blocks -1 in the table as a server that freed them leaves it. */
  int64_t *first_past = xmalloc(nb2(B, 8));
  int64_t n_past = 0, n_rows = 0, max_cmp = 0;
  for (int64_t b = 0; b < B; b++) {
    int64_t lb = L - 3 * b;
    seq_len[b] = (int32_t)(lb < 1 ? 1 : lb);
    n_cmp[b] = seq_len[b] / RATIO; /* compressed rows the decode token sees */
    pos[b] = seq_len[b] - 1, tok_req[b] = (int32_t)b;
    first_past[b] = smode && seq_len[b] > W ? seq_len[b] - W : 0;
    n_past = add_ck(n_past, seq_len[b] - 1 - first_past[b]), n_rows = add_ck(n_rows, n_cmp[b]);
    if (n_cmp[b] > max_cmp) max_cmp = n_cmp[b];
  }
  const int64_t Ws = (L + SWA_BS - 1) / SWA_BS;           /* SWA block-table width */
  const int64_t Wc = (L / RATIO + CMP_BS - 1) / CMP_BS;   /* compressed width */
  const int64_t Wc1 = Wc ? Wc : 1;
  const int64_t mml = Wc1 * CMP_BS;                       /* logits columns */
  /* Physical blocks: what the batch needs plus B spare ones, in a random order. */
  int64_t swa_need = 0, cmp_need = 0;
  for (int64_t b = 0; b < B; b++)
    swa_need = add_ck(swa_need, (seq_len[b] + SWA_BS - 1) / SWA_BS - first_past[b] / SWA_BS),
    cmp_need = add_ck(cmp_need, (n_cmp[b] + CMP_BS - 1) / CMP_BS);
  const int64_t swa_nb = add_ck(swa_need, B), cmp_nb = add_ck(cmp_need, B);
  /* Slots are int32 in the index tensors. */
  if (mul_ck(swa_nb, SWA_BS) > INT32_MAX || mul_ck(cmp_nb, CMP_BS) > INT32_MAX)
    die("%lld SWA / %lld C4 blocks: their slots do not fit int32 indices", (long long)swa_nb,
        (long long)cmp_nb);
  int32_t *swa_bt = xmalloc(nb3(B, Ws, 4)), *cmp_bt = xmalloc(nb3(B, Wc1, 4));
  {
    int32_t *perm = permutation(swa_nb);
    int64_t next = 0;
    for (int64_t b = 0; b < B; b++)
      for (int64_t j = 0; j < Ws; j++)
        swa_bt[b * Ws + j] =
            j * SWA_BS < seq_len[b] && j >= first_past[b] / SWA_BS ? perm[next++] : -1;
    free(perm);
    perm = permutation(cmp_nb);
    next = 0;
    for (int64_t b = 0; b < B; b++)
      for (int64_t j = 0; j < Wc1; j++)
        cmp_bt[b * Wc1 + j] = j * CMP_BS < n_cmp[b] ? perm[next++] : -1;
    free(perm);
  }
  snprintf(sizes_line, sizeof sizes_line,
           "%lld seqs x %lld..%lld tokens (decode positions L_b - 1), H = %lld MLA heads, "
           "indexer %d x %d, topk %lld, window %lld, ratio %d, blocks %d/%d/%d, next_n %d",
           (long long)B, (long long)seq_len[B - 1], (long long)seq_len[0], (long long)H,
           IDX_HEADS, IDX_DIM, (long long)K, (long long)W, RATIO, SWA_BS, CMP_BS, CMP_BS, NEXT_N);
  if (smode) pick_sample(B, seq_len);
  if (!json) {
    printf("dsacl-demo %s: one DeepSeek-V4-Flash decode step, sparse-attention path\n",
           dsa_version_string());
    printf("device: %s\n", device_name);
    printf("sizes:  %s\n", sizes_line);
    print_checked(stdout);
    printf("\n");
    fflush(stdout);
  }

  const size_t swa_bytes = nb2(swa_nb, MLA_STRIDE), c4_bytes = nb2(cmp_nb, MLA_STRIDE);
  const size_t ik_bytes = nb2(cmp_nb, IDX_STRIDE);
  cl_mem swa_mem = buf_new("SWA MLA cache", swa_bytes, NULL);
  cl_mem c4_mem = buf_new("C4 MLA cache", c4_bytes, NULL);
  cl_mem ik_mem = buf_new("indexer K cache", ik_bytes, NULL);
  dsa_paged_cache swa_cache = {.mem = swa_mem, .offset = 0, .num_blocks = swa_nb, .block_size = SWA_BS,
                               .block_stride = MLA_STRIDE, .format = DSA_CACHE_MLA_FP8};
  dsa_paged_cache c4_cache = {.mem = c4_mem, .offset = 0, .num_blocks = cmp_nb, .block_size = CMP_BS,
                               .block_stride = MLA_STRIDE, .format = DSA_CACHE_MLA_FP8};
  dsa_paged_cache ik_cache = {.mem = ik_mem, .offset = 0, .num_blocks = cmp_nb, .block_size = CMP_BS,
                               .block_stride = IDX_STRIDE, .format = DSA_CACHE_INDEXER_FP8};
  /* Host images the reference writes into (the device buffers start zeroed):
   * of the whole caches, or in sample mode of the sampled sequences' blocks
   * only (packed in block-table order, sq[i]'s views into the *_all arrays). */
  uint8_t *swa_img = NULL, *c4_img = NULL, *ik_img = NULL, *back = NULL;
  uint8_t *swa_ref_all = NULL, *swa_dev_all = NULL, *c4_dev_all = NULL, *ik_dev_all = NULL;
  int64_t s_swa_nb = 0, s_cmp_nb = 0; /* the sample's SWA and compressed blocks */
  if (!smode) {
    swa_img = xcalloc(swa_bytes), c4_img = xcalloc(c4_bytes), ik_img = xcalloc(ik_bytes);
    size_t big = swa_bytes > c4_bytes ? swa_bytes : c4_bytes;
    if (ik_bytes > big) big = ik_bytes;
    back = xmalloc(big); /* device read-backs */
  } else {
    for (int64_t i = 0; i < nsmp; i++) {
      const int64_t b = sq[i].b;
      sq[i].sj0 = first_past[b] / SWA_BS;
      sq[i].snb = (seq_len[b] + SWA_BS - 1) / SWA_BS - sq[i].sj0;
      sq[i].cnb = (n_cmp[b] + CMP_BS - 1) / CMP_BS;
      s_swa_nb = add_ck(s_swa_nb, sq[i].snb), s_cmp_nb = add_ck(s_cmp_nb, sq[i].cnb);
    }
    swa_ref_all = xcalloc(nb2(s_swa_nb, MLA_STRIDE));
    swa_dev_all = xcalloc(nb2(s_swa_nb, MLA_STRIDE));
    c4_dev_all = xcalloc(nb2(s_cmp_nb, MLA_STRIDE));
    ik_dev_all = xcalloc(nb2(s_cmp_nb, IDX_STRIDE));
    for (int64_t i = 0, so = 0, co = 0; i < nsmp; i++) {
      sq[i].swa_ref = swa_ref_all + nb2(so, MLA_STRIDE);
      sq[i].swa_dev = swa_dev_all + nb2(so, MLA_STRIDE);
      sq[i].c4_dev = c4_dev_all + nb2(co, MLA_STRIDE);
      sq[i].ik_dev = ik_dev_all + nb2(co, IDX_STRIDE);
      so += sq[i].snb, co += sq[i].cnb;
    }
  }
  ref_mla_cache swa_ref = {swa_img, swa_nb, SWA_BS, MLA_STRIDE};
  ref_mla_cache c4_ref = {c4_img, cmp_nb, CMP_BS, MLA_STRIDE};

  /* ---- 1a: SWA cache, past tokens ---------------------------------------------------- */
  {
    stage *s = stage_new("1a", "SWA cache insert (past tokens)");
    uint16_t *kv = random_bf16(nb2(n_past ? n_past : 1, MLA_DIM), 1.0);
    int64_t *slots = xmalloc(nb2(n_past ? n_past : 1, 8)), n = 0;
    int64_t *tok0 = xmalloc(nb2(add_ck(B, 1), 8)); /* sequence b's first token */
    for (int64_t b = 0; b < B; b++) {
      tok0[b] = n;
      for (int64_t p = first_past[b]; p + 1 < seq_len[b]; p++)
        slots[n++] = (int64_t)swa_bt[b * Ws + p / SWA_BS] * SWA_BS + p % SWA_BS;
    }
    tok0[B] = n;
    cl_mem kv_m = buf_new("SWA past kv", nb3(n_past, MLA_DIM, 2), kv);
    cl_mem sl_m = buf_new("SWA past slots", nb2(n_past, 8), slots);
    dsa_tensor kt = dsa_tensor_make(kv_m, 0, DSA_BF16, 2, (int64_t[]){n_past, MLA_DIM});
    dsa_tensor stt = dsa_tensor_make(sl_m, 0, DSA_I64, 1, (int64_t[]){n_past});
    TIMED(s, dsa_mla_cache_insert(queue, &kt, &stt, &swa_cache, NULL, evp));
    check_faults(s);
    unsigned f = 0;
    if (!smode) {
      f = ref_mla_insert(&swa_ref, kv, MLA_DIM, slots, n_past);
      buf_read(swa_mem, swa_bytes, back);
      stage_note(s, 1, "%lld tokens", (long long)n_past);
      check_bytes(s, "cache", back, swa_img, swa_bytes);
    } else {
      /* Each sampled sequence's tokens into an image of its blocks alone;
       * the device's blocks of that sequence must equal it byte for byte. */
      for (int64_t i = 0; i < nsmp; i++) {
        const int64_t b = sq[i].b, nb = tok0[b + 1] - tok0[b];
        ref_mla_cache lc = {sq[i].swa_ref, sq[i].snb, SWA_BS, MLA_STRIDE};
        int64_t *ls = xmalloc(nb2(nb ? nb : 1, 8));
        for (int64_t j = 0; j < nb; j++) {
          const int64_t p = first_past[b] + j;
          ls[j] = (p / SWA_BS - sq[i].sj0) * SWA_BS + p % SWA_BS;
        }
        f |= ref_mla_insert(&lc, kv + tok0[b] * MLA_DIM, MLA_DIM, ls, nb);
        read_blocks(swa_mem, MLA_STRIDE, swa_bt + b * Ws, sq[i].sj0, sq[i].snb, sq[i].swa_dev);
        free(ls);
      }
      stage_note(s, 1, "%lld tokens (the windows'); sample: %lld seqs", (long long)n_past,
                 (long long)nsmp);
      check_bytes(s, "their blocks", swa_dev_all, swa_ref_all, nb2(s_swa_nb, MLA_STRIDE));
    }
    if (f) stage_note(s, 0, "reference faults 0x%x", f);
    buf_free(kv_m), buf_free(sl_m);
    free(kv), free(slots), free(tok0);
  }

  /* ---- 1b-1f: the compressor fills the C4 MLA cache and the indexer K cache ---------- */
  /* As vLLM's DeepseekCompressor runs for a prefill, per C4 layer and per head
   * (the main head, hd 512, into the C4 MLA cache; the indexer's, hd 128,
   * into the indexer K cache): each token's projected kv and score rows (fp32;
   * here random) are saved with the ape row of p % 4 into an fp32 state cache
   * (dsa_compressor_save_states), then every token whose position closes a
   * window of 4 (p % 4 == 3) softmax-pools the 8 state rows p - 7 .. p,
   * RMSNorms, RoPEs and quantizes them into its compressed row c = p / 4
   * (dsa_compressor_compress_insert) at the slot dsa_index_compressed_slot_mapping
   * gives. The prefill covers all L_b tokens of a sequence, the decode token
   * at L_b - 1 included: in vLLM this step's own compressor call saves that
   * token's state and writes its row (when L_b % 4 == 0) before the indexer
   * reads the cache; the demo folds that call into the fill so that
   * decode_step() stays the attention path.
   *
   * Chunked, as a server's chunked prefill runs: one state row is 8 KiB (main)
   * + 2 KiB (indexer) of fp32, so the state of every token at the default
   * size (16 x 4096 tokens) would take 640 MiB on the device and as much
   * again for the reference's image, while a window only ever reads its own
   * 8 rows. Chunk k holds positions [256k, 256k + 256) of every sequence (one
   * save + compress pair per head per chunk); the state cache holds per
   * sequence a ring of 256 / 4 + 1 blocks of 4 rows (vLLM's C4 state block
   * size): the chunk's 64 blocks plus the previous chunk's last one, which the
   * chunk's first window reads (rows p - 7 .. p - 4). The state block table
   * of a chunk names only those live blocks (-1 elsewhere, as blocks that a
   * server freed), so a read outside a window would fault. */
  float *cos_sin = xmalloc(nb3(L, ROPE_DIM, 4));
  double inv_freq[ROPE_DIM / 2];
  for (int i = 0; i < ROPE_DIM / 2; i++) inv_freq[i] = pow(ROPE_THETA, -2.0 * i / ROPE_DIM);
  for (int64_t p = 0; p < L; p++) /* GPT-J RoPE over 64 dims, theta 10000 */
    for (int i = 0; i < ROPE_DIM / 2; i++) {
      double a = (double)p * inv_freq[i];
      cos_sin[p * ROPE_DIM + i] = (float)cos(a);
      cos_sin[p * ROPE_DIM + ROPE_DIM / 2 + i] = (float)sin(a);
    }
  const int64_t P = L;
  cl_mem cos_m = buf_new("cos_sin", nb3(P, ROPE_DIM, 4), cos_sin);
  dsa_tensor cos_t = dsa_tensor_make(cos_m, 0, DSA_F32, 2, (int64_t[]){P, ROPE_DIM});
  {
    stage *s_map = stage_new("1b", "compressed slot mapping");
    stage *s_sv[2] = {stage_new("1c", "compressor state save (C4, hd 512)"),
                      stage_new("1d", "compressor state save (indexer, hd 128)")};
    stage *s_ci[2] = {stage_new("1e", "compress+insert -> C4 MLA cache"),
                      stage_new("1f", "compress+insert -> indexer K (FP8)")};
    const int64_t TC = mul_ck(B, CHUNK);     /* most tokens a chunk holds */
    const int64_t nst = mul_ck(B, RING);     /* state blocks */
    /* The kv|score rows: one chunk's, new for every chunk; in sample mode a
     * pool of TC + TC / 4 rows, filled once, which chunk k reads from row
     * pool_off(k) on (so the sample's reference can find any token's row). */
    const int64_t pool_x = TC / 4, npool = smode ? add_ck(TC, pool_x) : TC;
    const int64_t Wst = (L + ST_BS - 1) / ST_BS; /* state block-table width */
    const int64_t nchunks = (L + CHUNK - 1) / CHUNK;
    static const int hd_of[2] = {MLA_DIM, IDX_DIM};
    /* Per head h: state [nst, 4, 2 SW] (SW = 2 hd: the window overlap), its
     * host image (not in sample mode), the kv|score projection [npool, 2 SW],
     * ape [4, SW] and the RMSNorm weight [hd] (bf16, as the checkpoint
     * stores it). */
    cl_mem state_m[2], ks_m[2], ape_m[2], nw_m[2];
    float *state_img[2], *ks[2], *ape[2], *nw_f[2];
    size_t state_bytes[2];
    for (int h = 0; h < 2; h++) {
      const int64_t SW = 2 * hd_of[h];
      state_bytes[h] = nb3(mul_ck(nst, ST_BS), 2 * SW, 4);
      state_m[h] = buf_new(h ? "compressor state (indexer)" : "compressor state (C4)",
                           state_bytes[h], NULL);
      state_img[h] = smode ? NULL : xcalloc(state_bytes[h]);
      ks[h] = xmalloc(nb3(npool, 2 * SW, 4));
      if (smode)
        for (int64_t i = 0; i < npool * 2 * SW; i++)
          ks[h][i] = i % (2 * SW) < SW ? gauss16() : 2.0f * gauss16();
      ks_m[h] = buf_new(h ? "compressor kv|score (indexer)" : "compressor kv|score (C4)",
                        nb3(npool, 2 * SW, 4), smode ? ks[h] : NULL);
      ape[h] = xmalloc(nb3(RATIO, SW, 4));
      for (int64_t i = 0; i < RATIO * SW; i++) ape[h][i] = (float)(gauss() * 0.5);
      ape_m[h] = buf_new("compressor ape", nb3(RATIO, SW, 4), ape[h]);
      uint16_t *w = xmalloc(nb2(hd_of[h], 2));
      nw_f[h] = xmalloc(nb2(hd_of[h], 4));
      for (int d = 0; d < hd_of[h]; d++) {
        w[d] = ref_bf16_from_float((float)(1.0 + 0.25 * gauss()));
        nw_f[h][d] = ref_bf16_to_float(w[d]);
      }
      nw_m[h] = buf_new("compressor norm weight", nb2(hd_of[h], 2), w);
      free(w);
    }
    int64_t *cpos = xmalloc(nb2(TC, 8)), *sslot = xmalloc(nb2(TC, 8));
    int64_t *cslot_want = xmalloc(nb2(TC, 8)), *cslot_dev = xmalloc(nb2(TC, 8));
    int32_t *ct2r = xmalloc(nb2(TC, 4)), *qsl = xmalloc(nb2(add_ck(B, 1), 4));
    int32_t *cseq = xmalloc(nb2(B, 4)), *st_bt = xmalloc(nb3(B, Wst, 4));
    cl_mem cpos_m = buf_new("prefill positions", nb2(TC, 8), NULL),
           sslot_m = buf_new("prefill state slots", nb2(TC, 8), NULL);
    cl_mem cslot_m = buf_new("prefill C4 slots", nb2(TC, 8), NULL),
           ct2r_m = buf_new("prefill token_to_req", nb2(TC, 4), NULL);
    cl_mem qsl_m = buf_new("prefill query_start_loc", nb2(add_ck(B, 1), 4), NULL),
           cseq_m = buf_new("prefill seq_lens", nb2(B, 4), NULL);
    cl_mem st_bt_m = buf_new("state block table", nb3(B, Wst, 4), NULL);
    cl_mem cmp_bt0_m = buf_new("prefill C4 block table", nb3(B, Wc1, 4), cmp_bt);
    float *st_back = smode ? NULL : xmalloc(state_bytes[0]);
    int64_t n_tok = 0, n_win = 0, map_bad = 0;
    unsigned ref_f = 0;
    dsa_index_compressed_slot_mapping_params smp;
    dsa_index_compressed_slot_mapping_params_default(&smp);
    smp.compress_ratio = RATIO, smp.block_size = CMP_BS;
    dsa_compressor_params cp;
    dsa_compressor_params_default(&cp);
    cp.compress_ratio = RATIO;
    prefill_check pc = {B, Wst, Wc1, P, pool_x, seq_len, cmp_bt, NULL,
                        {ks[0], ks[1]}, {ape[0], ape[1]}, {nw_f[0], nw_f[1]}, cos_sin, cp.eps,
                        {state_m[0], state_m[1]}, {c4_mem, ik_mem}, {0}, {0}, {0}, {0}, {0},
                        {{0}}, {{0}}, 0};
    if (smode) {
      pc.lbt = xmalloc(nb2(Wst, 4));
      for (int64_t j = 0; j < Wst; j++) pc.lbt[j] = -1;
    }
    for (int64_t k = 0; k < nchunks; k++) {
      /* The chunk's tokens, sequence by sequence (vLLM's query_start_loc). */
      int64_t T_k = 0;
      qsl[0] = 0;
      /* The state block table changes only in columns [c_lo, c_hi): the
       * previous chunk's live blocks (now -1) and this chunk's (the whole
       * table at the first chunk); only those are rewritten and uploaded. */
      const int64_t c_lo = k ? ((k - 1) * CHUNK / ST_BS - 1 > 0 ? (k - 1) * CHUNK / ST_BS - 1 : 0)
                             : 0;
      const int64_t c_hi = k && (k + 1) * CHUNK / ST_BS < Wst ? (k + 1) * CHUNK / ST_BS : Wst;
      for (int64_t b = 0; b < B; b++) {
        const int64_t p0 = k * CHUNK;
        const int64_t p1 = seq_len[b] < (k + 1) * CHUNK ? seq_len[b] : (k + 1) * CHUNK;
        for (int64_t p = p0; p < p1; p++, T_k++) {
          const int64_t j = p / ST_BS;
          cpos[T_k] = p, ct2r[T_k] = (int32_t)b;
          sslot[T_k] = (b * RING + j % RING) * ST_BS + p % ST_BS;
          n_win += p % RATIO == RATIO - 1;
        }
        qsl[b + 1] = (int32_t)T_k;
        cseq[b] = (int32_t)(p1 > p0 ? p1 : seq_len[b]);
        /* Live state blocks: the chunk's and the one before it. */
        const int64_t lo = p0 / ST_BS - 1, hi = (p1 + ST_BS - 1) / ST_BS;
        for (int64_t j = c_lo; j < c_hi; j++)
          st_bt[b * Wst + j] = p1 > p0 && j >= lo && j < hi ? (int32_t)(b * RING + j % RING) : -1;
      }
      n_tok += T_k;
      for (int h = 0; h < 2 && !smode; h++) /* projected kv | score rows, fp32 */
        for (int64_t i = 0; i < T_k * 4 * hd_of[h]; i++)
          ks[h][i] = (float)(i % (4 * hd_of[h]) < 2 * hd_of[h] ? gauss() : 2.0 * gauss());
      const struct { cl_mem m; const void *p; size_t n; } up[] = {
          {cpos_m, cpos, nb2(T_k, 8)}, {sslot_m, sslot, nb2(T_k, 8)},
          {ct2r_m, ct2r, nb2(T_k, 4)}, {qsl_m, qsl, nb2(add_ck(B, 1), 4)},
          {cseq_m, cseq, nb2(B, 4)}, {st_bt_m, st_bt, k ? 0 : nb3(B, Wst, 4)},
          {ks_m[0], ks[0], smode ? 0 : nb3(T_k, 4 * MLA_DIM, 4)},
          {ks_m[1], ks[1], smode ? 0 : nb3(T_k, 4 * IDX_DIM, 4)}};
      for (size_t i = 0; i < sizeof up / sizeof up[0]; i++)
        if (up[i].n && clEnqueueWriteBuffer(clq, up[i].m, CL_TRUE, 0, up[i].n, up[i].p, 0, NULL,
                                            NULL) != CL_SUCCESS)
          die("clEnqueueWriteBuffer failed");
      if (k && c_hi > c_lo) {
        const size_t org[3] = {nb2(c_lo, 4), 0, 0}, reg[3] = {nb2(c_hi - c_lo, 4), (size_t)B, 1};
        if (clEnqueueWriteBufferRect(clq, st_bt_m, CL_TRUE, org, org, reg, nb2(Wst, 4), 0,
                                     nb2(Wst, 4), 0, st_bt, 0, NULL, NULL) != CL_SUCCESS)
          die("clEnqueueWriteBufferRect (state block table) failed");
      }
      dsa_tensor pos_k = dsa_tensor_make(cpos_m, 0, DSA_I64, 1, (int64_t[]){T_k});
      dsa_tensor sslot_k = dsa_tensor_make(sslot_m, 0, DSA_I64, 1, (int64_t[]){T_k});
      dsa_tensor cslot_k = dsa_tensor_make(cslot_m, 0, DSA_I64, 1, (int64_t[]){T_k});
      dsa_tensor t2r_k = dsa_tensor_make(ct2r_m, 0, DSA_I32, 1, (int64_t[]){T_k});
      dsa_tensor qsl_t = dsa_tensor_make(qsl_m, 0, DSA_I32, 1, (int64_t[]){B + 1});
      dsa_tensor cseq_t = dsa_tensor_make(cseq_m, 0, DSA_I32, 1, (int64_t[]){B});
      dsa_tensor st_bt_t = dsa_tensor_make(st_bt_m, 0, DSA_I32, 2, (int64_t[]){B, Wst});
      dsa_tensor cbt_t = dsa_tensor_make(cmp_bt0_m, 0, DSA_I32, 2, (int64_t[]){B, Wc1});

      /* 1b: compressed slot of every token that closes a window (else -1). */
      TIMED_CHUNK(k, s_map, dsa_index_compressed_slot_mapping(queue, &qsl_t, &cseq_t, &cbt_t, &cslot_k,
                                                        &smp, evp));
      check_faults(s_map);
      ref_table crt = {cmp_bt, B, Wc1, Wc1};
      ref_f |= ref_compressed_slot_mapping(qsl, cseq, crt, RATIO, CMP_BS, cslot_want, T_k);
      buf_read(cslot_m, nb2(T_k, 8), cslot_dev);
      map_bad += memcmp(cslot_dev, cslot_want, nb2(T_k, 8)) != 0;

      for (int h = 0; h < 2; h++) {
        const int64_t SW = 2 * hd_of[h];
        /* kv and score: the two halves of one [T, 2 SW] projection output. */
        const size_t koff = smode ? nb3(pool_off(k, pool_x), 2 * SW, 4) : 0;
        dsa_tensor kv_k = dsa_tensor_make(ks_m[h], koff, DSA_F32, 2, (int64_t[]){T_k, SW});
        dsa_tensor sc_k =
            dsa_tensor_make(ks_m[h], koff + nb2(SW, 4), DSA_F32, 2, (int64_t[]){T_k, SW});
        kv_k.stride[0] = sc_k.stride[0] = 2 * SW;
        dsa_tensor ape_t = dsa_tensor_make(ape_m[h], 0, DSA_F32, 2, (int64_t[]){RATIO, SW});
        dsa_tensor st_t =
            dsa_tensor_make(state_m[h], 0, DSA_F32, 3, (int64_t[]){nst, ST_BS, 2 * SW});
        TIMED_CHUNK(k, s_sv[h], dsa_compressor_save_states(queue, &kv_k, &sc_k, &ape_t, &pos_k,
                                                           &sslot_k, &st_t, &cp, evp));
        check_faults(s_sv[h]);
        ref_state rs = {state_img[h], nst, ST_BS, ST_BS * 2 * SW, 2 * SW};
        if (!smode) {
          ref_f |= ref_compressor_save_states(&rs, ks[h], 2 * SW, ks[h] + SW, 2 * SW, ape[h], SW,
                                              cpos, sslot, T_k, RATIO, SW);
          buf_read(state_m[h], state_bytes[h], st_back);
          if (memcmp(st_back, state_img[h], state_bytes[h]))
            check_bytes(s_sv[h], "state", st_back, state_img[h], state_bytes[h]);
        }

        dsa_tensor nw_t = dsa_tensor_make(nw_m[h], 0, DSA_BF16, 1, (int64_t[]){hd_of[h]});
        TIMED_CHUNK(k, s_ci[h],
                    dsa_compressor_compress_insert(queue, &st_t, &st_bt_t, &t2r_k, &pos_k,
                                                   &sslot_k, &nw_t, &cos_t, &cslot_k,
                                                   h ? &ik_cache : &c4_cache, &cp, evp));
        check_faults(s_ci[h]);
        if (smode) continue;
        ref_compress_args ca = {&rs, st_bt, B, Wst, Wst, 1, ct2r, cpos, sslot, cslot_want, T_k,
                                nw_f[h], cos_sin, ROPE_DIM, P, cp.eps, RATIO,
                                h ? REF_CACHE_INDEXER_FP8 : REF_CACHE_MLA_FP8,
                                h ? ik_img : c4_img, cmp_nb, CMP_BS, h ? IDX_STRIDE : MLA_STRIDE,
                                NULL};
        ref_f |= ref_compressor_compress_insert(&ca);
      }
      /* Sample mode: the sampled sequences' checked chunks, now (the next
       * chunk overwrites the state ring). */
      for (int64_t i = 0; smode && i < nsmp; i++)
        if (k < sq[i].nck && sq[i].chk[k]) check_prefill_chunk(&pc, sq[i].b, k);
    }
    stage_note(s_map, 1, "%lld chunks of <= %d tokens a sequence, %lld tokens, %lld windows",
               (long long)nchunks, CHUNK, (long long)n_tok, (long long)n_win);
    stage_note(s_map, map_bad == 0, "slots %s", map_bad ? "DIFFER" : "equal");
    for (int h = 0; h < 2 && !smode; h++) {
      if (s_sv[h]->ok)
        stage_note(s_sv[h], 1, "state (ring of %d rows a sequence): %.1f MiB equal after each "
                   "chunk", RING * ST_BS, (double)state_bytes[h] / (1u << 20));
      buf_read(h ? ik_mem : c4_mem, h ? ik_bytes : c4_bytes, back);
      stage_note(s_ci[h], 1, "%lld rows", (long long)n_rows);
      check_bytes(s_ci[h], "cache", back, h ? ik_img : c4_img, h ? ik_bytes : c4_bytes);
    }
    for (int h = 0; h < 2 && smode; h++) {
      if (pc.st_bad[h])
        stage_note(s_sv[h], 0, "sample: %lld of %lld state rows differ, first %s",
                   (long long)pc.st_bad[h], (long long)pc.st_rows[h], pc.st_first[h]);
      else
        stage_note(s_sv[h], 1, "sample: %lld state rows equal (the checked chunks' and the "
                   "block before each)", (long long)pc.st_rows[h]);
      stage_note(s_ci[h], 1, "%lld rows", (long long)n_rows);
      if (pc.blk_bad[h])
        stage_note(s_ci[h], 0, "sample: %lld of %lld blocks differ, first %s",
                   (long long)pc.blk_bad[h], (long long)pc.blocks[h], pc.blk_first[h]);
      else
        stage_note(s_ci[h], 1, "sample: %lld blocks (%lld rows) equal", (long long)pc.blocks[h],
                   (long long)pc.rows[h]);
    }
    ref_f |= pc.ref_f;
    free(pc.lbt);
    if (ref_f) stage_note(s_map, 0, "reference faults 0x%x", ref_f);
    for (int h = 0; h < 2; h++) {
      buf_free(state_m[h]), buf_free(ks_m[h]);
      buf_free(ape_m[h]), buf_free(nw_m[h]);
      free(state_img[h]), free(ks[h]), free(ape[h]), free(nw_f[h]);
    }
    buf_free(cpos_m), buf_free(sslot_m), buf_free(cslot_m);
    buf_free(ct2r_m), buf_free(qsl_m), buf_free(cseq_m);
    buf_free(st_bt_m), buf_free(cmp_bt0_m);
    free(cpos), free(sslot), free(cslot_want), free(cslot_dev), free(ct2r), free(qsl);
    free(cseq), free(st_bt), free(st_back);
  }

  /* Sample mode: the sampled sequences' blocks of both compressed caches, as
   * the prefill left them: the inputs of their logits and attention
   * references (no whole-cache read-back). */
  for (int64_t i = 0; i < nsmp && smode; i++) {
    read_blocks(c4_mem, MLA_STRIDE, cmp_bt + sq[i].b * Wc1, 0, sq[i].cnb, sq[i].c4_dev);
    read_blocks(ik_mem, IDX_STRIDE, cmp_bt + sq[i].b * Wc1, 0, sq[i].cnb, sq[i].ik_dev);
  }

  /* ---- per-step metadata on the device ----------------------------------------------- */
  cl_mem pos_m = buf_new("positions", nb2(T, 8), pos),
         t2r_m = buf_new("token_to_req", nb2(T, 4), tok_req);
  cl_mem swa_bt_m = buf_new("SWA block table", nb3(B, Ws, 4), swa_bt);
  cl_mem cmp_bt_m = buf_new("C4 block table", nb3(B, Wc1, 4), cmp_bt);
  cl_mem ctx_m = buf_new("context_lens", nb2(B, 4), n_cmp);
  dsa_tensor pos_t = dsa_tensor_make(pos_m, 0, DSA_I64, 1, (int64_t[]){T});
  dsa_tensor t2r_t = dsa_tensor_make(t2r_m, 0, DSA_I32, 1, (int64_t[]){T});
  dsa_tensor swa_bt_t = dsa_tensor_make(swa_bt_m, 0, DSA_I32, 2, (int64_t[]){B, Ws});
  dsa_tensor cmp_bt_t = dsa_tensor_make(cmp_bt_m, 0, DSA_I32, 2, (int64_t[]){B, Wc1});
  dsa_tensor ctx_t = dsa_tensor_make(ctx_m, 0, DSA_I32, 2, (int64_t[]){B, NEXT_N});
  ref_table swa_rt = {swa_bt, B, Ws, Ws}, cmp_rt = {cmp_bt, B, Wc1, Wc1};

  /* ---- 2-9: the decode step itself (examples/decode_step.c) ---------------------------- */
  /* The step's activations and its caller-owned intermediates. */
  const size_t iq_n = nb3(T, IDX_HEADS, IDX_DIM), q_n = nb3(T, H, MLA_DIM);
  const size_t lg_n = nb2(T, mml);
  uint16_t *iq = random_bf16(iq_n, 1.0), *iw = random_bf16(nb2(T, IDX_HEADS), 1.0);
  uint16_t *qin = random_bf16(q_n, 1.0), *kv_new = random_bf16(nb2(T, MLA_DIM), 1.0);
  int64_t *kv_slots = xmalloc(nb2(T, 8));
  for (int64_t t = 0; t < T; t++)
    kv_slots[t] = (int64_t)swa_bt[t * Ws + pos[t] / SWA_BS] * SWA_BS + pos[t] % SWA_BS;
  float *sink = xmalloc(nb2(H, 4));
  for (int64_t h = 0; h < H; h++) sink[h] = (float)(gauss() * 2.0);
  cl_mem iq_m = buf_new("indexer q", nb2(iq_n, 2), iq),
         iw_m = buf_new("indexer weights", nb3(T, IDX_HEADS, 2), iw);
  cl_mem qi_m = buf_new("q", nb2(q_n, 2), qin),
         kv_m = buf_new("kv", nb3(T, MLA_DIM, 2), kv_new);
  cl_mem kvs_m = buf_new("kv slots", nb2(T, 8), kv_slots),
         sink_m = buf_new("attn sink", nb2(H, 4), sink);
  cl_mem iq_out_m = buf_new("indexer q fp8", iq_n, NULL),
         iw_out_m = buf_new("indexer weights f32", nb3(T, IDX_HEADS, 4), NULL);
  cl_mem lg_m = buf_new("logits", nb2(lg_n, 4), NULL),
         tk_m = buf_new("topk", nb3(T, K, 4), NULL);
  cl_mem gi_m = buf_new("C4 slots", nb3(T, K, 4), NULL),
         gl_m = buf_new("C4 lens", nb2(T, 4), NULL);
  cl_mem si_m = buf_new("SWA slots", nb3(T, W, 4), NULL),
         sl_m = buf_new("SWA lens", nb2(T, 4), NULL);
  cl_mem qo_m = buf_new("q normed", nb2(q_n, 2), NULL),
         out_m = buf_new("attention out", nb2(q_n, 2), NULL);
  cl_mem lse_m = buf_new("lse", nb3(T, H, 4), NULL);
  /* The output quant: G wo_a groups of HPG heads (one group when HPG does not
   * divide H), f32 block scales with the token axis padded to Tp = a multiple
   * of 4 (vLLM's TMA alignment). */
  const int64_t G = H % HPG ? 1 : H / HPG, hpg = H / G, Tp = (T + 3) / 4 * 4;
  const size_t osc_n = nb3(mul_ck(G, hpg), 4, Tp);
  cl_mem of_m = buf_new("o fp8", q_n, NULL),
         os_m = buf_new("o scales", nb2(osc_n, 4), NULL);
  dsa_tensor iq_t = dsa_tensor_make(iq_m, 0, DSA_BF16, 3, (int64_t[]){T, IDX_HEADS, IDX_DIM});
  dsa_tensor iw_t = dsa_tensor_make(iw_m, 0, DSA_BF16, 2, (int64_t[]){T, IDX_HEADS});
  dsa_tensor qi_t = dsa_tensor_make(qi_m, 0, DSA_BF16, 3, (int64_t[]){T, H, MLA_DIM});
  dsa_tensor kv_t = dsa_tensor_make(kv_m, 0, DSA_BF16, 2, (int64_t[]){T, MLA_DIM});
  dsa_tensor kvs_t = dsa_tensor_make(kvs_m, 0, DSA_I64, 1, (int64_t[]){T});
  dsa_tensor sink_t = dsa_tensor_make(sink_m, 0, DSA_F32, 1, (int64_t[]){H});
  dsa_tensor iqo_t = dsa_tensor_make(iq_out_m, 0, DSA_E4M3, 3, (int64_t[]){T, IDX_HEADS, IDX_DIM});
  dsa_tensor iwo_t = dsa_tensor_make(iw_out_m, 0, DSA_F32, 2, (int64_t[]){T, IDX_HEADS});
  dsa_tensor lg_t = dsa_tensor_make(lg_m, 0, DSA_F32, 2, (int64_t[]){T, mml});
  dsa_tensor tk_t = dsa_tensor_make(tk_m, 0, DSA_I32, 2, (int64_t[]){T, K});
  dsa_tensor gi_t = dsa_tensor_make(gi_m, 0, DSA_I32, 2, (int64_t[]){T, K});
  dsa_tensor gl_t = dsa_tensor_make(gl_m, 0, DSA_I32, 1, (int64_t[]){T});
  dsa_tensor si_t = dsa_tensor_make(si_m, 0, DSA_I32, 2, (int64_t[]){T, W});
  dsa_tensor sl_t = dsa_tensor_make(sl_m, 0, DSA_I32, 1, (int64_t[]){T});
  dsa_tensor qo_t = dsa_tensor_make(qo_m, 0, DSA_BF16, 3, (int64_t[]){T, H, MLA_DIM});
  dsa_tensor out_t = dsa_tensor_make(out_m, 0, DSA_BF16, 3, (int64_t[]){T, H, MLA_DIM});
  dsa_tensor lse_t = dsa_tensor_make(lse_m, 0, DSA_F32, 2, (int64_t[]){T, H});
  dsa_tensor of_t = dsa_tensor_make(of_m, 0, DSA_E4M3, 3, (int64_t[]){G, T, hpg * MLA_DIM});
  dsa_tensor os_t = dsa_tensor_make(os_m, 0, DSA_F32, 3, (int64_t[]){G, hpg * 4, Tp});
  const decode_step_io io = {
      &swa_cache, &c4_cache, &ik_cache, &pos_t, &t2r_t, &cos_t, &swa_bt_t, &cmp_bt_t, &ctx_t,
      &iq_t, &iw_t, &qi_t, &kv_t, &kvs_t, &sink_t,
      &iqo_t, &iwo_t, &lg_t, &tk_t, &gi_t, &gl_t, &si_t, &sl_t, &qo_t, &out_t, &lse_t,
      &of_t, &os_t, (int32_t)K, (int32_t)W, SWA_BS, CMP_BS};
  stage *st_[DECODE_STEP_STAGES];
  static const char *const ids[DECODE_STEP_STAGES] = {"2", "3", "4", "5", "6", "7", "8a", "9"};
  stage *s8b = NULL; /* the two-stage attention (not in decode_step()) listed after 8a */
  for (int i = 0; i < DECODE_STEP_STAGES; i++) {
    if (i == DECODE_STEP_STAGES - 1) s8b = stage_new("8b", "sparse MLA decode, two-stage (+sink)");
    st_[i] = stage_new(ids[i], decode_step_stage_names[i]);
  }
  {
    /* Untimed first (first launches include code generation), then timed:
     * every stage writes the same bytes again. */
    cl_event t0[DECODE_STEP_STAGES], t1[DECODE_STEP_STAGES];
    OP(st_[0], decode_step_two_queues(queue, side_queue, &io, NULL, NULL, NULL));
    OP(st_[0], decode_step_two_queues(queue, side_queue, &io, NULL, t0, t1));
    clFinish(clq);
    /* The step's span, stage 2's start to stage 9's end: with two queues the
     * stages overlap, so their device times add up to more than the step. */
    {
      cl_ulong a = 0, b = 0;
      if (clGetEventProfilingInfo(t0[0], CL_PROFILING_COMMAND_START, sizeof a, &a, NULL) ==
              CL_SUCCESS &&
          clGetEventProfilingInfo(t1[DECODE_STEP_STAGES - 1], CL_PROFILING_COMMAND_END, sizeof b,
                                  &b, NULL) == CL_SUCCESS &&
          b >= a)
        step_span_us = (double)(b - a) * 1e-3;
    }
    for (int i = 0; i < DECODE_STEP_STAGES; i++) {
      t_begin = t0[i];
      time_end(st_[i], t1[i]);
    }
    for (int i = 0; i < DECODE_STEP_STAGES; i++) check_faults(st_[i]);
  }

  /* Sample mode: each stage's device output for the sampled rows only (row
   * i of these is sampled sequence i's decode token), read back row by row;
   * the reference runs per row on them. */
  const int64_t ns = smode ? nsmp : 0, QR = IDX_HEADS * IDX_DIM, HD = H * MLA_DIM;
  uint8_t *iq_s = NULL;
  float *iw_s = NULL, *lg_s = NULL;
  int32_t *tk_s = NULL, *gi_s = NULL, *gl_s = NULL, *si_s = NULL, *sl_s = NULL;
  uint16_t *q_s = NULL;
  if (smode) {
    iq_s = xmalloc(nb2(ns, QR)), iw_s = xmalloc(nb3(ns, IDX_HEADS, 4));
    lg_s = xmalloc(nb3(ns, mml, 4)), tk_s = xmalloc(nb3(ns, K, 4));
    gi_s = xmalloc(nb3(ns, K, 4)), gl_s = xmalloc(nb2(ns, 4));
    si_s = xmalloc(nb3(ns, W, 4)), sl_s = xmalloc(nb2(ns, 4));
    q_s = xmalloc(nb3(ns, HD, 2));
  }

  /* 2: indexer Q RoPE + FP8 quant */
  uint8_t *iq_dev = smode ? NULL : xmalloc(iq_n);
  float *iw_dev = smode ? NULL : xmalloc(nb3(T, IDX_HEADS, 4));
  if (!smode) {
    stage *s = st_[0];
    dsa_indexer_q_quant_params prm;
    dsa_indexer_q_quant_params_default(&prm);
    uint8_t *want_q = xmalloc(iq_n);
    float *want_w = xmalloc(nb3(T, IDX_HEADS, 4));
    ref_indexer_q_args a = {T, IDX_HEADS, IDX_DIM, ROPE_DIM, P, pos, 0, 1,
                            iq, IDX_HEADS * IDX_DIM, IDX_DIM, cos_sin, 0, ROPE_DIM,
                            iw, 1, IDX_HEADS, 1, prm.softmax_scale, prm.head_scale, 0, 0,
                            want_q, IDX_HEADS * IDX_DIM, IDX_DIM, NULL, 0, 0,
                            want_w, IDX_HEADS, 1};
    unsigned f = ref_indexer_q(&a);
    buf_read(iq_out_m, iq_n, iq_dev);
    buf_read(iw_out_m, nb3(T, IDX_HEADS, 4), iw_dev);
    check_bytes(s, "q e4m3", iq_dev, want_q, iq_n);
    check_bytes(s, "weights", iw_dev, want_w, nb3(T, IDX_HEADS, 4));
    if (f) stage_note(s, 0, "reference faults 0x%x", f);
    free(want_q), free(want_w);
  } else {
    stage *s = st_[0];
    dsa_indexer_q_quant_params prm;
    dsa_indexer_q_quant_params_default(&prm);
    uint8_t *want_q = xmalloc(nb2(ns, QR));
    float *want_w = xmalloc(nb3(ns, IDX_HEADS, 4));
    unsigned f = 0;
    for (int64_t i = 0; i < ns; i++) {
      const int64_t t = sq[i].b;
      ref_indexer_q_args a = {1, IDX_HEADS, IDX_DIM, ROPE_DIM, P, pos + t, 0, 1,
                              iq + t * QR, QR, IDX_DIM, cos_sin, 0, ROPE_DIM,
                              iw + t * IDX_HEADS, 1, IDX_HEADS, 1, prm.softmax_scale,
                              prm.head_scale, 0, 0, want_q + i * QR, QR, IDX_DIM, NULL, 0, 0,
                              want_w + i * IDX_HEADS, IDX_HEADS, 1};
      f |= ref_indexer_q(&a);
      buf_read_at(iq_out_m, nb2(t, QR), nb2(QR, 1), iq_s + i * QR);
      buf_read_at(iw_out_m, nb3(t, IDX_HEADS, 4), nb2(IDX_HEADS, 4), iw_s + i * IDX_HEADS);
    }
    stage_note(s, 1, "sample: %lld rows", (long long)ns);
    check_bytes(s, "q e4m3", iq_s, want_q, nb2(ns, QR));
    check_bytes(s, "weights", iw_s, want_w, nb3(ns, IDX_HEADS, 4));
    if (f) stage_note(s, 0, "reference faults 0x%x", f);
    free(want_q), free(want_w);
  }

  /* 3: paged MQA logits */
  float *lg_dev = smode ? NULL : xmalloc(nb2(lg_n, 4));
  if (!smode) {
    stage *s = st_[1];
    double *want = xmalloc(nb2(lg_n, sizeof *want));
    ref_il_cache rc = {ik_img, cmp_nb, CMP_BS, IDX_STRIDE};
    unsigned f = ref_paged_mqa_logits(0, B, NEXT_N, IDX_HEADS, iq_dev, NULL, &rc, iw_dev, n_cmp,
                                      2, cmp_bt, Wc1, mml, 1, want);
    buf_read(lg_m, nb2(lg_n, 4), lg_dev);
    check_logits(s, lg_dev, want, lg_n);
    if (f) stage_note(s, 0, "reference faults 0x%x", f);
    free(want);
  } else {
    /* Per sampled row: its sequence's indexer blocks (read back after the
     * prefill) as a cache of their own, the block table row renumbered. */
    stage *s = st_[1];
    double *want = xmalloc(nb3(ns, mml, sizeof *want));
    int32_t *lbt = xmalloc(nb2(Wc1, 4));
    unsigned f = 0;
    for (int64_t i = 0; i < ns; i++) {
      const int64_t t = sq[i].b;
      for (int64_t j = 0; j < Wc1; j++) lbt[j] = j < sq[i].cnb ? (int32_t)j : -1;
      ref_il_cache rc = {sq[i].ik_dev, sq[i].cnb, CMP_BS, IDX_STRIDE};
      f |= ref_paged_mqa_logits(0, 1, NEXT_N, IDX_HEADS, iq_s + i * QR, NULL, &rc,
                                iw_s + i * IDX_HEADS, n_cmp + t, 2, lbt, Wc1, mml, 1,
                                want + i * mml);
      buf_read_at(lg_m, nb3(t, mml, 4), nb2(mml, 4), lg_s + i * mml);
    }
    stage_note(s, 1, "sample: %lld rows", (long long)ns);
    check_logits(s, lg_s, want, nb2(ns, mml));
    if (f) stage_note(s, 0, "reference faults 0x%x", f);
    free(want), free(lbt);
  }

  /* 4: top-k */
  int32_t *tk_dev = smode ? NULL : xmalloc(nb3(T, K, 4));
  if (!smode) {
    stage *s = st_[2];
    int32_t *want = xmalloc(nb3(T, K, 4));
    unsigned f = ref_topk_decode(lg_dev, T, mml, mml, n_cmp, 2, NEXT_N, (int32_t)K, want, K, 1);
    buf_read(tk_m, nb3(T, K, 4), tk_dev);
    check_bytes(s, "indices", tk_dev, want, nb3(T, K, 4));
    if (f) stage_note(s, 0, "reference faults 0x%x", f);
    free(want);
  } else {
    stage *s = st_[2];
    int32_t *want = xmalloc(nb3(ns, K, 4));
    unsigned f = 0;
    for (int64_t i = 0; i < ns; i++) {
      const int64_t t = sq[i].b;
      f |= ref_topk_decode(lg_s + i * mml, 1, mml, mml, n_cmp + t, 2, NEXT_N, (int32_t)K,
                           want + i * K, K, 1);
      buf_read_at(tk_m, nb3(t, K, 4), nb2(K, 4), tk_s + i * K);
    }
    stage_note(s, 1, "sample: %lld rows", (long long)ns);
    check_bytes(s, "indices", tk_s, want, nb3(ns, K, 4));
    if (f) stage_note(s, 0, "reference faults 0x%x", f);
    free(want);
  }

  /* 5: global slots */
  int32_t *gi_dev = smode ? NULL : xmalloc(nb3(T, K, 4));
  int32_t *gl_dev = smode ? NULL : xmalloc(nb2(T, 4));
  if (!smode) {
    stage *s = st_[3];
    int32_t *want = xmalloc(nb3(T, K, 4)), *want_l = xmalloc(nb2(T, 4));
    unsigned f = ref_global_topk(tk_dev, K, K, tok_req, cmp_rt, NULL, CMP_BS, want, K, want_l, T);
    buf_read(gi_m, nb3(T, K, 4), gi_dev);
    buf_read(gl_m, nb2(T, 4), gl_dev);
    check_bytes(s, "slots", gi_dev, want, nb3(T, K, 4));
    check_bytes(s, "lens", gl_dev, want_l, nb2(T, 4));
    if (f) stage_note(s, 0, "reference faults 0x%x", f);
    free(want), free(want_l);
  } else {
    stage *s = st_[3];
    int32_t *want = xmalloc(nb3(ns, K, 4)), *want_l = xmalloc(nb2(ns, 4));
    unsigned f = 0;
    for (int64_t i = 0; i < ns; i++) {
      const int64_t t = sq[i].b;
      f |= ref_global_topk(tk_s + i * K, K, K, tok_req + t, cmp_rt, NULL, CMP_BS, want + i * K, K,
                           want_l + i, 1);
      buf_read_at(gi_m, nb3(t, K, 4), nb2(K, 4), gi_s + i * K);
      buf_read_at(gl_m, nb2(t, 4), 4, gl_s + i);
    }
    stage_note(s, 1, "sample: %lld rows", (long long)ns);
    check_bytes(s, "slots", gi_s, want, nb3(ns, K, 4));
    check_bytes(s, "lens", gl_s, want_l, nb2(ns, 4));
    if (f) stage_note(s, 0, "reference faults 0x%x", f);
    free(want), free(want_l);
  }

  /* 6: SWA indices */
  int32_t *si_dev = smode ? NULL : xmalloc(nb3(T, W, 4));
  int32_t *sl_dev = smode ? NULL : xmalloc(nb2(T, 4));
  if (!smode) {
    stage *s = st_[4];
    int32_t *want = xmalloc(nb3(T, W, 4)), *want_l = xmalloc(nb2(T, 4));
    unsigned f = ref_swa_indices(pos, tok_req, NULL, swa_rt, (int32_t)W, SWA_BS, want, W, W,
                                 want_l, T);
    buf_read(si_m, nb3(T, W, 4), si_dev);
    buf_read(sl_m, nb2(T, 4), sl_dev);
    check_bytes(s, "slots", si_dev, want, nb3(T, W, 4));
    check_bytes(s, "lens", sl_dev, want_l, nb2(T, 4));
    if (f) stage_note(s, 0, "reference faults 0x%x", f);
    free(want), free(want_l);
  } else {
    stage *s = st_[4];
    int32_t *want = xmalloc(nb3(ns, W, 4)), *want_l = xmalloc(nb2(ns, 4));
    unsigned f = 0;
    for (int64_t i = 0; i < ns; i++) {
      const int64_t t = sq[i].b;
      f |= ref_swa_indices(pos + t, tok_req + t, NULL, swa_rt, (int32_t)W, SWA_BS, want + i * W,
                           W, W, want_l + i, 1);
      buf_read_at(si_m, nb3(t, W, 4), nb2(W, 4), si_s + i * W);
      buf_read_at(sl_m, nb2(t, 4), 4, sl_s + i);
    }
    stage_note(s, 1, "sample: %lld rows", (long long)ns);
    check_bytes(s, "slots", si_s, want, nb3(ns, W, 4));
    check_bytes(s, "lens", sl_s, want_l, nb2(ns, 4));
    if (f) stage_note(s, 0, "reference faults 0x%x", f);
    free(want), free(want_l);
  }

  /* 7: q RMSNorm + RoPE, kv RoPE + insert of the new token */
  uint16_t *q_dev = smode ? NULL : xmalloc(nb2(q_n, 2));
  if (!smode) {
    stage *s = st_[5];
    dsa_mla_qnorm_rope_kv_insert_params prm;
    dsa_mla_qnorm_rope_kv_insert_params_default(&prm);
    uint16_t *want = xmalloc(nb2(q_n, 2));
    unsigned f = ref_mla_qnorm_rope_kv_insert(&swa_ref, qin, H * MLA_DIM, MLA_DIM, want,
                                              H * MLA_DIM, MLA_DIM, H, kv_new, MLA_DIM, pos,
                                              cos_sin, ROPE_DIM, P, kv_slots, prm.eps, T);
    buf_read(qo_m, nb2(q_n, 2), q_dev);
    buf_read(swa_mem, swa_bytes, back);
    check_bytes(s, "q", q_dev, want, nb2(q_n, 2));
    check_bytes(s, "SWA cache", back, swa_img, swa_bytes);
    if (f) stage_note(s, 0, "reference faults 0x%x", f);
    free(want);
  } else {
    /* The new token into its sequence's SWA blocks as 1a's reference left
     * them; the device's blocks of that sequence are read again. */
    stage *s = st_[5];
    dsa_mla_qnorm_rope_kv_insert_params prm;
    dsa_mla_qnorm_rope_kv_insert_params_default(&prm);
    uint16_t *want = xmalloc(nb3(ns, HD, 2));
    unsigned f = 0;
    for (int64_t i = 0; i < ns; i++) {
      const int64_t t = sq[i].b;
      ref_mla_cache lc = {sq[i].swa_ref, sq[i].snb, SWA_BS, MLA_STRIDE};
      const int64_t ls = local_slot(kv_slots[t], swa_bt + t * Ws, sq[i].sj0, sq[i].snb, SWA_BS);
      if (ls < 0) die("sequence %lld: its new token's SWA slot is not in its blocks", (long long)t);
      f |= ref_mla_qnorm_rope_kv_insert(&lc, qin + t * HD, HD, MLA_DIM, want + i * HD, HD,
                                        MLA_DIM, H, kv_new + t * MLA_DIM, MLA_DIM, pos + t,
                                        cos_sin, ROPE_DIM, P, &ls, prm.eps, 1);
      buf_read_at(qo_m, nb3(t, HD, 2), nb2(HD, 2), q_s + i * HD);
      read_blocks(swa_mem, MLA_STRIDE, swa_bt + t * Ws, sq[i].sj0, sq[i].snb, sq[i].swa_dev);
    }
    stage_note(s, 1, "sample: %lld rows", (long long)ns);
    check_bytes(s, "q", q_s, want, nb3(ns, HD, 2));
    check_bytes(s, "their SWA blocks", swa_dev_all, swa_ref_all, nb2(s_swa_nb, MLA_STRIDE));
    if (f) stage_note(s, 0, "reference faults 0x%x", f);
    free(want);
  }

  /* 8a: sparse MLA decode with the attention sink (fused); 8b: two-stage */
  if (!smode) {
    dsa_tensor qt = qo_t;
    dsa_sparse_index_set main_set = {&swa_cache, &si_t, &sl_t};
    dsa_sparse_index_set extra_set = {&c4_cache, &gi_t, &gl_t};
    dsa_sparse_params prm;
    dsa_sparse_params_default(&prm);

    /* The fp64 reference over the device's (already checked) inputs. */
    double *want = xmalloc(nb2(q_n, sizeof *want)), *want_lse = xmalloc(nb3(T, H, 8));
    ref_mla_set rm = {&swa_ref, si_dev, W, W, 1, sl_dev};
    ref_mla_set rx = {&c4_ref, gi_dev, K, K, 1, gl_dev};
    unsigned f = ref_sparse_mla_decode(q_dev, T, H, H * MLA_DIM, MLA_DIM, &rm, &rx, sink,
                                       prm.softmax_scale, want, want_lse);
    uint16_t *fused = xmalloc(nb2(q_n, 2)), *two = xmalloc(nb2(q_n, 2));
    float *lse = xmalloc(nb3(T, H, 4));

    stage *s = st_[6];
    buf_read(out_m, nb2(q_n, 2), fused);
    buf_read(lse_m, nb3(T, H, 4), lse);
    stage_note(s, 1, "K = %lld + %lld", (long long)W, (long long)K);
    check_attention(s, "vs fp64", fused, want, T * H, lse, want_lse);
    if (f) stage_note(s, 0, "reference faults 0x%x", f);

    s = s8b;
    const size_t ws_size = dsa_sparse_mla_decode_workspace_size(T, W, K);
    cl_mem ws_m = buf_new("two-stage workspace", ws_size, NULL);
    /* Poison the outputs so that the two-stage result cannot be the fused one. */
    const uint8_t junk = 0xFF;
    clEnqueueFillBuffer(clq, out_m, &junk, 1, 0, nb2(q_n, 2), 0, NULL, NULL);
    clEnqueueFillBuffer(clq, lse_m, &junk, 1, 0, nb3(T, H, 4), 0, NULL, NULL);
    clFinish(clq);
    TIMED(s, dsa_sparse_mla_decode_two_stage(queue, &qt, &main_set, &extra_set, &sink_t, &out_t,
                                             &lse_t, WS_BYTES(ws_m, 0, ws_size), &prm, evp));
    check_faults(s);
    buf_read(out_m, nb2(q_n, 2), two);
    buf_read(lse_m, nb3(T, H, 4), lse);
    stage_note(s, 1, "workspace %.1f MiB", (double)ws_size / (1u << 20));
    check_attention(s, "vs fp64", two, want, T * H, lse, want_lse);
    double *fz = xmalloc(nb2(q_n, sizeof *fz));
    for (size_t i = 0; i < q_n; i++) fz[i] = ref_bf16_to_float(fused[i]);
    check_attention(s, "vs fused", two, fz, T * H, NULL, NULL);
    free(fz);
    buf_free(ws_m);

    /* 9: inverse RoPE + FP8 quant for the O projection; its input is the
     * fused output the device left (read back above), so the check is exact. */
    s = st_[7];
    uint8_t *want_o = xmalloc(q_n), *got_o = xmalloc(q_n);
    float *want_s = xmalloc(nb2(osc_n, 4)), *got_s = xmalloc(nb2(osc_n, 4));
    f = ref_inv_rope_fp8_quant(fused, H * MLA_DIM, MLA_DIM, T, H, pos, cos_sin, ROPE_DIM, P, G,
                               want_o, T * hpg * MLA_DIM, hpg * MLA_DIM, want_s, 0,
                               hpg * 4 * Tp, Tp, 1, Tp);
    buf_read(of_m, q_n, got_o);
    buf_read(os_m, nb2(osc_n, 4), got_s);
    stage_note(s, 1, "G = %lld x %lld heads", (long long)G, (long long)hpg);
    check_bytes(s, "e4m3", got_o, want_o, q_n);
    check_bytes(s, "scales", got_s, want_s, nb2(osc_n, 4));
    if (f) stage_note(s, 0, "reference faults 0x%x", f);
    free(want_o), free(got_o), free(want_s), free(got_s);
    free(want), free(want_lse), free(fused), free(two), free(lse);
  } else {
    /* Per sampled row: the fp64 reference over the device's inputs of that
     * row (its q, SWA and C4 slots and lengths, checked above) and its
     * sequence's blocks of both caches as caches of their own (the slots
     * renumbered into them; a slot in no block of the sequence fails). */
    dsa_tensor qt = qo_t;
    dsa_sparse_index_set main_set = {&swa_cache, &si_t, &sl_t};
    dsa_sparse_index_set extra_set = {&c4_cache, &gi_t, &gl_t};
    dsa_sparse_params prm;
    dsa_sparse_params_default(&prm);
    double *want = xmalloc(nb3(ns, HD, sizeof *want)), *want_lse = xmalloc(nb3(ns, H, 8));
    uint16_t *fused = xmalloc(nb3(ns, HD, 2)), *two = xmalloc(nb3(ns, HD, 2));
    float *lse = xmalloc(nb3(ns, H, 4));
    int32_t *si_l = xmalloc(nb2(W, 4)), *gi_l = xmalloc(nb2(K, 4));
    int64_t outside = 0;
    unsigned f = 0;
    for (int64_t i = 0; i < ns; i++) {
      const int64_t t = sq[i].b;
      for (int64_t j = 0; j < W; j++) {
        int32_t v = local_slot(si_s[i * W + j], swa_bt + t * Ws, sq[i].sj0, sq[i].snb, SWA_BS);
        if (v == -2) outside++, v = -1;
        si_l[j] = v;
      }
      for (int64_t j = 0; j < K; j++) {
        int32_t v = local_slot(gi_s[i * K + j], cmp_bt + t * Wc1, 0, sq[i].cnb, CMP_BS);
        if (v == -2) outside++, v = -1;
        gi_l[j] = v;
      }
      ref_mla_cache swc = {sq[i].swa_dev, sq[i].snb, SWA_BS, MLA_STRIDE};
      ref_mla_cache c4c = {sq[i].c4_dev, sq[i].cnb, CMP_BS, MLA_STRIDE};
      ref_mla_set rm = {&swc, si_l, W, W, 1, sl_s + i};
      ref_mla_set rx = {&c4c, gi_l, K, K, 1, gl_s + i};
      f |= ref_sparse_mla_decode(q_s + i * HD, 1, H, HD, MLA_DIM, &rm, &rx, sink,
                                 prm.softmax_scale, want + i * HD, want_lse + i * H);
      buf_read_at(out_m, nb3(t, HD, 2), nb2(HD, 2), fused + i * HD);
      buf_read_at(lse_m, nb3(t, H, 4), nb2(H, 4), lse + i * H);
    }
    stage *s = st_[6];
    stage_note(s, 1, "K = %lld + %lld; sample: %lld rows", (long long)W, (long long)K,
               (long long)ns);
    if (outside) stage_note(s, 0, "%lld slots outside their sequence's blocks", (long long)outside);
    check_attention(s, "vs fp64", fused, want, ns * H, lse, want_lse);
    if (f) stage_note(s, 0, "reference faults 0x%x", f);

    s = s8b;
    const size_t ws_size = dsa_sparse_mla_decode_workspace_size(T, W, K);
    cl_mem ws_m = buf_new("two-stage workspace", ws_size, NULL);
    const uint8_t junk = 0xFF; /* as above: the fused result must not survive */
    clEnqueueFillBuffer(clq, out_m, &junk, 1, 0, nb2(q_n, 2), 0, NULL, NULL);
    clEnqueueFillBuffer(clq, lse_m, &junk, 1, 0, nb3(T, H, 4), 0, NULL, NULL);
    clFinish(clq);
    TIMED(s, dsa_sparse_mla_decode_two_stage(queue, &qt, &main_set, &extra_set, &sink_t, &out_t,
                                             &lse_t, WS_BYTES(ws_m, 0, ws_size), &prm, evp));
    check_faults(s);
    for (int64_t i = 0; i < ns; i++) {
      buf_read_at(out_m, nb3(sq[i].b, HD, 2), nb2(HD, 2), two + i * HD);
      buf_read_at(lse_m, nb3(sq[i].b, H, 4), nb2(H, 4), lse + i * H);
    }
    stage_note(s, 1, "workspace %.1f MiB; sample: %lld rows", (double)ws_size / (1u << 20),
               (long long)ns);
    check_attention(s, "vs fp64", two, want, ns * H, lse, want_lse);
    double *fz = xmalloc(nb3(ns, HD, sizeof *fz));
    for (int64_t i = 0; i < ns * HD; i++) fz[i] = ref_bf16_to_float(fused[i]);
    check_attention(s, "vs fused", two, fz, ns * H, NULL, NULL);
    free(fz);
    buf_free(ws_m);

    /* 9: the sampled tokens' columns of every group (o_fp8 [G, T, hpg * 512],
     * o_scales [G, hpg * 4, Tp]) from the fused output read back above. */
    s = st_[7];
    const int64_t OG = hpg * MLA_DIM, SG = G * hpg * 4;
    uint8_t *want_o = xmalloc(nb3(ns, G, OG)), *got_o = xmalloc(nb3(ns, G, OG));
    float *want_s = xmalloc(nb3(ns, SG, 4)), *got_s = xmalloc(nb3(ns, SG, 4));
    f = 0;
    for (int64_t i = 0; i < ns; i++) {
      const int64_t t = sq[i].b;
      f |= ref_inv_rope_fp8_quant(fused + i * HD, HD, MLA_DIM, 1, H, pos + t, cos_sin, ROPE_DIM,
                                  P, G, want_o + i * G * OG, OG, OG, want_s + i * SG, 0, hpg * 4,
                                  1, 1, 1);
      buf_read_cols(of_m, nb2(t, OG), nb2(OG, 1), nb2(G, 1), nb2(T, OG), got_o + i * G * OG);
      buf_read_cols(os_m, nb2(t, 4), 4, nb2(SG, 1), nb2(Tp, 4), got_s + i * SG);
    }
    stage_note(s, 1, "G = %lld x %lld heads; sample: %lld rows", (long long)G, (long long)hpg,
               (long long)ns);
    check_bytes(s, "e4m3", got_o, want_o, nb3(ns, G, OG));
    check_bytes(s, "scales", got_s, want_s, nb3(ns, SG, 4));
    if (f) stage_note(s, 0, "reference faults 0x%x", f);
    free(want_o), free(got_o), free(want_s), free(got_s);
    free(want), free(want_lse), free(fused), free(two), free(lse), free(si_l), free(gi_l);
  }

  int rc = finish(&cfg, warmup_s, NULL);

  buf_free(si_m), buf_free(sl_m), buf_free(gi_m);
  buf_free(gl_m), buf_free(tk_m), buf_free(lg_m);
  buf_free(qo_m), buf_free(iq_out_m), buf_free(iw_out_m);
  buf_free(iq_m), buf_free(iw_m), buf_free(qi_m);
  buf_free(kv_m), buf_free(kvs_m), buf_free(sink_m);
  buf_free(out_m), buf_free(lse_m), buf_free(of_m);
  buf_free(os_m);
  free(iq), free(iw), free(qin), free(kv_new), free(kv_slots), free(sink);
  buf_free(cos_m), buf_free(pos_m), buf_free(t2r_m);
  buf_free(swa_bt_m), buf_free(cmp_bt_m), buf_free(ctx_m);
  buf_free(swa_mem), buf_free(c4_mem), buf_free(ik_mem);
  free(si_dev), free(sl_dev), free(gi_dev), free(gl_dev), free(tk_dev), free(lg_dev);
  free(q_dev), free(iq_dev), free(iw_dev), free(cos_sin), free(back);
  free(swa_img), free(c4_img), free(ik_img), free(swa_bt), free(cmp_bt);
  free(iq_s), free(iw_s), free(lg_s), free(tk_s), free(gi_s), free(gl_s), free(si_s), free(sl_s);
  free(q_s), free(swa_ref_all), free(swa_dev_all), free(c4_dev_all), free(ik_dev_all);
  free(first_past);
  for (int64_t i = 0; i < nsmp; i++) free(sq[i].chk);
  free(sq);
  free(seq_len), free(n_cmp), free(pos), free(tok_req);
  dsa_queue_destroy(&side_queue);
  dsa_queue_destroy(&queue);
  dsa_context_destroy(&ctx);
  return rc;
}
