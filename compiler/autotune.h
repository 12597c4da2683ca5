// Measuring GEMM tile candidates on the GPU for `kiln compile --tune`
// (docs/tuning.md). For each GEMM problem of the graph that `wanted` selects:
// the first node asking for it is emitted once per candidate configuration
// (codegen/emitters/gemm_conv/gemm_tiles.h's gemm_tile_candidates, the default first) with the
// candidate forced for that problem, all candidates are compiled with NVRTC
// for the target (through the kernel cache), and on device 0 (the runtime's
// dlopen'ed driver, runtime/cuda_driver.h) each candidate's kernels are
// loaded (cuModuleLoadData of the CUBIN), launched `warmup` times on
// zero-filled buffers (the node's constants hold their data), then
// `iterations` times with a CUDA event between launches; its time is the
// median. The fastest candidate wins (ties: the earlier one, so the default
// wins ties). A candidate the driver refuses (too many resources) is skipped
// with a note.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "codegen/emitters/gemm_conv/gemm_tiles.h"
#include "ir/graph.h"

namespace kiln {

struct AutotuneRequest {
  std::string target;  // sm_XY: must be the GPU's arch
  std::string kernel_cache_dir;
  bool use_kernel_cache = true;
  int warmup = 10, iterations = 50;
  // Which problems (GPU name, gemm_problem_key) to measure; null: all.
  std::function<bool(const std::string& gpu, const std::string& problem)> wanted;
};

struct AutotuneWinner {
  std::string problem;  // gemm_problem_key
  codegen::GemmTileConfig config;
  double ms = 0;
  int candidates = 0;  // timed successfully
};

struct AutotuneOutcome {
  std::string gpu, cc;                  // device 0's name, "9.0"
  std::vector<AutotuneWinner> winners;  // problem order of the graph
  std::vector<std::string> notes;       // skipped candidates
};

// The GEMM problems the emitters ask about for `g`, in node order (no
// duplicates), each with the first node that asks.
struct GemmProblemSite {
  codegen::GemmProblem problem;
  std::string key;
  const Node* node = nullptr;
};
std::vector<GemmProblemSite> gemm_problems(const Graph& g);

// Throws kiln::Error "kiln compile --tune needs a GPU: <why>" without a
// usable driver and device, or when the GPU's arch is not the target.
AutotuneOutcome autotune(const Graph& g, const AutotuneRequest& r);

}  // namespace kiln
