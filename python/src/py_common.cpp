// See py_common.h.
#include "python/src/py_common.h"

#include <pybind11/stl.h>

#include "python/src/dlpack_bind.h"
#include "python/src/dlpack_import.h"

namespace kiln_py {

const char* numpy_dtype_name(kiln_dtype d) {
  switch (d) {
    case KILN_F32:
      return "float32";
    case KILN_F16:
      return "float16";
    case KILN_BF16:
      return "uint16";
    case KILN_F64:
      return "float64";
    case KILN_I8:
      return "int8";
    case KILN_I16:
      return "int16";
    case KILN_I32:
      return "int32";
    case KILN_I64:
      return "int64";
    case KILN_U8:
      return "uint8";
    case KILN_U16:
      return "uint16";
    case KILN_U32:
      return "uint32";
    case KILN_U64:
      return "uint64";
    case KILN_BOOL:
      return "bool";
    case KILN_DTYPE_MAX_ENUM:
      break;  // not a dtype
    default:
      return kiln_dtype_name(d);  // the low-bit types: ml_dtypes' names differ; kiln's own
  }
  return "unknown";
}

kiln_dtype kiln_dtype_of(const py::dtype& dt, kiln_dtype expected, const std::string& name) {
  // Read through Python attributes: pybind11's descriptor accessors assume
  // numpy 1's struct layout, which numpy 2 changed.
  const char kind = dt.attr("kind").cast<std::string>()[0];
  const auto size = dt.attr("itemsize").cast<int64_t>();
  if (kind == 'b' && size == 1) return KILN_BOOL;
  if (kind == 'f') {
    if (size == 2) return KILN_F16;
    if (size == 4) return KILN_F32;
    if (size == 8) return KILN_F64;
  }
  if (kind == 'i') {
    if (size == 1) return KILN_I8;
    if (size == 2) return KILN_I16;
    if (size == 4) return KILN_I32;
    if (size == 8) return KILN_I64;
  }
  if (kind == 'u') {
    if (size == 1) return KILN_U8;
    if (size == 2) return expected == KILN_BF16 ? KILN_BF16 : KILN_U16;
    if (size == 4) return KILN_U32;
    if (size == 8) return KILN_U64;
  }
  raise("input \"" + name + "\": numpy dtype " + dt.attr("name").cast<std::string>() +
        " has no kiln equivalent (expected " + numpy_dtype_name(expected) + ")");
}

std::string names_of(const std::vector<kiln::TensorInfo>& ts) {
  std::string s;
  for (const auto& t : ts) s += (s.empty() ? "\"" : ", \"") + t.name + "\"";
  return s;
}

void bind_feed(kiln::Context& ctx, int engine_device, const std::vector<kiln::TensorInfo>& inputs,
               const std::vector<kiln::TensorInfo>& outputs, const std::set<std::string>& skip, const py::dict& feed,
               py::dict& result, FeedKeep& keep, std::map<std::string, std::vector<int64_t>>& bound) {
  for (auto item : feed) {
    const std::string key = py::str(item.first);
    bool known = false;
    for (const auto& t : inputs) known |= t.name == key;
    if (!known) raise("unknown input \"" + key + "\"; the model's inputs are " + names_of(inputs));
    if (skip.count(key)) raise("input \"" + key + "\" is bound in place: it is read from its buffer, not the feed");
  }
  for (const kiln::TensorInfo& t : inputs) {
    if (skip.count(t.name)) continue;
    if (!feed.contains(t.name)) raise("missing input \"" + t.name + "\"; the model's inputs are " + names_of(inputs));
    py::object value = feed[py::str(t.name)];
    if (has_dlpack(value)) {
      keep.dlpack.push_back(bind_dlpack(ctx, engine_device, t, false, value, py::none()));
      continue;
    }
    py::array a = py::array::ensure(feed[py::str(t.name)], py::array::c_style);
    if (!a) raise("input \"" + t.name + "\" is not convertible to a numpy array");
    std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
    ctx.bind_input(t.name, a.data(), kiln_dtype_of(a.dtype(), t.dtype, t.name), shape);
    keep.arrays.push_back(std::move(a));
  }
  py::object np_empty = py::module_::import("numpy").attr("empty");
  for (const kiln::TensorInfo& t : outputs) {
    if (skip.count(t.name)) continue;
    // A plan with shape profiles: the inputs bound above set the shapes.
    std::vector<int64_t> shape = t.dynamic() ? ctx.output_shape(t.name) : t.shape;
    // numpy.empty, not py::array(dtype, shape): pybind11 computes strides
    // from numpy 1's descriptor layout, which numpy 2 changed.
    py::array a = np_empty(py::tuple(py::cast(shape)), numpy_dtype_name(t.dtype));
    ctx.bind_output(t.name, a.mutable_data(), t.dtype, shape);
    result[py::str(t.name)] = a;
    if (t.dynamic()) bound[t.name] = std::move(shape);
  }
}

void trim_data_dependent(const kiln::Context& ctx, const std::map<std::string, std::vector<int64_t>>& bound,
                         py::dict& result) {
  for (const auto& [name, shape] : bound) {
    std::vector<int64_t> real = ctx.output_shape(name);
    if (real == shape) continue;
    int64_t n = 1;
    for (int64_t d : real) n *= d;
    py::object flat = result[py::str(name)].attr("reshape")(-1);
    result[py::str(name)] = flat[py::slice(0, n, 1)].attr("reshape")(py::tuple(py::cast(real))).attr("copy")();
  }
}

}  // namespace kiln_py
