#include "compiler/gpu_bounded_sizes.h"

#include <algorithm>
#include <set>

#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/specialize.h"
#include "ir/symbolic_dim.h"
#include "ops/registry.h"

namespace kiln {

namespace {

using SizeSymbols = std::set<std::string, std::less<>>;

bool uses_size(int64_t dim, const SizeSymbols& sizes) {
  for (const std::string& s : dim_symbols(dim))
    if (sizes.count(s)) return true;
  return false;
}

// The dims of `t` that depend on a data-dependent size.
std::vector<int> size_dims(const TensorType& t, const SizeSymbols& sizes) {
  std::vector<int> r;
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (uses_size(t.shape[d], sizes)) r.push_back(static_cast<int>(d));
  return r;
}

int norm(int64_t axis, size_t rank) { return static_cast<int>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis); }

// A shape whose one data-dependent dim has only 1s before it: laid out at
// the bound, the real entries are a prefix of the buffer.
bool prefix_layout(const TensorType& t, const SizeSymbols& sizes) {
  std::vector<int> ds = size_dims(t, sizes);
  if (ds.size() != 1) return ds.empty();
  for (int d = 0; d < ds[0]; ++d)
    if (t.shape[d] != 1) return false;
  return true;
}

// Why `n`, which reads a value with a data-dependent dim, would mix the
// padding past a count into the real entries when run at the bound ("" when
// it keeps each entry along such a dim to itself).
std::string why_not_exact(const Node& n, const SizeSymbols& sizes) {
  const OpDef& def = op_registry().get(n.op());
  const std::string& op = n.op();
  if (def.category == OpCategory::Pointwise) return "";
  if (op == "transpose") return "";
  if (op == "gather" || op == "gather_nd") {
    // Indices with such a dim give one result entry each, and data dims
    // copied through keep theirs; a data dim the indices select along would
    // be indexed by values kiln cannot check against the count.
    const TensorType& data = n.input(0)->type();
    int lo = 0, hi = 0;  // the data dims the indices select along
    if (op == "gather") {
      lo = norm(n.attrs().get_int("axis", 0), data.shape.size());
      hi = lo + 1;
    } else {
      const Shape& idx = n.input(1)->shape();
      lo = static_cast<int>(n.attrs().get_int("batch_dims", 0));
      hi = idx.empty() ? lo : lo + static_cast<int>(idx.back());
    }
    for (int d : size_dims(data, sizes))
      if (d >= lo && d < hi)
        return "it indexes along a data-dependent dim (an index past the count would read padding)";
    return "";
  }
  if (op == "reshape") {
    if (prefix_layout(n.input(0)->type(), sizes) && prefix_layout(n.output(0)->type(), sizes)) return "";
    return "it moves entries across a data-dependent dim (only reshapes that keep it the outermost dim, with 1s "
           "before it, keep the real entries a prefix)";
  }
  if (op == "concat") {
    const int axis = norm(n.attrs().get_int("axis", 0), n.output(0)->shape().size());
    for (const Value* v : n.inputs())
      if (v && uses_size(v->shape()[axis], sizes)) return "it concatenates along a data-dependent dim";
    return "";
  }
  if (op == "slice") {
    const std::vector<int64_t> st = n.attrs().get_ints("starts"), sp = n.attrs().get_ints("steps");
    for (int d : size_dims(n.input(0)->type(), sizes))
      if (st.at(d) != 0 || sp.at(d) != 1 || n.output(0)->shape()[d] != n.input(0)->shape()[d])
        return "it slices a data-dependent dim";
    return "";
  }
  if (def.category == OpCategory::Reduction) {
    const TensorType &in = n.input(0)->type(), &out = n.output(0)->type();
    std::vector<int> ds = size_dims(in, sizes);
    bool kept = in.rank() == out.rank();
    for (int d : ds) kept = kept && out.shape[d] == in.shape[d];
    if (n.attrs().has("axis")) {
      const int a = norm(n.attrs().get_int("axis", 0), in.shape.size());
      kept = kept && std::find(ds.begin(), ds.end(), a) == ds.end();
    }
    if (n.attrs().has("axes"))
      for (int64_t a : n.attrs().get_ints("axes"))
        kept = kept && std::find(ds.begin(), ds.end(), norm(a, in.shape.size())) == ds.end();
    if (kept) return "";
    return "it reduces along a data-dependent dim";
  }
  if (is_data_dependent_node(n)) return "its own size would be decided by padded operands";
  return fmt::format("kiln has no rule yet for {} over a data-dependent dim", op);
}

}  // namespace

