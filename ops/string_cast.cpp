// cast_string {to}: ONNX's Cast (and CastLike) where either side is a
// string tensor; kiln's cast keeps the numeric casts, whose meaning is an Expr.
//
// To a string, numbers print as ONNX's reference (onnx.reference, numpy's
// astype(str)) prints them: integers in decimal, bool as True/False, floats
// in the fewest digits that read back to the same value of their type,
// positional ("0.9767611", "100.0") from 1e-4 up to 1e16 for f64, 1e7 for
// f32 and bf16 and 1e3 for f16, scientific outside ("1e-05", "1.2345679e+08"),
// and "nan", "inf", "-inf".
//
// From a string, as the ONNX spec says: plain and scientific decimals
// ("3.14", "1e-5", "1E8") with surrounding whitespace, and "INF", "+INF",
// "-INF", "NaN" in any case; to an integer type a decimal with a fraction
// is truncated ("100.5" -> 100). What ONNX leaves undefined ("Hello", a
// number outside the target type) is an error naming the node and string.
// To bool: "true"/"false" in any case, or a number (0 is false).
#include <charconv>
#include <cmath>
#include <limits>

#include "ops/op_helpers.h"
#include "ops/string_ops.h"

namespace kiln::ops {

namespace {

// Whether `text` (from to_chars) reads back as the value v has in dtype t.
bool reads_back(const std::string& text, DType t, double v) {
  if (t == DType::F32) {
    float f = 0;
    std::from_chars(text.data(), text.data() + text.size(), f);
    return f == static_cast<float>(v);
  }
  double d = 0;
  std::from_chars(text.data(), text.data() + text.size(), d);
  if (t == DType::F16) return half_to_float(float_to_half(static_cast<float>(d))) == static_cast<float>(v);
  if (t == DType::BF16) return bf16_to_float(float_to_bf16(static_cast<float>(d))) == static_cast<float>(v);
  return d == v;
}

std::string float_to_string(DType t, double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  const std::string sign = std::signbit(v) ? "-" : "";
  const double a = std::fabs(v);
  if (a == 0) return sign + "0.0";
  // The shortest digits that read back: d.ddd x 10^e.
  std::string digits;
  int exp10 = 0;
  for (int p = 0; p < 17; ++p) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, a, std::chars_format::scientific, p);
    std::string text(buf, r.ptr);
    if (!reads_back(text, t, a) && p < 16) continue;
    const size_t e = text.find('e');
    for (size_t k = 0; k < e; ++k)
      if (text[k] != '.') digits += text[k];
    exp10 = std::stoi(text.substr(e + 1));
    break;
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int max_positional = t == DType::F64 ? 16 : t == DType::F16 ? 3 : 7;
  if (a >= 1e-4 && a < std::pow(10.0, max_positional)) {
    const int n = static_cast<int>(digits.size());
    if (exp10 < 0) return sign + "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
    std::string whole = digits.substr(0, std::min(n, exp10 + 1)) + std::string(std::max(0, exp10 + 1 - n), '0');
    std::string frac = n > exp10 + 1 ? digits.substr(static_cast<size_t>(exp10 + 1)) : "0";
    return sign + whole + "." + frac;
  }
  std::string m = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
  return sign + m + fmt::format("e{}{:02d}", exp10 < 0 ? '-' : '+', std::abs(exp10));
}

std::string trim(const std::string& s) {
  const char* ws = " \t\n\v\f\r";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// A decimal (plain or scientific), INF or NaN; nullopt when `s` is none.
std::optional<double> parse_double(const std::string& text) {
  std::string_view s = text;
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (iequals(s, "inf") || iequals(s, "infinity")) return neg ? -INFINITY : INFINITY;
  if (iequals(s, "nan")) return NAN;
  if (s.empty() || s[0] == '+' || s[0] == '-') return std::nullopt;
  double d = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), d, std::chars_format::general);
  if (r.ec == std::errc::result_out_of_range) {  // past the double range: the infinity ONNX's reference gives
    d = INFINITY;
  } else if (r.ec != std::errc() || r.ptr != s.data() + s.size()) {
    return std::nullopt;
  }
  return neg ? -d : d;
}

