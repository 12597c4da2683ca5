// Specialisation of a graph with symbolic dims (docs/dynamic_shapes.md): the
// symbols take their values from the shapes of the actual inputs, and a copy
// of the graph with every symbolic dim replaced by its value is a static
// graph that every pass, backend and codegen path handles as today.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/op_registry.h"
#include "ir/symbolic_dim.h"

namespace kiln {

// The symbol values the inputs' shapes give (`shapes`: one per graph input,
// by name). Throws kiln::Error naming `what`, the input and the dim when an
// input is missing or has another rank, a fixed dim differs, two inputs give
// one symbol different values, a value is outside the symbol's range, or a
// symbol cannot be read off any input (it appears only inside expressions
// such as 2*n that do not give its value). Data-dependent symbols
// (ir/data_dependent.h) are left unbound: a run binds them.
SymbolBindings bind_symbols(const Graph& g, const std::vector<std::pair<std::string, Shape>>& shapes,
                            const std::string& what);

// A copy of `g` with the symbols replaced by their values in `b`: the types
// of all values (regions included), integer attributes, and i64 constants
// holding symbolic dims (shape values). The copy declares no symbols and is
// verified against `registry`, so every node's inference is re-run on the
// static shapes and must agree. Only data-dependent symbols may lack a value
// in `b`: they stay in the copy (types such as [2,n] with n their nodes'
// count), declared as in `g`; any other symbol without a value is an error.
std::unique_ptr<Graph> specialize_graph(const Graph& g, const SymbolBindings& b, const OpRegistry& registry);

// specialize_graph's substitution alone, in place: types (regions
// included), integer attributes and i64 constants holding symbolic dims take
// their values in `b` (symbols without one stay); nothing is verified, the
// symbols stay declared. For a rewrite that must see each node with its
// substituted types before the graph is consistent again
// (compiler/gpu_bounded_lowering.h).
void substitute_symbols(Graph& g, const SymbolBindings& b);

}  // namespace kiln
