// GPU plans computed at the bounds of their data-dependent sizes
// (compiler/gpu_bounded_sizes.h), shared by the fake-GPU tests of the runtime
// (fake_gpu_bounded_sizes_test.cpp) and of `kiln run`
// (tools/kiln/tests/run_plan_fake_gpu_test.cpp).
#pragma once
#include "compiler/compile.h"
#include "compiler/gpu_bounded_sizes.h"
#include "compiler/plan_writer.h"
#include "ir/parser.h"

namespace kiln::fakegpu {

// A TopK with a k the model fixes over the selected entries: at the bound the
// padding (neg(x[0]) = 5, above every selected value) must lose.
inline constexpr const char* kFixedKTopk =
    R"(graph @best(%x: f32[8], %t: f32[]) -> (f32[2], i64[2]) symbols(n in [0, 8]) {
    %p = greater(%x, %t) : bool[8]
    %nz = nonzero(%p) {size_symbol="n"} : i64[1,n]
    %i = reshape(%nz) {shape=[n]} : i64[n]
    %neg = neg(%x) : f32[8]
    %v = gather(%neg, %i) {axis=0} : f32[n]
    %top, %ti = topk(%v) {axis=0, k=2, largest=1, sorted=1} : f32[2], i64[2]
    return %top, %ti
  })";

inline plan::Plan bounded_plan(const char* text) {
  auto g = parse_graph(text);
  plan::BoundedSizes sizes;
  std::unique_ptr<Graph> at = graph_at_bounds(*g, "test", sizes);
  CompileOptions o;
  o.pass.target = "sm_90";
  compile_graph(*at, o);
  plan::Plan p = build_plan(*at, {"sm_90", "fp32", {}});
  p.bounded_sizes = sizes;
  return p;
}

}  // namespace kiln::fakegpu
