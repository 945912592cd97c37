/* Addressing past 4 GiB (issue 9, item 6): an MLA cache and an indexer cache
 * whose entries lie past byte 2^32 of one buffer, written by insert and read
 * by gather, paged logits and the fused decode; bytes checked against
 * tests/ref. Built, not run by meson (tools/gpu-check.sh runs it): needs a
 * device whose CL_DEVICE_MAX_MEM_ALLOC_SIZE is >= 5 GiB, else exits 77.
 *
 * Two layouts of the MLA cache in a 5 GiB buffer: A, a small cache whose
 * offset is 4 GiB + 256 (every entry past 4 GiB); B, offset 0 with a block
 * stride of 4.5 GiB (block 1 at 4.5 GiB: the 64-bit block x stride product).
 * DSACL_BIGMEM_BASE=<bytes> moves the 4 GiB base (e.g. 65536 to check the
 * program itself on PoCL, whose buffers stop at 2 GiB). */
#include <math.h>
#include <stdint.h>

#include "common.h"
#include "ref.h"
#include "ref_indexer_logits.h"
#include "ref_indexer_quant.h"
#include "ref_sparse_mla.h"

static dsa_context *ctx;
static dsa_queue *q;

static cl_mem upload(const void *p, size_t n) {
  cl_int e;
  cl_mem m = clCreateBuffer(dsa_context_cl_context(ctx), CL_MEM_READ_WRITE, n ? n : 4, NULL, &e);
  if (!m) {
    fprintf(stderr, "clCreateBuffer %zu: %d\n", n, (int)e);
    exit(1);
  }
  if (p && n) clEnqueueWriteBuffer(dsa_queue_cl(q), m, CL_TRUE, 0, n, p, 0, NULL, NULL);
  return m;
}
static void down(cl_mem m, size_t off, void *p, size_t n) {
  cl_int e = clEnqueueReadBuffer(dsa_queue_cl(q), m, CL_TRUE, off, n, p, 0, NULL, NULL);
  CHECK(e == CL_SUCCESS, "read %zu bytes at %zu: %d", n, off, (int)e);
}
static uint16_t bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
static float from_bf16(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

enum { N = 48, BS = 16, NB = 4 }; /* tokens; block size; blocks of layout A */
#define PAGE ((int64_t)BS * 584)

int main(void) {
  dsa_test_open(&ctx, &q, 0);
  const char *env = getenv("DSACL_BIGMEM_BASE");
  const uint64_t base = env && *env ? strtoull(env, NULL, 0) : (uint64_t)4 << 30;
  const uint64_t total = base + base / 4 + ((uint64_t)64 << 20);
  cl_ulong max_alloc = 0;
  clGetDeviceInfo(dsa_context_cl_device(ctx), CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc,
                  &max_alloc, NULL);
  if (max_alloc < total) {
    printf("SKIP: max alloc %llu < %llu bytes\n", (unsigned long long)max_alloc,
           (unsigned long long)total);
    dsa_test_close(&ctx, &q);
    return 77;
  }
  printf("device %s, base %llu, buffer %llu bytes\n", dsa_context_device_name(ctx),
         (unsigned long long)base, (unsigned long long)total);
  cl_int e;
  cl_mem big = clCreateBuffer(dsa_context_cl_context(ctx), CL_MEM_READ_WRITE, total, NULL, &e);
  CHECK(big != NULL, "big buffer: %d", (int)e);
  if (!big) return dsa_test_summary();

  uint64_t rng = 7;
  uint16_t *k = dsa_test_xmalloc((size_t)N * 512 * 2);
  for (int i = 0; i < N * 512; i++)
    k[i] = bf16((float)(dsa_test_uniform(&rng) * 8 - 4) * (i % 97 == 0 ? 30.f : 1.f));
  int64_t slots[N];
  int32_t idx32[N];
  for (int i = 0; i < N; i++) slots[i] = (i * 37) % (NB * BS), idx32[i] = (int32_t)slots[i];
  cl_mem mk = upload(k, (size_t)N * 1024), ms = upload(slots, sizeof slots),
         mi = upload(idx32, sizeof idx32), mo = upload(NULL, (size_t)N * 1024);
  dsa_tensor tk = dsa_tensor_make(mk, 0, DSA_BF16, 2, (int64_t[]){N, 512});
  dsa_tensor ts = dsa_tensor_make(ms, 0, DSA_I64, 1, (int64_t[]){N});
  dsa_tensor ti = dsa_tensor_make(mi, 0, DSA_I32, 1, (int64_t[]){N});
  dsa_tensor to = dsa_tensor_make(mo, 0, DSA_BF16, 2, (int64_t[]){N, 512});

  /* The reference image of layout A (and of every slot's bytes). */
  uint8_t *img = dsa_test_xmalloc((size_t)(NB * PAGE));
  ref_mla_cache rc = {img, NB, BS, PAGE};
  CHECK(ref_mla_insert(&rc, k, 512, slots, N) == 0, "ref insert faults");

  /* ---- MLA layout A: entries past 4 GiB --------------------------------- */
  dsa_paged_cache ca = {.mem = big, .offset = (size_t)base + 256, .num_blocks = NB,
                        .block_size = BS, .block_stride = PAGE, .format = DSA_CACHE_MLA_FP8};
  CHECK_OK(dsa_mla_cache_insert(q, &tk, &ts, &ca, NULL, NULL));
  uint8_t *got = dsa_test_xmalloc((size_t)(NB * PAGE));
  down(big, ca.offset, got, (size_t)(NB * PAGE));
  for (int i = 0; i < N; i++) {
    uint64_t d = ref_mla_data_offset(&rc, slots[i]), s = ref_mla_scale_offset(&rc, slots[i]);
    CHECK(!memcmp(got + d, img + d, 576) && !memcmp(got + s, img + s, 8),
          "layout A: slot %lld bytes differ", (long long)slots[i]);
  }
  CHECK_OK(dsa_mla_gather_slots(q, &ti, &ca, &to, NULL, NULL));
  uint16_t *out = dsa_test_xmalloc((size_t)N * 1024), *want = dsa_test_xmalloc(1024);
  down(mo, 0, out, (size_t)N * 1024);
  for (int i = 0; i < N; i++) {
    ref_mla_dequant(&rc, slots[i], want);
    CHECK(!memcmp(out + (size_t)i * 512, want, 1024), "layout A gather row %d", i);
  }

  /* ---- MLA layout B: block 1 at offset stride = 4.5 GiB ------------------ */
  const int64_t stride_b = (int64_t)(base + base / 8 + (1 << 20)); /* clear of layout A */
  dsa_paged_cache cb = {.mem = big, .offset = 0, .num_blocks = 2, .block_size = BS,
                        .block_stride = stride_b, .format = DSA_CACHE_MLA_FP8};
  int64_t slots_b[N];
  int32_t idx_b[N];
  for (int i = 0; i < N; i++) slots_b[i] = BS + i % BS, idx_b[i] = (int32_t)slots_b[i];
  clEnqueueWriteBuffer(dsa_queue_cl(q), ms, CL_TRUE, 0, sizeof slots_b, slots_b, 0, NULL, NULL);
  clEnqueueWriteBuffer(dsa_queue_cl(q), mi, CL_TRUE, 0, sizeof idx_b, idx_b, 0, NULL, NULL);
  /* Tokens sharing a slot: the last one wins (in order, one token per slot
   * per launch is what the spec promises, so insert BS tokens at a time). */
  for (int g = 0; g < N / BS; g++) {
    dsa_tensor tkg = tk, tsg = ts;
    tkg.offset = (size_t)g * BS * 1024, tkg.shape[0] = BS;
    tsg.offset = (size_t)g * BS * 8, tsg.shape[0] = BS;
    CHECK_OK(dsa_mla_cache_insert(q, &tkg, &tsg, &cb, NULL, NULL));
  }
  ref_mla_cache rb = {NULL, 2, BS, stride_b};
  uint8_t tok[584], dev[584];
  for (int j = 0; j < BS; j++) {
    const int i = (N / BS - 1) * BS + j; /* the last writer of slot BS + j */
    ref_mla_quantize(k + (size_t)i * 512, tok);
    uint64_t d = ref_mla_data_offset(&rb, BS + j), s = ref_mla_scale_offset(&rb, BS + j);
    CHECK(d > ((uint64_t)1 << 32) || base < ((uint64_t)1 << 32), "layout B is past 4 GiB");
    down(big, d, dev, 576);
    down(big, s, dev + 576, 8);
    CHECK(!memcmp(dev, tok, 584), "layout B: slot %d bytes differ", BS + j);
  }
  CHECK_OK(dsa_mla_gather_slots(q, &ti, &cb, &to, NULL, NULL));
  down(mo, 0, out, (size_t)N * 1024);
  for (int i = 0; i < N; i++) {
    const int w = (N / BS - 1) * BS + i % BS;
    ref_mla_cache one = {tok, 1, 1, 584};
    ref_mla_quantize(k + (size_t)w * 512, tok);
    uint8_t lay[584]; /* one-slot image: data then scales */
    memcpy(lay, tok, 584);
    one.base = lay;
    ref_mla_dequant(&one, 0, want);
    CHECK(!memcmp(out + (size_t)i * 512, want, 1024), "layout B gather row %d", i);
  }

  /* ---- fused decode over layout A ----------------------------------------- */
  {
    enum { T = 2, H = 16, K = 32 };
    uint16_t *qh = dsa_test_xmalloc((size_t)T * H * 512 * 2);
    for (int i = 0; i < T * H * 512; i++) qh[i] = bf16((float)(dsa_test_uniform(&rng) - 0.5));
    int32_t ix[T * K];
    for (int i = 0; i < T * K; i++) ix[i] = (int32_t)slots[(i * 5) % N];
    int32_t lens[T] = {K, K - 7};
    cl_mem mq = upload(qh, (size_t)T * H * 1024), mx = upload(ix, sizeof ix),
           mout = upload(NULL, (size_t)T * H * 1024), ml = upload(lens, sizeof lens);
    dsa_tensor tl = dsa_tensor_make(ml, 0, DSA_I32, 1, (int64_t[]){T});
    dsa_tensor tq = dsa_tensor_make(mq, 0, DSA_BF16, 3, (int64_t[]){T, H, 512});
    dsa_tensor tx = dsa_tensor_make(mx, 0, DSA_I32, 2, (int64_t[]){T, K});
    dsa_tensor tout = dsa_tensor_make(mout, 0, DSA_BF16, 3, (int64_t[]){T, H, 512});
    dsa_sparse_index_set set = {&ca, &tx, &tl};
    dsa_sparse_params p;
    dsa_sparse_params_default(&p);
    CHECK_OK(dsa_sparse_mla_decode(q, &tq, &set, NULL, NULL, &tout, NULL, &p, NULL));
    uint16_t *o = dsa_test_xmalloc((size_t)T * H * 1024);
    down(mout, 0, o, (size_t)T * H * 1024);
    double *ro = dsa_test_xmalloc((size_t)T * H * 512 * 8), *rl = dsa_test_xmalloc(T * H * 8);
    ref_mla_set rs = {&rc, ix, K, K, 1, lens};
    ref_sparse_mla_decode(qh, T, H, H * 512, 512, &rs, NULL, NULL, p.softmax_scale, ro, rl);
    int bad = 0;
    for (int i = 0; i < T * H * 512; i++)
      bad += fabs(from_bf16(o[i]) - ro[i]) > 1e-2 * fmax(1.0, fabs(ro[i]));
    CHECK(bad == 0, "fused decode past 4 GiB: %d of %d values off (first: %g vs %g, %g vs %g)", bad,
          T * H * 512, from_bf16(o[0]), ro[0], from_bf16(o[1]), ro[1]);
    free(qh), free(o), free(ro), free(rl);
    clReleaseMemObject(mq), clReleaseMemObject(mx), clReleaseMemObject(mout);
    clReleaseMemObject(ml);
  }

  /* ---- indexer cache past 4 GiB: insert, then paged logits ---------------- */
  {
    enum { IBS = 64, INB = 2, H = 64, MML = 128 };
    const int64_t ipage = (int64_t)IBS * 132;
    const int n = IBS * INB;
    uint16_t *ik = dsa_test_xmalloc((size_t)n * 256);
    for (int i = 0; i < n * 128; i++) ik[i] = bf16((float)(dsa_test_uniform(&rng) * 2 - 1));
    int64_t isl[IBS * INB];
    for (int i = 0; i < n; i++) isl[i] = i;
    cl_mem mik = upload(ik, (size_t)n * 256), mis = upload(isl, sizeof isl);
    dsa_tensor tik = dsa_tensor_make(mik, 0, DSA_BF16, 2, (int64_t[]){n, 128});
    dsa_tensor tis = dsa_tensor_make(mis, 0, DSA_I64, 1, (int64_t[]){n});
    dsa_paged_cache ic = {.mem = big, .offset = (size_t)base + ((size_t)32 << 20),
                          .num_blocks = INB, .block_size = IBS, .block_stride = ipage,
                          .format = DSA_CACHE_INDEXER_FP8};
    CHECK_OK(dsa_indexer_k_insert(q, &tik, &tis, &ic, NULL, NULL));
    uint8_t *iimg = dsa_test_xmalloc((size_t)(INB * ipage)),
            *idev = dsa_test_xmalloc((size_t)(INB * ipage));
    ref_idx_cache rci = {iimg, INB, IBS, ipage, 0};
    CHECK(ref_indexer_k_insert(&rci, ik, 128, isl, n, 0) == 0, "ref indexer insert faults");
    down(big, ic.offset, idev, (size_t)(INB * ipage));
    CHECK(!memcmp(idev, iimg, (size_t)(INB * ipage)), "indexer cache past 4 GiB differs");

    uint8_t *qv = dsa_test_xmalloc((size_t)H * 128);
    for (int i = 0; i < H * 128; i++) qv[i] = (uint8_t)(dsa_test_rand(&rng) & 0x77);
    float w[H];
    for (int i = 0; i < H; i++) w[i] = (float)(dsa_test_uniform(&rng) - 0.5);
    int32_t cl = n, bt[INB] = {1, 0};
    cl_mem mqv = upload(qv, (size_t)H * 128), mw = upload(w, sizeof w),
           mcl = upload(&cl, 4), mbt = upload(bt, sizeof bt), mlg = upload(NULL, MML * 4);
    dsa_tensor tqv = dsa_tensor_make(mqv, 0, DSA_E4M3, 4, (int64_t[]){1, 1, H, 128});
    dsa_tensor tw = dsa_tensor_make(mw, 0, DSA_F32, 2, (int64_t[]){1, H});
    dsa_tensor tcl = dsa_tensor_make(mcl, 0, DSA_I32, 1, (int64_t[]){1});
    dsa_tensor tbt = dsa_tensor_make(mbt, 0, DSA_I32, 2, (int64_t[]){1, INB});
    dsa_tensor tlg = dsa_tensor_make(mlg, 0, DSA_F32, 2, (int64_t[]){1, MML});
    CHECK_OK(dsa_indexer_paged_logits(q, &tqv, NULL, &tw, &tcl, &tbt, &ic, &tlg, NULL, NULL));
    float lg[MML];
    double rl[MML];
    down(mlg, 0, lg, sizeof lg);
    ref_il_cache ril = {iimg, INB, IBS, ipage};
    ref_paged_mqa_logits(0, 1, 1, H, qv, NULL, &ril, w, &cl, 1, bt, INB, MML, 1, rl);
    int bad = 0;
    for (int i = 0; i < MML; i++)
      bad += !(isinf(rl[i]) ? isinf(lg[i]) : fabs(lg[i] - rl[i]) <= 1e-3 * fmax(1.0, fabs(rl[i])));
    CHECK(bad == 0, "paged logits past 4 GiB: %d of %d values off", bad, MML);
    free(ik), free(iimg), free(idev), free(qv);
    cl_mem all[] = {mik, mis, mqv, mw, mcl, mbt, mlg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) clReleaseMemObject(all[i]);
  }
  CHECK(dsa_test_read_faults(q) == 0, "no faults");

  free(k), free(img), free(got), free(out), free(want);
  clReleaseMemObject(mk), clReleaseMemObject(ms), clReleaseMemObject(mi), clReleaseMemObject(mo);
  clReleaseMemObject(big);
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
