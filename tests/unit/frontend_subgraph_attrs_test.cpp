// Every subgraph (GRAPH) attribute of a node is imported or deliberately
// skipped by its adapter (frontend/onnx_import.cpp, after the adapter): a
// body on an op whose adapter never reads one, here Relu's, is refused by
// node and attribute name instead of dropped; an If whose condition is a
// constant imports the branch taken and skips the other, and still imports.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "backends/reference/executor.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"

namespace kiln {
namespace {

constexpr int F32 = onnx::TensorProto::FLOAT;

void tensor_input(onnx::GraphProto* g, const std::string& name) {
  auto* vi = g->add_input();
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(F32);
  tt->mutable_shape()->add_dim()->set_dim_value(2);
}

// A subgraph returning `op`(x) of the outer value x.
void add_body(onnx::NodeProto* n, const std::string& attr, const std::string& op) {
  auto* a = n->add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* g = a->mutable_g();
  g->set_name(attr);
  auto* b = g->add_node();
  b->set_op_type(op);
  b->add_input("x");
  b->add_output(attr + "_out");
  g->add_output()->set_name(attr + "_out");
}

onnx::ModelProto model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  m.mutable_graph()->set_name("g");
  tensor_input(m.mutable_graph(), "x");
  m.mutable_graph()->add_output()->set_name("y");
  return m;
}

TEST(FrontendSubgraphAttrs, AnUnreadBodyIsRefusedByName) {
  onnx::ModelProto m = model();
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type("Relu");
  n->set_name("r");
  n->add_input("x");
  n->add_output("y");
  add_body(n, "body", "Neg");
  std::string e = "(imported)";
  try {
    import_onnx_bytes(m.SerializeAsString(), ".", "m.onnx");
  } catch (const Unsupported& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("m.onnx: node \"r\" (Relu): subgraph attribute 'body' is not supported (kiln's import of Relu "
                   "does not read it)"),
            std::string::npos)
      << e;
}

TEST(FrontendSubgraphAttrs, AConstantIfSkipsTheBranchNotTaken) {
  onnx::ModelProto m = model();
  auto* c = m.mutable_graph()->add_initializer();
  c->set_name("cond");
  c->set_data_type(onnx::TensorProto::BOOL);
  c->add_int32_data(0);
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type("If");
  n->set_name("if");
  n->add_input("cond");
  n->add_output("y");
  add_body(n, "then_branch", "Relu");
  add_body(n, "else_branch", "Neg");
  ImportResult r = import_onnx_bytes(m.SerializeAsString(), ".", "m.onnx");
  Tensor x = Tensor::from<double>(DType::F32, {2}, {1.5, -2});
  Tensor y = ReferenceExecutor(*r.graph).run({{"x", x}}).at(0);
  EXPECT_EQ(y.get_double(0), -1.5);
  EXPECT_EQ(y.get_double(1), 2.0);
}

}  // namespace
}  // namespace kiln
