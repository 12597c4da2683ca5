// Data-dependent result sizes on the reference backend (ir/data_dependent.h,
// backends/data_dependent_run.h, docs/dynamic_shapes.md): nonzero,
// non_max_suppression and topk with a k operand in graphs whose consumers'
// shapes are polynomials in the size symbol; the run binds the symbol to the
// count, trims the result and specialises the later stages to it. Also the
// stage cut itself, the bounded forms' meaning, and the errors.
#include <gtest/gtest.h>

#include "backends/data_dependent_run.h"
#include "backends/run_on_backend.h"
#include "ir/data_dependent.h"
#include "ir/printer.h"
#include "ir/specialize.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

using testing::parse;

// x[mask] * 2: nonzero -> reshape -> gather -> mul; the count is the symbol n.
const char* kMaskSelect = R"(
graph @mask_select(%x: f32[6], %m: bool[6]) -> (f32[n], i64[1,n]) symbols(n in [0, 6]) {
  %two = const f32[] splat<2.0>
  %i = nonzero(%m) {size_symbol="n"} : i64[1,n]
  %j = reshape(%i) {shape=[n]} : i64[n]
  %g = gather(%x, %j) {axis=0} : f32[n]
  %y = mul(%g, %two) : f32[n]
  return %y, %i
}
)";

Tensor f32(Shape s, std::vector<float> v) { return Tensor::from(DType::F32, std::move(s), v); }

