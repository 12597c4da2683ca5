#include "backends/data_dependent_run.h"

#include "backends/run_on_backend.h"

namespace kiln {

DataDependentRunResult run_with_data_dependent_sizes(const std::string& backend, const Graph& g,
                                                     const std::map<std::string, Tensor>& inputs,
                                                     const DataDependentRunHooks& hooks, const std::string& cache_dir) {
  return run_data_dependent_stages(
      g, inputs,
      [&](Graph& stage, const std::map<std::string, Tensor>& feed) {
        return run_on_backend(backend, stage, feed, cache_dir);
      },
      hooks);
}

}  // namespace kiln
