// Graph mutation keeps use lists right; the pointwise interpreter broadcasts
// and keeps dtype semantics; the reference executor runs a small graph.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/reference/executor.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ops/pointwise_eval.h"
#include "ops/registry.h"

namespace kiln {
namespace {

TEST(Graph, UseListsFollowRewrites) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::F32, {4}));
  Value* y = g.add_input("y", TensorType(DType::F32, {4}));
  Node* a = g.add_node("add", {x, y}, {TensorType(DType::F32, {4})});
  Node* r = g.add_node("relu", {a->output()}, {TensorType(DType::F32, {4})});
  g.set_outputs({r->output()});
  EXPECT_EQ(x->uses().size(), 1u);
  EXPECT_EQ(a->output()->uses().size(), 1u);
  r->set_input(0, x);
  EXPECT_EQ(x->uses().size(), 2u);
  EXPECT_FALSE(a->output()->has_uses());
  g.erase_node(a);
  EXPECT_EQ(x->uses().size(), 1u);
  EXPECT_EQ(y->uses().size(), 0u);
  EXPECT_EQ(g.num_nodes(), 1u);
}

TEST(Graph, ReplaceAllUsesIncludesOutputs) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::F32, {2}));
  Node* r = g.add_node("relu", {x}, {TensorType(DType::F32, {2})});
  Node* s = g.add_node("relu", {r->output()}, {TensorType(DType::F32, {2})});
  g.set_outputs({r->output(), s->output()});
  g.replace_all_uses(r->output(), x);
  EXPECT_EQ(g.outputs()[0], x);
  EXPECT_EQ(s->input(0), x);
  EXPECT_FALSE(r->output()->has_uses());
}

TEST(Graph, ErasingUsedNodeIsABug) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::F32, {2}));
  Node* r = g.add_node("relu", {x}, {TensorType(DType::F32, {2})});
  g.set_outputs({r->output()});
  EXPECT_THROW(g.erase_node(r), std::logic_error);
}

TEST(Graph, CloneIsDeep) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::F32, {2}));
  Value* c = g.add_constant("c", Tensor::from<float>(DType::F32, {2}, {1, 2}));
  Node* a = g.add_node("add", {x, c}, {TensorType(DType::F32, {2})}, {}, "n");
  g.set_outputs({a->output()});
  auto h = g.clone();
  ASSERT_EQ(h->num_nodes(), 1u);
  Node* ha = h->node_list()[0];
  EXPECT_EQ(ha->input(0), h->inputs()[0]);
  EXPECT_EQ(ha->input(1), h->constants()[0]);
  EXPECT_EQ(ha->name(), "n");
  EXPECT_EQ(h->outputs()[0], ha->output());
}

TEST(Graph, FreezeInputMakesConstant) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::I64, {2}));
  g.freeze_input(x, Tensor::from<int64_t>(DType::I64, {2}, {3, 4}));
  EXPECT_TRUE(x->is_constant());
  EXPECT_TRUE(g.inputs().empty());
  EXPECT_EQ(x->data().get_int(1), 4);
}

TEST(PointwiseEval, BroadcastsBothWays) {
  Tensor a = Tensor::from<float>(DType::F32, {2, 1}, {1, 2});
  Tensor b = Tensor::from<float>(DType::F32, {3}, {10, 20, 30});
  ExprBuilder bld({DType::F32, DType::F32});
  Expr e = bld.finish(bld.add(bld.input(0), bld.input(1)), DType::F32);
  Tensor out(DType::F32, {2, 3});
  eval_pointwise(e, {&a, &b}, out);
  std::vector<float> want = {11, 21, 31, 12, 22, 32};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out.data<float>()[i], want[i]);
}

