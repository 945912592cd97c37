/* Hostile arguments (issue 9): each call below must return
 * DSA_ERR_INVALID_ARGUMENT, return no event and enqueue nothing (the guarded
 * output buffers stay byte for byte as they were), or, for the aliasing
 * rule, run without touching anything outside the buffers it was given.
 *
 * Part 1 replays the audit's findings exactly; part 2 applies the same
 * families of breakage (offsets near SIZE_MAX, shape x stride past 2^63,
 * negative sizes and strides, buffers of another cl_context, NULL handles)
 * to every tensor and cache argument of the four operators below; part 3
 * (every_operator) does the same, with more kinds, for every public operator
 * and form, plus bad event lists, absurd zero-stride counts where launch
 * geometry is a product of shapes, and the aliasing rule; paged_wide_table
 * is the regression check of a wrapped W x bs in the paged logits. */
#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* The two-stage decode's workspace: bytes [off, off + n) of m as a u8 tensor. */
#define WS_BYTES(m, off, n)                                                        \
  (&(dsa_tensor){.mem = (m), .offset = (off), .dtype = DSA_U8, .ndim = 1,          \
                 .shape = {(int64_t)(n)}, .stride = {1}})

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
  a->cache = (dsa_paged_cache){.mem = cache_b.mem, .offset = cache_b.off, .num_blocks = NB,
                               .block_size = 1, .block_stride = 584, .format = DSA_CACHE_MLA_FP8};
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
  a->icache = (dsa_paged_cache){.mem = icache_b.mem, .offset = icache_b.off, .num_blocks = 2,
                                .block_size = 4, .block_stride = 4 * 132,
                                .format = DSA_CACHE_INDEXER_FP8};
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
    case OP_GATHER: return dsa_mla_gather_slots(q, &a->gidx, &a->cache, &a->gout, NULL, &ev);
    case OP_INSERT: return dsa_mla_cache_insert(q, &a->k, &a->slots, &a->cache, NULL, &ev);
    case OP_ATTN:
      return dsa_sparse_attn_bf16(q, &a->query, &a->kv, &a->aidx, NULL, NULL, &a->out, NULL,
                                  NULL, &ev);
    case OP_IKINSERT:
      return dsa_indexer_k_insert(q, &a->ik, &a->slots, &a->icache, NULL, &ev);
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
  dsa_test_write_at(q, slots_b.mem, slots_b.off, sizeof slot4, slot4);
  expect_refused(OP_INSERT, &a, "finding 2: 2^24+1 blocks x 2^40");
  int64_t sl[2] = {1, 2};
  dsa_test_write_at(q, slots_b.mem, slots_b.off, sizeof sl, sl);
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
  CHECK(dsa_mla_gather_slots(NULL, &base->gidx, &base->cache, &base->gout, NULL, &ev) ==
            DSA_ERR_INVALID_ARGUMENT, "NULL queue");
  CHECK(dsa_mla_gather_slots(q, &base->gidx, NULL, &base->gout, NULL, &ev) == DSA_ERR_INVALID_ARGUMENT,
        "NULL cache");
  CHECK(dsa_mla_cache_insert(q, NULL, &base->slots, &base->cache, NULL, &ev) ==
            DSA_ERR_INVALID_ARGUMENT, "NULL k");
  CHECK(dsa_sparse_attn_bf16(q, &base->query, NULL, &base->aidx, NULL, NULL, &base->out, NULL,
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
  dsa_tensor logits = {.mem = m, .offset = o, .dtype = DSA_F32, .ndim = 2, .shape = {0, 64},
                       .stride = {64, 1}};
  dsa_tensor idx = {.mem = m, .offset = o, .dtype = DSA_I32, .ndim = 2, .shape = {0, 8},
                    .stride = {8, 1}};
  dsa_tensor lens = {.mem = m, .offset = o, .dtype = DSA_I32, .ndim = 1, .shape = {T40},
                     .stride = {0}};
  dsa_topk_params tp;
  memset(&tp, 0, sizeof tp);
  tp.k = 8;
  tp.next_n = 1 << 24;
  s = dsa_topk_decode(q, &logits, &lens, &idx, &tp, NULL);
  CHECK(s == DSA_ERR_INVALID_ARGUMENT, "topk lengths x next_n overflow: %s (%s)",
        dsa_status_name(s), dsa_last_error());
  /* Q quant: T = 2^33, H = 2^31 (T*H = 2^64, then a division by zero). */
  dsa_tensor iq = {.mem = m, .offset = o, .dtype = DSA_BF16, .ndim = 3,
                   .shape = {(int64_t)1 << 33, (int64_t)1 << 31, 32}, .stride = {0, 0, 1}};
  s = dsa_indexer_q_quant(q, NULL, &iq, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
  CHECK(s == DSA_ERR_INVALID_ARGUMENT, "indexer_q T x H overflow: %s (%s)", dsa_status_name(s),
        dsa_last_error());
  /* q-norm: T * (H + 1) = 2^40 * 2^40. */
  dsa_tensor qi = {.mem = m, .offset = o, .dtype = DSA_BF16, .ndim = 3,
                   .shape = {T40, T40 - 1, 512}, .stride = {0, 0, 1}};
  dsa_tensor kv = {.mem = m, .offset = o, .dtype = DSA_BF16, .ndim = 2, .shape = {T40, 512},
                   .stride = {0, 1}};
  dsa_tensor pos = {.mem = m, .offset = o, .dtype = DSA_I64, .ndim = 1, .shape = {T40},
                    .stride = {0}};
  dsa_tensor cs = {.mem = m, .offset = o, .dtype = DSA_F32, .ndim = 2, .shape = {1, 64},
                   .stride = {64, 1}};
  dsa_tensor sl = {.mem = m, .offset = o, .dtype = DSA_I64, .ndim = 1, .shape = {T40},
                   .stride = {0}};
  dsa_paged_cache pc = {.mem = cache_b.mem, .offset = cache_b.off, .num_blocks = NB,
                        .block_size = 1, .block_stride = 584, .format = DSA_CACHE_MLA_FP8};
  s = dsa_mla_qnorm_rope_kv_insert(q, &qi, &kv, &pos, &cs, &sl, &pc, NULL, NULL, NULL);
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
  dsa_paged_cache pc = {.mem = cache_b.mem, .offset = cache_b.off, .num_blocks = NB,
                        .block_size = 1, .block_stride = 584, .format = DSA_CACHE_MLA_FP8};
  dsa_sparse_index_set set = {&pc, &it, &lt};
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
    dsa_status st = dsa_sparse_mla_decode_two_stage(q, &qt, &set, NULL, NULL, &ot, NULL,
                                                    WS_BYTES(cases[i].m, cases[i].off, need),
                                                    NULL, &ev);
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

/* ---- part 3: every public operator -----------------------------------------
 * One case per operator and form (FP8 / MXFP4, 1-D / 2-D lengths, optional
 * tensors given): a valid call whose tensors and paged caches all live in
 * one guard-patterned arena buffer, so "nothing written" is one read of the
 * arena. Each tensor argument gets every tensor breakage kind below, each
 * cache every cache kind, each required pointer NULL; the queue NULL; the
 * event list four bad forms; the two-stage decode's workspace its own kinds;
 * and, where the operator derives launch geometry from shape products,
 * shapes of 2^40 with zero strides (in bounds, absurd counts). Then the
 * aliasing rule over every operator (alias_every_operator). */

enum { MAXT = 12, MAXC = 2 };

typedef enum {
  X_GATHER_PAGED, X_SLOT_MAPPING, X_SWA, X_GLOBAL_TOPK, X_C128, X_COMBINE, X_MIXED, X_MQA,
  X_MQA4, X_PAGED, X_PAGED4, X_Q8, X_Q4, X_KGATHER8, X_KGATHER4, X_KINSERT4, X_QNORM, X_ATTN,
  X_DECODE, X_DECODE2, X_TOPK_PREFILL, X_TOPK_DECODE, X_TOPK_DECODE2, X_GATHER_SLOTS, X_INSERT,
  X_KINSERT8, X_OUTQ, X_MTP_IN, X_MTP_HEAD, X_CSAVE, X_CCOMP, NX
} xop;

typedef struct opcase {
  xop id;
  const char *name; /* the operator, as its messages name it */
  int nt, nc;
  dsa_tensor t[MAXT];
  const char *tn[MAXT];
  unsigned opt;    /* tensor i may be NULL (an optional argument) */
  unsigned nulls;  /* tensors passed as NULL */
  dsa_paged_cache c[MAXC];
  unsigned cnulls; /* caches passed as NULL */
  int has_ws;      /* the two-stage decode: a workspace */
  cl_mem ws;
  size_t ws_off;
} opcase;

static cl_mem arena;
static uint8_t *arena_host, *arena_snap, *arena_now;
static size_t arena_size, arena_used;

static size_t arena_alloc(size_t bytes) {
  size_t off = arena_used + DSA_TEST_GUARD;
  arena_used = (off + bytes + 255) / 256 * 256;
  if (arena_used + DSA_TEST_GUARD > arena_size) {
    fprintf(stderr, "arena too small\n");
    exit(1);
  }
  return off;
}

/* A contiguous tensor in the arena; integers hold 0, 1, 0, 1, ... (valid
 * block ids, slots, positions, short lengths), everything else the guard
 * pattern (finite or NaN-coded values the operators accept as data). */
static void add(opcase *x, const char *nm, dsa_dtype dt, int nd, const int64_t *shape, int opt) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  size_t es = dsa_dtype_size(dt), off = arena_alloc((size_t)n * es);
  for (int64_t i = 0; i < n; i++) {
    if (dt == DSA_I32) {
      int32_t v = (int32_t)(i % 2);
      memcpy(arena_host + off + i * 4, &v, 4);
    } else if (dt == DSA_I64) {
      int64_t v = i % 2;
      memcpy(arena_host + off + i * 8, &v, 8);
    }
  }
  x->t[x->nt] = dsa_tensor_make(arena, off, dt, nd, shape);
  x->tn[x->nt] = nm;
  if (opt) x->opt |= 1u << x->nt;
  x->nt++;
}
#define ADD(x, nm, dt, opt, ...) \
  add(x, nm, dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
      (int64_t[]){__VA_ARGS__}, opt)

static void addc(opcase *x, dsa_cache_format f, int64_t blocks, int32_t bs) {
  int64_t stride = bs * (int64_t)dsa_cache_token_bytes(f);
  size_t off = arena_alloc((size_t)(blocks * stride));
  x->c[x->nc++] = (dsa_paged_cache){.mem = arena, .offset = off, .num_blocks = blocks,
                                    .block_size = bs, .block_stride = stride, .format = f};
}

static opcase xcases[NX];

static void build_cases(void) {
  static const char *const names[NX] = {
      "dsa_mla_gather_paged",   "dsa_index_compressed_slot_mapping", "dsa_index_swa",
      "dsa_index_global_topk", "dsa_index_c128_topk",      "dsa_index_combine_topk_swa",
      "dsa_index_mixed_sparse", "dsa_indexer_logits",             "dsa_indexer_logits",
      "dsa_indexer_paged_logits",   "dsa_indexer_paged_logits",  "dsa_indexer_q_quant",
      "dsa_indexer_q_quant",    "dsa_indexer_k_gather",        "dsa_indexer_k_gather",
      "dsa_indexer_k_insert",   "dsa_mla_qnorm_rope_kv_insert", "dsa_sparse_attn_bf16",
      "dsa_sparse_mla_decode",  "dsa_sparse_mla_decode_two_stage", "dsa_topk_prefill",
      "dsa_topk_decode",        "dsa_topk_decode",             "dsa_mla_gather_slots",
      "dsa_mla_cache_insert",   "dsa_indexer_k_insert",        "dsa_output_inv_rope_fp8_quant",
      "dsa_mtp_input_rmsnorm",  "dsa_mtp_shared_head_rmsnorm",
      "dsa_compressor_save_states", "dsa_compressor_compress_insert"};
  const dsa_dtype I32 = DSA_I32, I64 = DSA_I64, U8 = DSA_U8, F32 = DSA_F32, BF = DSA_BF16,
                  E4 = DSA_E4M3, E2 = DSA_E2M1X2, UE = DSA_UE8M0;
  for (int i = 0; i < NX; i++) {
    opcase *x = &xcases[i];
    memset(x, 0, sizeof *x);
    x->id = (xop)i;
    x->name = names[i];
    switch ((xop)i) {
      case X_GATHER_PAGED: /* cache, seq_lens, gather_lens, block_table, out */
        addc(x, DSA_CACHE_MLA_FP8, 4, 2);
        ADD(x, "seq_lens", I32, 0, 2);
        ADD(x, "gather_lens", I32, 1, 2);
        ADD(x, "block_table", I32, 0, 2, 2);
        ADD(x, "out", BF, 0, 2, 4, 512);
        break;
      case X_SLOT_MAPPING:
        ADD(x, "query_start_loc", I32, 0, 3);
        ADD(x, "seq_lens", I32, 0, 2);
        ADD(x, "block_table", I32, 0, 2, 2);
        ADD(x, "slot_mapping", I64, 0, 4);
        break;
      case X_SWA:
        ADD(x, "positions", I64, 0, 2);
        ADD(x, "token_to_req", I32, 1, 2);
        ADD(x, "is_valid_token", U8, 1, 2);
        ADD(x, "block_table", I32, 0, 2, 2);
        ADD(x, "indices", I32, 0, 2, 4);
        ADD(x, "lens", I32, 0, 2);
        break;
      case X_GLOBAL_TOPK:
        ADD(x, "topk_local", I32, 0, 2, 4);
        ADD(x, "token_to_req", I32, 1, 2);
        ADD(x, "block_table", I32, 0, 2, 2);
        ADD(x, "is_valid_token", U8, 1, 2);
        ADD(x, "out", I32, 0, 2, 4);
        ADD(x, "lens", I32, 1, 2);
        break;
      case X_C128: /* token_to_req NULL: token t is request t */
        ADD(x, "positions", I64, 0, 2);
        ADD(x, "token_to_req", I32, 1, 2);
        ADD(x, "block_table", I32, 1, 2, 2);
        ADD(x, "is_valid_token", U8, 1, 2);
        ADD(x, "out", I32, 0, 2, 4);
        ADD(x, "lens", I32, 1, 2);
        break;
      case X_COMBINE:
        ADD(x, "topk", I32, 0, 2, 4);
        ADD(x, "query_start_loc", I32, 0, 3);
        ADD(x, "seq_lens", I32, 0, 2);
        ADD(x, "gather_lens", I32, 0, 2);
        ADD(x, "out", I32, 0, 2, 8);
        ADD(x, "lens", I32, 0, 2);
        break;
      case X_MIXED: /* Td = 1 decode + Tp = 1 prefill token, R = 2 */
        ADD(x, "decode_swa_indices", I32, 0, 1, 4);
        ADD(x, "decode_compressed_indices", I32, 1, 1, 4);
        ADD(x, "decode_compressed_lens", I32, 1, 1);
        ADD(x, "decode_is_valid_token", U8, 1, 1);
        ADD(x, "prefill_topk_indices", I32, 0, 1, 4);
        ADD(x, "query_start_loc", I32, 0, 3);
        ADD(x, "seq_lens", I32, 0, 2);
        ADD(x, "token_to_req", I32, 0, 2);
        ADD(x, "swa_block_table", I32, 0, 2, 2);
        ADD(x, "compressed_block_table", I32, 1, 2, 2);
        ADD(x, "out", I32, 0, 2, 8);
        ADD(x, "lens", I32, 0, 2);
        break;
      case X_MQA:
        ADD(x, "query", E4, 0, 2, 2, 32);
        ADD(x, "k", E4, 0, 4, 32);
        ADD(x, "k_scale", F32, 0, 4);
        ADD(x, "weights", F32, 0, 2, 2);
        ADD(x, "ks", I32, 0, 2);
        ADD(x, "ke", I32, 0, 2);
        ADD(x, "logits", F32, 0, 2, 4);
        break;
      case X_MQA4:
        ADD(x, "query", E2, 0, 2, 2, 16);
        ADD(x, "query_scale", UE, 0, 2, 2, 1);
        ADD(x, "k", E2, 0, 4, 16);
        ADD(x, "k_scale", UE, 0, 4, 1);
        ADD(x, "weights", F32, 0, 2, 2);
        ADD(x, "ks", I32, 0, 2);
        ADD(x, "ke", I32, 0, 2);
        ADD(x, "logits", BF, 0, 2, 4);
        break;
      case X_PAGED:
        addc(x, DSA_CACHE_INDEXER_FP8, 2, 4);
        ADD(x, "query", E4, 0, 2, 1, 2, 128);
        ADD(x, "weights", F32, 0, 2, 2);
        ADD(x, "context_lens", I32, 0, 2);
        ADD(x, "block_tables", I32, 0, 2, 2);
        ADD(x, "logits", F32, 0, 2, 8);
        break;
      case X_PAGED4: /* 2-D context lengths */
        addc(x, DSA_CACHE_INDEXER_MXFP4, 2, 4);
        ADD(x, "query", E2, 0, 1, 2, 2, 64);
        ADD(x, "query_scale", UE, 0, 1, 2, 2, 4);
        ADD(x, "weights", F32, 0, 2, 2);
        ADD(x, "context_lens", I32, 0, 1, 2);
        ADD(x, "block_tables", I32, 0, 1, 2);
        ADD(x, "logits", F32, 0, 2, 8);
        break;
      case X_Q8:
      case X_Q4:
        ADD(x, "positions", I64, 0, 2);
        ADD(x, "index_q", BF, 0, 2, 2, 32);
        ADD(x, "cos_sin", F32, 0, 4, 8);
        ADD(x, "weights", F32, 0, 2, 2);
        if (i == X_Q8) {
          ADD(x, "out_q", E4, 0, 2, 2, 32);
          ADD(x, "out_weights", F32, 0, 2, 2);
        } else {
          ADD(x, "out_q", E2, 0, 2, 2, 16);
          ADD(x, "out_weights", F32, 0, 2, 2);
          ADD(x, "out_scales", UE, 0, 2, 2, 1);
        }
        break;
      case X_KGATHER8:
      case X_KGATHER4:
        addc(x, i == X_KGATHER8 ? DSA_CACHE_INDEXER_FP8 : DSA_CACHE_INDEXER_MXFP4, 2, 4);
        ADD(x, "block_table", I32, 0, 2, 2);
        ADD(x, "cu_seqlens", I32, 0, 3);
        if (i == X_KGATHER8) {
          ADD(x, "k_out", E4, 0, 4, 128);
          ADD(x, "k_scale", F32, 0, 4);
        } else {
          ADD(x, "k_out", E2, 0, 4, 64);
          ADD(x, "k_scale", UE, 0, 4, 4);
        }
        break;
      case X_KINSERT4:
      case X_KINSERT8:
        addc(x, i == X_KINSERT4 ? DSA_CACHE_INDEXER_MXFP4 : DSA_CACHE_INDEXER_FP8, 2, 4);
        ADD(x, "k", BF, 0, 2, 128);
        ADD(x, "slot_mapping", I64, 0, 2);
        break;
      case X_QNORM:
        addc(x, DSA_CACHE_MLA_FP8, 2, 2);
        ADD(x, "q_in", BF, 0, 2, 2, 512);
        ADD(x, "q_out", BF, 1, 2, 2, 512);
        ADD(x, "kv", BF, 0, 2, 512);
        ADD(x, "positions", I64, 0, 2);
        ADD(x, "cos_sin", F32, 0, 4, 64);
        ADD(x, "slot_mapping", I64, 0, 2);
        break;
      case X_ATTN:
        ADD(x, "query", BF, 0, 1, 2, 512);
        ADD(x, "kv", BF, 0, 4, 512);
        ADD(x, "indices", I32, 0, 1, 2);
        ADD(x, "lens", I32, 1, 1);
        ADD(x, "attn_sink", F32, 1, 2);
        ADD(x, "out", BF, 0, 1, 2, 512);
        ADD(x, "lse", F32, 1, 1, 2);
        break;
      case X_DECODE:
      case X_DECODE2: /* main set: cache 0, tensors 1-2; extra set: cache 1, tensors 3-4 */
        addc(x, DSA_CACHE_MLA_FP8, 2, 2);
        addc(x, DSA_CACHE_MLA_FP8, 2, 2);
        ADD(x, "query", BF, 0, 1, 2, 512);
        ADD(x, "main_set->indices", I32, 0, 1, 2);
        ADD(x, "main_set->lens", I32, 1, 1);
        ADD(x, "extra_set->indices", I32, 0, 1, 2);
        ADD(x, "extra_set->lens", I32, 1, 1);
        ADD(x, "attn_sink", F32, 1, 2);
        ADD(x, "out", BF, 0, 1, 2, 512);
        ADD(x, "lse", F32, 1, 1, 2);
        if (i == X_DECODE2) {
          x->has_ws = 1;
          x->ws_off = arena_alloc(dsa_sparse_mla_decode_workspace_size(1, 2, 2));
        }
        break;
      case X_TOPK_PREFILL:
        ADD(x, "logits", F32, 0, 2, 8);
        ADD(x, "row_starts", I32, 0, 2);
        ADD(x, "row_ends", I32, 0, 2);
        ADD(x, "indices", I32, 0, 2, 4);
        break;
      case X_TOPK_DECODE:
      case X_TOPK_DECODE2:
        ADD(x, "logits", F32, 0, 2, 8);
        if (i == X_TOPK_DECODE)
          ADD(x, "lengths", I32, 0, 2);
        else
          ADD(x, "lengths", I32, 0, 1, 2);
        ADD(x, "indices", I32, 0, 2, 4);
        break;
      case X_GATHER_SLOTS:
        addc(x, DSA_CACHE_MLA_FP8, 2, 2);
        ADD(x, "indices", I32, 0, 2);
        ADD(x, "out", BF, 0, 2, 512);
        break;
      case X_INSERT:
        addc(x, DSA_CACHE_MLA_FP8, 2, 2);
        ADD(x, "k", BF, 0, 2, 512);
        ADD(x, "slot_mapping", I64, 0, 2);
        break;
      case X_OUTQ: /* 2 tokens, 2 heads in 1 group, Tp 4 */
        ADD(x, "o", BF, 0, 2, 2, 512);
        ADD(x, "positions", I64, 0, 2);
        ADD(x, "cos_sin", F32, 0, 4, 64);
        ADD(x, "out", E4, 0, 1, 2, 1024);
        ADD(x, "scales", F32, 0, 1, 8, 4);
        break;
      case X_MTP_IN:
        ADD(x, "inputs_embeds", BF, 0, 2, 64);
        ADD(x, "positions", I64, 0, 2);
        ADD(x, "previous_hidden", BF, 0, 2, 2, 64);
        ADD(x, "enorm_weight", F32, 0, 64);
        ADD(x, "hnorm_weight", BF, 0, 64);
        ADD(x, "enorm_out", BF, 0, 2, 64);
        ADD(x, "hnorm_out", BF, 0, 2, 2, 64);
        break;
      case X_MTP_HEAD:
        ADD(x, "x", BF, 0, 2, 64);
        ADD(x, "weight", F32, 0, 64);
        ADD(x, "out", BF, 0, 2, 64);
        break;
      case X_CSAVE: /* ratio 4, width 8 */
        ADD(x, "kv", F32, 0, 2, 8);
        ADD(x, "score", F32, 0, 2, 8);
        ADD(x, "ape", F32, 0, 4, 8);
        ADD(x, "positions", I64, 0, 2);
        ADD(x, "slot_mapping", I64, 0, 2);
        ADD(x, "state", F32, 0, 2, 4, 16);
        break;
      case X_CCOMP: /* ratio 4, indexer FP8 head (state rows of 2 * 2 * 128) */
        addc(x, DSA_CACHE_INDEXER_FP8, 2, 4);
        ADD(x, "state", F32, 0, 2, 4, 512);
        ADD(x, "block_table", I32, 0, 2, 2);
        ADD(x, "token_to_req", I32, 1, 2);
        ADD(x, "positions", I64, 0, 2);
        ADD(x, "slot_mapping", I64, 0, 2);
        ADD(x, "norm_weight", F32, 0, 128);
        ADD(x, "cos_sin", F32, 0, 4, 64);
        ADD(x, "cache_slot_mapping", I64, 0, 2);
        break;
      case NX: break;
    }
  }
}

#define T(i) ((x->nulls >> (i) & 1) ? NULL : &x->t[i])
#define C(i) ((x->cnulls >> (i) & 1) ? NULL : &x->c[i])

static dsa_status xcall(const opcase *x, dsa_queue *qq, const dsa_events *ev) {
  switch (x->id) {
    case X_GATHER_PAGED: return dsa_mla_gather_paged(qq, T(0), T(1), T(2), C(0), T(3), &(dsa_mla_gather_paged_params){.offset = 1}, ev);
    case X_SLOT_MAPPING: {
      dsa_index_compressed_slot_mapping_params p;
      dsa_index_compressed_slot_mapping_params_default(&p);
      p.block_size = 4;
      return dsa_index_compressed_slot_mapping(qq, T(0), T(1), T(2), T(3), &p, ev);
    }
    case X_SWA: {
      dsa_index_swa_params p;
      dsa_index_swa_params_default(&p);
      p.window = 4, p.block_size = 4;
      return dsa_index_swa(qq, T(0), T(1), T(2), T(3), T(4), T(5), &p, ev);
    }
    case X_GLOBAL_TOPK: {
      dsa_index_global_topk_params p;
      dsa_index_global_topk_params_default(&p);
      p.block_size = 4;
      return dsa_index_global_topk(qq, T(0), T(1), T(2), T(3), T(4), T(5), &p, ev);
    }
    case X_C128: {
      dsa_index_c128_topk_params p;
      dsa_index_c128_topk_params_default(&p);
      p.compress_ratio = 4;
      return dsa_index_c128_topk(qq, T(0), T(1), T(2), T(3), T(4), T(5), &p, ev);
    }
    case X_COMBINE: {
      dsa_index_combine_topk_swa_params p;
      dsa_index_combine_topk_swa_params_default(&p);
      p.window = 4, p.topk = 4, p.M = 16, p.N = 8;
      return dsa_index_combine_topk_swa(qq, T(0), T(1), T(2), T(3), T(4), T(5), &p, ev);
    }
    case X_MIXED: {
      dsa_index_mixed_sparse_params p;
      dsa_index_mixed_sparse_params_default(&p);
      p.window = 4, p.topk = 4, p.swa_block_size = 4, p.compressed_block_size = 4;
      dsa_index_mixed_sparse_inputs in = {T(0), T(1), T(2), T(3), T(4), T(5), T(6), T(7), T(8), T(9)};
      return dsa_index_mixed_sparse(qq, &in, T(10), T(11), &p, ev);
    }
    case X_MQA: return dsa_indexer_logits(qq, T(0), NULL, T(1), T(2), T(3), T(4), T(5), T(6), NULL, ev);
    case X_MQA4:
      return dsa_indexer_logits(qq, T(0), T(1), T(2), T(3), T(4), T(5), T(6), T(7), NULL, ev);
    case X_PAGED:
      return dsa_indexer_paged_logits(qq, T(0), NULL, T(1), T(2), T(3), C(0), T(4), NULL, ev);
    case X_PAGED4:
      return dsa_indexer_paged_logits(qq, T(0), T(1), T(2), T(3), T(4), C(0), T(5), NULL, ev);
    case X_Q8: return dsa_indexer_q_quant(qq, T(0), T(1), T(2), T(3), T(4), NULL, T(5), NULL, ev);
    case X_Q4: return dsa_indexer_q_quant(qq, T(0), T(1), T(2), T(3), T(4), T(6), T(5), NULL, ev);
    case X_KGATHER8:
    case X_KGATHER4: return dsa_indexer_k_gather(qq, T(1), T(0), C(0), T(2), T(3), NULL, ev);
    case X_KINSERT4:
    case X_KINSERT8: return dsa_indexer_k_insert(qq, T(0), T(1), C(0), NULL, ev);
    case X_GATHER_SLOTS: return dsa_mla_gather_slots(qq, T(0), C(0), T(1), NULL, ev);
    case X_INSERT: return dsa_mla_cache_insert(qq, T(0), T(1), C(0), NULL, ev);
    case X_MTP_IN:
      return dsa_mtp_input_rmsnorm(qq, T(0), T(1), T(2), T(3), T(4), T(5), T(6), NULL, ev);
    case X_MTP_HEAD: return dsa_mtp_shared_head_rmsnorm(qq, T(0), T(1), T(2), NULL, ev);
    case X_CSAVE:
      return dsa_compressor_save_states(qq, T(0), T(1), T(2), T(3), T(4), T(5), NULL, ev);
    case X_CCOMP:
      return dsa_compressor_compress_insert(qq, T(0), T(1), T(2), T(3), T(4), T(5), T(6), T(7),
                                            C(0), NULL, ev);
    case X_QNORM:
      return dsa_mla_qnorm_rope_kv_insert(qq, T(0), T(2), T(3), T(4), T(5), C(0), T(1), NULL, ev);
    case X_ATTN:
      return dsa_sparse_attn_bf16(qq, T(0), T(1), T(2), T(3), T(4), T(5), T(6), NULL, ev);
    case X_DECODE:
    case X_DECODE2: {
      dsa_sparse_index_set m = {C(0), T(1), T(2)}, e = {C(1), T(3), T(4)};
      if (x->id == X_DECODE)
        return dsa_sparse_mla_decode(qq, T(0), &m, &e, T(5), T(6), T(7), NULL, ev);
      return dsa_sparse_mla_decode_two_stage(
          qq, T(0), &m, &e, T(5), T(6), T(7),
          WS_BYTES(x->ws, x->ws_off, dsa_sparse_mla_decode_workspace_size(1, 2, 2)), NULL,
                                             ev);
    }
    case X_TOPK_PREFILL: {
      dsa_topk_params p;
      dsa_topk_params_default(&p);
      p.k = 4;
      return dsa_topk_prefill(qq, T(0), T(1), T(2), T(3), &p, ev);
    }
    case X_TOPK_DECODE:
    case X_TOPK_DECODE2: {
      dsa_topk_params p;
      dsa_topk_params_default(&p);
      p.k = 4;
      return dsa_topk_decode(qq, T(0), T(1), T(2), &p, ev);
    }
    case X_OUTQ: return dsa_output_inv_rope_fp8_quant(qq, T(0), T(1), T(2), T(3), T(4), NULL, ev);
    case NX: break;
  }
  return DSA_ERR_INTERNAL;
}
#undef T
#undef C

static void arena_snapshot(uint8_t *dst) {
  clEnqueueReadBuffer(dsa_queue_cl(q), arena, CL_TRUE, 0, arena_size, dst, 0, NULL, NULL);
}

static int xcases_run; /* hostile cases of part 3 */

/* A hostile call on queue qq (q, or NULL): refused by name, no event, the
 * arena unchanged. */
static int ev_break; /* 1: num_wait 1, wait NULL; 2: wait[0] NULL; 3: wait set, num_wait 0;
                       4: wait[0] an event of another cl_context */
static cl_event foreign_event; /* a completed user event of ctx2 */

static void x_refused(const opcase *x, dsa_queue *qq, const char *what) {
  cl_event done = (cl_event)(uintptr_t)1, none = NULL;
  dsa_events ev = {0, NULL, &done};
  if (ev_break == 1) ev.num_wait = 1;
  if (ev_break == 2) ev.num_wait = 1, ev.wait = &none;
  if (ev_break == 3) ev.wait = &none;
  if (ev_break == 4) ev.num_wait = 1, ev.wait = &foreign_event;
  dsa_status s = xcall(x, qq, &ev);
  CHECK(s == DSA_ERR_INVALID_ARGUMENT, "%s, %s: %s (%s)", x->name, what, dsa_status_name(s),
        dsa_last_error());
  CHECK(s != DSA_ERR_INVALID_ARGUMENT || strstr(dsa_last_error(), x->name) != NULL,
        "%s, %s: the message does not name the operator: %s", x->name, what, dsa_last_error());
  CHECK(done == (cl_event)(uintptr_t)1, "%s, %s: an event came back", x->name, what);
  if (done != (cl_event)(uintptr_t)1 && done) clReleaseEvent(done);
  clFinish(dsa_queue_cl(q));
  arena_snapshot(arena_now);
  CHECK(memcmp(arena_now, arena_snap, arena_size) == 0, "%s, %s: memory changed", x->name, what);
  xcases_run++;
}

/* Breakage kinds of a tensor argument; 0 past the last, -1 not applicable. */
static int xbreak_tensor(opcase *x, int i, int c, const char **what) {
  dsa_tensor *t = &x->t[i];
  int d = -1; /* the first dimension with more than one element */
  for (int k = 0; k < t->ndim && d < 0; k++)
    if (t->shape[k] > 1) d = k;
  if (c < NT_BREAKS) return break_tensor(t, c, what);
  switch (c - NT_BREAKS) {
    case 0:
      if (d < 0) return -1;
      t->stride[d] = (int64_t)1 << 40, *what = "stride 2^40 (in range), past the buffer";
      return 1;
    case 1:
      t->stride[t->ndim - 1] = ((int64_t)1 << 40) + 1, *what = "stride past the 2^40 cap";
      return 1;
    case 2:
      t->shape[t->ndim - 1] = ((int64_t)1 << 40) + 1, *what = "shape past the 2^40 cap";
      return 1;
    case 3:
      t->offset = (size_t)1 << 20, *what = "offset 1 MiB, past the end";
      return 1;
    case 4:
      if (x->opt >> i & 1) return -1;
      x->nulls |= 1u << i, *what = "NULL handle";
      return 1;
    case 5:
      if (dsa_dtype_size(t->dtype) == 1) return -1;
      t->offset += 1, *what = "offset not a multiple of the element size";
      return 1;
    case 6: t->ndim = -1, *what = "rank -1"; return 1;
    case 7: t->ndim = DSA_MAX_DIMS + 1, *what = "rank past DSA_MAX_DIMS"; return 1;
    case 8: t->dtype = (dsa_dtype)99, *what = "dtype 99 (no such dtype)"; return 1;
  }
  return 0;
}

static int xbreak_cache(opcase *x, int i, int c, const char **what) {
  dsa_paged_cache *k = &x->c[i];
  if (c < NC_BREAKS) return break_cache(k, c, what);
  switch (c - NC_BREAKS) {
    case 0:
      k->block_stride = (int64_t)1 << 40, *what = "block_stride 2^40, past the buffer";
      return 1;
    case 1: k->num_blocks = (int64_t)1 << 40, *what = "2^40 blocks, past the buffer"; return 1;
    case 2: k->block_stride = 1, *what = "block_stride smaller than a page"; return 1;
    case 3:
      k->block_stride = ((int64_t)1 << 40) + 1024, *what = "block_stride past the cap";
      return 1;
    case 4: k->offset = (size_t)1 << 40, *what = "offset 2^40"; return 1;
    case 5: x->cnulls |= 1u << i, *what = "NULL handle"; return 1;
    case 6: k->format = (dsa_cache_format)99, *what = "format 99 (no such format)"; return 1;
    case 7: k->block_size = 0, *what = "block_size 0"; return 1;
    case 8:
      k->block_size = INT32_MAX, *what = "block_size 2^31-1 (page past the stride)";
      return 1;
  }
  return 0;
}

/* Absurd counts with zero strides: every tensor stays inside its buffer but
 * the counts the launcher multiplies are 2^40 (or their product past 2^63). */
static void zero40(dsa_tensor *t, int d) {
  t->shape[d] = (int64_t)1 << 40;
  t->stride[d] = 0;
}

static int xabsurd(opcase *x, int c, const char **what) {
  if (c > 0) return 0;
  switch (x->id) {
    case X_GATHER_PAGED: /* R x maxT = 2^80 rows of the grid */
      for (int i = 0; i < 4; i++) zero40(&x->t[i], 0);
      zero40(&x->t[3], 1);
      *what = "R = maxT = 2^40 (zero strides)";
      return 1;
    case X_SLOT_MAPPING: zero40(&x->t[3], 0), *what = "T = 2^40"; return 1;
    case X_SWA:
    case X_C128:
      for (int i = 0; i < x->nt; i++)
        if (strcmp(x->tn[i], "block_table") != 0) zero40(&x->t[i], 0);
      *what = "T = 2^40 (zero strides)";
      return 1;
    case X_GLOBAL_TOPK:
      for (int i = 0; i < x->nt; i++)
        if (i != 2) zero40(&x->t[i], 0);
      *what = "T = 2^40 (zero strides)";
      return 1;
    case X_COMBINE:
      zero40(&x->t[0], 0), zero40(&x->t[4], 0), zero40(&x->t[5], 0);
      *what = "T = 2^40 (zero strides)";
      return 1;
    case X_MIXED: /* Td + Tp */
      for (int i = 0; i < 4; i++) zero40(&x->t[i], 0);
      zero40(&x->t[4], 0), zero40(&x->t[7], 0), zero40(&x->t[10], 0), zero40(&x->t[11], 0);
      *what = "Td = Tp = 2^40 (zero strides)";
      return 1;
    case X_MQA:
    case X_MQA4: /* M = 2^40 rows, N = 2^40 keys */
      for (int i = 0; i < x->nt; i++) zero40(&x->t[i], 0);
      zero40(&x->t[x->nt - 1], 1);
      *what = "M = N = 2^40 (zero strides)";
      return 1;
    case X_PAGED:
    case X_PAGED4: /* B = 2^40, next_n 1: B x next_n rows */
      for (int i = 0; i < x->nt; i++) zero40(&x->t[i], 0);
      *what = "B = 2^40 (zero strides)";
      return 1;
    case X_Q8:
    case X_Q4:
      for (int i = 0; i < x->nt; i++)
        if (i != 2) zero40(&x->t[i], 0);
      *what = "T = 2^40 (zero strides)";
      return 1;
    case X_KGATHER8:
    case X_KGATHER4:
      zero40(&x->t[2], 0), zero40(&x->t[3], 0);
      *what = "total = 2^40 rows (zero strides)";
      return 1;
    case X_QNORM:
      for (int i = 0; i < x->nt; i++)
        if (i != 4) zero40(&x->t[i], 0);
      *what = "T = 2^40 (zero strides)";
      return 1;
    case X_CSAVE:
      for (int i = 0; i < 5; i++)
        if (i != 2) zero40(&x->t[i], 0);
      *what = "T = 2^40 (zero strides)";
      return 1;
    case X_CCOMP:
      zero40(&x->t[2], 0), zero40(&x->t[3], 0), zero40(&x->t[4], 0), zero40(&x->t[7], 0);
      *what = "T = 2^40 (zero strides)";
      return 1;
    case X_ATTN:
    case X_DECODE:
    case X_DECODE2:
      for (int i = 0; i < x->nt; i++)
        if (strcmp(x->tn[i], "kv") && strcmp(x->tn[i], "attn_sink")) zero40(&x->t[i], 0);
      *what = "T = 2^40 (zero strides)";
      return 1;
    case X_TOPK_PREFILL:
    case X_TOPK_DECODE:
      for (int i = 0; i < x->nt; i++) zero40(&x->t[i], 0);
      *what = "rows = 2^40 (zero strides)";
      return 1;
    case X_MTP_IN:
    case X_MTP_HEAD: /* T = 2^40 rows (the weights keep H) */
      for (int i = 0; i < x->nt; i++)
        if (!strstr(x->tn[i], "weight")) zero40(&x->t[i], 0);
      *what = "T = 2^40 (zero strides)";
      return 1;
    default: return -1; /* no count the launcher multiplies (64-bit grid-stride work) */
  }
}

/* ---- the aliasing rule, every operator -------------------------------------
 * Each input tensor in turn is moved onto each output (tensor, or the cache
 * an insert writes) at least as large: the call reads the output's bytes as
 * its input (arbitrary data: indices, lengths and positions out of range)
 * while writing them. Accepted or refused by name, it must leave every byte
 * outside the call's own tensors, caches and workspace unchanged. */
static unsigned x_outputs(const opcase *x, int *cache_out) {
  *cache_out = x->id == X_KINSERT4 || x->id == X_KINSERT8 || x->id == X_INSERT ||
               x->id == X_QNORM || x->id == X_CCOMP;
  switch (x->id) {
    case X_GATHER_PAGED: case X_SLOT_MAPPING: case X_TOPK_PREFILL: return 1u << 3;
    case X_SWA: case X_GLOBAL_TOPK: case X_C128: case X_COMBINE: case X_Q8: return 3u << 4;
    case X_KGATHER8: case X_KGATHER4: return 3u << 2;
    case X_MIXED: return 3u << 10;
    case X_MQA: return 1u << 6;
    case X_MQA4: return 1u << 7;
    case X_PAGED: return 1u << 4;
    case X_PAGED4: return 1u << 5;
    case X_Q4: return 7u << 4;
    case X_QNORM: return 1u << 1;
    case X_OUTQ: return 3u << 3;
    case X_CSAVE: return 1u << 5;
    case X_ATTN: return 3u << 5;
    case X_DECODE: case X_DECODE2: return 3u << 6;
    case X_TOPK_DECODE: case X_TOPK_DECODE2: case X_GATHER_SLOTS: return 1u << 2;
    case X_MTP_IN: return 3u << 5;
    case X_MTP_HEAD: return 1u << 2;
    default: return 0;
  }
}

static size_t t_bytes(const dsa_tensor *t) {
  size_t n = dsa_dtype_size(t->dtype);
  for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
  return n;
}

static void alias_every_operator(void) {
  uint8_t *mine = dsa_test_xmalloc(arena_size);
  int runs = 0, accepted = 0;
  for (int i = 0; i < NX; i++) {
    const opcase *base = &xcases[i];
    memset(mine, 0, arena_size);
    for (int t = 0; t < base->nt; t++) memset(mine + base->t[t].offset, 1, t_bytes(&base->t[t]));
    for (int k = 0; k < base->nc; k++)
      memset(mine + base->c[k].offset, 1,
             (size_t)(base->c[k].num_blocks * base->c[k].block_stride));
    if (base->has_ws)
      memset(mine + base->ws_off, 1, dsa_sparse_mla_decode_workspace_size(1, 2, 2));
    int cache_out;
    const unsigned outs = x_outputs(base, &cache_out);
    for (int in = 0; in < base->nt; in++) {
      if (outs >> in & 1) continue;
      for (int o = -1; o < base->nt; o++) {
        size_t off, bytes;
        if (o < 0) {
          if (!cache_out) continue;
          off = base->c[0].offset, bytes = (size_t)base->c[0].block_stride;
        } else {
          if (!(outs >> o & 1)) continue;
          off = base->t[o].offset, bytes = t_bytes(&base->t[o]);
        }
        if (t_bytes(&base->t[in]) > bytes) continue;
        opcase x = *base;
        x.t[in].offset = off;
        arena_snapshot(arena_snap);
        cl_event done = NULL;
        dsa_events ev = {0, NULL, &done};
        dsa_status s = xcall(&x, q, &ev);
        CHECK(s == DSA_OK || (s == DSA_ERR_INVALID_ARGUMENT && strstr(dsa_last_error(), x.name)),
              "%s: %s over %s: %s (%s)", x.name, x.tn[in], o < 0 ? "the cache" : x.tn[o],
              dsa_status_name(s), dsa_last_error());
        if (done) dsa_test_expect_complete(done, x.name);
        clFinish(dsa_queue_cl(q));
        dsa_test_read_faults(q);
        arena_snapshot(arena_now);
        size_t bad = 0;
        for (size_t b = 0; b < arena_size; b++) bad += !mine[b] && arena_now[b] != arena_snap[b];
        CHECK(bad == 0, "%s: %s over %s: %zu bytes outside its tensors changed", x.name, x.tn[in],
              o < 0 ? "the cache" : x.tn[o], bad);
        runs++;
        accepted += s == DSA_OK;
      }
    }
  }
  printf("aliasing: %d calls with an input over an output, %d accepted\n", runs, accepted);
  free(mine);
}

static void every_operator(void) {
  arena_size = 1 << 20;
  arena_host = dsa_test_xmalloc(arena_size);
  memset(arena_host, 0xA5, arena_size);
  cl_int e;
  build_cases();
  foreign_event = clCreateUserEvent(dsa_context_cl_context(ctx2), &e);
  clSetUserEventStatus(foreign_event, CL_COMPLETE);
  /* The arena: what the cases use, then a guard band. */
  arena_size = arena_used + DSA_TEST_GUARD;
  arena_snap = dsa_test_xmalloc(arena_size);
  arena_now = dsa_test_xmalloc(arena_size);
  arena = clCreateBuffer(dsa_context_cl_context(ctx), CL_MEM_READ_WRITE, arena_size, NULL, &e);
  CHECK(arena != NULL, "arena");
  for (int i = 0; i < NX; i++) {
    for (int t = 0; t < xcases[i].nt; t++) xcases[i].t[t].mem = arena;
    for (int k = 0; k < xcases[i].nc; k++) xcases[i].c[k].mem = arena;
    if (xcases[i].has_ws) xcases[i].ws = arena;
  }
  clEnqueueWriteBuffer(dsa_queue_cl(q), arena, CL_TRUE, 0, arena_size, arena_host, 0, NULL, NULL);
  arena_snapshot(arena_snap);
  int n0 = xcases_run;
  for (int i = 0; i < NX; i++) {
    const opcase *base = &xcases[i];
    /* The valid call first: the refusals below are the hostile argument's. */
    cl_event done = NULL;
    dsa_events ev = {0, NULL, &done};
    dsa_status s = xcall(base, q, &ev);
    CHECK(s == DSA_OK, "%s (case %d) valid call: %s (%s)", base->name, i, dsa_status_name(s),
          dsa_last_error());
    if (done) dsa_test_expect_complete(done, base->name);
    clFinish(dsa_queue_cl(q));
    dsa_test_read_faults(q);
    arena_snapshot(arena_snap);
    char buf[160];
    for (int t = 0; t < base->nt; t++)
      for (int c = 0;; c++) {
        opcase x = *base;
        const char *what = "";
        int r = xbreak_tensor(&x, t, c, &what);
        if (r == 0) break;
        if (r < 0) continue;
        snprintf(buf, sizeof buf, "%s: %s", x.tn[t], what);
        x_refused(&x, q, buf);
      }
    for (int k = 0; k < base->nc; k++)
      for (int c = 0;; c++) {
        opcase x = *base;
        const char *what = "";
        if (!xbreak_cache(&x, k, c, &what)) break;
        snprintf(buf, sizeof buf, "cache %d: %s", k, what);
        x_refused(&x, q, buf);
      }
    if (base->has_ws) {
      const struct {
        cl_mem m;
        size_t off;
        const char *what;
      } ws[] = {{foreign, 0, "foreign workspace"},
                {NULL, 0, "NULL workspace"},
                {base->ws, SIZE_MAX - 255, "workspace offset SIZE_MAX-255"},
                {base->ws, (size_t)1 << 40, "workspace offset 2^40"},
                {base->ws, arena_size - 256, "workspace past the end"},
                {base->ws, base->ws_off + 1, "workspace offset not a multiple of 256"}};
      for (size_t w = 0; w < sizeof ws / sizeof ws[0]; w++) {
        opcase x = *base;
        x.ws = ws[w].m, x.ws_off = ws[w].off;
        x_refused(&x, q, ws[w].what);
      }
    }
    x_refused(base, NULL, "NULL queue");
    const char *evw[4] = {"ev: num_wait 1, wait NULL", "ev: wait[0] NULL",
                          "ev: wait set, num_wait 0", "ev: wait[0] of another cl_context"};
    for (ev_break = 1; ev_break <= 4; ev_break++) x_refused(base, q, evw[ev_break - 1]);
    ev_break = 0;
    for (int c = 0;; c++) {
      opcase x = *base;
      const char *what = "";
      int r = xabsurd(&x, c, &what);
      if (r <= 0) break;
      x_refused(&x, q, what);
    }
  }
  /* dsa_index_mixed_sparse's input struct itself. */
  {
    dsa_index_mixed_sparse_params p;
    dsa_index_mixed_sparse_params_default(&p);
    dsa_status s = dsa_index_mixed_sparse(q, NULL, &xcases[X_MIXED].t[10],
                                            &xcases[X_MIXED].t[11], &p, NULL);
    CHECK(s == DSA_ERR_INVALID_ARGUMENT, "mixed: NULL inputs: %s", dsa_status_name(s));
    xcases_run++;
  }
  clFinish(dsa_queue_cl(q));
  arena_snapshot(arena_now);
  CHECK(memcmp(arena_now, arena_snap, arena_size) == 0, "part 3: memory changed");
  CHECK(memcmp(arena_now, arena_host, arena_size) != 0, "part 3: the valid calls wrote nothing");
  /* The guard bands between the arena's tensors: never written. */
  size_t bad = 0;
  for (int i = 0; i < NX; i++) {
    const opcase *x = &xcases[i];
    size_t offs[MAXT + MAXC + 1];
    int n = 0;
    for (int t = 0; t < x->nt; t++) offs[n++] = x->t[t].offset;
    for (int k = 0; k < x->nc; k++) offs[n++] = x->c[k].offset;
    if (x->has_ws) offs[n++] = x->ws_off;
    for (int j = 0; j < n; j++)
      for (size_t b = offs[j] - DSA_TEST_GUARD; b < offs[j]; b++) bad += arena_now[b] != 0xA5;
  }
  for (size_t b = arena_used; b < arena_size; b++) bad += arena_now[b] != 0xA5;
  CHECK(bad == 0, "part 3: %zu guard bytes before the tensors changed", bad);
  printf("%d hostile cases over %d operator forms\n", xcases_run - n0, (int)NX);
  alias_every_operator();
  clReleaseMemObject(arena);
  clReleaseEvent(foreign_event);
  free(arena_host), free(arena_snap), free(arena_now);
}

/* ---- a zero-stride block table of width 2^40 in the paged logits ---------
 * In bounds (every entry is the one int), and legal: the kernels read only
 * the blocks that max_model_len's columns span. They clamped each row's
 * limit to min(max_model_len, W * bs) in 64-bit, and W * bs = 2^40 * 2^23
 * wrapped to INT64_MIN (every logit -inf and a spurious fault, or with
 * another clamp order columns past the row). The launcher now caps W at the
 * blocks max_model_len spans: the result equals that of a [1, 1] table. */
static void paged_wide_table(void) {
  const int32_t bs = 1 << 23;               /* MXFP4: 68 bytes a token */
  const size_t page = (size_t)bs * 68, ncols = 8;
  cl_int e;
  cl_ulong max_alloc = 0;
  clGetDeviceInfo(dsa_context_cl_device(ctx), CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc,
                  &max_alloc, NULL);
  cl_mem cm = max_alloc >= page ? clCreateBuffer(dsa_context_cl_context(ctx), CL_MEM_READ_WRITE,
                                                 page, NULL, &e)
                                : NULL;
  if (!cm) {
    printf("paged_wide_table: no %zu-byte buffer, skipped\n", page);
    return;
  }
  uint64_t rng = 77;
  uint8_t data[8 * 64], scales[8 * 4];
  dsa_test_fill_random(&rng, data, sizeof data);
  for (size_t i = 0; i < sizeof scales; i++) scales[i] = (uint8_t)(124 + i % 6);
  cl_command_queue cq = dsa_queue_cl(q);
  clEnqueueWriteBuffer(cq, cm, CL_TRUE, 0, sizeof data, data, 0, NULL, NULL);
  clEnqueueWriteBuffer(cq, cm, CL_TRUE, (size_t)bs * 64, sizeof scales, scales, 0, NULL, NULL);
  dsa_paged_cache pc = {.mem = cm, .offset = 0, .num_blocks = 1, .block_size = bs,
                        .block_stride = (int64_t)page, .format = DSA_CACHE_INDEXER_MXFP4};
  uint8_t qv[2 * 64 + 2 * 4];
  dsa_test_fill_random(&rng, qv, 2 * 64);
  for (int i = 0; i < 8; i++) qv[128 + i] = 127;
  float w[2] = {1.0f, 0.5f};
  int32_t small[2] = {(int32_t)ncols, 0}; /* context length 8, block id 0 */
  guarded_buf qb = gbuf_create(ctx, q, sizeof qv, qv), wb = gbuf_create(ctx, q, sizeof w, w),
              ib = gbuf_create(ctx, q, sizeof small, small),
              o1 = gbuf_create(ctx, q, ncols * 4, NULL), o2 = gbuf_create(ctx, q, ncols * 4, NULL);
  dsa_tensor qt = dsa_tensor_make(qb.mem, qb.off, DSA_E2M1X2, 4, (int64_t[]){1, 1, 2, 64});
  dsa_tensor qs = dsa_tensor_make(qb.mem, qb.off + 128, DSA_UE8M0, 4, (int64_t[]){1, 1, 2, 4});
  dsa_tensor wt = dsa_tensor_make(wb.mem, wb.off, DSA_F32, 2, (int64_t[]){1, 2});
  dsa_tensor cl = dsa_tensor_make(ib.mem, ib.off, DSA_I32, 1, (int64_t[]){1});
  dsa_tensor bt1 = dsa_tensor_make(ib.mem, ib.off + 4, DSA_I32, 2, (int64_t[]){1, 1});
  dsa_tensor btw = {.mem = ib.mem, .offset = ib.off + 4, .dtype = DSA_I32, .ndim = 2,
                    .shape = {1, (int64_t)1 << 40}, .stride = {0, 0}};
  dsa_tensor l1 = dsa_tensor_make(o1.mem, o1.off, DSA_F32, 2, (int64_t[]){1, (int64_t)ncols});
  dsa_tensor l2 = dsa_tensor_make(o2.mem, o2.off, DSA_F32, 2, (int64_t[]){1, (int64_t)ncols});
  dsa_test_read_faults(q);
  CHECK_OK(dsa_indexer_paged_logits(q, &qt, &qs, &wt, &cl, &bt1, &pc, &l1, NULL, NULL));
  CHECK(dsa_test_read_faults(q) == 0, "paged_wide_table: [1, 1] table: faults");
  CHECK_OK(dsa_indexer_paged_logits(q, &qt, &qs, &wt, &cl, &btw, &pc, &l2, NULL, NULL));
  uint32_t f = dsa_test_read_faults(q);
  CHECK(f == 0, "paged_wide_table: [1, 2^40] table: faults 0x%x", (unsigned)f);
  float a[8], b[8];
  gbuf_read(q, &o1, a);
  gbuf_read(q, &o2, b);
  dsa_test_first_diff(b, a, sizeof a, "logits", "block table [1, 2^40] vs [1, 1]");
  CHECK(gbuf_guards_ok(q, &o2), "paged_wide_table: guard bands");
  guarded_buf *all[] = {&qb, &wb, &ib, &o1, &o2};
  for (int i = 0; i < 5; i++) gbuf_release(all[i]);
  clReleaseMemObject(cm);
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
  every_operator();
  paged_wide_table();
  for (int i = 0; i < nsnaps; i++) free(snaps[i].bytes);
  teardown();
  clReleaseMemObject(foreign);
  dsa_context_destroy(&ctx2);
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
