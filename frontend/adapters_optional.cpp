// ONNX adapters for the optional ops. kiln has no optional type: whether an
// optional holds a value is known at import (ImportedValue: a graph input's
// from ImportOptions::composite_inputs, an Optional node's from its operand),
// so what these ops ask is answered when importing.
//
//  - Optional: its operand (a tensor or a sequence), or an empty optional
//    without one.
//  - OptionalHasElement: a bool[] constant, false for an empty optional or
//    an absent operand.
//  - OptionalGetElement: the element (an identity for a tensor, the same
//    sequence for a sequence); an empty optional is an error.
//  - Identity on a sequence or an optional passes it through.
#include "frontend/import_context.h"

namespace kiln::adapters {

namespace {

void optional_has_element(ImportContext& c) {
  c.only_attrs({});
  if (c.num_inputs() > 1) c.fail("takes at most one operand, got {}", c.num_inputs());
  bool has = c.num_inputs() == 1 && !c.operand(0).is_empty();
  c.set_outputs({c.constant(Tensor::scalar(DType::Bool, has ? 1.0 : 0.0), "has_element")});
}

void optional_get_element(ImportContext& c) {
  c.only_attrs({});
  ImportedValue v = c.num_inputs() == 1 ? c.operand(0) : ImportedValue{};
  if (v.is_empty()) c.fail("the operand is an empty optional: it has no element to get");
  if (v.is_sequence()) return c.set_output_values({v});
  c.set_outputs({c.emit1("identity", {v.tensor})});
}

// Optional(x) holds x; Optional() with only its 'type' attribute is empty
// (the type attribute is not read: kiln needs no type for a value that is
// not there).
void optional(ImportContext& c) {
  if (c.num_inputs() > 1) c.fail("takes at most one operand, got {}", c.num_inputs());
  ImportedValue v = c.num_inputs() == 1 ? c.operand(0) : ImportedValue{};
  if (v.is_tensor()) v = ImportedValue::of(c.emit1("identity", {v.tensor}));
  c.set_output_values({v});
}

}  // namespace

void register_optional(AdapterTable& t) {
  t.add("OptionalHasElement", since_opset(15, optional_has_element));
  t.add("Optional", since_opset(15, optional));
  t.add("OptionalGetElement", since_opset(15, optional_get_element));
}

}  // namespace kiln::adapters
