#include "ir/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ir/error.h"
#include "ir/limits.h"
#include "ir/low_bit.h"
#include "ir/symbolic_dim.h"

namespace kiln {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0 && is_symbolic_dim(d))
      fail("shape [{}] has the symbolic dim {}: a fixed size is needed here", dims_str(s), dim_str(d));
    if (d < 0) fail("negative dimension {} in shape [{}]", d, fmt::join(s, ","));
    if (d != 0 && n > (int64_t(1) << 62) / d) fail("element count of shape [{}] overflows", fmt::join(s, ","));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& s) {
  if (s.empty()) return "scalar";
  return dims_str(s, "x");
}

std::string TensorType::str() const {
  std::string r = fmt::format("{}[{}]", dtype_name(dtype), dims_str(shape));
  if (layout == Layout::NHWC) r += "{nhwc}";
  return r;
}

Tensor::Tensor(TensorType type) : type_(std::move(type)) {
  // The last line of defence against sizes from a model: never ask the
  // allocator for more than the per-tensor limit (ir/limits.h).
  numel_ = type_.numel();
  size_t n = static_cast<size_t>(check_tensor_bytes(type_, ""));
  if (type_.dtype == DType::String) {  // objects, not bytes: constructed and destroyed as such
    std::string* s = new std::string[static_cast<size_t>(numel_) + 1];
    data_ = std::shared_ptr<uint8_t[]>(reinterpret_cast<uint8_t*>(s),
                                       [](uint8_t* p) { delete[] reinterpret_cast<std::string*>(p); });
    return;
  }
  // Over-allocate a little so 16-bit and 8-bit tensors can be read as
  // vectors by kernels without special tails.
  data_ = std::shared_ptr<uint8_t[]>(new uint8_t[n + 64]());
}

Tensor Tensor::scalar(DType dtype, double v) {
  Tensor t(dtype, {});
  t.set_double(0, v);
  return t;
}

Tensor Tensor::from_strings(Shape shape, const std::vector<std::string>& values) {
  Tensor t(DType::String, std::move(shape));
  std::string* d = t.strings();
  for (size_t i = 0; i < values.size() && i < size_t(t.numel()); ++i) d[i] = values[i];
  return t;
}

std::span<const uint8_t> Tensor::bytes() const {
  if (dtype() == DType::String) fail("a string tensor has no element bytes");
  return {data_.get(), nbytes()};
}

std::string* Tensor::strings() {
  if (dtype() != DType::String) fail("{} tensor read as strings", dtype_name(dtype()));
  return reinterpret_cast<std::string*>(data_.get());
}

const std::string* Tensor::strings() const { return const_cast<Tensor*>(this)->strings(); }

namespace {
template <typename T>
double load_double(DType dt, const T* p) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    if (is_low_bit_float(dt)) return low_bit_to_float(dt, *p);
  }
  if constexpr (std::is_same_v<T, uint16_t>) {
    if (dt == DType::F16) return half_to_float(*p);
    if (dt == DType::BF16) return bf16_to_float(*p);
  }
  return static_cast<double>(*p);
}
template <typename T>
void store_double(DType dt, T* p, double v) {
  if constexpr (std::is_same_v<T, uint16_t>) {
    if (dt == DType::F16) {
      *p = float_to_half(static_cast<float>(v));
      return;
    }
    if (dt == DType::BF16) {
      *p = float_to_bf16(static_cast<float>(v));
      return;
    }
  }
  if constexpr (std::is_integral_v<T>) {
    if (dt == DType::Bool) {
      *p = v != 0;
      return;
    }
    // Low-bit types as ONNX's Cast makes them (saturating float8).
    if (is_low_bit_float(dt)) {
      *p = static_cast<T>(low_bit_code_of(dt, static_cast<float>(round_to_low_bit(dt, v))));
      return;
    }
    if (is_low_bit_int(dt)) {
      *p = static_cast<T>(float_to_low_bit_int(dt, v));
      return;
    }
    // A double outside T's range converts with undefined behaviour in C++;
    // kiln defines it as x86 and numpy do: truncate to int64, then wrap to
    // T's width (uint64 keeps its upper half); NaN is 0, beyond int64 saturates.
    if (v != v) {
      *p = 0;
      return;
    }
    const double t = std::trunc(v);
    if constexpr (std::is_same_v<T, uint64_t>) {
      if (t >= 0 && t < 18446744073709551616.0) {
        *p = static_cast<uint64_t>(t);
        return;
      }
    }
    if (t >= -9223372036854775808.0 && t < 9223372036854775808.0) {
      *p = static_cast<T>(static_cast<int64_t>(t));  // modular narrowing (C++20)
      return;
    }
    *p = t < 0 ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
    return;
  }
  *p = static_cast<T>(v);
}
}  // namespace

