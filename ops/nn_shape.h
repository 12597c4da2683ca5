// Output-size and padding arithmetic of convolution and pooling windows,
// shared by the nn ops' inference (ops/conv_ops.cpp, ops/pool_ops.cpp) and
// the ONNX adapters that resolve auto_pad into explicit pads
// (frontend/adapters_nn.cpp), so both agree by construction.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::ops {

// floor(a / b) for b > 0 (C++ '/' truncates toward zero).
inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0)) ? q - 1 : q;
}
inline int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// Extent of a dilated kernel: (k - 1) * dilation + 1.
inline int64_t effective_kernel(int64_t k, int64_t dilation) { return (k - 1) * dilation + 1; }

// Output length of a convolution or pooling window along one axis, or -1
// when the (dilated) kernel does not fit in the padded input.
// ceil_mode (pooling only) rounds the window count up, but, as PyTorch and
// ONNX Runtime do, drops a last window that would start past the input and
// the begin padding (it would see only end padding).
int64_t window_out_dim(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin, int64_t pad_end, int64_t dilation,
                       bool ceil_mode = false);

// ONNX auto_pad for Conv and pooling: SAME_UPPER / SAME_LOWER pick pads
// so that out = ceil(in / stride), the odd pad going to the end (UPPER) or to
// the beginning (LOWER); VALID means no padding. Returns {begin, end}.
// `mode` is the ONNX string; NOTSET is not handled here (pads are explicit).
struct PadPair {
  int64_t begin = 0, end = 0;
};
PadPair same_pads(const std::string& mode, int64_t in, int64_t kernel, int64_t stride, int64_t dilation);

// ConvTranspose: output length for explicit pads, and the pads that give a
// requested output length (`total` may be negative: extra output past the
// end of the full result, filled by zeros / bias). As the ONNX spec says,
// SAME_UPPER puts the larger half of the total at the end, anything else
// (SAME_LOWER, NOTSET with output_shape) at the beginning.
int64_t conv_transpose_out_dim(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin, int64_t pad_end,
                               int64_t dilation, int64_t output_padding);
PadPair conv_transpose_pads_for_output(const std::string& mode, int64_t in, int64_t kernel, int64_t stride,
                                       int64_t dilation, int64_t output_padding, int64_t out);

}  // namespace kiln::ops
