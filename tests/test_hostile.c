/* Hostile arguments (issue 9): each call below must return
 * DSA_ERR_INVALID_ARGUMENT, return no event and enqueue nothing (the guarded
 * output buffers stay byte for byte as they were), or, for the aliasing
 * rule, run without touching anything outside the buffers it was given.
 *
 * Part 1 replays the audit's findings exactly; part 2 applies the same
 * families of breakage (offsets near SIZE_MAX, shape x stride past 2^63,
 * negative sizes and strides, buffers of another cl_context, NULL handles)
 * to every tensor and cache argument of the operators below. */
#include <stddef.h>
#include <stdint.h>

#include "common.h"

static dsa_context *ctx, *ctx2;
static dsa_queue *q;
static cl_mem foreign; /* a buffer of ctx2's cl_context */

/* ---- the valid calls ------------------------------------------------------ */

enum { NB = 4 }; /* 4 blocks x 1 token x 584 B = the audit's 2,336-byte cache */

typedef struct call_args {
  /* gather / insert */
  dsa_paged_cache cache;
  dsa_tensor gidx, gout, k, slots;
  /* bf16 attention */
  dsa_tensor query, kv, aidx, out;
  /* indexer K insert */
  dsa_paged_cache icache;
  dsa_tensor ik;
} call_args;

static guarded_buf cache_b, gidx_b, gout_b, k_b, slots_b, query_b, kv_b, aidx_b, out_b, icache_b;

static void setup(call_args *a) {
  memset(a, 0, sizeof *a);
  uint64_t rng = 9;
  cache_b = gbuf_create(ctx, q, NB * 584, NULL);
  a->cache = (dsa_paged_cache){cache_b.mem, cache_b.off, NB, 1, 584, DSA_CACHE_MLA_FP8};
  int32_t gi[2] = {0, 3};
  gidx_b = gbuf_create(ctx, q, sizeof gi, gi);
  a->gidx = dsa_tensor_make(gidx_b.mem, gidx_b.off, DSA_I32, 1, (int64_t[]){2});
  gout_b = gbuf_create(ctx, q, 2 * 512 * 2, NULL);
  a->gout = dsa_tensor_make(gout_b.mem, gout_b.off, DSA_BF16, 2, (int64_t[]){2, 512});
  uint16_t *kh = dsa_test_xmalloc(2 * 512 * 2);
  for (int i = 0; i < 1024; i++) kh[i] = (uint16_t)(0x3F00 + (dsa_test_rand(&rng) & 0xFF));
  k_b = gbuf_create(ctx, q, 2 * 512 * 2, kh);
  free(kh);
  a->k = dsa_tensor_make(k_b.mem, k_b.off, DSA_BF16, 2, (int64_t[]){2, 512});
  int64_t sl[2] = {1, 2};
  slots_b = gbuf_create(ctx, q, sizeof sl, sl);
  a->slots = dsa_tensor_make(slots_b.mem, slots_b.off, DSA_I64, 1, (int64_t[]){2});

  uint16_t *qh = dsa_test_xmalloc(2 * 512 * 2);
  for (int i = 0; i < 1024; i++) qh[i] = (uint16_t)(0x3C00 + (dsa_test_rand(&rng) & 0x3FF));
  query_b = gbuf_create(ctx, q, 2 * 512 * 2, qh);
  a->query = dsa_tensor_make(query_b.mem, query_b.off, DSA_BF16, 3, (int64_t[]){1, 2, 512});
  kv_b = gbuf_create(ctx, q, 4 * 512 * 2, NULL);
  free(qh);
  a->kv = dsa_tensor_make(kv_b.mem, kv_b.off, DSA_BF16, 2, (int64_t[]){4, 512});
  int32_t ai[2] = {1, 3};
  aidx_b = gbuf_create(ctx, q, sizeof ai, ai);
  a->aidx = dsa_tensor_make(aidx_b.mem, aidx_b.off, DSA_I32, 2, (int64_t[]){1, 2});
  out_b = gbuf_create(ctx, q, 2 * 512 * 2, NULL);
  a->out = dsa_tensor_make(out_b.mem, out_b.off, DSA_BF16, 3, (int64_t[]){1, 2, 512});
  icache_b = gbuf_create(ctx, q, 2 * 4 * 132, NULL);
  a->icache = (dsa_paged_cache){icache_b.mem, icache_b.off, 2, 4, 4 * 132, DSA_CACHE_INDEXER_FP8};
  /* k's first 2 x 128 bf16 serve as the indexer rows; slots {1, 2} */
  a->ik = dsa_tensor_make(k_b.mem, k_b.off, DSA_BF16, 2, (int64_t[]){2, 128});
}

