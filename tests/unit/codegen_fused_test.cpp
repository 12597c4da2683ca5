// Fused kernels on the sim backend against the reference: bodies with
// injective ops evaluated on demand (codegen/core/emit_body_eval.h: fused kinds
// pointwise and injective) and fused reductions (codegen/emitters/reduction/emit_fused_reduction.h)
// shaped like BERT's, GPT-2's and ViT's: gather + gather + add + add ->
// layer_normalization -> cast f16 as a second result, a residual add whose sum
// is a second result, an f16 residual stream cast around an f32 layer norm,
// scale + mask -> softmax -> cast, a squared difference -> reduce_mean ->
// sqrt, and a layer norm with its mean result feeding an epilogue. Each group
// of patterns is one graph (one simulator build), and every kernel compiles
// with NVRTC for sm_80 and sm_90.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "codegen/core/emit_body_eval.h"
#include "codegen/emitters/elementwise/emit_fused.h"
#include "codegen/emitters/reduction/emit_fused_reduction.h"
#include "ir/error.h"
#include "ops/registry.h"
#include "tests/unit/codegen_graph_check.h"

namespace kiln {
namespace {

std::unique_ptr<Graph> fused(const std::string& text) {
  auto g = testing::parse(text);
  PassStats st;
  create_pass("fuse")->run(*g, PassOptions{}, st);
  return g;
}

std::map<std::string, int> kinds(const Graph& g) {
  std::map<std::string, int> k;
  for (const auto& n : g.nodes()) k[n->op() == "fused" ? n->attrs().get_string("kind", "?") : n->op()]++;
  return k;
}

// Pointwise bodies with injective ops, and injective-only bodies.
constexpr const char* kOnDemand = R"(graph @m(%ids: i64[2,3], %pos: f32[3,4], %x: f32[4,3,2], %table: f32[5,4],
    %a: f16[3,7], %c: bool[7,3], %p: f32[2,5], %q: i32[4,6], %r: i32[4,2], %s: f32[6,5,4]) ->
    (f32[2,3,4], f32[2,3,4], f16[7,3], f32[4,7], i32[2,8], i32[6,4], f32[5,6,2]) {
  %e = gather(%table, %ids) {axis=0} : f32[2,3,4]
  %pe = expand(%pos) {shape=[2,3,4]} : f32[2,3,4]
  %y = add(%e, %pe) : f32[2,3,4]
  %t = transpose(%x) {perm=[2,1,0]} : f32[2,3,4]
  %z = mul(%t, %y) : f32[2,3,4]
  %at = transpose(%a) {perm=[1,0]} : f16[7,3]
  %one = const f16[] splat<1.5>
  %am = mul(%at, %one) : f16[7,3]
  %w = where(%c, %am, %at) : f16[7,3]
  %pp = pad(%p) {mode="reflect", pads=[1,1,1,1]} : f32[4,7]
  %pr = relu(%pp) : f32[4,7]
  %qs = slice(%q) {axes=[0,1], ends=[4,6], starts=[0,0], steps=[2,1]} : i32[2,6]
  %rs = slice(%r) {axes=[0,1], ends=[4,2], starts=[1,0], steps=[2,1]} : i32[2,2]
  %cc = concat(%qs, %rs) {axis=1} : i32[2,8]
  %tr = tile(%r) {repeats=[1,3]} : i32[4,6]
  %tq = transpose(%tr) {perm=[1,0]} : i32[6,4]
  %st = transpose(%s) {perm=[1,0,2]} : f32[5,6,4]
  %s0, %s1 = split(%st) {axis=2, split=[2,2]} : f32[5,6,2], f32[5,6,2]
  %sd = sub(%s1, %s0) : f32[5,6,2]
  return %y, %z, %w, %pr, %cc, %tq, %sd
})";

TEST(CodegenFused, PointwiseAndInjectiveBodiesOnDemand) {
  auto g = fused(kOnDemand);
  std::map<std::string, int> k = kinds(*g);
  EXPECT_GE(k["pointwise"], 4) << print_graph(*g);
  EXPECT_GE(k["injective"], 2) << print_graph(*g);
  int on_demand = 0;
  for (const auto& n : g->nodes()) on_demand += codegen::is_on_demand_fused(*n, op_registry());
  EXPECT_GE(on_demand, 6) << print_graph(*g);
  testing::expect_kernels_compile({g.get()}, "codegen fused on demand");
  testing::expect_sim_matches_reference(*g);
}

