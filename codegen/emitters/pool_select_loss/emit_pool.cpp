#include "codegen/emitters/pool_select_loss/emit_pool.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codegen/launch_fit.h"
#include "codegen/core/deciding_only.h"
#include "codegen/core/emit_expr.h"
#include "ir/error.h"
#include "ir/symbolic_dim.h"
#include "ops/nn_internal.h"
#include "ops/nn_shape.h"
#include "ops/op_helpers.h"
#include "ops/symbolic_image.h"

namespace kiln::codegen {

namespace {

constexpr unsigned kBlock = 256;

// "float" for f16/bf16/f32, "double" for f64, "long long" for integers (max
// pools only): the reference's computation type (dispatch_compute).
std::string compute_type(DType t) {
  if (t == DType::F64) return "double";
  if (is_float(t)) return "float";
  return "long long";
}

// The lowest value of the computation type: max pools start there.
std::string lowest(const std::string& A) {
  if (A == "float") return "(-__int_as_float(0x7f800000))";
  if (A == "double") return "(-kiln_inf())";
  return "(-9223372036854775807LL - 1)";
}

// `int` index arithmetic when every index stays far below 2^31.
std::string index_type(long long largest) { return largest < (1LL << 30) ? "int" : "long long"; }

// The grid-stride loop over `total` items (C text) as variable `o` of type I.
std::string item_loop(const std::string& total) {
  return fmt::format(
      "  for (I o = (I)(blockIdx.x * blockDim.x + threadIdx.x); o < (I){}; o += (I)(gridDim.x * blockDim.x)) {{\n",
      total);
}
std::string item_loop(long long total) { return item_loop(std::to_string(total)); }

// Shape-generic pools (a plan with shape profiles): the batch and the
// spatial dims of the channels-first input `xs` and result `ys` may be
// symbolic, the channels not; the kernel then takes its sizes from `ks` and
// indexes in 64 bits.
KernelSymbols pool_symbols(const std::string& op, const Shape& xs, const Shape& ys) {
  for (const Shape* s : {&xs, &ys})
    if (s->size() > 1 && is_symbolic_dim((*s)[1]))
      unsupported("codegen: {}: a shape-generic pool takes a symbolic batch and image size, not channels [{}]", op,
                  dims_str(*s));
  return KernelSymbols({xs, ys});
}

// A count as C text: a constant bare, a symbolic one from `ks`.
std::string count_text(const KernelSymbols& syms, int64_t n) {
  return is_symbolic_dim(n) ? syms.lit(n) : std::to_string(n);
}
// The same as a long long literal: "12LL", or the symbolic polynomial (already long long).
std::string ll_text(const KernelSymbols& syms, int64_t n) {
  return is_symbolic_dim(n) ? syms.lit(n) : std::to_string(n) + "LL";
}

std::vector<ShellBuffer> buffers_for(const std::vector<TensorType>& operands, const std::vector<TensorType>& results) {
  std::vector<ShellBuffer> b;
  for (size_t r = 0; r < results.size(); ++r) b.push_back({results[r].dtype, fmt::format("out{}", r), true});
  for (size_t i = 0; i < operands.size(); ++i) b.push_back({operands[i].dtype, fmt::format("in{}", i), false});
  return b;
}

// Channels-first dims of an image tensor of layout nhwc or not.
Shape channels_first(const Shape& s, bool nhwc) {
  if (!nhwc) return s;
  Shape r = {s[0], s.back()};
  r.insert(r.end(), s.begin() + 1, s.end() - 1);
  return r;
}

enum class PoolKind { Max, Average, Lp };

OpKernel window_pool(PoolKind kind, const std::string& op, const AttrMap& a, const TensorType& x,
                     const std::vector<TensorType>& results, const KernelSeams* seams) {
  const bool nhwc = ops::nhwc_layout(a, op);
  const Shape xs = channels_first(x.shape, nhwc);
  if (xs.size() < 3) fail("codegen: {}: input {} has rank below 3", op, x.str());
  const size_t nd = xs.size() - 2;
  const Shape ys = channels_first(results.at(0).shape, nhwc);
  if (ys.size() != xs.size() || ys[0] != xs[0] || ys[1] != xs[1] || results[0].dtype != x.dtype)
    fail("codegen: {}: result {} does not fit input {}", op, results[0].str(), x.str());
  const std::vector<int64_t> k = ops::nn::window_ints(a, "kernel_shape", nd, 1, op);
  const std::vector<int64_t> st = ops::nn::window_ints(a, "strides", nd, 1, op);
  const std::vector<int64_t> dil = ops::nn::window_ints(a, "dilations", nd, 1, op);
  const std::vector<int64_t> pads = ops::nn::window_ints(a, "pads", 2 * nd, 0, op);
  for (size_t d = 0; d < nd; ++d) {
    std::string why;  // a symbolic size: as its inference (ops/symbolic_image.h)
    const std::optional<int64_t> want = ops::symbolic_window_out_dim(xs[2 + d], k[d], st[d], pads[d], pads[d + nd],
                                                                     dil[d], a.get_int("ceil_mode", 0) == 1, why);
    if (!want || ys[2 + d] != *want)
      fail("codegen: {}: result {} does not fit the windows over input {}", op, results[0].str(), x.str());
  }
  const bool want_idx = kind == PoolKind::Max && results.size() > 1;
  if (want_idx && (nhwc || results[1].dtype != DType::I64 || results[1].shape != results[0].shape))
    fail("codegen: {}: indices result {} must be i64 of the values' shape (channels first)", op, results[1].str());
  const bool col_major = a.get_int("storage_order", 0) == 1;
  const bool include_pad = a.get_int("count_include_pad", 0) == 1;
  const int64_t p = a.get_int("p", 2);
  const KernelSymbols syms = pool_symbols(op, xs, ys);
  const bool generic = !syms.empty();
  const int64_t N = xs[0], C = xs[1];
  int64_t in_size = 1, out_size = 1;
  for (size_t d = 0; d < nd; ++d) {
    in_size = dim_mul(in_size, xs[2 + d]);
    out_size = dim_mul(out_size, ys[2 + d]);
  }
  const int64_t total = dim_mul(dim_mul(N, C), out_size);
  const std::string A = compute_type(x.dtype);
  if (kind != PoolKind::Max && A == "long long")
    unsupported("codegen: {}: dtype {} (the reference takes floating dtypes)", op, dtype_name(x.dtype));
  OpKernel kern;
  kern.block = block_threads(kBlock);  // the one decision (codegen/launch_fit.h)
  if (generic) {
    kern.grid = 1;  // evaluated per shape: as items_grid
    kern.grid_expr = GridAxisExpr{total, kern.block, 8192};
  } else {
    kern.grid = items_grid(total, kern.block);
  }
  if (deciding_only()) return decided_op_kernel(kern, &syms);  // decided; the rest is text

  std::string b;
  b += fmt::format("  // {}: {} -> {}, kernel [{}], strides [{}], dilations [{}], pads [{}]{}\n", op, x.str(),
                   results[0].str(), fmt::join(k, ","), fmt::join(st, ","), fmt::join(dil, ","), fmt::join(pads, ","),
                   nhwc ? ", nhwc" : "");
  b += fmt::format("  typedef {} I;\n", generic ? "long long" : index_type(std::max(x.numel(), total) + (1LL << 22)));
  b += item_loop(count_text(syms, total));
  // Coordinates of result element o.
  b += "    I r = o;\n";
  auto coord = [&](const std::string& name, int64_t size, bool last) {
    if (last) b += fmt::format("    const I {} = r;\n", name);
    else b += fmt::format("    const I {0} = r % (I){1};\n    r /= (I){1};\n", name, count_text(syms, size));
  };
  if (nhwc) coord("c", C, false);
  for (int d = static_cast<int>(nd) - 1; d >= 0; --d) coord(fmt::format("o{}", d), ys[2 + d], false);
  if (!nhwc) coord("c", C, false);
  coord("n", N, true);
  // Element `sp` (row-major spatial offset) of this plane is x[base + sp * step].
  if (nhwc) b += fmt::format("    const I base = n * (I){} + c;\n", count_text(syms, dim_mul(in_size, C)));
  else b += fmt::format("    const I base = (n * (I){} + c) * (I){};\n", C, count_text(syms, in_size));
  const std::string step = nhwc ? fmt::format(" * (I){}", C) : "";
  if (kind == PoolKind::Max) {
    b += fmt::format("    {} best = {};\n    bool any = false;\n", A, lowest(A));
    if (want_idx) b += "    I arg = 0;\n";
  } else {
    b += fmt::format("    {} acc = 0;\n", A);
    if (!include_pad) b += "    I taps = 0;\n";
  }
  if (kind == PoolKind::Average && include_pad) {
    // Taps inside the padded input, per axis, multiplied.
    b += "    I taps = 1;\n";
    for (size_t d = 0; d < nd; ++d) {
      b += fmt::format(
          "    {{ I t = 0; for (I j = 0; j < (I){1}; ++j) {{ const I i = o{0} * (I){2} - (I){3} + j * (I){4}; "
          "if (i >= (I)-{3} && i < (I){5}) ++t; }} taps *= t; }}\n",
          d, k[d], st[d], pads[d], dil[d], count_text(syms, dim_add(xs[2 + d], pads[d + nd])));
    }
  }
  std::string ind = "    ";
  for (size_t d = 0; d < nd; ++d) {
    b += fmt::format("{0}for (I k{1} = 0; k{1} < (I){2}; ++k{1}) {{\n", ind, d, k[d]);
    ind += "  ";
    b += fmt::format("{}const I i{} = o{} * (I){} - (I){} + k{} * (I){};\n", ind, d, d, st[d], pads[d], d, dil[d]);
    b += fmt::format("{0}if (i{1} < 0 || i{1} >= (I){2}) continue;\n", ind, d, count_text(syms, xs[2 + d]));
  }
  std::string sp;
  for (size_t d = 0; d < nd; ++d) {
    int64_t stride = 1;
    for (size_t e = d + 1; e < nd; ++e) stride = dim_mul(stride, xs[2 + e]);
    if (!sp.empty()) sp += " + ";
    sp += stride == 1 ? fmt::format("i{}", d) : fmt::format("i{} * (I){}", d, count_text(syms, stride));
  }
  b += fmt::format("{}const I sp = {};\n", ind, sp);
  b += fmt::format("{}const {} v = KILN_LOAD_X(base + sp{});\n", ind, A, step);
  switch (kind) {
    case PoolKind::Max: {
      b += fmt::format("{}if (!any || v > best) {{\n{}  best = v;\n", ind, ind);
      if (want_idx) {
        if (col_major) {
          std::string cm;
          int64_t mul = 1;
          for (size_t d = 0; d < nd; ++d) {
            if (!cm.empty()) cm += " + ";
            cm += mul == 1 ? fmt::format("i{}", d) : fmt::format("i{} * (I){}", d, count_text(syms, mul));
            mul = dim_mul(mul, xs[2 + d]);
          }
          b += fmt::format("{}  arg = {};\n", ind, cm);
        } else {
          b += fmt::format("{}  arg = sp;\n", ind);
        }
      }
      b += fmt::format("{}}}\n{}any = true;\n", ind, ind);
      break;
    }
    case PoolKind::Average:
      b += fmt::format("{}acc += v;\n", ind);
      if (!include_pad) b += fmt::format("{}++taps;\n", ind);
      break;
    case PoolKind::Lp: {
      b += fmt::format("{}const {} av = kiln_fabs(v);\n", ind, A);
      const std::string term = p == 1 ? "av" : p == 2 ? "kiln_mul(av, av)" : fmt::format("kiln_pow(av, ({}){})", A, p);
      b += fmt::format("{}acc += {};\n", ind, term);
      break;
    }
  }
  for (size_t d = nd; d-- > 0;) {
    ind.resize(ind.size() - 2);
    b += ind + "}\n";
  }
  switch (kind) {
    case PoolKind::Max:
      b += "    KILN_STORE(0, o, best);\n";
      if (want_idx)
        b += fmt::format("    KILN_STORE(1, o, (long long)(n * (I){} + c) * {} + (long long)arg);\n", C,
                         ll_text(syms, in_size));
      break;
    case PoolKind::Average:
      b += fmt::format("    KILN_STORE(0, o, acc / ({})taps);  // all padding: 0/0 = NaN, as the reference\n", A);
      break;
    case PoolKind::Lp: {
      const std::string res = p == 1   ? "acc"
                              : p == 2 ? "kiln_sqrt(acc)"
                                       : fmt::format("kiln_pow(acc, ({0})1 / ({0}){1})", A, p);
      b += fmt::format("    KILN_STORE(0, o, {});\n", res);
      break;
    }
  }
  b += "  }\n";
  std::vector<TensorType> res = results;
  if (!want_idx) res.resize(1);
  finish_op_kernel(kern, "kiln_pool", op, buffers_for({x}, res), A, "", b, seams, generic ? &syms : nullptr);
  return kern;
}

// Planes of at least this many elements get a block each (global pools).
constexpr int64_t kBlockPlane = 1024;

// The launch of a global pool over `planes` planes: a block per plane
// (`per_block`, global_pool_blocks), or a thread per plane in blocks of 256,
// or of fewer threads (down to a warp) where 256 would leave some of an
// H100's 132 SMs without a block: the pool reads its input once
// (DRAM-bound) and an SM without a block issues no loads (ResNet-50's
// 2048-channel average pool ran as 8 blocks). A symbolic plane count
// (`generic`): the grid per shape, with the block for many planes.
OpKernel global_pool_launch(bool per_block, int64_t planes, bool generic) {
  OpKernel kern;
  if (per_block) {
    kern.block = block_threads(kBlock);  // its folds read blockDim
    if (generic) {
      kern.grid = 1;  // evaluated per shape
      kern.grid_expr = GridAxisExpr{planes, 1, 65535};
    } else {
      kern.grid = static_cast<unsigned>(std::min<int64_t>(planes, 65535));
    }
    return kern;
  }
  unsigned block = block_threads(kBlock);  // the one decision (codegen/launch_fit.h)
  if (generic) {
    kern.block = block;
    kern.grid = 1;  // evaluated per shape: as items_grid
    kern.grid_expr = GridAxisExpr{planes, block, 8192};
    return kern;
  }
  while (block > 32 && items_grid(planes, block) < 132) block /= 2;
  kern.block = block;
  kern.grid = items_grid(planes, block);
  return kern;
}

// A global pool with one block per plane: threads fold strided elements (max
// in the compute type skipping NaN, sums in double), then warp shuffles and
// per-warp partials in shared memory; thread 0 finishes. The reference keeps
// a NaN only when it is the plane's first element (`v > best` skips later
// ones), so max reads element 0 again at the end. Sums differ from the
// reference's sequential float sum by its rounding only.
OpKernel global_pool_blocks(const std::string& op, const TensorType& x, const TensorType& y, const KernelSeams* seams,
                            bool nhwc, int64_t C, int64_t planes, int64_t spatial, const std::string& A, int64_t p,
                            std::string b, const KernelSymbols& syms, OpKernel kern) {
  const bool is_max = op == "global_max_pool";
  const std::string F = is_max ? A : "double";
  const std::string comb = is_max ? "if (t > acc) acc = t;" : "acc += t;";
  b += fmt::format("  __shared__ {} part[32];\n", F);
  b += fmt::format("  for (I o = (I)blockIdx.x; o < (I){}; o += (I)gridDim.x) {{\n", count_text(syms, planes));
  const std::string sp_text = count_text(syms, spatial);
  if (nhwc)
    b += fmt::format("    const I base = (o / (I){0}) * (I){1} + o % (I){0};\n", C,
                     count_text(syms, dim_mul(spatial, C)));
  else b += fmt::format("    const I base = o * (I){};\n", sp_text);
  const std::string at = nhwc ? fmt::format("base + j * (I){}", C) : "base + j";
  b += fmt::format("    {} acc = {};\n", F, is_max ? lowest(A) : "0.0");
  b += fmt::format("    for (I j = (I)threadIdx.x; j < (I){}; j += (I)blockDim.x) {{\n", sp_text);
  b += fmt::format("      const {} t = ", F);
  if (is_max) b += fmt::format("KILN_LOAD_X_ONCE({});\n", at);
  else if (op == "global_average_pool") b += fmt::format("(double)KILN_LOAD_X_ONCE({});\n", at);
  else b += fmt::format("(double)kiln_pow(kiln_fabs(({})KILN_LOAD_X_ONCE({})), ({}){});\n", A, at, A, p);
  b += "      " + comb + "\n    }\n";
  b += fmt::format(
      "    for (int s = 16; s > 0; s >>= 1) {{\n      const {} t = __shfl_down_sync(0xffffffffu, acc, s);\n      {}\n    }}\n",
      F, comb);
  b += "    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n";
  b += "    __syncthreads();\n    if (lane == 0) part[warp] = acc;\n    __syncthreads();\n";
  b += "    if (threadIdx.x == 0) {\n";
  b += fmt::format(
      "      for (int w = 1; w < (int)(blockDim.x >> 5); ++w) {{\n        const {} t = part[w];\n        {}\n      }}\n",
      F, comb);
  std::string res = "acc";
  if (is_max && A != "long long") {
    b += fmt::format("      const {} x0 = KILN_LOAD_X(base);\n      if (x0 != x0) acc = x0;\n", A);
  }
  if (op == "global_average_pool")
    res = is_symbolic_dim(spatial) ? fmt::format("acc / (double){}", sp_text) : fmt::format("acc / {}.0", spatial);
  if (op == "global_lp_pool") res = fmt::format("pow(acc, 1.0 / {}.0)", p);
  b += fmt::format("      KILN_STORE(0, o, ({})({}));\n    }}\n  }}\n", A, res);
  finish_op_kernel(kern, "kiln_gpool", op, buffers_for({x}, {y}), A, "", b, seams, syms.empty() ? nullptr : &syms);
  return kern;
}

OpKernel global_pool(const std::string& op, const AttrMap& a, const TensorType& x, const TensorType& y,
                     const KernelSeams* seams) {
  const bool nhwc = ops::nhwc_layout(a, op);
  const Shape xs = channels_first(x.shape, nhwc);
  if (xs.size() < 3) fail("codegen: {}: input {} has rank below 3", op, x.str());
  const KernelSymbols syms = pool_symbols(op, xs, channels_first(y.shape, nhwc));
  const bool generic = !syms.empty();
  const int64_t C = xs[1], planes = dim_mul(xs[0], C);
  int64_t spatial = 1;
  for (size_t d = 2; d < xs.size(); ++d) spatial = dim_mul(spatial, xs[d]);
  if (dim_product(y.shape) != planes || y.dtype != x.dtype)
    fail("codegen: {}: result {} does not fit input {}", op, y.str(), x.str());
  const std::string A = compute_type(x.dtype);
  const bool is_max = op == "global_max_pool";
  if (!is_max && A == "long long")
    unsupported("codegen: {}: dtype {} (the reference takes floating dtypes)", op, dtype_name(x.dtype));
  const int64_t p = a.get_int("p", 2);
  // A symbolic plane count: the block per plane only where the layout does
  // not make it depend on the count (nhwc: few planes). A symbolic plane
  // size (H, W) channels first: a block per plane, for every size.
  const bool big_plane = is_symbolic_dim(spatial) ? !nhwc : spatial >= kBlockPlane;
  const bool per_block = big_plane && (!nhwc || (!generic && planes < 2048));
  const OpKernel kern = global_pool_launch(per_block, planes, generic);
  if (deciding_only()) return decided_op_kernel(kern, &syms);  // decided; the rest is text
  std::string b;
  b += fmt::format("  // {}: {} -> {}: {} planes of {}{}\n", op, x.str(), y.str(), dim_str(planes), dim_str(spatial),
                   nhwc ? ", nhwc" : "");
  b += fmt::format("  typedef {} I;\n", generic ? "long long" : index_type(x.numel() + (1LL << 22)));
  if (per_block) return global_pool_blocks(op, x, y, seams, nhwc, C, planes, spatial, A, p, b, syms, kern);
  const std::string sp_text = count_text(syms, spatial);
  b += item_loop(count_text(syms, planes));
  // Plane o = (n, c) holds x[base + j * step], j < spatial; its result is element o in both layouts.
  if (nhwc)
    b += fmt::format("    const I base = (o / (I){0}) * (I){1} + o % (I){0};\n", C,
                     count_text(syms, dim_mul(spatial, C)));
  else b += fmt::format("    const I base = o * (I){};\n", sp_text);
  const std::string at = nhwc ? fmt::format("base + j * (I){}", C) : "base + j";
  b += fmt::format("    {} acc = {};\n", A, is_max ? lowest(A) : "0");
  b += fmt::format("    for (I j = 0; j < (I){}; ++j) {{\n      const {} v = KILN_LOAD_X_ONCE({});\n", sp_text, A, at);
  if (is_max) b += "      if (j == 0 || v > acc) acc = v;\n";
  else if (op == "global_average_pool") b += "      acc += v;\n";
  else b += fmt::format("      acc += kiln_pow(kiln_fabs(v), ({}){});\n", A, p);
  b += "    }\n";
  std::string res = "acc";
  if (op == "global_average_pool") res = fmt::format("acc / ({}){}", A, sp_text);
  if (op == "global_lp_pool") res = fmt::format("kiln_pow(acc, ({0})1 / ({0}){1})", A, p);
  b += fmt::format("    KILN_STORE(0, o, {});\n  }}\n", res);
  OpKernel k = kern;
  finish_op_kernel(k, "kiln_gpool", op, buffers_for({x}, {y}), A, "", b, seams, generic ? &syms : nullptr);
  return k;
}

std::vector<OpKernel> max_unpool(const AttrMap& a, const std::vector<TensorType>& operands, const TensorType& y) {
  const TensorType& x = operands.at(0);
  const TensorType& ind = operands.at(1);
  if (ind.dtype != DType::I64 || ind.shape != x.shape || y.dtype != x.dtype)
    fail("codegen: max_unpool: operands {} / {} and result {} do not fit", x.str(), ind.str(), y.str());
  const Shape& os = y.shape;
  const Shape is = a.has("index_shape") ? a.get_ints("index_shape") : os;
  if (is.size() != os.size()) fail("codegen: max_unpool: index_shape rank {} differs from the result's", is.size());
  const int64_t n_index = shape_numel(is), n = x.numel();
  const std::string A = compute_type(x.dtype);
  // Kernel 1: zeros.
  std::string z;
  z += fmt::format("  // max_unpool: zero fill of {}\n  typedef {} I;\n", y.str(), index_type(y.numel() + (1LL << 22)));
  z += item_loop(y.numel());
  z += fmt::format("    KILN_STORE(0, o, ({})0);\n  }}\n", A);
  OpKernel zero;
  zero.block = block_threads(kBlock);
  zero.grid = items_grid(y.numel(), zero.block);
  finish_op_kernel(zero, "kiln_unpool_zero", "max_unpool", {{y.dtype, "out0", true}}, A, "", z);
  // Element i's destination `dst` (statements), stopping on an index the reference rejects.
  std::string dst;
  dst += "    const long long v = (long long)in1[o];\n";
  dst +=
      fmt::format("    if (v < 0 || v >= {}LL) KILN_TRAP(\"max_unpool: an index is outside index_shape\");\n", n_index);
  dst += "    long long r = v, dst = 0;\n";
  {
    int64_t ostride = 1;
    for (int d = static_cast<int>(is.size()) - 1; d >= 0; --d) {
      dst += fmt::format("    {{ const long long c = r % {0}LL; r /= {0}LL; ", is[d]);
      dst += fmt::format("if (c >= {}LL) KILN_TRAP(\"max_unpool: an index lands outside the output shape\"); ", os[d]);
      dst += fmt::format("dst += c * {}LL; }}\n", ostride);
      ostride *= os[d];
    }
  }
  const std::string I = fmt::format("  typedef {} I;\n", index_type(std::max(n, y.numel()) + (1LL << 22)));
  const std::string header = fmt::format("  // max_unpool: {} at {} into {} (indices address [{}])\n", x.str(),
                                         ind.str(), y.str(), fmt::join(is, ","));
  if (x.dtype == DType::F32 || x.dtype == DType::F64) {
    // Later duplicates win: every element claims its destination with
    // atomicMax(i + 1) on the zeroed result's bits (as unsigned words of the
    // value's size), then each result element reads its winner's value.
    const std::string W = x.dtype == DType::F32 ? "unsigned" : "unsigned long long";
    std::string c = I + header + item_loop(n) + dst;
    c += fmt::format(
        "    atomicMax(&KILN_PTR_CAST({0}, out0)[dst], ({0})(o + 1));  // scratch bits, not a result store\n  }}\n", W);
    OpKernel claim;
    claim.block = block_threads(kBlock);
    claim.grid = items_grid(n, claim.block);
    finish_op_kernel(claim, "kiln_unpool_claim", "max_unpool", buffers_for(operands, {y}), A, "", c);
    std::string g = I + header + item_loop(y.numel());
    g += fmt::format("    const {0} w = KILN_PTR_CAST({0}, out0)[o];\n", W);
    g += fmt::format("    KILN_STORE(0, o, w ? KILN_LOAD_X(w - 1) : ({})0);\n  }}\n", A);
    OpKernel gather;
    gather.block = block_threads(kBlock);
    gather.grid = items_grid(y.numel(), gather.block);
    finish_op_kernel(gather, "kiln_unpool_gather", "max_unpool", buffers_for(operands, {y}), A, "", g);
    return {zero, claim, gather};
  }
  // f16/bf16 (no room for a claim in 16 bits): element i writes unless a
  // later element has the same index -- each thread scans the elements after
  // it (quadratic in the worst case).
  std::string s = I + header + item_loop(n) + dst;
  s += "    bool last = true;\n";
  s += fmt::format(
      "    for (I j = o + 1; j < (I){}; ++j)\n      if ((long long)in1[j] == v) {{ last = false; break; }}\n", n);
  s += "    if (last) KILN_STORE(0, dst, KILN_LOAD_X(o));\n  }\n";
  OpKernel scatter;
  scatter.block = block_threads(kBlock);
  scatter.grid = items_grid(n, scatter.block);
  finish_op_kernel(scatter, "kiln_unpool", "max_unpool", buffers_for(operands, {y}), A, "", s);
  return {zero, scatter};
}

}  // namespace

bool pool_supported(std::string_view op) {
  return op == "max_pool" || op == "average_pool" || op == "lp_pool" || op == "global_average_pool" ||
         op == "global_max_pool" || op == "global_lp_pool" || op == "max_unpool";
}

std::vector<OpKernel> emit_pool_op(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                   const std::vector<TensorType>& results, const KernelSeams* seams) {
  const std::string& op = def.name;
  if (!pool_supported(op)) unsupported("codegen: {} is not a pool op", op);
  if (operands.empty() || results.empty()) fail("codegen: {}: no operand or result", op);
  if (op == "max_unpool") {
    if (seams) unsupported("codegen: max_unpool (two kernels) takes no fused seams");
    return max_unpool(attrs, operands, results[0]);
  }
  if (op.rfind("global_", 0) == 0) return {global_pool(op, attrs, operands[0], results[0], seams)};
  const PoolKind kind = op == "max_pool" ? PoolKind::Max : op == "average_pool" ? PoolKind::Average : PoolKind::Lp;
  return {window_pool(kind, op, attrs, operands[0], results, seams)};
}

}  // namespace kiln::codegen
