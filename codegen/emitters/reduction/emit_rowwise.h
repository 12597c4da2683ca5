// Single-pass row kernels for softmax / log_softmax, layer normalization and
// group / instance normalization (NCHW) over contiguous rows (docs/codegen.md "Bandwidth-bound kernels").
//
// The input is viewed as [rows, count] (rows contiguous). Each row is read
// from global memory once into registers -- a warp per row for rows of at
// most 1024 elements (4 rows per 128-thread block, or 2 or 1 where 4 would
// leave some of an H100's 132 SMs without a block; shuffles only, no block
// barrier), a block per row for longer ones (64..1024 threads) -- then the
// statistics are folded from the registers and the results stored: one read
// and one write per element instead of the 2-3 passes of the generic
// reduction kernels. Thread t of a row holds the vectors t, t+T, t+2T... of
// W elements (16 bytes of the dtype) when the row length is a multiple of W
// and operand 0 and result 0 are plain buffers; the loads and stores are then
// 16-byte vector accesses when both buffers are aligned (tested at run time;
// otherwise the same slots are filled element by element). Rows longer than
// kMaxRegisterRow elements return nullopt: the callers keep their multi-pass
// kernels.
//
// Statistics are computed in the compute type (float for f16/bf16/f32,
// double for f64): per-thread partial sums of at most 32 elements, then a
// shuffle tree.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/emitters/reduction/emit_reduction.h"
#include "codegen/core/kernel_io.h"
#include "ir/attribute.h"
#include "ir/tensor.h"

namespace kiln::codegen {

// The longest row held in registers: 1024 threads x 32 elements.
inline constexpr int64_t kMaxRegisterRow = 32768;

// softmax / log_softmax of `in` over rows of `count` contiguous elements
// (the axis, every later dim being 1) through `io`.
std::optional<ReductionKernel> emit_row_softmax(bool log_softmax, const TensorType& in, int64_t count,
                                                const AnchorIO& io);

// layer_normalization of ops[0] over its axes from `axis` on (normalized),
// scale ops[1], optional bias ops[2], results: y, optional mean, inv_std.
std::optional<ReductionKernel> emit_row_layer_norm(int axis, float epsilon, const std::vector<TensorType>& ops,
                                                   const std::vector<TensorType>& results, const AnchorIO& io);

// group / instance normalization in the NCHW layout: x [N, C, S...], each
// (n, group) a row of C / groups * prod(S) contiguous elements; scale ops[1]
// and bias ops[2] per channel.
std::optional<ReductionKernel> emit_row_group_norm(const std::string& op, int64_t groups, float epsilon,
                                                   const std::vector<TensorType>& ops,
                                                   const std::vector<TensorType>& results, const AnchorIO& io);

// The index expression into a parameter of shape `ps` broadcast over the
// normalized block `ns` (leading dims of ps beyond ns's rank are 1) at the
// block's flat position `r`; the statements it needs go to `code`, each
// written as line_prefix + statement + line_end (the row and block kernels
// lay out their code differently). Shared by the row kernels and the
// multi-pass normalization kernels (emit_normalization.cpp).
std::string broadcast_param_index(const Shape& ps, const Shape& ns, const std::string& name, std::string& code,
                                  std::string_view line_prefix, std::string_view line_end);

}  // namespace kiln::codegen
