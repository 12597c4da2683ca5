// plan-memory: plans the activation arena for the graph as it stands (the
// last pass of the pipeline, after fusion) and reports the figures; it does
// not change the graph. Codegen/runtime call plan_memory() themselves on the
// final graph; this pass makes the numbers visible in `kiln compile --stats`
// and `--json`, and validates the plan so a planner bug fails the compile.
//
// Counters:
//   activation_bytes_naive    sum of the byte sizes of all node results that are
//                             not graph outputs (views and unused results
//                             included): what one buffer per value would take
//   activation_bytes_planned  the arena size (offsets aligned to 256 bytes)
//   activation_bytes_live_peak  most arena bytes live at one node: the floor
//                             for any packing of the same buffers
//   in_place_reuses           results written over a dying operand
//   view_aliases              reshape/identity results sharing their operand's bytes
//   view_copies               reshape/identity results that need a copy
//   output_bytes              bytes of graph outputs (caller buffers, not in the arena)
#include "passes/memory_plan.h"
#include "passes/pass.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

class PlanMemory : public Pass {
 public:
  std::string_view name() const override { return "plan-memory"; }
  bool run(Graph& g, const PassOptions&, PassStats& stats) override {
    MemoryPlan plan = plan_memory(g);
    plan.validate();
    stats.count("activation_bytes_naive", plan.naive_bytes);
    stats.count("activation_bytes_planned", plan.arena_bytes);
    stats.count("activation_bytes_live_peak", plan.live_peak_bytes);
    stats.count("in_place_reuses", plan.in_place);
    stats.count("view_aliases", plan.views);
    stats.count("view_copies", plan.view_copies);
    int64_t out = 0;
    for (const ValuePlan& p : plan.values)
      if (g.is_output(p.value)) out += p.size;
    stats.count("output_bytes", out);
    return false;
  }
};

}  // namespace

std::unique_ptr<Pass> create_plan_memory_pass() { return std::make_unique<PlanMemory>(); }

}  // namespace kiln
