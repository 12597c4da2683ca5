#include "codegen/emitters/elementwise/emit_pointwise.h"

#include <xxhash.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_text.h"
#include "codegen/core/kernel_vector.h"
#include "codegen/core/size_expr.h"
#include "ir/error.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"

namespace kiln::codegen {

namespace {

// Output dims (size-1 dims dropped, adjacent dims merged where every operand
// reads them as one) and each operand's strides over them.
struct Layout {
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides;  // per operand
};

Layout collapse(const Shape& out, const std::vector<std::vector<int64_t>>& strides) {
  Layout l;
  l.strides.resize(strides.size());
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    bool merge = !l.dims.empty();
    for (size_t i = 0; merge && i < strides.size(); ++i) merge = l.strides[i].back() == dim_mul(strides[i][d], out[d]);
    if (merge) {
      l.dims.back() = dim_mul(l.dims.back(), out[d]);
      for (size_t i = 0; i < strides.size(); ++i) l.strides[i].back() = strides[i][d];
    } else {
      l.dims.push_back(out[d]);
      for (size_t i = 0; i < strides.size(); ++i) l.strides[i].push_back(strides[i][d]);
    }
  }
  return l;
}

}  // namespace

PointwiseKernel emit_pointwise(const Expr& e, const std::vector<TensorType>& operands, const TensorType& out,
                               const std::string& label, const SymbolicScalars& scalars) {
  KILN_CHECK(!e.nodes.empty(), "codegen: {}: empty expression", label);
  std::vector<int> args;
  for (size_t i = 0; i < operands.size(); ++i) args.push_back(static_cast<int>(i));
  PointwiseStep step{e, args};
  return emit_pointwise_multi({step}, operands, {{static_cast<int>(operands.size()), out}}, label, scalars);
}

void check_pointwise_multi(const std::vector<PointwiseStep>& steps, const std::vector<TensorType>& operands,
                           const std::vector<std::pair<int, TensorType>>& results, const std::string& label,
                           const SymbolicScalars& scalars) {
  KILN_CHECK(!results.empty(), "codegen: {}: no results", label);
  // The dtype of every value: operands, then each step's result.
  std::vector<DType> vdt;
  for (const TensorType& t : operands) vdt.push_back(t.dtype);
  for (size_t s = 0; s < steps.size(); ++s) {
    const PointwiseStep& st = steps[s];
    KILN_CHECK(!st.expr.nodes.empty(), "codegen: {}: empty expression", label);
    for (int a : st.args)
      if (a < 0 || a >= static_cast<int>(vdt.size()))
        fail("codegen: {}: step {} reads value {} of {}", label, s, a, vdt.size());
    for (const ExprNode& nd : st.expr.nodes) {
      if (nd.op != ExprOp::Input) continue;
      if (nd.input < 0 || nd.input >= static_cast<int>(st.args.size()))
        fail("codegen: {}: expression reads operand {} of {}", label, nd.input, st.args.size());
      if (vdt[st.args[nd.input]] != nd.dtype)
        fail("codegen: {}: operand {} is {} but the expression reads {}", label, nd.input,
             dtype_name(vdt[st.args[nd.input]]), dtype_name(nd.dtype));
    }
    check_expr_emittable(st.expr);
    vdt.push_back(st.expr.result_dtype());
  }
  const TensorType& out = results[0].second;
  for (const auto& [v, t] : results) {
    if (v < 0 || v >= static_cast<int>(vdt.size())) fail("codegen: {}: result reads value {}", label, v);
    if (vdt[v] != t.dtype)
      fail("codegen: {}: expression gives {} but the output is {}", label, dtype_name(vdt[v]), dtype_name(t.dtype));
    if (t.shape != out.shape) fail("codegen: {}: results of different shapes {} and {}", label, t.str(), out.str());
  }
  // Symbolic sizes are computed in the kernel (shape-generic, below); the
  // shapes' ranks must still line up.
  bool generic = has_symbolic_dims(out.shape);
  for (const TensorType& t : operands) generic = generic || has_symbolic_dims(t.shape);
  for (const TensorType& t : operands) {
    if (generic ? t.shape.size() > out.shape.size() : broadcast_shapes(t.shape, out.shape) != out.shape)
      fail("codegen: {}: operand {} does not broadcast to the output {}", label, t.str(), out.str());
  }
  for (const auto& [i, value] : scalars)
    if (i < 0 || i >= static_cast<int>(operands.size()) || operands[i].dtype != DType::I64 || operands[i].numel() != 1)
      fail("codegen: {}: operand {} holds the symbolic value {}, which only a scalar i64 operand may", label, i,
           dim_str(value));
  // The symbols the kernel would take (at most kMaxKernelSymbols), as emit_pointwise_multi collects them.
  if (generic || !scalars.empty()) {
    std::vector<Shape> shapes{out.shape};
    for (const TensorType& t : operands) shapes.push_back(t.shape);
    for (const auto& [i, value] : scalars) shapes.push_back(Shape{value});
    (void)KernelSymbols(shapes);
  }
}

