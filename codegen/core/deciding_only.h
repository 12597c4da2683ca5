// Deciding without rendering: what a family's `check` (KernelEmitter::check,
// codegen/emitter_table.h) runs. The fuser asks codegen about every group it
// forms; answering by rendering whole kernels (a tiled GEMM's main loop, an
// attention kernel's text) and throwing the text away cost as much as the
// rest of the pass (issue 18).
//
// A family's check is its own emitter run inside a DecidingOnly scope: every
// decision (every refusal) is the emitter's own code, and where an emitter
// has made its last decision and only writes text from there on it asks
// deciding_only() and returns the launch it decided, with no source. So check
// and emit are one function and cannot disagree, provided no refusal comes
// after such a return; tests/unit/codegen_can_emit_test.cpp compares the two
// verdicts over the conformance models and fails on any difference.
#pragma once

namespace kiln::codegen {

// True inside a DecidingOnly scope on this thread: the kernels returned may
// have no source (never compile or launch them).
bool deciding_only();

// Sets deciding_only() for its lifetime on this thread (nests).
class DecidingOnly {
 public:
  DecidingOnly();
  ~DecidingOnly();
  DecidingOnly(const DecidingOnly&) = delete;
  DecidingOnly& operator=(const DecidingOnly&) = delete;

 private:
  bool previous_;
};

}  // namespace kiln::codegen
