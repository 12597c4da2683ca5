#include "backends/run_on_backend.h"

#include "backends/data_dependent_run.h"
#include "backends/reference/executor.h"
#include "ir/data_dependent.h"
#include "ir/error.h"
#ifdef KILN_HAVE_SIM_BACKEND
#include "backends/sim/sim_executor.h"
#endif

namespace kiln {

std::vector<std::string> backend_names() {
#ifdef KILN_HAVE_SIM_BACKEND
  return {"ref", "sim"};
#else
  return {"ref"};
#endif
}

std::vector<Tensor> run_on_backend(const std::string& backend, Graph& g, const std::map<std::string, Tensor>& inputs,
                                   const std::string& cache_dir) {
  // Result sizes the data decides: stage by stage (backends/data_dependent_run.h).
  if (has_data_dependent_sizes(g)) return run_with_data_dependent_sizes(backend, g, inputs, {}, cache_dir).outputs;
  if (backend == "ref") return ReferenceExecutor(g).run(inputs);
#ifdef KILN_HAVE_SIM_BACKEND
  if (backend == "sim") return codegen::SimExecutor(g, cache_dir).run(inputs);
#endif
  (void)cache_dir;
  fail("unknown backend '{}' (available: {})", backend, fmt::join(backend_names(), ", "));
}

}  // namespace kiln
