// Comparing backend outputs with expected tensors, with the tolerances of
// docs/testing.md (ONNX Runtime's): |a - b| <= atol + rtol * |b|, NaN matches
// NaN, infinities match exactly, integers and bools match exactly.
#pragma once
#include <string>

#include "ir/tensor.h"

namespace kiln {

struct Tolerance {
  double atol, rtol;
};
Tolerance default_tolerance(DType t);
// "1e-4,1e-3" -> {atol 1e-4, rtol 1e-3}; throws kiln::Error otherwise.
Tolerance parse_tolerance(const std::string& spec);

// Empty string when `got` matches `want`; otherwise what differs first.
std::string compare_tensors(const Tensor& got, const Tensor& want, Tolerance tol);
inline std::string compare_tensors(const Tensor& got, const Tensor& want) {
  return compare_tensors(got, want, default_tolerance(want.dtype()));
}

}  // namespace kiln
