/* Oclgrind's --uninitialized plugin and partial host writes (docs/PORTING.md,
 * "Oclgrind"): the slots of one dsa_mla_cache_insert written into a guarded
 * buffer at offset 256 with a plain clEnqueueWriteBuffer (PARTIAL=1 in the
 * environment) make the plugin report "Controlflow depends on uninitialized
 * value" on the kernel's slot read; written as a whole buffer (the default),
 * nothing. Built, not run by the suite:
 *   PARTIAL=1 oclgrind --uninitialized build/tests/repro_partial_write */
#include <stdlib.h>

#include "common.h"

int main(void) {
  dsa_context *ctx;
  dsa_queue *q;
  dsa_test_open(&ctx, &q, 0);
  enum { NB = 4 };
  guarded_buf cache_b = gbuf_create(ctx, q, NB * 584, NULL);
  dsa_paged_cache cache = {.mem = cache_b.mem, .offset = cache_b.off, .num_blocks = NB,
                           .block_size = 1, .block_stride = 584, .format = DSA_CACHE_MLA_FP8};
  uint16_t kh[1024];
  for (int i = 0; i < 1024; i++) kh[i] = (uint16_t)(0x3F00 + (i & 0xFF));
  guarded_buf k_b = gbuf_create(ctx, q, sizeof kh, kh);
  dsa_tensor k = dsa_tensor_make(k_b.mem, k_b.off, DSA_BF16, 2, (int64_t[]){2, 512});
  int64_t sl[2] = {1, 2};
  guarded_buf slots_b = gbuf_create(ctx, q, sizeof sl, sl);
  dsa_tensor slots = dsa_tensor_make(slots_b.mem, slots_b.off, DSA_I64, 1, (int64_t[]){2});
  if (getenv("PARTIAL"))
    clEnqueueWriteBuffer(dsa_queue_cl(q), slots_b.mem, CL_TRUE, slots_b.off, sizeof sl, sl, 0,
                         NULL, NULL);
  else
    dsa_test_write_at(q, slots_b.mem, slots_b.off, sizeof sl, sl);
  CHECK_OK(dsa_mla_cache_insert(q, &k, &slots, &cache, NULL, NULL));
  clFinish(dsa_queue_cl(q));
  gbuf_release(&cache_b);
  gbuf_release(&k_b);
  gbuf_release(&slots_b);
  dsa_test_close(&ctx, &q);
  return dsa_test_summary();
}
