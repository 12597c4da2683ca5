// The launch list of one graph (the model's, or a control-flow region's
// frame): where each value lives (Locator) and each node's kernel launches
// and copies in execution order (docs/plan_format.md section `launches`).
#include <algorithm>
#include <limits>
#include <map>

#include "compiler/plan_writer.h"
#include "compiler/plan_writer_profiles.h"
#include "ir/control_flow.h"
#include "ir/error.h"
#include "ir/symbolic_dim.h"
#include "passes/memory_plan.h"
#ifdef KILN_HAVE_CODEGEN
#include "codegen/emitter_table.h"
#include "codegen/param_table.h"
#include "compiler/plan_frames.h"
#include "compiler/plan_launch_check.h"
#endif

namespace kiln {

#ifdef KILN_HAVE_CODEGEN
namespace planbuild {

Locator::Locator(const Graph& graph, const MemoryPlan& m, const std::unordered_map<const Value*, uint32_t>& constants,
                 uint64_t base, const std::vector<plan::BufferRef>* ps, const std::vector<plan::BufferRef>* rs)
    : g(graph), mem(m), constant_index(constants), arena_base(base), params(ps), returns(rs) {
  for (size_t i = 0; i < g.inputs().size(); ++i) input_index[g.inputs()[i]] = uint32_t(i);
}

plan::BufferRef Locator::at(const Value* v) const {
  plan::BufferRef b;
  b.nbytes = v->type().nbytes();
  b.elements = v->type().numel();
  // Graph input / output `i` at `offset`: the caller's buffer, or where the
  // control-flow record binds a region's parameter / result.
  auto bound = [&](const std::vector<plan::BufferRef>* refs, plan::BufferKind kind, uint32_t i, uint64_t offset) {
    if (!refs) {
      b.kind = kind;
      b.index = i;
      b.offset = offset;
      return b;
    }
    plan::BufferRef r = refs->at(i);
    r.offset += offset;
    r.nbytes = b.nbytes;
    r.elements = b.elements;
    return r;
  };
  if (v->is_input()) return bound(params, plan::BufferKind::Input, input_index.at(v), 0);
  if (v->is_constant()) {
    b.kind = plan::BufferKind::Weight;
    b.index = constant_index.at(v);
    return b;
  }
  const ValuePlan* vp = mem.find(v);
  KILN_CHECK(vp, "value %{} has no memory plan", v->name());
  b.offset = static_cast<uint64_t>(vp->offset);
  switch (vp->storage) {
    case Storage::Arena:
      b.kind = plan::BufferKind::Arena;
      b.offset += arena_base;
      break;
    case Storage::Output:
      return bound(returns, plan::BufferKind::Output, static_cast<uint32_t>(vp->output_index), b.offset);
    case Storage::Input:
      return bound(params, plan::BufferKind::Input, input_index.at(vp->root), b.offset);
    case Storage::Constant:
      b.kind = plan::BufferKind::Weight;
      b.index = constant_index.at(vp->root);
      break;
  }
  return b;
}

plan::BufferRef Locator::output(size_t j) const {
  const Value* v = g.outputs()[j];
  plan::BufferRef b;
  b.nbytes = v->type().nbytes();
  b.elements = v->type().numel();
  if (returns) {
    plan::BufferRef r = returns->at(j);
    r.nbytes = b.nbytes;
    r.elements = b.elements;
    return r;
  }
  b.kind = plan::BufferKind::Output;
  b.index = uint32_t(j);
  return b;
}

void append_kernel_steps(const Node& n, uint32_t node, const std::vector<codegen::NodeKernel>& kernels,
                         const Locator& loc, Builder& b, bool top, std::vector<plan::Step>& steps,
                         std::vector<plan::GenericLaunch>& generic, const Node* sized_as) {
  const PlanBuildOptions& o = b.o;
  const WorkspacePlan* ws = loc.mem.workspace(&n);
  // A host tensor the node's kernels share (the scratch of dynamic_quantize_linear,
  // dft, stft, det: one kernel writes what the next reads) is one weight, as the
  // simulator's executor passes one buffer; a copy per kernel read zeros.
  std::map<const void*, uint32_t> shared_extra;
  for (const codegen::NodeKernel& k : kernels) {
    if (k.grid.count() == 0) continue;
    auto [it, fresh] = b.kernel_index.emplace(k.name, uint32_t(b.sources.size()));
    if (fresh) b.sources.push_back({k.name, k.source});
    plan::Step s;
    s.node = node;
    s.kernel = it->second;
    s.grid = {k.grid.x, k.grid.y, k.grid.z};
    s.block = {k.block.x, k.block.y, k.block.z};
    s.shared_bytes = static_cast<uint32_t>(k.shared_bytes);
    s.param_table = k.param_table;
    // A launch variant's kernels were emitted for node `sized_as` (the same
    // node at another shape): placed where `n`'s values live, its bindings
    // hold the sizes it was compiled for.
    auto at = [&](const Value* v, const Value* sized) {
      plan::BufferRef r = loc.at(v);
      if (sized_as && r.kind != plan::BufferKind::Weight) {
        r.nbytes = sized->type().nbytes();
        r.elements = sized->type().numel();
      }
      return r;
    };
    const Node& sz = sized_as ? *sized_as : n;
    if (k.results.empty()) {
      for (int r = 0; r < n.num_outputs(); ++r) s.args.push_back(at(n.output(r), sz.output(r)));
    } else {
      for (int r : k.results) s.args.push_back(at(n.output(r), sz.output(r)));
    }
    for (size_t i = 0; i < n.inputs().size(); ++i) {
      Value* v = n.inputs()[i];
      // An absent optional operand keeps its parameter slot, which its kernel
      // never reads (the emitter knew it absent): the explicit "none"
      // argument, a null pointer, as the simulator's executor passes a null
      // buffer of 0 elements.
      if (!v) {
        plan::BufferRef none;
        none.kind = plan::BufferKind::None;
        s.args.push_back(none);
        continue;
      }
      s.args.push_back(at(v, sz.inputs()[i]));
    }
    for (const Tensor& t : k.extra) {
      plan::BufferRef e;
      e.kind = plan::BufferKind::Weight;
      auto seen = t.raw() ? shared_extra.find(t.raw()) : shared_extra.end();
      e.index = seen != shared_extra.end() ? seen->second : add_weight(b.p, t);
      if (t.raw()) shared_extra.emplace(t.raw(), e.index);
      e.nbytes = t.nbytes();
      e.elements = t.numel();
      s.args.push_back(e);
    }
    if (k.workspace_f32 > 0) {
      KILN_CHECK(ws && ws->size >= k.workspace_f32 * 4, "node {} has no workspace of {} bytes in the memory plan",
                 n.describe(), k.workspace_f32 * 4);
      plan::BufferRef w;
      w.kind = plan::BufferKind::Arena;
      w.offset = loc.arena_base + static_cast<uint64_t>(ws->offset);
      w.nbytes = static_cast<uint64_t>(k.workspace_f32) * 4;
      w.elements = k.workspace_f32;
      s.args.push_back(w);
    }
    if (k.tile_counters > 0) {  // the plan's zeroed region (add_tile_counters_region)
      KILN_CHECK(b.p.memory.zeroed_bytes >= static_cast<uint64_t>(k.tile_counters) * 4,
                 "node {} needs {} tile counters, the plan's zeroed region has {} bytes", n.describe(), k.tile_counters,
                 b.p.memory.zeroed_bytes);
      plan::BufferRef c;
      c.kind = plan::BufferKind::Arena;
      c.offset = b.p.memory.zeroed_offset;
      c.nbytes = static_cast<uint64_t>(k.tile_counters) * 4;
      c.elements = k.tile_counters;
      s.args.push_back(c);
    }
    if (k.shape_generic()) {
      // Its grid is a function of the symbols (section `generic launches`);
      // the step holds the grid at the largest shapes, which the launch-fit
      // checks below see.
      if (!top)
        unsupported("{}{}: a shape-generic kernel inside a control-flow region is not supported yet",
                    o.source_name.empty() ? "" : o.source_name + ": ", n.describe());
      plan::GenericLaunch gl;
      gl.step = static_cast<uint32_t>(steps.size());
      gl.symbols = k.symbols;
      uint32_t* at_max[3] = {&s.grid.x, &s.grid.y, &s.grid.z};
      for (int a = 0; a < 3; ++a) {
        gl.grid[a] = {dim_poly(k.grid_expr[a].items), static_cast<uint64_t>(k.grid_expr[a].per_block),
                      k.grid_expr[a].cap, static_cast<uint64_t>(k.grid_expr[a].multiplier)};
        *at_max[a] = plan::eval_grid_axis(gl.grid[a], b.largest);
      }
      generic.push_back(std::move(gl));
    }
    // Before NVRTC: what needs no compiled kernel (block, grid, parameters).
    // A misfit names the node whose kernels were emitted (the symbolic
    // graph's, in a plan with shape profiles), so the thread cap finds it.
    auto from = b.nks.origin.find(&n);
    const Node& fit_node = from != b.nks.origin.end() ? *from->second : n;
    check_launch_fits(s, fit_node, b.sources[s.kernel].source, k.name, -1, -1, "", o);
    b.launched.emplace_back(s, &fit_node);
    steps.push_back(std::move(s));
  }
}

std::vector<plan::Step> launch_list(const Graph& g, const Locator& loc, Builder& b, uint64_t nested_base) {
  std::vector<plan::Step> steps;
  uint32_t pos = 0;
  for (const auto& np : g.nodes()) {
    const Node& n = *np;
    uint32_t node = pos++;
    if (is_control_flow(n)) {
      steps.push_back(control_step(n, node, loc, b, nested_base));
      continue;
    }
    if (codegen::is_view_node(n)) {
      const ValuePlan* vp = loc.mem.find(n.output(0));
      if (vp && vp->alias == AliasKind::View) continue;  // same bytes
      plan::Step s;
      s.kind = plan::StepKind::Copy;
      s.node = node;
      s.args = {loc.at(n.output(0)), loc.at(n.input(0))};
      steps.push_back(std::move(s));
      continue;
    }
    auto at = b.nks.of.find(&n);
    KILN_CHECK(at != b.nks.of.end(), "node {} has no kernels", n.describe());
    append_kernel_steps(n, node, *at->second, loc, b, &g == b.top, steps, b.generic);
  }
  // Graph outputs not written in place by their producer (an input, a
  // constant, a value listed twice) are copied into the caller's buffer (a
  // region's: its result binding).
  for (size_t j = 0; j < g.outputs().size(); ++j) {
    const Value* v = g.outputs()[j];
    const ValuePlan* vp = loc.mem.find(v);
    if (vp && vp->storage == Storage::Output && vp->output_index == int(j)) continue;
    plan::Step s;
    s.kind = plan::StepKind::Copy;
    s.node = std::numeric_limits<uint32_t>::max();
    s.args = {loc.output(j), loc.at(v)};
    steps.push_back(std::move(s));
  }
  return steps;
}

}  // namespace planbuild
#endif

}  // namespace kiln
