// What `kiln compile --dump-dir DIR` adds to the pass manager's per-pass IR
// files: every kernel's CUDA source (DIR/kernels/*.cu), the final graph as SVG
// (when Graphviz is installed) and DIR/index.html linking IR, picture and
// kernels.
#pragma once
#include <string>

#include "ir/graph.h"
#include "compiler/compile.h"

namespace kiln {

// Emits the kernels of the optimized graph `g` (sources only, no NVRTC) and
// writes them and the index into o.pipeline.dump_dir. Returns the number of
// kernel files written.
int write_dump_index(const Graph& g, const CompileOptions& o, const std::string& model);

}  // namespace kiln
