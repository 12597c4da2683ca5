// The conv's implicit GEMM indexes rows, columns and the reduction with
// 32-bit ints (codegen/emitters/gemm_conv/emit_conv.cpp): a conv whose
// extent would not fit one, at its largest shape, is refused naming the node
// and the product -- in a static plan from its shapes, in a plan with shape
// profiles at the profile's max. Compile-only: nothing of these sizes is
// allocated.
#include <gtest/gtest.h>

#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "ir/error.h"
#include "ir/parser.h"

namespace kiln {
namespace {

std::string refusal(const std::string& text, const std::vector<plan::Profile>& profiles = {}) {
  auto g = parse_graph(text, "big.kir");
  CompileOptions o;
  o.pass.target = "sm_90";
  o.symbolic = !profiles.empty();
  compile_graph(*g, o);
  PlanBuildOptions po{"sm_90", "fp32", {}};
  po.profiles = profiles;
  try {
    build_plan(*g, po);
  } catch (const Unsupported& e) {
    return e.what();
  }
  return "";
}

// 46,341 x 46,341 output positions: 2,147,488,281, past 2^31 - 1 (and its tile margin).
TEST(ConvInt32, AStaticConvPastInt32PositionsIsRefusedNamingTheProduct) {
  const std::string why = refusal(R"(graph @m(%x: f32[1,1,46341,46341], %w: f32[1,1,1,1]) -> (f32[1,1,46341,46341]) {
  %y = conv(%x, %w) {dilations=[1,1], group=1, pads=[0,0,0,0], strides=[1,1]} : f32[1,1,46341,46341]
  return %y
})");
  EXPECT_NE(why.find("46341 x 46341"), std::string::npos) << why;
  EXPECT_NE(why.find("2147488281 exceed its 32-bit indices"), std::string::npos) << why;
  EXPECT_NE(why.find("conv"), std::string::npos) << why;
}

// Just under: 46,340 x 46,340 = 2,147,395,600 positions fit with a tile's
// margin, so the same conv is not refused for its indices (it builds).
TEST(ConvInt32, AStaticConvJustUnderInt32IsNotRefused) {
  EXPECT_EQ(refusal(R"(graph @m(%x: f32[1,1,46340,46340], %w: f32[1,1,1,1]) -> (f32[1,1,46340,46340]) {
  %y = conv(%x, %w) {dilations=[1,1], group=1, pads=[0,0,0,0], strides=[1,1]} : f32[1,1,46340,46340]
  return %y
})"),
            "");
}

// A shape-generic conv over a symbolic image: h x w at the profile's max
// (65,536 x 65,536 = 2^32) is refused, with the symbols' maxima named.
TEST(ConvInt32, AShapeGenericConvIsCheckedAtTheProfilesMax) {
  const std::string text =
      R"(graph @m(%x: f32[1,2,h,w], %w: f32[4,2,1,1]) -> (f32[1,4,h,w]) symbols(h in [1, 65536], w in [1, 65536]) {
  %y = conv(%x, %w) {dilations=[1,1], group=1, pads=[0,0,0,0], strides=[1,1]} : f32[1,4,h,w]
  return %y
})";
  const std::string why = refusal(text, {plan::Profile{{{"x", {1, 2, 1, 1}, {1, 2, 64, 64}, {1, 2, 65536, 65536}}}}});
  EXPECT_NE(why.find("h (at most 65536) x w (at most 65536) = 4294967296 exceed its 32-bit indices"), std::string::npos)
      << why;
}

}  // namespace
}  // namespace kiln