TEST(PointwiseEval, LargeTensorCrossesChunks) {
  const int64_t n = 5000;  // more than one 2048-element chunk, with a ragged tail
  Tensor a(DType::F32, {n});
  for (int64_t i = 0; i < n; ++i) a.data<float>()[i] = float(i) - 2500;
  Tensor s = Tensor::from<float>(DType::F32, {1}, {0.5f});
  ExprBuilder bld({DType::F32, DType::F32});
  Expr e = bld.finish(bld.max(bld.mul(bld.input(0), bld.input(1)), bld.constant(0, DType::F32)), DType::F32);
  Tensor out(DType::F32, {n});
  eval_pointwise(e, {&a, &s}, out);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out.data<float>()[i], std::max(0.0f, (float(i) - 2500) * 0.5f));
}

TEST(PointwiseEval, IntegerSemantics) {
  Tensor a = Tensor::from<int32_t>(DType::I32, {4}, {7, -7, 7, -7});
  Tensor b = Tensor::from<int32_t>(DType::I32, {4}, {2, 2, -2, 0});
  ExprBuilder bld({DType::I32, DType::I32});
  Expr div = bld.finish(bld.div(bld.input(0), bld.input(1)), DType::I32);
  Tensor out(DType::I32, {4});
  eval_pointwise(div, {&a, &b}, out);
  EXPECT_EQ(out.to_int_vector(), (std::vector<int64_t>{3, -3, -3, 0}));  // truncation; /0 defined as 0
  ExprBuilder b2({DType::I32, DType::I32});
  Expr mod = b2.finish(b2.binary(ExprOp::Mod, b2.input(0), b2.input(1)), DType::I32);
  eval_pointwise(mod, {&a, &b}, out);
  EXPECT_EQ(out.to_int_vector(), (std::vector<int64_t>{1, 1, -1, 0}));  // divisor's sign
}

TEST(PointwiseEval, CastInsideExpressionRounds) {
  Tensor a = Tensor::from<float>(DType::F32, {1}, {1.0f + 1.0f / 4096});
  ExprBuilder bld({DType::F32});
  E h = bld.cast(bld.input(0), DType::F16);
  Expr e = bld.finish(bld.cast(h, DType::F32), DType::F32);
  Tensor out(DType::F32, {1});
  eval_pointwise(e, {&a}, out);
  EXPECT_EQ(out.data<float>()[0], 1.0f);  // f16 cannot hold 1 + 2^-12
}

TEST(PointwiseEval, NanPropagatesThroughMax) {
  Tensor a = Tensor::from<float>(DType::F32, {2}, {NAN, -1});
  ExprBuilder bld({DType::F32});
  Expr e = bld.finish(bld.max(bld.input(0), bld.constant(0, DType::F32)), DType::F32);
  Tensor out(DType::F32, {2});
  eval_pointwise(e, {&a}, out);
  EXPECT_TRUE(std::isnan(out.data<float>()[0]));
  EXPECT_EQ(out.data<float>()[1], 0.0f);
}

TEST(ReferenceExecutor, RunsAndChecksInputs) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::F32, {3}));
  Value* c = g.add_constant("c", Tensor::from<float>(DType::F32, {3}, {1, -5, 2}));
  Node* a = g.add_node("add", {x, c}, {TensorType(DType::F32, {3})});
  Node* r = g.add_node("relu", {a->output()}, {TensorType(DType::F32, {3})});
  g.set_outputs({r->output(), a->output()});
  ReferenceExecutor ex(g);
  auto outs = ex.run({{"x", Tensor::from<float>(DType::F32, {3}, {1, 1, 1})}});
  EXPECT_EQ(outs[0].to_int_vector(), (std::vector<int64_t>{2, 0, 3}));
  EXPECT_EQ(outs[1].to_int_vector(), (std::vector<int64_t>{2, -4, 3}));
  EXPECT_THROW(ex.run({}), Error);
  EXPECT_THROW(ex.run({{"x", Tensor(DType::F32, {4})}}), Error);
  EXPECT_THROW(ex.run({{"x", Tensor(DType::F32, {3})}, {"z", Tensor(DType::F32, {3})}}), Error);
}

}  // namespace
}  // namespace kiln
