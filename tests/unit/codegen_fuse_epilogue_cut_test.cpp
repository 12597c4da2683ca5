// When codegen refuses a GEMM/conv epilogue group, the fuser keeps the longest
// epilogue prefix codegen takes and ends the epilogue just before the refused
// op (passes/fuse.cpp, longest_feasible_epilogue; docs/fusion.md). Before,
// the whole group was split back: the anchor alone, every epilogue op in
// kernels of its own. Checked with a stand-in codegen on a static graph (the
// reference backend keeps the meaning) and with the real codegen on a plan
// with shape profiles, where a gather along a symbolic dim has no
// shape-generic epilogue form: the plan runs on the simulator equal to the
// reference backend at three shapes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/unit/pass_test_util.h"
#include "tests/unit/shape_generic_util.h"

namespace kiln {
namespace {

using testing::expect_pass_keeps_meaning;
using testing::parse;

std::vector<const Node*> fused_nodes(const Graph& g) {
  std::vector<const Node*> r;
  for (const auto& n : g.nodes())
    if (n->op() == "fused") r.push_back(n.get());
  return r;
}

// The ops of a fused node's body, in order.
std::vector<std::string> body_ops(const Node& f) {
  std::vector<std::string> ops;
  for (const auto& n : f.body()->nodes()) ops.push_back(n->op());
  return ops;
}

// A stand-in codegen with no tanh in GEMM epilogues: the bias add before the
// tanh stays with the matmul; the tanh and the relu reading it are one
// pointwise kernel (before: the matmul alone, add+tanh+relu pointwise).
TEST(FuseEpilogueCut, RefusedOpEndsTheEpilogueAndThePrefixStays) {
  auto g = parse(R"(graph @m(%a: f32[4,8], %b: f32[8,6], %bias: f32[6]) -> (f32[4,6]) {
    %m = matmul(%a, %b) : f32[4,6]
    %x = add(%m, %bias) : f32[4,6]
    %t = tanh(%x) : f32[4,6]
    %y = relu(%t) : f32[4,6]
    return %y
  })");
  PassOptions o;
  o.why_no_kernel = [](const Node& n) -> std::string {
    if (n.attrs().get_string("kind", "") != "gemm_epilogue") return "";
    for (const auto& bn : n.body()->nodes())
      if (bn->op() == "tanh") return "no tanh in a gemm epilogue today";
    return "";
  };
  auto fused = expect_pass_keeps_meaning(*g, {"fuse"}, o);
  auto f = fused_nodes(*fused);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0]->attrs().get_string("kind", ""), "gemm_epilogue");
  EXPECT_EQ(body_ops(*f[0]), (std::vector<std::string>{"matmul", "add"}));
  EXPECT_EQ(f[1]->attrs().get_string("kind", ""), "pointwise");
  EXPECT_EQ(body_ops(*f[1]), (std::vector<std::string>{"tanh", "relu"}));
  PassStats st;
  auto again = g->clone();
  create_pass("fuse")->run(*again, o, st);
  EXPECT_EQ(st.counters["groups-split-back"], 1);
}

// A long epilogue refused at its last op keeps every op before it (the
// bisection finds the last one codegen takes, asking a few prefixes).
TEST(FuseEpilogueCut, LongEpilogueKeepsAllButTheRefusedTail) {
  std::string text = "graph @m(%a: f32[4,8], %b: f32[8,6]) -> (f32[4,6]) {\n  %v0 = matmul(%a, %b) : f32[4,6]\n";
  const int n = 40;
  for (int i = 1; i <= n; ++i)
    text += fmt::format("  %v{} = {}(%v{}) : f32[4,6]\n", i, i == n ? "tanh" : (i % 2 ? "relu" : "neg"), i - 1);
  text += fmt::format("  return %v{}\n}}\n", n);
  auto g = parse(text);
  int asked = 0;
  PassOptions o;
  o.why_no_kernel = [&asked](const Node& f) -> std::string {
    ++asked;
    if (f.attrs().get_string("kind", "") != "gemm_epilogue") return "";
    for (const auto& bn : f.body()->nodes())
      if (bn->op() == "tanh") return "no tanh in a gemm epilogue today";
    return "";
  };
  auto fused = expect_pass_keeps_meaning(*g, {"fuse"}, o);
  auto f = fused_nodes(*fused);
  ASSERT_EQ(f.size(), 1u);  // the tanh alone is no fused node
  EXPECT_EQ(f[0]->attrs().get_string("kind", ""), "gemm_epilogue");
  EXPECT_EQ(f[0]->body()->nodes().size(), static_cast<size_t>(n));
  EXPECT_LT(asked, 40) << "one question per epilogue op: the prefix is not bisected";
}

// The real codegen, a plan with shape profiles: the gather of one position
// along the symbolic seq has no shape-generic epilogue form.
const char* kCutMid =
    "graph @cut_mid(%x: f32[batch,seq,32], %bias: f32[64]) -> (f32[batch,seq,64], f32[batch,64]) "
    "symbols(batch in [1, 4], seq in [1, 33]) {\n"
    "  %w = const f32[32,64] splat<0.125>\n"
    "  %p = matmul(%x, %w) : f32[batch,seq,64]\n"
    "  %b = add(%p, %bias) : f32[batch,seq,64]\n"
    "  %r = relu(%b) : f32[batch,seq,64]\n"
    "  %i = const i64[] splat<0>\n"
    "  %g = gather(%r, %i) {axis=1} : f32[batch,64]\n"
    "  %n = neg(%g) : f32[batch,64]\n"
    "  return %r, %n\n"
    "}\n";

TEST(FuseEpilogueCut, ShapeGenericCutOnSimEqualsTheReference) {
  auto g = testing::compile_symbolic(kCutMid, "cut_mid.kir", "sm_90");
  auto f = fused_nodes(*g);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0]->attrs().get_string("kind", ""), "gemm_epilogue");
  EXPECT_EQ(body_ops(*f[0]), (std::vector<std::string>{"matmul", "add", "relu"}));
  EXPECT_EQ(body_ops(*f[1]), (std::vector<std::string>{"gather", "neg"}));
  const plan::Plan p =
      testing::profile_plan(*g, "sm_90", {{{"x", {1, 3, 32}, {4, 33, 32}, {4, 33, 32}}}}, "cut_mid.onnx");
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  EXPECT_EQ(p.steps.size(), 2u) << "launches";
  EXPECT_EQ(p.generic_launches.size(), p.steps.size()) << "every launch is shape-generic";
  for (const SymbolBindings& at : std::vector<SymbolBindings>{
           {{"batch", 1}, {"seq", 3}}, {{"batch", 2}, {"seq", 17}}, {{"batch", 4}, {"seq", 33}}})
    testing::expect_plan_on_sim_equals_reference(p, *g, at, testing::seed_of(at, 7), {1e-5, 1e-5});
}

}  // namespace
}  // namespace kiln
