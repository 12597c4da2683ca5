#include "codegen/emitters/attention/attention_dims.h"

#include <fmt/format.h>

#include <climits>

#include "ir/error.h"

namespace kiln::codegen {

namespace {

// Whether every coefficient of d's polynomial is positive: then d grows with
// each symbol, and its values over the ranges lie between the ends.
bool grows_with_symbols(int64_t d) {
  if (!is_symbolic_dim(d)) return true;
  for (const auto& [mono, coeff] : dim_poly(d))
    if (coeff < 0) return false;
  return true;
}

}  // namespace

AttentionDims AttentionDims::of(const TensorType& q, const TensorType& k, const TensorType& v, const Shape& mask,
                                const SymbolBindings& smallest, const SymbolBindings& largest,
                                const std::string& k_capacity, const std::string& v_capacity) {
  AttentionDims a;
  a.B = q.shape[0];
  a.H = q.shape[1];
  a.Sq = q.shape[2];
  a.D = q.shape[3];
  a.Sk = k.shape[2];
  a.Dv = v.shape[3];
  a.k_rows = a.v_rows = a.Sk;
  a.syms = KernelSymbols({q.shape, k.shape, v.shape, mask});
  a.generic = !a.syms.empty();
  if (!a.generic) return a;
  // A cache's capacity: any length the caller's buffer has (the runtime
  // checks it holds the present); a row offset is 64-bit in the kernels.
  SymbolBindings lo = smallest, hi = largest;
  Shape capacities;
  for (const std::string* c : {&k_capacity, &v_capacity}) {
    if (c->empty()) continue;
    capacities.push_back(symbol_dim(*c));
    lo[*c] = 1;
    hi[*c] = INT32_MAX;
  }
  if (!capacities.empty()) {
    a.syms = KernelSymbols({q.shape, k.shape, v.shape, mask, capacities});
    if (!k_capacity.empty()) a.k_rows = symbol_dim(k_capacity);
    if (!v_capacity.empty()) a.v_rows = symbol_dim(v_capacity);
  }
  for (int64_t d : {a.H, k.shape[1], a.D, a.Dv})
    if (is_symbolic_dim(d))
      unsupported("codegen: attention: a shape-generic kernel takes static heads and head dims (q {}, v {})", q.str(),
                  v.str());
  for (int64_t d : {a.B, a.Sq, a.Sk})
    if (!grows_with_symbols(d))
      unsupported(
          "codegen: attention: dim {} does not grow with its symbols (a shape-generic kernel plans its "
          "tiles and workspace at the largest shapes)",
          dim_str(d));
  for (const std::string& s : a.syms.names())
    if (!hi.count(s) || !lo.count(s))
      unsupported("codegen: attention: symbol {} has no declared range (a shape-generic kernel needs one)", s);
  a.smallest = std::move(lo);
  a.largest = std::move(hi);
  return a;
}

int64_t AttentionDims::max(int64_t d) const { return is_symbolic_dim(d) ? eval_dim(d, largest) : d; }
int64_t AttentionDims::min(int64_t d) const { return is_symbolic_dim(d) ? eval_dim(d, smallest) : d; }

std::string AttentionDims::text(int64_t d) const {
  if (!generic) return std::to_string(d);
  if (is_symbolic_dim(d)) {
    if (d == Sq) return "sq_";
    if (d == Sk) return "sk_";
    if (d == B) return "b_";
  }
  return syms.lit(d);
}

std::string AttentionDims::prologue(const std::string& indent) const {
  return fmt::format(
      "{0}// this launch's sizes (kiln_syms): batch {1}, queries {2}, keys {3}\n"
      "{0}const long long b_ = {4}, sq_ = {5}, sk_ = {6};\n{0}(void)b_;\n",
      indent, dim_str(B), dim_str(Sq), dim_str(Sk), syms.lit(B), syms.lit(Sq), syms.lit(Sk));
}

void symbol_ranges_of(const Node& n, SymbolBindings& smallest, SymbolBindings& largest) {
  const Graph* g = n.owner();
  if (!g) return;
  for (const SymbolDecl& s : g->symbols()) {
    smallest[s.name] = s.min;
    largest[s.name] = s.max;
  }
}

}  // namespace kiln::codegen
