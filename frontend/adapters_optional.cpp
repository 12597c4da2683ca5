// ONNX adapters for the optional ops on tensors (see import_context.h):
// kiln's values are tensors, never optional, so what these ops ask is known
// when importing.
//
//  - OptionalHasElement: true for a tensor operand, false for an absent one
//    (an empty input name or no input), a bool[] constant.
//  - OptionalGetElement: a tensor operand is its own element (identity).
//
// Optional- and sequence-typed graph inputs are refused where the graph's
// inputs are read (onnx_import.cpp), so an operand here is always a tensor.
#include "frontend/import_context.h"

namespace kiln::adapters {

namespace {

void optional_has_element(ImportContext& c) {
  c.only_attrs({});
  if (c.num_inputs() > 1) c.fail("takes at most one operand, got {}", c.num_inputs());
  c.set_outputs({c.constant(Tensor::scalar(DType::Bool, c.has_input(0) ? 1.0 : 0.0), "has_element")});
}

void optional_get_element(ImportContext& c) {
  c.only_attrs({});
  if (!c.has_input(0)) c.fail("the operand is an empty optional: it has no element to get");
  c.set_outputs({c.emit1("identity", {c.input(0)})});
}

}  // namespace

void register_optional(AdapterTable& t) {
  t.add("OptionalHasElement", since_opset(15, optional_has_element));
  t.add("OptionalGetElement", since_opset(15, optional_get_element));
}

}  // namespace kiln::adapters
