// The split-K pieces of the tensor-core GEMM kernel (emit_gemm_mma.cpp): the
// partial tile's store to the workspace, the folded tail (the last split of a
// tile sums them) and the second launch that sums them otherwise. Internal to
// codegen/emitters/gemm_conv.
#pragma once
#include <cstdint>
#include <string>

#include "codegen/emitters/gemm_conv/emit_gemm.h"

namespace kiln::codegen {

// One macro argument for KILN_PTR_CAST (a template-id's comma would split it).
constexpr const char* kF32x4 = "typedef kiln_vec<float, 4> kiln_f32x4;\n";

// The prelude of a folded split-K's tail: loads of the partial sums from L2.
extern const char* const kLoadFromL2;

// "// buffers: 0 3 4\n": the kernel parameters a split-K kernel reads or
// writes (perf/plan_work.cpp counts only those bytes): the partial GEMM the
// GEMM operands' slots and the workspace, the reduction every other buffer.
// A folded split's kernel states both: `label` "buffers" for its k-loop,
// "tail buffers" for the sums of its last blocks.
std::string buffers_comment(const TiledGemm& g, const Epilogue& ep, bool reduction, const char* label = "buffers");

// The partial GEMM's store: the block's BM x BN f32 tile (staged in `cs`,
// rows of CLD) to split `ks` of the workspace, ws[ks][bz][gm][gn], four
// columns per 16-byte store where N allows it and ws is 16-byte aligned.
std::string partial_store(const TiledGemm& g, int BM, int BN, int CLD, int threads, int64_t part);

// The tail of a folded split-K GEMM, after the block stored its partial tile
// (partial_store): the block takes a ticket from its tile's counter; the last
// of the tile's `splits` blocks to arrive sums the tile's partial tiles in
// split order -- the order of the reduction kernel, so the result is the
// same bits whichever block arrives last -- and runs the store (anchor finish
// + epilogue), then sets the counter back to 0 for the next launch. No block
// waits for another (the blocks of a grid need not be resident together).
std::string folded_tail(const TiledGemm& g, const Epilogue& ep, int BM, int BN, int threads, int64_t splits,
                        int64_t part, int EV);

// The second launch of a split-K GEMM: each thread sums `splits` partial
// values of V consecutive elements of one row (V = 4 when N allows 16-byte
// loads, else 1) in split order -- a fixed order, so the result does not
// depend on scheduling -- then runs the store (anchor finish + epilogue) per
// element, as the one-kernel GEMM does after its loop. Where the epilogue has
// a vector form (vector_store_width) of 4 or 8 columns, each thread takes that
// many (one or two 16-byte partial loads per split) and stores them through
// it, with as many elements per block as the 4-wide kernel (so the same grid).
ComputeKernel emit_split_k_reduction(const TiledGemm& g, const Epilogue& ep, int64_t splits,
                                     const std::string& includes);

}  // namespace kiln::codegen
