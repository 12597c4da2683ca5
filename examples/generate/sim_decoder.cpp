#include "sim_decoder.h"

#include <cstring>
#include <map>
#include <stdexcept>

#include "backends/plan_sim.h"
#include "ir/graph.h"
#include "runtime/plan_format.h"
#include "runtime/plan_graph.h"

namespace generate {

struct SimDecoder::Impl {
  kiln::plan::Plan plan;
  std::unique_ptr<kiln::Graph> graph;
};

SimDecoder::SimDecoder(const std::vector<uint8_t>& plan) : impl_(std::make_unique<Impl>()) {
  if (!kiln::plan_sim_available()) throw std::runtime_error("this build of kiln has no kernel simulator");
  impl_->plan = kiln::plan::deserialize(plan.data(), plan.size(), "decoder plan");
  if (!impl_->plan.meta.gpu_kernels)
    throw std::runtime_error("--backend sim runs a plan's GPU kernels, and this plan has none (" +
                             impl_->plan.meta.no_gpu_reason + "): compile for a GPU target (--target sm_90)");
  impl_->graph = kiln::plan::load_graph(impl_->plan, "decoder plan");
}

SimDecoder::~SimDecoder() = default;

std::vector<float> SimDecoder::step(const std::vector<int64_t>& ids, const std::vector<std::string>& past_names,
                                    const std::vector<std::string>& present_names,
                                    std::vector<std::vector<float>>& caches, int64_t kv_heads, int64_t head_dim,
                                    int64_t& vocab) {
  const int64_t seq = static_cast<int64_t>(ids.size());
  std::map<std::string, kiln::Tensor> feed;
  kiln::Tensor t(kiln::DType::I64, {1, seq});
  std::memcpy(t.raw(), ids.data(), ids.size() * sizeof(int64_t));
  feed["input_ids"] = std::move(t);
  for (size_t c = 0; c < past_names.size(); ++c) {
    const int64_t past = static_cast<int64_t>(caches[c].size()) / (kv_heads * head_dim);
    kiln::Tensor p(kiln::DType::F32, {1, kv_heads, past, head_dim});
    if (!caches[c].empty()) std::memcpy(p.raw(), caches[c].data(), caches[c].size() * sizeof(float));
    feed[past_names[c]] = std::move(p);
  }
  std::vector<kiln::Tensor> outs = kiln::run_plan_on_sim(impl_->plan, *impl_->graph, feed);
  std::map<std::string, const kiln::Tensor*> by_name;
  for (size_t i = 0; i < outs.size(); ++i) by_name[impl_->graph->outputs()[i]->name()] = &outs[i];
  auto output = [&](const std::string& name) -> const kiln::Tensor& {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw std::runtime_error("the plan has no output \"" + name + "\"");
    if (it->second->dtype() != kiln::DType::F32) throw std::runtime_error("output \"" + name + "\" is not f32");
    return *it->second;
  };
  // The presents become the next step's pasts: a copy per step (no in-place binding on the simulator).
  for (size_t c = 0; c < present_names.size(); ++c) {
    const kiln::Tensor& p = output(present_names[c]);
    caches[c].assign(p.data<float>(), p.data<float>() + p.numel());
  }
  const kiln::Tensor& logits = output("logits");
  if (logits.shape().size() != 3 || logits.shape()[1] != seq)
    throw std::runtime_error("the model has no logits output of shape [1, seq, vocab]");
  vocab = logits.shape()[2];
  return std::vector<float>(logits.data<float>(), logits.data<float>() + logits.numel());
}

std::string SimDecoder::why_not_in_place(const std::vector<std::string>& past_names,
                                         const std::vector<std::string>& present_names) const {
  for (size_t c = 0; c < past_names.size(); ++c) {
    bool found = false;
    for (const kiln::plan::InPlaceAppend& a : impl_->plan.in_place_appends)
      found |= impl_->graph->inputs()[a.input]->name() == past_names[c] &&
               impl_->graph->outputs()[a.output]->name() == present_names[c];
    if (!found) return "the plan has no in-place append for " + past_names[c] + " -> " + present_names[c];
  }
  return "";
}

std::vector<float> SimDecoder::step_in_place(const std::vector<int64_t>& ids,
                                             const std::vector<std::string>& past_names,
                                             const std::vector<std::string>& present_names,
                                             std::vector<std::vector<float>>& buffers, int64_t past, int64_t capacity,
                                             int64_t kv_heads, int64_t head_dim, int64_t& vocab) {
  const int64_t seq = static_cast<int64_t>(ids.size());
  std::map<std::string, kiln::Tensor> feed;
  kiln::Tensor t(kiln::DType::I64, {1, seq});
  std::memcpy(t.raw(), ids.data(), ids.size() * sizeof(int64_t));
  feed["input_ids"] = std::move(t);
  std::vector<kiln::SimInPlaceBuffer> bound;
  for (size_t c = 0; c < past_names.size(); ++c)
    bound.push_back({past_names[c],
                     present_names[c],
                     buffers[c].data(),
                     {1, kv_heads, capacity, head_dim},
                     {1, kv_heads, past, head_dim}});
  std::vector<kiln::Tensor> outs = kiln::run_plan_on_sim(impl_->plan, *impl_->graph, feed, {}, nullptr, bound);
  for (size_t i = 0; i < outs.size(); ++i) {
    if (impl_->graph->outputs()[i]->name() != "logits") continue;
    const kiln::Tensor& logits = outs[i];
    if (logits.dtype() != kiln::DType::F32 || logits.shape().size() != 3 || logits.shape()[1] != seq)
      throw std::runtime_error("the model has no f32 logits output of shape [1, seq, vocab]");
    vocab = logits.shape()[2];
    return std::vector<float>(logits.data<float>(), logits.data<float>() + logits.numel());
  }
  throw std::runtime_error("the plan has no output \"logits\"");
}

}  // namespace generate
