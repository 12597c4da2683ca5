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

// A KV cache bound in place (runtime/plan_in_place.h), as on a GPU engine:
// `data`, of shape `capacity` (the input's with the appended axis at the most
// positions it holds), is input `input` (its first positions, as many as
// `past`, the input's shape this run) and output `output`; the plan's append
// runs in the concat's place and writes only the new positions.
struct SimInPlaceBuffer {
  std::string input, output;
  void* data = nullptr;
  Shape capacity, past;
};

// Inputs by name, checked against `g` (the plan's graph); outputs in order
// (one bound in place: a view of its buffer, of the capacity's shape).
// Throws kiln::Unsupported for a plan without GPU kernels (saying why), and
// kiln::Error for a buffer the plan cannot bind in place or too short.
// `kernels_run`, when given, gets the name of each kernel launched, in order
// (which launch variant a shape ran). With buffers bound in place no launch
// variant runs (their kernels read the caches densely).
std::vector<Tensor> run_plan_on_sim(const plan::Plan& p, const Graph& g, const std::map<std::string, Tensor>& inputs,
                                    const PlanStepTimer& timer = {}, std::vector<std::string>* kernels_run = nullptr,
                                    const std::vector<SimInPlaceBuffer>& in_place = {});

}  // namespace kiln
