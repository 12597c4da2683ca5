// linear_attention (ops/linear_attention_op.cpp) and its kernel
// (codegen/emitters/attention/emit_linear_attention.h): the reference against
// a hand-worked recurrence, then the kernel against the reference on the
// simulator for every update rule, grouped query heads (GQA and one kv head),
// per-head and per-key-dim decay, beta per head and shared, a past state (of
// its own dtype), one step, f16, a d_k that shrinks the block below 128
// threads, and more state columns than one block; every kernel compiles with
// NVRTC for sm_80 and sm_90 without spills. Inference rejects what ONNX's
// reference rejects (decay or beta that the rule does not take, heads that
// do not divide).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "backends/reference/executor.h"
#include "ir/error.h"
#include "ops/registry.h"
#include "tests/unit/codegen_graph_check.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

struct Case {
  std::string rule;
  DType t;
  int64_t B, T, Hq, Hkv, dk, dv;
  bool past;
  int64_t decay_w;  // dk, 1 (per head) or 0 (none)
  int64_t beta_h;   // Hkv, 1 or 0 (none)
  DType state = DType::F32;
};

std::string graph_text(const Case& c, const std::string& name) {
  const std::string t(dtype_name(c.t)), s(dtype_name(c.past ? c.state : c.t));
  std::string ins = fmt::format("%q: {0}[{1},{2},{3}], %k: {0}[{1},{2},{4}], %v: {0}[{1},{2},{5}]", t, c.B, c.T,
                                c.Hq * c.dk, c.Hkv * c.dk, c.Hkv * c.dv);
  std::string ops = "%q, %k, %v";
  if (c.past) ins += fmt::format(", %p: {}[{},{},{},{}]", s, c.B, c.Hkv, c.dk, c.dv);
  if (c.past || c.decay_w || c.beta_h) ops += c.past ? ", %p" : ", _";
  if (c.decay_w) ins += fmt::format(", %g: {}[{},{},{}]", t, c.B, c.T, c.Hkv * c.decay_w);
  if (c.decay_w || c.beta_h) ops += c.decay_w ? ", %g" : ", _";
  if (c.beta_h) {
    ins += fmt::format(", %b: {}[{},{},{}]", t, c.B, c.T, c.beta_h);
    ops += ", %b";
  }
  return fmt::format(
      "graph @{0}({1}) -> ({2}[{3},{4},{5}], {6}[{3},{7},{8},{9}]) {{\n"
      "  %o, %st = linear_attention({10}) {{update_rule=\"{11}\", q_num_heads={12}, kv_num_heads={13}, "
      "scale=0.3}} : {2}[{3},{4},{5}], {6}[{3},{7},{8},{9}]\n"
      "  return %o, %st\n}}\n",
      name, ins, t, c.B, c.T, c.Hq * c.dv, s, c.Hkv, c.dk, c.dv, ops, c.rule, c.Hq, c.Hkv);
}

// The decay inputs random_inputs gives lie in [-2, 2]: exp of them would grow
// the state e^2 per step; ONNX's decay is a log gate <= 0, so shift it there.
std::map<std::string, Tensor> inputs_for(const Graph& g, uint64_t seed) {
  auto feed = testing::random_inputs(g, seed);
  if (auto it = feed.find("g"); it != feed.end())
    for (int64_t i = 0; i < it->second.numel(); ++i) it->second.set_double(i, it->second.get_double(i) / 4 - 0.5);
  return feed;
}

TEST(LinearAttention, ReferenceFollowsTheRecurrenceByHand) {
  // B=1, T=2, one head, dk=dv=1: S0 = 0.5 (past), decay g, beta b.
  //   t0: S = 0.5 e^g0; x = b0 (v0 - S k0); S += k0 x; o0 = 0.3 q0 S
  //   t1: likewise with index 1.
  auto g = testing::parse(graph_text({"gated_delta", DType::F32, 1, 2, 1, 1, 1, 1, true, 1, 1}, "hand"));
  std::map<std::string, Tensor> feed;
  auto f = [](std::vector<float> v, Shape s) { return Tensor::from(DType::F32, s, v); };
  feed["q"] = f({2.0f, -1.0f}, {1, 2, 1});
  feed["k"] = f({0.5f, 1.5f}, {1, 2, 1});
  feed["v"] = f({1.0f, 3.0f}, {1, 2, 1});
  feed["p"] = f({0.5f}, {1, 1, 1, 1});
  feed["g"] = f({-0.1f, -0.7f}, {1, 2, 1});
  feed["b"] = f({0.8f, 0.25f}, {1, 2, 1});
  double S = 0.5, o[2];
  const double q[] = {2, -1}, k[] = {0.5, 1.5}, v[] = {1, 3}, gd[] = {-0.1, -0.7}, b[] = {0.8, 0.25};
  for (int t = 0; t < 2; ++t) {
    S *= std::exp(gd[t]);
    const double x = b[t] * (v[t] - S * k[t]);
    S += k[t] * x;
    o[t] = 0.3 * q[t] * S;
  }
  std::vector<Tensor> r = ReferenceExecutor(*g).run(feed);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_NEAR(r[0].get_double(0), o[0], 1e-6);
  EXPECT_NEAR(r[0].get_double(1), o[1], 1e-6);
  EXPECT_NEAR(r[1].get_double(0), S, 1e-6);
}

