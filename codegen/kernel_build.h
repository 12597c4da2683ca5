// Builds every kernel an optimized graph launches: each node goes through
// its emitter (codegen/emitter_table.h's emitter_for table), identical sources
// are kept once, and the distinct kernels are compiled with NVRTC for one
// arch on a pool of threads, through the on-disk kernel cache. This is what
// `kiln compile` runs after the passes, what `kiln conformance
// --nvrtc-check` runs per test, and what a plan's kernel section holds.
//
// Nodes without an emitter are listed in `missing` (not an error here: the
// caller decides; a GPU plan must refuse such a graph).
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "codegen/nvrtc/nvrtc_compiler.h"
#include "codegen/emitter_table.h"
#include "ir/graph.h"

namespace kiln::codegen {

struct KernelBuildOptions {
  std::string arch = "sm_90";
  // More archs to compile the same sources for (a portable plan's sm_90 next
  // to its sm_80): CUBINs only differ, the kernels and launches are the same.
  std::vector<std::string> more_archs;
  bool use_cache = true;
  std::filesystem::path cache_dir;  // empty: the default (codegen/nvrtc/kernel_cache.h)
  // The model file: errors (an emitter refusing a node, NVRTC rejecting a
  // kernel) are prefixed with it, as the importer's and the passes' are.
  std::string source;
  // Called from the compiling threads as kernels finish (done, total); may be empty.
  std::function<void(int, int)> progress;
};

struct NodeLaunches {
  const Node* node = nullptr;
  std::vector<NodeKernel> kernels;  // launched in order; empty for views
};

struct GraphKernels {
  std::vector<NodeLaunches> launches;    // graph order, every non-view node with an emitter
  std::vector<std::string> missing;      // Node::describe() of nodes no emitter handles
  std::vector<CompiledKernel> compiled;  // one per distinct kernel, in first-use order
  // Per KernelBuildOptions::more_archs, the same kernels compiled for it
  // (parallel to `compiled`).
  std::vector<std::vector<CompiledKernel>> more_compiled;
  int nvrtc_compilations = 0, cache_hits = 0;
  double seconds = 0;  // wall time of emission + compilation
};

// Nodes that launch nothing (reshape, identity: views of their operand).
bool is_view_node(const Node& n);

// Emits (and, unless `compile` is false, compiles) the kernels of `g`.
// Throws kiln::Error when NVRTC rejects a kernel (naming it and the arch),
// kiln::Unsupported when an emitter refuses a node; both start with
// `o.source` when it is set.
GraphKernels build_graph_kernels(const Graph& g, const KernelBuildOptions& o, bool compile = true);

}  // namespace kiln::codegen