PointwiseKernel emit_pointwise_multi(const std::vector<PointwiseStep>& steps, const std::vector<TensorType>& operands,
                                     const std::vector<std::pair<int, TensorType>>& results, const std::string& label,
                                     const SymbolicScalars& scalars) {
  check_pointwise_multi(steps, operands, results, label, scalars);
  const int nops = static_cast<int>(operands.size());
  // The dtype of every value: operands, then each step's result.
  std::vector<DType> vdt;
  for (const TensorType& t : operands) vdt.push_back(t.dtype);
  for (const PointwiseStep& st : steps) vdt.push_back(st.expr.result_dtype());
  const TensorType& out = results[0].second;
  const int nres = static_cast<int>(results.size());
  PointwiseKernel k;
  k.outputs = nres;
  // Shape-generic (docs/dynamic_shapes.md): symbolic sizes are computed in
  // the kernel from the symbols' values (parameter `ks`); a static kernel's
  // text is unchanged (every lit() of a constant is the "{}LL" it was).
  std::vector<Shape> shapes{out.shape};
  for (const TensorType& t : operands) shapes.push_back(t.shape);
  for (const auto& [i, value] : scalars) shapes.push_back(Shape{value});
  const KernelSymbols syms(shapes);
  const bool generic = !syms.empty();
  k.numel = generic ? dim_product(out.shape) : out.numel();
  for (int r = 0; r < nres; ++r) k.counts.push_back(k.numel);
  std::vector<std::vector<int64_t>> strides;
  for (const TensorType& t : operands) {
    if (generic) {
      strides.push_back(symbolic_broadcast_strides(t.shape, out.shape));
      k.counts.push_back(dim_product(t.shape));
      continue;
    }
    strides.push_back(broadcast_strides(t.shape, out.shape));
    k.counts.push_back(t.numel());
  }
  Layout lay = collapse(out.shape, strides);
  const int rank = static_cast<int>(lay.dims.size());
  // A symbolic count's largest value is not known here: 64-bit indices.
  const bool wide = generic || k.numel > (int64_t{1} << 31) - 1;
  const std::string_view idx = wide ? "long long" : "unsigned";
  std::vector<int64_t> contiguous(rank);
  int64_t run = 1;
  for (int d = rank - 1; d >= 0; --d) {
    contiguous[d] = run;
    run = dim_mul(run, lay.dims[d]);
  }

  // The body, with @NAME@ standing for the kernel name until it is hashed.
  auto out_name = [&](int r) { return nres == 1 ? std::string("out") : fmt::format("out{}", r); };
  std::string params;
  for (int r = 0; r < nres; ++r)
    params += fmt::format("{}KILN_PTR({}) {}", r ? ", " : "", cuda_storage_type(results[r].second.dtype), out_name(r));
  for (size_t i = 0; i < operands.size(); ++i)
    params += fmt::format(", KILN_PTR(const {}) in{}", cuda_storage_type(operands[i].dtype), i);
  std::string body;
  body +=
      fmt::format("// {}: {}{} <- ", sanitize_identifier(label), out.str(), nres > 1 ? fmt::format(" x{}", nres) : "");
  for (size_t i = 0; i < operands.size(); ++i) body += (i ? ", " : "") + operands[i].str();
  body += "\n";
  for (const PointwiseStep& st : steps) body += fmt::format("// {}\n", st.expr.str());
  if (generic) {
    params += ", kiln_syms ks";
    body += KernelSymbols::struct_text();
  }
  body += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", params);
  // Vector access (docs/codegen.md "Bandwidth-bound kernels"): each thread
  // takes a chunk of W consecutive output elements (W: 16 bytes of the widest
  // buffer). When every vectorized buffer is aligned (tested at run time) and
  // the chunk is whole, operands of the output's layout and operands that are
  // contiguous along an innermost dim of a multiple of W elements are read
  // with one vector load, operands broadcast along such a dim with one scalar
  // load, the rest element by element; results are stored as vectors. Any
  // other chunk (the tail, unaligned buffers) takes the guarded scalar path.
  enum class Mode { Contig, Scalar, InnerVec, InnerSplat, Gather };
  std::vector<DType> vec_dts;
  for (const auto& [v, t] : results) vec_dts.push_back(t.dtype);
  std::vector<Mode> mode(nops);
  const int64_t inner = rank ? lay.dims[rank - 1] : 1;
  for (int i = 0; i < nops; ++i) {
    const std::vector<int64_t>& st = lay.strides[i];
    const bool scalar = std::all_of(st.begin(), st.end(), [](int64_t s) { return s == 0; });
    if (st == contiguous) mode[i] = Mode::Contig;
    else if (scalar) mode[i] = Mode::Scalar;
    else if (st.back() == 1) mode[i] = Mode::InnerVec;
    else if (st.back() == 0) mode[i] = Mode::InnerSplat;
    else mode[i] = Mode::Gather;
    if (scalars.count(i)) mode[i] = Mode::Scalar;  // computed from `ks`, whatever the output's shape
    if (mode[i] != Mode::Scalar) vec_dts.push_back(operands[i].dtype);
  }
  const int W = vector_width(vec_dts);
  // A symbolic inner extent may be any value: never assumed a multiple of W.
  for (int i = 0; i < nops; ++i)
    if ((mode[i] == Mode::InnerVec || mode[i] == Mode::InnerSplat) && (is_symbolic_dim(inner) || inner % W != 0))
      mode[i] = Mode::Gather;
  k.vector_width = W;
  std::vector<std::string> al_names;
  std::vector<size_t> al_bytes;
  for (int r = 0; r < nres; ++r) {
    al_names.push_back(out_name(r));
    al_bytes.push_back(dtype_size(results[r].second.dtype));
  }
  for (int i = 0; i < nops; ++i)
    if (mode[i] == Mode::Contig || mode[i] == Mode::InnerVec) {
      al_names.push_back(fmt::format("in{}", i));
      al_bytes.push_back(dtype_size(operands[i].dtype));
    }
  const int64_t chunks = generic ? 0 : (k.numel + W - 1) / W;
  body += fmt::format("  const long long n = {};\n", syms.lit(k.numel));
  for (int r = 0; r < nres; ++r)
    body += fmt::format("  using VO{} = kiln_vec<{}, {}>;\n", r, cuda_storage_type(results[r].second.dtype), W);
  for (int i = 0; i < nops; ++i)
    if (mode[i] != Mode::Scalar)
      body += fmt::format("  using VI{} = kiln_vec<{}, {}>;\n", i, cuda_storage_type(operands[i].dtype), W);
  body += fmt::format("  const bool aligned = {};\n", vector_aligned(al_names, al_bytes, W));
  const std::string chunks_text = generic ? fmt::format("(n + {}LL) / {}LL", W - 1, W) : fmt::format("{}LL", chunks);
  body += fmt::format("  for (long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x; v < {};\n", chunks_text);
  body += "       v += (long long)gridDim.x * blockDim.x) {\n";
  body += fmt::format("    const long long i0 = v * {};\n", W);
  body += !generic && k.numel % W == 0 ? "    const bool full = aligned;\n"
                                       : fmt::format("    const bool full = aligned && i0 + {} <= n;\n", W);
  // A collapsed extent as C text: a constant bare (as before symbols), a symbolic one from `ks`.
  auto dim_text = [&](int64_t d) { return is_symbolic_dim(d) ? syms.lit(d) : std::to_string(d); };
  // Coordinates of flat index `var` over the collapsed dims (names c<d><sfx>)
  // and operand i's offset at them.
  auto coords = [&](const std::string& var, const std::string& sfx, const std::string& ind) {
    std::string c = fmt::format("{}{} r{} = ({}){};\n", ind, idx, sfx, idx, var);
    for (int d = rank - 1; d >= 0; --d) {
      if (d == 0) c += fmt::format("{}const {} c0{} = r{};\n", ind, idx, sfx, sfx);
      else
        c += fmt::format("{}const {} c{}{} = r{} % {}; r{} /= {};\n", ind, idx, d, sfx, sfx, dim_text(lay.dims[d]), sfx,
                         dim_text(lay.dims[d]));
    }
    return c;
  };
  auto offset = [&](int i, const std::string& var, const std::string& sfx) {
    if (lay.strides[i] == contiguous) return var;
    std::string off;
    for (int d = 0; d < rank; ++d) {
      int64_t s = lay.strides[i][d];
      if (s == 0) continue;
      if (!off.empty()) off += " + ";
      off +=
          s == 1 ? fmt::format("(long long)c{}{}", d, sfx) : fmt::format("(long long)c{}{} * {}", d, sfx, syms.lit(s));
    }
    return off.empty() ? std::string("0") : off;
  };
  auto needs_coords = [&](int i) { return mode[i] != Mode::Contig && mode[i] != Mode::Scalar; };
  bool any_coords = false, any_gather = false;
  for (int i = 0; i < nops; ++i) {
    any_coords = any_coords || needs_coords(i);
    any_gather = any_gather || mode[i] == Mode::Gather;
  }
  for (int i = 0; i < nops; ++i) {
    if (auto sv = scalars.find(i); sv != scalars.end())
      body +=
          fmt::format("    const long long a{}_s = {};  // a symbolic size, not the buffer\n", i, syms.lit(sv->second));
    else if (mode[i] == Mode::Scalar)
      body += fmt::format("    const {} a{}_s = in{}[0];\n", cuda_storage_type(operands[i].dtype), i, i);
    else body += fmt::format("    VI{} a{}_v;\n", i, i);
  }
  // The whole, aligned chunk.
  body += "    if (full) {\n";
  bool inner_coords = false;
  for (int i = 0; i < nops; ++i)
    inner_coords = inner_coords || mode[i] == Mode::InnerVec || mode[i] == Mode::InnerSplat;
  if (inner_coords) body += coords("i0", "_0", "      ");
  for (int i = 0; i < nops; ++i) {
    if (mode[i] == Mode::Contig) body += fmt::format("      a{0}_v = *KILN_PTR_CAST(const VI{0}, in{0} + i0);\n", i);
    else if (mode[i] == Mode::InnerVec)
      body += fmt::format("      a{0}_v = *KILN_PTR_CAST(const VI{0}, in{0} + ({1}));\n", i, offset(i, "i0", "_0"));
    else if (mode[i] == Mode::InnerSplat)
      body += fmt::format(
          "      {{\n        const {1} t = in{0}[{2}];\n#pragma unroll\n"
          "        for (int j = 0; j < {3}; ++j) a{0}_v.v[j] = t;\n      }}\n",
          i, cuda_storage_type(operands[i].dtype), offset(i, "i0", "_0"), W);
  }
  if (any_gather) {
    body += fmt::format("#pragma unroll\n      for (int j = 0; j < {}; ++j) {{\n", W);
    body += coords("i0 + j", "", "        ");
    for (int i = 0; i < nops; ++i)
      if (mode[i] == Mode::Gather) body += fmt::format("        a{0}_v.v[j] = in{0}[{1}];\n", i, offset(i, "", ""));
    body += "      }\n";
  }
  // Any other chunk: element by element.
  body += "    } else {\n";
  body += fmt::format("#pragma unroll\n      for (int j = 0; j < {}; ++j) {{\n", W);
  body += "        const long long i = i0 + j;\n        if (i >= n) break;\n";
  if (any_coords) body += coords("i", "", "        ");
  for (int i = 0; i < nops; ++i)
    if (mode[i] != Mode::Scalar) body += fmt::format("        a{0}_v.v[j] = in{0}[{1}];\n", i, offset(i, "i", ""));
  body += "      }\n    }\n";
  for (int r = 0; r < nres; ++r) body += fmt::format("    VO{0} o{0}_v;\n", r);
  body += fmt::format("#pragma unroll\n    for (int j = 0; j < {}; ++j) {{\n", W);
  body += "      if (!full && i0 + j >= n) break;\n";
  std::vector<std::string> loads;
  for (int i = 0; i < nops; ++i) {
    body += fmt::format("      const {} a{} = {};\n", cuda_storage_type(operands[i].dtype), i,
                        mode[i] == Mode::Scalar ? fmt::format("a{}_s", i) : fmt::format("a{}_v.v[j]", i));
    loads.push_back(cuda_load(operands[i].dtype, fmt::format("a{}", i)));
  }
  // Each value as a storage-typed variable: a step's result is rounded to its
  // dtype before later steps read it, as the reference stores it.
  std::vector<std::string> stored;
  for (int i = 0; i < nops; ++i) stored.push_back(fmt::format("a{}", i));
  for (size_t s = 0; s < steps.size(); ++s) {
    std::vector<std::string> in;
    for (int a : steps[s].args) in.push_back(a < nops ? loads[a] : cuda_load(vdt[a], stored[a]));
    const std::string prefix = steps.size() == 1 ? std::string("v") : fmt::format("v{}_", s);
    std::string result = emit_expr(steps[s].expr, in, prefix, "      ", body);
    const DType dt = steps[s].expr.result_dtype();
    if (steps.size() == 1) {
      stored.push_back(cuda_store(dt, result));
    } else {
      body += fmt::format("      const {} s{} = {};\n", cuda_storage_type(dt), s, cuda_store(dt, result));
      stored.push_back(fmt::format("s{}", s));
    }
  }
  for (int r = 0; r < nres; ++r) body += fmt::format("      o{}_v.v[j] = {};\n", r, stored[results[r].first]);
  body += "    }\n    if (full) {\n";
  for (int r = 0; r < nres; ++r)
    body += fmt::format("      *KILN_PTR_CAST(VO{0}, {1} + i0) = o{0}_v;\n", r, out_name(r));
  body += "    } else {\n";
  body += fmt::format("#pragma unroll\n      for (int j = 0; j < {}; ++j) {{\n", W);
  body += "        if (i0 + j >= n) break;\n";
  for (int r = 0; r < nres; ++r) body += fmt::format("        {}[i0 + j] = o{}_v.v[j];\n", out_name(r), r);
  body += "      }\n    }\n";
  body += "  }\n}\n";
  // Simulator entry.
  body += "#ifdef KILN_SIM\n";
  body +=
      "extern \"C\" int @NAME@_sim(const ::kiln::sim::LaunchConfig* cfg, void* const* buffers, "
      "const long long* counts, std::string* error) {\n  try {\n";
  body += "    ::kiln::sim::launch(*cfg, @NAME@";
  for (int r = 0; r < nres; ++r)
    body += fmt::format(",\n        ::kiln::sim::arg(static_cast<{}*>(buffers[{}]), counts[{}], \"{}\")",
                        cuda_storage_type(results[r].second.dtype), r, r, out_name(r));
  for (int i = 0; i < nops; ++i)
    body += fmt::format(",\n        ::kiln::sim::arg(static_cast<const {}*>(buffers[{}]), counts[{}], \"in{}\")",
                        cuda_storage_type(operands[i].dtype), nres + i, nres + i, i);
  // The symbols' values: one more buffer, passed by value.
  if (generic) body += fmt::format(",\n        *static_cast<const kiln_syms*>(buffers[{}])", nres + nops);
  body += ");\n    return 0;\n";
  body += "  } catch (const ::kiln::sim::SimError& ex) {\n    *error = ex.what();\n    return 1;\n";
  body += "  } catch (const std::exception& ex) {\n    *error = ex.what();\n    return 2;\n  }\n}\n#endif\n";

  bool f16 = false, bf16 = false, low_bit = false;
  for (DType t : vdt) {
    f16 = f16 || t == DType::F16;
    bf16 = bf16 || t == DType::BF16;
    low_bit = low_bit || is_low_bit(t);
  }
  for (const PointwiseStep& st : steps)
    for (const ExprNode& nd : st.expr.nodes) {
      f16 = f16 || nd.dtype == DType::F16;
      bf16 = bf16 || nd.dtype == DType::BF16;
      low_bit = low_bit || is_low_bit(nd.dtype);
    }
  std::string prelude;
  if (f16 || bf16) {
    prelude += "#ifndef KILN_SIM\n";
    if (f16) prelude += "#include <cuda_fp16.h>\n";
    if (bf16) prelude += "#include <cuda_bf16.h>\n";
    prelude += "#endif\n";
  }
  prelude += std::string(kKernelPrelude) + std::string(kVectorPrelude) + std::string(expr_prelude());
  if (low_bit) prelude += low_bit_prelude();
  k.name = fmt::format("kiln_pw_{}_{:016x}", sanitize_identifier(label), XXH64(body.data(), body.size(), 0));
  std::string named;
  for (size_t pos = 0;;) {
    size_t at = body.find("@NAME@", pos);
    named.append(body, pos, at == std::string::npos ? std::string::npos : at - pos);
    if (at == std::string::npos) break;
    named += k.name;
    pos = at + 6;
  }
  k.source = prelude + named;
  if (generic) {
    // ceil(ceil(numel / W) / block) == ceil(numel / (W * block)).
    k.symbols = syms.names();
    k.grid_expr = GridAxisExpr{k.numel, int64_t{W} * k.block, 8192};
    k.grid = 1;  // evaluated per shape (nonzero: a launch)
    return k;
  }
  const int64_t blocks = (chunks + k.block - 1) / k.block;
  k.grid = static_cast<unsigned>(std::min<int64_t>(blocks, 8192));
  return k;
}

PointwiseKernel emit_pointwise_op(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                  const TensorType& out, const SymbolicScalars& scalars) {
  if (def.category != OpCategory::Pointwise || !def.expr) fail("codegen: op '{}' is not pointwise", def.name);
  std::vector<DType> dts;
  for (const TensorType& t : operands) dts.push_back(t.dtype);
  ExprBuilder b(dts);
  Expr e = def.expr(b, attrs);
  return emit_pointwise(e, operands, out, def.name, scalars);
}

}  // namespace kiln::codegen
