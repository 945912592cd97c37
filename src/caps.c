/* Device capability probe and the -D build options derived from it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

bool dsa__has_ext(const char *exts, const char *name) {
  size_t n = strlen(name);
  for (const char *p = exts; (p = strstr(p, name)) != NULL; p += n)
    if ((p == exts || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
  return false;
}

static bool contains_ci(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++)
    if (strncasecmp(hay, needle, n) == 0) return true;
  return false;
}

/* The device's own matrix back-end, or DSACL_MMA's: native | portable |
 * nv-mma | intel-dpas16 | intel-dpas8 | amd-mfma | amd-wmma. A vendor
 * back-end the device lacks is emulated where Intel sub-groups of its width
 * exist (Intel's OpenCL CPU runtime), else refused. */
dsa_status dsa__pick_tile(dsa_caps *caps) {
  int native = DSA_TILE_PORTABLE;
  if (caps->nv_inline_ptx && caps->nv_sm >= 80)
    native = DSA_TILE_NV;
  else if (caps->intel_dpas)
    native = caps->intel_sg_sizes & (1u << 3) ? DSA_TILE_INTEL8 : DSA_TILE_INTEL16;
  else if (caps->vendor == DSA_VENDOR_AMD && (strncmp(caps->device_name, "gfx90a", 6) == 0 ||
                                              strncmp(caps->device_name, "gfx94", 5) == 0))
    native = DSA_TILE_MFMA;
  else if (caps->vendor == DSA_VENDOR_AMD && strncmp(caps->device_name, "gfx11", 5) == 0)
    native = DSA_TILE_WMMA;
  else if (caps->emulate == DSA_EMULATE_AMD)
    native = DSA_TILE_MFMA; /* emulated below */
  caps->tile = native;
  caps->tile_emu = caps->emulate == DSA_EMULATE_AMD && native == DSA_TILE_MFMA;
  const char *want = getenv("DSACL_MMA");
  if (!want || !*want || strcmp(want, "native") == 0) return DSA_OK;
  caps->tile_forced = true;
  int t = -1;
  for (int i = 0; i < DSA_TILE_COUNT; i++)
    if (strcmp(want, dsa__tile_backends[i].name) == 0) t = i;
  if (t < 0)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "DSACL_MMA = \"%s\": known values are native, portable, nv-mma, "
                     "intel-dpas16, intel-dpas8, amd-mfma and amd-wmma",
                     want);
  if (t == native) return DSA_OK;
  caps->tile = t;
  caps->tile_emu = false;
  if (t == DSA_TILE_PORTABLE) return DSA_OK;
  const int lanes = dsa__tile_backends[t].lanes;
  if (!caps->intel_subgroups ||
      !(caps->intel_sg_sizes & (1u << (lanes == 64 ? 6 : lanes == 32 ? 5 : lanes == 16 ? 4 : 3))))
    return dsa__fail(DSA_ERR_UNSUPPORTED, 0,
                     "DSACL_MMA=%s: %s has neither the instruction nor Intel sub-groups of %d "
                     "to emulate it",
                     want, caps->device_name, lanes);
  caps->tile_emu = true;
  return DSA_OK;
}

