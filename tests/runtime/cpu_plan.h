// A CPU plan built straight from kiln IR text, without the compiler (no
// frontend, passes or codegen): what the runtime stress tests need, so that
// their sanitizer builds (ThreadSanitizer, AddressSanitizer + LeakSanitizer)
// compile only the runtime and its reference backend. The graph's constants
// stay inline in the graph text and are also listed in the weights section,
// as the plan loader expects (runtime/plan_graph.h).
#pragma once
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ir/parser.h"
#include "runtime/plan_format.h"
#include "runtime/plan_graph.h"
#include "runtime/version.h"

namespace kiln::testing {

// A small CNN head: conv (3->4 channels, 3x3, padded) + relu, flatten,
// matmul to 10 classes + bias, softmax; outputs the probabilities and the
// activations. Enough arithmetic that runs on several threads overlap.
inline std::string cnn_graph_text() {
  // Values on a 1/64 grid in [-2, 2): exact in text and in f32.
  auto vals = [](size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::string s = "[";
    for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string((int(rng() % 256) - 128) / 64.0);
    return s + "]";
  };
  return "graph @cnn(%x: f32[2,3,8,8]) -> (f32[2,10], f32[2,4,8,8]) {\n"
         "  %w = const f32[4,3,3,3] dense<" +
         vals(4 * 3 * 3 * 3, 1) +
         ">\n"
         "  %b = const f32[4] dense<" +
         vals(4, 2) +
         ">\n"
         "  %m = const f32[256,10] dense<" +
         vals(256 * 10, 3) +
         ">\n"
         "  %mb = const f32[10] dense<" +
         vals(10, 4) +
         ">\n"
         "  %c = conv(%x, %w, %b) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[1,1]} : f32[2,4,8,8]\n"
         "  %r = relu(%c) : f32[2,4,8,8]\n"
         "  %f = reshape(%r) {shape=[2,256]} : f32[2,256]\n"
         "  %g = matmul(%f, %m) : f32[2,10]\n"
         "  %h = add(%g, %mb) : f32[2,10]\n"
         "  %s = softmax(%h) {axis=1} : f32[2,10]\n"
         "  return %s, %r\n"
         "}\n";
}

// The plan bytes of `text` for the CPU path (no GPU kernels).
inline std::vector<uint8_t> cpu_plan_bytes(const std::string& text) {
  plan::Plan p;
  p.meta.kiln_version = kKilnVersion;
  p.meta.target = "cpu";
  p.meta.precision = "fp32";
  p.meta.no_gpu_reason = "a CPU plan written by the runtime tests";
  p.graph_text = text;
  auto g = parse_graph(text, "test.kir");
  for (const Value* c : plan::walk_constants(*g)) {
    const Tensor& t = c->data();
    plan::WeightEntry w{c->type(), p.weight_data.size(), uint64_t(t.nbytes())};
    p.weight_data.resize((p.weight_data.size() + t.nbytes() + plan::kAlignment - 1) / plan::kAlignment *
                         plan::kAlignment);
    if (t.nbytes()) std::memcpy(p.weight_data.data() + w.offset, t.raw(), t.nbytes());
    p.weights.push_back(w);
  }
  p.meta.graph_constants = p.weights.size();
  return plan::serialize(p);
}

}  // namespace kiln::testing
