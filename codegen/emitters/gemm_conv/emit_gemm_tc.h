// The tensor-core GEMM emitter: one complete CUDA kernel source computing
//   out[b][m][n] = epilogue(sum_k A[b][m][k] * B[b][k][n])      (f32 accumulation)
// for f16 or bf16 A and B (row-major; B optionally stored [N, K], i.e.
// "transposed"), batched over grid.z, with static shapes baked in. Built on
// codegen/core/mma.cuh (mma.sync m16n8k16, ldmatrix, cp.async; sm_80+), so under
// KILN_SIM it runs on the simulator with the PTX fragment layouts.
//
// The kernel (docs/codegen.md, "Tensor-core GEMM"): a block computes a BM x BN
// tile of one batch with 4 or 8 warps (2 along M), each warp a (BM/2) x
// (BN/warps_n) sub-tile as 16x8 mma tiles; K advances BK = 32 at a time
// through a `stages`-deep cp.async pipeline in dynamic shared memory (rows
// padded by 16 bytes so ldmatrix is free of bank conflicts); fragments come
// from ldmatrix (.trans for B stored [K, N]). An operand whose rows are not
// a multiple of 8 elements (16 bytes) is loaded with guarded scalar loads
// instead of cp.async. Out-of-range rows/columns/k are zero-filled.
//
// Epilogue hook: the result of element (batch, row, col) goes through
//   kiln_epilogue(out, batch, row, col, acc [, e0, e1, ...])
// where `out` is the output pointer (KILN_PTR(T) of the output dtype), acc
// the f32 accumulator and e0... the extra operands (KILN_PTR(const T)), called
// only for row < M, col < N. GemmEpilogue::code is device code defining that
// function (it is placed in a namespace of the kernel's own, so several
// kernels can share a translation unit); empty: the default, which stores acc
// converted to the output dtype at out[(batch * M + row) * N + col].
//
// Kernel parameters: out, a, b, then the extra operands. Simulator entry as
// every emitter's (backends/sim/sim_module.h): buffers/counts in that order.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/dtype.h"

namespace kiln::codegen {

struct GemmOperand {
  std::string name;  // for messages
  DType dtype;
  int64_t count;  // elements
};

struct GemmEpilogue {
  std::string code;                   // defines kiln_epilogue (kM, kN, kK are in scope); empty: default store
  std::vector<GemmOperand> operands;  // extra operands e0, e1...
};

struct GemmTcSpec {
  DType dtype = DType::F16;  // A and B: F16 or BF16
  DType out_dtype = DType::F32;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool b_transposed = false;  // B stored [N, K] (row n holds B[., n])
  // Elements between consecutive batches of A / B; -1: m*k / k*n (dense),
  // 0: one matrix shared by every batch (a weight).
  int64_t a_batch_stride = -1, b_batch_stride = -1;
  GemmEpilogue epilogue;
  std::string label = "gemm";
  // Tile override for tests (0: the heuristic of docs/codegen.md).
  int bm = 0, bn = 0, stages = 0;
};

struct GemmTcKernel {
  std::string name;    // kiln_gemm_tc_<label>_<hash>
  std::string source;  // complete translation unit
  unsigned grid[3] = {1, 1, 1};
  unsigned block = 256;
  // Dynamic shared memory per block; above 48 KiB a GPU launcher must raise
  // cudaFuncAttributeMaxDynamicSharedMemorySize first.
  size_t shared_bytes = 0;
  int bm = 0, bn = 0, bk = 0, stages = 0, warps = 0;
  std::vector<int64_t> counts;  // elements: out, a, b, extra operands
};

// Throws kiln::Error for unsupported dtypes, non-positive sizes, batch
// strides past the buffers or shapes whose indices overflow 32 bits.
GemmTcKernel emit_gemm_tc(const GemmTcSpec& spec);

// codegen/core/mma.cuh (guarded; under KILN_SIM it includes backends/sim/warp_mma.h).
std::string_view mma_prelude();

}  // namespace kiln::codegen
