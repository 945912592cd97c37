/*
 * dsacl — DeepSeek Sparse Attention operators on any OpenCL device.
 *
 * One context per device, one queue per in-order command queue. Every
 * operator validates its arguments on the host, enqueues its kernels and
 * returns: no host synchronisation, no blocking reads. A failed call enqueues
 * nothing and leaves a message naming the argument in dsa_last_error().
 *
 * The library never prints to stdout, never aborts and never exits.
 */
#ifndef DSACL_DSACL_H
#define DSACL_DSACL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#ifdef __APPLE__
#include <OpenCL/cl.h>
#else
#include <CL/cl.h>
#endif

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version 1.0 promises, for every 1.x release:
 *  - source and binary stability of everything declared DSA_API: names,
 *    arguments, struct layouts, enum values, the documented semantics (and
 *    byte-exact results where documented as such);
 *  - symbol versioning: libdsacl.so.1 exports each 1.0 function in the
 *    version node DSACL_1.0; functions added by a later 1.x get a node of
 *    their own;
 *  - growth without breaks: every operator takes a params struct, and
 *    params and options structs end in reserved bytes (start from their
 *    _default function or zero them); a field added there keeps the 1.0
 *    behaviour at zero. An operator refuses params whose reserved bytes are
 *    not zero (DSA_ERR_INVALID_ARGUMENT, nothing enqueued).
 * Not promised: which kernel variant runs, performance, the DSACL_*
 * environment variables, the on-disk binary cache format, the wording of
 * dsa_last_error(). docs/API.md, "Stability (1.x)", and its conventions. */
#define DSACL_VERSION_MAJOR 1
#define DSACL_VERSION_MINOR 0
#define DSACL_VERSION_PATCH 0
#define DSACL_VERSION_INT(a, b, c) (((a) << 16) | ((b) << 8) | (c))
#define DSACL_VERSION \
  DSACL_VERSION_INT(DSACL_VERSION_MAJOR, DSACL_VERSION_MINOR, DSACL_VERSION_PATCH)

#if defined(_WIN32) && defined(DSACL_BUILDING_DLL)
#define DSA_API __declspec(dllexport)
#elif defined(__GNUC__) && __GNUC__ >= 4
#define DSA_API __attribute__((visibility("default")))
#else
#define DSA_API
#endif

/* --------------------------------------------------------------------------
 * Status codes: one table, the enum and the strings are generated from it.
 * X(NAME, value, "description")
 * ------------------------------------------------------------------------ */
#define DSA_STATUS_MAP(X)                                                        \
  X(OK, 0, "success")                                                            \
  X(ERR_INVALID_ARGUMENT, -1, "invalid argument")                                \
  X(ERR_UNSUPPORTED, -2, "operation or format not supported on this device")    \
  X(ERR_NO_DEVICE, -3, "no matching OpenCL device")                             \
  X(ERR_OUT_OF_MEMORY, -4, "out of host or device memory")                      \
  X(ERR_BUILD, -5, "OpenCL program build failed")                               \
  X(ERR_OPENCL, -6, "an OpenCL call failed")                                    \
  X(ERR_CACHE, -7, "binary cache error")                                        \
  X(ERR_INTERNAL, -8, "internal error")

typedef enum dsa_status {
#define DSA_STATUS_ENUM_(name, val, desc) DSA_##name = (val),
  DSA_STATUS_MAP(DSA_STATUS_ENUM_)
#undef DSA_STATUS_ENUM_
} dsa_status;

/* "DSA_ERR_INVALID_ARGUMENT"; "DSA_UNKNOWN_STATUS" for values not in the table. */
DSA_API const char *dsa_status_name(dsa_status s);
/* "invalid argument" */
DSA_API const char *dsa_status_string(dsa_status s);
/* The calling thread's last failure in words (argument name, OpenCL error,
 * build log). "" when the last call on this thread succeeded. */
DSA_API const char *dsa_last_error(void);
/* The raw cl_int of the calling thread's last failed OpenCL call (CL_SUCCESS if
 * the last failure was not an OpenCL error). */
DSA_API cl_int dsa_last_cl_error(void);

