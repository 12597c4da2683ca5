// The pointwise emitter: one complete CUDA kernel source for a pointwise op
// (an Expr over broadcast operands), compilable by NVRTC and by the host
// compiler for the simulator (backends/sim/sim_module.h).
//
// The kernel: `extern "C" __global__ void NAME(KILN_PTR(Tout) out,
// KILN_PTR(const T0) in0, ...)`, a grid-stride loop over chunks of
// `vector_width` consecutive output elements (row-major; vector loads and
// stores where aligned, docs/codegen.md "Bandwidth-bound kernels"), numpy broadcasting with the static shapes baked in
// as constants (adjacent dims that every operand reads contiguously are
// merged first; an operand of the output's shape reads element i directly).
// The source starts with a prelude (guarded, so kernels can be concatenated
// into one translation unit): outside KILN_SIM it includes cuda_fp16.h /
// cuda_bf16.h and defines KILN_PTR etc. as docs/simulator.md's NVRTC column
// says; then the expression helpers of codegen/core/expr_prelude.cuh.
// Under KILN_SIM the source also defines the simulator entry
//   extern "C" int NAME_sim(const kiln::sim::LaunchConfig*, void* const* buffers,
//                           const long long* counts, std::string* error)
// (buffers/counts: out first, then the operands; returns 0, or nonzero with
// the message in *error) -- see SimEntry in backends/sim/sim_module.h.
//
// A fused body of several pointwise nodes is the same kernel with one
// emit_expr() call per node in topological order (emit_pointwise_multi), each
// node's inputs being loads or earlier nodes' results (rounded to the node's
// dtype, as the reference stores them); see codegen/emitters/elementwise/emit_fused.h.
#pragma once
#include <map>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "codegen/core/size_expr.h"
#include "codegen/launch_fit.h"
#include "ir/attribute.h"
#include "ir/expr.h"
#include "ir/op_registry.h"
#include "ir/tensor.h"

namespace kiln::codegen {

struct PointwiseKernel {
  std::string name;    // kiln_pw_<op>_<16 hex digits of the source's hash>: deterministic
  std::string source;  // complete translation unit
  int64_t numel = 0;   // output elements
  // Launch configuration (docs/codegen.md): 256 threads per block, enough
  // blocks for one chunk of vector_width elements per thread up to 8192
  // blocks (the grid-stride loop covers the rest). grid is 0 for an empty
  // output: nothing to launch.
  unsigned block = block_threads(256);  // the one decision (codegen/launch_fit.h)
  unsigned grid = 0;
  int vector_width = 1;         // output elements per thread and chunk
  int outputs = 1;              // result buffers (emit_pointwise_multi may write several)
  std::vector<int64_t> counts;  // elements of each buffer: the outputs, then each operand (dims: may be symbolic)
  // Shape-generic (some size symbolic): the symbols the kernel's last
  // parameter `ks` holds, in order, and its grid per shape (`grid` is 1).
  std::vector<std::string> symbols;
  GridAxisExpr grid_expr;
};

// One step of a multi-step pointwise kernel: `expr`'s input j reads value
// args[j], where values are numbered: the kernel's operands first, then each
// step's result in order.
struct PointwiseStep {
  Expr expr;
  std::vector<int> args;
};

// Operands whose value is a shape value of a symbolic size (a scalar i64
// constant holding `past`, which fold-constants leaves from a decoder's
// Shape(past_key)[2]), by operand index: the kernel computes the value from
// `ks` instead of reading the buffer, whose bytes in a plan are not the value
// (a symbolic constant's bytes are process-local handles, written as zeros).
using SymbolicScalars = std::map<int, int64_t>;

// Emits the kernel computing `e` (inputs: `operands`, in order) into `out`.
// `label` names the kernel (any text; sanitized). Throws kiln::Error when an
// operand's dtype differs from what the expression reads, or when an operand
// does not broadcast to the output shape.
PointwiseKernel emit_pointwise(const Expr& e, const std::vector<TensorType>& operands, const TensorType& out,
                               const std::string& label, const SymbolicScalars& scalars = {});

// Several steps over one iteration space, storing `results` (value index and
// type; all of one shape, every operand broadcasting to it). Buffers: the
// results in order (named out0, out1... when more than one), then the operands.
PointwiseKernel emit_pointwise_multi(const std::vector<PointwiseStep>& steps, const std::vector<TensorType>& operands,
                                     const std::vector<std::pair<int, TensorType>>& results, const std::string& label,
                                     const SymbolicScalars& scalars = {});

// The checks emit_pointwise_multi starts with, without writing any text:
// throws the kiln::Error it would (dtypes, shapes, a symbolic size, an
// expression emit_expr cannot write). The fuser's can-emit query
// (codegen/emitter_table.h) runs this instead of rendering the kernel.
void check_pointwise_multi(const std::vector<PointwiseStep>& steps, const std::vector<TensorType>& operands,
                           const std::vector<std::pair<int, TensorType>>& results, const std::string& label,
                           const SymbolicScalars& scalars = {});

// The same for one pointwise op (category Pointwise): builds its Expr from
// the operand dtypes and attributes.
PointwiseKernel emit_pointwise_op(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                  const TensorType& out, const SymbolicScalars& scalars = {});

}  // namespace kiln::codegen
