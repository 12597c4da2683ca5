// nn family: conv / conv_transpose against naive direct loops on random data,
// auto_pad resolution through the real ONNX import, pooling window counts,
// resize numerics, and the inference errors of malformed nodes.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <random>

#include "frontend/onnx_import.h"
#include "backends/reference/executor.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ops/nn_shape.h"
#include "ops/registry.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;

Tensor random_tensor(DType dt, Shape s, std::mt19937& rng) {
  Tensor t(dt, std::move(s));
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, u(rng));
  return t;
}

// Infers result types of `op` on operands of the given types.
std::vector<TensorType> infer(const std::string& op, const std::vector<TensorType>& in, const AttrMap& a,
                              int outputs = 1) {
  Graph g;
  std::vector<Value*> vals;
  for (size_t i = 0; i < in.size(); ++i) vals.push_back(g.add_input("in" + std::to_string(i), in[i]));
  InferContext ic(op, vals, a, outputs, "test node");
  return infer_types(op_registry().get(op), ic);
}

// Infers and evaluates `op` with the reference kernel.
std::vector<Tensor> run(const std::string& op, const std::vector<const Tensor*>& in, const AttrMap& a,
                        int outputs = 1) {
  std::vector<TensorType> types;
  for (const Tensor* t : in) types.push_back(t->type());
  std::vector<TensorType> out = infer(op, types, a, outputs);
  return evaluate_op(op_registry().get(op), a, in, out, "test node");
}

AttrMap conv_attrs(Ints strides, Ints pads, Ints dil, int64_t group) {
  AttrMap a;
  a.set("strides", strides);
  a.set("pads", pads);
  a.set("dilations", dil);
  a.set("group", group);
  return a;
}

// Direct convolution straight from the definition (double accumulation).
std::vector<double> naive_conv(const Tensor& x, const Tensor& w, const Tensor* b, const Ints& strides, const Ints& pads,
                               const Ints& dil, int64_t group, const Shape& out_shape) {
  const int nd = x.rank() - 2;
  const int64_t C = x.shape()[1], M = w.shape()[0], Cg = C / group, Mg = M / group;
  Shape out_sp(out_shape.begin() + 2, out_shape.end()), k(w.shape().begin() + 2, w.shape().end()),
      in_sp(x.shape().begin() + 2, x.shape().end());
  std::vector<double> y(static_cast<size_t>(shape_numel(out_shape)));
  int64_t idx = 0;
  std::vector<int64_t> o(nd), kk(nd);
  for (int64_t n = 0; n < out_shape[0]; ++n)
    for (int64_t m = 0; m < M; ++m) {
      int64_t g = m / Mg;
      std::fill(o.begin(), o.end(), 0);
      for (int64_t oi = 0; oi < shape_numel(out_sp); ++oi) {
        double acc = b ? b->get_double(m) : 0.0;
        for (int64_t c = 0; c < Cg; ++c) {
          std::fill(kk.begin(), kk.end(), 0);
          for (int64_t ki = 0; ki < shape_numel(k); ++ki) {
            int64_t xoff = n * C + g * Cg + c, woff = m * Cg + c;
            bool inside = true;
            for (int d = 0; d < nd; ++d) {
              int64_t i = o[d] * strides[d] - pads[d] + kk[d] * dil[d];
              inside &= i >= 0 && i < in_sp[d];
              xoff = xoff * in_sp[d] + i;
              woff = woff * k[d] + kk[d];
            }
            if (inside) acc += x.get_double(xoff) * w.get_double(woff);
            for (int d = nd - 1; d >= 0 && ++kk[d] == k[d]; --d) kk[d] = 0;
          }
        }
        y[idx++] = acc;
        for (int d = nd - 1; d >= 0 && ++o[d] == out_sp[d]; --d) o[d] = 0;
      }
    }
  return y;
}

