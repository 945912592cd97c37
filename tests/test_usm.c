/* Tensors and caches in USM and SVM memory (issue 11, item 3).
 *
 * Part 1: one small decode pipeline (indexer Q quant, indexer K insert,
 * paged logits, top-k decode, MLA cache insert, slot gather, sparse MLA
 * decode fused and two-stage, paged gather) runs on cl_mem buffers, then again with every tensor and cache
 * in each memory kind the device takes (Intel USM device / shared / host
 * allocations, OpenCL 2.0 SVM), and with the kinds mixed within each call
 * (rotated over the arguments, so a USM cache meets cl_mem indices and so
 * on). Every allocation, payload and padding, must come out byte for byte
 * as in the cl_mem run (the cl_mem path is checked against tests/ref
 * elsewhere), with the same kernel variants and no fault.
 *
 * Part 2: bad pointer arguments (NULL ptr, mem and ptr both set, ptr_bytes
 * too small, offset past ptr_bytes, an unknown kind, a USM pointer of
 * another cl_context or no USM pointer at all, a misaligned address, a kind
 * the device lacks) must return the named error, return no event and write
 * nothing.
 *
 * Skips (77) only on a device that takes neither USM nor SVM. */
#undef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 200
#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <stdint.h>

#include "common.h"
#include "internal.h" /* to hide a memory kind the device has (part 2) */

/* The two-stage decode's workspace: bytes [off, off + n) of m as a u8 tensor. */
#define WS_BYTES(m, off, n)                                                        \
  (&(dsa_tensor){.mem = (m), .offset = (off), .dtype = DSA_U8, .ndim = 1,          \
                 .shape = {(int64_t)(n)}, .stride = {1}})

static dsa_context *ctx;
static dsa_queue *q;
static cl_context clctx;
static cl_command_queue clq;
static cl_device_id dev;

/* ---- allocations of every kind -------------------------------------------- */

enum { K_BUF, K_USM_DEV, K_USM_SHARED, K_USM_HOST, K_SVM, NKINDS };
static const char *const kind_names[NKINDS] = {"cl_mem", "USM device", "USM shared", "USM host",
                                               "SVM"};
static int have[NKINDS];

static clDeviceMemAllocINTEL_fn usm_dev_alloc;
static clSharedMemAllocINTEL_fn usm_shared_alloc;
static clHostMemAllocINTEL_fn usm_host_alloc;
static clMemBlockingFreeINTEL_fn usm_free;
static clEnqueueMemcpyINTEL_fn usm_memcpy;

/* Payload at PAD bytes from the start, PAD bytes of pattern either side. */
#define PAD 256

typedef struct store {
  int k;
  cl_mem mem;
  void *base;  /* 256-aligned */
  void *raw;   /* what to free (SVM: below base) */
  size_t alloc;
} store;

static store st_alloc(cl_context c, int k, size_t bytes) {
  store s = {.k = k, .alloc = bytes + 2 * PAD};
  cl_int e = CL_SUCCESS;
  switch (k) {
    case K_BUF: s.mem = clCreateBuffer(c, CL_MEM_READ_WRITE, s.alloc, NULL, &e); break;
    case K_USM_DEV: s.base = usm_dev_alloc(c, dev, NULL, s.alloc, 256, &e); break;
    case K_USM_SHARED: s.base = usm_shared_alloc(c, dev, NULL, s.alloc, 256, &e); break;
    case K_USM_HOST: s.base = usm_host_alloc(c, NULL, s.alloc, 256, &e); break;
    case K_SVM:
      /* clSVMAlloc's alignment is at most the largest data type's (128 on
       * PoCL): align by hand, as for the others. */
      s.raw = clSVMAlloc(c, CL_MEM_READ_WRITE, s.alloc + 256, 0);
      s.base = s.raw ? (void *)(((uintptr_t)s.raw + 255) & ~(uintptr_t)255) : NULL;
      break;
  }
  if (k != K_SVM) s.raw = s.base;
  if (e != CL_SUCCESS || (!s.mem && !s.base)) {
    fprintf(stderr, "allocating %zu bytes of %s failed (%d)\n", s.alloc, kind_names[k], (int)e);
    exit(1);
  }
  return s;
}

static void st_free(cl_context c, store *s) {
  clFinish(clq);
  if (s->mem) clReleaseMemObject(s->mem);
  if (s->raw && s->k == K_SVM) clSVMFree(c, s->raw);
  if (s->raw && s->k != K_SVM) usm_free(c, s->raw);
  s->mem = NULL;
  s->base = s->raw = NULL;
}

/* The whole allocation from / to host memory (blocking). */
static void st_write(const store *s, const void *src) {
  cl_int e;
  if (s->k == K_BUF)
    e = clEnqueueWriteBuffer(clq, s->mem, CL_TRUE, 0, s->alloc, src, 0, NULL, NULL);
  else if (s->k == K_SVM)
    e = clEnqueueSVMMemcpy(clq, CL_TRUE, s->base, src, s->alloc, 0, NULL, NULL);
  else
    e = usm_memcpy(clq, CL_TRUE, s->base, src, s->alloc, 0, NULL, NULL);
  if (e != CL_SUCCESS) {
    fprintf(stderr, "writing %s: %d\n", kind_names[s->k], (int)e);
    exit(1);
  }
}

