/* SHA-256 (FIPS 180-4), for cache keys and payload checksums. */
#ifndef DSACL_SHA256_H
#define DSACL_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct dsa_sha256 {
  uint32_t h[8];
  uint64_t len;
  unsigned char buf[64];
  size_t nbuf;
} dsa_sha256;

void dsa__sha256_init(dsa_sha256 *s);
void dsa__sha256_update(dsa_sha256 *s, const void *data, size_t n);
void dsa__sha256_final(dsa_sha256 *s, unsigned char out[32]);
void dsa__sha256(const void *data, size_t n, unsigned char out[32]);

#endif
