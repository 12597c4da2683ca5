#include "codegen/emitters/gemm_conv/emit_einsum.h"

#include <xxhash.h>

#include <algorithm>

#include <fmt/format.h>

#include "codegen/launch_fit.h"
#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_text.h"
#include "ir/error.h"
#include "ops/linalg_internal.h"

namespace kiln::codegen {

ComputeKernel emit_einsum(const Epilogue& ep) {
  const Node& n = ep.anchor();
  if (n.op() != "einsum") unsupported("codegen: {} is not einsum", n.describe());
  std::vector<Shape> shapes;
  for (Value* v : n.inputs()) shapes.push_back(v->shape());
  ops::linalg::EinsumLoops L = ops::linalg::einsum_loops(n.attrs().get_string("equation", ""), shapes);
  const DType dt = n.output(0)->dtype();
  const bool fl = is_float(dt);
  const std::string at = fl ? "double" : "unsigned long long";
  const char* idx = ep.index_type();
  const int64_t total = n.output(0)->type().numel();
  const int nin = n.num_inputs();
  std::string b = fmt::format("// einsum \"{}\"\n", n.attrs().get_string("equation", ""));
  b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", ep.params());
  b += fmt::format(
      "  for ({} i = ({})(blockIdx.x * blockDim.x + threadIdx.x); i < {}; i += ({})(gridDim.x * "
      "blockDim.x)) {{\n",
      idx, idx, total, idx);
  // Each operand's offset at this output element.
  for (int k = 0; k < nin; ++k) b += fmt::format("    {} o{} = 0;\n", idx, k);
  b += fmt::format("    {} r = i;\n", idx);
  for (int d = static_cast<int>(L.out_sizes.size()) - 1; d >= 0; --d) {
    b += fmt::format("    {{ const {} c = r % {}; r /= {};", idx, L.out_sizes[d], L.out_sizes[d]);
    for (int k = 0; k < nin; ++k)
      if (L.out_strides[k][d]) b += fmt::format(" o{} += c * ({}){};", k, idx, L.out_strides[k][d]);
    b += " }\n";
  }
  b += fmt::format("    {} acc = 0;\n", at);
  std::string ind = "    ";
  const int ns = static_cast<int>(L.sum_sizes.size());
  for (int q = 0; q < ns; ++q) {
    b += fmt::format("{}for ({} s{} = 0; s{} < {}; ++s{}) {{\n", ind, idx, q, q, L.sum_sizes[q], q);
    ind += "  ";
  }
  std::string prod;
  for (int k = 0; k < nin; ++k) {
    std::string off = fmt::format("o{}", k);
    for (int q = 0; q < ns; ++q)
      if (L.sum_strides[k][q]) off += fmt::format(" + s{} * ({}){}", q, idx, L.sum_strides[k][q]);
    const DType t = n.input(k)->dtype();
    std::string v = fl ? fmt::format("(double){}", cuda_load(t, fmt::format("in{}[{}]", ep.anchor_slot(k), off)))
                       : gemm_load_as(t, fmt::format("in{}[{}]", ep.anchor_slot(k), off));
    prod = k == 0 ? v : fmt::format("{} * {}", prod, v);
  }
  b += fmt::format("{}acc += {};\n", ind, prod);
  for (int q = ns - 1; q >= 0; --q) {
    ind.resize(ind.size() - 2);
    b += ind + "}\n";
  }
  b += ep.code(fl ? "acc" : "(long long)acc", "i", "    ");
  b += "  }\n}\n";
  b += ep.sim_entry("@NAME@");
  ComputeKernel k;
  k.name = fmt::format("kiln_einsum_{:016x}", XXH64(b.data(), b.size(), 0));
  std::string named;
  for (size_t pos = 0;;) {
    size_t a = b.find("@NAME@", pos);
    named.append(b, pos, a == std::string::npos ? std::string::npos : a - pos);
    if (a == std::string::npos) break;
    named += k.name;
    pos = a + 6;
  }
  k.source = std::string(kKernelPrelude) + ep.fp_includes() + std::string(expr_prelude()) + named;
  k.block = block_threads(256);  // grid-stride: any block (codegen/launch_fit.h)
  k.grid = static_cast<unsigned>(std::min<int64_t>((total + k.block - 1) / k.block, 8192));
  return k;
}

}  // namespace kiln::codegen
