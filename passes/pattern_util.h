// Small helpers for passes that match subgraphs by hand (recognize-patterns):
// who produces a value, single-use checks, constants read as numbers with a
// tolerance, building nodes with inferred types, and erasing what a rewrite
// left dead.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace kiln::patterns {

// The node producing `v` when it is a node result with op `op`; nullptr for
// inputs, constants and other ops.
Node* producer(Value* v, std::string_view op);

// `v` has exactly one use (one operand slot of one node) and is not a graph output.
bool single_use(const Graph& g, const Value* v);

// The sole user of `v` when single_use(v), with op `op`; nullptr otherwise.
Node* sole_user(const Graph& g, const Value* v, std::string_view op);

// The operand of a two-operand node other than `v` (nullptr when `v` is not
// an operand, or is both).
Value* other_operand(const Node* n, const Value* v);

// The value of a constant whose elements are all equal (a splat or a
// one-element tensor, any dtype; at most 1<<20 elements looked at);
// nullopt for everything else, and for constants parsed without data.
std::optional<double> uniform_value(const Value* v);

// `got` equals `want` up to the rounding of dtype `dt`: relative 1e-4 for
// f32/f64 (exporters print 1.4142 or 0.7071), 2e-3 for f16, 1e-2 for bf16.
bool near(double got, double want, DType dt);

// `v` is a constant whose elements are all near `want` (see near()).
bool is_const_near(const Value* v, double want);

// When `n` is mul/div of `x` by a uniform constant that does not broadcast
// `x` to a bigger shape, the factor it multiplies `x` by (1/c for div(x, c));
// `x` is set to the other operand. nullopt otherwise.
std::optional<double> scalar_factor(const Node* n, Value** x);

// A cast to the dtype its operand already has (an exporter's no-op).
bool is_identity_cast(const Node* n);

// Adds a node before `before` with result types from the op registry
// (throws kiln::Error/Unsupported when inference rejects it).
Node* make_node(Graph& g, const std::string& op, std::vector<Value*> inputs, AttrMap attrs, std::string name,
                Node* before, int num_outputs = 1);

// Erases the nodes of `nodes` whose results nobody uses, repeatedly, so a
// dead matched chain goes whatever the order given.
void erase_dead(Graph& g, const std::vector<Node*>& nodes);

// The ONNX names of `nodes` in graph order joined by "+" (empty names and
// repeats skipped), for the node that replaces them.
std::string joined_names(const Graph& g, const std::vector<Node*>& nodes);

// True when node `a` comes before node `b` in g's order (both in g).
bool comes_before(const Graph& g, const Node* a, const Node* b);

}  // namespace kiln::patterns
