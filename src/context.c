/* Contexts: device choice, program build, binary cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* How long a process waits for another one building the same program (the
 * key's lock in the binary cache) before building it itself: longer than
 * any compile seen (Intel's CPU compiler, an emulated matrix back-end: ~2
 * min on a CI core), short enough that a hung compiler elsewhere costs a
 * bounded delay, not a hang. */
#define DSA_BUILD_WAIT_MS 600000L

void dsa_context_options_default(dsa_context_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->device_index = -1;
}

/* ---- device choice ------------------------------------------------------- */

typedef struct dev_list {
  cl_device_id dev[64];
  cl_platform_id plat[64];
  int n;
} dev_list;

static dsa_status list_devices(dev_list *l) {
  cl_platform_id plats[16];
  cl_uint np = 0;
  l->n = 0;
  cl_int e = clGetPlatformIDs(16, plats, &np);
  if (e == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (e == CL_SUCCESS && np == 0))
    return dsa__fail(DSA_ERR_NO_DEVICE, e, "no OpenCL platform found (is an ICD installed?)");
  if (e != CL_SUCCESS) return dsa__fail_cl(e, "clGetPlatformIDs");
  if (np > 16) np = 16;
  for (cl_uint p = 0; p < np; p++) {
    cl_device_id devs[64];
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 64, devs, &nd) != CL_SUCCESS) continue;
    for (cl_uint d = 0; d < nd && d < 64 && l->n < 64; d++) {
      l->dev[l->n] = devs[d];
      l->plat[l->n] = plats[p];
      l->n++;
    }
  }
  if (l->n == 0) return dsa__fail(DSA_ERR_NO_DEVICE, 0, "no OpenCL device found");
  return DSA_OK;
}

static bool name_matches(cl_platform_id p, cl_device_id d, const char *want) {
  char buf[2][256] = {"", ""};
  clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof buf[0], buf[0], NULL);
  clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof buf[1], buf[1], NULL);
  size_t n = strlen(want);
  for (int i = 0; i < 2; i++)
    for (const char *h = buf[i]; *h; h++)
      if (strncasecmp(h, want, n) == 0) return true;
  return false;
}

static dsa_status choose_device(const dsa_context_options *o, cl_platform_id *plat,
                                cl_device_id *dev) {
  dev_list l;
  DSA_CHECK(list_devices(&l));
  int index = o->device_index;
  const char *name = o->device_name;
  const char *env = getenv("DSACL_DEVICE");
  if (index < 0 && !name && env && *env) {
    /* DSACL_DEVICE: a number is an index, anything else a name substring. */
    char *end;
    long v = strtol(env, &end, 10);
    if (*end == '\0')
      index = (int)v;
    else
      name = env;
  }
  if (index >= 0) {
    if (index >= l.n)
      return dsa__fail(DSA_ERR_NO_DEVICE, 0, "device index %d out of range (%d devices)", index,
                       l.n);
    *plat = l.plat[index];
    *dev = l.dev[index];
    return DSA_OK;
  }
  if (name) {
    for (int i = 0; i < l.n; i++)
      if (name_matches(l.plat[i], l.dev[i], name)) {
        *plat = l.plat[i];
        *dev = l.dev[i];
        return DSA_OK;
      }
    return dsa__fail(DSA_ERR_NO_DEVICE, 0, "no OpenCL device matches \"%s\"", name);
  }
  for (int i = 0; i < l.n; i++) {
    cl_device_type t = 0;
    clGetDeviceInfo(l.dev[i], CL_DEVICE_TYPE, sizeof t, &t, NULL);
    if (t & CL_DEVICE_TYPE_GPU) {
      *plat = l.plat[i];
      *dev = l.dev[i];
      return DSA_OK;
    }
  }
  *plat = l.plat[0];
  *dev = l.dev[0];
  return DSA_OK;
}

/* ---- creation ------------------------------------------------------------ */

