/* libFuzzer target: argument validation of the operators. The input picks an
 * operator and every field of its tensor and cache arguments (offsets,
 * shapes, strides, dtype, rank, which buffer: small, large, NULL, or one of
 * another cl_context). Invariant: an accepted call (DSA_OK) has every
 * non-empty tensor and cache inside its buffer (recomputed here in 128-bit
 * arithmetic) and in the queue's context. Accepted work waits on a user
 * event; it runs (event completed) when every tensor is small, else it stays
 * pending for the rest of the process (a huge zero-stride grid would run for
 * hours) and, the queue being in order, the fuzzer moves to a fresh queue. Failing the user event instead crashes PoCL 3.x
 * ("PTHREAD ERROR in pocl_update_event_failed"). PoCL context created once. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dsacl/dsacl.h>

static dsa_context *ctx, *ctx2;
static dsa_queue *q;
static cl_mem bufs[4]; /* small, large, NULL, foreign */
static size_t sizes[4] = {4096, 1 << 20, 0, 1 << 20};

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

static void tensor(rd *r, dsa_tensor *t, dsa_dtype dt, int ndim) {
  memset(t, 0, sizeof *t);
  uint8_t k = (uint8_t)take(r, 1);
  t->mem = bufs[k & 3];
  t->dtype = (k & 0x40) ? (dsa_dtype)(take(r, 1) % 10) : dt;
  t->ndim = (k & 0x80) ? (int)(take(r, 1) % 6) - 1 : ndim;
  t->offset = pick_off(r);
  for (int i = 0; i < DSA_MAX_DIMS; i++) {
    t->shape[i] = pick_i64(r);
    t->stride[i] = pick_i64(r);
  }
}

static void cache(rd *r, dsa_paged_cache *c, dsa_cache_format f) {
  uint8_t k = (uint8_t)take(r, 1);
  c->mem = bufs[k & 3];
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
  int b = buf_index(t->mem);
  if (b < 0 || b == 2 || b == 3 || end > (__int128)sizes[b]) {
    fprintf(stderr, "accepted %s: buffer %d, end %.0f\n", what, b, (double)end);
    abort();
  }
}

static void check_cache(const dsa_paged_cache *c) {
  if (c->num_blocks <= 0) return;
  __int128 n = (__int128)c->num_blocks * c->block_size;
  if (n > work) work = n;
  __int128 end = (__int128)c->offset + (__int128)(c->num_blocks - 1) * c->block_stride +
                 (__int128)c->block_size * dsa_cache_token_bytes(c->format);
  int b = buf_index(c->mem);
  if (b < 0 || b == 2 || b == 3 || end > (__int128)sizes[b] || c->block_size <= 0) {
    fprintf(stderr, "accepted cache: buffer %d, end %.0f\n", b, (double)end);
    abort();
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
  int op = (int)(take(&r, 1) % 6);
  switch (op) {
    case 0:
      cache(&r, &pc, DSA_CACHE_MLA_FP8), tensor(&r, &a, DSA_I32, 1), tensor(&r, &b, DSA_BF16, 2);
      s = dsa_mla_gather_slots(q, &pc, &a, &b, &ev);
      if (!s) check_cache(&pc), check_tensor(&a, "indices"), check_tensor(&b, "out");
      break;
    case 1:
      tensor(&r, &a, DSA_BF16, 2), tensor(&r, &b, DSA_I64, 1), cache(&r, &pc, DSA_CACHE_MLA_FP8);
      s = dsa_mla_cache_insert(q, &a, &b, &pc, &ev);
      if (!s) check_tensor(&a, "k"), check_tensor(&b, "slots"), check_cache(&pc);
      break;
    case 2:
      tensor(&r, &a, DSA_BF16, 3), tensor(&r, &b, DSA_BF16, 2), tensor(&r, &c, DSA_I32, 2);
      tensor(&r, &d, DSA_BF16, 3);
      s = dsa_sparse_attn_bf16(q, &a, &b, &c, NULL, NULL, NULL, &d, NULL, &ev);
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
        s = dsa_indexer_q_quant(q, &a, &b, &c, &d, NULL, &f, NULL, &w, &ev);
        if (!s)
          check_tensor(&a, "positions"), check_tensor(&b, "index_q"), check_tensor(&c, "cos_sin"),
              check_tensor(&d, "weights"), check_tensor(&f, "out_q"), check_tensor(&w, "out_w");
      }
      break;
    default:
      tensor(&r, &a, DSA_BF16, 3), tensor(&r, &b, DSA_BF16, 2), tensor(&r, &c, DSA_I64, 1);
      tensor(&r, &d, DSA_F32, 2), tensor(&r, &f, DSA_I64, 1), cache(&r, &pc, DSA_CACHE_MLA_FP8);
      s = dsa_mla_qnorm_rope_kv_insert(q, &a, NULL, &b, &c, &d, &f, &pc, NULL, &ev);
      if (!s)
        check_tensor(&a, "q_in"), check_tensor(&b, "kv"), check_tensor(&c, "positions"),
            check_tensor(&d, "cos_sin"), check_tensor(&f, "slots"), check_cache(&pc);
      break;
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
  }
  clReleaseEvent(ue);
  return 0;
}
