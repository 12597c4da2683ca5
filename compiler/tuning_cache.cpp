#ifdef KILN_HAVE_CODEGEN
#include "compiler/tuning_cache.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "ir/error.h"

namespace kiln {

namespace {

constexpr int kFormat = 1;
const char* const kConfigFields[] = {"bm", "bn", "bk", "warps_m", "warps_n", "stages"};

int* config_field(codegen::GemmTileConfig& c, const std::string& f) {
  if (f == "bm") return &c.bm;
  if (f == "bn") return &c.bn;
  if (f == "bk") return &c.bk;
  if (f == "warps_m") return &c.warps_m;
  if (f == "warps_n") return &c.warps_n;
  return &c.stages;
}

std::string need_string(const nlohmann::json& e, const char* field, const std::string& where) {
  auto it = e.find(field);
  if (it == e.end() || !it->is_string() || it->get<std::string>().empty())
    fail("{}: \"{}\" must be a non-empty string", where, field);
  return it->get<std::string>();
}

}  // namespace

std::string TuningKey::str() const { return fmt::format("{} {} on {} (cc {}, kiln {})", op, problem, gpu, cc, kiln); }

std::string compute_capability_of(const std::string& target) {
  if (target.size() != 5 || target.rfind("sm_", 0) != 0 || !isdigit(target[3]) || !isdigit(target[4]))
    fail("tuning: target {} is not a GPU arch (sm_XY)", target);
  return fmt::format("{}.{}", target[3], target[4]);
}

TuningCache TuningCache::load(const std::string& path, bool missing_ok) {
  TuningCache c;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (missing_ok && !std::filesystem::exists(path)) return c;
    fail("tuning cache {}: cannot read the file", path);
  }
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    fail("tuning cache {}: not valid JSON: {}", path, e.what());
  }
  if (!j.is_object() || !j.contains("kiln_tuning_cache"))
    fail("tuning cache {}: not a kiln tuning cache (no \"kiln_tuning_cache\" format field)", path);
  if (!j["kiln_tuning_cache"].is_number_integer() || j["kiln_tuning_cache"].get<int>() != kFormat)
    fail("tuning cache {}: format {}, this kiln reads format {}", path, j["kiln_tuning_cache"].dump(), kFormat);
  if (!j.contains("entries") || !j["entries"].is_array()) fail("tuning cache {}: \"entries\" must be an array", path);
  size_t i = 0;
  for (const nlohmann::json& e : j["entries"]) {
    std::string where = fmt::format("tuning cache {}: entry {}", path, i++);
    if (!e.is_object()) fail("{}: not an object", where);
    TuningEntry t;
    t.key = {need_string(e, "gpu", where), need_string(e, "cc", where), need_string(e, "kiln", where),
             need_string(e, "op", where), need_string(e, "problem", where)};
    if (t.key.op != "gemm") fail("{}: op \"{}\" (this kiln tunes \"gemm\")", where, t.key.op);
    auto cfg = e.find("config");
    if (cfg == e.end() || !cfg->is_object()) fail("{}: \"config\" must be an object", where);
    for (const char* f : kConfigFields) {
      auto v = cfg->find(f);
      if (v == cfg->end() || !v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > 1024)
        fail("{}: \"config\".\"{}\" must be an integer from 1 to 1024", where, f);
      *config_field(t.config, f) = v->get<int>();
    }
    // Optional (caches written before split-K lack it): 1, no split.
    if (auto v = cfg->find("split_k"); v != cfg->end()) {
      if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > codegen::kMaxSplitK)
        fail("{}: \"config\".\"split_k\" must be an integer from 1 to {}", where, codegen::kMaxSplitK);
      t.config.split_k = v->get<int>();
    }
    // Optional: a split-K summed by the GEMM's last block per tile (absent: by a reduction kernel).
    if (auto v = cfg->find("fold_split"); v != cfg->end()) {
      if (!v->is_boolean()) fail("{}: \"config\".\"fold_split\" must be true or false", where);
      t.config.fold_split = v->get<bool>();
    }
    auto ms = e.find("ms");
    if (ms != e.end()) {
      if (!ms->is_number() || ms->get<double>() < 0) fail("{}: \"ms\" must be a non-negative number", where);
      t.ms = ms->get<double>();
    }
    auto n = e.find("candidates");
    if (n != e.end()) {
      if (!n->is_number_integer() || n->get<int64_t>() < 0) fail("{}: \"candidates\" must be a count", where);
      t.candidates = n->get<int>();
    }
    if (c.entries_.count(t.key)) fail("{}: a second entry for {}", where, t.key.str());
    c.entries_.emplace(t.key, t);
  }
  return c;
}

void TuningCache::save(const std::string& path) const {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& [k, e] : entries_) {
    nlohmann::json cfg;
    for (const char* f : kConfigFields) cfg[f] = *config_field(const_cast<codegen::GemmTileConfig&>(e.config), f);
    if (e.config.split_k > 1) cfg["split_k"] = e.config.split_k;
    if (e.config.fold_split) cfg["fold_split"] = true;
    entries.push_back({{"gpu", k.gpu},
                       {"cc", k.cc},
                       {"kiln", k.kiln},
                       {"op", k.op},
                       {"problem", k.problem},
                       {"config", cfg},
                       {"tile", codegen::gemm_tile_name(e.config)},
                       {"ms", e.ms},
                       {"candidates", e.candidates}});
  }
  nlohmann::json j = {{"kiln_tuning_cache", kFormat}, {"entries", entries}};
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::string tmp = fmt::format("{}.tmp{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) fail("tuning cache {}: cannot write {}", path, tmp);
    out << j.dump(2) << "\n";
    if (!out) fail("tuning cache {}: writing {} failed", path, tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail("tuning cache {}: cannot replace it: {}", path, ec.message());
}

const TuningEntry* TuningCache::find(const TuningKey& k) const {
  auto it = entries_.find(k);
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<std::string> TuningCache::gpus_for(const std::string& cc, const std::string& kiln) const {
  std::vector<std::string> out;
  for (const auto& [k, e] : entries_)
    if (k.cc == cc && k.kiln == kiln && (out.empty() || out.back() != k.gpu) &&
        std::find(out.begin(), out.end(), k.gpu) == out.end())
      out.push_back(k.gpu);
  return out;
}

}  // namespace kiln
#endif
