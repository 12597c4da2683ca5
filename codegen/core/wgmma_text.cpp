#include "codegen/core/wgmma_text.h"

#include <fmt/format.h>

#include "ir/error.h"

namespace kiln::codegen {

namespace {

// codegen/core/wgmma.cuh, embedded at build time (CMake writes the .inc).
constexpr std::string_view kWgmmaFile =
#include "wgmma.inc"
    ;

constexpr std::string_view kMarker = "// @WGMMA_MMA_ASYNC_WRAPPERS@";

// `count` operands from `first` on, `per_line` a line: each line starts with
// `lead` (the first with `first_lead`), items joined by ", ", lines but the
// last end in ','; `item` formats one operand number.
template <typename Item>
std::string operand_lines(int first, int count, int per_line, const char* first_lead, const char* lead, Item item) {
  std::string s;
  for (int row = 0; row < count / per_line; ++row) {
    s += row == 0 ? first_lead : lead;
    for (int i = 0; i < per_line; ++i) s += (i ? ", " : "") + item(first + row * per_line + i);
    s += row + 1 < count / per_line ? "," : "";
    s += item(-1);
  }
  return s;
}

}  // namespace

std::string wgmma_mma_async_wrapper(int n, bool bf16) {
  KILN_CHECK(n == 64 || n == 128 || n == 256, "codegen: a wgmma wrapper for N = {} (64, 128 or 256)", n);
  const char* t = bf16 ? "bf16" : "f16";
  const int regs = n / 2;  // f32 accumulators per thread
  std::string s = fmt::format(
      "__device__ __forceinline__ void kiln_wgmma_m64n{}k16_{}(float (&d)[{}], unsigned long long desc_a,\n", n, t,
      regs);
  s += std::string(56, ' ') + "unsigned long long desc_b, int scale_d) {\n";
  s += "  asm volatile(\n      \"{\\n.reg .pred p;\\n\"\n";
  s += fmt::format("      \"setp.ne.b32 p, %{}, 0;\\n\"\n", regs + 2);
  s += fmt::format("      \"wgmma.mma_async.sync.aligned.m64n{}k16.f32.{}.{} {{\"\n", n, t, t);
  // The accumulator registers in the instruction, 16 a line: "%0, %1, ...".
  s += operand_lines(0, regs, 16, "      \"", "      \"",
                     [](int i) { return i < 0 ? std::string("\"\n") : fmt::format("%{}", i); });
  s += fmt::format("      \"}}, %{}, %{}, p, 1, 1, 0, 0;\\n}}\\n\"\n", regs, regs + 1);
  // Their constraints, 8 a line: "+f"(d[0]), ...
  s += operand_lines(0, regs, 8, "      : ", "        ",
                     [](int i) { return i < 0 ? std::string("\n") : fmt::format("\"+f\"(d[{}])", i); });
  s += "      : \"l\"(desc_a), \"l\"(desc_b), \"r\"(scale_d));\n}\n";
  return s;
}

std::string_view wgmma_cuh_text() {
  static const std::string text = [] {
    std::string wrappers;
    for (int n : {64, 128, 256})
      for (bool bf16 : {false, true}) wrappers += wgmma_mma_async_wrapper(n, bf16);
    std::string file(kWgmmaFile);
    const size_t at = file.find(kMarker);
    KILN_CHECK(at != std::string::npos, "codegen: wgmma.cuh lost its {} lines", kMarker);
    const size_t end = file.find("\n\n", at);  // the marker's comment block ends at the blank line
    KILN_CHECK(end != std::string::npos, "codegen: wgmma.cuh: no blank line after {}", kMarker);
    file.replace(at, end + 1 - at, wrappers);
    return file;
  }();
  return text;
}

}  // namespace kiln::codegen
