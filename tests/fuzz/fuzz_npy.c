/* libFuzzer target: the .npy reader (tools/common/npy.c) on arbitrary bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0; /* fmemopen refuses an empty buffer */
  FILE *f = fmemopen((void *)data, size, "rb");
  if (!f) return 0;
  npy_array a;
  char err[256];
  if (npy_read(f, "fuzz", &a, err, sizeof err) == 0) {
    /* What a caller would do: touch every byte the header promised. */
    volatile uint8_t x = 0;
    for (size_t i = 0; i < a.nbytes; i++) x ^= ((const uint8_t *)a.data)[i];
    (void)x;
    npy_free(&a);
  }
  fclose(f);
  return 0;
}
