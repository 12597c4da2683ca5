// The verifier: a valid graph passes, and each check fires on a graph built
// to break it, with a message naming the node and the problem.
#include <gtest/gtest.h>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "ops/registry.h"

namespace kiln {
namespace {

const TensorType kF4(DType::F32, {4});
const TensorType kF24(DType::F32, {2, 4});

std::string verify_error(const Graph& g) {
  try {
    verify_graph(g, op_registry());
  } catch (const Error& e) {
    return e.what();
  }
  return "(verified)";
}

#define EXPECT_VERIFY_ERROR(g, text)                   \
  do {                                                 \
    std::string e_ = verify_error(g);                  \
    EXPECT_NE(e_.find(text), std::string::npos) << e_; \
    EXPECT_EQ(e_.rfind("verifier: ", 0), 0u) << e_;    \
  } while (0)

// x -> add(x, c) "a1" -> relu "r1" -> out
struct Simple {
  Graph g{"main"};
  Value* x;
  Value* c;
  Node* add;
  Node* relu;
  Simple() {
    x = g.add_input("x", kF24);
    c = g.add_constant("c", Tensor::from<float>(DType::F32, {4}, std::vector<float>{1, 2, 3, 4}));
    add = g.add_node("add", {x, c}, {kF24}, {}, "a1");
    add->output()->set_name("s");
    relu = g.add_node("relu", {add->output()}, {kF24}, {}, "r1");
    relu->output()->set_name("y");
    g.set_outputs({relu->output()});
  }
};

TEST(Verifier, AcceptsValidGraph) {
  Simple s;
  EXPECT_NO_THROW(verify_graph(s.g, op_registry()));
}

TEST(Verifier, AcceptsParsedGraphAndLayouts) {
  // Layout tags are not compared with inference, which is layout-agnostic.
  auto g = parse_graph(
      "graph @g(%x: f32[1,2,3,4]{nhwc}) -> (f32[1,2,3,4]{nhwc}) {\n"
      "  %c = const f32[] splat<2.0>\n"
      "  %y = mul(%x, %c) : f32[1,2,3,4]{nhwc}\n"
      "  %z = leaky_relu(%y) {alpha=0.5} : f32[1,2,3,4]{nhwc}\n"
      "  return %z\n}\n");
  EXPECT_NO_THROW(verify_graph(*g, op_registry()));
}

TEST(Verifier, OperandUsedBeforeDefinition) {
  Simple s;
  s.g.move_node(s.relu, s.add);
  EXPECT_VERIFY_ERROR(s.g, "node \"r1\" (relu): operand 0 (%s) is used before it is defined");
}

TEST(Verifier, NodeUsingItsOwnResult) {
  Simple s;
  s.relu->set_input(0, s.relu->output());
  EXPECT_VERIFY_ERROR(s.g, "node \"r1\" (relu): operand 0 (%y) is used before it is defined");
}

TEST(Verifier, OperandFromAnotherGraph) {
  Simple s;
  Graph other("other");
  Value* z = other.add_input("z", kF24);
  s.relu->set_input(0, z);
  EXPECT_VERIFY_ERROR(s.g, "node \"r1\" (relu): operand 0 (%z) is not a value of graph @main");
  s.relu->set_input(0, s.add->output());  // before `other` dies
}

TEST(Verifier, UseListMissingAUse) {
  Simple s;
  auto& uses = const_cast<std::vector<Use>&>(s.x->uses());
  std::vector<Use> saved = uses;
  uses.clear();
  EXPECT_VERIFY_ERROR(s.g, "node \"a1\" (add): the use list of operand 0 (%x) lacks this use");
  uses = saved;
}

TEST(Verifier, UseListWithAStaleUse) {
  Simple s;
  auto& uses = const_cast<std::vector<Use>&>(s.c->uses());
  uses.push_back({s.relu, 0});
  EXPECT_VERIFY_ERROR(s.g, "the use list of %c says node \"r1\" (relu) uses it as operand 0, but it does not");
  uses.pop_back();
}

TEST(Verifier, UseListWithADuplicateUse) {
  Simple s;
  auto& uses = const_cast<std::vector<Use>&>(s.x->uses());
  uses.push_back(uses[0]);
  EXPECT_VERIFY_ERROR(s.g, "the use list of %x holds operand 0 of node \"a1\" (add) twice");
  uses.pop_back();
}

TEST(Verifier, DuplicateValueNames) {
  Simple s;
  s.relu->output()->set_name("x");
  EXPECT_VERIFY_ERROR(s.g, "value name %x is used by two values of graph @main");
}

// Names come from models: a 1 MB one is shortened in the message.
TEST(Verifier, LongNamesAreShortened) {
  Simple s;
  std::string big(1 << 20, 'v');
  s.x->set_name(big);
  s.relu->output()->set_name(big);
  std::string e = verify_error(s.g);
  EXPECT_NE(e.find("value name %" + std::string(60, 'v') + "..." + std::string(60, 'v') + " is used by two"),
            std::string::npos);
  EXPECT_LT(e.size(), 300u);
}

TEST(Verifier, EmptyNamesAreAllowed) {
  Simple s;
  s.add->output()->set_name("");
  s.relu->output()->set_name("");
  EXPECT_NO_THROW(verify_graph(s.g, op_registry()));
}

TEST(Verifier, GraphOutputs) {
  Simple s;
  Graph other("other");
  s.g.set_outputs({other.add_input("q", kF4)});
  EXPECT_VERIFY_ERROR(s.g, "graph @main: output 0 (%q) is not a value of the graph");
  s.g.set_outputs({nullptr});
  EXPECT_VERIFY_ERROR(s.g, "graph @main: output 0 is missing");
}

TEST(Verifier, UnknownOp) {
  Simple s;
  s.g.add_node("frobnicate", {s.x}, {kF24}, {}, "f1");
  EXPECT_VERIFY_ERROR(s.g, "node \"f1\" (frobnicate): unknown op 'frobnicate'");
}

TEST(Verifier, ResultShapeDiffersFromInference) {
  Simple s;
  s.relu->output()->set_type(TensorType(DType::F32, {4, 2}));
  s.g.set_outputs({s.add->output()});
  EXPECT_VERIFY_ERROR(s.g, "verifier: node \"r1\" (relu): result 0 has type f32[4,2] but inference gives f32[2,4]");
}

TEST(Verifier, ResultDtypeDiffersFromInference) {
  Simple s;
  s.add->output()->set_type(TensorType(DType::F16, {2, 4}));
  std::string e = verify_error(s.g);
  EXPECT_NE(e.find("node \"a1\" (add): result 0 has type f16[2,4] but inference gives f32[2,4]"), std::string::npos)
      << e;
}

TEST(Verifier, UnnamedNodeIsDescribedByItsResult) {
  Simple s;
  s.relu->set_name("");
  s.relu->output()->set_type(kF4);
  EXPECT_VERIFY_ERROR(s.g, "node (relu) producing %y: result 0 has type f32[4] but inference gives f32[2,4]");
}

TEST(Verifier, ResultCount) {
  Simple s;
  s.g.add_node("relu", {s.x}, {kF24, kF24}, {}, "two");
  EXPECT_VERIFY_ERROR(s.g, "node \"two\" (relu): cannot produce 2 results");
}

TEST(Verifier, OperandCount) {
  Simple s;
  s.g.add_node("add", {s.x}, {kF24}, {}, "one");
  EXPECT_VERIFY_ERROR(s.g, "node \"one\" (add): expects 2 to 2 operands, got 1");
}

TEST(Verifier, InferenceErrorsAreReported) {
  Simple s;
  Value* i = s.g.add_input("i", TensorType(DType::I64, {2, 4}));
  s.g.add_node("add", {s.x, i}, {kF24}, {}, "mixed");
  std::string e = verify_error(s.g);
  EXPECT_EQ(e.rfind("verifier: node \"mixed\" (add): ", 0), 0u) << e;
}

TEST(Verifier, UndeclaredAttribute) {
  Simple s;
  s.relu->attrs().set("alpha", 0.5f);
  EXPECT_VERIFY_ERROR(s.g, "node \"r1\" (relu): attribute 'alpha' is not supported by kiln's relu");
}

TEST(Verifier, AttributeOfWrongKind) {
  Simple s;
  Node* n = s.g.add_node("leaky_relu", {s.x}, {kF24}, {}, "lr");
  n->attrs().set("alpha", std::string("big"));
  EXPECT_VERIFY_ERROR(s.g, "node \"lr\" (leaky_relu): attribute 'alpha' should be float but is string");
}

TEST(Verifier, ConstantDataTypeMismatch) {
  Simple s;
  s.c->set_type(TensorType(DType::F32, {2, 2}));
  EXPECT_VERIFY_ERROR(s.g, "constant %c has type f32[2,2] but its data is f32[4]");
}

TEST(Verifier, BodyOnANonFusedNode) {
  Simple s;
  s.relu->set_body(std::make_unique<Graph>("b"));
  EXPECT_VERIFY_ERROR(s.g, "node \"r1\" (relu) has a body but only fused and control-flow nodes may");
}

// main: fused "f"(x, x) { add; relu } -> out
struct Fused {
  Graph g{"main"};
  Node* f;
  Graph* body;
  Fused() {
    Value* x = g.add_input("x", kF4);
    auto b = std::make_unique<Graph>("fused_0");
    Value* p0 = b->add_input("p0", kF4);
    Value* p1 = b->add_input("p1", kF4);
    Node* a = b->add_node("add", {p0, p1}, {kF4}, {}, "inner_add");
    Node* r = b->add_node("relu", {a->output()}, {kF4}, {}, "inner_relu");
    b->set_outputs({r->output()});
    AttrMap at;
    at.set("kind", std::string("pointwise"));
    f = g.add_node("fused", {x, x}, {kF4}, at, "f");
    body = b.get();
    f->set_body(std::move(b));
    g.set_outputs({f->output()});
  }
};

TEST(Verifier, AcceptsFusedNode) {
  Fused s;
  EXPECT_NO_THROW(verify_graph(s.g, op_registry()));
}

TEST(Verifier, FusedWithoutBody) {
  Fused s;
  s.f->set_body(nullptr);
  EXPECT_VERIFY_ERROR(s.g, "node \"f\" (fused): a fused node needs a body");
}

TEST(Verifier, FusedOperandCountDiffersFromBody) {
  Fused s;
  s.f->set_inputs({s.g.inputs()[0]});
  EXPECT_VERIFY_ERROR(s.g, "node \"f\" (fused): has 1 operands but its body takes 2 inputs");
}

TEST(Verifier, FusedOperandTypeDiffersFromBody) {
  Fused s;
  s.body->inputs()[1]->set_type(TensorType(DType::F32, {2}));
  EXPECT_VERIFY_ERROR(s.g, "node \"f\" (fused): operand 1 has type f32[4] but body input %p1 has type f32[2]");
}

TEST(Verifier, FusedAbsentOperand) {
  Fused s;
  s.f->set_input(1, nullptr);
  EXPECT_VERIFY_ERROR(s.g, "node \"f\" (fused): operand 1 is absent");
}

TEST(Verifier, FusedResultsDifferFromBody) {
  Fused s;
  s.f->output()->set_type(TensorType(DType::F16, {4}));
  EXPECT_VERIFY_ERROR(s.g, "node \"f\" (fused): result 0 has type f16[4] but the body returns f32[4]");
  s.f->output()->set_type(kF4);
  s.body->set_outputs({});
  EXPECT_VERIFY_ERROR(s.g, "node \"f\" (fused): has 1 results but its body returns 0");
}

TEST(Verifier, ErrorsInsideABodyNameTheFusedNode) {
  Fused s;
  s.body->node_list()[1]->output()->set_type(TensorType(DType::F32, {4}, Layout::Default));
  s.body->node_list()[0]->attrs().set("bogus", int64_t(1));
  EXPECT_VERIFY_ERROR(s.g, "verifier: in the body of node \"f\" (fused): node \"inner_add\" (add): attribute 'bogus'");
}

TEST(Verifier, BodyCannotUseOuterValues) {
  Fused s;
  s.body->node_list()[0]->set_input(0, s.g.inputs()[0]);
  EXPECT_VERIFY_ERROR(
      s.g,
      "in the body of node \"f\" (fused): node \"inner_add\" (add): operand 0 (%x) is not a value of graph @fused_0");
  s.body->node_list()[0]->set_input(0, s.body->inputs()[0]);
}

}  // namespace
}  // namespace kiln
