// The ONNX adapters of the shape and data-movement ops, opset by opset:
// one-node models through the importer and the reference backend.
// Expected values are hand-computed or from numpy (noted where so).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <functional>
#include <map>

#include "backends/reference/executor.h"
#include "frontend/onnx_import.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "shape_ops_test_util.h"

namespace kiln {
namespace {

using namespace kiln::testing::shape_ops;

struct OnnxNode {
  using Inputs = std::vector<std::pair<std::string, Tensor>>;
  OnnxNode(std::string op_, int opset_, Inputs inputs_, std::vector<std::string> frozen_ = {}, int outputs_ = 1,
           std::function<void(onnx::NodeProto&)> set_attrs_ = {})
      : op(std::move(op_)),
        opset(opset_),
        inputs(std::move(inputs_)),
        frozen(std::move(frozen_)),
        outputs(outputs_),
        set_attrs(std::move(set_attrs_)) {}
  std::string op;
  int opset;
  Inputs inputs;                    // name, value ("" name = absent)
  std::vector<std::string> frozen;  // inputs given as initializers
  int outputs;
  std::function<void(onnx::NodeProto&)> set_attrs;
};

std::vector<Tensor> run_onnx(const OnnxNode& n) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(n.opset);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("t");
  onnx::NodeProto* node = g->add_node();
  node->set_op_type(n.op);
  node->set_name("n");
  std::map<std::string, Tensor> feed;
  for (auto& [name, t] : n.inputs) {
    node->add_input(name);
    if (name.empty()) continue;
    bool is_init = std::find(n.frozen.begin(), n.frozen.end(), name) != n.frozen.end();
    if (is_init) {
      *g->add_initializer() = tensor_to_proto(t, name);
      continue;
    }
    onnx::ValueInfoProto* vi = g->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtype_to_onnx(t.dtype()));
    auto* sh = tt->mutable_shape();
    for (int64_t d : t.shape()) sh->add_dim()->set_dim_value(d);
    feed[name] = t;
  }
  for (int i = 0; i < n.outputs; ++i) {
    node->add_output(fmt::format("y{}", i));
    g->add_output()->set_name(fmt::format("y{}", i));
  }
  if (n.set_attrs) n.set_attrs(*node);
  std::string bytes;
  m.SerializeToString(&bytes);
  ImportOptions opts;
  opts.known_inputs = feed;
  ImportResult r = import_onnx_bytes(bytes, "", "t.onnx", opts);
  std::map<std::string, Tensor> runtime_feed;
  for (Value* in : r.graph->inputs()) runtime_feed[in->name()] = feed.at(in->name());
  return ReferenceExecutor(*r.graph).run(runtime_feed);
}

