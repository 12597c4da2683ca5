// The adapters of onnx 1.23's newest ops (frontend/adapters_stateful.cpp:
// CausalConvWithState, LinearAttention; CumProd in adapters_reduction.cpp):
// each refuses a model importing an opset before the op existed, names the
// node for a bad attribute or operand, and imports what its tests use:
// CausalConvWithState's present_state is the padded sequence's tail (past
// state included), LinearAttention's default scale is 1/sqrt(d_k).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>

#include "backends/reference/executor.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"

namespace kiln {
namespace {

constexpr int F32 = onnx::TensorProto::FLOAT, I64 = onnx::TensorProto::INT64;

struct In {
  std::string name;  // "" for an absent optional operand
  int elem = F32;
  std::vector<int64_t> dims = {};
};

// One node `op` over graph inputs `ins` with outputs `outs`, at `opset`.
onnx::ModelProto one_node(const std::string& op, const std::vector<In>& ins, const std::vector<std::string>& outs,
                          int64_t opset) {
  onnx::ModelProto m;
  m.set_ir_version(10);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("n");
  for (const In& i : ins) {
    n->add_input(i.name);
    if (i.name.empty()) continue;
    auto* vi = g->add_input();
    vi->set_name(i.name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(i.elem);
    for (int64_t d : i.dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  for (const std::string& o : outs) {
    n->add_output(o);
    if (!o.empty()) g->add_output()->set_name(o);
  }
  return m;
}

void set_attr(onnx::ModelProto& m, const std::string& name, int64_t v) {
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void set_attr(onnx::ModelProto& m, const std::string& name, const std::string& v) {
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

ImportResult import_model(const onnx::ModelProto& m, const std::map<std::string, Tensor>& known = {}) {
  ImportOptions o;
  o.known_inputs = known;
  return import_onnx_bytes(m.SerializeAsString(), ".", "m.onnx", o);
}

std::string error_of(const onnx::ModelProto& m, const std::map<std::string, Tensor>& known = {}) {
  try {
    import_model(m, known);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<double> doubles(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_double(i));
  return v;
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(FrontendStateful, OpsBeforeTheirOpsetAreRefused) {
  const Tensor axis = Tensor::scalar(DType::I64, 0);
  EXPECT_HAS(error_of(one_node("CumProd", {{"x", F32, {3}}, {"axis", I64, {}}}, {"y"}, 25), {{"axis", axis}}),
             "CumProd exists from opset 26 on; the model imports opset 25");
  EXPECT_HAS(error_of(one_node("CausalConvWithState", {{"x", F32, {1, 2, 5}}, {"w", F32, {2, 1, 3}}}, {"y"}, 26)),
             "CausalConvWithState exists from opset 27 on");
  EXPECT_HAS(error_of(one_node("LinearAttention", {{"q", F32, {1, 2, 4}}, {"k", F32, {1, 2, 4}}, {"v", F32, {1, 2, 4}}},
                               {"y"}, 26)),
             "LinearAttention exists from opset 27 on");
}

TEST(FrontendStateful, CumProdAxisOperandBecomesAnAttribute) {
  ImportResult r = import_model(one_node("CumProd", {{"x", F32, {2, 3}}, {"axis", I64, {}}}, {"y"}, 26),
                                {{"axis", Tensor::scalar(DType::I64, -1)}});
  Tensor x = Tensor::from<double>(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = ReferenceExecutor(*r.graph).run({{"x", x}}).at(0);
  EXPECT_EQ(doubles(y), (std::vector<double>{1, 2, 6, 4, 20, 120}));
  EXPECT_HAS(error_of(one_node("CumProd", {{"x", F32, {2, 3}}, {"axis", I64, {}}}, {"y"}, 26),
                      {{"axis", Tensor::scalar(DType::I64, 2)}}),
             "node \"n\" (CumProd)");
}

TEST(FrontendStateful, CausalConvWithStateChecksItsOperands) {
  auto m = one_node("CausalConvWithState", {{"x", F32, {1, 2, 5}}, {"w", F32, {2, 1, 3}}}, {"y", "s"}, 27);
  set_attr(m, "activation", std::string("gelu"));
  EXPECT_HAS(error_of(m), "node \"n\" (CausalConvWithState): activation 'gelu' is not none, silu or swish");
  EXPECT_HAS(error_of(one_node("CausalConvWithState", {{"x", F32, {1, 2, 5}}, {"w", F32, {3, 1, 3}}}, {"y"}, 27)),
             "weight f32[3,1,3] must be f32[2, 1, k]");
  EXPECT_HAS(error_of(one_node("CausalConvWithState",
                               {{"x", F32, {1, 2, 5}}, {"w", F32, {2, 1, 3}}, {""}, {"p", F32, {1, 2, 3}}}, {"y"}, 27)),
             "past_state f32[1,2,3] must be f32[1, 2, 2]");
}

TEST(FrontendStateful, CausalConvWithStatePresentStateIsThePaddedTail) {
  // k = 3, one channel, past state [7, 8], input [1, 2]: the padded sequence
  // is [7, 8, 1, 2]; present_state its last two, [1, 2]; weights [1, 10, 100]
  // give y_t = x_{t-2} + 10 x_{t-1} + 100 x_t.
  ImportResult r = import_model(one_node("CausalConvWithState",
                                         {{"x", F32, {1, 1, 2}}, {"w", F32, {1, 1, 3}}, {""}, {"p", F32, {1, 1, 2}}},
                                         {"y", "s"}, 27));
  auto t = [](std::vector<double> v, Shape s) { return Tensor::from<double>(DType::F32, s, v); };
  std::vector<Tensor> out = ReferenceExecutor(*r.graph).run(
      {{"x", t({1, 2}, {1, 1, 2})}, {"w", t({1, 10, 100}, {1, 1, 3})}, {"p", t({7, 8}, {1, 1, 2})}});
  EXPECT_EQ(doubles(out.at(0)), (std::vector<double>{7 + 80 + 100, 8 + 10 + 200}));
  EXPECT_EQ(doubles(out.at(1)), (std::vector<double>{1, 2}));
}

TEST(FrontendStateful, LinearAttentionAttributes) {
  auto base = [] {
    return one_node("LinearAttention", {{"q", F32, {1, 2, 8}}, {"k", F32, {1, 2, 8}}, {"v", F32, {1, 2, 8}}},
                    {"y", "s"}, 27);
  };
  auto m = base();
  set_attr(m, "update_rule", std::string("linear"));
  set_attr(m, "q_num_heads", 2);
  set_attr(m, "kv_num_heads", 2);
  ImportResult r = import_model(m);
  const Node* la = nullptr;
  for (const auto& n : r.graph->nodes())
    if (n->op() == "linear_attention") la = n.get();
  ASSERT_NE(la, nullptr);
  EXPECT_FLOAT_EQ(la->attrs().get_float("scale", 0.0f), static_cast<float>(1.0 / std::sqrt(4.0)));  // d_k = 8 / 2
  EXPECT_EQ(r.graph->outputs()[1]->type().str(), "f32[1,2,4,4]");

  auto missing = base();
  set_attr(missing, "q_num_heads", 2);
  EXPECT_HAS(error_of(missing), "attribute 'kv_num_heads' is required");
  auto rule = base();
  set_attr(rule, "update_rule", std::string("mamba"));
  set_attr(rule, "q_num_heads", 2);
  set_attr(rule, "kv_num_heads", 2);
  EXPECT_HAS(error_of(rule), "update_rule 'mamba' is not linear, gated, delta or gated_delta");
  auto no_decay = base();  // the default rule, gated_delta, needs decay and beta
  set_attr(no_decay, "q_num_heads", 2);
  set_attr(no_decay, "kv_num_heads", 2);
  EXPECT_HAS(error_of(no_decay), "update_rule 'gated_delta' requires decay");
}

}  // namespace
}  // namespace kiln
