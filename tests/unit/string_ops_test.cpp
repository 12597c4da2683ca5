// String tensors (DType::String) and the string ops on the reference
// backend: storage, the IR text, the ONNX TensorProto form, the exact
// comparison, each op's meaning (UTF-8, empty strings, broadcasting) and the
// refusals (numeric ops, the simulator, plans).
#include <gtest/gtest.h>

#include "backends/compare.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/string_values.h"
#include "linalg_ops_test_util.h"
#include "ops/string_ops.h"

namespace kiln {
namespace {

using namespace kiln::testing::linalg_ops;

Tensor strs(Shape s, std::vector<std::string> v) { return Tensor::from_strings(std::move(s), v); }

std::vector<std::string> values(const Tensor& t) { return {t.strings(), t.strings() + t.numel()}; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

AttrMap attrs(std::initializer_list<std::pair<const char*, Attribute>> kv) {
  AttrMap a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

TEST(StringTensor, CopiesComparesAndRefusesNumericAccess) {
  Tensor t = strs({2}, {"caf\xc3\xa9", ""});
  Tensor c = t.clone();
  c.strings()[1] = "x";
  EXPECT_EQ(values(t), (std::vector<std::string>{"caf\xc3\xa9", ""}));  // the clone owns its strings
  EXPECT_FALSE(t.same_bytes(c));
  EXPECT_TRUE(t.same_bytes(strs({2}, {"caf\xc3\xa9", ""})));
  EXPECT_NE(error_of([&] { t.get_double(0); }), "(no error)");
  EXPECT_NE(error_of([&] { (void)t.bytes(); }), "(no error)");
  EXPECT_NE(error_of([&] { t.cast(DType::F32); }), "(no error)");
  EXPECT_NE(error_of([&] { Tensor(DType::F32, {1}).strings(); }), "(no error)");
}

TEST(StringTensor, ConstantDigestIsTheCharacters) {
  Graph g;
  Value* a = g.add_constant("a", strs({2}, {"ab", "c"}));
  Value* b = g.add_constant("b", strs({2}, {"ab", "c"}));
  Value* c = g.add_constant("c", strs({2}, {"a", "bc"}));  // same bytes, other split
  EXPECT_EQ(a->digest(), b->digest());
  EXPECT_NE(a->digest(), c->digest());
}

TEST(StringTensor, IrTextRoundTripsEveryByte) {
  std::string all;
  for (int ch = 1; ch < 256; ++ch) all += static_cast<char>(ch);
  Graph g;
  Value* k = g.add_constant("k", strs({3}, {all, "", "\xe4\xb8\xad"}));
  g.set_outputs({k});
  const std::string text = print_graph(g);
  std::unique_ptr<Graph> back = parse_graph(text);
  ASSERT_EQ(back->outputs().size(), 1u);
  EXPECT_EQ(values(back->outputs()[0]->data()), (std::vector<std::string>{all, "", "\xe4\xb8\xad"}));
  EXPECT_EQ(print_graph(*back), text);
}

TEST(StringTensor, TensorProtoRoundTripAndItsErrors) {
  Tensor t = strs({2, 1}, {"\xe7\x9a\x84", ""});
  onnx::TensorProto p = tensor_to_proto(t, "s");
  EXPECT_EQ(p.data_type(), onnx::TensorProto::STRING);
  EXPECT_TRUE(tensor_from_proto(p, "", "s.pb").same_bytes(t));
  p.add_string_data("extra");
  EXPECT_NE(error_of([&] { tensor_from_proto(p, "", "s.pb"); }).find("string_data holds 3 values but the shape [2,1]"),
            std::string::npos);
  onnx::TensorProto raw;
  raw.set_data_type(onnx::TensorProto::STRING);
  raw.add_dims(1);
  raw.set_raw_data("abc");
  EXPECT_NE(error_of([&] { tensor_from_proto(raw, "", "r.pb"); }).find("must hold its values in string_data"),
            std::string::npos);
}

TEST(StringTensor, ComparedExactly) {
  EXPECT_EQ(compare_tensors(strs({2}, {"a", "b"}), strs({2}, {"a", "b"}), {1, 1}), "");
  EXPECT_EQ(compare_tensors(strs({2}, {"a", "b "}), strs({2}, {"a", "b"}), {1, 1}),
            "1 of 2 strings differ; first at 1: got \"b \" expected \"b\"");
}

TEST(StringOps, NumericOpsRefuseStringsNamingTheOp) {
  std::string e = infer_error("add", {TensorType(DType::String, {2}), TensorType(DType::String, {2})});
  EXPECT_NE(e.find("kiln's add does not take string tensors (operand 0 is string[2])"), std::string::npos) << e;
}

TEST(StringOps, EqualBroadcastsAndComparesBytes) {
  Tensor a = strs({2, 2}, {"", "\xc3\xa9", "e", "E"});
  Tensor b = strs({2}, {"", "e"});
  Tensor r = run("string_equal", {a, b})[0];
  ASSERT_EQ(r.shape(), (Shape{2, 2}));
  EXPECT_EQ(r.to_int_vector(), (std::vector<int64_t>{1, 0, 0, 0}));
}

TEST(StringOps, ConcatBroadcastsUtf8AndEmpty) {
  Tensor r = run("string_concat", {strs({2, 1}, {"\xe4\xb8\xad", ""}), strs({3}, {"a", "", "\xe7\x9a\x84"})})[0];
  ASSERT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(r), (std::vector<std::string>{"\xe4\xb8\xad"
                                                 "a",
                                                 "\xe4\xb8\xad", "\xe4\xb8\xad\xe7\x9a\x84", "a", "", "\xe7\x9a\x84"}));
  EXPECT_EQ(values(run("string_concat", {strs({}, {"x"}), strs({}, {"y"})})[0]), (std::vector<std::string>{"xy"}));
}

TEST(StringOps, SplitAsPythonSplits) {
  // A delimiter keeps empty pieces; maxsplit leaves the rest whole; the
  // result is padded to the most pieces.
  auto r = run("string_split", {strs({2}, {"o-n--x-", "a"})}, attrs({{"delimiter", std::string("-")}}), 2);
  EXPECT_EQ(r[0].shape(), (Shape{2, 5}));
  EXPECT_EQ(values(r[0]), (std::vector<std::string>{"o", "n", "", "x", "", "a", "", "", "", ""}));
  EXPECT_EQ(r[1].to_int_vector(), (std::vector<int64_t>{5, 1}));
  r = run("string_split", {strs({1}, {"a::b::c"})}, attrs({{"delimiter", std::string("::")}, {"maxsplit", int64_t(1)}}),
          2);
  EXPECT_EQ(values(r[0]), (std::vector<std::string>{"a", "b::c"}));
  // No delimiter: runs of whitespace, none at the ends; maxsplit keeps the
  // rest's trailing whitespace.
  r = run("string_split", {strs({3}, {"  a \t b  ", "", "x y z "})}, attrs({{"maxsplit", int64_t(1)}}), 2);
  EXPECT_EQ(r[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(values(r[0]), (std::vector<std::string>{"a", "b  ", "", "", "x", "y z "}));
  EXPECT_EQ(r[1].to_int_vector(), (std::vector<int64_t>{2, 0, 2}));
  // UTF-8 delimiters split on their bytes.
  r = run("string_split",
          {strs({1}, {"a\xe2\x80\xa2"
                      "b"})},
          attrs({{"delimiter", std::string("\xe2\x80\xa2")}}), 2);
  EXPECT_EQ(values(r[0]), (std::vector<std::string>{"a", "b"}));
  r = run("string_split", {strs({0}, {})}, {}, 2);
  EXPECT_EQ(r[0].shape(), (Shape{0, 0}));
}

TEST(StringOps, SplitNeedsItsInputAtCompileTime) {
  std::string e = error_of([] { infer("string_split", {TensorType(DType::String, {2})}, {}, 2); });
  EXPECT_NE(e.find("StringSplit's input"), std::string::npos) << e;
}

TEST(StringOps, RegexFullMatchIsRe2sFullMatchOverUtf8) {
  Tensor x = strs({4}, {"www.abc.com", "www.abc.com.x", "", "\xe4\xb8\xad"});
  EXPECT_EQ(
      run("regex_full_match", {x}, attrs({{"pattern", std::string(R"(www\.[\w.-]+\.\bcom\b)")}}))[0].to_int_vector(),
      (std::vector<int64_t>{1, 0, 0, 0}));
  // One '.' is one code point, not one byte.
  EXPECT_EQ(run("regex_full_match", {x}, attrs({{"pattern", std::string("^.?$")}}))[0].to_int_vector(),
            (std::vector<int64_t>{0, 0, 1, 1}));
  std::string e =
      infer_error("regex_full_match", {TensorType(DType::String, {1})}, attrs({{"pattern", std::string("(")}}));
  EXPECT_NE(e.find("pattern \"(\" is not a valid RE2 regular expression: missing )"), std::string::npos) << e;
}

TEST(StringOps, NormalizerRemovesStopwordsAndChangesCase) {
  Tensor x = strs({1, 4}, {"Monday", "\xc3\xa9t\xc3\xa9", "monday", "x"});
  AttrMap a = attrs({{"case_change_action", std::string("UPPER")}, {"stopwords", std::vector<std::string>{"MONDAY"}}});
  Tensor r = run("string_normalizer", {x}, a)[0];  // case-insensitive by default
  EXPECT_EQ(r.shape(), (Shape{1, 2}));
  EXPECT_EQ(values(r), (std::vector<std::string>{"\xc3\x89T\xc3\x89", "X"}));
  a.set("is_case_sensitive", int64_t(1));
  r = run("string_normalizer", {x}, a)[0];
  EXPECT_EQ(values(r), (std::vector<std::string>{"MONDAY", "\xc3\x89T\xc3\x89", "MONDAY", "X"}));
  // Nothing left: one empty string.
  r = run("string_normalizer", {strs({2}, {"monday", "Monday"})},
          attrs({{"stopwords", std::vector<std::string>{"monday"}}}))[0];
  EXPECT_EQ(r.shape(), (Shape{1}));
  EXPECT_EQ(values(r), (std::vector<std::string>{""}));
  // Without stopwords the shape is static: no compile-time value needed.
  EXPECT_EQ(infer("string_normalizer", {TensorType(DType::String, {1, 3})},
                  attrs({{"case_change_action", std::string("LOWER")}}))[0]
                .shape,
            (Shape{1, 3}));
  EXPECT_NE(infer_error("string_normalizer", {TensorType(DType::String, {2, 3})}).find("takes [C] or [1, C]"),
            std::string::npos);
  std::string e = infer_error("string_normalizer", {TensorType(DType::String, {3})},
                              attrs({{"case_change_action", std::string("LOWER")}, {"locale", std::string("xx_YY")}}));
  EXPECT_NE(e.find("locale \"xx_YY\" is not installed on this machine"), std::string::npos) << e;
  EXPECT_NE(error_of([] { ops::change_case("\xff", true, "", "n"); }).find("is not valid UTF-8"), std::string::npos);
}

TEST(StringOps, NumbersPrintAsOnnxsReference) {
  // Strings from numpy 2.4's astype(str), which onnx.reference's Cast uses.
  Tensor f = Tensor::from<double>(
      DType::F32, {10},
      {0.9767611026763916, 0.039187793, 1e-5, 1e-4, 100.0, 123456789.0, -0.0, NAN, -INFINITY, 0.00012});
  std::vector<std::string> want = {"0.9767611",     "0.039187793", "1e-05", "1e-04", "100.0",
                                   "1.2345679e+08", "-0.0",        "nan",   "-inf",  "0.00012"};
  for (int64_t i = 0; i < f.numel(); ++i) EXPECT_EQ(ops::number_to_string(f, i), want[i]) << i;
  Tensor d = Tensor::from<double>(DType::F64, {4}, {0.1, 1e15, 1e16, 0.0001});
  want = {"0.1", "1000000000000000.0", "1e+16", "0.0001"};
  for (int64_t i = 0; i < d.numel(); ++i) EXPECT_EQ(ops::number_to_string(d, i), want[i]) << i;
  Tensor h = Tensor::from<double>(DType::F16, {3}, {0.1, 1000, 0.0001});
  want = {"0.1", "1e+03", "0.0001"};
  for (int64_t i = 0; i < h.numel(); ++i) EXPECT_EQ(ops::number_to_string(h, i), want[i]) << i;
  EXPECT_EQ(ops::number_to_string(Tensor::from<int64_t>(DType::I64, {1}, {-5}), 0), "-5");
  EXPECT_EQ(ops::number_to_string(Tensor::from<int>(DType::Bool, {2}, {1, 0}), 1), "False");
}

TEST(StringOps, CastReadsNumbersAsOnnxSpecifies) {
  Tensor x = strs({7}, {" 0.47892547 ", "1e-5", "1E8", "NaN", "+INF", "-inf", "inF"});
  Tensor r = run("cast_string", {x}, attrs({{"to", std::string("f32")}}))[0];
  EXPECT_EQ(r.data<float>()[0], 0.47892547f);
  EXPECT_EQ(r.data<float>()[1], 1e-5f);
  EXPECT_EQ(r.data<float>()[2], 1e8f);
  EXPECT_TRUE(std::isnan(r.data<float>()[3]));
  EXPECT_EQ(r.data<float>()[4], INFINITY);
  EXPECT_EQ(r.data<float>()[5], -INFINITY);
  EXPECT_EQ(r.data<float>()[6], INFINITY);
  Tensor i =
      run("cast_string", {strs({3}, {"100.5", "-7", "9223372036854775807"})}, attrs({{"to", std::string("i64")}}))[0];
  EXPECT_EQ(i.to_int_vector(), (std::vector<int64_t>{100, -7, INT64_MAX}));
  EXPECT_NE(error_of([&] {
              run("cast_string", {strs({1}, {"Hello"})}, attrs({{"to", std::string("f32")}}));
            }).find("cannot cast the string \"Hello\" to f32: it is not a number"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              run("cast_string", {strs({1}, {"300"})}, attrs({{"to", std::string("u8")}}));
            }).find("it is out of range"),
            std::string::npos);
  Tensor b = run("cast_string", {strs({3}, {"True", "0", "2.5"})}, attrs({{"to", std::string("bool")}}))[0];
  EXPECT_EQ(b.to_int_vector(), (std::vector<int64_t>{1, 0, 1}));
  // And back: numbers to strings through the op.
  Tensor s =
      run("cast_string", {Tensor::from<int>(DType::I32, {2}, {3, -1})}, attrs({{"to", std::string("string")}}))[0];
  EXPECT_EQ(values(s), (std::vector<std::string>{"3", "-1"}));
}

TEST(StringOps, LabelEncoderMapsStringsAndNumbers) {
  AttrMap a;
  a.set("keys", strs({3}, {"a", "b", "\xc3\xa9"}));
  a.set("values", Tensor::from<int64_t>(DType::I64, {3}, {0, 1, 2}));
  a.set("default", Tensor::scalar(DType::I64, 42));
  Tensor r = run("label_encoder", {strs({2, 2}, {"\xc3\xa9", "", "b", "A"})}, a)[0];
  EXPECT_EQ(r.shape(), (Shape{2, 2}));
  EXPECT_EQ(r.to_int_vector(), (std::vector<int64_t>{2, 42, 1, 42}));
  // Floats to strings; a NaN key matches NaN.
  AttrMap f;
  f.set("keys", Tensor::from<double>(DType::F32, {2}, {NAN, 0.5}));
  f.set("values", strs({2}, {"nan", "half"}));
  f.set("default", strs({}, {"_Unused"}));
  Tensor s = run("label_encoder", {Tensor::from<double>(DType::F32, {3}, {0.5, NAN, 1})}, f)[0];
  EXPECT_EQ(values(s), (std::vector<std::string>{"half", "nan", "_Unused"}));
  std::string e = infer_error("label_encoder", {TensorType(DType::I64, {2})}, a);
  EXPECT_NE(e.find("both strings or both numbers"), std::string::npos) << e;
}

TEST(StringOps, GraphsWithStringsAreNamedForTheirRefusal) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::String, {2}));
  Node* n = g.add_node("string_concat", {x, x}, {TensorType(DType::String, {2})}, {}, "joiner");
  g.set_outputs({n->output(0)});
  std::string e = error_of([&] { refuse_string_tensors(g, "m.onnx", "on the kernel simulator"); });
  EXPECT_EQ(
      e,
      "m.onnx: node \"joiner\" (string_concat) holds string tensors, which kiln runs on the CPU backends only (the "
      "reference backend), not on the kernel simulator");
  Graph numeric;
  numeric.set_outputs({numeric.add_input("y", TensorType(DType::F32, {1}))});
  EXPECT_FALSE(first_string_value(numeric).has_value());
}

}  // namespace
}  // namespace kiln