DSA_API unsigned dsa_version(void);           /* DSACL_VERSION of the library */
DSA_API const char *dsa_version_string(void); /* "1.0.0" */

/* --------------------------------------------------------------------------
 * Context: one OpenCL device and the programs built for it.
 * ------------------------------------------------------------------------ */
typedef struct dsa_context dsa_context;
typedef struct dsa_queue dsa_queue;

/* Binary-cache callbacks for servers that own their storage. load returns a
 * malloc'ed blob the library frees (or NULL for a miss); store returns 0 on
 * success. key is a printable hex string. */
typedef void *(*dsa_cache_load_fn)(void *user, const char *key, size_t *size);
typedef int (*dsa_cache_store_fn)(void *user, const char *key, const void *data,
                                  size_t size);

enum dsa_context_flags {
  DSA_CONTEXT_FORCE_PORTABLE = 1u << 0, /* never choose vendor kernel variants
                                           (as disable_caps = DSA_CAP_ALL) */
  DSA_CONTEXT_NO_BINARY_CACHE = 1u << 1 /* same as cache_dir = "off" */
};

/* Device capabilities that kernel variants use. A context enables those its
 * device has, minus the ones disabled by dsa_context_options.disable_caps,
 * DSA_CONTEXT_FORCE_PORTABLE or the environment (DSACL_DISABLE_CAPS, a comma
 * list of the names below or a number; DSACL_FORCE_PORTABLE). The kernels are
 * built for the enabled set, and each operator picks the first variant of its
 * table whose capabilities are enabled and which takes the call's shapes
 * (`dsacl-info --variants` prints the tables). */
#define DSA_CAP_MAP(X)                                                          \
  X(SUBGROUPS, 0, "subgroups", "cl_khr_subgroups or cl_intel_subgroups")        \
  X(INTEL_SUBGROUPS, 1, "intel-subgroups", "cl_intel_subgroups")                \
  X(INTEL_DPAS, 2, "intel-dpas", "Intel sub-group matrix multiply (DPAS)")      \
  X(NV_PTX, 3, "nv-ptx", "NVIDIA inline PTX (mma.sync, shfl.sync)")             \
  X(AMD_BUILTINS, 4, "amd-builtins", "AMD __builtin_amdgcn_* (MFMA, DPP)")      \
  X(FP16, 5, "fp16", "cl_khr_fp16")

enum dsa_cap_bits {
#define DSA_CAP_ENUM_(name, bit, str, desc) DSA_CAP_##name = 1u << (bit),
  DSA_CAP_MAP(DSA_CAP_ENUM_)
#undef DSA_CAP_ENUM_
  DSA_CAP_ALL = (1u << 6) - 1
};
/* "nv-ptx" for DSA_CAP_NV_PTX; NULL for anything but a single known bit. */
DSA_API const char *dsa_cap_name(unsigned cap);

typedef struct dsa_context_options {
  int device_index;        /* -1: default (DSACL_DEVICE, else first GPU, else first device) */
  const char *device_name; /* case-insensitive substring of platform or device name; NULL: any */
  const char *cache_dir;   /* NULL: $DSACL_CACHE_DIR, $XDG_CACHE_HOME/dsacl, ~/.cache/dsacl;
                              "off": no on-disk cache */
  unsigned flags;          /* dsa_context_flags */
  dsa_cache_load_fn cache_load; /* either set: the callbacks replace the directory;  */
  dsa_cache_store_fn cache_store; /* a missing one acts as a miss / a no-op        */
  void *cache_user;
  unsigned disable_caps;   /* dsa_cap_bits the context must not use (0: use all) */
  unsigned char reserved[28];
} dsa_context_options;

DSA_API void dsa_context_options_default(dsa_context_options *o);

/* Creates its own cl_context on the chosen device. o may be NULL. */
DSA_API dsa_status dsa_context_create(dsa_context **out, const dsa_context_options *o);
/* Wraps the caller's context and device; both are retained while the
 * dsa_context lives and released (once) by dsa_context_destroy. */
DSA_API dsa_status dsa_context_create_from_cl(dsa_context **out, cl_context ctx,
                                              cl_device_id dev,
                                              const dsa_context_options *o);
