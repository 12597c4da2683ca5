// Kernels with more buffers than the kernel parameter space holds (32,764
// bytes, 4,095 pointers: codegen/launch_fit.h) take one pointer to a table
// in device memory instead: a 5,000-input Concat. The table holds, for N
// buffers in parameter order, N u64 addresses and then N i64 element counts
// (the simulator's bounds checks; a GPU reads only the addresses). The
// runtime builds it from the plan's bindings when it captures the launch
// list (runtime/gpu_executor.h), so it points into the arena, the weights
// and the bound inputs and outputs; the simulator's plan runner does the same
// in host memory (backends/plan_sim.h).
//
// The rewrite is generic, on the emitted text: every parameter must be a
// buffer (`KILN_PTR(T) name`); the parameter list becomes
// `KILN_PTR(const unsigned long long) kiln_param_table`, and each former
// parameter is a macro, for the kernel's body only, reading its table entry
// (on the simulator a bounds-checked pointer built from the address and the
// count). No local copies: 5,000 checked pointers would not fit a simulator
// thread's stack. The simulator entry is replaced by one binding the table.
// A kernel whose body uses a parameter's name as a member (`p.x` with a
// parameter `x`) or whose simulator entry is not the emitters' standard form
// is an error naming it.
#pragma once
#include <string>
#include <vector>

#include "codegen/emitter_table.h"

namespace kiln::codegen {

inline constexpr long long kMaxParamBytes = 32764;  // every supported arch (launch_fit.h)
// A shape-generic kernel's by-value `kiln_syms` (codegen/core/size_expr.h):
// its parameter bytes, which no pointer table can hold.
inline constexpr long long kKilnSymsBytes = 8LL * kMaxKernelSymbols;

// Rewrites `k` to take a pointer table when its parameters need more than
// `max_param_bytes` (8 per buffer pointer); returns whether it did. Throws
// kiln::Error when the kernel cannot be rewritten.
bool use_param_table_if_needed(NodeKernel& k, long long max_param_bytes = kMaxParamBytes);

// For a node of a plan with shape profiles whose emitter `e` is shape-generic:
// "" when its kernels' buffers and by-value kiln_syms fit the parameter space,
// else why not (a shape-generic kernel cannot take a pointer table; the
// plan's generic launches name no step with one). Below an upper bound of the
// node's buffers nothing is emitted; past it the kernels are emitted and their
// signatures counted. codegen::why_not_shape_generic asks it, so the fuser
// never forms a group whose kernel would need a table.
std::string why_generic_kernel_needs_param_table(const Node& n, const KernelEmitter& e);

// Per buffer of kernel `name` in `source` -- its parameters in order, or,
// for a kernel that takes a pointer table, the table's entries in order --
// whether the kernel may write it (`KILN_PTR(T)`) rather than only read it
// (`KILN_PTR(const T)`). Empty when `source` has no such kernel. The strict
// fake driver's race detector asks it (tests/runtime/fake_cuda/).
std::vector<bool> kernel_buffer_writes(const std::string& source, const std::string& name);

}  // namespace kiln::codegen
