// The shape-generic cumsum / cumprod (codegen/emitters/pool_select_loss/emit_scan_generic.h):
// graphs whose scans run over symbolic dims (RoBERTa's position ids, the
// cumsum of an integer [batch, seq] mask along seq; float scans along a
// symbolic axis, with a static or symbolic inner extent, exclusive and
// reverse) compiled once into a GPU plan with a profile, every kernel taking
// `kiln_syms` and compiled by NVRTC for sm_80 and sm_90, then run from the
// plan on the simulator at three shapes (odd lengths, a line longer than
// the block) equal to the reference backend on the graph specialised to each.
#include <gtest/gtest.h>

#include "backends/compare.h"
#include "backends/plan_sim.h"
#include "backends/reference/executor.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "ir/parser.h"
#include "ir/specialize.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "runtime/plan_format.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

// Line kinds: [b, s] i64 along s (a block per line, inner 1), [b, s, 3]
// along s exclusive (a block per line, inner 3), [b, s, 40] along s reverse
// (a thread per line: inner 40), [b, 4, s] i32 along 1 (a thread per line,
// symbolic inner), a cumprod along the symbolic batch (n = b), and a cumsum
// along a static axis of a symbolic batch.
const char* kScans =
    "graph @m(%mask: i64[b,s], %x: f32[b,s,3], %y: f32[b,s,40], %z: i32[b,4,s], %p: f32[b,5]) -> (i64[b,s], "
    "f32[b,s,3], f32[b,s,40], i32[b,4,s], f32[b,5], f32[b,5]) symbols(b in [1, 3], s in [1, 300]) {\n"
    "  %pos = cumsum(%mask) {axis=1} : i64[b,s]\n"
    "  %ex = cumsum(%x) {axis=1, exclusive=1} : f32[b,s,3]\n"
    "  %rv = cumsum(%y) {axis=-2, reverse=1} : f32[b,s,40]\n"
    "  %iz = cumsum(%z) {axis=1, exclusive=1, reverse=1} : i32[b,4,s]\n"
    "  %pr = cumprod(%p) {axis=0} : f32[b,5]\n"
    "  %st = cumsum(%p) {axis=1} : f32[b,5]\n"
    "  return %pos, %ex, %rv, %iz, %pr, %st\n"
    "}\n";

std::unique_ptr<Graph> compiled(const std::string& target) {
  auto g = parse_graph(kScans, "scan.kir");
  CompileOptions o;
  o.pass.target = target;
  o.symbolic = true;
  compile_graph(*g, o);
  return g;
}

plan::Plan plan_for(const Graph& g, const std::string& arch) {
  PlanBuildOptions po{arch, "fp32", {}};
  po.profiles = {{{{"mask", {1, 1}, {3, 300}, {3, 300}},
                   {"x", {1, 1, 3}, {3, 300, 3}, {3, 300, 3}},
                   {"y", {1, 1, 40}, {3, 300, 40}, {3, 300, 40}},
                   {"z", {1, 4, 1}, {3, 4, 300}, {3, 4, 300}},
                   {"p", {1, 5}, {3, 5}, {3, 5}}}}};
  po.source_name = "scan.onnx";
  return build_plan(g, po);
}

TEST(ShapeGenericScan, InferenceKeepsTheSymbolicDims) {
  auto g = parse_graph(kScans, "scan.kir");
  EXPECT_NO_THROW(verify_graph(*g, op_registry()));
}

