/* Indexer top-k per row, prefill and decode forms. Kernels: cl/topk.cl.
 * Five algorithms, best first (each variant table lists them once per
 * sub-group back-end, as cl/dsa_subgroup.h orders them):
 *   wide    few rows: one group per row, the row in registers (topk_rows at
 *           up to 1024 items: one launch, no merge; the rows leave compute
 *           units idle, but the split's second launch and merge cost more);
 *   split   few rows: each row cut into chunks, one group per chunk sorts its
 *           own top k (topk_rows, chunk mode) into a scratch list owned by
 *           the queue, then the row's last group to finish (or, where local
 *           memory cannot hold a row's lists, the topk_merge kernel) ranks
 *           every list entry against the other lists of its row and writes
 *           the first k;
 *   lrow    one group per row, the row's keys held in local memory
 *           (topk_lrows: fewer registers, so more groups per compute unit;
 *           where local memory holds WG * 32 keys beside the histogram);
 *   row     one group per row, the row held in registers (topk_rows);
 *   stream  one group per row streaming the row from global memory several
 *           times (topk_per_row): any length, the fallback.
 * DSACL_TOPK forces a preference (auto, wide, split[:chunk], lrow, row, stream):
 * the named algorithm runs wherever it can, the ones before it are refused.
 * DSACL_TOPK_WG=<n> (tuning) takes n as the register kernels' group limit
 * instead of the driver's CL_KERNEL_WORK_GROUP_SIZE. DSACL_TOPK_SAMPLE=off
 * turns the sampled select of topk_rows / topk_lrows off (tuning: the radix
 * select alone), =fallback runs it and always falls back to the radix
 * select (tests: the fallback path on every row). DSACL_TOPK_MERGE: where
 * the split merges its lists: auto (in each row's last chunk group where
 * merge_in_group_ok says so, else by topk_merge), group (in the last group
 * on any device: tests, e.g. Oclgrind) or kernel (by topk_merge). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define TOPK_MAX_WG 1024 /* cl/topk.cl's local arrays are sized for this */
#define TOPK_MIN_WG 64
#define TOPK_MAX_K DSA_TOPK_MAX_K
#define TOPK_VPT 32      /* columns per item held in registers (topk_rows) */
#define TOPK_E_MAX 8     /* sorted words per item at most (topk_rows) */
#define TOPK_MERGE_WG 128
#define TOPK_LROWS_MAX_WG 512 /* the largest topk_lrows_<WG> */
#define TOPK_MERGE_Q 4   /* list entries per merge item at most (1 for few rows) */
#define TOPK_BINS 2048 /* radix histogram bins a pass (11 bits) */
/* The register kernels that sort their winners by counting, with a side
 * room of local memory for its bins, on GPUs: topk_rows_<WG> for WG >=
 * TOPK_SK_WG (the few-row split's chunks and wide; on CPUs every register
 * kernel does: cl/topk.cl's TOPK_SK_ALL). */
#define TOPK_SK_WG 512
const char dsa__defines_topk[] = DSA_KDEF(TOPK_MAX_WG) DSA_KDEF(TOPK_MAX_K) DSA_KDEF(TOPK_VPT)
    DSA_KDEF(TOPK_E_MAX) DSA_KDEF(TOPK_MERGE_Q) DSA_KDEF(TOPK_BINS) DSA_KDEF(TOPK_SK_WG);
/* Split: at most this many chunks per row (topk_merge's work grows with
 * their square) and this much scratch. */
#define TOPK_MAX_CHUNKS 64
#define TOPK_MAX_SCRATCH ((uint64_t)1 << 30)

/* PoCL: lrow's sampled select and counting sort compiled out
 * (-DTOPK_SAMPLE=0 -DTOPK_CSORT=0, cl/topk.cl).
 * PoCL's work-group function generation takes minutes on it: the top-k
 * golden at 32 KiB of local memory (topk_lrows at its 32 KiB sizes) ran
 * 24 CPU s with it compiled out against more than 300 without finishing
 * (2026-11-26, PoCL 3, Debian's; the clean-clone CI's checkcl ran past its
 * 400 s limit). It is a GPU occupancy trick (docs/PERFORMANCE.md, top-k
 * round 7), and the results are the same bytes either way, so PoCL runs
 * the radix select alone; Intel's CPU runtime, Oclgrind and GPUs build it.
 * DSACL_TOPK_SAMPLE then changes nothing on PoCL. The counting sort
 * (top-k round 8) more than doubled PoCL's test_topk (212 CPU s against 93;
 * 92 with it compiled out, 2026-11-26), so PoCL sorts by the merge rounds
 * (the same bytes).
 * Intel's OpenCL CPU runtime (2026.2): the program is built with
 * -cl-opt-disable. Its optimizing compiler crashes now and then in its pass
 * "sycl-kernel-reduce-cross-barrier-values" (the bug cl/topk.cl's TOPK_SCAN
 * works around) or hangs, by a race or memory it never wrote: test_topk
 * with Intel sub-groups masked (what checkcl builds), cache off, 2 of 8 runs
 * crashed on session 13's topk.cl and 4 of 8 crashed or hung on this one
 * (the counting sort compiled out), even with ASLR off; with the counting
 * sort in, natively, 1 of 2. Unoptimized: 0 of 18 (native, masked, AMD
 * emulated; counting sort in), and test_topk runs in 1-3 s instead of 7-16
 * (it is compiles). A CPU runtime is a test device here, never a fast one
 * (as the logits program's emulated tile back-end, src/op_indexer_logits.c).
 * Oclgrind and GPUs build the optimized program. */
