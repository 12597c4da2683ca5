// The preview-domain and optional adapters (frontend/adapters_preview.cpp,
// frontend/adapters_optional.cpp): FlexAttention is imported from domain
// ai.onnx.preview version 1 only, computes ONNX's reference on grouped query
// heads (checked against a direct evaluation), applies its score_mod and
// prob_mod subgraphs to the whole score and probability tensors, and refuses
// a subgraph attribute it does not know by name; OptionalHasElement is a constant, OptionalGetElement of a
// tensor that tensor.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>

#include "backends/reference/executor.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"

namespace kiln {
namespace {

constexpr int F32 = onnx::TensorProto::FLOAT;

onnx::ModelProto flex_model(int64_t preview_version, const std::vector<std::vector<int64_t>>& dims) {
  onnx::ModelProto m;
  m.set_ir_version(10);
  m.add_opset_import()->set_version(26);
  auto* pv = m.add_opset_import();
  pv->set_domain("ai.onnx.preview");
  pv->set_version(preview_version);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type("FlexAttention");
  n->set_domain("ai.onnx.preview");
  n->set_name("n");
  const char* names[] = {"Q", "K", "V"};
  for (int i = 0; i < 3; ++i) {
    auto* vi = g->add_input();
    vi->set_name(names[i]);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(F32);
    for (int64_t d : dims[i]) tt->mutable_shape()->add_dim()->set_dim_value(d);
    n->add_input(names[i]);
  }
  n->add_output("Y");
  g->add_output()->set_name("Y");
  return m;
}

ImportResult import_model(const onnx::ModelProto& m) { return import_onnx_bytes(m.SerializeAsString(), ".", "m.onnx"); }

std::string unsupported_of(const onnx::ModelProto& m) {
  try {
    import_model(m);
  } catch (const Unsupported& e) {
    return e.what();
  }
  return "(no Unsupported)";
}

Tensor seeded(Shape s, double k) {
  Tensor t(DType::F32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, std::sin(k * double(i + 1)));
  return t;
}

TEST(FrontendPreview, FlexAttentionWithGroupedHeadsIsOnnxReference) {
  // Q [1, 4, 2, 3] over K/V [1, 2, 3, 3]: query heads 0,1 read kv head 0; 2,3 kv head 1.
  ImportResult r = import_model(flex_model(1, {{1, 4, 2, 3}, {1, 2, 3, 3}, {1, 2, 3, 3}}));
  Tensor q = seeded({1, 4, 2, 3}, 0.7), k = seeded({1, 2, 3, 3}, 1.3), v = seeded({1, 2, 3, 3}, 2.1);
  Tensor y = ReferenceExecutor(*r.graph).run({{"Q", q}, {"K", k}, {"V", v}}).at(0);
  ASSERT_EQ(y.type().str(), "f32[1,4,2,3]");
  const double scale = 1.0 / std::sqrt(3.0);
  for (int h = 0; h < 4; ++h)
    for (int i = 0; i < 2; ++i) {
      const int kh = h / 2;
      double s[3], mx = -1e30, sum = 0;
      for (int j = 0; j < 3; ++j) {
        s[j] = 0;
        for (int d = 0; d < 3; ++d) s[j] += q.get_double((h * 2 + i) * 3 + d) * k.get_double((kh * 3 + j) * 3 + d);
        s[j] *= scale;
        mx = std::max(mx, s[j]);
      }
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int d = 0; d < 3; ++d) {
        double o = 0;
        for (int j = 0; j < 3; ++j) o += s[j] / sum * v.get_double((kh * 3 + j) * 3 + d);
        EXPECT_NEAR(y.get_double((h * 2 + i) * 3 + d), o, 1e-5) << h << " " << i << " " << d;
      }
    }
}

// A one-node subgraph `op`(in, constant c) -> out, as FlexAttention's mods.
void add_mod(onnx::ModelProto& m, const std::string& attr, const std::string& op, float c, int inputs = 1) {
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* g = a->mutable_g();
  g->set_name(attr + "_graph");
  for (int i = 0; i < inputs; ++i) {
    auto* in = g->add_input();
    in->set_name(attr + "_in" + std::to_string(i));
    in->mutable_type()->mutable_tensor_type()->set_elem_type(F32);
  }
  auto* k = g->add_initializer();
  k->set_name(attr + "_c");
  k->set_data_type(F32);
  k->add_float_data(c);
  auto* n = g->add_node();
  n->set_op_type(op);
  n->add_input(attr + "_in0");
  n->add_input(attr + "_c");
  n->add_output(attr + "_out");
  g->add_output()->set_name(attr + "_out");
}

TEST(FrontendPreview, ScoreAndProbModsApplyToTheWholeTensors) {
  // score_mod adds 0.5 to every score; prob_mod halves every probability:
  // softmax is shift-invariant, so Y is half the plain attention's.
  const std::vector<std::vector<int64_t>> dims = {{1, 2, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 4}};
  Tensor q = seeded({1, 2, 3, 4}, 0.3), k = seeded({1, 2, 5, 4}, 0.9), v = seeded({1, 2, 5, 4}, 1.7);
  auto run = [&](const onnx::ModelProto& m) {
    return ReferenceExecutor(*import_model(m).graph).run({{"Q", q}, {"K", k}, {"V", v}}).at(0);
  };
  Tensor plain = run(flex_model(1, dims));
  onnx::ModelProto m = flex_model(1, dims);
  add_mod(m, "score_mod", "Add", 0.5f);
  add_mod(m, "prob_mod", "Mul", 0.5f);
  Tensor y = run(m);
  ASSERT_EQ(y.type().str(), "f32[1,2,3,4]");
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_NEAR(y.get_double(i), 0.5 * plain.get_double(i), 1e-6) << i;
  // A score_mod that multiplies by 0 makes every row uniform: Y is V's column mean.
  m = flex_model(1, dims);
  add_mod(m, "score_mod", "Mul", 0.0f);
  y = run(m);
  for (int h = 0; h < 2; ++h)
    for (int d = 0; d < 4; ++d) {
      double mean = 0;
      for (int j = 0; j < 5; ++j) mean += v.get_double((h * 5 + j) * 4 + d) / 5;
      for (int i = 0; i < 3; ++i) EXPECT_NEAR(y.get_double((h * 3 + i) * 4 + d), mean, 1e-6) << h << " " << i;
    }
}

TEST(FrontendPreview, OtherPreviewVersionsAndBadModsAreRefused) {
  const std::vector<std::vector<int64_t>> dims = {{1, 1, 2, 3}, {1, 1, 2, 3}, {1, 1, 2, 3}};
  std::string e = unsupported_of(flex_model(2, dims));
  EXPECT_NE(e.find("domain 'ai.onnx.preview' version 2 is not supported"), std::string::npos) << e;
  onnx::ModelProto m = flex_model(1, dims);
  add_mod(m, "score_mod", "Add", 1.0f, 2);
  try {
    import_model(m);
    ADD_FAILURE() << "a score_mod with two inputs imported";
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("node \"n\" (FlexAttention): subgraph 'score_mod': the subgraph takes 2 inputs, 1 given"),
            std::string::npos)
      << e;
  m = flex_model(1, dims);
  add_mod(m, "mask_mod", "Add", 1.0f);
  e = unsupported_of(m);
  EXPECT_NE(e.find("node \"n\" (FlexAttention): subgraph attribute 'mask_mod' is not supported"), std::string::npos)
      << e;
  m = flex_model(1, dims);
  m.mutable_graph()->mutable_node(0)->set_op_type("FlexAttention2");
  e = unsupported_of(m);
  EXPECT_NE(e.find("op FlexAttention2 of domain 'ai.onnx.preview' is not supported"), std::string::npos) << e;
}

TEST(FrontendPreview, OptionalOpsOnTensors) {
  onnx::ModelProto m;
  m.set_ir_version(10);
  m.add_opset_import()->set_version(18);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(F32);
  x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
  auto* has = g->add_node();
  has->set_op_type("OptionalHasElement");
  has->add_input("x");
  has->add_output("has");
  auto* none = g->add_node();
  none->set_op_type("OptionalHasElement");
  none->add_output("none");
  auto* get = g->add_node();
  get->set_op_type("OptionalGetElement");
  get->add_input("x");
  get->add_output("y");
  for (const char* o : {"has", "none", "y"}) g->add_output()->set_name(o);
  ImportResult r = import_model(m);
  Tensor xv = Tensor::from<double>(DType::F32, {2}, {1.5, -2});
  std::vector<Tensor> out = ReferenceExecutor(*r.graph).run({{"x", xv}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].type().str(), "bool[]");
  EXPECT_EQ(out[0].get_int(0), 1);
  EXPECT_EQ(out[1].get_int(0), 0);
  EXPECT_EQ(out[2].get_double(1), -2.0);
}

}  // namespace
}  // namespace kiln
