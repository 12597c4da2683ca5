// bitcast: an element's stored bits read as another dtype of the same bit
// width (ONNX BitCast, opset 26). Pointwise, so it fuses and has one meaning
// for the reference and the kernels (ExprOp::BitCast).
#include "ir/low_bit.h"
#include "ops/elementwise_parts.h"
#include "ops/families.h"

namespace kiln::ops {

namespace {

int bit_width(DType t) { return is_low_bit(t) ? low_bit_width(t) : 8 * static_cast<int>(dtype_size(t)); }

OpDef bitcast_op() {
  OpDef d;
  d.name = "bitcast";
  d.category = OpCategory::Pointwise;
  d.attrs = {{"to", AttrKind::String, true}};
  d.infer = [](InferContext& c) {
    std::string to = c.attrs().get_string("to", "");
    std::optional<DType> t = dtype_from_name(to);
    if (!t) c.fail("'to' is \"{}\", which is not a kiln dtype", to);
    if (bit_width(*t) != bit_width(c.dtype(0)))
      c.fail("{} ({} bits) and {} ({} bits) differ in bit width", dtype_name(c.dtype(0)), bit_width(c.dtype(0)),
             dtype_name(*t), bit_width(*t));
    return std::vector<TensorType>{TensorType(*t, c.shape(0))};
  };
  d.expr = [](ExprBuilder& b, const AttrMap& a) {
    DType to = *dtype_from_name(a.get_string("to", ""));
    return b.finish(b.bitcast(b.input(0), to), to);
  };
  d.doc =
      "the stored bits of x read as dtype `to` of the same bit width; to bool is bits != 0; a float NaN stays NaN "
      "but a signaling NaN's payload comes back quieted";
  return d;
}

}  // namespace

void register_bitcast_op(OpRegistry& r) { r.add(bitcast_op()); }

}  // namespace kiln::ops
