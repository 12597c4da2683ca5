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

std::vector<TensorType> infer_with_operand0_as(InferContext& c, const std::function<void(TensorType&)>& retype_operand0,
                                               const std::function<std::vector<TensorType>(InferContext&)>& infer) {
  Graph scratch;
  std::vector<Value*> ins;
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) {
      ins.push_back(nullptr);
      continue;
    }
    Value* v = c.input(i);
    std::string name = fmt::format("operand{}", i);
    if (v->is_constant() && v->has_data()) {
      ins.push_back(scratch.add_constant(name, v->data()));
      continue;
    }
    TensorType t = v->type();
    if (i == 0) retype_operand0(t);
    ins.push_back(scratch.add_input(name, t));
  }
  InferContext sub(c.op(), ins, c.attrs(), c.num_outputs(), c.label());
  return infer(sub);
}

std::vector<TensorType> infer_symbolic_batch(InferContext& c,
                                             const std::function<std::vector<TensorType>(InferContext&)>& infer) {
  bool symbolic = false;
  for (int i = 0; i < c.num_inputs(); ++i) symbolic |= c.has_input(i) && has_symbolic_dims(c.shape(i));
  if (!symbolic) return infer(c);
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    const Shape& s = c.shape(i);
    for (size_t k = 0; k < s.size(); ++k)
      if (is_symbolic_dim(s[k]) && !(i == 0 && k == 0))
        c.unsupported(
            "kiln infers {} with a symbolic batch dim only (operand 0, dim 0): operand {} is {} (dim {} is {})", c.op(),
            i, c.type(i).str(), k, dim_str(s[k]));
  }
  int64_t batch = c.shape(0)[0];
  // Inference on stand-in values of the batch.
  auto run = [&](int64_t n) {
    return infer_with_operand0_as(
        c, [n](TensorType& t) { t.shape[0] = n; }, infer);
  };
  std::vector<TensorType> one = run(1), two = run(2);
  for (size_t j = 0; j < one.size(); ++j) {
    TensorType t = j < two.size() ? two[j] : TensorType();
    bool follows = j < two.size() && one[j].rank() > 0 && t.rank() == one[j].rank() && one[j].shape[0] == 1 &&
                   t.shape[0] == 2 && t.dtype == one[j].dtype && t.layout == one[j].layout;
    for (int k = 1; follows && k < t.rank(); ++k) follows = t.shape[k] == one[j].shape[k];
    if (!follows)
      c.unsupported("kiln cannot infer {} with the symbolic batch dim {}: result {} does not follow it", c.op(),
                    dim_str(batch), j);
    one[j].shape[0] = batch;
  }
  return one;
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
