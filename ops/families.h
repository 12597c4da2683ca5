// One registration function per op family file in this folder.
#pragma once
#include "ir/op_registry.h"

namespace kiln::ops {

void register_elementwise_ops(OpRegistry& r);  // elementwise.cpp: math, activations, logic, cast, where, clip
void register_shape_ops(
    OpRegistry& r);  // shape_ops.cpp: reshape, transpose, concat, split, slice, pad, expand, tile...
void register_index_ops(
    OpRegistry& r);  // index_ops.cpp: gather*, scatter*, one_hot, nonzero, compress, unique, trilu...
void register_reduction_ops(OpRegistry& r);  // reduction_ops.cpp: reduce_*, argmax/argmin, cumsum, cumprod, topk
void register_normalization_ops(
    OpRegistry& r);  // normalization_ops.cpp: softmax family, batch/layer/instance/group norm, lrn, losses
void register_nn_ops(OpRegistry& r);      // nn_ops.cpp: conv, conv_transpose, pooling, resize, depth/space
void register_linalg_ops(OpRegistry& r);  // linalg_ops.cpp: matmul, gemm, einsum, quantized matmul/conv
void register_misc_ops(OpRegistry& r);
void register_string_ops(OpRegistry& r);  // string_ops.cpp: string_equal/concat/split, regex, normalizer, casts,
                                          // label_encoder (reference kernels only)
void register_bitcast_op(
    OpRegistry& r);  // bitcast_op.cpp: bitcast (ONNX BitCast)    // misc_ops.cpp: identity, range, rnn family, ...

}  // namespace kiln::ops
