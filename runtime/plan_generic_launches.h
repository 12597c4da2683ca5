// Shape-generic launches of a GPU plan with shape profiles (docs/plan_format.md
// section `generic launches`, docs/dynamic_shapes.md): a kernel whose sizes
// depend on the symbols takes their values as its last parameter, a by-value
// `kiln_syms` (codegen/core/size_expr.h), and its grid is a function of them,
// evaluated by the runtime for each shape. Kept apart from the `launches`
// section: a static plan has no such section and its bytes are what they were.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/symbolic_dim.h"

namespace kiln::plan {

struct Plan;

// min(ceil(items / per_block) * multiplier, cap) blocks (cap 0: none).
struct GenericGridAxis {
  DimPoly items;
  uint64_t per_block = 1;
  uint32_t cap = 0;
  uint64_t multiplier = 1;
  bool operator==(const GenericGridAxis&) const = default;
};

// One step of the top-level launch list whose kernel is shape-generic.
struct GenericLaunch {
  uint32_t step = 0;
  std::vector<std::string> symbols;  // the kernel's `kiln_syms` slots, in order
  GenericGridAxis grid[3];
  bool operator==(const GenericLaunch&) const = default;
};

// The kernels' by-value parameter (codegen/core/size_expr.h kiln_syms).
inline constexpr int kMaxLaunchSymbols = 8;
struct LaunchSymbols {
  long long v[kMaxLaunchSymbols] = {};
};

// The value of a polynomial; throws kiln::Error naming an unbound symbol, on
// overflow and on a negative value.
int64_t eval_poly(const DimPoly& p, const SymbolBindings& b);
// One grid axis's blocks at `b`.
uint32_t eval_grid_axis(const GenericGridAxis& a, const SymbolBindings& b);
LaunchSymbols launch_symbols(const GenericLaunch& l, const SymbolBindings& b);

}  // namespace kiln::plan