std::unique_ptr<Graph> graph_at_bounds(const Graph& g, const std::string& model, plan::BoundedSizes& out) {
  const std::string where = model.empty() ? "" : model + ": ";
  const auto deciders = data_dependent_symbols(g);
  SizeSymbols sizes;
  for (const auto& [sym, node] : deciders) sizes.insert(sym);
  std::vector<std::string> profile_syms;
  for (const SymbolDecl& d : g.symbols())
    if (!sizes.count(d.name)) profile_syms.push_back(d.name);
  if (!profile_syms.empty())
    unsupported(
        "{}the graph has shape-profile symbols ({}) and result sizes decided at run time: a GPU plan with both is not "
        "implemented yet (compile it for --target cpu)",
        where, fmt::join(profile_syms, ", "));
  std::set<const Node*> top;
  for (const auto& n : g.nodes()) top.insert(n.get());
  for (const auto& [sym, node] : deciders)
    if (!top.count(node))
      unsupported(
          "{}{} decides the size {} inside a region (an if's branch or a loop's body): GPU plans hold sizes decided "
          "at the top level only for now (a plan for --target cpu runs it)",
          where, node->describe(), sym);
  for (const auto& [sym, node] : deciders)
    if (node->op() != "nonzero" && node->op() != "non_max_suppression" && node->op() != "topk")
      unsupported(
          "{}{} decides the size {} at run time: GPU plans hold nonzero, non_max_suppression and topk sizes only for "
          "now (an if whose branches decide sizes, or a slice clamping a data-dependent dim, runs in a plan for "
          "--target cpu)",
          where, node->describe(), sym);
  for (const auto& n : g.nodes()) {
    bool reads_size = false;
    for (const Value* v : n->inputs()) reads_size = reads_size || (v && !size_dims(v->type(), sizes).empty());
    if (!reads_size) continue;
    std::string why =
        n->num_regions() ? "control flow over a data-dependent size is not supported" : why_not_exact(*n, sizes);
    if (!why.empty())
      unsupported(
          "{}{} reads a value whose size is decided at run time ({}): a GPU plan computes at the upper bound and "
          "trims the outputs, which is exact only for ops that keep each entry along such a dim to itself, and {} "
          "(compile it for --target cpu: the runtime's CPU path runs it stage by stage)",
          where, n->describe(), fmt::join(shape_symbols(n->inputs()[0] ? n->inputs()[0]->shape() : Shape{}), ", "),
          why);
  }

  // Each data-dependent node in its bounded form, its uses moved over; the
  // types keep the symbol until the graph is specialised at the bounds.
  std::unique_ptr<Graph> c = g.clone();
  SymbolBindings bounds;
  std::vector<Value*> counts;
  for (Node* n : c->node_list()) {
    if (!n->attrs().has(kSizeSymbolAttr)) continue;
    const std::string sym = n->attrs().get_string(kSizeSymbolAttr, "");
    const SymbolDecl* decl = g.find_symbol(sym);
    KILN_CHECK(decl, "size symbol {} is not declared", sym);
    AttrMap attrs = n->attrs();
    attrs.erase(kSizeSymbolAttr);
    std::vector<Value*> ins = n->inputs();
    int results = n->num_outputs(), axis = 0;
    Value* count = nullptr;
    if (n->op() == "topk") {
      // topk needs no bounded form: with k = the axis size, sorted, its
      // first k entries are a top k; the count is the k operand itself.
      axis = norm(attrs.get_int("axis", -1), ins[0]->shape().size());
      attrs.set("k", ins[0]->shape()[axis]);
      attrs.set("sorted", int64_t(1));
      count = ins[1];
      ins.resize(1);
    } else {
      attrs.set("bounded", int64_t(1));
      results += 1;                         // the count
      axis = n->op() == "nonzero" ? 1 : 0;  // nonzero: [rank, count]; non_max_suppression: [count, 3]
    }
    InferContext ic(n->op(), ins, attrs, results, n->describe());
    std::vector<TensorType> types = infer_types(op_registry().get(n->op()), ic);
    if (types[0].shape[axis] != decl->max)
      fail("{}{}: its bounded result is {}, but its size symbol {} has the range [0, {}]", where, n->describe(),
           types[0].str(), sym, decl->max);
    Node* b = c->add_node(n->op(), ins, types, attrs, n->name(), n);
    for (int r = 0; r < n->num_outputs(); ++r) {
      const std::string name = n->output(r)->name();
      n->output(r)->set_name(name + ".unbounded");
      b->output(r)->set_name(name);
      c->replace_all_uses(n->output(r), b->output(r));
    }
    if (!count) {
      count = b->output(n->num_outputs());
      count->set_name(sym + "_count");
    }
    c->erase_node(n);
    bounds[sym] = decl->max;
    out.counts.push_back({sym, decl->max, 0, deciders.at(sym)->describe()});
    counts.push_back(count);
  }
  for (const Value* v : g.outputs()) {
    std::vector<DimPoly> dims;
    for (int64_t d : v->shape()) dims.push_back(dim_poly(d));
    out.outputs.push_back(std::move(dims));
  }
  std::vector<Value*> outs = c->outputs();
  for (size_t k = 0; k < counts.size(); ++k) {
    out.counts[k].output = static_cast<uint32_t>(outs.size());
    outs.push_back(counts[k]);
  }
  c->set_outputs(outs);
  return specialize_graph(*c, bounds, op_registry());
}

}  // namespace kiln
