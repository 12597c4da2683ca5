// The vectorized epilogue store of the tensor-core GEMM kernels
// (emit_gemm_store.cpp defines them for emit_gemm_mma.cpp; the wgmma kernel, emit_gemm_wgmma_tiled.cpp,
// shares them so both hand the epilogue the same accesses).
#pragma once
#include <string>

#include "codegen/emitters/gemm_conv/emit_gemm.h"

namespace kiln::codegen {

// Elements per epilogue access of the one-kernel store (1: element by
// element): the epilogue's vector width where the emitter gives a vectorized
// store whose rows start at multiples of it and N and the tile are multiples
// of it; split kernels store partial sums.
int vector_store_width(const TiledGemm& g, const Epilogue& ep, int BN, bool split);
// The vectorized store of EV columns gn0 .. gn0 + EV - 1 whose sums are in `accs`.
std::string vector_store(const TiledGemm& g, const Epilogue& ep, int EV, const std::string& accs);

}  // namespace kiln::codegen