struct ConvCase {
  Shape x, w;
  Ints strides, pads, dil;
  int64_t group;
  bool bias;
};

void check_conv(const ConvCase& cc, DType dt, double tol, std::mt19937& rng) {
  Tensor x = random_tensor(dt, cc.x, rng), w = random_tensor(dt, cc.w, rng), b = random_tensor(dt, {cc.w[0]}, rng);
  AttrMap a = conv_attrs(cc.strides, cc.pads, cc.dil, cc.group);
  std::vector<const Tensor*> in = {&x, &w};
  if (cc.bias) in.push_back(&b);
  Tensor y = run("conv", in, a)[0];
  std::vector<double> want = naive_conv(x, w, cc.bias ? &b : nullptr, cc.strides, cc.pads, cc.dil, cc.group, y.shape());
  ASSERT_EQ(y.numel(), static_cast<int64_t>(want.size()));
  for (int64_t i = 0; i < y.numel(); ++i)
    ASSERT_NEAR(y.get_double(i), want[i], tol) << "element " << i << " of " << y.type().str();
}

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {{2, 3, 9}, {4, 3, 3}, {2}, {1, 2}, {1}, 1, true},                                      // 1-D, asymmetric pads
      {{1, 4, 7, 8}, {6, 2, 3, 2}, {1, 2}, {1, 0, 2, 1}, {2, 1}, 2, true},                    // groups + dilation
      {{2, 6, 6, 5}, {6, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 6, false},                   // depthwise
      {{1, 3, 5, 5}, {6, 1, 3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 3, true},                    // depthwise x2
      {{1, 8, 4, 4}, {5, 8, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},                    // 1x1 direct path
      {{1, 2, 5, 4, 6}, {4, 1, 2, 3, 2}, {2, 1, 2}, {1, 0, 1, 0, 1, 1}, {1, 2, 2}, 2, true},  // 3-D
  };
  return cases;
}

TEST(NnConv, MatchesDirectConvolutionF32) {
  std::mt19937 rng(7);
  for (const ConvCase& c : conv_cases()) check_conv(c, DType::F32, 1e-4, rng);
}

TEST(NnConv, MatchesDirectConvolutionF64AndF16) {
  std::mt19937 rng(11);
  for (const ConvCase& c : conv_cases()) check_conv(c, DType::F64, 1e-12, rng);
  // f16 inputs are exact in float; the result rounds once to f16.
  for (const ConvCase& c : conv_cases()) check_conv(c, DType::F16, 2e-2, rng);
}

TEST(NnConv, InferenceErrors) {
  AttrMap a2 = conv_attrs({1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  // weight rank differs from input rank
  EXPECT_THROW(infer("conv", {{DType::F32, {1, 3, 8, 8}}, {DType::F32, {4, 3, 3}}}, a2), Error);
  try {
    infer("conv", {{DType::F32, {1, 3, 8, 8}}, {DType::F32, {4, 3, 3}}}, a2);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight rank 3 does not match input rank 4"), std::string::npos) << e.what();
  }
  // channels not divisible by group
  AttrMap g2 = conv_attrs({1, 1}, {0, 0, 0, 0}, {1, 1}, 2);
  try {
    infer("conv", {{DType::F32, {1, 3, 8, 8}}, {DType::F32, {4, 1, 3, 3}}}, g2);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input channels 3 are not divisible by group 2"), std::string::npos)
        << e.what();
  }
  // weight channels disagree with input channels / group
  EXPECT_THROW(infer("conv", {{DType::F32, {1, 4, 8, 8}}, {DType::F32, {4, 4, 3, 3}}}, g2), Error);
  // output channels not divisible by group
  EXPECT_THROW(infer("conv", {{DType::F32, {1, 4, 8, 8}}, {DType::F32, {3, 2, 3, 3}}}, g2), Error);
  // bias of the wrong size
  EXPECT_THROW(infer("conv", {{DType::F32, {1, 3, 8, 8}}, {DType::F32, {4, 3, 3, 3}}, {DType::F32, {3}}}, a2), Error);
  // kernel larger than the padded input
  EXPECT_THROW(infer("conv", {{DType::F32, {1, 3, 2, 2}}, {DType::F32, {4, 3, 3, 3}}}, a2), Error);
  // attribute sizes must match the spatial rank; negative pads are invalid
  EXPECT_THROW(
      infer("conv", {{DType::F32, {1, 3, 8, 8}}, {DType::F32, {4, 3, 3, 3}}}, conv_attrs({1}, {0, 0, 0, 0}, {1, 1}, 1)),
      Error);
  EXPECT_THROW(infer("conv", {{DType::F32, {1, 3, 8, 8}}, {DType::F32, {4, 3, 3, 3}}},
                     conv_attrs({1, 1}, {-1, 0, 0, 0}, {1, 1}, 1)),
               Error);
  // dtype mismatch and integer inputs
  EXPECT_THROW(infer("conv", {{DType::F32, {1, 3, 8, 8}}, {DType::F64, {4, 3, 3, 3}}}, a2), Error);
  EXPECT_THROW(infer("conv", {{DType::I32, {1, 3, 8, 8}}, {DType::I32, {4, 3, 3, 3}}}, a2), Unsupported);
  // a valid one: 8 - 3 + 1 = 6
  EXPECT_EQ(infer("conv", {{DType::F32, {2, 3, 8, 8}}, {DType::F32, {4, 3, 3, 3}}}, a2)[0].shape, (Shape{2, 4, 6, 6}));
}

// conv_transpose straight from its definition: every input element scatters
// x * w into out[i*s - pad + k*d].
TEST(NnConvTranspose, MatchesDirectScatter) {
  std::mt19937 rng(3);
  struct Case {
    Shape x, w;
    Ints strides, pads, dil, out_pad;
    int64_t group;
  };
  std::vector<Case> cases = {
      {{1, 2, 3, 4}, {2, 3, 3, 3}, {2, 2}, {1, 0, 1, 1}, {1, 1}, {1, 0}, 1},
      {{2, 4, 3, 3}, {4, 1, 2, 3}, {1, 2}, {0, 0, 0, 0}, {2, 1}, {0, 1}, 2},
      {{1, 1, 3}, {1, 2, 3}, {3}, {0, -1}, {1}, {0}, 1},  // negative end pad: one extra zero column
  };
  for (const Case& c : cases) {
    Tensor x = random_tensor(DType::F32, c.x, rng), w = random_tensor(DType::F32, c.w, rng);
    Tensor b = random_tensor(DType::F32, {c.w[1] * c.group}, rng);
    AttrMap a = conv_attrs(c.strides, c.pads, c.dil, c.group);
    a.set("output_padding", c.out_pad);
    Tensor y = run("conv_transpose", {&x, &w, &b}, a)[0];
    const int nd = x.rank() - 2;
    const int64_t C = c.x[1], Cg = C / c.group, Mg = c.w[1], M = Mg * c.group;
    for (int d = 0; d < nd; ++d)
      ASSERT_EQ(y.shape()[2 + d], ops::conv_transpose_out_dim(c.x[2 + d], c.w[2 + d], c.strides[d], c.pads[d],
                                                              c.pads[d + nd], c.dil[d], c.out_pad[d]));
    Shape os(y.shape().begin() + 2, y.shape().end());
    std::vector<double> want(static_cast<size_t>(y.numel()));
    for (int64_t n = 0; n < c.x[0]; ++n)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < shape_numel(os); ++j) want[(n * M + m) * shape_numel(os) + j] = b.get_double(m);
    // Walk every (n, ci, input position, m, kernel position).
    Shape xs(c.x.begin() + 2, c.x.end()), ks(c.w.begin() + 2, c.w.end());
    for (int64_t n = 0; n < c.x[0]; ++n)
      for (int64_t ci = 0; ci < C; ++ci)
        for (int64_t ii = 0; ii < shape_numel(xs); ++ii)
          for (int64_t mg = 0; mg < Mg; ++mg)
            for (int64_t ki = 0; ki < shape_numel(ks); ++ki) {
              int64_t g = ci / Cg, m = g * Mg + mg;
              int64_t rem_i = ii, rem_k = ki, off = 0, mul = 1;
              bool inside = true;
              for (int d = nd - 1; d >= 0; --d) {
                int64_t i = rem_i % xs[d], k = rem_k % ks[d];
                rem_i /= xs[d];
                rem_k /= ks[d];
                int64_t o = i * c.strides[d] - c.pads[d] + k * c.dil[d];
                inside &= o >= 0 && o < os[d];
                off += o * mul;
                mul *= os[d];
              }
              if (!inside) continue;
              double xv = x.get_double((n * C + ci) * shape_numel(xs) + ii);
              double wv = w.get_double((ci * Mg + mg) * shape_numel(ks) + ki);
              want[(n * M + m) * shape_numel(os) + off] += xv * wv;
            }
    for (int64_t i = 0; i < y.numel(); ++i) ASSERT_NEAR(y.get_double(i), want[i], 1e-4) << "element " << i;
  }
}

TEST(NnShape, SamePadsPutTheOddPadWhereOnnxSays) {
  // in 6, kernel 3, stride 2: out 3, total pad (3-1)*2+3-6 = 1
  EXPECT_EQ(ops::same_pads("SAME_UPPER", 6, 3, 2, 1).begin, 0);
  EXPECT_EQ(ops::same_pads("SAME_UPPER", 6, 3, 2, 1).end, 1);
  EXPECT_EQ(ops::same_pads("SAME_LOWER", 6, 3, 2, 1).begin, 1);
  EXPECT_EQ(ops::same_pads("SAME_LOWER", 6, 3, 2, 1).end, 0);
  // dilation 2 widens the kernel to 5: in 5, stride 1 -> total 4
  EXPECT_EQ(ops::same_pads("SAME_UPPER", 5, 3, 1, 2).begin, 2);
  EXPECT_EQ(ops::same_pads("SAME_UPPER", 5, 3, 1, 2).end, 2);
  EXPECT_EQ(ops::same_pads("VALID", 5, 3, 1, 1).begin, 0);
  // a stride larger than the kernel needs no padding
  EXPECT_EQ(ops::same_pads("SAME_UPPER", 6, 1, 3, 1).end, 0);
}

TEST(NnShape, CeilModeDropsAWindowStartingInTheEndPadding) {
  // in 4, k 3, s 2: floor 1, ceil 2
  EXPECT_EQ(ops::window_out_dim(4, 3, 2, 0, 0, 1, false), 1);
  EXPECT_EQ(ops::window_out_dim(4, 3, 2, 0, 0, 1, true), 2);
  // in 2, k 3, s 3, pads 1+1: ceil would give 2 but window 2 starts at 3 = in + pad_begin
  EXPECT_EQ(ops::window_out_dim(2, 3, 3, 1, 1, 1, true), 1);
  // kernel that does not fit
  EXPECT_EQ(ops::window_out_dim(2, 5, 1, 0, 0, 1, false), -1);
  // ConvTranspose pads for an output longer than the full result: negative end pad
  ops::PadPair p = ops::conv_transpose_pads_for_output("NOTSET", 3, 3, 3, 1, 0, 10);
  EXPECT_EQ(p.begin, 0);
  EXPECT_EQ(p.end, -1);
}

// Builds a one-node ONNX model around `node` with float input x and
// initializer weight w (if given), imports it, and returns the graph.
std::unique_ptr<Graph> import_one(const onnx::NodeProto& node, const Shape& xs, const Tensor* w, int opset = 13,
                                  const std::string& w_name = "w") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("t");
  *g->add_node() = node;
  auto* in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : xs) in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  if (w) *g->add_initializer() = tensor_to_proto(*w, w_name);
  g->add_output()->set_name("y");
  return import_onnx_bytes(m.SerializeAsString(), ".", "t.onnx").graph;
}

