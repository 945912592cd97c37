/* Internal interfaces shared by the runtime and the operator launchers. */
#ifndef DSACL_INTERNAL_H
#define DSACL_INTERNAL_H

#include "dsacl/dsacl.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>

#include "diskcache.h"
#include "kernels_embedded.h"

/* ---- errors (status.c) -------------------------------------------------- */

/* Records the thread's last error and returns s. clerr: CL_SUCCESS if none. */
dsa_status dsa__fail(dsa_status s, cl_int clerr, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* As dsa__fail, with a failed OpenCL call: "<what>: CL_OUT_OF_RESOURCES (-5)". */
dsa_status dsa__fail_cl(cl_int clerr, const char *what);
/* Appends text (e.g. a build log) to the thread's last error message. */
void dsa__append_error(const char *text);
void dsa__clear_error(void);
const char *dsa__cl_error_name(cl_int e);

/* Library log to stderr when DSACL_LOG >= level (1 error, 2 info, 3 debug). */
void dsa__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- device capabilities (caps.c) -------------------------------------- */

typedef enum dsa_vendor {
  DSA_VENDOR_OTHER = 0,
  DSA_VENDOR_NVIDIA,
  DSA_VENDOR_INTEL,
  DSA_VENDOR_AMD,
  DSA_VENDOR_POCL
} dsa_vendor;

/* ---- per-device tuning (caps.c) --------------------------------------------
 * Measured launch constants, one row per device class: X(row, vendor
 * (DSA_VENDOR_*, or -1 for any), device types (a CL_DEVICE_TYPE_* mask),
 * insert_groups_per_cu). The first row matching the device is its tuning;
 * the last matches every device. Each row says which measurement its
 * values come from; a new device class is a row above the default.
 *   insert_groups_per_cu  dsa_mla_cache_insert launches at most this many
 *                         work-groups per compute unit, each looping over
 *                         tokens, so a row overlaps the loads of several
 *                         (0: one row per token, no cap)
 * dsacl-info prints the device's row. */
#define DSA_TUNING_MAP(X)                                                        \
  /* H200, 2ea5bbb (insert N = 8192), and H100 (docs/PERFORMANCE.md, "What   \
   * was tried on the insert kernel"): 4, 8 or 16 groups per compute unit and \
   * one token per row take the same time, 2 is 10 % slower. */               \
  X("nvidia-gpu", DSA_VENDOR_NVIDIA, CL_DEVICE_TYPE_GPU, 4)                    \
  /* Not measured elsewhere: NVIDIA's value (the kernel is correct for any). */ \
  X("default", -1, CL_DEVICE_TYPE_ALL, 4)
typedef struct dsa_tuning {
  const char *row; /* the DSA_TUNING_MAP row that matched */
  unsigned insert_groups_per_cu;
} dsa_tuning;

typedef struct dsa_caps {
  dsa_vendor vendor;
  cl_device_type type;
  int cl_c_major, cl_c_minor;   /* OpenCL C version the device accepts */
  bool subgroups;               /* cl_khr_subgroups or core 2.1+ sub-groups */
  bool intel_subgroups;         /* cl_intel_subgroups */
  unsigned intel_sg_sizes;      /* CL_DEVICE_SUB_GROUP_SIZES_INTEL: bit n = size 2^n */
  bool intel_dpas;              /* cl_intel_subgroup_matrix_multiply_accumulate */
  bool nv_inline_ptx;           /* NVIDIA driver: inline PTX asm accepted */
  int nv_sm;                    /* NVIDIA compute capability (90 = sm_90), else 0 */
  bool nv_compiler_options;     /* cl_nv_compiler_options: -cl-nv-maxrregcount and kin */
  bool amd_builtins;            /* AMD driver: __builtin_amdgcn_* (or emulated) */
  int emulate;                  /* DSA_EMULATE_*: a vendor path emulated for tests */
  int tile;                     /* DSA_TILE_*: the matrix-tile back-end (DSACL_MMA) */
  bool tile_emu;                /* its instruction emulated with Intel sub-groups */
  bool tile_forced;             /* named by DSACL_MMA (not the device's own pick) */
  bool fp16;                    /* cl_khr_fp16 */
  cl_ulong local_mem;           /* bytes */
  size_t max_wg;                /* max work-group size */
  cl_uint compute_units;
  dsa_tuning tuning;            /* this device's DSA_TUNING_MAP row */
  char device_name[256];
  char platform_name[256];
  char platform_version[256];
  char device_version[256];
  char driver_version[256];
} dsa_caps;

/* DSACL_EMULATE=amd: run the AMD paths on a device with Intel sub-groups of
 * 32 (Intel's CPU runtime), every vendor builtin replaced by an exact
 * emulation over real sub-groups; for tests of the AMD code here. */
enum { DSA_EMULATE_NONE = 0, DSA_EMULATE_AMD = 1 };

dsa_status dsa__probe_caps(cl_device_id dev, dsa_caps *caps);
/* The device's DSA_TUNING_MAP row (from caps->vendor and caps->type). */
dsa_tuning dsa__tuning(const dsa_caps *caps);
/* The dsa_cap_bits the probed device has. */
unsigned dsa__caps_bits(const dsa_caps *caps);

/* ---- matrix-tile back-ends (cl/dsa_tile.h; caps.c) -------------------------
 * One table: X(id, DSACL_MMA's word, lanes, m, n, a_regs); a back-end's code
 * is its row, DSA_TILE_<id>, which dsa__build_options passes to the kernels
 * (-DDSA_TILE_<id>=code beside -DDSA_TILE=picked). A context's back-end is
 * the device's own (or DSACL_MMA's); it falls back to portable when the
 * capability it needs is disabled. */
#define DSA_TILE_MAP(X)                      \
  X(PORTABLE, "portable", 1, 4, 4, 0)       \
  X(NV, "nv-mma", 32, 16, 8, 1)             \
  X(INTEL16, "intel-dpas16", 16, 8, 16, 1)  \
  X(INTEL8, "intel-dpas8", 8, 8, 8, 1)      \
  X(MFMA, "amd-mfma", 64, 16, 16, 1)        \
  X(WMMA, "amd-wmma", 32, 16, 16, 1)
enum {
#define DSA_TILE_ENUM_(id, word, lanes, m, n, a_regs) DSA_TILE_##id,
  DSA_TILE_MAP(DSA_TILE_ENUM_)
#undef DSA_TILE_ENUM_
  DSA_TILE_COUNT
};
typedef struct dsa_tile_backend {
  const char *name; /* DSACL_MMA's word for it */
  int lanes, m, n;  /* work-items per unit, rows and columns per atom */
  int a_regs;       /* kernels keep A fragments in registers (DSA_TILE_A_REGS) */
} dsa_tile_backend;
extern const dsa_tile_backend dsa__tile_backends[DSA_TILE_COUNT];
/* Sets caps->tile (and tile_emu) from the probed capabilities and DSACL_MMA
 * (dsa__probe_caps calls it; dsacl-cl-options for its device profiles). */
dsa_status dsa__pick_tile(dsa_caps *caps);
/* The back-end kernels of this context are built for, given the enabled
 * capabilities; *emu: emulated. */
int dsa__tile_backend(const dsa_caps *caps, unsigned enabled, bool *emu);
/* Sets caps->tile (and _emu, _forced) from the other fields and DSACL_MMA. */
dsa_status dsa__pick_tile(dsa_caps *caps);
/* The -D options every program of this device is built with, for the
 * enabled capabilities `enabled` (dsa_cap_bits). */
void dsa__build_options(const dsa_caps *caps, unsigned enabled, char *buf, size_t n);
/* Parses DSACL_DISABLE_CAPS-style text ("nv-ptx,subgroups", "all", "0x8").
 * Returns false on an unknown name. */
bool dsa__parse_caps(const char *text, unsigned *bits);

/* ---- per-program constants (variant.c) -----------------------------------
 * Geometry and tuning constants live on the host, in the operator's file,
 * and reach its program as -D options: one definition for both sides.
 *   #define MLA_LANES 32
 *   const char dsa__defines_mla_cache[] = DSA_KDEF(MLA_LANES) DSA_KDEF(...);
 * and a row in DSA_PROGRAM_DEFINES (variant.c). */
#define DSA_KSTR2_(x) #x
#define DSA_KSTR_(x) DSA_KSTR2_(x)
#define DSA_KDEF(name) " -D" #name "=" DSA_KSTR_(name)
/* The -D options of program id ("" if none). */
const char *dsa__program_defines(dsa_program_id id);
/* Options a program takes on this device only (a compiler's own flags; ""
 * for most): appended after the defines, part of the binary cache's key.
 * Not a capability: DSACL_FORCE_PORTABLE leaves them on. enabled: the
 * context's capability mask (what its build options were made for). */
const char *dsa__program_device_options(dsa_program_id id, const dsa_caps *caps,
                                        unsigned enabled);
const char *dsa__sparse_mla_device_options(const dsa_caps *caps, unsigned enabled);
const char *dsa__topk_device_options(const dsa_caps *caps);
const char *dsa__indexer_logits_device_options(const dsa_caps *caps, unsigned enabled);

/* ---- memory kinds (mem.c) -------------------------------------------------
 * cl_intel_unified_shared_memory's entry points, reached through
 * clGetExtensionFunctionAddressForPlatform, and its constants (cl_ext.h
 * spells them too; older headers lack them). */
typedef cl_int(CL_API_CALL *dsa_usm_set_arg_fn)(cl_kernel k, cl_uint index, const void *ptr);
typedef cl_int(CL_API_CALL *dsa_usm_info_fn)(cl_context ctx, const void *ptr, cl_uint param,
                                             size_t size, void *value, size_t *size_ret);
enum {
  DSA_CL_MEM_ALLOC_TYPE_INTEL = 0x419A,
  DSA_CL_MEM_ALLOC_BASE_PTR_INTEL = 0x419B,
  DSA_CL_MEM_ALLOC_SIZE_INTEL = 0x419C,
  DSA_CL_MEM_ALLOC_DEVICE_INTEL = 0x419D,
  DSA_CL_MEM_TYPE_UNKNOWN_INTEL = 0x4196,
  DSA_CL_MEM_TYPE_HOST_INTEL = 0x4197,
  DSA_CL_MEM_TYPE_DEVICE_INTEL = 0x4198,
  DSA_CL_MEM_TYPE_SHARED_INTEL = 0x4199,
  DSA_CL_DEVICE_SVM_CAPABILITIES = 0x1053 /* OpenCL 2.0 */
};

/* Whether the space-separated extension list exts names name (caps.c). */
bool dsa__has_ext(const char *exts, const char *name);

/* Fills c->mem_kinds and the USM entry points from c->dev (after the caps
 * probe), and the external-memory import state (external.c). Never fails:
 * a kind it cannot confirm is absent. Runs once, at context creation. */
void dsa__probe_mem(struct dsa_context *c);
/* The cl_khr_external_memory part of that probe, from the device's
 * extension list (external.c). */
void dsa__probe_external(struct dsa_context *c, cl_platform_id plat, const char *exts);
/* Sets kernel argument index to pointer p of kind DSA_MEM_USM or
 * DSA_MEM_SVM (the CL error of the call; CL_INVALID_OPERATION for a kind
 * the context lacks). */
cl_int dsa__set_arg_ptr(const struct dsa_context *c, cl_kernel k, cl_uint index,
                        dsa_mem_kind kind, const void *p);
/* "DSA_MEM_USM"; the extension a kind needs, in words (messages). */
const char *dsa__mem_kind_name(dsa_mem_kind kind);
const char *dsa__mem_kind_needs(dsa_mem_kind kind);

/* ---- context / programs (context.c) ------------------------------------ */

struct dsa_context {
  cl_context ctx;
  cl_device_id dev;
  dsa_caps caps;
  unsigned caps_enabled; /* dsa_cap_bits: probed minus disabled */
  bool force_portable;   /* every capability disabled */
  /* DSACL_TOPK (op_topk.c): the top-k algorithm preferred (DSA_TOPK_ALGO_*)
   * and the split's chunk width (0: chosen per call). */
  int topk_algo;
  uint32_t topk_chunk;
  /* DSACL_TOPK_WG (op_topk.c): the largest group the register top-k
   * kernels are taken to run at, instead of what the driver reports (0). */
  uint32_t topk_wg;
  /* DSACL_TOPK_SAMPLE (op_topk.c): the register / local-key kernels' sampled
   * select: 1 on (auto), 0 off, 2 run but always fall back (tests). */
  uint32_t topk_sample;
  /* DSACL_TOPK_MERGE (op_topk.c): where the split merges its chunk lists:
   * 1 auto (the row's last chunk group where the device is known to allow
   * it), 2 the last group on any device, 0 the topk_merge kernel. */
  uint32_t topk_fuse;
  /* DSACL_IL_KEYS (op_indexer_logits.c): 0 auto, -1 off (the keys
   * variant refused), 128 or 256 (its group size forced). */
  int il_keys;
  /* DSACL_IL_PRE (op_indexer_logits.c): "off" refuses portable-h64pre
   * (the wide tile on operands decoded beforehand); -1 then, else 0. */
  int il_pre;
  /* DSACL_MLA_TWO_STAGE (op_sparse_mla.c): "off" or "0" refuses the fused
   * decode's two-stage route (true here). */
  bool mla_route_off;
  /* DSACL_COMPRESSOR (op_compressor.c), tests: cmp_mode 1 "wide" refuses
   * the compressor's split kernels, 2 "narrow" the split and wide ones, 0
   * auto; "split:N,K" makes the split's slices N tokens (cmp_slice) and
   * its work-group rows K tokens (cmp_tb; 0 each: the host's choice);
   * "split2" launches its tail kernel (cmp_nofuse). */
  int cmp_mode, cmp_slice, cmp_tb;
  bool cmp_nofuse;
  char build_options[2048];
  char matrix_backend[48]; /* dsa_context_matrix_backend */
  dsa_diskcache dcache;
  pthread_mutex_t lock; /* guards programs[] */
  cl_program programs[DSA_NUM_PROGRAMS];
  int nqueues;          /* live dsa_queues (guarded by lock) */
  bool destroyed;       /* dsa_context_destroy called; freed with its last queue */
  bool from_cache[DSA_NUM_PROGRAMS]; /* program loaded from the binary cache */
  /* dsa_context_mem_kinds: bits 1u << dsa_mem_kind (mem.c). The USM entry
   * points are set when DSA_MEM_USM is in it. */
  unsigned mem_kinds;
  dsa_usm_set_arg_fn usm_set_arg;
  dsa_usm_info_fn usm_info;
  /* External memory (external.c): per dsa_external_handle, NULL when the
   * device imports it, else why not; the acquire / release entry points
   * (NULL without cl_khr_external_memory). */
  const char *ext_refusal[3];
  void *ext_acquire, *ext_release;
};

/* Top-k algorithms by preference (DSACL_TOPK): AUTO picks per call; a named
 * one is taken wherever it can run, the ones before it are refused. */
enum {
  DSA_TOPK_ALGO_AUTO = 0,
  DSA_TOPK_ALGO_WIDE,
  DSA_TOPK_ALGO_SPLIT,
  DSA_TOPK_ALGO_LROW,
  DSA_TOPK_ALGO_ROW,
  DSA_TOPK_ALGO_STREAM
};
/* Parses DSACL_TOPK into c->topk_algo / topk_chunk (op_topk.c). */
dsa_status dsa__topk_env(dsa_context *c);
/* Parses DSACL_IL_KEYS into c->il_keys and DSACL_IL_PRE into c->il_pre
 * (op_indexer_logits.c). */
dsa_status dsa__il_keys_env(dsa_context *c);
/* Reads DSACL_MLA_TWO_STAGE into c (op_sparse_mla.c). */
void dsa__mla_route_env(dsa_context *c);
/* Reads DSACL_COMPRESSOR into c (op_compressor.c). */
void dsa__compressor_env(dsa_context *c);

/* A queue of c is gone: frees c if it was destroyed and this was its last. */
void dsa__context_queue_gone(dsa_context *c);

/* Built program for id (built or loaded from the binary cache on first use). */
dsa_status dsa__get_program(dsa_context *c, dsa_program_id id, cl_program *out);
/* Kernel kname could not be created from program `old` of id. If old came
 * from the binary cache (e.g. a forged or stale entry lacking kname), it is
 * replaced by a build from source, which also overwrites the cache entry.
 * true (with *out the program to retry with) when a retry makes sense. */
bool dsa__program_rebuild(dsa_context *c, dsa_program_id id, cl_program old, const char *kname,
                          cl_program *out);

/* ---- queues (queue.c) ---------------------------------------------------- */

#define DSA_MAX_KERNELS 128

struct dsa_queue {
  dsa_context *ctx;
  cl_command_queue q;
  cl_mem faults; /* one cl_uint, zero-initialised */
  /* Kernel objects per queue: clSetKernelArg is not thread-safe on a shared
   * kernel. Looked up by (program, name) and created on first use. */
  struct {
    dsa_program_id prog;
    const char *name; /* static string */
    cl_kernel k;
  } kernels[DSA_MAX_KERNELS];
  int nkernels;
  /* The variant the last operator launched on this queue picked (tests and
   * logs); "" before the first pick. */
  char last_variant[96];
  /* Device scratch of this queue (split-K partials of the sparse MLA
   * decode, the top-k split's lists), grown on demand: dsa__queue_scratch. */
  cl_mem scratch;
  size_t scratch_size;
  /* Top-k group limits (op_topk.c), asked of the driver on the first call
   * and kept (0: not yet): topk_rows_<WG>, topk_lrows_<WG>, wide's, and
   * topk_per_row's CL_KERNEL_WORK_GROUP_SIZE. */
  size_t topk_lim[4];
  /* Arrival counters (dsa__queue_counters: the top-k split's rows, the C128
   * compressor's tokens), zero between launches (the last group of a row or
   * token resets its own); grown on demand. */
  cl_mem counters;
  size_t counters_n;
};

/* At least `bytes` of device scratch owned by q, valid for the commands q
 * enqueues next (a queue is used by one thread at a time, in order; a
 * smaller buffer it replaces is released, which OpenCL defers until the
 * commands using it have finished). */
dsa_status dsa__queue_scratch(dsa_queue *q, size_t bytes, cl_mem *out);
/* At least n arrival counters owned by q (at least 1024), zero now: zero
 * when made (copied from a zeroed host array, so nothing is enqueued) and
 * zero again after every launch that used them, whose last group of each
 * row or token resets its own (cl/dsa_common.h, dsa_group_publish). A
 * larger set replaces the old one only when n grows. */
dsa_status dsa__queue_counters(dsa_queue *q, int64_t n, cl_mem *out);

dsa_status dsa__get_kernel(dsa_queue *q, dsa_program_id prog, const char *name,
                           cl_kernel *out);

/* Enqueues kernel k (arguments already set) over an ND range (dims 1..3;
 * global already a multiple of local), passing ev->wait and ev->done; the
 * error names the kernel. Launchers call dsa__launch_args (kargs.c). */
dsa_status dsa__enqueue(dsa_queue *q, cl_kernel k, const char *kname, cl_uint dims,
                        const size_t *global, const size_t *local, const dsa_events *ev);
/* No work to do: a marker that honours the wait list and returns the event. */
dsa_status dsa__launch_nothing(dsa_queue *q, const dsa_events *ev);

/* ---- kernel arguments (kargs.c) ------------------------------------------
 * The one route from descriptors to kernel arguments. Each append matches a
 * signature macro of cl/dsa_args.h, in the same order:
 *   dsa__karg_tensor(a, t, R)  <->  DSA_TENSOR<R>(name) / DSA_CTENSOR<R>(name):
 *       mem, byte offset, R byte strides, alignment (uint: the largest power
 *       of two <= 256 dividing the offset and the strides of every dimension
 *       but the last one that has extent > 1); a tensor of lower rank than R
 *       (an operator taking 1-D or 2-D lengths) gets stride 0 for its
 *       missing inner dimensions
 *   dsa__karg_paged(a, c)      <->  DSA_PAGED(name) / DSA_CPAGED(name):
 *       mem, byte offset, num_blocks (long), block_size (int), block stride
 *       (ulong, bytes), alignment of offset and block stride (uint)
 *   dsa__karg_faults(a)        <->  DSA_FAULTS
 * A NULL or empty tensor / cache passes a stand-in buffer (the queue's fault
 * word) that the kernel never touches, with zero strides and blocks. This is
 * the single place where USM and SVM tensors and caches set their argument:
 * a slot of kind DSA_MEM_USM / DSA_MEM_SVM holds the pointer (ptr, without
 * the offset, which travels in the next slot as for a cl_mem), and
 * dsa__launch_args sets it with clSetKernelArgMemPointerINTEL /
 * clSetKernelArgSVMPointer; the kernel's `__global uchar *x_mem` parameter
 * takes either. The alignment term of a pointer kind is the address
 * (uintptr_t)ptr + offset. */
#define DSA_KARGS_MAX 80
typedef struct dsa_kargs {
  dsa_queue *q;
  int n;
  bool bad; /* too many arguments or a rank mismatch: the launch fails */
  struct {
    size_t size;
    bool local;
    dsa_mem_kind kind; /* DSA_MEM_BUFFER: a value (v); else the pointer v.p */
    union {
      void *p;
      cl_mem m;
      cl_int i;
      cl_uint u;
      cl_long l;
      cl_ulong ul;
      cl_float f;
    } v;
  } a[DSA_KARGS_MAX];
} dsa_kargs;

void dsa__kargs_init(dsa_kargs *a, dsa_queue *q);
void dsa__karg_tensor(dsa_kargs *a, const dsa_tensor *t, int rank);
/* Positions (rank 1) / cos_sin (rank 2) followed by their dtype flag, i32
 * (pos_i32) or bf16 (cs_bf16): the kernels' `DSA_CTENSOR1(pos), int pos_i32`
 * and `DSA_CTENSOR2(cs), int cs_bf16`. */
void dsa__karg_positions(dsa_kargs *a, const dsa_tensor *t);
void dsa__karg_cos_sin(dsa_kargs *a, const dsa_tensor *t);
void dsa__karg_paged(dsa_kargs *a, const dsa_paged_cache *c);
void dsa__karg_mem(dsa_kargs *a, cl_mem m); /* NULL: the stand-in */
void dsa__karg_faults(dsa_kargs *a);
void dsa__karg_i32(dsa_kargs *a, cl_int v);
void dsa__karg_u32(dsa_kargs *a, cl_uint v);
void dsa__karg_i64(dsa_kargs *a, cl_long v);
void dsa__karg_u64(dsa_kargs *a, cl_ulong v);
void dsa__karg_f32(dsa_kargs *a, cl_float v);
void dsa__karg_local(dsa_kargs *a, size_t bytes);
/* The alignment dsa__karg_tensor passes for t (256 for an empty tensor). */
cl_uint dsa__tensor_align(const dsa_tensor *t);
/* The alignment dsa__karg_paged passes for c. A launcher that has a kernel
 * built for 16-byte-aligned operands picks it with these (the flags then
 * fold away in the kernel instead of being derived per item). */
cl_uint dsa__paged_align(const dsa_paged_cache *c);

/* Sets a's arguments on kernel k and enqueues it (as dsa__launch). */
dsa_status dsa__launch_args(dsa_queue *q, cl_kernel k, const char *kname, const dsa_kargs *a,
                            cl_uint dims, const size_t *global, const size_t *local,
                            const dsa_events *ev);

/* ---- variant tables (variant.c) -------------------------------------------
 * Each operator lists its kernel variants, best first. dsa__pick walks the
 * list: a variant runs when every capability it needs is enabled in the
 * context and its `refuse` predicate (NULL: takes every shape) returns NULL
 * for the call's shape; otherwise the reason is recorded (logged at
 * DSACL_LOG=3, listed by dsacl-info --variants). The picker knows nothing of
 * the operator's shape struct: predicates live beside the operator. */
typedef struct dsa_variant {
  const char *name;   /* "nv-mma", "portable" */
  unsigned caps;      /* dsa_cap_bits, all required */
  /* NULL if the variant takes this call; else a reason, in words, written to
   * buf (n bytes) or a static string. shape NULL: judge the device alone
   * (dsacl-info), shape-dependent limits then pass. */
  const char *(*refuse)(const dsa_context *c, const void *shape, char *buf, size_t n);
  const char *limits; /* the shapes it takes, in words (dsacl-info); NULL: all */
} dsa_variant;

typedef struct dsa_variant_table {
  const char *op; /* public operator name, e.g. "dsa_indexer_paged_logits" */
  const dsa_variant *v;
  int n;
} dsa_variant_table;

#define DSA_VARIANT_TABLE(sym, opname, ...)                                         \
  static const dsa_variant sym##_v_[] = {__VA_ARGS__};                              \
  const dsa_variant_table sym = {opname, sym##_v_, (int)(sizeof sym##_v_ / sizeof sym##_v_[0])}

/* Index into t->v of the variant to run; on none, a DSA_ERR_UNSUPPORTED
 * failure listing every refusal and -1. Records the pick in q->last_variant
 * and logs it at DSACL_LOG >= 2. */
int dsa__pick(dsa_queue *q, const dsa_variant_table *t, const void *shape);
/* The reason v would not run on context c for `shape` (NULL: it would).
 * shape NULL asks about the device only. */
const char *dsa__variant_refusal(const dsa_context *c, const dsa_variant *v, const void *shape,
                                 char *buf, size_t n);
/* Shared refusals: more local memory than the device has ("needs N B of
 * local memory, the device has M"), and no 32-wide Intel sub-groups. */
const char *dsa__refuse_local_mem(const dsa_context *c, size_t need, char *buf, size_t n);
/* Whether a work-group may read what other groups of the same launch wrote
 * before they counted on an arrival counter (cl/dsa_common.h,
 * dsa_group_publish), which OpenCL 1.2 orders by no fence of its own:
 * where the device-scope fence is known, NVIDIA with inline PTX (tested on
 * an H200) and Intel's CPU runtime (coherent caches; tested there). Not
 * AMD or Intel GPUs (untested) nor Oclgrind (whose race checker reports any
 * such hand-over). */
bool dsa__group_handoff_ok(const dsa_context *c);
const char *dsa__refuse_no_sg32(const dsa_context *c, const void *shape, char *buf, size_t n);
/* Every operator's table (variant.c lists them). */
extern const dsa_variant_table *const dsa__variant_tables[];
extern const int dsa__num_variant_tables;
/* The variant the last operator launched on q picked: "op: variant". */
const char *dsa__queue_last_variant(const dsa_queue *q);

/* ---- argument validation (tensor.c) ------------------------------------ */

/* Every check returns DSA_OK or a dsa__fail(DSA_ERR_INVALID_ARGUMENT, ...)
 * whose message names op and arg.
 *
 * Context of buffers: dsa__check_queue (which every operator calls first)
 * records the queue's cl_context in a thread-local; dsa__check_tensor,
 * dsa__check_cache and dsa__check_mem, called after it on the same thread,
 * refuse a cl_mem whose CL_MEM_CONTEXT differs, and dsa__check_events a wait
 * event whose CL_EVENT_CONTEXT differs. Checks called with no
 * preceding successful dsa__check_queue on the thread skip that comparison. */
dsa_status dsa__check_queue(const dsa_queue *q, const char *op);
/* A raw cl_mem argument (e.g. a workspace): not NULL, a valid buffer, of the
 * queue's context. *size: its CL_MEM_SIZE (0 on error). */
dsa_status dsa__check_mem(cl_mem m, const char *op, const char *arg, size_t *size);
/* *end = offset + (count-1)*stride + tail, false if count is 0 or anything
 * overflows 64 bits. The one extent computation the checks share. */
bool dsa__checked_end(uint64_t offset, uint64_t count, uint64_t stride, uint64_t tail,
                      uint64_t *end);
dsa_status dsa__check_events(const dsa_events *ev, const char *op);
/* A params struct's reserved bytes (n of them at r) are all zero: a caller
 * built against a later 1.x that set a field carved from them is refused,
 * not silently given the 1.0 behaviour. The message names p->reserved[i]. */
dsa_status dsa__check_reserved(const unsigned char *r, size_t n, const char *op);
/* dsa__check_reserved on a params pointer that may be NULL (defaults). */
#define DSA_CHECK_PARAMS(p, op) \
  DSA_CHECK((p) ? dsa__check_reserved((p)->reserved, sizeof (p)->reserved, op) : DSA_OK)
/* dtype == want, ndim == ndim, strides >= 0, shape >= 0, and the addressed
 * byte range inside the cl_mem. Empty tensors address nothing. */
dsa_status dsa__check_tensor(const dsa_tensor *t, const char *op, const char *arg,
                             dsa_dtype want, int ndim);
/* Innermost stride must be 1 (kernels read rows as vectors). */
dsa_status dsa__check_unit_inner(const dsa_tensor *t, const char *op, const char *arg);
/* positions: i64 or i32 [n] (n < 0: any length); cos_sin: f32 or bf16, rank
 * 2, unit inner stride. */
dsa_status dsa__check_positions(const dsa_tensor *t, const char *op, int64_t n);
dsa_status dsa__check_cos_sin(const dsa_tensor *t, const char *op);
dsa_status dsa__check_dim(const dsa_tensor *t, const char *op, const char *arg, int dim,
                          int64_t want);
dsa_status dsa__check_cache(const dsa_paged_cache *c, const char *op, const char *arg,
                            dsa_cache_format want);
/* Memory of tensors and caches (both checks above call it for a non-empty
 * one): kind known; DSA_MEM_BUFFER: mem of the queue's context, ptr NULL,
 * ptr_bytes 0; a pointer kind: mem NULL, ptr set, the context takes the kind
 * (else DSA_ERR_UNSUPPORTED naming the extension), a USM pointer is an
 * allocation of the queue's cl_context (and of its device, for device
 * memory), ptr_bytes within what is left of the USM allocation (0: all of
 * it) and nonzero for SVM. *size: the bytes addressable from mem / ptr. */
dsa_status dsa__check_storage(dsa_mem_kind kind, cl_mem mem, const void *ptr, size_t ptr_bytes,
                              const char *op, const char *arg, size_t *size);
size_t dsa__mem_size(cl_mem m); /* 0 if m is not a valid buffer */

/* One past the last byte a tensor addresses, relative to mem (0 if empty,
 * UINT64_MAX if the computation overflows). */
uint64_t dsa__tensor_extent(const dsa_tensor *t);

#define DSA_CHECK(expr)              \
  do {                               \
    dsa_status s_ = (expr);          \
    if (s_ != DSA_OK) return s_;     \
  } while (0)

#endif
