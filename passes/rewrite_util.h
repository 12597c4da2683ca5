// Small helpers shared by the rewriting passes (simplify, fold-batchnorm):
// reading constant operands, checking a rewrite's types with the op's own
// inference before committing it, replacing a node's result while keeping
// graph output names, and making fresh value names.
#pragma once
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"

namespace kiln::rewrite {

// The data of `v` when it is a constant with data loaded; nullptr otherwise
// (results, inputs, constants parsed by reference).
const Tensor* constant_data(const Value* v);

// True when `v` is a constant whose every element equals `x` (+0 and -0 both
// equal 0). Empty constants count as no.
bool is_splat_of(const Value* v, double x);

// The result types the op's inference gives for these operands and
// attributes, or nullopt when inference rejects them.
std::optional<std::vector<TensorType>> infer(const std::string& op, const std::vector<Value*>& inputs,
                                             const AttrMap& attrs, int num_outputs);
// True when inference gives exactly `want` (dtype and shape) for a
// would-be node: the check every rewrite makes before replacing anything.
bool infers_to(const std::string& op, const std::vector<Value*>& inputs, const AttrMap& attrs, const TensorType& want);

// Whether the single result `from` of a node may be replaced by `to`
// everywhere: same type (layout included), and when `from` is a graph output,
// `to` must be a node result that is not an output already (it then takes the
// output's name, so callers binding outputs by name see no change).
bool can_replace(const Graph& g, const Value* from, const Value* to);
// Replaces every use of `n`'s only result by `to`, erases `n` and, when the
// result was a graph output, gives its name to `to`. Call can_replace first.
void replace_node_result(Graph& g, Node* n, Value* to);

// Erases `n` when none of its results is used or returned; returns whether it did.
bool erase_if_dead(Graph& g, Node* n);

// Names already taken in a graph, to make new constant/value names unique.
class NameSet {
 public:
  explicit NameSet(const Graph& g);
  // `base`, or `base.1`, `base.2`, ... whichever is free; reserves it.
  std::string fresh(const std::string& base);

 private:
  std::unordered_set<std::string> used_;
};

// "a+b" for node names, skipping empty parts.
std::string join_names(const std::string& a, const std::string& b);

}  // namespace kiln::rewrite
