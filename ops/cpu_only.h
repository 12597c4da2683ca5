// Ops that run on the CPU backends only, by design: codegen has no kernel for
// them (decision trees: branchy per-row walks over a table the size of the
// model), so GPU targets refuse such a node by name and the sim backend says
// it runs on the CPU backends only (kCpuOnlyRefusal). The conformance
// runner's --baseline does not count that refusal as a regression of a GPU
// backend against the reference (conformance_sim's gate).
#pragma once
#include <string_view>

namespace kiln::ops {

inline bool is_cpu_only_op(std::string_view op) { return op == "tree_ensemble"; }

// The words of a GPU-kernel backend's refusal of such an op.
inline constexpr const char* kCpuOnlyRefusal = "runs on the CPU backends only";

}  // namespace kiln::ops
