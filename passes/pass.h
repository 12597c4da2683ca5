// A pass rewrites a Graph in place and says whether it changed anything.
// Each pass lives in its own file with a comment at the top saying what it
// rewrites, what it leaves alone and why.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "passes/fusion_capabilities.h"

namespace kiln {

// Options every pass may read (the compile target and precision).
struct PassOptions {
  std::string target = "cpu";      // cpu | sm_80 | sm_86 | sm_89 | sm_90
  std::string precision = "fp32";  // fp32 | tf32 | fp16 | bf16
  // Constant folding leaves results larger than this unfolded (an Expand of
  // a scalar to a big tensor is cheaper to compute than to store).
  int64_t fold_max_bytes = 64 << 20;
  // Whether codegen can emit a fused node (passes/fusion_capabilities.h);
  // empty: the fuser's structural rules alone decide.
  WhyNoKernel why_no_kernel;
  // A plan whose kernels must run at every shape in its symbols' ranges (a
  // GPU target with shape profiles): why a node with symbolic dims gets no
  // shape-generic kernel, or ""; the fuser forms no group it refuses. Empty:
  // kernels are emitted per shape, specialised (the CPU path).
  WhyNoKernel why_not_shape_generic;
};

// What a pass reports: named counters and free-form notes (e.g. why two
// nodes were not fused).
struct PassStats {
  std::map<std::string, int64_t> counters;
  std::vector<std::string> notes;
  void count(const std::string& what, int64_t n = 1) { counters[what] += n; }
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  virtual bool run(Graph& g, const PassOptions& opts, PassStats& stats) = 0;
};

// Creates a pass by its name ("dce", "cse", "fold-constants", ...); throws
// kiln::Error listing the known names otherwise.
std::unique_ptr<Pass> create_pass(std::string_view name);
std::vector<std::string> pass_names();

}  // namespace kiln
