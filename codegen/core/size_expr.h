// Sizes of shape-generic kernels (docs/dynamic_shapes.md "Shape-generic GPU
// kernels"): in a plan with shape profiles a kernel's element counts,
// extents and strides may be symbolic dims (ir/symbolic_dim.h). Such a
// kernel takes the symbols' values at launch as its last parameter, one
// by-value `kiln_syms` struct (`ks`), and computes every size from its
// polynomial in generated code; its grid is a GridAxisExpr the runtime
// evaluates per shape. A kernel whose sizes are all constants takes no such
// parameter and its text is what it was before symbols existed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace kiln::codegen {

// At most this many symbols per kernel (the struct's array length).
inline constexpr int kMaxKernelSymbols = 8;

// The symbols one kernel reads, in sorted order: slot i is `ks.v[i]`.
class KernelSymbols {
 public:
  KernelSymbols() = default;
  // Every symbol of these shapes. Throws kiln::Error past kMaxKernelSymbols.
  explicit KernelSymbols(const std::vector<Shape>& shapes);
  bool empty() const { return names_.empty(); }
  const std::vector<std::string>& names() const { return names_; }
  // C text of a dim as a long long: a constant as "123LL", a symbolic dim as
  // its polynomial over ks.v[...], parenthesised ("(768LL*ks.v[0])").
  std::string lit(int64_t dim) const;
  // The struct definition (guarded: kernels may share a translation unit).
  static std::string struct_text();

 private:
  std::vector<std::string> names_;
};

// One grid axis of a shape-generic launch: min(ceil(items / per_block) *
// multiplier, cap) blocks, `items` a dim (constant or symbolic), evaluated
// per shape (a GEMM: ceil(M / BM) row tiles times its column tiles).
struct GridAxisExpr {
  int64_t items = 0;
  int64_t per_block = 1;
  unsigned cap = 0;  // 0: no cap
  int64_t multiplier = 1;
  bool operator==(const GridAxisExpr&) const = default;
};

// Row-major strides of a shape whose dims may be symbolic.
std::vector<int64_t> symbolic_strides(const Shape& s);
// numpy broadcast strides of `in` read at the coordinates of `out` (0 along
// broadcast dims), symbolic where the dims are.
std::vector<int64_t> symbolic_broadcast_strides(const Shape& in, const Shape& out);

}  // namespace kiln::codegen
