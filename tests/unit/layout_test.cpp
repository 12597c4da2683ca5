// layout pass: meaning kept on the reference backend for channels-last
// regions (conv with groups, strides, pads, dilations, depthwise and 1-D/3-D;
// pools, norms, resize, axis ops, f16), how many transposes remain, layout
// tags that inference agrees with, and the channels-last forms of the ops
// (inference errors, kernels against hand-computed values).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/error.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

PassOptions gpu() {
  PassOptions o;
  o.target = "sm_90";
  return o;
}

// Parses IR text and gives every constant named w* seeded random values in
// [-1, 1) (weights); the others keep the data the text gives them.
std::unique_ptr<Graph> parse_weights(const std::string& text, uint64_t seed = 7) {
  auto g = testing::parse(text);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<double> u(-1, 1);
  for (Value* c : g->constants()) {
    if (c->name().empty() || c->name()[0] != 'w') continue;
    Tensor t(c->type());
    for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, u(rng));
    c->set_data(t);
  }
  verify_graph(*g, op_registry());
  return g;
}

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op() == op;
  return n;
}

// Inference on every node gives exactly the types (layout tags included)
// the graph holds.
void expect_tags_agree(const Graph& g) {
  for (const auto& n : g.nodes()) {
    InferContext ctx(n->op(), n->inputs(), n->attrs(), n->num_outputs(), n->describe());
    std::vector<TensorType> want = infer_types(op_registry().get(n->op()), ctx);
    for (int k = 0; k < n->num_outputs(); ++k) EXPECT_EQ(n->output(k)->type().str(), want[k].str()) << n->describe();
  }
}

// Runs the pass for sm_90, checks meaning, the verifier, tags, and that
// `transposes` transposes remain. Returns the rewritten graph.
std::unique_ptr<Graph> check(const std::string& text, int transposes, Tolerance tol = {1e-4, 1e-4}) {
  auto g = parse_weights(text);
  auto after = testing::expect_pass_keeps_meaning(*g, {"layout"}, gpu(), tol);
  EXPECT_NO_THROW(verify_graph(*after, op_registry()));
  expect_tags_agree(*after);
  EXPECT_EQ(count_op(*after, "transpose"), transposes) << print_graph(*after);
  return after;
}

TEST(LayoutPass, ConvChainWithGroupsStridesPadsDilations) {
  auto after = check(R"(
graph @g(%x: f32[2,6,9,7]) -> (f32[2,12,5,4]) {
  %w1 = const f32[8,3,3,3] splat<0.0>
  %wb1 = const f32[8] splat<0.0>
  %w2 = const f32[8,1,3,3] splat<0.0>
  %wc = const f32[8,1,1] splat<0.0>
  %w3 = const f32[12,4,1,1] splat<0.0>
  %c1 = conv(%x, %w1, %wb1) {dilations=[1,2], group=2, pads=[1,0,2,1], strides=[2,1]} : f32[2,8,5,4]
  %r1 = relu(%c1) : f32[2,8,5,4]
  %c2 = conv(%r1, %w2, _) {dilations=[1,1], group=8, pads=[1,1,1,1], strides=[1,1]} : f32[2,8,5,4]
  %a = add(%c2, %wc) : f32[2,8,5,4]
  %y = conv(%a, %w3, _) {dilations=[1,1], group=2, pads=[0,0,0,0], strides=[1,1]} : f32[2,12,5,4]
  return %y
})",
                     2);
  EXPECT_EQ(count_op(*after, "conv"), 3);
  for (const auto& n : after->nodes()) {
    if (n->op() != "conv") continue;
    EXPECT_EQ(n->attrs().get_string("layout", ""), "nhwc");
  }
}

TEST(LayoutPass, DepthwiseWithChannelMultiplierAndSingleInputChannel) {
  check(R"(
graph @g(%x: f32[1,1,7,6]) -> (f32[1,8,3,3]) {
  %w1 = const f32[4,1,3,3] splat<0.0>
  %w2 = const f32[8,1,3,2] splat<0.0>
  %wb = const f32[8] splat<0.0>
  %c1 = conv(%x, %w1, _) {dilations=[1,1], pads=[1,1,1,1], strides=[1,1]} : f32[1,4,7,6]
  %y = conv(%c1, %w2, %wb) {dilations=[2,1], group=4, pads=[1,1,1,0], strides=[2,2]} : f32[1,8,3,3]
  return %y
})",
        2);
}

