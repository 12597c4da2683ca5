// The reduction emitter: one complete CUDA kernel source for a reduce_* op,
// driven by its ReductionSpec (ops/reduction_spec.h: pre map, combiner, post
// map, shift_by_max), so every reduce_* op is one emitter. Same conventions as
// codegen/emitters/elementwise/emit_pointwise.h: guarded prelude, `extern "C" __global__ void
// NAME(KILN_PTR(T) out, KILN_PTR(const T) in0)`, static shapes baked in, a
// deterministic name from the source hash, and the simulator entry NAME_sim.
//
// Index map: the input's dims (size-1 dims dropped, adjacent dims of the same
// kind merged) are split into kept dims (which enumerate the output in
// row-major order, keepdims or not) and reduced dims; any axis set works,
// contiguous or not. One block per output element (a grid-stride loop over the
// outputs): each thread folds a strided share of the reduced elements, then a
// warp-shuffle + shared-memory tree combines the block. shift_by_max first
// reduces the max the same way.
//
// Accumulation matches the reference (ops/reduction_ops.cpp): floating dtypes
// (f16/bf16/f32/f64) accumulate in double; integer dtypes with integral maps
// in long long (unsigned long long for unsigned dtypes), wrapping like the
// reference; integers with non-integral maps (log, sqrt, exp) in double,
// saturated to the dtype on store (NaN -> 0). Only the order of the fold
// differs from the reference (a tree instead of a sequence): integer results
// are exact, floating ones within rounding of double.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/core/kernel_io.h"
#include "codegen/core/size_expr.h"
#include "ir/attribute.h"
#include "ir/op_registry.h"
#include "ir/tensor.h"
#include "ops/reduction_spec.h"

namespace kiln::codegen {

struct ReductionKernel {
  std::string name;     // kiln_red_<op>_<16 hex digits of the source's hash>
  std::string source;   // complete translation unit
  int64_t outputs = 0;  // output elements (one block each)
  int64_t count = 0;    // reduced elements per output
  // Launch (docs/codegen.md): block = the reduced count rounded up to a power
  // of two, clamped to [32, 256] (a short row is one warp); grid = outputs,
  // at most 65535 (the kernel loops over the rest); grid 0: nothing to launch.
  unsigned block = 32;
  unsigned grid = 0;
  std::vector<int64_t> counts;  // elements of each buffer: out, then the input
  // Shape-generic (the row kernels over symbolic rows, emit_rowwise.h): the
  // symbols of the kernel's last parameter `ks`, and its grid per shape.
  std::vector<std::string> symbols;
  GridAxisExpr grid_expr;
};

// Emits `spec` reducing `in` over `axes` (normalized, strictly increasing)
// into `out` (same dtype; shape with or without the reduced dims). Throws
// kiln::Error for bad axes, a dtype mismatch or an output of the wrong size.
ReductionKernel emit_reduction(const ops::ReductionSpec& spec, const TensorType& in, const std::vector<int64_t>& axes,
                               const TensorType& out);
// The same reading operand 0 and storing result 0 through `io` (the anchor
// hook, codegen/core/kernel_io.h; the record pass is the first one: the max pass
// of a shifted reduction, else the fold). `counts` follow io.buffers.
ReductionKernel emit_reduction(const ops::ReductionSpec& spec, const TensorType& in, const std::vector<int64_t>& axes,
                               const TensorType& out, const AnchorIO& io);

// The same for a reduce_* node: `axes` from its attributes.
ReductionKernel emit_reduction_op(const OpDef& def, const AttrMap& attrs, const TensorType& in, const TensorType& out);

// softmax / log_softmax of a floating tensor along `axis` (normalized), as
// ops/softmax_ops.cpp computes it: the input viewed as [outer, n, inner]; one
// block per (outer, inner) line; the max in the compute type (float for
// f16/bf16/f32, double for f64; NaN propagates), then the sum of
// exp(x - max) in double, then softmax = exp(x - max) * (1 / sum) and
// log_softmax = (x - max) - log(sum), stored in the dtype. `outputs` is the
// number of lines, `count` n; launch as emit_reduction's.
ReductionKernel emit_softmax(bool log_softmax, const TensorType& in, int axis);
// Through the anchor hook (the record pass is the max pass).
ReductionKernel emit_softmax(bool log_softmax, const TensorType& in, int axis, const AnchorIO& io);

// Device functions `cn`(a, v) (returns comb_body over a, v of type A) and
// `cn`_block(v): the fold over the block (warp shuffles, then one partial per
// warp in __shared__; blockDim.x a multiple of 32, every thread gets the
// result; `init` is the identity). Shared by the reduction-category emitters.
std::string block_fold(const std::string& A, const std::string& cn, const std::string& comb_body,
                       const std::string& init);

// The same for a softmax / log_softmax node (attribute `axis`, default -1).
ReductionKernel emit_softmax_op(const OpDef& def, const AttrMap& attrs, const TensorType& in);

}  // namespace kiln::codegen
