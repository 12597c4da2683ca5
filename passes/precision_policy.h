// The precision policy: which kiln ops run in reduced precision (FP16/BF16)
// and which keep FP32 math when `--precision fp16|bf16` is given. One table,
// read by the precision pass and printed in docs/precision.md; see that page
// for the reasons behind each class.
#pragma once
#include <string_view>
#include <utility>
#include <vector>

#include "ir/dtype.h"

namespace kiln {

enum class PrecisionClass {
  // GEMM-like compute (conv, matmul, gemm, einsum, attention): f16/bf16
  // operands, FP32 accumulation (every kiln kernel for these accumulates in
  // float; the reference kernels widen to float and call BLAS).
  Reduced,
  // Numerically sensitive ops (softmax, normalizations, sums, exp/log/pow...):
  // FP32 operands, FP32 results. Also the class of every op not in the table.
  Float32,
  // Ops that lose nothing by running in the precision of their data
  // (data movement, selection, comparisons, cheap pointwise math): they run
  // in the widest precision among their non-constant float operands.
  Follow,
  // `cast`: its operand is taken in whatever dtype it has; its result dtype
  // is its `to` attribute.
  Cast,
};
std::string_view precision_class_name(PrecisionClass c);

// The class of an op. Ops outside the table are Float32 (the safe default:
// a new op keeps the model's meaning until someone classifies it), except
// that ops named "attention" or "*_attention" are Reduced.
PrecisionClass precision_class(std::string_view op);

// The table itself (op name, class), sorted by name, for docs and tests.
const std::vector<std::pair<std::string_view, PrecisionClass>>& precision_table();

// Ops that may use TF32 tensor-core math under `--precision tf32` (they get
// the attribute tf32=1 when their operands are f32).
bool tf32_capable(std::string_view op);

// The dtype a --precision value computes Reduced ops in (F16 or BF16); F32
// for fp32 and tf32.
DType reduced_dtype(std::string_view precision);

// Largest finite value of f16 / bf16 (65504 and 3.3895314e38); weights beyond
// it are clamped to it when converted. F32 and others: +inf.
double max_finite(DType t);

}  // namespace kiln
