// `kiln bench MODEL.onnx`: a trtexec-style performance summary (throughput,
// latency percentiles, host CPU time) of a model on a backend, and with
// --profile a per-node (ref) or per-kernel (sim) time table. Plans go to
// tools/kiln/bench_plan.h (the runtime's C API).
#pragma once
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "perf/latency_stats.h"

namespace CLI {
class App;
}

namespace kiln {

struct BenchOptions {
  std::string model;
  std::string shapes;
  int batch = 0;                          // 0: the model's own
  int iterations = 10;                    // timed runs
  double warmup_ms = 200;                 // untimed runs until this much time has passed (at least one when > 0)
  std::string backend;                    // empty: ref for .onnx models, auto for plans
  std::string inputs;                     // --inputs name:file.npy,... (or .pb)
  std::vector<std::string> input_ranges;  // --input-range [NAME:][LO,HI]
  bool profile = false;
  std::string json_path;
  CompileOptions compile;
};

CLI::App* register_bench(CLI::App& app, BenchOptions& o);
int run_bench(BenchOptions& o);

// The bench loop both `kiln bench MODEL.onnx` and `MODEL.plan` use: untimed
// runs for at least `warmup_ms` (at least one when > 0), then `iterations`
// timed ones with a progress line. `run(timed)` does one inference; `timed`
// says whether it is one of the measured runs (for per-run hooks such as
// profiling or reading the GPU's event times).
struct TimedRuns {
  int warmup_runs = 0;
  double warmup_ms = 0, wall_ms = 0;  // wall: the timed runs, end to end
  std::vector<double> latency_ms;     // per timed run, wall clock
  std::vector<double> host_cpu_ms;    // per timed run, CPU time of the process
};
TimedRuns time_runs(const std::function<void(bool timed)>& run, int iterations, double warmup_ms);
double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b);

}  // namespace kiln
