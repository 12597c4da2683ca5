// GpuContext for a plan with shape profiles (runtime/gpu_executor.h): the
// current shape's launch list (its launch variants chosen) and arguments,
// and per slot one CUDA Graph per distinct
// shape, captured on first use and kept up to kMaxCachedGraphs (the least
// recently used destroyed first).
#include <fmt/format.h>

#include <algorithm>

#include "ir/error.h"
#include "runtime/gpu_executor.h"
#include "runtime/plan_launch_variants.h"

namespace kiln::rt {

void GpuContext::set_shape(const SymbolBindings& b, std::vector<size_t> input_bytes, std::vector<size_t> output_bytes) {
  if (!dynamic()) fail("the plan has no shape profiles: its shapes cannot be set");
  KILN_CHECK(input_bytes.size() == e_.input_bytes_.size() && output_bytes.size() == e_.output_bytes_.size(),
             "set_shape: {} input and {} output sizes for {} and {}", input_bytes.size(), output_bytes.size(),
             e_.input_bytes_.size(), e_.output_bytes_.size());
  // The buffers were allocated for the largest shapes.
  for (size_t i = 0; i < input_bytes.size(); ++i)
    KILN_CHECK(input_bytes[i] <= e_.input_bytes_[i], "input {} has {} bytes, more than the largest shape's {}", i,
               input_bytes[i], e_.input_bytes_[i]);
  for (size_t i = 0; i < output_bytes.size(); ++i)
    KILN_CHECK(output_bytes[i] <= e_.output_bytes_[i], "output {} has {} bytes, more than the largest shape's {}", i,
               output_bytes[i], e_.output_bytes_[i]);
  // The launch list at this shape (each node's launch variant for it, if
  // any), and its shape-generic launches' grids and symbols.
  // With a KV cache bound in place none: a variant's kernels read the
  // presents densely (rows past + seq apart), not through the capacity.
  std::vector<plan::ActiveStep> active;
  if (std::find(in_place_.begin(), in_place_.end(), true) == in_place_.end()) {
    active = plan::launches_at(e_.plan_, b);
  } else {
    for (const plan::Step& st : e_.plan_.steps) active.push_back({&st, nullptr, -1});
    for (const plan::GenericLaunch& gl : e_.plan_.generic_launches) active.at(gl.step).generic = &gl;
  }
  std::unordered_map<const plan::Step*, GenericArgs> generic;
  for (const plan::ActiveStep& as : active) {
    if (!as.generic) continue;
    const plan::GenericLaunch& gl = *as.generic;
    GenericArgs a;
    a.grid = {plan::eval_grid_axis(gl.grid[0], b), plan::eval_grid_axis(gl.grid[1], b),
              plan::eval_grid_axis(gl.grid[2], b)};
    a.syms = plan::launch_symbols(gl, b);
    generic.emplace(as.step, a);
  }
  for (const plan::InPlaceAppend& a : e_.plan_.in_place_appends)  // launched only while bound in place
    generic.emplace(&a.append,
                    GenericArgs{{plan::eval_grid_axis(a.launch.grid[0], b), plan::eval_grid_axis(a.launch.grid[1], b),
                                 plan::eval_grid_axis(a.launch.grid[2], b)},
                                plan::launch_symbols(a.launch, b)});
  generic_ = std::move(generic);
  active_ = std::move(active);
  shape_ = b;
  in_bytes_ = std::move(input_bytes);
  out_bytes_ = std::move(output_bytes);
}

void GpuContext::set_in_place(const std::vector<bool>& bound) {
  const auto& appends = e_.plan_.in_place_appends;
  KILN_CHECK(bound.size() == appends.size(), "set_in_place: {} flags for {} pairs", bound.size(), appends.size());
  if (bound == in_place_) return;
  // Every graph captured so far launches the other kernel.
  for (auto& sl : slots_) drop_graphs(*sl);
  replaced_.clear();
  for (size_t i = 0; i < bound.size(); ++i)
    if (bound[i]) replaced_.emplace(&e_.plan_.steps.at(appends[i].concat_step), &appends[i].append);
  in_place_ = bound;
}

std::vector<int> GpuContext::variant_per_step() const {
  std::vector<int> v(e_.plan_.steps.size(), -1);
  if (!dynamic() || e_.host_driven()) return v;  // issue_steps runs the plan's own list
  for (const plan::ActiveStep& a : active_) {
    if (a.variant < 0) continue;
    const plan::LaunchVariant& lv = e_.plan_.launch_variants.at(static_cast<size_t>(a.variant));
    for (uint32_t n = lv.first; n < lv.first + lv.count && n < v.size(); ++n) v[n] = a.variant;
  }
  return v;
}

const plan::Step& GpuContext::launched_for(const plan::Step& s) const {
  auto in_place = replaced_.find(&s);
  return in_place == replaced_.end() ? s : *in_place->second;
}

GpuContext::GraphCacheStats GpuContext::graph_cache_stats() const {
  GraphCacheStats s = graph_stats_;
  s.cached = 0;
  for (const auto& sl : slots_) s.cached += sl->graphs.size();
  return s;
}

void GpuContext::select_graph(Slot& sl) {
  if (!shape_) fail("the plan has shape profiles: set every dynamic input's shape before a run");
  auto hit = std::find_if(sl.graphs.begin(), sl.graphs.end(), [&](const auto& g) { return g.first == *shape_; });
  if (hit != sl.graphs.end()) {
    sl.graphs.splice(sl.graphs.begin(), sl.graphs, hit);  // most recently used first
    sl.exec = sl.graphs.front().second;
    return;
  }
  const CudaDriver& d = e_.d_;
  if (sl.graphs.size() >= kMaxCachedGraphs) {
    // The driver frees an exec still running once it is done (cuGraphExecDestroy).
    CUgraphExec old = sl.graphs.back().second;
    sl.graphs.pop_back();
    ++graph_stats_.evictions;
    d.check(d.cuGraphExecDestroy(old), "cuGraphExecDestroy (a least recently used shape's graph)");
  }
  sl.exec = nullptr;
  capture_graph(sl);
  sl.graphs.emplace_front(*shape_, sl.exec);
  ++graph_stats_.captures;
}

void GpuContext::drop_graphs(Slot& sl) {
  const CudaDriver& d = e_.d_;
  while (!sl.graphs.empty()) {
    CUgraphExec x = sl.graphs.front().second;
    sl.graphs.pop_front();
    d.check(d.cuGraphExecDestroy(x), "cuGraphExecDestroy");
  }
  sl.exec = nullptr;
}

size_t GpuContext::copy_bytes(const plan::Step& s) const {
  size_t n = s.args[0].nbytes;
  for (const plan::BufferRef& b : s.args) {
    const std::vector<size_t>* have = b.kind == plan::BufferKind::Input    ? &in_bytes_
                                      : b.kind == plan::BufferKind::Output ? &out_bytes_
                                                                           : nullptr;
    if (!have) continue;
    const size_t total = have->at(b.index);
    n = std::min<size_t>(n, total > b.offset ? total - b.offset : 0);
  }
  return n;
}

}  // namespace kiln::rt
