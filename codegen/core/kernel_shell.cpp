#include "codegen/core/kernel_shell.h"

#include <xxhash.h>

#include <algorithm>

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_text.h"

namespace kiln::codegen {

namespace {

// A macro body from statements: one logical line.
std::string one_line(const std::string& stmts) {
  std::string r;
  for (char c : stmts) r += c == '\n' ? ' ' : c;
  return r;
}

}  // namespace

void finish_op_kernel(OpKernel& k, std::string_view prefix, std::string_view label,
                      const std::vector<ShellBuffer>& buffers, const std::string& x_compute, const std::string& helpers,
                      const std::string& body, const KernelSeams* seams, const KernelSymbols* syms) {
  const bool generic = syms && !syms->empty();
  bool f16 = false, bf16 = false;
  std::string params, args, defs, undefs = "#undef KILN_LOAD_X\n#undef KILN_LOAD_X_ONCE\n#undef KILN_STORE\n";
  const std::vector<ShellBuffer>& params_of = seams ? seams->buffers : buffers;
  for (size_t i = 0; i < params_of.size(); ++i) {
    const ShellBuffer& b = params_of[i];
    f16 |= b.dtype == DType::F16;
    bf16 |= b.dtype == DType::BF16;
    const std::string_view S = cuda_storage_type(b.dtype);
    const std::string_view cq = b.result ? "" : "const ";
    params += fmt::format("{}KILN_PTR({}{}) {}", i ? ", " : "", cq, S, b.name);
    args += fmt::format(",\n        ::kiln::sim::arg(static_cast<{}{}*>(buffers[{}]), counts[{}], \"{}\")", cq, S, i, i,
                        b.name);
  }
  if (seams)
    for (DType t : seams->dtypes) {
      f16 |= t == DType::F16;
      bf16 |= t == DType::BF16;
    }
  for (const ShellBuffer& b : buffers) {
    if (b.name == "in0") {
      f16 |= b.dtype == DType::F16;
      bf16 |= b.dtype == DType::BF16;
      for (bool once : {false, true}) {
        const std::string x = seams ? seams->load_x("(i)", once) : "in0[(i)]";
        defs +=
            fmt::format("#define KILN_LOAD_X{}(i) (({}){})\n", once ? "_ONCE" : "", x_compute, cuda_load(b.dtype, x));
      }
    }
    if (b.result) {
      const std::string r = b.name.substr(3);  // out<r>
      const std::string v = cuda_store(b.dtype, "(v)");
      const std::string st =
          seams ? one_line(seams->store(std::stoi(r), "(i)", v)) : fmt::format("{}[(i)] = {};", b.name, v);
      defs += fmt::format("#define KILN_STORE_{}(i, v) do {{ {} }} while (0)\n", r, st);
      undefs += fmt::format("#undef KILN_STORE_{}\n", r);
    }
  }
  defs += "#define KILN_STORE(r, i, v) KILN_STORE_##r(i, v)\n";
  std::string text = "// Seams: every read of operand 0 and every store of a result (docs/codegen.md).\n";
  text += defs;
  text += helpers;
  if (generic) {
    text += KernelSymbols::struct_text();
    params += ", kiln_syms ks";
    // The symbols' values: one more buffer, passed by value.
    args += fmt::format(",\n        *static_cast<const kiln_syms*>(buffers[{}])", params_of.size());
    k.symbols = syms->names();
  }
  text += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", params);
  if (seams) text += seams->setup;
  text += body;
  text += "}\n" + undefs;
  text += "#ifdef KILN_SIM\n";
  text +=
      "extern \"C\" int @NAME@_sim(const ::kiln::sim::LaunchConfig* cfg, void* const* buffers, "
      "const long long* counts, std::string* error) {\n  try {\n";
  text += fmt::format("    ::kiln::sim::launch(*cfg, @NAME@{});\n    return 0;\n", args);
  text += "  } catch (const ::kiln::sim::SimError& ex) {\n    *error = ex.what();\n    return 1;\n";
  text += "  } catch (const std::exception& ex) {\n    *error = ex.what();\n    return 2;\n  }\n}\n#endif\n";

  k.name = fmt::format("{}_{}_{:016x}", prefix, sanitize_identifier(label), XXH64(text.data(), text.size(), 0));
  std::string named;
  for (size_t pos = 0;;) {
    size_t at = text.find("@NAME@", pos);
    named.append(text, pos, at == std::string::npos ? std::string::npos : at - pos);
    if (at == std::string::npos) break;
    named += k.name;
    pos = at + 6;
  }
  std::string prelude;
  if (f16) prelude += "#ifndef KILN_SIM\n#include <cuda_fp16.h>\n#endif\n";
  if (bf16) prelude += "#ifndef KILN_SIM\n#include <cuda_bf16.h>\n#endif\n";
  prelude += std::string(kKernelPrelude);
  prelude += std::string(expr_prelude());
  // A kernel stops on bad data the reference reports as an error (e.g. a
  // loss target out of range): __trap() on the GPU, a SimError in the simulator.
  prelude +=
      "#ifndef KILN_TRAP\n#ifdef KILN_SIM\n#define KILN_TRAP(msg) ::kiln::sim::detail::kernel_error(msg)\n#else\n"
      "#define KILN_TRAP(msg) __trap()\n#endif\n#endif\n";
  k.source = prelude + named;
}

OpKernel decided_op_kernel(OpKernel k, const KernelSymbols* syms) {
  if (syms && !syms->empty()) k.symbols = syms->names();
  return k;
}

unsigned items_grid(long long n, unsigned block) {
  return static_cast<unsigned>(std::min<long long>((n + block - 1) / block, 8192));
}

}  // namespace kiln::codegen
