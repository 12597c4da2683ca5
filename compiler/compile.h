// The pass-pipeline driver shared by `kiln compile`, `kiln dump-ir`, `kiln opt`,
// `kiln run` and the conformance runner: runs a pass pipeline over a graph
// with the pass-manager flags, and reports what `--json` prints.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "passes/pass_manager.h"

namespace kiln {

struct CompileOptions {
  PassOptions pass;
  PipelineOptions pipeline;
  bool optimize = true;             // false: --no-opt, the imported graph as is
  std::vector<std::string> passes;  // explicit pass list; empty: default pipeline
  bool stats = false;               // print per-pass statistics to stderr
  bool show_progress = false;       // --progress: progress lines on stderr even when it is not a terminal
  std::string cache_dir;            // kernel / simulator module cache (empty: default)
  bool kernel_cache = true;         // false: --no-kernel-cache
  // Passes run on a graph with symbolic dims (a plan with shape profiles,
  // compile_model): the default pipeline without plan-memory, whose sizes the
  // plan builder takes at the profiles' largest shapes. false: such a graph
  // is refused (callers that run it specialise it first, ir/specialize.h).
  bool symbolic = false;
};

struct CompileReport {
  size_t nodes_in = 0, nodes_out = 0;
  std::vector<PassRecord> passes;
};

// Refuses a graph with result sizes decided at run time (NonZero, NMS, TopK
// with a run-time k: ir/data_dependent.h), naming `source` and the nodes:
// kiln run and kiln conformance run them stage by stage on ref and sim, but
// no plan or compiled pipeline holds them yet.
void refuse_data_dependent_sizes(const Graph& g, const std::string& source);

// Runs the pipeline (or nothing when !optimize) over `g`.
CompileReport compile_graph(Graph& g, const CompileOptions& o);

// How many kernels the graph launches: fused nodes plus compute nodes left
// unfused; reshapes and identities are views, not launches.
int count_kernels(const Graph& g);
int64_t weight_bytes(const Graph& g);

// The `kiln compile --json` object (without the memory figures when the
// pipeline planned no memory).
nlohmann::json compile_report_json(const Graph& g, const CompileReport& r);
// Human-readable per-pass table for --stats.
std::string format_stats(const CompileReport& r);

}  // namespace kiln
