#include "codegen/launch_fit.h"
#include "codegen/emitters/reduction/emit_reduction.h"

#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codegen/core/deciding_only.h"
#include "codegen/core/emit_expr.h"
#include "codegen/emitters/reduction/emit_rowwise.h"
#include "codegen/core/kernel_io.h"
#include "codegen/core/kernel_text.h"
#include "ir/error.h"
#include "ir/symbolic_dim.h"

namespace kiln::codegen {

namespace {

using ops::ReduceCombiner;
using ops::ReduceMap;

struct Group {
  int64_t size, stride;
  bool reduced;
};

// Lowest / highest value of an integer dtype as a C literal of the accumulation type.
std::string int_limit(DType t, bool highest) {
  switch (t) {
    case DType::I8:
      return highest ? "127LL" : "-128LL";
    case DType::I16:
      return highest ? "32767LL" : "-32768LL";
    case DType::I32:
      return highest ? "2147483647LL" : "(-2147483647LL - 1)";
    case DType::I64:
      return highest ? "9223372036854775807LL" : "(-9223372036854775807LL - 1)";
    case DType::U8:
      return highest ? "255ULL" : "0ULL";
    case DType::U16:
      return highest ? "65535ULL" : "0ULL";
    case DType::U32:
      return highest ? "4294967295ULL" : "0ULL";
    case DType::U64:
      return highest ? "18446744073709551615ULL" : "0ULL";
    case DType::Bool:
      return highest ? "1LL" : "0LL";
    default:
      break;
  }
  fail("codegen: reduction: no integer limits for {}", dtype_name(t));
}

// `x` (accumulation type A) through map m.
std::string map_expr(ReduceMap m, const std::string& x, bool fp, bool is_unsigned) {
  switch (m) {
    case ReduceMap::Identity:
      return x;
    case ReduceMap::Abs:
      return fp ? fmt::format("fabs({})", x) : is_unsigned ? x : fmt::format("({0} < 0 ? -{0} : {0})", x);
    case ReduceMap::Square:
      return fmt::format("({0} * {0})", x);
    case ReduceMap::Exp:
      return fmt::format("exp({})", x);
    case ReduceMap::Log:
      return fmt::format("log({})", x);
    case ReduceMap::Sqrt:
      return fmt::format("sqrt({})", x);
    case ReduceMap::DivCount:
      break;
  }
  return x;
}

// Prelude + body with @NAME@ replaced by the hashed name; sets k.name, k.source.
void finish(ReductionKernel& k, DType dt, const std::string& prefix, std::string_view label, const std::string& body,
            const AnchorIO& io) {
  k.counts.clear();
  for (const KernelBuffer& b : io.buffers) k.counts.push_back(b.count);
  int64_t b = 32;
  while (b < k.count && b < 256) b *= 2;
  k.block = block_threads(static_cast<unsigned>(b));  // block loops and folds read blockDim
  k.grid = static_cast<unsigned>(std::min<int64_t>(k.outputs, 65535));
  if (deciding_only()) return;  // decided; the rest is text (codegen/core/deciding_only.h)
  std::vector<DType> dts = io.dtypes;
  dts.push_back(dt);
  std::string prelude = kernel_headers(dts);
  if (!io.setup.empty()) prelude += std::string(expr_prelude());  // the fused IO's evaluator uses its helpers
  prelude += "#ifndef KILN_RED_INF\n#define KILN_RED_INF (__longlong_as_double(0x7ff0000000000000LL))\n#endif\n";
  k.name = fmt::format("{}_{}_{:016x}", prefix, sanitize_identifier(label), XXH64(body.data(), body.size(), 0));
  std::string named;
  for (size_t pos = 0;;) {
    size_t at = body.find("@NAME@", pos);
    named.append(body, pos, at == std::string::npos ? std::string::npos : at - pos);
    if (at == std::string::npos) break;
    named += k.name;
    pos = at + 6;
  }
  k.source = prelude + named;
}

}  // namespace

// A combiner `cn`(a, v) over type A and the block-wide fold `cn`_block(v)
// (blockDim.x a multiple of 32; every thread gets the result).
std::string block_fold(const std::string& A, const std::string& cn, const std::string& comb_body,
                       const std::string& init) {
  return fmt::format(
      "__device__ __forceinline__ {0} {1}({0} a, {0} v) {{ return {3}; }}\n"
      "__device__ __forceinline__ {0} {1}_block({0} v) {{\n"
      "  __shared__ {0} part[33];\n"
      "  for (int o = 16; o > 0; o >>= 1) v = {1}(v, __shfl_down_sync(0xffffffffu, v, o));\n"
      "  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;\n"
      "  __syncthreads();\n"
      "  if (lane == 0) part[warp] = v;\n"
      "  __syncthreads();\n"
      "  if (warp == 0) {{\n"
      "    v = lane < nw ? part[lane] : {2};\n"
      "    for (int o = 16; o > 0; o >>= 1) v = {1}(v, __shfl_down_sync(0xffffffffu, v, o));\n"
      "    if (lane == 0) part[32] = v;\n"
      "  }}\n"
      "  __syncthreads();\n"
      "  return part[32];\n"
      "}}\n",
      A, cn, init, comb_body);
}

ReductionKernel emit_reduction(const ops::ReductionSpec& s, const TensorType& in, const std::vector<int64_t>& axes,
                               const TensorType& out) {
  return emit_reduction(s, in, axes, out, plain_io({in}, {out}));
}

ReductionKernel emit_reduction(const ops::ReductionSpec& s, const TensorType& in, const std::vector<int64_t>& axes,
                               const TensorType& out, const AnchorIO& io) {
  const std::string label(s.op);
  if (in.dtype != out.dtype)
    fail("codegen: {}: input is {} but the output is {}", label, dtype_name(in.dtype), dtype_name(out.dtype));
  const int rank = static_cast<int>(in.shape.size());
  std::vector<bool> reduced(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank || (i > 0 && axes[i] <= axes[i - 1]))
      fail("codegen: {}: axes must be strictly increasing in [0, {})", label, rank);
    reduced[axes[i]] = true;
  }
  if (s.pre == ReduceMap::DivCount) fail("codegen: {}: DivCount is not a pre map", label);
  const bool fp = is_float(in.dtype);
  const bool integral = ops::map_is_integral(s.pre) && ops::map_is_integral(s.post) && !s.shift_by_max;
  const bool acc_double = fp || !integral;
  const bool uns = is_unsigned_int(in.dtype) || in.dtype == DType::Bool;
  const std::string A = acc_double ? "double" : uns ? "unsigned long long" : "long long";

