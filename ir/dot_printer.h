// Graphviz form of a graph: one box per node labelled with op, result type
// (dtype, shape, layout) and the ONNX node it came from; a fused node as one
// box saying what its kernel computes ("matmul+add+gelu (3 ops)"), or with
// DotOptions::fused_bodies as a cluster holding its body; graph inputs and
// outputs as ellipses. Constants are left out (they would drown the picture)
// and counted per node. A deep graph is cut into parts drawn side by side
// (ir/dot_parts.h).
#pragma once
#include <string>

#include "ir/graph.h"

namespace kiln {

struct DotOptions {
  bool fused_bodies = false;  // fused nodes as clusters of their bodies (kiln dump-ir --fused-bodies)
  bool wrap = true;           // a deep graph in parts side by side (false: one column, --no-wrap)
};

std::string print_dot(const Graph& g, const DotOptions& o = {});

}  // namespace kiln