/* NULLs *c. Safe on NULL. Reference counted: queues still alive keep the
 * context (and its cl_context, device and programs) alive, and the context is
 * freed when its last queue is destroyed; those queues stay fully usable.
 * Do not use *c itself after this call (e.g. to create another queue). */
DSA_API void dsa_context_destroy(dsa_context **c);

DSA_API cl_context dsa_context_cl_context(const dsa_context *c);
DSA_API cl_device_id dsa_context_cl_device(const dsa_context *c);
/* Device description, build options and cache directory in words. */
DSA_API const char *dsa_context_device_name(const dsa_context *c);
DSA_API const char *dsa_context_build_options(const dsa_context *c);
DSA_API const char *dsa_context_cache_dir(const dsa_context *c); /* "" when off */
/* The dsa_cap_bits this context's kernels are built for and may use. */
DSA_API unsigned dsa_context_caps(const dsa_context *c);
/* The memory kinds (dsa_mem_kind, below) this context's device takes in
 * tensors and caches, as a mask of bits 1u << kind: DSA_MEM_BUFFER always,
 * DSA_MEM_USM when the device lists cl_intel_unified_shared_memory,
 * DSA_MEM_SVM on an OpenCL >= 2.0 device with SVM capabilities. 0 for NULL. */
DSA_API unsigned dsa_context_mem_kinds(const dsa_context *c);
/* The matrix-tile back-end of this context's kernels (cl/dsa_tile.h):
 * "portable", "nv-mma", "intel-dpas16", "intel-dpas8", "amd-mfma" or
 * "amd-wmma"; "(emulated)" follows a vendor back-end run as an emulation
 * (DSACL_MMA on a device without it). Owned by the context. */
DSA_API const char *dsa_context_matrix_backend(const dsa_context *c);
/* Builds (or loads from the binary cache) every program now, instead of at
 * first use. */
DSA_API dsa_status dsa_context_warmup(dsa_context *c);

/* --------------------------------------------------------------------------
 * Queue: one in-order cl_command_queue, its kernel objects and fault word.
 * ------------------------------------------------------------------------ */
enum dsa_queue_flags {
  DSA_QUEUE_PROFILING = 1u << 0 /* create the cl queue with profiling enabled */
};

DSA_API dsa_status dsa_queue_create(dsa_queue **out, dsa_context *c, unsigned flags);
/* Wraps the caller's queue (retained while the dsa_queue lives). */
DSA_API dsa_status dsa_queue_create_from_cl(dsa_queue **out, dsa_context *c,
                                            cl_command_queue cq);
DSA_API void dsa_queue_destroy(dsa_queue **queue);
DSA_API cl_command_queue dsa_queue_cl(const dsa_queue *queue);
/* The kernel variant of this queue's latest operator call that enqueued
 * work, "operator: variant" (the tile variants add their back-end); "" before
 * any. Owned by the queue, valid until its next call. */
DSA_API const char *dsa_queue_last_variant(const dsa_queue *queue);

/* Device fault word: bits set by kernels on data-dependent bad input.
 * X(NAME, bit, "meaning"). The kernels get these values as build options
 * (-DDSA_FAULT_<NAME>=...), generated from this table: no second copy. */
#define DSA_FAULT_MAP(X)                                                   \
  X(SLOT_RANGE, 0, "slot or block id >= cache capacity")                   \
  X(POSITION_RANGE, 1, "position outside the cos/sin table")               \
  X(INDEX_RANGE, 2, "index outside its table or tensor")                   \
  X(LENGTH_RANGE, 3, "a length larger than its tensor allows")

enum dsa_fault_bits {
#define DSA_FAULT_ENUM_(name, bit, desc) DSA_FAULT_##name = 1u << (bit),
  DSA_FAULT_MAP(DSA_FAULT_ENUM_)
#undef DSA_FAULT_ENUM_
};
/* Blocking: waits for the queue's work, reads the fault word, clears it. */
DSA_API dsa_status dsa_queue_faults(dsa_queue *queue, uint32_t *bits);

