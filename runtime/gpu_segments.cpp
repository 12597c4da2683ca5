// Segment capture for plans with control flow. Such a plan cannot be one
// static CUDA Graph: at each if/loop/scan step the host reads a condition or
// trip count and picks the region to run (runtime/plan_control_run.h). What
// lies between those steps -- each maximal run of kernel launches and copies
// in the plan's own launch list and in every region's, nested ones included
// -- is straight-line, so each run is captured once per slot as a graph and
// replayed where the list reaches it (GpuContext::issue_list): a loop body of
// N launches is one cuGraphLaunch per iteration instead of N launches.
//
// The captures follow the driver's rules as the strict fake driver enforces
// them (docs/testing.md, rule `capture`): the slot's pointer tables are
// uploaded before (a synchronous copy may not be made during a capture), a
// capture that fails is ended and its partial graph destroyed before the
// error goes on, and new zero-copy bindings drop the segments (their
// addresses are baked in) and capture them again (GpuContext::rebind).
#include <utility>

#include "ir/error.h"
#include "runtime/gpu_executor.h"

namespace kiln::rt {

namespace {

// Every launch list of `p` reached from `steps`: itself, then each control
// step's regions', depth first.
void launch_lists(const plan::Plan& p, const std::vector<plan::Step>& steps,
                  std::vector<const std::vector<plan::Step>*>& out) {
  out.push_back(&steps);
  for (const plan::Step& s : steps)
    if (s.kind == plan::StepKind::Control)
      for (const plan::RegionPlan& r : p.control.at(s.kernel).regions) launch_lists(p, r.steps, out);
}

}  // namespace

void GpuContext::capture_segments(Slot& sl) {
  const CudaDriver& d = e_.d_;
  std::vector<const std::vector<plan::Step>*> lists;
  launch_lists(e_.plan_, e_.plan_.steps, lists);
  for (const std::vector<plan::Step>* steps : lists) {
    for (size_t i = 0; i < steps->size();) {
      if ((*steps)[i].kind == plan::StepKind::Control) {
        ++i;
        continue;
      }
      size_t end = i;
      while (end < steps->size() && (*steps)[end].kind != plan::StepKind::Control) ++end;
      d.check(d.cuStreamBeginCapture(stream_, kCaptureModeThreadLocal), "cuStreamBeginCapture (a segment)");
      capturing_segments_ = true;
      try {
        issue_list(sl, *steps, stream_, nullptr, "capturing", i, end);
      } catch (...) {
        capturing_segments_ = false;
        // End the capture first: while it lasts the driver refuses the
        // frees and synchronization of the cleanup.
        CUgraph partial = nullptr;
        if (d.cuStreamEndCapture(stream_, &partial) == 0 && partial) d.cuGraphDestroy(partial);
        throw;
      }
      capturing_segments_ = false;
      CUgraph graph = nullptr;
      d.check(d.cuStreamEndCapture(stream_, &graph), "cuStreamEndCapture (a segment)");
      CUgraphExec exec = nullptr;
      const CUresult r = d.cuGraphInstantiateWithFlags(&exec, graph, 0);
      d.cuGraphDestroy(graph);
      d.check(r, "cuGraphInstantiate (a segment)");
      sl.segments[&(*steps)[i]] = {end - i, exec};
      i = end;
    }
  }
}

void GpuContext::drop_segments(Slot& sl) noexcept {
  // The driver frees an exec still running once it is done (cuGraphExecDestroy).
  for (auto& [first, seg] : sl.segments) e_.d_.cuGraphExecDestroy(seg.exec);
  sl.segments.clear();
}

}  // namespace kiln::rt
