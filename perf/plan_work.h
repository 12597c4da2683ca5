// What each step of a plan asks of the GPU, for the performance model
// (perf/perf_model.h): the step's node in the plan's graph names the op and
// its operands' real shapes and dtypes (FLOPs: 2 x M x N x K for conv and
// GEMM, 2 x B x H x Sq x Sk x (D + Dv) for attention); the step's buffer
// bindings give the bytes (each distinct buffer once; of a gather's data
// operand, only as many bytes as the gather writes); the launch gives the
// grid and block; ptxas's resources (the plan's `resources` section, else
// the CUBIN's .nv.info via runtime/cubin_info.h) give registers and static
// shared memory; and the kernel's source states its tile loop (the tile,
// k-tiles and stages the GEMM/conv/attention emitters bake in as constants).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "perf/perf_model.h"
#include "runtime/plan_format.h"

namespace kiln::perf {

struct StepWork {
  size_t step = 0;
  std::string node;    // "#12 conv_3 (fused)": the plan's node label
  std::string kernel;  // the kernel's name; empty for copies
  std::string anchor;  // the op the kind comes from ("conv", "matmul", ...; "" for copies)
  LaunchWork work;
};

// The tile loop a kernel's source declares, or k_tiles = 0 when it has none
// (pointwise, reductions, ...). `k` is the node's reduction length (attention:
// its keys), used when the source gives the tile but not the k-tile count.
TileLoop tile_loop_from_source(const std::string& source, int64_t k);

// The work of every step of `p`, in order. `g` is the plan's graph
// (runtime/plan_graph.h load_graph). Throws kiln::Error when a step's node is
// not in the graph.
std::vector<StepWork> plan_work(const plan::Plan& p, const Graph& g);

// The batch the plan was compiled at: dim 0 of its first input (1 if none).
int64_t plan_batch(const Graph& g);

}  // namespace kiln::perf
