#include "compiler/plan_writer_profiles.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "compiler/compile.h"
#include "compiler/targets.h"
#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/specialize.h"
#include "ir/symbolic_dim.h"
#include "ops/registry.h"
#include "runtime/plan_graph.h"
#ifdef KILN_HAVE_CODEGEN
#include "codegen/emitter_table.h"
#endif

namespace kiln {

namespace planbuild {

bool holds_symbolic_values(const Value& c) {
  if (c.dtype() != DType::I64 || !c.has_data()) return false;
  const int64_t* v = static_cast<const int64_t*>(c.data().raw());
  return std::any_of(v, v + c.data().numel(), [](int64_t d) { return is_symbolic_dim(d); });
}

void refuse_symbolic_constants(const Graph& g, const std::string& where) {
  // A short one is printed inline in the graph text, as polynomials
  // (dense<[past+seq]>), which the loader parses back: storable.
  for (const Value* c : plan::walk_constants(g)) {
    if (!holds_symbolic_values(*c) || c->data().numel() <= PrintOptions{}.inline_elements) continue;
    const int64_t* v = static_cast<const int64_t*>(c->data().raw());
    for (int64_t i = 0; i < c->data().numel(); ++i)
      if (is_symbolic_dim(v[i]))
        unsupported(
            "{}constant %{} holds the symbolic shape value {} among {} elements: plans store symbolic constants of "
            "at most {} elements",
            where, c->name(), dim_str(v[i]), c->data().numel(), PrintOptions{}.inline_elements);
  }
}

std::unique_ptr<Graph> graph_at_largest_shapes(const Graph& g, const PlanBuildOptions& o) {
  if (g.symbols().empty()) return nullptr;
  const std::string where = o.source_name.empty() ? "" : o.source_name + ": ";
  KILN_CHECK(!o.profiles.empty(), "a graph with symbolic dims needs its shape profiles");
  refuse_symbolic_constants(g, where);
  SymbolBindings largest;
  std::vector<std::string> at;
  for (const SymbolDecl& d : g.symbols()) {
    largest[d.name] = d.max;
    at.push_back(fmt::format("{}={}", d.name, d.max));
  }
  try {
    return specialize_graph(g, largest, op_registry());
  } catch (const Error& e) {
    // The verifier's message names the node, not the model or the shapes
    // that broke it: a node valid for every shape but the largest (a split
    // whose constant parts sum to the smaller sizes) is the profile's fault.
    std::vector<std::string> inputs;
    for (const Value* in : g.inputs()) {
      Shape s = in->shape();
      for (int64_t& d : s)
        if (is_symbolic_dim(d)) d = eval_dim(d, largest);
      inputs.push_back(fmt::format("{} [{}]", in->name(), dims_str(s)));
    }
    fail("{}at the largest shapes of the shape profiles ({}; inputs {}): {}", where, fmt::join(at, ", "),
         fmt::join(inputs, ", "), e.what());
  }
}

void record_profiles(const Graph& g, const PlanBuildOptions& o, plan::Plan& p) {
  p.shapes.profiles = o.profiles;
  std::vector<const Node*> nodes;
  for (const auto& n : g.nodes()) nodes.push_back(n.get());
  for (const plan::MemoryEntry& e : p.memory.values) {
    const Value* v = nodes.at(e.node)->output(static_cast<int>(e.result));
    DimPoly bytes = dim_poly(dim_mul(dim_product(v->shape()), static_cast<int64_t>(dtype_size(v->dtype()))));
    for (const auto& [mono, coeff] : bytes)
      if (!mono.empty() && coeff < 0)
        unsupported(
            "{}value %{} has {} bytes, which shrinks as a symbol grows: the memory plan at the largest shapes "
            "does not bound it",
            o.source_name.empty() ? "" : o.source_name + ": ", v->name(), dim_str(dim_of_poly(bytes)));
    p.shapes.value_bytes.push_back(std::move(bytes));
  }
}

plan::Plan data_dependent_plan(const Graph& g, const PlanBuildOptions& o, plan::Plan p) {
  const std::string where = o.source_name.empty() ? "" : o.source_name + ": ";
  if (is_gpu_target(o.target)) refuse_data_dependent_sizes(g, o.source_name);
  KILN_CHECK(!o.profiles.empty(), "a graph with data-dependent sizes needs its shape profiles (one may be empty)");
  refuse_symbolic_constants(g, where);
  p.graph_text = print_graph(g);
  std::vector<Value*> cs = plan::walk_constants(g);
  for (const Value* c : cs) add_weight(p, c->data());
  p.meta.graph_constants = cs.size();
  p.shapes.profiles = o.profiles;
  p.meta.no_gpu_reason =
      fmt::format("compiled for target {} (use --target auto, portable or sm_XX for GPU kernels)", o.target);
  return p;
}

}  // namespace planbuild

void refuse_non_generic_nodes(const Graph& g, const std::string& model, const std::string& target) {
#ifdef KILN_HAVE_CODEGEN
  if (g.symbols().empty()) return;
  for (const auto& n : g.nodes()) {
    std::string why = codegen::why_not_shape_generic(*n);
    if (why.empty()) continue;
    std::vector<std::string> syms;
    for (const SymbolDecl& d : g.symbols()) syms.push_back(fmt::format("{} in [{}, {}]", d.name, d.min, d.max));
    unsupported(
        "{}{}: target {} needs a shape-generic GPU kernel for every node of a plan with shape profiles ({}), and "
        "kiln has none yet for {} ({}): compile the profile for --target cpu (the runtime's CPU path runs any shape "
        "in it), or fix the shapes with --shapes for a GPU plan (docs/dynamic_shapes.md)",
        model.empty() ? "" : model + ": ", n->describe(), target, fmt::join(syms, ", "), n->op(), why);
  }
#else
  (void)g, (void)model, (void)target;
#endif
}

}  // namespace kiln
