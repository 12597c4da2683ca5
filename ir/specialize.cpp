#include "ir/specialize.h"

#include <algorithm>

#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/short_name.h"
#include "ir/verifier.h"

namespace kiln {

namespace {

Shape substitute_shape(const Shape& s, const SymbolBindings& b) {
  Shape r;
  for (int64_t d : s) r.push_back(substitute_dim(d, b));
  return r;
}

TensorType eval_type(const TensorType& t, const SymbolBindings& b) {
  if (!has_symbolic_dims(t.shape)) return t;
  return TensorType(t.dtype, substitute_shape(t.shape, b), t.layout);
}

void eval_attrs(AttrMap& attrs, const SymbolBindings& b) {
  std::vector<std::pair<std::string, Attribute>> changed;
  for (const auto& [name, a] : attrs) {
    if (const auto* v = std::get_if<int64_t>(&a); v && is_symbolic_dim(*v)) {
      changed.emplace_back(name, substitute_dim(*v, b));
    } else if (const auto* l = std::get_if<std::vector<int64_t>>(&a); l && has_symbolic_dims(*l)) {
      changed.emplace_back(name, substitute_shape(*l, b));
    }
  }
  for (auto& [name, a] : changed) attrs.set(name, std::move(a));
}

}  // namespace

void substitute_symbols(Graph& g, const SymbolBindings& b) {
  for (Value* v : g.inputs()) v->set_type(eval_type(v->type(), b));
  for (Value* c : g.constants()) {
    if (!c->has_data() || c->dtype() != DType::I64) continue;
    const Tensor& t = c->data();
    const int64_t* p = t.data<int64_t>();
    if (std::none_of(p, p + t.numel(), [](int64_t x) { return x < 0 && is_symbolic_dim(x); })) continue;
    Tensor s = t.clone();
    for (int64_t i = 0; i < s.numel(); ++i) s.data<int64_t>()[i] = substitute_dim(p[i], b);
    c->set_data(std::move(s));
  }
  for (const auto& n : g.nodes()) {
    for (int i = 0; i < n->num_outputs(); ++i) n->output(i)->set_type(eval_type(n->output(i)->type(), b));
    eval_attrs(n->attrs(), b);
    for (const auto& r : n->regions()) substitute_symbols(*r, b);
  }
}

SymbolBindings bind_symbols(const Graph& g, const std::vector<std::pair<std::string, Shape>>& shapes,
                            const std::string& what) {
  SymbolBindings b;
  std::map<std::string, std::string> from;  // symbol -> the input that gave it
  auto shape_of = [&](const Value* in) -> const Shape& {
    for (const auto& [name, s] : shapes)
      if (name == in->name()) return s;
    fail("{}: input \"{}\" ({}) is not given", what, short_name(in->name()), in->type().str());
  };
  // Pass 1: dims that are one symbol give its value; fixed dims must match.
  for (const Value* in : g.inputs()) {
    const Shape& decl = in->shape();
    const Shape& have = shape_of(in);
    std::string ctx = fmt::format("{}: input \"{}\"", what, short_name(in->name()));
    if (have.size() != decl.size())
      fail("{} has shape [{}] but the model declares rank {} ({})", ctx, dims_str(have), decl.size(), in->type().str());
    for (size_t i = 0; i < decl.size(); ++i) {
      if (!is_symbolic_dim(decl[i])) {
        if (have[i] != decl[i])
          fail("{} has shape [{}] but the model fixes dim {} at {}", ctx, dims_str(have), i, decl[i]);
        continue;
      }
      DimPoly p = dim_poly(decl[i]);
      if (p.size() != 1 || p.begin()->first.size() != 1 || p.begin()->second != 1) continue;  // an expression
      const std::string& sym = p.begin()->first[0];
      const SymbolDecl* d = g.find_symbol(sym);
      if (!d) fail("{}: dim {} is the symbol {}, which the graph does not declare", ctx, i, sym);
      if (have[i] < d->min || have[i] > d->max)
        fail("{} has shape [{}]: dim {} ({}) is {}, outside its range [{}, {}]", ctx, dims_str(have), i, sym, have[i],
             d->min, d->max);
      auto [it, fresh] = b.emplace(sym, have[i]);
      if (!fresh && it->second != have[i])
        fail("{} has shape [{}]: dim {} ({}) is {} but input \"{}\" gives {} = {}", ctx, dims_str(have), i, sym,
             have[i], short_name(from[sym]), sym, it->second);
      from.emplace(sym, in->name());
    }
  }
  // Data-dependent symbols (ir/data_dependent.h) get their values when the
  // nodes that decide them run, never from the inputs.
  const auto by_data = data_dependent_symbols(g);
  for (const SymbolDecl& d : g.symbols())
    if (!b.count(d.name) && !by_data.count(d.name))
      fail("{}: symbol {} is not the whole of any input dim, so the inputs do not give its value", what, d.name);
  // Pass 2: dims that are expressions of the symbols must agree.
  for (const Value* in : g.inputs()) {
    const Shape& decl = in->shape();
    const Shape& have = shape_of(in);
    for (size_t i = 0; i < decl.size(); ++i)
      if (is_symbolic_dim(decl[i]) && eval_dim(decl[i], b) != have[i])
        fail("{}: input \"{}\" has shape [{}] but dim {} is {} = {}", what, short_name(in->name()), dims_str(have), i,
             dim_str(decl[i]), eval_dim(decl[i], b));
  }
  return b;
}

std::unique_ptr<Graph> specialize_graph(const Graph& g, const SymbolBindings& b, const OpRegistry& registry) {
  // Every symbol must have a value, but a data-dependent one may stay (its
  // node binds it at run time): the copy keeps its declaration.
  const auto by_data = data_dependent_symbols(g);
  std::vector<SymbolDecl> kept;
  for (const SymbolDecl& d : g.symbols()) {
    if (b.count(d.name)) continue;
    if (!by_data.count(d.name)) fail("symbol '{}' has no value", d.name);
    kept.push_back(d);
  }
  std::unique_ptr<Graph> s = g.clone();
  substitute_symbols(*s, b);
  s->set_symbols(std::move(kept));
  verify_graph(*s, registry);
  return s;
}

}  // namespace kiln
