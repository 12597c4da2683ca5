// The user-facing CLI pieces below the commands: the frontend's collecting
// mode (kiln inspect / compile's coverage check), --batch's fixed-dim
// override, and bench's latency statistics (perf/latency_stats.h).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "perf/latency_stats.h"

namespace kiln {
namespace {

// x[2,4] -> Relu "r0" -> OP "bad" -> Relu "r1" -> y; and x -> Neg "n" -> z.
onnx::ModelProto chain_model(const std::string& op, int64_t batch = 2) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(batch);
  tt->mutable_shape()->add_dim()->set_dim_value(4);
  auto node = [&](const std::string& type, const std::string& name, const std::string& a, const std::string& b) {
    auto* n = g->add_node();
    n->set_op_type(type);
    n->set_name(name);
    n->add_input(a);
    n->add_output(b);
  };
  node("Relu", "r0", "x", "a");
  node(op, "bad", "a", "b");
  node("Relu", "r1", "b", "y");
  node("Neg", "n", "x", "z");
  for (const char* o : {"y", "z"}) {
    auto* out = g->add_output();
    out->set_name(o);
    auto* ot = out->mutable_type()->mutable_tensor_type();
    ot->set_elem_type(onnx::TensorProto::FLOAT);
    ot->mutable_shape()->add_dim()->set_dim_value(batch);
    ot->mutable_shape()->add_dim()->set_dim_value(4);
  }
  return m;
}

TEST(CliInspect, CollectingModeListsEveryUnsupportedNodeAndKeepsGoing) {
  onnx::ModelProto m = chain_model("NoSuchOp");
  auto* g = m.mutable_graph();
  // A second problem after the first: an unknown op reading a known value.
  auto* n = g->add_node();
  n->set_op_type("AlsoMissing");
  n->set_name("bad2");
  n->add_input("z");
  n->add_output("w");
  // And an unknown op reading the unknown result: still reported (its op is unknown).
  auto* n3 = g->add_node();
  n3->set_op_type("ThirdMissing");
  n3->set_name("bad3");
  n3->add_input("b");
  n3->add_output("v");
  std::vector<ImportProblem> problems;
  ImportOptions o;
  o.problems = &problems;
  ImportResult r = import_onnx_bytes(m.SerializeAsString(), ".", "m.onnx", o);
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_EQ(problems[0].node, "bad");
  EXPECT_EQ(problems[0].op, "NoSuchOp");
  EXPECT_TRUE(problems[0].unsupported);
  EXPECT_NE(problems[0].message.find("node \"bad\" (NoSuchOp)"), std::string::npos) << problems[0].message;
  EXPECT_EQ(problems[1].node, "bad2");
  EXPECT_EQ(problems[2].node, "bad3");
  // r1 (a known op after the unknown one) is not listed; z was produced.
  ASSERT_EQ(r.graph->outputs().size(), 1u);
  EXPECT_EQ(r.graph->outputs()[0]->name(), "z");
}

TEST(CliInspect, WithoutCollectingTheFirstProblemThrows) {
  onnx::ModelProto m = chain_model("NoSuchOp");
  EXPECT_THROW(import_onnx_bytes(m.SerializeAsString(), ".", "m.onnx", {}), Unsupported);
}

TEST(CliInspect, SupportedModelHasNoProblems) {
  std::vector<ImportProblem> problems;
  ImportOptions o;
  o.problems = &problems;
  ImportResult r = import_onnx_bytes(chain_model("Sigmoid").SerializeAsString(), ".", "m.onnx", o);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(r.graph->outputs().size(), 2u);
}

TEST(CliBench, OverrideFixedDimsRewritesTheBatch) {
  std::string bytes = chain_model("Sigmoid", 1).SerializeAsString();
  ImportOptions o;
  o.input_shapes["x"] = {3, 4};
  EXPECT_THROW(import_onnx_bytes(bytes, ".", "m.onnx", o), Error);  // the model fixes dim 0 at 1
  o.override_fixed_dims = true;
  ImportResult r = import_onnx_bytes(bytes, ".", "m.onnx", o);
  EXPECT_EQ(r.graph->outputs()[0]->shape(), (Shape{3, 4}));
}

TEST(CliBench, LatencyStatistics) {
  LatencyStats s = latency_stats({5, 1, 4, 2, 3, 10, 6, 7, 9, 8});
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 10);
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  EXPECT_DOUBLE_EQ(s.median, 5.5);
  EXPECT_DOUBLE_EQ(s.p90, 9);   // nearest rank: ceil(0.9 * 10) = 9th
  EXPECT_DOUBLE_EQ(s.p99, 10);  // ceil(9.9) = 10th
  LatencyStats one = latency_stats({2.5});
  EXPECT_DOUBLE_EQ(one.median, 2.5);
  EXPECT_DOUBLE_EQ(one.p99, 2.5);
  EXPECT_DOUBLE_EQ(latency_stats({}).max, 0);
}

}  // namespace
}  // namespace kiln
