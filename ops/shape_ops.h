// Shared pieces of the shape / data-movement family (shape_ops.cpp,
// movement_ops.cpp): the strided byte copy every data-movement kernel is
// built on, and ONNX-style slice canonicalisation that adapters can reuse.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "ir/op_registry.h"
#include "ir/tensor.h"

namespace kiln::ops {

// For every index i of `shape` (row-major order):
//   dst[sum(i[d] * dst_strides[d])] = src[sum(i[d] * src_strides[d])]
// Strides are in elements and may be negative (src) or zero (broadcast);
// elements are `elem_size` bytes and copied without conversion, so every
// dtype works. Dims of size 1 are dropped and dims that are contiguous in
// both src and dst are merged, so contiguous runs become one memcpy.
void copy_strided(const void* src, const std::vector<int64_t>& src_strides, void* dst,
                  const std::vector<int64_t>& dst_strides, const Shape& shape, size_t elem_size);

// Fills `count` elements of `elem_size` bytes at dst with the element at `value`.
void fill_bytes(void* dst, const void* value, size_t elem_size, int64_t count);

// kiln's canonical slice: one (start, end, step) per input axis, with
//   step > 0:  0 <= start <= end <= dim
//   step < 0: -1 <= end <= start <= dim - 1   (start = end = -1 when dim == 0)
// and an empty range written as start == end. Element k along an axis reads
// input index start + k * step, for k < ceil((end - start) / step).
struct SliceSpec {
  std::vector<int64_t> starts, ends, steps;
  // The one axis whose dim is symbolic and sliced other than whole, or -1.
  // Its size (a clamp to a size known at run time, e.g. keep[:100] of the
  // boxes NMS kept) is no polynomial: its start/end/step are ONNX's, as
  // given, and the slice is data-dependent (docs/dynamic_shapes.md).
  int data_dependent_axis = -1;
};

// An ONNX Slice end at or past this reaches the end of any dim (exporters
// write INT64_MAX for an open end, as in x[2:] or x[:, None]).
inline constexpr int64_t kSliceOpenEnd = int64_t(1) << 62;

// Turns ONNX Slice operands (possibly negative, out of range, INT64_MAX/MIN,
// a subset of axes in any order, negative axes) into the canonical form for
// an input of shape `in`. `axes` empty means 0..starts.size()-1; `steps`
// empty means all 1. Throws kiln::Error on invalid values. A symbolic dim
// sliced from 0 to an open end with step 1 is taken whole; sliced otherwise,
// it is kiln::Unsupported unless `allow_data_dependent` (then it is
// data_dependent_axis; a second such axis is still Unsupported). A static
// dim sliced with step 1 from a static start to a symbolic end (BERT's
// position_ids[:, :seq] of a [1, 128] buffer) keeps the end symbolic when
// `ranges` (the graph's declared symbols) put it within [start, dim] at every
// value (symbolic_end_within); otherwise it is Unsupported.
SliceSpec canonical_slice(const Shape& in, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                          std::vector<int64_t> axes, std::vector<int64_t> steps, bool allow_data_dependent = false,
                          const std::vector<SymbolDecl>* ranges = nullptr);

// Whether the symbolic dim `end` lies within [lo, hi] for every value of its
// symbols in `ranges`: decided for polynomials with non-negative
// coefficients over symbols with non-negative ranges (monotone, so the ends
// of the ranges bound it); false for any other (kiln does not guess).
bool symbolic_end_within(int64_t end, int64_t lo, int64_t hi, const std::vector<SymbolDecl>& ranges);

// The axis of a slice node's operand shape `in` whose symbolic dim the
// attributes do not take whole (0:dim:1), or -1: the data-dependent axis of
// the slice's symbol form.
int data_dependent_slice_axis(const Shape& in, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                              const std::vector<int64_t>& steps);

// Number of elements a canonical (start, end, step) selects.
int64_t slice_extent(int64_t start, int64_t end, int64_t step);

// Registers concat, split, slice, pad (movement_ops.cpp); called by register_shape_ops.
void register_movement_ops(OpRegistry& r);

}  // namespace kiln::ops
