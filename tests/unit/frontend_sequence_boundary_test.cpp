// Sequence and optional values at the graph's boundary and across inlined
// subgraphs (frontend/onnx_import.h CompositeInput, ImportedValue): a
// sequence input is its elements' tensor inputs, its structure given at
// compile time; a sequence output is its elements' tensor outputs; an empty
// optional input has no graph input; SequenceMap inlines its body per
// element; an If returning a sequence is inlined when its condition is known
// (also from a known input); a Loop carrying a sequence is unrolled, and
// refused by name when its trip count is not known at compile time.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "backends/reference/executor.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"

namespace kiln {
namespace {

constexpr int F32 = onnx::TensorProto::FLOAT;

onnx::ModelProto model(int64_t opset = 18) {
  onnx::ModelProto m;
  m.set_ir_version(10);
  m.add_opset_import()->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

void tensor_type(onnx::TypeProto* t, std::vector<int64_t> dims) {
  auto* tt = t->mutable_tensor_type();
  tt->set_elem_type(F32);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

void add_tensor_input(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims) {
  auto* vi = g->add_input();
  vi->set_name(name);
  tensor_type(vi->mutable_type(), dims);
}

void add_sequence_input(onnx::GraphProto* g, const std::string& name) {
  auto* vi = g->add_input();
  vi->set_name(name);
  vi->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(F32);
}

void add_optional_tensor_input(onnx::GraphProto* g, const std::string& name) {
  auto* vi = g->add_input();
  vi->set_name(name);
  vi->mutable_type()->mutable_optional_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(F32);
}

onnx::NodeProto* node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> ins,
                      std::vector<std::string> outs) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(op);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
  return n;
}

CompositeInput sequence_of(std::vector<Shape> shapes) {
  CompositeInput c;
  c.sequence = true;
  for (auto& s : shapes) c.elements.push_back(TensorType(DType::F32, s));
  return c;
}

ImportResult import_model(const onnx::ModelProto& m, const ImportOptions& o) {
  return import_onnx_bytes(m.SerializeAsString(), ".", "m.onnx", o);
}

std::string unsupported_of(const onnx::ModelProto& m, const ImportOptions& o) {
  try {
    import_model(m, o);
  } catch (const Unsupported& e) {
    return e.what();
  }
  return "(no Unsupported)";
}

std::vector<std::string> input_names(const Graph& g) {
  std::vector<std::string> r;
  for (const Value* v : g.inputs()) r.push_back(v->name());
  return r;
}

std::vector<std::string> output_names(const Graph& g) {
  std::vector<std::string> r;
  for (const Value* v : g.outputs()) r.push_back(v->name());
  return r;
}

Tensor vec(std::vector<double> v) { return Tensor::from<double>(DType::F32, {int64_t(v.size())}, v); }

// SequenceInsert at the front of a sequence input: the output sequence is
// the inserted tensor, then the input's elements, each an output of its own.
TEST(FrontendSequenceBoundary, SequenceInputAndOutputAreTheirElements) {
  onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_sequence_input(g, "s");
  add_tensor_input(g, "t", {1});
  auto* zero = node(g, "Constant", {}, {"pos"});
  auto* a = zero->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  a->mutable_t()->add_int64_data(0);
  node(g, "SequenceInsert", {"s", "t", "pos"}, {"y"});
  g->add_output()->set_name("y");
  ImportOptions o;
  o.composite_inputs["s"] = sequence_of({{2}, {3}});
  ImportResult r = import_model(m, o);
  EXPECT_EQ(input_names(*r.graph), (std::vector<std::string>{"s[0]", "s[1]", "t"}));
  EXPECT_EQ(output_names(*r.graph), (std::vector<std::string>{"y[0]", "y[1]", "y[2]"}));
  std::vector<Tensor> out =
      ReferenceExecutor(*r.graph).run({{"s[0]", vec({1, 2})}, {"s[1]", vec({3, 4, 5})}, {"t", vec({9})}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].shape(), Shape{1});
  EXPECT_EQ(out[0].get_double(0), 9);
  EXPECT_EQ(out[1].get_double(1), 2);
  EXPECT_EQ(out[2].get_double(2), 5);
}

// Without its structure at compile time a sequence input is refused by
// name; a structure that contradicts the declared type is an error.
TEST(FrontendSequenceBoundary, SequenceInputNeedsItsStructure) {
  onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_sequence_input(g, "s");
  node(g, "SequenceLength", {"s"}, {"n"});
  g->add_output()->set_name("n");
  std::string e = unsupported_of(m, {});
  EXPECT_NE(e.find("input \"s\": is a sequence; kiln unrolls sequences"), std::string::npos) << e;
  EXPECT_NE(e.find("must be given at compile time"), std::string::npos) << e;
  ImportOptions o;
  o.composite_inputs["s"] = sequence_of({{2}});
  o.composite_inputs["s"].elements[0].dtype = DType::I64;
  try {
    import_model(m, o);
    ADD_FAILURE() << "an i64 element of a float sequence was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("input \"s[0]\": the model declares f32 elements"), std::string::npos)
        << err.what();
  }
  o.composite_inputs["s"] = sequence_of({{2}, {2}, {5}});
  ImportResult r = import_model(m, o);
  std::vector<Tensor> out =
      ReferenceExecutor(*r.graph).run({{"s[0]", vec({1, 2})}, {"s[1]", vec({1, 2})}, {"s[2]", vec({1, 2, 3, 4, 5})}});
  EXPECT_EQ(out[0].get_int(0), 3);
}

