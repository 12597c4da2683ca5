// The ONNX adapters of linalg and misc ops: one-node models whose opset forms
// (Gemm opset 6 broadcasting, ConvInteger auto_pad, RNN activation
// parameters) the importer turns into kiln's explicit attributes.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "frontend/onnx_import.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ops/registry.h"

namespace kiln {
namespace {

// A one-node ONNX model with float inputs of the given dims.
onnx::ModelProto one_node(int64_t opset, const std::string& op, const std::vector<std::pair<std::string, Shape>>& ins,
                          int nout, const std::function<void(onnx::NodeProto&)>& attrs,
                          int elem = onnx::TensorProto::FLOAT) {
  onnx::ModelProto m;
  m.set_ir_version(opset >= 14 ? 8 : 6);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("n");
  for (auto& [name, dims] : ins) {
    n->add_input(name);
    if (name.empty()) continue;
    auto* in = g->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  for (int i = 0; i < nout; ++i) {
    n->add_output(fmt::format("y{}", i));
    g->add_output()->set_name(fmt::format("y{}", i));
  }
  attrs(*n);
  return m;
}

void set_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

ImportResult import(const onnx::ModelProto& m) { return import_onnx_bytes(m.SerializeAsString(), ".", "m.onnx"); }

TEST(LinalgAdapters, GemmOpset6BroadcastZeroNeedsFullC) {
  auto model = [](Shape c, int64_t broadcast) {
    return one_node(6, "Gemm", {{"a", {2, 3}}, {"b", {3, 4}}, {"c", c}}, 1,
                    [&](onnx::NodeProto& n) { set_int(n, "broadcast", broadcast); });
  };
  EXPECT_EQ(import(model({2, 4}, 0)).graph->outputs()[0]->type().str(), "f32[2,4]");
  EXPECT_EQ(import(model({4}, 1)).graph->outputs()[0]->type().str(), "f32[2,4]");
  try {
    import(model({4}, 0));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broadcast=0"), std::string::npos) << e.what();
  }
  // transA/transB become trans_a/trans_b.
  ImportResult r = import(one_node(13, "Gemm", {{"a", {3, 2}}, {"b", {4, 3}}}, 1, [](onnx::NodeProto& n) {
    set_int(n, "transA", 1);
    set_int(n, "transB", 1);
  }));
  const Node& g = *r.graph->nodes().front();
  EXPECT_EQ(g.op(), "gemm");
  EXPECT_EQ(g.attrs().get_int("trans_a", 0), 1);
  EXPECT_EQ(g.attrs().get_int("trans_b", 0), 1);
  EXPECT_EQ(g.output()->type().str(), "f32[2,4]");
}

TEST(LinalgAdapters, ConvIntegerAutoPadBecomesExplicitPads) {
  auto model = [](const std::string& ap) {
    return one_node(
        10, "ConvInteger", {{"x", {1, 1, 5, 5}}, {"w", {1, 1, 2, 2}}}, 1,
        [&](onnx::NodeProto& n) {
          auto* a = n.add_attribute();
          a->set_name("auto_pad");
          a->set_type(onnx::AttributeProto::STRING);
          a->set_s(ap);
          auto* s = n.add_attribute();
          s->set_name("strides");
          s->set_type(onnx::AttributeProto::INTS);
          s->add_ints(2);
          s->add_ints(2);
        },
        onnx::TensorProto::UINT8);
  };
  // out = ceil(5/2) = 3; total pad = (3-1)*2 + 2 - 5 = 1.
  ImportResult up = import(model("SAME_UPPER"));
  EXPECT_EQ(up.graph->nodes().front()->attrs().get_ints("pads"), (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(up.graph->outputs()[0]->type().str(), "i32[1,1,3,3]");
  ImportResult lo = import(model("SAME_LOWER"));
  EXPECT_EQ(lo.graph->nodes().front()->attrs().get_ints("pads"), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(import(model("VALID")).graph->outputs()[0]->type().str(), "i32[1,1,2,2]");
}

TEST(MiscAdapters, RnnActivationParametersBecomePositional) {
  ImportResult r =
      import(one_node(14, "GRU", {{"X", {2, 1, 3}}, {"W", {2, 12, 3}}, {"R", {2, 12, 4}}}, 2, [](onnx::NodeProto& n) {
        set_int(n, "hidden_size", 4);
        auto* d = n.add_attribute();
        d->set_name("direction");
        d->set_type(onnx::AttributeProto::STRING);
        d->set_s("bidirectional");
        auto* acts = n.add_attribute();
        acts->set_name("activations");
        acts->set_type(onnx::AttributeProto::STRINGS);
        for (const char* s : {"HardSigmoid", "tanh", "LeakyRelu", "ScaledTanh"}) acts->add_strings(s);
        auto* al = n.add_attribute();
        al->set_name("activation_alpha");
        al->set_type(onnx::AttributeProto::FLOATS);
        for (float f : {0.3f, 0.1f, 2.0f}) al->add_floats(f);
      }));
  const Node& g = *r.graph->nodes().front();
  EXPECT_EQ(g.op(), "gru");
  EXPECT_EQ(g.attrs().get_strings("activations"),
            (std::vector<std::string>{"HardSigmoid", "Tanh", "LeakyRelu", "ScaledTanh"}));
  EXPECT_EQ(g.attrs().get_floats("activation_alpha"), (std::vector<float>{0.3f, 0.0f, 0.1f, 2.0f}));
  EXPECT_EQ(g.attrs().get_floats("activation_beta"), (std::vector<float>{0.5f, 0.0f, 0.0f, 1.0f}));
  EXPECT_EQ(g.output(0)->type().str(), "f32[2,2,1,4]");
}

}  // namespace
}  // namespace kiln
