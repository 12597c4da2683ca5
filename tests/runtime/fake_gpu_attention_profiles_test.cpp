// A KV-cache decoder's attention from one plan with a shape profile on the
// runtime's GPU path (strict fake driver; the launches run the plan's
// kernels on the simulator): the tensor-core attention kernel is
// shape-generic in the query length and the key length (past + seq), so a
// prefill and decode steps at several pasts run from one sm_90 plan, each
// launch getting its own grid (batch * heads, query tiles, key splits: a long
// past splits, a short one does not), kiln_syms, and the split-KV workspace
// and tile counters planned at the largest shapes.
#include <gtest/gtest.h>

#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/gpu_executor.h"
#include "runtime/plan_format.h"
#include "tests/runtime/fake_gpu_util.h"

namespace kiln::fakegpu {
namespace {

using FakeGpuProfiles = FakeGpu;

constexpr const char* kDecodeAttention =
    R"(graph @m(%q: f16[1,4,seq,64], %k: f16[1,4,kv,64], %v: f16[1,4,kv,64]) -> (f16[1,4,seq,64])
    symbols(seq in [1, 8], kv in [1, 1100]) {
    %o = attention(%q, %k, %v) {scale=0.125, causal=1} : f16[1,4,seq,64]
    return %o
  })";

TEST_F(FakeGpuProfiles, AttentionPrefillAndDecodeStepsRunFromOnePlan) {
  std::unique_ptr<Graph> g = parse_graph(kDecodeAttention);
  CompileOptions co;
  co.pass.target = "sm_90";
  co.symbolic = true;
  compile_graph(*g, co);
  PlanBuildOptions o{"sm_90", "fp32", {}};
  o.profiles = {plan::Profile{{{"q", {1, 4, 1, 64}, {1, 4, 1, 64}, {1, 4, 8, 64}},
                               {"k", {1, 4, 1, 64}, {1, 4, 1100, 64}, {1, 4, 1100, 64}},
                               {"v", {1, 4, 1, 64}, {1, 4, 1100, 64}, {1, 4, 1100, 64}}}}};
  const plan::Plan p = build_plan(*g, o);
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  ASSERT_EQ(p.generic_launches.size(), 1u);
  const plan::GenericLaunch& gl = p.generic_launches[0];
  ASSERT_NE(p.kernels.at(p.steps.at(gl.step).kernel).source.find("split-KV"), std::string::npos);
  std::vector<uint8_t> bytes = plan_bytes(p);
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "decode.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  const rt::GpuContext* gpu = ctx.gpu_context();
  ASSERT_NE(gpu, nullptr);
  size_t shapes = 0;
  for (auto [seq, past] : {std::pair<int64_t, int64_t>{8, 0}, {1, 5}, {1, 17}, {1, 700}, {2, 1098}}) {
    const SymbolBindings at_shape = {{"seq", seq}, {"kv", past + seq}};
    std::unique_ptr<Graph> at = specialize_graph(*g, at_shape, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(past * 10 + seq));
    for (const Value* v : at->inputs()) ctx.bind_input(v->name(), feed.at(v->name()).raw(), v->type(), false);
    Tensor out(at->outputs()[0]->type());
    EXPECT_EQ(ctx.output_shape("o"), (Shape{1, 4, seq, 64}));
    ctx.bind_output("o", out.raw(), out.type(), false);
    ctx.run();
    ++shapes;
    EXPECT_EQ(gpu->graph_cache_stats().captures, shapes) << "one graph per shape";
    EXPECT_EQ(compare_tensors(out, ReferenceExecutor(*at).run(feed)[0], {2e-3, 2e-2}), "")
        << "seq " << seq << " past " << past << " (" << plan::eval_grid_axis(gl.grid[2], at_shape) << " key splits)";
  }
}

}  // namespace
}  // namespace kiln::fakegpu