dsa_status dsa__probe_caps(cl_device_id dev, dsa_caps *caps) {
  memset(caps, 0, sizeof *caps);
  cl_platform_id plat;
  cl_int e = clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
  if (e != CL_SUCCESS) return dsa__fail_cl(e, "clGetDeviceInfo(CL_DEVICE_PLATFORM)");

  clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof caps->platform_name, caps->platform_name,
                    NULL);
  clGetPlatformInfo(plat, CL_PLATFORM_VERSION, sizeof caps->platform_version,
                    caps->platform_version, NULL);
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof caps->device_name, caps->device_name, NULL);
  clGetDeviceInfo(dev, CL_DEVICE_VERSION, sizeof caps->device_version, caps->device_version,
                  NULL);
  clGetDeviceInfo(dev, CL_DRIVER_VERSION, sizeof caps->driver_version, caps->driver_version,
                  NULL);
  clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof caps->type, &caps->type, NULL);
  clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof caps->local_mem, &caps->local_mem,
                  NULL);
  /* DSACL_LOCAL_MEM_LIMIT: act as a device with at most this much local
   * memory (bytes), so the variants for 32 KiB devices are tested anywhere. */
  const char *lm = getenv("DSACL_LOCAL_MEM_LIMIT");
  if (lm && *lm) {
    char *end;
    unsigned long long v = strtoull(lm, &end, 10);
    if (*end == '\0' && v > 0 && v < caps->local_mem) caps->local_mem = (cl_ulong)v;
  }
  clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof caps->max_wg, &caps->max_wg,
                  NULL);
  clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof caps->compute_units,
                  &caps->compute_units, NULL);

  char vendor[256] = "";
  clGetDeviceInfo(dev, CL_DEVICE_VENDOR, sizeof vendor, vendor, NULL);
  if (contains_ci(caps->platform_name, "portable computing language"))
    caps->vendor = DSA_VENDOR_POCL;
  else if (contains_ci(vendor, "nvidia"))
    caps->vendor = DSA_VENDOR_NVIDIA;
  else if (contains_ci(vendor, "intel"))
    caps->vendor = DSA_VENDOR_INTEL;
  else if (contains_ci(vendor, "advanced micro devices") || contains_ci(vendor, "amd"))
    caps->vendor = DSA_VENDOR_AMD;

  char cver[128] = "";
  clGetDeviceInfo(dev, CL_DEVICE_OPENCL_C_VERSION, sizeof cver, cver, NULL);
  /* "OpenCL C 1.2 ..." */
  if (sscanf(cver, "OpenCL C %d.%d", &caps->cl_c_major, &caps->cl_c_minor) != 2) {
    caps->cl_c_major = 1;
    caps->cl_c_minor = 2;
  }

  size_t n = 0;
  clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &n);
  char *exts = calloc(n + 1, 1);
  if (!exts) return dsa__fail(DSA_ERR_OUT_OF_MEMORY, 0, "probing device extensions");
  clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, n, exts, NULL);
  caps->subgroups = dsa__has_ext(exts, "cl_khr_subgroups") || dsa__has_ext(exts, "cl_intel_subgroups");
  caps->intel_subgroups = dsa__has_ext(exts, "cl_intel_subgroups");
  caps->intel_dpas = dsa__has_ext(exts, "cl_intel_subgroup_matrix_multiply_accumulate");
  if (caps->intel_subgroups) {
    /* CL_DEVICE_SUB_GROUP_SIZES_INTEL (cl_intel_required_subgroup_size). */
    size_t sizes[16], nb = 0;
    if (clGetDeviceInfo(dev, 0x4108, sizeof sizes, sizes, &nb) == CL_SUCCESS)
      for (size_t i = 0; i < nb / sizeof sizes[0] && i < 16; i++)
        for (unsigned b = 0; b < 16; b++)
          if (sizes[i] == ((size_t)1 << b)) caps->intel_sg_sizes |= 1u << b;
  }
  caps->fp16 = dsa__has_ext(exts, "cl_khr_fp16");
  caps->amd_builtins = caps->vendor == DSA_VENDOR_AMD;
  /* NVIDIA's OpenCL compiler accepts inline PTX asm(); nobody else's does. */
  caps->nv_inline_ptx = caps->vendor == DSA_VENDOR_NVIDIA && dsa__has_ext(exts, "cl_nv_device_attribute_query");
  if (caps->nv_inline_ptx) {
    /* CL_DEVICE_COMPUTE_CAPABILITY_{MAJOR,MINOR}_NV of that extension. */
    cl_uint major = 0, minor = 0;
    if (clGetDeviceInfo(dev, 0x4000, sizeof major, &major, NULL) == CL_SUCCESS &&
        clGetDeviceInfo(dev, 0x4001, sizeof minor, &minor, NULL) == CL_SUCCESS)
      caps->nv_sm = (int)(major * 10 + minor);
  }
  caps->nv_compiler_options =
      caps->vendor == DSA_VENDOR_NVIDIA && dsa__has_ext(exts, "cl_nv_compiler_options");
  free(exts);

  const char *emu = getenv("DSACL_EMULATE");
  if (emu && *emu && strcmp(emu, "none") != 0) {
    if (strcmp(emu, "amd") != 0)
      return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                       "DSACL_EMULATE = \"%s\": known values are amd and none", emu);
    if (!caps->intel_subgroups || !(caps->intel_sg_sizes & (1u << 5)))
      return dsa__fail(DSA_ERR_UNSUPPORTED, 0,
                       "DSACL_EMULATE=amd needs Intel sub-groups of 32 (Intel's OpenCL CPU "
                       "runtime has them); %s has none",
                       caps->device_name);
    caps->emulate = DSA_EMULATE_AMD;
    caps->amd_builtins = true;
  }
  caps->tuning = dsa__tuning(caps);
  return dsa__pick_tile(caps);
}

