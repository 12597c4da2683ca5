// Shape-generic GPU kernels (docs/dynamic_shapes.md "Shape-generic GPU
// kernels"): a pointwise graph with a symbolic batch compiled once into a GPU
// plan with a profile has kernels taking `kiln_syms`, compiled by NVRTC for
// sm_80 and sm_90, launches whose grids are polynomials of the symbols
// (section `generic launches`, round trip and loader checks), and runs on the
// simulator from the plan (plan-on-sim) at three shapes equal to the
// reference backend on the graph specialised to each. A family that is not
// shape-generic is refused by name.
#include <gtest/gtest.h>

#include "backends/compare.h"
#include "backends/plan_sim.h"
#include "backends/reference/executor.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "ir/parser.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/plan_format.h"
#include "runtime/plan_graph.h"
#include "tests/unit/pass_test_util.h"
#include "tests/unit/error_of.h"

namespace kiln {
namespace {

// Broadcast operands of three kinds (per row, per channel, scalar), a
// symbolic inner extent (b*24 after the reshape) and two results.
const char* kPointwise =
    "graph @m(%x: f32[b,3,24], %r: f32[24], %c: f32[3,1]) -> (f32[b,3,24], f32[b,72]) symbols(b in [1, 16]) {\n"
    "  %h = add(%x, %r) : f32[b,3,24]\n"
    "  %t = tanh(%h) : f32[b,3,24]\n"
    "  %m = mul(%t, %c) : f32[b,3,24]\n"
    "  %s = sigmoid(%m) : f32[b,3,24]\n"
    "  %f = reshape(%s) {shape=[b,72]} : f32[b,72]\n"
    "  %k = const f32[] dense<[0.5]>\n"
    "  %g = mul(%f, %k) : f32[b,72]\n"
    "  return %m, %g\n"
    "}\n";

plan::Profile profile() { return {{{"x", {1, 3, 24}, {8, 3, 24}, {16, 3, 24}}}}; }

std::unique_ptr<Graph> compiled(const char* text, const std::string& target) {
  auto g = parse_graph(text, "pw.kir");
  CompileOptions o;
  o.pass.target = target;
  o.symbolic = true;
  compile_graph(*g, o);
  return g;
}

plan::Plan gpu_plan(const Graph& g, const std::string& arch) {
  PlanBuildOptions po{arch, "fp32", {}};
  po.profiles = {profile()};
  po.source_name = "pw.onnx";
  return build_plan(g, po);
}

using testing::error_of;

TEST(ShapeGenericKernels, PointwisePlanCompilesForSm80AndSm90WithSymbolicGrids) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(kPointwise, arch);
    plan::Plan p = gpu_plan(*g, arch);
    ASSERT_TRUE(p.meta.gpu_kernels) << arch << ": " << p.meta.no_gpu_reason;
    ASSERT_FALSE(p.generic_launches.empty()) << arch;
    for (const plan::Kernel& k : p.kernels) {
      EXPECT_NE(k.source.find("kiln_syms ks"), std::string::npos) << k.name;
      EXPECT_FALSE(k.cubin.empty()) << k.name << " has no " << arch << " CUBIN";
    }
    for (const plan::GenericLaunch& gl : p.generic_launches) {
      EXPECT_EQ(gl.symbols, std::vector<std::string>{"b"});
      // The step holds the grid at b = 16, the section its polynomial.
      EXPECT_EQ(p.steps[gl.step].grid.x, plan::eval_grid_axis(gl.grid[0], {{"b", 16}}));
      EXPECT_LT(plan::eval_grid_axis(gl.grid[0], {{"b", 1}}), plan::eval_grid_axis(gl.grid[0], {{"b", 16}}) + 1);
    }
    std::vector<uint8_t> bytes = plan::serialize(p);
    plan::Plan back = plan::deserialize(bytes.data(), bytes.size(), "pw.plan");
    EXPECT_EQ(back.generic_launches, p.generic_launches);
    plan::load_graph(back, "pw.plan");  // the checks against the graph pass
  }
}

