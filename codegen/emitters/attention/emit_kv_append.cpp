#include "codegen/emitters/attention/emit_kv_append.h"

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_params.h"
#include "ir/error.h"
#include "ir/symbolic_dim.h"

namespace kiln::codegen {

namespace {

constexpr unsigned kThreads = 256;
// A grid-stride loop covers the rest: a prefill of many positions needs no
// more blocks than keep every SM busy.
constexpr unsigned kMaxBlocks = 4096;

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p = dim_mul(p, s[i]);
  return p;
}

}  // namespace

KvAppendKernel emit_kv_append(DType dtype, const Shape& past, const Shape& added, int axis,
                              const std::string& capacity_symbol) {
  const size_t r = past.size();
  if (added.size() != r || axis < 0 || static_cast<size_t>(axis) >= r)
    fail("codegen: kv append: past [{}] and new [{}] along axis {} do not agree", dims_str(past), dims_str(added),
         axis);
  for (size_t i = 0; i < r; ++i)
    if (static_cast<int>(i) != axis && past[i] != added[i])
      fail("codegen: kv append: past [{}] and new [{}] differ off axis {}", dims_str(past), dims_str(added), axis);
  const int64_t rows = product(added, 0, axis), seq = added[axis], inner = product(added, axis + 1, r);
  const int64_t capacity = symbol_dim(capacity_symbol);
  KvAppendKernel k;
  const KernelSymbols syms({past, added, {capacity}});
  k.symbols = syms.names();
  k.block = kThreads;
  k.grid[0] = GridAxisExpr{dim_mul(dim_mul(rows, seq), inner), kThreads, kMaxBlocks, 1};
  k.grid[1] = k.grid[2] = GridAxisExpr{1, 1, 0, 1};
  const std::string T(cuda_storage_type(dtype));
  std::string b = KernelSymbols::struct_text();
  b += fmt::format(
      "// KV cache append in place: new [{}] written at positions past.. of a buffer of `{}` positions along "
      "axis {}\n",
      dims_str(added), capacity_symbol, axis);
  b += fmt::format(
      "extern \"C\" __global__ void @NAME@(KILN_PTR({0}) present, KILN_PTR(const {0}) added, kiln_syms ks) {{\n", T);
  b += fmt::format("  const long long rows = {}, seq = {}, inner = {}, past = {}, capacity = {};\n", syms.lit(rows),
                   syms.lit(seq), syms.lit(inner), syms.lit(past[axis]), syms.lit(capacity));
  b += "  const long long per_row = seq * inner, n = rows * per_row;\n";
  b += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n";
  b += "       i += (long long)gridDim.x * blockDim.x) {\n";
  b += "    const long long row = i / per_row, at = i - row * per_row;\n";
  b += "    present[(row * capacity + past) * inner + at] = added[i];\n  }\n}\n";
  b += kernel_sim_entry({{dtype, true, "present"}, {dtype, false, "added"}}, true);
  k.source = finish_kernel_source("kiln_kv_append", std::string(dtype_name(dtype)), b, {dtype}, k.name);
  return k;
}

}  // namespace kiln::codegen
