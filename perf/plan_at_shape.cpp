#include "perf/plan_at_shape.h"

#include <algorithm>
#include <map>

#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/plan_generic_launches.h"
#include "runtime/plan_launch_variants.h"

namespace kiln::perf {

PlanAtShape plan_at_shape(const plan::Plan& p, const Graph& g, const SymbolBindings& at) {
  PlanAtShape r;
  r.at = at;
  r.graph = specialize_graph(g, at, op_registry());
  r.plan.meta = p.meta;
  r.plan.kernels = p.kernels;
  r.plan.weights = p.weights;
  r.plan.memory = p.memory;
  // Results by (arena offset, bytes at the largest shapes): their bytes at `at`.
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> result_bytes;
  for (size_t i = 0; i < p.memory.values.size() && i < p.shapes.value_bytes.size(); ++i) {
    const plan::MemoryEntry& e = p.memory.values[i];
    result_bytes.emplace(std::make_pair(uint64_t(e.offset), uint64_t(e.size)),
                         uint64_t(plan::eval_poly(p.shapes.value_bytes[i], at)));
  }
  auto resize = [&](plan::BufferRef b) {
    const uint64_t before = b.nbytes;
    if (b.kind == plan::BufferKind::Input || b.kind == plan::BufferKind::Output) {
      const auto& vals = b.kind == plan::BufferKind::Input ? r.graph->inputs() : r.graph->outputs();
      if (b.index < vals.size()) {
        const uint64_t total = vals[b.index]->type().nbytes();
        b.nbytes = std::min<uint64_t>(b.nbytes, total > b.offset ? total - b.offset : 0);
      }
    } else if (b.kind == plan::BufferKind::Arena) {
      auto it = result_bytes.find({b.offset, b.nbytes});
      if (it != result_bytes.end()) b.nbytes = std::min<uint64_t>(b.nbytes, it->second);
    }
    if (before && b.elements > 0 && b.nbytes != before)
      b.elements = static_cast<int64_t>(b.nbytes / std::max<uint64_t>(before / uint64_t(b.elements), 1));
    return b;
  };
  for (const plan::ActiveStep& a : plan::launches_at(p, at)) {
    plan::Step s = *a.step;
    if (a.generic) {
      s.grid = {plan::eval_grid_axis(a.generic->grid[0], at), plan::eval_grid_axis(a.generic->grid[1], at),
                plan::eval_grid_axis(a.generic->grid[2], at)};
      if (uint64_t(s.grid.x) * s.grid.y * s.grid.z == 0) continue;  // nothing to launch at this shape
    }
    if (a.variant >= 0) ++r.variant_launches;
    for (plan::BufferRef& b : s.args) b = resize(b);
    r.plan.steps.push_back(std::move(s));
  }
  return r;
}

}  // namespace kiln::perf
