// Data-dependent result sizes (docs/dynamic_shapes.md "Data-dependent
// sizes"): nonzero, non_max_suppression and topk with a k operand produce a
// result whose size only the data decides. Such a node names, in its
// `size_symbol` attribute, a symbol of the graph (declared with the range
// [0, upper bound]) that its result type uses; the symbol gets its value when
// the node has run, and every consumer's type is a polynomial in it as for a
// symbol an input gives. Unlike those, a data-dependent symbol is never read
// off the inputs: bind_symbols leaves it unbound and specialize_graph keeps it.
#pragma once
#include <map>
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace kiln {

// The attribute of a data-dependent node that names its size symbol.
inline constexpr const char* kSizeSymbolAttr = "size_symbol";

// An `if` whose branches hold data-dependent nodes is one too (a detection
// model's "no boxes left?" guard around NonMaxSuppression): its condition is
// known when it runs, and the taken branch runs as a graph of its own, its
// nodes naming symbols of the top-level graph. Its own `size_symbol`, if
// any, is the one result dim its branches disagree on (the taken branch's).

// Each data-dependent symbol of `g` (top-level nodes and the branches of
// data-dependent ifs), with the node whose result size it is. Throws
// kiln::Error when two nodes name one symbol.
std::map<std::string, const Node*, std::less<>> data_dependent_symbols(const Graph& g);

// Whether some node of `g` has a data-dependent result size.
bool has_data_dependent_sizes(const Graph& g);

// A `loop` or `scan` whose body holds data-dependent nodes is one too (a body
// that selects with NonZero and reduces what it selected): each iteration runs
// its body as a graph of its own and binds the body's size symbols anew; the
// node's own results keep static types. Regions nested in such regions may
// decide sizes too (an if in an if's branch), at any depth.

// Whether `node` names a size symbol (its result size is decided at run time),
// or is an `if` with such a node in a branch or a `loop`/`scan` with one in its
// body (at any depth).
bool is_data_dependent_node(const Node& node);

}  // namespace kiln
