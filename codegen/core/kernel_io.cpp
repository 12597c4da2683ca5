#include "codegen/core/kernel_io.h"

#include <xxhash.h>

#include <fmt/format.h>

#include "ir/symbolic_dim.h"

#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_text.h"

namespace kiln::codegen {

std::string kernel_params(const std::vector<KernelBuffer>& buffers) {
  std::string p;
  for (const KernelBuffer& b : buffers)
    p += fmt::format("{}KILN_PTR({}{}) {}", p.empty() ? "" : ", ", b.written ? "" : "const ",
                     cuda_storage_type(b.dtype), b.name);
  return p;
}

std::string kernel_sim_entry(const std::vector<KernelBuffer>& buffers, bool by_value_syms) {
  std::string s = "#ifdef KILN_SIM\n";
  s += "extern \"C\" int @NAME@_sim(const ::kiln::sim::LaunchConfig* cfg, void* const* buffers, "
       "const long long* counts, std::string* error) {\n  try {\n";
  s += "    ::kiln::sim::launch(*cfg, @NAME@";
  for (size_t i = 0; i < buffers.size(); ++i)
    s += fmt::format(",\n        ::kiln::sim::arg(static_cast<{}{}*>(buffers[{}]), counts[{}], \"{}\")",
                     buffers[i].written ? "" : "const ", cuda_storage_type(buffers[i].dtype), i, i, buffers[i].name);
  // A shape-generic kernel's kiln_syms: one more buffer, passed by value.
  if (by_value_syms) s += fmt::format(",\n        *static_cast<const kiln_syms*>(buffers[{}])", buffers.size());
  s += ");\n    return 0;\n";
  s += "  } catch (const ::kiln::sim::SimError& ex) {\n    *error = ex.what();\n    return 1;\n";
  s += "  } catch (const std::exception& ex) {\n    *error = ex.what();\n    return 2;\n  }\n}\n#endif\n";
  return s;
}

std::string kernel_headers(const std::vector<DType>& dtypes) {
  bool f16 = false, bf16 = false, low_bit = false;
  for (DType t : dtypes) {
    f16 = f16 || t == DType::F16;
    bf16 = bf16 || t == DType::BF16;
    low_bit = low_bit || is_low_bit(t);
  }
  std::string p;
  if (f16 || bf16) {
    p += "#ifndef KILN_SIM\n";
    if (f16) p += "#include <cuda_fp16.h>\n";
    if (bf16) p += "#include <cuda_bf16.h>\n";
    p += "#endif\n";
  }
  p += kKernelPrelude;
  if (low_bit) p += low_bit_prelude();
  return p;
}

std::string name_kernel(const std::string& prefix, const std::string& label, const std::string& body,
                        std::string& name) {
  name = fmt::format("{}_{}_{:016x}", prefix, sanitize_identifier(label), XXH64(body.data(), body.size(), 0));
  std::string named;
  for (size_t pos = 0;;) {
    size_t at = body.find("@NAME@", pos);
    named.append(body, pos, at == std::string::npos ? std::string::npos : at - pos);
    if (at == std::string::npos) break;
    named += name;
    pos = at + 6;
  }
  return named;
}

namespace {}  // namespace

int64_t kernel_buffer_count(const TensorType& t) {
  return has_symbolic_dims(t.shape) ? dim_product(t.shape) : t.numel();
}

AnchorIO plain_io(const std::vector<TensorType>& operands, const std::vector<TensorType>& results) {
  AnchorIO io;
  const bool one = results.size() == 1;
  for (size_t r = 0; r < results.size(); ++r) {
    io.buffers.push_back(
        {one ? "out" : fmt::format("out{}", r), results[r].dtype, true, kernel_buffer_count(results[r])});
    io.dtypes.push_back(results[r].dtype);
  }
  for (size_t k = 0; k < operands.size(); ++k) {
    io.buffers.push_back({fmt::format("in{}", k), operands[k].dtype, false, kernel_buffer_count(operands[k])});
    io.dtypes.push_back(operands[k].dtype);
  }
  io.load = [](int k, const std::string& idx, bool) { return fmt::format("in{}[{}]", k, idx); };
  io.store = [one](int r, const std::string& idx, const std::string& value, const std::string& indent) {
    return fmt::format("{}{}[{}] = {};\n", indent, one ? std::string("out") : fmt::format("out{}", r), idx, value);
  };
  return io;
}

}  // namespace kiln::codegen