const char *dsa__topk_device_options(const dsa_caps *caps) {
  if (caps->vendor == DSA_VENDOR_POCL) return " -DTOPK_SAMPLE=0 -DTOPK_CSORT=0 -DTOPK_GMERGE=0";
  if (caps->vendor == DSA_VENDOR_INTEL && (caps->type & CL_DEVICE_TYPE_CPU)) return " -cl-opt-disable";
  /* NVIDIA: topk_rows_512 without reqd_work_group_size under a register
   * cap of 128 (512 items always fit; cl/topk.cl, TOPK_NV_CAP). The cap is
   * program-wide but binds no other kernel: those with the attribute
   * ignore it, topk_per_row and topk_merge take fewer. */
  if (caps->nv_compiler_options) return " -DTOPK_NV_CAP=128 -cl-nv-maxrregcount=128";
  return "";
}

/* ---- DSACL_TOPK ------------------------------------------------------------ */

dsa_status dsa__topk_env(dsa_context *c) {
  c->topk_algo = DSA_TOPK_ALGO_AUTO;
  c->topk_chunk = 0;
  c->topk_wg = 0;
  c->topk_sample = 1;
  c->topk_fuse = 1;
  const char *fm = getenv("DSACL_TOPK_MERGE");
  if (fm && *fm && strcmp(fm, "auto")) {
    if (!strcmp(fm, "kernel"))
      c->topk_fuse = 0;
    else if (!strcmp(fm, "group"))
      c->topk_fuse = 2;
    else
      return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                       "DSACL_TOPK_MERGE = \"%s\": known values are auto, group and kernel", fm);
  }
  const char *sm = getenv("DSACL_TOPK_SAMPLE");
  if (sm && *sm && strcmp(sm, "auto") && strcmp(sm, "on")) {
    if (!strcmp(sm, "off")) {
      c->topk_sample = 0;
    } else if (!strcmp(sm, "fallback")) {
      c->topk_sample = 2;
    } else {
      return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                       "DSACL_TOPK_SAMPLE = \"%s\": known values are auto, on, off and fallback",
                       sm);
    }
  }
  const char *w = getenv("DSACL_TOPK_WG");
  if (w && *w) {
    char *end;
    unsigned long n = strtoul(w, &end, 10);
    if (*end != '\0' || n < TOPK_MIN_WG || n > TOPK_MAX_WG || (n & (n - 1)))
      return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                       "DSACL_TOPK_WG = \"%s\": a power of two in %d..%d", w, TOPK_MIN_WG,
                       TOPK_MAX_WG);
    c->topk_wg = (uint32_t)n;
  }
  const char *v = getenv("DSACL_TOPK");
  if (!v || !*v || !strcmp(v, "auto")) return DSA_OK;
  if (!strcmp(v, "wide")) {
    c->topk_algo = DSA_TOPK_ALGO_WIDE;
  } else if (!strcmp(v, "lrow")) {
    c->topk_algo = DSA_TOPK_ALGO_LROW;
  } else if (!strcmp(v, "row")) {
    c->topk_algo = DSA_TOPK_ALGO_ROW;
  } else if (!strcmp(v, "stream")) {
    c->topk_algo = DSA_TOPK_ALGO_STREAM;
  } else if (!strncmp(v, "split", 5) && (v[5] == '\0' || v[5] == ':')) {
    c->topk_algo = DSA_TOPK_ALGO_SPLIT;
    if (v[5] == ':') {
      char *end;
      unsigned long n = strtoul(v + 6, &end, 10);
      if (*end != '\0' || n < 1 || n > TOPK_MAX_WG * TOPK_VPT)
        return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                         "DSACL_TOPK = \"%s\": the chunk must be 1..%d columns", v,
                         TOPK_MAX_WG * TOPK_VPT);
      c->topk_chunk = (uint32_t)n;
    }
  } else {
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "DSACL_TOPK = \"%s\": known values are auto, wide, split, split:<chunk "
                     "columns>, lrow, row and stream",
                     v);
  }
  return DSA_OK;
}

/* ---- plans -------------------------------------------------------------------- */

/* What the predicates judge: the call's shape and topk_rows' group limit
 * on this device (the kernel's own, known once it is built). */
typedef struct topk_shape {
  int64_t rows, n_cols;
  int32_t k;
  size_t wg_limit, wg_limit_l; /* topk_rows_<WG>, topk_lrows_<WG> */
  size_t wg_limit_w;           /* topk_rows_<WG> for wide (see kernels_limit) */
  bool bf16;                   /* bf16 logits */
} topk_shape;

typedef struct topk_plan {
  size_t wg;           /* topk_rows group */
  uint32_t chunk, nch; /* split: chunk columns and chunks per row; row: n_cols, 1 */
  uint32_t p2;         /* the sort's words, a power of two >= min(k, chunk) */
  bool dbl;            /* the sort ping-pongs between two local buffers */
  bool lk;             /* keys in local memory (topk_lrows) */
  size_t local_bytes;  /* topk_rows' arena */
  size_t keys_bytes;   /* lk: WG * TOPK_VPT keys, else 0 */
} topk_plan;

