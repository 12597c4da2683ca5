// Running control-flow nodes (if, loop, scan; ir/control_flow.h) on a CPU
// backend: the condition or trip count is read on the host, and regions are
// run by the backend's own graph walk through `RegionRunner`, so the
// reference backend and the simulator (backends/sim/sim_executor.cpp) share
// this one implementation of ONNX's If/Loop/Scan semantics and differ only in
// how a region's nodes run.
#pragma once
#include <functional>
#include <vector>

#include "ir/graph.h"

namespace kiln {

// Runs region `region` of the node on positional inputs, returning its outputs.
using RegionRunner = std::function<std::vector<Tensor>(int region, const std::vector<const Tensor*>& inputs)>;

// The node's results for the given operands (nullptr where absent). Throws
// kiln::Error when a run disagrees with the static types the node was
// compiled for (a loop whose scan outputs were compiled for another trip count).
std::vector<Tensor> run_control_flow(const Node& n, const std::vector<const Tensor*>& operands,
                                     const RegionRunner& run_region);

}  // namespace kiln
