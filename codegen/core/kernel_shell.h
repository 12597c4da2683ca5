// The shell shared by the pool, select and loss emitters (emit_pool,
// emit_select, emit_loss): it wraps a kernel body into a complete translation
// unit with the conventions of codegen/emitters/elementwise/emit_pointwise.h (guarded prelude,
// `extern "C" __global__ void NAME(...)`, a deterministic name from the
// source's hash, the simulator entry NAME_sim), for any list of buffers.
//
// Operand/result seams (docs/codegen.md "Operand 0 and result seams"): every
// read of operand 0 in these kernels is `KILN_LOAD_X(flat)` or
// `KILN_LOAD_X_ONCE(flat)` (the row-major element index into operand 0; the
// value in the op's compute type; _ONCE marks the one pass in which the kernel
// reads every element of operand 0 exactly once over the grid, where a fused
// prologue may write its extra results -- window pools have no such pass) and
// every store of a result is the statement `KILN_STORE(r, flat, value)`
// (result r, row-major index, value in the compute type). The shell defines
// the macros before the kernel from the dtypes -- or from a KernelSeams, the
// way in for a fused anchor -- and #undefs them after it, so a fused node can
// reuse the kernel body unchanged.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/core/size_expr.h"
#include "ir/dtype.h"

namespace kiln::codegen {

// One launch of an emitted op kernel.
struct OpKernel {
  std::string name;    // <prefix>_<label>_<16 hex digits of the body's hash>
  std::string source;  // complete translation unit
  unsigned grid = 0;   // 0: nothing to launch
  unsigned block = 0;
  size_t shared_bytes = 0;   // dynamic shared memory
  std::vector<int> results;  // the node's results this kernel takes as out0, out1... (empty: all)
  // Shape-generic (docs/dynamic_shapes.md): the symbols its last parameter,
  // a by-value kiln_syms, holds, and its grid per shape (NodeKernel::symbols).
  std::vector<std::string> symbols;
  GridAxisExpr grid_expr;
};

// A buffer of the kernel: its dtype (stored as cuda_storage_type) and name
// (out0, out1..., in0, in1...). Results are written, operands const.
struct ShellBuffer {
  DType dtype;
  std::string name;
  bool result;
};

// Replacement seams for an anchor inside a fused node (mirrors the anchor
// hook of the fused-reduction emitter: buffers, setup statements, load and
// store as C text). Indices passed in are C expressions of an integer type.
struct KernelSeams {
  std::vector<ShellBuffer> buffers;  // the kernel's parameters, in order
  std::vector<DType> dtypes;         // extra dtypes whose headers the helpers need
  std::string setup;                 // statements at the top of the kernel body
  // An expression of operand 0's STORAGE type: its element `idx`; `once`: the
  // read is on the read-once pass (see above).
  std::function<std::string(const std::string& idx, bool once)> load_x;
  // Statements storing `value` (an expression of result r's storage type) as
  // element `idx` of result r.
  std::function<std::string(int r, const std::string& idx, const std::string& value)> store;
};

// Assembles the translation unit: the fp16/bf16 headers the buffers need,
// the kernel prelude and expr_prelude(), `helpers` (device functions; may use
// @NAME@ for the kernel's name), the seam macros for in0 (compute type
// `x_compute`, e.g. "float") and every result (helpers come after them and may
// use them), the kernel with `body`, and the simulator entry. Sets k.name and
// k.source.
// `seams` (optional) replaces the plain buffers and seam macros: the kernel
// then has seams->buffers as parameters; `buffers` still gives operand 0's
// and the results' dtypes (in0, out<r>).
// `syms` (a shape-generic kernel): the kernel takes a by-value `kiln_syms ks`
// after its buffers (the body reads sizes from it), and k.symbols are set
// to syms->names(); the caller sets k.grid_expr.
void finish_op_kernel(OpKernel& k, std::string_view prefix, std::string_view label,
                      const std::vector<ShellBuffer>& buffers, const std::string& x_compute, const std::string& helpers,
                      const std::string& body, const KernelSeams* seams = nullptr, const KernelSymbols* syms = nullptr);

// `k` as decided, without text, for a DecidingOnly scope
// (codegen/core/deciding_only.h): an emitter that has made its last decision
// returns this instead of calling finish_op_kernel, which would only add the
// name and source. Sets the symbols of a shape-generic kernel as
// finish_op_kernel does.
OpKernel decided_op_kernel(OpKernel k, const KernelSymbols* syms = nullptr);

// The grid for `n` work items at one item per thread: ceil(n / block) blocks,
// at most 8192 (the kernels' grid-stride loops cover the rest).
unsigned items_grid(long long n, unsigned block);

}  // namespace kiln::codegen
