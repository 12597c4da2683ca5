// generate: greedy text generation with a KV-cache decoder, in an application,
// through kiln's builder API (kiln/kiln_compiler.hpp) and runtime
// (kiln/kiln.hpp); no kiln CLI involved.
//
// The model is a decoder exported with its KV cache as inputs and outputs
// (the zoo's llama_kv_*: input_ids [1, seq], past_key_L / past_value_L
// [1, kv_heads, past, head_dim] -> logits [1, seq, vocab], present_key_L /
// present_value_L [1, kv_heads, past + seq, head_dim]), seq and past dynamic.
// It is compiled ONCE, with a shape profile (seq 1..prompt length, past
// 0..prompt + tokens - 1), as TensorRT-LLM and ORT GenAI build one engine for
// both phases; the prefill (the prompt, an empty past) and every decode step
// (seq 1) run from that plan, each setting its input shapes. Each layer's
// keys and values live in one buffer of the full capacity ([1, kv_heads,
// prompt + tokens, head_dim]) bound as both the past input and the present
// output (kiln_context_bind_in_place, ORT GenAI's past_present_share_buffer):
// a step writes only its new positions, nothing is copied from step to step.
// The next token is the argmax of the last position's logits.
//
// With --backend sim (built inside kiln's tree only) the same one plan is
// compiled for a GPU arch (--target, default sm_90) and every step runs its
// kernels on kiln's CPU simulator (sim_decoder.h), the caches bound in place
// there too when the plan can (its in-place appends: the append kernel writes
// the new positions, attention reads through the capacity), else copied back
// from the present outputs each step. The run says which it does and why.
//
// Usage: generate MODEL.onnx --prompt 1,2,3 --tokens N [--target cpu|auto|sm_XX]
//                 [--backend runtime|sim] [--layers 2] [--kv-heads 2] [--head-dim 16]
// Prints the prompt, then each generated token as it comes, then the whole
// sequence on one line ("tokens: ...").
#include <kiln/kiln.hpp>
#include <kiln/kiln_compiler.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#ifdef KILN_GENERATE_SIM
#include "sim_decoder.h"
#endif

namespace {

struct Args {
  std::string model;
  std::vector<int64_t> prompt;
  int tokens = 8;
  std::string target;  // default: cpu for the runtime, sm_90 for the simulator
  std::string backend = "runtime";
  int layers = 2, kv_heads = 2, head_dim = 16;
};

[[noreturn]] void usage(const char* argv0, const std::string& why) {
  std::fprintf(stderr,
               "error: %s\nusage: %s MODEL.onnx --prompt 1,2,3 --tokens N [--target cpu|auto|sm_XX] "
               "[--backend runtime|sim] [--layers L] [--kv-heads K] [--head-dim D]\n",
               why.c_str(), argv0);
  std::exit(1);
}

long integer(const char* argv0, const std::string& flag, const std::string& v, long lo) {
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || n < lo || n > 1 << 20)
    usage(argv0, flag + " needs an integer >= " + std::to_string(lo) + ", got \"" + v + "\"");
  return n;
}

int positive(const char* argv0, const std::string& flag, const std::string& v) {
  return static_cast<int>(integer(argv0, flag, v, 1));
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0], f + " needs a value");
      return argv[++i];
    };
    if (f == "--prompt") {
      std::stringstream s(value());
      for (std::string t; std::getline(s, t, ',');) a.prompt.push_back(integer(argv[0], "--prompt", t, 0));
    } else if (f == "--tokens") {
      a.tokens = positive(argv[0], f, value());
    } else if (f == "--target") {
      a.target = value();
    } else if (f == "--backend") {
      a.backend = value();
      if (a.backend != "runtime" && a.backend != "sim")
        usage(argv[0], "--backend is runtime or sim, not \"" + a.backend + "\"");
    } else if (f == "--layers") {
      a.layers = positive(argv[0], f, value());
    } else if (f == "--kv-heads") {
      a.kv_heads = positive(argv[0], f, value());
    } else if (f == "--head-dim") {
      a.head_dim = positive(argv[0], f, value());
    } else if (!f.empty() && f[0] != '-' && a.model.empty()) {
      a.model = f;
    } else {
      usage(argv[0], "unknown argument \"" + f + "\"");
    }
  }
  if (a.model.empty()) usage(argv[0], "no model given");
  if (a.prompt.empty()) usage(argv[0], "--prompt is empty");
#ifndef KILN_GENERATE_SIM
  if (a.backend == "sim") usage(argv[0], "--backend sim needs kiln's simulator: build the example inside kiln's tree");
#endif
  if (a.target.empty()) a.target = a.backend == "sim" ? "sm_90" : "cpu";
  if (a.backend == "sim" && a.target.rfind("sm_", 0) != 0)
    usage(argv[0], "--backend sim runs a GPU plan's kernels: --target must be a GPU arch (sm_XX), not " + a.target);
  return a;
}

