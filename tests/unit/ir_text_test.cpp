// The IR text form: exact printing of each construct, parse errors with
// positions (and no crash on malformed input), and print(parse(print(g))) ==
// print(g) for tricky names, strings, floats and nested bodies.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"

namespace kiln {
namespace {

const TensorType kF23(DType::F32, {2, 3});

// Prints, parses, reprints; the two texts must be equal. Returns the text.
std::string round_trip(const Graph& g) {
  std::string a = print_graph(g);
  std::unique_ptr<Graph> p;
  try {
    p = parse_graph(a, "rt");
  } catch (const Error& e) {
    ADD_FAILURE() << e.what() << "\nin:\n" << a;
    return a;
  }
  EXPECT_EQ(print_graph(*p), a);
  return a;
}

std::string parse_error(std::string_view text) {
  try {
    parse_graph(text, "f.kir");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(IrText, PrintsInputsConstantsNodesAndReturn) {
  Graph g("main");
  Value* x = g.add_input("x", kF23);
  Value* c = g.add_constant("c", Tensor::from<float>(DType::F32, {3}, std::vector<float>{1, 2.5f, -3}));
  Node* add = g.add_node("add", {x, c}, {kF23}, {}, "add1");
  add->output()->set_name("y");
  Node* relu = g.add_node("relu", {add->output()}, {kF23});
  g.set_outputs({relu->output(), x});
  EXPECT_EQ(round_trip(g),
            "graph @main(%x: f32[2,3]) -> (f32[2,3], f32[2,3]) {\n"
            "  %c = const f32[3] dense<[1.0, 2.5, -3.0]>\n"
            "  %y = add(%x, %c) : f32[2,3] loc(\"add1\")\n"
            "  %0 = relu(%y) : f32[2,3]\n"
            "  return %0, %x\n"
            "}\n");
}

TEST(IrText, ParsesWhatItPrints) {
  auto g = parse_graph(
      "// a comment\n"
      "graph @g(%a: f32[2], %b: f32[2]) -> (f32[2]) {  // trailing comment\n"
      "  %s = add(%a, %b) {alpha=1.5} : f32[2] loc(\"n1\")\n"
      "  return %s\n"
      "}\n");
  ASSERT_EQ(g->num_nodes(), 1u);
  Node* n = g->node_list()[0];
  EXPECT_EQ(n->op(), "add");
  EXPECT_EQ(n->name(), "n1");
  EXPECT_EQ(n->input(0), g->inputs()[0]);
  EXPECT_EQ(n->input(1), g->inputs()[1]);
  EXPECT_EQ(n->attrs().get_float("alpha", 0), 1.5f);
  ASSERT_EQ(g->outputs().size(), 1u);
  EXPECT_EQ(g->outputs()[0], n->output());
  EXPECT_EQ(g->inputs()[0]->uses().size(), 1u);
}

TEST(IrText, ConstantForms) {
  Graph g("consts");
  g.add_constant("splat", Tensor::from<float>(DType::F32, {3, 3}, std::vector<float>(9, 0.5f)));
  g.add_constant("ints", Tensor::from<int64_t>(DType::I64, {2}, std::vector<int64_t>{1, -1}));
  std::vector<float> big(17);
  for (int i = 0; i < 17; ++i) big[i] = float(i);
  Value* w = g.add_constant("conv1.weight", Tensor::from<float>(DType::F32, {17}, big));
  g.add_constant("empty", Tensor(DType::F32, {0, 4}));
  g.add_constant("flags", Tensor::from<int>(DType::Bool, {3}, std::vector<int>{1, 0, 1}));
  g.add_constant("u", Tensor::from<uint64_t>(DType::U64, {2}, std::vector<uint64_t>{0, 0}));
  g.constants().back()->set_data([] {
    Tensor t(DType::U64, {2});
    t.data<uint64_t>()[0] = 18446744073709551615ull;
    t.data<uint64_t>()[1] = 7;
    return t;
  }());
  g.add_constant("i8", Tensor::from<int>(DType::I8, {2}, std::vector<int>{-128, 127}));
  g.add_constant("scalar", Tensor::scalar(DType::I32, 7));
  g.set_outputs({w});
  std::string text = round_trip(g);
  EXPECT_NE(text.find("%splat = const f32[3,3] splat<0.5>\n"), std::string::npos) << text;
  EXPECT_NE(text.find("%ints = const i64[2] dense<[1, -1]>\n"), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("%conv1.weight = const f32[17] @\"conv1.weight\" <xxh64:{:016x}>\n", w->digest())),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("%empty = const f32[0,4] dense<[]>\n"), std::string::npos) << text;
  EXPECT_NE(text.find("%flags = const bool[3] dense<[true, false, true]>\n"), std::string::npos) << text;
  EXPECT_NE(text.find("%u = const u64[2] dense<[18446744073709551615, 7]>\n"), std::string::npos) << text;
  EXPECT_NE(text.find("%i8 = const i8[2] dense<[-128, 127]>\n"), std::string::npos) << text;
  EXPECT_NE(text.find("%scalar = const i32[] splat<7>\n"), std::string::npos) << text;

  // Parsed back: inline constants carry their data; the reference does not,
  // but keeps its digest.
  auto p = parse_graph(text);
  const auto& cs = p->constants();
  ASSERT_EQ(cs.size(), 8u);
  EXPECT_TRUE(cs[0]->data() == g.constants()[0]->data());
  EXPECT_TRUE(cs[1]->data() == g.constants()[1]->data());
  EXPECT_FALSE(cs[2]->has_data());
  EXPECT_THROW(cs[2]->data(), Error);
  EXPECT_EQ(cs[2]->digest(), w->digest());
  EXPECT_EQ(cs[2]->type(), w->type());
  EXPECT_TRUE(cs[5]->data() == g.constants()[5]->data());
}

TEST(IrText, InlineElementLimitIsAnOption) {
  Graph g("g");
  Value* c = g.add_constant("c", Tensor::from<int>(DType::I32, {3}, std::vector<int>{1, 2, 3}));
  g.set_outputs({c});
  PrintOptions o;
  o.inline_elements = 2;
  EXPECT_NE(print_graph(g, o).find("%c = const i32[3] @\"c\" <xxh64:"), std::string::npos);
  EXPECT_NE(print_graph(g).find("dense<[1, 2, 3]>"), std::string::npos);
}

TEST(IrText, AttributeKinds) {
  Graph g("attrs");
  Value* x = g.add_input("x", kF23);
  AttrMap a;
  a.set("i", int64_t(-3));
  a.set("f", 2.0f);
  a.set("s", std::string("a\"b\\c\nd\te\x01\xff"));
  a.set("is", std::vector<int64_t>{1, 2});
  a.set("fs", std::vector<float>{1.0f, 2.5f});
  a.set("ss", std::vector<std::string>{"a", ""});
  a.set("ie", std::vector<int64_t>{});
  a.set("fe", std::vector<float>{});
  a.set("se", std::vector<std::string>{});
  a.set("t", Tensor::from<float>(DType::F32, {2}, std::vector<float>{1, 2}));
  a.set("ts", Tensor::from<int>(DType::I64, {2, 2}, std::vector<int>{4, 4, 4, 4}));
  a.set("weird name", int64_t(1));
  Node* n = g.add_node("relu", {x}, {kF23}, a);
  g.set_outputs({n->output()});
  std::string text = round_trip(g);
  EXPECT_NE(text.find("%0 = relu(%x) {f=2.0, fe=floats[], fs=[1.0,2.5], i=-3, ie=ints[], is=[1,2], "
                      "s=\"a\\\"b\\\\c\\nd\\te\\x01\\xff\", se=strings[], ss=[\"a\",\"\"], "
                      "t=dense<[1.0, 2.0]> : f32[2], ts=splat<4> : i64[2,2], \"weird name\"=1} : f32[2,3]\n"),
            std::string::npos)
      << text;
  auto p = parse_graph(text);
  EXPECT_TRUE(p->node_list()[0]->attrs() == a);
}

TEST(IrText, ListKindsFollowSpelling) {
  auto g = parse_graph(
      "graph @g(%x: f32[2]) -> (f32[2]) {\n"
      "  %y = relu(%x) {a=[1, 2.5], b=floats[1, 2], c=ints[], d=1e3, e=-inf} : f32[2]\n"
      "  return %y\n}\n");
  const AttrMap& a = g->node_list()[0]->attrs();
  EXPECT_EQ(a.get_floats("a"), (std::vector<float>{1.0f, 2.5f}));
  EXPECT_EQ(a.get_floats("b"), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(a.get_ints("c"), std::vector<int64_t>{});
  EXPECT_EQ(attr_kind(*a.find("d")), AttrKind::Float);
  EXPECT_EQ(a.get_float("d", 0), 1000.0f);
  EXPECT_EQ(a.get_float("e", 0), -std::numeric_limits<float>::infinity());
}

TEST(IrText, TrickyNames) {
  Graph g("my graph");
  Value* a = g.add_input("", kF23);         // empty: gets a number
  Value* b = g.add_input("0", kF23);        // a real name that looks like a fresh one
  Value* c = g.add_input("x y\"z", kF23);   // needs quoting
  Value* d = g.add_input("a.b-c_9", kF23);  // bare
  Node* n1 = g.add_node("add", {a, b}, {kF23});
  n1->output()->set_name("a.b-c_9");  // clashes with an input
  Node* n2 = g.add_node("add", {c, d}, {kF23}, {}, "loc \"q\"\n");
  n2->output()->set_name("\xc3\xa9t\xc3\xa9");  // UTF-8
  Node* n3 = g.add_node("add", {n1->output(), n2->output()}, {kF23});
  n3->output()->set_name("1");
  g.set_outputs({n3->output()});
  std::string text = round_trip(g);
  EXPECT_EQ(
      text,
      "graph @\"my graph\"(%2: f32[2,3], %0: f32[2,3], %\"x y\\\"z\": f32[2,3], %a.b-c_9: f32[2,3]) -> (f32[2,3]) {\n"
      "  %3 = add(%2, %0) : f32[2,3]\n"
      "  %\"\\xc3\\xa9t\\xc3\\xa9\" = add(%\"x y\\\"z\", %a.b-c_9) : f32[2,3] loc(\"loc \\\"q\\\"\\n\")\n"
      "  %1 = add(%3, %\"\\xc3\\xa9t\\xc3\\xa9\") : f32[2,3]\n"
      "  return %1\n"
      "}\n");
  auto p = parse_graph(text);
  EXPECT_EQ(p->name(), "my graph");
  EXPECT_EQ(p->inputs()[2]->name(), "x y\"z");
  EXPECT_EQ(p->node_list()[1]->name(), "loc \"q\"\n");
  EXPECT_EQ(p->node_list()[1]->output()->name(), "\xc3\xa9t\xc3\xa9");
}

TEST(IrText, OddOpNamesAbsentOperandsAndNoResults) {
  Graph g("g");
  Value* x = g.add_input("x", kF23);
  Node* n = g.add_node("const", {x, nullptr, x}, {kF23, TensorType(DType::I64, {})});
  g.add_node("print", {n->output(1)}, {});
  g.add_node("return", {}, {});
  g.set_outputs({n->output(0)});
  std::string text = round_trip(g);
  EXPECT_NE(text.find("  %0, %1 = \"const\"(%x, _, %x) : f32[2,3], i64[]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  print(%1)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  \"return\"()\n"), std::string::npos) << text;
  auto p = parse_graph(text);
  EXPECT_EQ(p->node_list()[0]->input(1), nullptr);
  EXPECT_EQ(p->node_list()[1]->num_outputs(), 0);
}

TEST(IrText, FloatsRoundTripExactly) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> vals = {
      nan, inf, -inf, -0.0f, 0.0f, 1e-45f, 3.4028235e38f, 0.1f, 1e20f, -1.17549435e-38f, 16777217.0f, 1.0f / 3};
  Graph g("g");
  Value* c = g.add_constant("c", Tensor::from<float>(DType::F32, {int64_t(vals.size())}, vals));
  AttrMap a;
  a.set("fs", vals);
  a.set("f", -0.0f);
  Value* x = g.add_input("x", kF23);
  Node* n = g.add_node("relu", {x}, {kF23}, a);
  g.set_outputs({n->output(), c});
  std::string text = round_trip(g);
  EXPECT_NE(text.find("dense<[nan, inf, -inf, -0.0, 0.0, 1e-45, 3.4028235e+38, 0.1, 1e+20, -1.1754944e-38, "
                      "16777216.0, 0.33333334]>"),
            std::string::npos)
      << text;
  auto p = parse_graph(text);
  const Tensor& t = p->constants()[0]->data();
  for (size_t i = 1; i < vals.size(); ++i)
    EXPECT_EQ(std::memcmp(&t.data<float>()[i], &vals[i], 4), 0) << "element " << i;
  EXPECT_TRUE(std::isnan(t.data<float>()[0]));
  EXPECT_TRUE(std::signbit(p->node_list()[0]->attrs().get_float("f", 1)));
}

TEST(IrText, HalfBf16AndF64ElementsRoundTrip) {
  Graph g("g");
  Tensor h(DType::F16, {6}), b(DType::BF16, {4}), d(DType::F64, {3});
  uint16_t hb[] = {0x0001, 0x7bff, 0x8000, 0x3555, 0xfc00, 0x7e00};  // subnormal, max, -0, 1/3, -inf, nan
  std::memcpy(h.raw(), hb, sizeof hb);
  uint16_t bb[] = {0x0001, 0x7f7f, 0x3eab, 0xc2f7};
  std::memcpy(b.raw(), bb, sizeof bb);
  double db[] = {4.9406564584124654e-324, 0.1, -1e308};
  std::memcpy(d.raw(), db, sizeof db);
  g.add_constant("h", h);
  g.add_constant("b", b);
  g.add_constant("d", d);
  std::string text = round_trip(g);
  EXPECT_NE(text.find("%h = const f16[6] dense<[5.9604645e-08, 65504.0, -0.0, 0.33325195, -inf, nan]>"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("%d = const f64[3] dense<[5e-324, 0.1, -1e+308]>"), std::string::npos) << text;
  auto p = parse_graph(text);
  EXPECT_TRUE(p->constants()[0]->data() == h);
  EXPECT_TRUE(p->constants()[1]->data() == b);
  EXPECT_TRUE(p->constants()[2]->data() == d);
}

TEST(IrText, NanPayloadsDoNotBreakSplatDetection) {
  // Two NaNs with different bits print alike, so the constant is a splat
  // (printing it dense would reparse as a splat and print differently).
  Graph g("g");
  Tensor t(DType::F32, {2});
  uint32_t bits[] = {0x7fc00000u, 0xffc00001u};
  std::memcpy(t.raw(), bits, sizeof bits);
  g.add_constant("n", t);
  EXPECT_NE(round_trip(g).find("%n = const f32[2] splat<nan>"), std::string::npos);
}

TEST(IrText, LayoutSuffix) {
  Graph g("g");
  TensorType t(DType::F16, {1, 8, 4, 4}, Layout::NHWC);
  Value* x = g.add_input("x", t);
  Node* n = g.add_node("relu", {x}, {t});
  g.set_outputs({n->output()});
  std::string text = round_trip(g);
  EXPECT_NE(text.find("graph @g(%x: f16[1,8,4,4]{nhwc}) -> (f16[1,8,4,4]{nhwc}) {"), std::string::npos) << text;
  EXPECT_EQ(parse_graph(text)->inputs()[0]->type().layout, Layout::NHWC);
}

std::unique_ptr<Graph> fused_graph(int depth) {
  auto g = std::make_unique<Graph>(depth ? "fused_" + std::to_string(depth) : "main");
  Value* a = g->add_input("a", kF23);
  Value* b = g->add_input("b", kF23);
  AttrMap at;
  at.set("kind", std::string("pointwise"));
  Node* n;
  if (depth < 2) {
    n = g->add_node("fused", {a, b}, {kF23}, at, "f" + std::to_string(depth));
    n->set_body(fused_graph(depth + 1));
  } else {
    n = g->add_node("add", {a, b}, {kF23});
  }
  Node* r = g->add_node("relu", {n->output()}, {kF23});
  g->set_outputs({r->output()});
  return g;
}

TEST(IrText, FusedBodiesNestWithIndentation) {
  auto g = fused_graph(0);
  EXPECT_EQ(round_trip(*g),
            "graph @main(%a: f32[2,3], %b: f32[2,3]) -> (f32[2,3]) {\n"
            "  %0 = fused(%a, %b) {kind=\"pointwise\"} : f32[2,3] loc(\"f0\") {\n"
            "    graph @fused_1(%a: f32[2,3], %b: f32[2,3]) -> (f32[2,3]) {\n"
            "      %0 = fused(%a, %b) {kind=\"pointwise\"} : f32[2,3] loc(\"f1\") {\n"
            "        graph @fused_2(%a: f32[2,3], %b: f32[2,3]) -> (f32[2,3]) {\n"
            "          %0 = add(%a, %b) : f32[2,3]\n"
            "          %1 = relu(%0) : f32[2,3]\n"
            "          return %1\n"
            "        }\n"
            "      }\n"
            "      %1 = relu(%0) : f32[2,3]\n"
            "      return %1\n"
            "    }\n"
            "  }\n"
            "  %1 = relu(%0) : f32[2,3]\n"
            "  return %1\n"
            "}\n");
  auto p = parse_graph(print_graph(*g));
  ASSERT_NE(p->node_list()[0]->body(), nullptr);
  EXPECT_EQ(p->node_list()[0]->body()->name(), "fused_1");
  ASSERT_NE(p->node_list()[0]->body()->node_list()[0]->body(), nullptr);
}

TEST(IrText, BodyNestingIsBounded) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "graph @g() -> () {\n  fused() {\n";
  std::string err = parse_error(text);
  EXPECT_NE(err.find("nest deeper than 32"), std::string::npos) << err;
  // 32 levels are fine.
  std::string ok;
  for (int i = 0; i < 32; ++i) ok += "graph @g() -> () {\n  fused() {\n";
  ok += "graph @g() -> () {\n  return\n}\n";
  for (int i = 0; i < 32; ++i) ok += "  }\n  return\n}\n";
  EXPECT_NO_THROW(parse_graph(ok));
}

TEST(IrText, ForwardReferencesParse) {
  // Order problems are the verifier's to report; the parser keeps the graph.
  auto g = parse_graph(
      "graph @g(%x: f32[2]) -> (f32[2]) {\n"
      "  %a = relu(%b) : f32[2]\n"
      "  %b = relu(%x) : f32[2]\n"
      "  return %a\n}\n");
  EXPECT_EQ(g->node_list()[0]->input(0), g->node_list()[1]->output());
  EXPECT_EQ(print_graph(*parse_graph(print_graph(*g))), print_graph(*g));
}

TEST(IrText, ParseErrorsNameLineAndColumn) {
  const std::string head = "graph @g(%x: f32[2]) -> (f32[2]) {\n";
  struct Case {
    std::string text, want;
  };
  std::vector<Case> cases = {
      {"", "f.kir:1:1: expected 'graph', found end of input"},
      {"graph @g(%x: f33[2]) -> () {\n return\n}", "f.kir:1:14: unknown element type 'f33'"},
      {head + "  %y = relu(%z) : f32[2]\n  return %y\n}", "f.kir:2:13: use of undefined value %z"},
      {head + "  %y = relu(%x) : f32[2]\n  %y = relu(%x) : f32[2]\n  return %y\n}",
       "f.kir:3:3: value %y is already defined on line 2"},
      {head + "  %x = relu(%x) : f32[2]\n  return %x\n}", "f.kir:2:3: value %x is already defined on line 1"},
      {head + "  %y = relu(%x) : f32[2]\n", "f.kir:3:1: expected an op name or 'return', found end"},
      {head + "  %y = relu(%x) : f32[99999999999999999999]\n  return %y\n}",
       "f.kir:2:23: dimension 99999999999999999999 is out of range"},
      {head + "  %y = relu(%x) : f32[-1]\n  return %y\n}", "f.kir:2:23: dimension -1 is negative"},
      {head + "  %y = relu(%x) : f32[4611686018427387904,4]\n  return %y\n}", "f.kir:2:19: element count"},
      {head + "  %y = relu(%x) {a=1, a=2} : f32[2]\n  return %y\n}", "f.kir:2:23: attribute 'a' is given twice"},
      {head + "  %y = relu(%x) {a=[]} : f32[2]\n  return %y\n}", "f.kir:2:20: an empty list needs its kind"},
      {head + "  %y = relu(%x) {a=9223372036854775808} : f32[2]\n  return %y\n}",
       "f.kir:2:20: integer 9223372036854775808 is out of range"},
      {head + "  %y = relu(%x) {a=1e39} : f32[2]\n  return %y\n}", "f.kir:2:20: float 1e39 is out of range"},
      {head + "  %y = relu(%x) {a=\"abc} : f32[2]\n  return %y\n}", "f.kir:2:20: unterminated string"},
      {head + "  %y = relu(%x) {a=\"a\\qb\"} : f32[2]\n  return %y\n}", "f.kir:2:22: unknown escape '\\q'"},
      {head + "  %y = relu(%x) {a=\"\\x4\"} : f32[2]\n  return %y\n}",
       "f.kir:2:21: \\x must be followed by two hex digits"},
      {head + "  %c = const i8[2] dense<[1, 300]>\n  return %x\n}", "f.kir:2:30: 300 does not fit in i8"},
      {head + "  %c = const u8[1] dense<[-1]>\n  return %x\n}", "f.kir:2:27: -1 does not fit in u8"},
      {head + "  %c = const f32[3] dense<[1.0, 2.0]>\n  return %x\n}",
       "f.kir:2:21: dense<> has 2 elements but f32[3] holds 3"},
      {head + "  %c = const f32[65536,65536] splat<1.0>\n  return %x\n}", "f.kir:2:31: f32[65536,65536] is too large"},
      {head + "  %c = const f32[2] @\"d\" <xxh64:00>\n  return %x\n}",
       "f.kir:2:21: constant reference @\"d\" does not repeat"},
      {head + "  %c = const f32[2] @\"c\" <xxh64:12345678zzzzzzzz>\n  return %x\n}",
       "f.kir:2:33: expected 16 hex digits"},
      {head + "  %c = const bool[1] dense<[1]>\n  return %x\n}", "f.kir:2:29: expected true or false"},
      {head + "  %a, %b = relu(%x) : f32[2]\n  return %a\n}", "f.kir:2:21: 2 results but 1 types"},
      {head + "  return %x, %x\n}", "f.kir:2:3: return gives 2 values but the graph declares 1"},
      {"graph @g(%x: i32[2]) -> (f32[2]) {\n  return %x\n}",
       "f.kir:2:10: result 0 %x has type i32[2] but the graph declares f32[2]"},
      {head + "  %y = relu(%x) : f32[2]\n  return %y\n}\ngraph", "f.kir:5:1: expected end of input after the graph"},
      {head + "  %y = relu(%x) : f32[2]{nchw}\n  return %y\n}", "f.kir:2:26: unknown layout 'nchw'"},
      {head + "  %y = relu(%x) $ : f32[2]\n  return %y\n}", "f.kir:2:17: unexpected character \"$\""},
      {head + "  %y = relu(%) : f32[2]\n  return %y\n}", "f.kir:2:13: expected a name after '%'"},
  };
  for (const Case& c : cases)
    EXPECT_NE(parse_error(c.text).find(c.want), std::string::npos) << c.want << "\n got: " << parse_error(c.text);
}

TEST(IrText, MalformedInputNeverCrashes) {
  // Every prefix and many random corruptions of a valid text either parse or
  // raise kiln::Error (any other exception or a crash fails the test).
  std::string text = print_graph(*fused_graph(0));
  text += "// tail\n";
  text.insert(
      text.find("  return %1\n}\n// tail"),
      "  %c = const f16[2] dense<[1.5, -inf]>\n  %d = relu(%c) {a=[1,2], b=\"x\\n\", t=splat<1> : i8[2]} : f16[2]\n");
  auto attempt = [](const std::string& s) {
    try {
      parse_graph(s);
    } catch (const Error&) {
    }
  };
  for (size_t i = 0; i <= text.size(); ++i) attempt(text.substr(0, i));
  std::mt19937 rng(42);
  const std::string alphabet = "%@\"\\{}[]()<>,:=-_.0123456789aefinx \n/";
  for (int k = 0; k < 3000; ++k) {
    std::string s = text;
    int edits = 1 + rng() % 4;
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % s.size();
      switch (rng() % 3) {
        case 0:
          s[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          s.erase(pos, 1 + rng() % 8);
          break;
        default:
          s.insert(pos, 1, char(rng() % 256));
          break;
      }
      if (s.empty()) s.push_back('x');
    }
    attempt(s);
  }
}

TEST(IrText, SplitFiles) {
  std::string text =
      "// RUN: something\n"
      "graph @one() -> () {\n  return\n}\n"
      "// -----\n"
      "graph @two(%x: f32[1]) -> (f32[1]) {\n  return %x\n}\n"
      "// -----   \n"
      "graph @three() -> () {\n  return\n}\n";
  auto gs = parse_graphs_split(text, "s.kir");
  ASSERT_EQ(gs.size(), 3u);
  EXPECT_EQ(gs[0]->name(), "one");
  EXPECT_EQ(gs[1]->name(), "two");
  EXPECT_EQ(gs[2]->name(), "three");
  // A "// -----" that is not the whole line does not split; parse_graph sees comments.
  EXPECT_EQ(parse_graphs_split("graph @a() -> () { // -----\n return\n}\n").size(), 1u);
  EXPECT_THROW(parse_graph(text), Error);
  // Errors in a later chunk give the line in the whole file.
  std::string bad = "graph @one() -> () {\n  return\n}\n// -----\ngraph @two() -> () {\n  bogus\n}\n";
  try {
    parse_graphs_split(bad, "s.kir");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("s.kir:7:1: expected '('"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
