// Private to the nn family (conv_ops.cpp, pool_ops.cpp, resize_ops.cpp,
// sample_ops.cpp, nn_ops.cpp): registration of each file's ops and the small
// helpers they share for reading window attributes.
#pragma once
#include <string>
#include <vector>

#include "ops/nn_shape.h"
#include "ops/op_helpers.h"

namespace kiln::ops::nn {

void register_conv_ops(OpRegistry& r);    // conv, conv_transpose, deform_conv, col2im
void register_pool_ops(OpRegistry& r);    // max/average/lp pooling, global pools, max_unpool
void register_resize_ops(OpRegistry& r);  // resize
void register_sample_ops(OpRegistry& r);  // grid_sample, roi_align

// Throws kiln::Error "label: message" (works in inference and kernels alike).
template <typename... Args>
[[noreturn]] void failf(const std::string& label, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(label + ": " + fmt::format(f, std::forward<Args>(args)...));
}

// Reads ints attribute `name` that must have exactly `n` entries, each >= min_value.
std::vector<int64_t> window_ints(const AttrMap& a, const std::string& name, size_t n, int64_t min_value,
                                 const std::string& label);

// Product of dims with overflow checks.
int64_t prod(const std::vector<int64_t>& dims);

// Row-major strides of a spatial shape.
std::vector<int64_t> row_strides(const std::vector<int64_t>& dims);

// Advances a multi-index over `dims` (last fastest); false after the last.
inline bool next_index(std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

// The float dtypes the nn ops compute on.
inline bool is_nn_float(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16; }

}  // namespace kiln::ops::nn
