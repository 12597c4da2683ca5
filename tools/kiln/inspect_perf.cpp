#include "tools/kiln/inspect_perf.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <ostream>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/specialize.h"
#include "perf/plan_at_shape.h"
#include "perf/plan_estimate.h"
#include "runtime/plan_launch_variants.h"

namespace kiln {

namespace {

std::string shorten(const std::string& t, size_t w) { return t.size() <= w ? t : t.substr(0, w - 3) + "..."; }

// "64x64x32 s3", "64x64x32 s3 split8" (the GEMM/conv tile the emitter chose), "" without a tile loop.
// "64x64x32 s4", "64x64x32 s4 split8", "64x64x32 s4 split8 fold" (a folded split-K: no reduction launch).
std::string tile_text(const perf::LaunchWork& w) {
  const perf::TileLoop& t = w.tile;
  if (t.k_tiles <= 0) return "";
  std::string s = fmt::format("{}x{}x{} s{}", t.bm, t.bn, t.bk, t.stages);
  if (t.split > 1) s += fmt::format(" split{}", t.split);
  return w.tail_blocks > 0 ? s + " fold" : s;
}

const perf::GpuSpec& pick_gpu(const plan::Plan& p, const std::string& path, const std::string& name) {
  if (!p.meta.gpu_kernels)
    fail("{}: --perf models GPU kernels, and this plan has none: {}", path, p.meta.no_gpu_reason);
  const perf::GpuSpec* gpu = nullptr;
  if (name.empty()) {
    for (const std::string& arch : p.meta.archs)
      if ((gpu = perf::default_gpu_for_arch(arch))) break;
    if (!gpu)
      fail("{}: no GPU in kiln's table runs {} by default; name one with --gpu {}", path, fmt::join(p.meta.archs, ", "),
           perf::gpu_names("|"));
  } else if (!(gpu = perf::find_gpu(name))) {
    fail("{}: --gpu {}: not a GPU kiln's performance model knows (known: {})", path, name, perf::gpu_names(", "));
  }
  // The model times the plan's own kernels: a GPU that cannot run them has
  // no time to estimate (an sm_90 CUBIN and PTX do not run on an sm_80 A100).
  try {
    plan::select_code(p, gpu->arch, path);
  } catch (const Error& e) {
    fail("{}: --gpu {} ({}): {}", path, gpu->name, gpu->arch, e.what());
  }
  return *gpu;
}

}  // namespace

nlohmann::json report_plan_perf(const plan::Plan& p, const Graph& g, const std::string& path, const std::string& gpu,
                                std::ostream& out, const std::string& shapes) {
  const perf::GpuSpec& spec = pick_gpu(p, path, gpu);
  // A plan with shape-generic launches is modelled at its first profile's
  // opt shape: the launches the runtime issues there (the launch variants
  // specialised for it included), their grids and sizes at that shape.
  std::optional<perf::PlanAtShape> shaped;
  std::string shape_is = "the opt shape of profile 0";
  if (!shapes.empty()) {
    if (p.generic_launches.empty())
      fail("{}: --shapes with --perf applies to a plan with shape profiles and shape-generic launches", path);
    std::vector<std::pair<std::string, Shape>> given;
    for (const auto& [name, s] : parse_shapes_flag(shapes)) given.emplace_back(name, s);
    std::string why;
    if (plan::matching_profile(p.shapes, given, &why) < 0)
      fail("{}: --shapes {} is outside every shape profile of the plan: {}", path, shapes, why);
    for (const Value* v : g.inputs())  // static inputs keep their own shapes
      if (std::none_of(given.begin(), given.end(), [&](const auto& gs) { return gs.first == v->name(); }))
        given.emplace_back(v->name(), v->shape());
    shaped = perf::plan_at_shape(p, g, bind_symbols(g, given, path + " --shapes"));
    shape_is = "--shapes";
  } else if (!p.generic_launches.empty()) {
    shaped = perf::plan_at_shape(p, g, plan::opt_shape_symbols(p.shapes, 0, g));
  }
  const perf::PlanEstimate pe =
      shaped ? perf::estimate_plan(shaped->plan, *shaped->graph, spec) : perf::estimate_plan(p, g, spec);
  const perf::ModelConstants& c = pe.constants;
  out << "performance model: an estimate from the plan alone, not a measurement (docs/performance.md)\n";
  // The sm_90a target's wgmma kernels run at their own fraction (docs/performance.md).
  const std::string wgmma = p.meta.target == "sm_90a" && spec.wgmma_fraction > 0
                                ? fmt::format(", wgmma at {:.0f}%", 100 * spec.wgmma_fraction)
                                : std::string();
  out << fmt::format(
      "gpu: {} ({}, {}): {} SMs, {:.1f} TFLOPS fp16 tensor (dense; kiln's mma.sync at {:.0f}%{}), "
      "{:.1f} TFLOPS fp32, {:.0f} GB/s DRAM, {:.0f} MB L2\n",
      spec.name, spec.title, spec.arch, spec.sms, spec.fp16_tensor_tflops, 100 * spec.mma_sync_fraction, wgmma,
      spec.fp32_tflops, spec.dram_gb_per_s, spec.l2_bytes / 1e6);
  out << fmt::format("plan: {}, target {}, precision {}, batch {}\n", path, p.meta.target, p.meta.precision, pe.batch);
  if (shaped) {
    std::vector<std::string> syms;
    for (const auto& [name, value] : shaped->at) syms.push_back(fmt::format("{}={}", name, value));
    out << fmt::format(
        "shape: {} ({}); {} of its {} launches from launch variants (kernels specialised for it or its size "
        "bucket), the rest shape-generic; steps numbered in the list run at this shape\n",
        shape_is, fmt::join(syms, ", "), shaped->variant_launches, shaped->plan.steps.size());
  }
  out << fmt::format(
      "  {:>4} {:<34} {:<9} {:>8} {:>8} {:>7} {:>4} {:>4} {:>6} {:>4} {:>6} {:>6} {:>9} {:<8} {:>5}  {}\n", "step",
      "node", "kind", "GFLOP", "MB", "blocks", "thr", "regs", "smem", "b/SM", "waves", "ktiles", "est_us", "bound",
      "%SOL", "tile");
  nlohmann::json launches = nlohmann::json::array();
  std::map<std::string, int> bounds;
  for (const perf::StepEstimate& s : pe.steps) {
    const perf::LaunchWork& w = s.work.work;
    const perf::LaunchEstimate& e = s.est;
    ++bounds[e.bound];
    const bool copy = w.kind == perf::WorkKind::Copy;
    out << fmt::format(
        "  {:>4} {:<34} {:<9} {:>8.3f} {:>8.3f} {:>7} {:>4} {:>4} {:>6} {:>4} {:>6.2f} {:>6} "
        "{:>9.2f} {:<8} {:>5.1f}  {}\n",
        s.work.step, shorten(s.work.node, 34), perf::work_kind_name(w.kind), w.flops / 1e9, w.bytes / 1e6,
        copy ? std::string("-") : std::to_string(w.blocks), copy ? std::string("-") : std::to_string(w.threads),
        w.registers < 0 ? std::string("?") : std::to_string(w.registers),
        copy ? std::string("-") : std::to_string(w.smem_bytes),
        copy ? std::string("-") : std::to_string(e.occ.blocks_per_sm), e.waves,
        w.tile.k_tiles > 0 ? std::to_string(w.tile.k_tiles) : std::string("-"), e.est_us, e.bound, e.sol_pct,
        tile_text(w));
    nlohmann::json jl = {{"step", s.work.step},
                         {"node", s.work.node},
                         {"kernel", s.work.kernel},
                         {"kind", perf::work_kind_name(w.kind)},
                         {"anchor", s.work.anchor},
                         {"math", perf::math_name(w.math)},
                         {"flops", w.flops},
                         {"bytes", w.bytes},
                         {"blocks", w.blocks},
                         {"threads", w.threads},
                         {"registers", w.registers},
                         {"shared_bytes", w.smem_bytes},
                         {"blocks_per_sm", e.occ.blocks_per_sm},
                         {"occupancy_limiter", e.occ.limiter},
                         {"warp_occupancy", e.occ.warp_occupancy},
                         {"waves", e.waves},
                         {"waves_run", e.waves_run},
                         {"compute_us", e.compute_us},
                         {"memory_us", e.memory_us},
                         {"latency_us", e.latency_us},
                         {"tail_us", e.tail_us},
                         {"l2_us", e.l2_us},
                         {"epilogue_us", e.epilogue_us},
                         {"est_us", e.est_us},
                         {"bound", e.bound},
                         {"sol_us", e.sol_us},
                         {"sol_pct", e.sol_pct},
                         // The work the terms above came from, so the model can be
                         // refitted offline (bench/calibrate_perf_model.py).
                         {"l2_bytes", w.l2_bytes},
                         {"tail_bytes", w.tail_bytes},
                         {"tail_blocks", w.tail_blocks}};
    if (w.tile.k_tiles > 0)
      jl["tile"] = {{"bm", w.tile.bm},
                    {"bn", w.tile.bn},
                    {"bk", w.tile.bk},
                    {"stages", w.tile.stages},
                    {"k_tiles", w.tile.k_tiles},
                    {"split_k", w.tile.split},
                    {"fold_split", w.tail_blocks > 0}};
    launches.push_back(std::move(jl));
  }
  const double pct = pe.heavy ? 100.0 * pe.heavy_full_wave / pe.heavy : 0.0;
  out << fmt::format(
      "total: {:.1f} us = {:.3f} ms at batch {}: kernels {:.1f} us + graph overhead {} steps x "
      "{:.1f} us = {:.1f} us (speed of light {:.1f} us)\n",
      pe.total_us, pe.total_us / 1e3, pe.batch, pe.kernel_us, pe.steps.size(), c.graph_node_overhead_us, pe.overhead_us,
      pe.sol_us);
  std::vector<std::string> bs;
  for (const auto& [b, n] : bounds) bs.push_back(fmt::format("{} {}", b, n));
  out << fmt::format("bounds: {}\n", fmt::join(bs, ", "));
  // "Filling a wave" (docs/performance.md): the grid has at least as many blocks as the GPU holds at
  // once at the occupancy the kernel's own registers and shared memory allow (SMs x b/SM), not merely
  // one block per SM, which is counted beside it: a grid of at least one block per SM is issue 18's
  // measure (its "sub-wave" grids are those below the SM count), named so on the line.
  const double every_sm_pct = pe.heavy ? 100.0 * pe.heavy_every_sm / pe.heavy : 0.0;
  out << fmt::format(
      "conv/GEMM/attention launches: {}; filling >= 1 wave (blocks >= {} SMs x resident blocks per SM): {} ({:.0f}%); "
      ">= 1 block per SM (blocks >= {} SMs, issue 18's measure of a full grid): {} ({:.0f}%)\n",
      pe.heavy, spec.sms, pe.heavy_full_wave, pct, spec.sms, pe.heavy_every_sm, every_sm_pct);
  return {{"gpu", spec.name},
          {"gpu_title", spec.title},
          {"sms", spec.sms},
          {"batch", pe.batch},
          {"estimated_ms", pe.total_us / 1e3},
          {"kernel_us", pe.kernel_us},
          {"graph_overhead_us", pe.overhead_us},
          {"graph_node_overhead_us", c.graph_node_overhead_us},
          {"constants",
           {{"dram_efficiency", c.dram_efficiency},
            {"load_latency_us", c.load_latency_us},
            {"l2_latency_us", c.l2_latency_us},
            {"tail_warp_bytes_per_us", c.tail_warp_bytes_per_us},
            {"mma_sync_fraction", spec.mma_sync_fraction},
            {"dram_gb_per_s", spec.dram_gb_per_s},
            {"l2_gb_per_s", spec.l2_gb_per_s}}},
          {"sol_us", pe.sol_us},
          {"heavy_launches", pe.heavy},
          {"heavy_full_wave", pe.heavy_full_wave},
          {"heavy_every_sm", pe.heavy_every_sm},
          {"launches", std::move(launches)}};
}

}  // namespace kiln
