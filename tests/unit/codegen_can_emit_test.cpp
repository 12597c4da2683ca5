// The fuser's can-emit query (codegen::why_no_kernel, which runs an
// emitter's check, or the emitter deciding only -- returning before it writes
// kernel text, codegen/core/deciding_only.h -- instead of rendering its
// kernel) against emitting the kernel in full (why_no_kernel_by_emitting):
// the same verdict for every group the fuser asks about while compiling each
// conformance model, and for every node of the compiled graphs, per family.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <iostream>

#include "codegen/emitter_table.h"
#include "compiler/compile.h"
#include "conformance/conformance.h"
#include "ir/error.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

struct Tally {
  int asked = 0;                         // questions compared
  int refused = 0;                       // of those, refusals
  std::map<std::string, int> by_family;  // questions per emitter family
};

// Compares the two answers for `n`.
void expect_agree(const Node& n, const std::string& where, Tally& t) {
  const codegen::KernelEmitter* e = codegen::emitter_for(n);
  if (!e) return;
  std::string cheap = codegen::why_no_kernel(n);
  std::string full = codegen::why_no_kernel_by_emitting(n);
  ++t.asked;
  ++t.by_family[e->name];
  t.refused += !cheap.empty();
  EXPECT_EQ(cheap.empty(), full.empty()) << where << ": " << n.describe() << " (" << e->name << ")\n  check: " << cheap
                                         << "\n  emit: " << full;
}

std::string families(const Tally& t) {
  std::string s;
  for (const auto& [name, count] : t.by_family) s += fmt::format("{}{}: {}", s.empty() ? "" : ", ", name, count);
  return s;
}

// Debian's suite, and the current onnx release's where it has been generated.
std::vector<std::string> suites() {
  std::vector<std::string> dirs;
  for (const char* suite : {"debian-1.12", "onnx-1.23"}) {
    try {
      for (std::string& d : conformance_suite_paths(suite)) dirs.push_back(std::move(d));
    } catch (const Error&) {
      // not installed or not generated here
    }
  }
  return dirs;
}

TEST(CanEmit, CheckAgreesWithEmittingOverTheConformanceModels) {
  std::vector<std::string> dirs = suites();
  if (dirs.empty()) GTEST_SKIP() << "no ONNX conformance suite (libonnx-testdata) is installed";
  Tally probes, nodes;
  int compiled = 0;
  for (const std::string& dir : conformance_test_dirs(dirs)) {
    std::string name = fs::path(dir).parent_path().filename().string() + "/" + fs::path(dir).filename().string();
    std::unique_ptr<Graph> g;
    try {
      g = import_conformance_case(dir, "test_data_set_0", nullptr).graph;
    } catch (const Error&) {
      continue;  // not importable: the conformance run reports it
    }
    CompileOptions o;
    o.pass.target = "sm_90";
    // Every group the fuser asks about, as it asks.
    o.pass.why_no_kernel = [&](const Node& f) {
      expect_agree(f, name + " (fuser's question)", probes);
      return codegen::why_no_kernel_by_emitting(f);
    };
    try {
      compile_graph(*g, o);
    } catch (const Error&) {
      continue;  // not compilable yet: the conformance run reports it
    }
    ++compiled;
    for (const auto& n : g->nodes()) expect_agree(*n, name, nodes);
  }
  std::cout << "[ can-emit ] " << compiled << " models compiled; fuser's questions: " << probes.asked << " ("
            << probes.refused << " refused; " << families(probes) << "); compiled nodes: " << nodes.asked << " ("
            << nodes.refused << " refused)\n";
  // The comparison must have had something to compare, in every family the
  // fuser asks about.
  EXPECT_GT(compiled, 500);
  EXPECT_GT(probes.asked, 20);
  EXPECT_GT(nodes.asked, 20);
  for (const char* family :
       {"fused pointwise", "fused on demand", "gemm", "conv", "fused reduction", "fused pool/argmax", "attention"})
    EXPECT_GT(probes.by_family[family], 0) << "no question about a " << family << " group was compared";
}

// A fused pointwise node the emitter refuses (results of different shapes):
// the check refuses it too. One with a symbolic batch: both accept it (its
// kernel is shape-generic, docs/dynamic_shapes.md), so they agree there too.
const char* kRefused =
    R"(graph @refused(%a: f32[2,3], %b: f32[3], %s: f32[batch,3]) -> (f32[2,3], f32[3], f32[batch,3]) symbols(batch in [1, 4]) {
  %x, %y = fused(%a, %b) {kind="pointwise"} : f32[2,3], f32[3] {
    graph @fused_0(%a: f32[2,3], %b: f32[3]) -> (f32[2,3], f32[3]) {
      %y = neg(%b) : f32[3]
      %x = add(%a, %y) : f32[2,3]
      return %x, %y
    }
  }
  %z = fused(%s) {kind="pointwise"} : f32[batch,3] {
    graph @fused_1(%s: f32[batch,3]) -> (f32[batch,3]) {
      %n = neg(%s) : f32[batch,3]
      %z = relu(%n) : f32[batch,3]
      return %z
    }
  }
  return %x, %y, %z
})";

TEST(CanEmit, CheckRefusesWhatTheEmitterRefuses) {
  auto g = testing::parse(kRefused);
  int fused = 0;
  for (const auto& n : g->nodes()) {
    if (n->op() != "fused") continue;
    ++fused;
    ASSERT_NE(codegen::emitter_for(*n), nullptr);
    ASSERT_NE(codegen::emitter_for(*n)->check, nullptr) << n->describe();
    std::string cheap = codegen::why_no_kernel(*n);
    if (n->output(0)->name() == "z") EXPECT_EQ(cheap, "") << n->describe();
    else EXPECT_NE(cheap, "") << n->describe();
    EXPECT_EQ(cheap, codegen::why_no_kernel_by_emitting(*n)) << n->describe();
  }
  EXPECT_EQ(fused, 2);
}

// A symbolic fused pointwise node whose kernel would read nine symbols (a
// shape-generic kernel takes at most eight): the check refuses it as the
// emitter does (it accepted it before: the symbol count was the emitter's
// decision alone).
const char* kNineSymbols =
    R"(graph @nine(%x: f32[a,b,c,d,e,f,g,h,i]) -> (f32[a,b,c,d,e,f,g,h,i]) symbols(a in [1, 2], b in [1, 2], c in [1, 2], d in [1, 2], e in [1, 2], f in [1, 2], g in [1, 2], h in [1, 2], i in [1, 2]) {
  %z = fused(%x) {kind="pointwise"} : f32[a,b,c,d,e,f,g,h,i] {
    graph @fused_0(%x: f32[a,b,c,d,e,f,g,h,i]) -> (f32[a,b,c,d,e,f,g,h,i]) {
      %n = neg(%x) : f32[a,b,c,d,e,f,g,h,i]
      %z = relu(%n) : f32[a,b,c,d,e,f,g,h,i]
      return %z
    }
  }
  return %z
})";

TEST(CanEmit, CheckRefusesAKernelOfTooManySymbols) {
  auto g = testing::parse(kNineSymbols);
  const Node& n = *g->nodes().front();
  std::string full = codegen::why_no_kernel_by_emitting(n);
  EXPECT_NE(full.find("at most 8"), std::string::npos) << full;
  EXPECT_EQ(codegen::why_no_kernel(n), full);
}

}  // namespace
}  // namespace kiln
