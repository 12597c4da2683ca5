// compile -> plan bytes -> load -> run equals running the compiled graph
// directly: on the CPU reference path of the runtime (tiny_cnn), and on the
// simulator running the plan's own kernels and launch list (a pointwise +
// reduction graph, compiled for sm_90 through NVRTC).
#include <gtest/gtest.h>

#include "backends/reference/executor.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "runtime/engine.h"
#include "runtime/plan_graph.h"
#include "tests/unit/plan_test_util.h"
#include "tests/unit/pointwise_reduction_plan.h"
#include "backends/compare.h"
#include "backends/plan_sim.h"

namespace kiln {
namespace {

std::vector<Tensor> run_engine(const rt::Engine& e, const std::map<std::string, Tensor>& feed) {
  auto shared = std::shared_ptr<const rt::Engine>(&e, [](const rt::Engine*) {});
  rt::Context ctx(shared);
  return testing::run_on_host(ctx, feed);
}

TEST(PlanRoundTrip, TinyCnnOnTheRuntimeCpuPathEqualsTheCompiledGraph) {
  auto g = testing::compile_onnx(testing::tiny_cnn_path());
  std::vector<uint8_t> bytes = testing::plan_bytes(*g);
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "tiny_cnn.plan", rt::Backend::Auto);
  EXPECT_FALSE(e->on_gpu());
  EXPECT_EQ(e->info().rfind("CPU reference path (", 0), 0u) << e->info();
  auto feed = testing::random_inputs(*g, 3);
  std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
  std::vector<Tensor> got = run_engine(*e, feed);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].type(), want[0].type());
  EXPECT_TRUE(got[0].same_bytes(want[0]));
  double sum = 0;
  for (int64_t i = 0; i < got[0].numel(); ++i) sum += got[0].get_double(i);
  EXPECT_NEAR(sum, 1.0, 1e-5);  // softmax probabilities
  // The loaded graph prints as the compiled one.
  EXPECT_EQ(print_graph(e->graph()), print_graph(*g));
}

using testing::kPointwiseReductionGraph;

TEST(PlanRoundTrip, PlanKernelsAndLaunchListOnTheSimulatorEqualTheCompiledGraph) {
  if (!plan_sim_available()) GTEST_SKIP() << "kiln built without codegen: no GPU kernels in plans";
  auto g = testing::compile_text(kPointwiseReductionGraph, "sm_90");
  plan::Plan built = build_plan(*g, {"sm_90", "fp32", {}});
  ASSERT_TRUE(built.meta.gpu_kernels) << built.meta.no_gpu_reason << "\n" << print_graph(*g);
  EXPECT_EQ(built.meta.archs, std::vector<std::string>{"sm_90"});
  ASSERT_FALSE(built.kernels.empty());
  for (const plan::Kernel& k : built.kernels) {
    EXPECT_FALSE(k.cubin.empty()) << k.name;
    EXPECT_NE(k.ptx.find(".entry " + k.name), std::string::npos) << k.name;
  }
  int launches = 0, copies = 0;
  for (const plan::Step& st : built.steps) (st.kind == plan::StepKind::Copy ? copies : launches)++;
  EXPECT_GE(launches, 3) << print_graph(*g);  // fused pointwise, reduce_max, softmax
  EXPECT_GE(copies, 1) << print_graph(*g);    // the input returned as an output
  std::vector<uint8_t> bytes = plan::serialize(built);
  EXPECT_TRUE(bytes == testing::plan_bytes(*g, "sm_90"));  // deterministic, CUBIN included
  plan::Plan p = plan::deserialize(bytes.data(), bytes.size(), "m.plan", {"sm_90"});
  auto loaded = plan::load_graph(p);
  auto feed = testing::random_inputs(*g, 5);
  std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
  std::vector<Tensor> got = run_plan_on_sim(p, *loaded, feed);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].type(), want[i].type()) << i;
    EXPECT_EQ(compare_tensors(got[i], want[i], {1e-5, 1e-4}), "") << "output " << i;
  }
  // The runtime takes the GPU path when a driver and device exist (then this
  // checks it), else the CPU path, saying there is no driver or device.
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "m.plan", rt::Backend::Auto);
  if (!e->on_gpu()) {
    EXPECT_EQ(e->info().rfind("CPU reference path (", 0), 0u) << e->info();
    EXPECT_TRUE(e->info().find("no CUDA driver (dlopen libcuda.so.1: ") != std::string::npos ||
                e->info().find("no CUDA device") != std::string::npos ||
                e->info().find("does not start (cuInit") != std::string::npos)
        << e->info();
  } else {
    EXPECT_EQ(e->info().rfind("GPU sm_", 0), 0u) << e->info();
  }
  std::vector<Tensor> ran = run_engine(*e, feed);
  ASSERT_EQ(ran.size(), want.size());
  for (size_t i = 0; i < ran.size(); ++i)
    EXPECT_EQ(compare_tensors(ran[i], want[i], {1e-5, 1e-4}), "") << "runtime output " << i << ": " << e->info();
}

