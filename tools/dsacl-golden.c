/* dsacl-golden [--device N|NAME] DIR
 *
 * Runs every operator the library implements on the golden vectors in
 * DIR/<op>/<case>/ (see golden/README.md) and compares the outputs byte for
 * byte, whole buffers included (untouched cache bytes and output rows too).
 * One line per case, a SKIP line per op without a runner, then
 * "N passed, N failed". Exit 0 only when every case passed and at least one
 * ran; 77 when there is no OpenCL device.
 *
 * Adding an op: write a runner and add it to `ops` below. Only the public API
 * is used, so this doubles as an example of driving the library. */
#include <dsacl/dsacl.h>

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "npy.h"

#define MAX_RES 16

/* One case being run: what it loaded and allocated (freed together), and
 * the first failure in words. */
typedef struct gcase {
  dsa_context *ctx;
  dsa_queue *q;
  const char *dir;
  npy_meta meta;
  npy_array arrays[MAX_RES];
  int narrays;
  cl_mem mems[MAX_RES];
  int nmems;
  char msg[1024];
  int failed;
} gcase;

static int fail(gcase *c, const char *fmt, ...) {
  if (!c->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
  }
  c->failed = 1;
  return -1;
}

static const char *npy_name(npy_dtype t) { return npy_dtype_name(t); }

/* Loads <dir>/<name>.npy; NULL (and a failure) if missing, of another dtype
 * or of another rank; NULL without failure if optional and absent. */
static npy_array *load_opt(gcase *c, const char *name, npy_dtype want, int ndim, int optional) {
  char path[2048], err[512];
  snprintf(path, sizeof path, "%s/%s.npy", c->dir, name);
  if (optional) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fclose(f);
  }
  if (c->narrays == MAX_RES) return fail(c, "too many tensors"), NULL;
  npy_array *a = &c->arrays[c->narrays];
  if (npy_load(path, a, err, sizeof err)) return fail(c, "%s", err), NULL;
  c->narrays++;
  if (a->dtype != want || a->ndim != ndim)
    return fail(c, "%s: %s rank %d, expected %s rank %d", name, npy_name(a->dtype), a->ndim,
                npy_name(want), ndim),
           NULL;
  return a;
}
#define load(c, name, t, nd) load_opt(c, name, t, nd, 0)

static int meta_i64(gcase *c, const char *key, int64_t *v) {
  if (npy_meta_i64(&c->meta, key, v)) return fail(c, "meta.txt: no integer '%s'", key);
  return 0;
}

/* A device copy of a (possibly empty) host array. */
static cl_mem to_device(gcase *c, const void *data, size_t n) {
  if (c->nmems == MAX_RES) return fail(c, "too many buffers"), NULL;
  cl_int err;
  cl_mem m = clCreateBuffer(dsa_context_cl_context(c->ctx),
                            CL_MEM_READ_WRITE | (n ? CL_MEM_COPY_HOST_PTR : 0), n ? n : 1,
                            n ? (void *)data : NULL, &err);
  if (!m) return fail(c, "clCreateBuffer(%zu): error %d", n, (int)err), NULL;
  return c->mems[c->nmems++] = m;
}

static dsa_tensor tensor_of(cl_mem m, const npy_array *a, dsa_dtype t) {
  return dsa_tensor_make(m, 0, t, a->ndim, a->shape);
}

static int op_status(gcase *c, const char *what, dsa_status s) {
  if (s != DSA_OK) return fail(c, "%s -> %s: %s", what, dsa_status_name(s), dsa_last_error());
  return 0;
}

static int no_faults(gcase *c) {
  uint32_t bits = 0;
  if (op_status(c, "dsa_queue_faults", dsa_queue_faults(c->q, &bits))) return -1;
  if (bits) return fail(c, "fault bits 0x%x set on valid input", bits);
  return 0;
}

/* Reads m back and compares with want, naming the first mismatches by
 * element index of want's shape. */