/* --------------------------------------------------------------------------
 * Tensors and paged caches: views into the caller's cl_mem (or USM / SVM
 * pointer), never owned.
 * ------------------------------------------------------------------------ */
/* X(NAME, value, "name", bytes per element)
 *   BF16    carried as uint16 bit patterns
 *   E4M3    OCP e4m3fn bytes
 *   E2M1X2  two e2m1 nibbles per byte, even element in the low nibble
 *   UE8M0   power-of-two scale bytes, 2^(b-127) */
#define DSA_DTYPE_MAP(X) \
  X(U8, 0, "u8", 1)      \
  X(I32, 1, "i32", 4)    \
  X(I64, 2, "i64", 8)    \
  X(BF16, 3, "bf16", 2)  \
  X(F32, 4, "f32", 4)    \
  X(E4M3, 5, "e4m3", 1)  \
  X(E2M1X2, 6, "e2m1x2", 1) \
  X(UE8M0, 7, "ue8m0", 1)

typedef enum dsa_dtype {
#define DSA_DTYPE_ENUM_(name, val, str, size) DSA_##name = (val),
  DSA_DTYPE_MAP(DSA_DTYPE_ENUM_)
#undef DSA_DTYPE_ENUM_
} dsa_dtype;

DSA_API const char *dsa_dtype_name(dsa_dtype t);
DSA_API size_t dsa_dtype_size(dsa_dtype t);

/* Where a tensor's or cache's bytes live. Zero (a zero-initialised struct)
 * is a cl_mem buffer. With a pointer kind, mem must be NULL and offset counts
 * bytes from ptr; ptr_bytes is the number of bytes usable from ptr:
 *   DSA_MEM_BUFFER  mem + offset (ptr NULL, ptr_bytes 0)
 *   DSA_MEM_USM     a pointer into an Intel USM allocation (host, device or
 *                   shared) of the queue's cl_context
 *                   (cl_intel_unified_shared_memory); ptr_bytes 0: up to the
 *                   end of its allocation (queried), else at most that
 *   DSA_MEM_SVM     a pointer into an OpenCL 2.0 SVM allocation (clSVMAlloc)
 *                   of the queue's cl_context; ptr_bytes required (OpenCL
 *                   has no query for an SVM allocation's size)
 * dsa_context_mem_kinds tells which kinds a device takes. */
typedef enum dsa_mem_kind {
  DSA_MEM_BUFFER = 0,
  DSA_MEM_USM = 1,
  DSA_MEM_SVM = 2
} dsa_mem_kind;

#define DSA_MAX_DIMS 4
typedef struct dsa_tensor {
  cl_mem mem;
  size_t offset; /* bytes from the start of mem (or ptr); a multiple of the element size */
  dsa_dtype dtype;
  int ndim;
  int64_t shape[DSA_MAX_DIMS];
  int64_t stride[DSA_MAX_DIMS]; /* in elements */
  dsa_mem_kind kind; /* DSA_MEM_BUFFER: mem; DSA_MEM_USM / DSA_MEM_SVM: ptr */
  void *ptr;         /* pointer kinds only; NULL for DSA_MEM_BUFFER */
  size_t ptr_bytes;  /* bytes usable from ptr (SVM: required; USM: 0 = query) */
} dsa_tensor;

/* A contiguous (row-major) view. */
DSA_API dsa_tensor dsa_tensor_make(cl_mem mem, size_t offset, dsa_dtype dtype, int ndim,
                                   const int64_t *shape);
/* A contiguous view of a USM or SVM pointer: kind, ptr and ptr_bytes = bytes
 * (bytes usable from ptr), offset in bytes from ptr. */
DSA_API dsa_tensor dsa_tensor_make_ptr(dsa_mem_kind kind, void *ptr, size_t bytes, size_t offset,
                                       dsa_dtype dtype, int ndim, const int64_t *shape);

/* X(NAME, value, data bytes per token, scale bytes per token). A block of
 * block_size tokens holds every token's data, then every token's scales.
 *   MLA_FP8        584 B/token: 448 e4m3 + 64 bf16 | 8 scale bytes (§3.1)
 *   INDEXER_FP8    132 B/token: 128 e4m3 | f32 scale (§3.2)
 *   INDEXER_MXFP4   68 B/token: 64 packed e2m1 | 4 ue8m0 (§3.3)
 * Kernels get -DDSA_CACHE_<NAME>_DATA / _SCALE from this table. */
