/* checkcl: checks every kernel variant of every operator against tests/ref
 * and times them side by side (checkasm's shape, for OpenCL).
 *
 *   checkcl [--quick] [--masked-only] [--seed N] [--ops a,b] [--list] [--bench [--small] [--json]]
 *
 * The loop: for each capability mask the device allows (all enabled, then
 * each enabled capability disabled in turn, then all disabled) and once more
 * with DSACL_LOCAL_MEM_LIMIT=32768, a context is created and each operator
 * runs its cases, unless the variants it could pick under this mask (its
 * table, judged for the device) are the same as under a mask already run.
 * One line per (operator, variant): ok or FAIL with the first difference.
 * Operators whose family has no variant table yet run under the first mask
 * and with every capability disabled, named "(no table)". Each operator's
 * last line gives its wall seconds under that mask (program builds
 * included). --masked-only records the all-enabled mask's picks without
 * running them: the test suite's per-family tests run those on the same
 * device (the meson test `checkcl-cases` runs so, as `checkcl` does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common.h"
#include "cases.h"
#include "checkcl.h"
#include "internal.h"

/* ---- helpers ------------------------------------------------------------- */

int64_t cc_rnd(cc_env *e, int64_t n) {
  return n > 0 ? (int64_t)(dsa_test_rand(&e->rng) % (uint64_t)n) : 0;
}
double cc_uniform(cc_env *e, double lo, double hi) {
  return lo + dsa_test_uniform(&e->rng) * (hi - lo);
}
uint16_t cc_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
float cc_bf16_f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
void cc_fill_bytes(cc_env *e, void *p, size_t n) { dsa_test_fill_random(&e->rng, p, n); }
void *cc_xmalloc(size_t n) { return dsa_test_xmalloc(n ? n : 1); }

cl_mem cc_buf(cc_env *e, size_t bytes, const void *init) {
  cl_int err;
  if (!bytes) bytes = 1;
  cl_mem m = clCreateBuffer(e->clctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "checkcl: clCreateBuffer(%zu): %d\n", bytes, (int)err);
    exit(2);
  }
  if (init)
    err = clEnqueueWriteBuffer(e->clq, m, CL_TRUE, 0, bytes, init, 0, NULL, NULL);
  else {
    const cl_uchar z = 0;
    err = clEnqueueFillBuffer(e->clq, m, &z, 1, 0, bytes, 0, NULL, NULL);
  }
  if (err != CL_SUCCESS) {
    fprintf(stderr, "checkcl: buffer init: %d\n", (int)err);
    exit(2);
  }
  return m;
}
void cc_read(cc_env *e, cl_mem m, size_t bytes, void *dst) {
  if (!bytes) return;
  cl_int err = clEnqueueReadBuffer(e->clq, m, CL_TRUE, 0, bytes, dst, 0, NULL, NULL);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "checkcl: clEnqueueReadBuffer: %d\n", (int)err);
    exit(2);
  }
}
void cc_free(cl_mem *m) {
  if (*m) clReleaseMemObject(*m);
  *m = NULL;
}
dsa_tensor cc_t(cl_mem m, dsa_dtype dt, int nd, const int64_t *shape) {
  return dsa_tensor_make(m, 0, dt, nd, shape);
}
uint32_t cc_faults(cc_env *e) {
  uint32_t f = 0;
  if (dsa_queue_faults(e->q, &f) != DSA_OK) return 0xffffffffu;
  return f;
}
int cc_cmp_bytes(const void *got, const void *want, size_t n, size_t esz, const char *what,
                 char *msg, size_t msz) {
  return case_cmp_bytes(got, want, n, esz, what, msg, msz);
}

void cc_after_call(cc_env *e) {
  const char *v = dsa__queue_last_variant(e->q);
  snprintf(e->last, sizeof e->last, "%s", *v ? v : "(no table)");
  e->q->last_variant[0] = '\0';
  for (int i = 0; i < e->nseen; i++)
    if (!strcmp(e->seen[i], e->last)) return;
  if (e->nseen < 8) snprintf(e->seen[e->nseen++], sizeof e->seen[0], "%s", e->last);
}

/* ---- the operators ------------------------------------------------------- */

static const cc_op *const families[] = {cc_ops_mla_cache, cc_ops_mla_qnorm, cc_ops_indexer_quant, cc_ops_indexer_logits, cc_ops_topk, cc_ops_sparse_mla, cc_ops_index_helpers, cc_ops_compressor, cc_ops_output_quant, cc_ops_mtp_norm};

