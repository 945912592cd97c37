/* dsacl-info: OpenCL platforms and devices, the capabilities dsacl probes on
 * the chosen device, its build options and binary-cache entries.
 *
 *   dsacl-info [--device N|NAME] [--warmup] [--variants]
 *
 * --variants prints every operator's variant table: which variant this
 * device gets (shape permitting) and why each other one is refused.
 *
 * Links the internal static library to show dsa_caps. */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "internal.h"

static const char *const interesting_exts[] = {
    "cl_khr_fp16",
    "cl_khr_fp64",
    "cl_khr_subgroups",
    "cl_intel_subgroups",
    "cl_intel_unified_shared_memory",
    "cl_intel_subgroups_short",
    "cl_intel_required_subgroup_size",
    "cl_intel_subgroup_matrix_multiply_accumulate",
    "cl_intel_subgroup_split_matrix_multiply_accumulate",
    "cl_khr_int64_base_atomics",
    "cl_nv_device_attribute_query",
    "cl_amd_device_attribute_query",
};

static void dev_str(cl_device_id d, cl_device_info what, char *buf, size_t n) {
  buf[0] = '\0';
  if (clGetDeviceInfo(d, what, n, buf, NULL) != CL_SUCCESS) snprintf(buf, n, "?");
  buf[n - 1] = '\0';
}

static cl_ulong dev_ulong(cl_device_id d, cl_device_info what) {
  cl_ulong v = 0;
  return clGetDeviceInfo(d, what, sizeof v, &v, NULL) == CL_SUCCESS ? v : 0;
}

static cl_uint dev_uint(cl_device_id d, cl_device_info what) {
  cl_uint v = 0;
  return clGetDeviceInfo(d, what, sizeof v, &v, NULL) == CL_SUCCESS ? v : 0;
}

static const char *type_name(cl_device_type t) {
  if (t & CL_DEVICE_TYPE_GPU) return "GPU";
  if (t & CL_DEVICE_TYPE_CPU) return "CPU";
  if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "other";
}

static const char *vendor_name(dsa_vendor v) {
  switch (v) {
  case DSA_VENDOR_NVIDIA: return "NVIDIA";
  case DSA_VENDOR_INTEL: return "Intel";
  case DSA_VENDOR_AMD: return "AMD";
  case DSA_VENDOR_POCL: return "PoCL";
  default: return "other";
  }
}

static void print_mem(const char *label, cl_ulong bytes) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, u++;
  printf("      %-22s %.4g %s\n", label, v, units[u]);
}

static void print_device(cl_device_id d, int index, int chosen) {
  char name[512], vendor[256], version[256], driver[256], clc[256];
  dev_str(d, CL_DEVICE_NAME, name, sizeof name);
  dev_str(d, CL_DEVICE_VENDOR, vendor, sizeof vendor);
  dev_str(d, CL_DEVICE_VERSION, version, sizeof version);
  dev_str(d, CL_DRIVER_VERSION, driver, sizeof driver);
  dev_str(d, CL_DEVICE_OPENCL_C_VERSION, clc, sizeof clc);
  cl_device_type type = 0;
  clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  size_t wg = 0;
  clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);

  printf("  %s [%d] %s\n", chosen ? "*" : " ", index, name);
  printf("      %-22s %s\n", "vendor", vendor);
  printf("      %-22s %s\n", "type", type_name(type));
  printf("      %-22s %s\n", "version", version);
  printf("      %-22s %s\n", "driver", driver);
  printf("      %-22s %s\n", "OpenCL C", clc);
  printf("      %-22s %u\n", "compute units", dev_uint(d, CL_DEVICE_MAX_COMPUTE_UNITS));
  printf("      %-22s %u MHz\n", "max clock", dev_uint(d, CL_DEVICE_MAX_CLOCK_FREQUENCY));
  print_mem("global memory", dev_ulong(d, CL_DEVICE_GLOBAL_MEM_SIZE));
  print_mem("max allocation", dev_ulong(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
  print_mem("global cache", dev_ulong(d, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE));
  print_mem("local memory", dev_ulong(d, CL_DEVICE_LOCAL_MEM_SIZE));
  printf("      %-22s %zu\n", "max work-group", wg);

  size_t n = 0;
  char *ext = NULL;
  if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &n) == CL_SUCCESS && n > 0 &&
      (ext = malloc(n + 2)) != NULL && clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, n, ext + 1, NULL) == CL_SUCCESS) {
    /* Pad with spaces so " name " matches whole words only. */
    ext[0] = ' ';
    ext[n] = ' ';
    ext[n + 1] = '\0';
    printf("      %-22s", "extensions of interest");
    int any = 0;
    for (size_t i = 0; i < sizeof interesting_exts / sizeof *interesting_exts; i++) {
      char word[96];
      snprintf(word, sizeof word, " %s ", interesting_exts[i]);
      if (strstr(ext, word)) {
        printf(" %s", interesting_exts[i]);
        any = 1;
      }
    }
    printf("%s\n", any ? "" : " (none)");
  }
  free(ext);
}