static void teardown(void) {
  guarded_buf *all[] = {&cache_b, &gidx_b, &gout_b, &k_b,   &slots_b,
                        &query_b, &kv_b,   &aidx_b, &out_b, &icache_b};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gbuf_release(all[i]);
}

typedef enum { OP_GATHER, OP_INSERT, OP_ATTN, OP_IKINSERT, NOPS } op_id;
static const char *const op_names[NOPS] = {"dsa_mla_gather_slots", "dsa_mla_cache_insert",
                                           "dsa_sparse_attn_bf16", "dsa_indexer_k_insert"};

static dsa_status call(op_id op, const call_args *a, cl_event *done) {
  dsa_events ev = {0, NULL, done};
  switch (op) {
    case OP_GATHER: return dsa_mla_gather_slots(q, &a->cache, &a->gidx, &a->gout, &ev);
    case OP_INSERT: return dsa_mla_cache_insert(q, &a->k, &a->slots, &a->cache, &ev);
    case OP_ATTN:
      return dsa_sparse_attn_bf16(q, &a->query, &a->kv, &a->aidx, NULL, NULL, NULL, &a->out,
                                  NULL, &ev);
    case OP_IKINSERT:
      return dsa_indexer_k_insert(q, &a->ik, &a->slots, &a->icache, DSA_E2M1_RNE, &ev);
    default: return DSA_ERR_INTERNAL;
  }
}

/* The outputs each operator may write, snapshotted with their guard bands. */
typedef struct snap {
  const guarded_buf *b;
  uint8_t *bytes;
} snap;

static void read_all(const guarded_buf *b, uint8_t *dst) {
  clEnqueueReadBuffer(dsa_queue_cl(q), b->mem, CL_TRUE, 0, b->size + 2 * DSA_TEST_GUARD, dst, 0,
                      NULL, NULL);
}

static snap snaps[5];
static int nsnaps;

static void snapshot(void) {
  const guarded_buf *outs[] = {&cache_b, &gout_b, &out_b, &kv_b, &icache_b};
  nsnaps = 5;
  for (int i = 0; i < nsnaps; i++) {
    snaps[i].b = outs[i];
    free(snaps[i].bytes);
    snaps[i].bytes = dsa_test_xmalloc(outs[i]->size + 2 * DSA_TEST_GUARD);
    read_all(outs[i], snaps[i].bytes);
  }
}

static int unchanged(void) {
  clFinish(dsa_queue_cl(q));
  int ok = 1;
  for (int i = 0; i < nsnaps; i++) {
    size_t n = snaps[i].b->size + 2 * DSA_TEST_GUARD;
    uint8_t *now = dsa_test_xmalloc(n);
    read_all(snaps[i].b, now);
    ok &= memcmp(now, snaps[i].bytes, n) == 0;
    free(now);
  }
  return ok;
}

/* One hostile call: must be refused with no event and no write. */
static void expect_refused(op_id op, const call_args *a, const char *what) {
  cl_event done = (cl_event)(uintptr_t)1;
  dsa_status s = call(op, a, &done);
  CHECK(s == DSA_ERR_INVALID_ARGUMENT, "%s, %s: %s (%s)", op_names[op], what,
        dsa_status_name(s), dsa_last_error());
  CHECK(done == (cl_event)(uintptr_t)1, "%s, %s: an event came back", op_names[op], what);
  if (done != (cl_event)(uintptr_t)1 && done) clReleaseEvent(done);
  if (s == DSA_OK) clFinish(dsa_queue_cl(q));
  CHECK(unchanged(), "%s, %s: memory changed", op_names[op], what);
}

