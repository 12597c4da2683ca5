// The contract between the fuser and codegen: before the fuse pass forms a
// reduction-with-prologue or attention group, and once more for every group
// it ends with, it asks "can a kernel be emitted for this fused node?". A
// group codegen refuses is never formed, or is split back (an anchored group
// keeps the longest epilogue prefix codegen takes; an anchor refused alone,
// or every member of an anchorless group, is left alone), whatever the target.
//
// passes/ must not depend on codegen/ (docs/architecture.md), so the question
// is a plain function the pipeline hands over in PassOptions: the pipeline
// (tools/kiln/compile.cpp, compile_graph) passes codegen::why_no_kernel
// (codegen/emitter_table.h), which answers by running the very emitter that
// would emit the node, so the answer and the emitter cannot drift apart.
//
// Without one (a pipeline built without codegen: the sanitizer build, unit
// tests of the pass alone) the fuser forms the groups its own structural
// rules allow (passes/fusion_rules.h). Those always run on the reference
// backend, which evaluates any fused body op by op; they promise nothing
// about GPU kernels. Every kiln tool hands codegen's answer whatever the
// --target, so `--target cpu` and `--target sm_90` fuse alike.
#pragma once
#include <functional>
#include <string>

namespace kiln {

class Node;

// "" when a kernel can be emitted for `fused` (a `fused` node with its body,
// whose operands are inputs of a scratch graph), else why not.
using WhyNoKernel = std::function<std::string(const Node& fused)>;

}  // namespace kiln