onnx::NodeProto conv_node(const std::string& auto_pad, Ints strides) {
  onnx::NodeProto n;
  n.set_op_type("Conv");
  // One call per name list (single-char literals trip a GCC 12 -Wrestrict false positive).
  for (const char* name : {"x", "w"}) *n.add_input() = std::string_view(name);
  *n.add_output() = std::string_view("y");
  auto* a = n.add_attribute();
  a->set_name("auto_pad");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(auto_pad);
  auto* s = n.add_attribute();
  s->set_name("strides");
  s->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : strides) s->add_ints(v);
  return n;
}

TEST(NnAdapter, ConvAutoPadBecomesExplicitPads) {
  Tensor w(DType::F32, {2, 1, 3, 3});
  auto g = import_one(conv_node("SAME_UPPER", {2, 2}), {1, 1, 6, 7}, &w);
  ASSERT_EQ(g->num_nodes(), 1u);
  Node* n = g->nodes().front().get();
  EXPECT_EQ(n->op(), "conv");
  // H: in 6 -> total 1 (0 before, 1 after); W: in 7 -> out 4, total (4-1)*2+3-7 = 2
  EXPECT_EQ(n->attrs().get_ints("pads"), (Ints{0, 1, 1, 1}));
  EXPECT_EQ(n->attrs().get_ints("dilations"), (Ints{1, 1}));
  EXPECT_EQ(n->output(0)->shape(), (Shape{1, 2, 3, 4}));
  auto g2 = import_one(conv_node("SAME_LOWER", {2, 2}), {1, 1, 6, 7}, &w);
  EXPECT_EQ(g2->nodes().front()->attrs().get_ints("pads"), (Ints{1, 1, 0, 1}));
  auto g3 = import_one(conv_node("VALID", {1, 1}), {1, 1, 6, 7}, &w);
  EXPECT_EQ(g3->nodes().front()->attrs().get_ints("pads"), (Ints{0, 0, 0, 0}));
  EXPECT_EQ(g3->nodes().front()->output(0)->shape(), (Shape{1, 2, 4, 5}));
  EXPECT_THROW(import_one(conv_node("SAME_MIDDLE", {1, 1}), {1, 1, 6, 7}, &w), Error);
  // weight rank 3 with a 4-D input is reported by the adapter
  Tensor w3(DType::F32, {2, 1, 3});
  EXPECT_THROW(import_one(conv_node("VALID", {1, 1}), {1, 1, 6, 7}, &w3), Error);
}

