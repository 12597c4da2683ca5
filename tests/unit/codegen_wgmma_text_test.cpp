// codegen/core/wgmma_text.h: the six wgmma.mma_async wrappers written from one
// template into wgmma.cuh's text, in the form the file held them (sm_90a
// plans embed this text, so its bytes are the plans' bytes).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "codegen/core/wgmma_text.h"

namespace kiln {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(CodegenWgmmaText, OneTemplateWritesEachWrapperAsTheFileHeldIt) {
  // N = 64, f16, as codegen/core/wgmma.cuh held it before the template.
  const std::string expected =
      "__device__ __forceinline__ void kiln_wgmma_m64n64k16_f16(float (&d)[32], unsigned long long desc_a,\n"
      "                                                        unsigned long long desc_b, int scale_d) {\n"
      "  asm volatile(\n"
      "      \"{\\n.reg .pred p;\\n\"\n"
      "      \"setp.ne.b32 p, %34, 0;\\n\"\n"
      "      \"wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {\"\n"
      "      \"%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,\"\n"
      "      \"%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31\"\n"
      "      \"}, %32, %33, p, 1, 1, 0, 0;\\n}\\n\"\n"
      "      : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]), \"+f\"(d[4]), \"+f\"(d[5]), \"+f\"(d[6]), "
      "\"+f\"(d[7]),\n"
      "        \"+f\"(d[8]), \"+f\"(d[9]), \"+f\"(d[10]), \"+f\"(d[11]), \"+f\"(d[12]), \"+f\"(d[13]), \"+f\"(d[14]), "
      "\"+f\"(d[15]),\n"
      "        \"+f\"(d[16]), \"+f\"(d[17]), \"+f\"(d[18]), \"+f\"(d[19]), \"+f\"(d[20]), \"+f\"(d[21]), \"+f\"(d[22]), "
      "\"+f\"(d[23]),\n"
      "        \"+f\"(d[24]), \"+f\"(d[25]), \"+f\"(d[26]), \"+f\"(d[27]), \"+f\"(d[28]), \"+f\"(d[29]), \"+f\"(d[30]), "
      "\"+f\"(d[31])\n"
      "      : \"l\"(desc_a), \"l\"(desc_b), \"r\"(scale_d));\n"
      "}\n";
  EXPECT_EQ(codegen::wgmma_mma_async_wrapper(64, false), expected);

  // N = 256, bf16: 128 accumulators, the descriptors and scale after them.
  const std::string w256 = codegen::wgmma_mma_async_wrapper(256, true);
  EXPECT_NE(w256.find("kiln_wgmma_m64n256k16_bf16(float (&d)[128]"), std::string::npos);
  EXPECT_NE(w256.find(".m64n256k16.f32.bf16.bf16 {"), std::string::npos);
  EXPECT_NE(
      w256.find("%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127\""),
      std::string::npos);
  EXPECT_NE(w256.find("}, %128, %129, p, 1, 1, 0, 0;"), std::string::npos);
  EXPECT_NE(w256.find("setp.ne.b32 p, %130, 0;"), std::string::npos);
  EXPECT_EQ(count(w256, "\"+f\"(d["), 128u);
  EXPECT_THROW(codegen::wgmma_mma_async_wrapper(96, false), std::logic_error);  // KILN_CHECK: an internal error

  // The file's text: every wrapper once, in place of the marker, before the
  // by-N template that calls them.
  const std::string text(codegen::wgmma_cuh_text());
  EXPECT_EQ(text.find("@WGMMA_MMA_ASYNC_WRAPPERS@"), std::string::npos);
  for (int n : {64, 128, 256})
    for (bool bf16 : {false, true}) {
      const std::string w = codegen::wgmma_mma_async_wrapper(n, bf16);
      EXPECT_EQ(count(text, w), 1u) << n << (bf16 ? " bf16" : " f16");
      EXPECT_LT(text.find(w), text.find("#endif  // KILN_SIM"));
    }
  EXPECT_EQ(count(text, "asm volatile(\n      \"{\\n.reg .pred p;"), 6u);
}

}  // namespace
}  // namespace kiln
