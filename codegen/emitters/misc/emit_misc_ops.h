// Emitters for ops that each need one small dedicated kernel: dft and stft
// (ops/signal_ops.cpp), det (ops/linalg_ops.cpp), dynamic_quantize_linear
// (ops/quant_ops.cpp).
//
// dft / stft are
// the direct O(n * length) DFT per output bin in double, as the reference:
// one thread per output complex value (a grid-stride loop, 256 threads per
// block), summing x_j * exp(-+2 pi i (k j mod len) / len) over the used
// points with the twiddle angle computed exactly as the reference's table
// ((2 pi m) / len, cos and sin in double). No FFT: for the sizes these ops
// see (conformance, spectrograms of a few hundred points) the direct sum is
// fine and exactly the reference's arithmetic (docs/codegen.md). An inverse
// with onesided=1 (numpy's irfft: a half spectrum in, len real values out,
// [..., 1]) has one thread per real value summing the half spectrum, each bin
// but the DC and Nyquist ones twice for its conjugate mirror.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "codegen/core/kernel_params.h"
#include "codegen/core/size_expr.h"
#include "ir/attribute.h"
#include "ir/tensor.h"

namespace kiln::codegen {

// A kernel that takes the node's results then its operands (absent
// operands: null buffers), launched as grid x block, plus host scratch
// buffers appended after the operands (zeroed tensors of these types).
struct SimpleKernel {
  std::string name;
  std::string source;
  unsigned grid = 0;  // 0: nothing to launch
  unsigned block = 0;
  std::vector<KernelParam> params;
  std::vector<TensorType> scratch;
  // Shape-generic (a symbolic length, docs/dynamic_shapes.md): the symbols
  // the kernel's last parameter `ks` holds, and its grid per shape (`grid`
  // is then 1).
  std::vector<std::string> symbols;
  GridAxisExpr grid_expr;
};

// dft(x) {axis, length, inverse, onesided} -> out ([..., 2], or [..., 1] for
// inverse + onesided).
SimpleKernel emit_dft(const AttrMap& attrs, const TensorType& x, const TensorType& out);

// stft(signal, window?) {frame_step, frame_length, onesided} -> out.
// `window_slot`: the node has a second operand slot (a null buffer when
// !has_window).
SimpleKernel emit_stft(const AttrMap& attrs, const TensorType& signal, bool has_window, const TensorType& window,
                       const TensorType& out, bool window_slot = false);

// det(x [..., M, M]) -> [...]: one thread per matrix (128 per block), LU with
// partial pivoting in double on a per-matrix copy in a global scratch buffer
// (scratch[0]: f64 [batch, M, M]), the reference's loop exactly (an exact
// zero pivot ends it with 0).
SimpleKernel emit_det(const TensorType& x, const TensorType& out);

// range(start, limit, delta) -> out [n]: out[i] = start + i * delta, one
// thread per element, as the reference computes it (floats in double,
// rounded once; integers in wrapping 64-bit arithmetic). f32, f64 and the
// integer types; f16/bf16 are refused (the reference rounds from double,
// which a float kernel would round twice). The length is the graph's: the
// kernel never reads `limit`. A symbolic length (range(0, past + seq) in a
// plan with shape profiles) makes the kernel shape-generic: the length comes
// from `ks` and the grid is a function of it. `start_value` / `delta_value`:
// an i64 operand that is a constant holding a symbolic shape value (`past`),
// computed from `ks` instead of read (its plan bytes are not the value).
SimpleKernel emit_range(DType dtype, const TensorType& out, std::optional<int64_t> start_value = std::nullopt,
                        std::optional<int64_t> delta_value = std::nullopt);

// dynamic_quantize_linear(x f32) -> (y u8[, y_scale f32[], y_zero_point u8[]]):
// three kernels with one signature (results, x, scratch f32[2 + 2P]): P
// blocks of 256 threads (about 8 elements per thread, P <= 256) fold
// min(x, 0) / max(x, 0) into partials; one block folds the partials and
// writes scale and zero point to the scratch (and to the results present);
// then every element is quantized (grid-stride, 256 threads per block).
// f32 arithmetic and round-half-even as the reference; min and max are
// exact in any order, so the result is the reference's bit for bit.
std::vector<SimpleKernel> emit_dynamic_quantize_linear(const TensorType& x, const std::vector<TensorType>& results);

}  // namespace kiln::codegen