#define MAX_OPS 48
static const cc_op *ops[MAX_OPS];
static int nops;

static const dsa_variant_table *table_of(const char *op) {
  for (int i = 0; i < dsa__num_variant_tables; i++)
    if (!strcmp(dsa__variant_tables[i]->op, op)) return dsa__variant_tables[i];
  return NULL;
}

static int selected(const char *filter, const char *name) {
  if (!filter) return 1;
  size_t n = strlen(name);
  for (const char *p = filter; *p;) {
    const char *c = strchr(p, ',');
    size_t l = c ? (size_t)(c - p) : strlen(p);
    /* "dsa_" may be left out */
    if ((l == n && !strncmp(p, name, l)) || (l == n - 4 && !strncmp(p, name + 4, l))) return 1;
    p += l + (c ? 1 : 0);
  }
  return 0;
}

/* ---- masks --------------------------------------------------------------- */

typedef struct mask_run {
  unsigned disable;
  int lmem; /* DSACL_LOCAL_MEM_LIMIT=32768 */
  char label[64];
} mask_run;

static int make_masks(unsigned has, mask_run *m) {
  int n = 0;
  m[n++] = (mask_run){0, 0, "all caps"};
  int bits = 0;
  for (unsigned b = 1; b <= DSA_CAP_ALL; b <<= 1)
    if (has & b) {
      bits++;
      m[n] = (mask_run){b, 0, ""};
      snprintf(m[n].label, sizeof m[n].label, "-%s", dsa_cap_name(b));
      n++;
    }
  if (bits > 1) m[n++] = (mask_run){DSA_CAP_ALL, 0, "no caps"};
  m[n++] = (mask_run){0, 1, "local mem 32768"};
  return n;
}

static int open_ctx(const mask_run *m, unsigned qflags, dsa_context **c, dsa_queue **q) {
  dsa_context_options o;
  dsa_context_options_default(&o);
  o.disable_caps = m->disable;
  const char *cd = getenv("DSACL_CACHE_DIR");
  o.cache_dir = cd && *cd ? cd : "off";
  if (m->lmem) setenv("DSACL_LOCAL_MEM_LIMIT", "32768", 1);
  dsa_status st = dsa_context_create(c, &o);
  if (m->lmem) unsetenv("DSACL_LOCAL_MEM_LIMIT");
  if (st != DSA_OK) {
    fprintf(stderr, "checkcl: dsa_context_create: %s: %s\n", dsa_status_name(st),
            dsa_last_error());
    return st == DSA_ERR_NO_DEVICE ? 77 : 1;
  }
  st = dsa_queue_create(q, *c, qflags);
  if (st != DSA_OK) {
    fprintf(stderr, "checkcl: dsa_queue_create: %s\n", dsa_last_error());
    dsa_context_destroy(c);
    return 1;
  }
  return 0;
}

/* What decides the pick of op under this context: the variants its table
 * allows on the device, in order. "" for an operator without a table. */
static void pick_key(const dsa_context *c, const char *op, char *key, size_t n) {
  const dsa_variant_table *t = table_of(op);
  key[0] = '\0';
  if (!t) return;
  size_t used = 0;
  for (int i = 0; i < t->n; i++) {
    char buf[160];
    if (dsa__variant_refusal(c, &t->v[i], NULL, buf, sizeof buf)) continue;
    int w = snprintf(key + used, n - used, "%s,", t->v[i].name);
    if (w > 0 && used + (size_t)w < n) used += (size_t)w;
  }
}

static int table_has_predicates(const char *op) {
  const dsa_variant_table *t = table_of(op);
  if (!t) return 0;
  for (int i = 0; i < t->n; i++)
    if (t->v[i].refuse) return 1;
  return 0;
}

/* Whether op runs under mask mi; keys[op] collects the keys already run. */
#define MAX_KEYS 16
static char keys[MAX_OPS][MAX_KEYS][256];
static int nkeys[MAX_OPS];

static int should_run(const dsa_context *c, int oi, const mask_run *m, unsigned has) {
  char key[256];
  pick_key(c, ops[oi]->name, key, sizeof key);
  if (!key[0]) { /* no table: the first mask and every capability off */
    if (m->lmem) return 0;
    if (m->disable == 0) return 1;
    return (m->disable & has) == has && nkeys[oi] < 2 ? (nkeys[oi]++, 1) : 0;
  }
  if (m->lmem) return table_has_predicates(ops[oi]->name);
  for (int k = 0; k < nkeys[oi]; k++)
    if (!strcmp(keys[oi][k], key)) return 0;
  if (nkeys[oi] < MAX_KEYS) snprintf(keys[oi][nkeys[oi]++], 256, "%s", key);
  return 1;
}