static void st_read(const store *s, void *dst) {
  cl_int e;
  if (s->k == K_BUF)
    e = clEnqueueReadBuffer(clq, s->mem, CL_TRUE, 0, s->alloc, dst, 0, NULL, NULL);
  else if (s->k == K_SVM)
    e = clEnqueueSVMMemcpy(clq, CL_TRUE, dst, s->base, s->alloc, 0, NULL, NULL);
  else
    e = usm_memcpy(clq, CL_TRUE, dst, s->base, s->alloc, 0, NULL, NULL);
  if (e != CL_SUCCESS) {
    fprintf(stderr, "reading %s: %d\n", kind_names[s->k], (int)e);
    exit(1);
  }
}

static dsa_mem_kind mem_kind(int k) {
  return k == K_BUF ? DSA_MEM_BUFFER : k == K_SVM ? DSA_MEM_SVM : DSA_MEM_USM;
}

/* Where a view of store s starts. cl_mem: offset PAD. Pointers, by `form`:
 * 0: ptr PAD/2 into the allocation, offset PAD/2, ptr_bytes to its end;
 * 1: ptr at the payload, offset 0, ptr_bytes 0 for USM (queried), to the
 * end for SVM. Either way the payload's address is 256-aligned, as the
 * cl_mem offset is, so the kernels see the same alignment. */
typedef struct place {
  dsa_mem_kind kind;
  cl_mem mem;
  void *ptr;
  size_t ptr_bytes, offset;
} place;

static place where(const store *s, int form) {
  place p = {.kind = mem_kind(s->k)};
  if (s->k == K_BUF) {
    p.mem = s->mem;
    p.offset = PAD;
  } else if (form == 0) {
    p.ptr = (char *)s->base + PAD / 2;
    p.ptr_bytes = s->alloc - PAD / 2;
    p.offset = PAD / 2;
  } else {
    p.ptr = (char *)s->base + PAD;
    p.ptr_bytes = s->k == K_SVM ? s->alloc - PAD : 0;
  }
  return p;
}

static dsa_tensor view(const store *s, int form, dsa_dtype dt, int nd, const int64_t *shape) {
  place p = where(s, form);
  if (p.kind == DSA_MEM_BUFFER) return dsa_tensor_make(p.mem, p.offset, dt, nd, shape);
  return dsa_tensor_make_ptr(p.kind, p.ptr, p.ptr_bytes, p.offset, dt, nd, shape);
}

static dsa_paged_cache cache_view(const store *s, int form, int64_t nb, int32_t bs,
                                  int64_t stride, dsa_cache_format f) {
  place p = where(s, form);
  return (dsa_paged_cache){.mem = p.mem, .offset = p.offset, .num_blocks = nb,
                           .block_size = bs, .block_stride = stride, .format = f,
                           .kind = p.kind, .ptr = p.ptr, .ptr_bytes = p.ptr_bytes};
}

/* ---- the pipeline's arrays -------------------------------------------------- */

enum { T = 4, HI = 4, DI = 128, NPOS = 16, NIK = 32, IBS = 16, INB = 4, ISTRIDE = IBS * 132 + 64,
       W = 2, MAXLEN = 32, TOPK = 8, NMK = 24, MBS = 16, MNB = 3, MSTRIDE = MBS * 584,
       NG = 10, H = 16, KS = 8, KX = 4, PR = 2, PW = 2, PT = 20 };

enum {
  A_POS, A_IQ, A_CS, A_IW, A_OQ, A_OW, A_IK, A_ISLOT, A_ICACHE, A_CTX, A_BT, A_LOGITS, A_TOPK,
  A_MK, A_MSLOT, A_MCACHE, A_GIDX, A_GOUT, A_QUERY, A_SIDX, A_SLENS, A_SIDX2, A_SLENS2, A_SINK,
  A_SOUT, A_LSE, A_SOUT2, A_LSE2, A_PSEQ, A_PBT, A_POUT, NA
};
static const char *const a_names[NA] = {
    "positions", "index_q", "cos_sin", "weights", "out_q", "out_weights", "indexer k",
    "indexer slots", "indexer cache", "context_lens", "block_tables", "logits", "top-k indices",
    "mla k", "mla slots", "mla cache", "gather indices", "gather out", "query", "main indices",
    "main lens", "extra indices", "extra lens", "attn_sink", "decode out", "lse",
    "two-stage out", "two-stage lse", "paged seq_lens", "paged block_table", "paged out"};
static size_t a_bytes[NA];
static uint8_t *a_img[NA]; /* the allocation's initial bytes (PAD + payload + PAD) */

static uint16_t rnd_bf16(uint64_t *r) {
  /* |x| in [2^-2, 2^2), random sign: finite, well inside e4m3's range. */
  uint64_t v = dsa_test_rand(r);
  return (uint16_t)(((v & 1) << 15) | (uint16_t)((125 + (v >> 1) % 4) << 7) |
                    (uint16_t)((v >> 8) & 0x7F));
}