TEST(ShapeGenericScan, PlansCompileForSm80AndSm90WithEveryScanGeneric) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(arch);
    const plan::Plan p = plan_for(*g, arch);
    ASSERT_TRUE(p.meta.gpu_kernels) << arch << ": " << p.meta.no_gpu_reason;
    int scans = 0;
    for (const plan::Kernel& k : p.kernels) {
      EXPECT_FALSE(k.cubin.empty()) << k.name << " has no " << arch << " CUBIN";
      EXPECT_NE(k.source.find("kiln_syms ks"), std::string::npos) << k.name << " is not shape-generic";
      scans += k.name.find("kiln_cumsum") == 0 || k.name.find("kiln_cumprod") == 0;
    }
    EXPECT_EQ(scans, 6) << arch;
    EXPECT_EQ(p.generic_launches.size(), p.steps.size()) << arch << ": every launch is shape-generic";
  }
}

TEST(ShapeGenericScan, OnSimAtThreeShapesEqualsTheReference) {
  auto g = compiled("sm_90");
  const plan::Plan p = plan_for(*g, "sm_90");
  // s = 1; 7 (odd, shorter than a block); 300 (chunks of 3 over 128 threads).
  for (const SymbolBindings& at_shape :
       std::vector<SymbolBindings>{{{"b", 1}, {"s", 1}}, {{"b", 2}, {"s", 7}}, {{"b", 3}, {"s", 300}}}) {
    std::unique_ptr<Graph> at = specialize_graph(*g, at_shape, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(at_shape.at("s")));
    std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
    std::vector<Tensor> got = run_plan_on_sim(p, *g, feed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].shape(), want[i].shape()) << "s=" << at_shape.at("s") << " output " << i;
      EXPECT_EQ(compare_tensors(got[i], want[i], {1e-5, 1e-5}), "") << "s=" << at_shape.at("s") << " output " << i;
    }
  }
}

// gather_elements over symbolic dims (HF RoBERTa's token type ids: a
// [batch, 128] buffer gathered at the [batch, seq] positions), also along a
// symbolic axis, then a pointwise op: shape-generic on sim at three shapes.
TEST(ShapeGenericScan, GatherElementsOverSymbolicDimsOnSimEqualsTheReference) {
  const char* text =
      "graph @m(%buf: f32[b,128], %ix: i64[b,s], %d: f32[b,s,3], %jx: i32[b,s,3]) -> (f32[b,s], f32[b,s,3]) "
      "symbols(b in [1, 3], s in [5, 64]) {\n"
      "  %t = gather_elements(%buf, %ix) {axis=1} : f32[b,s]\n"
      "  %u = neg(%t) : f32[b,s]\n"
      "  %g = gather_elements(%d, %jx) {axis=-2} : f32[b,s,3]\n"
      "  return %u, %g\n"
      "}\n";
  auto g = parse_graph(text, "ge.kir");
  CompileOptions o;
  o.pass.target = "sm_90";
  o.symbolic = true;
  compile_graph(*g, o);
  PlanBuildOptions po{"sm_90", "fp32", {}};
  po.profiles = {{{{"buf", {1, 128}, {3, 128}, {3, 128}},
                   {"ix", {1, 5}, {3, 64}, {3, 64}},
                   {"d", {1, 5, 3}, {3, 64, 3}, {3, 64, 3}},
                   {"jx", {1, 5, 3}, {3, 64, 3}, {3, 64, 3}}}}};
  po.source_name = "ge.onnx";
  const plan::Plan p = build_plan(*g, po);
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  EXPECT_EQ(p.generic_launches.size(), p.steps.size()) << "every launch is shape-generic";
  for (const SymbolBindings& at_shape :
       std::vector<SymbolBindings>{{{"b", 1}, {"s", 5}}, {{"b", 2}, {"s", 7}}, {{"b", 3}, {"s", 37}}}) {
    std::unique_ptr<Graph> at = specialize_graph(*g, at_shape, op_registry());
    // Indices 0..4: within both axes (128 and s >= 5).
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(at_shape.at("s")));
    std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
    std::vector<Tensor> got = run_plan_on_sim(p, *g, feed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(compare_tensors(got[i], want[i], {0, 0}), "") << "s=" << at_shape.at("s") << " output " << i;
  }
}

}  // namespace
}  // namespace kiln
