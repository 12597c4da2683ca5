// ONNX adapters for the ops that make constants at import (see
// import_context.h): Shape and Size of the static or symbolic dims,
// ConstantOfShape and Constant.
//
//   Shape, Size, ConstantOfShape, Constant -> constants (shapes are static)
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>

#include "frontend/import_context.h"
#include "frontend/shape_operands.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"
#include "ops/shape_ops.h"

namespace kiln::adapters {

namespace {

// ---------------------------------------------------------------------------
// Shape, Size, ConstantOfShape, Constant: constants at import.

void shape_adapter(ImportContext& c) {
  c.only_attrs({"start", "end"});
  const Shape& s = c.input(0)->shape();
  int64_t r = static_cast<int64_t>(s.size());
  int64_t start = c.attrs().get_int("start", 0), end = c.attrs().get_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  if (end < start) end = start;
  Tensor t(DType::I64, {end - start});
  for (int64_t i = start; i < end; ++i) t.set_int(i - start, s[i]);
  c.set_outputs({c.constant(t)});
}

void size_adapter(ImportContext& c) {
  c.only_attrs({});
  Tensor t(DType::I64, {});
  t.set_int(0, c.input(0)->type().numel());
  c.set_outputs({c.constant(t)});
}

void constant_of_shape_adapter(ImportContext& c) {
  c.only_attrs({"value"});
  std::vector<int64_t> dims = int_list(c, 0, "ConstantOfShape shape", false, /*allow_symbolic=*/true);
  for (int64_t d : dims)
    if (d < 0 && !is_symbolic_dim(d)) c.fail("shape [{}] has a negative dim", dims_str(dims));
  Tensor value = Tensor::scalar(DType::F32, 0);
  if (c.attrs().has("value")) {
    value = *c.attrs().get_tensor("value");
    if (value.numel() != 1) c.fail("attribute 'value' must hold one element, got {}", value.type().str());
  }
  Shape s(dims.begin(), dims.end());
  if (has_symbolic_dims(s)) {
    // A size known only at run time (torchvision's full_like over the boxes
    // a score threshold kept): the one value broadcast to it, as a node.
    Tensor one(value.dtype(), Shape(s.size(), 1));
    ops::fill_bytes(one.raw(), value.raw(), dtype_size(value.dtype()), 1);
    AttrMap m;
    m.set("shape", std::vector<int64_t>(s));
    return c.set_outputs({c.emit1("expand", {c.constant(one)}, m)});
  }
  try {
    shape_numel(s);
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  if (static_cast<double>(shape_numel(s)) * static_cast<double>(dtype_size(value.dtype())) > double(int64_t(1) << 34))
    c.unsupported("a {} constant of shape [{}] is too large to build at compile time", dtype_name(value.dtype()),
                  fmt::join(dims, ","));
  Tensor t(value.dtype(), s);
  ops::fill_bytes(t.raw(), value.raw(), dtype_size(value.dtype()), t.numel());
  c.set_outputs({c.constant(t)});
}

void constant_adapter(ImportContext& c) {
  c.only_attrs({"value", "value_float", "value_floats", "value_int", "value_ints", "value_string", "value_strings",
                "sparse_value"});
  int count = 0;
  for (auto& kv : c.attrs()) (void)kv, ++count;
  if (count != 1) c.fail("needs exactly one value attribute, got {}", count);
  Tensor t;
  const AttrMap& a = c.attrs();
  if (a.has("value")) {
    t = *a.get_tensor("value");
  } else if (a.has("value_float")) {
    t = Tensor::scalar(DType::F32, a.get_float("value_float", 0));
  } else if (a.has("value_floats")) {
    std::vector<float> v = a.get_floats("value_floats");
    t = Tensor(DType::F32, {static_cast<int64_t>(v.size())});
    if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(float));
  } else if (a.has("value_int")) {
    t = Tensor(DType::I64, {});
    t.set_int(0, a.get_int("value_int", 0));
  } else if (a.has("value_ints")) {
    std::vector<int64_t> v = a.get_ints("value_ints");
    t = Tensor(DType::I64, {static_cast<int64_t>(v.size())});
    if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(int64_t));
  } else if (a.has("value_string")) {
    t = Tensor::from_strings({}, {a.get_string("value_string", "")});
  } else if (a.has("value_strings")) {
    std::vector<std::string> v = a.get_strings("value_strings");
    t = Tensor::from_strings({static_cast<int64_t>(v.size())}, v);
  } else {
    c.unsupported("sparse constants are not supported");
  }
  c.set_outputs({c.constant(t)});
}

}  // namespace

void register_constants(AdapterTable& t) {
  t.add("Shape", shape_adapter);
  t.add("Size", size_adapter);
  t.add("ConstantOfShape", constant_of_shape_adapter);
  t.add("Constant", constant_adapter);
}

}  // namespace kiln::adapters
