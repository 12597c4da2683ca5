// Graphs with control flow left after folding (their conditions and trip
// counts are inputs), for the GPU plans of issue 14: the fake-GPU tests
// (fake_gpu_control_flow_test.cpp) and the plan-on-sim tests
// (tests/unit/codegen_control_flow_test.cpp) run them against the reference.
#pragma once
#include <string>

namespace kiln::cfgraphs {

// A loop whose body holds an if on a captured condition: nested regions,
// a loop-carried value, a region constant.
inline constexpr const char* kIfInLoop = R"(graph @m(%c: bool[], %n: i64[], %x: f32[4]) -> (f32[4]) {
  %v = loop(%n, _, %x, %c) {carried=1} : f32[4] {
    graph @body(%i: i64[], %go: bool[], %a: f32[4], %cc: bool[]) -> (bool[], f32[4]) {
      %b = if(%cc, %a) : f32[4] loc("pick") {
        graph @then(%p: f32[4]) -> (f32[4]) {
          %h = const f32[] splat<0.5>
          %t = mul(%p, %h) : f32[4]
          %u = tanh(%t) : f32[4]
          return %u
        }
        graph @else(%q: f32[4]) -> (f32[4]) {
          %e = sigmoid(%q) : f32[4]
          return %e
        }
      }
      return %go, %b
    }
  }
  return %v
})";

// An if whose branches return a parameter and a constant: no kernel, only
// copies into the graph output.
inline constexpr const char* kIfPassThrough = R"(graph @m(%c: bool[], %x: f32[2]) -> (f32[2]) {
  %y = if(%c, %x) : f32[2] {
    graph @then(%p: f32[2]) -> (f32[2]) {
      return %p
    }
    graph @else(%q: f32[2]) -> (f32[2]) {
      %k = const f32[2] dense<[3.0, 4.0]>
      return %k
    }
  }
  return %y
})";

// A while loop: it ends when the body's data-dependent condition is false
// (or after %n iterations), and counts on the iteration number.
inline constexpr const char* kWhile = R"(graph @m(%n: i64[], %x: f32[3], %lim: f32[]) -> (f32[3], i64[]) {
  %z = const i64[] splat<0>
  %v, %k = loop(%n, _, %x, %z, %lim) {carried=2} : f32[3], i64[] {
    graph @body(%i: i64[], %go: bool[], %a: f32[3], %cnt: i64[], %l: f32[]) -> (bool[], f32[3], i64[]) {
      %two = const f32[] splat<2.0>
      %a2 = mul(%a, %two) : f32[3]
      %s = reduce_sum(%a2) {axes=[0], keepdims=0} : f32[]
      %more = less(%s, %l) : bool[]
      %one = const i64[] splat<1>
      %c2 = add(%i, %one) : i64[]
      return %more, %a2, %c2
    }
  }
  return %v, %k
})";

// A loop with a scan output: its trip count must be the one compiled for (4).
inline constexpr const char* kLoopScan = R"(graph @m(%n: i64[], %x: f32[3], %w: f32[3]) -> (f32[3], f32[4,3]) {
  %v, %s = loop(%n, _, %x, %w) {carried=1} : f32[3], f32[4,3] {
    graph @body(%i: i64[], %cond: bool[], %acc: f32[3], %cw: f32[3]) -> (bool[], f32[3], f32[3]) {
      %next = add(%acc, %cw) : f32[3]
      %e = tanh(%next) : f32[3]
      return %cond, %next, %e
    }
  }
  return %v, %s
})";

// A scan over axis 1 of its input, reversed, with a state and a capture; its
// output stacks the body's elements on axis 1 (one copy per row).
inline constexpr const char* kScan = R"(graph @m(%init: f32[2], %xs: f32[2,5], %w: f32[2]) -> (f32[2], f32[2,5]) {
  %sum, %ys = scan(%init, %xs, %w) {batched=0, carried=1, input_axes=[1], input_reverse=[1], output_axes=[1], output_reverse=[0], scan_inputs=1} : f32[2], f32[2,5] {
    graph @body(%s: f32[2], %x: f32[2], %cw: f32[2]) -> (f32[2], f32[2]) {
      %m = mul(%x, %cw) : f32[2]
      %n = add(%s, %m) : f32[2]
      %t = tanh(%n) : f32[2]
      return %n, %t
    }
  }
  return %sum, %ys
})";

// A loop whose body concatenates its carried value and 4,999 captured
// values, 5,001 buffers: more than the kernel parameter space holds, so the
// region's concat takes a pointer table in device memory
// (codegen/param_table.h); the mean of the concatenation is carried on.
inline const std::string& table_in_loop() {
  static const std::string text = [] {
    std::string params, captures, body, cat;
    for (int i = 0; i < 4999; ++i) {
      params += ", %w" + std::to_string(i) + ": f32[1]";
      captures += ", %w" + std::to_string(i);
      body += ", %c" + std::to_string(i) + ": f32[1]";
      cat += ", %c" + std::to_string(i);
    }
    return "graph @m(%n: i64[], %x: f32[1]" + params + ") -> (f32[1]) {\n  %v = loop(%n, _, %x" + captures +
           ") {carried=1} : f32[1] {\n    graph @body(%i: i64[], %go: bool[], %a: f32[1]" + body +
           ") -> (bool[], f32[1]) {\n      %cat = concat(%a" + cat +
           ") {axis=0} : f32[5000]\n      %s = reduce_mean(%cat) {axes=[0], keepdims=1} : f32[1]\n      return %go, "
           "%s\n    }\n  }\n  return %v\n}";
  }();
  return text;
}

}  // namespace kiln::cfgraphs