onnx::AttributeProto* add_attr(onnx::NodeProto& n, const std::string& name, onnx::AttributeProto::AttributeType t) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(t);
  return a;
}
void attr_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
  add_attr(n, name, onnx::AttributeProto::INT)->set_i(v);
}
void attr_ints(onnx::NodeProto& n, const std::string& name, const I& v) {
  auto* a = add_attr(n, name, onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
Tensor i64(I v) { return Tensor::from(DType::I64, {static_cast<int64_t>(v.size())}, v); }

TEST(ShapeAdapters, ReshapeZeroCopiesAndMinusOneInfers) {
  auto y = run_onnx({"Reshape", 14, {{"x", iota(DType::F32, {2, 3, 4})}, {"s", i64({0, -1})}}});
  EXPECT_EQ(y[0].shape(), (Shape{2, 12}));
  // allowzero=1 keeps a literal 0 (empty input).
  auto z =
      run_onnx({"Reshape", 14, {{"x", Tensor(DType::F32, {0, 3})}, {"s", i64({3, 0})}}, {}, 1, [](onnx::NodeProto& n) {
                  attr_int(n, "allowzero", 1);
                }});
  EXPECT_EQ(z[0].shape(), (Shape{3, 0}));
  EXPECT_ERROR_HAS(run_onnx({"Reshape", 14, {{"x", iota(DType::F32, {2, 3})}, {"s", i64({4, -1})}}}), "cannot reshape");
  EXPECT_ERROR_HAS(run_onnx({"Reshape", 14, {{"x", iota(DType::F32, {2, 3})}, {"s", i64({-1, -1})}}}),
                   "more than one -1");
  // Opset 1-4: the shape is an attribute.
  auto old = run_onnx({"Reshape", 4, {{"x", iota(DType::F32, {2, 3})}}, {}, 1, [](onnx::NodeProto& n) {
                         attr_ints(n, "shape", {3, -1});
                       }});
  EXPECT_EQ(old[0].shape(), (Shape{3, 2}));
}

TEST(ShapeAdapters, SqueezeChecksAxesAndDefaultsToAllOnes) {
  auto y = run_onnx({"Squeeze", 13, {{"x", iota(DType::F32, {1, 3, 1})}}});
  EXPECT_EQ(y[0].shape(), (Shape{3}));
  EXPECT_ERROR_HAS(run_onnx({"Squeeze", 13, {{"x", iota(DType::F32, {1, 3, 1})}, {"a", i64({1})}}}), "not 1");
  auto old = run_onnx({"Squeeze", 11, {{"x", iota(DType::F32, {1, 3, 1})}}, {}, 1, [](onnx::NodeProto& n) {
                         attr_ints(n, "axes", {-1});
                       }});
  EXPECT_EQ(old[0].shape(), (Shape{1, 3}));
  auto u = run_onnx({"Unsqueeze", 13, {{"x", iota(DType::F32, {3, 4})}, {"a", i64({-1, 0})}}});
  EXPECT_EQ(u[0].shape(), (Shape{1, 3, 4, 1}));
  EXPECT_ERROR_HAS(run_onnx({"Unsqueeze", 13, {{"x", iota(DType::F32, {3})}, {"a", i64({0, -3})}}}), "repeated");
}

TEST(ShapeAdapters, SliceOpset1AttributesAndIntMaxEnds) {
  auto y = run_onnx({"Slice", 1, {{"x", iota(DType::F32, {3, 4})}}, {}, 1, [](onnx::NodeProto& n) {
                       attr_ints(n, "starts", {1});
                       attr_ints(n, "ends", {INT64_MAX});
                       attr_ints(n, "axes", {1});
                     }});
  EXPECT_EQ(values(y[0]), (std::vector<double>{1, 2, 3, 5, 6, 7, 9, 10, 11}));
  // Opset 10+: reversal with INT_MIN end (numpy x[::-1]).
  auto r = run_onnx(
      {"Slice",
       13,
       {{"x", iota(DType::I32, {4})}, {"s", i64({-1})}, {"e", i64({INT64_MIN})}, {"a", i64({0})}, {"p", i64({-1})}}});
  EXPECT_EQ(values(r[0]), (std::vector<double>{3, 2, 1, 0}));
}

TEST(ShapeAdapters, PadKeepsLargeIntegerValueExact) {
  // 2^53 + 1 does not fit an f32 attribute: it must stay an operand.
  Tensor v(DType::I64, {});
  v.set_int(0, (int64_t(1) << 53) + 1);
  auto y = run_onnx({"Pad", 13, {{"x", ints(DType::I64, {1}, {5})}, {"p", i64({1, 0})}, {"v", v}}, {"v"}});
  EXPECT_EQ(y[0].get_int(0), (int64_t(1) << 53) + 1);
  EXPECT_EQ(y[0].get_int(1), 5);
  // A runtime constant_value stays an operand.
  auto rt = run_onnx(
      {"Pad", 13, {{"x", ints(DType::F32, {1}, {5})}, {"p", i64({0, 2})}, {"v", Tensor::scalar(DType::F32, -1)}}});
  EXPECT_EQ(values(rt[0]), (std::vector<double>{5, -1, -1}));
  // Opset 2: pads and value attributes.
  auto old = run_onnx({"Pad", 2, {{"x", iota(DType::F32, {2})}}, {}, 1, [](onnx::NodeProto& n) {
                         attr_ints(n, "pads", {0, 2});
                         add_attr(n, "value", onnx::AttributeProto::FLOAT)->set_f(1.5f);
                       }});
  EXPECT_EQ(values(old[0]), (std::vector<double>{0, 1, 1.5, 1.5}));
  // Opset 18 axes: pad only the last dim.
  auto ax =
      run_onnx({"Pad", 18, {{"x", iota(DType::F32, {2, 2})}, {"p", i64({1, 0})}, {"", Tensor()}, {"a", i64({-1})}}});
  EXPECT_EQ(values(ax[0]), (std::vector<double>{0, 0, 1, 0, 2, 3}));
}

TEST(ShapeAdapters, SplitForms) {
  // Opset 18 num_outputs with an uneven last chunk: 7 -> 3, 3, 1.
  auto y = run_onnx(
      {"Split", 18, {{"x", iota(DType::F32, {7})}}, {}, 3, [](onnx::NodeProto& n) { attr_int(n, "num_outputs", 3); }});
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(values(y[2]), (std::vector<double>{6}));
  // Opset 13 without sizes: equal parts must divide.
  EXPECT_ERROR_HAS(run_onnx({"Split", 13, {{"x", iota(DType::F32, {7})}}, {}, 2}), "equal parts");
  // Opset 2 sizes attribute.
  auto old = run_onnx({"Split", 2, {{"x", iota(DType::F32, {2, 3})}}, {}, 2, [](onnx::NodeProto& n) {
                         attr_int(n, "axis", -1);
                         attr_ints(n, "split", {1, 2});
                       }});
  EXPECT_EQ(values(old[1]), (std::vector<double>{1, 2, 4, 5}));
}

TEST(ShapeAdapters, ConstantsFromShapeSizeConstantOfShape) {
  auto s = run_onnx({"Shape", 15, {{"x", iota(DType::F32, {2, 3, 4})}}, {}, 1, [](onnx::NodeProto& n) {
                       attr_int(n, "start", -2);
                       attr_int(n, "end", 100);
                     }});
  EXPECT_EQ(s[0].to_int_vector(), (I{3, 4}));
  auto z = run_onnx({"Size", 13, {{"x", iota(DType::F32, {2, 3, 4})}}});
  EXPECT_EQ(z[0].shape(), Shape{});
  EXPECT_EQ(z[0].get_int(0), 24);
  auto c = run_onnx({"ConstantOfShape", 9, {{"s", i64({2, 2})}}, {}, 1, [](onnx::NodeProto& n) {
                       auto* a = add_attr(n, "value", onnx::AttributeProto::TENSOR);
                       *a->mutable_t() = tensor_to_proto(Tensor::from(DType::I32, {1}, std::vector<int>{7}), "v");
                     }});
  EXPECT_EQ(c[0].dtype(), DType::I32);
  EXPECT_EQ(values(c[0]), (std::vector<double>{7, 7, 7, 7}));
}

TEST(ShapeAdapters, ConstantNodeForms) {
  auto y = run_onnx({"Constant", 13, {}, {}, 1, [](onnx::NodeProto& n) { attr_ints(n, "value_ints", {4, 5}); }});
  EXPECT_EQ(y[0].dtype(), DType::I64);
  EXPECT_EQ(y[0].to_int_vector(), (I{4, 5}));
  auto f = run_onnx({"Constant", 13, {}, {}, 1, [](onnx::NodeProto& n) {
                       add_attr(n, "value_float", onnx::AttributeProto::FLOAT)->set_f(2.5f);
                     }});
  EXPECT_EQ(f[0].shape(), Shape{});
  EXPECT_EQ(f[0].get_double(0), 2.5);
  // value_string is a string scalar (string tensors run on the CPU path).
  auto s = run_onnx({"Constant", 13, {}, {}, 1, [](onnx::NodeProto& n) {
                       add_attr(n, "value_string", onnx::AttributeProto::STRING)->set_s("hi");
                     }});
  EXPECT_EQ(s[0].dtype(), DType::String);
  EXPECT_EQ(s[0].shape(), Shape{});
  ASSERT_EQ(s[0].numel(), 1);
  EXPECT_EQ(s[0].strings()[0], "hi");
}

TEST(ShapeAdapters, TileOpset1AndExpandBidirectional) {
  auto t = run_onnx(
      {"Tile",
       1,
       {{"x", iota(DType::F32, {2, 1})}, {"t", Tensor::scalar(DType::I64, 3)}, {"a", Tensor::scalar(DType::I64, 1)}}});
  EXPECT_EQ(t[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(values(t[0]), (std::vector<double>{0, 0, 0, 1, 1, 1}));
  // Expand's shape may be smaller than the input's dims (bidirectional broadcast).
  auto e = run_onnx({"Expand", 13, {{"x", iota(DType::F32, {3, 1})}, {"s", i64({1, 2})}}});
  EXPECT_EQ(e[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(values(e[0]), (std::vector<double>{0, 0, 1, 1, 2, 2}));
}

}  // namespace
}  // namespace kiln