static dsa_status init_context(dsa_context *c, const dsa_context_options *o) {
  DSA_CHECK(dsa__probe_caps(c->dev, &c->caps));
  dsa__probe_mem(c);
  unsigned off = o->disable_caps & DSA_CAP_ALL;
  if (o->flags & DSA_CONTEXT_FORCE_PORTABLE) off = DSA_CAP_ALL;
  const char *fp = getenv("DSACL_FORCE_PORTABLE");
  if (fp && *fp && strcmp(fp, "0") != 0) off = DSA_CAP_ALL;
  const char *dc = getenv("DSACL_DISABLE_CAPS");
  unsigned env_off = 0;
  if (dc && *dc && !dsa__parse_caps(dc, &env_off))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "DSACL_DISABLE_CAPS = \"%s\": unknown capability (names: subgroups, "
                     "intel-subgroups, intel-dpas, nv-ptx, amd-builtins, fp16, all)",
                     dc);
  off |= env_off;
  c->caps_enabled = dsa__caps_bits(&c->caps) & ~off;
  c->force_portable = c->caps_enabled == 0;
  DSA_CHECK(dsa__topk_env(c));
  DSA_CHECK(dsa__il_keys_env(c));
  dsa__mla_route_env(c);
  dsa__compressor_env(c);
  dsa__build_options(&c->caps, c->caps_enabled, c->build_options, sizeof c->build_options);
  {
    bool emu = false; /* dsa_context_matrix_backend's text, fixed from here on */
    const int t = dsa__tile_backend(&c->caps, c->caps_enabled, &emu);
    snprintf(c->matrix_backend, sizeof c->matrix_backend, "%s%s", dsa__tile_backends[t].name,
             emu ? " (emulated)" : "");
  }
  /* DSACL_BUILD_OPTIONS: appended to every program's build options (tuning
   * runs, e.g. -cl-nv-maxrregcount=128); part of the binary cache's key. */
  const char *xo = getenv("DSACL_BUILD_OPTIONS");
  if (xo && *xo) {
    const size_t used = strlen(c->build_options);
    if (used + 1 + strlen(xo) >= sizeof c->build_options)
      return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "DSACL_BUILD_OPTIONS is too long");
    snprintf(c->build_options + used, sizeof c->build_options - used, " %s", xo);
  }
  dsa__diskcache_init(&c->dcache, o->cache_dir, (o->flags & DSA_CONTEXT_NO_BINARY_CACHE) != 0,
                      o->cache_load, o->cache_store, o->cache_user);
  if (pthread_mutex_init(&c->lock, NULL) != 0)
    return dsa__fail(DSA_ERR_INTERNAL, 0, "pthread_mutex_init failed");
  return DSA_OK;
}

/* Options are checked before a device is touched: non-zero reserved bytes
 * mean a caller built for a later 1.x, whose field this build would ignore. */
static dsa_status check_options(const dsa_context_options *o, const char *fn) {
  for (size_t i = 0; i < sizeof o->reserved; i++)
    if (o->reserved[i])
      return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                       "%s: o->reserved[%zu] = %u: reserved bytes must be zero (start from "
                       "dsa_context_options_default)",
                       fn, i, (unsigned)o->reserved[i]);
  return DSA_OK;
}

dsa_status dsa_context_create(dsa_context **out, const dsa_context_options *o) {
  dsa__clear_error();
  if (!out) return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "dsa_context_create: out is NULL");
  *out = NULL;
  dsa_context_options def;
  if (!o) {
    dsa_context_options_default(&def);
    o = &def;
  }
  DSA_CHECK(check_options(o, "dsa_context_create"));
  cl_platform_id plat;
  cl_device_id dev;
  DSA_CHECK(choose_device(o, &plat, &dev));

  dsa_context *c = calloc(1, sizeof *c);
  if (!c) return dsa__fail(DSA_ERR_OUT_OF_MEMORY, 0, "dsa_context_create: out of memory");
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0};
  cl_int e;
  c->ctx = clCreateContext(props, 1, &dev, NULL, NULL, &e);
  if (!c->ctx) {
    free(c);
    return dsa__fail_cl(e, "clCreateContext");
  }
  c->dev = dev;
  clRetainDevice(dev); /* balanced by the release in destroy, for both paths */
  dsa_status s = init_context(c, o);
  if (s != DSA_OK) {
    clReleaseContext(c->ctx);
    clReleaseDevice(c->dev);
    free(c);
    return s;
  }
  *out = c;
  return DSA_OK;
}

