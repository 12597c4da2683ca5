// The fuse pass: fused graphs compute what the originals did (on the
// reference backend, which runs fused nodes through their bodies), stay
// valid and acyclic, keep every op exactly once, and group what the rules
// say. Random DAGs mixing fusable and unfusable ops check convexity: a group
// that a path leaves and re-enters could not be ordered, and the verifier
// (or the pass's own reordering) would fail.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

using testing::expect_pass_keeps_meaning;
using testing::parse;

// op name -> how many times it appears, bodies included.
std::map<std::string, int> op_counts(const Graph& g, bool into_bodies = true) {
  std::map<std::string, int> c;
  for (const auto& n : g.nodes()) {
    if (n->body() && into_bodies) {
      for (auto& [op, k] : op_counts(*n->body())) c[op] += k;
    } else {
      ++c[n->op()];
    }
  }
  return c;
}

std::vector<const Node*> fused_nodes(const Graph& g) {
  std::vector<const Node*> r;
  for (const auto& n : g.nodes())
    if (n->op() == "fused") r.push_back(n.get());
  return r;
}

std::string kind(const Node* n) { return n->attrs().get_string("kind", ""); }

// Runs fuse with the meaning check and the verifier; returns the fused graph.
std::unique_ptr<Graph> fuse(const std::string& text) {
  auto g = parse(text);
  verify_graph(*g, op_registry());
  auto after = expect_pass_keeps_meaning(*g, {"fuse"});
  EXPECT_NO_THROW(verify_graph(*after, op_registry())) << print_graph(*after);
  auto before = op_counts(*g);
  auto now = op_counts(*after);
  now.erase("fused");
  EXPECT_EQ(now, before) << "every op must survive exactly once\n" << print_graph(*after);
  return after;
}

TEST(Fuse, PointwiseChainWithEscapingValue) {
  auto g = fuse(R"(graph @m(%a: f32[2,3], %b: f32[2,3]) -> (f32[2,3], f32[2,3]) {
    %0 = add(%a, %b) : f32[2,3]
    %1 = tanh(%0) : f32[2,3]
    %2 = mul(%1, %0) : f32[2,3]
    %3 = cumsum(%0) {axis=1} : f32[2,3]
    return %2, %3
  })");
  auto f = fused_nodes(*g);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(kind(f[0]), "pointwise");
  EXPECT_EQ(f[0]->num_outputs(), 2);  // %0 for the cumsum, %2 for the graph
}

TEST(Fuse, ConvResidualBlock) {
  auto g = fuse(
      R"(graph @m(%x: f32[1,4,6,6], %w: f32[4,4,3,3], %b: f32[4], %w2: f32[4,4,1,1], %w3: f32[4,4,1,1]) -> (f32[1,4,6,6]) {
    %c = conv(%x, %w, %b) {dilations=[1,1], pads=[1,1,1,1], strides=[1,1]} : f32[1,4,6,6]
    %r = relu(%c) : f32[1,4,6,6]
    %c2 = conv(%r, %w2) {dilations=[1,1], pads=[0,0,0,0], strides=[1,1]} : f32[1,4,6,6]
    %d = conv(%x, %w3) {dilations=[1,1], pads=[0,0,0,0], strides=[1,1]} : f32[1,4,6,6]
    %s = add(%c2, %d) : f32[1,4,6,6]
    %o = relu(%s) : f32[1,4,6,6]
    return %o
  })");
  auto f = fused_nodes(*g);
  ASSERT_EQ(f.size(), 2u);
  for (auto* n : f) EXPECT_EQ(kind(n), "conv_epilogue");
  // conv+relu, conv+add+relu (the downsample conv %d stays alone).
  EXPECT_EQ(op_counts(*g, false)["conv"], 1);
}

// With codegen asked about every final group, the body it was asked about is
// the body outlined, not a copy built again (a 100k-node chain's body is
// built once). The answer here accepts everything and marks the body it saw.
// The second group reads the first group's result, which is gone by the time
// the second is outlined: its operand must be the first fused node's result.
TEST(Fuse, OutlinesTheBodiesCodegenWasAskedAbout) {
  auto g = parse(R"(graph @m(%a: f32[2,3], %b: f32[2,3]) -> (f32[2,3]) {
    %0 = add(%a, %b) : f32[2,3]
    %r = tanh(%0) : f32[2,3]
    %q = cumsum(%r) {axis=1} : f32[2,3]
    %s = mul(%r, %q) : f32[2,3]
    %o = sigmoid(%s) : f32[2,3]
    return %o
  })");
  PassOptions opts;
  opts.why_no_kernel = [](const Node& f) {
    f.body()->node_list()[0]->attrs().set("asked", int64_t{1});
    return std::string();
  };
  auto after = expect_pass_keeps_meaning(*g, {"fuse"}, opts);
  auto f = fused_nodes(*after);
  ASSERT_EQ(f.size(), 2u);
  for (const Node* n : f) {
    Node* first = n->body()->node_list()[0];
    EXPECT_TRUE(first->attrs().has("asked")) << n->describe() << ": a body built again after codegen was asked";
    first->attrs().erase("asked");
  }
  EXPECT_NO_THROW(verify_graph(*after, op_registry())) << print_graph(*after);
  EXPECT_EQ(f[1]->input(0), f[0]->output(0)) << print_graph(*after);
}

