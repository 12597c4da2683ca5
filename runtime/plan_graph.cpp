#include "runtime/plan_graph.h"

#include <cstring>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "ops/registry.h"

namespace kiln::plan {

namespace {
void walk(const Graph& g, std::vector<Value*>& out) {
  out.insert(out.end(), g.constants().begin(), g.constants().end());
  for (const auto& n : g.nodes())
    for (const auto& r : n->regions()) walk(*r, out);
}
}  // namespace

std::vector<Value*> walk_constants(const Graph& g) {
  std::vector<Value*> out;
  walk(g, out);
  return out;
}

std::unique_ptr<Graph> load_graph(const Plan& p, std::string_view what) {
  std::unique_ptr<Graph> g;
  try {
    g = parse_graph(p.graph_text, std::string(what) + ": graph");
  } catch (const Error& e) {
    fail("{}: the graph section does not parse: {}", what, e.what());
  }
  std::vector<Value*> cs = walk_constants(*g);
  if (cs.size() != p.meta.graph_constants)
    fail("{}: the graph has {} constants, the weights section holds {}", what, cs.size(), p.meta.graph_constants);
  for (size_t i = 0; i < cs.size(); ++i) {
    const WeightEntry& w = p.weights[i];
    if (w.type != cs[i]->type())
      fail("{}: constant %{} is {} in the graph but weight {} is {}", what, cs[i]->name(), cs[i]->type().str(), i,
           w.type.str());
    if (cs[i]->has_data()) continue;  // printed inline
    Tensor t(w.type);
    if (w.nbytes) std::memcpy(t.raw(), p.weight_data.data() + w.offset, w.nbytes);
    cs[i]->set_data(std::move(t));
  }
  try {
    verify_graph(*g, op_registry());
  } catch (const Error& e) {
    fail("{}: the graph is invalid: {}", what, e.what());
  }
  check_profiles(p, *g, what);
  if (!p.bounded_sizes.empty()) {
    if (!g->symbols().empty()) fail("{}: section 'bounded sizes' in a plan whose graph has symbols", what);
    check_bounded_sizes(p.bounded_sizes, *g, what);
  }
  return g;
}

}  // namespace kiln::plan
