// ONNX ops that exist for the low-bit types: BitCast (opset 26).
#include "frontend/import_context.h"
#include "frontend/tensor_proto.h"

namespace kiln::adapters {

namespace {

void bitcast(ImportContext& c) {
  DType to = dtype_from_onnx(static_cast<int>(c.attrs().require_int("to")), c.label());
  AttrMap a;
  a.set("to", std::string(dtype_name(to)));
  c.set_outputs({c.emit1("bitcast", {c.input(0)}, a)});
}

}  // namespace

void register_low_bit(AdapterTable& t) { t.add("BitCast", since_opset(26, bitcast)); }

}  // namespace kiln::adapters