static uint32_t pow2_at_least(uint64_t n) {
  uint32_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

static size_t wg_limit_of(const dsa_context *c, const topk_shape *s, bool lk) {
  size_t lim = lk ? TOPK_LROWS_MAX_WG : TOPK_MAX_WG;
  if (c->caps.max_wg && c->caps.max_wg < lim) lim = c->caps.max_wg;
  const size_t kl = s ? (lk ? s->wg_limit_l : s->wg_limit) : 0;
  if (kl && kl < lim) lim = kl;
  return lim;
}

/* topk_rows (lk: topk_lrows) for groups of `cols` columns: the group size
 * and local memory. false when no group fits. */
static bool rows_plan(const dsa_context *c, const topk_shape *s, uint64_t cols, bool lk,
                      topk_plan *p) {
  const size_t lim = wg_limit_of(c, s, lk);
  const uint64_t m = cols < (uint64_t)s->k ? cols : (uint64_t)s->k;
  p->p2 = pow2_at_least(m < 2 ? 2 : m);
  size_t wg = TOPK_MIN_WG;
  while ((uint64_t)wg * TOPK_VPT < cols || wg * TOPK_E_MAX < p->p2) wg *= 2;
  if (wg > lim) return false;
  p->wg = wg;
  p->lk = lk;
  p->keys_bytes = lk ? wg * TOPK_VPT * 4 : 0;
  const size_t scan = (size_t)(TOPK_MAX_WG + 4) * 4;
  /* two uint histograms (lk: one), in words */
  const size_t hist_words = (size_t)(lk ? 1 : 2) * TOPK_BINS / 2;
  for (int dbl = 1; dbl >= 0; dbl--) {
    size_t words = (size_t)(dbl ? 2 : 1) * p->p2;
    if (words < hist_words) words = hist_words;
    p->dbl = dbl;
    p->local_bytes = words * 8 + scan;
    if (p->local_bytes + p->keys_bytes <= c->caps.local_mem) return true;
  }
  return false;
}

/* The split for this call, or false (reason in why). */
static bool split_plan(const dsa_context *c, const topk_shape *s, topk_plan *p, const char **why) {
  const int64_t n = s->n_cols, k = s->k;
  const int64_t cu = c->caps.compute_units ? c->caps.compute_units : 1;
  const bool few = s->rows < 2 * cu;
  /* Few rows: chunk groups up to the size the kernels were compiled for
   * (kernels_limit's reqd), as wide takes them. */
  topk_shape t = *s;
  if (few) t.wg_limit = s->wg_limit_w;
  const uint64_t cap = (uint64_t)wg_limit_of(c, &t, false) * TOPK_VPT;
  uint64_t chunk;
  if (c->topk_chunk) {
    chunk = c->topk_chunk;
  } else if (c->topk_algo == DSA_TOPK_ALGO_SPLIT) {
    /* forced: about four chunks, whatever the shape */
    chunk = pow2_at_least((uint64_t)(n + 3) / 4);
    if (chunk < 64) chunk = 64;
  } else {
    if (few) {
      /* Few rows: about one group per compute unit, chunks of at least
       * max(4k, 8192) columns (smaller ones make the merge the cost: H200,
       * 64 rows, k = 512: 8192 columns as one row 24.3 us, as 4 chunks of
       * 2048 48.2, 2 of 4096 36.2; 32768 columns as 4 chunks of 8192 38.0,
       * 8 of 4096 60.5, one row 73.1 (256 items); H100: as 2 chunks of
       * 16384 (512 items) 33.7, 4 of 8192 36.7, bf16 38.5 and 42.8). */
      const int64_t want = (cu + s->rows - 1) / s->rows;
      chunk = pow2_at_least((uint64_t)(n + want - 1) / (uint64_t)want);
      if (chunk < (uint64_t)4 * k) chunk = (uint64_t)4 * k;
      if (chunk < 8192) chunk = 8192;
    } else if ((uint64_t)n <= cap) {
      *why = "rows fill the device";
      return false;
    } else {
      chunk = cap; /* rows longer than a group holds */
    }
  }
  if (chunk > cap) chunk = cap;
  if ((int64_t)chunk >= n) {
    *why = "one chunk per row";
    return false;
  }
  const uint64_t nch = ((uint64_t)n + chunk - 1) / chunk;
  if (nch > TOPK_MAX_CHUNKS) {
    *why = "more than 64 chunks per row";
    return false;
  }
  if ((uint64_t)s->rows * nch * (uint64_t)k * 8 > TOPK_MAX_SCRATCH) {
    *why = "scratch over 1 GiB";
    return false;
  }
  /* Few rows of f32 (the device not full): the chunks' keys in registers,
   * every load in flight at once (H200, 64 x 32768 k = 512: 36.96 us
   * against 38.58 with them in local memory; the chunk pass alone 28.66
   * against 31.34; bf16 logits measured 42.72 against 42.18, so they keep
   * local memory). Else in local memory where they fit (topk_lrows: fewer
   * registers, more groups at once), then in registers. */
  const bool regs_first = few && !s->bf16;
  if (!rows_plan(c, &t, chunk, !regs_first, p) && !rows_plan(c, &t, chunk, regs_first, p)) {
    *why = "no group fits a chunk";
    return false;
  }
  p->chunk = (uint32_t)chunk;
  p->nch = (uint32_t)nch;
  return true;
}

static const char *algo_name(int algo) {
  return algo == DSA_TOPK_ALGO_SPLIT  ? "DSACL_TOPK=split"
         : algo == DSA_TOPK_ALGO_LROW ? "DSACL_TOPK=lrow"
         : algo == DSA_TOPK_ALGO_ROW ? "DSACL_TOPK=row"
                                     : "DSACL_TOPK=stream";
}
/* wide: one register group per row, for few rows (the device not full). */
static const char *refuse_wide(const dsa_context *c, const void *shape, char *buf, size_t n) {
  if (c->topk_algo > DSA_TOPK_ALGO_WIDE) return algo_name(c->topk_algo);
  if (!shape) return NULL;
  topk_shape s = *(const topk_shape *)shape;
  const int64_t cu = c->caps.compute_units ? c->caps.compute_units : 1;
  topk_plan p;
  if (c->topk_algo != DSA_TOPK_ALGO_WIDE) {
    if (s.rows >= 2 * cu) return "rows fill the device";
    /* k <= 512: two chunk groups a row and the merge beat one group (H100,
     * 64 x 32768 k = 512: 33.2 against 34.8 us, bf16 38.0 against 38.2);
     * above, the merge of longer lists loses (k = 2048: 40.9 against 38.2
     * in another call), so wide takes k > 512. */
    const char *why;
    if (s.k <= 512 && split_plan(c, &s, &p, &why)) return "k <= 512 and the split runs";
  }
  s.wg_limit = s.wg_limit_w;
  if (rows_plan(c, &s, (uint64_t)s.n_cols, false, &p)) return NULL;
  snprintf(buf, n, "no group holds %lld columns with k = %d", (long long)s.n_cols, (int)s.k);
  return buf;
}
static const char *refuse_split(const dsa_context *c, const void *shape, char *buf, size_t n) {
  if (c->topk_algo > DSA_TOPK_ALGO_SPLIT) return algo_name(c->topk_algo);
  if (!shape) return NULL;
  topk_plan p;
  const char *why = NULL;
  if (split_plan(c, shape, &p, &why)) return NULL;
  snprintf(buf, n, "%s", why);
  return buf;
}
/* row and lrow: one group holds the row (lk: its keys in local memory). */
static const char *refuse_rows(const dsa_context *c, const void *shape, char *buf, size_t n,
                               bool lk) {
  const topk_shape dev = {1, TOPK_MIN_WG * TOPK_VPT, 1, 0, 0, 0, false};
  const topk_shape *s = shape ? shape : &dev;
  topk_plan p;
  if (rows_plan(c, s, (uint64_t)s->n_cols, lk, &p)) return NULL;
  snprintf(buf, n, "no group holds %lld columns with k = %d%s", (long long)s->n_cols,
           (int)s->k, lk ? " (keys in local memory)" : "");
  return buf;
}
static const char *refuse_lrow(const dsa_context *c, const void *shape, char *buf, size_t n) {
  if (c->topk_algo > DSA_TOPK_ALGO_LROW) return algo_name(c->topk_algo);
  const char *r = refuse_rows(c, shape, buf, n, true);
  if (r || !shape || c->topk_algo == DSA_TOPK_ALGO_LROW) return r;
  /* lrow buys occupancy (fewer registers, more groups per compute unit),
   * which only many rows use: with few rows the row kernel, where it fits,
   * is faster (H200, 64 x 8192, k = 512: 24.3 against 28.9 us). */
  const topk_shape *s = shape;
  const int64_t cu = c->caps.compute_units ? c->caps.compute_units : 1;
  topk_plan p;
  if (s->rows < 2 * cu && rows_plan(c, s, (uint64_t)s->n_cols, false, &p))
    return "few rows: the row kernel is faster";
  return NULL;
}
static const char *refuse_row(const dsa_context *c, const void *shape, char *buf, size_t n) {
  if (c->topk_algo > DSA_TOPK_ALGO_ROW) return algo_name(c->topk_algo);
  return refuse_rows(c, shape, buf, n, false);
}
static const char *refuse_wide_sg32(const dsa_context *c, const void *shape, char *buf,
                                    size_t n) {
  const char *r = dsa__refuse_no_sg32(c, shape, buf, n);
  return r ? r : refuse_wide(c, shape, buf, n);
}
static const char *refuse_split_sg32(const dsa_context *c, const void *shape, char *buf,
                                     size_t n) {
  const char *r = dsa__refuse_no_sg32(c, shape, buf, n);
  return r ? r : refuse_split(c, shape, buf, n);
}
static const char *refuse_lrow_sg32(const dsa_context *c, const void *shape, char *buf,
                                    size_t n) {
  const char *r = dsa__refuse_no_sg32(c, shape, buf, n);
  return r ? r : refuse_lrow(c, shape, buf, n);
}
static const char *refuse_row_sg32(const dsa_context *c, const void *shape, char *buf, size_t n) {
  const char *r = dsa__refuse_no_sg32(c, shape, buf, n);
  return r ? r : refuse_row(c, shape, buf, n);
}

/* The same table for both forms. Indices: 0..3 wide, 4..7 split, 8..11 lrow,
 * 12..15 row, 16 stream. */
#define WIDE_LIM \
  "fewer rows than 2 per compute unit with k > 512 (or that the split cannot cut), each up to " \
  "WG * 32 columns (WG: the kernels' compiled size on NVIDIA, at most 1024)"
#define SPLIT_LIM "fewer rows than 2 per compute unit, or rows longer than WG * 32"
#define LROW_LIM \
  "rows up to WG * 32 columns whose keys (4 B each) fit local memory beside the histogram"
#define ROW_LIM "rows up to WG * 32 columns (WG: the device's group limit, at most 1024)"
#define TOPK_VARIANTS                                                                  \
  {"wide/nv-shfl", DSA_CAP_NV_PTX, refuse_wide, WIDE_LIM},                             \
      {"wide/amd-bperm", DSA_CAP_AMD_BUILTINS, refuse_wide, WIDE_LIM},                 \
      {"wide/intel-sg32", DSA_CAP_INTEL_SUBGROUPS, refuse_wide_sg32, WIDE_LIM},        \
      {"wide", 0, refuse_wide, WIDE_LIM},                                              \
      {"split/nv-shfl", DSA_CAP_NV_PTX, refuse_split, SPLIT_LIM},                          \
      {"split/amd-bperm", DSA_CAP_AMD_BUILTINS, refuse_split, SPLIT_LIM},              \
      {"split/intel-sg32", DSA_CAP_INTEL_SUBGROUPS, refuse_split_sg32, SPLIT_LIM},     \
      {"split", 0, refuse_split, SPLIT_LIM},                                           \
      {"lrow/nv-shfl", DSA_CAP_NV_PTX, refuse_lrow, LROW_LIM},                         \
      {"lrow/amd-bperm", DSA_CAP_AMD_BUILTINS, refuse_lrow, LROW_LIM},                 \
      {"lrow/intel-sg32", DSA_CAP_INTEL_SUBGROUPS, refuse_lrow_sg32, LROW_LIM},        \
      {"lrow", 0, refuse_lrow, LROW_LIM},                                              \
      {"row/nv-shfl", DSA_CAP_NV_PTX, refuse_row, ROW_LIM},                            \
      {"row/amd-bperm", DSA_CAP_AMD_BUILTINS, refuse_row, ROW_LIM},                    \
      {"row/intel-sg32", DSA_CAP_INTEL_SUBGROUPS, refuse_row_sg32, ROW_LIM},           \
      {"row", 0, refuse_row, ROW_LIM}, {"stream", 0, NULL, NULL}
DSA_VARIANT_TABLE(dsa__variants_topk_prefill, "dsa_topk_prefill", TOPK_VARIANTS);
DSA_VARIANT_TABLE(dsa__variants_topk_decode, "dsa_topk_decode", TOPK_VARIANTS);
enum { V_WIDE_END = 4, V_SPLIT_END = 8, V_LROW_END = 12, V_ROW_END = 16 };

enum { MODE_PREFILL = 0, MODE_LENS_1D = 1, MODE_LENS_2D = 2 };

void dsa_topk_params_default(dsa_topk_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
}

/* The stream kernel's group: about 32 candidates per item per pass for wide
 * rows (fewer rows then, so each needs more parallelism), never past what
 * the kernel and the device accept. */
static size_t stream_wg(dsa_queue *q, cl_kernel kern, int64_t n_cols) {
  size_t kmax = q->topk_lim[3]; /* asked once per queue (the kernel is the queue's) */
  if (!kmax) {
    if (clGetKernelWorkGroupInfo(kern, q->ctx->dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kmax,
                                 &kmax, NULL) != CL_SUCCESS || !kmax)
      kmax = TOPK_MIN_WG;
    q->topk_lim[3] = kmax;
  }
  size_t lim = TOPK_MAX_WG;
  if (q->ctx->caps.max_wg && q->ctx->caps.max_wg < lim) lim = q->ctx->caps.max_wg;
  if (kmax < lim) lim = kmax;
  size_t wg = TOPK_MIN_WG;
  while (wg * 2 <= lim && (int64_t)wg * 32 < n_cols) wg *= 2;
  return wg;
}

/* topk_rows_<WG>, WG = TOPK_MIN_WG << i (cl/topk.cl). */
#define ROWS_KERNELS 5
static const char *const rows_kernel[ROWS_KERNELS] = {"topk_rows_64", "topk_rows_128",
                                                      "topk_rows_256", "topk_rows_512",
                                                      "topk_rows_1024"};
_Static_assert((TOPK_MIN_WG << (ROWS_KERNELS - 1)) == TOPK_MAX_WG, "rows kernels");
/* topk_lrows_<WG>, WG = TOPK_MIN_WG << i, up to TOPK_LROWS_MAX_WG (larger
 * groups' keys, 64 KiB and more, fit no device's local memory beside the
 * rest). */
#define LROWS_KERNELS 4
static const char *const lrows_kernel[LROWS_KERNELS] = {"topk_lrows_64", "topk_lrows_128",
                                                        "topk_lrows_256", "topk_lrows_512"};
_Static_assert((TOPK_MIN_WG << (LROWS_KERNELS - 1)) == TOPK_LROWS_MAX_WG, "lrows kernels");

/* The largest of the n kernels names[i] (group TOPK_MIN_WG << i) that the
 * device runs at its size; 1 when none does (the variants refuse). reqd:
 * on NVIDIA's driver, the size each kernel was compiled for
 * (reqd_work_group_size) instead of CL_KERNEL_WORK_GROUP_SIZE, which it
 * reports as 256 for every top-k kernel, topk_rows_1024 too, though it runs
 * it at 1024 (H100, driver 580.159.04: test_topk's 1578 checks, each call
 * at up to 1024). */
static dsa_status kernels_limit(dsa_queue *q, const char *const *names, int n, bool reqd,
                                size_t *lim) {
  *lim = 1;
  if (q->ctx->topk_wg && names == rows_kernel) { /* DSACL_TOPK_WG: tuning */
    *lim = q->ctx->topk_wg;
    return DSA_OK;
  }
  if (reqd && q->ctx->caps.nv_inline_ptx) {
    for (int i = n - 1; i >= 0 && *lim == 1; i--) {
      const size_t w = (size_t)TOPK_MIN_WG << i;
      if (!q->ctx->caps.max_wg || w <= q->ctx->caps.max_wg) *lim = w;
    }
    return DSA_OK;
  }
  for (int i = n - 1; i >= 0 && *lim == 1; i--) {
    const size_t w = (size_t)TOPK_MIN_WG << i;
    if (q->ctx->caps.max_wg && w > q->ctx->caps.max_wg) continue;
    cl_kernel kr;
    DSA_CHECK(dsa__get_kernel(q, DSA_PROG_TOPK, names[i], &kr));
    size_t kw = 0;
    if (clGetKernelWorkGroupInfo(kr, q->ctx->dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kw, &kw,
                                 NULL) == CL_SUCCESS && kw >= w)
      *lim = w;
    dsa__log(4, "top-k: %s: CL_KERNEL_WORK_GROUP_SIZE %zu", names[i], kw);
  }
  return DSA_OK;
}

/* The range arguments every kernel takes after its own leading ones. */
static void karg_ranges(dsa_kargs *ka, const dsa_tensor *logits, int mode, const dsa_tensor *a,
                        const dsa_tensor *b, int32_t next_n) {
  dsa__karg_i64(ka, logits->shape[1]);
  dsa__karg_i32(ka, mode);
  dsa__karg_tensor(ka, a, 2); /* lengths: 1-D or 2-D */
  dsa__karg_tensor(ka, b, 1);
  dsa__karg_i32(ka, next_n);
}

/* Whether the split may merge in each row's last group (cl/topk.cl, split
 * 2): that group reads lists other groups wrote in the same launch
 * (dsa__group_handoff_ok); elsewhere topk_merge's second launch merges,
 * unless DSACL_TOPK_MERGE=group. */
static bool merge_in_group_ok(const dsa_context *c) {
  /* PoCL builds topk.cl without it (TOPK_GMERGE 0: its work-group
   * compiler took minutes a kernel over the merge's barriers), so there
   * topk_merge merges, DSACL_TOPK_MERGE=group included. */
  if (c->caps.vendor == DSA_VENDOR_POCL) return false;
  if (c->topk_fuse != 1) return c->topk_fuse == 2;
  return dsa__group_handoff_ok(c);
}

/* Shared by both forms: everything after the per-form range arguments are
 * validated. a/b: the range tensors (b NULL in decode). */
static dsa_status launch(dsa_queue *q, const char *op, const dsa_tensor *logits, int mode,
                         const dsa_tensor *a, const dsa_tensor *b, int32_t next_n,
                         const dsa_tensor *indices, int32_t k, const dsa_events *ev) {
  const int64_t rows = logits->shape[0];
  if (rows == 0) return dsa__launch_nothing(q, ev);
  /* The largest topk_rows_<WG> (topk_lrows_<WG>) kernel the device runs at
   * its size decides what the register (local-key) variants take. */
  /* Asked of the driver on the queue's first top-k call only (each asks
   * up to nine kernels, a host cost on every call before). */
  if (!q->topk_lim[0]) {
    size_t l[3];
    DSA_CHECK(kernels_limit(q, rows_kernel, ROWS_KERNELS, false, &l[0]));
    DSA_CHECK(kernels_limit(q, lrows_kernel, LROWS_KERNELS, false, &l[1]));
    DSA_CHECK(kernels_limit(q, rows_kernel, ROWS_KERNELS, true, &l[2]));
    q->topk_lim[1] = l[1], q->topk_lim[2] = l[2], q->topk_lim[0] = l[0];
  }
  const size_t klim = q->topk_lim[0], klim_l = q->topk_lim[1], klim_w = q->topk_lim[2];
  const topk_shape shape = {rows,   logits->shape[1], k, klim, klim_l,
                            klim_w, logits->dtype == DSA_BF16};
  const int v = dsa__pick(q, mode == MODE_PREFILL ? &dsa__variants_topk_prefill
                                                  : &dsa__variants_topk_decode,
                          &shape);
  if (v < 0) return DSA_ERR_UNSUPPORTED;

  dsa_kargs ka;
  dsa__kargs_init(&ka, q);
  if (v >= V_ROW_END) { /* stream */
    cl_kernel kern;
    DSA_CHECK(dsa__get_kernel(q, DSA_PROG_TOPK, "topk_per_row", &kern));
    const size_t wg = stream_wg(q, kern, logits->shape[1]);
    if (wg < TOPK_MIN_WG)
      return dsa__fail(DSA_ERR_UNSUPPORTED, 0, "%s: the device runs top-k groups of %zu items, "
                       "fewer than the %d the kernel needs", op, wg, TOPK_MIN_WG);
    dsa__karg_tensor(&ka, logits, 2);
    dsa__karg_i32(&ka, logits->dtype == DSA_BF16);
    karg_ranges(&ka, logits, mode, a, b, next_n);
    dsa__karg_tensor(&ka, indices, 2);
    dsa__karg_i32(&ka, k);
    dsa__karg_faults(&ka);
    const size_t global[1] = {(size_t)rows * wg}, local[1] = {wg};
    return dsa__launch_args(q, kern, "topk_per_row", &ka, 1, global, local, ev);
  }

  topk_plan p;
  const char *why = NULL;
  const bool split = v >= V_WIDE_END && v < V_SPLIT_END;
  topk_shape pshape = shape;
  if (v < V_WIDE_END) pshape.wg_limit = klim_w;
  if (split ? !split_plan(q->ctx, &shape, &p, &why)
            : !rows_plan(q->ctx, &pshape, (uint64_t)shape.n_cols,
                         v >= V_SPLIT_END && v < V_LROW_END, &p))
    return dsa__fail(DSA_ERR_INTERNAL, 0, "%s: the picked variant has no plan", op);
  const bool lk = p.lk;
  if (!split) p.chunk = (uint32_t)shape.n_cols, p.nch = 1;
  dsa__log(3, "%s: topk_%srows groups of %zu (limit %zu), chunk %u x %u, sort %u words%s, "
           "local %zu + %zu B", op, lk ? "l" : "", p.wg, lk ? klim_l : pshape.wg_limit, p.chunk, p.nch,
           p.p2, p.dbl ? " (2 buffers)" : "", p.local_bytes, p.keys_bytes);
  int wi = 0;
  while ((size_t)TOPK_MIN_WG << wi < p.wg) wi++;
  const char *kname = lk ? lrows_kernel[wi] : rows_kernel[wi];
  cl_kernel krows;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_TOPK, kname, &krows));
  cl_mem scratch = NULL, cnt = NULL;
  cl_kernel kmerge = NULL;
  const size_t arena_words = (p.local_bytes - (size_t)(TOPK_MAX_WG + 4) * 4) / 8;
  /* The split merges its lists in each row's last chunk group (one launch:
   * cl/topk.cl, topk_rows_body) where the arena holds all of a row's lists,
   * else by topk_merge. */
  const uint64_t lw = (uint64_t)k < p.chunk ? (uint64_t)k : p.chunk;
  const bool fuse = split && merge_in_group_ok(q->ctx) && (uint64_t)p.nch * lw <= arena_words;
  if (split) {
    dsa__log(3, "%s: the split's lists merged %s", op,
             fuse ? "in each row's last group" : "by topk_merge");
    /* Looked up before anything is enqueued: no half-done operation. */
    if (fuse)
      DSA_CHECK(dsa__queue_counters(q, rows, &cnt));
    else
      DSA_CHECK(dsa__get_kernel(q, DSA_PROG_TOPK, "topk_merge", &kmerge));
    DSA_CHECK(dsa__queue_scratch(q, (size_t)rows * p.nch * (size_t)k * 8, &scratch));
  }
  dsa__karg_tensor(&ka, logits, 2);
  dsa__karg_i32(&ka, logits->dtype == DSA_BF16);
  karg_ranges(&ka, logits, mode, a, b, next_n);
  dsa__karg_tensor(&ka, indices, 2);
  dsa__karg_i32(&ka, k);
  dsa__karg_mem(&ka, scratch);
  dsa__karg_mem(&ka, cnt);
  dsa__karg_u32(&ka, p.chunk);
  dsa__karg_u32(&ka, p.nch);
  dsa__karg_i32(&ka, fuse ? 2 : split);
  /* The sort's words per item at least: 4 where lrow groups fill the
   * device (one merge round fewer; cl/topk.cl), else 2. */
  const int64_t cu = q->ctx->caps.compute_units ? q->ctx->caps.compute_units : 1;
  dsa__karg_u32(&ka, !split && lk && rows >= 2 * cu ? 4u : 2u);
  dsa__karg_local(&ka, p.local_bytes);
  dsa__karg_u32(&ka, (cl_uint)arena_words);
  dsa__karg_u32(&ka, p.dbl);
  /* topk_rows_<WG> for WG >= TOPK_SK_WG (on CPUs every register kernel,
   * cl/topk.cl's TOPK_SK_ALL): a side room for the counting sort (sk
   * there) beside the arena, the largest that fits of: 8 p2 words (bins
   * and words as pairs for up to 2 p2 candidates, the level-0 stop's), 4
   * p2 (p2 words), TOPK_BINS (the bins alone: the in-place form, which
   * topk_rows_1024 takes). lrow has its keys' room. A local argument is
   * never empty. */
  size_t keys_bytes = lk ? p.keys_bytes : 4, keys_words = lk ? p.keys_bytes / 4 : 0;
  const bool sk = p.wg >= TOPK_SK_WG || (q->ctx->caps.type & CL_DEVICE_TYPE_CPU);
  const size_t sides[3] = {(size_t)8 * p.p2, (size_t)4 * p.p2, TOPK_BINS};
  for (int i = 0; i < 3 && !lk && sk; i++) {
    if (p.local_bytes + sides[i] * 4 <= q->ctx->caps.local_mem) {
      keys_bytes = sides[i] * 4, keys_words = sides[i];
      break;
    }
  }
  dsa__karg_local(&ka, keys_bytes);
  dsa__karg_u32(&ka, (cl_uint)keys_words);
  dsa__karg_u32(&ka, q->ctx->topk_sample);
  dsa__karg_faults(&ka);
  const size_t global[1] = {(size_t)rows * p.nch * p.wg}, local[1] = {p.wg};
  if (!split || fuse) return dsa__launch_args(q, krows, kname, &ka, 1, global, local, ev);

  const dsa_events first = {ev ? ev->num_wait : 0, ev ? ev->wait : NULL, NULL};
  DSA_CHECK(dsa__launch_args(q, krows, kname, &ka, 1, global, local, &first));
  /* In-order queue: the merge follows the chunk sorts. */
  /* Few rows: one list entry per item (parallelism); else TOPK_MERGE_Q
   * (one binary search per other list for Q entries). Copying the row's
   * lists to local memory first (the searches there, four entries per
   * item) measured slower: 52.6 us against 49.2 at 64 x 32768 k = 512 on
   * an H200. */
  const uint32_t mq = rows < 2 * cu ? 1 : TOPK_MERGE_Q, per = TOPK_MERGE_WG * mq,
                 pieces = (uint32_t)((k + per - 1) / per);
  dsa_kargs km;
  dsa__kargs_init(&km, q);
  karg_ranges(&km, logits, mode, a, b, next_n);
  dsa__karg_tensor(&km, indices, 2);
  dsa__karg_i32(&km, k);
  dsa__karg_mem(&km, scratch);
  dsa__karg_u32(&km, p.chunk);
  dsa__karg_u32(&km, p.nch);
  dsa__karg_u32(&km, pieces);
  dsa__karg_u32(&km, mq);
  dsa__karg_faults(&km);
  const size_t mglobal[1] = {(size_t)rows * p.nch * pieces * TOPK_MERGE_WG},
               mlocal[1] = {TOPK_MERGE_WG};
  const dsa_events second = {0, NULL, ev ? ev->done : NULL};
  return dsa__launch_args(q, kmerge, "topk_merge", &km, 1, mglobal, mlocal, &second);
}

