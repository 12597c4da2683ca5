// Symbolic dims (issue 19, docs/dynamic_shapes.md): the polynomial algebra
// and its canonical text, what refuses a symbol (element counts, allocation,
// ops whose inference is not symbol-aware), binding symbols from input
// shapes with every error named, and specialisation: the specialised graph
// computes on the reference backend exactly what the same graph written with
// static shapes computes.
#include <gtest/gtest.h>

#include <random>

#include "backends/reference/executor.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/specialize.h"
#include "ir/symbolic_dim.h"
#include "ir/verifier.h"
#include "ops/registry.h"

namespace kiln {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(SymbolicDim, CanonicalPolynomials) {
  int64_t b = symbol_dim("batch"), s = symbol_dim("seq");
  EXPECT_TRUE(is_symbolic_dim(b));
  EXPECT_FALSE(is_symbolic_dim(7));
  EXPECT_FALSE(is_symbolic_dim(-1));
  EXPECT_EQ(b, symbol_dim("batch"));  // interned: one handle per polynomial
  EXPECT_EQ(dim_mul(b, s), dim_mul(s, b));
  EXPECT_EQ(dim_str(dim_mul(s, b)), "batch*seq");
  EXPECT_EQ(dim_str(dim_add(s, s)), "2*seq");
  EXPECT_EQ(dim_add(s, s), dim_mul(2, s));
  EXPECT_EQ(dim_str(dim_sub(dim_add(dim_mul(b, s), s), 1)), "batch*seq+seq-1");
  EXPECT_EQ(dim_sub(dim_add(s, 3), s), 3);  // symbols cancel to a constant
  EXPECT_EQ(dim_str(12), "12");
  EXPECT_EQ(dims_str({b, 3, dim_mul(4, s)}), "batch,3,4*seq");
  EXPECT_EQ(dim_product({b, 12, s, 64}), dim_mul(768, dim_mul(b, s)));
  EXPECT_EQ(dim_symbols(dim_add(dim_mul(b, s), s)), (std::vector<std::string>{"batch", "seq"}));
}

TEST(SymbolicDim, ExactDivisionOnly) {
  int64_t b = symbol_dim("batch"), s = symbol_dim("seq");
  int64_t numel = dim_product({b, s, 768});
  EXPECT_EQ(dim_div_exact(numel, dim_mul(s, 768)), b);
  EXPECT_EQ(dim_div_exact(numel, 12), dim_product({b, s, 64}));
  EXPECT_EQ(dim_div_exact(dim_add(b, 1), b), std::nullopt);  // a sum is not a multiple of b
  EXPECT_EQ(dim_div_exact(dim_mul(b, 3), 2), std::nullopt);  // 3b/2 is not an integer for every b
  EXPECT_EQ(dim_div_exact(b, dim_add(b, 1)), std::nullopt);  // only monomial divisors
  EXPECT_EQ(value_div(dim_mul(b, 4), 2), dim_mul(b, 2));     // ONNX Div on shape values
  EXPECT_EQ(value_mul(b, -1) == b, false);                   // shape values may go negative
  EXPECT_EQ(value_add(value_mul(b, -1), b), 0);
}

TEST(SymbolicDim, EvaluationNamesTheSymbol) {
  int64_t d = dim_sub(dim_mul(symbol_dim("seq"), 2), 3);
  EXPECT_EQ(eval_dim(d, {{"seq", 5}}), 7);
  EXPECT_EQ(error_of([&] { eval_dim(d, {}); }), "symbol 'seq' has no value");
  EXPECT_EQ(error_of([&] { eval_dim(d, {{"seq", 1}}); }), "dim 2*seq-3 is -1 (negative) for the given symbol values");
  EXPECT_EQ(error_of([] { symbol_dim("2x"); }).substr(0, 41), "\"2x\" is not a valid symbol name (an ident");
}

// substitute_dim binds some symbols and keeps the others; eval_dim is it
// with every symbol bound, so both give one answer and one error for each case.
TEST(SymbolicDim, SubstitutionIsEvaluationWithSymbolsLeft) {
  const int64_t b = symbol_dim("batch"), s = symbol_dim("seq");
  const int64_t d = dim_sub(dim_add(dim_mul(b, s), s), 1);  // batch*seq+seq-1
  EXPECT_EQ(dim_str(substitute_dim(d, {{"seq", 4}})), "4*batch+3");
  EXPECT_EQ(dim_str(substitute_dim(d, {{"batch", 2}})), "3*seq-1");
  EXPECT_EQ(substitute_dim(d, {}), d);
  EXPECT_EQ(substitute_dim(d, {{"batch", 2}, {"seq", 4}}), 11);
  EXPECT_EQ(eval_dim(d, {{"batch", 2}, {"seq", 4}}), 11);
  EXPECT_EQ(substitute_dim(7, {{"seq", 4}}), 7);
  // An unbound symbol is an error for eval_dim only.
  EXPECT_EQ(error_of([&] { eval_dim(d, {{"seq", 4}}); }), "symbol 'batch' has no value");
  // Negative and overflowing values: the same error from both.
  const int64_t neg = dim_sub(dim_mul(s, 2), 3);
  for (auto f : {substitute_dim, eval_dim}) {
    EXPECT_EQ(error_of([&] { f(neg, {{"seq", 1}}); }), "dim 2*seq-3 is -1 (negative) for the given symbol values");
    EXPECT_EQ(error_of([&] {
                f(dim_mul(b, s), {{"batch", int64_t(1) << 40}, {"seq", int64_t(1) << 40}});
              }),
              "symbolic dim arithmetic overflows (1099511627776 * 1099511627776)");
  }
}

TEST(SymbolicDim, StaticSizesRefuseSymbols) {
  Shape s = {symbol_dim("batch"), 3};
  EXPECT_EQ(error_of([&] { shape_numel(s); }),
            "shape [batch,3] has the symbolic dim batch: a fixed size is needed here");
  EXPECT_EQ(error_of([&] { Tensor t(DType::F32, s); }),
            "shape [batch,3] has the symbolic dim batch: a fixed size is needed here");
  EXPECT_EQ(TensorType(DType::F16, s).str(), "f16[batch,3]");
}

TEST(SymbolicDim, TextRoundTripKeepsSymbolsAndRanges) {
  const char* text =
      "graph @m(%x: f32[b,s,8]) -> (f32[b*s,8], i64[2]) symbols(b in [1, 8], s in [2, 128]) {\n"
      "  %v = const i64[2] dense<[b, 2*s-1]>\n"
      "  %y = reshape(%x) {shape=[b*s,8]} : f32[b*s,8]\n"
      "  return %y, %v\n"
      "}\n";
  auto g = parse_graph(text, "t.kir");
  EXPECT_EQ(g->symbols(), (std::vector<SymbolDecl>{{"b", 1, 8}, {"s", 2, 128}}));
  verify_graph(*g, op_registry());
  EXPECT_EQ(print_graph(*g), text);
  EXPECT_EQ(print_graph(*parse_graph(print_graph(*g), "t2.kir")), text);
  EXPECT_EQ(print_graph(*g->clone()), text);  // clones keep the table
}

TEST(SymbolicDim, ParseErrorsHavePositions) {
  EXPECT_EQ(error_of([] { parse_graph("graph @m(%x: f32[3 -1]) -> () {\n return\n}", "e.kir"); }),
            "e.kir:1:20: expected ',' or the end of the list, found '-1'");
  EXPECT_EQ(error_of([] { parse_graph("graph @m(%x: f32[n*]) -> () {\n return\n}", "e.kir"); }),
            "e.kir:1:20: expected dimension (an integer or a symbolic dim such as batch*seq), found ']'");
  EXPECT_EQ(error_of([] { parse_graph("graph @m(%x: f32[in]) -> () {\n return\n}", "e.kir"); }),
            "e.kir:1:18: expected dimension (an integer or a symbolic dim such as batch*seq), found 'in'");
  EXPECT_EQ(error_of([] { parse_graph("graph @m() -> () symbols(n in [1, 2], n in [1, 3]) {\n return\n}", "e.kir"); }),
            "e.kir:1:39: symbol n is declared twice");
  EXPECT_EQ(error_of([] { parse_graph("graph @m() -> () {\n %c = const f32[n] splat<1.0>\n return\n}", "e.kir"); }),
            "e.kir:2:20: a tensor with data needs a static type, not f32[n]");
}

// The same model with symbols and with static shapes.
const char* kDynamic =
    "graph @attn(%x: f32[b,s,8], %m: f32[b,1,1,s]) -> (f32[b*s,8]) symbols(b in [1, 4], s in [1, 32]) {\n"
    "  %w = const f32[8,8] dense<[%W%]>\n"
    "  %h = matmul(%x, %w) : f32[b,s,8]\n"
    "  %r = reshape(%h) {shape=[b,s,2,4]} : f32[b,s,2,4]\n"
    "  %q = transpose(%r) {perm=[0,2,1,3]} : f32[b,2,s,4]\n"
    "  %k = transpose(%r) {perm=[0,2,3,1]} : f32[b,2,4,s]\n"
    "  %a = matmul(%q, %k) : f32[b,2,s,s]\n"
    "  %am = add(%a, %m) : f32[b,2,s,s]\n"
    "  %p = softmax(%am) {axis=-1} : f32[b,2,s,s]\n"
    "  %c = matmul(%p, %q) : f32[b,2,s,4]\n"
    "  %t = transpose(%c) {perm=[0,2,1,3]} : f32[b,s,2,4]\n"
    "  %y = reshape(%t) {shape=[b*s,8]} : f32[b*s,8]\n"
    "  return %y\n"
    "}\n";

std::string with_weights(std::string text) {
  std::string w;
  for (int i = 0; i < 64; ++i) w += (i ? ", " : "") + std::to_string((i * 7 % 13 - 6) / 8.0);
  text.replace(text.find("%W%"), 3, w);
  return text;
}

// kDynamic with b and s written as numbers.
std::string static_text(int64_t b, int64_t s) {
  std::string t = with_weights(kDynamic);
  t.replace(t.find(" symbols("), t.find(") {\n") - t.find(" symbols(") + 1, "");
  auto sub = [&](const std::string& from, const std::string& to) {
    for (size_t at = t.find(from); at != std::string::npos; at = t.find(from, at + to.size()))
      t.replace(at, from.size(), to);
  };
  sub("b*s", std::to_string(b * s));
  sub("[b,", "[" + std::to_string(b) + ",");
  sub(",s,", "," + std::to_string(s) + ",");
  sub(",s]", "," + std::to_string(s) + "]");
  return t;
}

Tensor random(DType dt, const Shape& s, unsigned seed) {
  Tensor t(dt, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

TEST(SymbolicDim, SpecialisedGraphMeansTheStaticOne) {
  auto dyn = parse_graph(with_weights(kDynamic), "dyn.kir");
  verify_graph(*dyn, op_registry());
  for (auto [b, s] : {std::pair<int64_t, int64_t>{1, 1}, {2, 5}, {4, 32}}) {
    Tensor x = random(DType::F32, {b, s, 8}, 1), m = random(DType::F32, {b, 1, 1, s}, 2);
    SymbolBindings bind = bind_symbols(*dyn, {{"x", x.shape()}, {"m", m.shape()}}, "dyn.kir");
    EXPECT_EQ(bind, (SymbolBindings{{"b", b}, {"s", s}}));
    auto spec = specialize_graph(*dyn, bind, op_registry());
    auto stat = parse_graph(static_text(b, s), "static.kir");
    EXPECT_EQ(print_graph(*spec), print_graph(*stat));
    Tensor got = run_graph_reference(*spec, {&x, &m})[0];
    Tensor want = run_graph_reference(*stat, {&x, &m})[0];
    EXPECT_EQ(got.shape(), (Shape{b * s, 8}));
    EXPECT_TRUE(got.same_bytes(want));
  }
}

TEST(SymbolicDim, BindingErrorsNameInputDimAndRange) {
  auto g = parse_graph(with_weights(kDynamic), "dyn.kir");
  auto bind = [&](Shape x, Shape m) { return error_of([&] { bind_symbols(*g, {{"x", x}, {"m", m}}, "dyn.kir"); }); };
  EXPECT_EQ(bind({5, 3, 8}, {5, 1, 1, 3}),
            "dyn.kir: input \"x\" has shape [5,3,8]: dim 0 (b) is 5, outside its range [1, 4]");
  EXPECT_EQ(bind({2, 3, 8}, {2, 1, 1, 4}),
            "dyn.kir: input \"m\" has shape [2,1,1,4]: dim 3 (s) is 4 but input \"x\" gives s = 3");
  EXPECT_EQ(bind({2, 3, 9}, {2, 1, 1, 3}), "dyn.kir: input \"x\" has shape [2,3,9] but the model fixes dim 2 at 8");
  EXPECT_EQ(bind({2, 3}, {2, 1, 1, 3}),
            "dyn.kir: input \"x\" has shape [2,3] but the model declares rank 3 (f32[b,s,8])");
  EXPECT_EQ(error_of([&] {
              bind_symbols(*g, {{"x", {2, 3, 8}}}, "dyn.kir");
            }),
            "dyn.kir: input \"m\" (f32[b,1,1,s]) is not given");
}

TEST(SymbolicDim, SymbolUnawareInferenceRefuses) {
  auto g = parse_graph(
      "graph @m(%x: f32[n,3]) -> (f32[n,3]) symbols(n in [1, 4]) {\n"
      "  %y = lp_normalization(%x) {axis=1, p=2} : f32[n,3] loc(\"c\")\n"
      "  return %y\n"
      "}\n",
      "m.kir");
  std::string e = error_of([&] { verify_graph(*g, op_registry()); });
  EXPECT_NE(e.find("with symbolic dims yet: operand 0 is f32[n,3] (dim 0 is n)"), std::string::npos) << e;
}

}  // namespace
}  // namespace kiln
