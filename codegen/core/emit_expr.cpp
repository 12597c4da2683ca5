#include "codegen/core/emit_expr.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "ir/error.h"
#include "ir/low_bit.h"

namespace kiln::codegen {

using detail::low_bit_encode;
using detail::low_bit_suffix;

namespace {

bool is_floatish(DType t) { return computes_as_float(t); }

// A double constant as a CUDA expression of type `float` or `double`, exact
// (bit pattern), NaN and infinities included.
std::string float_literal(double v, bool as_double) {
  if (as_double) return fmt::format("__longlong_as_double({:#x}LL)", std::bit_cast<uint64_t>(v));
  return fmt::format("__uint_as_float({:#x}u)", std::bit_cast<uint32_t>(static_cast<float>(v)));
}

std::string int_literal(int64_t v) {
  if (v == INT64_MIN) return "(-9223372036854775807LL - 1)";
  return fmt::format("{}LL", v);
}

// The reference's float_to_dtype, applied to constants at emit time.
int64_t const_to_int(DType t, double v) {
  if (is_low_bit_int(t)) return float_to_low_bit_int(t, v);
  if (std::isnan(v)) return 0;
  auto clamp = [&](double lo, double hi) { return static_cast<int64_t>(std::clamp(std::trunc(v), lo, hi)); };
  switch (t) {
    case DType::I8:
      return clamp(-128.0, 127.0);
    case DType::I16:
      return clamp(-32768.0, 32767.0);
    case DType::I32:
      return clamp(-2147483648.0, 2147483647.0);
    case DType::U8:
      return clamp(0.0, 255.0);
    case DType::U16:
      return clamp(0.0, 65535.0);
    case DType::U32:
      return clamp(0.0, 4294967295.0);
    case DType::U64:
      if (v <= 0) return 0;
      if (v >= 18446744073709551616.0) return -1;
      return static_cast<int64_t>(static_cast<uint64_t>(v));
    case DType::Bool:
      return v != 0;
    default:
      if (v >= 9.2233720368547758e18) return INT64_MAX;
      if (v <= -9.2233720368547758e18) return INT64_MIN;
      return static_cast<int64_t>(v);
  }
}

// `x` (a long long) wrapped to an integer dtype, as the reference's wrap_int.
std::string wrap(DType t, const std::string& x) {
  switch (t) {
    case DType::I4:
      return fmt::format("(((long long)({}) & 15LL) ^ 8LL) - 8LL", x);
    case DType::U4:
      return fmt::format("((long long)({}) & 15LL)", x);
    case DType::I2:
      return fmt::format("(((long long)({}) & 3LL) ^ 2LL) - 2LL", x);
    case DType::U2:
      return fmt::format("((long long)({}) & 3LL)", x);
    case DType::I8:
      return fmt::format("(long long)(signed char)({})", x);
    case DType::I16:
      return fmt::format("(long long)(short)({})", x);
    case DType::I32:
      return fmt::format("(long long)(int)({})", x);
    case DType::U8:
      return fmt::format("(long long)(unsigned char)({})", x);
    case DType::U16:
      return fmt::format("(long long)(unsigned short)({})", x);
    case DType::U32:
      return fmt::format("(long long)(unsigned int)({})", x);
    case DType::Bool:
      return fmt::format("(long long)(({}) != 0)", x);
    default:
      return x;
  }
}

// A floating value converted to an integer dtype (float_to_dtype).
std::string float_to_dtype(DType t, const std::string& x) {
  if (is_low_bit_int(t)) return wrap(t, fmt::format("kiln_f2ll_wrap({})", x));
  switch (t) {
    case DType::I8:
      return fmt::format("kiln_f2i({}, -128.0, 127.0)", x);
    case DType::I16:
      return fmt::format("kiln_f2i({}, -32768.0, 32767.0)", x);
    case DType::I32:
      return fmt::format("kiln_f2i({}, -2147483648.0, 2147483647.0)", x);
    case DType::U8:
      return fmt::format("kiln_f2i({}, 0.0, 255.0)", x);
    case DType::U16:
      return fmt::format("kiln_f2i({}, 0.0, 65535.0)", x);
    case DType::U32:
      return fmt::format("kiln_f2i({}, 0.0, 4294967295.0)", x);
    case DType::U64:
      return fmt::format("kiln_f2u64({})", x);
    case DType::Bool:
      return fmt::format("(long long)((double)({}) != 0.0 && ({}) == ({}))", x, x, x);
    default:
      return fmt::format("kiln_f2ll({})", x);
  }
}

// BitCast: a value of the compute type as the bits its dtype stores (a long
// long), and bits as a dtype's compute value: the reference's stored_bits /
// from_bits.
std::string stored_bits(DType t, const std::string& x) {
  switch (t) {
    case DType::F32:
      return fmt::format("(long long)__float_as_uint({})", x);
    case DType::F64:
      return fmt::format("__double_as_longlong({})", x);
    case DType::F16:  // a NaN keeps its sign and payload bits, as the reference's stored_bits
      return fmt::format(
          "({0} != {0} ? (long long)(((__float_as_uint({0}) >> 16) & 0x8000u) | 0x7c00u | "
          "(((__float_as_uint({0}) >> 13) & 0x3ffu) ? ((__float_as_uint({0}) >> 13) & 0x3ffu) : 0x200u)) "
          ": (long long)__half_as_ushort(__float2half_rn({0})))",
          x);
    case DType::BF16:
      return fmt::format(
          "({0} != {0} ? (long long)((__float_as_uint({0}) >> 16) | 0x40u) "
          ": (long long)__bfloat16_as_ushort(__float2bfloat16_rn({0})))",
          x);
    default:
      if (is_low_bit_float(t)) return fmt::format("(long long){}", low_bit_encode(t, x, false, 1));
      if (dtype_size(t) == 8) return x;
      return fmt::format("(({}) & {}LL)", x,
                         (int64_t(1) << (is_low_bit(t) ? low_bit_width(t) : 8 * int(dtype_size(t)))) - 1);
  }
}

std::string from_bits(DType t, const std::string& b) {
  switch (t) {
    case DType::F32:
      return fmt::format("__uint_as_float((unsigned){})", b);
    case DType::F64:
      return fmt::format("__longlong_as_double({})", b);
    case DType::F16:
      return fmt::format("__half2float(__ushort_as_half((unsigned short){}))", b);
    case DType::BF16:
      return fmt::format("__bfloat162float(__ushort_as_bfloat16((unsigned short){}))", b);
    default:
      if (is_low_bit_float(t)) return fmt::format("kiln_from_{}((unsigned){})", low_bit_suffix(t), b);
      return wrap(t, b);
  }
}

}  // namespace

namespace {

// Ops that only have a floating-point form (the reference evaluates them on
// floats only): emit_expr writes them for float-computed nodes alone.
bool needs_float(ExprOp op) {
  switch (op) {
    case ExprOp::Exp:
    case ExprOp::Log:
    case ExprOp::Sqrt:
    case ExprOp::Recip:
    case ExprOp::Sin:
    case ExprOp::Cos:
    case ExprOp::Tan:
    case ExprOp::Asin:
    case ExprOp::Acos:
    case ExprOp::Atan:
    case ExprOp::Sinh:
    case ExprOp::Cosh:
    case ExprOp::Tanh:
    case ExprOp::Asinh:
    case ExprOp::Acosh:
    case ExprOp::Atanh:
    case ExprOp::Erf:
      return true;
    default:
      return false;
  }
}

}  // namespace

void check_expr_emittable(const Expr& e) {
  KILN_CHECK(!e.nodes.empty(), "codegen: empty expression");
  for (size_t k = 0; k < e.nodes.size(); ++k) {
    const ExprNode& nd = e.nodes[k];
    if (needs_float(nd.op) && !is_floatish(nd.dtype))
      fail("codegen: expression node {} ({}) on {} cannot be evaluated", k, expr_op_name(nd.op), dtype_name(nd.dtype));
  }
}

std::string emit_expr(const Expr& e, const std::vector<std::string>& inputs, const std::string& prefix,
                      const std::string& indent, std::string& out) {
  check_expr_emittable(e);
  const int nn = static_cast<int>(e.nodes.size());
  auto var = [&](int k) { return fmt::format("{}{}", prefix, k); };
  auto isf = [&](int k) { return is_floatish(e.nodes[k].dtype); };
  auto dt = [&](int k) { return e.nodes[k].dtype; };
  // Operand as a floating value of type `ty` ("float" or "double"): the
  // reference's fa() (u64 read unsigned).
  auto fa = [&](int k, std::string_view ty) -> std::string {
    if (isf(k)) return (ty == "double" && dt(k) != DType::F64) ? fmt::format("(double){}", var(k)) : var(k);
    if (dt(k) == DType::U64) return fmt::format("({})(unsigned long long){}", ty, var(k));
    return fmt::format("({}){}", ty, var(k));
  };
  // Operand as an int64 (the reference's ia()).
  auto ia = [&](int k) -> std::string {
    if (isf(k)) return fmt::format("kiln_f2ll((double){})", var(k));
    return var(k);
  };
  auto ua = [&](int k) { return fmt::format("(unsigned long long){}", ia(k)); };

  for (int k = 0; k < nn; ++k) {
    const ExprNode& nd = e.nodes[k];
    const bool f = isf(k);
    const std::string ct(cuda_compute_type(nd.dtype));
    // The type a floating node computes its step in: double when the node is
    // f64 or reads an operand that is not float-computed (f64, integers).
    std::string_view opt = "float";
    if (f) {
      bool dbl = nd.dtype == DType::F64;
      for (int src : {nd.a, nd.b, nd.c}) {
        if (src < 0) continue;
        if (nd.op == ExprOp::Select && src == nd.a) continue;  // the condition
        if (!isf(src) || dt(src) == DType::F64) dbl = true;
      }
      opt = dbl ? "double" : "float";
    }
    const bool u64 = nd.dtype == DType::U64;
    // check_expr_emittable refused a float-only op on another dtype already.
    auto need_f = [&] {
      KILN_CHECK(f, "codegen: expression node {}: needs_float() misses {}", k, expr_op_name(nd.op));
    };
    auto un_f = [&](std::string_view fn) {
      need_f();
      return fmt::format("{}({})", fn, fa(nd.a, opt));
    };
    auto bin_f = [&](std::string_view fn) { return fmt::format("{}({}, {})", fn, fa(nd.a, opt), fa(nd.b, opt)); };
    auto infix_f = [&](std::string_view o) { return fmt::format("{} {} {}", fa(nd.a, opt), o, fa(nd.b, opt)); };
    auto un_i = [&](const std::string& x) { return wrap(nd.dtype, x); };
    auto bin_i = [&](std::string_view fn) { return wrap(nd.dtype, fmt::format("{}({}, {})", fn, ia(nd.a), ia(nd.b))); };
    std::string rhs;
    switch (nd.op) {
      case ExprOp::Input: {
        KILN_CHECK(nd.input >= 0 && nd.input < static_cast<int>(inputs.size()),
                   "codegen: expression reads input {} of {}", nd.input, inputs.size());
        rhs = inputs[nd.input];
        break;
      }
      case ExprOp::Const:
        rhs = f ? float_literal(nd.value, nd.dtype == DType::F64) : int_literal(const_to_int(nd.dtype, nd.value));
        break;
      case ExprOp::Neg:
        rhs = f ? fmt::format("-{}", fa(nd.a, opt)) : un_i(fmt::format("kiln_ineg({})", ia(nd.a)));
        break;
      case ExprOp::Abs:
        rhs = f                           ? un_f("kiln_fabs")
              : is_unsigned_int(nd.dtype) ? un_i(ia(nd.a))
                                          : un_i(fmt::format("kiln_iabs({})", ia(nd.a)));
        break;
      case ExprOp::Exp:
        rhs = un_f("kiln_exp");
        break;
      case ExprOp::Log:
        rhs = un_f("kiln_log");
        break;
      case ExprOp::Sqrt:
        rhs = un_f("kiln_sqrt");
        break;
      case ExprOp::Recip:
        need_f();
        rhs = fmt::format("({})1 / {}", opt, fa(nd.a, opt));
        break;
      case ExprOp::Floor:
        rhs = f ? un_f("kiln_floor") : un_i(ia(nd.a));
        break;
      case ExprOp::Ceil:
        rhs = f ? un_f("kiln_ceil") : un_i(ia(nd.a));
        break;
      case ExprOp::Round:
        rhs = f ? un_f("kiln_rint") : un_i(ia(nd.a));
        break;
      case ExprOp::Sign:
        if (f) rhs = un_f("kiln_sign");
        else if (is_unsigned_int(nd.dtype)) rhs = un_i(fmt::format("(long long)({} != 0)", ia(nd.a)));
        else rhs = un_i(fmt::format("(long long)(({0} > 0) - ({0} < 0))", ia(nd.a)));
        break;
      case ExprOp::Sin:
        rhs = un_f("kiln_sin");
        break;
      case ExprOp::Cos:
        rhs = un_f("kiln_cos");
        break;
      case ExprOp::Tan:
        rhs = un_f("kiln_tan");
        break;
      case ExprOp::Asin:
        rhs = un_f("kiln_asin");
        break;
      case ExprOp::Acos:
        rhs = un_f("kiln_acos");
        break;
      case ExprOp::Atan:
        rhs = un_f("kiln_atan");
        break;
      case ExprOp::Sinh:
        rhs = un_f("kiln_sinh");
        break;
      case ExprOp::Cosh:
        rhs = un_f("kiln_cosh");
        break;
      case ExprOp::Tanh:
        rhs = un_f("kiln_tanh");
        break;
      case ExprOp::Asinh:
        rhs = un_f("kiln_asinh");
        break;
      case ExprOp::Acosh:
        rhs = un_f("kiln_acosh");
        break;
      case ExprOp::Atanh:
        rhs = un_f("kiln_atanh");
        break;
      case ExprOp::Erf:
        rhs = un_f("kiln_erf");
        break;
      case ExprOp::Not:
        rhs = fmt::format("(long long)({} == 0)", ia(nd.a));
        break;
      case ExprOp::BitNot:
        rhs = un_i(fmt::format("~{}", ia(nd.a)));
        break;
      case ExprOp::IsNan:
        rhs = fmt::format("(long long)({0} != {0})", fa(nd.a, "double"));
        break;
      case ExprOp::IsPosInf:
        rhs = fmt::format("(long long)({} == kiln_inf())", fa(nd.a, "double"));
        break;
      case ExprOp::IsNegInf:
        rhs = fmt::format("(long long)({} == -kiln_inf())", fa(nd.a, "double"));
        break;
      case ExprOp::Add:
        rhs = f ? infix_f("+") : bin_i("kiln_add");
        break;
      case ExprOp::Sub:
        rhs = f ? infix_f("-") : bin_i("kiln_sub");
        break;
      case ExprOp::Mul:
        rhs = f ? bin_f("kiln_mul") : bin_i("kiln_imul");
        break;
      case ExprOp::Div:
        rhs = f ? infix_f("/") : u64 ? bin_i("kiln_udiv") : bin_i("kiln_idiv");
        break;
      case ExprOp::Pow:
        if (f) rhs = bin_f("kiln_pow");
        else if (isf(nd.b))  // integer base, floating exponent: pow in double, truncated
          rhs = float_to_dtype(nd.dtype, fmt::format("kiln_pow({}, {})", fa(nd.a, "double"), fa(nd.b, "double")));
        else rhs = bin_i("kiln_ipow");
        break;
      case ExprOp::Max:
        rhs = f ? bin_f("kiln_max") : u64 ? bin_i("kiln_umax") : bin_i("kiln_imax");
        break;
      case ExprOp::Min:
        rhs = f ? bin_f("kiln_min") : u64 ? bin_i("kiln_umin") : bin_i("kiln_imin");
        break;
      case ExprOp::Mod:
        rhs = f ? bin_f("kiln_pymod") : u64 ? bin_i("kiln_umod") : bin_i("kiln_ipymod");
        break;
      case ExprOp::FMod:
        rhs = f ? bin_f("kiln_fmod") : u64 ? bin_i("kiln_umod") : bin_i("kiln_ifmod");
        break;
      case ExprOp::Eq:
      case ExprOp::Lt:
      case ExprOp::Le:
      case ExprOp::Gt:
      case ExprOp::Ge: {
        std::string_view o = nd.op == ExprOp::Eq   ? "=="
                             : nd.op == ExprOp::Lt ? "<"
                             : nd.op == ExprOp::Le ? "<="
                             : nd.op == ExprOp::Gt ? ">"
                                                   : ">=";
        std::string a, b;
        if (isf(nd.a) || isf(nd.b)) {
          std::string_view t = (dt(nd.a) == DType::F32 || dt(nd.a) == DType::F16 || dt(nd.a) == DType::BF16) &&
                                       (dt(nd.b) == DType::F32 || dt(nd.b) == DType::F16 || dt(nd.b) == DType::BF16)
                                   ? "float"
                                   : "double";
          a = fa(nd.a, t);
          b = fa(nd.b, t);
        } else if (dt(nd.a) == DType::U64 || dt(nd.b) == DType::U64) {
          a = ua(nd.a);
          b = ua(nd.b);
        } else {
          a = ia(nd.a);
          b = ia(nd.b);
        }
        rhs = fmt::format("(long long)({} {} {})", a, o, b);
        break;
      }
      case ExprOp::And:
        rhs = fmt::format("(long long)({} != 0 && {} != 0)", ia(nd.a), ia(nd.b));
        break;
      case ExprOp::Or:
        rhs = fmt::format("(long long)({} != 0 || {} != 0)", ia(nd.a), ia(nd.b));
        break;
      case ExprOp::Xor:
        rhs = fmt::format("(long long)(({} != 0) != ({} != 0))", ia(nd.a), ia(nd.b));
        break;
      case ExprOp::BitAnd:
        rhs = un_i(fmt::format("{} & {}", ia(nd.a), ia(nd.b)));
        break;
      case ExprOp::BitOr:
        rhs = un_i(fmt::format("{} | {}", ia(nd.a), ia(nd.b)));
        break;
      case ExprOp::BitXor:
        rhs = un_i(fmt::format("{} ^ {}", ia(nd.a), ia(nd.b)));
        break;
      case ExprOp::Shl:
        rhs = bin_i("kiln_shl");
        break;
      case ExprOp::Shr:
        rhs = bin_i("kiln_shr");
        break;
      case ExprOp::Select:
        if (f) rhs = fmt::format("{} != 0 ? {} : {}", ia(nd.a), fa(nd.b, opt), fa(nd.c, opt));
        else rhs = fmt::format("{} != 0 ? {} : {}", ia(nd.a), ia(nd.b), ia(nd.c));
        break;
      case ExprOp::Cast: {
        const int a = nd.a;
        if (f) {
          if (!isf(a) && nd.dtype == DType::F32)  // one rounding from a 64-bit integer
            rhs = dt(a) == DType::U64 ? fmt::format("(float)(unsigned long long){}", var(a))
                                      : fmt::format("(float){}", var(a));
          else if (nd.dtype == DType::F16)
            rhs = fmt::format("kiln_round_f16({})", isf(a) && dt(a) != DType::F64 ? var(a) : fa(a, "double"));
          else if (nd.dtype == DType::BF16)
            rhs = fmt::format("kiln_round_bf16({})", isf(a) && dt(a) != DType::F64 ? var(a) : fa(a, "double"));
          else if (nd.dtype == DType::F32) rhs = fmt::format("(float){}", var(a));
          else if (is_low_bit_float(nd.dtype))  // one rounding, from the float (a double: via round-to-odd)
            rhs = fmt::format(
                "kiln_from_{}({})", low_bit_suffix(nd.dtype),
                low_bit_encode(
                    nd.dtype, isf(a) && dt(a) != DType::F64 ? var(a) : fmt::format("kiln_d2f_odd({})", fa(a, "double")),
                    nd.saturate, nd.round_mode));
          else rhs = fa(a, "double");
        } else if (nd.dtype == DType::Bool) {
          rhs = fmt::format("(long long)({} != 0)", var(a));
        } else if (isf(a)) {
          rhs = float_to_dtype(nd.dtype, fmt::format("(double){}", var(a)));
        } else {
          rhs = wrap(nd.dtype, var(a));
        }
        break;
      }
      case ExprOp::BitCast: {
        // An f16 operand read straight from memory: its stored bits, since
        // CUDA's half -> float makes every NaN 0x7fff (the reference keeps them).
        const ExprNode& src = e.nodes[nd.a];
        const std::string_view load = "__half2float(";
        std::string bits;
        if (src.op == ExprOp::Input && src.dtype == DType::F16) {
          const std::string& in = inputs.at(src.input);
          if (in.rfind(load, 0) == 0 && in.back() == ')')
            bits = fmt::format("(long long)__half_as_ushort({})", in.substr(load.size(), in.size() - load.size() - 1));
        }
        rhs = from_bits(nd.dtype, bits.empty() ? stored_bits(dt(nd.a), var(nd.a)) : bits);
        break;
      }
    }
    out += fmt::format("{}const {} {} = {};\n", indent, ct, var(k), rhs);
  }
  return var(nn - 1);
}

}  // namespace kiln::codegen