  ReductionKernel k;
  k.outputs = 1;
  k.count = 1;
  // Shape-generic (a plan with shape profiles): symbolic dims only among the
  // leading kept dims (a dynamic batch, or batch*seq rows), so only the
  // output count is symbolic: the first group is the index's remainder
  // (never divided by its size) and every stride is a constant.
  const KernelSymbols syms({in.shape, out.shape});
  const bool generic = !syms.empty();
  const std::vector<int64_t> strides = symbolic_strides(in.shape);
  std::vector<Group> groups;
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) k.count = dim_mul(k.count, in.shape[d]);
    else k.outputs = dim_mul(k.outputs, in.shape[d]);
    if (in.shape[d] == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced[d]) {
      groups.back().size = dim_mul(groups.back().size, in.shape[d]);
      groups.back().stride = strides[d];
    } else {
      groups.push_back({in.shape[d], strides[d], reduced[d]});
    }
  }
  for (size_t i = 0; i < groups.size(); ++i)
    if (is_symbolic_dim(groups[i].stride) || (i > 0 && is_symbolic_dim(groups[i].size)) ||
        (groups[i].reduced && is_symbolic_dim(groups[i].size)))
      unsupported(
          "codegen: {} of {} over axes [{}]: a shape-generic reduction takes symbolic dims only among the "
          "leading kept dims",
          label, in.str(), fmt::join(axes, ","));
  if (dim_product(out.shape) != k.outputs)
    fail("codegen: {}: output {} has {} elements, the reduction gives {}", label, out.str(),
         dim_str(dim_product(out.shape)), dim_str(k.outputs));
  const std::string outputs_text = generic ? syms.lit(k.outputs) : fmt::format("{}LL", k.outputs);

  // Statements (appended to `body`) decomposing `var` over the groups of
  // kind `red`; returns the element offset they give.
  auto offset = [&](bool red, const std::string& var, const std::string& indent, std::string& body) {
    std::vector<Group> g;
    for (const Group& x : groups)
      if (x.reduced == red) g.push_back(x);
    if (g.empty()) return std::string("0LL");
    std::string off;
    if (g.size() > 1) body += fmt::format("{}long long {}_r = {};\n", indent, var, var);
    for (int i = static_cast<int>(g.size()) - 1; i >= 0; --i) {
      std::string c;
      if (g.size() == 1) {
        c = var;
      } else if (i == 0) {
        c = var + "_r";
      } else {
        c = fmt::format("{}_c{}", var, i);
        body += fmt::format("{}const long long {} = {}_r % {}LL;\n", indent, c, var, g[i].size);
        body += fmt::format("{}{}_r /= {}LL;\n", indent, var, g[i].size);
      }
      if (!off.empty()) off += " + ";
      off += g[i].stride == 1 ? c : fmt::format("{} * {}LL", c, g[i].stride);
    }
    return off;
  };

  const std::string_view S = cuda_storage_type(in.dtype);
  auto load = [&](const std::string& idx, bool record) {
    return fmt::format("(({}){})", A, cuda_load(in.dtype, io.load(0, idx, record)));
  };
  std::string init;
  switch (s.combiner) {
    case ReduceCombiner::Sum:
      init = fmt::format("({})0", A);
      break;
    case ReduceCombiner::Prod:
      init = fmt::format("({})1", A);
      break;
    case ReduceCombiner::Max:
      init = acc_double ? "(-KILN_RED_INF)" : fmt::format("({}){}", A, int_limit(in.dtype, false));
      break;
    case ReduceCombiner::Min:
      init = acc_double ? "KILN_RED_INF" : fmt::format("({}){}", A, int_limit(in.dtype, true));
      break;
  }
  auto comb_body = [&](ReduceCombiner c) -> std::string {
    switch (c) {
      case ReduceCombiner::Sum:
        return "a + v";
      case ReduceCombiner::Prod:
        return "a * v";
      case ReduceCombiner::Max:
        return acc_double ? "(v != v) ? v : (v > a ? v : a)" : "v > a ? v : a";
      case ReduceCombiner::Min:
        return acc_double ? "(v != v) ? v : (v < a ? v : a)" : "v < a ? v : a";
    }
    return "a";
  };

  std::string body;
  // (The output shape is left out: keepdims gives the same kernel.)
  body += fmt::format("// {}: {} <- {} over axes [{}]\n", label, dim_str(k.outputs), in.str(), fmt::join(axes, ","));
  body += fmt::format("// pre {}, combine {}, post {}{}\n", ops::reduce_map_name(s.pre),
                      ops::reduce_combiner_name(s.combiner), ops::reduce_map_name(s.post),
                      s.shift_by_max ? ", shifted by the max" : "");
  std::vector<ReduceCombiner> combs = {s.combiner};
  if (s.shift_by_max && acc_double && s.combiner != ReduceCombiner::Max) combs.push_back(ReduceCombiner::Max);
  for (ReduceCombiner c : combs) {
    const std::string cn = fmt::format("@NAME@_{}", ops::reduce_combiner_name(c));
    const std::string cinit = c == s.combiner ? init : "(-KILN_RED_INF)";
    body += block_fold(A, cn, comb_body(c), cinit);
  }
  const std::string comb = fmt::format("@NAME@_{}", ops::reduce_combiner_name(s.combiner));
  if (generic) body += KernelSymbols::struct_text();
  body += fmt::format("extern \"C\" __global__ void @NAME@({}{}) {{\n", kernel_params(io.buffers),
                      generic ? ", kiln_syms ks" : "");
  body += io.setup;
  body += fmt::format("  for (long long o = blockIdx.x; o < {}; o += gridDim.x) {{\n", outputs_text);
  std::string base = offset(false, "o", "    ", body);
  body += fmt::format("    const long long base = {};\n", base);
  // Reads element r of this output's reduced set into variable `x`; the
  // first pass over the set is the one that records (AnchorIO::load).
  std::string read, read_first;
  std::string roff = offset(true, "r", "      ", read);
  read_first = read;
  read += fmt::format("      const {} x = {};\n", A, load("base + " + roff, false));
  read_first += fmt::format("      const {} x = {};\n", A, load("base + " + roff, true));
  body += fmt::format("    {} sh = 0;\n", A);
  const bool max_pass = s.shift_by_max && acc_double;
  if (max_pass) {
    body += "    double m = -KILN_RED_INF;\n";
    body += fmt::format("    for (long long r = threadIdx.x; r < {}LL; r += blockDim.x) {{\n", k.count);
    body += read_first + "      m = @NAME@_max(m, x);\n    }\n";
    body += "    m = @NAME@_max_block(m);\n";
    body += "    sh = m - m == 0.0 ? m : 0.0;  // 0 unless finite\n";
  }
  body += fmt::format("    {} a = {};\n", A, init);
  body += fmt::format("    for (long long r = threadIdx.x; r < {}LL; r += blockDim.x) {{\n", k.count);
  body += max_pass ? read : read_first;
  body +=
      fmt::format("      a = {}(a, {});\n    }}\n", comb, map_expr(s.pre, "(x - sh)", acc_double, uns && !acc_double));
  body += fmt::format("    a = {}_block(a);\n", comb);
  std::string res;
  if (s.post == ReduceMap::DivCount)
    res = acc_double ? fmt::format("a / (double){}", k.count)
                     : (k.count == 0 ? fmt::format("({})0", A) : fmt::format("a / ({}){}", A, k.count));
  else res = map_expr(s.post, "a", acc_double, uns && !acc_double);
  body += fmt::format("    const {} res = {} + sh;\n", A, res);
  std::string store;
  if (fp) {
    store = cuda_store(in.dtype, fmt::format("({})res", cuda_compute_type(in.dtype)));
  } else if (acc_double) {
    const std::string lo = int_limit(in.dtype, false), hi = int_limit(in.dtype, true);
    store = fmt::format("({0})(res != res ? 0 : res <= (double){1} ? {1} : res >= (double){2} ? {2} : ({0})res)", S, lo,
                        hi);
  } else {
    store = in.dtype == DType::Bool ? "(unsigned char)(res != 0)" : fmt::format("({})res", S);
  }
  body += fmt::format("    if (threadIdx.x == 0) {{\n{}    }}\n  }}\n}}\n", io.store(0, "o", store, "      "));
  body += kernel_sim_entry(io.buffers, generic);
  finish(k, in.dtype, "kiln_red", label, body, io);
  if (generic) {
    k.symbols = syms.names();
    k.grid_expr = GridAxisExpr{k.outputs, 1, 65535};
    k.grid = 1;  // evaluated per shape, as finish's min(outputs, 65535)
  }
  return k;
}