Tensor mask(std::vector<int> bits) {
  Tensor t(TensorType(DType::Bool, {static_cast<int64_t>(bits.size())}));
  for (size_t i = 0; i < bits.size(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(bits[i]);
  return t;
}

TEST(DataDependentSizes, NonzeroFeedsConsumersAtTheRunTimeCount) {
  auto g = parse(kMaskSelect);
  ASSERT_TRUE(has_data_dependent_sizes(*g));
  Tensor x = f32({6}, {1, 2, 3, 4, 5, 6});
  DataDependentRunResult r = run_with_data_dependent_sizes("ref", *g, {{"x", x}, {"m", mask({0, 1, 1, 0, 0, 1})}});
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_EQ(r.symbols.at("n"), 3);
  EXPECT_EQ(r.outputs[0].shape(), (Shape{3}));
  EXPECT_EQ(r.outputs[0].data<float>()[0], 4.0f);
  EXPECT_EQ(r.outputs[0].data<float>()[2], 12.0f);
  EXPECT_EQ(r.outputs[1].shape(), (Shape{1, 3}));
  EXPECT_EQ(r.outputs[1].data<int64_t>()[1], 2);
  EXPECT_EQ(r.stages, 1);  // the nodes after nonzero (nothing runs before it)

  // An empty selection and a full one, through run_on_backend.
  std::vector<Tensor> none = run_on_backend("ref", *g, {{"x", x}, {"m", mask({0, 0, 0, 0, 0, 0})}});
  EXPECT_EQ(none[0].shape(), (Shape{0}));
  EXPECT_EQ(none[1].shape(), (Shape{1, 0}));
  std::vector<Tensor> all = run_on_backend("ref", *g, {{"x", x}, {"m", mask({1, 1, 1, 1, 1, 1})}});
  EXPECT_EQ(all[0].shape(), (Shape{6}));
  EXPECT_EQ(all[0].data<float>()[5], 12.0f);
}

TEST(DataDependentSizes, StageCutKeepsWhatCrossesIt) {
  auto g = parse(kMaskSelect);
  // Nodes 2..3 (gather, mul): they read %x (an input) and %j (a result of an
  // earlier node, which becomes an input of the same name) and give %y.
  std::unique_ptr<Graph> s = extract_stage(*g, 2, 4);
  ASSERT_EQ(s->num_nodes(), 2u);
  std::vector<std::string> ins;
  for (const Value* v : s->inputs()) ins.push_back(v->name());
  EXPECT_EQ(ins, (std::vector<std::string>{"x", "j"}));
  ASSERT_EQ(s->outputs().size(), 1u);
  EXPECT_EQ(s->outputs()[0]->name(), "y");
  // Specialised to n = 2 it is a static graph the verifier accepts.
  auto spec = specialize_graph(*s, {{"n", 2}}, op_registry());
  EXPECT_EQ(spec->outputs()[0]->shape(), (Shape{2}));
  EXPECT_NO_THROW(verify_graph(*spec, op_registry()));
}

TEST(DataDependentSizes, NmsAndRunTimeTopkChain) {
  // The two best of the boxes NMS keeps: topk's k comes from an input, the
  // NMS count is the symbol m, and gather reads the kept box indices.
  auto g = parse(R"(
graph @detect(%boxes: f32[1,4,4], %scores: f32[1,1,4], %k: i64[1]) -> (i64[m,3], f32[t], i64[t]) symbols(m in [0, 3], t in [0, 4]) {
  %sel = non_max_suppression(%boxes, %scores) {center_point_box=0, iou_threshold=0.5, max_output_boxes_per_class=3, size_symbol="m"} : i64[m,3]
  %s = reshape(%scores) {shape=[4]} : f32[4]
  %v, %i = topk(%s, %k) {axis=0, largest=1, size_symbol="t", sorted=1} : f32[t], i64[t]
  return %sel, %v, %i
}
)");
  // Boxes 0 and 1 overlap (IoU 0.81), box 2 is apart, box 3 is degenerate.
  Tensor boxes = f32({1, 4, 4}, {0, 0, 1, 1, 0, 0, 0.9f, 0.9f, 2, 2, 3, 3, 5, 5, 5, 5});
  Tensor scores = f32({1, 1, 4}, {0.9f, 0.8f, 0.7f, 0.6f});
  Tensor k = Tensor::from(DType::I64, {1}, std::vector<int64_t>{2});
  DataDependentRunResult r = run_with_data_dependent_sizes("ref", *g, {{"boxes", boxes}, {"scores", scores}, {"k", k}});
  EXPECT_EQ(r.symbols.at("m"), 3);  // boxes 0, 2, 3: box 1 suppressed
  ASSERT_EQ(r.outputs[0].shape(), (Shape{3, 3}));
  EXPECT_EQ(r.outputs[0].data<int64_t>()[2], 0);
  EXPECT_EQ(r.outputs[0].data<int64_t>()[5], 2);
  EXPECT_EQ(r.outputs[0].data<int64_t>()[8], 3);
  EXPECT_EQ(r.symbols.at("t"), 2);
  ASSERT_EQ(r.outputs[1].shape(), (Shape{2}));
  EXPECT_EQ(r.outputs[1].data<float>()[1], 0.8f);
  EXPECT_EQ(r.outputs[2].data<int64_t>()[1], 1);

  // k outside [0, 4] names the node.
  Tensor bad = Tensor::from(DType::I64, {1}, std::vector<int64_t>{5});
  try {
    run_with_data_dependent_sizes("ref", *g, {{"boxes", boxes}, {"scores", scores}, {"k", bad}});
    ADD_FAILURE() << "k = 5 ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("k = 5 is out of range for axis 0 of size 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("topk"), std::string::npos) << e.what();
  }
}

TEST(DataDependentSizes, CountOutsideTheDeclaredRangeIsAnError) {
  // The graph claims at most 2 non-zeros; 3 is an error naming the node and
  // symbol, never a silently cut result.
  std::string text = kMaskSelect;
  text.replace(text.find("n in [0, 6]"), 11, "n in [0, 2]");
  auto g = parse(text);
  try {
    run_on_backend("ref", *g, {{"x", f32({6}, {1, 2, 3, 4, 5, 6})}, {"m", mask({1, 1, 1, 0, 0, 0})}});
    ADD_FAILURE() << "a count of 3 ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("result size n is 3, outside the range [0, 2] of n"), std::string::npos)
        << e.what();
  }
}

TEST(DataDependentSizes, BoundedFormsPadWithZerosAndCount) {
  // The lowered forms' own meaning: allocated at the bound, the count last.
  const OpDef& nz = op_registry().get("nonzero");
  AttrMap a;
  a.set("bounded", int64_t(1));
  Tensor m(TensorType(DType::F32, {2, 3}));
  m.data<float>()[1] = 1.0f;
  m.data<float>()[5] = -0.0f;  // a zero
  m.data<float>()[4] = 7.0f;
  std::vector<Tensor> outs =
      evaluate_op(nz, a, {&m}, {TensorType(DType::I64, {2, 6}), TensorType(DType::I64, {})}, "nonzero");
  EXPECT_EQ(outs[1].data<int64_t>()[0], 2);
  const int64_t want[] = {0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(outs[0].data<int64_t>()[i], want[i]) << i;
}

TEST(DataDependentSizes, VerifierChecksTheSizeSymbol) {
  // Declared, named by one node, never an input's dim.
  auto undeclared = [] {
    verify_graph(*parse(R"(
graph @g(%m: bool[4]) -> (i64[1,n]) {
  %i = nonzero(%m) {size_symbol="n"} : i64[1,n]
  return %i
}
)"),
                 op_registry());
  };
  EXPECT_THROW(undeclared(), Error);
  try {
    verify_graph(*parse(R"(
graph @g(%m: bool[n]) -> (i64[1,n]) symbols(n in [0, 4]) {
  %i = nonzero(%m) {size_symbol="n"} : i64[1,n]
  return %i
}
)"),
                 op_registry());
    ADD_FAILURE() << "an input shaped by a size symbol verified";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the data decides it"), std::string::npos) << e.what();
  }
  // The reference kernel does not run the symbol form directly.
  const OpDef& nz = op_registry().get("nonzero");
  AttrMap a;
  a.set(kSizeSymbolAttr, std::string("n"));
  Tensor m(TensorType(DType::Bool, {4}));
  EXPECT_THROW(evaluate_op(nz, a, {&m}, {TensorType(DType::I64, {1, 0})}, "nonzero"), Error);
}

}  // namespace
}  // namespace kiln
