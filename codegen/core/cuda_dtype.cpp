// The CUDA side of kiln's dtypes in generated kernels: compute and storage
// types, loads and stores (incl. the low-bit float codecs), and the preludes
// every kernel with expressions includes (emit_expr.h).
#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "ir/error.h"
#include "ir/low_bit.h"

namespace kiln::codegen {

namespace {

// codegen/core/expr_prelude.cuh, embedded at build time (CMake writes the .inc).
constexpr std::string_view kPrelude =
#include "expr_prelude.inc"
    ;

// ir/low_bit_codec.cuh (the reference's low-bit conversions), embedded at build time.
constexpr std::string_view kLowBitCodec =
#include "low_bit_codec.inc"
    ;

}  // namespace

namespace detail {

std::string_view low_bit_suffix(DType t) {
  switch (t) {
    case DType::F8E4M3FN:
      return "f8e4m3fn";
    case DType::F8E4M3FNUZ:
      return "f8e4m3fnuz";
    case DType::F8E5M2:
      return "f8e5m2";
    case DType::F8E5M2FNUZ:
      return "f8e5m2fnuz";
    case DType::F8E8M0:
      return "f8e8m0";
    case DType::F4E2M1:
      return "f4e2m1";
    default:
      fail("codegen: {} is not a low-bit float", dtype_name(t));
  }
}

std::string low_bit_encode(DType t, const std::string& x, bool saturate, int round_mode) {
  if (t == DType::F8E8M0) return fmt::format("kiln_to_f8e8m0({}, {}, {})", x, saturate ? "true" : "false", round_mode);
  return fmt::format("kiln_to_{}({}, {})", low_bit_suffix(t), x, saturate ? "true" : "false");
}

}  // namespace detail

using detail::low_bit_encode;
using detail::low_bit_suffix;

std::string_view cuda_compute_type(DType t) {
  if (t == DType::F64) return "double";
  if (computes_as_float(t)) return "float";
  return "long long";
}

std::string_view cuda_storage_type(DType t) {
  switch (t) {
    case DType::F32:
      return "float";
    case DType::F64:
      return "double";
    case DType::F16:
      return "__half";
    case DType::BF16:
      return "__nv_bfloat16";
    case DType::I8:
      return "signed char";
    case DType::I16:
      return "short";
    case DType::I32:
      return "int";
    case DType::I64:
      return "long long";
    case DType::U8:
      return "unsigned char";
    case DType::U16:
      return "unsigned short";
    case DType::U32:
      return "unsigned int";
    case DType::U64:
      return "unsigned long long";
    case DType::Bool:
      return "unsigned char";
    case DType::I4:
    case DType::I2:
      return "signed char";  // one element per byte, sign-extended (ir/low_bit.h)
    default:
      if (is_low_bit(t)) return "unsigned char";  // codes, or u4/u2 values
  }
  fail("codegen: no CUDA type for dtype {}", static_cast<int>(t));
}

std::string cuda_load(DType t, const std::string& stored) {
  if (is_low_bit_float(t)) return fmt::format("kiln_from_{}({})", low_bit_suffix(t), stored);
  switch (t) {
    case DType::F16:
      return fmt::format("__half2float({})", stored);
    case DType::BF16:
      return fmt::format("__bfloat162float({})", stored);
    case DType::F32:
    case DType::F64:
      return stored;
    default:
      return fmt::format("(long long)({})", stored);
  }
}

std::string cuda_store(DType t, const std::string& value) {
  // Values a cast already rounded: the encoding is exact.
  if (is_low_bit_float(t)) return fmt::format("(unsigned char){}", low_bit_encode(t, value, false, 1));
  switch (t) {
    case DType::F16:
      return fmt::format("__float2half_rn({})", value);
    case DType::BF16:
      return fmt::format("__float2bfloat16_rn({})", value);
    case DType::F32:
    case DType::F64:
      return value;
    case DType::Bool:
      return fmt::format("(unsigned char)(({}) != 0)", value);
    default:
      return fmt::format("({})({})", cuda_storage_type(t), value);
  }
}

std::string_view expr_prelude() { return kPrelude; }

std::string low_bit_prelude() {
  return "#ifndef KILN_LB_FN\n#define KILN_LB_FN __device__ __forceinline__\n"
         "#define KILN_LB_F2U(f) __float_as_uint(f)\n#define KILN_LB_U2F(u) __uint_as_float(u)\n#endif\n" +
         std::string(kLowBitCodec);
}

}  // namespace kiln::codegen
