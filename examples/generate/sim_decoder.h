// The --backend sim path of examples/generate: the ONE plan compiled for a
// GPU arch (sm_90) run step by step on kiln's CPU kernel simulator (the
// plan's own kernels and launch list, backends/plan_sim.h), where there is
// no GPU. Built only inside kiln's tree (the simulator is not part of the
// installed runtime package); the installed-package build has no sim path.
//
// The KV cache is bound in place when the plan can (its section `in-place
// appends`, runtime/plan_in_place.h): one buffer of the full capacity per
// cache is both the past input and the present output, the plan's append
// kernel writes only the new positions and the attention reads the buffer
// through its capacity, as a GPU engine does (step_in_place). Otherwise each
// step feeds the caches as the past inputs and copies the present outputs
// back as the next past (step), as a plain user loop over ONNX Runtime does.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace generate {

class SimDecoder {
 public:
  // The plan's bytes (a GPU target); throws std::exception with a message
  // for a plan without GPU kernels or a build without the simulator.
  explicit SimDecoder(const std::vector<uint8_t>& plan);
  ~SimDecoder();
  SimDecoder(const SimDecoder&) = delete;
  SimDecoder& operator=(const SimDecoder&) = delete;

  // One step: `ids` [1, seq]; caches[c] holds [1, kv_heads, past, head_dim]
  // for past_names[c] and is replaced by present_names[c] ([.., past + seq,
  // ..]). Returns the logits [1, seq, vocab] and sets `vocab`.
  std::vector<float> step(const std::vector<int64_t>& ids, const std::vector<std::string>& past_names,
                          const std::vector<std::string>& present_names, std::vector<std::vector<float>>& caches,
                          int64_t kv_heads, int64_t head_dim, int64_t& vocab);

  // "" when every (past, present) pair can be bound in place, else why not.
  std::string why_not_in_place(const std::vector<std::string>& past_names,
                               const std::vector<std::string>& present_names) const;
  // One step with buffers[c] ([1, kv_heads, capacity, head_dim]) bound in
  // place as past_names[c] (its first `past` positions) and present_names[c].
  std::vector<float> step_in_place(const std::vector<int64_t>& ids, const std::vector<std::string>& past_names,
                                   const std::vector<std::string>& present_names,
                                   std::vector<std::vector<float>>& buffers, int64_t past, int64_t capacity,
                                   int64_t kv_heads, int64_t head_dim, int64_t& vocab);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace generate
