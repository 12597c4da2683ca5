#include "backends/compare.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ir/error.h"
#include "ir/text_format.h"

namespace kiln {

Tolerance default_tolerance(DType t) {
  switch (t) {
    case DType::F16:
      return {2.5e-3, 1e-3};
    case DType::BF16:
      return {2e-2, 1e-2};
    case DType::F32:
    case DType::F64:
      return {1e-5, 1e-4};
    default:
      return {0, 0};
  }
}

Tolerance parse_tolerance(const std::string& spec) {
  auto comma = spec.find(',');
  try {
    if (comma == std::string::npos) throw std::invalid_argument("");
    size_t a = 0, b = 0;
    Tolerance t{std::stod(spec.substr(0, comma), &a), std::stod(spec.substr(comma + 1), &b)};
    if (a != comma || b != spec.size() - comma - 1 || t.atol < 0 || t.rtol < 0) throw std::invalid_argument("");
    return t;
  } catch (const std::exception&) {
    throw Error(fmt::format("--tolerance '{}' should be ATOL,RTOL with non-negative numbers, e.g. 1e-4,1e-3", spec));
  }
}

Tolerance run_tolerance(DType output, std::string_view precision) {
  Tolerance t = default_tolerance(output);
  if (!is_float(output)) return t;
  Tolerance p = t;
  if (precision == "fp16" || precision == "tf32") p = default_tolerance(DType::F16);
  else if (precision == "bf16") p = default_tolerance(DType::BF16);
  return {std::max(t.atol, p.atol), std::max(t.rtol, p.rtol)};
}

ErrorStats error_stats(const Tensor& got, const Tensor& want, Tolerance tol) {
  ErrorStats e;
  if (!computes_as_float(want.dtype()) || got.shape() != want.shape()) return e;
  double scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = got.get_double(i), b = want.get_double(i);
    if (!std::isfinite(b)) continue;
    double err = std::isnan(a) ? INFINITY : std::fabs(a - b);
    e.max_abs = std::max(e.max_abs, err);
    scale = std::max(scale, std::fabs(b));
    double bound = tol.atol + tol.rtol * std::fabs(b);
    e.tol_ratio = std::max(e.tol_ratio, bound > 0 ? err / bound : (err > 0 ? INFINITY : 0.0));
  }
  e.max_rel = scale > 0 ? e.max_abs / scale : (e.max_abs > 0 ? INFINITY : 0.0);
  return e;
}

std::string compare_tensors(const Tensor& got, const Tensor& want, Tolerance tol) {
  if (got.dtype() != want.dtype())
    return fmt::format("dtype {} but expected {}", dtype_name(got.dtype()), dtype_name(want.dtype()));
  if (got.shape() != want.shape())
    return fmt::format("shape [{}] but expected [{}]", fmt::join(got.shape(), ","), fmt::join(want.shape(), ","));
  int64_t bad = 0, first = -1;
  if (want.dtype() == DType::String) {  // exact, byte for byte (no Unicode normalisation, as ONNX's runner)
    for (int64_t i = 0; i < want.numel(); ++i)
      if (got.strings()[i] != want.strings()[i] && bad++ == 0) first = i;
    if (!bad) return "";
    return fmt::format("{} of {} strings differ; first at {}: got {} expected {}", bad, want.numel(), first,
                       quote_string(got.strings()[first]), quote_string(want.strings()[first]));
  }
  double worst = 0;
  bool fl = computes_as_float(want.dtype());  // low-bit floats: exact (tolerance 0), NaN matching NaN
  for (int64_t i = 0; i < want.numel(); ++i) {
    bool ok;
    if (fl) {
      double a = got.get_double(i), b = want.get_double(i);
      if (std::isnan(b)) ok = std::isnan(a);
      else if (std::isinf(b)) ok = a == b;
      else {
        double err = std::fabs(a - b);
        ok = err <= tol.atol + tol.rtol * std::fabs(b);  // NaN a fails here
        if (!ok && !(err <= worst)) worst = err;
      }
    } else {
      ok = got.get_int(i) == want.get_int(i);
    }
    if (!ok) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  if (!bad) return "";
  if (fl)
    return fmt::format("{} of {} elements differ; first at {}: got {} expected {}; max abs err {}", bad, want.numel(),
                       first, got.get_double(first), want.get_double(first), worst);
  return fmt::format("{} of {} elements differ; first at {}: got {} expected {}", bad, want.numel(), first,
                     got.get_int(first), want.get_int(first));
}

}  // namespace kiln
