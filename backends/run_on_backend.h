// The execution backends the CLI can run a graph on, by name.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

// "ref": the CPU reference backend on the imported graph.
// "sim" (when codegen is built): generated kernels on the CPU simulator
// (backends/sim/sim_executor.h); throws kiln::Unsupported for ops without an emitter.
// `cache_dir`: the simulator's module cache (empty: the default, see
// codegen/nvrtc/kernel_cache.h).
// A graph with data-dependent result sizes (ir/data_dependent.h) runs stage
// by stage, without passes (backends/data_dependent_run.h).
std::vector<Tensor> run_on_backend(const std::string& backend, Graph& g, const std::map<std::string, Tensor>& inputs,
                                   const std::string& cache_dir = "");
std::vector<std::string> backend_names();

}  // namespace kiln
