#include "ops/pointwise_eval.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "ir/error.h"
#include "ir/low_bit.h"
#include "ir/shape_utils.h"

namespace kiln {

namespace {

constexpr int64_t kChunk = 2048;

// Reads `len` elements at `offsets` of a tensor into double or int64 lanes.
void load_lanes(const Tensor& t, const int64_t* offsets, int64_t len, double* fl, int64_t* il) {
  DType dt = t.dtype();
  dispatch_storage(dt, [&](auto z) {
    using T = decltype(z);
    const T* p = t.data<T>();
    if (is_low_bit_float(dt)) {
      for (int64_t j = 0; j < len; ++j) fl[j] = low_bit_to_float(dt, static_cast<uint8_t>(p[offsets[j]]));
    } else if (dt == DType::F16) {
      for (int64_t j = 0; j < len; ++j) fl[j] = half_to_float(static_cast<uint16_t>(p[offsets[j]]));
    } else if (dt == DType::BF16) {
      for (int64_t j = 0; j < len; ++j) fl[j] = bf16_to_float(static_cast<uint16_t>(p[offsets[j]]));
    } else if constexpr (std::is_floating_point_v<T>) {
      for (int64_t j = 0; j < len; ++j) fl[j] = p[offsets[j]];
    } else {
      for (int64_t j = 0; j < len; ++j) il[j] = static_cast<int64_t>(p[offsets[j]]);
    }
  });
}

void store_lanes(Tensor& t, int64_t start, int64_t len, const double* fl, const int64_t* il) {
  DType dt = t.dtype();
  dispatch_storage(dt, [&](auto z) {
    using T = decltype(z);
    T* p = t.data<T>() + start;
    if (is_low_bit_float(dt)) {  // values a Cast already rounded: exact
      for (int64_t j = 0; j < len; ++j) p[j] = static_cast<T>(low_bit_code_of(dt, static_cast<float>(fl[j])));
    } else if (dt == DType::F16) {
      for (int64_t j = 0; j < len; ++j) p[j] = float_to_half(static_cast<float>(fl[j]));
    } else if (dt == DType::BF16) {
      for (int64_t j = 0; j < len; ++j) p[j] = float_to_bf16(static_cast<float>(fl[j]));
    } else if constexpr (std::is_floating_point_v<T>) {
      for (int64_t j = 0; j < len; ++j) p[j] = static_cast<T>(fl[j]);
    } else if (dt == DType::Bool) {
      for (int64_t j = 0; j < len; ++j) p[j] = il[j] != 0;
    } else {
      for (int64_t j = 0; j < len; ++j) p[j] = static_cast<T>(il[j]);
    }
  });
}

// Rounds a double to float with round-to-odd: a later rounding to a
// narrower format (f16, bf16) then rounds as if straight from the double.
float to_float_odd(double v) {
  float f = static_cast<float>(v);
  if (!std::isfinite(f) || static_cast<double>(f) == v) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  uint32_t bits = std::bit_cast<uint32_t>(f) | 1u;
  return std::bit_cast<float>(bits);
}

// Rounds a double to what the dtype can hold (casts inside an expression must
// lose precision exactly as a real cast would), with a single rounding.
double round_to(DType t, double v, bool saturate = true, E8M0Round mode = E8M0Round::Up) {
  if (is_low_bit_float(t)) return round_to_low_bit(t, v, saturate, mode);
  switch (t) {
    case DType::F32:
      return static_cast<float>(v);
    case DType::F16:
      return half_to_float(float_to_half(to_float_odd(v)));
    case DType::BF16:
      return bf16_to_float(float_to_bf16(to_float_odd(v)));
    default:
      return v;
  }
}

int64_t wrap_int(DType t, int64_t v) {
  if (is_low_bit_int(t)) return wrap_low_bit_int(t, v);
  switch (t) {
    case DType::I8:
      return static_cast<int8_t>(v);
    case DType::I16:
      return static_cast<int16_t>(v);
    case DType::I32:
      return static_cast<int32_t>(v);
    case DType::U8:
      return static_cast<uint8_t>(v);
    case DType::U16:
      return static_cast<uint16_t>(v);
    case DType::U32:
      return static_cast<uint32_t>(v);
    case DType::Bool:
      return v != 0;
    default:
      return v;
  }
}

int64_t float_to_int(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

// Float to an integer dtype as a cast does: truncation toward zero,
// saturating at the dtype's range, NaN to 0 (what CUDA's cvt.rzi does).
int64_t float_to_dtype(DType t, double v) {
  if (is_low_bit_int(t)) return float_to_low_bit_int(t, v);  // wraps, as ml_dtypes' astype
  if (std::isnan(v)) return 0;
  switch (t) {
    case DType::I8:
      return static_cast<int64_t>(std::clamp(std::trunc(v), -128.0, 127.0));
    case DType::I16:
      return static_cast<int64_t>(std::clamp(std::trunc(v), -32768.0, 32767.0));
    case DType::I32:
      return static_cast<int64_t>(std::clamp(std::trunc(v), -2147483648.0, 2147483647.0));
    case DType::U8:
      return static_cast<int64_t>(std::clamp(std::trunc(v), 0.0, 255.0));
    case DType::U16:
      return static_cast<int64_t>(std::clamp(std::trunc(v), 0.0, 65535.0));
    case DType::U32:
      return static_cast<int64_t>(std::clamp(std::trunc(v), 0.0, 4294967295.0));
    case DType::U64:
      if (v <= 0) return 0;
      if (v >= 18446744073709551616.0) return -1;  // all ones: UINT64_MAX
      return static_cast<int64_t>(static_cast<uint64_t>(v));
    case DType::Bool:
      return v != 0;
    default:
      return float_to_int(v);
  }
}

// Integer power with wrap-around; negative exponents give 0 except for |base| = 1.
int64_t int_pow(int64_t base, int64_t e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
  uint64_t r = 1, b = static_cast<uint64_t>(base);
  while (e) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<int64_t>(r);
}

double py_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

int64_t py_mod_int(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;  // -1: INT64_MIN % -1 traps
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// A lane's value as the bits its dtype stores (BitCast's source), and bits
// read back as a dtype's lane value (its target). Floats travel through
// double lanes: a NaN stays a NaN of the same sign, but a signaling NaN's
// payload is quieted on the way (as the hardware's float conversions do).
uint64_t stored_bits(DType t, double f, int64_t i) {
  switch (t) {
    case DType::F32:
      return std::bit_cast<uint32_t>(static_cast<float>(f));
    case DType::F64:
      return std::bit_cast<uint64_t>(f);
    case DType::F16: {  // a NaN keeps its sign and payload bits (half_to_float put them there)
      const uint32_t u = std::bit_cast<uint32_t>(static_cast<float>(f));
      if (!std::isnan(f)) return float_to_half(static_cast<float>(f));
      const uint32_t m = (u >> 13) & 0x3ffu;
      return ((u >> 16) & 0x8000u) | 0x7c00u | (m ? m : 0x200u);
    }
    case DType::BF16:
      return float_to_bf16(static_cast<float>(f));
    default:
      if (is_low_bit_float(t)) return low_bit_code_of(t, static_cast<float>(f));
      if (dtype_size(t) == 8) return static_cast<uint64_t>(i);
      return static_cast<uint64_t>(i) & ((uint64_t(1) << (is_low_bit(t) ? low_bit_width(t) : 8 * dtype_size(t))) - 1);
  }
}

void from_bits(DType t, uint64_t b, double* f, int64_t* i) {
  switch (t) {
    case DType::F32:
      *f = std::bit_cast<float>(static_cast<uint32_t>(b));
      return;
    case DType::F64:
      *f = std::bit_cast<double>(b);
      return;
    case DType::F16:
      *f = half_to_float(static_cast<uint16_t>(b));
      return;
    case DType::BF16:
      *f = bf16_to_float(static_cast<uint16_t>(b));
      return;
    default:
      if (is_low_bit_float(t)) *f = low_bit_to_float(t, static_cast<uint8_t>(b));
      else *i = wrap_int(t, static_cast<int64_t>(b));
  }
}

double fmax_nan(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : (a > b ? a : b); }
double fmin_nan(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : (a < b ? a : b); }

}  // namespace

void eval_pointwise(const Expr& e, const std::vector<const Tensor*>& inputs, Tensor& out) {
  const Shape& os = out.shape();
  const int64_t n = out.numel();
  const int rank = static_cast<int>(os.size());
  const int nn = static_cast<int>(e.nodes.size());
  KILN_CHECK(e.result_dtype() == out.dtype(), "expr gives {} but output is {}", dtype_name(e.result_dtype()),
             dtype_name(out.dtype()));

  std::vector<std::vector<int64_t>> in_strides(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]) in_strides[i] = broadcast_strides(inputs[i]->shape(), os);

  std::vector<std::vector<double>> fl(nn);
  std::vector<std::vector<int64_t>> il(nn);
  std::vector<bool> isf(nn);
  for (int k = 0; k < nn; ++k) {
    isf[k] = computes_as_float(e.nodes[k].dtype);
    if (isf[k]) fl[k].resize(kChunk);
    else il[k].resize(kChunk);
  }
  std::vector<std::vector<int64_t>> offsets(inputs.size(), std::vector<int64_t>(kChunk));
  std::vector<int64_t> idx(rank, 0);

  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t len = std::min(kChunk, n - start);
    // Element offsets of every input for this chunk, walking the output
    // multi-index once.
    {
      std::vector<int64_t> rem(rank);
      int64_t s = start;
      for (int d = rank - 1; d >= 0; --d) {
        idx[d] = os[d] ? s % os[d] : 0;
        s = os[d] ? s / os[d] : 0;
      }
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (!inputs[i]) continue;
        const auto& st = in_strides[i];
        int64_t off = 0;
        for (int d = 0; d < rank; ++d) off += idx[d] * st[d];
        std::vector<int64_t> cur = idx;
        int64_t* o = offsets[i].data();
        for (int64_t j = 0; j < len; ++j) {
          o[j] = off;
          for (int d = rank - 1; d >= 0; --d) {
            off += st[d];
            if (++cur[d] < os[d]) break;
            off -= st[d] * os[d];
            cur[d] = 0;
          }
        }
      }
    }

