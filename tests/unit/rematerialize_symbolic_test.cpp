// rematerialize-symbolic (passes/rematerialize_symbolic.cpp) keeps the
// graph's meaning on the reference backend at several shapes of a decoder's
// positions (a prefill, a chunk after a past, decode steps): each reader's
// copy of the positions and rotary cos/sin computes what the shared original
// did, the positions returned as a graph output stay; and a second run has
// nothing left to copy.
#include <gtest/gtest.h>

#include "backends/compare.h"
#include "backends/reference/executor.h"
#include "ir/parser.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "passes/pass.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

const char* kRotary =
    "graph @m(%q: f32[1,2,seq,8], %k: f32[1,1,seq,8], %pk: f32[1,1,past,8])"
    " -> (f32[1,2,seq,8], f32[1,1,seq,8], i64[seq,1]) symbols(seq in [1, 16], past in [0, 40]) {\n"
    "  %zero = const i64[] splat<0>\n"
    "  %one = const i64[] splat<1>\n"
    "  %n = const i64[] splat<seq>\n"
    "  %past = const i64[] splat<past>\n"
    "  %r = range(%zero, %n, %one) : i64[seq]\n"
    "  %pos = add(%r, %past) : i64[seq]\n"
    "  %pos2 = reshape(%pos) {shape=[seq,1]} : i64[seq,1]\n"
    "  %posf = cast(%pos2) {to=\"f32\"} : f32[seq,1]\n"
    "  %invf = const f32[1,4] dense<[1.0, 0.1, 0.01, 0.001]>\n"
    "  %ang = mul(%posf, %invf) : f32[seq,4]\n"
    "  %ang2 = concat(%ang, %ang) {axis=1} : f32[seq,8]\n"
    "  %cos = cos(%ang2) : f32[seq,8]\n"
    "  %sin = sin(%ang2) : f32[seq,8]\n"
    "  %qc = mul(%q, %cos) : f32[1,2,seq,8]\n"
    "  %qs = mul(%q, %sin) : f32[1,2,seq,8]\n"
    "  %qr = add(%qc, %qs) : f32[1,2,seq,8]\n"
    "  %kc = mul(%k, %cos) : f32[1,1,seq,8]\n"
    "  %ks = mul(%k, %sin) : f32[1,1,seq,8]\n"
    "  %kr = sub(%kc, %ks) : f32[1,1,seq,8]\n"
    "  return %qr, %kr, %pos2\n"
    "}\n";

TEST(RematerializeSymbolic, EachReadersCopyComputesTheSharedValueAtSeveralShapes) {
  std::unique_ptr<Graph> g = parse_graph(kRotary, "m.kir");
  std::unique_ptr<Graph> after = g->clone();
  PassStats stats;
  ASSERT_TRUE(create_pass("rematerialize-symbolic")->run(*after, PassOptions{}, stats));
  // Four readers of cos or sin (qc, qs, kc, ks), each with its own 7 nodes.
  EXPECT_EQ(stats.counters["nodes-copied"], 28);
  int cos_nodes = 0;
  for (const auto& n : after->nodes()) cos_nodes += n->op() == "cos";
  EXPECT_EQ(cos_nodes, 2) << "qc and kc each read a cos of their own";
  // The positions are returned: their original stays, bound by name.
  EXPECT_EQ(after->outputs()[2]->name(), "pos2");
  EXPECT_EQ(after->outputs()[2]->producer()->op(), "reshape");
  for (auto [seq, past] : {std::pair<int64_t, int64_t>{8, 0}, {5, 0}, {3, 9}, {1, 8}, {1, 17}, {16, 40}}) {
    SymbolBindings b{{"seq", seq}, {"past", past}};
    std::unique_ptr<Graph> want_g = specialize_graph(*g, b, op_registry());
    std::unique_ptr<Graph> got_g = specialize_graph(*after, b, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*want_g, static_cast<uint64_t>(seq * 64 + past));
    std::vector<Tensor> want = ReferenceExecutor(*want_g).run(feed);
    std::vector<Tensor> got = ReferenceExecutor(*got_g).run(feed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(compare_tensors(got[i], want[i], {0, 0}), "") << "seq " << seq << " past " << past << " output " << i;
  }
  // Every reader has its own copy now: nothing left to copy.
  PassStats again;
  EXPECT_FALSE(create_pass("rematerialize-symbolic")->run(*after, PassOptions{}, again));
}

}  // namespace
}  // namespace kiln
