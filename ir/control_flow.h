// Control-flow ops: `if`, `loop` and `scan`, nodes that own regions (nested
// Graphs, ir/graph.h). Like `fused`, they are part of the IR itself rather
// than ops/ (their meaning is their regions, which no reference kernel or
// inference function sees). This file says how their operands, results,
// attributes and regions line up; the verifier checks it, the frontend builds
// it, the backends run it (backends/control_flow.h). docs/ir.md "Control flow".
//
// A region sees only its own values: everything it reads from outside is an
// operand of the node ("captures", always the last operands) and a parameter
// of the region, as in XLA's while/conditional. Passes therefore see every
// use of an outer value as an ordinary operand.
//
//   if(%cond, captures...)                      regions: then, else
//     then/else: (captures...) -> (results...)
//   loop(%trip, %cond, carried..., captures...) {carried=N}
//     body: (i64[] iter, bool[] cond, carried..., captures...)
//           -> (bool[] cond, carried..., scan elements...)
//     results: final carried values, then each scan output: the elements of
//     every iteration stacked on a new leading dim (its size, the trip count,
//     is static: the frontend only builds scan outputs whose count it knows).
//     %trip (i64, one element) and %cond (bool, one element) may be absent.
//   scan(states..., scan inputs..., captures...) {carried=N, scan_inputs=M,
//        input_axes=[M], input_reverse=[M], output_axes=[K], output_reverse=[K], batched=0|1}
//     body: (states..., one slice of each scan input..., captures...)
//           -> (states..., scan output elements...)
//     batched=1 is ONNX Scan-8: every operand and result has a leading batch
//     dim the body does not see; the body runs per batch element.
#pragma once
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace kiln {

bool is_control_flow_op(std::string_view op);
inline bool is_control_flow(const Node& n) { return is_control_flow_op(n.op()); }

struct LoopSignature {
  int carried = 0;   // N loop-carried values
  int captures = 0;  // outer values the body reads
  int scans = 0;     // K scan outputs
};
// Counts from the node's attributes and operand/result counts (unchecked).
LoopSignature loop_signature(const Node& n);

struct ScanSignature {
  int carried = 0, scan_inputs = 0, captures = 0, scan_outputs = 0;
  bool batched = false;
  std::vector<int64_t> input_axes, input_reverse, output_axes, output_reverse;
};
ScanSignature scan_signature(const Node& n);

// Checks that the node's operands, attributes, results and regions agree
// (types of branch results, loop-carried types, scan slices). Throws
// kiln::Error whose message starts with n.describe(). Regions themselves
// are verified by the caller (ir/verifier.cpp).
void check_control_flow(const Node& n);

}  // namespace kiln
