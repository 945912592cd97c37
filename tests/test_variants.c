/* Variant tables and the picker: capability masks, refusal reasons, the
 * error when nothing takes a call, the per-queue record of the pick, and the
 * argument path's alignment rule and stand-ins. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "internal.h"

/* A synthetic table: "wide" needs fp16 and refuses n > 4, "narrow" refuses
 * n > 8, nothing takes n > 8. */
typedef struct { int n; } shape_t;

static const char *refuse_wide(const dsa_context *c, const void *shape, char *buf, size_t n) {
  (void)c;
  if (shape && ((const shape_t *)shape)->n > 4) {
    snprintf(buf, n, "n = %d > 4", ((const shape_t *)shape)->n);
    return buf;
  }
  return NULL;
}
static const char *refuse_narrow(const dsa_context *c, const void *shape, char *buf, size_t n) {
  (void)c;
  (void)buf;
  (void)n;
  return shape && ((const shape_t *)shape)->n > 8 ? "n > 8" : NULL;
}

DSA_VARIANT_TABLE(test_table, "test_op", {"wide", DSA_CAP_FP16, refuse_wide, "n <= 4"},
                  {"narrow", 0, refuse_narrow, "n <= 8"});

static void test_picker(void) {
  for (int masked = 0; masked < 2; masked++) {
    dsa_context_options o;
    dsa_context_options_default(&o);
    o.cache_dir = "off";
    o.disable_caps = masked ? DSA_CAP_ALL : 0;
    dsa_context *c = NULL;
    dsa_queue *q = NULL;
    if (dsa_context_create(&c, &o) != DSA_OK || dsa_queue_create(&q, c, 0) != DSA_OK) {
      CHECK(0, "context: %s", dsa_last_error());
      return;
    }
    const bool fp16 = (dsa_context_caps(c) & DSA_CAP_FP16) != 0;
    CHECK(!masked || dsa_context_caps(c) == 0, "disable_caps = all leaves no capability");
    CHECK(strstr(dsa_context_build_options(c), "-DDSA_HAS_NV_PTX=0") || !masked,
          "masked build options: %s", dsa_context_build_options(c));
    CHECK(strcmp(dsa_queue_last_variant(q), "") == 0, "no call yet: \"%s\"",
          dsa_queue_last_variant(q));
    /* Masked: the portable matrix back-end; else whatever the device has. */
    CHECK(masked ? strcmp(dsa_context_matrix_backend(c), "portable") == 0
                 : dsa_context_matrix_backend(c)[0] != '\0',
          "matrix back-end \"%s\"", dsa_context_matrix_backend(c));
    shape_t s = {2};
    int v = dsa__pick(q, &test_table, &s);
    CHECK(v == (fp16 ? 0 : 1), "small shape: picked %d (fp16 %d)", v, fp16);
    CHECK(strcmp(dsa_queue_last_variant(q), fp16 ? "test_op: wide" : "test_op: narrow") == 0,
          "last variant %s", dsa_queue_last_variant(q));
    s.n = 6;
    CHECK(dsa__pick(q, &test_table, &s) == 1, "n = 6 takes the narrow variant");
    s.n = 9;
    CHECK(dsa__pick(q, &test_table, &s) == -1, "n = 9 has no variant");
    CHECK(strstr(dsa_last_error(), "test_op") && strstr(dsa_last_error(), "n > 8") &&
              strstr(dsa_last_error(), fp16 ? "n = 9 > 4" : "needs fp16"),
          "reasons listed: %s", dsa_last_error());
    char buf[128];
    const char *why = dsa__variant_refusal(c, &test_table.v[0], NULL, buf, sizeof buf);
    CHECK(fp16 ? why == NULL : strstr(why, "fp16") != NULL, "device-only refusal: %s",
          why ? why : "(none)");

    /* A real operator records its pick: the MLA insert on an empty input
     * launches nothing, so run one token with slot -1. */
    cl_int e;
    cl_mem k = clCreateBuffer(dsa_context_cl_context(c), CL_MEM_READ_WRITE, 1024, NULL, &e);
    cl_mem sl = clCreateBuffer(dsa_context_cl_context(c), CL_MEM_READ_WRITE, 8, NULL, &e);
    cl_mem cm = clCreateBuffer(dsa_context_cl_context(c), CL_MEM_READ_WRITE, 64 * 584, NULL, &e);
    int64_t minus1 = -1;
    clEnqueueWriteBuffer(dsa_queue_cl(q), sl, CL_TRUE, 0, 8, &minus1, 0, NULL, NULL);
    dsa_tensor kt = dsa_tensor_make(k, 0, DSA_BF16, 2, (int64_t[]){1, 512});
    dsa_tensor st = dsa_tensor_make(sl, 0, DSA_I64, 1, (int64_t[]){1});
    dsa_paged_cache cache = {.mem = cm, .offset = 0, .num_blocks = 1, .block_size = 64,
                             .block_stride = 64 * 584, .format = DSA_CACHE_MLA_FP8};
    CHECK(dsa_mla_cache_insert(q, &kt, &st, &cache, NULL, NULL) == DSA_OK, "insert: %s",
          dsa_last_error());
    const bool nv = (dsa_context_caps(c) & DSA_CAP_NV_PTX) != 0;
    const bool sg32 = (dsa_context_caps(c) & DSA_CAP_INTEL_SUBGROUPS) &&
                      (c->caps.intel_sg_sizes & (1u << 5));
    const bool amd = (dsa_context_caps(c) & DSA_CAP_AMD_BUILTINS) != 0;
    const char *want = nv     ? "dsa_mla_cache_insert: nv-shfl"
                       : amd  ? "dsa_mla_cache_insert: amd-bperm"
                       : sg32 ? "dsa_mla_cache_insert: intel-sg32"
                              : "dsa_mla_cache_insert: portable";
    CHECK(strcmp(dsa__queue_last_variant(q), want) == 0, "insert variant %s, expected %s",
          dsa__queue_last_variant(q), want);
    clFinish(dsa_queue_cl(q));
    clReleaseMemObject(k);
    clReleaseMemObject(sl);
    clReleaseMemObject(cm);
    dsa_test_close(&c, &q);
  }
}

