// Symbolic spatial dims (H, W) of image ops: conv, conv_transpose, the
// window and global pools, instance and group normalization
// (docs/dynamic_shapes.md, "Symbolic image sizes"). Operand 0 is an image
// [N, C, S...] (layout nhwc: [N, S..., C]) whose batch and spatial dims may
// be symbolic; its channels and every other operand are static.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "ops/op_helpers.h"

namespace kiln::ops {

// A result's spatial dim along spatial axis `axis` for the input dim `in`
// (constant or symbolic), or nullopt with `why` set when it is not a
// polynomial over the symbols (ir/floor_div_dims.h).
using SpatialOut = std::function<std::optional<int64_t>(int axis, int64_t in, std::string& why)>;

// Inference with symbolic spatial dims: `infer` (the static inference) runs
// with the symbolic spatial dims of operand 0 replaced by stand-in values
// (and the batch through infer_symbolic_batch) to check everything else; a
// result dim that differs between stand-ins is the spatial result
// `spatial_out` gives for the input's dim at the same position (a result
// of operand 0's rank and layout), checked against the stand-ins' values.
// `spatial_out` null: the result's spatial dims equal the input's
// (normalizations). Without symbolic spatial dims: infer_symbolic_batch.
std::vector<TensorType> infer_symbolic_image(InferContext& c,
                                             const std::function<std::vector<TensorType>(InferContext&)>& infer,
                                             const SpatialOut& spatial_out);

// The output length of a conv/pool window over a (possibly symbolic) input
// dim, as ops/nn_shape.h's window_out_dim; nullopt with `why` when it is
// not a polynomial (a ceil_mode window whose last-window rule depends on
// the symbol) or does not fit.
std::optional<int64_t> symbolic_window_out_dim(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                                               int64_t pad_end, int64_t dilation, bool ceil_mode, std::string& why);

}  // namespace kiln::ops
