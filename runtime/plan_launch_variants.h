// Launch variants of a GPU plan with shape profiles (docs/plan_format.md
// section `launch variants`, docs/dynamic_shapes.md "Specialised launches"):
// a node's shape-generic launches run for every shape of the profiles; where
// the compiler found that it pays, the plan also holds other launches for the
// same node, each with the shapes it is for -- kernels compiled for exactly
// one profile's opt shape (static sizes, the tiles, split-K and pipeline a
// static plan of that shape takes), or generic kernels with another GEMM tile
// for a range of rows (a bucket). The runtime and plan-on-sim pick, per shape,
// the first variant of each node whose conditions hold, else the generic
// launches (launches_at), and the per-shape CUDA Graph captures that list.
// Kept apart from the `launches` section: a plan without variants has no
// such section and its bytes are what they were.
#pragma once
#include <string>
#include <vector>

#include "ir/symbolic_dim.h"
#include "ir/graph.h"
#include "runtime/plan_format.h"

namespace kiln::plan {

// The symbols' values at profile `profile`'s opt shape (graph `g`'s inputs:
// the profile's opt dims, the static inputs' own shapes).
SymbolBindings opt_shape_symbols(const ShapeProfiles& s, size_t profile, const Graph& g);

bool condition_holds(const ShapeCondition& c, const SymbolBindings& b);
// "batch=1", "16 <= batch*seq <= 64".
std::string condition_text(const ShapeCondition& c);
// "the opt shape of profile 0 (batch=1, seq=128)", "rows 1..64 (batch*seq)".
std::string variant_text(const LaunchVariant& v);

// One launch of the list a shape runs: the step, its generic launch (its grid
// and kiln_syms follow the symbols; null for a static launch), and the
// variant it comes from (-1: the plan's own launch list).
struct ActiveStep {
  const Step* step = nullptr;
  const GenericLaunch* generic = nullptr;
  int variant = -1;
};
// The top-level launch list at shape `b`: each node's steps, or the first of
// its variants whose conditions all hold at `b`.
std::vector<ActiveStep> launches_at(const Plan& p, const SymbolBindings& b);

}  // namespace kiln::plan