TEST(LayoutPass, Conv1dAnd3d) {
  check(R"(
graph @g(%x: f32[2,4,10]) -> (f32[2,6,5]) {
  %w = const f32[6,4,3] splat<0.0>
  %c = conv(%x, %w, _) {dilations=[1], pads=[1,1], strides=[2]} : f32[2,6,5]
  %y = relu(%c) : f32[2,6,5]
  return %y
})",
        2);
  check(R"(
graph @g(%x: f32[1,2,4,5,6]) -> (f32[1,3,3,4,5]) {
  %w = const f32[3,2,2,2,2] splat<0.0>
  %y = conv(%x, %w, _) {dilations=[1,1,1], pads=[0,0,0,0,0,0], strides=[1,1,1]} : f32[1,3,3,4,5]
  return %y
})",
        2);
}

TEST(LayoutPass, PoolsAndGlobalPools) {
  // Global pool results leave the region as reshapes (same element order):
  // the only transpose is the one in.
  auto after = check(R"(
graph @g(%x: f32[1,3,12,12]) -> (f32[1,4,1,1], f32[1,4,1,1], f32[1,4,1,1]) {
  %w = const f32[4,3,3,3] splat<0.0>
  %c = conv(%x, %w, _) {dilations=[1,1], pads=[1,1,1,1], strides=[1,1]} : f32[1,4,12,12]
  %m = max_pool(%c) {ceil_mode=1, dilations=[1,1], kernel_shape=[3,3], pads=[1,1,1,1], strides=[2,2]} : f32[1,4,7,7]
  %a = average_pool(%m) {ceil_mode=0, count_include_pad=1, dilations=[1,1], kernel_shape=[2,2], pads=[0,0,1,1], strides=[1,1]} : f32[1,4,7,7]
  %d = average_pool(%a) {ceil_mode=0, dilations=[2,1], kernel_shape=[2,2], pads=[1,1,1,1], strides=[1,2]} : f32[1,4,7,4]
  %l = lp_pool(%d) {ceil_mode=0, dilations=[1,1], kernel_shape=[2,2], p=3, pads=[0,0,0,0], strides=[2,2]} : f32[1,4,3,2]
  %g1 = global_average_pool(%l) : f32[1,4,1,1]
  %g2 = global_max_pool(%a) : f32[1,4,1,1]
  %g3 = global_lp_pool(%m) {p=2} : f32[1,4,1,1]
  return %g1, %g2, %g3
})",
                     1);
  EXPECT_EQ(count_op(*after, "reshape"), 3);
}

TEST(LayoutPass, Norms) {
  check(R"(
graph @g(%x: f32[2,4,5,3]) -> (f32[2,4,5,3]) {
  %w = const f32[4,4,1,1] splat<0.0>
  %ws = const f32[4] splat<0.0>
  %wm = const f32[4] splat<0.0>
  %v = const f32[4] dense<[0.5, 1.0, 2.0, 0.25]>
  %c = conv(%x, %w, _) {dilations=[1,1], pads=[0,0,0,0], strides=[1,1]} : f32[2,4,5,3]
  %b = batch_normalization(%c, %ws, %wm, %wm, %v) {epsilon=1e-05} : f32[2,4,5,3]
  %i = instance_normalization(%b, %ws, %wm) {epsilon=1e-05} : f32[2,4,5,3]
  %y = group_normalization(%i, %wm, %ws) {epsilon=1e-05, num_groups=2} : f32[2,4,5,3]
  return %y
})",
        2);
}

TEST(LayoutPass, Resize) {
  check(R"(
graph @g(%x: f32[1,2,5,6]) -> (f32[1,3,10,9], f32[1,3,3,4]) {
  %w = const f32[3,2,1,1] splat<0.0>
  %c = conv(%x, %w, _) {dilations=[1,1], pads=[0,0,0,0], strides=[1,1]} : f32[1,3,5,6]
  %r = resize(%c) {coordinate_transformation_mode="align_corners", mode="linear", scales=[1.0,1.0,2.0,1.5], sizes=[1,3,10,9]} : f32[1,3,10,9]
  %n = resize(%c) {mode="cubic", sizes=[1,3,3,4]} : f32[1,3,3,4]
  return %r, %n
})",
        3);
}

