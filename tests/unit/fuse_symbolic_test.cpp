// The fuser on graphs with symbolic dims (passes/fuse_outline.h, ask_codegen):
// the dynamic-batch CNN and the BERT-style encoder of tests/cli's
// make_dynamic_models.py (the models cli_plan_profiles compiles with shape
// profiles, as imported) fuse into the same groups symbolic as specialised:
// fuse-then-specialise prints exactly as specialise-then-fuse at sizes across
// the symbols' ranges.
#include <gtest/gtest.h>

#include "codegen/emitter_table.h"
#include "ir/printer.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

const char* kCnn = R"(graph @cnn(%x: f32[batch,3,16,16]) -> (f32[batch,10]) symbols(batch in [1, 16]) {
  %w1 = const f32[8,3,3,3] splat<0.25>
  %b1 = const f32[8] splat<0.5>
  %w2 = const f32[16,8,3,3] splat<-0.125>
  %b2 = const f32[16] splat<0.25>
  %fc_w = const f32[10,16] splat<0.5>
  %fc_b = const f32[10] splat<-0.5>
  %c1 = conv(%x, %w1, %b1) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[1,1]} : f32[batch,8,16,16]
  %r1 = relu(%c1) : f32[batch,8,16,16]
  %p1 = max_pool(%r1) {ceil_mode=0, dilations=[1,1], kernel_shape=[2,2], pads=[0,0,0,0], storage_order=0, strides=[2,2]} : f32[batch,8,8,8]
  %c2 = conv(%p1, %w2, %b2) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[2,2]} : f32[batch,16,4,4]
  %r2 = relu(%c2) : f32[batch,16,4,4]
  %g = global_average_pool(%r2) : f32[batch,16,1,1]
  %f = reshape(%g) {shape=[batch,16]} : f32[batch,16]
  %logits = gemm(%f, %fc_w, %fc_b) {trans_b=1} : f32[batch,10]
  %probs = softmax(%logits) {axis=1} : f32[batch,10]
  return %probs
})";

// The encoder as the default pipeline hands it to the fuser (weights as splats).
const char* kEncoder =
    R"(graph @encoder(%input_ids: i64[batch,seq], %attention_mask: i64[batch,seq]) -> (f32[batch,seq,32]) symbols(batch in [1, 8], seq in [1, 64]) {
  %emb = const f32[50,32] splat<0.125>
  %ln1_s = const f32[32] splat<0.125>
  %ln1_b = const f32[32] splat<0.125>
  %wo = const f32[32,32] splat<0.125>
  %bo = const f32[32] splat<0.125>
  %ln2_s = const f32[32] splat<0.125>
  %ln2_b = const f32[32] splat<0.125>
  %w_ff1 = const f32[32,64] splat<0.125>
  %w_ff2 = const f32[64,32] splat<0.125>
  %neg = const f32[] splat<-10000.0>
  %onef = const f32[] splat<1.0>
  %wqkv = const f32[32,96] splat<0.125>
  %e = gather(%emb, %input_ids) {axis=0} : f32[batch,seq,32]
  %h = layer_normalization(%e, %ln1_s, %ln1_b) {axis=2, epsilon=1e-05} : f32[batch,seq,32]
  %qkv = matmul(%h, %wqkv) : f32[batch,seq,96]
  %q_p, %k_p, %v_p = split(%qkv) {axis=2, split=[32,32,32]} : f32[batch,seq,32], f32[batch,seq,32], f32[batch,seq,32]
  %q_r = reshape(%q_p) {shape=[batch,seq,4,8]} : f32[batch,seq,4,8]
  %q_t = transpose(%q_r) {perm=[0,2,1,3]} : f32[batch,4,seq,8]
  %k_r = reshape(%k_p) {shape=[batch,seq,4,8]} : f32[batch,seq,4,8]
  %v_r = reshape(%v_p) {shape=[batch,seq,4,8]} : f32[batch,seq,4,8]
  %v_t = transpose(%v_r) {perm=[0,2,1,3]} : f32[batch,4,seq,8]
  %mask_f = cast(%attention_mask) {to="f32"} : f32[batch,seq]
  %inv = sub(%onef, %mask_f) : f32[batch,seq]
  %bias_2d = mul(%inv, %neg) : f32[batch,seq]
  %bias_4d = reshape(%bias_2d) {shape=[batch,1,1,seq]} : f32[batch,1,1,seq]
  %k_t = transpose(%k_r) {perm=[0,2,1,3]} : f32[batch,4,seq,8]
  %ctx = attention(%q_t, %k_t, %v_t, %bias_4d) {causal=0, scale=0.35355338} : f32[batch,4,seq,8]
  %ctx_t = transpose(%ctx) {perm=[0,2,1,3]} : f32[batch,seq,4,8]
  %ctx_2d = reshape(%ctx_t) {shape=[batch*seq,32]} : f32[batch*seq,32]
  %o_2d = gemm(%ctx_2d, %wo, %bo) : f32[batch*seq,32]
  %o = reshape(%o_2d) {shape=[batch,seq,32]} : f32[batch,seq,32]
  %res1 = add(%o, %h) : f32[batch,seq,32]
  %h2 = layer_normalization(%res1, %ln2_s, %ln2_b) {axis=2, epsilon=1e-05} : f32[batch,seq,32]
  %f1 = matmul(%h2, %w_ff1) : f32[batch,seq,64]
  %gelu = gelu(%f1) {approximate="none"} : f32[batch,seq,64]
  %f2 = matmul(%gelu, %w_ff2) : f32[batch,seq,32]
  %hidden = add(%f2, %h2) : f32[batch,seq,32]
  return %hidden
})";

