/* libFuzzer target: argument validation of the operators. The input picks an
 * operator and every field of its tensor and cache arguments (offsets,
 * shapes, strides, dtype, rank, which buffer: small, large, NULL, or one of
 * another cl_context). Invariant: an accepted call (DSA_OK) has every
 * non-empty tensor and cache inside its buffer (recomputed here in 128-bit
 * arithmetic) and in the queue's context. Accepted work waits on a user
 * event; it runs (event completed) when every tensor is small, else it stays
 * pending for the rest of the process (a huge zero-stride grid would run for
 * hours) and, the queue being in order, the fuzzer moves to a fresh queue.
 * Failing the user event instead crashes PoCL 3.x
 * ("PTHREAD ERROR in pocl_update_event_failed"). PoCL context created once.
 *
 * Memory kinds: a tensor or cache may instead point into an SVM or a USM
 * allocation (where the device takes them; a made-up pointer otherwise),
 * into a USM allocation of the other context, or carry both mem and ptr, no
 * ptr, or an unknown kind. An accepted pointer must lie, with its extent,
 * inside an allocation of the queue's context of its kind. SVM has no size
 * query, so the fuzzer's SVM ptr_bytes never exceeds the allocation (the
 * caller's promise); USM ptr_bytes are arbitrary (the library queries). */
#undef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 200
#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dsacl/dsacl.h>

static dsa_context *ctx, *ctx2;
static dsa_queue *q;
static cl_mem bufs[4]; /* small, large, NULL, foreign */
static size_t sizes[4] = {4096, 1 << 20, 0, 1 << 20};
/* Pointer allocations: SVM, USM (shared) and USM of ctx2; NULL where the
 * device lacks the kind. */
enum { PTR_SIZE = 1 << 20 };
static char *svm_base, *usm_base, *usm_foreign;
static char fake[64]; /* stands for a pointer of a kind the device lacks */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  dsa_context_options o;
  dsa_context_options_default(&o);
  o.cache_dir = "off";
  if (dsa_context_create(&ctx, &o) || dsa_context_create(&ctx2, &o) ||
      dsa_queue_create(&q, ctx, 0)) {
    fprintf(stderr, "fuzz_validation: no OpenCL device: %s\n", dsa_last_error());
    abort();
  }
  cl_int e;
  bufs[0] = clCreateBuffer(dsa_context_cl_context(ctx), CL_MEM_READ_WRITE, sizes[0], NULL, &e);
  bufs[1] = clCreateBuffer(dsa_context_cl_context(ctx), CL_MEM_READ_WRITE, sizes[1], NULL, &e);
  bufs[3] = clCreateBuffer(dsa_context_cl_context(ctx2), CL_MEM_READ_WRITE, sizes[3], NULL, &e);
  if (!bufs[0] || !bufs[1] || !bufs[3]) abort();
  const unsigned mk = dsa_context_mem_kinds(ctx);
  if (mk & (1u << DSA_MEM_SVM)) {
    svm_base = clSVMAlloc(dsa_context_cl_context(ctx), CL_MEM_READ_WRITE, PTR_SIZE, 0);
    if (!svm_base) abort();
  }
  if (mk & (1u << DSA_MEM_USM)) {
    cl_platform_id plat;
    clGetDeviceInfo(dsa_context_cl_device(ctx), CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
    clSharedMemAllocINTEL_fn alloc = (clSharedMemAllocINTEL_fn)
        clGetExtensionFunctionAddressForPlatform(plat, "clSharedMemAllocINTEL");
    if (!alloc) abort();
    usm_base =
        alloc(dsa_context_cl_context(ctx), dsa_context_cl_device(ctx), NULL, PTR_SIZE, 0, &e);
    usm_foreign =
        alloc(dsa_context_cl_context(ctx2), dsa_context_cl_device(ctx2), NULL, PTR_SIZE, 0, &e);
    if (!usm_base || !usm_foreign) abort();
  }
  return 0;
}

typedef struct rd {
  const uint8_t *p;
  size_t n;
} rd;

static uint64_t take(rd *r, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) {
    v = v << 8 | (r->n ? *r->p : 0);
    if (r->n) r->p++, r->n--;
  }
  return v;
}

