#include "ir/dot_parts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "ir/name_cut.h"

namespace kiln {

namespace {

// Graphviz's sizes of kiln's boxes, measured on BERT-base's picture: a rank
// of multi-line labels with the rank separation is about 95 pt high, a box
// with its node separation and the part's margin about 260 pt wide.
constexpr double kRankPt = 95, kBoxPt = 260;
// Shallower pictures stay one part; no part is made shorter than this.
constexpr int kMinRanksToWrap = 24, kMinPartRanks = 8;

}  // namespace

std::string layer_key(const std::string& onnx_name) {
  if (onnx_name.empty() || onnx_name[0] != '/') return "";
  size_t start = 1;
  while (start < onnx_name.size()) {
    size_t end = onnx_name.find('/', start);
    if (end == std::string::npos) return "";  // the last component is the op, not a layer
    if (std::any_of(onnx_name.begin() + start, onnx_name.begin() + end,
                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      return onnx_name.substr(0, end);
    start = end + 1;
  }
  return "";
}

DotParts wrap_into_parts(const std::vector<DotItem>& items) {
  DotParts parts;
  const int n = static_cast<int>(items.size());
  // Each item's rank: the longest path to it, counted in ranks.
  std::vector<int> rank(n, 0);
  int total = 0;
  for (int i = 0; i < n; ++i) {
    for (int p : items[i].preds)
      if (p >= 0 && p < i) rank[i] = std::max(rank[i], rank[p] + items[p].height);
    total = std::max(total, rank[i] + items[i].height);
  }
  parts.total_ranks = total;
  // How many boxes share a rank: the picture's width, taken where the model
  // is wide for long (the 90th percentile), not at one wide spot.
  std::vector<int> width(std::max(total, 1), 0);
  for (int i = 0; i < n; ++i)
    for (int r = rank[i]; r < rank[i] + items[i].height && r < total; ++r) ++width[r];
  std::vector<int> sorted = width;
  std::sort(sorted.begin(), sorted.end());
  const int wide = std::max(1, sorted[sorted.size() * 9 / 10]);
  // Parts side by side: height total/k * kRankPt against width k * wide * kBoxPt.
  int k = static_cast<int>(std::lround(std::sqrt(total * kRankPt / (wide * kBoxPt))));
  k = std::min(k, total / kMinPartRanks);
  if (total < kMinRanksToWrap || k < 2) k = 1;

  // The layer at each rank (the first named item starting there), and the cuts.
  std::vector<std::string> layer_at(std::max(total, 1));
  for (int i = 0; i < n; ++i)
    if (layer_at[rank[i]].empty()) layer_at[rank[i]] = items[i].layer;
  std::vector<int> cuts;  // first rank of parts 1..k-1
  for (int c = 1; c < k; ++c) {
    const int ideal = total * c / k, slack = total / k / 4;
    int best = ideal;
    for (int d = 0; d <= slack; ++d) {  // nearest layer change within a quarter part
      auto layer_starts = [&](int r) {
        if (r <= 0 || r >= total || layer_at[r].empty()) return false;
        for (int q = r - 1; q >= 0; --q)
          if (!layer_at[q].empty()) return layer_at[q] != layer_at[r];
        return false;
      };
      if (layer_starts(ideal - d)) {
        best = ideal - d;
        break;
      }
      if (layer_starts(ideal + d)) {
        best = ideal + d;
        break;
      }
    }
    if (cuts.empty() || best > cuts.back()) cuts.push_back(best);
  }
  parts.part_of.resize(n);
  for (int i = 0; i < n; ++i)
    parts.part_of[i] = static_cast<int>(std::upper_bound(cuts.begin(), cuts.end(), rank[i]) - cuts.begin());
  const int nparts = static_cast<int>(cuts.size()) + 1;
  for (int p = 0; p < nparts; ++p) {
    const int first = p == 0 ? 0 : cuts[p - 1], last = (p + 1 < nparts ? cuts[p] : total) - 1;
    parts.ranks.emplace_back(first, last);
    std::string from, to;
    for (int i = 0; i < n; ++i) {
      if (parts.part_of[i] != p || items[i].layer.empty()) continue;
      if (from.empty()) from = items[i].layer;
      to = items[i].layer;
    }
    std::string label;
    if (from.empty()) label = fmt::format("ranks {}-{}", first, last);
    else if (from == to) label = cut_name(from, 48);
    else label = cut_name(from, 40) + " to " + cut_name(to, 40);
    parts.labels.push_back(fmt::format("part {} of {}: {}", p + 1, nparts, label));
  }
  return parts;
}

}  // namespace kiln
