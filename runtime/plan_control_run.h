// Running a plan's control-flow steps (if, loop, scan; plan::ControlFlow)
// host-driven, as the CPU backends' region driver does for a graph
// (backends/reference/control_flow_run.h): the condition or trip count is
// copied to the host (one small device-to-host copy that waits for the
// stream), and the chosen region's launch list is issued; loop-carried values
// and scan states are copied between the node's buffers and the region's
// parameter and result slots in the arena, scan inputs are sliced and scan
// outputs stacked with device-to-device copies. The GPU executor
// (runtime/gpu_executor.cpp) and the plan-on-sim path (backends/plan_sim.cpp)
// share it and differ only in `ControlDevice`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/plan_format.h"

namespace kiln::plan {

// What the host-driven run needs of a device, all ordered on one stream.
class ControlDevice {
 public:
  virtual ~ControlDevice() = default;
  virtual uint64_t address(const BufferRef& b) = 0;  // where `b`'s bytes start
  virtual void copy(uint64_t dst, uint64_t src, size_t bytes) = 0;
  // Device to host: returns once the bytes (and everything before them) are there.
  virtual void read(void* host, uint64_t src, size_t bytes) = 0;
  // Host to device: the host bytes are taken at the call (the caller may reuse them).
  virtual void write(uint64_t dst, const void* host, size_t bytes) = 0;
  // A launch list: kernel and copy steps, control steps through run_control.
  virtual void run_steps(const std::vector<Step>& steps) = 0;
};

// Runs control-flow record `c` of plan `p`. Throws kiln::Error naming `what`
// and the node when a run disagrees with the types the plan was compiled
// for (a loop whose scan outputs were compiled for another trip count).
void run_control(const Plan& p, const ControlFlow& c, ControlDevice& dev, std::string_view what);

}  // namespace kiln::plan
