#include "codegen/emit_pointwise.h"

#include <xxhash.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "codegen/emit_expr.h"
#include "codegen/kernel_text.h"
#include "ir/error.h"
#include "ir/shape_utils.h"

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
    for (size_t i = 0; merge && i < strides.size(); ++i)
      merge = l.strides[i].back() == strides[i][d] * out[d];
    if (merge) {
      l.dims.back() *= out[d];
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
                               const std::string& label) {
  KILN_CHECK(!e.nodes.empty(), "codegen: {}: empty expression", label);
  std::vector<int> args;
  for (size_t i = 0; i < operands.size(); ++i) args.push_back(static_cast<int>(i));
  PointwiseStep step{e, args};
  return emit_pointwise_multi({step}, operands, {{static_cast<int>(operands.size()), out}}, label);
}

PointwiseKernel emit_pointwise_multi(const std::vector<PointwiseStep>& steps, const std::vector<TensorType>& operands,
                                     const std::vector<std::pair<int, TensorType>>& results,
                                     const std::string& label) {
  KILN_CHECK(!results.empty(), "codegen: {}: no results", label);
  const int nops = static_cast<int>(operands.size());
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
    vdt.push_back(st.expr.result_dtype());
  }
  const TensorType& out = results[0].second;
  for (const auto& [v, t] : results) {
    if (v < 0 || v >= static_cast<int>(vdt.size())) fail("codegen: {}: result reads value {}", label, v);
    if (vdt[v] != t.dtype)
      fail("codegen: {}: expression gives {} but the output is {}", label, dtype_name(vdt[v]), dtype_name(t.dtype));
    if (t.shape != out.shape) fail("codegen: {}: results of different shapes {} and {}", label, t.str(), out.str());
  }
  const int nres = static_cast<int>(results.size());
  PointwiseKernel k;
  k.outputs = nres;
  k.numel = out.numel();
  for (int r = 0; r < nres; ++r) k.counts.push_back(k.numel);
  std::vector<std::vector<int64_t>> strides;
  for (const TensorType& t : operands) {
    if (broadcast_shapes(t.shape, out.shape) != out.shape)
      fail("codegen: {}: operand {} does not broadcast to the output {}", label, t.str(), out.str());
    strides.push_back(broadcast_strides(t.shape, out.shape));
    k.counts.push_back(t.numel());
  }
  Layout lay = collapse(out.shape, strides);
  const int rank = static_cast<int>(lay.dims.size());
  const bool wide = k.numel > (int64_t{1} << 31) - 1;
  const std::string_view idx = wide ? "long long" : "unsigned";
  std::vector<int64_t> contiguous(rank);
  int64_t run = 1;
  for (int d = rank - 1; d >= 0; --d) {
    contiguous[d] = run;
    run *= lay.dims[d];
  }

  // The body, with @NAME@ standing for the kernel name until it is hashed.
  auto out_name = [&](int r) { return nres == 1 ? std::string("out") : fmt::format("out{}", r); };
  std::string params;
  for (int r = 0; r < nres; ++r)
    params += fmt::format("{}KILN_PTR({}) {}", r ? ", " : "", cuda_storage_type(results[r].second.dtype), out_name(r));
  for (size_t i = 0; i < operands.size(); ++i)
    params += fmt::format(", KILN_PTR(const {}) in{}", cuda_storage_type(operands[i].dtype), i);
  std::string body;
  body += fmt::format("// {}: {}{} <- ", sanitize_identifier(label), out.str(), nres > 1 ? fmt::format(" x{}", nres) : "");
  for (size_t i = 0; i < operands.size(); ++i) body += (i ? ", " : "") + operands[i].str();
  body += "\n";
  for (const PointwiseStep& st : steps) body += fmt::format("// {}\n", st.expr.str());
  body += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", params);
  body += fmt::format("  const long long n = {}LL;\n", k.numel);
  body += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n";
  body += "       i += (long long)gridDim.x * blockDim.x) {\n";
  // Coordinates over the collapsed dims, only when some operand needs them.
  bool need_coords = false;
  for (size_t i = 0; i < operands.size(); ++i)
    if (lay.strides[i] != contiguous && std::any_of(lay.strides[i].begin(), lay.strides[i].end(),
                                                    [](int64_t s) { return s != 0; }))
      need_coords = true;
  if (need_coords) {
    body += fmt::format("    {} r = ({})i;\n", idx, idx);
    for (int d = rank - 1; d >= 0; --d) {
      if (d == 0) {
        body += fmt::format("    const {} c0 = r;\n", idx);
      } else {
        body += fmt::format("    const {} c{} = r % {}; r /= {};\n", idx, d, lay.dims[d], lay.dims[d]);
      }
    }
  }
  std::vector<std::string> loads;
  for (size_t i = 0; i < operands.size(); ++i) {
    std::string off;
    if (lay.strides[i] == contiguous) {
      off = "i";
    } else {
      for (int d = 0; d < rank; ++d) {
        int64_t s = lay.strides[i][d];
        if (s == 0) continue;
        if (!off.empty()) off += " + ";
        off += s == 1 ? fmt::format("(long long)c{}", d) : fmt::format("(long long)c{} * {}LL", d, s);
      }
      if (off.empty()) off = "0";
    }
    body += fmt::format("    const {} a{} = in{}[{}];\n", cuda_storage_type(operands[i].dtype), i, i, off);
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
    std::string result = emit_expr(steps[s].expr, in, prefix, "    ", body);
    const DType dt = steps[s].expr.result_dtype();
    if (steps.size() == 1) {
      stored.push_back(cuda_store(dt, result));
    } else {
      body += fmt::format("    const {} s{} = {};\n", cuda_storage_type(dt), s, cuda_store(dt, result));
      stored.push_back(fmt::format("s{}", s));
    }
  }
  for (int r = 0; r < nres; ++r) body += fmt::format("    {}[i] = {};\n", out_name(r), stored[results[r].first]);
  body += "  }\n}\n";
  // Simulator entry.
  body += "#ifdef KILN_SIM\n";
  body += "extern \"C\" int @NAME@_sim(const ::kiln::sim::LaunchConfig* cfg, void* const* buffers, "
          "const long long* counts, std::string* error) {\n  try {\n";
  body += "    ::kiln::sim::launch(*cfg, @NAME@";
  for (int r = 0; r < nres; ++r)
    body += fmt::format(",\n        ::kiln::sim::arg(static_cast<{}*>(buffers[{}]), counts[{}], \"{}\")",
                        cuda_storage_type(results[r].second.dtype), r, r, out_name(r));
  for (int i = 0; i < nops; ++i)
    body += fmt::format(",\n        ::kiln::sim::arg(static_cast<const {}*>(buffers[{}]), counts[{}], \"in{}\")",
                        cuda_storage_type(operands[i].dtype), nres + i, nres + i, i);
  body += ");\n    return 0;\n";
  body += "  } catch (const ::kiln::sim::SimError& ex) {\n    *error = ex.what();\n    return 1;\n";
  body += "  } catch (const std::exception& ex) {\n    *error = ex.what();\n    return 2;\n  }\n}\n#endif\n";

  bool f16 = false, bf16 = false;
  for (DType t : vdt) {
    f16 = f16 || t == DType::F16;
    bf16 = bf16 || t == DType::BF16;
  }
  for (const PointwiseStep& st : steps)
    for (const ExprNode& nd : st.expr.nodes) {
      f16 = f16 || nd.dtype == DType::F16;
      bf16 = bf16 || nd.dtype == DType::BF16;
    }
  std::string prelude;
  if (f16 || bf16) {
    prelude += "#ifndef KILN_SIM\n";
    if (f16) prelude += "#include <cuda_fp16.h>\n";
    if (bf16) prelude += "#include <cuda_bf16.h>\n";
    prelude += "#endif\n";
  }
  prelude += std::string(kKernelPrelude) + std::string(expr_prelude());
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
  const int64_t blocks = (k.numel + k.block - 1) / k.block;
  k.grid = static_cast<unsigned>(std::min<int64_t>(blocks, 8192));
  return k;
}

PointwiseKernel emit_pointwise_op(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                  const TensorType& out) {
  if (def.category != OpCategory::Pointwise || !def.expr)
    fail("codegen: op '{}' is not pointwise", def.name);
  std::vector<DType> dts;
  for (const TensorType& t : operands) dts.push_back(t.dtype);
  ExprBuilder b(dts);
  Expr e = def.expr(b, attrs);
  return emit_pointwise(e, operands, out, def.name);
}

}  // namespace kiln::codegen