dsa_status dsa_context_create_from_cl(dsa_context **out, cl_context ctx, cl_device_id dev,
                                      const dsa_context_options *o) {
  dsa__clear_error();
  if (!out)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "dsa_context_create_from_cl: out is NULL");
  *out = NULL;
  if (!ctx || !dev)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "dsa_context_create_from_cl: %s is NULL",
                     !ctx ? "ctx" : "dev");
  /* The device must belong to the context. */
  cl_uint nd = 0;
  cl_int e = clGetContextInfo(ctx, CL_CONTEXT_NUM_DEVICES, sizeof nd, &nd, NULL);
  if (e != CL_SUCCESS)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, e, "dsa_context_create_from_cl: ctx is not a valid cl_context (%s)",
                     dsa__cl_error_name(e));
  cl_device_id devs[64];
  if (nd > 64) nd = 64;
  clGetContextInfo(ctx, CL_CONTEXT_DEVICES, nd * sizeof(cl_device_id), devs, NULL);
  bool found = false;
  for (cl_uint i = 0; i < nd; i++) found |= devs[i] == dev;
  if (!found)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "dsa_context_create_from_cl: dev is not a device of ctx");

  dsa_context_options def;
  if (!o) {
    dsa_context_options_default(&def);
    o = &def;
  }
  DSA_CHECK(check_options(o, "dsa_context_create_from_cl"));
  dsa_context *c = calloc(1, sizeof *c);
  if (!c) return dsa__fail(DSA_ERR_OUT_OF_MEMORY, 0, "dsa_context_create_from_cl: out of memory");
  c->ctx = ctx;
  c->dev = dev;
  dsa_status s = init_context(c, o);
  if (s != DSA_OK) {
    free(c);
    return s;
  }
  clRetainContext(ctx);
  clRetainDevice(dev);
  *out = c;
  return DSA_OK;
}

static void context_free(dsa_context *c) {
  for (int i = 0; i < DSA_NUM_PROGRAMS; i++)
    if (c->programs[i]) clReleaseProgram(c->programs[i]);
  pthread_mutex_destroy(&c->lock);
  clReleaseContext(c->ctx);
  clReleaseDevice(c->dev);
  free(c);
}

/* Reference counting: each live queue keeps its context alive. destroy drops
 * the caller's reference; the last of (destroy, last queue destroyed) frees. */
void dsa_context_destroy(dsa_context **pc) {
  if (!pc || !*pc) return;
  dsa_context *c = *pc;
  *pc = NULL;
  pthread_mutex_lock(&c->lock);
  int n = c->nqueues;
  c->destroyed = true;
  pthread_mutex_unlock(&c->lock);
  if (n == 0) context_free(c);
  else dsa__log(2, "dsa_context_destroy: %d queue(s) still alive; freed with the last", n);
}

void dsa__context_queue_gone(dsa_context *c) {
  pthread_mutex_lock(&c->lock);
  bool last = --c->nqueues == 0 && c->destroyed;
  pthread_mutex_unlock(&c->lock);
  if (last) context_free(c);
}

cl_context dsa_context_cl_context(const dsa_context *c) { return c ? c->ctx : NULL; }
cl_device_id dsa_context_cl_device(const dsa_context *c) { return c ? c->dev : NULL; }
const char *dsa_context_device_name(const dsa_context *c) {
  return c ? c->caps.device_name : "";
}
const char *dsa_context_matrix_backend(const dsa_context *c) {
  return c ? c->matrix_backend : "";
}

const char *dsa_context_build_options(const dsa_context *c) {
  return c ? c->build_options : "";
}
const char *dsa_context_cache_dir(const dsa_context *c) {
  return c && c->dcache.enabled ? c->dcache.dir : "";
}

/* ---- programs ------------------------------------------------------------ */

/* Source of a program: embedded, or from $DSACL_KERNEL_DIR for the edit-run
 * loop (local includes resolved by the compiler with -I). */
static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
      if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
      } else {
        buf[n] = '\0';
        *len = (size_t)n;
      }
    }
  }
  fclose(f);
  return buf;
}

