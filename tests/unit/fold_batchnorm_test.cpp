// fold-batchnorm: meaning checks on the reference backend for every producer
// it folds into (random weights and BN params, strides, pads, groups), the
// mul + add lowering, f16, and what it must leave alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ir/verifier.h"
#include "ops/registry.h"
#include "pass_test_util.h"
#include "passes/pass_manager.h"

namespace kiln {
namespace {

using testing::expect_pass_keeps_meaning;

// Seeded values in [lo, hi).
Tensor random_tensor(DType t, Shape s, uint64_t seed, double lo = -1, double hi = 1) {
  Tensor r(t, std::move(s));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 7;
  for (int64_t i = 0; i < r.numel(); ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    r.set_double(i, lo + (hi - lo) * double(x >> 11) / double(1ull << 53));
  }
  return r;
}

// Appends a BN with random constant params (var in [min_var, 2)) reading `x`.
Value* add_bn(Graph& g, Value* x, uint64_t seed, DType param_dtype = DType::F32, double min_var = 0.1) {
  int64_t c = x->shape()[1];
  std::vector<Value*> ins = {x};
  const char* names[] = {"scale", "bias", "mean", "var"};
  for (int i = 0; i < 4; ++i)
    ins.push_back(g.add_constant(fmt::format("bn{}.{}", seed, names[i]),
                                 random_tensor(param_dtype, {c}, seed * 10 + i, i == 3 ? min_var : -2, 2)));
  AttrMap a;
  a.set("epsilon", 1e-3f);
  return g.add_node("batch_normalization", ins, {x->type()}, a, "bn")->output(0);
}

AttrMap conv_attrs(std::vector<int64_t> strides, std::vector<int64_t> pads, int64_t group) {
  AttrMap a;
  a.set("strides", strides);
  a.set("pads", pads);
  a.set("dilations", std::vector<int64_t>(strides.size(), 1));
  a.set("group", group);
  return a;
}

size_t count_op(const Graph& g, const std::string& op) {
  size_t n = 0;
  for (const auto& node : g.nodes()) n += node->op() == op;
  return n;
}

std::unique_ptr<Graph> fold(const Graph& g, PassStats* stats = nullptr, Tolerance tol = {1e-5, 1e-4}) {
  auto after = expect_pass_keeps_meaning(g, {"fold-batchnorm"}, {}, tol);
  verify_graph(*after, op_registry());
  if (stats) create_pass("fold-batchnorm")->run(*g.clone(), {}, *stats);
  return after;
}

TEST(FoldBatchNorm, ConvWithStridesPadsAndGroups) {
  for (bool with_bias : {true, false}) {
    Graph g;
    Value* x = g.add_input("x", {DType::F32, {2, 4, 9, 9}});
    Value* w = g.add_constant("w", random_tensor(DType::F32, {6, 2, 3, 3}, 1));
    Value* b = with_bias ? g.add_constant("b", random_tensor(DType::F32, {6}, 2)) : nullptr;
    Value* c =
        g.add_node("conv", {x, w, b}, {{DType::F32, {2, 6, 5, 5}}}, conv_attrs({2, 2}, {1, 1, 1, 1}, 2))->output(0);
    Value* y = add_bn(g, c, 3);
    g.set_outputs({g.add_node("relu", {y}, {y->type()})->output(0)});
    PassStats st;
    auto after = fold(g, &st);
    EXPECT_EQ(count_op(*after, "batch_normalization"), 0u);
    EXPECT_EQ(count_op(*after, "mul"), 0u);
    EXPECT_EQ(st.counters["into-conv"], 1);
  }
}

TEST(FoldBatchNorm, ConvTransposeWithGroupsAndOutputPadding) {
  Graph g;
  Value* x = g.add_input("x", {DType::F32, {1, 4, 5, 5}});
  Value* w = g.add_constant("w", random_tensor(DType::F32, {4, 3, 3, 3}, 4));  // C=4, M/g=3, g=2 -> M=6
  AttrMap a = conv_attrs({2, 2}, {1, 0, 0, 1}, 2);
  a.set("output_padding", std::vector<int64_t>{1, 0});
  // out = 2*(5-1) + out_pad + 3 - pads: dim0 8+1+3-1-0 = 11, dim1 8+0+3-0-1 = 10
  Value* c = g.add_node("conv_transpose", {x, w, nullptr}, {{DType::F32, {1, 6, 11, 10}}}, a)->output(0);
  g.set_outputs({add_bn(g, c, 5)});
  PassStats st;
  auto after = fold(g, &st);
  EXPECT_EQ(st.counters["into-conv-transpose"], 1);
  EXPECT_EQ(count_op(*after, "batch_normalization"), 0u);
}

TEST(FoldBatchNorm, ConvTransposeNegativePadsExtendWithBias) {
  // Negative pads add zero-computed border that still gets the bias: the
  // folded bias must cover it as the BN did.
  Graph g;
  Value* x = g.add_input("x", {DType::F32, {1, 2, 3, 3}});
  Value* w = g.add_constant("w", random_tensor(DType::F32, {2, 2, 2, 2}, 6));
  // out = 1*(3-1) + 2 - pads = 4 + 2 = 6 with pads -1 on each side
  Value* c = g.add_node("conv_transpose", {x, w, nullptr}, {{DType::F32, {1, 2, 6, 6}}},
                        conv_attrs({1, 1}, {-1, -1, -1, -1}, 1))
                 ->output(0);
  g.set_outputs({add_bn(g, c, 7)});
  auto after = fold(g);
  EXPECT_EQ(count_op(*after, "batch_normalization"), 0u);
}

TEST(FoldBatchNorm, GemmEveryCShapeAndTransposition) {
  // C shapes: none, scalar, [N], [1,N], [M,1], [M,N]; trans_a/trans_b; alpha/beta.
  std::vector<Shape> c_shapes = {{}, {1}, {5}, {1, 5}, {3, 1}, {3, 5}};
  for (int ci = -1; ci < int(c_shapes.size()); ++ci)
    for (int tb = 0; tb < 2; ++tb)
      for (float beta : {1.0f, 0.5f, 0.0f}) {
        Graph g;
        Value* a = g.add_input("a", {DType::F32, {4, 3}});  // trans_a: op(A) = [3,4]
        Value* b = g.add_constant("B", random_tensor(DType::F32, tb ? Shape{5, 4} : Shape{4, 5}, 8 + tb));
        Value* c = ci < 0 ? nullptr : g.add_constant("C", random_tensor(DType::F32, c_shapes[ci], 9 + ci));
        AttrMap at;
        at.set("trans_a", int64_t(1));
        at.set("trans_b", int64_t(tb));
        at.set("alpha", 0.75f);
        at.set("beta", beta);
        std::vector<Value*> ins = {a, b};
        if (c) ins.push_back(c);
        Value* y = g.add_node("gemm", ins, {{DType::F32, {3, 5}}}, at)->output(0);
        g.set_outputs({add_bn(g, y, 10)});
        PassStats st;
        auto after = fold(g, &st);
        EXPECT_EQ(st.counters["into-gemm"], 1) << ci << " " << tb << " " << beta;
        EXPECT_EQ(count_op(*after, "batch_normalization"), 0u);
      }
}

TEST(FoldBatchNorm, MatmulBecomesGemm) {
  Graph g;
  Value* a = g.add_input("a", {DType::F32, {6, 8}});
  Value* w = g.add_constant("W", random_tensor(DType::F32, {8, 5}, 11));
  Value* m = g.add_node("matmul", {a, w}, {{DType::F32, {6, 5}}})->output(0);
  g.set_outputs({add_bn(g, m, 12)});
  PassStats st;
  auto after = fold(g, &st);
  EXPECT_EQ(st.counters["into-matmul"], 1);
  EXPECT_EQ(count_op(*after, "gemm"), 1u);
  EXPECT_EQ(count_op(*after, "matmul"), 0u);
}

TEST(FoldBatchNorm, LoneBatchNormBecomesMulAddAtEveryRank) {
  for (Shape s : {Shape{4, 3}, Shape{2, 3, 7}, Shape{2, 3, 4, 5}, Shape{1, 3, 2, 3, 4}}) {
    Graph g;
    Value* x = g.add_input("x", {DType::F32, s});
    g.set_outputs({add_bn(g, x, 13)});
    PassStats st;
    auto after = fold(g, &st);
    EXPECT_EQ(st.counters["to-mul-add"], 1);
    EXPECT_EQ(count_op(*after, "mul"), 1u);
    EXPECT_EQ(count_op(*after, "add"), 1u);
  }
}

TEST(FoldBatchNorm, HalfPrecisionConvAndLoneBn) {
  // Folded weights are rounded to the weight's dtype: within that dtype's
  // tolerance of the unfolded graph for moderate factors (|a| <= 2/sqrt(0.5)).
  for (DType t : {DType::F16, DType::BF16}) {
    Graph g;
    Value* x = g.add_input("x", {t, {1, 3, 6, 6}});
    Value* w = g.add_constant("w", random_tensor(t, {4, 3, 3, 3}, 14, -0.5, 0.5));
    Value* c = g.add_node("conv", {x, w}, {{t, {1, 4, 6, 6}}}, conv_attrs({1, 1}, {1, 1, 1, 1}, 1))->output(0);
    Value* y = add_bn(g, c, 15, DType::F32, 0.5);
    Value* z = add_bn(g, g.add_input("x2", {t, {2, 4, 3}}), 16, t, 0.5);  // lone, params in the data's dtype
    g.set_outputs({y, z});
    PassStats st;
    auto after = fold(g, &st, default_tolerance(t));
    EXPECT_EQ(st.counters["into-conv"], 1);
    EXPECT_EQ(st.counters["to-mul-add"], 1);
  }
}

TEST(FoldBatchNorm, LeavesNonConstantParamsAlone) {
  Graph g;
  Value* x = g.add_input("x", {DType::F32, {2, 3, 4}});
  Value* scale = g.add_input("scale", {DType::F32, {3}});
  std::vector<Value*> ins = {x, scale};
  for (int i = 0; i < 3; ++i)
    ins.push_back(g.add_constant(fmt::format("p{}", i), random_tensor(DType::F32, {3}, 20 + i, 0.5, 1)));
  g.set_outputs({g.add_node("batch_normalization", ins, {x->type()})->output(0)});
  PassStats st;
  EXPECT_FALSE(create_pass("fold-batchnorm")->run(g, {}, st));
  EXPECT_EQ(st.counters["params-not-constant"], 1);
  EXPECT_EQ(count_op(g, "batch_normalization"), 1u);
}

TEST(FoldBatchNorm, DefaultPipelineKeepsMeaning) {
  // conv -> BN -> relu -> conv (shared weights) -> BN, as exporters emit it.
  Graph g;
  Value* x = g.add_input("x", {DType::F32, {1, 3, 8, 8}});
  Value* w = g.add_constant("w", random_tensor(DType::F32, {3, 3, 3, 3}, 30));
  AttrMap ca = conv_attrs({1, 1}, {1, 1, 1, 1}, 1);
  Value* c1 = g.add_node("conv", {x, w}, {{DType::F32, {1, 3, 8, 8}}}, ca)->output(0);
  Value* r = g.add_node("relu", {add_bn(g, c1, 31)}, {c1->type()})->output(0);
  Value* c2 = g.add_node("conv", {r, w}, {{DType::F32, {1, 3, 8, 8}}}, ca)->output(0);
  g.set_outputs({add_bn(g, c2, 32)});
  PassOptions o;
  // Without fuse, which would wrap conv+relu: this checks the folding.
  std::vector<std::string> passes = default_pipeline(o);
  passes.erase(std::remove(passes.begin(), passes.end(), "fuse"), passes.end());
  auto after = testing::expect_pass_keeps_meaning(g, passes, o);
  verify_graph(*after, op_registry());
  EXPECT_EQ(count_op(*after, "batch_normalization"), 0u);
  ASSERT_EQ(after->num_nodes(), 3u);
  // The shared weight was not changed in place: two different folded weights.
  EXPECT_NE(after->node_list()[0]->input(1), after->node_list()[2]->input(1));
}

}  // namespace
}  // namespace kiln