static void make_data(void) {
  const size_t bytes[NA] = {
      [A_POS] = T * 8, [A_IQ] = T * HI * DI * 2, [A_CS] = NPOS * 64 * 4, [A_IW] = T * HI * 4,
      [A_OQ] = T * HI * DI, [A_OW] = T * HI * 4, [A_IK] = NIK * DI * 2, [A_ISLOT] = NIK * 8,
      [A_ICACHE] = INB * ISTRIDE, [A_CTX] = T * 4, [A_BT] = T * W * 4, [A_LOGITS] = T * MAXLEN * 4,
      [A_TOPK] = T * TOPK * 4, [A_MK] = NMK * 512 * 2, [A_MSLOT] = NMK * 8,
      [A_MCACHE] = MNB * MSTRIDE, [A_GIDX] = NG * 4, [A_GOUT] = NG * 512 * 2,
      [A_QUERY] = T * H * 512 * 2, [A_SIDX] = T * KS * 4, [A_SLENS] = T * 4,
      [A_SIDX2] = T * KX * 4, [A_SLENS2] = T * 4, [A_SINK] = H * 4, [A_SOUT] = T * H * 512 * 2,
      [A_LSE] = T * H * 4, [A_SOUT2] = T * H * 512 * 2, [A_LSE2] = T * H * 4,
      [A_PSEQ] = PR * 4, [A_PBT] = PR * PW * 4, [A_POUT] = PR * PT * 512 * 2};
  uint64_t r = 0x5EED;
  for (int a = 0; a < NA; a++) {
    a_bytes[a] = bytes[a];
    a_img[a] = dsa_test_xmalloc(bytes[a] + 2 * PAD);
    for (size_t i = 0; i < bytes[a] + 2 * PAD; i++) a_img[a][i] = (uint8_t)(0xA5 ^ (i * 7 + a));
  }
#define P(a, type) ((type *)(a_img[a] + PAD))
  for (int t = 0; t < T; t++) P(A_POS, int64_t)[t] = (t * 5 + 3) % NPOS;
  for (int i = 0; i < T * HI * DI; i++) P(A_IQ, uint16_t)[i] = rnd_bf16(&r);
  for (int p = 0; p < NPOS; p++)
    for (int i = 0; i < 32; i++) {
      P(A_CS, float)[p * 64 + i] = (float)((p * 0.37 + i * 0.11) - (int)(p * 0.37 + i * 0.11));
      P(A_CS, float)[p * 64 + 32 + i] = (float)(0.25 + 0.5 * dsa_test_uniform(&r));
    }
  for (int i = 0; i < T * HI; i++) P(A_IW, float)[i] = (float)(dsa_test_uniform(&r) - 0.5);
  for (int i = 0; i < NIK * DI; i++) P(A_IK, uint16_t)[i] = rnd_bf16(&r);
  for (int n = 0; n < NIK; n++) P(A_ISLOT, int64_t)[n] = (n * 7) % (INB * IBS); /* distinct */
  memset(P(A_ICACHE, uint8_t), 0, a_bytes[A_ICACHE]);
  const int32_t ctx_lens[T] = {5, 17, 32, 0};
  for (int b = 0; b < T; b++) P(A_CTX, int32_t)[b] = ctx_lens[b];
  for (int b = 0; b < T; b++)
    for (int w = 0; w < W; w++) P(A_BT, int32_t)[b * W + w] = (b + 3 * w) % INB;
  for (int i = 0; i < NMK * 512; i++) P(A_MK, uint16_t)[i] = rnd_bf16(&r);
  for (int n = 0; n < NMK; n++) P(A_MSLOT, int64_t)[n] = n == 5 ? -1 : (n * 11) % (MNB * MBS);
  memset(P(A_MCACHE, uint8_t), 0, a_bytes[A_MCACHE]);
  for (int i = 0; i < NG; i++) P(A_GIDX, int32_t)[i] = i == 3 ? -1 : (i * 13) % (MNB * MBS);
  for (int i = 0; i < T * H * 512; i++) P(A_QUERY, uint16_t)[i] = rnd_bf16(&r);
  for (int i = 0; i < T * KS; i++) P(A_SIDX, int32_t)[i] = i % 7 == 6 ? -1 : (i * 11) % (MNB * MBS);
  for (int t = 0; t < T; t++) P(A_SLENS, int32_t)[t] = KS - t;
  for (int i = 0; i < T * KX; i++) P(A_SIDX2, int32_t)[i] = (i * 5 + 1) % (MNB * MBS);
  for (int t = 0; t < T; t++) P(A_SLENS2, int32_t)[t] = t % 2 ? KX : 1;
  for (int h = 0; h < H; h++) P(A_SINK, float)[h] = (float)(dsa_test_uniform(&r) - 0.5);
  P(A_PSEQ, int32_t)[0] = PT, P(A_PSEQ, int32_t)[1] = 7;
  for (int i = 0; i < PR * PW; i++) P(A_PBT, int32_t)[i] = (i * 2 + 1) % MNB;
#undef P
}

enum { NVAR = 9 }; /* calls whose variant is compared */
typedef struct run_result {
  uint8_t *img[NA];
  char variants[NVAR][96];
} run_result;

/* Runs the pipeline with array a in memory kind kinds[a]; *out receives every
 * allocation afterwards and the variant of each call. */
