// The contract between the fuser and codegen (passes/fusion_capabilities.h,
// issue 15): with codegen's why_no_kernel handed to the fuse pass, every
// fused node it makes has a kernel, groups codegen refuses are not formed
// (or are split back), and the graph keeps its meaning. The structures are
// the ones that broke GPU builds: Inception's concat read both by a conv and
// by an overlapping max_pool, and attention whose mask is a where with a
// mild fill (not -inf), which no attention kernel computes exactly.
#include <gtest/gtest.h>

#include "codegen/emitter_table.h"
#include "codegen/kernel_build.h"
#include "ir/error.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

using testing::expect_pass_keeps_meaning;
using testing::parse;

PassOptions with_codegen() {
  PassOptions o;
  o.target = "sm_90";
  o.why_no_kernel = codegen::why_no_kernel;
  return o;
}

std::vector<const Node*> fused_nodes(const Graph& g) {
  std::vector<const Node*> r;
  for (const auto& n : g.nodes())
    if (n->op() == "fused") r.push_back(n.get());
  return r;
}

// Every node that launches something gets a kernel from codegen.
void expect_every_node_has_a_kernel(const Graph& g) {
  for (const auto& n : g.nodes()) {
    if (!n->body() && (n->op() == "reshape" || n->op() == "identity")) continue;
    EXPECT_EQ(codegen::why_no_kernel(*n), "") << n->describe();
  }
}

// GoogLeNet's inception block: the concat of two branches feeds a 1x1 conv
// and a 3x3 stride-1 max_pool (overlapping windows).
const char* kInceptionPool =
    R"(graph @inception(%a: f32[1,4,6,6], %b: f32[1,4,6,6], %w: f32[8,8,1,1]) -> (f32[1,8,6,6], f32[1,8,6,6]) {
  %ra = relu(%a) : f32[1,4,6,6]
  %rb = relu(%b) : f32[1,4,6,6]
  %cat = concat(%ra, %rb) {axis=1} : f32[1,8,6,6]
  %c = conv(%cat, %w) {dilations=[1,1], pads=[0,0,0,0], strides=[1,1]} : f32[1,8,6,6]
  %p = max_pool(%cat) {dilations=[1,1], kernel_shape=[3,3], pads=[1,1,1,1], strides=[1,1]} : f32[1,8,6,6]
  return %c, %p
})";

TEST(FusionContract, OverlappingPoolTakesNoPrologueWhoseValuesAreResults) {
  auto g = parse(kInceptionPool);
  // Without the contract the fuser makes the group codegen refuses (this is
  // the GPU build failure of issue 15).
  auto plain = expect_pass_keeps_meaning(*g, {"fuse"});
  bool refused = false;
  for (const Node* f : fused_nodes(*plain)) refused |= !codegen::why_no_kernel(*f).empty();
  EXPECT_TRUE(refused) << "the structural rules alone no longer form the refused group";

  auto fused = expect_pass_keeps_meaning(*g, {"fuse"}, with_codegen());
  expect_every_node_has_a_kernel(*fused);
  // The max_pool is a kernel of its own.
  int pools = 0;
  for (const auto& n : fused->nodes()) pools += n->op() == "max_pool";
  EXPECT_EQ(pools, 1);
}

TEST(FusionContract, RefusedPrologueIsExplainedInStats) {
  auto g = parse(kInceptionPool);
  PassStats st;
  create_pass("fuse")->run(*g, with_codegen(), st);
  bool explained = false;
  for (const std::string& n : st.notes)
    explained |= n.find("-> %p (max_pool)") != std::string::npos && n.find("overlapping windows") != std::string::npos;
  EXPECT_TRUE(explained) << "no note says why the concat did not join the max_pool";
}

// softmax(where(mask, QK^T * c, -10000)) V: a where with a fill that is not
// -inf is no additive mask, so no attention op is recognised; the fuser's own
// attention group (matmul, softmax, matmul) has no kernel and is not formed.
const char* kMildFillAttention =
    R"(graph @attn(%q: f32[1,2,5,4], %k: f32[1,2,4,5], %v: f32[1,2,5,4], %mask: bool[1,1,5,5]) -> (f32[1,2,5,4]) {
  %c = const f32[] splat<0.5>
  %fill = const f32[] splat<-10000.0>
  %s = matmul(%q, %k) : f32[1,2,5,5]
  %sc = mul(%s, %c) : f32[1,2,5,5]
  %sm = where(%mask, %sc, %fill) : f32[1,2,5,5]
  %p = softmax(%sm) {axis=3} : f32[1,2,5,5]
  %o = matmul(%p, %v) : f32[1,2,5,4]
  return %o
})";

TEST(FusionContract, AttentionGroupWithoutAttentionKernelIsNotFormed) {
  auto g = parse(kMildFillAttention);
  auto plain = expect_pass_keeps_meaning(*g, {"recognize-patterns", "fuse"});
  bool refused = false;
  for (const Node* f : fused_nodes(*plain)) refused |= !codegen::why_no_kernel(*f).empty();
  EXPECT_TRUE(refused) << "the structural rules alone no longer form the refused attention group";

  auto fused = expect_pass_keeps_meaning(*g, {"recognize-patterns", "fuse"}, with_codegen());
  expect_every_node_has_a_kernel(*fused);
  for (const Node* f : fused_nodes(*fused)) EXPECT_NE(f->attrs().get_string("kind", ""), "attention");
}

// Codegen's errors name the model file (issue 15: the GoogLeNet message named
// none): the refused attention group of the structural rules, emitted.
TEST(FusionContract, CodegenErrorsNameTheModel) {
  auto g = parse(kMildFillAttention);
  PassStats st;
  create_pass("recognize-patterns")->run(*g, {}, st);
  create_pass("fuse")->run(*g, {}, st);
  codegen::KernelBuildOptions ko;
  ko.source = "models/falcon.onnx";
  try {
    codegen::build_graph_kernels(*g, ko, /*compile=*/false);
    FAIL() << "codegen emitted an attention group without attention op";
  } catch (const Unsupported& e) {
    EXPECT_EQ(std::string(e.what()).rfind("models/falcon.onnx: codegen: ", 0), 0u) << e.what();
  }
}

// A group codegen refuses after the walk is split back: here a stand-in
// codegen that refuses every gemm epilogue leaves the matmul alone, and the
// pointwise ops after it form their own kernel.
TEST(FusionContract, RefusedFinalGroupIsSplitBack) {
  auto g = parse(R"(graph @m(%a: f32[4,8], %b: f32[8,6], %bias: f32[6]) -> (f32[4,6]) {
    %m = matmul(%a, %b) : f32[4,6]
    %x = add(%m, %bias) : f32[4,6]
    %y = relu(%x) : f32[4,6]
    return %y
  })");
  PassOptions o;
  o.why_no_kernel = [](const Node& n) -> std::string {
    return n.attrs().get_string("kind", "") == "gemm_epilogue" ? "no gemm epilogue today" : "";
  };
  auto fused = expect_pass_keeps_meaning(*g, {"fuse"}, o);
  auto f = fused_nodes(*fused);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]->attrs().get_string("kind", ""), "pointwise");
  PassStats st;
  auto again = g->clone();
  create_pass("fuse")->run(*again, o, st);
  EXPECT_EQ(st.counters["groups-split-back"], 1);
}

}  // namespace
}  // namespace kiln