/* ---- part 1: the audit's findings ---------------------------------------- */

static void findings(const call_args *base) {
  call_args a;
  /* 1. out [1,512] bf16 at offset SIZE_MAX-1 (wraps to 2 bytes before). */
  a = *base;
  a.gidx.shape[0] = 1;
  a.gout.shape[0] = 1;
  a.gout.offset = SIZE_MAX - 1;
  expect_refused(OP_GATHER, &a, "finding 1: out offset SIZE_MAX-1");
  /* 1. cache offset SIZE_MAX-1023 (576 bytes before the buffer). */
  a = *base;
  a.cache.offset = SIZE_MAX - 1023;
  expect_refused(OP_GATHER, &a, "finding 1: cache offset SIZE_MAX-1023");
  expect_refused(OP_INSERT, &a, "finding 1: cache offset SIZE_MAX-1023");
  /* 2. 2^24+1 blocks of stride 2^40 on the 2,336-byte buffer; insert to slot 4. */
  a = *base;
  a.cache.num_blocks = ((int64_t)1 << 24) + 1;
  a.cache.block_stride = (int64_t)1 << 40;
  int64_t slot4[2] = {4, 4};
  clEnqueueWriteBuffer(dsa_queue_cl(q), slots_b.mem, CL_TRUE, slots_b.off, sizeof slot4, slot4, 0,
                       NULL, NULL);
  expect_refused(OP_INSERT, &a, "finding 2: 2^24+1 blocks x 2^40");
  int64_t sl[2] = {1, 2};
  clEnqueueWriteBuffer(dsa_queue_cl(q), slots_b.mem, CL_TRUE, slots_b.off, sizeof sl, sl, 0, NULL,
                       NULL);
  /* 2. kv [2^24+1, 512] with row stride 2^40. */
  a = *base;
  a.kv.shape[0] = ((int64_t)1 << 24) + 1;
  a.kv.stride[0] = (int64_t)1 << 40;
  expect_refused(OP_ATTN, &a, "finding 2: kv [2^24+1,512] stride 2^40");
  /* 3. a buffer of another cl_context, for each argument kind. */
  a = *base;
  a.cache.mem = foreign;
  expect_refused(OP_GATHER, &a, "finding 3: foreign cache");
  CHECK(strstr(dsa_last_error(), "context") != NULL, "message: %s", dsa_last_error());
  a = *base;
  a.kv.mem = foreign;
  expect_refused(OP_ATTN, &a, "finding 3: foreign kv");
  a = *base;
  a.gout.mem = foreign;
  expect_refused(OP_GATHER, &a, "finding 3: foreign out");
}

/* ---- part 2: every tensor and cache argument, every kind of breakage ------ */

enum { NT_BREAKS = 9, NC_BREAKS = 8 };

static int break_tensor(dsa_tensor *t, int c, const char **what) {
  size_t elem = dsa_dtype_size(t->dtype);
  switch (c) {
    case 0: t->offset = SIZE_MAX - elem + 1, *what = "offset SIZE_MAX-elem+1"; return 1;
    case 1: t->offset = (SIZE_MAX / 2 + 1), *what = "offset 2^63"; return 1;
    case 2: t->offset = (size_t)1 << 40, *what = "offset 2^40, past the end"; return 1;
    case 3:
      t->shape[0] = (int64_t)1 << 40, t->stride[0] = (int64_t)1 << 40;
      *what = "shape x stride = 2^80";
      return 1;
    case 4:
      t->shape[0] = ((int64_t)1 << 23) + 1, t->stride[0] = (int64_t)1 << 40;
      *what = "shape x stride x elem past 2^63";
      return 1;
    case 5: t->shape[0] = -1, *what = "negative shape"; return 1;
    case 6: t->stride[0] = -1, *what = "negative stride"; return 1;
    case 7: t->mem = foreign, *what = "foreign cl_context"; return 1;
    case 8: t->mem = NULL, *what = "NULL mem"; return 1;
  }
  return 0;
}

