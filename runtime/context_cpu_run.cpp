// Context::run_on_cpu (runtime/engine.h): a run of the plan's graph on the
// reference executor, for an engine without a GPU; KV caches bound in place
// are read and appended in the caller's buffers (runtime/in_place_cache.h).
#include <cstring>
#include <map>

#include "backends/reference/data_dependent_stages.h"
#include "backends/reference/executor.h"
#include "runtime/engine.h"
#include "runtime/in_place_cache.h"
#include "runtime/input_shapes.h"

namespace kiln::rt {

void Context::run_on_cpu(std::vector<ProfileEntry>* profile) {
  NodeTimer timer;
  if (profile)
    timer = [profile](const Node& n, double ms) {
      profile->push_back({n.name().empty() ? n.describe() : n.name(), n.name(), n.op(), float(ms)});
    };
  // The plan's graph runs as it is, at the symbols' values for the shapes
  // set (no specialised copy per shape, ir/specialize.h), unless it has
  // control flow with symbolic types: that runs a specialised copy, built on
  // first use of each shape and cached (InputShapes::specialised).
  if (!cpu_executor_) cpu_executor_ = std::make_unique<ReferenceExecutor>(engine_->graph());
  const bool direct = !shapes_ || cpu_executor_->runs_symbolically();
  past_bytes_copied_ = 0;
  in_place_bytes_ = 0;
  std::map<const Node*, size_t> appended_in_place;  // the marked concat -> the input bound in place
  std::map<std::string, Tensor> feed;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const TensorDesc& d = engine_->inputs()[i];
    Shape shape = shapes_ ? shapes_->input(i) : d.type.shape;
    if (int k = inputs_[i].in_place; k >= 0) {
      const InPlacePair& p = engine_->in_place_pairs()[k];
      if (direct && !p.past_read_elsewhere && !engine_->data_dependent()) {
        // Only the concat reads the past, and it runs on the buffer below:
        // the input is a view of the buffer's start, never read (its rows
        // are `capacity` positions apart, not a dense tensor unless one).
        feed.emplace(d.name, Tensor::view(TensorType(d.type.dtype, shape), inputs_[i].ptr));
        appended_in_place.emplace(p.concat, i);
        continue;
      }
      // Another node reads the past: its positions, capacity positions apart
      // in the caller's buffer, copied into a tensor of its own.
      Tensor past = read_past(inputs_[i].ptr, inputs_[i].capacity, p.axis, d.type.dtype, shape);
      past_bytes_copied_ += past.nbytes();
      if (direct && !engine_->data_dependent()) appended_in_place.emplace(p.concat, i);
      feed.emplace(d.name, std::move(past));
      continue;
    }
    Tensor t(TensorType(d.type.dtype, shape));
    if (t.nbytes()) std::memcpy(t.raw(), inputs_[i].ptr, t.nbytes());
    feed.emplace(d.name, std::move(t));
  }
  if (engine_->data_dependent()) {
    // Stage by stage (backends/reference/data_dependent_stages.h); each
    // output is written at its real size at the front of its buffer, bound
    // at the upper bound, and its shape kept for output_shape().
    run_shapes_.clear();  // a failed run leaves no shapes of an earlier one
    DataDependentRunResult r = run_data_dependent_stages(
        engine_->graph(), feed,
        [&](Graph& g, const std::map<std::string, Tensor>& in) { return ReferenceExecutor(g).run(in, timer); });
    run_shapes_.assign(outputs_.size(), std::nullopt);
    for (size_t i = 0; i < outputs_.size(); ++i) {
      if (r.outputs[i].nbytes()) std::memcpy(outputs_[i].ptr, r.outputs[i].raw(), r.outputs[i].nbytes());
      run_shapes_[i] = r.outputs[i].shape();
    }
    return;
  }
  RunOptions o;
  o.timer = timer;
  // The capacity symbols of caches appended in place whose readers step
  // over rows by them (attentions with k_capacity / v_capacity): bound to
  // the buffer's capacity, so they read the present in the buffer itself.
  // Unbound, the attentions read dense rows (an ordinary present).
  SymbolBindings symbols;
  if (shapes_ && direct) {
    symbols = shapes_->bindings();
    for (const auto& [concat, i] : appended_in_place) {
      const InPlacePair& p = engine_->in_place_pairs()[inputs_[i].in_place];
      if (!p.capacity_symbol.empty()) symbols[p.capacity_symbol] = inputs_[i].capacity[p.axis];
    }
    o.symbols = &symbols;
  }
  // A concat appending to a cache bound in place runs on the buffer: the new
  // positions are written after the past's, and the present its consumers
  // read is the buffer's first positions (runtime/in_place_cache.h).
  o.run_instead = [&](const Node& n, const std::vector<const Tensor*>& ins) -> std::optional<std::vector<Tensor>> {
    auto it = appended_in_place.find(&n);
    if (it == appended_in_place.end()) return std::nullopt;
    const size_t i = it->second;
    const InPlacePair& p = engine_->in_place_pairs()[inputs_[i].in_place];
    Shape present = shapes_ ? shapes_->input(i) : engine_->inputs()[i].type.shape;
    const int64_t past = present[p.axis];
    present[p.axis] += ins[1]->shape()[p.axis];
    check_in_place_capacity(p, engine_->graph(), inputs_[i].capacity, present);
    in_place_bytes_ += write_positions(inputs_[i].ptr, inputs_[i].capacity, p.axis, *ins[1], past);
    size_t copied = 0;
    std::vector<Tensor> outs;
    outs.push_back(present_in_buffer(inputs_[i].ptr, inputs_[i].capacity, p.axis, ins[1]->dtype(), present,
                                     !p.capacity_symbol.empty(), &copied));
    present_bytes_copied_ += copied;
    return outs;
  };
  present_bytes_copied_ = 0;
  std::vector<Tensor> outs;
  if (direct) {
    outs = cpu_executor_->run(feed, o);
  } else {
    ++specialised_runs_;
    outs = ReferenceExecutor(shapes_->specialised()).run(feed, o);
  }
  if (engine_->bounded_sizes()) {
    // The graph at the bounds, its counts after the user's outputs.
    run_shapes_.clear();
    for (size_t k = 0; k < counts_.size(); ++k) counts_[k] = outs[outputs_.size() + k].data<int64_t>()[0];
    for (size_t i = 0; i < outputs_.size(); ++i)
      if (outs[i].nbytes()) std::memcpy(outputs_[i].ptr, outs[i].raw(), outs[i].nbytes());
    trim_to_counts();
    return;
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (int k = outputs_[i].in_place; k >= 0) {
      const InPlacePair& p = engine_->in_place_pairs()[k];
      if (appended_in_place.count(p.concat)) continue;  // the concat wrote it
      // The specialised copy's concat ran by its kernel: the past is in the
      // buffer already, only the appended positions are written.
      int64_t past = (shapes_ ? shapes_->input(p.input) : engine_->inputs()[p.input].type.shape)[p.axis];
      in_place_bytes_ += write_appended(outputs_[i].ptr, outputs_[i].capacity, p.axis, outs[i], past);
      continue;
    }
    if (outs[i].nbytes()) std::memcpy(outputs_[i].ptr, outs[i].raw(), outs[i].nbytes());
  }
}

}  // namespace kiln::rt