dsa_tuning dsa__tuning(const dsa_caps *caps) {
  static const struct {
    dsa_tuning t;
    int vendor;
    cl_device_type types;
  } rows[] = {
#define DSA_TUNING_ROW_(row, vendor, types, groups) {{row, groups}, vendor, types},
      DSA_TUNING_MAP(DSA_TUNING_ROW_)
#undef DSA_TUNING_ROW_
  };
  const size_t n = sizeof rows / sizeof rows[0];
  for (size_t i = 0; i + 1 < n; i++)
    if ((rows[i].vendor < 0 || rows[i].vendor == (int)caps->vendor) && (rows[i].types & caps->type))
      return rows[i].t;
  return rows[n - 1].t;
}

const dsa_tile_backend dsa__tile_backends[DSA_TILE_COUNT] = {
#define DSA_TILE_ROW_(id, word, lanes, m, n, a_regs) [DSA_TILE_##id] = {word, lanes, m, n, a_regs},
    DSA_TILE_MAP(DSA_TILE_ROW_)
#undef DSA_TILE_ROW_
};

int dsa__tile_backend(const dsa_caps *caps, unsigned enabled, bool *emu) {
  const unsigned on = enabled & dsa__caps_bits(caps);
  unsigned need = 0;
  switch (caps->tile) {
    case DSA_TILE_NV: need = DSA_CAP_NV_PTX; break;
    case DSA_TILE_INTEL16:
    case DSA_TILE_INTEL8: need = DSA_CAP_INTEL_DPAS; break;
    case DSA_TILE_MFMA:
    case DSA_TILE_WMMA: need = DSA_CAP_AMD_BUILTINS; break;
    default: break;
  }
  /* An emulation runs on Intel sub-groups; under DSACL_EMULATE=amd the AMD
   * capability stands for the emulated device too (masking it off gives the
   * portable back-end, as for the other AMD paths). */
  if (caps->tile_emu)
    need = DSA_CAP_INTEL_SUBGROUPS |
           ((caps->tile == DSA_TILE_MFMA || caps->tile == DSA_TILE_WMMA) &&
                    caps->emulate == DSA_EMULATE_AMD
                ? DSA_CAP_AMD_BUILTINS
                : 0u);
  if ((on & need) != need) {
    *emu = false;
    return DSA_TILE_PORTABLE;
  }
  *emu = caps->tile_emu;
  return caps->tile;
}

unsigned dsa__caps_bits(const dsa_caps *caps) {
  unsigned b = 0;
  if (caps->subgroups) b |= DSA_CAP_SUBGROUPS;
  if (caps->intel_subgroups) b |= DSA_CAP_INTEL_SUBGROUPS;
  if (caps->intel_dpas) b |= DSA_CAP_INTEL_DPAS;
  if (caps->nv_inline_ptx) b |= DSA_CAP_NV_PTX;
  if (caps->amd_builtins) b |= DSA_CAP_AMD_BUILTINS;
  if (caps->fp16) b |= DSA_CAP_FP16;
  return b;
}

bool dsa__parse_caps(const char *text, unsigned *bits) {
  *bits = 0;
  if (!text) return true;
  char *end;
  unsigned long v = strtoul(text, &end, 0);
  if (end != text && *end == '\0') {
    *bits = (unsigned)v & DSA_CAP_ALL;
    return true;
  }
  const char *p = text;
  while (*p) {
    size_t n = strcspn(p, ", ");
    if (n == 3 && strncasecmp(p, "all", 3) == 0) {
      *bits |= DSA_CAP_ALL;
    } else if (n > 0) {
      bool found = false;
      for (unsigned b = 1; b & DSA_CAP_ALL; b <<= 1) {
        const char *name = dsa_cap_name(b);
        if (name && strlen(name) == n && strncasecmp(p, name, n) == 0) {
          *bits |= b;
          found = true;
        }
      }
      if (!found) return false;
    }
    p += n;
    while (*p == ',' || *p == ' ') p++;
  }
  return true;
}