// The fuse pass with codegen's answer, as every kiln tool runs it.
int fuse(Graph& g) {
  PassOptions o;
  o.target = "sm_90";
  o.why_no_kernel = codegen::why_no_kernel;
  PassStats st;
  create_pass("fuse")->run(g, o, st);
  int fused = 0;
  for (const auto& n : g.nodes()) fused += n->op() == "fused";
  return fused;
}

void expect_same_groups(const char* text, const std::vector<SymbolBindings>& sizes, int expected_fused) {
  auto symbolic = testing::parse(text);
  EXPECT_EQ(fuse(*symbolic), expected_fused) << print_graph(*symbolic);
  for (const SymbolBindings& b : sizes) {
    std::string at;
    for (const auto& [name, v] : b) at += fmt::format(" {}={}", name, v);
    auto fixed = specialize_graph(*testing::parse(text), b, op_registry());
    fuse(*fixed);
    EXPECT_EQ(print_graph(*specialize_graph(*symbolic, b, op_registry())), print_graph(*fixed))
        << "fused symbolic then specialised (first) against specialised then fused, at" << at;
  }
}

// A GPU plan with profiles emits the symbolic node once, for every shape:
// the fuser asks codegen about that node as it is, not only specialised at
// the ends of the ranges. A pointwise chain over nine symbols gets no
// shape-generic kernel (at most eight symbols); at any fixed size it does, so
// asking at the ends alone formed the group (its kernel then failed to build).
TEST(FuseSymbolic, GpuProfileGroupIsAskedAsTheSymbolicKernel) {
  const char* text =
      R"(graph @nine(%x: f32[a,b,c,d,e,f,g,h,i]) -> (f32[a,b,c,d,e,f,g,h,i]) symbols(a in [1, 2], b in [1, 2], c in [1, 2], d in [1, 2], e in [1, 2], f in [1, 2], g in [1, 2], h in [1, 2], i in [1, 2]) {
  %n = neg(%x) : f32[a,b,c,d,e,f,g,h,i]
  %z = relu(%n) : f32[a,b,c,d,e,f,g,h,i]
  return %z
})";
  auto g = testing::parse(text);
  PassOptions o;
  o.target = "sm_90";
  o.why_no_kernel = codegen::why_no_kernel;
  o.why_not_shape_generic = codegen::why_not_shape_generic;
  PassStats st;
  create_pass("fuse")->run(*g, o, st);
  for (const auto& n : g->nodes()) EXPECT_NE(n->op(), "fused") << print_graph(*g);
  // Without the profile's GPU kernels (a CPU plan, specialised per shape) the group is formed.
  auto cpu = testing::parse(text);
  EXPECT_EQ(fuse(*cpu), 1) << print_graph(*cpu);
}

TEST(FuseSymbolic, DynamicBatchCnnFusesAsAtAnyFixedBatch) {
  // conv+relu twice, global pool+reshape.
  expect_same_groups(kCnn, {{{"batch", 1}}, {{"batch", 3}}, {{"batch", 16}}}, 3);
}

TEST(FuseSymbolic, EncoderFusesAsAtFixedShapes) {
  // layer norm, qkv matmul with its split and head transposes, the mask,
  // attention with the head merge, two gemm/matmul epilogues, the second layer norm...
  expect_same_groups(kEncoder, {{{"batch", 2}, {"seq", 5}}, {{"batch", 4}, {"seq", 33}}, {{"batch", 8}, {"seq", 64}}},
                     7);
}

}  // namespace
}  // namespace kiln
