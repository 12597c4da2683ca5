// Split along a symbolic dim with constant part sizes (ops/movement_ops.cpp,
// split_op). TorchScript traces Mixtral's loop over the experts that
// torch.where hit as a Split of NonZero's count into pieces of 1 (the zoo's
// mixtral_moe_tiny): the parts are static, and the dim must equal their sum
// when the node runs. The stage that runs it is specialised to the count and
// checks it, the reference kernel checks it again, a shape-generic kernel is
// refused (it could not check), and equal parts of a symbolic dim
// (no sizes given) are refused at import.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "backends/data_dependent_run.h"
#include "codegen/emitter_table.h"
#include "codegen/emitters/data_movement/emit_injective.h"
#include "compiler/plan_writer.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

using testing::parse;

// The rows of x the mask selects, taken one part at a time: the traced
// expert loop's shape (nonzero, transpose, split into 1s, a gather each).
const char* kPartsOfTheHits = R"(
graph @hits(%m: bool[4], %x: f32[4,2]) -> (f32[1,2], f32[1,2]) symbols(n in [0, 4]) {
  %i = nonzero(%m) {size_symbol="n"} : i64[1,n]
  %t = transpose(%i) {perm=[1,0]} : i64[n,1]
  %a, %b = split(%t) {axis=0, split=[1,1]} : i64[1,1], i64[1,1] loc("sp")
  %ra = reshape(%a) {shape=[1]} : i64[1]
  %rb = reshape(%b) {shape=[1]} : i64[1]
  %ga = gather(%x, %ra) {axis=0} : f32[1,2]
  %gb = gather(%x, %rb) {axis=0} : f32[1,2]
  return %ga, %gb
}
)";

Tensor mask(std::vector<int> bits) {
  Tensor t(TensorType(DType::Bool, {static_cast<int64_t>(bits.size())}));
  for (size_t i = 0; i < bits.size(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(bits[i]);
  return t;
}

Tensor rows() { return Tensor::from(DType::F32, {4, 2}, std::vector<float>{0, 1, 10, 11, 20, 21, 30, 31}); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SplitSymbolicAxis, PartsOfADataDependentCountRunWhenTheySumToItAndNameTheNodeWhenNot) {
  auto g = parse(kPartsOfTheHits);
  // The graph as imported, before any stage is specialised to the count.
  EXPECT_NO_THROW(verify_graph(*g, op_registry()));
  EXPECT_EQ(g->outputs()[0]->type().str(), "f32[1,2]");
  DataDependentRunResult r = run_with_data_dependent_sizes("ref", *g, {{"m", mask({0, 1, 0, 1})}, {"x", rows()}});
  EXPECT_EQ(r.symbols.at("n"), 2);
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_EQ(r.outputs[0].data<float>()[0], 10.0f);
  EXPECT_EQ(r.outputs[1].data<float>()[1], 31.0f);
  // Three hits for two parts: ONNX Runtime refuses the Split too.
  const std::string e = error_of([&] {
    run_with_data_dependent_sizes("ref", *g, {{"m", mask({1, 1, 1, 0})}, {"x", rows()}});
  });
  EXPECT_NE(e.find("\"sp\" (split)"), std::string::npos) << e;
  EXPECT_NE(e.find("split [1,1] sums to 2 but dim 0 of i64[3,1] is 3"), std::string::npos) << e;
}

TEST(SplitSymbolicAxis, TheReferenceKernelChecksTheRealDim) {
  // Results typed [2,3] twice over an operand that is [3,3] when it runs:
  // never a read past the operand or a row left out.
  const OpDef& split = op_registry().get("split");
  AttrMap a;
  a.set("axis", int64_t(0));
  a.set("split", std::vector<int64_t>{2, 2});
  Tensor x(TensorType(DType::F32, {3, 3}));
  const std::string e = error_of([&] {
    evaluate_op(split, a, {&x}, {TensorType(DType::F32, {2, 3}), TensorType(DType::F32, {2, 3})}, "node \"sp\"");
  });
  EXPECT_NE(e.find("node \"sp\": split [2,2] sums to 4 but dim 0 of the operand is 3 when it runs"), std::string::npos)
      << e;
}

TEST(SplitSymbolicAxis, NoShapeGenericKernelSoAProfilePlanRefusesIt) {
  // `kiln compile --min-shapes x:4x3 --max-shapes x:5x3` asks this of every
  // node before it builds kernels and names the node with the answer.
  if (!kiln_has_codegen()) GTEST_SKIP() << "built without codegen";
  auto g = parse(R"(
graph @parts(%x: f32[n,3]) -> (f32[2,3], f32[2,3]) symbols(n in [4, 5]) {
  %a, %b = split(%x) {axis=0, split=[2,2]} : f32[2,3], f32[2,3] loc("sp")
  return %a, %b
}
)");
  const Node& sp = *g->nodes().front();
  EXPECT_EQ(codegen::why_not_shape_generic(sp), "its kernel family (injective) has no shape-generic kernel for it yet");
  // The emitter refuses it too (a split inside a fused body asks it directly).
  const TensorType x = g->inputs()[0]->type(), part(DType::F32, {2, 3});
  const std::string e = error_of([&] {
    codegen::emit_injective_op(op_registry().get("split"), sp.attrs(), {x}, {part, part}, 1);
  });
  EXPECT_NE(e.find("codegen: split along symbolic dim 0 (n) into parts of constant sizes [2,2] has no shape-generic "
                   "kernel"),
            std::string::npos)
      << e;
}

TEST(SplitSymbolicAxis, EqualPartsOfASymbolicDimAreRefusedAtImport) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(18);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("halves");
  auto* in = g->add_input();
  in->set_name("x");
  auto* t = in->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("n");
  t->mutable_shape()->add_dim()->set_dim_value(3);
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Split");
  n->set_name("halves");
  n->add_input("x");
  n->add_output("a");
  n->add_output("b");
  auto* attr = n->add_attribute();
  attr->set_name("num_outputs");
  attr->set_type(onnx::AttributeProto::INT);
  attr->set_i(2);
  g->add_output()->set_name("a");
  g->add_output()->set_name("b");
  ImportOptions io;
  io.min_shapes = {{"x", {2, 3}}};
  io.max_shapes = {{"x", {8, 3}}};
  const std::string e = error_of([&] { import_onnx_bytes(m.SerializeAsString(), ".", "halves.onnx", io); });
  EXPECT_NE(e.find("node \"halves\" (Split): splitting f32[n,3] into equal parts along its symbolic dim 0 (n) is not "
                   "supported yet"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace kiln