// The cache of one layer's keys or values: [1, kv_heads, length, head_dim].
struct Cache {
  std::vector<float> data;
  int64_t length = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const int64_t prompt_len = static_cast<int64_t>(a.prompt.size());
  const int64_t capacity = prompt_len + a.tokens;  // every position the run will hold
  std::vector<std::string> past_names, present_names;
  for (int l = 0; l < a.layers; ++l)
    for (const char* kind : {"key", "value"}) {
      past_names.push_back(std::string("past_") + kind + "_" + std::to_string(l));
      present_names.push_back(std::string("present_") + kind + "_" + std::to_string(l));
    }
  std::vector<int64_t> sequence = a.prompt, step_ids = a.prompt;
  std::printf("prompt:");
  for (int64_t t : a.prompt) std::printf(" %lld", static_cast<long long>(t));
  std::printf("\n");
  try {
    // One plan for the prefill and every decode step: a shape profile with
    // seq in [1, prompt] and past in [0, capacity - 1].
    auto t0 = std::chrono::steady_clock::now();
    kiln::Compiler compiler;
    compiler.target(a.target).input_range("input_ids", {1, 1}, {1, prompt_len});
    for (const std::string& n : past_names)
      compiler.input_range(n, {1, a.kv_heads, 0, a.head_dim}, {1, a.kv_heads, capacity - 1, a.head_dim});
    std::vector<uint8_t> plan = compiler.compile_file(a.model);
    auto compiled = [&](const std::string& engine_info) {
      std::printf("engine: %s\n", engine_info.c_str());
      std::printf("compiled once in %.1f ms (seq 1..%lld, past 0..%lld)\n",
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                  static_cast<long long>(prompt_len), static_cast<long long>(capacity - 1));
    };
    // The next token from a step's logits [1, seq, vocab], printed and appended.
    auto advance = [&](int step, int64_t seq, int64_t past, const float* logits, int64_t vocab,
                       std::chrono::steady_clock::time_point t1) {
      const float* last = logits + (seq - 1) * vocab;
      const int64_t next = std::max_element(last, last + vocab) - last;
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
      std::printf("step %d (%s, seq %lld, past %lld): token %lld  [%.1f ms run]\n", step,
                  step == 0 ? "prefill" : "decode", static_cast<long long>(seq), static_cast<long long>(past),
                  static_cast<long long>(next), ms);
      sequence.push_back(next);
      step_ids = {next};
    };
#ifdef KILN_GENERATE_SIM
    if (a.backend == "sim") {
      generate::SimDecoder sim(plan);
      compiled("the " + a.target + " plan's kernels on kiln's CPU simulator (--backend sim)");
      const std::string why_not = sim.why_not_in_place(past_names, present_names);
      if (why_not.empty())
        std::printf(
            "KV cache: bound in place, one buffer per cache of the full capacity (the plan's append kernel writes "
            "the new positions; attention reads through the capacity)\n");
      else
        std::printf(
            "KV cache: copied, not bound in place (%s): each step's present outputs are copied back as the next "
            "step's past inputs\n",
            why_not.c_str());
      std::vector<std::vector<float>> cache(past_names.size());  // [1, kv_heads, past, head_dim], empty at first
      if (why_not.empty())                                       // [1, kv_heads, capacity, head_dim] each
        for (auto& c : cache) c.assign(static_cast<size_t>(a.kv_heads * capacity * a.head_dim), 0.0f);
      for (int step = 0; step < a.tokens; ++step) {
        const int64_t seq = static_cast<int64_t>(step_ids.size()), past = static_cast<int64_t>(sequence.size()) - seq;
        auto t1 = std::chrono::steady_clock::now();
        int64_t vocab = 0;
        std::vector<float> logits =
            why_not.empty() ? sim.step_in_place(step_ids, past_names, present_names, cache, past, capacity, a.kv_heads,
                                                a.head_dim, vocab)
                            : sim.step(step_ids, past_names, present_names, cache, a.kv_heads, a.head_dim, vocab);
        advance(step, seq, past, logits.data(), vocab, t1);
      }
    }
#endif
    if (a.backend == "runtime") {
      kiln::Engine engine = kiln::Engine::from_memory(plan.data(), plan.size());
      kiln::Context ctx(engine);
      compiled(engine.info());
      std::printf("KV cache: bound in place, one buffer per cache of the full capacity (no copy per step)\n");
      // Each layer's keys and values: one buffer of the full capacity, bound as
      // both the past input and the present output (in place).
      const std::vector<int64_t> cache_shape = {1, a.kv_heads, capacity, a.head_dim};
      std::vector<std::vector<float>> cache(
          past_names.size(), std::vector<float>(static_cast<size_t>(a.kv_heads * capacity * a.head_dim)));
      for (size_t c = 0; c < cache.size(); ++c)
        ctx.bind_in_place(past_names[c], present_names[c], cache[c].data(), KILN_F32, cache_shape);
      std::vector<float> logits;
      for (int step = 0; step < a.tokens; ++step) {
        const int64_t seq = static_cast<int64_t>(step_ids.size()), past = static_cast<int64_t>(sequence.size()) - seq;
        auto t1 = std::chrono::steady_clock::now();
        ctx.bind_input("input_ids", step_ids.data(), KILN_I64, {1, seq});
        // The cache buffers stay bound; the past's length is the input shape.
        for (const std::string& n : past_names) ctx.set_input_shape(n, {1, a.kv_heads, past, a.head_dim});
        const std::vector<int64_t> logits_shape = ctx.output_shape("logits");
        if (logits_shape.size() != 3 || logits_shape[1] != seq)
          throw std::runtime_error("the model has no logits output of shape [1, seq, vocab]");
        const int64_t vocab = logits_shape[2];
        logits.resize(static_cast<size_t>(seq * vocab));
        ctx.bind_output("logits", logits.data(), KILN_F32, logits_shape);
        ctx.run();
        advance(step, seq, past, logits.data(), vocab, t1);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  std::printf("tokens:");
  for (int64_t t : sequence) std::printf(" %lld", static_cast<long long>(t));
  std::printf("\n");
  return 0;
}
