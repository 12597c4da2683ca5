// A decoder's positions and causal mask on symbolic dims (issue 19, KV-cache
// decoding; docs/dynamic_shapes.md): exporters compute them from Shape as
// range(past, past + seq) and range(past + seq), compare them, and expand the
// grouped-query heads to a shape built through Where(Equal(shape, -1), ...).
// With seq and past symbolic these import once, keep symbolic result types,
// survive fold-constants and a plan with a shape profile (short symbolic
// constants stored in the graph text), and compute the right values at any
// shape on the reference backend.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cctype>
#include <climits>

#include "backends/reference/executor.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "frontend/onnx_import.h"
#include "ir/specialize.h"
#include "ir/error.h"
#include "ops/registry.h"
#include "runtime/plan_format.h"
#include "runtime/plan_graph.h"
#include "tests/unit/error_of.h"

namespace kiln {
namespace {

struct OnnxGraph {
  onnx::ModelProto m;
  onnx::GraphProto* g;
  OnnxGraph() : g(m.mutable_graph()) {
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    g->set_name("positions");
  }
  void input(const std::string& name, int type, const std::vector<std::string>& dims) {
    auto* tt = g->add_input();
    tt->set_name(name);
    auto* t = tt->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    for (const std::string& d : dims) {
      auto* dim = t->mutable_shape()->add_dim();
      if (std::isdigit(d[0])) dim->set_dim_value(std::stoll(d));
      else dim->set_dim_param(d);
    }
  }
  void i64(const std::string& name, std::vector<int64_t> v, bool scalar = false) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(int64_t(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
  }
  void f32(const std::string& name, float v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_float_data(v);
  }
  void node(const std::string& op, std::vector<std::string> in, const std::string& out, int64_t axis = INT64_MIN) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (auto& s : in) n->add_input(s);
    n->add_output(out);
    if (axis != INT64_MIN) {
      auto* a = n->add_attribute();
      a->set_name("axis");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(axis);
    }
  }
  void output(const std::string& name) { g->add_output()->set_name(name); }
};

// ids [1, seq], past_key [1, 2, past, 4] -> pos [seq] (past .. past+seq-1),
// mask [seq, past+seq] (0 where a position is seen, -1e9 after it), and
// heads [1, 2, past+seq, 4] (a [1, 1, 1, 4] row expanded over the cache).
onnx::ModelProto positions_model(int64_t range_step = 1) {
  OnnxGraph o;
  o.input("ids", onnx::TensorProto::INT64, {"1", "seq"});
  o.input("past_key", onnx::TensorProto::FLOAT, {"1", "2", "past", "4"});
  o.i64("zero", {0}, true);
  o.i64("one", {1}, true);
  o.i64("step", {range_step}, true);
  o.i64("two", {2}, true);
  o.i64("axes0", {0});
  o.i64("axes1", {1});
  o.i64("minus1", {-1, -1, -1, -1});
  o.i64("ones", {1, 1, 1, 1});
  o.i64("lead", {1, 2});
  o.i64("tail", {4});
  o.f32("seen_bias", 0.0f);
  o.f32("hidden_bias", -1e9f);
  o.node("Shape", {"ids"}, "ids_shape");
  o.node("Gather", {"ids_shape", "one"}, "seq_v", 0);
  o.node("Shape", {"past_key"}, "past_shape");
  o.node("Gather", {"past_shape", "two"}, "past_v", 0);
  o.node("Range", {"zero", "seq_v", "step"}, "r");
  o.node("Add", {"r", "past_v"}, "pos");
  o.node("Add", {"past_v", "seq_v"}, "total");
  o.node("Range", {"zero", "total", "one"}, "all");
  o.node("Unsqueeze", {"all", "axes0"}, "all_row");
  o.node("Unsqueeze", {"pos", "axes1"}, "pos_col");
  o.node("LessOrEqual", {"all_row", "pos_col"}, "seen");
  o.node("Where", {"seen", "seen_bias", "hidden_bias"}, "mask");
  o.node("Unsqueeze", {"total", "axes0"}, "total_1");
  o.node("Concat", {"lead", "total_1", "tail"}, "want_shape", 0);
  o.node("Equal", {"want_shape", "minus1"}, "is_minus1");
  o.node("Where", {"is_minus1", "ones", "want_shape"}, "expand_shape");
  o.node("ReduceSum", {"past_key"}, "row");  // [1, 1, 1, 1]
  o.node("Expand", {"row", "expand_shape"}, "heads");
  o.output("pos");
  o.output("mask");
  o.output("heads");
  return o.m;
}

ImportOptions ranges() {
  ImportOptions io;
  io.min_shapes = {{"ids", {1, 1}}, {"past_key", {1, 2, 0, 4}}};
  io.max_shapes = {{"ids", {1, 8}}, {"past_key", {1, 2, 16, 4}}};
  return io;
}

using testing::error_of;

void check_values(const Graph& g, int64_t seq, int64_t past) {
  auto at = specialize_graph(g, {{"seq", seq}, {"past", past}}, op_registry());
  Tensor ids(TensorType(DType::I64, {1, seq}));
  Tensor pk(TensorType(DType::F32, {1, 2, past, 4}));
  for (int64_t i = 0; i < pk.numel(); ++i) pk.data<float>()[i] = 0.25f;
  std::vector<Tensor> out = ReferenceExecutor(*at).run({{"ids", ids}, {"past_key", pk}});
  ASSERT_EQ(out[0].shape(), (Shape{seq}));
  for (int64_t i = 0; i < seq; ++i) EXPECT_EQ(out[0].data<int64_t>()[i], past + i);
  ASSERT_EQ(out[1].shape(), (Shape{seq, past + seq}));
  for (int64_t i = 0; i < seq; ++i)
    for (int64_t j = 0; j < past + seq; ++j)
      EXPECT_EQ(out[1].data<float>()[i * (past + seq) + j], j <= past + i ? 0.0f : -1e9f) << i << "," << j;
  ASSERT_EQ(out[2].shape(), (Shape{1, 2, past + seq, 4}));
  for (int64_t i = 0; i < out[2].numel(); ++i) EXPECT_EQ(out[2].data<float>()[i], 0.25f * float(8 * past));
}

TEST(SymbolicPositions, ImportOnceAndComputeAtEveryShape) {
  ImportResult r = import_onnx_bytes(positions_model().SerializeAsString(), ".", "decoder.onnx", ranges());
  Graph& g = *r.graph;
  EXPECT_EQ(g.outputs()[0]->type().str(), "i64[seq]");
  EXPECT_EQ(g.outputs()[1]->type().str(), "f32[seq,past+seq]");
  EXPECT_EQ(g.outputs()[2]->type().str(), "f32[1,2,past+seq,4]");
  for (auto [seq, past] : {std::pair<int64_t, int64_t>{3, 0}, {1, 5}, {8, 16}}) check_values(g, seq, past);
}

TEST(SymbolicPositions, ThroughThePipelineAndAPlanWithAProfile) {
  ImportResult r = import_onnx_bytes(positions_model().SerializeAsString(), ".", "decoder.onnx", ranges());
  CompileOptions o;
  o.pass.target = "cpu";
  o.symbolic = true;
  compile_graph(*r.graph, o);  // fold-constants leaves the symbolic ranges to run time
  PlanBuildOptions po{"cpu", "fp32", {}};
  po.profiles = {{{{"ids", {1, 1}, {1, 8}, {1, 8}}, {"past_key", {1, 2, 0, 4}, {1, 2, 16, 4}, {1, 2, 16, 4}}}}};
  std::vector<uint8_t> bytes = plan::serialize(build_plan(*r.graph, po));
  plan::Plan p = plan::deserialize(bytes.data(), bytes.size(), "decoder.plan");
  std::unique_ptr<Graph> back = plan::load_graph(p, "decoder.plan");
  for (auto [seq, past] : {std::pair<int64_t, int64_t>{2, 0}, {1, 7}, {8, 16}}) check_values(*back, seq, past);
}

TEST(SymbolicPositions, ARangeWithAnotherStepIsRefusedByName) {
  std::string e =
      error_of([&] { import_onnx_bytes(positions_model(2).SerializeAsString(), ".", "decoder.onnx", ranges()); });
  EXPECT_NE(e.find("range(0, seq, 2): with a symbolic start or limit kiln needs the step 1"), std::string::npos) << e;
}

}  // namespace
}  // namespace kiln
