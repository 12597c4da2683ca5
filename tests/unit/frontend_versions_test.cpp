// ONNX versions and op lookup in the frontend: the opsets and IR versions
// of onnx 1.23 import, newer ones are refused with the file named, ONNX op
// names never resolve to kiln's internal ops, and the adapters whose
// meaning changed after opset 21 follow the new versions.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "backends/reference/executor.h"
#include "frontend/onnx_import.h"
#include "frontend/op_versions.h"
#include "ir/error.h"

namespace kiln {
namespace {

struct In {
  std::string name;
  int elem;
  std::vector<int64_t> dims;
};

// One node `op` over graph inputs `ins`, one output "y", at `opset`.
onnx::ModelProto one_node(const std::string& op, const std::vector<In>& ins, int64_t opset, int64_t ir = 10) {
  onnx::ModelProto m;
  m.set_ir_version(ir);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("n");
  for (const In& i : ins) {
    auto* vi = g->add_input();
    vi->set_name(i.name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(i.elem);
    for (int64_t d : i.dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
    n->add_input(i.name);
  }
  n->add_output("y");
  g->add_output()->set_name("y");
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

ImportResult import_model(const onnx::ModelProto& m) { return import_onnx_bytes(m.SerializeAsString(), ".", "m.onnx"); }

std::string unsupported_of(const onnx::ModelProto& m) {
  try {
    import_model(m);
  } catch (const Unsupported& e) {
    return e.what();
  }
  return "(no Unsupported)";
}

Tensor run_ref(const ImportResult& r, const std::map<std::string, Tensor>& feed) {
  return ReferenceExecutor(*r.graph).run(feed).at(0);
}

constexpr int F32 = onnx::TensorProto::FLOAT, I8 = onnx::TensorProto::INT8, I64 = onnx::TensorProto::INT64;

TEST(FrontendVersions, ReadsEveryOpsetAndIrVersionOfOnnx123) {
  for (int64_t opset : {22, 23, 24, 25, 26, 27, 28})
    for (int64_t ir : {10, 11, 12, 13, 14}) {
      ImportResult r = import_model(one_node("Relu", {{"x", F32, {2}}}, opset, ir));
      EXPECT_EQ(r.opset, opset);
      EXPECT_EQ(r.ir_version, ir);
    }
}

TEST(FrontendVersions, RefusesOpsetsAndIrVersionsNewerThanOnnx123) {
  EXPECT_NE(unsupported_of(one_node("Relu", {{"x", F32, {2}}}, 29)).find("m.onnx: opset 29 is newer"),
            std::string::npos);
  EXPECT_NE(unsupported_of(one_node("Relu", {{"x", F32, {2}}}, 28, 15)).find("IR version 15"), std::string::npos);
}

TEST(FrontendVersions, OpVersionInEffect) {
  EXPECT_EQ(onnx_op_version("Cast", 22), 0);  // Cast-21 is older than the table
  EXPECT_EQ(onnx_op_version("Cast", 26), 25);
  EXPECT_EQ(onnx_op_version("TopK", 24), 24);
  EXPECT_EQ(onnx_op_version("Relu", 28), 0);
  EXPECT_NO_THROW(check_op_version("Attention", 25, "m.onnx: node"));
}

// kiln's own op names are not ONNX ops: before, an ONNX node named like a
// kiln op (here "relu", or ONNX "Attention" landing on kiln's "attention")
// was imported through kiln's table.
TEST(FrontendVersions, OnnxNamesNeverResolveToKilnOps) {
  std::string e = unsupported_of(one_node("relu", {{"x", F32, {2}}}, 17));
  EXPECT_NE(e.find("node \"n\" (relu)"), std::string::npos) << e;
  EXPECT_NE(e.find("not supported"), std::string::npos) << e;
}

TEST(FrontendVersions, AttentionIsOnnxAttention) {
  // 3-D Q/K/V with heads given as attributes: kiln's attention would need 4-D.
  onnx::ModelProto m = one_node("Attention", {{"q", F32, {1, 2, 4}}, {"k", F32, {1, 3, 4}}, {"v", F32, {1, 3, 4}}}, 23);
  set_attr(m, "q_num_heads", 2);
  set_attr(m, "kv_num_heads", 2);
  ImportResult r = import_model(m);
  EXPECT_EQ(r.graph->outputs()[0]->type().str(), "f32[1,2,4]");
  // Every value of V the same: any softmax weights give that value back.
  Tensor q(DType::F32, {1, 2, 4}), k(DType::F32, {1, 3, 4}), v(DType::F32, {1, 3, 4});
  for (int64_t i = 0; i < q.numel(); ++i) q.set_double(i, 0.1 * double(i));
  for (int64_t i = 0; i < k.numel(); ++i) k.set_double(i, 0.2 * double(i % 5)), v.set_double(i, 1.5);
  Tensor y = run_ref(r, {{"q", q}, {"k", k}, {"v", v}});
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_FLOAT_EQ(y.get_double(i), 1.5);
}

// Attention-24's nonpad_kv_seqlen: keys at or past lens[b] are padding.
// Attention is an opset-23 op: an older model naming it is invalid (kiln
// used to take it for its own attention op there).
TEST(FrontendVersions, NewOpsNeedTheirOpset) {
  std::string e;
  try {
    import_model(one_node("Attention", {{"q", F32, {1, 2, 4}}, {"k", F32, {1, 2, 4}}, {"v", F32, {1, 2, 4}}}, 21));
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("node \"n\" (Attention): Attention exists from opset 23 on; the model imports opset 21"),
            std::string::npos)
      << e;
}

TEST(FrontendVersions, AttentionExternalCacheMasksPaddingKeys) {
  onnx::ModelProto m =
      one_node("Attention",
               {{"q", F32, {2, 1, 2, 4}}, {"k", F32, {2, 1, 3, 4}}, {"v", F32, {2, 1, 3, 4}}, {"lens", I64, {2}}}, 24);
  auto* n = m.mutable_graph()->mutable_node(0);
  n->clear_input();
  for (const char* in : {"q", "k", "v", "", "", "", "lens"}) n->add_input(in);
  ImportResult r = import_model(m);
  Tensor q(DType::F32, {2, 1, 2, 4}), k(DType::F32, {2, 1, 3, 4}), v(DType::F32, {2, 1, 3, 4}), lens(DType::I64, {2});
  for (int64_t i = 0; i < q.numel(); ++i) q.set_double(i, 0.1 * double(i % 7));
  for (int64_t i = 0; i < k.numel(); ++i) k.set_double(i, 0.3 * double(i % 5));
  for (int64_t i = 0; i < v.numel(); ++i) v.set_double(i, double(1 + (i / 4) % 3));  // key j holds j + 1
  lens.set_double(0, 1);                                                             // batch 0 sees key 0 only
  lens.set_double(1, 3);
  Tensor y = run_ref(r, {{"q", q}, {"k", k}, {"v", v}, {"lens", lens}});
  for (int64_t i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(y.get_double(i), 1.0) << i;
  for (int64_t i = 8; i < 16; ++i) EXPECT_GT(y.get_double(i), 1.0) << i;  // a mix of keys 0..2
}

// BitShift-28 takes signed operands: left shifts wrap, right shifts are
// arithmetic, and a negative or too large amount gives -1 for negative x.
TEST(FrontendVersions, BitShiftSignedFromOpset28) {
  onnx::ModelProto m = one_node("BitShift", {{"x", I8, {4}}, {"s", I8, {4}}}, 28);
  set_attr(m, "direction", "RIGHT");
  ImportResult r = import_model(m);
  Tensor x(DType::I8, {4}), s(DType::I8, {4});
  const int xs[] = {-8, -8, 8, -1}, ss[] = {1, 9, 9, -1}, want[] = {-4, -1, 0, -1};
  for (int i = 0; i < 4; ++i) x.set_double(i, xs[i]), s.set_double(i, ss[i]);
  Tensor y = run_ref(r, {{"x", x}, {"s", s}});
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.get_double(i), want[i]) << i;

  onnx::ModelProto left = one_node("BitShift", {{"x", I8, {4}}, {"s", I8, {4}}}, 28);
  set_attr(left, "direction", "LEFT");
  const int lx[] = {64, -1, 3, 1}, ls[] = {1, 3, 8, -1}, lwant[] = {-128, -8, 0, 0};
  for (int i = 0; i < 4; ++i) x.set_double(i, lx[i]), s.set_double(i, ls[i]);
  Tensor ly = run_ref(import_model(left), {{"x", x}, {"s", s}});
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ly.get_double(i), lwant[i]) << i;

  std::string e;
  onnx::ModelProto old = one_node("BitShift", {{"x", I8, {4}}, {"s", I8, {4}}}, 27);
  set_attr(old, "direction", "RIGHT");
  try {
    import_model(old);
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("need opset 28"), std::string::npos) << e;
}

// Mod-28 defines fmod=0 on floats (the divisor's sign).
TEST(FrontendVersions, FloatModWithoutFmodFromOpset28) {
  ImportResult r = import_model(one_node("Mod", {{"a", F32, {2}}, {"b", F32, {2}}}, 28));
  Tensor a(DType::F32, {2}), b(DType::F32, {2});
  a.set_double(0, -7), a.set_double(1, 7), b.set_double(0, 3), b.set_double(1, -3);
  Tensor y = run_ref(r, {{"a", a}, {"b", b}});
  EXPECT_EQ(y.get_double(0), 2);
  EXPECT_EQ(y.get_double(1), -2);
  EXPECT_THROW(import_model(one_node("Mod", {{"a", F32, {2}}, {"b", F32, {2}}}, 27)), Error);
}

// SpaceToDepth-28 mode CRD: channel c*b*b + (i*b + j) takes pixel (i, j) of
// each block of channel c.
TEST(FrontendVersions, SpaceToDepthCrdFromOpset28) {
  onnx::ModelProto m = one_node("SpaceToDepth", {{"x", F32, {1, 2, 2, 2}}}, 28);
  set_attr(m, "blocksize", 2);
  set_attr(m, "mode", "CRD");
  ImportResult r = import_model(m);
  EXPECT_EQ(r.graph->outputs()[0]->type().str(), "f32[1,8,1,1]");
  Tensor x(DType::F32, {1, 2, 2, 2});
  for (int64_t i = 0; i < 8; ++i) x.set_double(i, double(i));
  Tensor y = run_ref(r, {{"x", x}});
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(y.get_double(i), double(i)) << i;  // CRD keeps NCHW order here
}

}  // namespace
}  // namespace kiln
