// The import of the ai.onnx.ml tree ensembles (frontend/adapters_tree_ensemble.cpp):
// TreeEnsemble-5's leaves after the interior nodes, its NaN-ended membership
// sets in node order and a tree that is one leaf; the legacy classifier's
// string labels refused by name; a feature past X's width refused naming the
// node.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>

#include "backends/reference/executor.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"

namespace kiln {
namespace {

onnx::AttributeProto* attr(onnx::NodeProto* n, const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(name);
  return a;
}
void ints(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = attr(n, name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void tensor(onnx::NodeProto* n, const std::string& name, int type, std::vector<float> v) {
  auto* a = attr(n, name);
  a->set_type(onnx::AttributeProto::TENSOR);
  auto* t = a->mutable_t();
  t->set_data_type(type);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (float x : v) {
    if (type == onnx::TensorProto::UINT8) t->add_int32_data(static_cast<int32_t>(x));
    else t->add_float_data(x);
  }
}

void strings(onnx::NodeProto* n, const std::string& name, std::vector<std::string> v) {
  auto* a = attr(n, name);
  a->set_type(onnx::AttributeProto::STRINGS);
  for (const std::string& x : v) a->add_strings(x);
}
void floats(onnx::NodeProto* n, const std::string& name, std::vector<float> v) {
  auto* a = attr(n, name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}

onnx::ModelProto model(const std::string& op, int64_t ml_version, int64_t width, onnx::NodeProto** node) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* d = m.add_opset_import();
  d->set_domain("ai.onnx.ml");
  d->set_version(ml_version);
  m.add_opset_import()->set_version(21);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_domain("ai.onnx.ml");
  n->set_name("trees");
  n->add_input("x");
  auto* vi = g->add_input();
  vi->set_name("x");
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(3);
  tt->mutable_shape()->add_dim()->set_dim_value(width);
  n->add_output("y");
  g->add_output()->set_name("y");
  *node = n;
  return m;
}

// Tree 0: x1 in {2, 5} ? leaf 0 (1.0) : (x0 in {7} ? leaf 1 (10.0) : leaf 2 (100.0));
// tree 1: one leaf (1000.0), both children of its root naming leaf 3.
onnx::ModelProto membership_model(int64_t width) {
  onnx::NodeProto* n = nullptr;
  onnx::ModelProto m = model("TreeEnsemble", 5, width, &n);
  ints(n, "tree_roots", {0, 2});
  ints(n, "nodes_featureids", {1, 0, 0});
  tensor(n, "nodes_modes", onnx::TensorProto::UINT8, {6, 6, 0});
  tensor(n, "nodes_splits", onnx::TensorProto::FLOAT, {0, 0, 0});
  ints(n, "nodes_truenodeids", {0, 1, 3});
  ints(n, "nodes_trueleafs", {1, 1, 1});
  ints(n, "nodes_falsenodeids", {1, 2, 3});
  ints(n, "nodes_falseleafs", {0, 1, 1});
  ints(n, "leaf_targetids", {0, 0, 0, 0});
  tensor(n, "leaf_weights", onnx::TensorProto::FLOAT, {1, 10, 100, 1000});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  tensor(n, "membership_values", onnx::TensorProto::FLOAT, {2, 5, nan, 7, nan});
  auto* nt = attr(n, "n_targets");
  nt->set_type(onnx::AttributeProto::INT);
  nt->set_i(1);
  return m;
}

ImportResult import_model(const onnx::ModelProto& m) { return import_onnx_bytes(m.SerializeAsString(), ".", "m.onnx"); }

TEST(FrontendTreeEnsemble, MembershipSetsInNodeOrderAndSingleLeafTrees) {
  ImportResult r = import_model(membership_model(2));
  std::vector<Tensor> out = ReferenceExecutor(*r.graph).run(
      {{"x", Tensor::from<double>(DType::F32, {3, 2}, std::vector<double>{0, 5, 7, 3, 6, 3})}});
  ASSERT_EQ(out[0].type().str(), "f32[3,1]");
  EXPECT_EQ(out[0].get_double(0), 1001);
  EXPECT_EQ(out[0].get_double(1), 1010);
  EXPECT_EQ(out[0].get_double(2), 1100);
}

TEST(FrontendTreeEnsemble, FeaturePastTheInputIsRefusedNamingTheNode) {
  try {
    import_model(membership_model(1));
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string s = e.what();
    EXPECT_NE(s.find("\"trees\""), std::string::npos) << s;
    EXPECT_NE(s.find("the trees read feature 1, but X f32[3,1] has 1 features"), std::string::npos) << s;
  }
}

TEST(FrontendTreeEnsemble, StringClassLabelsAreRefused) {
  onnx::NodeProto* n = nullptr;
  onnx::ModelProto m = model("TreeEnsembleClassifier", 3, 2, &n);
  n->add_output("scores");
  auto* a = attr(n, "classlabels_strings");
  a->set_type(onnx::AttributeProto::STRINGS);
  a->add_strings("cat");
  a->add_strings("dog");
  try {
    import_model(m);
    FAIL() << "no error";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("string class labels (classlabels_strings)"), std::string::npos) << e.what();
  }
}

TEST(FrontendTreeEnsemble, LegacyClassifierListingOnlyTheLabel) {
  // x0 <= 0.5 ? class 3 : class 8; the node lists only the label output.
  onnx::NodeProto* n = nullptr;
  onnx::ModelProto m = model("TreeEnsembleClassifier", 3, 2, &n);
  ints(n, "nodes_treeids", {0, 0, 0});
  ints(n, "nodes_nodeids", {0, 1, 2});
  ints(n, "nodes_featureids", {0, 0, 0});
  strings(n, "nodes_modes", {"BRANCH_LEQ", "LEAF", "LEAF"});
  floats(n, "nodes_values", {0.5f, 0, 0});
  ints(n, "nodes_truenodeids", {1, 0, 0});
  ints(n, "nodes_falsenodeids", {2, 0, 0});
  ints(n, "class_treeids", {0, 0});
  ints(n, "class_nodeids", {1, 2});
  ints(n, "class_ids", {0, 1});
  floats(n, "class_weights", {1, 1});
  ints(n, "classlabels_int64s", {3, 8});
  ImportResult r = import_model(m);
  std::vector<Tensor> out = ReferenceExecutor(*r.graph).run(
      {{"x", Tensor::from<double>(DType::F32, {3, 2}, std::vector<double>{0, 9, 1, 9, 0.5, 9})}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type().str(), "i64[3]");
  EXPECT_EQ(out[0].to_int_vector(), (std::vector<int64_t>{3, 8, 3}));
}

}  // namespace
}  // namespace kiln
