// Launch variants of a GPU plan with shape profiles (runtime/plan_launch_variants.h,
// docs/dynamic_shapes.md "Specialised launches"): for each profile's opt
// shape, the symbolic graph specialised to it and emitted as a static plan of
// that shape would be (its tiles, split-K and pipeline); a node keeps the
// specialised launches only where the performance model (perf/perf_model.h)
// estimates them faster at the opt shape than its shape-generic launches
// there (specialisation_pays).
#pragma once
#ifdef KILN_HAVE_CODEGEN
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codegen/launch_fit.h"
#include "compiler/plan_frames.h"
#include "perf/gpu_specs.h"
#include "ir/graph.h"
#include "ir/symbolic_dim.h"

namespace kiln::planbuild {

// The rule: a node's specialised launches replace its generic ones at the
// opt shape when their estimated time (kernels plus one CUDA Graph node each)
// is at least kMinGainFraction of the generic launches' estimate and
// kMinGainUs below it. Smaller gains are not worth the kernels' compile time
// and plan bytes (a pointwise kernel is as fast with its sizes as
// parameters).
inline constexpr double kMinGainFraction = 0.05;
inline constexpr double kMinGainUs = 0.5;

// One node's launches at the opt shape, as the model estimates them.
struct VariantChoice {
  double generic_us = 0, specialised_us = 0;
  bool pays = false;
};

struct OptShapeVariants {
  uint32_t profile = 0;
  SymbolBindings at;             // the symbols' values at the opt shape
  std::unique_ptr<Graph> graph;  // the symbolic graph specialised to them (the same nodes in the same order)
  // Per node of the graph at its largest shapes (whose launch list the plan
  // holds) where the specialisation pays: this graph's node and its kernels.
  struct NodeVariant {
    const Node* node = nullptr;
    std::unique_ptr<std::vector<codegen::NodeKernel>> kernels;
    VariantChoice choice;
  };
  std::map<const Node*, NodeVariant> nodes;
};

// The variants of every profile whose opt shape differs from the others'
// (symbolic graph `g`, `at_max` its specialisation to the largest shapes,
// `nks` the generic kernels keyed by at_max's nodes).
std::vector<OptShapeVariants> opt_shape_variants(const Graph& g, const Graph& at_max, const NodeKernels& nks,
                                                 const PlanBuildOptions& o);

// GEMM size buckets: for a matmul/gemm node or a channels-last conv (its
// implicit GEMM's M) whose rows (its result's dims but the last, a
// polynomial of the symbols) span a range, shape-generic
// kernels emitted again with the tile for fewer or more rows
// (codegen ScopedGenericGemmRows), each kept for the range of rows where the
// model finds it faster than the default tile (the rule above at sampled
// shapes, the symbols moving from their smallest to their largest values
// together), at most kMaxBuckets per node.
inline constexpr int kMaxBuckets = 3;
struct RowBucket {
  DimPoly rows;
  int64_t lo = 0, hi = 0;  // rows in [lo, hi]
  int64_t tile_rows = 0;   // the representative rows its tile was chosen for
  std::unique_ptr<std::vector<codegen::NodeKernel>> kernels;
};
using RowBuckets = std::map<const Node*, std::vector<RowBucket>>;  // by node of the graph at its largest shapes
RowBuckets gemm_row_buckets(const Graph& g, const Graph& at_max, const NodeKernels& nks, const PlanBuildOptions& o);

// Node `n` (of at_max): the most workspace bytes and tile counters any of its
// variants' kernels use.
int64_t variant_workspace_bytes(const std::vector<OptShapeVariants>& vs, const Node& n);
int64_t variant_tile_counters(const std::vector<OptShapeVariants>& vs);

// After the launch list (`steps`, of graph `at_max`): each variant's steps,
// placed in the same buffers as the node's generic ones, as plan::LaunchVariants.
// The opt shapes' variants first (an exact shape wins over a range).
std::vector<plan::LaunchVariant> launch_variants(const std::vector<OptShapeVariants>& vs, const RowBuckets& buckets,
                                                 const Graph& at_max, const Locator& loc, Builder& b,
                                                 const std::vector<plan::Step>& steps);
// (shared with plan_writer_buckets.cpp) The model's estimate of node `pos`
// of `at` (a static graph) run by `kernels` at bindings `b`, and its GPU.
double estimate_us(const Graph& at, uint32_t pos, const std::vector<codegen::NodeKernel>& kernels,
                   const SymbolBindings& b, const perf::GpuSpec& gpu);
const perf::GpuSpec& model_gpu(const PlanBuildOptions& o);
std::vector<codegen::NodeKernel> emit_node(const Node& n, codegen::LaunchBounder& bounder, const PlanBuildOptions& o);
bool gain_pays(double generic_us, double variant_us);

}  // namespace kiln::planbuild
#endif
