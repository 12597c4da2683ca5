// Tensor types (dtype, shape, layout tag) and host tensors with data.
// A dim is a known non-negative integer, or a symbolic dim (ir/symbolic_dim.h)
// in a graph imported with dynamic shapes; a tensor with data is always static.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace kiln {

using Shape = std::vector<int64_t>;

// Element count with overflow checks (throws kiln::Error on negative dims or
// overflow past 2^62).
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "1x3x224x224" style, "scalar" for {}

// The layout tag of a value. Default: the dims are the model's (NCHW for
// images), stored row-major. NHWC: the value is a channels-first tensor
// [N, C, S...] whose dims are listed, and stored row-major, in the physical
// channels-last order [N, S..., C] (so f16[1,56,56,64]{nhwc} holds a
// [1,64,56,56] activation). Chosen by the layout pass; printed `{nhwc}` after
// the type; see docs/ir.md "Layouts".
enum class Layout : uint8_t { Default, NHWC };

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;
  Layout layout = Layout::Default;

  TensorType() = default;
  TensorType(DType d, Shape s, Layout l = Layout::Default) : dtype(d), shape(std::move(s)), layout(l) {}
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool operator==(const TensorType& o) const = default;
  std::string str() const;  // "f32[1,3,224,224]", "f16[1,64,56,56]{nhwc}"
};

// A host tensor: a type and contiguous row-major storage shared between
// copies (constants are large and copied often). Writers own the only copy.
// A string tensor's storage is an array of std::string (strings()); its
// numeric accessors (get_double, set_int, cast, bytes) throw kiln::Error.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(TensorType type);  // zero-filled
  Tensor(DType dtype, Shape shape) : Tensor(TensorType(dtype, std::move(shape))) {}

  template <typename T>
  static Tensor from(DType dtype, Shape shape, const std::vector<T>& values) {
    Tensor t(dtype, std::move(shape));
    for (size_t i = 0; i < values.size() && i < size_t(t.numel()); ++i) t.set_double(i, static_cast<double>(values[i]));
    return t;
  }
  static Tensor scalar(DType dtype, double v);
  // A string tensor holding `values` in row-major order (as many as the shape holds).
  static Tensor from_strings(Shape shape, const std::vector<std::string>& values);
  // A tensor over memory it does not own (a caller's buffer the runtime
  // reads in place): the memory must hold type.numel() elements and outlive
  // every copy of the tensor. It lacks the tail slack of an owned tensor, so
  // kernels that read 16- or 8-bit tensors as vectors must not get one.
  static Tensor view(TensorType type, void* data);

  const TensorType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }
  int rank() const { return type_.rank(); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return numel_ * dtype_size(type_.dtype); }
  bool has_data() const { return data_ != nullptr || numel_ == 0; }

  void* raw() { return data_.get(); }
  const void* raw() const { return data_.get(); }
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(data_.get());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(data_.get());
  }
  // The elements' bytes (not for string tensors: their bytes are objects).
  std::span<const uint8_t> bytes() const;
  // The elements of a string tensor (kiln::Error for any other dtype).
  std::string* strings();
  const std::string* strings() const;

  // Element access converting through double / int64 (slow; for small
  // tensors such as shapes, indices and test comparisons).
  double get_double(int64_t i) const;
  int64_t get_int(int64_t i) const;
  void set_double(int64_t i, double v);
  void set_int(int64_t i, int64_t v);
  std::vector<int64_t> to_int_vector() const;

  // Same data, new shape (element counts must match).
  Tensor reshaped(Shape shape) const;
  // Deep copy with its own storage.
  Tensor clone() const;
  // Converts every element (float<->int truncation as static_cast; to bool is != 0).
  Tensor cast(DType to) const;
  // True when all elements are bitwise equal (strings: equal characters).
  bool same_bytes(const Tensor& o) const;
  bool operator==(const Tensor& o) const { return same_bytes(o); }

 private:
  TensorType type_;
  int64_t numel_ = 0;
  std::shared_ptr<uint8_t[]> data_;
};

}  // namespace kiln