// Fused reductions: BERT / GPT-2 / ViT-like bodies.
constexpr const char* kReductions = R"(graph @m(%ids: i64[2,7], %tt: i64[2,7], %wemb: f32[11,67], %pemb: f32[7,67],
    %temb: f32[5,67], %g1: f32[67], %b1: f32[67],
    %x: f32[3,5,300], %res: f32[3,5,300], %g2: f32[300], %b2: f32[300],
    %h: f16[4,129], %hr: f16[4,129], %g3: f32[129], %b3: f32[129],
    %sc: f32[2,3,5,9], %mask: f32[2,1,1,9],
    %u: f32[4,6,5], %v: f32[4,6,5],
    %l: f32[3,4,5], %lo: f32[3,4,5], %g4: f32[4,5]) ->
    (f32[2,7,67], f16[2,7,67], f32[3,5,300], f32[3,5,300], f16[4,129], f16[4,129], f16[2,3,5,9], f32[4,1,5],
     f32[3,4,5], f32[3,4,5], f32[3,1,1]) {
  %e1 = gather(%wemb, %ids) {axis=0} : f32[2,7,67]
  %e2 = gather(%temb, %tt) {axis=0} : f32[2,7,67]
  %s1 = add(%e1, %pemb) : f32[2,7,67]
  %s2 = add(%s1, %e2) : f32[2,7,67]
  %n1 = layer_normalization(%s2, %g1, %b1) {axis=-1, epsilon=1e-12} : f32[2,7,67]
  %n1h = cast(%n1) {to="f16"} : f16[2,7,67]
  %r2 = add(%x, %res) : f32[3,5,300]
  %n2 = layer_normalization(%r2, %g2, %b2) {axis=-1, epsilon=1e-05} : f32[3,5,300]
  %r3 = add(%h, %hr) : f16[4,129]
  %c3 = cast(%r3) {to="f32"} : f32[4,129]
  %n3 = layer_normalization(%c3, %g3, %b3) {axis=-1, epsilon=1e-05} : f32[4,129]
  %y3 = cast(%n3) {to="f16"} : f16[4,129]
  %k = const f32[] splat<0.125>
  %scm = mul(%sc, %k) : f32[2,3,5,9]
  %sm = add(%scm, %mask) : f32[2,3,5,9]
  %pr = softmax(%sm) {axis=3} : f32[2,3,5,9]
  %prh = cast(%pr) {to="f16"} : f16[2,3,5,9]
  %d = sub(%u, %v) : f32[4,6,5]
  %dd = mul(%d, %d) : f32[4,6,5]
  %m = reduce_mean(%dd) {axes=[1], keepdims=1} : f32[4,1,5]
  %rm = sqrt(%m) : f32[4,1,5]
  %ls = add(%l, %lo) : f32[3,4,5]
  %n5, %mu = layer_normalization(%ls, %g4) {axis=1, epsilon=1e-05} : f32[3,4,5], f32[3,1,1]
  %mr = relu(%mu) : f32[3,1,1]
  %n5t = tanh(%n5) : f32[3,4,5]
  return %n1, %n1h, %n2, %r2, %y3, %r3, %prh, %rm, %n5t, %ls, %mr
})";

TEST(CodegenFused, ReductionBodiesWithPrologueResultsAndEpilogues) {
  auto g = fused(kReductions);
  std::map<std::string, int> k = kinds(*g);
  EXPECT_EQ(k["reduction"], 6) << print_graph(*g);
  for (const auto& n : g->nodes())
    if (n->op() == "fused" && n->attrs().get_string("kind", "") == "reduction") {
      EXPECT_TRUE(codegen::is_reduction_fused(*n, op_registry())) << n->describe();
    }
  testing::expect_kernels_compile({g.get()}, "codegen fused reduction");
  testing::expect_sim_matches_reference(*g);
}

// What the fused reduction IO leaves out says so: a transpose in the
// epilogue (the fuser no longer builds one; a hand-written body).
TEST(CodegenFused, UnsupportedEpilogueIsReported) {
  auto g = testing::parse(R"(graph @m(%x: f32[3,8], %g: f32[8]) -> (f32[8,3]) {
  %t = fused(%x, %g) {kind="reduction"} : f32[8,3] {
    graph @fused_0(%x: f32[3,8], %g: f32[8]) -> (f32[8,3]) {
      %n = layer_normalization(%x, %g) {axis=-1, epsilon=1e-05} : f32[3,8]
      %t = transpose(%n) {perm=[1,0]} : f32[8,3]
      return %t
    }
  }
  return %t
})");
  ASSERT_EQ(g->num_nodes(), 1u);
  const Node& n = *g->nodes().front();
  EXPECT_TRUE(codegen::is_reduction_fused(n, op_registry()));
  try {
    codegen::fused_anchor_io(n, op_registry());
    ADD_FAILURE() << "no error";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("epilogue op"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
