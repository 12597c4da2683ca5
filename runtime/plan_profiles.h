// Shape profiles of a plan (docs/dynamic_shapes.md, docs/plan_format.md
// section `profiles`): a plan compiled with --min-shapes/--opt-shapes/
// --max-shapes keeps the model's symbolic dims in its graph (the graph
// text's `symbols(batch in [1, 8])` table) and records, per profile, the
// smallest, the preferred and the largest shape of each dynamic input, as
// TensorRT's optimization profiles do. Its memory plan is laid out for the
// largest shapes; each result's size is also recorded as a polynomial of the
// symbols, so a caller sees what a run at a smaller shape uses.
//
// Kept apart from plan_format.h's fixed sections: a static plan has no
// `profiles` section and its bytes are what they were before profiles existed.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/symbolic_dim.h"

namespace kiln::plan {

struct Plan;

// One dynamic input's range in one profile; static dims equal in all three.
struct InputProfile {
  std::string input;
  Shape min, opt, max;
  bool operator==(const InputProfile&) const = default;
};

struct Profile {
  std::vector<InputProfile> inputs;  // the graph's inputs with a symbolic dim, in graph order
  bool operator==(const Profile&) const = default;
};

struct ShapeProfiles {
  std::vector<Profile> profiles;  // empty: a static plan (no `profiles` section)
  // Per `memory` entry, in its order: the result's bytes as a polynomial of
  // the symbols (the entry's `size` is its value at the largest shapes).
  std::vector<DimPoly> value_bytes;
  bool empty() const { return profiles.empty(); }
  bool operator==(const ShapeProfiles&) const = default;
};

// Checks the profiles against the plan's graph `g` (called when the graph is
// loaded): a graph with symbols has profiles and one without has none; every
// profile names each input with a symbolic dim once, with its rank, its fixed
// dims, min <= opt <= max, and symbol values inside the graph's declared
// ranges; one size polynomial per memory entry, over declared symbols.
// Throws kiln::Error naming `what`, the profile, the input and the dim.
void check_profiles(const Plan& p, const Graph& g, std::string_view what);

// "[1x3x16x16 .. 16x3x16x16]"-style text of one input's range.
std::string range_str(const InputProfile& ip);

// Which profile holds every shape in `shapes` (by input name; inputs not
// listed are not checked); -1 when none does, with `why` naming the first
// input and dim outside each profile ("input \"x\": dim 0 is 20, outside
// profile 0's range [1, 16]").
int matching_profile(const ShapeProfiles& s, const std::vector<std::pair<std::string, Shape>>& shapes,
                     std::string* why);

}  // namespace kiln::plan
