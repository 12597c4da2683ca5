// Dynamic shapes at import (docs/dynamic_shapes.md): the dims of a model
// input that --shapes does not fix become symbolic dims whose ranges come
// from trtexec's --min-shapes / --max-shapes (--opt-shapes must lie between).
// A dim_param names its symbol, so inputs that share "batch" share one
// symbol; an unnamed dim gets "<input>_dim<i>". A dim equal in min and max is
// fixed, as trtexec takes min = max.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "frontend/onnx_import.h"
#include "ir/graph.h"

namespace onnx {
class TensorShapeProto;
}

namespace kiln {

// The symbols declared so far, for one import.
class InputSymbols {
 public:
  // The handle of symbol `name` with range [lo, hi], declared on first use;
  // a later use with another range is an error naming both inputs.
  int64_t declare(const std::string& name, int64_t lo, int64_t hi, const std::string& input, const std::string& ctx);
  const std::vector<SymbolDecl>& decls() const { return decls_; }

 private:
  std::vector<SymbolDecl> decls_;
  std::map<std::string, std::string> first_input_;
};

// The dims of input `input` (declared `shape`) from the ranges in `opts`.
// Errors (kiln::Error, prefixed with `ctx`) name the dim: a dim the model
// leaves open without a range, ranges of another rank, min > max, an opt
// outside [min, max], a range that contradicts a fixed dim, a dim_param
// that is not a valid symbol name.
Shape symbolic_input_dims(const onnx::TensorShapeProto& shape, const std::string& input, const ImportOptions& opts,
                          const std::string& ctx, InputSymbols& symbols);

}  // namespace kiln
