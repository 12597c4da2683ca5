// A layer norm after a matmul runs in the matmul's split-K reduction kernel
// (codegen/emitters/gemm_conv/emit_gemm_row_norm.h; docs/fusion.md, "A layer
// norm after a matmul"). Each case is compiled by the default pipeline for
// sm_90 (the fuser asks codegen, which weighs the split by the model) and:
// - the fused node it expects is there: one gemm_epilogue node holding the
//   layer norm, two kernels (the split GEMM and its reduction), or, where the
//   split does not pay or cannot be, the layer norm in a kernel of its own
//   with the fuser's note saying why;
// - the plan runs on the simulator and equals the reference backend on the
//   uncompiled graph, every output;
// - the kernels compile for sm_80 and sm_90.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "backends/compare.h"
#include "backends/plan_sim.h"
#include "backends/reference/executor.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "ir/parser.h"
#include "ops/registry.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

struct Compiled {
  std::unique_ptr<Graph> g;
  std::vector<std::string> notes;
};

Compiled compile_for(const std::string& text, const std::string& arch) {
  Compiled c;
  c.g = parse_graph(text, "row_norm.kir");
  CompileOptions o;
  o.pass.target = arch;
  const CompileReport report = compile_graph(*c.g, o);
  for (const PassRecord& r : report.passes)
    if (r.name == "fuse") c.notes.insert(c.notes.end(), r.stats.notes.begin(), r.stats.notes.end());
  return c;
}

// The fused node holding a layer norm, or null.
const Node* fused_with_layer_norm(const Graph& g) {
  for (const auto& n : g.nodes())
    if (n->op() == "fused" && n->body())
      for (const auto& b : n->body()->nodes())
        if (b->op() == "layer_normalization") return n.get();
  return nullptr;
}

// Runs `text`'s sm_90 plan on the simulator against the reference on the uncompiled graph.
void expect_sim_equals_reference(const Compiled& c, const std::string& text, const std::string& arch, Tolerance tol) {
  PlanBuildOptions po{arch, "fp32", {}};
  po.source_name = "row_norm.kir";
  const plan::Plan p = build_plan(*c.g, po);
  auto ref = parse_graph(text, "row_norm.kir");
  const auto feed = testing::random_inputs(*ref, 7);
  const std::vector<Tensor> want = ReferenceExecutor(*ref).run(feed);
  const std::vector<Tensor> got = run_plan_on_sim(p, *c.g, feed);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(compare_tensors(got[i], want[i], tol), "") << "output " << i;
}

// BERT's "dense + bias, cast, + residual, LayerNorm, cast" at M = 64, K =
// 1024: 4 tiles of 64 columns, far below a wave, so the GEMM splits.
std::string bert_block(const char* dt, int64_t n) {
  return fmt::format(
      "graph @m(%x: {0}[1,64,1024], %w: {0}[1024,{1}], %b: {0}[{1}], %r: f32[1,64,{1}], %s: f32[{1}], %t: f32[{1}]) "
      "-> (f32[1,64,{1}], {0}[1,64,{1}]) {{\n"
      "  %m = matmul(%x, %w) : {0}[1,64,{1}]\n"
      "  %a = add(%m, %b) : {0}[1,64,{1}]\n"
      "  %c = cast(%a) {{to=\"f32\"}} : f32[1,64,{1}]\n"
      "  %h = add(%c, %r) : f32[1,64,{1}]\n"
      "  %y = layer_normalization(%h, %s, %t) {{axis=-1, epsilon=1e-12}} : f32[1,64,{1}]\n"
      "  %z = cast(%y) {{to=\"{0}\"}} : {0}[1,64,{1}]\n"
      "  return %y, %z\n}}\n",
      dt, n);
}

TEST(GemmRowNorm, BertBlockIsOneFusedNodeOfTwoKernelsAndMatchesTheReferenceOnSim) {
  for (const char* dt : {"f16", "bf16"}) {
    for (int64_t n : {256, 200}) {  // 200: rows that are not a multiple of 8 (no 16-byte accesses)
      SCOPED_TRACE(fmt::format("{} N={}", dt, n));
      const std::string text = bert_block(dt, n);
      for (const std::string arch : {"sm_80", "sm_90"}) {
        Compiled c = compile_for(text, arch);
        const Node* f = fused_with_layer_norm(*c.g);
        ASSERT_NE(f, nullptr) << arch << ": the layer norm did not join the matmul";
        EXPECT_EQ(f->attrs().get_string("kind", ""), "gemm_epilogue");
        EXPECT_EQ(c.g->num_nodes(), 1u) << arch << ": one fused node for the whole block";
        PlanBuildOptions po{arch, "fp32", {}};
        const plan::Plan p = build_plan(*c.g, po);
        ASSERT_EQ(p.steps.size(), 2u) << arch << ": the split GEMM and its reduction, which normalizes";
        EXPECT_NE(p.kernels.at(p.steps[0].kernel).source.find(" split"), std::string::npos);
        EXPECT_NE(p.kernels.at(p.steps[1].kernel).source.find("split-K reduction of"), std::string::npos);
        EXPECT_NE(p.kernels.at(p.steps[1].kernel).source.find("layer_normalization"), std::string::npos);
        if (arch == "sm_90") expect_sim_equals_reference(c, text, arch, {2e-2, 1e-2});
      }
    }
  }
}

