#include "codegen/emit_pointwise.h"

#include <xxhash.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "codegen/emit_expr.h"
#include "ir/error.h"
#include "ir/shape_utils.h"

namespace kiln::codegen {

namespace {

// Outside the simulator: what docs/simulator.md's NVRTC column says.
// (cuda_fp16.h / cuda_bf16.h, included only by kernels that use them, come
// before this: they are most of NVRTC's time for a small kernel.)
constexpr std::string_view kKernelPrelude = R"(#ifndef KILN_KERNEL_PRELUDE_
#define KILN_KERNEL_PRELUDE_
#ifndef KILN_SIM
#define KILN_PTR(T) T* __restrict__
#define KILN_PTR_CAST(U, p) reinterpret_cast<U*>(p)
#define KILN_DYNAMIC_SHARED(T, name) \
  extern __shared__ __align__(16) unsigned char kiln_smem_[]; \
  T* name = reinterpret_cast<T*>(kiln_smem_)
#endif
#endif  // KILN_KERNEL_PRELUDE_
)";

std::string sanitize(const std::string& s) {
  std::string r;
  for (char c : s) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return r;
}

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
  if (e.result_dtype() != out.dtype)
    fail("codegen: {}: expression gives {} but the output is {}", label, dtype_name(e.result_dtype()),
         dtype_name(out.dtype));
  for (const ExprNode& nd : e.nodes) {
    if (nd.op != ExprOp::Input) continue;
    if (nd.input < 0 || nd.input >= static_cast<int>(operands.size()))
      fail("codegen: {}: expression reads operand {} of {}", label, nd.input, operands.size());
    if (operands[nd.input].dtype != nd.dtype)
      fail("codegen: {}: operand {} is {} but the expression reads {}", label, nd.input,
           dtype_name(operands[nd.input].dtype), dtype_name(nd.dtype));
  }
  PointwiseKernel k;
  k.numel = out.numel();
  k.counts.push_back(k.numel);
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
  std::string params = fmt::format("KILN_PTR({}) out", cuda_storage_type(out.dtype));
  for (size_t i = 0; i < operands.size(); ++i)
    params += fmt::format(", KILN_PTR(const {}) in{}", cuda_storage_type(operands[i].dtype), i);
  std::string body;
  body += fmt::format("// {}: {} <- ", sanitize(label), out.str());
  for (size_t i = 0; i < operands.size(); ++i) body += (i ? ", " : "") + operands[i].str();
  body += fmt::format("\n// {}\n", e.str());
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
  std::string result = emit_expr(e, loads, "v", "    ", body);
  body += fmt::format("    out[i] = {};\n", cuda_store(out.dtype, result));
  body += "  }\n}\n";
  // Simulator entry.
  body += "#ifdef KILN_SIM\n";
  body += "extern \"C\" int @NAME@_sim(const ::kiln::sim::LaunchConfig* cfg, void* const* buffers, "
          "const long long* counts, std::string* error) {\n  try {\n";
  body += fmt::format("    ::kiln::sim::launch(*cfg, @NAME@,\n        ::kiln::sim::arg(static_cast<{}*>(buffers[0]), "
                      "counts[0], \"out\")",
                      cuda_storage_type(out.dtype));
  for (size_t i = 0; i < operands.size(); ++i)
    body += fmt::format(",\n        ::kiln::sim::arg(static_cast<const {}*>(buffers[{}]), counts[{}], \"in{}\")",
                        cuda_storage_type(operands[i].dtype), i + 1, i + 1, i);
  body += ");\n    return 0;\n";
  body += "  } catch (const ::kiln::sim::SimError& ex) {\n    *error = ex.what();\n    return 1;\n";
  body += "  } catch (const std::exception& ex) {\n    *error = ex.what();\n    return 2;\n  }\n}\n#endif\n";

  bool f16 = out.dtype == DType::F16, bf16 = out.dtype == DType::BF16;
  for (const TensorType& t : operands) {
    f16 = f16 || t.dtype == DType::F16;
    bf16 = bf16 || t.dtype == DType::BF16;
  }
  for (const ExprNode& nd : e.nodes) {
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
  k.name = fmt::format("kiln_pw_{}_{:016x}", sanitize(label), XXH64(body.data(), body.size(), 0));
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