static dsa_status build_log_fail(dsa_context *c, cl_program p, cl_int e, const char *pname,
                                 const char *options) {
  dsa__fail(DSA_ERR_BUILD, e, "building %s for %s failed: %s (%d)\nbuild options: %s\nbuild log:\n",
            pname, c->caps.device_name, dsa__cl_error_name(e), (int)e, options);
  size_t n = 0;
  clGetProgramBuildInfo(p, c->dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
  char *log = malloc(n + 1);
  if (log) {
    clGetProgramBuildInfo(p, c->dev, CL_PROGRAM_BUILD_LOG, n, log, NULL);
    log[n] = '\0';
    dsa__append_error(log);
    dsa__log(1, "%s", dsa_last_error());
    free(log);
  }
  return DSA_ERR_BUILD;
}

/* A program is usable only once every kernel in it can be created: some
 * drivers accept a stale binary at build time and fail only here. */
static bool kernels_ok(cl_program p) {
  cl_uint nk = 0;
  if (clCreateKernelsInProgram(p, 0, NULL, &nk) != CL_SUCCESS || nk == 0) return false;
  cl_kernel *ks = calloc(nk, sizeof *ks);
  if (!ks) return false;
  bool ok = clCreateKernelsInProgram(p, nk, ks, NULL) == CL_SUCCESS;
  for (cl_uint i = 0; i < nk; i++)
    if (ks[i]) clReleaseKernel(ks[i]);
  free(ks);
  return ok;
}

static void cache_key(const dsa_context *c, const dsa_embedded_program *ep, const char *src_hash,
                      char key[DSA_CACHE_KEY_HEX]) {
  const dsa_program_id id = (dsa_program_id)(ep - dsa__programs);
  const char *parts[] = {ep->name,           src_hash,
                         c->build_options,   dsa__program_defines(id),
                         dsa__program_device_options(id, &c->caps, c->caps_enabled),
                         dsa_version_string(),
                         c->caps.platform_version, c->caps.device_name,
                         c->caps.device_version,   c->caps.driver_version};
  dsa__cache_key(key, parts, sizeof parts / sizeof parts[0]);
}

static cl_program try_binary(dsa_context *c, const char *key, const char *pname,
                             const char *options) {
  size_t len = 0;
  unsigned char *bin = dsa__diskcache_load(&c->dcache, key, &len);
  if (!bin) return NULL;
  const unsigned char *bins[1] = {bin};
  cl_int st = CL_SUCCESS, e;
  cl_program p = clCreateProgramWithBinary(c->ctx, 1, &c->dev, &len, bins, &st, &e);
  free(bin);
  if (p && e == CL_SUCCESS && st == CL_SUCCESS &&
      clBuildProgram(p, 1, &c->dev, options, NULL, NULL) == CL_SUCCESS &&
      kernels_ok(p)) {
    dsa__log(2, "%s: loaded from binary cache %s", pname, key);
    return p;
  }
  if (p) clReleaseProgram(p);
  dsa__log(2, "%s: cached binary %s rejected by the driver; rebuilding", pname, key);
  return NULL;
}

static void store_binary(dsa_context *c, cl_program p, const char *key) {
  size_t len = 0;
  if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof len, &len, NULL) != CL_SUCCESS ||
      len == 0)
    return;
  unsigned char *bin = malloc(len);
  if (!bin) return;
  unsigned char *bins[1] = {bin};
  if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) == CL_SUCCESS)
    dsa__diskcache_store(&c->dcache, key, bin, len);
  free(bin);
}