/* logits [rows, N] f32 or bf16 (what the indexer logits operators write)
 * and indices [rows, k] i32; returns k in *k_out. */
static dsa_status check_common(const char *op, const dsa_tensor *logits,
                               const dsa_tensor *indices, const dsa_topk_params *p,
                               int32_t *k_out) {
  /* A bf16 tensor is checked as bf16; anything else as f32 (so a wrong
   * dtype is named against f32, the usual one). */
  DSA_CHECK(dsa__check_tensor(logits, op, "logits",
                              logits && logits->dtype == DSA_BF16 ? DSA_BF16 : DSA_F32, 2));
  DSA_CHECK(dsa__check_unit_inner(logits, op, "logits"));
  if (logits->shape[1] > INT32_MAX)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: logits shape[1] = %lld exceeds the i32 index range", op,
                     (long long)logits->shape[1]);
  if (logits->shape[0] > ((int64_t)1 << 31))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: logits shape[0] = %lld rows is too many",
                     op, (long long)logits->shape[0]);
  DSA_CHECK(dsa__check_tensor(indices, op, "indices", DSA_I32, 2));
  DSA_CHECK(dsa__check_dim(indices, op, "indices", 0, logits->shape[0]));
  int32_t k = p ? p->k : 0;
  if (k < 0 || k > DSA_TOPK_MAX_K)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: params k = %d must be in [0, %d]", op,
                     (int)k, DSA_TOPK_MAX_K);
  if (k == 0) {
    if (indices->shape[1] < 1 || indices->shape[1] > DSA_TOPK_MAX_K)
      return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                       "%s: indices shape[1] = %lld (= k) must be in [1, %d]", op,
                       (long long)indices->shape[1], DSA_TOPK_MAX_K);
    k = (int32_t)indices->shape[1];
  } else if (indices->shape[1] != k) {
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: indices shape[1] = %lld but params k = %d",
                     op, (long long)indices->shape[1], (int)k);
  }
  /* Outputs may not alias each other across rows: a zero stride would. */
  if (indices->shape[0] > 1 && indices->stride[0] == 0)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: indices stride[0] is 0", op);
  if (indices->shape[1] > 1 && indices->stride[1] == 0)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: indices stride[1] is 0", op);
  *k_out = k;
  return DSA_OK;
}

