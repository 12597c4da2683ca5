// The nn family: convolution (conv_ops.cpp), pooling (pool_ops.cpp), resize
// (resize_ops.cpp), grid sampling and RoI align (sample_ops.cpp). This file
// holds the family's single registration entry and the window arithmetic of
// nn_shape.h shared with the ONNX adapters.
#include <algorithm>
#include <limits>

#include "ops/families.h"
#include "ops/nn_internal.h"

namespace kiln::ops {

int64_t window_out_dim(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin, int64_t pad_end, int64_t dilation,
                       bool ceil_mode) {
  int64_t span = in + pad_begin + pad_end - effective_kernel(kernel, dilation);
  if (span < 0 || stride < 1) return -1;
  if (!ceil_mode) return span / stride + 1;
  int64_t out = ceil_div(span, stride) + 1;
  if ((out - 1) * stride >= in + pad_begin) --out;
  return out;
}

PadPair same_pads(const std::string& mode, int64_t in, int64_t kernel, int64_t stride, int64_t dilation) {
  if (mode == "VALID") return {};
  int64_t out = ceil_div(in, stride);
  int64_t total = std::max<int64_t>(0, (out - 1) * stride + effective_kernel(kernel, dilation) - in);
  if (mode == "SAME_LOWER") return {total - total / 2, total / 2};
  return {total / 2, total - total / 2};  // SAME_UPPER
}

int64_t conv_transpose_out_dim(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin, int64_t pad_end,
                               int64_t dilation, int64_t output_padding) {
  return stride * (in - 1) + output_padding + effective_kernel(kernel, dilation) - pad_begin - pad_end;
}

PadPair conv_transpose_pads_for_output(const std::string& mode, int64_t in, int64_t kernel, int64_t stride,
                                       int64_t dilation, int64_t output_padding, int64_t out) {
  int64_t total = stride * (in - 1) + output_padding + effective_kernel(kernel, dilation) - out;
  if (mode == "SAME_UPPER") {
    int64_t b = floor_div(total, 2);
    return {b, total - b};
  }
  int64_t e = floor_div(total, 2);
  return {total - e, e};
}

namespace nn {

std::vector<int64_t> window_ints(const AttrMap& a, const std::string& name, size_t n, int64_t min_value,
                                 const std::string& label) {
  if (!a.has(name)) failf(label, "attribute '{}' is missing", name);
  std::vector<int64_t> v = a.get_ints(name);
  if (v.size() != n) failf(label, "attribute '{}' has {} entries, expected {}", name, v.size(), n);
  for (int64_t x : v)
    if (x < min_value) failf(label, "attribute '{}' has value {}, below the minimum {}", name, x, min_value);
  return v;
}

int64_t prod(const std::vector<int64_t>& dims) { return shape_numel(dims); }

std::vector<int64_t> row_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * dims[d + 1];
  return s;
}

}  // namespace nn

void register_nn_ops(OpRegistry& r) {
  nn::register_conv_ops(r);
  nn::register_pool_ops(r);
  nn::register_resize_ops(r);
  nn::register_sample_ops(r);
}

}  // namespace kiln::ops
