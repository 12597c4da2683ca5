// The kernel that appends a decoder step's keys or values to a KV cache bound
// in place (runtime/in_place_cache.h, docs/dynamic_shapes.md "KV cache in
// place"): the concat(past, new) that passes/kv_cache_in_place.cpp marks,
// run on one caller buffer that already holds the past. It writes only the
// new positions, at offset `past` along the axis, each row of the outer dims
// `capacity` positions apart; the past is not read or copied. A GPU plan with
// shape profiles carries it beside the concat's own kernel, and the runtime
// launches it in the concat's place while the pair is bound in place.
#pragma once
#include <string>
#include <vector>

#include "codegen/core/size_expr.h"
#include "ir/tensor.h"

namespace kiln::codegen {

struct KvAppendKernel {
  std::string name;    // kiln_kv_append_<dtype>_<16 hex digits of the source's hash>
  std::string source;  // complete translation unit; buffers: (present, added), then kiln_syms
  unsigned block = 256;
  std::vector<std::string> symbols;  // its kiln_syms slots, in order
  GridAxisExpr grid[3];              // x: the new elements over 256 per block (capped), y, z: 1
};

// `past` and `added`: the concat's operands (symbolic dims allowed), appended
// along `axis`; `capacity_symbol`: the symbol whose value is the buffer's
// positions along the axis (passes/kv_cache_in_place.h). Throws kiln::Error
// for operands that do not agree off the axis.
KvAppendKernel emit_kv_append(DType dtype, const Shape& past, const Shape& added, int axis,
                              const std::string& capacity_symbol);

}  // namespace kiln::codegen