static void run(const int kinds[NA], run_result *out, const char *label) {
  store s[NA];
  for (int a = 0; a < NA; a++) {
    s[a] = st_alloc(clctx, kinds[a], a_bytes[a]);
    st_write(&s[a], a_img[a]);
  }
#define V(a, dt, nd, ...) view(&s[a], (a) & 1, dt, nd, (int64_t[]){__VA_ARGS__})
  dsa_tensor pos = V(A_POS, DSA_I64, 1, T), iq = V(A_IQ, DSA_BF16, 3, T, HI, DI),
             cs = V(A_CS, DSA_F32, 2, NPOS, 64), iw = V(A_IW, DSA_F32, 2, T, HI),
             oq = V(A_OQ, DSA_E4M3, 3, T, HI, DI), ow = V(A_OW, DSA_F32, 2, T, HI);
  int nv = 0;
  CHECK_OK(dsa_indexer_q_quant(q, &pos, &iq, &cs, &iw, &oq, NULL, &ow, NULL, NULL));
  snprintf(out->variants[nv++], 96, "%s", dsa_queue_last_variant(q));

  dsa_tensor ik = V(A_IK, DSA_BF16, 2, NIK, DI), islot = V(A_ISLOT, DSA_I64, 1, NIK);
  dsa_paged_cache icache =
      cache_view(&s[A_ICACHE], A_ICACHE & 1, INB, IBS, ISTRIDE, DSA_CACHE_INDEXER_FP8);
  CHECK_OK(dsa_indexer_k_insert(q, &ik, &islot, &icache, NULL, NULL));
  snprintf(out->variants[nv++], 96, "%s", dsa_queue_last_variant(q));

  /* out_q and out_weights, as written, are the logits' query and weights. */
  dsa_tensor lq = V(A_OQ, DSA_E4M3, 4, T, 1, HI, DI), lw = V(A_OW, DSA_F32, 2, T, HI),
             ctxl = V(A_CTX, DSA_I32, 1, T), bt = V(A_BT, DSA_I32, 2, T, W),
             logits = V(A_LOGITS, DSA_F32, 2, T, MAXLEN);
  CHECK_OK(dsa_indexer_paged_logits(q, &lq, NULL, &lw, &ctxl, &bt, &icache, &logits, NULL, NULL));
  snprintf(out->variants[nv++], 96, "%s", dsa_queue_last_variant(q));

  dsa_tensor topk = V(A_TOPK, DSA_I32, 2, T, TOPK);
  CHECK_OK(dsa_topk_decode(q, &logits, &ctxl, &topk, NULL, NULL));
  snprintf(out->variants[nv++], 96, "%s", dsa_queue_last_variant(q));

  dsa_tensor mk = V(A_MK, DSA_BF16, 2, NMK, 512), mslot = V(A_MSLOT, DSA_I64, 1, NMK);
  dsa_paged_cache mcache =
      cache_view(&s[A_MCACHE], A_MCACHE & 1, MNB, MBS, MSTRIDE, DSA_CACHE_MLA_FP8);
  CHECK_OK(dsa_mla_cache_insert(q, &mk, &mslot, &mcache, NULL, NULL));
  snprintf(out->variants[nv++], 96, "%s", dsa_queue_last_variant(q));

  dsa_tensor gidx = V(A_GIDX, DSA_I32, 1, NG), gout = V(A_GOUT, DSA_BF16, 2, NG, 512);
  CHECK_OK(dsa_mla_gather_slots(q, &gidx, &mcache, &gout, NULL, NULL));
  snprintf(out->variants[nv++], 96, "%s", dsa_queue_last_variant(q));

  dsa_tensor query = V(A_QUERY, DSA_BF16, 3, T, H, 512), sidx = V(A_SIDX, DSA_I32, 2, T, KS),
             slens = V(A_SLENS, DSA_I32, 1, T), sidx2 = V(A_SIDX2, DSA_I32, 2, T, KX),
             slens2 = V(A_SLENS2, DSA_I32, 1, T), sink = V(A_SINK, DSA_F32, 1, H),
             sout = V(A_SOUT, DSA_BF16, 3, T, H, 512), lse = V(A_LSE, DSA_F32, 2, T, H);
  dsa_sparse_index_set main_set = {&mcache, &sidx, &slens}, extra_set = {&mcache, &sidx2, &slens2};
  CHECK_OK(dsa_sparse_mla_decode(q, &query, &main_set, &extra_set, &sink, &sout, &lse, NULL, NULL));
  snprintf(out->variants[nv++], 96, "%s", dsa_queue_last_variant(q));

  /* The two-stage decode: its workspace is a cl_mem in every run. */
  dsa_tensor sout2 = V(A_SOUT2, DSA_BF16, 3, T, H, 512), lse2 = V(A_LSE2, DSA_F32, 2, T, H);
  cl_int e;
  const size_t wsb = dsa_sparse_mla_decode_workspace_size(T, KS, KX);
  cl_mem ws = clCreateBuffer(clctx, CL_MEM_READ_WRITE, wsb, NULL, &e);
  CHECK(e == CL_SUCCESS, "workspace: %d", (int)e);
  CHECK_OK(dsa_sparse_mla_decode_two_stage(q, &query, &main_set, &extra_set, &sink, &sout2, &lse2,
                                           WS_BYTES(ws, 0, wsb), NULL, NULL));
  snprintf(out->variants[nv++], 96, "%s", dsa_queue_last_variant(q));

  dsa_tensor pseq = V(A_PSEQ, DSA_I32, 1, PR), pbt = V(A_PBT, DSA_I32, 2, PR, PW),
             pout = V(A_POUT, DSA_BF16, 3, PR, PT, 512);
#undef V
  cl_event done = NULL;
  dsa_events ev = {0, NULL, &done};
  CHECK_OK(dsa_mla_gather_paged(q, &pseq, NULL, &pbt, &mcache, &pout, NULL, &ev));
  snprintf(out->variants[nv++], 96, "%s", dsa_queue_last_variant(q));
  if (done) dsa_test_expect_complete(done, label);
  clReleaseMemObject(ws);

  CHECK(dsa_test_read_faults(q) == 0, "%s: fault bits set", label);
  for (int a = 0; a < NA; a++) {
    out->img[a] = dsa_test_xmalloc(a_bytes[a] + 2 * PAD);
    st_read(&s[a], out->img[a]);
    st_free(clctx, &s[a]);
  }
}