#define DSA_CACHE_FORMAT_MAP(X)    \
  X(MLA_FP8, 1, 576, 8)            \
  X(INDEXER_FP8, 2, 128, 4)        \
  X(INDEXER_MXFP4, 3, 64, 4)

typedef enum dsa_cache_format {
#define DSA_CACHE_FORMAT_ENUM_(name, val, data, scale) DSA_CACHE_##name = (val),
  DSA_CACHE_FORMAT_MAP(DSA_CACHE_FORMAT_ENUM_)
#undef DSA_CACHE_FORMAT_ENUM_
} dsa_cache_format;

/* Bytes one token occupies in a page (its data plus its scales). */
DSA_API size_t dsa_cache_token_bytes(dsa_cache_format f);

typedef struct dsa_paged_cache {
  cl_mem mem;
  size_t offset;        /* bytes to block 0 (from mem or ptr) */
  int64_t num_blocks;
  int32_t block_size;   /* tokens per block */
  int64_t block_stride; /* bytes between blocks, >= block_size * token bytes */
  dsa_cache_format format;
  dsa_mem_kind kind;    /* as in dsa_tensor: mem (0) or ptr */
  void *ptr;
  size_t ptr_bytes;
} dsa_paged_cache;

typedef struct dsa_events {
  cl_uint num_wait;    /* events the operator waits for */
  const cl_event *wait;
  cl_event *done;      /* non-NULL: receives an event the caller releases */
} dsa_events;

/* --------------------------------------------------------------------------
 * Foreign memory (cl_khr_external_memory): an allocation exported by another
 * API (CUDA, Vulkan, Level Zero, ...) as a file descriptor becomes a cl_mem
 * of the context without a copy, usable in any tensor or cache. Between its
 * uses by the other API, enqueue dsa_external_acquire before dsacl's
 * operators and dsa_external_release after them (the extension requires
 * it; the other API orders itself with its own synchronization, e.g. a
 * semaphore or a finish). docs/API.md, "Foreign memory".
 * ------------------------------------------------------------------------ */
typedef enum dsa_external_handle {
  DSA_EXTERNAL_OPAQUE_FD = 1, /* cl_khr_external_memory_opaque_fd (CUDA cuMemExport..., Vulkan) */
  DSA_EXTERNAL_DMA_BUF = 2    /* cl_khr_external_memory_dma_buf */
} dsa_external_handle;
/* Whether the context's device imports this handle type. */
DSA_API int dsa_external_supported(const dsa_context *c, dsa_external_handle type);
/* Imports bytes of the allocation behind fd as *out (the caller releases it
 * with clReleaseMemObject; fd stays the caller's). DSA_ERR_UNSUPPORTED, with
 * the reason, where the device or the ICD loader cannot. */
DSA_API dsa_status dsa_external_import(dsa_context *c, dsa_external_handle type, int fd,
                                       size_t bytes, cl_mem *out);
/* clEnqueueAcquire/ReleaseExternalMemObjectsKHR on queue for n imported
 * buffers, with the usual wait list and completion event. */
DSA_API dsa_status dsa_external_acquire(dsa_queue *queue, cl_uint n, const cl_mem *mems,
                                        const dsa_events *ev);
DSA_API dsa_status dsa_external_release(dsa_queue *queue, cl_uint n, const cl_mem *mems,
                                        const dsa_events *ev);

/* --------------------------------------------------------------------------
 * MLA KV-cache operators (DSA_CACHE_MLA_FP8).
 * ------------------------------------------------------------------------ */

/* No field yet: room to grow within 1.x (a field's zero keeps today's
 * behaviour). Non-zero reserved bytes: DSA_ERR_INVALID_ARGUMENT. */
typedef struct dsa_mla_cache_insert_params {
  unsigned char reserved[32];
} dsa_mla_cache_insert_params;

/* reserved zeroed. */
DSA_API void dsa_mla_cache_insert_params_default(dsa_mla_cache_insert_params *p);