dsa_status dsa_topk_prefill(dsa_queue *q, const dsa_tensor *logits, const dsa_tensor *row_starts,
                            const dsa_tensor *row_ends, const dsa_tensor *indices,
                            const dsa_topk_params *p, const dsa_events *ev) {
  static const char op[] = "dsa_topk_prefill";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  int32_t k;
  DSA_CHECK(check_common(op, logits, indices, p, &k));
  DSA_CHECK(dsa__check_tensor(row_starts, op, "row_starts", DSA_I32, 1));
  DSA_CHECK(dsa__check_dim(row_starts, op, "row_starts", 0, logits->shape[0]));
  DSA_CHECK(dsa__check_tensor(row_ends, op, "row_ends", DSA_I32, 1));
  DSA_CHECK(dsa__check_dim(row_ends, op, "row_ends", 0, logits->shape[0]));
  if (p && p->next_n != 0 && p->next_n != 1)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: params next_n = %d has no meaning here (0 or 1)", op, (int)p->next_n);
  return launch(q, op, logits, MODE_PREFILL, row_starts, row_ends, 1, indices, k, ev);
}

dsa_status dsa_topk_decode(dsa_queue *q, const dsa_tensor *logits, const dsa_tensor *lengths,
                           const dsa_tensor *indices, const dsa_topk_params *p,
                           const dsa_events *ev) {
  static const char op[] = "dsa_topk_decode";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  int32_t k;
  DSA_CHECK(check_common(op, logits, indices, p, &k));
  if (!lengths) return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: lengths is NULL", op);
  const int rank = lengths->ndim;
  if (rank != 1 && rank != 2)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: lengths has rank %d, expected 1 ([B]) or 2 ([B, next_n])", op, rank);
  DSA_CHECK(dsa__check_tensor(lengths, op, "lengths", DSA_I32, rank));
  int32_t pn = p ? p->next_n : 0;
  int64_t next_n;
  if (rank == 1) {
    if (pn < 0)
      return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: params next_n = %d must be >= 0", op,
                       (int)pn);
    /* next_n comes from the tensors that carry it (as in
     * dsa_indexer_paged_logits): 1-D lengths [B] with 0 derive it from the
     * logits' rows, rows / B. */
    const int64_t nb = lengths->shape[0], nr = logits->shape[0];
    next_n = pn ? pn : nb > 0 && nr % nb == 0 && nr / nb >= 1 && nr / nb <= INT32_MAX ? nr / nb : 1;
  } else {
    next_n = lengths->shape[1];
    if (pn != 0 && pn != next_n)
      return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                       "%s: params next_n = %d but lengths shape[1] = %lld", op, (int)pn,
                       (long long)next_n);
    if (next_n < 1 || next_n > INT32_MAX)
      return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                       "%s: lengths shape[1] = %lld (next_n) must be >= 1", op,
                       (long long)next_n);
  }
  int64_t rows;
  if (__builtin_mul_overflow(lengths->shape[0], next_n, &rows) || rows != logits->shape[0])
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: lengths shape[0] = %lld times next_n = %lld must equal the logits "
                     "rows (%lld)",
                     op, (long long)lengths->shape[0], (long long)next_n,
                     (long long)logits->shape[0]);
  return launch(q, op, logits, rank == 1 ? MODE_LENS_1D : MODE_LENS_2D, lengths, NULL,
                (int32_t)next_n, indices, k, ev);
}