static void compare(const run_result *got, const run_result *want, const char *label) {
  for (int a = 0; a < NA; a++)
    dsa_test_first_diff(got->img[a], want->img[a], a_bytes[a] + 2 * PAD, a_names[a], "%s",
                        label);
  for (int v = 0; v < NVAR; v++)
    CHECK(strcmp(got->variants[v], want->variants[v]) == 0, "%s: variant %s, cl_mem run %s",
          label, got->variants[v], want->variants[v]);
}

static void free_result(run_result *r) {
  for (int a = 0; a < NA; a++) free(r->img[a]);
}

static void pipeline(void) {
  make_data();
  int kinds[NA];
  for (int a = 0; a < NA; a++) kinds[a] = K_BUF;
  run_result ref;
  run(kinds, &ref, "cl_mem");
  /* The outputs changed: the comparison below is not between untouched
   * images. */
  CHECK(memcmp(ref.img[A_SOUT], a_img[A_SOUT], a_bytes[A_SOUT] + 2 * PAD) != 0 &&
            memcmp(ref.img[A_TOPK], a_img[A_TOPK], a_bytes[A_TOPK] + 2 * PAD) != 0 &&
            memcmp(ref.img[A_ICACHE], a_img[A_ICACHE], a_bytes[A_ICACHE] + 2 * PAD) != 0 &&
            memcmp(ref.img[A_GOUT], a_img[A_GOUT], a_bytes[A_GOUT] + 2 * PAD) != 0 &&
            memcmp(ref.img[A_SOUT2], a_img[A_SOUT2], a_bytes[A_SOUT2] + 2 * PAD) != 0 &&
            memcmp(ref.img[A_POUT], a_img[A_POUT], a_bytes[A_POUT] + 2 * PAD) != 0,
        "the cl_mem run left an output unwritten");

  int avail[NKINDS], na = 0;
  for (int k = 0; k < NKINDS; k++)
    if (have[k]) avail[na++] = k;
  /* Every array in one pointer kind. */
  for (int i = 1; i < na; i++) {
    for (int a = 0; a < NA; a++) kinds[a] = avail[i];
    run_result got;
    char label[64];
    snprintf(label, sizeof label, "all %s", kind_names[avail[i]]);
    run(kinds, &got, label);
    compare(&got, &ref, label);
    free_result(&got);
    fprintf(stderr, "  %s: compared\n", label);
  }
  /* Kinds mixed within each call, rotated so that every array meets every
   * kind. */
  for (int rot = 0; rot < na && na > 1; rot++) {
    for (int a = 0; a < NA; a++) kinds[a] = avail[(a + rot) % na];
    run_result got;
    char label[64];
    snprintf(label, sizeof label, "mixed, rotation %d", rot);
    run(kinds, &got, label);
    compare(&got, &ref, label);
    free_result(&got);
    fprintf(stderr, "  %s: compared\n", label);
  }
  free_result(&ref);
}

/* ---- part 2: bad pointer arguments ----------------------------------------- */

typedef struct bad_call {
  dsa_tensor k, slots, gidx, gout;
  dsa_paged_cache cache;
} bad_call;

static store b_k, b_slots, b_cache, b_gidx, b_gout;
static uint8_t *b_snap_cache, *b_snap_gout;

/* op 0: dsa_mla_cache_insert(k, slots, cache); op 1: dsa_mla_gather_slots(cache, gidx, gout). */
static dsa_status bad_run(int op, const bad_call *c, cl_event *done) {
  dsa_events ev = {0, NULL, done};
  return op == 0 ? dsa_mla_cache_insert(q, &c->k, &c->slots, &c->cache, NULL, &ev)
                 : dsa_mla_gather_slots(q, &c->gidx, &c->cache, &c->gout, NULL, &ev);
}

static int b_unchanged(void) {
  clFinish(clq);
  uint8_t *now = dsa_test_xmalloc(b_cache.alloc);
  st_read(&b_cache, now);
  int ok = memcmp(now, b_snap_cache, b_cache.alloc) == 0;
  free(now);
  now = dsa_test_xmalloc(b_gout.alloc);
  st_read(&b_gout, now);
  ok &= memcmp(now, b_snap_gout, b_gout.alloc) == 0;
  free(now);
  return ok;
}

static char last_msg[1024]; /* the message of expect's call */

static void expect(int op, const bad_call *c, dsa_status want, const char *word,
                   const char *what) {
  cl_event done = (cl_event)(uintptr_t)1;
  dsa_status s = bad_run(op, c, &done);
  snprintf(last_msg, sizeof last_msg, "%s", dsa_last_error());
  const char *opn = op == 0 ? "dsa_mla_cache_insert" : "dsa_mla_gather_slots";
  CHECK(s == want, "%s, %s: %s, expected %s (%s)", opn, what, dsa_status_name(s),
        dsa_status_name(want), dsa_last_error());
  CHECK(dsa_test_names(dsa_last_error(), word, NULL), "%s, %s: message '%s' does not name %s",
        opn, what, dsa_last_error(), word);
  CHECK(done == (cl_event)(uintptr_t)1, "%s, %s: an event came back", opn, what);
  if (done != (cl_event)(uintptr_t)1 && done) clReleaseEvent(done);
  CHECK(b_unchanged(), "%s, %s: memory changed", opn, what);
  CHECK(dsa_test_read_faults(q) == 0, "%s, %s: fault bits set", opn, what);
}

