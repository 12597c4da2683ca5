// The sizes of one attention kernel (codegen/emitters/attention/emit_attention.h)
// as kernel text. A static kernel writes its dims as numbers, the text it has
// always had (static plans stay byte-identical). A shape-generic kernel (a
// plan with shape profiles, docs/dynamic_shapes.md) takes the symbols'
// values as its last parameter `kiln_syms ks` and computes the batch, the
// query length and the key length (past + seq in a KV-cache decoder) from
// their polynomials at the start of the kernel; heads and head dims stay
// static. Its grid is three axes of the symbols: x = batch * heads, y = query
// tiles, z = key splits (split-KV, tensor-core kernel), so no axis multiplies
// two symbolic counts the plan's grid expressions cannot hold.
//
// Keys and values read from a KV cache that may be bound in place (the
// attention's k_capacity / v_capacity, passes/kv_cache_in_place.cpp) are
// rows `capacity` positions apart, not Sk: the kernel takes the capacity
// symbol's value as one more kiln_syms slot and steps over K / V rows by it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/core/size_expr.h"
#include "ir/graph.h"
#include "ir/symbolic_dim.h"

namespace kiln::codegen {

struct AttentionDims {
  bool generic = false;
  KernelSymbols syms;
  int64_t B = 0, H = 0, Sq = 0, Sk = 0, D = 0, Dv = 0;  // handles where symbolic
  // Positions between the starts of two K / V rows: Sk, or the capacity
  // symbol's dim (generic kernels only).
  int64_t k_rows = 0, v_rows = 0;
  SymbolBindings smallest, largest;  // the symbols' ranges (generic only)

  // q [B,H,Sq,D], k [B,H,Sk,D], v [B,H,Sk,Dv] and the mask's shape (empty:
  // none). Throws kiln::Unsupported naming what a shape-generic kernel
  // cannot take: a symbolic head count or head dim, a dim whose polynomial
  // has a negative coefficient (its largest value is then not at the
  // symbols' largest), or symbols without a range.
  // `k_capacity` / `v_capacity`: the attention's attributes of those names
  // ("": K / V are dense).
  static AttentionDims of(const TensorType& q, const TensorType& k, const TensorType& v, const Shape& mask,
                          const SymbolBindings& smallest, const SymbolBindings& largest,
                          const std::string& k_capacity = "", const std::string& v_capacity = "");
  // Whether K or V rows are a capacity apart (not Sk).
  bool strided() const { return k_rows != Sk || v_rows != Sk; }

  // A dim's value at the largest / smallest shapes (itself when static).
  int64_t max(int64_t d) const;
  int64_t min(int64_t d) const;
  // The kernel text of a dim: "128" for a static kernel; for a generic one
  // the variable the prologue declares (sq_, sk_, b_) or, for any other
  // dim, its polynomial over ks ("(4LL*ks.v[0])").
  std::string text(int64_t d) const;
  // Generic only: declarations of b_, sq_, sk_ (long long) from ks.
  std::string prologue(const std::string& indent) const;
};

// The symbols' smallest and largest values, from the top-level graph that
// owns `n` (empty when its graph declares none).
void symbol_ranges_of(const Node& n, SymbolBindings& smallest, SymbolBindings& largest);

}  // namespace kiln::codegen
