// Resource limits on what a model may make kiln allocate. Models come from
// strangers: a few bytes of protobuf can declare a tensor of 2^60 elements, so
// sizes are checked against these caps BEFORE anything is allocated.
//
// Process-wide. Defaults come from the machine's memory, overridden by the
// environment (KILN_MAX_TENSOR_BYTES, KILN_MAX_TOTAL_BYTES, read once on first
// use) and then by the CLI flags --max-tensor-bytes / --max-total-bytes.
// See docs/security.md.
#pragma once
#include <cstdint>
#include <string>

#include "ir/dtype.h"
#include "ir/tensor.h"

namespace kiln {

struct Limits {
  int64_t max_tensor_bytes = 0;                     // any one tensor: constant, input, intermediate, output
  int64_t max_total_bytes = 0;                      // all the weights (initializers, tensor attributes) of one model
  int max_subgraph_depth = 32;                      // nesting of subgraph attributes (ONNX Runtime's limit)
  int64_t max_model_file_bytes = int64_t(2) << 30;  // a .onnx file (protobuf's own 2 GiB limit)
};

// The current limits (initialised from the defaults and the environment).
Limits& limits();

// "4096", "64k", "512M", "16G", "1T" (powers of 1024) -> bytes; throws
// kiln::Error naming `what` on anything else.
int64_t parse_byte_size(const std::string& text, const std::string& what);

// Byte size of `numel` elements of `dtype` when it is within
// limits().max_tensor_bytes; otherwise throws kiln::Error "<context>: <type
// str> needs N bytes, over the limit of M bytes per tensor (...)".
int64_t check_tensor_bytes(const TensorType& type, const std::string& context);

}  // namespace kiln