static int compare(gcase *c, const char *name, cl_mem m, const npy_array *want) {
  uint8_t *got = malloc(want->nbytes ? want->nbytes : 1);
  if (!got) return fail(c, "out of memory");
  cl_int err = clEnqueueReadBuffer(dsa_queue_cl(c->q), m, CL_TRUE, 0, want->nbytes, got, 0,
                                   NULL, NULL);
  if (err != CL_SUCCESS) {
    free(got);
    return fail(c, "clEnqueueReadBuffer: error %d", (int)err);
  }
  const uint8_t *w = want->data;
  size_t es = want->elem_size, bad = 0;
  char list[640] = "";
  for (size_t i = 0; i < want->count; i++) {
    if (!memcmp(got + i * es, w + i * es, es)) continue;
    if (bad++ >= 4) continue;
    int64_t at[NPY_MAX_DIMS];
    size_t rem = i;
    for (int d = want->ndim - 1; d >= 0; d--) {
      at[d] = (int64_t)(rem % (size_t)want->shape[d]);
      rem /= (size_t)want->shape[d];
    }
    char idx[96] = "", one[192];
    for (int d = 0; d < want->ndim; d++)
      snprintf(idx + strlen(idx), sizeof idx - strlen(idx), "%s%lld", d ? "," : "",
               (long long)at[d]);
    uint64_t g = 0, x = 0;
    memcpy(&g, got + i * es, es); /* little-endian host assumed, as .npy is */
    memcpy(&x, w + i * es, es);
    snprintf(one, sizeof one, "%s[%s] got 0x%0*llx want 0x%0*llx", bad > 1 ? "; " : "", idx,
             (int)es * 2, (unsigned long long)g, (int)es * 2, (unsigned long long)x);
    strncat(list, one, sizeof list - strlen(list) - 1);
  }
  free(got);
  if (bad) return fail(c, "%s: %zu of %zu elements differ: %s%s", name, bad, want->count, list,
                       bad > 4 ? "; ..." : "");
  return 0;
}

static int cache_of(gcase *c, cl_mem m, dsa_paged_cache *pc) {
  int64_t nb, bs, stride;
  if (meta_i64(c, "num_blocks", &nb) || meta_i64(c, "block_size", &bs) ||
      meta_i64(c, "block_stride_bytes", &stride))
    return -1;
  *pc = (dsa_paged_cache){m, 0, nb, (int32_t)bs, stride, DSA_CACHE_MLA_FP8};
  return 0;
}

/* ---- runners ---------------------------------------------------------------- */

static int run_mla_cache_insert(gcase *c) {
  npy_array *k = load(c, "k", NPY_U2, 2), *slots = load(c, "slot_mapping", NPY_I8, 1),
            *cin = load(c, "cache_in", NPY_U1, 2), *cout = load(c, "cache_out", NPY_U1, 2);
  if (c->failed) return -1;
  cl_mem km = to_device(c, k->data, k->nbytes), sm = to_device(c, slots->data, slots->nbytes),
         cm = to_device(c, cin->data, cin->nbytes);
  dsa_paged_cache pc;
  if (c->failed || cache_of(c, cm, &pc)) return -1;
  dsa_tensor kt = tensor_of(km, k, DSA_BF16), st = tensor_of(sm, slots, DSA_I64);
  if (op_status(c, "dsa_mla_cache_insert", dsa_mla_cache_insert(c->q, &kt, &st, &pc, NULL)))
    return -1;
  return no_faults(c) || compare(c, "cache_out", cm, cout) ? -1 : 0;
}

