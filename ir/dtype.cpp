#include "ir/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>

#include "ir/error.h"

namespace kiln {

namespace {
struct Info {
  DType t;
  std::string_view name;
  size_t size;
};
constexpr Info kInfo[] = {
    {DType::F32, "f32", 4},
    {DType::F16, "f16", 2},
    {DType::BF16, "bf16", 2},
    {DType::F64, "f64", 8},
    {DType::I8, "i8", 1},
    {DType::I16, "i16", 2},
    {DType::I32, "i32", 4},
    {DType::I64, "i64", 8},
    {DType::U8, "u8", 1},
    {DType::U16, "u16", 2},
    {DType::U32, "u32", 4},
    {DType::U64, "u64", 8},
    {DType::Bool, "bool", 1},
    {DType::F8E4M3FN, "f8e4m3fn", 1},
    {DType::F8E4M3FNUZ, "f8e4m3fnuz", 1},
    {DType::F8E5M2, "f8e5m2", 1},
    {DType::F8E5M2FNUZ, "f8e5m2fnuz", 1},
    {DType::F8E8M0, "f8e8m0", 1},
    {DType::F4E2M1, "f4e2m1", 1},
    {DType::I4, "i4", 1},
    {DType::U4, "u4", 1},
    {DType::I2, "i2", 1},
    {DType::U2, "u2", 1},
    // The size of the element object, so byte counts and limits stay
    // meaningful; the characters live outside (Tensor::strings()).
    {DType::String, "string", sizeof(std::string)},
};
static_assert(std::size(kInfo) == kNumDTypes);
}  // namespace

size_t dtype_size(DType t) { return kInfo[static_cast<int>(t)].size; }
std::string_view dtype_name(DType t) { return kInfo[static_cast<int>(t)].name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const Info& i : kInfo)
    if (i.name == name) return i.t;
  return std::nullopt;
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64; }
bool is_signed_int(DType t) { return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64; }
bool is_unsigned_int(DType t) { return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64; }
bool is_low_bit(DType t) { return t >= DType::F8E4M3FN && t <= DType::U2; }
bool is_low_bit_float(DType t) { return t >= DType::F8E4M3FN && t <= DType::F4E2M1; }
bool is_low_bit_int(DType t) { return t >= DType::I4 && t <= DType::U2; }

void fail_no_numeric_storage(DType t) {
  fail("{} tensors have no numeric storage: this op does not take strings", dtype_name(t));
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  return std::bit_cast<float>(bits);
}

uint16_t float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000u)  // Inf or NaN
    return sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0);
  if (absx >= 0x477ff000u)  // rounds to >= 65520: overflow to Inf
    return sign | 0x7c00;
  if (absx < 0x38800000u) {  // below the smallest normal half: subnormal or 0
    // Let the FPU do the rounding: scale into the subnormal range.
    float a = std::bit_cast<float>(absx);
    float scaled = a * 16777216.0f;  // 2^24: subnormal unit becomes 1
    uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return sign | uint16_t(m);
  }
  uint32_t exp = (absx >> 23) - 127 + 15;
  uint32_t mant = absx & 0x7fffff;
  uint32_t h = exp << 10 | mant >> 13;
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // nearest even
  return sign | uint16_t(h);
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

uint16_t float_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffff) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);  // quiet NaN
  uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return uint16_t((x + rounding) >> 16);
}

}  // namespace kiln
