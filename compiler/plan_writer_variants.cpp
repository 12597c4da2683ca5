#include "compiler/plan_writer_variants.h"

#ifdef KILN_HAVE_CODEGEN
#include <algorithm>
#include <set>

#include "codegen/emitter_table.h"
#include "codegen/emitters/gemm_conv/gemm_tiles_wgmma.h"
#include "codegen/launch_fit.h"
#include "codegen/param_table.h"
#include "compiler/targets.h"
#include "ir/error.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "perf/plan_work.h"
#include "runtime/plan_generic_launches.h"
#include "runtime/plan_launch_variants.h"
#include "runtime/plan_profiles.h"

namespace kiln::planbuild {

std::vector<codegen::NodeKernel> emit_node(const Node& n, codegen::LaunchBounder& bounder, const PlanBuildOptions& o) {
  std::vector<codegen::NodeKernel> ks = codegen::emitter_for(n)->emit(n);
  for (codegen::NodeKernel& k : ks) {
    bounder.apply(k);
    try {
      codegen::use_param_table_if_needed(k);
    } catch (const Error& e) {
      fail("{}{}: {}", o.source_name.empty() ? "" : o.source_name + ": ", n.describe(), e.what());
    }
  }
  return ks;
}

namespace {
plan::Dim3 grid_at(const codegen::NodeKernel& k, const SymbolBindings& at) {
  if (!k.shape_generic()) return {k.grid.x, k.grid.y, k.grid.z};
  uint32_t axis[3];
  for (int a = 0; a < 3; ++a)
    axis[a] = plan::eval_grid_axis({dim_poly(k.grid_expr[a].items), static_cast<uint64_t>(k.grid_expr[a].per_block),
                                    k.grid_expr[a].cap, static_cast<uint64_t>(k.grid_expr[a].multiplier)},
                                   at);
  return {axis[0], axis[1], axis[2]};
}
}  // namespace

// Node `n` (of the graph at the opt shape, position `pos`) run by `kernels`
// at bindings `at`, as the performance model estimates it: a one-node plan
// whose buffers are the node's values at the opt shape (each distinct), so
// both variants are judged on the same bytes and FLOPs and differ in their
// grids, tiles, split-K and launches. Registers are not known before NVRTC:
// the model applies no register limit.
double estimate_us(const Graph& at_opt, uint32_t pos, const std::vector<codegen::NodeKernel>& kernels,
                   const SymbolBindings& at, const perf::GpuSpec& gpu) {
  const Node& n = *at_opt.node_list().at(pos);
  plan::Plan tmp;
  std::map<const Value*, uint64_t> where;
  auto ref = [&](const Value* v) {
    plan::BufferRef b;
    b.kind = plan::BufferKind::Arena;
    b.offset = where.emplace(v, where.size()).first->second;
    b.nbytes = v->type().nbytes();
    b.elements = v->type().numel();
    return b;
  };
  uint64_t scratch = 1u << 20;  // workspace, counters and extras: buffers of their own
  auto own = [&](uint64_t bytes) {
    plan::BufferRef b;
    b.kind = plan::BufferKind::Arena;
    b.offset = scratch++;
    b.nbytes = bytes;
    b.elements = static_cast<int64_t>(bytes / 4);
    return b;
  };
  for (const codegen::NodeKernel& k : kernels) {
    const plan::Dim3 grid = grid_at(k, at);
    if (uint64_t(grid.x) * grid.y * grid.z == 0) continue;
    plan::Step s;
    s.node = pos;
    s.kernel = static_cast<uint32_t>(tmp.kernels.size());
    s.grid = grid;
    s.block = {k.block.x, k.block.y, k.block.z};
    s.shared_bytes = static_cast<uint32_t>(k.shared_bytes);
    if (k.results.empty())
      for (int r = 0; r < n.num_outputs(); ++r) s.args.push_back(ref(n.output(r)));
    else
      for (int r : k.results) s.args.push_back(ref(n.output(r)));
    for (const Value* v : n.inputs()) s.args.push_back(v ? ref(v) : plan::BufferRef{});
    for (const Tensor& t : k.extra) s.args.push_back(own(t.nbytes()));
    if (k.workspace_f32 > 0) s.args.push_back(own(static_cast<uint64_t>(k.workspace_f32) * 4));
    if (k.tile_counters > 0) s.args.push_back(own(static_cast<uint64_t>(k.tile_counters) * 4));
    plan::Kernel pk;
    pk.name = k.name;
    pk.source = k.source;
    tmp.kernels.push_back(std::move(pk));
    tmp.steps.push_back(std::move(s));
  }
  const perf::ModelConstants c;
  double us = 0;
  for (const perf::StepWork& sw : perf::plan_work(tmp, at_opt))
    us += perf::estimate_launch(sw.work, gpu, c).est_us + c.graph_node_overhead_us;
  return us;
}

const perf::GpuSpec& model_gpu(const PlanBuildOptions& o) {
  // The target's default GPU (an H100 for sm_90), as `kiln inspect --perf`
  // models it: a plan does not depend on the GPU it is built on.
  for (const std::string& arch : target_archs(o.target))
    if (const perf::GpuSpec* g = perf::default_gpu_for_arch(arch)) return *g;
  const perf::GpuSpec* h100 = perf::default_gpu_for_arch("sm_90");
  KILN_CHECK(h100, "the performance model has no sm_90 GPU");
  return *h100;
}

bool gain_pays(double generic_us, double variant_us) {
  const double gain = generic_us - variant_us;
  return gain >= kMinGainUs && gain >= kMinGainFraction * generic_us;
}

std::vector<OptShapeVariants> opt_shape_variants(const Graph& g, const Graph& at_max, const NodeKernels& nks,
                                                 const PlanBuildOptions& o) {
  std::vector<OptShapeVariants> out;
  if (o.profiles.empty() || g.symbols().empty() || o.opt_variants == "none") return out;
  KILN_CHECK(o.opt_variants == "auto" || o.opt_variants == "all", "opt_variants is '{}' (auto, all or none)",
             o.opt_variants);
  const perf::GpuSpec& gpu = model_gpu(o);
  const std::vector<Node*> max_nodes = at_max.node_list();
  std::set<SymbolBindings> seen;
  for (size_t pi = 0; pi < o.profiles.size(); ++pi) {
    OptShapeVariants v;
    v.profile = static_cast<uint32_t>(pi);
    plan::ShapeProfiles profiles;
    profiles.profiles = o.profiles;
    v.at = plan::opt_shape_symbols(profiles, pi, g);
    if (!seen.insert(v.at).second) continue;  // another profile's opt shape: its variants serve both
    v.graph = specialize_graph(g, v.at, op_registry());
    const std::vector<Node*> opt_nodes = v.graph->node_list();
    KILN_CHECK(opt_nodes.size() == max_nodes.size(), "the graph at the opt shape has {} nodes, not {}",
               opt_nodes.size(), max_nodes.size());
    codegen::LaunchBounder bounder;
    const codegen::ScopedSm90Wgmma wgmma(o.target == "sm_90a");  // as node_kernels: the target's opt-in
    for (size_t i = 0; i < max_nodes.size(); ++i) {
      auto at = nks.of.find(max_nodes[i]);
      if (at == nks.of.end()) continue;
      const std::vector<codegen::NodeKernel>& generic = *at->second;
      if (std::none_of(generic.begin(), generic.end(), [](const auto& k) { return k.shape_generic(); })) continue;
      OptShapeVariants::NodeVariant nv;
      nv.node = opt_nodes[i];
      nv.kernels = std::make_unique<std::vector<codegen::NodeKernel>>(emit_node(*nv.node, bounder, o));
      const uint32_t pos = static_cast<uint32_t>(i);
      nv.choice.generic_us = estimate_us(*v.graph, pos, generic, v.at, gpu);
      nv.choice.specialised_us = estimate_us(*v.graph, pos, *nv.kernels, v.at, gpu);
      nv.choice.pays = gain_pays(nv.choice.generic_us, nv.choice.specialised_us);
      if (nv.choice.pays || o.opt_variants == "all") v.nodes.emplace(max_nodes[i], std::move(nv));
    }
    if (!v.nodes.empty()) out.push_back(std::move(v));
  }
  return out;
}

int64_t variant_workspace_bytes(const std::vector<OptShapeVariants>& vs, const Node& n) {
  int64_t bytes = 0;
  for (const OptShapeVariants& v : vs)
    if (auto at = v.nodes.find(&n); at != v.nodes.end())
      bytes = std::max(bytes, codegen::node_workspace_bytes(*at->second.kernels));
  return bytes;
}

int64_t variant_tile_counters(const std::vector<OptShapeVariants>& vs) {
  int64_t counters = 0;
  for (const OptShapeVariants& v : vs)
    for (const auto& [node, nv] : v.nodes) counters = std::max(counters, codegen::node_tile_counters(*nv.kernels));
  return counters;
}

std::vector<plan::LaunchVariant> launch_variants(const std::vector<OptShapeVariants>& vs, const RowBuckets& buckets,
                                                 const Graph& at_max, const Locator& loc, Builder& b,
                                                 const std::vector<plan::Step>& steps) {
  std::vector<plan::LaunchVariant> out;
  const std::vector<Node*> max_nodes = at_max.node_list();
  // The node's own launches in the list: [first, first + count).
  auto range_of = [&](uint32_t pos) -> std::pair<uint32_t, uint32_t> {
    auto first = std::find_if(steps.begin(), steps.end(),
                              [&](const plan::Step& s) { return s.node == pos && s.kind == plan::StepKind::Kernel; });
    if (first == steps.end()) return {0, 0};
    auto last = std::find_if(first, steps.end(), [&](const plan::Step& s) { return s.node != pos; });
    return {static_cast<uint32_t>(first - steps.begin()), static_cast<uint32_t>(last - first)};
  };
  for (const OptShapeVariants& v : vs) {
    for (uint32_t pos = 0; pos < max_nodes.size(); ++pos) {
      auto at = v.nodes.find(max_nodes[pos]);
      if (at == v.nodes.end()) continue;
      const auto [first, count] = range_of(pos);
      if (count == 0) continue;  // nothing launched at the largest shapes
      plan::LaunchVariant lv;
      lv.kind = plan::VariantKind::OptShape;
      lv.profile = v.profile;
      lv.first = first;
      lv.count = count;
      for (const auto& [sym, value] : v.at) lv.when.push_back({DimPoly{{DimMonomial{sym}, 1}}, value, value});
      // Placed where the generic launches bind (the at_max node's values),
      // sized as the opt shape's.
      append_kernel_steps(*max_nodes[pos], pos, *at->second.kernels, loc, b, true, lv.steps, lv.generic,
                          at->second.node);
      if (!lv.steps.empty()) out.push_back(std::move(lv));
    }
  }
  for (uint32_t pos = 0; pos < max_nodes.size(); ++pos) {
    auto at = buckets.find(max_nodes[pos]);
    if (at == buckets.end()) continue;
    const auto [first, count] = range_of(pos);
    if (count == 0) continue;
    for (const RowBucket& rb : at->second) {
      plan::LaunchVariant lv;
      lv.kind = plan::VariantKind::Bucket;
      lv.first = first;
      lv.count = count;
      lv.when.push_back({rb.rows, rb.lo, rb.hi});
      // Shape-generic launches with the node's own bindings (sized at the
      // largest shapes, as its generic launches are).
      append_kernel_steps(*max_nodes[pos], pos, *rb.kernels, loc, b, true, lv.steps, lv.generic);
      if (!lv.steps.empty()) out.push_back(std::move(lv));
    }
  }
  return out;
}

}  // namespace kiln::planbuild
#endif