/* The tensor or cache of case `arg` (0: insert's k, 1: the cache, 2: the
 * gather's out) in c, with its storage fields. */
typedef struct target {
  int op;
  const char *word;
  dsa_mem_kind *kind;
  cl_mem *mem;
  void **ptr;
  size_t *ptr_bytes, *offset;
  size_t elem;   /* element size (1 for the cache) */
  size_t extent; /* bytes from ptr the valid view addresses */
} target;

static target target_of(bad_call *c, int arg) {
  target t;
  switch (arg) {
    case 0:
      t = (target){0, "k", &c->k.kind, &c->k.mem, &c->k.ptr, &c->k.ptr_bytes, &c->k.offset, 2, 0};
      t.extent = c->k.offset + 2 * 512 * 2;
      break;
    case 1:
      t = (target){0, "cache", &c->cache.kind, &c->cache.mem, &c->cache.ptr,
                   &c->cache.ptr_bytes, &c->cache.offset, 1, 0};
      t.extent = c->cache.offset + (size_t)c->cache.block_stride * (c->cache.num_blocks - 1) +
                 (size_t)c->cache.block_size * 584;
      break;
    default:
      t = (target){1, "out", &c->gout.kind, &c->gout.mem, &c->gout.ptr, &c->gout.ptr_bytes,
                   &c->gout.offset, 2, 0};
      t.extent = c->gout.offset + 2 * 512 * 2;
      break;
  }
  return t;
}

/* Every bad case against argument `arg` in pointer kind k (the valid call
 * has it there, the other arguments in cl_mem). */
static void bad_cases(int k, int arg, cl_context foreign) {
  const int kinds[3] = {arg == 0 ? k : K_BUF, arg == 1 ? k : K_BUF, arg == 2 ? k : K_BUF};
  b_k = st_alloc(clctx, kinds[0], 2 * 512 * 2);
  b_slots = st_alloc(clctx, K_BUF, 2 * 8);
  b_cache = st_alloc(clctx, kinds[1], 4 * 584);
  b_gidx = st_alloc(clctx, K_BUF, 2 * 4);
  b_gout = st_alloc(clctx, kinds[2], 2 * 512 * 2);
  uint64_t r = 7;
  uint8_t *img = dsa_test_xmalloc(4 * 584 + 2 * PAD);
  dsa_test_fill_random(&r, img, b_k.alloc);
  for (size_t i = 0; i < b_k.alloc / 2; i++) ((uint16_t *)img)[i] = rnd_bf16(&r);
  st_write(&b_k, img);
  int64_t sl[2 + 2 * PAD / 8] = {0};
  sl[PAD / 8] = 1, sl[PAD / 8 + 1] = 2;
  st_write(&b_slots, sl);
  int32_t gi[2 + 2 * PAD / 4] = {0};
  gi[PAD / 4] = 0, gi[PAD / 4 + 1] = 3;
  st_write(&b_gidx, gi);
  dsa_test_fill_random(&r, img, b_cache.alloc);
  st_write(&b_cache, img);
  dsa_test_fill_random(&r, img, b_gout.alloc);
  st_write(&b_gout, img);
  free(img);
  b_snap_cache = dsa_test_xmalloc(b_cache.alloc);
  b_snap_gout = dsa_test_xmalloc(b_gout.alloc);
  st_read(&b_cache, b_snap_cache);
  st_read(&b_gout, b_snap_gout);

  bad_call base = {
      .k = view(&b_k, 0, DSA_BF16, 2, (int64_t[]){2, 512}),
      .slots = view(&b_slots, 0, DSA_I64, 1, (int64_t[]){2}),
      .gidx = view(&b_gidx, 0, DSA_I32, 1, (int64_t[]){2}),
      .gout = view(&b_gout, 0, DSA_BF16, 2, (int64_t[]){2, 512}),
      .cache = cache_view(&b_cache, 0, 4, 1, 584, DSA_CACHE_MLA_FP8)};
  char what[160];
  const char *kn = kind_names[k];
  const size_t alloc = arg == 1 ? b_cache.alloc : arg == 2 ? b_gout.alloc : b_k.alloc;
  bad_call c;
  target t;
#define CASE(desc) \
  (c = base, t = target_of(&c, arg), snprintf(what, sizeof what, "%s %s: %s", kn, t.word, desc))

  CASE("ptr NULL");
  *t.ptr = NULL;
  expect(t.op, &c, DSA_ERR_INVALID_ARGUMENT, t.word, what);

  CASE("mem and ptr both set");
  *t.mem = b_slots.mem;
  expect(t.op, &c, DSA_ERR_INVALID_ARGUMENT, t.word, what);

  CASE("ptr_bytes one short of the extent");
  *t.ptr_bytes = t.extent - 1;
  expect(t.op, &c, DSA_ERR_INVALID_ARGUMENT, t.word, what);

  CASE("offset past ptr_bytes");
  *t.ptr_bytes = 256, *t.offset = 256 + t.elem;
  expect(t.op, &c, DSA_ERR_INVALID_ARGUMENT, t.word, what);

  CASE("offset SIZE_MAX - 1");
  *t.offset = SIZE_MAX - 1;
  expect(t.op, &c, DSA_ERR_INVALID_ARGUMENT, t.word, what);

  const int unknown[3] = {3, 99, -1};
  for (int u = 0; u < 3; u++) {
    char d[32];
    snprintf(d, sizeof d, "unknown kind %d", unknown[u]);
    CASE(d);
    *t.kind = (dsa_mem_kind)unknown[u];
    expect(t.op, &c, DSA_ERR_INVALID_ARGUMENT, t.word, what);
  }

  CASE("ptr set with kind DSA_MEM_BUFFER");
  *t.kind = DSA_MEM_BUFFER;
  *t.mem = b_slots.mem;
  expect(t.op, &c, DSA_ERR_INVALID_ARGUMENT, t.word, what);

  CASE("ptr_bytes set with kind DSA_MEM_BUFFER");
  *t.kind = DSA_MEM_BUFFER;
  *t.mem = b_slots.mem;
  *t.ptr = NULL;
  expect(t.op, &c, DSA_ERR_INVALID_ARGUMENT, t.word, what);

  if (t.elem > 1) {
    CASE("address not a multiple of the element size");
    *t.ptr = (char *)*t.ptr + 1;
    *t.ptr_bytes -= 1;
    expect(t.op, &c, DSA_ERR_INVALID_ARGUMENT, t.word, what);
  }

  if (k == K_SVM) {
    CASE("ptr_bytes 0");
    *t.ptr_bytes = 0;
    expect(t.op, &c, DSA_ERR_INVALID_ARGUMENT, t.word, what);
  } else {
    /* ptr is PAD/2 into its allocation (form 0). */
    CASE("ptr_bytes one past the allocation");
    *t.ptr_bytes = alloc - PAD / 2 + 1;
    expect(t.op, &c, DSA_ERR_INVALID_ARGUMENT, t.word, what);

    CASE("ptr_bytes 0 (queried), the view one element past the allocation");
    const size_t span = t.extent - *t.offset;
    *t.ptr_bytes = 0;
    *t.offset = alloc - PAD / 2 - span + t.elem;
    expect(t.op, &c, DSA_ERR_INVALID_ARGUMENT, t.word, what);

    CASE("a malloc'ed pointer");
    void *host = dsa_test_xmalloc(64 << 10);
    *t.ptr = host;
    *t.ptr_bytes = 0;
    expect(t.op, &c, DSA_ERR_INVALID_ARGUMENT, t.word, what);
    free(host);

    CASE("an allocation of another cl_context");
    store other = st_alloc(foreign, k, 64 << 10);
    *t.ptr = other.base;
    *t.ptr_bytes = 0;
    *t.offset = 0;
    expect(t.op, &c, DSA_ERR_INVALID_ARGUMENT, t.word, what);
    st_free(foreign, &other);
  }

  /* The device without this kind: hidden in the context (the check reads
   * the context's mask, as on a device that lacks the extension). */
  CASE("a kind the context does not take");
  const unsigned saved = ctx->mem_kinds;
  ctx->mem_kinds &= ~(1u << mem_kind(k));
  expect(t.op, &c, DSA_ERR_UNSUPPORTED, t.word, what);
  CHECK(strstr(last_msg, k == K_SVM ? "SVM" : "cl_intel_unified_shared_memory") != NULL,
        "%s: the message does not name the missing extension: %s", what, last_msg);
  ctx->mem_kinds = saved;
#undef CASE

  /* The unbroken call works and writes. */
  c = base;
  t = target_of(&c, arg);
  cl_event done = NULL;
  CHECK_OK(bad_run(t.op, &c, &done));
  if (done) dsa_test_expect_complete(done, "valid call");
  CHECK(!b_unchanged(), "%s arg %d: the valid call wrote nothing", kn, arg);

  free(b_snap_cache);
  free(b_snap_gout);
  store *all[] = {&b_k, &b_slots, &b_cache, &b_gidx, &b_gout};
  for (int i = 0; i < 5; i++) st_free(clctx, all[i]);
}