TEST(Fuse, GemmEpilogueWithHeadSplitAndSplit) {
  auto g = fuse(R"(graph @m(%x: f32[1,4,6], %w: f32[6,12], %b: f32[12]) -> (f32[1,2,4,3], f32[1,4,6]) {
    %c = const f32[] splat<0.125>
    %m = matmul(%x, %w) : f32[1,4,12]
    %a = add(%m, %b) : f32[1,4,12]
    %q, %k = split(%a) {axis=2, split=[6,6]} : f32[1,4,6], f32[1,4,6]
    %r = reshape(%q) {shape=[1,4,2,3]} : f32[1,4,2,3]
    %t = transpose(%r) {perm=[0,2,1,3]} : f32[1,2,4,3]
    %s = mul(%t, %c) : f32[1,2,4,3]
    %kk = sigmoid(%k) : f32[1,4,6]
    return %s, %kk
  })");
  auto f = fused_nodes(*g);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(kind(f[0]), "gemm_epilogue");
  EXPECT_EQ(f[0]->num_outputs(), 2);
  // The scalar constant moved into the body, the weight is an operand.
  EXPECT_EQ(f[0]->body()->constants().size(), 1u);
  EXPECT_TRUE(g->constants().empty());
}

TEST(Fuse, ReductionPrologueAndEpilogue) {
  auto g = fuse(R"(graph @m(%a: f32[3,8], %b: f32[3,8], %g: f32[8], %be: f32[8], %w: f32[8,8]) -> (f32[3,8]) {
    %r = add(%a, %b) : f32[3,8]
    %n = layer_normalization(%r, %g, %be) {axis=-1, epsilon=1e-05} : f32[3,8]
    %h = mul(%n, %a) : f32[3,8]
    %m = matmul(%h, %w) : f32[3,8]
    %o = add(%m, %r) : f32[3,8]
    return %o
  })");
  auto f = fused_nodes(*g);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(kind(f[0]), "reduction");
  EXPECT_EQ(f[0]->num_outputs(), 2);  // the residual sum and the normalized value
  EXPECT_EQ(kind(f[1]), "gemm_epilogue");
}

TEST(Fuse, HalfPrecisionResidualStream) {
  auto g =
      fuse(R"(graph @m(%x: f16[2,8], %w: f16[8,8], %res: f16[2,8], %g: f32[8], %b: f32[8]) -> (f16[2,8], f16[2,8]) {
    %m = matmul(%x, %w) : f16[2,8]
    %r = add(%m, %res) : f16[2,8]
    %c = cast(%r) {to="f32"} : f32[2,8]
    %n = layer_normalization(%c, %g, %b) {axis=-1, epsilon=1e-05} : f32[2,8]
    %y = cast(%n) {to="f16"} : f16[2,8]
    return %y, %r
  })");
  auto f = fused_nodes(*g);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(kind(f[0]), "gemm_epilogue");
  EXPECT_EQ(f[0]->num_outputs(), 1);  // only the f16 sum, no f32 copy
  EXPECT_EQ(kind(f[1]), "reduction");
}

TEST(Fuse, AttentionWithMaskAndHeadMerge) {
  auto g = fuse(R"(graph @m(%q: f32[1,2,5,4], %k: f32[1,2,4,5], %v: f32[1,2,5,4], %mask: f32[1,1,5,5]) -> (f32[1,5,8]) {
    %c = const f32[] splat<0.5>
    %s = matmul(%q, %k) : f32[1,2,5,5]
    %sc = mul(%s, %c) : f32[1,2,5,5]
    %sm = add(%sc, %mask) : f32[1,2,5,5]
    %p = softmax(%sm) {axis=3} : f32[1,2,5,5]
    %nan = isnan(%p) : bool[1,2,5,5]
    %z = const f32[] splat<0.0>
    %pp = where(%nan, %z, %p) : f32[1,2,5,5]
    %o = matmul(%pp, %v) : f32[1,2,5,4]
    %t = transpose(%o) {perm=[0,2,1,3]} : f32[1,5,2,4]
    %y = reshape(%t) {shape=[1,5,8]} : f32[1,5,8]
    return %y
  })");
  auto f = fused_nodes(*g);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(kind(f[0]), "attention");
  EXPECT_EQ(f[0]->num_inputs(), 4);
}

