// The compile pipeline's messages on stderr, the same for every subcommand
// that compiles (compile, run, bench, dump-ir): log lines as compile_model()
// gives them, and progress of the long steps (compiler/progress.h):
// "kernels compiled N/M" always (as before), "nodes imported N/M" and
// "passes run N/M" on a terminal once a step takes over a second, or from the
// start with --progress (also when stderr is a pipe or a file), so importing
// and optimising a large model (BERT-base) is never silent for long. Where
// "passes run" is shown, so is a heartbeat while one pass runs long
// ("passes run 9/17 (6.2 s): fuse running for 4.0 s"): after 3 s, then every
// second on a terminal and every 3 s on a pipe.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "compiler/compile_model.h"
#include "compiler/progress.h"
#include "frontend/onnx_import.h"

namespace kiln {

class StderrCompileMessages {
 public:
  // `forced`: --progress (CompileOptions::show_progress).
  explicit StderrCompileMessages(bool forced);
  // The progress callback of one step (empty when that step is not shown);
  // the callback must not outlive this object.
  std::function<void(int done, int total)> step(const std::string& name);
  // Sets the pass manager's heartbeat (and its timing) to note the running
  // pass on the "passes run" line; leaves it empty where that step is not shown.
  void attach_heartbeat(PipelineOptions& po);
  // compile_model()'s log and progress callbacks.
  void attach(CompileModelOptions& o);
  // The import's and the passes' progress, for callers that run them
  // without compile_model() (run and bench on a CPU backend, dump-ir).
  void attach(ImportOptions& io, CompileOptions& c);

 private:
  bool shows(const std::string& name) const;
  double delay_s(const std::string& name) const;
  Progress* progress(const std::string& name);

  bool forced_, tty_;
  std::map<std::string, std::unique_ptr<Progress>> shown_;
  std::mutex mu_;
  std::map<std::string, std::function<void(int, int)>> callbacks_;  // compile_model()'s steps
  std::mutex callbacks_mu_;
};

}  // namespace kiln
