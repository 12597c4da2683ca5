// Device helpers for expressions printed by codegen/core/emit_expr.cpp. Each
// mirrors one step of the reference interpreter (ops/pointwise_eval.cpp):
// the same NaN, saturation, wrap-around and division-by-zero rules.
#ifndef KILN_EXPR_PRELUDE_
#define KILN_EXPR_PRELUDE_

#define KILN_FN __device__ __forceinline__

KILN_FN float kiln_nanf() { return __uint_as_float(0x7fc00000u); }
KILN_FN double kiln_nan() { return __longlong_as_double(0x7ff8000000000000LL); }
KILN_FN double kiln_inf() { return __longlong_as_double(0x7ff0000000000000LL); }

// a * b, never contracted into an FMA with a following add.
#ifdef KILN_SIM
KILN_FN float kiln_mul(float a, float b) { return a * b; }
KILN_FN double kiln_mul(double a, double b) { return a * b; }
#else
KILN_FN float kiln_mul(float a, float b) { return __fmul_rn(a, b); }
KILN_FN double kiln_mul(double a, double b) { return __dmul_rn(a, b); }
#endif

// Math functions. float: CUDA's single-precision function on the GPU; in the
// simulator the reference's definition (double, rounded to float).
#ifdef KILN_SIM
#define KILN_MATH1(name, dfn, ffn) \
  KILN_FN float name(float x) { return (float)::dfn((double)x); } \
  KILN_FN double name(double x) { return ::dfn(x); }
#define KILN_MATH2(name, dfn, ffn) \
  KILN_FN float name(float x, float y) { return (float)::dfn((double)x, (double)y); } \
  KILN_FN double name(double x, double y) { return ::dfn(x, y); }
#else
#define KILN_MATH1(name, dfn, ffn) \
  KILN_FN float name(float x) { return ::ffn(x); } \
  KILN_FN double name(double x) { return ::dfn(x); }
#define KILN_MATH2(name, dfn, ffn) \
  KILN_FN float name(float x, float y) { return ::ffn(x, y); } \
  KILN_FN double name(double x, double y) { return ::dfn(x, y); }
#endif
KILN_MATH1(kiln_exp, exp, expf)
KILN_MATH1(kiln_log, log, logf)
KILN_MATH1(kiln_sqrt, sqrt, sqrtf)
KILN_MATH1(kiln_floor, floor, floorf)
KILN_MATH1(kiln_ceil, ceil, ceilf)
KILN_MATH1(kiln_rint, rint, rintf)
KILN_MATH1(kiln_fabs, fabs, fabsf)
KILN_MATH1(kiln_sin, sin, sinf)
KILN_MATH1(kiln_cos, cos, cosf)
KILN_MATH1(kiln_tan, tan, tanf)
KILN_MATH1(kiln_asin, asin, asinf)
KILN_MATH1(kiln_acos, acos, acosf)
KILN_MATH1(kiln_atan, atan, atanf)
KILN_MATH1(kiln_sinh, sinh, sinhf)
KILN_MATH1(kiln_cosh, cosh, coshf)
KILN_MATH1(kiln_tanh, tanh, tanhf)
KILN_MATH1(kiln_asinh, asinh, asinhf)
KILN_MATH1(kiln_acosh, acosh, acoshf)
KILN_MATH1(kiln_atanh, atanh, atanhf)
KILN_MATH1(kiln_erf, erf, erff)
KILN_MATH2(kiln_pow, pow, powf)
KILN_MATH2(kiln_fmod, fmod, fmodf)
#undef KILN_MATH1
#undef KILN_MATH2