/* Devices are numbered across platforms, as --device N and DSACL_DEVICE count
 * them; the chosen one is starred. */
static int list_devices(cl_device_id chosen) {
  int index = 0;
  cl_uint np = 0;
  cl_int err = clGetPlatformIDs(0, NULL, &np);
  if (err != CL_SUCCESS || np == 0) {
    printf("No OpenCL platforms (clGetPlatformIDs: %d)\n", (int)err);
    return 0;
  }
  cl_platform_id *plats = calloc(np, sizeof *plats);
  if (!plats) return -1;
  clGetPlatformIDs(np, plats, NULL);
  for (cl_uint p = 0; p < np; p++) {
    char name[256] = "?", vendor[256] = "?", version[256] = "?";
    clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof name, name, NULL);
    clGetPlatformInfo(plats[p], CL_PLATFORM_VENDOR, sizeof vendor, vendor, NULL);
    clGetPlatformInfo(plats[p], CL_PLATFORM_VERSION, sizeof version, version, NULL);
    printf("Platform #%u: %s (%s, %s)\n", p, name, vendor, version);
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0) {
      printf("    (no devices)\n");
      continue;
    }
    cl_device_id *devs = calloc(nd, sizeof *devs);
    if (!devs) break;
    clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, devs, NULL);
    for (cl_uint i = 0; i < nd; i++) print_device(devs[i], index++, devs[i] == chosen);
    free(devs);
  }
  free(plats);
  return 0;
}

static void print_caps(const dsa_context *c) {
  const dsa_caps *k = &c->caps;
  printf("\nChosen device: %s\n", dsa_context_device_name(c));
  printf("  platform            %s (%s)\n", k->platform_name, k->platform_version);
  printf("  device              %s, %s\n", k->device_name, k->device_version);
  printf("  driver              %s\n", k->driver_version);
  printf("  vendor path         %s (%s)\n", vendor_name(k->vendor), type_name(k->type));
  printf("  OpenCL C            %d.%d\n", k->cl_c_major, k->cl_c_minor);
  printf("  sub-groups          %s\n", k->subgroups ? "yes" : "no");
  printf("  intel sub-groups    %s\n", k->intel_subgroups ? "yes" : "no");
  printf("  intel DPAS          %s\n", k->intel_dpas ? "yes" : "no");
  printf("  NVIDIA inline PTX   %s\n", k->nv_inline_ptx ? "yes" : "no");
  if (k->nv_sm) printf("  NVIDIA compute cap. sm_%d\n", k->nv_sm);
  printf("  AMD builtins        %s\n", k->amd_builtins ? "yes" : "no");
  printf("  fp16                %s\n", k->fp16 ? "yes" : "no");
  printf("  local memory        %llu B\n", (unsigned long long)k->local_mem);
  printf("  max work-group      %zu\n", k->max_wg);
  printf("  compute units       %u\n", k->compute_units);
  printf("  tuning              row %s: insert groups/CU %u (DSA_TUNING_MAP)\n", k->tuning.row,
         k->tuning.insert_groups_per_cu);
  printf("  capabilities used  ");
  const unsigned has = dsa__caps_bits(k);
  for (unsigned b = 1; b & DSA_CAP_ALL; b <<= 1)
    if (has & b)
      printf(" %s%s", dsa_cap_name(b), (c->caps_enabled & b) ? "" : " (disabled)");
  printf("%s\n", has ? "" : " none (portable kernels only)");
  const unsigned mk = dsa_context_mem_kinds(c);
  printf("  tensor memory       cl_mem%s%s\n", mk & (1u << DSA_MEM_USM) ? ", USM" : "",
         mk & (1u << DSA_MEM_SVM) ? ", SVM" : "");
  const char *mb = dsa_context_matrix_backend(c);
  printf("  matrix tiles        %s%s (DSACL_MMA)\n", mb,
         k->tile_forced ? ", forced" : (strcmp(mb, "portable") == 0 ? ": no matrix unit" : ""));
  printf("  build options       %s\n", dsa_context_build_options(c));
  printf("  programs           ");
  for (int i = 0; i < DSA_NUM_PROGRAMS; i++)
    printf(" %s (%.12s)", dsa__programs[i].name, dsa__programs[i].hash);
  printf("\n");
}

/* Lists the *.bin files of dir (when verbose) and returns how many there are, -1 if the
 * directory cannot be read. newest receives the latest mtime. */
static int cache_entries(const char *dir, int verbose, time_t *newest) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int count = 0;
  unsigned long long total = 0;
  *newest = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".bin") != 0) continue;
    char path[8192];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    count++;
    total += (unsigned long long)st.st_size;
    if (st.st_mtime > *newest) *newest = st.st_mtime;
    if (verbose) {
      char when[64];
      struct tm tm;
      localtime_r(&st.st_mtime, &tm);
      strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
      printf("    %s  %10lld B  %s\n", e->d_name, (long long)st.st_size, when);
    }
  }
  closedir(d);
  if (verbose) printf("  %d entr%s, %llu bytes\n", count, count == 1 ? "y" : "ies", total);
  return count;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int all_digits(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (!isdigit((unsigned char)*s)) return 0;
  return 1;
}

