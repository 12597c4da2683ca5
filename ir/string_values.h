// Where a graph holds string tensors (DType::String). They run on the
// reference (CPU) backend only: GPU plans, plans of any target (the plan
// format stores no strings) and the kernel simulator refuse such a graph
// with kiln::Unsupported naming the node, never a crash in a kernel.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace kiln {

// The words of every such refusal. They hold ops::kCpuOnlyRefusal
// (ops/cpu_only.h; checked in conformance/conformance.cpp), so kiln
// conformance's --baseline counts the simulator's refusal as one by design,
// not a regression, as for the CPU-only ops.
inline constexpr const char* kStringsCpuOnly =
    "string tensors, which kiln runs on the CPU backends only (the reference backend)";

// The first node (regions included) with a string operand or result, or a
// string graph input or output, described for a message; nullopt if none.
std::optional<std::string> first_string_value(const Graph& g);

// Throws kiln::Unsupported "<context>: <what> holds string tensors, which
// kiln runs on the CPU backends only (...), not <where>" when g holds strings.
void refuse_string_tensors(const Graph& g, std::string_view context, std::string_view where);

}  // namespace kiln
