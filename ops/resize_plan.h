// The resize reference's per-axis interpolation plan (ops/resize_ops.cpp),
// exposed so code generators use exactly the same taps and weights: for each
// axis and output coordinate, the input indices and weights of its taps (1
// for nearest; 2/4 or more with antialias for linear/cubic; edge-clamped,
// exclude_outside renormalised), and whether the coordinate lies outside a
// tf_crop_and_resize crop (the output is then extrapolation_value).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/shape_utils.h"

namespace kiln::ops {

struct ResizeAxisTaps {
  std::vector<int64_t> begin;    // [out coord] -> first tap; out + 1 entries
  std::vector<int64_t> index;    // per tap: input index along the axis
  std::vector<double> weight;    // per tap
  std::vector<uint8_t> outside;  // per out coord
};

struct ResizePlan {
  bool nearest = true;       // mode nearest: one tap per axis, a copy
  double extrapolation = 0;  // value outside the crop
  std::vector<ResizeAxisTaps> axes;
};

// Throws kiln::Error for attributes resize's inference rejects.
ResizePlan resize_plan(const AttrMap& attrs, const Shape& in, const std::string& label);

}  // namespace kiln::ops
