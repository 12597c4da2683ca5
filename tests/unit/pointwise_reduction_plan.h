// What the plan round-trip tests (tests/unit/plan_roundtrip_test.cpp) and the
// fake-GPU tests (tests/runtime/fake_gpu_plans.h) share: the small graph both
// compile into plans, and a run of a runtime context on host buffers.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "runtime/engine.h"

namespace kiln::testing {

// Pointwise chains (one fused kernel), a reduction and a softmax on the
// input (their own kernels), a view (reshape, no launch) and an output that
// is the input itself (a copy step).
inline constexpr const char* kPointwiseReductionGraph =
    R"(graph @m(%x: f32[4,37], %b: f32[37]) -> (f32[4], f32[4,37], f32[148], f32[4,37], f32[4,37]) {
    %w = const f32[37] dense<[0.5, -1.0, 2.0, 0.25, 1.5, -0.5, 3.0, 0.75, -2.0, 1.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7, 2.8, 2.9]>
    %h = add(%x, %b) : f32[4,37]
    %t = mul(%h, %w) : f32[4,37]
    %e = tanh(%t) : f32[4,37]
    %s = reduce_max(%x) {axes=[1], keepdims=0} : f32[4]
    %f = reshape(%e) {shape=[148]} : f32[148]
    %p = softmax(%x) {axis=1} : f32[4,37]
    %i = identity(%x) : f32[4,37]
    return %s, %h, %f, %p, %i
  })";

// Binds `feed` and one new tensor per output (host memory), runs `ctx`
// synchronously and returns the outputs.
inline std::vector<Tensor> run_on_host(rt::Context& ctx, const std::map<std::string, Tensor>& feed) {
  const rt::Engine& e = ctx.engine();
  for (const auto& d : e.inputs()) ctx.bind_input(d.name, feed.at(d.name).raw(), d.type, false);
  std::vector<Tensor> outs;
  for (const auto& d : e.outputs()) outs.emplace_back(d.type);
  for (size_t i = 0; i < outs.size(); ++i) ctx.bind_output(e.outputs()[i].name, outs[i].raw(), outs[i].type(), false);
  ctx.run();
  return outs;
}

}  // namespace kiln::testing
