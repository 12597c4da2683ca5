// Fused reduction nodes whose anchor is a pool or argmax/argmin/hardmax
// (codegen/emitters/pool_select_loss/emit_fused_pool.h): the fuse pass builds them (prologue before the
// anchor, epilogue after it), the sim backend runs them through the anchor's
// emitter with the fused node's seams, and the result matches the reference;
// every kernel compiles with NVRTC for sm_80 and sm_90.
#include <gtest/gtest.h>

#include "codegen/emitters/pool_select_loss/emit_fused_pool.h"
#include "ir/error.h"
#include "ops/registry.h"
#include "passes/pass.h"
#include "tests/unit/codegen_graph_check.h"

namespace kiln {
namespace {

std::unique_ptr<Graph> fused(const std::string& text) {
  auto g = testing::parse(text);
  PassStats st;
  create_pass("fuse")->run(*g, PassOptions{}, st);
  return g;
}

// ResNet-50's tail (a cast to f32, the global average pool in nhwc, flatten,
// cast to f16), a max pool after add+relu, a global max pool whose prologue
// value is also a result (recorded on the read-once pass), argmax of a
// negated input (= argmin: ties and NaN as the reference) and hardmax of a
// scaled one.
constexpr const char* kGraph = R"(graph @m(%h: f16[2,7,7,40]{nhwc}, %x: f32[2,3,9,11], %b: f32[11], %v: f32[4,150],
    %w: f32[5,6], %z: f32[2,3,5,5]) -> (f16[2,40], f32[2,3,5,6], f32[2,3,1,1], f32[2,3,5,5], i64[4,1], f32[5,6]) {
  %hf = cast(%h) {to="f32"} : f32[2,7,7,40]{nhwc}
  %gp = global_average_pool(%hf) {layout="nhwc"} : f32[2,1,1,40]{nhwc}
  %fl = reshape(%gp) {shape=[2,40]} : f32[2,40]
  %fh = cast(%fl) {to="f16"} : f16[2,40]
  %xb = add(%x, %b) : f32[2,3,9,11]
  %xr = relu(%xb) : f32[2,3,9,11]
  %mp = max_pool(%xr) {ceil_mode=0, dilations=[1,1], kernel_shape=[3,3], pads=[1,1,1,1], strides=[2,2]} : f32[2,3,5,6]
  %zt = tanh(%z) : f32[2,3,5,5]
  %gm = global_max_pool(%zt) : f32[2,3,1,1]
  %vn = neg(%v) : f32[4,150]
  %am = argmax(%vn) {axis=1, keepdims=1} : i64[4,1]
  %k = const f32[] splat<0.5>
  %ws = mul(%w, %k) : f32[5,6]
  %hm = hardmax(%ws) {axis=1} : f32[5,6]
  return %fh, %mp, %gm, %zt, %am, %hm
})";

TEST(CodegenFusedPool, PoolAndArgmaxAnchorsRunThroughFusedSeams) {
  auto g = fused(kGraph);
  int anchors = 0;
  for (const auto& n : g->nodes())
    if (codegen::is_pool_select_fused(*n, op_registry())) ++anchors;
  EXPECT_EQ(anchors, 5) << print_graph(*g);
  testing::expect_kernels_compile({g.get()}, "codegen fused pool/argmax");
  testing::expect_sim_matches_reference(*g);
}

// A window pool reads overlapping windows: a prologue value that is also a
// result cannot be recorded, which is reported.
TEST(CodegenFusedPool, WindowPoolWithPrologueResultIsUnsupported) {
  auto g = fused(R"(graph @m(%x: f32[1,2,6,6]) -> (f32[1,2,3,3], f32[1,2,6,6]) {
  %r = relu(%x) : f32[1,2,6,6]
  %p = max_pool(%r) {ceil_mode=0, dilations=[1,1], kernel_shape=[2,2], pads=[0,0,0,0], strides=[2,2]} : f32[1,2,3,3]
  return %p, %r
})");
  int anchors = 0;
  for (const auto& n : g->nodes()) {
    if (!codegen::is_pool_select_fused(*n, op_registry())) continue;
    ++anchors;
    EXPECT_THROW(codegen::emit_pool_select_fused(*n, op_registry(), nullptr), Unsupported) << print_graph(*g);
  }
  EXPECT_EQ(anchors, 1) << print_graph(*g);
}

}  // namespace
}  // namespace kiln