ReductionKernel emit_reduction_op(const OpDef& def, const AttrMap& attrs, const TensorType& in, const TensorType& out) {
  const ops::ReductionSpec* s = ops::find_reduction_spec(def.name);
  if (!s) fail("codegen: op '{}' is not a reduce_* op", def.name);
  return emit_reduction(*s, in, attrs.get_ints("axes"), out);
}

ReductionKernel emit_softmax(bool log_softmax, const TensorType& in, int axis) {
  return emit_softmax(log_softmax, in, axis, plain_io({in}, {in}));
}

ReductionKernel emit_softmax(bool log_softmax, const TensorType& in, int axis, const AnchorIO& io) {
  const std::string label = log_softmax ? "log_softmax" : "softmax";
  if (!is_float(in.dtype)) fail("codegen: {}: needs a floating dtype, got {}", label, dtype_name(in.dtype));
  const int rank = static_cast<int>(in.shape.size());
  if (axis < 0 || axis >= rank) fail("codegen: {}: axis {} is out of range for rank {}", label, axis, rank);
  // Shape-generic (a plan with shape profiles) over the last axis only: a
  // static row length takes the register row kernel over symbolic rows
  // (emit_rowwise.h); a symbolic one (attention scores over seq) the
  // multi-pass kernel below with its sizes from `ks`.
  const KernelSymbols syms(std::vector<Shape>{in.shape});
  const bool generic = !syms.empty();
  if (generic) {
    if (axis != rank - 1)
      unsupported("codegen: {} of {}: a shape-generic {} needs the last axis", label, in.str(), label);
    if (!is_symbolic_dim(in.shape[axis])) {
      if (std::optional<ReductionKernel> rk = emit_row_softmax(log_softmax, in, in.shape[axis], io)) return *rk;
      unsupported("codegen: {} of {}: rows of {} do not fit the register row kernel (at most {} elements)", label,
                  in.str(), in.shape[axis], kMaxRegisterRow);
    }
  }
  ReductionKernel k;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer = generic ? dim_mul(outer, in.shape[d]) : outer * in.shape[d];
  for (int d = axis + 1; d < rank; ++d) inner *= in.shape[d];
  k.count = in.shape[axis];
  k.outputs = generic ? outer : outer * inner;
  // Rows along the innermost extent: read once into registers (emit_rowwise.h).
  if (inner == 1 && !generic)
    if (std::optional<ReductionKernel> rk = emit_row_softmax(log_softmax, in, k.count, io)) return *rk;
  auto lit = [&](int64_t v) { return generic ? syms.lit(v) : fmt::format("{}LL", v); };
  const std::string T(cuda_compute_type(in.dtype));  // float, or double for f64
  const std::string ex = in.dtype == DType::F64 ? "exp" : "expf";
  std::string body;
  if (generic) body += KernelSymbols::struct_text();
  body += fmt::format("// {}: {} along axis {}: {} lines of {}\n", label, in.str(), axis, dim_str(k.outputs),
                      dim_str(k.count));
  body += block_fold(T, "@NAME@_max", "(v != v) ? v : (v > a ? v : a)", fmt::format("({})(-KILN_RED_INF)", T));
  body += block_fold("double", "@NAME@_sum", "a + v", "0.0");
  body += fmt::format("extern \"C\" __global__ void @NAME@({}{}) {{\n", kernel_params(io.buffers),
                      generic ? ", kiln_syms ks" : "");
  body += io.setup;
  body += fmt::format("  for (long long o = blockIdx.x; o < {}; o += gridDim.x) {{\n", lit(k.outputs));
  if (inner == 1) body += fmt::format("    const long long base = o * {};\n", lit(k.count));
  else body += fmt::format("    const long long base = (o / {0}LL) * {1}LL + o % {0}LL;\n", inner, k.count * inner);
  const std::string at = inner == 1 ? "base + j" : fmt::format("base + j * {}LL", inner);
  // The max pass reads each element once: it records (AnchorIO::load).
  const std::string x = fmt::format("(({}){})", T, cuda_load(in.dtype, io.load(0, at, false)));
  const std::string x_first = fmt::format("(({}){})", T, cuda_load(in.dtype, io.load(0, at, true)));
  const std::string loop = fmt::format("    for (long long j = threadIdx.x; j < {}; j += blockDim.x)", lit(k.count));
  body += fmt::format("    {} m = ({})(-KILN_RED_INF);\n", T, T);
  body += fmt::format("{} m = @NAME@_max(m, {});\n", loop, x_first);
  body += "    m = @NAME@_max_block(m);\n";
  // f16 softmax rounds exp(x - m) and the sum to f16 before dividing, as the reference (ops/softmax_ops.cpp).
  const bool round16 = in.dtype == DType::F16 && !log_softmax;
  auto r16 = [&](const std::string& v) { return round16 ? cuda_load(DType::F16, cuda_store(DType::F16, v)) : v; };
  const std::string e = r16(fmt::format("{}({})", ex, r16(fmt::format("{} - m", x))));
  body += "    double s = 0.0;\n";
  body += fmt::format("{} s += (double){};\n", loop, e);
  body += "    s = @NAME@_sum_block(s);\n";
  std::string val;
  if (round16) {
    body += fmt::format("    const float s16 = {};\n", r16("(float)s"));
    val = fmt::format("({}) / s16", e);
  } else if (log_softmax) {
    body += "    const double ls = log(s);\n";
    val = fmt::format("({})((double)({} - m) - ls)", T, x);
  } else {
    body += "    const double inv = 1.0 / s;\n";
    val = fmt::format("({})((double){}({} - m) * inv)", T, ex, x);
  }
  body += fmt::format("{} {{\n{}    }}\n  }}\n}}\n", loop, io.store(0, at, cuda_store(in.dtype, val), "      "));
  body += kernel_sim_entry(io.buffers, generic);
  finish(k, in.dtype, "kiln_sm", label, body, io);
  if (generic) {  // a block of 128 per row (its length is not known here), at most 65535 blocks looping over rows
    k.block = block_threads(128);
    k.symbols = syms.names();
    k.grid_expr = GridAxisExpr{k.outputs, 1, 65535};
    k.grid = 1;  // evaluated per shape
  }
  return k;
}

ReductionKernel emit_softmax_op(const OpDef& def, const AttrMap& attrs, const TensorType& in) {
  if (def.name != "softmax" && def.name != "log_softmax") fail("codegen: op '{}' is not softmax/log_softmax", def.name);
  int64_t axis = attrs.get_int("axis", -1);
  if (axis < 0) axis += static_cast<int64_t>(in.shape.size());
  return emit_softmax(def.name == "log_softmax", in, static_cast<int>(axis));
}

}  // namespace kiln::codegen
