#include "tools/kiln/inspect_plan.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/symbolic_dim.h"
#include "runtime/cubin_info.h"
#include "runtime/in_place_cache.h"
#include "tools/kiln/doctor.h"
#include "runtime/plan_format.h"
#include "runtime/plan_graph.h"
#include "tools/kiln/inspect.h"
#include "runtime/plan_launch_variants.h"
#include "tools/kiln/inspect_perf.h"
#include "tools/kiln/output_paths.h"

namespace kiln {

namespace {

// passes/memory_plan.h's Storage, as stored in the plan.
std::string storage_name(uint8_t s) {
  switch (s) {
    case 0:
      return "arena";
    case 1:
      return "output";
    case 2:
      return "input-view";
    case 3:
      return "const-view";
  }
  return fmt::format("#{}", s);
}

std::string dims(const Shape& s) {
  if (s.empty()) return "[] (scalar)";
  return fmt::format("[{}]", dims_str(s, "x"));  // symbolic dims by name (a plan with shape profiles)
}

std::string dim3(const plan::Dim3& d) { return fmt::format("{}x{}x{}", d.x, d.y, d.z); }

std::string known(int64_t v) { return v < 0 ? "?" : std::to_string(v); }

// Fused nodes are named after all their members: shortened in the tables,
// whole in the JSON.
std::string shorten(const std::string& t, size_t w) { return t.size() <= w ? t : t.substr(0, w - 3) + "..."; }

// A kernel's resources: ptxas's numbers from the plan, and what its CUBIN's
// .nv.info says (runtime/cubin_info.h: the check that both agree, and the
// source of registers for plans written before the `resources` section).
struct KernelView {
  const plan::Kernel* k = nullptr;
  int cubin_registers = -1;
  int cubin_frame_bytes = -1;        // local memory per thread: spills and local arrays
  long long cubin_max_threads = -1;  // the kernel's __launch_bounds__ as the CUBIN records it
  int cubin_param_bytes = -1;
  std::string cubin_error;
  int launches = 0;
  int registers() const { return k->registers >= 0 ? k->registers : cubin_registers; }
};

// Plans name nodes by their position in the graph's node list.
std::string node_label(const std::vector<const Node*>& nodes, uint32_t node) {
  if (node == UINT32_MAX) return "(graph output copy)";
  if (node >= nodes.size()) return fmt::format("node #{} (out of range)", node);
  const Node& n = *nodes[node];
  return n.name().empty() ? fmt::format("#{} {}", node, n.op()) : fmt::format("#{} {} ({})", node, n.name(), n.op());
}

}  // namespace

// The shape profiles of a plan compiled with --min/--opt/--max-shapes.
static nlohmann::json show_profiles(const plan::Plan& p, const Graph& g, std::ostream& out) {
  std::vector<std::string> syms;
  nlohmann::json js = nlohmann::json::array();
  for (const SymbolDecl& d : g.symbols()) {
    syms.push_back(fmt::format("{} in [{}, {}]", d.name, d.min, d.max));
    js.push_back({{"name", d.name}, {"min", d.min}, {"max", d.max}});
  }
  // Sizes decided by the data: no arena; the CPU path runs the graph stage by
  // stage (backends/reference/data_dependent_stages.h).
  std::vector<std::string> decided;
  for (const auto& [sym, n] : data_dependent_symbols(g)) decided.push_back(sym);
  out << fmt::format("shape profiles: {} (symbols: {}); {}\n", p.shapes.profiles.size(), fmt::join(syms, ", "),
                     decided.empty() ? std::string("memory planned for the largest shapes")
                                     : fmt::format("sizes decided at run time ({}): no memory plan, the CPU path runs "
                                                   "the graph stage by stage, outputs trimmed to the counts",
                                                   fmt::join(decided, ", ")));
  nlohmann::json jp = nlohmann::json::array();
  for (size_t i = 0; i < p.shapes.profiles.size(); ++i) {
    out << fmt::format("  profile {}:\n", i);
    nlohmann::json inputs = nlohmann::json::array();
    for (const plan::InputProfile& ip : p.shapes.profiles[i].inputs) {
      out << fmt::format("    {:<22} {}\n", ip.input, plan::range_str(ip));
      inputs.push_back({{"name", ip.input}, {"min", ip.min}, {"opt", ip.opt}, {"max", ip.max}});
    }
    jp.push_back({{"inputs", inputs}});
  }
  // Caches a caller may bind in place (kiln_context_bind_in_place).
  nlohmann::json jc = nlohmann::json::array();
  std::vector<std::string> pairs;
  for (const rt::InPlacePair& c : rt::find_in_place_pairs(g)) {
    const std::string &in = g.inputs()[c.input]->name(), &o = g.outputs()[c.output]->name();
    pairs.push_back(fmt::format("{} -> {} (dim {})", in, o, c.axis));
    jc.push_back({{"input", in}, {"output", o}, {"axis", c.axis}});
  }
  if (!pairs.empty())
    out << fmt::format("in place (one buffer as input and output, the new positions appended): {}\n",
                       fmt::join(pairs, ", "));
  // The pairs a GPU engine can bind in place (section `in-place appends`).
  std::vector<std::string> gpu_pairs;
  nlohmann::json jgpu = nlohmann::json::array();
  for (const plan::InPlaceAppend& a : p.in_place_appends) {
    gpu_pairs.push_back(fmt::format("{} -> {} (append replaces step {}; rows {} apart)", g.inputs()[a.input]->name(),
                                    g.outputs()[a.output]->name(), a.concat_step, a.capacity_symbol));
    jgpu.push_back({{"input", g.inputs()[a.input]->name()},
                    {"output", g.outputs()[a.output]->name()},
                    {"append_replaces_step", a.concat_step},
                    {"capacity_symbol", a.capacity_symbol}});
  }
  if (!gpu_pairs.empty()) out << fmt::format("in place on the GPU: {}\n", fmt::join(gpu_pairs, ", "));
  // Shape-generic launches (a GPU plan): each grid axis as the runtime
  // evaluates it per shape (docs/plan_format.md section `generic launches`).
  nlohmann::json jg = nlohmann::json::array();
  if (!p.generic_launches.empty())
    out << fmt::format("shape-generic launches: {} (kernels taking kiln_syms; grids per shape):\n",
                       p.generic_launches.size());
  for (const plan::GenericLaunch& gl : p.generic_launches) {
    std::vector<std::string> axes;
    nlohmann::json ja = nlohmann::json::array();
    for (int a = 0; a < 3; ++a) {
      const plan::GenericGridAxis& ax = gl.grid[a];
      const std::string items = dim_str(dim_of_poly(ax.items));
      ja.push_back({{"items", items}, {"per_block", ax.per_block}, {"cap", ax.cap}, {"multiplier", ax.multiplier}});
      if (ax.items == DimPoly{{{}, 1}} && ax.per_block == 1) continue;  // 1 block
      axes.push_back(fmt::format("{} = ceil({} / {}){}{}", "xyz"[a], items, ax.per_block,
                                 ax.multiplier != 1 ? fmt::format(" * {}", ax.multiplier) : "",
                                 ax.cap ? fmt::format(", at most {}", ax.cap) : ""));
    }
    out << fmt::format("  step {}: {} (symbols {})\n", gl.step, fmt::join(axes, "; "), fmt::join(gl.symbols, ", "));
    jg.push_back({{"step", gl.step}, {"symbols", gl.symbols}, {"grid", ja}});
  }
  // Launch variants (docs/plan_format.md section `launch variants`): which
  // shapes run which launches of a node instead of its generic ones.
  nlohmann::json jv = nlohmann::json::array();
  if (!p.launch_variants.empty())
    out << fmt::format(
        "launch variants: {} (the first whose shape condition holds replaces the node's generic launches):\n",
        p.launch_variants.size());
  for (const plan::LaunchVariant& v : p.launch_variants) {
    std::vector<std::string> ks, generic_ks;
    nlohmann::json jk = nlohmann::json::array();
    for (const plan::Step& s : v.steps) {
      const std::string name = s.kind == plan::StepKind::Kernel ? p.kernels.at(s.kernel).name : "copy";
      ks.push_back(fmt::format("{} grid {}x{}x{}", name, s.grid.x, s.grid.y, s.grid.z));
      jk.push_back({{"kernel", name}, {"grid", {s.grid.x, s.grid.y, s.grid.z}}});
    }
    for (uint32_t i = v.first; i < v.first + v.count; ++i)
      if (p.steps[i].kind == plan::StepKind::Kernel) generic_ks.push_back(p.kernels.at(p.steps[i].kernel).name);
    const uint32_t node = p.steps.at(v.first).node;
    out << fmt::format("  steps {}..{} (node #{} {}): at {}: {} launch(es): {}; other shapes: {}\n", v.first,
                       v.first + v.count - 1, node, g.node_list().at(node)->op(), plan::variant_text(v), v.steps.size(),
                       fmt::join(ks, ", "), fmt::join(generic_ks, ", "));
    std::vector<std::string> when;
    for (const plan::ShapeCondition& c : v.when) when.push_back(plan::condition_text(c));
    jv.push_back({{"kind", v.kind == plan::VariantKind::OptShape ? "opt_shape" : "bucket"},
                  {"profile", v.profile},
                  {"first_step", v.first},
                  {"steps_replaced", v.count},
                  {"when", when},
                  {"launches", jk}});
  }
  return {{"symbols", js},        {"profiles", jp},         {"in_place", jc},
          {"in_place_gpu", jgpu}, {"generic_launches", jg}, {"launch_variants", jv}};
}

// A GPU plan computed at the bounds of its data-dependent sizes
// (docs/plan_format.md section `bounded sizes`): each count and each
// output's real shape as the runtime trims it.
static nlohmann::json show_bounded_sizes(const plan::Plan& p, const Graph& g, std::ostream& out) {
  const plan::BoundedSizes& b = p.bounded_sizes;
  std::vector<std::string> counts;
  nlohmann::json jc = nlohmann::json::array(), jo = nlohmann::json::array();
  for (const plan::SizeCount& c : b.counts) {
    counts.push_back(
        fmt::format("{} in [0, {}] ({}, output %{})", c.symbol, c.bound, c.node, g.outputs().at(c.output)->name()));
    jc.push_back({{"symbol", c.symbol}, {"bound", c.bound}, {"node", c.node}, {"output", c.output}});
  }
  out << fmt::format("sizes decided at run time, computed at their bounds: {}\n", fmt::join(counts, ", "));
  for (size_t i = 0; i < b.outputs.size(); ++i) {
    const std::string real = dims_str(plan::symbolic_shape(b, i)), bound = dims_str(g.outputs()[i]->shape());
    out << fmt::format("  output {} trimmed to [{}] (bound [{}])\n", g.outputs()[i]->name(), real, bound);
    jo.push_back({{"name", g.outputs()[i]->name()}, {"shape", real}, {"bound", bound}});
  }
  return {{"counts", jc}, {"outputs", jo}};
}

int run_inspect_plan(const InspectOptions& o) {
  // A plan with shape profiles: --perf may model it at any shape inside them.
  const bool perf_at_shapes = o.perf && !o.shapes.empty();
  if (!o.shapes.empty() && !o.perf)
    fail(
        "{}: a plan's shapes are fixed when it is compiled; --shapes applies to .onnx models (and to --perf of a "
        "plan with shape profiles)",
        o.model);
  // The runtime's reader: every loading check the runtime makes (checksums,
  // bounds, cross-section bindings) and the graph parsed back and verified.
  plan::Plan p = plan::read_plan_file(o.model);
  std::unique_ptr<Graph> g = plan::load_graph(p, o.model);
  const plan::Meta& m = p.meta;
  std::vector<const Node*> nodes;
  for (const auto& n : g->nodes()) nodes.push_back(n.get());
  if (!o.gpu.empty() && !o.perf) fail("{}: --gpu names the GPU for --perf; add --perf", o.model);
  nlohmann::json j;
  // --perf: the model's report replaces the listing; the JSON keeps both.
  std::ostream no_listing(nullptr);
  std::ostream& out = o.perf ? no_listing : std::cout;

  uint64_t file_bytes = std::filesystem::file_size(o.model);
  out << fmt::format("plan: {} ({} bytes, plan format version {})\n", o.model, file_bytes, p.format_version);
  out << fmt::format("kiln version: {}\n", m.kiln_version);
  out << fmt::format("target: {}, precision: {}\n", m.target, m.precision);
  j["plan"] = o.model;
  j["file_bytes"] = file_bytes;
  j["format_version"] = p.format_version;
  j["kiln_version"] = m.kiln_version;
  j["target"] = m.target;
  j["precision"] = m.precision;
  j["archs"] = m.archs;
  j["gpu_kernels"] = m.gpu_kernels;

  std::vector<KernelView> kv(p.kernels.size());
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    kv[i].k = &p.kernels[i];
    if (p.kernels[i].cubin.empty()) {
      kv[i].cubin_error = "no CUBIN";
      continue;
    }
    try {
      plan::CubinKernelInfo ci = plan::cubin_kernel_info(p.kernels[i].cubin, p.kernels[i].name);
      kv[i].cubin_registers = ci.registers;
      kv[i].cubin_frame_bytes = ci.frame_bytes;
      kv[i].cubin_max_threads = ci.max_threads;
      kv[i].cubin_param_bytes = ci.param_bytes;
    } catch (const Error& e) {
      kv[i].cubin_error = e.what();
    }
  }
  int launches = 0, copies = 0, controls = 0;
  // The launch list and every control-flow region's (plan::all_steps); a KV
  // cache's in-place append runs in its concat's place, not besides it.
  const std::vector<plan::StepAt> steps = plan::all_steps(p);
  const size_t counted = steps.size() - p.in_place_appends.size();  // the appends come last
  for (size_t i = 0; i < counted; ++i) {
    const plan::Step& s = *steps[i].step;
    if (s.kind == plan::StepKind::Copy) {
      ++copies;
    } else if (s.kind == plan::StepKind::Control) {
      ++controls;
    } else {
      ++launches;
      ++kv[s.kernel].launches;  // index checked by the loader
    }
  }
  int variant_launches = 0;  // launches of launch variants (section `launch variants`), counted per kernel too
  for (const plan::LaunchVariant& v : p.launch_variants)
    for (const plan::Step& s : v.steps)
      if (s.kind == plan::StepKind::Kernel) ++variant_launches, ++kv[s.kernel].launches;

