#include "tools/kiln/output_report.h"

#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>

#include "ir/error.h"
#include "ir/text_format.h"
#include "ir/tensor_io.h"

namespace kiln {

namespace {

std::string safe_stem(const std::string& name, size_t position) {
  if (name.empty()) return fmt::format("output_{}", position);
  std::string s = name;
  for (char& c : s) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
    if (!ok) c = '_';
  }
  if (s[0] == '.') s[0] = '_';
  return s;
}

struct Stats {
  double min = 0, max = 0, mean = 0;
  int64_t finite = 0, nan = 0, inf = 0;
  std::vector<double> first;
};

Stats stats_of(const Tensor& t) {
  Stats s;
  if (t.numel() == 0) return s;
  // One conversion to f64 (or i64) instead of a per-element virtual-ish get.
  bool fp = is_float(t.dtype());
  Tensor d = fp ? t.cast(DType::F64) : t.cast(DType::I64);
  double sum = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = fp ? d.data<double>()[i] : double(d.data<int64_t>()[i]);
    if (s.first.size() < 8) s.first.push_back(v);
    if (std::isnan(v)) {
      ++s.nan;
      continue;
    }
    if (std::isinf(v)) {
      ++s.inf;
      continue;
    }
    if (s.finite == 0 || v < s.min) s.min = v;
    if (s.finite == 0 || v > s.max) s.max = v;
    sum += v;
    ++s.finite;
  }
  if (s.finite) s.mean = sum / double(s.finite);
  return s;
}

std::string num(double v) { return fmt::format("{:.6g}", v); }

}  // namespace

std::vector<std::string> output_file_names(const std::vector<std::string>& names) {
  std::vector<std::string> stems;
  std::map<std::string, int> uses;
  for (size_t i = 0; i < names.size(); ++i) {
    stems.push_back(safe_stem(names[i], i));
    ++uses[stems.back()];
  }
  std::vector<std::string> files;
  std::map<std::string, size_t> taken;
  for (size_t i = 0; i < names.size(); ++i) {
    std::string f = uses[stems[i]] > 1 ? fmt::format("{}.{}.npy", stems[i], i) : stems[i] + ".npy";
    // "a_b.1" could itself be an output's name: then no mapping is safe.
    if (auto [it, fresh] = taken.emplace(f, i); !fresh)
      fail("--outputs: outputs \"{}\" and \"{}\" would both be written to {}", names[it->second], names[i], f);
    files.push_back(f);
  }
  return files;
}

void report_outputs(const std::vector<std::pair<std::string, Tensor>>& outs, const std::string& dir,
                    const std::string& precision) {
  std::vector<std::string> names;
  for (const auto& o : outs) names.push_back(o.first);
  std::vector<std::string> files = output_file_names(names);
  for (size_t i = 0; i < outs.size(); ++i) {
    const auto& [name, t] = outs[i];
    std::cout << fmt::format("output {} \"{}\": {} checksum {:016x}\n", i, name, t.type().str(), tensor_checksum(t));
    if (t.dtype() == DType::String) {  // the first strings, quoted as the IR text quotes them
      std::vector<std::string> first;
      for (int64_t k = 0; k < std::min<int64_t>(t.numel(), 8); ++k) first.push_back(quote_string(t.strings()[k]));
      std::cout << fmt::format("  first: [{}{}]\n", fmt::join(first, ", "), t.numel() > 8 ? ", ..." : "");
      if (!dir.empty())
        fail("--outputs: output \"{}\" is a string tensor, which kiln does not write as .npy yet", name);
      continue;
    }
    Stats s = stats_of(t);
    std::vector<std::string> first;
    for (double v : s.first) first.push_back(num(v));
    std::string more = t.numel() > int64_t(s.first.size()) ? ", ..." : "";
    if (s.finite)
      std::cout << fmt::format("  min {} max {} mean {} | first: [{}{}]\n", num(s.min), num(s.max), num(s.mean),
                               fmt::join(first, ", "), more);
    else if (t.numel()) std::cout << fmt::format("  no finite value | first: [{}{}]\n", fmt::join(first, ", "), more);
    else std::cout << "  empty\n";
    if (s.nan || s.inf) {
      bool half = precision == "fp16" || t.dtype() == DType::F16;
      std::cerr << fmt::format(
          "warning: output \"{}\" has {} NaN and {} Inf of {} values{}\n", name, s.nan, s.inf, t.numel(),
          half ? " (fp16 overflows beyond +-65504: compare with --precision fp32, or try bf16)" : "");
      std::cout << fmt::format("  NaN {} Inf {}\n", s.nan, s.inf);
    }
    if (!dir.empty()) {
      std::string path = (std::filesystem::path(dir) / files[i]).string();
      write_npy(path, t);
      std::cout << fmt::format("  written to {}\n", path);
    }
  }
}

}  // namespace kiln
