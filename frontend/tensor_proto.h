// ONNX TensorProto <-> kiln Tensor, in every storage form (typed fields,
// raw_data, external data with path and bounds checks).
#pragma once
#include <onnx/onnx_pb.h>

#include <optional>
#include <string>

#include "ir/tensor.h"

namespace kiln {

// ONNX elem_type -> DType; throws kiln::Unsupported for string/complex/etc.
DType dtype_from_onnx(int elem_type, const std::string& context);
int dtype_to_onnx(DType t);
// The low-bit types by their ONNX numbers (17..26); nullopt / 0 otherwise.
std::optional<DType> low_bit_dtype_from_onnx(int elem_type);
int low_bit_dtype_to_onnx(DType t);

// `base_dir` is the model's folder for external data; "" forbids external data.
Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir, const std::string& context);
onnx::TensorProto tensor_to_proto(const Tensor& t, const std::string& name);

// Reads a serialized TensorProto file (test_data_set_N/input_K.pb).
Tensor read_tensor_pb(const std::string& path, std::string* name = nullptr);

}  // namespace kiln
