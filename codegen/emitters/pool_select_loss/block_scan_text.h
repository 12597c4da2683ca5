// The block-wide step that the chunked cumsum/cumprod kernels share (the
// static one, emit_select.cpp, and the shape-generic one,
// emit_scan_generic.cpp): each thread holds its chunk's total in `acc` and a
// `part` array of one slot per warp is in shared memory; the text leaves in
// `acc` the combination of every earlier chunk of the line (the exclusive
// prefix), computed by warp shuffles and then across the warp totals.
#pragma once
#include <fmt/format.h>

#include <string>

namespace kiln::codegen {

// `A` is the accumulator type, `id` the combination's identity and
// `combine(l, r)` the expression combining two accumulators.
template <typename Combine>
std::string block_scan_of_chunk_totals(const std::string& A, const std::string& id, Combine&& combine) {
  std::string b;
  b += "    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n";
  b += fmt::format("    {} inc = acc;\n", A);
  b += "    for (int d = 1; d < 32; d <<= 1) {\n";
  b += fmt::format("      const {} t = __shfl_up_sync(0xffffffffu, inc, d);\n", A);
  b += fmt::format("      if (lane >= d) inc = {};\n    }}\n", combine("t", "inc"));
  // The exclusive prefix of this chunk within its warp: the previous lane's inclusive one (no inverse
  // of the combination needed, so products and float sums come out exact in the scan's order).
  b += fmt::format("    const {} prev = __shfl_up_sync(0xffffffffu, inc, 1);\n", A);
  b += "    __syncthreads();\n";
  b += "    if (lane == 31) part[warp] = inc;\n";
  b += "    __syncthreads();\n";
  b += "    if (warp == 0) {\n";
  b += fmt::format("      {} w = lane < (int)(blockDim.x >> 5) ? part[lane] : {};\n", A, id);
  b += "      for (int d = 1; d < 32; d <<= 1) {\n";
  b += fmt::format("        const {} t = __shfl_up_sync(0xffffffffu, w, d);\n", A);
  b += fmt::format("        if (lane >= d) w = {};\n      }}\n", combine("t", "w"));
  b += "      part[lane] = w;  // inclusive prefix of the warp totals\n    }\n";
  b += "    __syncthreads();\n";
  // Pass 2 starts from the exclusive offset of this chunk.
  b += fmt::format("    acc = {};\n", combine(fmt::format("(warp > 0 ? part[warp - 1] : {})", id),
                                              fmt::format("(lane > 0 ? prev : {})", id)));
  return b;
}

}  // namespace kiln::codegen
