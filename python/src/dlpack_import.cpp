// The DLPack consumer side (dlpack_import.h), following the Python
// specification of the protocol (data-apis.org array API, "__dlpack__"):
// ask for the versioned capsule (max_version=(1, 0)) and fall back to the
// unversioned one for older producers; rename the capsule "used_..." once
// its tensor is taken, and call the producer's deleter when done with it.
#include "python/src/dlpack_import.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "ir/error.h"
#include "python/src/dlpack_abi.h"

namespace py = pybind11;
namespace dl = kiln_dlpack;

namespace kiln_py {
namespace {

[[noreturn]] void raise(const std::string& msg) { throw kiln::Error(msg); }

std::string dtype_text(const dl::DataType& t) {
  const char* kind = t.code == dl::kInt       ? "int"
                     : t.code == dl::kUInt    ? "uint"
                     : t.code == dl::kFloat   ? "float"
                     : t.code == dl::kBfloat  ? "bfloat"
                     : t.code == dl::kComplex ? "complex"
                     : t.code == dl::kBool    ? "bool"
                                              : nullptr;
  std::string s = kind ? kind + std::to_string(t.bits)
                       : "type code " + std::to_string(t.code) + " of " + std::to_string(t.bits) + " bits";
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

// kiln's dtype for a DLPack one, or KILN_DTYPE_MAX_ENUM when kiln has none.
kiln_dtype kiln_dtype_of(const dl::DataType& t, kiln_dtype expected) {
  if (t.lanes != 1) return KILN_DTYPE_MAX_ENUM;
  const int b = t.bits;
  switch (t.code) {
    case dl::kFloat:
      return b == 16 ? KILN_F16 : b == 32 ? KILN_F32 : b == 64 ? KILN_F64 : KILN_DTYPE_MAX_ENUM;
    case dl::kBfloat:
      return b == 16 ? KILN_BF16 : KILN_DTYPE_MAX_ENUM;
    case dl::kInt:
      return b == 8 ? KILN_I8 : b == 16 ? KILN_I16 : b == 32 ? KILN_I32 : b == 64 ? KILN_I64 : KILN_DTYPE_MAX_ENUM;
    case dl::kUInt:
      if (b == 16) return expected == KILN_BF16 ? KILN_BF16 : KILN_U16;  // bf16 as its bits, as numpy's uint16
      // Producers from before DLPack 0.8, which added kDLBool, export bool as uint8.
      if (b == 8) return expected == KILN_BOOL ? KILN_BOOL : KILN_U8;
      return b == 32 ? KILN_U32 : b == 64 ? KILN_U64 : KILN_DTYPE_MAX_ENUM;
    case dl::kBool:
      return b == 8 ? KILN_BOOL : KILN_DTYPE_MAX_ENUM;
    // ONNX's 8-bit floats: one element per byte in both.
    case dl::kFloat8_e4m3fn:
      return b == 8 ? KILN_F8E4M3FN : KILN_DTYPE_MAX_ENUM;
    case dl::kFloat8_e4m3fnuz:
      return b == 8 ? KILN_F8E4M3FNUZ : KILN_DTYPE_MAX_ENUM;
    case dl::kFloat8_e5m2:
      return b == 8 ? KILN_F8E5M2 : KILN_DTYPE_MAX_ENUM;
    case dl::kFloat8_e5m2fnuz:
      return b == 8 ? KILN_F8E5M2FNUZ : KILN_DTYPE_MAX_ENUM;
    case dl::kFloat8_e8m0fnu:
      return b == 8 ? KILN_F8E8M0 : KILN_DTYPE_MAX_ENUM;
    default:
      return KILN_DTYPE_MAX_ENUM;
  }
}

std::string dims_text(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + (v.size() == 1 ? ",)" : ")");
}

// A Python exception as "TypeName: message", without pybind11's traceback.
std::string exception_text(const py::error_already_set& e) {
  return std::string(py::str(e.type().attr("__name__"))) + ": " + std::string(py::str(e.value()));
}

// __dlpack__(**kwargs), its producer's failure in kiln's words.
py::object call_dlpack(const py::object& obj, const std::string& who, const py::dict& kwargs) {
  try {
    return obj.attr("__dlpack__")(**kwargs);
  } catch (py::error_already_set& e) {
    if (e.matches(PyExc_TypeError)) throw;  // an older producer without a keyword: the caller retries
    raise(who + ": its __dlpack__() failed: " + exception_text(e));
  }
}

}  // namespace

std::string type_text(kiln_dtype dtype, const std::vector<int64_t>& shape) {
  std::string s = std::string(kiln_dtype_name(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

bool has_dlpack(const py::handle& obj) {
  return !py::isinstance<py::array>(obj) && py::hasattr(obj, "__dlpack__") && py::hasattr(obj, "__dlpack_device__");
}

DlpackTensor import_dlpack(const py::object& obj, const std::string& who, kiln_dtype expected, bool writable,
                           const py::object& stream) {
  DlpackTensor r;
  // The device first: a CPU producer refuses a stream (numpy raises).
  py::tuple dev;
  try {
    dev = obj.attr("__dlpack_device__")();
  } catch (py::error_already_set& e) {
    raise(who + ": its __dlpack_device__() failed: " + exception_text(e));
  }
  if (dev.size() != 2) raise(who + ": __dlpack_device__() did not return (device_type, device_id)");
  const int type = dev[0].cast<int>();
  r.device_id = dev[1].cast<int>();
  if (type == dl::kCPU || type == dl::kCUDAHost) {
    r.device_text = type == dl::kCPU ? "cpu" : "cuda_host";
  } else if (type == dl::kCUDA || type == dl::kCUDAManaged) {
    r.device = true;
    r.managed = type == dl::kCUDAManaged;
    r.device_text = (type == dl::kCUDA ? "cuda:" : "cuda_managed:") + std::to_string(r.device_id);
  } else {
    raise(who + ": the tensor is on DLPack device type " + std::to_string(type) + " (device " +
          std::to_string(r.device_id) + "); kiln takes CPU memory or CUDA device memory");
  }
  if (!r.device && !stream.is_none())
    raise(who + ": a stream was given for a tensor in host memory (" + r.device_text + "); streams order device work");

  // Two dicts (a py::dict copy is the same dict): with and without max_version.
  py::dict kwargs, versioned;
  if (r.device) {
    kwargs["stream"] = stream;
    versioned["stream"] = stream;
  }
  versioned["max_version"] = py::make_tuple(dl::kMajorVersion, 0);
  py::object capsule;
  try {
    capsule = call_dlpack(obj, who, versioned);
  } catch (py::error_already_set&) {  // a producer older than DLPack 1.0's max_version keyword
    try {
      capsule = call_dlpack(obj, who, kwargs);
    } catch (py::error_already_set& e) {
      raise(who + ": its __dlpack__() failed: " + exception_text(e));
    }
  }

  dl::Tensor* t = nullptr;
  uint64_t flags = 0;
  if (PyCapsule_IsValid(capsule.ptr(), "dltensor_versioned")) {
    auto* m = static_cast<dl::ManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor_versioned"));
    PyCapsule_SetName(capsule.ptr(), "used_dltensor_versioned");  // ours now: the capsule no longer frees it
    r.owner = std::shared_ptr<void>(m, [](void* p) {
      auto* mt = static_cast<dl::ManagedTensorVersioned*>(p);
      if (mt->deleter) mt->deleter(mt);
    });
    if (m->version.major != dl::kMajorVersion)
      raise(who + ": DLPack version " + std::to_string(m->version.major) + "." + std::to_string(m->version.minor) +
            " (kiln reads " + std::to_string(dl::kMajorVersion) + ".x)");
    t = &m->dl_tensor;
    flags = m->flags;
  } else if (PyCapsule_IsValid(capsule.ptr(), "dltensor")) {
    auto* m = static_cast<dl::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");
    r.owner = std::shared_ptr<void>(m, [](void* p) {
      auto* mt = static_cast<dl::ManagedTensor*>(p);
      if (mt->deleter) mt->deleter(mt);
    });
    t = &m->dl_tensor;
  } else {
    raise(who + ": __dlpack__() did not return a DLPack capsule (\"dltensor\" or \"dltensor_versioned\")");
  }

  if (writable && (flags & dl::kFlagReadOnly)) raise(who + ": the DLPack tensor is read-only; kiln writes the output");
  if (writable && (flags & dl::kFlagIsCopied))
    raise(who + ": the producer exported a copy of the tensor; kiln's output would not reach it");
  if (t->ndim < 0) raise(who + ": negative rank in the DLPack tensor");
  r.shape.assign(t->shape, t->shape + t->ndim);
  r.dtype = kiln_dtype_of(t->dtype, expected);
  if (r.dtype == KILN_DTYPE_MAX_ENUM)
    raise(who + ": DLPack dtype " + dtype_text(t->dtype) + " has no kiln equivalent (expected " +
          kiln_dtype_name(expected) + ")");
  if (t->strides) {
    // Strides in elements. Dims of 1 may have any; an empty tensor has no layout.
    bool empty = false;
    for (int64_t d : r.shape) empty |= d == 0;
    int64_t want = 1;
    for (int k = t->ndim; k-- > 0 && !empty;) {
      if (r.shape[k] != 1 && t->strides[k] != want)
        raise(who + ": the DLPack tensor is not C-contiguous (shape " + dims_text(r.shape) + ", strides " +
              dims_text(std::vector<int64_t>(t->strides, t->strides + t->ndim)) +
              " elements); pass a contiguous one (torch: .contiguous(), numpy: numpy.ascontiguousarray)");
      want *= r.shape[k];
    }
  }
  r.data = static_cast<char*>(t->data) + t->byte_offset;
  return r;
}

}  // namespace kiln_py
