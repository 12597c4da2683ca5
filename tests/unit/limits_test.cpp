// Resource limits (ir/limits.h) and the importer's structural checks: sizes
// are refused before anything is allocated, and structural errors name what
// is wrong. The end-to-end cases (CLI exit codes, external data, damaged
// bytes) are in tests/robustness.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/limits.h"
#include "tests/unit/error_of.h"

// GCC 12 at -O3 warns about std::string copies inlined into protobuf setters
// (a false positive, GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace kiln {
namespace {

// Restores the process-wide limits after a test changes them.
class LimitsTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = limits(); }
  void TearDown() override { limits() = saved_; }
  Limits saved_;
};

using testing::error_of;

// x (f32[n]) -> Relu -> a -> Neg -> y, nodes in the order given.
onnx::ModelProto chain(int64_t n, bool reversed = false) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(n);
  onnx::NodeProto relu, neg;
  relu.set_op_type("Relu");
  relu.set_name("relu");
  relu.add_input("x");
  relu.add_output("a");
  neg.set_op_type("Neg");
  neg.set_name("neg");
  neg.add_input("a");
  neg.add_output("y");
  *g->add_node() = reversed ? neg : relu;
  *g->add_node() = reversed ? relu : neg;
  g->add_output()->set_name("y");
  return m;
}

ImportResult import(const onnx::ModelProto& m) { return import_onnx_bytes(m.SerializeAsString(), "", "m.onnx"); }

TEST_F(LimitsTest, ParseByteSize) {
  EXPECT_EQ(parse_byte_size("4096", "x"), 4096);
  EXPECT_EQ(parse_byte_size("64k", "x"), 64 << 10);
  EXPECT_EQ(parse_byte_size("512M", "x"), int64_t(512) << 20);
  EXPECT_EQ(parse_byte_size("16GiB", "x"), int64_t(16) << 30);
  EXPECT_EQ(parse_byte_size("2T", "x"), int64_t(2) << 40);
  for (const char* bad : {"", "k", "-5", "12q", "1.5G", "99999999999999999999", "9000000T"})
    EXPECT_THROW(parse_byte_size(bad, "--max-tensor-bytes"), Error) << bad;
  EXPECT_NE(error_of([] { parse_byte_size("lots", "--max-tensor-bytes"); }).find("--max-tensor-bytes: 'lots'"),
            std::string::npos);
}

TEST_F(LimitsTest, TensorOverTheLimitIsRefusedBeforeAllocating) {
  limits().max_tensor_bytes = 1000;
  EXPECT_NO_THROW(Tensor(DType::F32, {250}));
  std::string e = error_of([] { Tensor(DType::F32, {251}); });
  EXPECT_NE(e.find("f32[251] needs 1004 bytes, over the limit of 1000"), std::string::npos) << e;
  // Element counts that overflow int64 are an error too, not a wrap-around.
  e = error_of([] { Tensor(DType::F64, {int64_t(1) << 40, int64_t(1) << 40}); });
  EXPECT_NE(e.find("overflows"), std::string::npos) << e;
  EXPECT_THROW(Tensor(DType::F32, {-1}), Error);
}

TEST_F(LimitsTest, InputOverTheLimitIsRefusedAtImport) {
  limits().max_tensor_bytes = 1000;
  EXPECT_NO_THROW(import(chain(250)));
  std::string e = error_of([] { import(chain(251)); });
  EXPECT_NE(e.find("m.onnx: input \"x\": f32[251] needs 1004 bytes"), std::string::npos) << e;
}

TEST_F(LimitsTest, TotalWeightBytes) {
  onnx::ModelProto m = chain(4);
  for (int i = 0; i < 3; ++i) {
    auto* w = m.mutable_graph()->add_initializer();
    w->set_name("w" + std::to_string(i));
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(100);
    w->set_raw_data(std::string(400, '\0'));
  }
  limits().max_total_bytes = 1200;
  EXPECT_NO_THROW(import(m));
  limits().max_total_bytes = 1199;
  std::string e = error_of([&] { import(m); });
  EXPECT_NE(e.find("initializer \"w2\": the model's weights exceed the limit of 1199 bytes"), std::string::npos) << e;
}

TEST_F(LimitsTest, NodesOutOfOrderAreNamed) {
  EXPECT_NO_THROW(import(chain(2)));
  std::string e = error_of([] { import(chain(2, true)); });
  EXPECT_NE(e.find("node \"neg\" (Neg) reads \"a\" before node \"relu\" (Relu) produces it"), std::string::npos) << e;
}

TEST_F(LimitsTest, CycleIsNamed) {
  onnx::ModelProto m = chain(2);
  m.mutable_graph()->mutable_node(0)->set_input(0, "y");  // relu reads neg's output
  std::string e = error_of([&] { import(m); });
  EXPECT_NE(e.find("cycle: node \"relu\" (Relu) <- node \"neg\" (Neg) <- node \"relu\" (Relu)"), std::string::npos)
      << e;
}

TEST_F(LimitsTest, DuplicateDefinitionIsNamed) {
  onnx::ModelProto m = chain(2);
  m.mutable_graph()->mutable_node(1)->set_output(0, "a");
  std::string e = error_of([&] { import(m); });
  EXPECT_NE(e.find("node \"neg\" (Neg): value \"a\" is defined twice (also by node \"relu\" (Relu))"),
            std::string::npos)
      << e;
}

TEST_F(LimitsTest, ValueInfoMustAgree) {
  onnx::ModelProto m = chain(2);
  auto* vi = m.mutable_graph()->add_value_info();
  vi->set_name("a");
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(2);
  EXPECT_NO_THROW(import(m));
  tt->set_elem_type(onnx::TensorProto::INT32);
  std::string e = error_of([&] { import(m); });
  EXPECT_NE(e.find("value_info \"a\": the model declares i32 but kiln infers f32[2]"), std::string::npos) << e;
}

TEST_F(LimitsTest, SubgraphDepthCap) {
  // If nodes nested n deep; the cap is 32.
  auto nested = [](int n) {
    onnx::ModelProto m = chain(2);
    onnx::GraphProto* g = m.mutable_graph();
    for (int i = 0; i < n; ++i) {
      auto* node = g->add_node();
      node->set_op_type("If");
      node->add_input("x");
      node->add_output("o" + std::to_string(i));
      auto* a = node->add_attribute();
      a->set_name("then_branch");
      a->set_type(onnx::AttributeProto::GRAPH);
      g = a->mutable_g();
    }
    return m;
  };
  std::string e = error_of([&] { import(nested(32)); });
  EXPECT_EQ(e.find("nested"), std::string::npos) << e;  // rejected for another reason (control flow)
  e = error_of([&] { import(nested(33)); });
  EXPECT_NE(e.find("subgraphs are nested more than 32 deep"), std::string::npos) << e;
}

}  // namespace
}  // namespace kiln
