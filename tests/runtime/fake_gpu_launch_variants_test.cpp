// Launch variants on the runtime's GPU path (strict fake driver, the plan's
// kernels run on the simulator): the dynamic-batch CNN compiled once with
// every node also specialised for its opt shape (batch 3) runs the
// specialised kernels at batch 3 and the shape-generic ones at the other
// batches, each matching the reference backend; each shape's CUDA Graph is
// captured once with its own launch list and replayed on a repeat. A GEMM's
// and a channels-last conv's size buckets launch their own kernels for their
// rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/gpu_executor.h"
#include "tests/runtime/fake_gpu_util.h"

namespace kiln::fakegpu {
namespace {

using FakeGpuLaunchVariants = FakeGpu;

TEST_F(FakeGpuLaunchVariants, CnnRunsTheOptShapesKernelsAtBatch3AndTheGenericOnesElsewhere) {
  const plan::Plan& p = plans().at("profile_cnn_opt3");
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  ASSERT_FALSE(p.launch_variants.empty()) << "no launch variant in the plan";
  std::set<std::string> specialised, generic;
  for (const plan::LaunchVariant& v : p.launch_variants) {
    EXPECT_EQ(plan::variant_text(v), "the opt shape of profile 0 (batch=3)");
    for (const plan::Step& s : v.steps) specialised.insert(p.kernels.at(s.kernel).name);
  }
  // Launches at one static shape need no variant: the layout pass's
  // transposes of the weights (graph inputs) into NHWC.
  std::set<std::string> fixed;
  for (const plan::Step& s : p.steps)
    if (s.kind == plan::StepKind::Kernel) {
      generic.insert(p.kernels.at(s.kernel).name);
      if (p.kernels.at(s.kernel).source.find("kiln_syms ks") == std::string::npos)
        fixed.insert(p.kernels.at(s.kernel).name);
    }
  std::vector<uint8_t> bytes = plan_for("profile_cnn_opt3");
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "cnn.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  std::unique_ptr<Graph> g = profile_cnn_graph();
  auto captured = [&] { return ctx.gpu_context()->graph_cache_stats().captures; };
  for (int64_t n : {3, 5, 3, 1}) {
    std::unique_ptr<Graph> at = specialize_graph(*g, {{"batch", n}}, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(n));
    for (const Value* v : at->inputs()) ctx.bind_input(v->name(), feed.at(v->name()).raw(), v->type(), false);
    Tensor out(at->outputs()[0]->type());
    ctx.bind_output("y", out.raw(), out.type(), false);
    launched_kernels().clear();
    ctx.run();
    EXPECT_EQ(compare_tensors(out, ReferenceExecutor(*at).run(feed)[0], {1e-5, 1e-4}), "") << "batch " << n;
    const std::vector<std::string> ran = launched_kernels();
    ASSERT_FALSE(ran.empty()) << "batch " << n;
    const auto from = [&](const std::set<std::string>& set) {
      return static_cast<size_t>(std::count_if(ran.begin(), ran.end(), [&](const auto& k) { return set.count(k); }));
    };
    if (n == 3) {
      EXPECT_EQ(from(specialised) + from(fixed), ran.size()) << "batch 3 (the opt shape) ran a shape-generic kernel";
    } else {
      EXPECT_EQ(from(generic), ran.size()) << "batch " << n << " ran a kernel specialised for batch 3";
    }
  }
  // One graph per distinct shape (3, 5, 1): the repeat at 3 replayed its own.
  EXPECT_EQ(captured(), 3u);
  EXPECT_EQ(ctx.gpu_context()->graph_cache_stats().cached, 3u);
}

// Per-step profiling keeps the plan's own step count: a variant's time is
// given to the first step it replaces.
TEST_F(FakeGpuLaunchVariants, ProfileAtTheOptShapeGivesOneTimePerPlanStep) {
  const plan::Plan& p = plans().at("profile_cnn_opt3");
  std::vector<uint8_t> bytes = plan_for("profile_cnn_opt3");
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "cnn.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  std::unique_ptr<Graph> g = profile_cnn_graph();
  std::unique_ptr<Graph> at = specialize_graph(*g, {{"batch", 3}}, op_registry());
  const std::map<std::string, Tensor> feed = testing::random_inputs(*at, 3);
  for (const Value* v : at->inputs()) ctx.bind_input(v->name(), feed.at(v->name()).raw(), v->type(), false);
  Tensor out(at->outputs()[0]->type());
  ctx.bind_output("y", out.raw(), out.type(), false);
  launched_kernels().clear();
  const std::vector<rt::ProfileEntry>& prof = ctx.profile();
  EXPECT_EQ(prof.size(), p.steps.size());
  EXPECT_EQ(compare_tensors(out, ReferenceExecutor(*at).run(feed)[0], {1e-5, 1e-4}), "");
  std::set<std::string> specialised;
  for (const plan::LaunchVariant& v : p.launch_variants)
    for (const plan::Step& s : v.steps) specialised.insert(p.kernels.at(s.kernel).name);
  // Launches at one static shape (the layout pass's weight transposes) need no variant.
  for (const plan::Step& s : p.steps)
    if (s.kind == plan::StepKind::Kernel && p.kernels.at(s.kernel).source.find("kiln_syms ks") == std::string::npos)
      specialised.insert(p.kernels.at(s.kernel).name);
  for (const std::string& k : launched_kernels()) EXPECT_TRUE(specialised.count(k)) << k << " is not specialised";
  // Each entry names what ran: a variant's kernels on the first step it
  // replaces (the others say where their time went), never a generic kernel
  // that did not run.
  const std::set<std::string> ran(launched_kernels().begin(), launched_kernels().end());
  size_t named_variants = 0;
  for (const rt::ProfileEntry& entry : prof) {
    if (entry.op == "copy" || entry.name.rfind("launch variant ", 0) == 0) continue;
    for (size_t at = 0, end; at != std::string::npos; at = end == std::string::npos ? end : end + 3) {
      end = entry.name.find(" + ", at);
      const std::string k = entry.name.substr(at, end == std::string::npos ? end : end - at);
      EXPECT_TRUE(ran.count(k)) << "profile entry " << entry.name << " names " << k << ", which did not run";
    }
    for (const plan::LaunchVariant& v : p.launch_variants)
      for (const plan::Step& vs : v.steps) named_variants += entry.name.find(p.kernels.at(vs.kernel).name) == 0;
  }
  EXPECT_GT(named_variants, 0u) << "no profile entry names a launch variant's kernel";
  // The variants the run issued: every one at the opt shape, none at batch 5.
  std::vector<int> all(p.launch_variants.size());
  for (size_t v = 0; v < all.size(); ++v) all[v] = static_cast<int>(v);
  std::vector<int> issued = ctx.launch_variants_run();
  std::sort(issued.begin(), issued.end());
  EXPECT_EQ(issued, all);
  std::unique_ptr<Graph> at5 = specialize_graph(*g, {{"batch", 5}}, op_registry());
  const std::map<std::string, Tensor> feed5 = testing::random_inputs(*at5, 5);
  for (const Value* v : at5->inputs()) ctx.bind_input(v->name(), feed5.at(v->name()).raw(), v->type(), false);
  Tensor out5(at5->outputs()[0]->type());
  ctx.bind_output("y", out5.raw(), out5.type(), false);
  ctx.run();
  EXPECT_EQ(ctx.launch_variants_run(), std::vector<int>{});
  for (const rt::ProfileEntry& entry : ctx.profile())
    EXPECT_EQ(entry.name.rfind("launch variant ", 0), std::string::npos);
}

// GEMM size buckets: a tensor-core matmul over 1..2048 rows; each bucket
// starting at 300 rows or fewer runs its own (shape-generic) kernels there,
// a shape past every bucket the default ones, each shape with its own graph.
TEST_F(FakeGpuLaunchVariants, GemmSizeBucketsLaunchTheirKernelsPerShape) {
  auto g = parse_graph(
      "graph @m(%x: f16[b,768], %w: f16[768,768]) -> (f16[b,768]) symbols(b in [1, 2048]) {\n"
      "  %y = matmul(%x, %w) : f16[b,768]\n  return %y\n}\n");
  CompileOptions co;
  co.pass.target = "sm_90";
  co.symbolic = true;
  compile_graph(*g, co);
  PlanBuildOptions po{"sm_90", "fp16", {}};
  po.profiles = {plan::Profile{{{"x", {1, 768}, {2048, 768}, {2048, 768}}}}};
  const plan::Plan p = build_plan(*g, po);
  std::vector<std::pair<int64_t, std::set<std::string>>> runs;  // rows, the kernels that must run
  int64_t past_buckets = 1;
  for (const plan::LaunchVariant& v : p.launch_variants) {
    if (v.kind == plan::VariantKind::OptShape) continue;  // the opt shape (2048 rows) is not run here
    past_buckets = std::max(past_buckets, v.when.at(0).hi + 1);
    if (v.when.at(0).lo > 300) continue;
    std::set<std::string> ks;
    for (const plan::Step& s : v.steps) ks.insert(p.kernels.at(s.kernel).name);
    runs.emplace_back(v.when.at(0).lo, ks);
  }
  ASSERT_FALSE(runs.empty()) << "no bucket at 300 rows or fewer";
  if (past_buckets < 2048) {
    std::set<std::string> ks;
    for (const plan::Step& s : p.steps) ks.insert(p.kernels.at(s.kernel).name);
    runs.emplace_back(past_buckets, ks);
  }
  std::vector<uint8_t> bytes = plan_bytes(p);
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "gemm.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  for (const auto& [rows, want] : runs) {
    std::unique_ptr<Graph> at = specialize_graph(*g, {{"b", rows}}, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(rows));
    for (const Value* v : at->inputs()) ctx.bind_input(v->name(), feed.at(v->name()).raw(), v->type(), false);
    Tensor out(at->outputs()[0]->type());
    ctx.bind_output("y", out.raw(), out.type(), false);
    launched_kernels().clear();
    ctx.run();
    EXPECT_EQ(compare_tensors(out, ReferenceExecutor(*at).run(feed)[0], {2e-2, 2e-2}), "") << "rows " << rows;
    ASSERT_FALSE(launched_kernels().empty());
    for (const std::string& k : launched_kernels()) EXPECT_TRUE(want.count(k)) << "rows " << rows << " ran " << k;
  }
  EXPECT_EQ(ctx.gpu_context()->graph_cache_stats().captures, runs.size());
}

// Conv size buckets: a channels-last f16 conv over a symbolic batch and
// image size (its rows n*h*w); an image size in the first bucket runs that
// bucket's kernels, one between the buckets the default ones, each equal to
// the reference, each shape with its own graph.
TEST_F(FakeGpuLaunchVariants, NhwcConvSizeBucketsLaunchTheirKernelsPerImageSize) {
  auto g = parse_graph(
      "graph @m(%x: f16[n,h,w,256]{nhwc}, %w: f16[512,3,3,256]{nhwc}) -> (f16[n,h,w,512]{nhwc}) "
      "symbols(n in [1, 8], h in [2, 64], w in [2, 64]) {\n"
      "  %y = conv(%x, %w) {dilations=[1,1], group=1, layout=\"nhwc\", pads=[1,1,1,1], strides=[1,1]} : "
      "f16[n,h,w,512]{nhwc}\n  return %y\n}\n");
  CompileOptions co;
  co.pass.target = "sm_90";
  co.symbolic = true;
  compile_graph(*g, co);
  PlanBuildOptions po{"sm_90", "fp16", {}};
  po.profiles = {plan::Profile{{{"x", {1, 2, 2, 256}, {8, 64, 64, 256}, {8, 64, 64, 256}}}}};
  const plan::Plan p = build_plan(*g, po);
  const plan::LaunchVariant* first = nullptr;
  for (const plan::LaunchVariant& v : p.launch_variants)
    if (v.kind == plan::VariantKind::Bucket && (!first || v.when.at(0).lo < first->when.at(0).lo)) first = &v;
  ASSERT_TRUE(first) << "no conv size bucket";
  ASSERT_LE(first->when.at(0).lo, 6);
  std::set<std::string> bucket, generic;
  for (const plan::Step& s : first->steps) bucket.insert(p.kernels.at(s.kernel).name);
  for (const plan::Step& s : p.steps) generic.insert(p.kernels.at(s.kernel).name);
  // 1x2x3 = 6 rows: the first bucket; 1x13x13 = 169 rows: between the buckets at the sampled shapes.
  std::vector<std::tuple<int64_t, int64_t, int64_t, std::set<std::string>>> runs = {{1, 2, 3, bucket}};
  bool between = true;
  for (const plan::LaunchVariant& v : p.launch_variants)
    between = between && !(v.when.at(0).lo <= 169 && 169 <= v.when.at(0).hi);
  if (between) runs.emplace_back(1, 13, 13, generic);
  std::vector<uint8_t> bytes = plan_bytes(p);
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "conv.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  for (const auto& [n, h, w, want] : runs) {
    std::unique_ptr<Graph> at = specialize_graph(*g, {{"n", n}, {"h", h}, {"w", w}}, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(h));
    for (const Value* v : at->inputs()) ctx.bind_input(v->name(), feed.at(v->name()).raw(), v->type(), false);
    Tensor out(at->outputs()[0]->type());
    ctx.bind_output("y", out.raw(), out.type(), false);
    launched_kernels().clear();
    ctx.run();
    EXPECT_EQ(compare_tensors(out, ReferenceExecutor(*at).run(feed)[0], {2.5e-3, 1e-3}), "")
        << n << "x" << h << "x" << w;
    ASSERT_FALSE(launched_kernels().empty());
    for (const std::string& k : launched_kernels())
      EXPECT_TRUE(want.count(k)) << n << "x" << h << "x" << w << " ran " << k;
  }
  EXPECT_EQ(ctx.gpu_context()->graph_cache_stats().captures, runs.size());
}

}  // namespace
}  // namespace kiln::fakegpu