  if (m.gpu_kernels) {
    bool ptx = std::all_of(p.kernels.begin(), p.kernels.end(), [](const plan::Kernel& k) { return !k.ptx.empty(); });
    out << fmt::format("archs: {} (CUBIN{} per kernel)\n", fmt::join(m.archs, ", "), ptx ? " + PTX" : "");
    if (ptx && !p.kernels.empty())
      out << fmt::format("PTX: {}'s, JIT-compiled by the driver on newer GPUs\n", p.kernels.front().arch);
    out << "needs: " << plan_driver_needs(m) << "\n";
    j["cubin_driver_version"] = m.cubin_driver_version;
    j["ptx_driver_version"] = m.ptx_driver_version;
    out << fmt::format("GPU kernels: {} distinct, {} launch steps ({} kernel launches, {} copies){}\n",
                       p.kernels.size(), p.steps.size(), launches, copies,
                       variant_launches ? fmt::format("; {} more launches in launch variants", variant_launches) : "");
    j["control_flow_nodes"] = p.control.size();
    if (!p.control.empty())
      out << fmt::format(
          "control flow: {} if/loop/scan node(s) run host-driven: each run reads each condition or trip count on "
          "the host and runs the chosen region's steps, the launches between control-flow steps replayed as "
          "CUDA Graphs ({} steps in regions, counted above)\n",
          controls, counted - p.steps.size());
  } else {
    out << "archs: none\n";
    out << fmt::format("GPU kernels: none: {}\n", m.no_gpu_reason);
    out << "  (the runtime runs this plan on its CPU reference path: the graph below through the reference "
           "executor)\n";
    j["no_gpu_reason"] = m.no_gpu_reason;
  }