// kiln compile's form: element shapes (--sequence-shapes, the model's
// dtype) and --empty-optionals; flags naming a tensor input are refused.
TEST(FrontendSequenceBoundary, StructureFromShapeFlags) {
  EXPECT_EQ(parse_sequence_shapes_flag("s:2+3x4,t:"),
            (std::map<std::string, std::vector<Shape>>{{"s", {{2}, {3, 4}}}, {"t", {}}}));
  EXPECT_THROW(parse_sequence_shapes_flag("s"), Error);
  onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_sequence_input(g, "s");
  add_optional_tensor_input(g, "o");
  add_tensor_input(g, "x", {2});
  node(g, "SequenceLength", {"s"}, {"n"});
  node(g, "OptionalHasElement", {"o"}, {"has"});
  g->add_output()->set_name("n");
  g->add_output()->set_name("has");
  ImportOptions o;
  o.sequence_shapes = parse_sequence_shapes_flag("s:2+3x4");
  o.empty_optionals = {"o"};
  ImportResult r = import_model(m, o);
  EXPECT_EQ(input_names(*r.graph), (std::vector<std::string>{"s[0]", "s[1]", "x"}));
  EXPECT_EQ(r.graph->inputs()[1]->type().str(), "f32[3,4]");
  o.empty_optionals = {};
  o.input_shapes["o"] = {5};  // an optional tensor holding a value of this shape
  r = import_model(m, o);
  EXPECT_EQ(input_names(*r.graph), (std::vector<std::string>{"s[0]", "s[1]", "o", "x"}));
  o.sequence_shapes["x"] = {{2}};
  try {
    import_model(m, o);
    ADD_FAILURE() << "--sequence-shapes naming a tensor input was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--sequence-shapes names input \"x\", which is a tensor"), std::string::npos)
        << e.what();
  }
}

// An optional input: empty, it has no graph input and OptionalHasElement is
// false; holding a tensor, it is that tensor's input.
TEST(FrontendSequenceBoundary, OptionalInputPresentOrEmpty) {
  onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_optional_tensor_input(g, "o");
  add_tensor_input(g, "x", {2});
  node(g, "OptionalHasElement", {"o"}, {"has"});
  node(g, "Identity", {"x"}, {"y"});
  g->add_output()->set_name("has");
  g->add_output()->set_name("y");
  ImportOptions o;
  o.composite_inputs["o"].present = false;
  ImportResult r = import_model(m, o);
  EXPECT_EQ(input_names(*r.graph), (std::vector<std::string>{"x"}));
  std::vector<Tensor> out = ReferenceExecutor(*r.graph).run({{"x", vec({1, 2})}});
  EXPECT_EQ(out[0].get_int(0), 0);
  o.composite_inputs["o"].present = true;
  o.composite_inputs["o"].elements = {TensorType(DType::F32, {3})};
  r = import_model(m, o);
  EXPECT_EQ(input_names(*r.graph), (std::vector<std::string>{"o", "x"}));
  out = ReferenceExecutor(*r.graph).run({{"o", vec({1, 2, 3})}, {"x", vec({1, 2})}});
  EXPECT_EQ(out[0].get_int(0), 1);
}