TEST(ShapeGenericKernels, PlanOnSimAtThreeShapesEqualsTheReference) {
  auto g = compiled(kPointwise, "sm_90");
  plan::Plan p = gpu_plan(*g, "sm_90");
  for (int64_t b : {1, 5, 16}) {
    std::unique_ptr<Graph> at = specialize_graph(*g, {{"b", b}}, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(b));
    std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
    std::vector<Tensor> got = run_plan_on_sim(p, *g, feed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].shape(), want[i].shape()) << "b=" << b;
      EXPECT_EQ(compare_tensors(got[i], want[i], {1e-5, 1e-4}), "") << "b=" << b << " output " << i;
    }
  }
  // Outside the profile: an error, never a run.
  std::unique_ptr<Graph> big = specialize_graph(*g, {{"b", 16}}, op_registry());
  std::map<std::string, Tensor> feed = testing::random_inputs(*big, 3);
  feed.at("x") = Tensor(TensorType(DType::F32, {17, 3, 24}));
  EXPECT_NE(error_of([&] { run_plan_on_sim(p, *g, feed); }).find("outside every shape profile"), std::string::npos);
}

// softmax / log_softmax over the static last axis: the register row kernel
// over symbolic rows (a warp per row and a block per row).
TEST(ShapeGenericKernels, SoftmaxRowsOnSimAtThreeShapesEqualTheReference) {
  const char* text =
      "graph @m(%x: f32[b,4,37], %w: f32[b,2,1500]) -> (f32[b,4,37], f32[b,2,1500]) symbols(b in [1, 40]) {\n"
      "  %s = softmax(%x) {axis=-1} : f32[b,4,37]\n"
      "  %l = log_softmax(%w) {axis=2} : f32[b,2,1500]\n"
      "  return %s, %l\n"
      "}\n";
  auto g = compiled(text, "sm_90");
  PlanBuildOptions po{"sm_90", "fp32", {}};
  po.profiles = {{{{"x", {1, 4, 37}, {40, 4, 37}, {40, 4, 37}}, {"w", {1, 2, 1500}, {40, 2, 1500}, {40, 2, 1500}}}}};
  plan::Plan p = build_plan(*g, po);
  ASSERT_EQ(p.generic_launches.size(), 2u);
  for (int64_t b : {1, 7, 40}) {
    std::unique_ptr<Graph> at = specialize_graph(*g, {{"b", b}}, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(b));
    std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
    std::vector<Tensor> got = run_plan_on_sim(p, *g, feed);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(compare_tensors(got[i], want[i], {1e-5, 1e-4}), "") << "b=" << b << " output " << i;
  }
  // Over another axis the row kernel does not apply: refused by name.
  auto other = parse_graph(
      "graph @m(%x: f32[b,4,37]) -> (f32[b,4,37]) symbols(b in [1, 40]) {\n"
      "  %s = softmax(%x) {axis=1} : f32[b,4,37]\n  return %s\n}\n",
      "sm1.kir");
  po.profiles = {{{{"x", {1, 4, 37}, {40, 4, 37}, {40, 4, 37}}}}};
  EXPECT_NE(
      error_of([&] {
        build_plan(*other, po);
      }).find("kiln has none yet for softmax (its kernel family (reduction) has no shape-generic kernel for it yet)"),
      std::string::npos);
}

// layer_normalization over static trailing dims, rows b*s symbolic (the
// encoder's shape: dynamic batch and sequence), with its mean / inv_std results.
TEST(ShapeGenericKernels, LayerNormRowsOnSimAtThreeShapesEqualTheReference) {
  const char* text =
      "graph @m(%x: f32[b,s,48], %g: f32[48], %c: f32[48]) -> (f32[b,s,48], f32[b,s,1], f32[b,s,1]) "
      "symbols(b in [1, 4], s in [1, 33]) {\n"
      "  %y, %mu, %r = layer_normalization(%x, %g, %c) {axis=-1, epsilon=1e-05} : f32[b,s,48], f32[b,s,1], "
      "f32[b,s,1]\n"
      "  return %y, %mu, %r\n"
      "}\n";
  auto g = compiled(text, "sm_90");
  PlanBuildOptions po{"sm_90", "fp32", {}};
  po.profiles = {{{{"x", {1, 1, 48}, {4, 33, 48}, {4, 33, 48}}}}};
  plan::Plan p = build_plan(*g, po);
  ASSERT_EQ(p.generic_launches.size(), 1u);
  EXPECT_EQ(p.generic_launches[0].symbols, (std::vector<std::string>{"b", "s"}));
  for (auto [b, sq] : {std::pair<int64_t, int64_t>{1, 1}, {2, 17}, {4, 33}}) {
    std::unique_ptr<Graph> at = specialize_graph(*g, {{"b", b}, {"s", sq}}, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(b * 100 + sq));
    std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
    std::vector<Tensor> got = run_plan_on_sim(p, *g, feed);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(compare_tensors(got[i], want[i], {1e-5, 1e-4}), "") << "b=" << b << " s=" << sq << " output " << i;
  }
}

