#include "conformance/one_plan.h"

#include <fstream>
#include <onnx/onnx_pb.h>
#include <set>

#include "backends/data_dependent_run.h"
#include "backends/run_on_backend.h"
#include "compiler/compile_model.h"
#include "conformance/engine_outputs.h"
#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/specialize.h"
#include "kiln/kiln.hpp"
#include "ops/registry.h"
#include "runtime/plan_format.h"
#include "runtime/plan_graph.h"
#include "runtime/plan_profiles.h"

namespace kiln {

namespace fs = std::filesystem;

std::vector<std::string> inputs_with_open_dims(const std::string& model_path) {
  std::ifstream in(model_path, std::ios::binary);
  onnx::ModelProto m;
  if (!m.ParseFromIstream(&in)) fail("{}: not a valid ONNX model", model_path);
  std::set<std::string> inits;
  for (const auto& i : m.graph().initializer()) inits.insert(i.name());
  std::vector<std::string> open;
  for (const auto& i : m.graph().input()) {
    if (inits.count(i.name()) || !i.type().has_tensor_type()) continue;
    const auto& tt = i.type().tensor_type();
    // No shape at all: the rank is open too, which a profile cannot express.
    if (!tt.has_shape()) continue;
    for (const auto& d : tt.shape().dim())
      if (!d.has_dim_value()) {
        open.push_back(i.name());
        break;
      }
  }
  return open;
}

namespace {

// The symbols of the plan's graph with their ranges: "batch in [1, 5], seq in [3, 9]".
std::string symbols_str(const Graph& g) {
  std::vector<std::string> syms;
  for (const SymbolDecl& d : g.symbols()) syms.push_back(fmt::format("{} in [{}, {}]", d.name, d.min, d.max));
  return fmt::format("{}", fmt::join(syms, ", "));
}

// Each set through the runtime's C API on its CPU path: one engine, one
// context, the input shapes set per set, the outputs' shapes asked of it.
std::vector<std::vector<Tensor>> run_on_runtime(const std::vector<uint8_t>& plan_bytes,
                                                const std::vector<ConformanceSet>& sets, const std::string& model) {
  std::vector<std::vector<Tensor>> all;
  try {
    Engine engine = Engine::from_memory(plan_bytes.data(), plan_bytes.size(), KILN_BACKEND_CPU);
    Context ctx(engine);
    for (const ConformanceSet& set : sets) {
      for (const TensorInfo& t : engine.inputs()) {
        auto it = set.inputs.find(t.name);
        if (it == set.inputs.end()) fail("{}: no data for input \"{}\"", set.dir.string(), t.name);
        if (t.dynamic()) ctx.set_input_shape(t.name, it->second.shape());  // this set's shape, inside the profile
        ctx.bind_input(t.name, it->second.raw(), t.dtype, it->second.shape());
      }
      std::vector<Tensor> outs;
      for (const TensorInfo& t : engine.outputs()) outs.emplace_back(DType(t.dtype), ctx.output_shape(t.name));
      std::vector<TensorInfo> out_info = engine.outputs();
      for (size_t k = 0; k < outs.size(); ++k)
        ctx.bind_output(out_info[k].name, outs[k].raw(), out_info[k].dtype, outs[k].shape());
      ctx.run();
      for (size_t k = 0; k < outs.size(); ++k)
        trim_to_run_shape(ctx, out_info[k].name, outs[k]);  // sizes decided by the data
      all.push_back(std::move(outs));
    }
  } catch (const runtime_error& e) {
    fail("{}: {}", model, e.what());
  }
  return all;
}

// Each set on the simulator: the plan's graph specialised to the set's
// shapes (after the runtime's profile check), its kernels generated for them.
std::vector<std::vector<Tensor>> run_on_sim(const plan::Plan& p, const Graph& g,
                                            const std::vector<ConformanceSet>& sets, const std::string& cache_dir) {
  std::vector<std::vector<Tensor>> all;
  for (const ConformanceSet& set : sets) {
    std::vector<std::pair<std::string, Shape>> shapes;
    std::map<std::string, Tensor> feed;
    for (const Value* in : g.inputs()) {
      auto it = set.inputs.find(in->name());
      if (it == set.inputs.end()) fail("{}: no data for input \"{}\"", set.dir.string(), in->name());
      shapes.emplace_back(in->name(), it->second.shape());
      feed[in->name()] = it->second;
    }
    std::string why;
    if (plan::matching_profile(p.shapes, shapes, &why) < 0)
      fail("{}: the inputs lie outside every shape profile of the plan: {}", set.dir.string(), why);
    if (has_data_dependent_sizes(g)) {  // stage by stage, as kiln run PLAN --backend sim
      all.push_back(run_with_data_dependent_sizes("sim", g, feed, {}, cache_dir).outputs);
      continue;
    }
    std::unique_ptr<Graph> at = specialize_graph(g, bind_symbols(g, shapes, set.dir.string()), op_registry());
    all.push_back(run_on_backend("sim", *at, feed, cache_dir));
  }
  return all;
}

}  // namespace

std::optional<OnePlanOutcome> run_one_plan_sets(const std::string& dir, const std::vector<ConformanceSet>& sets,
                                                const ConformanceOptions& opts, const CompareSet& compare) {
  const std::string model = (fs::path(dir) / "model.onnx").string();
  if (sets.size() < 2) return std::nullopt;
  // Sequence and optional inputs fix their structure at compile time: one
  // import per set (the per-set path).
  for (const ConformanceSet& set : sets)
    if (!set.composites.empty()) return std::nullopt;
  std::vector<std::string> open = inputs_with_open_dims(model);
  if (open.empty()) return std::nullopt;
  // The profile: per open input, the smallest and largest of each dim over
  // the sets (a dim every set gives alike stays fixed at that value).
  CompileModelOptions co;
  bool differ = false;
  for (const std::string& name : open) {
    Shape lo, hi;
    for (const ConformanceSet& set : sets) {
      auto it = set.inputs.find(name);
      if (it == set.inputs.end()) return std::nullopt;  // the per-set path names the missing input
      const Shape& s = it->second.shape();
      if (lo.empty() && hi.empty()) {
        lo = hi = s;
        continue;
      }
      if (s.size() != lo.size()) return std::nullopt;  // ranks differ: no profile holds both
      for (size_t d = 0; d < s.size(); ++d) {
        differ |= s[d] != lo[d] || s[d] != hi[d];
        lo[d] = std::min(lo[d], s[d]);
        hi[d] = std::max(hi[d], s[d]);
      }
    }
    co.min_shapes[name] = lo;
    co.max_shapes[name] = hi;
  }
  if (!differ) return std::nullopt;

  // Compiled once for the runtime's CPU path (a GPU plan with a profile
  // needs shape-generic kernels, not built yet).
  co.build = opts.compile;
  co.build.pass.target = "cpu";
  co.write_plan = true;
  CompileResult compiled = compile_model(ModelSource::file(model), co);
  plan::Plan p = plan::deserialize(compiled.plan.data(), compiled.plan.size(), model);
  std::unique_ptr<Graph> g = plan::load_graph(p, model);
  std::vector<std::string> output_names;
  for (const Value* v : g->outputs()) output_names.push_back(v->name());

  std::vector<std::vector<Tensor>> got;
  if (opts.backend == "ref") got = run_on_runtime(compiled.plan, sets, model);
  else if (opts.backend == "sim") got = run_on_sim(p, *g, sets, opts.compile.cache_dir);
  else fail("conformance: unknown backend '{}' (ref, sim)", opts.backend);

  OnePlanOutcome out;
  out.profile = fmt::format("{} sets from one plan, profile {}", sets.size(),
                            g->symbols().empty() ? std::string("(no symbol left open)") : symbols_str(*g));
  std::string errors;
  for (size_t k = 0; k < sets.size(); ++k) {
    std::string diff = compare(got[k], sets[k], output_names, errors);
    if (!diff.empty()) {
      out.status = "fail";
      out.message = diff + (errors.empty() ? "" : " [" + errors + "]");
      return out;
    }
  }
  out.status = "pass";
  out.message = errors;
  return out;
}

}  // namespace kiln