TEST(NnPool, AveragePoolCountIncludePadAndCeilMode) {
  // x = 1..9 in a 3x3 plane; kernel 2, stride 2, ceil_mode: windows
  // {1,2,4,5} {3,6} {7,8} {9}
  Tensor x(DType::F32, {1, 1, 3, 3});
  for (int i = 0; i < 9; ++i) x.set_double(i, i + 1);
  AttrMap a;
  a.set("kernel_shape", Ints{2, 2});
  a.set("strides", Ints{2, 2});
  a.set("pads", Ints{0, 0, 0, 0});
  a.set("dilations", Ints{1, 1});
  a.set("ceil_mode", int64_t(1));
  Tensor y = run("average_pool", {&x}, a)[0];
  ASSERT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_FLOAT_EQ(y.get_double(0), 3.0f);
  EXPECT_FLOAT_EQ(y.get_double(1), 4.5f);
  EXPECT_FLOAT_EQ(y.get_double(2), 7.5f);
  EXPECT_FLOAT_EQ(y.get_double(3), 9.0f);
  // pads 1 on every side, kernel 3, stride 2, count_include_pad: the corner
  // window holds 1,2,4,5 and five pad cells -> 12/9
  a.set("kernel_shape", Ints{3, 3});
  a.set("pads", Ints{1, 1, 1, 1});
  a.set("ceil_mode", int64_t(0));
  a.set("count_include_pad", int64_t(1));
  y = run("average_pool", {&x}, a)[0];
  ASSERT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_FLOAT_EQ(y.get_double(0), 12.0f / 9);
  a.set("count_include_pad", int64_t(0));
  y = run("average_pool", {&x}, a)[0];
  EXPECT_FLOAT_EQ(y.get_double(0), 3.0f);
  // lp_pool p=2 over the same corner window: sqrt(1+4+16+25)
  AttrMap l = a;
  l.erase("count_include_pad");
  l.set("p", int64_t(2));
  y = run("lp_pool", {&x}, l)[0];
  EXPECT_FLOAT_EQ(y.get_double(0), std::sqrt(46.0f));
}

