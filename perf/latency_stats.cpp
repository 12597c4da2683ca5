#include "perf/latency_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kiln {

LatencyStats latency_stats(std::vector<double> ms) {
  LatencyStats s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * double(ms.size())));
    return ms[std::min(ms.size() - 1, rank == 0 ? 0 : rank - 1)];
  };
  s.min = ms.front();
  s.max = ms.back();
  double sum = 0;
  for (double v : ms) sum += v;
  s.mean = sum / double(ms.size());
  s.median = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  s.p90 = pct(90);
  s.p95 = pct(95);
  s.p99 = pct(99);
  return s;
}

std::string stats_line(const char* what, const LatencyStats& s) {
  return fmt::format(
      "{}: min = {:.3f} ms, max = {:.3f} ms, mean = {:.3f} ms, median = {:.3f} ms, "
      "percentile(90%) = {:.3f} ms, percentile(95%) = {:.3f} ms, percentile(99%) = {:.3f} ms\n",
      what, s.min, s.max, s.mean, s.median, s.p90, s.p95, s.p99);
}

nlohmann::json stats_json(const LatencyStats& s) {
  return {{"min", s.min}, {"max", s.max}, {"mean", s.mean}, {"median", s.median},
          {"p90", s.p90}, {"p95", s.p95}, {"p99", s.p99}};
}

}  // namespace kiln