static int break_cache(dsa_paged_cache *k, int c, const char **what) {
  switch (c) {
    case 0: k->offset = SIZE_MAX - 1023, *what = "offset SIZE_MAX-1023"; return 1;
    case 1: k->offset = SIZE_MAX, *what = "offset SIZE_MAX"; return 1;
    case 2:
      k->num_blocks = (int64_t)1 << 40, k->block_stride = (int64_t)1 << 40;
      *what = "blocks x stride = 2^80";
      return 1;
    case 3:
      k->num_blocks = ((int64_t)1 << 23) + 1, k->block_stride = (int64_t)1 << 40;
      *what = "blocks x stride past 2^63";
      return 1;
    case 4: k->num_blocks = -1, *what = "negative num_blocks"; return 1;
    case 5: k->block_size = -1, *what = "negative block_size"; return 1;
    case 6: k->mem = foreign, *what = "foreign cl_context"; return 1;
    case 7: k->mem = NULL, *what = "NULL mem"; return 1;
  }
  return 0;
}

static void sweep(const call_args *base) {
  struct {
    op_id op;
    size_t off; /* of a dsa_tensor in call_args */
  } tensors[] = {
      {OP_GATHER, offsetof(call_args, gidx)}, {OP_GATHER, offsetof(call_args, gout)},
      {OP_INSERT, offsetof(call_args, k)},    {OP_INSERT, offsetof(call_args, slots)},
      {OP_ATTN, offsetof(call_args, query)},  {OP_ATTN, offsetof(call_args, kv)},
      {OP_ATTN, offsetof(call_args, aidx)},   {OP_ATTN, offsetof(call_args, out)},
      {OP_IKINSERT, offsetof(call_args, ik)}, {OP_IKINSERT, offsetof(call_args, slots)},
  };
  int n = 0;
  for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
    for (int c = 0; c < NT_BREAKS; c++) {
      call_args a = *base;
      dsa_tensor *t = (dsa_tensor *)((char *)&a + tensors[i].off);
      const char *what = "";
      break_tensor(t, c, &what);
      char buf[128];
      snprintf(buf, sizeof buf, "tensor %zu: %s", i, what);
      expect_refused(tensors[i].op, &a, buf);
      n++;
    }
  const op_id cache_ops[] = {OP_GATHER, OP_INSERT, OP_IKINSERT};
  for (size_t o = 0; o < 3; o++)
    for (int c = 0; c < NC_BREAKS; c++) {
      op_id op = cache_ops[o];
      call_args a = *base;
      const char *what = "";
      break_cache(op == OP_IKINSERT ? &a.icache : &a.cache, c, &what);
      char buf[128];
      snprintf(buf, sizeof buf, "cache: %s", what);
      expect_refused(op, &a, buf);
      n++;
    }
  /* NULL handles. */
  dsa_events ev = {0, NULL, NULL};
  CHECK(dsa_mla_gather_slots(NULL, &base->cache, &base->gidx, &base->gout, &ev) ==
            DSA_ERR_INVALID_ARGUMENT, "NULL queue");
  CHECK(dsa_mla_gather_slots(q, NULL, &base->gidx, &base->gout, &ev) == DSA_ERR_INVALID_ARGUMENT,
        "NULL cache");
  CHECK(dsa_mla_cache_insert(q, NULL, &base->slots, &base->cache, &ev) ==
            DSA_ERR_INVALID_ARGUMENT, "NULL k");
  CHECK(dsa_sparse_attn_bf16(q, &base->query, NULL, &base->aidx, NULL, NULL, NULL, &base->out,
                             NULL, &ev) == DSA_ERR_INVALID_ARGUMENT, "NULL kv");
  CHECK(unchanged(), "NULL handles: memory changed");
  printf("%d hostile cases\n", n);
}

