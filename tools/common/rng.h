/* The one random generator of the tests and tools: xorshift64* (Vigna),
 * deterministic, the same stream on every machine. Tests compare against
 * values it produced (tests/common.c's dsa_test_rand, the bench rows'
 * shapes), so the stream must not change: state 0 is read as
 * 0x9E3779B97F4A7C15 (a zero state would stay zero), the state kept is the
 * one before the output multiply. */
#ifndef DSACL_TOOLS_COMMON_RNG_H
#define DSACL_TOOLS_COMMON_RNG_H

#include <stdint.h>

/* The next 64 random bits; advances *state. */
static inline uint64_t rng64_next(uint64_t *state) {
  uint64_t x = *state ? *state : 0x9E3779B97F4A7C15ull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, 1), 53 random bits. */
static inline double rng64_uniform(uint64_t *state) {
  return (double)(rng64_next(state) >> 11) * 0x1p-53;
}

#endif
