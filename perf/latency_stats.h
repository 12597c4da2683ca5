// Statistics of measured latencies, as trtexec prints them: `kiln bench`
// (tools/kiln/bench*.cpp) and the GPU benchmarks report runs with these.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kiln {

// Latency statistics over samples in milliseconds (sorted copy inside);
// percentiles by nearest rank.
struct LatencyStats {
  double min = 0, max = 0, mean = 0, median = 0, p90 = 0, p95 = 0, p99 = 0;
};
LatencyStats latency_stats(std::vector<double> ms);
// "Latency: min = ... ms, ..., percentile(99%) = ... ms\n", trtexec's words.
std::string stats_line(const char* what, const LatencyStats& s);
nlohmann::json stats_json(const LatencyStats& s);

}  // namespace kiln