static dsa_status build_program(dsa_context *c, dsa_program_id id, bool skip_load,
                                cl_program *out) {
  const dsa_embedded_program *ep = &dsa__programs[id];
  const char *src = ep->source;
  size_t len = ep->length;
  char *disk_src = NULL;
  char options[4096]; /* build_options (2048) + the program's defines + -I */
  const char *defines = dsa__program_defines(id), *dopts =
      dsa__program_device_options(id, &c->caps, c->caps_enabled);
  snprintf(options, sizeof options, "%s%s%s", c->build_options, defines, dopts);

  const char *kdir = getenv("DSACL_KERNEL_DIR");
  char src_hash[DSA_CACHE_KEY_HEX];
  snprintf(src_hash, sizeof src_hash, "%s", ep->hash);
  if (kdir && *kdir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", kdir, ep->name);
    disk_src = read_file(path, &len);
    if (!disk_src)
      return dsa__fail(DSA_ERR_BUILD, 0, "DSACL_KERNEL_DIR: cannot read %s", path);
    src = disk_src;
    snprintf(options, sizeof options, "%s%s%s -I %s", c->build_options, defines, dopts, kdir);
    /* Edited sources must not hit binaries of other versions: the cache is
     * bypassed entirely in this mode. */
  }

  char key[DSA_CACHE_KEY_HEX];
  cache_key(c, ep, src_hash, key);
  bool use_cache = c->dcache.enabled && !disk_src;
  int lock = -1;
  if (use_cache && !skip_load) {
    cl_program p = try_binary(c, key, ep->name, options);
    if (!p) {
      /* No entry: build it, unless another process is building it now (it
       * holds the key's lock): then wait for its entry. */
      bool waited = false;
      lock = dsa__diskcache_lock(&c->dcache, key, DSA_BUILD_WAIT_MS, &waited);
      if (waited) {
        dsa__log(2, "%s: waited for another process building it (%s)", ep->name,
                 lock >= 0 ? "done" : "gave up");
        p = try_binary(c, key, ep->name, options);
      }
    }
    if (p) {
      dsa__diskcache_unlock(lock);
      c->from_cache[id] = true;
      *out = p;
      return DSA_OK;
    }
  }
  c->from_cache[id] = false;

  cl_int e;
  cl_program p = clCreateProgramWithSource(c->ctx, 1, &src, &len, &e);
  if (!p) {
    free(disk_src);
    dsa__diskcache_unlock(lock);
    return dsa__fail_cl(e, "clCreateProgramWithSource");
  }
  e = clBuildProgram(p, 1, &c->dev, options, NULL, NULL);
  free(disk_src);
  if (e != CL_SUCCESS) {
    dsa__diskcache_unlock(lock);
    dsa_status s = build_log_fail(c, p, e, ep->name, options);
    clReleaseProgram(p);
    return s;
  }
  {
    /* DSACL_LOG=5: the build log of a successful build too (with
     * -cl-nv-verbose in DSACL_BUILD_OPTIONS, ptxas' registers and spills per
     * kernel on NVIDIA). */
    const char *lv = getenv("DSACL_LOG");
    size_t n = 0;
    if (lv && atoi(lv) >= 5 &&
        clGetProgramBuildInfo(p, c->dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) == CL_SUCCESS && n) {
      char *log = malloc(n + 1);
      if (log && clGetProgramBuildInfo(p, c->dev, CL_PROGRAM_BUILD_LOG, n, log, NULL) ==
                     CL_SUCCESS) {
        log[n] = '\0';
        dsa__log(5, "build log of %s:\n%s", ep->name, log);
      }
      free(log);
    }
  }
  if (!kernels_ok(p)) {
    dsa__diskcache_unlock(lock);
    clReleaseProgram(p);
    return dsa__fail(DSA_ERR_BUILD, 0, "%s built but its kernels cannot be created", ep->name);
  }
  if (use_cache) store_binary(c, p, key);
  dsa__diskcache_unlock(lock);
  *out = p;
  return DSA_OK;
}

dsa_status dsa__get_program(dsa_context *c, dsa_program_id id, cl_program *out) {
  pthread_mutex_lock(&c->lock);
  dsa_status s = DSA_OK;
  if (!c->programs[id]) s = build_program(c, id, false, &c->programs[id]);
  *out = c->programs[id];
  pthread_mutex_unlock(&c->lock);
  return s;
}

bool dsa__program_rebuild(dsa_context *c, dsa_program_id id, cl_program old, const char *kname,
                          cl_program *out) {
  pthread_mutex_lock(&c->lock);
  bool again = false;
  if (c->programs[id] != old) {
    again = c->programs[id] != NULL; /* another thread already rebuilt it */
  } else if (c->from_cache[id]) {
    dsa__log(1, "%s: the cached binary has no usable kernel %s: evicting it and rebuilding",
             dsa__programs[id].name, kname);
    cl_program p = NULL;
    if (build_program(c, id, true, &p) == DSA_OK) {
      clReleaseProgram(c->programs[id]); /* kernels made from it keep it alive */
      c->programs[id] = p;
      again = true;
    }
  }
  *out = c->programs[id];
  pthread_mutex_unlock(&c->lock);
  return again;
}

dsa_status dsa_context_warmup(dsa_context *c) {
  dsa__clear_error();
  if (!c) return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "dsa_context_warmup: c is NULL");
  for (int i = 0; i < DSA_NUM_PROGRAMS; i++) {
    cl_program p;
    DSA_CHECK(dsa__get_program(c, (dsa_program_id)i, &p));
  }
  return DSA_OK;
}

unsigned dsa_context_caps(const dsa_context *c) { return c ? c->caps_enabled : 0; }
