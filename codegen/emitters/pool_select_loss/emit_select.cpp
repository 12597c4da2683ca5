#include "codegen/emitters/pool_select_loss/emit_select.h"

#include <algorithm>

#include <fmt/format.h>

#include "codegen/emitters/pool_select_loss/block_scan_text.h"
#include "codegen/launch_fit.h"
#include "codegen/core/deciding_only.h"
#include "codegen/core/emit_expr.h"
#include "codegen/emitters/pool_select_loss/emit_scan_generic.h"
#include "ir/error.h"
#include "ir/symbolic_dim.h"

namespace kiln::codegen {

namespace {

struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t count() const { return outer * inner; }
};

Lines lines_of(const Shape& s, int axis) {
  Lines g;
  for (int d = 0; d < axis; ++d) g.outer *= s[d];
  g.n = s[axis];
  for (size_t d = axis + 1; d < s.size(); ++d) g.inner *= s[d];
  return g;
}

int norm_axis(const std::string& op, int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) fail("codegen: {}: axis {} is out of range for rank {}", op, axis, r);
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

// The comparison type: float (f16/bf16/f32), double (f64), unsigned long
// long (u64, compared unsigned as the reference's native type), long long.
std::string rank_type(DType t) {
  if (t == DType::F64) return "double";
  if (is_float(t)) return "float";
  if (t == DType::U64) return "unsigned long long";
  return "long long";
}

// Device functions @NAME@_above(a, b) (a ranks strictly before b in the
// op's order: larger, or smaller for `min`, a NaN before any number) and
// @NAME@_same(a, b).
std::string ranking(const std::string& A, bool fp, bool min) {
  std::string s;
  const char* cmp = min ? "<" : ">";
  if (fp) {
    s += fmt::format(
        "__device__ __forceinline__ bool @NAME@_above({0} a, {0} b) {{\n"
        "  if (a != a) return b == b;\n  if (b != b) return false;\n  return a {1} b;\n}}\n",
        A, cmp);
    s += fmt::format(
        "__device__ __forceinline__ bool @NAME@_same({0} a, {0} b) {{\n"
        "  return (a != a || b != b) ? (a != a && b != b) : a == b;\n}}\n",
        A);
  } else {
    s += fmt::format("__device__ __forceinline__ bool @NAME@_above({0} a, {0} b) {{ return a {1} b; }}\n", A, cmp);
    s += fmt::format("__device__ __forceinline__ bool @NAME@_same({0} a, {0} b) {{ return a == b; }}\n", A);
  }
  return s;
}

std::vector<ShellBuffer> buffers_for(const std::vector<TensorType>& operands, const std::vector<TensorType>& results) {
  std::vector<ShellBuffer> b;
  for (size_t r = 0; r < results.size(); ++r) b.push_back({results[r].dtype, fmt::format("out{}", r), true});
  for (size_t i = 0; i < operands.size(); ++i) b.push_back({operands[i].dtype, fmt::format("in{}", i), false});
  return b;
}

unsigned block_for(int64_t n) {
  int64_t b = 32;
  while (b < n && b < 256) b *= 2;
  return static_cast<unsigned>(b);
}

// Whether a line gets a block (long lines, few inner positions) or a thread.
bool block_per_line(const Lines& g) { return g.n >= 128 && g.inner < 32; }

std::string line_base(const Lines& g, const std::string& o) {
  if (g.inner == 1) return fmt::format("{} * {}LL", o, g.n);
  return fmt::format("({0} / {1}LL) * {2}LL + {0} % {1}LL", o, g.inner, g.n * g.inner);
}
std::string at(const Lines& g, const std::string& j) {
  return g.inner == 1 ? fmt::format("base + {}", j) : fmt::format("base + {} * {}LL", j, g.inner);
}

// argmax / argmin (results: the i64 index per line) and hardmax (one-hot).
OpKernel arg_extreme(const std::string& op, const AttrMap& a, const TensorType& x, const TensorType& y,
                     const KernelSeams* seams) {
  const bool hard = op == "hardmax";
  const bool is_min = op == "argmin";
  const bool last = !hard && a.get_int("select_last_index", 0) != 0;
  const int axis = norm_axis(op, hard ? a.get_int("axis", -1) : a.require_int("axis"), x.shape.size());
  const Lines g = lines_of(x.shape, axis);
  if (hard ? (y.shape != x.shape || y.dtype != x.dtype) : (y.dtype != DType::I64 || y.numel() != g.count()))
    fail("codegen: {}: result {} does not fit input {} along axis {}", op, y.str(), x.str(), axis);
  if (g.n == 0 && !hard) fail("codegen: {}: axis {} of {} is empty", op, axis, x.str());
  const std::string A = rank_type(x.dtype);
  const bool fp = is_float(x.dtype);
  // Take (v, vi) over (best, bi)?
  const std::string take =
      fmt::format("(@NAME@_above(v, best) || (@NAME@_same(v, best) && vi {} bi))", last ? ">" : "<");
  // The launch: a thread per line, or a block per line (long lines, inner < 32).
  const bool blk = block_per_line(g);
  OpKernel k;
  if (!blk) {
    k.block = block_threads(256);  // the one decision (codegen/launch_fit.h)
    k.grid = static_cast<unsigned>(std::min<int64_t>((g.count() + k.block - 1) / k.block, 8192));
  } else {
    k.block = block_threads(block_for(g.n));
    k.grid = static_cast<unsigned>(std::min<int64_t>(g.count(), 65535));
  }
  if (g.n == 0) k.grid = 0;                          // hardmax of an empty axis: nothing to write
  if (deciding_only()) return decided_op_kernel(k);  // decided; the rest is text (codegen/core/deciding_only.h)
  std::string helpers = ranking(A, fp, is_min);
  std::string b;
  b += fmt::format("  // {}: {} along axis {}: {} lines of {} (inner {}){}\n", op, x.str(), axis, g.count(), g.n,
                   g.inner, last ? ", last index of ties" : "");
  if (!blk) {
    b += "  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < " + std::to_string(g.count()) +
         "LL; o += (long long)gridDim.x * blockDim.x) {\n";
    b += fmt::format("    const long long base = {};\n", line_base(g, "o"));
    b += fmt::format("    {} best = 0;\n    long long bi = -1;\n", A);
    b += fmt::format("    for (long long vi = 0; vi < {}LL; ++vi) {{\n", g.n);
    b += fmt::format("      const {} v = ({})KILN_LOAD_X_ONCE({});\n", A, A, at(g, "vi"));
    b += fmt::format("      if (bi < 0 || {}) {{ best = v; bi = vi; }}\n    }}\n", take);
    if (hard) {
      b += fmt::format("    for (long long j = 0; j < {}LL; ++j) KILN_STORE(0, {}, j == bi ? 1.0f : 0.0f);\n", g.n,
                       at(g, "j"));
    } else {
      b += "    KILN_STORE(0, o, bi);\n";
    }
    b += "  }\n";
  } else {
    // The pair (best, bi) of every thread, combined by warp shuffles and
    // shared memory; every thread gets the line's answer.
    helpers += fmt::format(
        "__device__ __forceinline__ void @NAME@_fold({0}& best, long long& bi, {0} v, long long vi) {{\n"
        "  if (vi >= 0 && (bi < 0 || {1})) {{ best = v; bi = vi; }}\n}}\n",
        A, take);
    b += fmt::format("  __shared__ {} pv[33];\n  __shared__ long long pi[33];\n", A);
    b += fmt::format("  for (long long o = blockIdx.x; o < {}LL; o += gridDim.x) {{\n", g.count());
    b += fmt::format("    const long long base = {};\n", line_base(g, "o"));
    b += fmt::format("    {} best = 0;\n    long long bi = -1;\n", A);
    b += fmt::format("    for (long long vi = threadIdx.x; vi < {}LL; vi += blockDim.x) {{\n", g.n);
    b += fmt::format("      const {} v = ({})KILN_LOAD_X_ONCE({});\n", A, A, at(g, "vi"));
    b += "      @NAME@_fold(best, bi, v, vi);\n    }\n";
    b += "    for (int s = 16; s > 0; s >>= 1) {\n";
    b += fmt::format("      const {} v = __shfl_down_sync(0xffffffffu, best, s);\n", A);
    b += "      const long long vi = __shfl_down_sync(0xffffffffu, bi, s);\n";
    b += "      @NAME@_fold(best, bi, v, vi);\n    }\n";
    b += "    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n";
    b += "    __syncthreads();\n";
    b += "    if (lane == 0) { pv[warp] = best; pi[warp] = bi; }\n";
    b += "    __syncthreads();\n";
    b += "    if (warp == 0) {\n";
    b += "      best = pv[0];\n      bi = lane < (int)(blockDim.x >> 5) ? pi[lane] : -1;\n";
    b += "      if (bi >= 0) best = pv[lane];\n";
    b += "      for (int s = 16; s > 0; s >>= 1) {\n";
    b += fmt::format("        const {} v = __shfl_down_sync(0xffffffffu, best, s);\n", A);
    b += "        const long long vi = __shfl_down_sync(0xffffffffu, bi, s);\n";
    b += "        @NAME@_fold(best, bi, v, vi);\n      }\n";
    b += "      if (lane == 0) pi[32] = bi;\n    }\n";
    b += "    __syncthreads();\n";
    b += "    bi = pi[32];\n";
    if (hard) {
      b += fmt::format(
          "    for (long long j = threadIdx.x; j < {}LL; j += blockDim.x) KILN_STORE(0, {}, j == bi ? 1.0f : 0.0f);\n",
          g.n, at(g, "j"));
    } else {
      b += "    if (threadIdx.x == 0) KILN_STORE(0, o, bi);\n";
    }
    b += "  }\n";
  }
  finish_op_kernel(k, "kiln_sel", op, buffers_for({x}, {y}), A, helpers, b, seams);
  return k;
}

// cumsum and cumprod: the running sum or product (`op`), the one scan.
OpKernel scan(const std::string& op, const AttrMap& a, const TensorType& x, const TensorType& y,
              const KernelSeams* seams) {
  const bool product = op == "cumprod";
  const int axis = norm_axis(op, a.require_int("axis"), x.shape.size());
  const bool exclusive = a.get_int("exclusive", 0) != 0, reverse = a.get_int("reverse", 0) != 0;
  if (y.shape != x.shape || y.dtype != x.dtype) fail("codegen: {}: result {} does not fit {}", op, y.str(), x.str());
  const Lines g = lines_of(x.shape, axis);
  const bool fp = is_float(x.dtype);
  // Integers combine as unsigned 64-bit (wrapping: the low bits of a signed sum or product are the
  // unsigned one's; the store truncates to the dtype as the reference's cast does).
  const std::string A = fp ? "double" : "unsigned long long";
  const std::string X = fp ? "double" : "long long";
  const std::string id = fmt::format("({}){}", A, product ? 1 : 0);
  auto combine = [&](const std::string& l, const std::string& r) {
    return fmt::format("{} {} {}", l, product ? "*" : "+", r);
  };
  // The thread walk and the block's first pass read each element once; the block's second pass again.
  const std::string load_once = fmt::format("({})KILN_LOAD_X_ONCE({})", A, at(g, "j"));
  const std::string load_again = fmt::format("({})KILN_LOAD_X({})", A, at(g, "j"));
  std::string load = load_once;
  const std::string store = fp ? "acc" : "(long long)acc";
  const std::string store_before = fp ? "before" : "(long long)before";
  auto step_index = [&](const std::string& s) { return reverse ? fmt::format("({}LL - 1 - {})", g.n, s) : s; };
  std::string b;
  b += fmt::format("  // {}: {} along axis {}: {} lines of {} (inner {}){}{}\n", op, x.str(), axis, g.count(), g.n,
                   g.inner, exclusive ? ", exclusive" : "", reverse ? ", reverse" : "");
  OpKernel k;
  auto walk = [&](const std::string& from, const std::string& to, const std::string& ind) {
    std::string w;
    w += fmt::format("{}for (long long s = {}; s < {}; ++s) {{\n", ind, from, to);
    w += fmt::format("{}  const long long j = {};\n", ind, step_index("s"));
    w += fmt::format("{}  const {} before = acc;\n", ind, A);
    w += fmt::format("{}  acc = {};\n", ind, combine("before", load));
    w += fmt::format("{}  KILN_STORE(0, {}, {});\n", ind, at(g, "j"), exclusive ? store_before : store);
    w += ind + "}\n";
    return w;
  };
  if (!block_per_line(g)) {
    b += "  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < " + std::to_string(g.count()) +
         "LL; o += (long long)gridDim.x * blockDim.x) {\n";
    b += fmt::format("    const long long base = {};\n", line_base(g, "o"));
    b += fmt::format("    {} acc = {};\n", A, id);
    b += walk("0", fmt::format("{}LL", g.n), "    ");
    b += "  }\n";
    k.block = block_threads(256);  // the one decision (codegen/launch_fit.h)
    k.grid = static_cast<unsigned>(std::min<int64_t>((g.count() + k.block - 1) / k.block, 8192));
  } else {
    k.block = block_threads(block_for((g.n + 3) / 4));
    const int64_t chunk = (g.n + k.block - 1) / k.block;
    b += fmt::format("  __shared__ {} part[33];\n", A);
    b += fmt::format("  for (long long o = blockIdx.x; o < {}LL; o += gridDim.x) {{\n", g.count());
    b += fmt::format("    const long long base = {};\n", line_base(g, "o"));
    b += fmt::format(
        "    const long long from = threadIdx.x * {0}LL, to = from + {0}LL < {1}LL ? from + {0}LL : {1}LL;\n", chunk,
        g.n);
    // Pass 1: this thread's chunk total.
    b += fmt::format("    {} acc = {};\n", A, id);
    b += "    for (long long s = from; s < to; ++s) {\n";
    b += fmt::format("      const long long j = {};\n      acc = {};\n    }}\n", step_index("s"),
                     combine("acc", load_once));
    load = load_again;
    b += block_scan_of_chunk_totals(A, id, combine);
    b += walk("from", "to", "    ");
    b += "  }\n";
    k.grid = static_cast<unsigned>(std::min<int64_t>(g.count(), 65535));
  }
  if (x.numel() == 0) k.grid = 0;
  finish_op_kernel(k, "kiln_" + op, op, buffers_for({x}, {y}), X, "", b, seams);
  return k;
}

std::vector<OpKernel> topk(const AttrMap& a, const TensorType& x, const std::vector<TensorType>& results,
                           const KernelSeams* seams) {
  const int axis = norm_axis("topk", a.get_int("axis", -1), x.shape.size());
  const int64_t kk = a.require_int("k");
  const bool largest = a.get_int("largest", 1) != 0;
  const Lines g = lines_of(x.shape, axis);
  if (kk < 0 || kk > g.n) fail("codegen: topk: k = {} is out of range for axis {} of {}", kk, axis, x.str());
  Shape ys = x.shape;
  ys[axis] = kk;
  if (results.empty() || results[0].shape != ys || results[0].dtype != x.dtype ||
      (results.size() > 1 && (results[1].shape != ys || results[1].dtype != DType::I64)))
    fail("codegen: topk: results do not fit {} with k = {}", x.str(), kk);
  constexpr int64_t kMaxLine = 4096;
  if (g.n > kMaxLine)
    unsupported("codegen: topk: lines of {} elements (axis {} of {}); the shared-memory sort takes up to {}", g.n, axis,
                x.str(), kMaxLine);
  const bool fp = is_float(x.dtype);
  const std::string A = rank_type(x.dtype);
  int64_t P = 1;
  while (P < g.n) P *= 2;
  const size_t vbytes = A == "float" ? 4 : 8;
  // before(i, j): element i goes before element j (pads, index >= n, go last).
  std::string helpers = ranking(A, fp, false);
  helpers += fmt::format(
      "__device__ __forceinline__ bool @NAME@_before({0} va, int ia, {0} vb, int ib) {{\n"
      "  if (ia >= {1} || ib >= {1}) return ia < ib;\n"
      "  return {2};\n}}\n",
      A, g.n,
      largest ? "@NAME@_above(va, vb) || (!@NAME@_above(vb, va) && ia < ib)"
              : "@NAME@_above(vb, va) || (!@NAME@_above(va, vb) && ia < ib)");
  const bool want_idx = results.size() > 1;
  std::string b;
  b += fmt::format("  // topk: k = {} {} of {} along axis {}: {} lines of {} (inner {}), sorted in {} shared slots\n",
                   kk, largest ? "largest" : "smallest", x.str(), axis, g.count(), g.n, g.inner, P);
  b += fmt::format("  KILN_DYNAMIC_SHARED({}, sv);\n", A);
  b += fmt::format("  KILN_PTR(int) si = KILN_PTR_CAST(int, sv + {});\n", P);
  b += fmt::format("  for (long long o = blockIdx.x; o < {}LL; o += gridDim.x) {{\n", g.count());
  b += fmt::format("    const long long base = {};\n", line_base(g, "o"));
  b += fmt::format("    const long long obase = {};\n",
                   g.inner == 1 ? fmt::format("o * {}LL", kk)
                                : fmt::format("(o / {0}LL) * {1}LL + o % {0}LL", g.inner, kk * g.inner));
  b += "    __syncthreads();  // the previous line's slots are read\n";
  b += fmt::format("    for (int j = threadIdx.x; j < {}; j += blockDim.x) {{\n", P);
  b += fmt::format("      sv[j] = j < {} ? ({})KILN_LOAD_X_ONCE({}) : ({})0;\n      si[j] = j;\n    }}\n", g.n, A,
                   at(g, "j"), A);
  b += "    __syncthreads();\n";
  b += fmt::format("    for (int size = 2; size <= {}; size <<= 1) {{\n", P);
  b += "      for (int stride = size >> 1; stride > 0; stride >>= 1) {\n";
  b += fmt::format("        for (int t = threadIdx.x; t < {}; t += blockDim.x) {{\n", P / 2);
  b += "          const int i = 2 * t - (t & (stride - 1)), j = i + stride;\n";
  b += "          const bool swap = (i & size) == 0 ? @NAME@_before(sv[j], si[j], sv[i], si[i])\n";
  b += "                                            : @NAME@_before(sv[i], si[i], sv[j], si[j]);\n";
  b += fmt::format(
      "          if (swap) {{ const {} v = sv[i]; sv[i] = sv[j]; sv[j] = v; const int q = si[i]; si[i] = si[j]; si[j] = q; }}\n",
      A);
  b += "        }\n        __syncthreads();\n      }\n    }\n";
  const std::string oat = g.inner == 1 ? "obase + j" : fmt::format("obase + j * {}LL", g.inner);
  b += fmt::format("    for (int j = threadIdx.x; j < {}; j += blockDim.x) {{\n", kk);
  b += fmt::format("      KILN_STORE(0, {}, sv[j]);\n", oat);
  if (want_idx) b += fmt::format("      KILN_STORE(1, {}, (long long)si[j]);\n", oat);
  b += "    }\n  }\n";
  OpKernel k;
  k.block = block_threads(static_cast<unsigned>(std::clamp<int64_t>(P / 2, 32, 512)));  // strided over the slots
  k.grid = kk == 0 ? 0 : static_cast<unsigned>(std::min<int64_t>(g.count(), 65535));
  // Rounded up to whole values, so the simulator's typed view of the slots covers the positions too (P = 1).
  k.shared_bytes = (static_cast<size_t>(P) * (vbytes + 4) + vbytes - 1) / vbytes * vbytes;
  std::vector<TensorType> res = results;
  if (res.size() > 2) res.resize(2);
  finish_op_kernel(k, "kiln_topk", "topk", buffers_for({x}, res), A, helpers, b, seams);
  return {k};
}

}  // namespace

bool select_supported(std::string_view op) {
  return op == "argmax" || op == "argmin" || op == "hardmax" || op == "cumsum" || op == "cumprod" || op == "topk";
}

std::vector<OpKernel> emit_select_op(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                     const std::vector<TensorType>& results, const KernelSeams* seams) {
  const std::string& op = def.name;
  if (!select_supported(op)) unsupported("codegen: {} is not an argmax/argmin/hardmax/cumsum/cumprod/topk op", op);
  if (operands.size() != 1 || results.empty()) fail("codegen: {}: expects one operand and a result", op);
  if (op == "cumsum" || op == "cumprod") {
    if (!has_symbolic_dims(operands[0].shape)) return {scan(op, attrs, operands[0], results[0], seams)};
    if (seams)
      unsupported("codegen: {} of {}: a shape-generic scan takes no fused prologue or epilogue", op, operands[0].str());
    return {emit_scan_generic(op, attrs, operands[0], results[0])};
  }
  if (op == "topk") return topk(attrs, operands[0], results, seams);
  return {arg_extreme(op, attrs, operands[0], results[0], seams)};
}

}  // namespace kiln::codegen
