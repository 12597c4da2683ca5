#include "tools/kiln/backends.h"

#include "backends/reference/executor.h"
#include "ir/error.h"

namespace kiln {

std::vector<std::string> backend_names() { return {"ref"}; }

std::vector<Tensor> run_on_backend(const std::string& backend, Graph& g, const std::map<std::string, Tensor>& inputs) {
  if (backend == "ref") return ReferenceExecutor(g).run(inputs);
  fail("unknown backend '{}' (available: {})", backend, fmt::join(backend_names(), ", "));
}

}  // namespace kiln