TEST(NnPool, MaxPoolIndicesRowAndColumnMajor) {
  // 1x1x2x3 plane [[1,5,2],[7,3,4]]; kernel 2x2 stride 1 -> maxima 7 (at (1,0)) and 5 (at (0,1))
  Tensor x = Tensor::from<double>(DType::F32, {1, 1, 2, 3}, {1, 5, 2, 7, 3, 4});
  AttrMap a;
  a.set("kernel_shape", Ints{2, 2});
  a.set("strides", Ints{1, 1});
  a.set("pads", Ints{0, 0, 0, 0});
  a.set("dilations", Ints{1, 1});
  auto r = run("max_pool", {&x}, a, 2);
  ASSERT_EQ(r[0].shape(), (Shape{1, 1, 1, 2}));
  EXPECT_EQ(r[0].get_double(0), 7);
  EXPECT_EQ(r[0].get_double(1), 5);
  EXPECT_EQ(r[1].dtype(), DType::I64);
  EXPECT_EQ(r[1].get_int(0), 3);  // row-major (1,0) -> 1*3+0
  EXPECT_EQ(r[1].get_int(1), 1);  // (0,1) -> 1
  a.set("storage_order", int64_t(1));
  r = run("max_pool", {&x}, a, 2);
  EXPECT_EQ(r[1].get_int(0), 1);  // column-major (1,0) -> 0*2+1
  EXPECT_EQ(r[1].get_int(1), 2);  // (0,1) -> 1*2+0
}

