#include "compiler/gpu_bounded_sizes.h"

#include "compiler/gpu_bounded_lowering.h"

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
  // Indices along a data-dependent dim of gather's data read the real
  // entries (the sub-box of the bound layout) where the model's indices are
  // in range; negative ones are wrapped by the count (gpu_bounded_lowering.h).
  if (op == "gather") return "";
  if (op == "gather_nd") {
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
  if (op == "expand") {
    // Broadcasting a 1 to a data-dependent dim repeats it; a data-dependent
    // dim the operand has is copied through only when it is not broadcast.
    const Shape &in = n.input(0)->shape(), &out = n.output(0)->shape();
    for (int d : size_dims(n.input(0)->type(), sizes))
      if (out[out.size() - in.size() + d] != in[d]) return "it broadcasts along a data-dependent dim";
    return "";
  }
  if (op == "split") {
    const int axis = norm(n.attrs().get_int("axis", 0), n.input(0)->shape().size());
    for (int d : size_dims(n.input(0)->type(), sizes))
      if (d == axis) return "it splits along a data-dependent dim";
    return "";
  }
  if (op == "concat") return "";  // packed along such a dim (gpu_bounded_lowering.h)
  if (op == "slice" && n.attrs().has(kSizeSymbolAttr)) {
    // The clamped dim keeps its entries where start and step are fixed and
    // the end is not negative: the slice at the bound, its count computed.
    const std::vector<int64_t> st = n.attrs().get_ints("starts"), en = n.attrs().get_ints("ends"),
                               sp = n.attrs().get_ints("steps");
    for (int d : size_dims(n.input(0)->type(), sizes)) {
      if (n.output(0)->shape()[d] == n.input(0)->shape()[d]) continue;
      if (is_symbolic_dim(st.at(d)) || st.at(d) < 0 || is_symbolic_dim(sp.at(d)) || sp.at(d) < 1 ||
          (!is_symbolic_dim(en.at(d)) && en.at(d) < 0))
        return "it clamps a data-dependent dim with a negative or run-time start, a negative end or a step below 1 "
               "(only x[a:b:c] with a >= 0, b >= 0, c >= 1 keeps the real entries a prefix)";
    }
    return "";
  }
  if (op == "slice") {
    const std::vector<int64_t> st = n.attrs().get_ints("starts"), sp = n.attrs().get_ints("steps");
    for (int d : size_dims(n.input(0)->type(), sizes))
      if (st.at(d) != 0 || sp.at(d) != 1 || n.output(0)->shape()[d] != n.input(0)->shape()[d])
        return "it slices a data-dependent dim";
    return "";
  }
  if (op == "reduce_sum" || op == "reduce_max" || op == "reduce_min" || op == "reduce_prod") return "";  // masked
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
  if (op == "topk") return "";  // the padding along its axis masked to lose every comparison
  if (op == "non_max_suppression") {
    // The boxes' count becomes the bounded kernel's valid count; batches and
    // classes must stay fixed.
    if (!size_dims(n.input(0)->type(), sizes).empty() && size_dims(n.input(0)->type(), sizes) != std::vector<int>{1})
      return "its batch dim is data-dependent";
    if (n.input(1) && !size_dims(n.input(1)->type(), sizes).empty() &&
        size_dims(n.input(1)->type(), sizes) != std::vector<int>{2})
      return "its batch or class dim is data-dependent";
    return "";
  }
  if (is_data_dependent_node(n)) return "its own size would be decided by padded operands";
  return fmt::format("kiln has no rule yet for {} over a data-dependent dim", op);
}

// Refuses, naming it, each node of `g` that reads a data-dependent dim in a
// way the bounded graph cannot keep exact; a top-level if deciding sizes is
// inlined, so its branches' nodes are checked as top-level ones.
void check_exact(const Graph& g, const SizeSymbols& sizes, const std::string& where, bool top) {
  for (const auto& n : g.nodes()) {
    const bool inlined_if = top && n->op() == "if" && is_data_dependent_node(*n);
    if (inlined_if)
      for (int r = 0; r < n->num_regions(); ++r) check_exact(*n->region(r), sizes, where, false);
    bool reads_size = false;
    for (const Value* v : n->inputs()) reads_size = reads_size || (v && !size_dims(v->type(), sizes).empty());
    if (!reads_size) continue;
    std::string why = inlined_if         ? ""
                      : n->num_regions() ? "control flow over a data-dependent size is not supported"
                                         : why_not_exact(*n, sizes);
    if (!why.empty())
      unsupported(
          "{}{} reads a value whose size is decided at run time ({}): a GPU plan computes at the upper bound and "
          "trims the outputs, which is exact only for ops that keep each entry along such a dim to itself, and {} "
          "(compile it for --target cpu: the runtime's CPU path runs it stage by stage)",
          where, n->describe(), fmt::join(shape_symbols(n->inputs()[0] ? n->inputs()[0]->shape() : Shape{}), ", "),
          why);
  }
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
        "implemented yet (the bounds would be polynomials of the profile's symbols, which the bounded kernels, the "
        "packed concat and the trim do not take; compile it for --target cpu)",
        where, fmt::join(profile_syms, ", "));
  // Sizes are decided at the top level or directly in a branch of a
  // top-level if (which is inlined: gpu_bounded_lowering.h); a loop's body
  // would need a host read per iteration.
  std::set<const Node*> allowed;
  for (const auto& n : g.nodes()) {
    allowed.insert(n.get());
    if (n->op() == "if" && is_data_dependent_node(*n))
      for (int r = 0; r < n->num_regions(); ++r)
        for (const auto& k : n->region(r)->nodes()) allowed.insert(k.get());
  }
  for (const auto& [sym, node] : deciders)
    if (!allowed.count(node))
      unsupported(
          "{}{} decides the size {} inside a region (a loop's or scan's body, or a region below a top-level if's branches): a GPU plan "
          "runs as one CUDA Graph with no host read, so it holds sizes decided at the top level or in a top-level "
          "if's branches only (a plan for --target cpu runs it)",
          where, node->describe(), sym);
  for (const auto& [sym, node] : deciders)
    if (node->op() != "nonzero" && node->op() != "non_max_suppression" && node->op() != "topk" &&
        node->op() != "slice" && node->op() != "if")
      unsupported(
          "{}{} decides the size {} at run time: GPU plans hold nonzero, non_max_suppression, topk, clamped "
          "slice and if sizes only (a plan for --target cpu runs it)",
          where, node->describe(), sym);
  check_exact(g, sizes, where, true);
  SymbolBindings bounds;
  for (const auto& [sym, node] : deciders) {
    const SymbolDecl* decl = g.find_symbol(sym);
    KILN_CHECK(decl, "size symbol {} is not declared", sym);
    bounds[sym] = decl->max;
  }
  std::unique_ptr<Graph> c = g.clone();
  lower_at_bounds(*c, bounds, deciders, where, out);
  return c;
}

}  // namespace kiln