double Tensor::get_double(int64_t i) const {
  return dispatch_storage(dtype(), [&](auto z) -> double {
    using T = decltype(z);
    return load_double(dtype(), data<T>() + i);
  });
}

int64_t Tensor::get_int(int64_t i) const {
  return dispatch_storage(dtype(), [&](auto z) -> int64_t {
    using T = decltype(z);
    if constexpr (std::is_integral_v<T>) {
      if (dtype() != DType::F16 && dtype() != DType::BF16 && !is_low_bit_float(dtype()))
        return static_cast<int64_t>(data<T>()[i]);
    }
    return static_cast<int64_t>(load_double(dtype(), data<T>() + i));
  });
}

void Tensor::set_double(int64_t i, double v) {
  dispatch_storage(dtype(), [&](auto z) {
    using T = decltype(z);
    store_double(dtype(), data<T>() + i, v);
  });
}

void Tensor::set_int(int64_t i, int64_t v) {
  dispatch_storage(dtype(), [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_integral_v<T>) {
      if (dtype() == DType::Bool) {
        data<T>()[i] = v != 0;
        return;
      }
      if (is_low_bit_int(dtype())) {
        data<T>()[i] = static_cast<T>(wrap_low_bit_int(dtype(), v));
        return;
      }
      if (dtype() != DType::F16 && dtype() != DType::BF16 && !is_low_bit_float(dtype())) {
        data<T>()[i] = static_cast<T>(v);
        return;
      }
    }
    store_double(dtype(), data<T>() + i, static_cast<double>(v));
  });
}

std::vector<int64_t> Tensor::to_int_vector() const {
  std::vector<int64_t> r(numel_);
  for (int64_t i = 0; i < numel_; ++i) r[i] = get_int(i);
  return r;
}

Tensor Tensor::view(TensorType type, void* data) {
  if (type.dtype == DType::String) fail("a string tensor cannot view a caller's buffer");
  Tensor t;
  t.type_ = std::move(type);
  t.numel_ = t.type_.numel();
  // The aliasing constructor: no owner, nothing freed.
  t.data_ = std::shared_ptr<uint8_t[]>(std::shared_ptr<uint8_t[]>(), static_cast<uint8_t*>(data));
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  KILN_CHECK(shape_numel(shape) == numel_, "reshape {} -> {}", shape_str(this->shape()), shape_str(shape));
  Tensor t = *this;
  t.type_.shape = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(type_);
  if (dtype() == DType::String) std::copy(strings(), strings() + numel_, t.strings());
  else if (numel_ > 0) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

Tensor Tensor::cast(DType to) const {
  if (dtype() == DType::String || to == DType::String)  // ONNX's text rules are the cast_string op's (ops/)
    fail("Tensor::cast does not convert {} to {}", dtype_name(dtype()), dtype_name(to));
  Tensor t(to, shape());
  bool int_path = !computes_as_float(dtype()) && !computes_as_float(to);
  for (int64_t i = 0; i < numel_; ++i) {
    if (int_path) t.set_int(i, get_int(i));
    else t.set_double(i, get_double(i));
  }
  return t;
}

bool Tensor::same_bytes(const Tensor& o) const {
  if (type_ != o.type_) return false;
  if (dtype() == DType::String) return std::equal(strings(), strings() + numel_, o.strings());
  return numel_ == 0 || std::memcmp(raw(), o.raw(), nbytes()) == 0;
}

}  // namespace kiln
