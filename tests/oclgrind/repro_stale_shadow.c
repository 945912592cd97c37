/* Oclgrind 21.10's --uninitialized plugin and recycled buffers (docs/PORTING.md,
 * "Oclgrind"): the plugin never drops the shadow state of a released buffer
 * (it has no memoryDeallocated hook) while Oclgrind's allocator hands the
 * released buffer's index to the next buffer made. The next buffer then
 * inherits that stale shadow, size included: a kernel's stores past the old
 * size are dropped from the shadow, and its loads there read "uninitialized".
 *
 * Here one split top-k decode (DSACL_TOPK=split DSACL_TOPK_MERGE=kernel:
 * topk_lrows writes the chunk lists to the queue's scratch buffer, topk_merge
 * reads them) runs on the simulator. With STALE=1 the first 64 bytes of a
 * 4 KiB buffer are written by the host (the plugin sizes a buffer's shadow to
 * each host store) and the buffer released, so the scratch buffer made by the
 * top-k call gets its index and a 64-byte shadow: the plugin reports
 * "Controlflow depends on uninitialized value" in topk_merge's binary search
 * (topk_count_above) on list entries past byte 64 that topk_lrows did write.
 * STALE=fill: the released buffer was filled by clEnqueueFillBuffer, which
 * Oclgrind stores a byte at a time (a one-byte shadow), as tools/cases/
 * cases.c filled the golden outputs before this was found. Without STALE,
 * nothing. The output matches the C reference either way. Built, not run by
 * the suite:
 *   STALE=1 oclgrind --uninitialized --max-errors 5 build/tests/repro_stale_shadow */
#include <stdlib.h>

#include "common.h"
#include "ref_topk.h"

int main(void) {
  setenv("DSACL_TOPK", "split", 1);
  setenv("DSACL_TOPK_MERGE", "kernel", 1);
  dsa_context *ctx;
  dsa_queue *q;
  dsa_test_open(&ctx, &q, 0);
  enum { B = 2, N = 1000, K = 64 };
  static float l[B * N];
  uint64_t rng = 7;
  for (int i = 0; i < B * N; i++) l[i] = (float)dsa_test_uniform(&rng);
  const int32_t lens[B] = {N, 700};
  int32_t want[B * K], got[B * K];
  ref_topk_decode(l, B, N, N, lens, 1, 1, K, want, K, 1);
  guarded_buf lb = gbuf_create(ctx, q, sizeof l, l), nb = gbuf_create(ctx, q, sizeof lens, lens),
              ob = gbuf_create(ctx, q, sizeof got, NULL);
  /* After the operands: the next buffer made is the top-k scratch. */
  const char *stale = getenv("STALE");
  if (stale) {
    uint8_t zero[64] = {0};
    cl_int e;
    cl_mem m = clCreateBuffer(dsa_context_cl_context(ctx), CL_MEM_READ_WRITE, 4096, NULL, &e);
    if (!m) return 1;
    if (!strcmp(stale, "fill")) /* a one-byte shadow: every entry "uninitialized" */
      clEnqueueFillBuffer(dsa_queue_cl(q), m, zero, 1, 0, 4096, 0, NULL, NULL);
    else /* a 64-byte shadow: the entries past byte 64 */
      clEnqueueWriteBuffer(dsa_queue_cl(q), m, CL_TRUE, 0, sizeof zero, zero, 0, NULL, NULL);
    clFinish(dsa_queue_cl(q));
    clReleaseMemObject(m);
  }
  dsa_tensor lt = dsa_tensor_make(lb.mem, lb.off, DSA_F32, 2, (int64_t[]){B, N});
  dsa_tensor nt = dsa_tensor_make(nb.mem, nb.off, DSA_I32, 1, (int64_t[]){B});
  dsa_tensor ot = dsa_tensor_make(ob.mem, ob.off, DSA_I32, 2, (int64_t[]){B, K});
  CHECK_OK(dsa_topk_decode(q, &lt, &nt, &ot, NULL, NULL));
  gbuf_read(q, &ob, got);
  CHECK(!memcmp(got, want, sizeof got), "split top-k output differs from the reference");
  gbuf_release(&lb);
  gbuf_release(&nb);
  gbuf_release(&ob);
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
