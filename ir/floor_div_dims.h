// Floor division of symbolic dims: the output size of a strided convolution
// or pooling window over a symbolic H or W, floor((H + pads - kernel) /
// stride) + 1 (ops/nn_shape.h), is not a polynomial of H. kiln writes it
// as a polynomial over a *derived symbol*: an atom floor((times * base +
// plus) / div) of one named symbol, with 0 < times < div and 0 <= plus <
// div, whose name spells it (`height.plus1.div2` is floor((height + 1) /
// 2)), so it is an ordinary monomial name everywhere a DimPoly goes (the
// text form, the plan's polynomials) and its value follows from the base
// symbol's. It is never an input's own symbol: dim_symbols and the binding
// code see its base, and eval_dim / symbol_value compute it.
//
// Divisions that are exact for every value of the symbols stay plain
// polynomials (floor((2*h + 1) / 2) is h); floor of (one derived symbol +
// a constant) by a stride folds into one derived symbol of the base (a
// chain of strided convs and pools over H stays one atom); anything else is
// not expressible (nullopt) and the caller refuses it by name.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ir/symbolic_dim.h"

namespace kiln {

struct DerivedSymbol {
  std::string base;
  int64_t times = 1, plus = 0, div = 1;
};

// The derived symbol a monomial name spells, or nullopt for a plain symbol.
std::optional<DerivedSymbol> parse_derived_symbol(std::string_view name);
std::string derived_symbol_name(const DerivedSymbol& d);

// floor(a / s) as a dim (s >= 1), or nullopt when it is not expressible.
std::optional<int64_t> dim_floor_div(int64_t a, int64_t s);
// ceil(a / s), as floor((a + s - 1) / s).
std::optional<int64_t> dim_ceil_div(int64_t a, int64_t s);
// floor(a * s) for a positive finite scale s (a resize's output size, ONNX's
// floor(in * scale)), exact: s is a dyadic rational m / 2^k (every float and
// double is), so this is floor(m * a / 2^k) (a resize by 1.5 of H: H +
// H.div2). nullopt when that is not expressible (dim_floor_div) or 2^k
// passes 2^30.
std::optional<int64_t> dim_floor_scale(int64_t a, double s);

// The value of a monomial name under `b`: a bound symbol's, or a derived
// symbol's computed from its bound base; nullopt when neither.
std::optional<int64_t> symbol_value(std::string_view name, const SymbolBindings& b);
// The symbol a monomial name's value comes from: its base when derived.
std::string base_symbol(std::string_view name);

}  // namespace kiln