TEST(Fuse, AttentionOpEpilogue) {
  auto g = fuse(
      R"(graph @m(%q: f32[1,2,4,3], %k: f32[1,2,5,3], %v: f32[1,2,5,3], %mask: f32[1,1,1,5], %x: f32[1,4,6]) -> (f32[1,4,6]) {
    %o = attention(%q, %k, %v, %mask) {causal=0, scale=0.5} : f32[1,2,4,3]
    %t = transpose(%o) {perm=[0,2,1,3]} : f32[1,4,2,3]
    %r = reshape(%t) {shape=[1,4,6]} : f32[1,4,6]
    %y = add(%r, %x) : f32[1,4,6]
    return %y
  })");
  auto f = fused_nodes(*g);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(kind(f[0]), "attention");
  EXPECT_EQ(f[0]->num_inputs(), 5);
}

TEST(Fuse, InjectiveOpsJoinPointwiseKernels) {
  auto g = fuse(R"(graph @m(%ids: i64[2,3], %pos: f32[3,4], %x: f32[4,3,2]) -> (f32[2,3,4], f32[2,3,4]) {
    %table = const f32[5,4] splat<0.25>
    %e = gather(%table, %ids) {axis=0} : f32[2,3,4]
    %p = expand(%pos) {shape=[2,3,4]} : f32[2,3,4]
    %y = add(%e, %p) : f32[2,3,4]
    %t = transpose(%x) {perm=[2,1,0]} : f32[2,3,4]
    %z = mul(%t, %y) : f32[2,3,4]
    return %y, %z
  })");
  auto f = fused_nodes(*g);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(kind(f[0]), "pointwise");
  EXPECT_EQ(f[0]->num_outputs(), 2);
}

TEST(Fuse, NothingToDoReturnsUnchanged) {
  auto g = parse(R"(graph @m(%x: f32[12]) -> (f32[3], i64[3]) {
    %r = reshape(%x) {shape=[3,4]} : f32[3,4]
    %r2 = reshape(%r) {shape=[12]} : f32[12]
    %v, %i = topk(%r2) {axis=0, k=3, largest=1, sorted=1} : f32[3], i64[3]
    %n = neg(%v) : f32[3]
    return %n, %i
  })");
  std::string before = print_graph(*g);
  PassStats st;
  EXPECT_FALSE(create_pass("fuse")->run(*g, {}, st));
  EXPECT_EQ(print_graph(*g), before);
}

TEST(Fuse, FusedNodesAreNotFusedAgain) {
  auto g = parse(R"(graph @m(%a: f32[4], %b: f32[4]) -> (f32[4]) {
    %0 = add(%a, %b) : f32[4]
    %1 = relu(%0) : f32[4]
    return %1
  })");
  PassStats st;
  EXPECT_TRUE(create_pass("fuse")->run(*g, {}, st));
  std::string once = print_graph(*g);
  EXPECT_FALSE(create_pass("fuse")->run(*g, {}, st));
  EXPECT_EQ(print_graph(*g), once);
}