/* Values that matter: small, near a power of two, near the 2^40 cap, huge. */
static int64_t pick_i64(rd *r) {
  uint8_t k = (uint8_t)take(r, 1);
  switch (k >> 5) {
    case 0: return (int64_t)(k & 31);
    case 1: return (int64_t)take(r, 1) + 1;
    case 2: return (int64_t)take(r, 2);
    case 3: return ((int64_t)1 << (k & 31) << ((k & 32) ? 31 : 0)) + (int8_t)take(r, 1);
    case 4: return ((int64_t)1 << 40) - (int64_t)(k & 3);
    case 5: return -(int64_t)(k & 31) - 1;
    case 6: return (int64_t)take(r, 8);
    default: return 512 + (k & 15);
  }
}

static size_t pick_off(rd *r) {
  uint8_t k = (uint8_t)take(r, 1);
  switch (k >> 6) {
    case 0: return (size_t)(k & 63) * 2;
    case 1: return (size_t)take(r, 2);
    case 2: return SIZE_MAX - (size_t)take(r, 2);
    default: return (size_t)take(r, 8);
  }
}

/* Storage mode m (bits 2..4 of a tensor's or cache's first byte): 0..3 the
 * cl_mem bufs[k & 3] as before; 4 SVM; 5 USM (own or other context); 6 a
 * pointer kind with mem also set, or with ptr NULL; 7 an unknown kind. */
static void storage(rd *r, uint8_t k, dsa_mem_kind *kind, cl_mem *mem, void **ptr,
                    size_t *ptr_bytes) {
  const int m = (k >> 2) & 7;
  *mem = bufs[k & 3];
  if (m < 4) return;
  *mem = NULL;
  const size_t delta = (size_t)take(r, 2) * 16;
  switch (m) {
    case 4: {
      *kind = DSA_MEM_SVM;
      *ptr = svm_base ? svm_base + delta : fake;
      const size_t left = svm_base ? PTR_SIZE - delta : sizeof fake;
      *ptr_bytes = (k & 0x20) ? left : pick_off(r) % (left + 1);
      break;
    }
    case 5: {
      *kind = DSA_MEM_USM;
      char *b = (k & 0x20) && usm_foreign ? usm_foreign : usm_base;
      *ptr = b ? b + delta : fake;
      *ptr_bytes = (k & 0x01) ? 0 : pick_off(r);
      break;
    }
    case 6:
      *kind = (k & 0x20) ? DSA_MEM_USM : DSA_MEM_SVM;
      *ptr = (k & 0x01) ? NULL : (*kind == DSA_MEM_SVM ? svm_base : usm_base);
      *mem = (k & 0x01) ? NULL : bufs[1];
      *ptr_bytes = PTR_SIZE;
      break;
    default:
      *kind = (dsa_mem_kind)(int8_t)take(r, 1);
      *ptr = svm_base ? svm_base : usm_base;
      *ptr_bytes = (k & 0x20) ? 0 : 4096;
      break;
  }
}

static void tensor(rd *r, dsa_tensor *t, dsa_dtype dt, int ndim) {
  memset(t, 0, sizeof *t);
  uint8_t k = (uint8_t)take(r, 1);
  storage(r, k, &t->kind, &t->mem, &t->ptr, &t->ptr_bytes);
  t->dtype = (k & 0x40) ? (dsa_dtype)(take(r, 1) % 10) : dt;
  t->ndim = (k & 0x80) ? (int)(take(r, 1) % 6) - 1 : ndim;
  t->offset = pick_off(r);
  for (int i = 0; i < DSA_MAX_DIMS; i++) {
    t->shape[i] = pick_i64(r);
    t->stride[i] = pick_i64(r);
  }
}

static void cache(rd *r, dsa_paged_cache *c, dsa_cache_format f) {
  memset(c, 0, sizeof *c);
  uint8_t k = (uint8_t)take(r, 1);
  storage(r, k, &c->kind, &c->mem, &c->ptr, &c->ptr_bytes);
  c->offset = pick_off(r);
  c->num_blocks = pick_i64(r);
  c->block_size = (int32_t)pick_i64(r);
  c->block_stride = pick_i64(r);
  c->format = (k & 0x80) ? (dsa_cache_format)(take(r, 1) % 4) : f;
}

