/* dequant_prmt: the e4m3 -> bf16 dequantization's NVIDIA prmt form
 * (cl/dsa_common.h, dsa_dequant4_e4m3_bf16_prmt) and the shorter special
 * test (dsa_dequant4_e4m3_special since session 18: special_new here)
 * against the portable fast path (dsa_dequant4_e4m3_bf16_fast) and the
 * special test with a separate exponent test it replaced, copied here
 * with prmt.b32 emulated: every byte pair in both halves of the word, every
 * scale byte u. A standalone probe (not built by meson):
 *   cc -O2 tools/probes/dequant_prmt.c -o dequant_prmt && ./dequant_prmt
 * prints "... differ 0; special differs 0" and exits 0 when they agree.
 * The GPU runs the real prmt in test_sparse_mla and the goldens. Keep the
 * copies here in step with cl/dsa_common.h. */
#include <stdio.h>
#include <stdint.h>
typedef uint32_t uint;
/* PTX prmt.b32 d, a, b, c (default mode): byte i of d = selector nibble i:
 * low 3 bits pick byte of {b:a} (a bytes 0-3, b bytes 4-7), bit 3 replicates its sign. */
static uint prmt(uint a, uint b, uint c) {
  uint64_t v = ((uint64_t)b << 32) | a; uint d = 0;
  for (int i = 0; i < 4; i++) {
    uint s = (c >> (4 * i)) & 0xF; uint byte = (uint)(v >> (8 * (s & 7))) & 0xFF;
    if (s & 8) byte = (byte & 0x80) ? 0xFF : 0x00;
    d |= byte << (8 * i);
  }
  return d;
}
static int special(uint x, uint u) {
  const uint t = x & 0x7F7F7F7Fu;
  const uint nonzero = (t + 0x7F7F7F7Fu) & 0x80808080u;
  const uint exp_zero = ~((x & 0x78787878u) + 0x78787878u) & 0x80808080u;
  const uint sp = ((t + 0x01010101u) & 0x80808080u) | (nonzero & exp_zero);
  return sp != 0u || u < 8u || u > 246u;
}
static void fast_old(uint x, uint u, uint r[2]) {
  const uint bias = ((u - 7u) << 7) * 0x00010001u;
  for (int h = 0; h < 2; h++) {
    const uint w = h ? (x >> 16) : x;
    const uint p = (w & 0xFFu) | ((w & 0xFF00u) << 8);
    const uint mag = p & 0x007F007Fu;
    const uint nz = ((mag + 0x007F007Fu) >> 7) & 0x00010001u;
    r[h] = (((mag << 4) + bias) & (nz * 0xFFFFu)) | ((p & 0x00800080u) << 8);
  }
}
static void fast_new(uint x, uint u, uint r[2]) {
  const uint bias = ((u - 7u) << 7) * 0x00010001u;
  for (int h = 0; h < 2; h++) {
    const uint p = prmt(x, 0u, h ? 0x4342u : 0x4140u);       /* bytes 2h, 2h+1 at 0 and 2 */
    const uint mag = p & 0x007F007Fu;
    const uint m = prmt(mag + 0x007F007Fu, 0u, 0xAA88u);      /* 0xFFFF where mag != 0 */
    const uint q = prmt(x, 0u, h ? 0x3424u : 0x1404u);       /* bytes 2h, 2h+1 at 1 and 3 */
    r[h] = ((mag * 16u + bias) & m) | (q & 0x80008000u);
  }
}
static int special_new(uint x, uint u) {
  const uint t = x & 0x7F7F7F7Fu;
  /* NaN: t == 0x7F; nonzero subnormal: 1 <= t <= 7 */
  const uint sp = ((t + 0x01010101u) | ((t + 0x7F7F7F7Fu) & ~(t + 0x78787878u))) & 0x80808080u;
  return sp != 0u || u - 8u > 238u;
}
int main(void) {
  long bad = 0, n = 0, spbad = 0;
  for (uint u = 0; u < 256; u++)
    for (uint x = 0; x < 65536; x++) {
      uint w = x | (((x * 2654435761u) >> 16) << 16); /* vary high half too */
      for (int rep = 0; rep < 2; rep++) {
        uint ww = rep ? ((x << 16) | (x >> 8)) : w;
        if (special(ww, u) != special_new(ww, u)) spbad++;
        if (special(ww, u)) continue;
        uint a[2], b[2]; fast_old(ww, u, a); fast_new(ww, u, b); n++;
        if (a[0] != b[0] || a[1] != b[1]) { if (bad < 5) printf("x %08x u %u: %08x %08x vs %08x %08x\n", ww, u, a[0], a[1], b[0], b[1]); bad++; }
      }
    }
  printf("fast words checked %ld, differ %ld; special differs %ld\n", n, bad, spbad);
  return bad || spbad;
}
