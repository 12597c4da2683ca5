// Running a graph with data-dependent result sizes on a CPU backend by name
// (ref or sim): the stage machinery of backends/reference/data_dependent_stages.h
// with each static graph run by run_on_backend.
#pragma once
#include <map>
#include <string>

#include "backends/reference/data_dependent_stages.h"

namespace kiln {

// Runs `g` on `backend` ("ref" or "sim", as run_on_backend) with `inputs` by
// name (run_data_dependent_stages).
DataDependentRunResult run_with_data_dependent_sizes(const std::string& backend, const Graph& g,
                                                     const std::map<std::string, Tensor>& inputs,
                                                     const DataDependentRunHooks& hooks = {},
                                                     const std::string& cache_dir = "");

}  // namespace kiln