std::vector<TensorType> infer_cast_string(InferContext& c) {
  const std::string to_name = c.attrs().get_string("to", "");
  std::optional<DType> to = dtype_from_name(to_name);
  if (!to) c.fail("'to' is \"{}\", not a kiln dtype", to_name);
  const DType from = c.dtype(0);
  if (from != DType::String && *to != DType::String)
    c.fail("cast_string converts to or from strings, not {} to {}", dtype_name(from), dtype_name(*to));
  const DType other = from == DType::String ? *to : from;
  if (other != DType::String && !is_float(other) && !is_int(other) && other != DType::Bool)
    c.unsupported("casting between {} and strings is not supported (ONNX's reference has no text form for it)",
                  dtype_name(other));
  return {TensorType(*to, c.shape(0))};
}

void cast_string_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out();
  if (x.dtype() == DType::String && y.dtype() == DType::String) {
    std::copy(x.strings(), x.strings() + x.numel(), y.strings());
  } else if (y.dtype() == DType::String) {
    for (int64_t i = 0; i < x.numel(); ++i) y.strings()[i] = number_to_string(x, i);
  } else {
    for (int64_t i = 0; i < x.numel(); ++i) string_to_number(x.strings()[i], y, i, ctx.label);
  }
}

}  // namespace

std::string number_to_string(const Tensor& t, int64_t i) {
  const DType dt = t.dtype();
  if (dt == DType::Bool) return t.data<uint8_t>()[i] ? "True" : "False";
  if (dt == DType::U64) return std::to_string(t.data<uint64_t>()[i]);
  if (is_int(dt)) return std::to_string(t.get_int(i));
  if (is_float(dt)) return float_to_string(dt, t.get_double(i));
  fail("{} values have no string form", dtype_name(dt));
}

void string_to_number(const std::string& raw, Tensor& t, int64_t i, const std::string& label) {
  const DType dt = t.dtype();
  const std::string s = trim(raw);
  auto bad = [&](std::string_view why) {
    fail("{}: cannot cast the string \"{}\" to {}: {}", label, raw, dtype_name(dt), why);
  };
  if (dt == DType::Bool) {
    if (iequals(s, "true") || iequals(s, "false")) {
      t.set_int(i, iequals(s, "true"));
      return;
    }
    std::optional<double> d = parse_double(s);
    if (!d || std::isnan(*d)) bad("it is neither true, false nor a number");
    t.set_int(i, *d != 0);
    return;
  }
  if (is_float(dt)) {
    std::optional<double> d = parse_double(s);
    if (!d) bad("it is not a number");
    if (dt == DType::F32) {  // read straight into a float: one rounding, not two
      float f = 0;
      std::string_view v = s;
      const bool plus = !v.empty() && v[0] == '+';
      if (plus) v.remove_prefix(1);
      auto r = std::from_chars(v.data(), v.data() + v.size(), f, std::chars_format::general);
      if (r.ec == std::errc() && r.ptr == v.data() + v.size() && !std::isnan(f)) {
        t.data<float>()[i] = f;
        return;
      }
    }
    t.set_double(i, *d);
    return;
  }
  // Integers: an exact decimal integer, else a decimal truncated toward zero.
  if (dt == DType::U64) {
    uint64_t u = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), u);
    if (r.ec == std::errc() && r.ptr == s.data() + s.size()) {
      t.data<uint64_t>()[i] = u;
      return;
    }
  }
  int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) {
    std::optional<double> d = parse_double(s);
    if (!d || !std::isfinite(*d)) bad("it is not a finite number");
    const double tr = std::trunc(*d);
    if (!(tr >= -9223372036854775808.0 && tr < 9223372036854775808.0)) bad("it is out of range");
    v = static_cast<int64_t>(tr);
  }
  const bool fits = dispatch_storage(dt, [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_same_v<T, uint64_t>) return v >= 0;
    else
      return v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
             v <= static_cast<int64_t>(std::numeric_limits<T>::max());
  });
  if (!fits) bad("it is out of range");
  t.set_int(i, v);
}

void register_string_cast(OpRegistry& r) {
  OpDef d;
  d.name = "cast_string";
  d.category = OpCategory::Compute;
  d.takes_strings = true;
  d.attrs = {{"to", AttrKind::String, true}};
  d.infer = infer_cast_string;
  d.reference = cast_string_kernel;
  d.doc = "Cast to or from strings: numbers as ONNX's reference prints them; decimals, INF and NaN read back";
  r.add(std::move(d));
}

}  // namespace kiln::ops
