// label_encoder {keys, values, default}: ai.onnx.ml's LabelEncoder (opsets 2
// and 4; frontend/adapters_string.cpp turns each attribute form into these
// three tensors): each element of X found among `keys` becomes the value at
// the same position, any other becomes `default`. Keys and X are strings or
// numbers alike; numeric keys compare by value in X's dtype, and a NaN key
// matches a NaN element (as ONNX Runtime does). The result has X's shape and
// the values' dtype.
#include <cmath>
#include <unordered_map>

#include "ops/op_helpers.h"
#include "ops/string_ops.h"

namespace kiln::ops {

namespace {

std::vector<TensorType> infer_label_encoder(InferContext& c) {
  const Tensor* keys = c.attrs().get_tensor("keys");
  const Tensor* values = c.attrs().get_tensor("values");
  const Tensor* dflt = c.attrs().get_tensor("default");
  if (!keys || !values || !dflt) c.fail("needs the attributes keys, values and default");
  const DType x = c.dtype(0);
  if ((x == DType::String) != (keys->dtype() == DType::String))
    c.fail("X is {} but the keys are {}: both strings or both numbers", c.type(0).str(), keys->type().str());
  if (x != DType::String && !is_float(x) && !is_int(x))
    c.unsupported("X has dtype {}; LabelEncoder takes strings, integers and floats", dtype_name(x));
  if (keys->numel() != values->numel()) c.fail("{} keys but {} values (one each)", keys->numel(), values->numel());
  if (dflt->dtype() != values->dtype() || dflt->numel() != 1)
    c.fail("default is {}; it must be one {} like the values", dflt->type().str(), dtype_name(values->dtype()));
  return {TensorType(values->dtype(), c.shape(0))};
}

// Index of each element's key in `keys`, or -1.
std::vector<int64_t> lookup(const Tensor& x, const Tensor& keys) {
  std::vector<int64_t> idx(static_cast<size_t>(x.numel()), -1);
  if (x.dtype() == DType::String) {
    std::unordered_map<std::string, int64_t> at;
    for (int64_t k = keys.numel() - 1; k >= 0; --k) at[keys.strings()[k]] = k;  // first key wins
    for (int64_t i = 0; i < x.numel(); ++i)
      if (auto it = at.find(x.strings()[i]); it != at.end()) idx[i] = it->second;
    return idx;
  }
  if (is_float(x.dtype())) {  // keys rounded to X's dtype, so f32 keys find f32 elements exactly
    Tensor k = keys.dtype() == x.dtype() ? keys : keys.cast(x.dtype());
    std::unordered_map<double, int64_t> at;
    int64_t nan_at = -1;
    for (int64_t j = k.numel() - 1; j >= 0; --j) {
      const double v = k.get_double(j);
      if (std::isnan(v)) nan_at = j;
      else at[v == 0 ? 0.0 : v] = j;  // -0 and 0 are one key
    }
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double v = x.get_double(i);
      if (std::isnan(v)) idx[i] = nan_at;
      else if (auto it = at.find(v == 0 ? 0.0 : v); it != at.end()) idx[i] = it->second;
    }
    return idx;
  }
  std::unordered_map<int64_t, int64_t> at;
  for (int64_t j = keys.numel() - 1; j >= 0; --j) {
    const double v = keys.get_double(j);  // float keys (keys_floats) match only integral elements
    if (v == std::trunc(v) && std::fabs(v) < 9.2e18) at[static_cast<int64_t>(v)] = j;
  }
  for (int64_t i = 0; i < x.numel(); ++i)
    if (auto it = at.find(x.get_int(i)); it != at.end()) idx[i] = it->second;
  return idx;
}

void copy_element(const Tensor& from, int64_t j, Tensor& to, int64_t i) {
  if (to.dtype() == DType::String) to.strings()[i] = from.strings()[j];
  else if (is_float(to.dtype())) to.set_double(i, from.get_double(j));
  else to.set_int(i, from.get_int(j));
}

void label_encoder_kernel(KernelContext& ctx) {
  const Tensor& keys = *ctx.attrs.get_tensor("keys");
  const Tensor& values = *ctx.attrs.get_tensor("values");
  const Tensor& dflt = *ctx.attrs.get_tensor("default");
  const std::vector<int64_t> idx = lookup(ctx.in(0), keys);
  Tensor& y = ctx.out();
  for (int64_t i = 0; i < y.numel(); ++i) {
    if (idx[i] < 0) copy_element(dflt, 0, y, i);
    else copy_element(values, idx[i], y, i);
  }
}

}  // namespace

void register_label_encoder(OpRegistry& r) {
  OpDef d;
  d.name = "label_encoder";
  d.category = OpCategory::Compute;
  d.takes_strings = true;
  d.attrs = {{"keys", AttrKind::Tensor, true}, {"values", AttrKind::Tensor, true}, {"default", AttrKind::Tensor, true}};
  d.infer = infer_label_encoder;
  d.reference = label_encoder_kernel;
  d.doc = "values[k] where X equals keys[k], else default (strings or numbers; ai.onnx.ml LabelEncoder)";
  r.add(std::move(d));
}

}  // namespace kiln::ops
