#include "ops/data_dependent_size.h"

#include "ir/data_dependent.h"
#include "ir/symbolic_dim.h"

namespace kiln::ops {

SizeForm size_form(InferContext& c) {
  const bool sym = c.attrs().has(kSizeSymbolAttr);
  const int64_t bounded = c.attrs().get_int("bounded", 0);
  if (bounded != 0 && bounded != 1) c.fail("bounded must be 0 or 1, got {}", bounded);
  if (sym && bounded) c.fail("{} and bounded=1 exclude each other", kSizeSymbolAttr);
  if (sym) return SizeForm::Symbol;
  return bounded ? SizeForm::Bounded : SizeForm::Static;
}

int64_t size_symbol_dim(InferContext& c) {
  std::string name = c.attrs().get_string(kSizeSymbolAttr, "");
  if (!is_symbol_name(name)) c.fail("{} \"{}\" is not a valid symbol name", kSizeSymbolAttr, name);
  return symbol_dim(name);
}

void refuse_unlowered(const KernelContext& k) {
  throw Error(fmt::format(
      "{}: its result size is decided at run time ({}=\"{}\"): it runs lowered to its bounded form, through "
      "run_with_data_dependent_sizes (backends/data_dependent_run.h)",
      k.label, kSizeSymbolAttr, k.attrs.get_string(kSizeSymbolAttr, "")));
}

}  // namespace kiln::ops