  auto io = [&](const char* title, const std::vector<Value*>& vs, const char* key) {
    out << title << ":\n";
    j[key] = nlohmann::json::array();
    for (const Value* v : vs) {
      out << fmt::format("  {:<24} {:<5} {}\n", v->name(), dtype_name(v->dtype()), dims(v->shape()));
      nlohmann::json e = {{"name", v->name()}, {"dtype", std::string(dtype_name(v->dtype()))}};
      if (has_symbolic_dims(v->shape())) {
        std::vector<std::string> ds;
        for (int64_t d : v->shape()) ds.push_back(dim_str(d));
        e["shape"] = ds;  // symbolic dims by name; sizes follow the shapes of a run
      } else {
        e["shape"] = v->shape();
        e["bytes"] = v->type().nbytes();
      }
      j[key].push_back(e);
    }
  };
  io("inputs", g->inputs(), "inputs");
  io("outputs", g->outputs(), "outputs");
  if (!p.shapes.empty()) j["profiles"] = show_profiles(p, *g, out);
  if (!p.bounded_sizes.empty()) j["bounded_sizes"] = show_bounded_sizes(p, *g, out);

  uint64_t graph_bytes = 0, extra_bytes = 0;
  for (size_t i = 0; i < p.weights.size(); ++i)
    (i < m.graph_constants ? graph_bytes : extra_bytes) += p.weights[i].nbytes;
  out << fmt::format(
      "weights: {} bytes ({:.1f} MiB) in {} entries: {} graph constants ({} bytes), {} kernel "
      "buffers ({} bytes)\n",
      graph_bytes + extra_bytes, double(graph_bytes + extra_bytes) / (1 << 20), p.weights.size(), m.graph_constants,
      graph_bytes, p.weights.size() - m.graph_constants, extra_bytes);
  j["weights"] = {{"bytes", graph_bytes + extra_bytes},
                  {"entries", p.weights.size()},
                  {"graph_constants", m.graph_constants},
                  {"graph_constant_bytes", graph_bytes},
                  {"kernel_buffer_bytes", extra_bytes}};

