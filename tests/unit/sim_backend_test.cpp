// The "sim" backend (backends/sim/sim_executor.h): graphs run through generated
// kernels on the CPU simulator, compared with the reference backend. Fused
// pointwise bodies (codegen/emitters/elementwise/emit_fused.h) become one kernel each.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "backends/reference/executor.h"
#include "codegen/emitters/elementwise/emit_fused.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "backends/sim/sim_executor.h"
#include "ir/printer.h"
#include "ops/registry.h"
#include "passes/pass.h"
#include "tests/unit/pass_test_util.h"
#include "backends/compare.h"

namespace kiln {
namespace {

constexpr const char* kGelu = R"(graph @m(%x: f32[5,7,67], %b: f32[67], %s: f32[5,1,1]) -> (f32[5,7,67], f32[5,7,67]) {
    %half = const f32[] splat<0.5>
    %rs2 = const f32[] splat<0.70710678>
    %one = const f32[1] splat<1.0>
    %h = add(%x, %b) : f32[5,7,67]
    %t = mul(%h, %rs2) : f32[5,7,67]
    %e = erf(%t) : f32[5,7,67]
    %p = add(%e, %one) : f32[5,7,67]
    %q = mul(%h, %p) : f32[5,7,67]
    %g = mul(%q, %half) : f32[5,7,67]
    %y = mul(%g, %s) : f32[5,7,67]
    return %y, %h
  })";

constexpr const char* kMixed =
    R"(graph @m(%a: f16[3,1], %b: f16[3,301], %i: i32[301], %j: i32[3,1]) -> (f32[3,301], i32[3,301]) {
    %a2 = mul(%a, %a) : f16[3,1]
    %s = add(%a2, %b) : f16[3,301]
    %m = mul(%s, %s) : f16[3,301]
    %c = cast(%m) {to="f32"} : f32[3,301]
    %k = mul(%i, %j) : i32[3,301]
    %l = sub(%k, %j) : i32[3,301]
    %lt = less(%l, %k) : bool[3,301]
    %w = where(%lt, %l, %k) : i32[3,301]
    return %c, %w
  })";

std::unique_ptr<Graph> fused(const std::string& text) {
  auto g = testing::parse(text);
  PassStats st;
  create_pass("fuse")->run(*g, PassOptions{}, st);
  return g;
}

int count_op(const Graph& g, const std::string& op) {
  int k = 0;
  for (const auto& n : g.nodes()) k += n->op() == op;
  return k;
}

// Runs `g` on both backends with seeded inputs and compares every result.
void expect_matches_reference(const Graph& g, Tolerance tol = {1e-5, 1e-4}) {
  auto feed = testing::random_inputs(g, 7);
  std::vector<Tensor> want = ReferenceExecutor(g).run(feed);
  codegen::SimExecutor sim(g);
  std::vector<Tensor> got = sim.run(feed);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].type(), want[i].type()) << "result " << i;
    EXPECT_EQ(compare_tensors(got[i], want[i], is_float(want[i].dtype()) ? tol : Tolerance{0, 0}), "")
        << "result " << i << "\n"
        << print_graph(g);
  }
}

// A gelu-like chain: bias add (broadcast over the last dim), erf, scales by
// constants and by a per-batch factor [5,1,1]; the biased value is a second
// result. 2345 elements: more than one block of 256, odd sizes.
TEST(SimBackend, FusedGeluChainWithBroadcastingAndTwoResults) {
  auto g = fused(kGelu);
  ASSERT_EQ(count_op(*g, "fused"), 1) << print_graph(*g);
  ASSERT_EQ(g->num_nodes(), 1u) << print_graph(*g);
  const Node& f = *g->nodes().front();
  EXPECT_EQ(f.num_outputs(), 2);
  const codegen::KernelEmitter* em = codegen::emitter_for(f);
  ASSERT_NE(em, nullptr);
  EXPECT_STREQ(em->name, "fused pointwise");
  codegen::FusedPointwiseKernel k = codegen::emit_fused_pointwise(f, op_registry());
  EXPECT_EQ(k.kernel.outputs, 2);
  EXPECT_EQ(k.constants.size(), 3u);  // the three small constants live in the body
  EXPECT_EQ(k.kernel.grid, 3u);       // ceil(ceil(2345 / 4) / 256): 4 floats per thread
  expect_matches_reference(*g);
}