// SequenceMap: its body once per element, a tensor operand given to each.
TEST(FrontendSequenceBoundary, SequenceMapInlinesTheBodyPerElement) {
  onnx::ModelProto m = model(17);
  auto* g = m.mutable_graph();
  add_sequence_input(g, "s");
  add_tensor_input(g, "t", {1});
  auto* map = node(g, "SequenceMap", {"s", "t"}, {"y"});
  auto* a = map->add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  auto* body = a->mutable_g();
  body->set_name("body");
  add_tensor_input(body, "e", {});
  body->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  add_tensor_input(body, "k", {1});
  node(body, "Mul", {"e", "k"}, {"r"});
  body->add_output()->set_name("r");
  g->add_output()->set_name("y");
  ImportOptions o;
  o.composite_inputs["s"] = sequence_of({{2}, {1}});
  ImportResult r = import_model(m, o);
  std::vector<Tensor> out =
      ReferenceExecutor(*r.graph).run({{"s[0]", vec({1, 2})}, {"s[1]", vec({5})}, {"t", vec({10})}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].get_double(1), 20);
  EXPECT_EQ(out[1].get_double(0), 50);
}

// A Loop carrying a sequence is unrolled when its trip count is known (here
// from an input given at compile time); otherwise it is refused by name.
TEST(FrontendSequenceBoundary, LoopCarryingASequence) {
  onnx::ModelProto m = model(13);
  auto* g = m.mutable_graph();
  auto* trip = g->add_input();
  trip->set_name("m");
  trip->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  trip->mutable_type()->mutable_tensor_type()->mutable_shape();
  add_tensor_input(g, "x", {2});
  node(g, "SequenceEmpty", {}, {"empty"});
  auto* loop = node(g, "Loop", {"m", "", "empty"}, {"seq"});
  auto* a = loop->add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  auto* body = a->mutable_g();
  body->set_name("body");
  for (const char* in : {"i", "c", "s_in"}) body->add_input()->set_name(in);
  node(body, "Identity", {"c"}, {"c_out"});
  node(body, "SequenceInsert", {"s_in", "x"}, {"s_out"});
  body->add_output()->set_name("c_out");
  body->add_output()->set_name("s_out");
  g->add_output()->set_name("seq");
  std::string e = unsupported_of(m, {});
  EXPECT_NE(e.find("node \"Loop\" (Loop): a loop-carried value is a sequence or an optional"), std::string::npos) << e;
  ImportOptions o;
  o.known_inputs["m"] = Tensor::scalar(DType::I64, 3);
  ImportResult r = import_model(m, o);
  EXPECT_EQ(output_names(*r.graph), (std::vector<std::string>{"seq[0]", "seq[1]", "seq[2]"}));
  std::vector<Tensor> out = ReferenceExecutor(*r.graph).run({{"x", vec({4, 5})}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2].get_double(1), 5);
}

// An If whose branches return sequences of different lengths: inlined with
// the condition given at compile time, refused without it.
TEST(FrontendSequenceBoundary, IfReturningASequence) {
  onnx::ModelProto m = model(13);
  auto* g = m.mutable_graph();
  auto* cond = g->add_input();
  cond->set_name("cond");
  cond->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
  cond->mutable_type()->mutable_tensor_type()->mutable_shape();
  add_tensor_input(g, "x", {2});
  auto* n = node(g, "If", {"cond"}, {"res"});
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = n->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* b = a->mutable_g();
    b->set_name(branch);
    std::vector<std::string> els{"x"};
    if (std::string(branch) == "then_branch") els.push_back("x");
    node(b, "SequenceConstruct", els, {"out"});
    b->add_output()->set_name("out");
  }
  g->add_output()->set_name("res");
  std::string e = unsupported_of(m, {});
  EXPECT_NE(e.find("subgraph output \"out\" is a sequence"), std::string::npos) << e;
  ImportOptions o;
  o.known_inputs["cond"] = Tensor::scalar(DType::Bool, 1);
  ImportResult r = import_model(m, o);
  EXPECT_EQ(output_names(*r.graph), (std::vector<std::string>{"res[0]", "res[1]"}));
  o.known_inputs["cond"] = Tensor::scalar(DType::Bool, 0);
  r = import_model(m, o);
  EXPECT_EQ(output_names(*r.graph), (std::vector<std::string>{"res[0]"}));
  std::vector<Tensor> out = ReferenceExecutor(*r.graph).run({{"x", vec({4, 5})}});
  EXPECT_EQ(out[0].get_double(0), 4);
}

}  // namespace
}  // namespace kiln
