// Prints a scalar Expr (ir/expr.h) as CUDA C statements with exactly the
// meaning the reference interpreter (ops/pointwise_eval.cpp) gives it.
//
// Each node becomes one `const T vN = ...;` statement, T by the node's dtype:
//   f32, f16, bf16 -> float   (every step rounds to float, as the reference does)
//   f64            -> double
//   integers, bool -> long long holding the value wrapped to the dtype (u64 as
//                     its bit pattern; ops the reference does unsigned on u64
//                     cast to unsigned long long)
// Mixed operands (an integer or f64 operand of a float node) are read as
// double, computed in double and rounded to the node's type, as the reference
// does. Multiplications go through kiln_mul (__fmul_rn / __dmul_rn) so NVRTC
// never contracts a*b+c into an FMA. The helpers the statements call are in
// expr_prelude(); under KILN_SIM (the CPU simulator) transcendental functions
// evaluate in double and round to float, which is the reference's definition;
// under NVRTC they are CUDA's single-precision functions (a few ulp, see
// docs/codegen.md).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "ir/expr.h"

namespace kiln::codegen {

// The CUDA type a node of this dtype computes in: float, double or long long.
std::string_view cuda_compute_type(DType t);
// The CUDA type a tensor of this dtype is stored as: __half, __nv_bfloat16,
// float, double, signed char ... unsigned long long, unsigned char (bool).
std::string_view cuda_storage_type(DType t);
// `stored` (an expression of the storage type) converted to the compute type.
std::string cuda_load(DType t, const std::string& stored);
// `value` (an expression of the compute type) converted to the storage type.
std::string cuda_store(DType t, const std::string& value);

// Appends one statement per node of `e` to `out` (each line prefixed with
// `indent`); input i of the expression reads `inputs[i]`, an expression of
// the compute type of the input's dtype. Variables are named `<prefix>N`.
// Returns the name of the variable that holds the result. Throws kiln::Error
// for a node the reference cannot evaluate either (e.g. exp of an integer).
std::string emit_expr(const Expr& e, const std::vector<std::string>& inputs, const std::string& prefix,
                      const std::string& indent, std::string& out);

// The refusals emit_expr makes, without writing text: throws the kiln::Error
// emit_expr would (an empty expression, a node computing in floating point
// on an integer dtype). emit_expr starts with this very check, so the
// fuser's can-emit query (codegen/emitter_table.h) and the emitter agree.
void check_expr_emittable(const Expr& e);

// The device helper functions emitted statements call (guarded, so several
// kernels can share a translation unit).
std::string_view expr_prelude();
// The low-bit float conversions (ir/low_bit_codec.cuh) as device functions;
// kernel_headers adds them to kernels that touch a low-bit float.
std::string low_bit_prelude();

namespace detail {
// The codec's function suffix for a low-bit float dtype.
std::string_view low_bit_suffix(DType t);
// `x` (a float) encoded as dtype t's code, ONNX Cast's rules.
std::string low_bit_encode(DType t, const std::string& x, bool saturate, int round_mode);
}  // namespace detail

}  // namespace kiln::codegen
