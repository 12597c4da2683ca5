// The node -> emitter contract: every kernel codegen can emit is reached
// through emitter_for(), the one dispatch table (first match wins). The
// sim backend runs these kernels on the CPU, the plan builder compiles them
// with NVRTC (codegen/kernel_build.h); both ask the same table.
#pragma once
#include <string>
#include <vector>

#include "codegen/core/size_expr.h"
#include "ir/graph.h"

namespace kiln::codegen {

// Grid or block dimensions of a launch. Converts from one unsigned (x), so
// 1-D emitters write `nk.grid = k.grid`.
struct LaunchDims {
  unsigned x = 0, y = 1, z = 1;
  LaunchDims() = default;
  LaunchDims(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  unsigned long long count() const { return 1ull * x * y * z; }
  bool operator==(const LaunchDims&) const = default;
};

// One launch of an emitted kernel for a node.
struct NodeKernel {
  std::string name;    // kernel (and simulator entry <name>_sim) name
  std::string source;  // complete translation unit
  LaunchDims grid;     // count() == 0: nothing to launch (empty outputs)
  LaunchDims block;
  size_t shared_bytes = 0;  // dynamic shared memory per block
  // Buffers: the node's results listed in `results` (empty: all of them, in
  // order), then its inputs in order, then `extra` (host tensors the emitter
  // adds, e.g. a fused body's constants).
  std::vector<int> results;
  std::vector<Tensor> extra;
  // Device scratch of this many f32 elements (0: none), bound after `extra`:
  // split-K partial sums that a node's GEMM kernel writes and its reduction
  // kernel reads. The kernels of one node that ask for scratch share one
  // buffer (the largest asked for), which the memory plan places in the arena
  // live at that node only (MemoryPlanOptions::workspace_bytes); its contents
  // are undefined when the node starts.
  int64_t workspace_f32 = 0;
  // This many u32 counters (0: none), bound after the scratch: the per-tile
  // tickets of a folded split-K GEMM (codegen/emitters/gemm_conv/emit_gemm.h).
  // Unlike the scratch they must be zero when the kernel starts, and the
  // kernel leaves them zero: every such kernel of a plan shares one region
  // that is zeroed once, when a context's arena is created, and that nothing
  // else uses (plan::Memory::zeroed_offset; the sim backend checks they are
  // zero again after each launch).
  int64_t tile_counters = 0;
  // The buffers are passed through a table in device memory, the kernel's
  // one parameter (codegen/param_table.h): set by use_param_table_if_needed.
  bool param_table = false;
  // Shape-generic (a plan with shape profiles, docs/dynamic_shapes.md): the
  // symbols the kernel's last parameter (a by-value `kiln_syms`) holds, in
  // order, and each grid axis as a function of them; `grid` is then only
  // nonzero (a launch). Empty for a kernel whose sizes are all constants.
  std::vector<std::string> symbols;
  GridAxisExpr grid_expr[3];
  bool shape_generic() const { return !symbols.empty(); }
};

// The most tile counters one kernel of `kernels` binds (NodeKernel::tile_counters).
int64_t node_tile_counters(const std::vector<NodeKernel>& kernels);

// The scratch bytes the kernels of one node share (the largest NodeKernel::workspace_f32, in bytes).
int64_t node_workspace_bytes(const std::vector<NodeKernel>& kernels);

// An emitter: a name for messages, whether it handles a node, and the
// node's kernels (launched in order; e.g. one per result of a split).
// Asking whether a node gets kernels (why_no_kernel: the fuser asks about
// every group it forms) must not render them: rendering a 100k-op kernel, or
// a GEMM's main loop per ladder rung, to answer cost as much as the rest of
// the pass. So why_no_kernel runs `check` where an emitter has one (every
// decision `emit` makes, without writing text, throwing what `emit` would
// throw; `emit` starts with the very same function), and otherwise `emit`
// itself inside a DecidingOnly scope (codegen/core/deciding_only.h), where
// each family's emitter returns once its launch is decided, before its text:
// in both forms the answer is the emitter's own code.
struct KernelEmitter {
  const char* name;
  bool (*handles)(const Node&);
  std::vector<NodeKernel> (*emit)(const Node&);
  // Whether its kernels for `n` take symbolic sizes (NodeKernel::symbols), so
  // it can emit that node of a plan with shape profiles whose types hold
  // symbolic dims (null: for no node).
  bool (*shape_generic)(const Node& n) = nullptr;
  void (*check)(const Node&) = nullptr;  // null: `emit` deciding only answers
};

// The first emitter of the table that handles `n`, or null.
const KernelEmitter* emitter_for(const Node& n);

// Why `n` gets no kernel, or "" when it gets one: no emitter handles it, or
// the emitter that handles it refuses it (the kiln::Error it raises while
// checking or emitting; any other exception is reported as a failure of that emitter). The answer comes from that
// emitter's check (KernelEmitter::check) or, without one, from running the emitter deciding only (no kernel
// text), so it cannot disagree with what codegen later does. The pipeline hands this to the fuse pass
// (PassOptions::why_no_kernel, passes/fusion_capabilities.h): a group this refuses is never formed.
std::string why_no_kernel(const Node& n);

// The same answer from emitting the node's kernels in full, whether or not
// its emitter has a check: what tests compare why_no_kernel with.
std::string why_no_kernel_by_emitting(const Node& n);

// For a plan with shape profiles on a GPU target: "" when `n` gets kernels
// that run at every shape (its types are static, it is a view, or its
// emitter is shape-generic), else why not ("its kernel family (gemm) takes
// no symbolic sizes yet"); the caller names the node.
std::string why_not_shape_generic(const Node& n);

}  // namespace kiln::codegen