void dsa__build_options(const dsa_caps *caps, unsigned enabled, char *buf, size_t n) {
  /* The portable kernels are OpenCL C 1.2; vendor paths are switched on by
   * macros so one source serves every device. Never -cl-fast-relaxed-math or
   * -cl-finite-math-only: masking relies on +-inf and NaN handling. */
  const unsigned on = enabled & dsa__caps_bits(caps);
  bool tile_emu;
  const int tile = dsa__tile_backend(caps, enabled, &tile_emu);
  snprintf(buf, n,
           "-cl-std=CL1.2 -DDSA_VENDOR_NVIDIA=%d -DDSA_VENDOR_INTEL=%d -DDSA_VENDOR_AMD=%d "
           "-DDSA_HAS_SUBGROUPS=%d -DDSA_HAS_INTEL_SUBGROUPS=%d -DDSA_HAS_INTEL_DPAS=%d "
           "-DDSA_HAS_NV_PTX=%d -DDSA_HAS_AMD_BUILTINS=%d -DDSA_LOCAL_MEM_BYTES=%lu "
           "-DDSA_MAX_WG=%lu -DDSA_NV_SM=%d -DDSA_INTEL_SG32=%d -DDSA_AMD_EMU=%d "
           "-DDSA_TILE=%d -DDSA_TILE_EMU=%d -DDSA_DEVICE_CPU=%d",
           caps->vendor == DSA_VENDOR_NVIDIA, caps->vendor == DSA_VENDOR_INTEL,
           caps->vendor == DSA_VENDOR_AMD, !!(on & DSA_CAP_SUBGROUPS),
           !!(on & DSA_CAP_INTEL_SUBGROUPS), !!(on & DSA_CAP_INTEL_DPAS),
           !!(on & DSA_CAP_NV_PTX), !!(on & DSA_CAP_AMD_BUILTINS),
           (unsigned long)caps->local_mem, (unsigned long)caps->max_wg,
           (on & DSA_CAP_NV_PTX) ? caps->nv_sm : 0,
           (on & DSA_CAP_INTEL_SUBGROUPS) && (caps->intel_sg_sizes & (1u << 5)) ? 1 : 0,
           (on & DSA_CAP_AMD_BUILTINS) && caps->emulate == DSA_EMULATE_AMD ? 1 : 0, tile,
           tile_emu ? 1 : 0, (caps->type & CL_DEVICE_TYPE_CPU) ? 1 : 0);
  /* The enum tables that cross into the kernels (dsacl.h X-macros). */
  size_t used = strlen(buf);
#define DSA_OPT_(...)                                                    \
  do {                                                                   \
    if (used < n) {                                                      \
      int w_ = snprintf(buf + used, n - used, __VA_ARGS__);              \
      if (w_ > 0) used += (size_t)w_;                                    \
    }                                                                    \
  } while (0)
#define DSA_FAULT_OPT_(name, bit, desc) DSA_OPT_(" -DDSA_FAULT_%s=%uu", #name, 1u << (bit));
  DSA_FAULT_MAP(DSA_FAULT_OPT_)
#undef DSA_FAULT_OPT_
#define DSA_CACHE_OPT_(name, val, data, scale) \
  DSA_OPT_(" -DDSA_CACHE_%s_DATA=%du -DDSA_CACHE_%s_SCALE=%du", #name, data, #name, scale);
  DSA_CACHE_FORMAT_MAP(DSA_CACHE_OPT_)
#undef DSA_CACHE_OPT_
#define DSA_E2M1_OPT_(name, val) DSA_OPT_(" -DDSA_E2M1_%s=%d", #name, val);
  DSA_E2M1_MODE_MAP(DSA_E2M1_OPT_)
#undef DSA_E2M1_OPT_
#define DSA_TILE_OPT_(id, word, lanes, m, n, a_regs) DSA_OPT_(" -DDSA_TILE_%s=%d", #id, DSA_TILE_##id);
  DSA_TILE_MAP(DSA_TILE_OPT_)
#undef DSA_TILE_OPT_
  /* The picked back-end's instruction geometry: the kernels' only source of
   * it (cl/dsa_tile.h stops without it), so the launchers' work-group
   * arithmetic (dsa__tile_backends) and the kernels' cannot disagree. */
  const dsa_tile_backend *be = &dsa__tile_backends[tile];
  DSA_OPT_(" -DDSA_TILE_LANES=%d -DDSA_TILE_M=%d -DDSA_TILE_N=%d -DDSA_TILE_A_REGS=%d", be->lanes,
           be->m, be->n, be->a_regs);
#undef DSA_OPT_
}
