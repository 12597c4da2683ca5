// `kiln bench MODEL.onnx`: a trtexec-style performance summary (throughput,
// latency percentiles, host CPU time) of a model on a backend, and with
// --profile a per-node (ref) or per-kernel (sim) time table. Plans go to
// tools/kiln/bench_plan.h (the runtime's C API).
#pragma once
#include <string>

#include "tools/kiln/compile.h"

namespace CLI {
class App;
}

namespace kiln {

struct BenchOptions {
  std::string model;
  std::string shapes;
  int batch = 0;           // 0: the model's own
  int iterations = 10;     // timed runs
  double warmup_ms = 200;  // untimed runs until this much time has passed (at least one when > 0)
  std::string backend;  // empty: ref for .onnx models, auto for plans
  std::string inputs;  // --inputs name:file.npy,...
  bool profile = false;
  std::string json_path;
  CompileOptions compile;
};

CLI::App* register_bench(CLI::App& app, BenchOptions& o);
int run_bench(BenchOptions& o);

// Latency statistics over samples in milliseconds (sorted copy inside);
// percentiles by nearest rank.
struct LatencyStats {
  double min = 0, max = 0, mean = 0, median = 0, p90 = 0, p95 = 0, p99 = 0;
};
LatencyStats latency_stats(std::vector<double> ms);

}  // namespace kiln