static int buf_index(cl_mem m) {
  for (int i = 0; i < 4; i++)
    if (bufs[i] == m) return i;
  return -1;
}

/* An accepted view ending at byte `end` from mem / ptr lies inside an
 * allocation of the queue's context of its kind. */
static int storage_ok(dsa_mem_kind kind, cl_mem mem, const void *ptr, size_t ptr_bytes,
                      __int128 end) {
  if (kind == DSA_MEM_BUFFER) {
    int b = buf_index(mem);
    return !ptr && !ptr_bytes && b >= 0 && b != 2 && b != 3 && end <= (__int128)sizes[b];
  }
  /* USM: either allocation (Intel's SVM allocations are USM ones too). */
  const char *p = ptr, *base = NULL;
  if (svm_base && p >= svm_base && p < svm_base + PTR_SIZE) base = svm_base;
  if (kind == DSA_MEM_USM && usm_base && p >= usm_base && p < usm_base + PTR_SIZE) base = usm_base;
  if (mem || !base || (kind != DSA_MEM_SVM && kind != DSA_MEM_USM)) return 0;
  if (kind == DSA_MEM_SVM && end > (__int128)ptr_bytes) return 0;
  return end <= (__int128)(base + PTR_SIZE - p);
}

/* An accepted tensor must lie inside its own-context buffer. */
static __int128 work; /* largest element count of an accepted call's tensors */
static long pending;   /* accepted calls left waiting forever */
static dsa_queue *stuck[4096]; /* their queues, kept reachable */

static void check_tensor(const dsa_tensor *t, const char *what) {
  if (!t) return;
  __int128 n = 1;
  for (int i = 0; i < t->ndim && i < DSA_MAX_DIMS; i++) n *= t->shape[i] > 0 ? t->shape[i] : 0;
  if (n > work) work = n;
  if (t->ndim < 0 || t->ndim > DSA_MAX_DIMS) abort();
  __int128 last = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] == 0) return;
    if (t->shape[i] < 0 || t->stride[i] < 0) {
      fprintf(stderr, "accepted %s with a negative shape or stride\n", what);
      abort();
    }
    last += (__int128)(t->shape[i] - 1) * t->stride[i];
  }
  size_t e = dsa_dtype_size(t->dtype);
  __int128 end = (__int128)t->offset + (last + 1) * (__int128)e;
  if (!storage_ok(t->kind, t->mem, t->ptr, t->ptr_bytes, end)) {
    fprintf(stderr, "accepted %s: kind %d, buffer %d, ptr %p (%zu bytes), end %.0f\n", what,
            (int)t->kind, buf_index(t->mem), t->ptr, t->ptr_bytes, (double)end);
    abort();
  }
}

static void check_cache(const dsa_paged_cache *c) {
  if (c->num_blocks <= 0) return;
  __int128 n = (__int128)c->num_blocks * c->block_size;
  if (n > work) work = n;
  __int128 end = (__int128)c->offset + (__int128)(c->num_blocks - 1) * c->block_stride +
                 (__int128)c->block_size * dsa_cache_token_bytes(c->format);
  if (!storage_ok(c->kind, c->mem, c->ptr, c->ptr_bytes, end) || c->block_size <= 0) {
    fprintf(stderr, "accepted cache: kind %d, buffer %d, ptr %p (%zu bytes), end %.0f\n",
            (int)c->kind, buf_index(c->mem), c->ptr, c->ptr_bytes, (double)end);
    abort();
  }
}

/* The other operators, by signature: the dtype and rank of each tensor
 * argument in call order, and the format of each paged cache. The tensors
 * and caches come from the input like the ones above; with the operator
 * byte's top bit set, a 16-bit mask from the input passes some of them as
 * NULL pointers. */
