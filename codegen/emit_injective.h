// The injective emitter: CUDA kernels for data-movement ops written as index
// maps (design.md section 4): each output element i, with coordinates
// o0..o{r-1} over the result's shape, reads one element of one operand (or a
// constant fill value). One generic kernel shell (grid-stride loop over the
// result, coordinates, a select over the operands, one store); each op
// contributes only the code that turns the coordinates into
//   `src` (which operand, -1 for the fill value) and `off` (its element offset).
// Elements are copied as unsigned integers of their size (1/2/4/8 bytes), so
// every dtype (f16/bf16/bool included) is copied bit for bit.
//
// Covered: transpose, reshape, expand, slice (canonical starts/ends/steps),
// concat, split (one kernel per result), pad (constant/reflect/edge/wrap,
// negative pads, value attribute or operand), tile, gather (any axis, i32/i64
// indices, negative indices wrap), depth_to_space (DCR/CRD), space_to_depth.
//
// Gather with an index outside [-n, n): the reference raises an error; the
// kernel writes zero bytes for that element (no error flag yet) -- callers
// must validate indices, or rely on the simulator's checked pointers in tests.
//
// Kernel: `extern "C" __global__ void NAME(KILN_PTR(E) out, KILN_PTR(const T0)
// in0, ...)`, same prelude / KILN_SIM entry conventions as emit_pointwise.h
// (buffers/counts: out first, then the operands).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/op_registry.h"
#include "ir/tensor.h"

namespace kiln::codegen {

struct InjectiveKernel {
  std::string name;    // kiln_inj_<op>_<16 hex digits of the source's hash>
  std::string source;  // complete translation unit
  int64_t numel = 0;   // result elements
  unsigned block = 256;
  unsigned grid = 0;   // 0 for an empty result: nothing to launch
  std::vector<int64_t> counts;  // elements of each buffer: out, then each operand
};

// True when emit_injective_op handles op `name`.
bool injective_supported(const std::string& name);

// Emits the kernel writing result `result` of `def` (attributes `attrs`,
// operands `operands`, results `outs` as inferred). Throws kiln::Error for an
// op it does not handle or operands that do not fit the op.
InjectiveKernel emit_injective_op(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                  const std::vector<TensorType>& outs, int result = 0);

}  // namespace kiln::codegen
