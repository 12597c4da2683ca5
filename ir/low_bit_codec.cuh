// Encoding and decoding of ONNX's low-bit floating element types, written
// once for the host and the device: ir/low_bit.cpp includes this file for
// the reference backend and constant folding, and codegen embeds the very
// same text in every kernel's prelude (codegen/core/expr_prelude.cuh), so the
// simulator and the GPU run the reference's conversions bit for bit.
//
// The includer defines KILN_LB_FN (function qualifiers), KILN_LB_F2U(f) and
// KILN_LB_U2F(u) (float <-> its 32-bit pattern).
//
// Meaning: ml_dtypes' (what onnx.reference and onnx.numpy_helper use).
// float -> minifloat rounds to nearest, ties to even, in one rounding from the
// float; `saturate` clamps overflow (and +-Inf) to the largest finite value,
// otherwise overflow gives Inf (float8e5m2) or NaN (the FN/FNUZ forms).
// NaN keeps its sign where the type has a signed NaN; the FNUZ forms have one
// NaN (0x80) and no -0. float4e2m1 has neither NaN nor Inf and always
// saturates; a NaN becomes -0 (0x8), or +0 for a NaN with the sign bit set,
// as ml_dtypes converts it. float8e8m0 (a power of two, no sign) follows
// onnx.numpy_helper.to_float8e8m0 with its three rounding modes.
// Codes sit in the low bits of an unsigned value (a byte in memory).
#ifndef KILN_LOW_BIT_CODEC_
#define KILN_LOW_BIT_CODEC_

// How a minifloat spends its special codes.
#define KILN_MF_IEEE 0 /* all-ones exponent: Inf (mantissa 0) and NaN (float8e5m2) */
#define KILN_MF_FN 1   /* only S.1111.111 is NaN; no Inf (float8e4m3fn) */
#define KILN_MF_FNUZ 2 /* 0x80 is the one NaN; no -0, no Inf */
#define KILN_MF_NONE 3 /* no NaN, no Inf (float4e2m1) */

// m / 2^s rounded to nearest, ties to even (m < 2^24).
KILN_LB_FN unsigned kiln_rne_shift(unsigned m, int s) {
  if (s <= 0) return m;
  if (s >= 26) return 0u;
  unsigned q = m >> s, r = m & ((1u << s) - 1u), half = 1u << (s - 1);
  if (r > half || (r == half && (q & 1u))) ++q;
  return q;
}

KILN_LB_FN unsigned kiln_mf_encode(float x, int ebits, int mbits, int bias, int kind, unsigned max_code,
                                   bool saturate) {
  const unsigned top = 1u << (ebits + mbits);  // the sign bit of the code
  const unsigned u = KILN_LB_F2U(x);
  const unsigned sign = (u >> 31) ? top : 0u;
  const unsigned a = u & 0x7fffffffu;
  if (a > 0x7f800000u) {  // NaN
    if (kind == KILN_MF_IEEE) return sign | (((1u << ebits) - 1u) << mbits) | (1u << (mbits - 1));
    if (kind == KILN_MF_FN) return sign | (top - 1u);
    if (kind == KILN_MF_FNUZ) return top;
    return sign ? 0u : top;
  }
  unsigned code;
  if (a == 0x7f800000u) {
    code = 0xffffffffu;  // beyond every finite code
  } else {
    const int emin = 1 - bias;  // exponent of the smallest normal
    int e = (int)(a >> 23) - 127;
    unsigned m = a & 0x7fffffu;
    if (a >> 23) m |= 0x800000u;
    else e = -126;  // a float subnormal
    if (e < emin) code = kiln_rne_shift(m, (emin - mbits) - (e - 23));  // in units of the smallest subnormal
    else code = ((unsigned)(e - emin + 1) << mbits) + kiln_rne_shift(m, 23 - mbits) - (1u << mbits);
  }
  if (code > max_code) {
    if (saturate || kind == KILN_MF_NONE) return sign | max_code;
    if (kind == KILN_MF_IEEE) return sign | (((1u << ebits) - 1u) << mbits);
    if (kind == KILN_MF_FN) return sign | (top - 1u);
    return top;
  }
  if (kind == KILN_MF_FNUZ && code == 0u) return 0u;
  return sign | code;
}

