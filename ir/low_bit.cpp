#include "ir/low_bit.h"

#include <bit>
#include <cmath>

#include "ir/error.h"

namespace kiln {

#define KILN_LB_FN inline
#define KILN_LB_F2U(f) std::bit_cast<unsigned>(f)
#define KILN_LB_U2F(u) std::bit_cast<float>(static_cast<unsigned>(u))
#include "ir/low_bit_codec.cuh"
#undef KILN_LB_FN
#undef KILN_LB_F2U
#undef KILN_LB_U2F

namespace {
// A double to float with round-to-odd: a later narrower rounding then rounds
// as if straight from the double.
float to_float_odd(double v) {
  float f = static_cast<float>(v);
  if (!std::isfinite(f) || static_cast<double>(f) == v) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}
}  // namespace

int low_bit_width(DType t) {
  switch (t) {
    case DType::F4E2M1:
    case DType::I4:
    case DType::U4:
      return 4;
    case DType::I2:
    case DType::U2:
      return 2;
    default:
      return 8;
  }
}

float low_bit_to_float(DType t, uint8_t code) {
  switch (t) {
    case DType::F8E4M3FN:
      return kiln_from_f8e4m3fn(code);
    case DType::F8E4M3FNUZ:
      return kiln_from_f8e4m3fnuz(code);
    case DType::F8E5M2:
      return kiln_from_f8e5m2(code);
    case DType::F8E5M2FNUZ:
      return kiln_from_f8e5m2fnuz(code);
    case DType::F8E8M0:
      return kiln_from_f8e8m0(code);
    case DType::F4E2M1:
      return kiln_from_f4e2m1(code);
    default:
      fail("low_bit_to_float: {} is not a low-bit float", dtype_name(t));
  }
}

uint8_t float_to_low_bit(DType t, float x, bool saturate, E8M0Round round) {
  switch (t) {
    case DType::F8E4M3FN:
      return static_cast<uint8_t>(kiln_to_f8e4m3fn(x, saturate));
    case DType::F8E4M3FNUZ:
      return static_cast<uint8_t>(kiln_to_f8e4m3fnuz(x, saturate));
    case DType::F8E5M2:
      return static_cast<uint8_t>(kiln_to_f8e5m2(x, saturate));
    case DType::F8E5M2FNUZ:
      return static_cast<uint8_t>(kiln_to_f8e5m2fnuz(x, saturate));
    case DType::F8E8M0:
      return static_cast<uint8_t>(kiln_to_f8e8m0(x, saturate, static_cast<int>(round)));
    case DType::F4E2M1:
      return static_cast<uint8_t>(kiln_to_f4e2m1(x, saturate));
    default:
      fail("float_to_low_bit: {} is not a low-bit float", dtype_name(t));
  }
}

double round_to_low_bit(DType t, double v, bool saturate, E8M0Round round) {
  return low_bit_to_float(t, float_to_low_bit(t, to_float_odd(v), saturate, round));
}

int64_t wrap_low_bit_int(DType t, int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  switch (t) {
    case DType::I4:
      return static_cast<int64_t>((u & 15u) ^ 8u) - 8;
    case DType::U4:
      return static_cast<int64_t>(u & 15u);
    case DType::I2:
      return static_cast<int64_t>((u & 3u) ^ 2u) - 2;
    case DType::U2:
      return static_cast<int64_t>(u & 3u);
    default:
      fail("wrap_low_bit_int: {} is not a low-bit integer", dtype_name(t));
  }
}

int64_t float_to_low_bit_int(DType t, double v) { return wrap_low_bit_int(t, kiln_f2ll_wrap(v)); }

std::pair<int64_t, int64_t> low_bit_int_range(DType t) {
  switch (t) {
    case DType::I4:
      return {-8, 7};
    case DType::U4:
      return {0, 15};
    case DType::I2:
      return {-2, 1};
    case DType::U2:
      return {0, 3};
    default:
      fail("low_bit_int_range: {} is not a low-bit integer", dtype_name(t));
  }
}

void pack_low_bit(DType t, const uint8_t* elems, int64_t n, uint8_t* packed) {
  const int w = low_bit_width(t);
  const unsigned mask = (1u << w) - 1u;
  const int per_byte = 8 / w;
  for (int64_t k = 0; k < packed_low_bit_bytes(t, n); ++k) packed[k] = 0;
  for (int64_t i = 0; i < n; ++i)
    packed[i / per_byte] |= static_cast<uint8_t>((elems[i] & mask) << (w * (i % per_byte)));
}

void unpack_low_bit(DType t, const uint8_t* packed, int64_t n, uint8_t* elems) {
  const int w = low_bit_width(t);
  const unsigned mask = (1u << w) - 1u;
  const int per_byte = 8 / w;
  const bool sign_extend = t == DType::I4 || t == DType::I2;
  for (int64_t i = 0; i < n; ++i) {
    unsigned v = (packed[i / per_byte] >> (w * (i % per_byte))) & mask;
    if (sign_extend && (v & (1u << (w - 1)))) v |= ~mask;
    elems[i] = static_cast<uint8_t>(v);
  }
}

}  // namespace kiln
