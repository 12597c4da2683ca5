// Tiled transposes (docs/codegen.md "Bandwidth-bound kernels"): a transpose
// that moves the input's innermost dim away from the innermost position goes
// through a 32x33 shared-memory tile, so both the reads (along the input's
// innermost dim) and the writes (along the output's) are coalesced; the
// generic injective kernel reads with a large stride there.
//
// The permutation is first canonicalized: size-1 dims dropped, input dims
// that stay adjacent and in order in the output merged. What remains is a
// batch of [B, A] -> [A, B] tile problems (A: the input's innermost merged
// dim, B: the output's), the other dims enumerating the batch. One 256-thread
// block (32 x 8) per 32 x 32 tile, a grid-stride loop over all tiles.
#pragma once
#include <optional>
#include <vector>

#include "codegen/emitters/data_movement/emit_injective.h"

namespace kiln::codegen {

// The tiled kernel for transpose(`in`, `perm`), or nullopt when the
// canonical permutation keeps the innermost dim in place (the generic kernel
// is coalesced then), the input is empty, or a thread cap below 256 is in
// force (codegen::block_threads: the generic kernel's block follows it).
std::optional<InjectiveKernel> emit_tiled_transpose(const TensorType& in, const std::vector<int64_t>& perm);

}  // namespace kiln::codegen