/* Every table has a portable last resort that needs no capability, names
 * its operator, and has unique variant names. */
static void test_tables(void) {
  CHECK(dsa__num_variant_tables > 0, "tables listed");
  for (int t = 0; t < dsa__num_variant_tables; t++) {
    const dsa_variant_table *vt = dsa__variant_tables[t];
    CHECK(vt->op && strncmp(vt->op, "dsa_", 4) == 0 && vt->n > 0, "table %d", t);
    bool fallback = false;
    for (int i = 0; i < vt->n; i++) {
      fallback |= vt->v[i].caps == 0;
      for (int j = 0; j < i; j++)
        CHECK(strcmp(vt->v[i].name, vt->v[j].name) != 0, "%s: duplicate %s", vt->op,
              vt->v[i].name);
    }
    CHECK(fallback, "%s has a variant that needs no capability", vt->op);
    for (int u = 0; u < t; u++)
      CHECK(strcmp(vt->op, dsa__variant_tables[u]->op) != 0, "%s listed twice", vt->op);
  }
}

/* The alignment the argument path passes: offset and outer strides, inner
 * dimension and extent-1 dimensions skipped, 256 at most. */
static void test_align(void) {
  dsa_tensor t = dsa_tensor_make(NULL, 0, DSA_BF16, 2, (int64_t[]){4, 512});
  CHECK(dsa__tensor_align(&t) == 256, "row 1024 B, offset 0: %u", dsa__tensor_align(&t));
  t.offset = 48;
  CHECK(dsa__tensor_align(&t) == 16, "offset 48: %u", dsa__tensor_align(&t));
  t.offset = 0;
  t.stride[0] = 516; /* 1032-byte rows */
  CHECK(dsa__tensor_align(&t) == 8, "row stride 1032 B: %u", dsa__tensor_align(&t));
  t.shape[0] = 1;
  CHECK(dsa__tensor_align(&t) == 256, "one row: its stride does not matter");
  dsa_tensor u = dsa_tensor_make(NULL, 6, DSA_BF16, 1, (int64_t[]){7});
  CHECK(dsa__tensor_align(&u) == 2, "1-D, offset 6: %u", dsa__tensor_align(&u));
}

int main(void) {
  test_align();
  test_tables();
  test_picker();
  return dsa_test_summary();
}