TEST(LayoutPass, AxisOps) {
  check(R"(
graph @g(%x: f32[1,3,6,5]) -> (f32[1,2,6,5], f32[1,1,6,5], f32[1,6,1]) {
  %w = const f32[3,3,3,3] splat<0.0>
  %c = conv(%x, %w, _) {dilations=[1,1], pads=[1,1,1,1], strides=[1,1]} : f32[1,3,6,5]
  %k = concat(%c, %x) {axis=-3} : f32[1,6,6,5]
  %a, %b = split(%k) {axis=1, split=[2,4]} : f32[1,2,6,5], f32[1,4,6,5]
  %s = slice(%b) {ends=[1,4,6,5], starts=[0,1,1,0], steps=[1,2,1,1]} : f32[1,2,5,5]
  %p = pad(%s) {mode="reflect", pads=[0,0,1,0,0,0,0,0]} : f32[1,2,6,5]
  %m = mul(%p, %a) : f32[1,2,6,5]
  %q = reduce_sum(%m) {axes=[1], keepdims=1} : f32[1,1,6,5]
  %t = reduce_max(%k) {axes=[1,3], keepdims=0} : f32[1,6]
  %u = reshape(%t) {shape=[1,6,1]} : f32[1,6,1]
  return %p, %q, %u
})",
        2);
}

TEST(LayoutPass, SqueezeExciteBlockF16) {
  check(R"(
graph @g(%x: f16[1,8,6,6]) -> (f16[1,8,6,6]) {
  %w1 = const f16[8,8,3,3] splat<0.0>
  %w2 = const f16[2,8,1,1] splat<0.0>
  %w3 = const f16[8,2,1,1] splat<0.0>
  %c = conv(%x, %w1, _) {dilations=[1,1], pads=[1,1,1,1], strides=[1,1]} : f16[1,8,6,6]
  %g = global_average_pool(%c) : f16[1,8,1,1]
  %s1 = conv(%g, %w2, _) {dilations=[1,1], pads=[0,0,0,0], strides=[1,1]} : f16[1,2,1,1]
  %r = relu(%s1) : f16[1,2,1,1]
  %s2 = conv(%r, %w3, _) {dilations=[1,1], pads=[0,0,0,0], strides=[1,1]} : f16[1,8,1,1]
  %e = sigmoid(%s2) : f16[1,8,1,1]
  %y = mul(%c, %e) : f16[1,8,6,6]
  return %y
})",
        2, {1e-2, 1e-2});
}

TEST(LayoutPass, MiniResNetKeepsOneTranspose) {
  auto after = check(R"(
graph @g(%x: f32[1,3,16,16]) -> (f32[1,5]) {
  %w1 = const f32[8,3,3,3] splat<0.0>
  %w2 = const f32[8,8,3,3] splat<0.0>
  %wb = const f32[8] splat<0.0>
  %wf = const f32[5,8] splat<0.0>
  %wg = const f32[5] splat<0.0>
  %c1 = conv(%x, %w1, %wb) {dilations=[1,1], pads=[1,1,1,1], strides=[2,2]} : f32[1,8,8,8]
  %r1 = relu(%c1) : f32[1,8,8,8]
  %p = max_pool(%r1) {ceil_mode=0, dilations=[1,1], kernel_shape=[3,3], pads=[1,1,1,1], strides=[2,2]} : f32[1,8,4,4]
  %c2 = conv(%p, %w2, %wb) {dilations=[1,1], pads=[1,1,1,1], strides=[1,1]} : f32[1,8,4,4]
  %s = add(%c2, %p) : f32[1,8,4,4]
  %r2 = relu(%s) : f32[1,8,4,4]
  %g = global_average_pool(%r2) : f32[1,8,1,1]
  %f = reshape(%g) {shape=[1,8]} : f32[1,8]
  %y = gemm(%f, %wf, %wg) {trans_b=1} : f32[1,5]
  return %y
})",
                     1);
  EXPECT_EQ(count_op(*after, "reshape"), 1);
}

TEST(LayoutPass, RegionEndsAndSharedTransposes) {
  // softmax over channels and lrn end the region; x enters once although
  // three region nodes read it; one transpose back serves both outside users
  // and the graph output.
  check(R"(
graph @g(%x: f32[1,4,5,5]) -> (f32[1,4,5,5], f32[1,4,5,5], f32[1,4,5,5]) {
  %w = const f32[4,4,3,3] splat<0.0>
  %c = conv(%x, %w, _) {dilations=[1,1], pads=[1,1,1,1], strides=[1,1]} : f32[1,4,5,5]
  %a = add(%c, %x) : f32[1,4,5,5]
  %m = mul(%a, %x) : f32[1,4,5,5]
  %s = softmax(%m) {axis=1} : f32[1,4,5,5]
  %l = lrn(%m) {alpha=0.0001, beta=0.75, bias=1.0, size=3} : f32[1,4,5,5]
  return %s, %l, %m
})",
        2);
}

