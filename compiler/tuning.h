// `kiln compile --tune / --tuning-cache FILE` (docs/tuning.md): for the scope
// of one compile, installs the GEMM tile chooser of codegen/emitters/gemm_conv/gemm_tiles.h that
// answers every problem the emitters ask about from a tuning cache
// (compiler/tuning_cache.h), after measuring the problems the cache lacks
// on the GPU when --tune (compiler/autotune.h).
//
// Which GPU's winners apply: with --tune, the device's. Without, entries for
// the target's compute capability and this kiln version; if those name more
// than one GPU, --tuning-gpu NAME picks one (else an error listing them).
// Without either flag nothing is installed and the emitters' defaults apply.
// The chooser is thread-local (gemm_tiles.h): the session must live on the
// thread that emits the kernels, for as long as kernels are emitted.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct TuningOptions {
  std::string cache_file;            // --tuning-cache (with --tune: default <kernel cache dir>/../tuning.json)
  bool tune = false;                 // --tune: measure what the cache lacks, write winners back
  std::string gpu;                   // --tuning-gpu: whose winners apply without --tune
  int warmup = 10, iterations = 50;  // --tune-iterations: timed launches per candidate (median)
  bool active() const { return tune || !cache_file.empty(); }
};

class TuningSession {
 public:
  // Loads the cache, tunes (--tune) and installs the chooser. `target`: the
  // compile's --target (sm_XY); `kernel_cache_dir` as CompileOptions'.
  TuningSession(const Graph& g, const TuningOptions& o, const std::string& target, const std::string& kernel_cache_dir,
                bool use_kernel_cache);
  ~TuningSession();
  TuningSession(const TuningSession&) = delete;
  TuningSession& operator=(const TuningSession&) = delete;

  // {"cache": FILE, "gpu": NAME, "cc": "9.0", "tuned": N, "problems": [{"op", "problem", "tile", "from"}]}
  // where "from" is "cache" or "default", one row per problem the emitters asked about.
  nlohmann::json json() const;
  // One line for stderr.
  std::string summary() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