static int run_dequant_gather_slots(gcase *c) {
  npy_array *cache = load(c, "cache", NPY_U1, 2), *idx = load(c, "indices", NPY_I4, 1),
            *out = load(c, "out", NPY_U2, 2);
  if (c->failed) return -1;
  /* Not zeros: every byte of out must be written. */
  uint8_t *fill = malloc(out->nbytes ? out->nbytes : 1);
  if (!fill) return fail(c, "out of memory");
  memset(fill, 0xEE, out->nbytes);
  cl_mem cm = to_device(c, cache->data, cache->nbytes),
         im = to_device(c, idx->data, idx->nbytes), om = to_device(c, fill, out->nbytes);
  free(fill);
  dsa_paged_cache pc;
  if (c->failed || cache_of(c, cm, &pc)) return -1;
  dsa_tensor it = tensor_of(im, idx, DSA_I32), ot = tensor_of(om, out, DSA_BF16);
  if (op_status(c, "dsa_mla_gather_slots", dsa_mla_gather_slots(c->q, &pc, &it, &ot, NULL)))
    return -1;
  return no_faults(c) || compare(c, "out", om, out) ? -1 : 0;
}

static int run_dequant_gather_k_cache(gcase *c) {
  npy_array *cache = load(c, "cache", NPY_U1, 2), *seq = load(c, "seq_lens", NPY_I4, 1),
            *bt = load(c, "block_table", NPY_I4, 2), *oin = load(c, "out_in", NPY_U2, 3),
            *out = load(c, "out", NPY_U2, 3);
  npy_array *gl = load_opt(c, "gather_lens", NPY_I4, 1, 1);
  int64_t offset;
  if (c->failed || meta_i64(c, "offset", &offset)) return -1;
  cl_mem cm = to_device(c, cache->data, cache->nbytes),
         sm = to_device(c, seq->data, seq->nbytes), bm = to_device(c, bt->data, bt->nbytes),
         om = to_device(c, oin->data, oin->nbytes),
         gm = gl ? to_device(c, gl->data, gl->nbytes) : NULL;
  dsa_paged_cache pc;
  if (c->failed || cache_of(c, cm, &pc)) return -1;
  dsa_tensor st = tensor_of(sm, seq, DSA_I32), bt_t = tensor_of(bm, bt, DSA_I32),
             ot = tensor_of(om, oin, DSA_BF16), gt = gl ? tensor_of(gm, gl, DSA_I32) : st;
  if (op_status(c, "dsa_mla_gather_paged",
                dsa_mla_gather_paged(c->q, &pc, &st, gl ? &gt : NULL, &bt_t, offset, &ot, NULL)))
    return -1;
  return no_faults(c) || compare(c, "out", om, out) ? -1 : 0;
}

static const struct {
  const char *name;
  int (*run)(gcase *c);
} ops[] = {
    {"mla_cache_insert", run_mla_cache_insert},
    {"dequant_gather_slots", run_dequant_gather_slots},
    {"dequant_gather_k_cache", run_dequant_gather_k_cache},
};

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
    fail(c, "%s", err);
  else if (npy_meta_get(&c->meta, "op") && strcmp(npy_meta_get(&c->meta, "op"), op))
    fail(c, "meta.txt names op '%s'", npy_meta_get(&c->meta, "op"));
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
  fprintf(stderr, "usage: dsacl-golden [--device N|NAME] DIR\n");
  return 2;
}

int main(int argc, char **argv) {
  dsa_context_options o;
  dsa_context_options_default(&o);
  const char *root = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) {
      char *end;
      long n = strtol(argv[++i], &end, 10);
      if (*argv[i] && !*end)
        o.device_index = (int)n;
      else
        o.device_name = argv[i];
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
    return s == DSA_ERR_NO_DEVICE ? 77 : 1;
  }
  fprintf(stderr, "device: %s\n", dsa_context_device_name(ctx));

  int passed = 0, failed = 0;
  for (int i = 0; i < nops; i++) {
    const char *op = opdirs[i]->d_name;
    size_t k = 0;
    while (k < sizeof ops / sizeof ops[0] && strcmp(ops[k].name, op)) k++;
    if (k == sizeof ops / sizeof ops[0]) {
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
      if (run_case(ctx, q, op, dir, ops[k].run))
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