/* A kind the device lacks, as it is: refused with DSA_ERR_UNSUPPORTED
 * before anything looks at the pointer. */
static void missing_kind(int k) {
  store out = st_alloc(clctx, K_BUF, 2 * 512 * 2), idx = st_alloc(clctx, K_BUF, 2 * 4);
  int32_t gi[2 + 2 * PAD / 4] = {0};
  st_write(&idx, gi);
  uint8_t fake[4 * 584 + 2 * PAD];
  dsa_paged_cache cc = {.num_blocks = 4, .block_size = 1, .block_stride = 584,
                        .format = DSA_CACHE_MLA_FP8, .kind = mem_kind(k), .ptr = fake,
                        .ptr_bytes = sizeof fake};
  dsa_tensor ti = view(&idx, 0, DSA_I32, 1, (int64_t[]){2});
  dsa_tensor to = view(&out, 0, DSA_BF16, 2, (int64_t[]){2, 512});
  cl_event done = (cl_event)(uintptr_t)1;
  dsa_events ev = {0, NULL, &done};
  dsa_status s = dsa_mla_gather_slots(q, &ti, &cc, &to, NULL, &ev);
  CHECK(s == DSA_ERR_UNSUPPORTED, "%s on a device without it: %s (%s)", kind_names[k],
        dsa_status_name(s), dsa_last_error());
  CHECK(strstr(dsa_last_error(), k == K_SVM ? "SVM" : "cl_intel_unified_shared_memory") != NULL &&
            dsa_test_names(dsa_last_error(), "cache", NULL),
        "%s: the message names neither the extension nor the argument: %s", kind_names[k],
        dsa_last_error());
  CHECK(done == (cl_event)(uintptr_t)1, "%s: an event came back", kind_names[k]);
  st_free(clctx, &out);
  st_free(clctx, &idx);
}

