#include "codegen/emitters/data_movement/emit_transpose_tiled.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codegen/launch_fit.h"
#include "codegen/core/kernel_io.h"
#include "codegen/core/kernel_text.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

const char* uint_of(size_t bytes) {
  switch (bytes) {
    case 1:
      return "unsigned char";
    case 2:
      return "unsigned short";
    case 4:
      return "unsigned int";
    case 8:
      return "unsigned long long";
  }
  fail("codegen: transpose: elements of {} bytes are not supported", bytes);
}

}  // namespace

std::optional<InjectiveKernel> emit_tiled_transpose(const TensorType& in, const std::vector<int64_t>& perm) {
  const int rank = in.rank();
  if (static_cast<int>(perm.size()) != rank || in.numel() == 0) return std::nullopt;
  // Its 32 x 8 block is fixed by the tile: under a thread cap below it
  // (codegen/launch_fit.h) the generic kernel, whose block follows the cap, takes the transpose.
  if (block_threads(256) < 256) return std::nullopt;
  // Kept input dims (extent > 1), renumbered; the output order over them.
  std::vector<int> renum(rank, -1);
  std::vector<int64_t> kdims;
  for (int d = 0; d < rank; ++d)
    if (in.shape[d] > 1) {
      renum[d] = static_cast<int>(kdims.size());
      kdims.push_back(in.shape[d]);
    }
  std::vector<int> order;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank) return std::nullopt;
    if (renum[p] >= 0) order.push_back(renum[p]);
  }
  // Merge runs of consecutive input dims: groups in output order, each a
  // range [first, last] of kept input dims.
  std::vector<std::pair<int, int>> groups;
  for (int d : order) {
    if (!groups.empty() && groups.back().second + 1 == d) groups.back().second = d;
    else groups.push_back({d, d});
  }
  const int R = static_cast<int>(groups.size());
  if (R < 2) return std::nullopt;
  // Group sizes and input strides (input order = order of `first`).
  std::vector<int64_t> size(R), istride(R), ostride(R);
  for (int g = 0; g < R; ++g) {
    size[g] = 1;
    for (int d = groups[g].first; d <= groups[g].second; ++d) size[g] *= kdims[d];
  }
  std::vector<int> by_input(R);
  for (int g = 0; g < R; ++g) by_input[g] = g;
  std::sort(by_input.begin(), by_input.end(), [&](int a, int b) { return groups[a].first < groups[b].first; });
  for (int i = R - 1, run = 1; i >= 0; --i) {
    istride[by_input[i]] = run;
    run *= size[by_input[i]];
  }
  for (int g = R - 1, run = 1; g >= 0; --g) {
    ostride[g] = run;
    run *= size[g];
  }
  const int ja = by_input[R - 1];  // output position of the input's innermost group
  const int jb = R - 1;            // the output's innermost group
  if (ja == jb) return std::nullopt;
  const int64_t A = size[ja], B = size[jb];
  std::vector<int> batch;
  for (int g = 0; g < R; ++g)
    if (g != ja && g != jb) batch.push_back(g);
  int64_t Z = 1;
  for (int g : batch) Z *= size[g];
  const int64_t NA = (A + 31) / 32, NB = (B + 31) / 32, tiles = Z * NA * NB;

  const char* E = uint_of(dtype_size(in.dtype));
  InjectiveKernel k;
  k.numel = in.numel();
  k.counts = {k.numel, k.numel};
  std::string b = fmt::format("// transpose (tiled): {} perm [{}]: {} tiles of [{}, {}] -> [{}, {}] x {}\n", in.str(),
                              fmt::join(perm, ","), tiles, B, A, A, B, Z);
  b += fmt::format("extern \"C\" __global__ void @NAME@(KILN_PTR({0}) out, KILN_PTR(const {0}) in0) {{\n", E);
  b += fmt::format("  __shared__ {} tile[32][33];\n", E);
  b += "  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;\n";
  b += fmt::format("  for (long long t = blockIdx.x; t < {}LL; t += gridDim.x) {{\n", tiles);
  b += fmt::format("    const long long tb = t % {0}LL, ta = (t / {0}LL) % {1}LL;\n", NB, NA);
  b += fmt::format("    long long z = t / {}LL;\n", NB * NA);
  b += "    long long ib = 0, ob = 0;\n";
  for (int i = static_cast<int>(batch.size()) - 1; i >= 0; --i) {
    const int g = batch[i];
    b += fmt::format("    {{ const long long c = z % {0}LL; z /= {0}LL; ib += c * {1}LL; ob += c * {2}LL; }}\n",
                     size[g], istride[g], ostride[g]);
  }
  b += "    const long long a0 = ta * 32, b0 = tb * 32;\n";
  b += "    __syncthreads();  // the previous tile is written out\n";
  b += "    for (int y = ty; y < 32; y += 8) {\n";
  b += fmt::format("      if (b0 + y < {}LL && a0 + tx < {}LL) tile[y][tx] = in0[ib + (b0 + y) * {}LL + a0 + tx];\n", B,
                   A, istride[jb]);
  b += "    }\n    __syncthreads();\n";
  b += "    for (int y = ty; y < 32; y += 8) {\n";
  b += fmt::format("      if (a0 + y < {}LL && b0 + tx < {}LL) out[ob + (a0 + y) * {}LL + b0 + tx] = tile[tx][y];\n", A,
                   B, ostride[ja]);
  b += "    }\n  }\n}\n";
  // Elements move as unsigned integers of their size (bit for bit).
  const DType U = dtype_size(in.dtype) == 1   ? DType::U8
                  : dtype_size(in.dtype) == 2 ? DType::U16
                  : dtype_size(in.dtype) == 4 ? DType::U32
                                              : DType::U64;
  b += kernel_sim_entry({{"out", U, true, k.numel}, {"in0", U, false, k.numel}});
  std::string named = name_kernel("kiln_inj_transpose", "tiled", b, k.name);
  k.source = std::string(kKernelPrelude) + named;
  k.block = 256;
  k.grid = static_cast<unsigned>(std::min<int64_t>(tiles, 65535));
  return k;
}

}  // namespace kiln::codegen