  std::map<std::string, int> per_storage;
  int64_t separate = 0;  // bytes if every arena result had its own buffer
  for (const plan::MemoryEntry& e : p.memory.values) {
    ++per_storage[storage_name(e.storage)];
    if (e.storage == 0) separate += e.size;
  }
  std::vector<std::string> counts;
  for (const auto& [k, n] : per_storage) counts.push_back(fmt::format("{} {}", n, k));
  // A CPU plan with sizes decided at run time lays out no arena: each stage's
  // results are allocated at their real sizes when it runs.
  if (!p.shapes.empty() && p.memory.values.empty() && p.memory.arena_bytes == 0)
    out << "memory plan: none (sizes decided at run time: the CPU path allocates each stage's results when it "
           "runs)\n";
  else
    out << fmt::format(
        "memory plan: arena {} bytes (alignment {}), live peak {}, {} bytes without reuse; {} "
        "results ({})\n",
        p.memory.arena_bytes, p.memory.alignment,
        p.memory.live_peak_bytes < 0 ? std::string("not recorded (older plan)")
                                     : fmt::format("{} bytes", p.memory.live_peak_bytes),
        separate, p.memory.values.size(), fmt::join(counts, ", "));
  if (p.memory.zeroed_bytes > 0)
    out << fmt::format("  zeroed region: {} bytes at {} (split-K tile counters, zeroed once per context)\n",
                       p.memory.zeroed_bytes, p.memory.zeroed_offset);
  out << fmt::format("  {:<40} {:>6} {:<10} {:>12} {:>12}\n", "node", "result", "storage", "offset", "size");
  nlohmann::json jm = nlohmann::json::array();
  for (size_t vi = 0; vi < p.memory.values.size(); ++vi) {
    const plan::MemoryEntry& e = p.memory.values[vi];
    // A plan with profiles: the size at the largest shapes, and as a function of the symbols.
    std::string bytes = p.shapes.empty() ? "" : "  (" + dim_str(dim_of_poly(p.shapes.value_bytes[vi])) + " bytes)";
    out << fmt::format("  {:<40} {:>6} {:<10} {:>12} {:>12}{}\n", shorten(node_label(nodes, e.node), 40), e.result,
                       storage_name(e.storage), e.offset, e.size, bytes);
    jm.push_back({{"node", e.node},
                  {"node_label", node_label(nodes, e.node)},
                  {"result", e.result},
                  {"storage", storage_name(e.storage)},
                  {"offset", e.offset},
                  {"size", e.size}});
    if (!p.shapes.empty()) jm.back()["size_bytes"] = dim_str(dim_of_poly(p.shapes.value_bytes[vi]));
  }
  j["memory"] = {{"arena_bytes", p.memory.arena_bytes},
                 {"alignment", p.memory.alignment},
                 {"live_peak_bytes", p.memory.live_peak_bytes},
                 {"bytes_without_reuse", separate},
                 {"zeroed_offset", p.memory.zeroed_offset},
                 {"zeroed_bytes", p.memory.zeroed_bytes},
                 {"values", jm}};

