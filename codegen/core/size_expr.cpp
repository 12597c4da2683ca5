#include "codegen/core/size_expr.h"

#include <algorithm>

#include <fmt/format.h>

#include "ir/error.h"
#include "ir/floor_div_dims.h"
#include "ir/symbolic_dim.h"

namespace kiln::codegen {

KernelSymbols::KernelSymbols(const std::vector<Shape>& shapes) {
  for (const Shape& s : shapes)
    for (const std::string& name : shape_symbols(s)) names_.push_back(name);
  std::sort(names_.begin(), names_.end());
  names_.erase(std::unique(names_.begin(), names_.end()), names_.end());
  if (names_.size() > static_cast<size_t>(kMaxKernelSymbols))
    fail("a shape-generic kernel reads {} symbols ({}), at most {} are supported", names_.size(),
         fmt::join(names_, ", "), kMaxKernelSymbols);
}

std::string KernelSymbols::lit(int64_t dim) const {
  if (!is_symbolic_dim(dim)) return fmt::format("{}LL", dim);
  std::string out;
  for (const auto& [mono, coeff] : dim_poly(dim)) {
    std::string term = fmt::format("{}LL", coeff);
    for (const std::string& name : mono) {
      // A derived symbol (ir/floor_div_dims.h) from its base's slot: its
      // numerator is non-negative, so C's division is the floor.
      const auto derived = parse_derived_symbol(name);
      const std::string base = derived ? derived->base : name;
      auto at = std::find(names_.begin(), names_.end(), base);
      KILN_CHECK(at != names_.end(), "codegen: symbol {} is not one of the kernel's", base);
      if (!derived) term += fmt::format("*ks.v[{}]", at - names_.begin());
      else
        term += fmt::format("*(({}LL*ks.v[{}]+{}LL)/{}LL)", derived->times, at - names_.begin(), derived->plus,
                            derived->div);
    }
    out += out.empty() ? term : (coeff < 0 ? term : "+" + term);
  }
  return "(" + out + ")";
}

std::string KernelSymbols::struct_text() {
  return fmt::format(
      "#ifndef KILN_SYMS_DEFINED\n#define KILN_SYMS_DEFINED\n"
      "// The symbols' values of this launch's shape (docs/dynamic_shapes.md).\n"
      "struct kiln_syms {{\n  long long v[{}];\n}};\n#endif\n",
      kMaxKernelSymbols);
}

std::vector<int64_t> symbolic_strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc = dim_mul(acc, s[i]);
  }
  return st;
}

std::vector<int64_t> symbolic_broadcast_strides(const Shape& in, const Shape& out) {
  KILN_CHECK(in.size() <= out.size(), "codegen: rank {} does not broadcast to rank {}", in.size(), out.size());
  std::vector<int64_t> st(out.size(), 0);
  std::vector<int64_t> ist = symbolic_strides(in);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != 1 && in[i] != out[off + i])
      fail("codegen: [{}] does not broadcast to [{}]", dims_str(in), dims_str(out));
    st[off + i] = in[i] == 1 ? 0 : ist[i];
  }
  return st;
}

}  // namespace kiln::codegen
