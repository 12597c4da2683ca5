// GPU plans whose result sizes the data decides (NonZero, NonMaxSuppression;
// docs/dynamic_shapes.md "Data-dependent sizes in GPU plans", section
// `bounded sizes` of docs/plan_format.md).
//
// Such a plan is compiled at the upper bounds: every data-dependent node in
// its bounded form (its result allocated at the bound, entries past the count
// zero, the count a second result written by its kernel on the device), every
// size symbol replaced by its bound, so the graph, the arena, the kernels and
// the launch list are static and the whole run is one CUDA Graph. The
// compiler admits only consumers that keep each entry along a data-dependent
// dim to itself (compiler/gpu_bounded_sizes.h), so the first `count` entries
// of every output are exactly the real result. Each count is an extra graph
// output after the user's; after the run the runtime reads them (8 bytes
// each), evaluates each output's real shape and trims the output to it.
//
// Kept apart from the fixed sections: a plan without data-dependent sizes
// has no `bounded sizes` section and its bytes are what they were.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/symbolic_dim.h"
#include "ir/tensor.h"

namespace kiln::plan {

struct Plan;

// One data-dependent size: its symbol, its bound (the range is [0, bound]),
// the graph output that holds the count (i64, one element) and the node that
// decides it (for messages).
struct SizeCount {
  std::string symbol;
  int64_t bound = 0;
  uint32_t output = 0;
  std::string node;
  bool operator==(const SizeCount&) const = default;
};

struct BoundedSizes {
  std::vector<SizeCount> counts;
  // Per user output (the graph's first outputs.size() outputs; the counts'
  // outputs follow them): each dim's real size as a polynomial of the count
  // symbols (a constant for a fixed dim).
  std::vector<std::vector<DimPoly>> outputs;
  bool empty() const { return counts.empty(); }
  bool operator==(const BoundedSizes&) const = default;
};

// Checks the section against the plan's graph `g`: one entry per user output
// with the graph output's rank, each dim at the bounds equal to the graph
// output's (static) dim, polynomials over the counts' symbols only, each count
// output an i64 of one element after the user outputs. Throws kiln::Error
// naming `what`.
void check_bounded_sizes(const BoundedSizes& s, const Graph& g, std::string_view what);

// The symbols' values from the counts the run wrote (`counts[i]` read from
// count i's output). Throws kiln::Error naming the node when a count lies
// outside [0, bound] (a kernel fault; the bounded kernels cannot write one).
SymbolBindings bind_counts(const BoundedSizes& s, const std::vector<int64_t>& counts);

// User output `i`'s real shape for `b`.
Shape real_shape(const BoundedSizes& s, size_t i, const SymbolBindings& b);

// The output's shape as the API reports it before a run: the dims that
// depend on a count are symbolic (the handle of their polynomial).
Shape symbolic_shape(const BoundedSizes& s, size_t i);

// Moves the entries of the sub-box `real` (each dim <= `bound`'s) of a
// row-major tensor laid out at `bound` to the front of `data`, row-major at
// `real`: every real entry's index shrinks or stays, so copying in index
// order never overwrites an entry not yet moved.
void trim_in_place(void* data, DType dtype, const Shape& bound, const Shape& real);

// A run's graph outputs (`outs`: the user's, then the counts) as the user's
// outputs trimmed to the counts; `bound` gets the counts' symbols when set.
std::vector<Tensor> trim_outputs(const BoundedSizes& s, std::vector<Tensor> outs, SymbolBindings* bound = nullptr);

}  // namespace kiln::plan
