#include "ops/op_helpers.h"

namespace kiln::ops {

std::vector<TensorType> broadcast_result(InferContext& c, std::optional<DType> dtype) {
  std::vector<Shape> shapes;
  for (int i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i)) shapes.push_back(c.shape(i));
  Shape s;
  try {
    s = broadcast_all(shapes);
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  return {TensorType(dtype ? *dtype : c.dtype(0), s)};
}

void require_same_dtype(InferContext& c) {
  for (int i = 1; i < c.num_inputs(); ++i)
    if (c.has_input(i) && c.dtype(i) != c.dtype(0))
      c.fail("operand {} is {} but operand 0 is {}", i, dtype_name(c.dtype(i)), dtype_name(c.dtype(0)));
}

void require_dtype(InferContext& c, int i, std::initializer_list<DType> allowed) {
  for (DType d : allowed)
    if (c.dtype(i) == d) return;
  c.unsupported("operand {} has dtype {}, which kiln's {} does not support", i, dtype_name(c.dtype(i)), c.op());
}

void require_float(InferContext& c, int i) {
  if (!is_float(c.dtype(i)))
    c.unsupported("operand {} has dtype {}; kiln's {} needs a floating dtype", i, dtype_name(c.dtype(i)), c.op());
}

bool nhwc_layout(const AttrMap& a, const std::string& label) {
  if (!a.has("layout")) return false;
  std::string l = a.get_string("layout", "");
  if (l != "nhwc") throw Error(fmt::format("{}: layout \"{}\" must be \"nhwc\" (absent: channels first)", label, l));
  return true;
}

Shape channels_first_shape(InferContext& c, int i, bool nhwc) {
  if (!nhwc) return c.shape(i);
  if (c.rank(i) < 3) c.fail("layout nhwc needs operand {} of rank >= 3, got {}", i, c.type(i).str());
  return permute_dims(c.shape(i), channels_first_perm(c.rank(i)));
}

TensorType image_result(DType dtype, const Shape& channels_first, bool nhwc) {
  if (!nhwc) return TensorType(dtype, channels_first);
  return TensorType(dtype, permute_dims(channels_first, channels_last_perm(static_cast<int>(channels_first.size()))),
                    Layout::NHWC);
}

}  // namespace kiln::ops
