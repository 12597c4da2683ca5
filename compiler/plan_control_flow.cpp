// The plan builder's part for control flow (compiler/plan_frames.h): an
// if/loop/scan node becomes a control step and a plan::ControlFlow record
// whose regions are launch lists built like the model's own (same emitters,
// same kernels deduplicated into the plan), each over a frame of the arena.
//
// Bindings are chosen so the runtime copies only what changes per iteration:
// an if's branches read the node's operands and write its results where they
// are (one branch runs, and the memory plan never lets a node's result share
// bytes with its operands), so a taken branch costs its own launches only. A
// loop or scan body reads its captures in place too; its iteration number,
// condition, carried values / states and scan slices are arena slots the
// runtime fills, and its results are slots it copies from
// (runtime/plan_control_run.h), since a body must not write the values it
// reads in the same iteration.
#ifdef KILN_HAVE_CODEGEN
#include <algorithm>

#include "compiler/plan_frames.h"
#include "ir/control_flow.h"
#include "ir/error.h"

namespace kiln::planbuild {

namespace {

plan::ControlKind kind_of(const Node& n) {
  if (n.op() == "if") return plan::ControlKind::If;
  if (n.op() == "loop") return plan::ControlKind::Loop;
  if (n.op() == "scan") return plan::ControlKind::Scan;
  fail("{} is not a control-flow node", n.describe());
}

// How many leading region parameters get arena slots the runtime fills
// (the rest are the node's captures, read in place).
size_t slotted_params(const plan::ControlFlow& c) {
  switch (c.kind) {
    case plan::ControlKind::If:
      return 0;
    case plan::ControlKind::Loop:
      return 2 + c.carried;  // iteration number, condition, carried values
    case plan::ControlKind::Scan:
      return c.carried + c.scan_inputs;  // states, one slice of each scan input
  }
  return 0;
}

}  // namespace

plan::Step control_step(const Node& n, uint32_t pos, const Locator& outer, Builder& b, uint64_t nested_base) {
  plan::ControlFlow c;
  c.kind = kind_of(n);
  c.node = pos;
  for (const Value* v : n.inputs()) {
    c.present.push_back(v != nullptr);
    c.operands.push_back(v ? outer.at(v) : plan::BufferRef{});
    c.operand_types.push_back(v ? v->type() : TensorType{});
  }
  for (const Value* v : n.outputs()) {
    c.results.push_back(outer.at(v));
    c.result_types.push_back(v->type());
  }
  if (c.kind == plan::ControlKind::Loop) {
    c.carried = uint32_t(loop_signature(n).carried);
    const Graph& body = *n.regions().at(0);
    const Value* go = body.outputs().at(0);
    c.cond_always_true =
        go == body.inputs().at(1) || (go->is_constant() && go->has_data() && go->data().get_int(0) != 0);
  } else if (c.kind == plan::ControlKind::Scan) {
    ScanSignature sig = scan_signature(n);
    c.carried = uint32_t(sig.carried);
    c.scan_inputs = uint32_t(sig.scan_inputs);
    c.batched = sig.batched;
    c.input_axes = sig.input_axes;
    c.input_reverse = sig.input_reverse;
    c.output_axes = sig.output_axes;
    c.output_reverse = sig.output_reverse;
  }
  // The record's place first: records of nested nodes come after it.
  const uint32_t index = uint32_t(b.p.control.size());
  b.p.control.emplace_back();
  const size_t slotted = slotted_params(c);
  for (const auto& region : n.regions()) {
    const Graph& r = *region;
    plan::RegionPlan rp;
    uint64_t at = nested_base;  // every region of the node starts here: one runs at a time
    auto slot = [&at](const Value* v) {
      plan::BufferRef s;
      s.kind = plan::BufferKind::Arena;
      s.offset = at;
      s.nbytes = v->type().nbytes();
      s.elements = v->type().numel();
      at = align_up(at + std::max<uint64_t>(s.nbytes, 1));
      return s;
    };
    for (size_t i = 0; i < r.inputs().size(); ++i) {
      // If: branch parameter i is the node's operand 1 + i (after the
      // condition); loop and scan bodies' parameters line up with the operands.
      size_t operand = c.kind == plan::ControlKind::If ? 1 + i : i;
      if (i < slotted) rp.params.push_back(slot(r.inputs()[i]));
      else rp.params.push_back(c.operands.at(operand));
    }
    for (size_t j = 0; j < r.outputs().size(); ++j)
      rp.returns.push_back(c.kind == plan::ControlKind::If ? c.results.at(j) : slot(r.outputs()[j]));
    MemoryPlan mem = plan_memory(r, b.memory_options);
    mem.validate();
    const uint64_t arena_at = align_up(at);
    Locator loc(r, mem, b.constant_index, arena_at, &rp.params, &rp.returns);
    const uint64_t end = align_up(arena_at + uint64_t(mem.arena_bytes));
    b.arena_end = std::max(b.arena_end, end);
    rp.steps = launch_list(r, loc, b, end);
    c.regions.push_back(std::move(rp));
  }
  b.p.control[index] = std::move(c);
  plan::Step s;
  s.kind = plan::StepKind::Control;
  s.node = pos;
  s.kernel = index;
  return s;
}

}  // namespace kiln::planbuild
#endif