TEST(LayoutPass, CpuTargetChangesNothing) {
  auto g = parse_weights(R"(
graph @g(%x: f32[1,3,8,8]) -> (f32[1,4,8,8]) {
  %w = const f32[4,3,3,3] splat<0.0>
  %y = conv(%x, %w, _) {dilations=[1,1], pads=[1,1,1,1], strides=[1,1]} : f32[1,4,8,8]
  return %y
})");
  std::string before = print_graph(*g);
  PassStats st;
  EXPECT_FALSE(create_pass("layout")->run(*g, PassOptions{}, st));
  EXPECT_EQ(print_graph(*g), before);
}

// ---- the ops' channels-last forms

std::string infer_error(const std::string& text) {
  try {
    verify_graph(*testing::parse(text), op_registry());
  } catch (const Error& e) {
    return e.what();
  }
  return "(verified)";
}

TEST(LayoutOps, InferenceErrors) {
  EXPECT_NE(infer_error(R"(
graph @g(%x: f32[1,4,4,3], %w: f32[2,3,3,3]) -> (f32[1,2,2,2]) {
  %y = conv(%x, %w, _) {dilations=[1,1], layout="nchw", pads=[0,0,0,0], strides=[1,1]} : f32[1,2,2,2]
  return %y
})")
                .find("layout \"nchw\" must be \"nhwc\""),
            std::string::npos);
  EXPECT_NE(infer_error(R"(
graph @g(%x: f32[1,4,4,3]) -> (f32[1,2,2,3], i64[1,2,2,3]) {
  %y, %i = max_pool(%x) {ceil_mode=0, dilations=[1,1], kernel_shape=[2,2], layout="nhwc", pads=[0,0,0,0], strides=[2,2]} : f32[1,2,2,3], i64[1,2,2,3]
  return %y, %i
})")
                .find("no indices result"),
            std::string::npos);
  EXPECT_NE(infer_error(R"(
graph @g(%x: f32[1,3,4,4]) -> (f32[1,4,3,4]) {
  %y = transpose(%x) {layout="nhwc", perm=[0,2,1,3]} : f32[1,4,3,4]
  return %y
})")
                .find("channels-last perm"),
            std::string::npos);
  EXPECT_NE(infer_error(R"(
graph @g(%x: f32[1,4,4,3], %p: f32[4]) -> (f32[1,4,4,3]) {
  %y = batch_normalization(%x, %p, %p, %p, %p) {layout="nhwc"} : f32[1,4,4,3]
  return %y
})")
                .find("the last dim of x"),
            std::string::npos);
  EXPECT_NE(infer_error(R"(
graph @g(%x: f32[4,3]) -> (f32[4,1]) {
  %y = global_average_pool(%x) {layout="nhwc"} : f32[4,1]
  return %y
})")
                .find("rank"),
            std::string::npos);
}

TEST(LayoutOps, InferenceTagsChannelsLastResults) {
  auto g = testing::parse(R"(
graph @g(%x: f32[1,4,4,3], %w: f32[2,3,3,3]) -> (f32[1,2,2,2]) {
  %y = conv(%x, %w, _) {dilations=[1,1], layout="nhwc", pads=[0,0,0,0], strides=[1,1]} : f32[1,2,2,2]
  return %y
})");
  Node* n = g->node_list()[0];
  InferContext ctx(n->op(), n->inputs(), n->attrs(), 1, "conv");
  EXPECT_EQ(infer_types(op_registry().get("conv"), ctx)[0].str(), "f32[1,2,2,2]{nhwc}");
}

// Runs one node on given tensors through inference and the reference kernel.
Tensor run1(const std::string& op, std::vector<Tensor> ins, const AttrMap& a) {
  Graph g;
  std::vector<Value*> vals;
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < ins.size(); ++i) {
    vals.push_back(g.add_input("in" + std::to_string(i), ins[i].type()));
    ptrs.push_back(&ins[i]);
  }
  InferContext ctx(op, vals, a, 1, op);
  std::vector<TensorType> types = infer_types(op_registry().get(op), ctx);
  return evaluate_op(op_registry().get(op), a, ptrs, types, op)[0];
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> r;
  for (int64_t i = 0; i < t.numel(); ++i) r.push_back(t.get_double(i));
  return r;
}

