// The on-demand body evaluator (docs/fusion.md: "evaluated on demand"):
// device code computing any value of a fused body made of pointwise and
// injective ops at a given element, recursively from the body's inputs.
//
// Each body value computed by a node becomes one lambda at the top of the
// kernel body,
//   const auto kiln_evN = [&](long long i) -> S { ... };
// returning element i (flat, row-major over the value's own shape) in the
// value's storage type S. A pointwise node reads its operands at the
// broadcast offsets of i's coordinates and applies its Expr (emit_expr, the
// result rounded to its dtype exactly where the reference stores it); an
// injective node runs its index map (codegen/emitters/data_movement/emit_injective.h) and returns
// the chosen operand's element, or the fill; a range computes start + i * delta. Body inputs and constants are
// kernel buffers read directly. Nothing is cached: a value read twice is
// computed twice (fused bodies are cheap; the fuser keeps expensive values
// as results).
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/core/size_expr.h"
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace kiln::codegen {

// Whether the evaluator can compute `n`'s results: a pointwise op with an
// Expr, identity, an op with an injective index map (no body), or a range
// (is_evaluable_range).
bool body_node_evaluable(const Node& n, const OpRegistry& ops);

// A range in f32, f64 or an integer type: element i is start + i * delta,
// computed from the index (a decoder's positions `range(past, past + seq)`
// and its mask's `range(past + seq)` join the kernels that read them).
bool is_evaluable_range(const Node& n);

class BodyEvaluator {
 public:
  // `buffers`: the kernel buffer (parameter name) holding each body input
  // and each constant the body reads. A shape-generic kernel (symbolic sizes,
  // codegen/core/size_expr.h) passes its `syms`, with which the evaluator
  // spells symbolic extents and strides, and opens an InjectiveSymbolsScope
  // (emit_injective.h) for the index maps; `scalars`: body values that are
  // scalar shape values of a symbolic size (a decoder's `past`), computed
  // from `ks` instead of read from their buffers (whose bytes in a plan are
  // not the value).
  BodyEvaluator(const Graph& body, const OpRegistry& ops, std::map<const Value*, std::string> buffers,
                const KernelSymbols* syms = nullptr, std::map<const Value*, int64_t> scalars = {});

  // Body input `v` is not read from a buffer but computed by `lambda`, a
  // `[&](long long i) -> S` the caller defines before definitions() (a
  // split-K GEMM's row-normalization kernel sums the partial results there:
  // codegen/emitters/gemm_conv/emit_gemm_row_norm.h).
  void computed_by(const Value* v, std::string lambda) { callers_[v] = std::move(lambda); }

  // An expression of v's storage type: v's element at flat index `idx` (an
  // integer expression, within v's shape). Defines the lambdas it needs.
  // Throws kiln::Unsupported for a node the evaluator cannot compute.
  std::string value(const Value* v, const std::string& idx);

  // The lambda definitions value() needed so far, in dependency order
  // (statements indented 2), to place before their first use.
  std::string definitions() const;

  // Every dtype of the values defined (for kernel_headers).
  std::vector<DType> dtypes() const;

 private:
  void define(const Value* v);

  const Graph& body_;
  const OpRegistry& ops_;
  std::map<const Value*, std::string> buffers_;
  std::optional<KernelSymbols> syms_;  // a copy: the evaluator may outlive the caller's
  std::map<const Value*, int64_t> scalars_;
  std::map<const Value*, std::string> lambdas_;  // value -> lambda name
  std::map<const Value*, std::string> callers_;  // computed_by: input -> the caller's lambda
  std::string defs_;
  std::set<DType> dtypes_;
  bool narrow_ = true;  // every value of the body has < 2^31 elements
};

}  // namespace kiln::codegen