static const char *variant_part(const char *full) {
  const char *p = strstr(full, ": ");
  return p ? p + 2 : full;
}

/* ---- --list ---------------------------------------------------------------- */

static int list(unsigned has) {
  mask_run m = {0, 0, "all caps"};
  dsa_context *c;
  dsa_queue *q;
  int rc = open_ctx(&m, 0, &c, &q);
  if (rc) return rc;
  printf("device: %s\ncapabilities:", dsa_context_device_name(c));
  for (unsigned b = 1; b <= DSA_CAP_ALL; b <<= 1)
    if (has & b) printf(" %s", dsa_cap_name(b));
  printf("\n");
  for (int i = 0; i < nops; i++) {
    const dsa_variant_table *t = table_of(ops[i]->name);
    printf("%s\n", ops[i]->name);
    if (!t) {
      printf("  (no table yet)\n");
      continue;
    }
    for (int k = 0; k < t->n; k++) {
      char buf[160];
      const char *r = dsa__variant_refusal(c, &t->v[k], NULL, buf, sizeof buf);
      printf("  %-12s %s%s%s\n", t->v[k].name, r ? "refused: " : "runs",
             r ? r : "", t->v[k].limits && !r ? t->v[k].limits : "");
    }
  }
  dsa_queue_destroy(&q);
  dsa_context_destroy(&c);
  return 0;
}

/* ---- check ------------------------------------------------------------------ */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int check(unsigned has, uint64_t seed, int quick, int masked_only) {
  mask_run masks[16];
  const int nm = make_masks(has, masks);
  int fails = 0, lines = 0;
  for (int mi = 0; mi < nm; mi++) {
    dsa_context *c;
    dsa_queue *q;
    int rc = open_ctx(&masks[mi], 0, &c, &q);
    if (rc) return rc;
    cc_env e = {c, q, dsa_context_cl_context(c), dsa_queue_cl(q), 0, quick, {{0}}, 0, ""};
    for (int oi = 0; oi < nops; oi++) {
      if (!should_run(c, oi, &masks[mi], has)) continue;
      /* --masked-only: the first mask's picks are recorded (a later mask
       * runs an operator only where its pick differs) but not run: the
       * test suite's per-family tests run them, on richer cases. */
      if (masked_only && mi == 0) continue;
      e.rng = seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(oi + 1));
      e.nseen = 0;
      e.last[0] = '\0';
      char msg[512] = "";
      /* Wall seconds an operator took under this mask (its programs' builds
       * included: a CPU runtime compiles in the first call), printed on its
       * last line: what CI's time budget is spent on (docs/TESTING.md). */
      const double t0 = now_s();
      int bad = ops[oi]->check(&e, msg, sizeof msg);
      const double dt = now_s() - t0;
      if (bad) fails++;
      for (int s = 0; s < e.nseen; s++) {
        const int this_bad = bad && !strcmp(e.seen[s], e.last);
        printf("%-4s %-34s %-12s [%s]%s%s", this_bad ? "FAIL" : "ok", ops[oi]->name,
               variant_part(e.seen[s]), masks[mi].label, this_bad ? "  " : "",
               this_bad ? msg : "");
        if (s == e.nseen - 1) printf("  (%.1f s)", dt);
        printf("\n");
        lines++;
      }
      if (!e.nseen) {
        printf("%-4s %-34s %-12s [%s]%s%s  (%.1f s)\n", bad ? "FAIL" : "ok", ops[oi]->name, "-",
               masks[mi].label, bad ? "  " : "", bad ? msg : "", dt);
        lines++;
      }
      fflush(stdout);
    }
    dsa_queue_destroy(&q);
    dsa_context_destroy(&c);
  }
  printf("%d lines, %d failed\n", lines, fails);
  return fails ? 1 : 0;
}

/* ---- bench ------------------------------------------------------------------ */

#define MAX_VAR 8
typedef struct bench_row {
  char var[MAX_VAR][96];
  double ms[MAX_VAR];
  int nvar;
  char err[160];
} bench_row;

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

void cc_upload(cc_env *e, const case_ops *ops, void *c, int gen, unsigned char fill) {
  char msg[256] = "out of memory";
  if (gen || ops->upload(&(case_dev){e->clctx, e->clq}, c, fill, msg, sizeof msg)) {
    fprintf(stderr, "checkcl: %s case: %s\n", ops->op, msg);
    exit(2);
  }
}

