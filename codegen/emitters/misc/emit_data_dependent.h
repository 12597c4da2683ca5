// Kernels for the bounded forms of the ops whose result size depends on data
// (ops/data_dependent_size.h): the result is allocated at its upper bound and
// the kernel writes the count into a second result, i64[], on the device, the
// way a GPU run learns it (one 8-byte read, then the consumers are specialised
// to it; backends/data_dependent_run.h). Entries past the count are written 0,
// as the reference writes them. topk with a k decided at run time needs no
// kernel of its own: it runs as topk with k = the axis size (emit_select.h).
//
// nonzero {bounded=1}(x) -> (i64[rank, N], count): one block of 256 threads
// walks x in chunks of 256 elements; each chunk's non-zero flags get a block
// inclusive scan (Hillis-Steele in shared memory), which gives every non-zero
// element its column, so the coordinates come out in row-major order as the
// reference's. One block keeps the order without a grid-wide scan; it is
// O(N / 256 * log 256) steps, fine for the masks detection heads and
// conformance see; a multi-block scan (decoupled look-back) would be the next
// step for inputs of millions of elements.
//
// non_max_suppression {bounded=1}(boxes f32[B, n, 4], scores f32[B, C, n])
// -> (i64[M, 3], count), M = B * C * min(max_output_boxes_per_class, n): one
// block of 256 threads takes the (batch, class) pairs in order. For each,
// every thread ranks its share of the candidates (score above the threshold)
// by counting those ahead of it (higher score, or equal with a lower index:
// the reference's stable descending sort), writing the order into scratch
// (i64[2n]: the order, then the kept boxes); then the candidates are visited
// in order, each tested against the kept boxes by all threads at once
// (__syncthreads_or), kept when none suppresses it, until
// max_output_boxes_per_class are kept. IoU in f32 with the reference's
// operations in its order (degenerate boxes never suppress), so the selection
// is the reference's exactly. The ranking is O(n^2) per class: fine for the
// few thousand boxes of a detection head, not for 10^5.
#pragma once
#include <vector>

#include "codegen/emitters/misc/emit_misc_ops.h"
#include "ir/attribute.h"
#include "ir/tensor.h"

namespace kiln::codegen {

// x: the operand; results: i64[rank, N] and i64[] (the bounded form's).
SimpleKernel emit_nonzero_bounded(const TensorType& x, const std::vector<TensorType>& results);

// boxes, scores and the two results of the bounded form; attrs: the node's.
// `valid_count`: the node's third operand, the number of valid boxes (i64,
// one element), is a kernel parameter after the scores; boxes past it are
// never candidates.
SimpleKernel emit_nms_bounded(const AttrMap& attrs, const TensorType& boxes, const TensorType& scores,
                              const std::vector<TensorType>& results, bool valid_count = false);

}  // namespace kiln::codegen
