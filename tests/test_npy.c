/* tools/common/npy.c on hostile files (issue 9, finding 8): the size the header
 * declares is checked against the file before it is allocated. */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "npy.h"

static FILE *npy_mem(char *buf, size_t cap, const char *shape, const char *descr, size_t data) {
  char hdr[128];
  int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                   descr, shape);
  while ((10 + n + 1) % 64) hdr[n++] = ' ';
  hdr[n++] = '\n';
  size_t len = 0;
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (char)(n & 0xff), buf[9] = (char)(n >> 8);
  memcpy(buf + 10, hdr, (size_t)n);
  len = 10 + (size_t)n;
  memset(buf + len, 7, data);
  len += data;
  (void)cap;
  return fmemopen(buf, len, "rb");
}

int main(void) {
  static char buf[1 << 16];
  npy_array a;
  char err[256];
  struct {
    const char *shape, *descr;
    size_t data;
    int ok;
  } cases[] = {
      {"(4,)", "<f4", 16, 1},           {"(2, 3)", "<u2", 12, 1},
      {"(4,)", "<f4", 15, 0},           {"(4,)", "<f4", 17, 0},
      {"(1099511627776,)", "|u1", 8, 0}, /* 1 TiB declared: refused, not allocated */
      {"(4611686018427387904,)", "<i8", 8, 0}, {"(99999999999999999999,)", "|u1", 8, 0},
      {"(65536, 65536, 65536)", "<f4", 8, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    FILE *f = npy_mem(buf, sizeof buf, cases[i].shape, cases[i].descr, cases[i].data);
    CHECK(f != NULL, "fmemopen");
    if (!f) continue;
    int rc = npy_read(f, "mem", &a, err, sizeof err);
    CHECK((rc == 0) == cases[i].ok, "shape %s %s + %zu bytes: rc %d (%s)", cases[i].shape,
          cases[i].descr, cases[i].data, rc, rc ? err : "");
    if (rc == 0) npy_free(&a);
    fclose(f);
  }
  return dsa_test_summary();
}
