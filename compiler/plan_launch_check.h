// Internal to the plan builder (compiler/plan_writer.cpp): a launch against
// the per-block limits of every arch the plan's code runs on
// (codegen/launch_fit.h), and the error a misfit throws, which build_plan
// answers with fewer threads (the one thread cap, plan_writer.h).
#pragma once
#ifdef KILN_HAVE_CODEGEN
#include <string>

#include "compiler/plan_writer.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "runtime/plan_format.h"

namespace kiln::planbuild {

// A launch that does not fit, thrown by check_launch_fits: build_plan
// retries its node with fewer threads per block when that may help.
struct LaunchMisfit : Error {
  LaunchMisfit(const std::string& what, const Node* n, unsigned long long t, bool retry)
      : Error(what), node(n), threads(t), fewer_threads_may_fit(retry) {}
  const Node* node;
  unsigned long long threads;  // per block, as launched
  bool fewer_threads_may_fit;
};

// Throws LaunchMisfit unless launch `s` of `n` fits the per-block limits of every arch the
// plan may run on (codegen/launch_fit.h). `regs`/`static_shared` are a
// compiled CUBIN's (-1: before NVRTC), `cubin_arch` names it in the message.
void check_launch_fits(const plan::Step& s, const Node& n, const std::string& source, const std::string& kernel,
                       int regs, int static_shared, const std::string& cubin_arch, const PlanBuildOptions& o);

}  // namespace kiln::planbuild
#endif