// GPT-2's residual stream: its projection is a gemm (C the bias) whose
// result is reshaped to [1, seq, d] and added to the stream; the sum before
// the norm is a result too (the next residual add reads it), written as the
// norm kernel reads it. The matmul form of the same block too.
TEST(GemmRowNorm, GemmWithCReshapeAndTheSumBeforeTheNormAsAResult) {
  const char* head =
      "graph @m(%x: f16[32,768], %w: f16[768,128], %b: f16[128], %r: f16[1,32,128], %s: f16[128], %t: f16[128]) "
      "-> (f16[1,32,128], f16[1,32,128]) {\n";
  const char* tail =
      "  %h = add(%v, %r) : f16[1,32,128]\n"
      "  %y = layer_normalization(%h, %s, %t) {axis=-1, epsilon=1e-5} : f16[1,32,128]\n"
      "  return %h, %y\n}\n";
  const std::string gemm = std::string(head) +
                           "  %g = gemm(%x, %w, %b) : f16[32,128]\n"
                           "  %v = reshape(%g) {shape=[1,32,128]} : f16[1,32,128]\n" +
                           tail;
  const std::string matmul = std::string(head) +
                             "  %m = matmul(%x, %w) : f16[32,128]\n"
                             "  %a = add(%m, %b) : f16[32,128]\n"
                             "  %v = reshape(%a) {shape=[1,32,128]} : f16[1,32,128]\n" +
                             tail;
  for (const std::string& text : {gemm, matmul}) {
    Compiled c = compile_for(text, "sm_90");
    const Node* f = fused_with_layer_norm(*c.g);
    ASSERT_NE(f, nullptr) << "the layer norm did not join the GEMM:\n" << text;
    EXPECT_EQ(f->num_outputs(), 2);
    EXPECT_EQ(c.g->num_nodes(), 1u);
    expect_sim_equals_reference(c, text, "sm_90", {2e-2, 1e-2});
  }
}

// Where the GEMM cannot split (K of 2 k-tiles) or runs on the SIMT core (f32
// without tf32), the layer norm stays a kernel of its own, and --stats says why.
TEST(GemmRowNorm, NoSplitNoFusionAndTheNoteSaysWhy) {
  // [1, 64, K] x [K, 256], then a layer norm of each row, in `dt`.
  auto matmul_norm = [](const char* dt, int64_t k) {
    return fmt::format(
        "graph @m(%x: {0}[1,64,{1}], %w: {0}[{1},256], %s: {0}[256], %t: {0}[256]) -> ({0}[1,64,256]) {{\n"
        "  %m = matmul(%x, %w) : {0}[1,64,256]\n"
        "  %y = layer_normalization(%m, %s, %t) {{axis=-1, epsilon=1e-5}} : {0}[1,64,256]\n"
        "  return %y\n}}\n",
        dt, k);
  };
  const std::string short_k = matmul_norm("f16", 64), simt = matmul_norm("f32", 1024);
  for (const auto& [text, reason] : {std::pair{short_k, "no split of this GEMM"}, std::pair{simt, "SIMT"}}) {
    Compiled c = compile_for(text, "sm_90");
    EXPECT_EQ(fused_with_layer_norm(*c.g), nullptr);
    bool noted = false;
    for (const std::string& note : c.notes)
      noted =
          noted || (note.find("(layer_normalization)") != std::string::npos && note.find(reason) != std::string::npos);
    EXPECT_TRUE(noted) << "no note naming the layer norm and '" << reason << "'";
    expect_sim_equals_reference(c, text, "sm_90", {1e-2, 1e-2});
  }
}

// A layout op after the norm is not an epilogue op of it: the fuser stops there.
TEST(GemmRowNorm, ATransposeAfterTheNormIsNotFused) {
  const std::string text =
      "graph @m(%x: f16[1,64,1024], %w: f16[1024,256], %s: f16[256], %t: f16[256]) -> (f16[1,256,64]) {\n"
      "  %m = matmul(%x, %w) : f16[1,64,256]\n"
      "  %y = layer_normalization(%m, %s, %t) {axis=-1, epsilon=1e-5} : f16[1,64,256]\n"
      "  %p = transpose(%y) {perm=[0,2,1]} : f16[1,256,64]\n"
      "  return %p\n}\n";
  Compiled c = compile_for(text, "sm_90");
  const Node* f = fused_with_layer_norm(*c.g);
  ASSERT_NE(f, nullptr);
  for (const auto& b : f->body()->nodes()) EXPECT_NE(b->op(), "transpose");
  expect_sim_equals_reference(c, text, "sm_90", {2e-2, 1e-2});
}

}  // namespace
}  // namespace kiln
