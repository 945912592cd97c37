/* Correctly rounded fp32 helpers of the RMSNorms: the same result on every
 * device, whatever the precision of its division, sqrt and rsqrt (OpenCL
 * allows 2.5 ulp for `/` and 2 for rsqrt). Integer work settles the
 * rounding. (mla_qnorm.cl carries its own copy of the 1/sqrt, qn_rsqrt_cr.)
 * Included by the kernels that need it, after dsa_common.h. */
#ifndef DSA_NORM_H
#define DSA_NORM_H

/* (2y + 1)^2 * X > 2^73, exactly (128-bit product): the midpoint above
 * y * 2^-24 lies above 1 / sqrt(X * 2^-23). */
DSA_INLINE bool dsa_rsqrt_mid_above(uint y, uint xi) {
  const ulong m = 2ul * y + 1ul;
  const ulong sq = m * m; /* < 2^51 */
  const ulong hi = mul_hi(sq, (ulong)xi), lo = sq * (ulong)xi;
  return hi > 512ul || (hi == 512ul && lo != 0ul);
}

/* Correctly rounded 1/sqrt(x) for fp32 x (NaN for x < 0 or NaN, +inf for 0,
 * +0 for +inf). x = X * 2^(2k) with X in [1, 4): 1/sqrt(X) in (0.5, 1] is
 * y * 2^-24 with integer y in [2^23, 2^24]; the device's rsqrt gives a start
 * within a few ulps and exact midpoint tests settle the rounding. */
DSA_INLINE float dsa_rsqrt_cr(float x) {
  if (isnan(x) || x < 0.0f) return as_float(0x7FC00000u);
  if (x == 0.0f) return as_float(0x7F800000u);
  if (isinf(x)) return 0.0f;
  const uint u = as_uint(x);
  int E = (int)(u >> 23) - 127;
  uint mant = (u & 0x7FFFFFu) | 0x800000u;
  if ((u >> 23) == 0u) { /* subnormal: normalize the significand */
    const uint sh = clz(u) - 8u;
    mant = u << sh;
    E = -126 - (int)sh;
  }
  const int odd = E & 1;
  const int k = (E - odd) / 2;
  const uint xi = mant << odd; /* X = xi * 2^-23 */
  const float est = rsqrt((float)xi * 0x1p-23f);
  const float fy = clamp(est * 0x1p24f, 0x1p23f, 0x1p24f);
  uint y = convert_uint_rte(fy);
  for (int i = 0; i < 8 && y < 0x1000000u && !dsa_rsqrt_mid_above(y, xi); i++) y++;
  for (int i = 0; i < 8 && y > 0x800000u && dsa_rsqrt_mid_above(y - 1u, xi); i++) y--;
  return (float)y * as_float((uint)(127 - 24 - k) << 23);
}

/* a / h correctly rounded to fp32 (round to nearest even), for fp32 a >= 0
 * (NaN, +inf, +-0 pass through) and an integer h in [1, 2^24]. a = m * 2^e
 * with m in [2^23, 2^24); N = m * 2^(bits(h) + 2) < 2^51 divided by h in
 * 64-bit integers gives a quotient in (2^25, 2^27) and a remainder for the
 * sticky bit; subnormal results round at 2^-149. */
DSA_INLINE float dsa_div_cr_u32(float a, uint h) {
  if (isnan(a) || isinf(a) || a == 0.0f) return a;
  const uint u = as_uint(a);
  const uint ex = (u >> 23) & 0xFFu;
  ulong m;
  int e;
  if (ex == 0u) {
    const uint sh = clz(u & 0x7FFFFFu) - 8u;
    m = (ulong)((u & 0x7FFFFFu) << sh);
    e = -149 - (int)sh;
  } else {
    m = (ulong)((u & 0x7FFFFFu) | 0x800000u);
    e = (int)ex - 150;
  }
  const int s = (int)(32u - clz(h)) + 2;
  const ulong n = m << s;
  const ulong qq = n / (ulong)h, rr = n - qq * (ulong)h;
  const int e0 = e - s; /* a / h = (qq + rr / h) * 2^e0 */
  const int b = (int)(64u - (uint)clz(qq));
  const int d = e0 + b - 1 >= -126 ? b - 24 : -149 - e0; /* bits dropped, >= 2 */
  if (d > 40) return 0.0f; /* below half the smallest subnormal */
  ulong keep = qq >> d;
  const ulong rem = qq & ((1ul << d) - 1ul), mid = 1ul << (d - 1);
  if (rem > mid || (rem == mid && (rr != 0ul || (keep & 1ul)))) keep++;
  int ek = e0 + d; /* result = keep * 2^ek */
  if (keep == 0x1000000ul) {
    keep >>= 1;
    ek++;
  }
  if (keep < 0x800000ul) return as_float((uint)keep); /* subnormal (ek = -149) */
  return as_float(((uint)(ek + 150) << 23) | ((uint)keep & 0x7FFFFFu));
}

#endif
