#include "codegen/core/simple_kernel.h"

#include <xxhash.h>

#include <algorithm>

#include <fmt/format.h>

#include "codegen/core/kernel_text.h"

namespace kiln::codegen {

OneLaunchKernel make_simple_kernel(const std::string& kind, const std::string& op,
                                   const std::vector<LaunchParam>& params, const std::string& helpers,
                                   const std::string& body, int64_t numel, const std::vector<DType>& dtypes) {
  OneLaunchKernel k;
  k.numel = numel;
  std::string plist;
  for (size_t i = 0; i < params.size(); ++i)
    plist += fmt::format("{}KILN_PTR({}) {}", i ? ", " : "", params[i].type, params[i].name);
  std::string text = helpers;
  text += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", plist);
  text += fmt::format("  const long long n = {}LL;\n", numel);
  text += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n";
  text += "       i += (long long)gridDim.x * blockDim.x) {\n";
  text += body;
  text += "  }\n}\n";
  text += "#ifdef KILN_SIM\n";
  text +=
      "extern \"C\" int @NAME@_sim(const ::kiln::sim::LaunchConfig* cfg, void* const* buffers, "
      "const long long* counts, std::string* error) {\n  try {\n";
  text += "    ::kiln::sim::launch(*cfg, @NAME@";
  for (size_t i = 0; i < params.size(); ++i)
    text += fmt::format(",\n        ::kiln::sim::arg(static_cast<{}*>(buffers[{}]), counts[{}], \"{}\")",
                        params[i].type, i, i, params[i].name);
  text += ");\n    return 0;\n";
  text += "  } catch (const ::kiln::sim::SimError& ex) {\n    *error = ex.what();\n    return 1;\n";
  text += "  } catch (const std::exception& ex) {\n    *error = ex.what();\n    return 2;\n  }\n}\n#endif\n";
  const bool f16 = std::find(dtypes.begin(), dtypes.end(), DType::F16) != dtypes.end();
  const bool bf16 = std::find(dtypes.begin(), dtypes.end(), DType::BF16) != dtypes.end();
  std::string prelude;
  if (f16 || bf16) {
    prelude += "#ifndef KILN_SIM\n";
    if (f16) prelude += "#include <cuda_fp16.h>\n";
    if (bf16) prelude += "#include <cuda_bf16.h>\n";
    prelude += "#endif\n";
  }
  prelude += std::string(kKernelPrelude);
  k.name = fmt::format("kiln_{}_{}_{:016x}", kind, sanitize_identifier(op), XXH64(text.data(), text.size(), 0));
  k.source = prelude + replace_all(text, "@NAME@", k.name);
  const int64_t blocks = (numel + k.block - 1) / k.block;
  k.grid = static_cast<unsigned>(std::min<int64_t>(blocks, 8192));
  return k;
}

}  // namespace kiln::codegen
