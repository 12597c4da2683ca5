// Runs a sequence of passes with MLIR-style instrumentation: the verifier
// after each pass, IR printing before/after chosen passes, numbered dumps,
// statistics and timing, and stopping after a pass for bisecting.
#pragma once
#include <functional>
#include <iosfwd>
#include <set>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace kiln {

// True in builds without NDEBUG and when $KILN_VERIFY_EACH is "all".
bool verify_unchanged_default();

struct PipelineOptions {
  // The verifier (ir/verifier.h) between passes: after the first pass (which
  // also checks the graph the pipeline was given) and after every pass that
  // reports a change. A pass that changed nothing leaves the graph the
  // verifier last accepted, so running it again cannot find anything; MLIR's
  // pass manager skips it the same way (passes that preserve all analyses).
  // On a 100k-node chain that was about 1 s of a 8 s compile.
  bool verify_each = true;
  // The verifier's full strength: after every pass, changed or not, and a pass
  // reporting no change must leave the printed graph byte-identical (its
  // answer is what lets the default skip the verifier, so the tests hold
  // every pass to it). On when the environment has KILN_VERIFY_EACH=all
  // (tools/test.sh sets it: every test runs this way) and in builds without
  // NDEBUG.
  bool verify_unchanged = verify_unchanged_default();
  std::set<std::string> print_before, print_after;
  bool print_after_all = false;
  bool print_after_change = false;
  std::string stop_after;            // pass name; empty = run all
  std::string dump_dir;              // 000.input.kir, NNN.after.<pass>.kir per pass, final.dot
  std::ostream* print_to = nullptr;  // where --print-ir-* goes (stderr if null)
  // The model file; errors raised by passes (a constant-folded Gather index
  // out of range, a broken graph) are prefixed with it, as the importer's are.
  std::string source;
  // Called with (0, passes in the pipeline) at the start and after each pass
  // with the passes run, so a long compile is not silent (BERT-base's passes
  // take seconds). May be empty.
  std::function<void(int done, int total)> progress;
  // Called while one pass (or the verifier after it) runs long, with what is
  // running ("fuse", "verifier after fuse") and its seconds so far: first
  // after heartbeat_after_s, then every heartbeat_every_s (passes/pass_heartbeat.h).
  // Empty: no heartbeat and no watcher thread.
  std::function<void(const std::string& what, double seconds)> heartbeat;
  double heartbeat_after_s = 3, heartbeat_every_s = 3;
};

struct PassRecord {
  std::string name;
  bool changed = false;
  double ms = 0;          // wall time of the pass itself
  bool verified = false;  // whether the verifier ran after it (PipelineOptions::verify_each)
  double verify_ms = 0;   // wall time of the verifier run after it (0 when it did not run)
  // The same as CPU time of the process: on a loaded machine the wall time
  // says more about the other processes than about the pass.
  double cpu_ms = 0, verify_cpu_ms = 0;
  size_t nodes_before = 0, nodes_after = 0;
  PassStats stats;
};

class PassManager {
 public:
  void add(std::unique_ptr<Pass> p) { passes_.push_back(std::move(p)); }
  void add(std::string_view name) { add(create_pass(name)); }
  // Runs the passes in order; throws kiln::Error when verification fails,
  // naming the pass that broke the graph.
  std::vector<PassRecord> run(Graph& g, const PassOptions& opts, const PipelineOptions& popts = {});

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
};

// The default pipeline for the given options, as pass names.
std::vector<std::string> default_pipeline(const PassOptions& opts);

}  // namespace kiln
