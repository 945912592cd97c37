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

typedef struct dsa_caps {
  dsa_vendor vendor;
  cl_device_type type;
  int cl_c_major, cl_c_minor;   /* OpenCL C version the device accepts */
  bool subgroups;               /* cl_khr_subgroups or core 2.1+ sub-groups */
  bool intel_subgroups;         /* cl_intel_subgroups */
  bool intel_dpas;              /* cl_intel_subgroup_matrix_multiply_accumulate */
  bool nv_inline_ptx;           /* NVIDIA driver: inline PTX asm accepted */
  int nv_sm;                    /* NVIDIA compute capability (90 = sm_90), else 0 */
  bool amd_builtins;            /* AMD driver: __builtin_amdgcn_* */
  bool fp16;                    /* cl_khr_fp16 */
  cl_ulong local_mem;           /* bytes */
  size_t max_wg;                /* max work-group size */
  cl_uint compute_units;
  char device_name[256];
  char platform_name[256];
  char platform_version[256];
  char device_version[256];
  char driver_version[256];
} dsa_caps;

dsa_status dsa__probe_caps(cl_device_id dev, dsa_caps *caps);
/* The -D options every program of this device is built with. */
void dsa__build_options(const dsa_caps *caps, bool force_portable, char *buf, size_t n);

/* ---- context / programs (context.c) ------------------------------------ */

struct dsa_context {
  cl_context ctx;
  cl_device_id dev;
  dsa_caps caps;
  bool force_portable;
  char build_options[1024];
  dsa_diskcache dcache;
  pthread_mutex_t lock; /* guards programs[] */
  cl_program programs[DSA_NUM_PROGRAMS];
  int nqueues;          /* live dsa_queues (guarded by lock) */
  bool destroyed;       /* dsa_context_destroy called; freed with its last queue */
  bool from_cache[DSA_NUM_PROGRAMS]; /* program loaded from the binary cache */
};

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

#define DSA_MAX_KERNELS 64

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
};

dsa_status dsa__get_kernel(dsa_queue *q, dsa_program_id prog, const char *name,
                           cl_kernel *out);

/* Argument setting and launch, with the error naming the kernel. */
typedef struct dsa_karg {
  size_t size;
  const void *ptr;
} dsa_karg;
#define DSA_KARG(x) ((dsa_karg){sizeof(x), &(x)})
#define DSA_KLOCAL(bytes) ((dsa_karg){(bytes), NULL})

/* Sets args, enqueues an ND range (dims 1..3; global already a multiple of
 * local), passes ev->wait and ev->done. */
dsa_status dsa__launch(dsa_queue *q, cl_kernel k, const char *kname, int nargs,
                       const dsa_karg *args, cl_uint dims, const size_t *global,
                       const size_t *local, const dsa_events *ev);
/* No work to do: a marker that honours the wait list and returns the event. */
dsa_status dsa__launch_nothing(dsa_queue *q, const dsa_events *ev);

/* ---- argument validation (tensor.c) ------------------------------------ */

/* Every check returns DSA_OK or a dsa__fail(DSA_ERR_INVALID_ARGUMENT, ...)
 * whose message names op and arg.
 *
 * Context of buffers: dsa__check_queue (which every operator calls first)
 * records the queue's cl_context in a thread-local; dsa__check_tensor,
 * dsa__check_cache and dsa__check_mem, called after it on the same thread,
 * refuse a cl_mem whose CL_MEM_CONTEXT differs. Checks called with no
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
/* dtype == want, ndim == ndim, strides >= 0, shape >= 0, and the addressed
 * byte range inside the cl_mem. Empty tensors address nothing. */
dsa_status dsa__check_tensor(const dsa_tensor *t, const char *op, const char *arg,
                             dsa_dtype want, int ndim);
/* Innermost stride must be 1 (kernels read rows as vectors). */
dsa_status dsa__check_unit_inner(const dsa_tensor *t, const char *op, const char *arg);
dsa_status dsa__check_dim(const dsa_tensor *t, const char *op, const char *arg, int dim,
                          int64_t want);
dsa_status dsa__check_cache(const dsa_paged_cache *c, const char *op, const char *arg,
                            dsa_cache_format want);
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
