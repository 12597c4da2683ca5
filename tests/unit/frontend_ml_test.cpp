// The ai.onnx.ml ops kiln imports (frontend/adapters_ml.cpp): Binarizer in
// x's dtype, ArrayFeatureExtractor along the last axis (a 1-D x gives
// [1, k]); an ai.onnx.ml op kiln lacks and a newer ml version are refused by
// name.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "backends/reference/executor.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"

namespace kiln {
namespace {

onnx::ModelProto ml_model(const std::string& op, int64_t ml_version, std::vector<std::vector<int64_t>> dims,
                          std::vector<int> types) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* d = m.add_opset_import();
  d->set_domain("ai.onnx.ml");
  d->set_version(ml_version);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_domain("ai.onnx.ml");
  n->set_name(op);
  for (size_t i = 0; i < dims.size(); ++i) {
    std::string name = "in" + std::to_string(i);
    n->add_input(name);
    auto* vi = g->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(types[i]);
    for (int64_t v : dims[i]) tt->mutable_shape()->add_dim()->set_dim_value(v);
  }
  n->add_output("y");
  g->add_output()->set_name("y");
  return m;
}

ImportResult import_model(const onnx::ModelProto& m) { return import_onnx_bytes(m.SerializeAsString(), ".", "m.onnx"); }

TEST(FrontendMl, BinarizerKeepsTheDtype) {
  onnx::ModelProto m = ml_model("Binarizer", 1, {{4}}, {onnx::TensorProto::INT64});
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("threshold");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(2.0f);
  ImportResult r = import_model(m);
  std::vector<Tensor> out =
      ReferenceExecutor(*r.graph).run({{"in0", Tensor::from<int64_t>(DType::I64, {4}, {1, 2, 3, -7})}});
  EXPECT_EQ(out[0].type().str(), "i64[4]");
  EXPECT_EQ(out[0].to_int_vector(), (std::vector<int64_t>{0, 0, 1, 0}));
}

TEST(FrontendMl, ArrayFeatureExtractorTakesTheLastAxis) {
  onnx::ModelProto m =
      ml_model("ArrayFeatureExtractor", 3, {{2, 3}, {1, 2}}, {onnx::TensorProto::FLOAT, onnx::TensorProto::INT64});
  ImportResult r = import_model(m);
  std::vector<Tensor> out =
      ReferenceExecutor(*r.graph).run({{"in0", Tensor::from<double>(DType::F32, {2, 3}, {0, 1, 2, 10, 11, 12})},
                                       {"in1", Tensor::from<int64_t>(DType::I64, {1, 2}, {2, 0})}});
  EXPECT_EQ(out[0].type().str(), "f32[2,2]");
  EXPECT_EQ(out[0].get_double(2), 12);
  EXPECT_EQ(out[0].get_double(3), 10);
  m = ml_model("ArrayFeatureExtractor", 1, {{3}, {1}}, {onnx::TensorProto::FLOAT, onnx::TensorProto::INT64});
  r = import_model(m);
  out = ReferenceExecutor(*r.graph).run({{"in0", Tensor::from<double>(DType::F32, {3}, {5, 6, 7})},
                                         {"in1", Tensor::from<int64_t>(DType::I64, {1}, {1})}});
  EXPECT_EQ(out[0].type().str(), "f32[1,1]");
  EXPECT_EQ(out[0].get_double(0), 6);
}

TEST(FrontendMl, OtherOpsAndVersionsAreRefused) {
  auto unsupported_of = [](const onnx::ModelProto& m) -> std::string {
    try {
      import_model(m);
    } catch (const Unsupported& e) {
      return e.what();
    }
    return "(no Unsupported)";
  };
  std::string e = unsupported_of(ml_model("SVMClassifier", 1, {{2}}, {onnx::TensorProto::FLOAT}));
  EXPECT_NE(e.find("op SVMClassifier of domain 'ai.onnx.ml' is not supported"), std::string::npos) << e;
  e = unsupported_of(ml_model("Binarizer", 6, {{2}}, {onnx::TensorProto::FLOAT}));
  EXPECT_NE(e.find("domain 'ai.onnx.ml' version 6 is not supported (kiln reads versions 1 to 5)"), std::string::npos)
      << e;
}

}  // namespace
}  // namespace kiln
