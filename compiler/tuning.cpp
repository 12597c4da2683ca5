#include "compiler/tuning.h"

#include <map>

#include "ir/error.h"
#include "runtime/version.h"
#ifdef KILN_HAVE_CODEGEN
#include "codegen/emitters/gemm_conv/gemm_tiles.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "compiler/autotune.h"
#include "compiler/tuning_cache.h"
#endif

namespace kiln {

#ifdef KILN_HAVE_CODEGEN

struct TuningSession::Impl {
  std::string file, gpu, cc;
  TuningCache cache;
  int tuned = 0;
  std::vector<std::string> notes;
  struct Choice {
    codegen::GemmTileConfig config;
    bool from_cache = false;
  };
  std::map<std::string, Choice> asked;  // by problem key
  std::unique_ptr<codegen::ScopedGemmTileChooser> chooser;
};

TuningSession::TuningSession(const Graph& g, const TuningOptions& o, const std::string& target,
                             const std::string& kernel_cache_dir, bool use_kernel_cache)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  if (target.rfind("sm_", 0) != 0)
    fail("--tune / --tuning-cache choose GPU kernel configurations: compile with --target sm_XX (the target is {})",
         target);
  s.cc = compute_capability_of(target);
  s.file = o.cache_file;
  if (s.file.empty()) s.file = (codegen::KernelCache(kernel_cache_dir).dir().parent_path() / "tuning.json").string();
  s.cache = TuningCache::load(s.file, /*missing_ok=*/o.tune);
  if (o.tune) {
    AutotuneRequest r;
    r.target = target;
    r.kernel_cache_dir = kernel_cache_dir;
    r.use_kernel_cache = use_kernel_cache;
    r.warmup = o.warmup;
    r.iterations = o.iterations;
    // Only what the cache lacks for this GPU is measured.
    r.wanted = [&](const std::string& gpu, const std::string& problem) {
      return !s.cache.find({gpu, s.cc, kKilnVersion, "gemm", problem});
    };
    AutotuneOutcome out = autotune(g, r);
    s.gpu = out.gpu;
    for (const AutotuneWinner& w : out.winners) {
      s.cache.put({{out.gpu, out.cc, kKilnVersion, "gemm", w.problem}, w.config, w.ms, w.candidates});
      ++s.tuned;
    }
    s.notes = out.notes;
    s.cache.save(s.file);
  } else if (!o.gpu.empty()) {
    s.gpu = o.gpu;
  } else {
    std::vector<std::string> gpus = s.cache.gpus_for(s.cc, kKilnVersion);
    if (gpus.size() > 1)
      fail("tuning cache {} holds winners of several GPUs for cc {} (kiln {}): {}; choose one with --tuning-gpu",
           s.file, s.cc, kKilnVersion, fmt::join(gpus, ", "));
    if (gpus.size() == 1) s.gpu = gpus[0];
  }
  s.chooser = std::make_unique<codegen::ScopedGemmTileChooser>(
      [impl = impl_.get()](const codegen::GemmProblem& p) -> std::optional<codegen::GemmTileConfig> {
        std::string key = codegen::gemm_problem_key(p);
        const TuningEntry* e =
            impl->gpu.empty() ? nullptr : impl->cache.find({impl->gpu, impl->cc, kKilnVersion, "gemm", key});
        Impl::Choice c{e ? e->config : codegen::default_gemm_tile(p), e != nullptr};
        if (e) {
          std::string why = codegen::gemm_tile_invalid(e->config, p);
          if (!why.empty())
            fail("tuning cache {}: the tile {} stored for GEMM {} is invalid: {}", impl->file,
                 codegen::gemm_tile_name(e->config), key, why);
        }
        impl->asked[key] = c;
        return e ? std::optional<codegen::GemmTileConfig>(e->config) : std::nullopt;
      });
}

TuningSession::~TuningSession() = default;

nlohmann::json TuningSession::json() const {
  const Impl& s = *impl_;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [key, c] : s.asked)
    rows.push_back({{"op", "gemm"},
                    {"problem", key},
                    {"tile", codegen::gemm_tile_name(c.config)},
                    {"from", c.from_cache ? "cache" : "default"}});
  return {{"cache", s.file}, {"gpu", s.gpu}, {"cc", s.cc}, {"tuned", s.tuned}, {"notes", s.notes}, {"problems", rows}};
}

std::string TuningSession::summary() const {
  const Impl& s = *impl_;
  int hits = 0;
  for (const auto& [key, c] : s.asked) hits += c.from_cache;
  return fmt::format("tuning: {} GEMM problem(s), {} from {} ({}){}", s.asked.size(), hits, s.file,
                     s.gpu.empty() ? "no entries for cc " + s.cc : s.gpu,
                     s.tuned ? fmt::format(", {} tuned now", s.tuned) : "");
}

#else

struct TuningSession::Impl {};
TuningSession::TuningSession(const Graph&, const TuningOptions&, const std::string&, const std::string&, bool) {
  fail("--tune / --tuning-cache: kiln was built without NVRTC (codegen), so plans carry no GPU kernels to tune");
}
TuningSession::~TuningSession() = default;
nlohmann::json TuningSession::json() const { return {}; }
std::string TuningSession::summary() const { return ""; }

#endif

}  // namespace kiln