    for (int k = 0; k < nn; ++k) {
      const ExprNode& nd = e.nodes[k];
      double* F = isf[k] ? fl[k].data() : nullptr;
      int64_t* I = isf[k] ? nullptr : il[k].data();
      // Operand j of node src as a double / an int64. uint64 lanes hold the
      // bit pattern in an int64.
      auto fa = [&](int src, int64_t j) -> double {
        if (isf[src]) return fl[src][j];
        if (e.nodes[src].dtype == DType::U64) return static_cast<double>(static_cast<uint64_t>(il[src][j]));
        return static_cast<double>(il[src][j]);
      };
      auto ia = [&](int src, int64_t j) -> int64_t { return isf[src] ? float_to_int(fl[src][j]) : il[src][j]; };
      auto unary_f = [&](auto f) {
        for (int64_t j = 0; j < len; ++j) F[j] = f(fa(nd.a, j));
      };
      auto binary_f = [&](auto f) {
        for (int64_t j = 0; j < len; ++j) F[j] = f(fa(nd.a, j), fa(nd.b, j));
      };
      auto unary_i = [&](auto f) {
        for (int64_t j = 0; j < len; ++j) I[j] = wrap_int(nd.dtype, f(ia(nd.a, j)));
      };
      auto binary_i = [&](auto f) {
        for (int64_t j = 0; j < len; ++j) I[j] = wrap_int(nd.dtype, f(ia(nd.a, j), ia(nd.b, j)));
      };
      // uint64 results: the same on the unsigned bit patterns.
      auto binary_u = [&](auto f) {
        for (int64_t j = 0; j < len; ++j)
          I[j] = static_cast<int64_t>(f(static_cast<uint64_t>(ia(nd.a, j)), static_cast<uint64_t>(ia(nd.b, j))));
      };
      const bool u64 = nd.dtype == DType::U64;
      // Comparisons and logic read their operands in the operands' own kind.
      auto compare = [&](auto f) {
        bool opf = isf[nd.a] || isf[nd.b];
        bool opu = e.nodes[nd.a].dtype == DType::U64 || e.nodes[nd.b].dtype == DType::U64;
        for (int64_t j = 0; j < len; ++j) {
          if (opf) I[j] = f(fa(nd.a, j), fa(nd.b, j));
          else if (opu) I[j] = f(static_cast<uint64_t>(ia(nd.a, j)), static_cast<uint64_t>(ia(nd.b, j)));
          else I[j] = f(ia(nd.a, j), ia(nd.b, j));
        }
      };
      const bool f = isf[k];
      switch (nd.op) {
        case ExprOp::Input: {
          const Tensor* t = inputs.at(nd.input);
          KILN_CHECK(t, "expr reads absent input {}", nd.input);
          if (computes_as_float(t->dtype()) == f) {
            load_lanes(*t, offsets[nd.input].data(), len, F, I);
          } else {  // the expression reads the operand in another kind
            std::vector<double> tf(len);
            std::vector<int64_t> ti(len);
            load_lanes(*t, offsets[nd.input].data(), len, tf.data(), ti.data());
            for (int64_t j = 0; j < len; ++j) {
              if (f) F[j] = static_cast<double>(ti[j]);
              else I[j] = float_to_int(tf[j]);
            }
          }
          break;
        }
        case ExprOp::Const:
          for (int64_t j = 0; j < len; ++j) {
            if (f) F[j] = nd.value;
            else I[j] = float_to_dtype(nd.dtype, nd.value);
          }
          break;
        case ExprOp::Neg:
          f ? unary_f([](double x) { return -x; }) : unary_i([](int64_t x) { return int64_t(0 - uint64_t(x)); });
          break;
        case ExprOp::Abs:
          if (f) unary_f([](double x) { return std::fabs(x); });
          else if (is_unsigned_int(nd.dtype)) unary_i([](int64_t x) { return x; });
          else unary_i([](int64_t x) { return x < 0 ? int64_t(0 - uint64_t(x)) : x; });
          break;
        case ExprOp::Exp:
          unary_f([](double x) { return std::exp(x); });
          break;
        case ExprOp::Log:
          unary_f([](double x) { return std::log(x); });
          break;
        case ExprOp::Sqrt:
          unary_f([](double x) { return std::sqrt(x); });
          break;
        case ExprOp::Recip:
          unary_f([](double x) { return 1.0 / x; });
          break;
        case ExprOp::Floor:
          f ? unary_f([](double x) { return std::floor(x); }) : unary_i([](int64_t x) { return x; });
          break;
        case ExprOp::Ceil:
          f ? unary_f([](double x) { return std::ceil(x); }) : unary_i([](int64_t x) { return x; });
          break;
        case ExprOp::Round:
          f ? unary_f([](double x) { return std::nearbyint(x); }) : unary_i([](int64_t x) { return x; });
          break;
        case ExprOp::Sign:
          if (f) unary_f([](double x) { return std::isnan(x) ? x : double((x > 0) - (x < 0)); });
          else if (is_unsigned_int(nd.dtype)) unary_i([](int64_t x) { return int64_t(x != 0); });
          else unary_i([](int64_t x) { return int64_t((x > 0) - (x < 0)); });
          break;
        case ExprOp::Sin:
          unary_f([](double x) { return std::sin(x); });
          break;
        case ExprOp::Cos:
          unary_f([](double x) { return std::cos(x); });
          break;
        case ExprOp::Tan:
          unary_f([](double x) { return std::tan(x); });
          break;
        case ExprOp::Asin:
          unary_f([](double x) { return std::asin(x); });
          break;
        case ExprOp::Acos:
          unary_f([](double x) { return std::acos(x); });
          break;
        case ExprOp::Atan:
          unary_f([](double x) { return std::atan(x); });
          break;
        case ExprOp::Sinh:
          unary_f([](double x) { return std::sinh(x); });
          break;
        case ExprOp::Cosh:
          unary_f([](double x) { return std::cosh(x); });
          break;
        case ExprOp::Tanh:
          unary_f([](double x) { return std::tanh(x); });
          break;
        case ExprOp::Asinh:
          unary_f([](double x) { return std::asinh(x); });
          break;
        case ExprOp::Acosh:
          unary_f([](double x) { return std::acosh(x); });
          break;
        case ExprOp::Atanh:
          unary_f([](double x) { return std::atanh(x); });
          break;
        case ExprOp::Erf:
          unary_f([](double x) { return std::erf(x); });
          break;
        case ExprOp::Not:
          for (int64_t j = 0; j < len; ++j) I[j] = ia(nd.a, j) == 0;
          break;
        case ExprOp::BitNot:
          unary_i([](int64_t x) { return ~x; });
          break;
        case ExprOp::IsNan:
          for (int64_t j = 0; j < len; ++j) I[j] = std::isnan(fa(nd.a, j));
          break;
        case ExprOp::IsPosInf:
          for (int64_t j = 0; j < len; ++j) I[j] = fa(nd.a, j) == INFINITY;
          break;
        case ExprOp::IsNegInf:
          for (int64_t j = 0; j < len; ++j) I[j] = fa(nd.a, j) == -INFINITY;
          break;
        case ExprOp::Add:
          f ? binary_f([](double a, double b) { return a + b; })
            : binary_i([](int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); });
          break;
        case ExprOp::Sub:
          f ? binary_f([](double a, double b) { return a - b; })
            : binary_i([](int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); });
          break;
        case ExprOp::Mul:
          f ? binary_f([](double a, double b) { return a * b; })
            : binary_i([](int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); });
          break;
        case ExprOp::Div:
          if (f) binary_f([](double a, double b) { return a / b; });
          else if (u64) binary_u([](uint64_t a, uint64_t b) { return b == 0 ? uint64_t(0) : a / b; });
          // Truncation; x / 0 is defined as 0 and INT64_MIN / -1 wraps (both trap in C).
          else binary_i([](int64_t a, int64_t b) { return b == 0 ? 0 : b == -1 ? int64_t(0 - uint64_t(a)) : a / b; });
          break;
        case ExprOp::Pow:
          if (f) {
            binary_f([](double a, double b) { return std::pow(a, b); });
          } else if (isf[nd.b]) {  // integer base, floating exponent: computed in floating point, truncated
            for (int64_t j = 0; j < len; ++j) I[j] = float_to_dtype(nd.dtype, std::pow(fa(nd.a, j), fl[nd.b][j]));
          } else {
            binary_i(int_pow);
          }
          break;
        case ExprOp::Max:
          if (f) binary_f(fmax_nan);
          else if (u64) binary_u([](uint64_t a, uint64_t b) { return a > b ? a : b; });
          else binary_i([](int64_t a, int64_t b) { return a > b ? a : b; });
          break;
        case ExprOp::Min:
          if (f) binary_f(fmin_nan);
          else if (u64) binary_u([](uint64_t a, uint64_t b) { return a < b ? a : b; });
          else binary_i([](int64_t a, int64_t b) { return a < b ? a : b; });
          break;
        case ExprOp::Mod:
          if (f) binary_f(py_mod);
          else if (u64) binary_u([](uint64_t a, uint64_t b) { return b == 0 ? uint64_t(0) : a % b; });
          else binary_i(py_mod_int);
          break;
        case ExprOp::FMod:
          if (f) binary_f([](double a, double b) { return std::fmod(a, b); });
          else if (u64) binary_u([](uint64_t a, uint64_t b) { return b == 0 ? uint64_t(0) : a % b; });
          else binary_i([](int64_t a, int64_t b) { return b == 0 || b == -1 ? int64_t(0) : a % b; });
          break;
        case ExprOp::Eq:
          compare([](auto a, auto b) { return int64_t(a == b); });
          break;
        case ExprOp::Lt:
          compare([](auto a, auto b) { return int64_t(a < b); });
          break;
        case ExprOp::Le:
          compare([](auto a, auto b) { return int64_t(a <= b); });
          break;
        case ExprOp::Gt:
          compare([](auto a, auto b) { return int64_t(a > b); });
          break;
        case ExprOp::Ge:
          compare([](auto a, auto b) { return int64_t(a >= b); });
          break;
        case ExprOp::And:
          for (int64_t j = 0; j < len; ++j) I[j] = ia(nd.a, j) && ia(nd.b, j);
          break;
        case ExprOp::Or:
          for (int64_t j = 0; j < len; ++j) I[j] = ia(nd.a, j) || ia(nd.b, j);
          break;
        case ExprOp::Xor:
          for (int64_t j = 0; j < len; ++j) I[j] = (ia(nd.a, j) != 0) != (ia(nd.b, j) != 0);
          break;
        case ExprOp::BitAnd:
          binary_i([](int64_t a, int64_t b) { return a & b; });
          break;
        case ExprOp::BitOr:
          binary_i([](int64_t a, int64_t b) { return a | b; });
          break;
        case ExprOp::BitXor:
          binary_i([](int64_t a, int64_t b) { return a ^ b; });
          break;
        case ExprOp::Shl:
          binary_i([](int64_t a, int64_t b) { return b < 0 || b >= 64 ? int64_t(0) : int64_t(uint64_t(a) << b); });
          break;
        case ExprOp::Shr:
          binary_i([](int64_t a, int64_t b) { return b < 0 || b >= 64 ? int64_t(0) : int64_t(uint64_t(a) >> b); });
          break;
        case ExprOp::Select:
          for (int64_t j = 0; j < len; ++j) {
            bool c = ia(nd.a, j) != 0;
            if (f) F[j] = c ? fa(nd.b, j) : fa(nd.c, j);
            else I[j] = c ? ia(nd.b, j) : ia(nd.c, j);
          }
          break;
        case ExprOp::Cast:
          for (int64_t j = 0; j < len; ++j) {
            if (f) {
              if (!isf[nd.a] && nd.dtype == DType::F32)  // one rounding from a 64-bit integer
                F[j] = e.nodes[nd.a].dtype == DType::U64 ? double(float(uint64_t(il[nd.a][j])))
                                                         : double(float(il[nd.a][j]));
              else F[j] = round_to(nd.dtype, fa(nd.a, j), nd.saturate, static_cast<E8M0Round>(nd.round_mode));
            } else if (nd.dtype == DType::Bool) {
              I[j] = isf[nd.a] ? fl[nd.a][j] != 0 : il[nd.a][j] != 0;
            } else if (isf[nd.a]) {
              I[j] = float_to_dtype(nd.dtype, fl[nd.a][j]);
            } else {
              I[j] = wrap_int(nd.dtype, il[nd.a][j]);
            }
          }
          break;
        case ExprOp::BitCast:
          for (int64_t j = 0; j < len; ++j)
            from_bits(nd.dtype,
                      stored_bits(e.nodes[nd.a].dtype, isf[nd.a] ? fl[nd.a][j] : 0, isf[nd.a] ? 0 : il[nd.a][j]),
                      f ? &F[j] : nullptr, f ? nullptr : &I[j]);
          break;
      }
      // Floating nodes below f64 compute at float precision, as generated
      // CUDA code does (f16/bf16 compute in float too); casts round further.
      if (f && nd.dtype != DType::F64 && nd.op != ExprOp::Input)
        for (int64_t j = 0; j < len; ++j) F[j] = static_cast<float>(F[j]);
    }
    store_lanes(out, start, len, isf[nn - 1] ? fl[nn - 1].data() : nullptr, isf[nn - 1] ? nullptr : il[nn - 1].data());
  }
}

}  // namespace kiln