#define I32_ DSA_I32
#define I64_ DSA_I64
#define U8_ DSA_U8
#define F32_ DSA_F32
#define BF_ DSA_BF16
#define E4_ DSA_E4M3
#define E2_ DSA_E2M1X2
#define UE_ DSA_UE8M0
enum { SIG_MAXT = 12 };
typedef struct sig {
  int nt, nc;
  dsa_dtype dt[SIG_MAXT];
  signed char nd[SIG_MAXT];
  dsa_cache_format cf[2];
} sig;
static const sig sigs[] = {
    /* 0 dsa_mla_gather_paged */
    {4, 1, {I32_, I32_, I32_, BF_}, {1, 1, 2, 3}, {DSA_CACHE_MLA_FP8}},
    /* 1 dsa_index_compressed_slot_mapping */ {4, 0, {I32_, I32_, I32_, I64_}, {1, 1, 2, 1}, {0}},
    /* 2 dsa_index_swa */ {6, 0, {I64_, I32_, U8_, I32_, I32_, I32_}, {1, 1, 1, 2, 2, 1}, {0}},
    /* 3 dsa_index_global_topk */
    {6, 0, {I32_, I32_, I32_, U8_, I32_, I32_}, {2, 1, 2, 1, 2, 1}, {0}},
    /* 4 dsa_index_c128_topk */
    {6, 0, {I64_, I32_, I32_, U8_, I32_, I32_}, {1, 1, 2, 1, 2, 1}, {0}},
    /* 5 dsa_index_combine_topk_swa */
    {6, 0, {I32_, I32_, I32_, I32_, I32_, I32_}, {2, 1, 1, 1, 2, 1}, {0}},
    /* 6 dsa_index_mixed_sparse */
    {12, 0, {I32_, I32_, I32_, U8_, I32_, I32_, I32_, I32_, I32_, I32_, I32_, I32_},
     {2, 2, 1, 1, 2, 1, 1, 1, 2, 2, 2, 1}, {0}},
    /* 7 dsa_indexer_logits */
    {7, 0, {E4_, E4_, F32_, F32_, I32_, I32_, F32_}, {3, 2, 1, 2, 1, 1, 2}, {0}},
    /* 8 dsa_indexer_logits */
    {8, 0, {E2_, UE_, E2_, UE_, F32_, I32_, I32_, F32_}, {3, 3, 2, 2, 2, 1, 1, 2}, {0}},
    /* 9 dsa_indexer_paged_logits */
    {5, 1, {E4_, F32_, I32_, I32_, F32_}, {4, 2, 1, 2, 2}, {DSA_CACHE_INDEXER_FP8}},
    /* 10 dsa_indexer_paged_logits */
    {6, 1, {E2_, UE_, F32_, I32_, I32_, F32_}, {4, 4, 2, 1, 2, 2}, {DSA_CACHE_INDEXER_MXFP4}},
    /* 11 dsa_indexer_q_quant, MXFP4 */
    {7, 0, {I64_, BF_, F32_, F32_, E2_, UE_, F32_}, {1, 3, 2, 2, 3, 3, 2}, {0}},
    /* 12 dsa_indexer_k_gather */
    {4, 1, {I32_, I32_, E4_, F32_}, {2, 1, 2, 1}, {DSA_CACHE_INDEXER_FP8}},
    /* 13 dsa_indexer_k_insert */ {2, 1, {BF_, I64_}, {2, 1}, {DSA_CACHE_INDEXER_MXFP4}},
    /* 14 dsa_sparse_attn_bf16 with lens, sink, lse */
    {7, 0, {BF_, BF_, I32_, I32_, F32_, BF_, F32_}, {3, 2, 2, 1, 1, 3, 2}, {0}},
    /* 15 dsa_sparse_mla_decode */
    {8, 2, {BF_, I32_, I32_, I32_, I32_, F32_, BF_, F32_}, {3, 2, 1, 2, 1, 1, 3, 2},
     {DSA_CACHE_MLA_FP8, DSA_CACHE_MLA_FP8}},
    /* 16 dsa_topk_prefill */ {4, 0, {F32_, I32_, I32_, I32_}, {2, 1, 1, 2}, {0}},
    /* 17 dsa_mla_qnorm_rope_kv_insert with q_out */
    {6, 1, {BF_, BF_, BF_, I64_, F32_, I64_}, {3, 3, 2, 1, 2, 1}, {DSA_CACHE_MLA_FP8}},
    /* 18 dsa_output_inv_rope_fp8_quant (f32 scales; i32 when the dtype byte says so) */
    {5, 0, {BF_, I64_, F32_, E4_, F32_}, {3, 1, 2, 3, 3}, {0}},
    /* 19 dsa_mtp_input_rmsnorm */
    {7, 0, {BF_, I64_, BF_, F32_, F32_, BF_, BF_}, {2, 1, 3, 1, 1, 2, 3}, {0}},
    /* 20 dsa_mtp_shared_head_rmsnorm */ {3, 0, {BF_, F32_, BF_}, {2, 1, 2}, {0}},
    /* 21 dsa_compressor_save_states */
    {6, 0, {F32_, F32_, F32_, I64_, I64_, F32_}, {2, 2, 2, 1, 1, 3}, {0}},
    /* 22 dsa_compressor_compress_insert */
    {8, 1, {F32_, I32_, I32_, I64_, I64_, F32_, F32_, I64_}, {3, 2, 1, 1, 1, 1, 2, 1},
     {DSA_CACHE_MLA_FP8}},
};
enum { NSIGS = (int)(sizeof sigs / sizeof sigs[0]) };