// NaN if either is NaN, else the larger / smaller (b on ties, as a > b ? a : b).
KILN_FN float kiln_max(float a, float b) { return (a != a || b != b) ? kiln_nanf() : (a > b ? a : b); }
KILN_FN double kiln_max(double a, double b) { return (a != a || b != b) ? kiln_nan() : (a > b ? a : b); }
KILN_FN float kiln_min(float a, float b) { return (a != a || b != b) ? kiln_nanf() : (a < b ? a : b); }
KILN_FN double kiln_min(double a, double b) { return (a != a || b != b) ? kiln_nan() : (a < b ? a : b); }
KILN_FN float kiln_sign(float x) { return x != x ? x : (float)((x > 0) - (x < 0)); }
KILN_FN double kiln_sign(double x) { return x != x ? x : (double)((x > 0) - (x < 0)); }
// Python's %: the divisor's sign.
KILN_FN float kiln_pymod(float a, float b) {
  float r = kiln_fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
KILN_FN double kiln_pymod(double a, double b) {
  double r = kiln_fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Rounds a double to float with round-to-odd, so that a later rounding to
// f16/bf16 rounds as if straight from the double.
KILN_FN float kiln_d2f_odd(double v) {
  float f = (float)v;
  if (!(f - f == 0.0f) || (double)f == v) return f;
  unsigned u = __float_as_uint(f);
  if (::fabs((double)f) > ::fabs(v)) u -= 1u;
  return __uint_as_float(u | 1u);
}

// Floating -> integer: truncate, saturate, NaN -> 0 (cvt.rzi).
KILN_FN long long kiln_f2ll(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return 9223372036854775807LL;
  if (v <= -9.2233720368547758e18) return -9223372036854775807LL - 1;
  return (long long)v;
}
KILN_FN long long kiln_f2i(double v, double lo, double hi) {
  if (v != v) return 0;
  double t = ::trunc(v);
  t = t < lo ? lo : (t > hi ? hi : t);
  return (long long)t;
}
KILN_FN long long kiln_f2u64(double v) {
  if (v != v || v <= 0) return 0;
  if (v >= 18446744073709551616.0) return -1;
  return (long long)(unsigned long long)v;
}

// Integer steps on int64 lanes (u64 as bits); callers wrap to the dtype.
KILN_FN long long kiln_add(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
KILN_FN long long kiln_sub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }
KILN_FN long long kiln_imul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }
KILN_FN long long kiln_ineg(long long a) { return (long long)(0ull - (unsigned long long)a); }
KILN_FN long long kiln_idiv(long long a, long long b) { return b == 0 ? 0 : b == -1 ? kiln_ineg(a) : a / b; }
KILN_FN long long kiln_udiv(long long a, long long b) {
  return b == 0 ? 0 : (long long)((unsigned long long)a / (unsigned long long)b);
}
KILN_FN long long kiln_umod(long long a, long long b) {
  return b == 0 ? 0 : (long long)((unsigned long long)a % (unsigned long long)b);
}
KILN_FN long long kiln_ipymod(long long a, long long b) {
  if (b == 0 || b == -1) return 0;
  long long r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
KILN_FN long long kiln_ifmod(long long a, long long b) { return b == 0 || b == -1 ? 0 : a % b; }
KILN_FN long long kiln_ipow(long long base, long long e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
  unsigned long long r = 1, b = (unsigned long long)base;
  while (e) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return (long long)r;
}
KILN_FN long long kiln_shl(long long a, long long b) {
  return b < 0 || b >= 64 ? 0 : (long long)((unsigned long long)a << b);
}
KILN_FN long long kiln_shr(long long a, long long b) {
  return b < 0 || b >= 64 ? 0 : (long long)((unsigned long long)a >> b);
}
KILN_FN long long kiln_imax(long long a, long long b) { return a > b ? a : b; }
KILN_FN long long kiln_imin(long long a, long long b) { return a < b ? a : b; }
KILN_FN long long kiln_umax(long long a, long long b) {
  return (unsigned long long)a > (unsigned long long)b ? a : b;
}
KILN_FN long long kiln_umin(long long a, long long b) {
  return (unsigned long long)a < (unsigned long long)b ? a : b;
}
KILN_FN long long kiln_iabs(long long x) { return x < 0 ? kiln_ineg(x) : x; }

#endif  // KILN_EXPR_PRELUDE_

// Rounding to f16 / bf16 (kernels that use them include the CUDA header first).
#if defined(__CUDA_FP16_H__) && !defined(KILN_EXPR_PRELUDE_FP16_)
#define KILN_EXPR_PRELUDE_FP16_
// A NaN stays the float NaN it was (its sign survives, as in the reference:
// float4e2m1 and bitcast can see it); CUDA's conversion makes it 0x7fff.
KILN_FN float kiln_round_f16(float x) { return x != x ? x : __half2float(__float2half_rn(x)); }
KILN_FN float kiln_round_f16(double x) { return kiln_round_f16(kiln_d2f_odd(x)); }
#endif
#if defined(__CUDA_BF16_H__) && !defined(KILN_EXPR_PRELUDE_BF16_)
#define KILN_EXPR_PRELUDE_BF16_
KILN_FN float kiln_round_bf16(float x) { return x != x ? x : __bfloat162float(__float2bfloat16_rn(x)); }
KILN_FN float kiln_round_bf16(double x) { return kiln_round_bf16(kiln_d2f_odd(x)); }
#endif
