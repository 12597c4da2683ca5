#include "codegen/core/kernel_params.h"

#include <xxhash.h>

#include <algorithm>

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_text.h"

namespace kiln::codegen {

std::string kernel_param_list(const std::vector<KernelParam>& params) {
  std::string r;
  for (const KernelParam& p : params) {
    if (!r.empty()) r += ", ";
    r += fmt::format("KILN_PTR({}{}) {}", p.writable ? "" : "const ", cuda_storage_type(p.dtype), p.name);
  }
  return r;
}

std::string grid_stride_loop(const std::string& var, int64_t count) {
  return fmt::format(
      "  for (long long {0} = (long long)blockIdx.x * blockDim.x + threadIdx.x; {0} < {1}LL; "
      "{0} += (long long)gridDim.x * blockDim.x) {{\n",
      var, count);
}

std::string kernel_sim_entry(const std::vector<KernelParam>& params, bool by_value_syms) {
  std::string body = "#ifdef KILN_SIM\n";
  body +=
      "extern \"C\" int @NAME@_sim(const ::kiln::sim::LaunchConfig* cfg, void* const* buffers, "
      "const long long* counts, std::string* error) {\n  try {\n    ::kiln::sim::launch(*cfg, @NAME@";
  for (size_t i = 0; i < params.size(); ++i) {
    const KernelParam& p = params[i];
    body += fmt::format(",\n        ::kiln::sim::arg(static_cast<{}{}*>(buffers[{}]), counts[{}], \"{}\")",
                        p.writable ? "" : "const ", cuda_storage_type(p.dtype), i, i, p.name);
  }
  if (by_value_syms) body += fmt::format(",\n        *static_cast<const kiln_syms*>(buffers[{}])", params.size());
  body += ");\n    return 0;\n";
  body += "  } catch (const ::kiln::sim::SimError& ex) {\n    *error = ex.what();\n    return 1;\n";
  body += "  } catch (const std::exception& ex) {\n    *error = ex.what();\n    return 2;\n  }\n}\n#endif\n";
  return body;
}

std::string finish_kernel_source(const std::string& prefix, const std::string& label, const std::string& body,
                                 const std::vector<DType>& dtypes, std::string& name) {
  std::string prelude;
  if (std::find(dtypes.begin(), dtypes.end(), DType::F16) != dtypes.end())
    prelude += "#ifndef KILN_SIM\n#include <cuda_fp16.h>\n#endif\n";
  if (std::find(dtypes.begin(), dtypes.end(), DType::BF16) != dtypes.end())
    prelude += "#ifndef KILN_SIM\n#include <cuda_bf16.h>\n#endif\n";
  prelude += std::string(kKernelPrelude);
  name = fmt::format("{}_{}_{:016x}", prefix, sanitize_identifier(label), XXH64(body.data(), body.size(), 0));
  std::string named;
  for (size_t pos = 0;;) {
    size_t at = body.find("@NAME@", pos);
    named.append(body, pos, at == std::string::npos ? std::string::npos : at - pos);
    if (at == std::string::npos) break;
    named += name;
    pos = at + 6;
  }
  return prelude + named;
}

}  // namespace kiln::codegen
