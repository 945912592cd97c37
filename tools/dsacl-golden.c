/* dsacl-golden [--device N|NAME] DIR
 *
 * Runs every operator the library implements on the golden vectors in
 * DIR/<op>/<case>/ (see golden/README.md) and compares the outputs (byte for
 * byte, whole buffers included, or within a stated tolerance for float
 * outputs). One line per case, a SKIP line per op without a runner, then
 * "N passed, N failed". Exit 0 only when every case passed and at least one
 * ran; 77 when there is no OpenCL device.
 *
 * Runners live in one file per operator family (golden_<family>.c); how to
 * add a family is at the top of golden.h. Only the public API is used, so
 * they double as examples of driving the library. */
#include <dsacl/dsacl.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "golden.h"

/* The families, one line each: X(<family>) for golden_ops_<family>[]. */
#define GOLDEN_FAMILIES(X) \
  X(index_helpers)         \
  X(indexer_logits)        \
  X(indexer_quant)         \
  X(mla)                   \
  X(sparse_mla)            \
  X(topk)                  \
  X(output_quant)          \
  X(mtp_norm)              \
  X(compressor)            \
  /* end of families */

#define DECLARE(f) extern const golden_op golden_ops_##f[];
GOLDEN_FAMILIES(DECLARE)
#undef DECLARE
#define ENTRY(f) golden_ops_##f,
static const golden_op *const families[] = {GOLDEN_FAMILIES(ENTRY)};
#undef ENTRY

/* The runner for op dir name, NULL if none. */
static const golden_op *find_op(const char *name) {
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (const golden_op *o = families[f]; o->name; o++)
      if (!strcmp(o->name, name)) return o;
  return NULL;
}

/* ---- driver ------------------------------------------------------------------ */

static int not_hidden(const struct dirent *e) { return e->d_name[0] != '.'; }

/* Sorted subdirectories of path (for a stable output order); -1 if path
 * cannot be read. */
static int list_dirs(const char *path, struct dirent ***out) {
  int n = scandir(path, out, not_hidden, alphasort), kept = 0;
  for (int i = 0; i < n; i++) {
    char full[2048];
    struct stat st;
    snprintf(full, sizeof full, "%s/%s", path, (*out)[i]->d_name);
    if (stat(full, &st) == 0 && S_ISDIR(st.st_mode))
      (*out)[kept++] = (*out)[i];
    else
      free((*out)[i]);
  }
  return n < 0 ? -1 : kept;
}

static void free_list(struct dirent **l, int n) {
  for (int i = 0; i < n; i++) free(l[i]);
  free(l);
}

static int run_case(dsa_context *ctx, dsa_queue *q, const char *op, const char *dir,
                    int (*run)(gcase *)) {
  gcase *c = calloc(1, sizeof *c);
  if (!c) return -1;
  c->ctx = ctx;
  c->q = q;
  c->dir = dir;
  char path[2048], err[512];
  snprintf(path, sizeof path, "%s/meta.txt", dir);
  if (npy_meta_load(path, &c->meta, err, sizeof err))
    golden_fail(c, "%s", err);
  else if (npy_meta_get(&c->meta, "op") && strcmp(npy_meta_get(&c->meta, "op"), op))
    golden_fail(c, "meta.txt names op '%s'", npy_meta_get(&c->meta, "op"));
  else
    run(c);
  /* Everything enqueued must be done before its buffers go. */
  clFinish(dsa_queue_cl(q));
  const char *cs = strrchr(dir, '/') + 1;
  if (c->failed)
    printf("FAIL %s/%s: %s\n", op, cs, c->msg);
  else
    printf("PASS %s/%s\n", op, cs);
  fflush(stdout);
  int rc = c->failed ? -1 : 0;
  for (int i = 0; i < c->nmems; i++) clReleaseMemObject(c->mems[i]);
  for (int i = 0; i < c->narrays; i++) npy_free(&c->arrays[i]);
  npy_meta_free(&c->meta);
  free(c);
  return rc;
}

static int usage(void) {
  fprintf(stderr, "usage: dsacl-golden [--device N|NAME] [--only OP]... DIR\n");
  return 2;
}

int main(int argc, char **argv) {
  dsa_context_options o;
  dsa_context_options_default(&o);
  const char *root = NULL;
  const char *only[16];
  int nonly = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) {
      char *end;
      long n = strtol(argv[++i], &end, 10);
      if (*argv[i] && !*end)
        o.device_index = (int)n;
      else
        o.device_name = argv[i];
    } else if (!strcmp(argv[i], "--only") && i + 1 < argc && nonly < 16) {
      only[nonly++] = argv[++i]; /* an operator's folder name, exactly */
    } else if (argv[i][0] == '-' || root) {
      return usage();
    } else {
      root = argv[i];
    }
  }
  if (!root) return usage();

  struct dirent **opdirs;
  int nops = list_dirs(root, &opdirs);
  if (nops < 0) {
    fprintf(stderr, "dsacl-golden: cannot read directory %s\n", root);
    return 1;
  }
  dsa_context *ctx = NULL;
  dsa_queue *q = NULL;
  dsa_status s = dsa_context_create(&ctx, &o);
  if (s == DSA_OK) s = dsa_queue_create(&q, ctx, 0);
  if (s != DSA_OK) {
    fprintf(stderr, "dsacl-golden: %s: %s\n", dsa_status_name(s), dsa_last_error());
    free_list(opdirs, nops);
    dsa_context_destroy(&ctx);
    /* No device, or a DSACL_MMA back-end / DSACL_EMULATE device this one can
     * neither run nor emulate: nothing to check here. */
    return s == DSA_ERR_NO_DEVICE ||
                   (s == DSA_ERR_UNSUPPORTED && (getenv("DSACL_MMA") || getenv("DSACL_EMULATE")))
               ? 77
               : 1;
  }
  fprintf(stderr, "device: %s\n", dsa_context_device_name(ctx));

  int passed = 0, failed = 0;
  for (int i = 0; i < nops; i++) {
    const char *op = opdirs[i]->d_name;
    int wanted = nonly == 0;
    for (int k = 0; k < nonly; k++) wanted |= !strcmp(op, only[k]);
    if (!wanted) continue;
    const golden_op *g = find_op(op);
    if (!g) {
      printf("SKIP %s (not implemented yet)\n", op);
      fflush(stdout);
      continue;
    }
    char opdir[1024];
    snprintf(opdir, sizeof opdir, "%s/%s", root, op);
    struct dirent **cases;
    int ncases = list_dirs(opdir, &cases);
    for (int j = 0; j < ncases; j++) {
      char dir[1600];
      snprintf(dir, sizeof dir, "%s/%s", opdir, cases[j]->d_name);
      if (run_case(ctx, q, op, dir, g->run))
        failed++;
      else
        passed++;
    }
    if (ncases >= 0) free_list(cases, ncases);
  }
  free_list(opdirs, nops);
  dsa_queue_destroy(&q);
  dsa_context_destroy(&ctx);
  printf("%d passed, %d failed\n", passed, failed);
  if (passed + failed == 0) fprintf(stderr, "dsacl-golden: no case found under %s\n", root);
  return failed || passed + failed == 0 ? 1 : 0;
}