/* An argument the call ignores (an absent index set's) is NULLed in t / c,
 * so that the caller checks only what the operator validated. */
static dsa_status sig_call(int i, const dsa_tensor **t, const dsa_paged_cache **c, rd *r,
                           const dsa_events *ev) {
  /* Parameters, read in a fixed order (initializer lists are unsequenced). */
  const int32_t a = (int32_t)pick_i64(r), b = (int32_t)pick_i64(r), k = (int32_t)pick_i64(r);
  const int32_t d = (int32_t)pick_i64(r), e = (int32_t)pick_i64(r);
  const int64_t m = pick_i64(r), n = pick_i64(r);
  switch (i) {
    case 0: return dsa_mla_gather_paged(q, t[0], t[1], t[2], c[0], t[3], &(dsa_mla_gather_paged_params){.offset = m}, ev);
    case 1: {
      dsa_index_compressed_slot_mapping_params p = {a, b, {0}};
      return dsa_index_compressed_slot_mapping(q, t[0], t[1], t[2], t[3], &p, ev);
    }
    case 2: {
      dsa_index_swa_params p = {a, b, {0}};
      return dsa_index_swa(q, t[0], t[1], t[2], t[3], t[4], t[5], &p, ev);
    }
    case 3: {
      dsa_index_global_topk_params p = {a, {0}};
      return dsa_index_global_topk(q, t[0], t[1], t[2], t[3], t[4], t[5], &p, ev);
    }
    case 4: {
      dsa_index_c128_topk_params p = {a, b, {0}};
      return dsa_index_c128_topk(q, t[0], t[1], t[2], t[3], t[4], t[5], &p, ev);
    }
    case 5: {
      dsa_index_combine_topk_swa_params p = {a, b, k, m, n, {0}};
      return dsa_index_combine_topk_swa(q, t[0], t[1], t[2], t[3], t[4], t[5], &p, ev);
    }
    case 6: {
      dsa_index_mixed_sparse_params p = {a, b, k, d, e, (int32_t)(n & 1), {0}};
      dsa_index_mixed_sparse_inputs in = {t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9]};
      return dsa_index_mixed_sparse(q, &in, t[10], t[11], &p, ev);
    }
    case 7: return dsa_indexer_logits(q, t[0], NULL, t[1], t[2], t[3], t[4], t[5], t[6], NULL, ev);
    case 8:
      return dsa_indexer_logits(q, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], NULL, ev);
    case 9: return dsa_indexer_paged_logits(q, t[0], NULL, t[1], t[2], t[3], c[0], t[4], NULL, ev);
    case 10:
      return dsa_indexer_paged_logits(q, t[0], t[1], t[2], t[3], t[4], c[0], t[5], NULL, ev);
    case 11: return dsa_indexer_q_quant(q, t[0], t[1], t[2], t[3], t[4], t[5], t[6], NULL, ev);
    case 12: return dsa_indexer_k_gather(q, t[1], t[0], c[0], t[2], t[3], NULL, ev);
    case 13: return dsa_indexer_k_insert(q, t[0], t[1], c[0], &(dsa_indexer_k_insert_params){.e2m1 = (dsa_e2m1_mode)(a & 1)}, ev);
    case 14: return dsa_sparse_attn_bf16(q, t[0], t[1], t[2], t[3], t[4], t[5], t[6], NULL, ev);
    case 15: {
      dsa_sparse_index_set ms = {c[0], t[1], t[2]}, es = {c[1], t[3], t[4]};
      if (a & 1) t[1] = t[2] = NULL, c[0] = NULL;
      if (a & 2) t[3] = t[4] = NULL, c[1] = NULL;
      return dsa_sparse_mla_decode(q, t[0], (a & 1) ? NULL : &ms, (a & 2) ? NULL : &es, t[5], t[6],
                                   t[7], NULL, ev);
    }
    case 16: {
      dsa_topk_params p = {k, 0, {0}};
      return dsa_topk_prefill(q, t[0], t[1], t[2], t[3], &p, ev);
    }
    case 17:
      return dsa_mla_qnorm_rope_kv_insert(q, t[0], t[2], t[3], t[4], t[5], c[0], t[1], NULL, ev);
    case 18: return dsa_output_inv_rope_fp8_quant(q, t[0], t[1], t[2], t[3], t[4], NULL, ev);
    case 19:
      return dsa_mtp_input_rmsnorm(q, t[0], t[1], t[2], t[3], t[4], t[5], t[6], NULL, ev);
    case 20: return dsa_mtp_shared_head_rmsnorm(q, t[0], t[1], t[2], NULL, ev);
    case 21: {
      dsa_compressor_params p = {a, 1e-6f, {0}};
      return dsa_compressor_save_states(q, t[0], t[1], t[2], t[3], t[4], t[5], &p, ev);
    }
    default: {
      dsa_compressor_params p = {a, 1e-6f, {0}};
      return dsa_compressor_compress_insert(q, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], c[0],
                                            &p, ev);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rd r = {data, size};
  cl_int e;
  cl_event ue = clCreateUserEvent(dsa_context_cl_context(ctx), &e);
  if (!ue) abort();
  dsa_events ev = {1, &ue, NULL};
  dsa_tensor a, b, c, d, f;
  dsa_paged_cache pc;
  dsa_status s = DSA_OK;
  work = 0;
  const uint8_t opb = (uint8_t)take(&r, 1);
  int op = (int)((opb & 0x7f) % (6 + NSIGS));
  switch (op) {
    case 0:
      cache(&r, &pc, DSA_CACHE_MLA_FP8), tensor(&r, &a, DSA_I32, 1), tensor(&r, &b, DSA_BF16, 2);
      s = dsa_mla_gather_slots(q, &a, &pc, &b, NULL, &ev);
      if (!s) check_cache(&pc), check_tensor(&a, "indices"), check_tensor(&b, "out");
      break;
    case 1:
      tensor(&r, &a, DSA_BF16, 2), tensor(&r, &b, DSA_I64, 1), cache(&r, &pc, DSA_CACHE_MLA_FP8);
      s = dsa_mla_cache_insert(q, &a, &b, &pc, NULL, &ev);
      if (!s) check_tensor(&a, "k"), check_tensor(&b, "slots"), check_cache(&pc);
      break;
    case 2:
      tensor(&r, &a, DSA_BF16, 3), tensor(&r, &b, DSA_BF16, 2), tensor(&r, &c, DSA_I32, 2);
      tensor(&r, &d, DSA_BF16, 3);
      s = dsa_sparse_attn_bf16(q, &a, &b, &c, NULL, NULL, &d, NULL, NULL, &ev);
      if (!s)
        check_tensor(&a, "query"), check_tensor(&b, "kv"), check_tensor(&c, "indices"),
            check_tensor(&d, "out");
      break;
    case 3: {
      dsa_topk_params p;
      memset(&p, 0, sizeof p);
      p.k = (int32_t)pick_i64(&r), p.next_n = (int32_t)pick_i64(&r);
      tensor(&r, &a, DSA_F32, 2), tensor(&r, &b, DSA_I32, 1), tensor(&r, &c, DSA_I32, 2);
      s = dsa_topk_decode(q, &a, &b, &c, &p, &ev);
      if (!s) check_tensor(&a, "logits"), check_tensor(&b, "lengths"), check_tensor(&c, "indices");
      break;
    }
    case 4:
      tensor(&r, &a, DSA_I64, 1), tensor(&r, &b, DSA_BF16, 3), tensor(&r, &c, DSA_F32, 2);
      tensor(&r, &d, DSA_F32, 2), tensor(&r, &f, DSA_E4M3, 3);
      {
        dsa_tensor w;
        tensor(&r, &w, DSA_F32, 2);
        s = dsa_indexer_q_quant(q, &a, &b, &c, &d, &f, NULL, &w, NULL, &ev);
        if (!s)
          check_tensor(&a, "positions"), check_tensor(&b, "index_q"), check_tensor(&c, "cos_sin"),
              check_tensor(&d, "weights"), check_tensor(&f, "out_q"), check_tensor(&w, "out_w");
      }
      break;
    case 5:
      tensor(&r, &a, DSA_BF16, 3), tensor(&r, &b, DSA_BF16, 2), tensor(&r, &c, DSA_I64, 1);
      tensor(&r, &d, DSA_F32, 2), tensor(&r, &f, DSA_I64, 1), cache(&r, &pc, DSA_CACHE_MLA_FP8);
      s = dsa_mla_qnorm_rope_kv_insert(q, &a, &b, &c, &d, &f, &pc, NULL, NULL, &ev);
      if (!s)
        check_tensor(&a, "q_in"), check_tensor(&b, "kv"), check_tensor(&c, "positions"),
            check_tensor(&d, "cos_sin"), check_tensor(&f, "slots"), check_cache(&pc);
      break;
    default: {
      const sig *g = &sigs[op - 6];
      dsa_tensor tt[SIG_MAXT];
      dsa_paged_cache cc[2];
      const dsa_tensor *tp[SIG_MAXT];
      const dsa_paged_cache *cp[2];
      const unsigned nulls = (opb & 0x80) ? (unsigned)take(&r, 2) : 0;
      for (int i = 0; i < g->nt; i++) {
        tensor(&r, &tt[i], g->dt[i], g->nd[i]);
        tp[i] = (nulls >> i & 1) ? NULL : &tt[i];
      }
      for (int i = 0; i < g->nc; i++) {
        cache(&r, &cc[i], g->cf[i]);
        cp[i] = (nulls >> (SIG_MAXT + i) & 1) ? NULL : &cc[i];
      }
      s = sig_call(op - 6, tp, cp, &r, &ev);
      if (!s) {
        char what[48];
        for (int i = 0; i < g->nt; i++) {
          snprintf(what, sizeof what, "signature %d tensor %d", op - 6, i);
          check_tensor(tp[i], what);
        }
        for (int i = 0; i < g->nc; i++)
          if (cp[i]) check_cache(cp[i]);
      }
      break;
    }
  }
  if (s != DSA_OK && s != DSA_ERR_INVALID_ARGUMENT && s != DSA_ERR_UNSUPPORTED &&
      s != DSA_ERR_OPENCL) {
    fprintf(stderr, "op %d: unexpected status %s: %s\n", op, dsa_status_name(s), dsa_last_error());
    abort();
  }
  if (s != DSA_OK || work <= ((__int128)1 << 16)) {
    clSetUserEventStatus(ue, CL_COMPLETE);
    clFinish(dsa_queue_cl(q));
  } else {
    if (pending < 4096) stuck[pending] = q;
    if (++pending % 100 == 0)
      fprintf(stderr, "fuzz_validation: %ld large accepted calls left pending\n", pending);
    if (dsa_queue_create(&q, ctx, 0) != DSA_OK) abort();
    /* The user event stays referenced too: on Intel's CPU runtime
     * (2026.2) releasing it while a kernel with a USM or SVM argument
     * waits on it deadlocks inside clReleaseEvent (a recursive lock of its
     * event map, through UnregisterUSMFreeWaitEvent). */
    return 0;
  }
  clReleaseEvent(ue);
  return 0;
}