/* Quantize k [N, 512] bf16 (row stride free, unit inner stride) and write
 * token n to slot slot_mapping[n] (i64 [N]): block = slot / block_size.
 * slot < 0: skipped. slot >= capacity: skipped + DSA_FAULT_SLOT_RANGE.
 * p may be NULL (defaults). */
DSA_API dsa_status dsa_mla_cache_insert(dsa_queue *queue, const dsa_tensor *k,
                                        const dsa_tensor *slot_mapping,
                                        const dsa_paged_cache *cache,
                                        const dsa_mla_cache_insert_params *p,
                                        const dsa_events *ev);

/* No field yet (as dsa_mla_cache_insert_params). */
typedef struct dsa_mla_gather_slots_params {
  unsigned char reserved[32];
} dsa_mla_gather_slots_params;

/* reserved zeroed. */
DSA_API void dsa_mla_gather_slots_params_default(dsa_mla_gather_slots_params *p);

/* out[i] = dequant(cache slot indices[i]) as bf16 [S, 512]; indices i32 [S].
 * index < 0: zeros. index >= capacity: zeros + DSA_FAULT_SLOT_RANGE.
 * Dequantization is exact: bf16(e4m3 * 2^(scale - 127)); scale byte 0 counts
 * as 0 and 255 as +inf (as vLLM's exp2 does); a NaN result is 0x7FC0. The 64
 * RoPE dims are copied bit for bit. p may be NULL (defaults). */
DSA_API dsa_status dsa_mla_gather_slots(dsa_queue *queue, const dsa_tensor *indices,
                                        const dsa_paged_cache *cache, const dsa_tensor *out,
                                        const dsa_mla_gather_slots_params *p,
                                        const dsa_events *ev);

typedef struct dsa_mla_gather_paged_params {
  int64_t offset; /* first row of out written for each request, 0 <= offset <= maxT; default 0 */
  unsigned char reserved[24];
} dsa_mla_gather_paged_params;

/* offset = 0, reserved zeroed. */
DSA_API void dsa_mla_gather_paged_params_default(dsa_mla_gather_paged_params *p);

/* Prefill gather through block tables (§8.2). For request r:
 * g = gather_lens ? gather_lens[r] : seq_lens[r]; start = seq_lens[r] - g;
 * out[r, offset + i] = dequant(block_table[r][(start+i)/bs], (start+i)%bs),
 * i in [0, g), offset = p->offset. Other rows of out are untouched. seq_lens, gather_lens i32 [R],
 * block_table i32 [R, W], out bf16 [R, maxT, 512]; 0 <= offset <= maxT;
 * R, maxT < 2^31 and R x maxT <= 2^40.
 * gather_lens may be NULL (g = seq_len); p may be NULL (defaults).
 * Data-dependent violations set fault bits:
 *   seq_len < 0, g < 0 or g > seq_len: request skipped, DSA_FAULT_LENGTH_RANGE;
 *   offset + g > maxT: rows past maxT skipped, DSA_FAULT_LENGTH_RANGE;
 *   block index >= W: row skipped, DSA_FAULT_INDEX_RANGE;
 *   block id >= num_blocks: zeros, DSA_FAULT_SLOT_RANGE; block id < 0: zeros. */
DSA_API dsa_status dsa_mla_gather_paged(dsa_queue *queue, const dsa_tensor *seq_lens,
                                        const dsa_tensor *gather_lens,
                                        const dsa_tensor *block_table,
                                        const dsa_paged_cache *cache, const dsa_tensor *out,
                                        const dsa_mla_gather_paged_params *p,
                                        const dsa_events *ev);

#ifdef __cplusplus
}
#endif

/* Operator families, one header each. */
#include "dsacl/index_helpers.h"
#include "dsacl/indexer_logits.h"
#include "dsacl/indexer_quant.h"
#include "dsacl/mla_qnorm.h"
#include "dsacl/sparse_mla.h"
#include "dsacl/topk.h"
#include "dsacl/output_quant.h"
#include "dsacl/mtp_norm.h"
#include "dsacl/compressor.h"

#endif /* DSACL_DSACL_H */