KILN_LB_FN float kiln_mf_decode(unsigned c, int ebits, int mbits, int bias, int kind) {
  const unsigned top = 1u << (ebits + mbits);
  c &= (top << 1) - 1u;
  const unsigned sign = (c & top) ? 0x80000000u : 0u;
  const unsigned mag = c & (top - 1u);
  const unsigned e = mag >> mbits, m = mag & ((1u << mbits) - 1u);
  if (kind == KILN_MF_FNUZ && c == top) return KILN_LB_U2F(0x7fc00000u);
  if (kind == KILN_MF_FN && mag == top - 1u) return KILN_LB_U2F(sign | 0x7fc00000u);
  if (kind == KILN_MF_IEEE && e == (1u << ebits) - 1u) return KILN_LB_U2F(sign | (m ? 0x7fc00000u : 0x7f800000u));
  if (e == 0u) {  // subnormal: m * 2^(1 - bias - mbits), exact in float
    const float unit = KILN_LB_U2F((unsigned)(127 + 1 - bias - mbits) << 23);
    const float v = (float)m * unit;
    return sign ? -v : v;
  }
  return KILN_LB_U2F(sign | ((e + 127u - (unsigned)bias) << 23) | (m << (23 - mbits)));
}

KILN_LB_FN unsigned kiln_to_f8e4m3fn(float x, bool sat) { return kiln_mf_encode(x, 4, 3, 7, KILN_MF_FN, 0x7eu, sat); }
KILN_LB_FN unsigned kiln_to_f8e4m3fnuz(float x, bool sat) {
  return kiln_mf_encode(x, 4, 3, 8, KILN_MF_FNUZ, 0x7fu, sat);
}
KILN_LB_FN unsigned kiln_to_f8e5m2(float x, bool sat) { return kiln_mf_encode(x, 5, 2, 15, KILN_MF_IEEE, 0x7bu, sat); }
KILN_LB_FN unsigned kiln_to_f8e5m2fnuz(float x, bool sat) {
  return kiln_mf_encode(x, 5, 2, 16, KILN_MF_FNUZ, 0x7fu, sat);
}
KILN_LB_FN unsigned kiln_to_f4e2m1(float x, bool sat) { return kiln_mf_encode(x, 2, 1, 1, KILN_MF_NONE, 0x7u, sat); }

KILN_LB_FN float kiln_from_f8e4m3fn(unsigned c) { return kiln_mf_decode(c, 4, 3, 7, KILN_MF_FN); }
KILN_LB_FN float kiln_from_f8e4m3fnuz(unsigned c) { return kiln_mf_decode(c, 4, 3, 8, KILN_MF_FNUZ); }
KILN_LB_FN float kiln_from_f8e5m2(unsigned c) { return kiln_mf_decode(c, 5, 2, 15, KILN_MF_IEEE); }
KILN_LB_FN float kiln_from_f8e5m2fnuz(unsigned c) { return kiln_mf_decode(c, 5, 2, 16, KILN_MF_FNUZ); }
KILN_LB_FN float kiln_from_f4e2m1(unsigned c) { return kiln_mf_decode(c, 2, 1, 1, KILN_MF_NONE); }

// float8e8m0: 2^(c - 127), 0xff is NaN; the sign of x is dropped. round_mode
// 0 = "up", 1 = "down", 2 = "nearest" (onnx.numpy_helper's exact rules).
KILN_LB_FN unsigned kiln_to_f8e8m0(float x, bool sat, int round_mode) {
  const unsigned u = KILN_LB_F2U(x);
  const unsigned e = (u >> 23) & 0xffu;
  if (e == 0xffu) return 0xffu;
  bool up = false;
  if (round_mode == 0) up = (u & 0x7fffffu) != 0u;
  else if (round_mode == 2) up = (u & 0x400000u) && ((u & 0x200000u) || (u & 0x1fffffu) || e > 0u);
  if (sat && e == 0xfeu) up = false;
  return (e + (up ? 1u : 0u)) & 0xffu;
}
KILN_LB_FN float kiln_from_f8e8m0(unsigned c) {
  c &= 0xffu;
  if (c == 0xffu) return KILN_LB_U2F(0x7fc00000u);
  return KILN_LB_U2F(c ? c << 23 : 0x00400000u);
}

// A floating value on its way to i4/u4/i2/u2, as ml_dtypes' astype: truncated
// to int64 (the caller keeps the low bits); NaN, Inf and values beyond int64
// give 0.
KILN_LB_FN long long kiln_f2ll_wrap(double v) {
  if (!(v > -9223372036854775808.0 && v < 9223372036854775808.0)) return 0;
  return (long long)v;
}

#endif  // KILN_LOW_BIT_CODEC_