// gemm / matmul with a symbolic M (SIMT kernel, row tiles counted per shape):
// NVRTC for sm_80 and sm_90, and plan-on-sim at three batches, one of them
// more than one row tile.
TEST(ShapeGenericKernels, GemmWithASymbolicMOnSimAtThreeShapesEqualsTheReference) {
  const char* text =
      "graph @m(%x: f32[n,40], %w: f32[40,24], %c: f32[24], %v: f32[24,9]) -> (f32[n,9]) symbols(n in [1, 300]) {\n"
      "  %h = gemm(%x, %w, %c) {alpha=0.5} : f32[n,24]\n"
      "  %y = matmul(%h, %v) : f32[n,9]\n"
      "  return %y\n"
      "}\n";
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(text, arch);
    PlanBuildOptions po{arch, "fp32", {}};
    po.profiles = {{{{"x", {1, 40}, {300, 40}, {300, 40}}}}};
    plan::Plan p = build_plan(*g, po);
    ASSERT_EQ(p.generic_launches.size(), 2u) << arch;
    for (const plan::Kernel& k : p.kernels) EXPECT_FALSE(k.cubin.empty()) << k.name;
    if (arch != "sm_90") continue;
    for (int64_t n : {1, 70, 300}) {
      std::unique_ptr<Graph> at = specialize_graph(*g, {{"n", n}}, op_registry());
      const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(n));
      std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
      std::vector<Tensor> got = run_plan_on_sim(p, *g, feed);
      EXPECT_EQ(compare_tensors(got[0], want[0], {1e-5, 1e-4}), "") << "n=" << n;
    }
  }
}

TEST(ShapeGenericKernels, LoadingChecksTheGenericLaunches) {
  auto g = compiled(kPointwise, "sm_90");
  const plan::Plan p = gpu_plan(*g, "sm_90");
  auto load = [](const plan::Plan& q) {
    std::vector<uint8_t> b = plan::serialize(q);
    plan::Plan back = plan::deserialize(b.data(), b.size(), "bad.plan");
    plan::load_graph(back, "bad.plan");
  };
  plan::Plan step = p;
  step.generic_launches[0].step = static_cast<uint32_t>(p.steps.size());
  EXPECT_EQ(error_of([&] { load(step); }),
            fmt::format("bad.plan: generic launch 0 names step {} (the launch list has {}, in increasing order)",
                        p.steps.size(), p.steps.size()));
  plan::Plan sym = p;
  sym.generic_launches[0].symbols = {"q"};
  EXPECT_EQ(error_of([&] { load(sym); }),
            "bad.plan: generic launch 0 reads symbol q, which the graph does not declare");
  plan::Plan grid = p;
  grid.generic_launches[0].grid[0].items = {{{"q"}, 2}};
  EXPECT_EQ(error_of([&] { load(grid); }), "bad.plan: generic launch 0's grid uses the undeclared symbol q");
  plan::Plan no_profiles = p;
  no_profiles.shapes = {};
  EXPECT_EQ(error_of([&] { load(no_profiles); }),
            "bad.plan: section 'generic launches' in a plan without shape profiles");
}

TEST(ShapeGenericKernels, AFamilyThatIsNotShapeGenericIsRefusedByName) {
  const char* text =
      "graph @m(%x: f32[b,4]) -> (f32[1,4]) symbols(b in [1, 8]) {\n"
      "  %h = reduce_sum(%x) {axes=[0], keepdims=1} : f32[1,4]\n"
      "  return %h\n"
      "}\n";
  auto g = parse_graph(text, "mm.kir");
  PlanBuildOptions po{"sm_90", "fp32", {}};
  po.profiles = {{{{"x", {1, 4}, {8, 4}, {8, 4}}}}};
  po.source_name = "mm.onnx";
  const std::string why = error_of([&] { build_plan(*g, po); });
  EXPECT_NE(why.find("mm.onnx: node (reduce_sum) producing %h: target sm_90 needs a shape-generic GPU kernel for "
                     "every node of a plan with shape profiles (b in [1, 8]), and kiln has none yet for reduce_sum "
                     "(its kernel family (reduction) has no shape-generic kernel for it yet)"),
            std::string::npos)
      << why;
}

}  // namespace
}  // namespace kiln