TEST(NnPool, MaxUnpoolRejectsOutOfRangeIndices) {
  Tensor x = Tensor::from<double>(DType::F32, {1, 1, 1, 2}, {1, 2});
  Tensor ind = Tensor::from<int64_t>(DType::I64, {1, 1, 1, 2}, {0, 4});
  AttrMap a;
  a.set("output_shape", Ints{1, 1, 2, 2});
  EXPECT_THROW(run("max_unpool", {&x, &ind}, a), Error);
  Tensor ok = Tensor::from<int64_t>(DType::I64, {1, 1, 1, 2}, {3, 0});
  Tensor y = run("max_unpool", {&x, &ok}, a)[0];
  EXPECT_EQ(y.get_double(0), 2);
  EXPECT_EQ(y.get_double(3), 1);
  EXPECT_EQ(y.get_double(1), 0);
}

TEST(NnPool, InferenceErrors) {
  AttrMap a;
  a.set("kernel_shape", Ints{3, 3});
  a.set("strides", Ints{1, 1});
  a.set("pads", Ints{0, 0, 0, 0});
  a.set("dilations", Ints{1, 1});
  EXPECT_THROW(infer("max_pool", {{DType::F32, {1, 1, 2, 2}}}, a), Error);  // window larger than input
  EXPECT_THROW(infer("max_pool", {{DType::F32, {1, 4}}}, a), Error);        // no spatial axes
  AttrMap b = a;
  b.set("kernel_shape", Ints{3});
  EXPECT_THROW(infer("average_pool", {{DType::F32, {1, 1, 5, 5}}}, b), Error);  // kernel_shape size
  EXPECT_THROW(infer("average_pool", {{DType::I64, {1, 1, 5, 5}}}, a), Unsupported);
  EXPECT_EQ(infer("max_pool", {{DType::U8, {1, 1, 5, 5}}}, a)[0].shape, (Shape{1, 1, 3, 3}));
}