TEST(LinearAttention, KernelMatchesReferenceOnSimForEveryRuleAndLayout) {
  const std::vector<Case> cases = {
      {"linear", DType::F32, 2, 5, 3, 3, 4, 5, false, 0, 0},
      {"gated", DType::F32, 2, 4, 2, 2, 6, 3, true, 6, 0},                    // per key dim decay, past state
      {"gated", DType::F32, 1, 3, 4, 2, 4, 4, false, 1, 0},                   // per-head decay, GQA
      {"delta", DType::F32, 2, 4, 2, 2, 5, 4, false, 0, 2},                   // beta per head
      {"gated_delta", DType::F32, 2, 6, 4, 2, 8, 8, true, 8, 1},              // GQA, beta shared
      {"gated_delta", DType::F32, 1, 3, 6, 1, 4, 3, false, 1, 1},             // one kv head (MQA)
      {"gated_delta", DType::F32, 2, 1, 2, 2, 4, 4, true, 4, 2},              // one decode step
      {"gated_delta", DType::F16, 2, 4, 4, 2, 8, 8, false, 8, 2},             // f16
      {"gated_delta", DType::F16, 1, 3, 2, 2, 4, 4, true, 4, 2, DType::F32},  // f16 with an f32 state
      {"linear", DType::F32, 1, 3, 1, 1, 200, 3, false, 0, 0},                // d_k 200: blocks of 32 threads
      {"delta", DType::F32, 3, 2, 2, 2, 3, 100, true, 0, 2},                  // 600 state columns: several blocks
  };
  std::vector<std::unique_ptr<Graph>> graphs;
  std::vector<const Graph*> ptrs;
  for (size_t i = 0; i < cases.size(); ++i) {
    graphs.push_back(testing::parse(graph_text(cases[i], fmt::format("case{}", i))));
    ptrs.push_back(graphs.back().get());
  }
  EXPECT_GT(testing::expect_kernels_compile(ptrs, "linear_attention"), 10u);
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(fmt::format("case {} ({} {})", i, cases[i].rule, dtype_name(cases[i].t)));
    const Graph& g = *graphs[i];
    auto feed = inputs_for(g, 11 + i);
    std::vector<Tensor> want = ReferenceExecutor(g).run(feed);
    std::vector<Tensor> got = codegen::SimExecutor(g).run(feed);
    ASSERT_EQ(got.size(), 2u);
    for (size_t r = 0; r < 2; ++r) {
      const bool half = got[r].dtype() == DType::F16;
      EXPECT_EQ(compare_tensors(got[r], want[r], half ? Tolerance{1e-3, 2e-3} : Tolerance{1e-5, 1e-4}), "")
          << "result " << r;
    }
  }
}

// Inference with operands of these types (nullopt: absent) and these attributes.
void infer(const std::vector<std::optional<TensorType>>& ops, const std::string& rule, int64_t hq, int64_t hkv) {
  Graph g;
  std::vector<Value*> vals;
  for (size_t i = 0; i < ops.size(); ++i)
    vals.push_back(ops[i] ? g.add_input(fmt::format("in{}", i), *ops[i]) : nullptr);
  AttrMap a;
  a.set("update_rule", rule);
  a.set("q_num_heads", hq);
  a.set("kv_num_heads", hkv);
  a.set("scale", 1.0f);
  InferContext ic("linear_attention", vals, a, 2, "node");
  infer_types(op_registry().get("linear_attention"), ic);
}

TEST(LinearAttention, InferenceRejectsWhatOnnxRejects) {
  const TensorType x(DType::F32, {1, 2, 4});
  EXPECT_NO_THROW(infer({x, x, x}, "linear", 1, 1));
  EXPECT_NO_THROW(infer({x, x, x, std::nullopt, x, TensorType(DType::F32, {1, 2, 1})}, "gated_delta", 1, 1));
  EXPECT_THROW(infer({x, x, x}, "gated", 1, 1), Error);                                         // decay missing
  EXPECT_THROW(infer({x, x, x, std::nullopt, std::nullopt, x}, "linear", 1, 1), Error);         // beta not taken
  EXPECT_THROW(infer({x, x, x}, "retention", 1, 1), Error);                                     // unknown rule
  EXPECT_THROW(infer({x, x, x}, "linear", 3, 2), Error);                                        // 3 heads on 2
  EXPECT_THROW(infer({x, x, x, TensorType(DType::F32, {1, 1, 4, 3})}, "linear", 1, 1), Error);  // past_state dims
  EXPECT_THROW(infer({x, x, x, std::nullopt, TensorType(DType::F32, {1, 2, 3})}, "gated", 1, 1), Error);  // decay
  EXPECT_THROW(infer({x, TensorType(DType::F16, {1, 2, 4}), x}, "linear", 1, 1), Error);  // mixed dtypes
}

}  // namespace
}  // namespace kiln
