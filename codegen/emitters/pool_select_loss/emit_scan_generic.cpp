#include "codegen/emitters/pool_select_loss/emit_scan_generic.h"

#include <fmt/format.h>

#include "codegen/core/size_expr.h"
#include "codegen/emitters/pool_select_loss/block_scan_text.h"
#include "codegen/launch_fit.h"
#include "ir/error.h"
#include "ir/symbolic_dim.h"

namespace kiln::codegen {

namespace {

// The [outer, n, inner] extents around `axis`, each a dim (constant or symbolic).
struct GenericLines {
  int64_t outer = 1, n = 1, inner = 1;
};

GenericLines generic_lines(const Shape& s, int axis) {
  GenericLines g;
  for (int d = 0; d < axis; ++d) g.outer = dim_mul(g.outer, s[d]);
  g.n = s[axis];
  for (size_t d = axis + 1; d < s.size(); ++d) g.inner = dim_mul(g.inner, s[d]);
  return g;
}

}  // namespace

OpKernel emit_scan_generic(const std::string& op, const AttrMap& a, const TensorType& x, const TensorType& y) {
  const bool product = op == "cumprod";
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  int64_t axis = a.require_int("axis");
  if (rank == 0 || axis < -rank || axis >= rank) fail("codegen: {}: axis {} is out of range for {}", op, axis, x.str());
  if (axis < 0) axis += rank;
  const bool exclusive = a.get_int("exclusive", 0) != 0, reverse = a.get_int("reverse", 0) != 0;
  if (y.shape != x.shape || y.dtype != x.dtype) fail("codegen: {}: result {} does not fit {}", op, y.str(), x.str());
  const GenericLines g = generic_lines(x.shape, static_cast<int>(axis));
  const int64_t count = dim_mul(g.outer, g.inner);
  const KernelSymbols syms({x.shape});
  const std::string N = syms.lit(g.n), INNER = syms.lit(g.inner), COUNT = syms.lit(count);
  const bool fp = is_float(x.dtype);
  // As the static scan: integers combine as unsigned 64-bit (wrapping), stored truncated to the dtype.
  const std::string A = fp ? "double" : "unsigned long long";
  const std::string X = fp ? "double" : "long long";
  const std::string id = fmt::format("({}){}", A, product ? 1 : 0);
  auto combine = [&](const std::string& l, const std::string& r) {
    return fmt::format("{} {} {}", l, product ? "*" : "+", r);
  };
  const std::string at = g.inner == 1 ? "base + j" : fmt::format("base + j * {}", INNER);
  const std::string load_once = fmt::format("({})KILN_LOAD_X_ONCE({})", A, at);
  const std::string load_again = fmt::format("({})KILN_LOAD_X({})", A, at);
  const std::string store = exclusive ? (fp ? "before" : "(long long)before") : (fp ? "acc" : "(long long)acc");
  const std::string step = reverse ? fmt::format("({} - 1 - s)", N) : "s";
  const std::string base =
      g.inner == 1 ? fmt::format("o * {}", N) : fmt::format("(o / {0}) * ({1} * {0}) + o % {0}", INNER, N);
  auto walk = [&](const std::string& from, const std::string& to, const std::string& load, const std::string& ind) {
    std::string w;
    w += fmt::format("{}for (long long s = {}; s < {}; ++s) {{\n", ind, from, to);
    w += fmt::format("{}  const long long j = {};\n", ind, step);
    w += fmt::format("{}  const {} before = acc;\n", ind, A);
    w += fmt::format("{}  acc = {};\n", ind, combine("before", load));
    w += fmt::format("{}  KILN_STORE(0, {}, {});\n", ind, at, store);
    w += ind + "}\n";
    return w;
  };
  std::string b;
  b += fmt::format("  // {} (shape-generic): {} along axis {}: {} lines of {} (inner {}){}{}\n", op, x.str(), axis,
                   dim_str(count), dim_str(g.n), dim_str(g.inner), exclusive ? ", exclusive" : "",
                   reverse ? ", reverse" : "");
  OpKernel k;
  const bool block_per_line = !is_symbolic_dim(g.inner) && g.inner < 32 && (is_symbolic_dim(g.n) || g.n >= 128);
  if (!block_per_line) {
    b += fmt::format(
        "  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < {}; "
        "o += (long long)gridDim.x * blockDim.x) {{\n",
        COUNT);
    b += fmt::format("    const long long base = {};\n", base);
    b += fmt::format("    {} acc = {};\n", A, id);
    b += walk("0", N, load_once, "    ");
    b += "  }\n";
    k.block = block_threads(256);  // grid-stride: any block (codegen/launch_fit.h)
    k.grid_expr = GridAxisExpr{count, k.block, 8192};
  } else {
    // 128 threads: a chunk of one element each up to 128-element lines (an
    // encoder's sequence), longer chunks past it.
    k.block = block_threads(128);
    b += fmt::format("  __shared__ {} part[33];\n", A);
    b += fmt::format("  const long long n = {}, chunk = (n + blockDim.x - 1) / blockDim.x;\n", N);
    b += fmt::format("  for (long long o = blockIdx.x; o < {}; o += gridDim.x) {{\n", COUNT);
    b += fmt::format("    const long long base = {};\n", base);
    b += "    const long long from = threadIdx.x * chunk, to = from + chunk < n ? from + chunk : n;\n";
    // Pass 1: this thread's chunk total.
    b += fmt::format("    {} acc = {};\n", A, id);
    b += "    for (long long s = from; s < to; ++s) {\n";
    b += fmt::format("      const long long j = {};\n      acc = {};\n    }}\n", step, combine("acc", load_once));
    b += block_scan_of_chunk_totals(A, id, combine);
    b += walk("from", "to", load_again, "    ");
    b += "  }\n";
    k.grid_expr = GridAxisExpr{count, 1, 65535};
  }
  k.grid = 1;  // evaluated per shape
  const std::vector<ShellBuffer> buffers = {{y.dtype, "out0", true}, {x.dtype, "in0", false}};
  finish_op_kernel(k, "kiln_" + op, op, buffers, X, "", b, nullptr, &syms);
  return k;
}

}  // namespace kiln::codegen