AttrMap resize_attrs(Ints sizes, const std::string& mode, const std::string& ct) {
  AttrMap a;
  a.set("sizes", sizes);
  a.set("mode", mode);
  a.set("coordinate_transformation_mode", ct);
  a.set("nearest_mode", std::string("round_prefer_floor"));
  return a;
}

TEST(NnResize, LinearAndNearestAgainstHandValues) {
  // 1-D [0, 10, 20] to 5 with align_corners: x_orig = i * 2/4 -> 0,5,10,15,20
  Tensor x = Tensor::from<double>(DType::F32, {1, 3}, {0, 10, 20});
  Tensor y = run("resize", {&x}, resize_attrs({1, 5}, "linear", "align_corners"))[0];
  for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(y.get_double(i), 5.0f * i);
  // half_pixel to 6: x_orig = (i+0.5)/2 - 0.5 = -0.25, 0.25, 0.75, 1.25, 1.75, 2.25 (clamped at the edges)
  y = run("resize", {&x}, resize_attrs({1, 6}, "linear", "half_pixel"))[0];
  double want[] = {0, 2.5, 7.5, 12.5, 17.5, 20};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y.get_double(i), want[i]);
  // nearest, asymmetric, integer dtype: 3 -> 2 picks x_orig = 0, 1.5 -> round_prefer_floor -> 1
  Tensor xi = Tensor::from<int64_t>(DType::I64, {3}, {7, 8, 9});
  y = run("resize", {&xi}, resize_attrs({2}, "nearest", "asymmetric"))[0];
  EXPECT_EQ(y.get_int(0), 7);
  EXPECT_EQ(y.get_int(1), 8);
  // linear on integers is not supported
  EXPECT_THROW(run("resize", {&xi}, resize_attrs({2}, "linear", "asymmetric")), Unsupported);
  // tf_crop_and_resize outside the roi gives extrapolation_value
  AttrMap c = resize_attrs({3}, "linear", "tf_crop_and_resize");
  c.set("roi", std::vector<float>{0.5f, 1.5f});
  c.set("extrapolation_value", -1.0f);
  Tensor x1 = Tensor::from<double>(DType::F32, {3}, {0, 10, 20});
  y = run("resize", {&x1}, c)[0];  // x_orig = 1, 2, 3 -> 10, 20, outside
  EXPECT_FLOAT_EQ(y.get_double(0), 10);
  EXPECT_FLOAT_EQ(y.get_double(1), 20);
  EXPECT_FLOAT_EQ(y.get_double(2), -1);
  // sizes of the wrong rank
  EXPECT_THROW(infer("resize", {{DType::F32, {1, 3}}}, resize_attrs({4}, "linear", "half_pixel")), Error);
}

