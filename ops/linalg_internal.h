// Pieces shared by the linalg op files (linalg_ops.cpp, quant_ops.cpp):
// numpy matmul shape rules, batch offsets, and a row-major GEMM on host
// buffers (OpenBLAS for float/double, plain loops for integers).
#pragma once
#include <cstdint>
#include <vector>

#include "ir/op_registry.h"
#include "ops/op_helpers.h"

namespace kiln::ops::linalg {

// numpy matmul of shapes a and b: 1-D operands are promoted ([K] -> [1,K] for
// a, [K] -> [K,1] for b) and the promoted dim removed from the result; the
// dims before the last two broadcast.
struct MatmulDims {
  int64_t M = 1, K = 1, N = 1;
  bool a_vec = false, b_vec = false;
  Shape batch;  // broadcast batch dims
  Shape out;    // result shape
};
// Throws kiln::Error (without a node label) when the shapes do not multiply.
MatmulDims matmul_dims(const Shape& a, const Shape& b);

// For each batch index of d.batch (row-major), the element offset of a's and
// b's matrix (M*K and K*N elements each), following broadcasting.
void matmul_batch_offsets(const Shape& a, const Shape& b, const MatmulDims& d, std::vector<int64_t>& a_off,
                          std::vector<int64_t>& b_off);

// Inference for matmul-like ops: checks ranks and dims, reports errors on c.
MatmulDims infer_matmul_dims(InferContext& c, int ia, int ib);

// C[M,N] = alpha * op(A) op(B) + beta * C, row-major, op = transpose when t*.
// lda/ldb/ldc are the row strides of A, B, C as stored.
void gemm_f32(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm_f64(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
              const double* B, int64_t ldb, double beta, double* C, int64_t ldc);

// Integer C[M,N] (+)= A[M,K] B[K,N] (no transposes), wrapping arithmetic.
// Accumulates into C (callers zero it first).
template <typename TA, typename TB, typename TC>
void gemm_int_acc(int64_t M, int64_t N, int64_t K, const TA* A, const TB* B, TC* C) {
  for (int64_t i = 0; i < M; ++i) {
    TC* c = C + i * N;
    for (int64_t k = 0; k < K; ++k) {
      TC a = static_cast<TC>(A[i * K + k]);
      if (a == 0) continue;
      const TB* b = B + k * N;
      for (int64_t j = 0; j < N; ++j) c[j] += a * static_cast<TC>(b[j]);
    }
  }
}

inline void require_numeric(InferContext& c, int i) {
  if (c.dtype(i) == DType::Bool) c.unsupported("operand {} is bool; kiln's {} needs numbers", i, c.op());
}

// Integer tensors as wrapping 64-bit values (products and sums wrap like
// two's complement; storing truncates to the element type).
inline std::vector<uint64_t> load_wrapping(const Tensor& t) {
  std::vector<int64_t> v = load_all<int64_t>(t);
  return std::vector<uint64_t>(v.begin(), v.end());
}
inline void store_wrapping(Tensor& t, const std::vector<uint64_t>& v) {
  store_all<int64_t>(t, std::vector<int64_t>(v.begin(), v.end()));
}

// einsum's loops, for code generators (codegen/emitters/gemm_conv/emit_einsum.cpp): the output
// dims and the summed labels, each with every operand's element stride along
// it (0 where the operand lacks the label or broadcasts it; a repeated label
// -- a diagonal -- adds its strides). Throws kiln::Error as einsum's inference.
struct EinsumLoops {
  std::vector<int64_t> out_sizes, sum_sizes;
  std::vector<std::vector<int64_t>> out_strides, sum_strides;  // [operand][dim]
};
EinsumLoops einsum_loops(const std::string& equation, const std::vector<Shape>& shapes);

}  // namespace kiln::ops::linalg

namespace kiln::ops {
// Registration of the files beside linalg_ops.cpp (called from register_linalg_ops).
void register_quant_ops(OpRegistry& r);  // quant_ops.cpp
void register_einsum_op(OpRegistry& r);  // einsum_op.cpp
}  // namespace kiln::ops
