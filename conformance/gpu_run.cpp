#include "conformance/gpu_run.h"

#include <algorithm>
#include <memory>

#include "compiler/gpu_bounded_sizes.h"
#include "conformance/engine_outputs.h"
#include "compiler/plan_writer.h"
#include "compiler/targets.h"
#include "ir/data_dependent.h"
#include "ir/error.h"
#include "kiln/kiln.hpp"
#include "runtime/plan_format.h"

namespace kiln {

std::vector<Tensor> run_graph_on_gpu(Graph& imported, const std::map<std::string, Tensor>& feed,
                                     const CompileOptions& compile, const std::string& model_path) {
  if (!is_gpu_target(compile.pass.target))
    fail("conformance --backend gpu: --target {} builds no GPU kernels (use sm_80, sm_86, sm_89, sm_90 or sm_90a)",
         compile.pass.target);
  std::vector<std::string> names;
  for (const Value* o : imported.outputs()) names.push_back(o->name());
  // Sizes decided by the data: the graph at the bounds, as compile_model
  // builds it for a GPU target (compiler/gpu_bounded_sizes.h).
  plan::BoundedSizes bounded;
  std::unique_ptr<Graph> at_bounds;
  Graph* g = &imported;
  if (compile.optimize && has_data_dependent_sizes(imported)) {
    at_bounds = graph_at_bounds(imported, model_path, bounded);
    g = at_bounds.get();
  }
  compile_graph(*g, compile);
  // An op with no kernel (a CPU-only op, ops/cpu_only.h) is the plan's
  // refusal, as the simulator's: unsupported on this backend, named.
  if (std::vector<std::string> none = nodes_without_kernel_emitter(*g); !none.empty())
    throw Unsupported(fmt::format("{}: no GPU kernel for {}", model_path, fmt::join(none, ", ")));
  plan::Plan p = build_plan(
      *g, {compile.pass.target, compile.pass.precision, compile.cache_dir, compile.kernel_cache, {}, model_path});
  p.bounded_sizes = bounded;
  const std::vector<uint8_t> bytes = plan::serialize(p);
  std::vector<std::pair<std::string, Tensor>> results;
  try {
    Engine engine = Engine::from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU);
    Context ctx(engine);
    for (const TensorInfo& t : engine.inputs()) {
      auto in = feed.find(t.name);
      if (in == feed.end()) fail("{}: the plan's input '{}' has no value in the data set", model_path, t.name);
      ctx.bind_input(t.name, in->second.raw(), t.dtype, in->second.shape());
    }
    results = bind_host_outputs(engine, ctx);
    ctx.run();
    for (auto& [name, t] : results) trim_to_run_shape(ctx, name, t);  // sizes decided by the data
  } catch (const runtime_error& e) {
    fail("{}: {}", model_path, e.what());
  }
  // In the graph's output order (compare_outputs pairs them by position).
  std::vector<Tensor> outs;
  for (const std::string& name : names) {
    auto at = std::find_if(results.begin(), results.end(), [&](const auto& r) { return r.first == name; });
    if (at == results.end()) fail("{}: the plan has no output '{}'", model_path, name);
    outs.push_back(at->second);
  }
  return outs;
}

}  // namespace kiln