TEST(LayoutOps, ConvNhwcByHand) {
  // x channels-last [1, 2, 2, 2]: pixel (h, w) holds channels (a, b).
  Tensor x = Tensor::from<float>(DType::F32, {1, 2, 2, 2}, std::vector<float>{1, 10, 2, 20, 3, 30, 4, 40});
  // One output channel, 2x2 kernel stored [O, kH, kW, I]: tap (h, w, c).
  Tensor w = Tensor::from<float>(DType::F32, {1, 2, 2, 2}, std::vector<float>{1, 0, 0, 1, 0, 0, 1, 1});
  AttrMap a;
  a.set("strides", std::vector<int64_t>{1, 1});
  a.set("pads", std::vector<int64_t>{0, 0, 0, 0});
  a.set("dilations", std::vector<int64_t>{1, 1});
  a.set("layout", std::string("nhwc"));
  // 1*1 + 20*1 + 4*1 + 40*1 = 65
  EXPECT_EQ(values(run1("conv", {x, w}, a)), std::vector<double>{65});
  // Depthwise, group 2, 1x1 kernel, pads 1 on the end of w: y[h, w, c] = x * k[c].
  Tensor dw = Tensor::from<float>(DType::F32, {2, 1, 1, 1}, std::vector<float>{2, -1});
  a.set("group", int64_t(2));
  a.set("pads", std::vector<int64_t>{0, 0, 0, 1});
  EXPECT_EQ(values(run1("conv", {x, dw}, a)), (std::vector<double>{2, -10, 4, -20, 0, 0, 6, -30, 8, -40, 0, 0}));
}

TEST(LayoutOps, PoolsAndNormsNhwcByHand) {
  Tensor x = Tensor::from<float>(DType::F32, {1, 2, 2, 2}, std::vector<float>{1, 10, 2, 20, 3, 30, 4, 40});
  AttrMap a;
  a.set("layout", std::string("nhwc"));
  EXPECT_EQ(values(run1("global_average_pool", {x}, a)), (std::vector<double>{2.5, 25}));
  EXPECT_EQ(values(run1("global_max_pool", {x}, a)), (std::vector<double>{4, 40}));
  AttrMap mp = a;
  mp.set("kernel_shape", std::vector<int64_t>{1, 2});
  mp.set("strides", std::vector<int64_t>{1, 1});
  mp.set("pads", std::vector<int64_t>{0, 0, 0, 0});
  mp.set("dilations", std::vector<int64_t>{1, 1});
  EXPECT_EQ(values(run1("max_pool", {x}, mp)), (std::vector<double>{2, 20, 4, 40}));
  EXPECT_EQ(values(run1("average_pool", {x}, mp)), (std::vector<double>{1.5, 15, 3.5, 35}));
  // Batch norm on the last dim: (x - mean) * scale / sqrt(var + 0) + bias.
  Tensor scale = Tensor::from<float>(DType::F32, {2}, std::vector<float>{1, 2});
  Tensor bias = Tensor::from<float>(DType::F32, {2}, std::vector<float>{0, 1});
  Tensor mean = Tensor::from<float>(DType::F32, {2}, std::vector<float>{1, 10});
  Tensor var = Tensor::from<float>(DType::F32, {2}, std::vector<float>{4, 100});
  AttrMap bn = a;
  bn.set("epsilon", 0.0f);
  EXPECT_EQ(values(run1("batch_normalization", {x, scale, bias, mean, var}, bn)),
            (std::vector<double>{0, 1, 0.5, 3, 1, 5, 1.5, 7}));
  // Instance norm of channel a = [1, 2, 3, 4]: mean 2.5, var 1.25.
  Tensor one = Tensor::from<float>(DType::F32, {2}, std::vector<float>{1, 1});
  Tensor zero = Tensor::from<float>(DType::F32, {2}, std::vector<float>{0, 0});
  std::vector<double> in = values(run1("instance_normalization", {x, one, zero}, bn));
  ASSERT_EQ(in.size(), 8u);
  EXPECT_NEAR(in[0], -1.5 / std::sqrt(1.25), 1e-6);
  EXPECT_NEAR(in[1], -15 / std::sqrt(125.0), 1e-6);
  EXPECT_NEAR(in[6], 1.5 / std::sqrt(1.25), 1e-6);
}

}  // namespace
}  // namespace kiln