/* Each operator's table: the variant this device gets for shapes the first
 * one takes, and why every variant above it is refused. */
static void print_variants(const dsa_context *c) {
  printf("\nKernel variants (best first; * = picked on this device when the shape allows)\n");
  for (int t = 0; t < dsa__num_variant_tables; t++) {
    const dsa_variant_table *vt = dsa__variant_tables[t];
    printf("  %s\n", vt->op);
    int picked = -1;
    for (int i = 0; i < vt->n; i++) {
      char buf[256];
      const char *why = dsa__variant_refusal(c, &vt->v[i], NULL, buf, sizeof buf);
      const bool mark = !why && picked < 0;
      if (mark) picked = i;
      char caps[96] = "";
      size_t used = 0;
      for (unsigned b = 1; b & DSA_CAP_ALL; b <<= 1)
        if (vt->v[i].caps & b) {
          int w = snprintf(caps + used, sizeof caps - used, "%s%s", used ? "+" : "", dsa_cap_name(b));
          if (w > 0 && (size_t)w < sizeof caps - used) used += (size_t)w;
        }
      printf("    %c %-14s needs %-22s %s%s\n", mark ? '*' : ' ', vt->v[i].name,
             used ? caps : "-", why ? "refused: " : (mark ? "picked" : "available"),
             why ? why : "");
      if (vt->v[i].limits) printf("      %-14s takes %s\n", "", vt->v[i].limits);
    }
    if (picked < 0) printf("    (no variant runs on this device)\n");
  }
}

static void usage(FILE *f) {
  fprintf(f, "usage: dsacl-info [--device N|NAME] [--warmup] [--variants]\n"
             "  --device N|NAME  device index or case-insensitive name substring\n"
             "                   (default: $DSACL_DEVICE, else first GPU, else first device)\n"
             "  --warmup         build (or load) every program and report the time taken\n"
             "  --variants       every operator's kernel variants, the pick on this device\n"
             "                   and the reason each other variant is refused\n");
}

int main(int argc, char **argv) {
  const char *device = NULL;
  int warmup = 0, variants = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) {
      device = argv[++i];
    } else if (!strcmp(argv[i], "--warmup")) {
      warmup = 1;
    } else if (!strcmp(argv[i], "--variants")) {
      variants = 1;
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }

  printf("dsacl %s\n\n", dsa_version_string());

  dsa_context_options o;
  dsa_context_options_default(&o);
  if (device && all_digits(device))
    o.device_index = atoi(device);
  else if (device)
    o.device_name = device;
  dsa_context *c = NULL;
  dsa_status st = dsa_context_create(&c, &o);
  /* Saved now: listing devices makes OpenCL calls, not library calls, but
   * keep the message independent of anything that follows. */
  char err[2048];
  snprintf(err, sizeof err, "%s", dsa_last_error());

  list_devices(st == DSA_OK ? dsa_context_cl_device(c) : NULL);
  if (st != DSA_OK) {
    fprintf(stderr, "dsacl-info: dsa_context_create: %s: %s\n", dsa_status_name(st), err);
    return 1;
  }
  print_caps(c);
  if (variants) print_variants(c);

  const char *dir = dsa_context_cache_dir(c);
  int rc = 0;
  time_t newest_before = 0, newest_after = 0;
  int before = -1;
  if (!dir || !*dir) {
    printf("\nBinary cache: %s\n", c->dcache.enabled ? "caller callbacks" : "off");
  } else {
    printf("\nBinary cache: %s\n", dir);
    before = cache_entries(dir, 1, &newest_before);
    if (before < 0) printf("  (cannot read the directory)\n");
  }

  if (warmup) {
    double t0 = now_s();
    st = dsa_context_warmup(c);
    double dt = now_s() - t0;
    if (st != DSA_OK) {
      fprintf(stderr, "dsacl-info: dsa_context_warmup: %s: %s\n", dsa_status_name(st),
              dsa_last_error());
      rc = 1;
    } else {
      printf("\nWarm-up: %d program%s ready in %.3f s", DSA_NUM_PROGRAMS,
             DSA_NUM_PROGRAMS == 1 ? "" : "s", dt);
      if (before >= 0) {
        int after = cache_entries(dir, 0, &newest_after);
        if (after > before)
          printf(", %d cache entr%s added\n", after - before, after - before == 1 ? "y" : "ies");
        else if (newest_after > newest_before)
          printf(", cache entries rewritten\n");
        else
          printf(", no cache entries added (all were cached already)\n");
        if (after != before || newest_after > newest_before) {
          printf("\nBinary cache after warm-up: %s\n", dir);
          cache_entries(dir, 1, &newest_after);
        }
      } else {
        printf("\n");
      }
    }
  }

  dsa_context_destroy(&c);
  return rc;
}