/* ---- finding 4: absurd shapes whose products overflowed (UBSan) ---------- */

static void absurd_shapes(void) {
  const int64_t T40 = (int64_t)1 << 40;
  cl_mem m = cache_b.mem; /* any valid buffer: zero strides address little */
  size_t o = cache_b.off;
  dsa_status s;
  /* top-k decode: lengths [2^40] of stride 0, next_n 2^24: 2^64 rows. */
  dsa_tensor logits = {m, o, DSA_F32, 2, {0, 64}, {64, 1}};
  dsa_tensor idx = {m, o, DSA_I32, 2, {0, 8}, {8, 1}};
  dsa_tensor lens = {m, o, DSA_I32, 1, {T40}, {0}};
  dsa_topk_params tp;
  memset(&tp, 0, sizeof tp);
  tp.k = 8;
  tp.next_n = 1 << 24;
  s = dsa_topk_decode(q, &logits, &lens, &idx, &tp, NULL);
  CHECK(s == DSA_ERR_INVALID_ARGUMENT, "topk lengths x next_n overflow: %s (%s)",
        dsa_status_name(s), dsa_last_error());
  /* Q quant: T = 2^33, H = 2^31 (T*H = 2^64, then a division by zero). */
  dsa_tensor iq = {m, o, DSA_BF16, 3, {(int64_t)1 << 33, (int64_t)1 << 31, 32}, {0, 0, 1}};
  s = dsa_indexer_q_quant(q, NULL, &iq, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
  CHECK(s == DSA_ERR_INVALID_ARGUMENT, "indexer_q T x H overflow: %s (%s)", dsa_status_name(s),
        dsa_last_error());
  /* q-norm: T * (H + 1) = 2^40 * 2^40. */
  dsa_tensor qi = {m, o, DSA_BF16, 3, {T40, T40 - 1, 512}, {0, 0, 1}};
  dsa_tensor kv = {m, o, DSA_BF16, 2, {T40, 512}, {0, 1}};
  dsa_tensor pos = {m, o, DSA_I64, 1, {T40}, {0}};
  dsa_tensor cs = {m, o, DSA_F32, 2, {1, 64}, {64, 1}};
  dsa_tensor sl = {m, o, DSA_I64, 1, {T40}, {0}};
  dsa_paged_cache pc = {cache_b.mem, cache_b.off, NB, 1, 584, DSA_CACHE_MLA_FP8};
  s = dsa_mla_qnorm_rope_kv_insert(q, &qi, NULL, &kv, &pos, &cs, &sl, &pc, NULL, NULL);
  CHECK(s == DSA_ERR_INVALID_ARGUMENT, "q-norm T x (H+1) overflow: %s (%s)", dsa_status_name(s),
        dsa_last_error());
  /* dsa_tensor_make: contiguous strides past 2^63 are refused, not wrapped. */
  dsa_tensor big = dsa_tensor_make(m, o, DSA_BF16, 3, (int64_t[]){T40, T40, T40});
  CHECK(big.stride[0] == INT64_MAX && big.stride[1] == T40 && big.stride[2] == 1,
        "dsa_tensor_make strides %lld %lld %lld", (long long)big.stride[0],
        (long long)big.stride[1], (long long)big.stride[2]);
  CHECK(unchanged(), "absurd shapes: memory changed");
}

/* ---- the two-stage decode's raw workspace cl_mem ------------------------- */

static void workspace(void) {
  dsa_tensor qt = dsa_tensor_make(query_b.mem, query_b.off, DSA_BF16, 3, (int64_t[]){1, 2, 512});
  dsa_tensor it = dsa_tensor_make(aidx_b.mem, aidx_b.off, DSA_I32, 2, (int64_t[]){1, 2});
  dsa_tensor lt = dsa_tensor_make(aidx_b.mem, aidx_b.off, DSA_I32, 1, (int64_t[]){1});
  dsa_tensor ot = dsa_tensor_make(out_b.mem, out_b.off, DSA_BF16, 3, (int64_t[]){1, 2, 512});
  dsa_paged_cache pc = {cache_b.mem, cache_b.off, NB, 1, 584, DSA_CACHE_MLA_FP8};
  dsa_mla_index_set set = {&pc, &it, &lt};
  size_t need = dsa_sparse_mla_decode_workspace_size(1, 2, 0);
  cl_int e;
  cl_mem ws = clCreateBuffer(dsa_context_cl_context(ctx), CL_MEM_READ_WRITE, need + 256, NULL, &e);
  struct {
    cl_mem m;
    size_t off;
    const char *what;
  } cases[] = {{foreign, 0, "foreign workspace"},
               {NULL, 0, "NULL workspace"},
               {ws, SIZE_MAX - 255, "workspace offset SIZE_MAX-255"},
               {ws, (size_t)1 << 40, "workspace offset 2^40"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cl_event done = (cl_event)(uintptr_t)1;
    dsa_events ev = {0, NULL, &done};
    dsa_status st = dsa_sparse_mla_decode_two_stage(q, &qt, &set, NULL, NULL, NULL, &ot, NULL,
                                                    cases[i].m, cases[i].off, &ev);
    CHECK(st == DSA_ERR_INVALID_ARGUMENT && done == (cl_event)(uintptr_t)1, "%s: %s (%s)",
          cases[i].what, dsa_status_name(st), dsa_last_error());
  }
  CHECK(strstr(dsa_last_error(), "workspace") != NULL, "message: %s", dsa_last_error());
  CHECK(unchanged(), "workspace cases: memory changed");
  clReleaseMemObject(ws);
}

/* ---- the aliasing rule (docs/API.md) --------------------------------------
 * An output overlapping an input is not detected: the call is accepted, the
 * overlapping bytes' values are unspecified, and nothing outside the checked
 * ranges is touched. Here gather's out is its own cache buffer. */
static void aliasing(const call_args *base) {
  call_args a = *base;
  a.gidx.shape[0] = 1;
  a.gout = dsa_tensor_make(cache_b.mem, cache_b.off, DSA_BF16, 2, (int64_t[]){1, 512});
  CHECK_OK(call(OP_GATHER, &a, NULL));
  clFinish(dsa_queue_cl(q));
  CHECK(gbuf_guards_ok(q, &cache_b), "aliasing: guard bands of the cache changed");
}

/* ---- the valid calls work (the refusals above proved something) ---------- */

static void valid(const call_args *base) {
  for (op_id op = OP_GATHER; op < NOPS; op++) {
    cl_event done = NULL;
    CHECK_OK(call(op, base, &done));
    if (done) dsa_test_expect_complete(done, op_names[op]);
  }
  CHECK(dsa_test_read_faults(q) == 0, "no faults");
  CHECK(!unchanged(), "the valid calls wrote their outputs");
  const guarded_buf *all[] = {&cache_b, &gout_b, &out_b, &icache_b};
  for (int i = 0; i < 4; i++) CHECK(gbuf_guards_ok(q, all[i]), "guards %d", i);
}

int main(void) {
  dsa_test_open(&ctx, &q, 0);
  dsa_context_options o;
  dsa_context_options_default(&o);
  o.cache_dir = "off";
  if (dsa_context_create(&ctx2, &o) != DSA_OK) {
    fprintf(stderr, "second context: %s\n", dsa_last_error());
    return 1;
  }
  cl_int e;
  foreign = clCreateBuffer(dsa_context_cl_context(ctx2), CL_MEM_READ_WRITE, 1 << 20, NULL, &e);
  CHECK(foreign != NULL, "foreign buffer");
  call_args base;
  setup(&base);
  snapshot();
  findings(&base);
  sweep(&base);
  absurd_shapes();
  workspace();
  valid(&base);
  aliasing(&base);
  for (int i = 0; i < nsnaps; i++) free(snaps[i].bytes);
  teardown();
  clReleaseMemObject(foreign);
  dsa_context_destroy(&ctx2);
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
