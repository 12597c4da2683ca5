// Depthwise conv and the pool/argmax kernels answer the fuser deciding only
// (codegen/core/deciding_only.h): inside a DecidingOnly scope their emitters
// return the launch they decided -- the same grid, block, symbols and grid
// expression as the kernel emitted in full -- without writing its text, and
// they still refuse what the full emitter refuses. (The CanEmit test compares
// the verdicts over the conformance models; this one checks that no text is
// rendered, which the verdicts alone cannot show.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/core/deciding_only.h"
#include "codegen/emitter_table.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

const char* kKernels =
    R"(graph @g(%x: f32[1,8,6,6], %w: f32[8,1,3,3], %s: f32[n,8,6,6], %big: f32[1,4,40,40], %l: f32[4,300]) -> (f32[1,8,6,6], f32[n,8,6,6], f32[1,8,6,6], f32[1,8,6,6], f32[n,8,6,6], f32[1,4,1,1], f32[1,8,1,1], f32[n,8,1,1], i64[4,1], i64[1,1,6,6], f32[4,300]) symbols(n in [1, 4]) {
  %dw = conv(%x, %w) {dilations=[1,1], group=8, pads=[1,1,1,1], strides=[1,1]} : f32[1,8,6,6]
  %dws = conv(%s, %w) {dilations=[1,1], group=8, pads=[1,1,1,1], strides=[1,1]} : f32[n,8,6,6]
  %dwr = fused(%x, %w) {kind="conv_epilogue"} : f32[1,8,6,6] {
    graph @fused_0(%x: f32[1,8,6,6], %w: f32[8,1,3,3]) -> (f32[1,8,6,6]) {
      %c = conv(%x, %w) {dilations=[1,1], group=8, pads=[1,1,1,1], strides=[1,1]} : f32[1,8,6,6]
      %dwr = relu(%c) : f32[1,8,6,6]
      return %dwr
    }
  }
  %p = fused(%x) {kind="reduction"} : f32[1,8,6,6] {
    graph @fused_1(%x: f32[1,8,6,6]) -> (f32[1,8,6,6]) {
      %r = relu(%x) : f32[1,8,6,6]
      %p = max_pool(%r) {dilations=[1,1], kernel_shape=[3,3], pads=[1,1,1,1], strides=[1,1]} : f32[1,8,6,6]
      return %p
    }
  }
  %ps = average_pool(%s) {dilations=[1,1], kernel_shape=[3,3], pads=[1,1,1,1], strides=[1,1]} : f32[n,8,6,6]
  %ga = global_average_pool(%big) : f32[1,4,1,1]
  %gx = global_max_pool(%x) : f32[1,8,1,1]
  %gs = global_average_pool(%s) : f32[n,8,1,1]
  %am = fused(%l) {kind="reduction"} : i64[4,1] {
    graph @fused_2(%l: f32[4,300]) -> (i64[4,1]) {
      %e = exp(%l) : f32[4,300]
      %am = argmax(%e) {axis=1, keepdims=1} : i64[4,1]
      return %am
    }
  }
  %ax = argmin(%x) {axis=1, keepdims=1, select_last_index=1} : i64[1,1,6,6]
  %h = hardmax(%l) {axis=1} : f32[4,300]
  return %dw, %dws, %dwr, %p, %ps, %ga, %gx, %gs, %am, %ax, %h
})";

TEST(DecidingOnly, DepthwiseConvAndPoolArgmaxReturnTheirLaunchWithoutText) {
  auto g = testing::parse(kKernels);
  int asked = 0;
  for (const auto& n : g->nodes()) {
    const codegen::KernelEmitter* e = codegen::emitter_for(*n);
    ASSERT_NE(e, nullptr) << n->describe();
    SCOPED_TRACE(n->describe() + " (" + e->name + ")");
    const std::vector<codegen::NodeKernel> full = e->emit(*n);
    std::vector<codegen::NodeKernel> decided;
    {
      codegen::DecidingOnly deciding;
      decided = e->emit(*n);
    }
    ASSERT_EQ(decided.size(), full.size());
    for (size_t i = 0; i < full.size(); ++i) {
      EXPECT_FALSE(full[i].source.empty());
      EXPECT_TRUE(decided[i].source.empty()) << "kernel " << i << " was rendered to answer a deciding-only question";
      EXPECT_EQ(decided[i].grid, full[i].grid);
      EXPECT_EQ(decided[i].block, full[i].block);
      EXPECT_EQ(decided[i].symbols, full[i].symbols);
      for (int a = 0; a < 3; ++a) EXPECT_TRUE(decided[i].grid_expr[a] == full[i].grid_expr[a]) << "grid axis " << a;
    }
    EXPECT_EQ(codegen::why_no_kernel(*n), "");
    ++asked;
  }
  EXPECT_EQ(asked, 11);
}

// What the full emitters refuse, the deciding-only ones refuse with the same
// message: a shape-generic depthwise conv's epilogue with a gather of one
// index along the symbolic batch (which a shape-generic epilogue does not
// take; refused while writing the store, which deciding now writes too).
const char* kRefusedKernels =
    R"(graph @r(%s: f32[n,8,6,6], %w: f32[8,1,3,3]) -> (f32[8,6,6]) symbols(n in [1, 4]) {
  %t = fused(%s, %w) {kind="conv_epilogue"} : f32[8,6,6] {
    graph @fused_0(%s: f32[n,8,6,6], %w: f32[8,1,3,3]) -> (f32[8,6,6]) {
      %c = conv(%s, %w) {dilations=[1,1], group=8, pads=[1,1,1,1], strides=[1,1]} : f32[n,8,6,6]
      %i = const i64[] splat<0>
      %t = gather(%c, %i) {axis=0} : f32[8,6,6]
      return %t
    }
  }
  return %t
})";

TEST(DecidingOnly, RefusesWhatTheFullEmitterRefuses) {
  auto g = testing::parse(kRefusedKernels);
  const Node& dw = *g->nodes().front();
  const std::string full = codegen::why_no_kernel_by_emitting(dw);
  EXPECT_NE(full.find("a shape-generic epilogue picks along static dims only (gather axis 0 is n)"), std::string::npos)
      << full;
  EXPECT_EQ(codegen::why_no_kernel(dw), full);
}

}  // namespace
}  // namespace kiln
