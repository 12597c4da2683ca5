#include "backends/plan_sim.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>

#include "ir/error.h"
#include "ir/specialize.h"
#include "ir/symbolic_dim.h"
#include "runtime/plan_control_run.h"
#include "runtime/plan_launch_variants.h"
#ifdef KILN_HAVE_SIM_BACKEND
#include "backends/sim/sim_module.h"
#endif

namespace kiln {

bool plan_sim_available() {
#ifdef KILN_HAVE_SIM_BACKEND
  return true;
#else
  return false;
#endif
}

#ifdef KILN_HAVE_SIM_BACKEND
namespace {

struct AlignedBytes {
  std::unique_ptr<uint8_t, decltype(&std::free)> p{nullptr, &std::free};
  explicit AlignedBytes(size_t n) {
    size_t size = (std::max<size_t>(n, 1) + plan::kAlignment - 1) / plan::kAlignment * plan::kAlignment;
    p.reset(static_cast<uint8_t*>(std::aligned_alloc(plan::kAlignment, size)));
    if (!p) throw std::bad_alloc();
    std::memset(p.get(), 0, size);
  }
  uint8_t* get() const { return p.get(); }
};

}  // namespace
#endif

std::vector<Tensor> run_plan_on_sim(const plan::Plan& p, const Graph& g, const std::map<std::string, Tensor>& inputs,
                                    const PlanStepTimer& timer, std::vector<std::string>* kernels_run,
                                    const std::vector<SimInPlaceBuffer>& in_place) {
#ifndef KILN_HAVE_SIM_BACKEND
  (void)timer, (void)kernels_run, (void)in_place;
  unsupported("the sim backend is not built (kiln without NVRTC/codegen)");
#else
  if (!p.meta.gpu_kernels) unsupported("sim backend: the plan has no GPU kernels: {}", p.meta.no_gpu_reason);
  // A plan with shape profiles runs at the inputs' shapes: the symbols'
  // values come from them (inside one profile), the output shapes and the
  // shape-generic launches' grids and `kiln_syms` from the values.
  SymbolBindings syms;
  if (!g.symbols().empty()) {
    std::vector<std::pair<std::string, Shape> > shapes;
    for (const Value* v : g.inputs())
      if (auto it = inputs.find(v->name()); it != inputs.end()) shapes.emplace_back(v->name(), it->second.shape());
    for (const SimInPlaceBuffer& b : in_place) shapes.emplace_back(b.input, b.past);
    std::string why;
    if (plan::matching_profile(p.shapes, shapes, &why) < 0)
      fail("plan on sim: the inputs' shapes are outside every shape profile of the plan: {}", why);
    syms = bind_symbols(g, shapes, "plan on sim");
    // A KV cache's present is an ordinary (dense) output here: the readers
    // stepping over its rows by the capacity symbol step by its own length
    // (runtime/plan_in_place.h).
    for (const plan::InPlaceAppend& a : p.in_place_appends)
      syms[a.capacity_symbol] = eval_dim(g.outputs().at(a.output)->shape().at(a.axis), syms);
  }
  // Buffers bound in place: their pair's append in the concat's place, the
  // capacity symbol the buffer's, input and output views of the buffer.
  std::map<uint32_t, const plan::InPlaceAppend*> appends;  // concat step -> its append
  std::map<uint32_t, const SimInPlaceBuffer*> bound_in, bound_out;
  for (const SimInPlaceBuffer& b : in_place) {
    const plan::InPlaceAppend* a = nullptr;
    for (const plan::InPlaceAppend& x : p.in_place_appends)
      if (g.inputs().at(x.input)->name() == b.input && g.outputs().at(x.output)->name() == b.output) a = &x;
    if (!a)
      fail(
          "plan on sim: input \"{}\" and output \"{}\" cannot share one buffer: the plan has no in-place append for "
          "them",
          b.input, b.output);
    const Shape present = eval_shape(g.outputs()[a->output]->shape(), syms);
    if (b.capacity.size() != present.size() || b.capacity[a->axis] < present[a->axis])
      fail("plan on sim: output \"{}\" needs [{}] but the buffer bound in place with input \"{}\" is [{}]", b.output,
           dims_str(present), b.input, dims_str(b.capacity));
    for (size_t d = 0; d < present.size(); ++d)
      if (d != a->axis && b.capacity[d] != present[d])
        fail("plan on sim: input \"{}\": the buffer bound in place is [{}], the present [{}] (only dim {} may differ)",
             b.input, dims_str(b.capacity), dims_str(present), a->axis);
    syms[a->capacity_symbol] = b.capacity[a->axis];
    appends[a->concat_step] = a;
    bound_in[a->input] = bound_out[a->output] = &b;
  }
  std::vector<Tensor> ins;
  for (const Value* v : g.inputs()) {
    if (auto b = bound_in.find(static_cast<uint32_t>(ins.size())); b != bound_in.end()) {
      ins.push_back(Tensor::view(TensorType(v->dtype(), b->second->capacity), b->second->data));
      continue;
    }
    auto it = inputs.find(v->name());
    if (it == inputs.end()) fail("no value given for input \"{}\" ({})", v->name(), v->type().str());
    const Shape want = syms.empty() ? v->shape() : eval_shape(v->shape(), syms);
    if (it->second.dtype() != v->dtype() || it->second.shape() != want)
      fail("input \"{}\" is {} but the plan expects {}", v->name(), it->second.type().str(),
           TensorType(v->dtype(), want).str());
    ins.push_back(it->second.clone());  // kernels take non-const pointers
  }
  std::vector<Tensor> outs;
  for (const Value* v : g.outputs()) {
    if (auto b = bound_out.find(static_cast<uint32_t>(outs.size())); b != bound_out.end())
      outs.push_back(Tensor::view(TensorType(v->dtype(), b->second->capacity), b->second->data));
    else outs.emplace_back(syms.empty() ? v->type() : TensorType(v->dtype(), eval_shape(v->shape(), syms)));
  }
  // A binding's bytes and elements are recorded at the largest shapes; an
  // input or output holds only what this shape gives (so the simulator's
  // bounds checks see the real extents).
  auto clamp_bytes = [&](const plan::BufferRef& b, uint64_t n) -> uint64_t {
    const Tensor* t = b.kind == plan::BufferKind::Input    ? &ins.at(b.index)
                      : b.kind == plan::BufferKind::Output ? &outs.at(b.index)
                                                           : nullptr;
    if (!t) return n;
    const uint64_t have = t->nbytes() > b.offset ? t->nbytes() - b.offset : 0;
    // A buffer bound in place is read through its capacity: all of it.
    const bool whole = b.kind == plan::BufferKind::Input ? bound_in.count(b.index) : bound_out.count(b.index);
    return whole ? have : std::min<uint64_t>(n, have);
  };
  // The launch list at this shape: each node's steps, or its launch variant
  // for the shape (runtime/plan_launch_variants.h).
  // With caches bound in place none: a variant's kernels read the presents
  // densely (rows past + seq apart), not through the capacity.
  std::vector<plan::ActiveStep> active;
  if (in_place.empty()) {
    active = plan::launches_at(p, syms);
  } else {
    for (const plan::Step& st : p.steps) active.push_back({&st, nullptr, -1});
    for (const plan::GenericLaunch& gl : p.generic_launches) active.at(gl.step).generic = &gl;
  }
  AlignedBytes arena(p.memory.arena_bytes), weights(p.weight_data.size());
  if (!p.weight_data.empty()) std::memcpy(weights.get(), p.weight_data.data(), p.weight_data.size());

  std::vector<codegen::KernelSource> sources;
  for (const plan::Kernel& k : p.kernels) sources.push_back({k.name, k.source});
  static codegen::SimCompiler compiler;  // keeps the modules loaded
  std::map<std::string, codegen::SimEntry> entries = sources.empty() ? decltype(entries){} : compiler.compile(sources);

  auto address = [&](const plan::BufferRef& b) -> uint8_t* {
    switch (b.kind) {
      case plan::BufferKind::Arena:
        return arena.get() + b.offset;
      case plan::BufferKind::Input:
        return static_cast<uint8_t*>(ins.at(b.index).raw()) + b.offset;
      case plan::BufferKind::Output:
        return static_cast<uint8_t*>(outs.at(b.index).raw()) + b.offset;
      case plan::BufferKind::Weight:
        return weights.get() + p.weights.at(b.index).offset + b.offset;
      case plan::BufferKind::None:
        return nullptr;  // an absent optional operand (0 elements)
    }
    return nullptr;
  };
  // One launch list: the plan's (timed per step) or a control-flow region's.
  std::function<void(const std::vector<plan::Step>&, bool)> run_steps;
  std::function<void(const plan::Step&, const plan::GenericLaunch*, size_t, bool)> run_step;
  // Control flow host-driven as on the GPU (runtime/plan_control_run.h):
  // host memory stands for the device's.
  using AddressFn = decltype(address);
  using StepsFn = decltype(run_steps);
  struct HostDevice : plan::ControlDevice {
    AddressFn& at;
    StepsFn& run_list;
    HostDevice(AddressFn& a, StepsFn& s) : at(a), run_list(s) {}
    uint64_t address(const plan::BufferRef& b) override { return reinterpret_cast<uint64_t>(at(b)); }
    void copy(uint64_t dst, uint64_t src, size_t n) override {
      std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
    }
    void read(void* host, uint64_t src, size_t n) override { std::memcpy(host, reinterpret_cast<const void*>(src), n); }
    void write(uint64_t dst, const void* host, size_t n) override {
      std::memcpy(reinterpret_cast<void*>(dst), host, n);
    }
    void run_steps(const std::vector<plan::Step>& list) override { run_list(list, false); }
  } device(address, run_steps);
  run_steps = [&](const std::vector<plan::Step>& steps, bool top) {
    for (size_t i = 0; i < steps.size(); ++i) run_step(steps[i], nullptr, i, top);
  };
  run_step = [&](const plan::Step& s, const plan::GenericLaunch* gl, size_t i, bool top) {
    {
      const auto t0 = std::chrono::steady_clock::now();
      auto timed = [&] {
        if (timer && top)
          timer(i, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      };
      if (s.kind == plan::StepKind::Control) {
        plan::run_control(p, p.control.at(s.kernel), device, "plan on sim");
        timed();
        return;
      }
      if (s.kind == plan::StepKind::Copy) {
        const uint64_t n = clamp_bytes(s.args[1], clamp_bytes(s.args[0], s.args[0].nbytes));
        if (n) std::memmove(address(s.args[0]), address(s.args[1]), n);
        timed();
        return;
      }
      std::vector<void*> bufs;
      std::vector<long long> counts;
      for (const plan::BufferRef& b : s.args) {
        bufs.push_back(address(b));
        const uint64_t bytes = clamp_bytes(b, b.nbytes);
        counts.push_back(bytes == b.nbytes || b.nbytes == 0
                             ? b.elements
                             : static_cast<long long>(bytes / (b.nbytes / static_cast<uint64_t>(b.elements))));
      }
      // A shape-generic kernel: its grid at this shape, and the symbols'
      // values as its last (by-value) parameter.
      plan::LaunchSymbols launch_syms;
      plan::Dim3 grid = s.grid;
      if (gl) {
        launch_syms = plan::launch_symbols(*gl, syms);
        grid = {plan::eval_grid_axis(gl->grid[0], syms), plan::eval_grid_axis(gl->grid[1], syms),
                plan::eval_grid_axis(gl->grid[2], syms)};
        bufs.push_back(&launch_syms);
        counts.push_back(1);
        if (grid.x == 0 || grid.y == 0 || grid.z == 0) {  // an empty output at this shape
          timed();
          return;
        }
      }
      // A kernel with more buffers than the parameter space holds takes a table
      // of their addresses, then their element counts (codegen/param_table.h).
      std::vector<uint64_t> table;
      if (s.param_table) {
        for (void* b : bufs) table.push_back(reinterpret_cast<uint64_t>(b));
        for (long long c : counts) table.push_back(static_cast<uint64_t>(c));
        bufs = {table.data()};
        counts = {static_cast<long long>(table.size())};
      }
      const plan::Kernel& k = p.kernels.at(s.kernel);
      kiln::sim::LaunchConfig cfg;
      cfg.kernel = k.name;
      cfg.grid = dim3(grid.x, grid.y, grid.z);
      cfg.block = dim3(s.block.x, s.block.y, s.block.z);
      cfg.shared_bytes = s.shared_bytes;
      if (kernels_run) kernels_run->push_back(k.name);
      try {
        codegen::sim_launch(entries.at(k.name), cfg, bufs, counts);
      } catch (const kiln::sim::SimError& e) {
        fail("plan on sim: step {} (node {}): kernel {} failed: {}", i, s.node, k.name, e.what());
      }
      // The arena's zeroed region (split-K tile counters) is zeroed once per
      // context on a GPU (with the rest of the arena here): every kernel must
      // leave it zero for the next one and the next run.
      const uint8_t* zeroed = arena.get() + p.memory.zeroed_offset;
      if (p.memory.zeroed_bytes &&
          std::any_of(zeroed, zeroed + p.memory.zeroed_bytes, [](uint8_t b) { return b != 0; }))
        fail(
            "plan on sim: step {} (node {}): kernel {} left the arena's zeroed region (split-K tile counters, {} "
            "bytes at {}) nonzero",
            i, s.node, k.name, p.memory.zeroed_bytes, p.memory.zeroed_offset);
      timed();
    }
  };
  for (size_t i = 0; i < active.size(); ++i) {
    // A KV cache bound in place: its append runs in the concat's place.
    auto replaced = in_place.empty() || active[i].variant >= 0
                        ? appends.end()
                        : appends.find(static_cast<uint32_t>(active[i].step - p.steps.data()));
    if (replaced != appends.end()) run_step(replaced->second->append, &replaced->second->launch, i, true);
    else run_step(*active[i].step, active[i].generic, i, true);
  }
  return outs;
#endif
}

}  // namespace kiln
