// The shell shared by the pool, select and loss emitters (emit_pool,
// emit_select, emit_loss): it wraps a kernel body into a complete translation
// unit with the conventions of codegen/emit_pointwise.h (guarded prelude,
// `extern "C" __global__ void NAME(...)`, a deterministic name from the
// source's hash, the simulator entry NAME_sim), for any list of buffers.
//
// Operand/result seams (docs/codegen.md "Operand 0 and result seams"): every
// read of operand 0 in these kernels is `KILN_LOAD_X(flat)` (the row-major
// element index into operand 0, as the op's compute type) and every store of
// a result is `KILN_STORE(r, flat, value)` (result r, row-major index, value
// in the compute type). The shell defines both macros before the kernel from
// the dtypes and #undefs them after it, so a fused anchor can define them
// differently (e.g. compute a pointwise prologue at `flat`) without touching
// the kernel body.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"

namespace kiln::codegen {

// One launch of an emitted op kernel.
struct OpKernel {
  std::string name;    // <prefix>_<label>_<16 hex digits of the body's hash>
  std::string source;  // complete translation unit
  unsigned grid = 0;   // 0: nothing to launch
  unsigned block = 0;
  size_t shared_bytes = 0;  // dynamic shared memory
  std::vector<int> results;  // the node's results this kernel takes as out0, out1... (empty: all)
};

// A buffer of the kernel: its dtype (stored as cuda_storage_type) and name
// (out0, out1..., in0, in1...). Results are written, operands const.
struct ShellBuffer {
  DType dtype;
  std::string name;
  bool result;
};

// Assembles the translation unit: the fp16/bf16 headers the buffers need,
// the kernel prelude and expr_prelude(), `helpers` (device functions; may use
// @NAME@ for the kernel's name; they come after the seam macros and may use them), the seam macros for in0 (compute type of
// `x_compute`, e.g. "float") and every result, the kernel with `body`, and the
// simulator entry. Sets k.name and k.source.
void finish_op_kernel(OpKernel& k, std::string_view prefix, std::string_view label,
                      const std::vector<ShellBuffer>& buffers, const std::string& x_compute, const std::string& helpers,
                      const std::string& body);

// A grid for `n` independent work items of `block` threads each covering one
// item per thread: ceil(n / block), at most 8192 (kernels loop over the rest).
unsigned items_grid(long long n, unsigned block);

}  // namespace kiln::codegen
