#include <fmt/format.h>

#include "codegen/core/kernel_text.h"
#include "codegen/emitters/gemm_conv/emit_gemm_store.h"

namespace kiln::codegen {

// Elements per epilogue access of the one-kernel store: the epilogue's vector
// width (Epilogue::vector_width) where the emitter gives a vectorized store
// whose rows start at multiples of it, the tile and N are multiples of it and
// the compute type is float; else 1. Split kernels store partial sums (their
// reduction or fold tail runs the scalar store).
int vector_store_width(const TiledGemm& g, const Epilogue& ep, int BN, bool split) {
  if (split || g.vstore_row.empty() || g.vstore_align <= 0 || gemm_compute_type(g.dtype) != "float" || g.N % 4)
    return 1;
  const int V = ep.vector_width();
  if (V < 2 || g.vstore_align % V || g.N % V || BN % V) return 1;
  return V;
}

// The vectorized store of EV columns (EV from vector_store_width): the
// partial sums of columns gn0 .. gn0 + EV - 1 are in `sum` (or in `accv`
// when staged in shared memory); `ind` indents.
std::string vector_store(const TiledGemm& g, const Epilogue& ep, int EV, const std::string& accs) {
  std::string b = replace_all(g.vstore_pre, "@V@", std::to_string(EV));
  b += fmt::format("      float e_r[{}];\n#pragma unroll\n      for (int j = 0; j < {}; ++j) {{\n", EV, EV);
  b += fmt::format("      const int gn = gn0 + j;\n      (void)gn;\n      const float acc = {}[j];\n", accs);
  b += replace_all(g.vstore_finish, "@V@", std::to_string(EV));
  b += fmt::format("      e_r[j] = {};\n      }}\n", g.vstore_value);
  return b + ep.vector_code("e_r", fmt::format("{} + gn0", g.vstore_row), EV, "      ");
}

}  // namespace kiln::codegen
