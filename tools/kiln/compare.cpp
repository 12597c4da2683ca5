#include "tools/kiln/compare.h"

#include <cmath>

#include <fmt/format.h>

#include "ir/error.h"

namespace kiln {

Tolerance default_tolerance(DType t) {
  switch (t) {
    case DType::F16: return {2.5e-3, 1e-3};
    case DType::BF16: return {2e-2, 1e-2};
    case DType::F32:
    case DType::F64: return {1e-5, 1e-4};
    default: return {0, 0};
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

std::string compare_tensors(const Tensor& got, const Tensor& want, Tolerance tol) {
  if (got.dtype() != want.dtype())
    return fmt::format("dtype {} but expected {}", dtype_name(got.dtype()), dtype_name(want.dtype()));
  if (got.shape() != want.shape())
    return fmt::format("shape [{}] but expected [{}]", fmt::join(got.shape(), ","), fmt::join(want.shape(), ","));
  int64_t bad = 0, first = -1;
  double worst = 0;
  bool fl = is_float(want.dtype());
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
    return fmt::format("{} of {} elements differ; first at {}: got {} expected {}; max abs err {}", bad,
                       want.numel(), first, got.get_double(first), want.get_double(first), worst);
  return fmt::format("{} of {} elements differ; first at {}: got {} expected {}", bad, want.numel(), first,
                     got.get_int(first), want.get_int(first));
}

}  // namespace kiln
