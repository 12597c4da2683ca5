// The tolerance of the compute-emitter tests (codegen_compute_test.cpp,
// codegen_compute_models_test.cpp) against the reference backend.
#pragma once
#include "backends/compare.h"
#include "ir/dtype.h"

namespace kiln::testing {

inline Tolerance tolerance_for(DType t) {
  if (t == DType::F32 || t == DType::F64) return {1e-5, 1e-4};
  if (!is_float(t)) return {0, 0};
  // f16: two ulps. A float sum in another order than the reference's BLAS can round the
  // anchor's f16 result to the neighbouring value, and an f16 bias add after it once more.
  if (t == DType::F16) return {2.5e-3, 2.0 / 1024};
  return default_tolerance(t);
}

}  // namespace kiln::testing
