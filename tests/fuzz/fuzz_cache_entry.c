/* libFuzzer target: the binary-cache entry parser (src/diskcache.c). The
 * input is written as the entry file of a fixed key in a private directory
 * and loaded; a valid entry with the input as payload is also round-tripped.
 * Seeds: any entry from a real cache directory (~/.cache/dsacl/<key>.bin;
 * the key below must then match, see tests/fuzz/README). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static dsa_diskcache dc;
static char path[8192];
static const char key[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  /* tmpfs where there is one: the store's fsync is then free, and the
   * target runs ~50x faster (the parser is what is fuzzed, not the disk). */
  char shm[] = "/dev/shm/dsacl-fuzz-cache-XXXXXX", tmp[] = "/tmp/dsacl-fuzz-cache-XXXXXX";
  char *dir = mkdtemp(shm);
  if (!dir) dir = mkdtemp(tmp);
  if (!dir) abort();
  dsa__diskcache_init(&dc, dir, false, NULL, NULL, NULL);
  if (!dc.enabled) abort();
  dsa__diskcache_path(&dc, key, path, sizeof path);
  return 0;
}

static void put(const uint8_t *p, size_t n, int append) {
  int fd = open(path, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0600);
  if (fd < 0) abort();
  size_t off = 0;
  while (off < n) {
    ssize_t w = write(fd, p + off, n - off);
    if (w <= 0) abort();
    off += (size_t)w;
  }
  close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  int mode = data[0] % 3;
  data++, size--;
  if (mode == 0) {
    put(data, size, 0);
  } else if (mode == 1) {
    uint8_t h[16 + sizeof key - 1];
    memcpy(h, "DSACLBIN", 8);
    h[8] = DSA_DISKCACHE_FORMAT, h[9] = h[10] = h[11] = 0;
    h[12] = (uint8_t)(sizeof key - 1), h[13] = h[14] = h[15] = 0;
    memcpy(h + 16, key, sizeof key - 1);
    put(h, sizeof h, 0);
    put(data, size, 1);
  } else {
    if (size < 3) return 0;
    if (dsa__diskcache_store(&dc, key, data + 2, size - 2) != 0) abort();
    size_t n = 0;
    unsigned char *p = dsa__diskcache_load(&dc, key, &n);
    if (!p || n != size - 2 || memcmp(p, data + 2, n) != 0) abort(); /* round trip */
    free(p);
    int fd = open(path, O_RDWR);
    if (fd < 0) abort();
    off_t at = (off_t)(data[0] * 256u + data[1]) % (off_t)(64 + 16 + size);
    uint8_t b = 0;
    if (pread(fd, &b, 1, at) == 1) {
      b ^= (uint8_t)(data[1] | 1);
      if (pwrite(fd, &b, 1, at) != 1) abort();
    }
    close(fd);
  }
  size_t n = 0;
  unsigned char *p = dsa__diskcache_load(&dc, key, &n);
  if (p) {
    if (mode == 2) abort(); /* a flipped byte must never load */
    if (n == 0) abort();
    free(p);
  }
  return 0;
}
