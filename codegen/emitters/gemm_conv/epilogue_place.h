// What the epilogue's generated code knows about a body value at the element
// being stored (codegen/emitters/gemm_conv/emit_epilogue.cpp): shared by the
// scalar form (Epilogue::code) and the vector form (emit_epilogue_vector.cpp),
// which map an element's index through the same layout ops.
#pragma once
#include <string>
#include <vector>

#include "codegen/core/size_expr.h"
#include "ir/dtype.h"
#include "ir/tensor.h"

namespace kiln::codegen {

// What the generated code knows about one body value at the element being
// stored: whether the element is in it (`ok`), its row-major index there, and
// the variable holding its value in the storage type.
struct EpiloguePlace {
  std::string ok;   // "true" or a bool variable
  std::string pos;  // index variable
  std::string var;  // storage-typed variable
  DType dtype;
  Shape shape;
};

// Coordinates of index `pos` over `shape`, as variables `<p>_<d>` (statements into `b`).
// A symbolic dim reads its value from `ks` (a shape-generic kernel).
std::vector<std::string> epilogue_coords(const std::string& pos, const Shape& shape, const std::string& p,
                                         const char* idx, const std::string& ind, std::string& b,
                                         const KernelSymbols& ks = KernelSymbols());
// The row-major index of coordinates `c` with `strides`.
std::string epilogue_linear(const std::vector<std::string>& c, const std::vector<int64_t>& strides, const char* idx,
                            const KernelSymbols& ks = KernelSymbols());
// `a && b`, dropping a "true".
std::string epilogue_and_ok(const std::string& a, const std::string& b);

}  // namespace kiln::codegen
