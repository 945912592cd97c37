/* bf16, e4m3fn and UE8M0 primitives (SPEC-reference §2.1–2.3).
 *
 * The e4m3 encoder deliberately does not use bit manipulation: it searches
 * the table of finite codes for the nearest value in double (where every
 * e4m3 value and every midpoint between two of them is exact), so that it
 * cannot share a bug with the kernels' bit tricks. */
#include "ref.h"

#include <math.h>
#include <string.h>

uint16_t ref_bf16_from_float(float x) {
  uint32_t b;
  memcpy(&b, &x, sizeof b);
  if (isnan(x)) return (uint16_t)((b >> 16) | 0x40);
  b += 0x7FFFu + ((b >> 16) & 1u);
  return (uint16_t)(b >> 16);
}

float ref_bf16_to_float(uint16_t h) {
  uint32_t b = (uint32_t)h << 16;
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

double ref_e4m3_decode(uint8_t b) {
  int sign = b >> 7, ex = (b >> 3) & 15, m = b & 7;
  if (ex == 15 && m == 7) return NAN;
  double v = ex == 0 ? ldexp(m / 8.0, -6) : ldexp(1.0 + m / 8.0, ex - 7);
  return sign ? -v : v;
}

uint8_t ref_e4m3_encode(double x) {
  uint8_t sign = signbit(x) ? 0x80 : 0x00;
  /* Every NaN encodes as 0x7F: on NVIDIA the scaling multiply already
   * returns the canonical (positive) NaN, so that is what vLLM writes. */
  if (isnan(x)) return 0x7F;
  double a = fabs(x);
  if (isinf(a)) return 0x7E | sign;
  /* Codes 0x00..0x7E are the non-negative finite values in increasing order;
   * a tie is between two neighbours and goes to the even code (= even
   * mantissa, since the mantissa's last bit is the code's last bit). Above
   * 448 the nearest finite value is 448: saturation falls out. */
  int best = 0;
  double bestd = a;
  for (int c = 1; c <= 0x7E; c++) {
    double d = fabs(a - ref_e4m3_decode((uint8_t)c));
    if (d < bestd || (d == bestd && (c & 1) == 0)) {
      best = c;
      bestd = d;
    }
  }
  return (uint8_t)best | sign;
}

int ref_ue8m0_exponent(double amax, double qmax) {
  int k;
  frexp(amax / qmax, &k); /* an estimate within one of the answer */
  int e = k;
  while (ldexp(qmax, e - 1) >= amax) e--;
  while (ldexp(qmax, e) < amax) e++;
  return e;
}
