#include "perf/plan_estimate.h"

#include "ir/error.h"

namespace kiln::perf {

PlanEstimate estimate_plan(const plan::Plan& p, const Graph& g, const GpuSpec& gpu, const ModelConstants& c) {
  PlanEstimate pe;
  pe.gpu = gpu;
  pe.constants = c;
  pe.batch = plan_batch(g);
  for (StepWork& sw : plan_work(p, g)) {
    StepEstimate se;
    try {
      se.est = estimate_launch(sw.work, gpu, c);
    } catch (const Error& e) {
      fail("plan step {} (kernel {}, node {}): {}", sw.step, sw.kernel, sw.node, e.what());
    }
    se.work = std::move(sw);
    pe.kernel_us += se.est.est_us;
    pe.sol_us += se.est.sol_us;
    if (is_heavy(se.work.work.kind)) {
      ++pe.heavy;
      if (se.est.waves >= 1.0) ++pe.heavy_full_wave;
      if (se.work.work.blocks >= gpu.sms) ++pe.heavy_every_sm;
    }
    pe.steps.push_back(std::move(se));
  }
  pe.overhead_us = double(pe.steps.size()) * c.graph_node_overhead_us;
  pe.total_us = pe.kernel_us + pe.overhead_us;
  return pe;
}

}  // namespace kiln::perf
