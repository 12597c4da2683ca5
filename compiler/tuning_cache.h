// The tuning cache (docs/tuning.md): a JSON file of autotuning winners, each
// keyed by the GPU (name and compute capability), the kiln version, the op
// kind and the problem (codegen/emitters/gemm_conv/gemm_tiles.h's gemm_problem_key: math,
// batch, M, N, K; epilogue-independent), holding the winning configuration and
// its measured median time. `kiln compile --tune` writes it;
// `kiln compile --tuning-cache FILE` applies it (deterministically: the
// plan depends on the file's contents and the flags only).
//
// Format: {"kiln_tuning_cache": 1, "entries": [{"gpu", "cc", "kiln", "op",
// "problem", "config": {"bm", "bn", "bk", "warps_m", "warps_n", "stages"},
// "tile" (informative), "ms", "candidates"}, ...]}, entries sorted by key, so
// two caches merge by concatenating their entries (a key present in both is
// an error naming it).
#pragma once
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/emitters/gemm_conv/gemm_tiles.h"

namespace kiln {

struct TuningKey {
  std::string gpu;      // "NVIDIA H100 80GB HBM3"
  std::string cc;       // "9.0"
  std::string kiln;     // kKilnVersion
  std::string op;       // "gemm": the GEMM core of matmul/gemm/conv
  std::string problem;  // "f16:b1:m3136:n64:k576"
  auto operator<=>(const TuningKey&) const = default;
  std::string str() const;  // for messages
};

struct TuningEntry {
  TuningKey key;
  codegen::GemmTileConfig config;
  double ms = 0;       // median of the timed runs
  int candidates = 0;  // how many configurations were timed
};

class TuningCache {
 public:
  // An absent file is an empty cache (when `missing_ok`, else an error); a
  // malformed one is a kiln::Error naming the file and what is wrong.
  static TuningCache load(const std::string& path, bool missing_ok);
  // Atomically (a temporary file renamed over `path`); entries in key order.
  void save(const std::string& path) const;

  const TuningEntry* find(const TuningKey& k) const;
  void put(const TuningEntry& e) { entries_[e.key] = e; }
  const std::map<TuningKey, TuningEntry>& entries() const { return entries_; }
  // The GPU names with entries for this compute capability and kiln version.
  std::vector<std::string> gpus_for(const std::string& cc, const std::string& kiln) const;

 private:
  std::map<TuningKey, TuningEntry> entries_;
};

// "sm_90" -> "9.0" (kiln::Error for anything but sm_XY).
std::string compute_capability_of(const std::string& target);

}  // namespace kiln
