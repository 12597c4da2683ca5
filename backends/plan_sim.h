// Runs a plan's own kernels and launch list on the CPU kernel simulator: the
// GPU path's steps (arena offsets, buffer bindings, copies, weights) checked
// without a GPU. The kernels' CUDA sources are compiled for the simulator
// (backends/sim/sim_module.h); the arena, inputs, outputs and weights are host
// buffers laid out as on the device. Needs the sim backend (codegen built).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/plan_format.h"

namespace kiln {

bool plan_sim_available();

// Called after each step of the launch list with its index and wall time (in
// a plan with launch variants: the index in the list the shape runs,
// plan::launches_at).
using PlanStepTimer = std::function<void(size_t step, double ms)>;

// Inputs by name, checked against `g` (the plan's graph); outputs in order.
// Throws kiln::Unsupported for a plan without GPU kernels (saying why).
// `kernels_run`, when given, gets the name of each kernel launched, in order
// (which launch variant a shape ran).
std::vector<Tensor> run_plan_on_sim(const plan::Plan& p, const Graph& g, const std::map<std::string, Tensor>& inputs,
                                    const PlanStepTimer& timer = {}, std::vector<std::string>* kernels_run = nullptr);

}  // namespace kiln