TEST(NnAdapter, OldResizeAndUpsampleUseAsymmetricFloorOrCeil) {
  // Resize-10, scales 0.6 on a 2x4 plane (the ONNX opset-10 test): x_orig =
  // 0 and 1/0.6 = 1.67 along W; shrinking axes take the ceiling -> [[1, 3]].
  onnx::NodeProto n;
  n.set_op_type("Resize");
  for (const char* name : {"x", "s"}) *n.add_input() = std::string_view(name);
  *n.add_output() = std::string_view("y");
  Tensor scales = Tensor::from<double>(DType::F32, {4}, {1, 1, 0.6, 0.6});
  auto g = import_one(n, {1, 1, 2, 4}, &scales, 10, "s");
  Node* r = g->nodes().front().get();
  EXPECT_EQ(r->attrs().get_string("nearest_mode", ""), "simple");
  EXPECT_EQ(r->output(0)->shape(), (Shape{1, 1, 1, 2}));
  Tensor x = Tensor::from<double>(DType::F32, {1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor y = run_graph_reference(*g, {&x})[0];
  EXPECT_EQ(y.get_double(0), 1);
  EXPECT_EQ(y.get_double(1), 3);
  // Upsample-7 with a scales attribute: 2x nearest repeats elements.
  onnx::NodeProto u;
  u.set_op_type("Upsample");
  *u.add_input() = std::string_view("x");
  *u.add_output() = std::string_view("y");
  auto* a = u.add_attribute();
  a->set_name("scales");
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float f : {1.0f, 1.0f, 2.0f, 1.0f}) a->add_floats(f);
  auto g2 = import_one(u, {1, 1, 2, 4}, nullptr, 7);
  Tensor y2 = run_graph_reference(*g2, {&x})[0];
  ASSERT_EQ(y2.shape(), (Shape{1, 1, 4, 4}));
  double want[] = {1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8, 5, 6, 7, 8};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(y2.get_double(i), want[i]) << i;
}

TEST(NnDeformConv, ZeroOffsetsAreConvAndIntegerOffsetsShift) {
  std::mt19937 rng(5);
  // 2 groups, 2 offset groups, stride 1, pads 1: out 5x6
  Tensor x = random_tensor(DType::F32, {1, 4, 5, 6}, rng), w = random_tensor(DType::F32, {4, 2, 3, 3}, rng);
  Tensor b = random_tensor(DType::F32, {4}, rng);
  AttrMap a = conv_attrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 2);
  Tensor ref = run("conv", {&x, &w, &b}, a)[0];
  a.set("offset_group", int64_t(2));
  Tensor off(DType::F32, {1, 2 * 2 * 9, 5, 6});
  Tensor y = run("deform_conv", {&x, &w, &off, &b}, a)[0];
  ASSERT_EQ(y.shape(), ref.shape());
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_NEAR(y.get_double(i), ref.get_double(i), 1e-5) << i;
  // A mask of 0.5 everywhere halves the conv part (bias stays).
  Tensor mask(DType::F32, {1, 2 * 9, 5, 6});
  for (int64_t i = 0; i < mask.numel(); ++i) mask.set_double(i, 0.5);
  y = run("deform_conv", {&x, &w, &off, &b, &mask}, a)[0];
  for (int64_t i = 0; i < y.numel(); ++i) {
    double bias = b.get_double(i / 30);
    ASSERT_NEAR(y.get_double(i) - bias, (ref.get_double(i) - bias) * 0.5, 1e-5) << i;
  }
  // Offsetting every tap by +1 along W reads x one column to the right:
  // equal to conv with the W pads shifted by one (begin 0, end 2).
  for (int64_t i = 0; i < off.numel(); ++i) {
    int64_t chan = (i / 30) % 2;  // offset channels alternate (h, w) per tap
    off.set_double(i, chan == 1 ? 1.0 : 0.0);
  }
  y = run("deform_conv", {&x, &w, &off, &b}, a)[0];
  Tensor shifted = run("conv", {&x, &w, &b}, conv_attrs({1, 1}, {1, 0, 1, 2}, {1, 1}, 2))[0];
  ASSERT_EQ(shifted.shape(), y.shape());
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_NEAR(y.get_double(i), shifted.get_double(i), 1e-5) << i;
  // offset of the wrong shape
  Tensor bad(DType::F32, {1, 9, 5, 6});
  EXPECT_THROW(run("deform_conv", {&x, &w, &bad}, a), Error);
}

}  // namespace
}  // namespace kiln
