// The three forms of an op whose result size depends on data (nonzero,
// non_max_suppression, topk; ir/data_dependent.h, docs/dynamic_shapes.md):
//
//   static   no attribute: the deciding operand's value is known at compile
//            time and the size is a number (what kiln always did);
//   symbol   {size_symbol="s"}: the size is the graph's symbol s, bound when
//            the node runs; the node's reference kernel does not run it
//            directly (backends/data_dependent_run.h lowers it);
//   bounded  {bounded=1} (nonzero, non_max_suppression): what the lowering
//            runs: the result is allocated at its upper bound and a second
//            result, i64[], holds the count (entries past it are 0), as the
//            generated kernels write it on a device.
#pragma once
#include <string>

#include "ir/data_dependent.h"
#include "ir/op_registry.h"

namespace kiln::ops {

enum class SizeForm { Static, Symbol, Bounded };

// The node's form; fails naming the node for both attributes at once or a
// bounded other than 0/1. The op checks its result count for the form.
SizeForm size_form(InferContext& c);

// The symbolic dim of the node's size symbol (symbol form).
int64_t size_symbol_dim(InferContext& c);

// A reference kernel refusing the symbol form: it runs lowered.
[[noreturn]] void refuse_unlowered(const KernelContext& k);

}  // namespace kiln::ops