  j["kernels"] = nlohmann::json::array();
  j["launches"] = nlohmann::json::array();
  if (!p.kernels.empty()) {
    out << fmt::format(
        "kernels ({}; registers, static shared bytes and spill bytes from ptxas; registers checked "
        "against the CUBIN, frame = its local bytes per thread):\n",
        p.kernels.size());
    out << fmt::format("  {:>3} {:<44} {:<6} {:>9} {:>12} {:>7} {:>6} {:>8}\n", "#", "name", "arch", "registers",
                       "static smem", "spills", "frame", "launches");
    for (size_t i = 0; i < kv.size(); ++i) {
      const KernelView& k = kv[i];
      std::string regs = known(k.registers());
      // ptxas and the CUBIN disagreeing would mean a stale or mixed-up plan.
      if (k.k->registers >= 0 && k.cubin_registers >= 0 && k.k->registers != k.cubin_registers)
        regs += fmt::format(" (CUBIN: {})", k.cubin_registers);
      out << fmt::format("  {:>3} {:<44} {:<6} {:>9} {:>12} {:>7} {:>6} {:>8}\n", i, k.k->name, k.k->arch, regs,
                         known(k.k->static_shared_bytes), known(k.k->spill_bytes), known(k.cubin_frame_bytes),
                         k.launches);
      if (!k.cubin_error.empty()) out << fmt::format("      CUBIN not read: {}\n", k.cubin_error);
      nlohmann::json jk = {{"index", i},
                           {"name", k.k->name},
                           {"arch", k.k->arch},
                           {"registers", k.registers()},
                           {"static_shared_bytes", k.k->static_shared_bytes},
                           {"spill_bytes", k.k->spill_bytes},
                           {"ptxas_registers", k.k->registers},
                           {"cubin_registers", k.cubin_registers},
                           {"cubin_frame_bytes", k.cubin_frame_bytes},
                           {"cubin_bytes", k.k->cubin.size()},
                           {"ptx_bytes", k.k->ptx.size()},
                           {"launches", k.launches}};
      if (!k.cubin_error.empty()) jk["cubin_error"] = k.cubin_error;
      j["kernels"].push_back(jk);
    }
  }
  if (!p.steps.empty()) {
    out << fmt::format("launches ({} steps, in order):\n", p.steps.size());
    out << fmt::format("  {:>4} {:<30} {:<36} {:>14} {:>10} {:>5} {:>14} {:>6}\n", "step", "node", "kernel", "grid",
                       "block", "regs", "smem st+dyn", "spills");
    // Regions' steps follow the launch list, labelled with their region
    // (their node positions are in the region's own graph).
    std::string region = "";
    size_t i = 0;
    // Shape-generic launches take their kiln_syms by value after the buffers.
    std::set<const plan::Step*> generic;
    for (const plan::GenericLaunch& gl : p.generic_launches) generic.insert(&p.steps.at(gl.step));
    for (const plan::InPlaceAppend& a : p.in_place_appends) generic.insert(&a.append);
    for (const plan::StepAt& at : steps) {
      const plan::Step& s = *at.step;
      if (at.where != region) {
        region = at.where;
        i = 0;
        out << fmt::format("  in {}:\n", region);
      }
      std::string node = at.where.empty() ? node_label(nodes, s.node) : fmt::format("#{}", s.node);
      if (s.kind == plan::StepKind::Control) {
        static const char* kinds[] = {"if", "loop", "scan"};
        const plan::ControlFlow& c = p.control[s.kernel];
        out << fmt::format("  {:>4} {:<30} control flow ({}): control {}, {} region(s), host-driven\n", i,
                           shorten(node, 30), kinds[int(c.kind)], s.kernel, c.regions.size());
        j["launches"].push_back({{"step", i},
                                 {"kind", "control"},
                                 {"node", node},
                                 {"region", at.where},
                                 {"control", s.kernel},
                                 {"op", kinds[int(c.kind)]}});
        ++i;
        continue;
      }
      if (s.kind == plan::StepKind::Copy) {
        out << fmt::format("  {:>4} {:<30} copy {} bytes\n", i, shorten(node, 30), s.args[0].nbytes);
        j["launches"].push_back({{"step", i}, {"kind", "copy"}, {"node", node}, {"bytes", s.args[0].nbytes}});
        ++i;
        continue;
      }
      const KernelView& k = kv[s.kernel];
      out << fmt::format("  {:>4} {:<30} {:<36} {:>14} {:>10} {:>5} {:>14} {:>6}\n", i, shorten(node, 30),
                         shorten(k.k->name, 36), dim3(s.grid), dim3(s.block), known(k.registers()),
                         fmt::format("{}+{}", known(k.k->static_shared_bytes), s.shared_bytes),
                         known(k.k->spill_bytes));
      const size_t param_bytes =
          s.param_table ? 8 : s.args.size() * 8 + (generic.count(&s) ? sizeof(plan::LaunchSymbols) : 0);
      j["launches"].push_back({{"step", i},
                               {"kind", "kernel"},
                               {"node", node},
                               {"kernel", k.k->name},
                               {"kernel_index", s.kernel},
                               {"grid", {s.grid.x, s.grid.y, s.grid.z}},
                               {"block", {s.block.x, s.block.y, s.block.z}},
                               {"threads", 1ull * s.block.x * s.block.y * s.block.z},
                               {"registers", k.registers()},
                               {"cubin_registers", k.cubin_registers},
                               {"cubin_max_threads", k.cubin_max_threads},
                               {"param_bytes", param_bytes},
                               {"param_table", s.param_table},
                               {"cubin_param_bytes", k.cubin_param_bytes},
                               {"static_shared_bytes", k.k->static_shared_bytes},
                               {"dynamic_shared_bytes", s.shared_bytes},
                               {"spill_bytes", k.k->spill_bytes},
                               {"buffers", s.args.size()}});
      if (!at.where.empty()) j["launches"].back()["region"] = at.where;
      ++i;
    }
  }
  out << fmt::format("graph: {} nodes (the optimized graph; kiln dump-ir prints IR of .onnx models)\n",
                     g->nodes().size());
  j["graph_nodes"] = g->nodes().size();
  if (o.perf) j["perf"] = report_plan_perf(p, *g, o.model, o.gpu, std::cout, perf_at_shapes ? o.shapes : "");
  if (!o.json_path.empty()) {
    write_text_file(o.json_path, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace kiln
