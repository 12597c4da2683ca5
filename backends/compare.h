// Comparing backend outputs with expected tensors, with the tolerances of
// docs/testing.md (ONNX Runtime's): |a - b| <= atol + rtol * |b|, NaN matches
// NaN, infinities match exactly, integers and bools match exactly.
#pragma once
#include <string>
#include <string_view>

#include "ir/tensor.h"

namespace kiln {

struct Tolerance {
  double atol, rtol;
};
Tolerance default_tolerance(DType t);
// "1e-4,1e-3" -> {atol 1e-4, rtol 1e-3}; throws kiln::Error otherwise.
Tolerance parse_tolerance(const std::string& spec);

// The tolerance float outputs of a run compiled with `--precision` are held
// to: the looser of the output dtype's and the precision's (fp16: FP16's,
// bf16: BF16's, tf32: FP16's, since TF32 keeps FP16's 10 mantissa bits).
// Integer and bool outputs stay exact. See docs/precision.md.
Tolerance run_tolerance(DType output, std::string_view precision);

// How far a float result is from the expected one: the largest |got - want|,
// that divided by the largest |want| (the error relative to the output's
// scale), and the largest |got - want| / (atol + rtol*|want|) (above 1 fails).
// Elements where `want` is NaN or infinite are left out (they must match
// exactly and compare_tensors checks that).
struct ErrorStats {
  double max_abs = 0, max_rel = 0, tol_ratio = 0;
};
ErrorStats error_stats(const Tensor& got, const Tensor& want, Tolerance tol);

// Empty string when `got` matches `want`; otherwise what differs first.
std::string compare_tensors(const Tensor& got, const Tensor& want, Tolerance tol);
inline std::string compare_tensors(const Tensor& got, const Tensor& want) {
  return compare_tensors(got, want, default_tolerance(want.dtype()));
}

}  // namespace kiln