// resize has no kernel emitter (at the time of writing): the plan carries no
// GPU kernels, says which nodes lack one, and the GPU path refuses it.
TEST(PlanRoundTrip, NodesWithoutEmittersMeanNoGpuKernelsAndTheGpuPathSaysWhich) {
  if (!plan_sim_available()) GTEST_SKIP() << "kiln built without codegen";
  // Every op the default pipeline leaves has an emitter; a window op (no
  // operands, always folded by fold-constants) has none, so the graph skips
  // folding: fuse and plan-memory only.
  auto g = testing::parse(R"(graph @m(%x: f32[4]) -> (f32[4]) {
    %w = hann_window() {size=4} : f32[4]
    %c = add(%x, %w) : f32[4]
    return %c
  })");
  CompileOptions o;
  o.pass.target = "sm_90";
  o.passes = {"fuse", "plan-memory"};
  compile_graph(*g, o);
  plan::Plan p = build_plan(*g, {"sm_90", "fp32", {}});
  ASSERT_FALSE(p.meta.gpu_kernels);
  EXPECT_NE(p.meta.no_gpu_reason.find("1 node(s) have no kernel emitter yet (hann_window x1): node "),
            std::string::npos)
      << p.meta.no_gpu_reason;
  EXPECT_TRUE(p.kernels.empty());
  EXPECT_TRUE(p.steps.empty());
  std::vector<uint8_t> bytes = plan::serialize(p);
  try {
    rt::Engine::load(bytes.data(), bytes.size(), "m.plan", rt::Backend::Gpu);
    FAIL() << "the GPU path accepted a plan without kernels";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.plan: the GPU backend is not available: the plan has no GPU kernels: 1 "
                                         "node(s) have no kernel emitter yet (hann_window x1)"),
              std::string::npos)
        << e.what();
  }
  // The CPU path runs it.
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "m.plan", rt::Backend::Auto);
  auto feed = testing::random_inputs(*g, 2);
  std::vector<Tensor> got = run_engine(*e, feed);
  EXPECT_TRUE(got[0].same_bytes(ReferenceExecutor(*g).run(feed)[0]));
}

// tiny_cnn (conv, batchnorm, relu, maxpool, global average pool, gemm,
// softmax) compiled for sm_90: when every node has an emitter, its plan's
// kernels and launch list on the simulator equal the compiled graph.
TEST(PlanRoundTrip, TinyCnnGpuPlanOnTheSimulator) {
  if (!plan_sim_available()) GTEST_SKIP() << "kiln built without codegen";
  auto g = testing::compile_onnx(testing::tiny_cnn_path(), "sm_90");
  plan::Plan p = build_plan(*g, {"sm_90", "fp32", {}});
  if (!p.meta.gpu_kernels) GTEST_SKIP() << "tiny_cnn still lacks emitters: " << p.meta.no_gpu_reason;
  std::vector<uint8_t> bytes = plan::serialize(p);
  plan::Plan q = plan::deserialize(bytes.data(), bytes.size(), "tiny.plan", {"sm_90"});
  auto loaded = plan::load_graph(q);
  auto feed = testing::random_inputs(*g, 8);
  std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
  std::vector<Tensor> got = run_plan_on_sim(q, *loaded, feed);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(compare_tensors(got[0], want[0], {1e-5, 1e-4}), "");
}

}  // namespace
}  // namespace kiln