dsa_status cc_run(cc_env *e, const case_ops *ops, const void *c, cl_event *done) {
  const dsa_events ev = {0, NULL, done};
  const dsa_status s = ops->call(e->q, c, &ev);
  cc_after_call(e);
  return s;
}

void cc_case_free(const case_ops *ops, void *c) {
  if (!c) return;
  ops->free(c);
  free(c);
}

/* The one bench wrapper: op's case st enqueued once, ev.done = *done. */
static int bench_call(cc_env *e, const cc_op *op, void *st, cl_event *done) {
  return cc_run(e, op->bench_ops, st, done) != DSA_OK;
}

/* A zeroed case of op's form with its bench shape and inputs, uploaded;
 * NULL (the row's err set) on failure. */
static void *bench_setup(cc_env *e, const cc_op *op, int small, char *err, size_t n) {
  void *st = cc_xmalloc(op->bench_size);
  char msg[256] = "";
  if (op->bench_gen(e, small, st) ||
      op->bench_ops->upload(&(case_dev){e->clctx, e->clq}, st, 0, msg, sizeof msg)) {
    snprintf(err, n, "setup failed: %s", dsa_last_error());
    cc_case_free(op->bench_ops, st);
    return NULL;
  }
  return st;
}

static void bench_free(const cc_op *op, void *st) { cc_case_free(op->bench_ops, st); }

static double time_op(cc_env *e, const cc_op *op, void *st, cl_mem flush, size_t flush_bytes,
                      int warm, int runs) {
  double t[64];
  for (int i = 0; i < warm; i++) {
    cl_event d = NULL;
    if (bench_call(e, op, st, &d)) return -1;
    if (d) clReleaseEvent(d);
  }
  clFinish(e->clq);
  for (int i = 0; i < runs; i++) {
    const cl_uchar z = 0;
    if (flush) clEnqueueFillBuffer(e->clq, flush, &z, 1, 0, flush_bytes, 0, NULL, NULL);
    cl_event m0 = NULL, d = NULL;
    clEnqueueMarkerWithWaitList(e->clq, 0, NULL, &m0);
    if (bench_call(e, op, st, &d) || !d) return -1;
    clWaitForEvents(1, &d);
    cl_ulong a = 0, b = 0;
    clGetEventProfilingInfo(m0, CL_PROFILING_COMMAND_END, sizeof a, &a, NULL);
    clGetEventProfilingInfo(d, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL);
    t[i] = (double)(b - a) * 1e-6;
    clReleaseEvent(m0);
    clReleaseEvent(d);
  }
  qsort(t, (size_t)runs, sizeof t[0], cmp_d);
  return t[runs / 2];
}