/* ---- what the device takes --------------------------------------------------- */

static void probe(void) {
  cl_platform_id plat;
  clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
  size_t n = 0;
  clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &n);
  char *ext = dsa_test_xmalloc(n + 2);
  ext[0] = ' ';
  clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, n, ext + 1, NULL);
  ext[n] = ' ';
  const int usm = strstr(ext, " cl_intel_unified_shared_memory ") != NULL;
  free(ext);
  char ver[128] = "";
  clGetDeviceInfo(dev, CL_DEVICE_VERSION, sizeof ver, ver, NULL);
  int major = 0, minor = 0;
  cl_device_svm_capabilities svm = 0;
  /* NVIDIA's OpenCL reports SVM but fails every launch with an SVM
   * argument (CL_INVALID_KERNEL_ARGS, driver 580): not offered there. */
  char vendor[128] = "";
  clGetDeviceInfo(dev, CL_DEVICE_VENDOR, sizeof vendor, vendor, NULL);
  const int nvidia = strstr(vendor, "NVIDIA") != NULL;
  const int svm_ok = sscanf(ver, "OpenCL %d.%d", &major, &minor) == 2 && major >= 2 &&
                     clGetDeviceInfo(dev, CL_DEVICE_SVM_CAPABILITIES, sizeof svm, &svm, NULL) ==
                         CL_SUCCESS &&
                     svm != 0 && !nvidia;
  const unsigned mk = dsa_context_mem_kinds(ctx);
  CHECK(mk & (1u << DSA_MEM_BUFFER), "dsa_context_mem_kinds lacks DSA_MEM_BUFFER: %#x", mk);
  CHECK(!!(mk & (1u << DSA_MEM_USM)) == usm, "dsa_context_mem_kinds %#x, USM extension %d", mk,
        usm);
  CHECK(!!(mk & (1u << DSA_MEM_SVM)) == svm_ok, "dsa_context_mem_kinds %#x, SVM caps %#llx", mk,
        (unsigned long long)svm);
  CHECK(dsa_context_mem_kinds(NULL) == 0, "dsa_context_mem_kinds(NULL) is not 0");
  have[K_BUF] = 1;
  if (mk & (1u << DSA_MEM_USM)) {
#define GET(var, name) var = (name##_fn)clGetExtensionFunctionAddressForPlatform(plat, #name)
    GET(usm_dev_alloc, clDeviceMemAllocINTEL);
    GET(usm_shared_alloc, clSharedMemAllocINTEL);
    GET(usm_host_alloc, clHostMemAllocINTEL);
    GET(usm_free, clMemBlockingFreeINTEL);
    GET(usm_memcpy, clEnqueueMemcpyINTEL);
#undef GET
    CHECK(usm_dev_alloc && usm_shared_alloc && usm_host_alloc && usm_free && usm_memcpy,
          "the USM entry points are missing");
    if (usm_free && usm_memcpy) {
      /* Device capabilities of each allocation kind (0: not supported). */
      cl_bitfield cap = 0;
      have[K_USM_DEV] = usm_dev_alloc &&
                        clGetDeviceInfo(dev, CL_DEVICE_DEVICE_MEM_CAPABILITIES_INTEL, sizeof cap,
                                        &cap, NULL) == CL_SUCCESS &&
                        cap;
      cap = 0;
      const cl_device_info shared = CL_DEVICE_SINGLE_DEVICE_SHARED_MEM_CAPABILITIES_INTEL;
      have[K_USM_SHARED] =
          usm_shared_alloc &&
          clGetDeviceInfo(dev, shared, sizeof cap, &cap, NULL) == CL_SUCCESS && cap;
      cap = 0;
      have[K_USM_HOST] = usm_host_alloc &&
                         clGetDeviceInfo(dev, CL_DEVICE_HOST_MEM_CAPABILITIES_INTEL, sizeof cap,
                                         &cap, NULL) == CL_SUCCESS &&
                         cap;
    }
  }
  have[K_SVM] = (mk & (1u << DSA_MEM_SVM)) != 0;
  fprintf(stderr, "%s: memory kinds", dsa_context_device_name(ctx));
  for (int k = 0; k < NKINDS; k++)
    if (have[k]) fprintf(stderr, " [%s]", kind_names[k]);
  fprintf(stderr, "\n");
}

int main(void) {
  dsa_test_open(&ctx, &q, 0);
  clctx = dsa_context_cl_context(ctx);
  clq = dsa_queue_cl(q);
  dev = dsa_context_cl_device(ctx);
  probe();
  int any = 0;
  for (int k = 1; k < NKINDS; k++) any |= have[k];
  if (!any) {
    fprintf(stderr, "SKIP: %s takes neither USM nor SVM pointers\n",
            dsa_context_device_name(ctx));
    dsa_test_close(&ctx, &q);
    return 77;
  }

  pipeline();

  cl_int e;
  cl_context foreign = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
  CHECK(e == CL_SUCCESS && foreign, "a second cl_context: %d", (int)e);
  for (int k = 1; k < NKINDS; k++)
    if (have[k])
      for (int arg = 0; arg < 3; arg++) bad_cases(k, arg, foreign);
  if (foreign) clReleaseContext(foreign);
  const unsigned mk = dsa_context_mem_kinds(ctx);
  if (!(mk & (1u << DSA_MEM_USM))) missing_kind(K_USM_DEV);
  if (!(mk & (1u << DSA_MEM_SVM))) missing_kind(K_SVM);

  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