// Random DAGs over f32[2,3] (and f32[2,1] after a reduce_sum or split) mixing
// pointwise ops, reductions, matmuls, layout round trips, split/concat,
// one-index gathers and unfusable cumsums, with random extra graph outputs so
// values escape groups.
std::string random_graph(std::mt19937& rng, int nodes) {
  struct V {
    std::string name;
    bool narrow;  // f32[2,1]
  };
  std::vector<V> vals = {{"x", false}, {"y", false}, {"n", true}};
  std::string body;
  auto pick = [&](bool wide_only) {
    for (;;) {
      // Prefer recent values so chains form.
      size_t lo = vals.size() > 4 ? vals.size() - 4 : 0;
      size_t i = std::uniform_int_distribution<size_t>(0, 3)(rng) == 0
                     ? std::uniform_int_distribution<size_t>(0, vals.size() - 1)(rng)
                     : std::uniform_int_distribution<size_t>(lo, vals.size() - 1)(rng);
      if (!wide_only || !vals[i].narrow) return vals[i];
    }
  };
  auto ty = [](bool narrow) { return narrow ? "f32[2,1]" : "f32[2,3]"; };
  for (int i = 0; i < nodes; ++i) {
    std::string out = "v" + std::to_string(i);
    int what = std::uniform_int_distribution<int>(0, 12)(rng);
    bool narrow = false;
    std::string line;
    if (what <= 2) {
      static const char* un[] = {"tanh", "sigmoid", "neg", "relu", "abs"};
      V a = pick(false);
      narrow = a.narrow;
      line = fmt::format("{}(%{})", un[std::uniform_int_distribution<int>(0, 4)(rng)], a.name);
    } else if (what <= 5) {
      static const char* bin[] = {"add", "mul", "sub", "max"};
      V a = pick(false), b = pick(false);
      narrow = a.narrow && b.narrow;
      line = fmt::format("{}(%{}, %{})", bin[std::uniform_int_distribution<int>(0, 3)(rng)], a.name, b.name);
    } else if (what == 6) {
      line = fmt::format("cumsum(%{}) {{axis=1}}", pick(true).name);
    } else if (what == 7) {
      V a = pick(true);
      if (std::uniform_int_distribution<int>(0, 1)(rng)) {
        line = fmt::format("softmax(%{}) {{axis=1}}", a.name);
      } else {
        line = fmt::format("reduce_sum(%{}) {{axes=[1], keepdims=1}}", a.name);
        narrow = true;
      }
    } else if (what == 8) {
      line = fmt::format("matmul(%{}, %w)", pick(true).name);
    } else if (what == 9) {
      line = fmt::format("layer_normalization(%{}, %g, %b) {{axis=1, epsilon=1e-05}}", pick(true).name);
    } else if (what == 10) {  // a layout round trip: transpose (or reshape) and back
      bool tr = std::uniform_int_distribution<int>(0, 1)(rng);
      body += fmt::format("  %{}t = {}(%{}) {} : f32[3,2]\n", out, tr ? "transpose" : "reshape", pick(true).name,
                          tr ? "{perm=[1,0]}" : "{shape=[3,2]}");
      line = fmt::format("{}(%{}t) {}", tr ? "transpose" : "reshape", out, tr ? "{perm=[1,0]}" : "{shape=[2,3]}");
    } else if (what == 11) {  // split, keep the narrow part too, concat back
      body += fmt::format("  %{}a, %{}b = split(%{}) {{axis=1, split=[1,2]}} : f32[2,1], f32[2,2]\n", out, out,
                          pick(true).name);
      vals.push_back({out + "a", true});
      line = fmt::format("concat(%{}a, %{}b) {{axis=1}}", out, out);
    } else {  // gather one column (a window), broadcast back by an add
      body += fmt::format("  %{}g = gather(%{}, %one) {{axis=1}} : f32[2]\n", out, pick(true).name);
      body += fmt::format("  %{}r = reshape(%{}g) {{shape=[2,1]}} : f32[2,1]\n", out, out);
      line = fmt::format("add(%{}r, %{})", out, pick(true).name);
    }
    body += fmt::format("  %{} = {} : {}\n", out, line, ty(narrow));
    vals.push_back({out, narrow});
  }
  // Outputs: the last value plus a few random others.
  std::vector<V> outs = {vals.back()};
  for (size_t i = 3; i + 1 < vals.size(); ++i)
    if (std::uniform_int_distribution<int>(0, 5)(rng) == 0) outs.push_back(vals[i]);
  std::string names, types;
  for (size_t i = 0; i < outs.size(); ++i) {
    names += (i ? ", %" : "%") + outs[i].name;
    types += std::string(i ? ", " : "") + ty(outs[i].narrow);
  }
  return fmt::format(
      "graph @r(%x: f32[2,3], %y: f32[2,3], %n: f32[2,1], %w: f32[3,3], %g: f32[3], %b: f32[3]) -> ({}) {{\n"
      "  %one = const i64[] splat<1>\n{}  "
      "return {}\n}}\n",
      types, body, names);
}

TEST(Fuse, RandomGraphsStayConvexAndKeepMeaning) {
  std::mt19937 rng(20240607);
  int fused_total = 0;
  for (int t = 0; t < 300; ++t) {
    std::string text = random_graph(rng, 6 + t % 14);
    SCOPED_TRACE(text);
    auto g = fuse(text);
    fused_total += static_cast<int>(fused_nodes(*g).size());
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(fused_total, 300);  // the generator does produce fusable chains
}

}  // namespace
}  // namespace kiln