// f16 values between body nodes are rounded as the reference stores them;
// a broadcast [3,1] intermediate is recomputed at the output's coordinates;
// integer ops and comparisons with select are exact.
TEST(SimBackend, FusedMixedDtypesAndSmallerIntermediates) {
  auto g = fused(kMixed);
  ASSERT_GE(count_op(*g, "fused"), 1) << print_graph(*g);
  for (const auto& n : g->nodes()) EXPECT_NE(codegen::emitter_for(*n), nullptr) << n->describe();
  expect_matches_reference(*g);
}

// Single pointwise ops and views (reshape, identity) outside fused nodes.
TEST(SimBackend, UnfusedPointwiseOpsAndViews) {
  auto g = testing::parse(R"(graph @m(%x: f32[4,9], %y: f32[9]) -> (f32[36], f32[4,9]) {
    %r = reshape(%x) {shape=[36]} : f32[36]
    %e = exp(%r) : f32[36]
    %z = add(%x, %y) : f32[4,9]
    %t = identity(%z) : f32[4,9]
    return %e, %t
  })");
  expect_matches_reference(*g);
}

// The fused kernels compile with NVRTC for the GPUs too.
TEST(SimBackend, FusedKernelsCompileWithNvrtc) {
  std::vector<codegen::KernelSource> sources;
  for (const char* text : {kGelu, kMixed}) {
    auto g = fused(text);
    for (const auto& n : g->nodes())
      if (n->op() == "fused") {
        codegen::FusedPointwiseKernel k = codegen::emit_fused_pointwise(*n, op_registry());
        sources.push_back({k.kernel.name, k.kernel.source});
      }
  }
  ASSERT_GE(sources.size(), 2u);
  codegen::KernelCache cache;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    std::vector<codegen::CompiledKernel> ks = compiler.compile(sources);
    ASSERT_EQ(ks.size(), sources.size());
    for (const auto& k : ks) {
      EXPECT_FALSE(k.cubin.empty()) << k.name << " " << arch;
      EXPECT_GT(k.registers, 0) << k.name << " " << arch;
      EXPECT_EQ(k.spill_bytes, 0) << k.name << " " << arch;
      fmt::print("  {} {}: {} registers, {} spill bytes\n", k.name, arch, k.registers, k.spill_bytes);
    }
  }
}

// Injective ops (codegen/emitters/data_movement/emit_injective.h) through the dispatch table; a
// split launches one kernel per result.
TEST(SimBackend, InjectiveOpsOneKernelPerResult) {
  auto g = testing::parse(R"(graph @m(%x: f32[3,5,12], %y: f32[12,5,3]) -> (f32[12,5,7], f32[12,5,5], f32[12,5,3]) {
    %t = transpose(%x) {perm=[2,1,0]} : f32[12,5,3]
    %s = add(%t, %y) : f32[12,5,3]
    %p, %q = split(%s) {axis=2, split=[1,2]} : f32[12,5,1], f32[12,5,2]
    %c = concat(%q, %t, %p, %q) {axis=2} : f32[12,5,8]
    %k = slice(%c) {ends=[12,5,7], starts=[0,0,0], steps=[1,1,1]} : f32[12,5,7]
    %e = exp(%q) : f32[12,5,2]
    %f = concat(%e, %t) {axis=2} : f32[12,5,5]
    return %k, %f, %s
  })");
  for (const auto& n : g->nodes()) EXPECT_NE(codegen::emitter_for(*n), nullptr) << n->describe();
  expect_matches_reference(*g);
}

// reduce_* and softmax (codegen/emitters/reduction/emit_reduction.h) through the dispatch table.
TEST(SimBackend, ReductionsAndSoftmax) {
  auto g = testing::parse(R"(graph @m(%x: f32[3,5,70]) -> (f32[3,1,70], f32[3,5,70]) {
    %r = reduce_sum(%x) {axes=[1], keepdims=1} : f32[3,1,70]
    %p = softmax(%x) {axis=2} : f32[3,5,70]
    return %r, %p
  })");
  for (const auto& n : g->nodes()) EXPECT_NE(codegen::emitter_for(*n), nullptr) << n->describe();
  expect_matches_reference(*g);
}

TEST(SimBackend, OpWithoutEmitterIsUnsupported) {
  // Window ops have no operands: fold-constants always evaluates them, so no
  // emitter exists; an unoptimized graph holding one is Unsupported on sim.
  auto g = testing::parse(R"(graph @m(%x: f32[4]) -> (f32[4]) {
    %w = hann_window() {size=4} : f32[4]
    %r = add(%x, %w) : f32[4]
    return %r
  })");
  try {
    codegen::SimExecutor sim(*g);
    FAIL() << "expected Unsupported";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("no kernel emitter for op hann_window"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