static int bench(unsigned has, int small, int json, int runs) {
  mask_run masks[16];
  const int nm = make_masks(has, masks);
  static bench_row rows[MAX_OPS];
  memset(rows, 0, sizeof rows);
  char dev[256] = "";
  for (int mi = 0; mi < nm; mi++) {
    dsa_context *c;
    dsa_queue *q;
    int rc = open_ctx(&masks[mi], DSA_QUEUE_PROFILING, &c, &q);
    if (rc) return rc;
    snprintf(dev, sizeof dev, "%s", dsa_context_device_name(c));
    cc_env e = {c, q, dsa_context_cl_context(c), dsa_queue_cl(q), 0x5EED, 1, {{0}}, 0, ""};
    cl_device_type type = 0;
    clGetDeviceInfo(dsa_context_cl_device(c), CL_DEVICE_TYPE, sizeof type, &type, NULL);
    size_t fb = (type & CL_DEVICE_TYPE_GPU) ? (size_t)128 << 20 : (size_t)8 << 20;
    cl_mem flush = cc_buf(&e, fb, NULL);
    for (int oi = 0; oi < nops; oi++) {
      const cc_op *op = ops[oi];
      if (!op->bench_ops || !should_run(c, oi, &masks[mi], has)) continue;
      void *st = bench_setup(&e, op, small, rows[oi].err, sizeof rows[oi].err);
      if (!st) continue;
      cl_event d = NULL;
      e.nseen = 0;
      if (bench_call(&e, op, st, &d)) {
        snprintf(rows[oi].err, sizeof rows[oi].err, "%s", dsa_last_error());
        bench_free(op, st);
        continue;
      }
      if (d) clReleaseEvent(d);
      const char *v = variant_part(e.last);
      int known = 0;
      for (int k = 0; k < rows[oi].nvar; k++) known |= !strcmp(rows[oi].var[k], v);
      if (!known && rows[oi].nvar < MAX_VAR) {
        double ms = time_op(&e, op, st, flush, fb, 2, runs);
        int k = rows[oi].nvar++;
        snprintf(rows[oi].var[k], sizeof rows[oi].var[k], "%s", v);
        rows[oi].ms[k] = ms;
      }
      clFinish(e.clq);
      bench_free(op, st);
    }
    cc_free(&flush);
    dsa_queue_destroy(&q);
    dsa_context_destroy(&c);
  }
  if (json) {
    printf("{\n  \"device\": \"%s\",\n  \"small\": %s,\n  \"runs\": %d,\n  \"ops\": [", dev,
           small ? "true" : "false", runs);
    int first = 1;
    for (int oi = 0; oi < nops; oi++) {
      if (!ops[oi]->bench_ops) continue;
      printf("%s\n    {\"op\": \"%s\", \"shape\": \"%s\", \"variants\": [", first ? "" : ",",
             ops[oi]->name, small ? "small" : ops[oi]->bench_shape);
      first = 0;
      for (int k = 0; k < rows[oi].nvar; k++)
        printf("%s{\"variant\": \"%s\", \"median_ms\": %.4f}", k ? ", " : "", rows[oi].var[k],
               rows[oi].ms[k]);
      printf("]}");
    }
    printf("\n  ]\n}\n");
    return 0;
  }
  printf("device: %s; median of %d runs (ms), %s shapes\n", dev, runs,
         small ? "small" : "DeepSeek-V4");
  for (int oi = 0; oi < nops; oi++) {
    if (!ops[oi]->bench_ops) continue;
    printf("%-32s %-28s", ops[oi]->name, small ? "(small shape)" : ops[oi]->bench_shape);
    for (int k = 0; k < rows[oi].nvar; k++)
      printf("  %s %.3f", rows[oi].var[k], rows[oi].ms[k]);
    if (rows[oi].err[0]) printf("  (%s)", rows[oi].err);
    printf("\n");
  }
  return 0;
}

int main(int argc, char **argv) {
  int quick = 0, masked_only = 0, do_list = 0, do_bench = 0, json = 0, small = 0, runs = 11;
  uint64_t seed = 0xC4EC4C1ull;
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--masked-only")) masked_only = 1;
    else if (!strcmp(argv[i], "--list")) do_list = 1;
    else if (!strcmp(argv[i], "--bench")) do_bench = 1;
    else if (!strcmp(argv[i], "--json")) json = 1;
    else if (!strcmp(argv[i], "--small")) small = 1;
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ops") && i + 1 < argc) filter = argv[++i];
    else {
      fprintf(stderr,
              "usage: checkcl [--quick] [--masked-only] [--seed N] [--ops a,b] [--list]\n"
              "               [--bench [--small] [--json] [--runs N]]\n");
      return 2;
    }
  }
  if (runs < 1) runs = 1;
  if (runs > 64) runs = 64;
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (const cc_op *o = families[f]; o->name; o++)
      if (selected(filter, o->name)) {
        if (nops == MAX_OPS) { /* never drop an operator silently */
          fprintf(stderr, "checkcl: more than %d operators: raise MAX_OPS\n", MAX_OPS);
          return 2;
        }
        ops[nops++] = o;
      }
  if (!nops) {
    fprintf(stderr, "checkcl: no operator matches --ops %s\n", filter);
    return 2;
  }
  /* The device's capabilities: a context with nothing disabled. */
  mask_run m0 = {0, 0, ""};
  dsa_context *c;
  dsa_queue *q;
  int rc = open_ctx(&m0, 0, &c, &q);
  if (rc) return rc;
  const unsigned has = dsa_context_caps(c);
  if (!do_list && !json) {
    printf("checkcl: %s; seed 0x%llx; caps", dsa_context_device_name(c),
           (unsigned long long)seed);
    for (unsigned b = 1; b <= DSA_CAP_ALL; b <<= 1)
      if (has & b) printf(" %s", dsa_cap_name(b));
    printf("\n");
  }
  dsa_queue_destroy(&q);
  dsa_context_destroy(&c);
  if (do_list) return list(has);
  if (do_bench) return bench(has, small, json, runs);
  return check(has, seed, quick, masked_only);
}
