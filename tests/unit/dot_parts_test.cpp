// ir/dot_parts.h: where a deep picture is cut into side-by-side parts.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "ir/dot_parts.h"

namespace kiln {
namespace {

// A chain of `layers` layers of `per_layer` boxes, named as exporters name
// layers, after an unnamed input.
std::vector<DotItem> chain(int layers, int per_layer, int offset_names = 0) {
  std::vector<DotItem> items(1);  // the graph input
  for (int l = 0; l < layers; ++l)
    for (int k = 0; k < per_layer; ++k) {
      DotItem it;
      it.preds = {static_cast<int>(items.size()) - 1};
      it.layer = "/encoder/layer." + std::to_string(l + offset_names);
      items.push_back(it);
    }
  return items;
}

TEST(DotParts, LayerKeyIsThePathToTheFirstNumberedComponent) {
  EXPECT_EQ(layer_key("/bert/encoder/layer.0/attention/self/query/MatMul"), "/bert/encoder/layer.0");
  EXPECT_EQ(layer_key("/layer1/layer1.0/conv1/Conv"), "/layer1");
  EXPECT_EQ(layer_key("/transformer/h.11/attn/Softmax"), "/transformer/h.11");
  EXPECT_EQ(layer_key("/embeddings/Add"), "");
  EXPECT_EQ(layer_key("/Conv2"), "");  // the last component is the op
  EXPECT_EQ(layer_key("conv1_1"), "");
  EXPECT_EQ(layer_key(""), "");
}

TEST(DotParts, ShallowOrWidePicturesStayOnePart) {
  DotParts p = wrap_into_parts(chain(3, 5));  // 16 ranks
  EXPECT_EQ(p.ranks.size(), 1u);
  EXPECT_EQ(p.total_ranks, 16);
  // 60 ranks, but 40 boxes side by side at every rank: already wide
  std::vector<DotItem> wide;
  for (int r = 0; r < 60; ++r)
    for (int k = 0; k < 40; ++k) {
      DotItem it;
      if (r > 0) it.preds = {static_cast<int>(wide.size()) - 40};
      wide.push_back(it);
    }
  EXPECT_EQ(wrap_into_parts(wide).ranks.size(), 1u);
}

TEST(DotParts, DeepChainIsCutAtLayerBoundaries) {
  // 16 layers of 7 ranks after the input: 113 ranks of one box, about as
  // square in 5 parts (113 * 95 / 5 against 5 * 190).
  std::vector<DotItem> items = chain(16, 7);
  DotParts p = wrap_into_parts(items);
  ASSERT_GE(p.ranks.size(), 3u);
  EXPECT_EQ(p.total_ranks, 113);
  // parts cover the ranks in order, and no layer is in two parts
  std::map<std::string, std::set<int>> parts_of_layer;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) EXPECT_GE(p.part_of[i], p.part_of[i - 1]);
    if (!items[i].layer.empty()) parts_of_layer[items[i].layer].insert(p.part_of[i]);
  }
  for (const auto& [layer, parts] : parts_of_layer) EXPECT_EQ(parts.size(), 1u) << layer;
  EXPECT_EQ(p.ranks.front().first, 0);
  EXPECT_EQ(p.ranks.back().second, 112);
  for (size_t k = 1; k < p.ranks.size(); ++k) EXPECT_EQ(p.ranks[k].first, p.ranks[k - 1].second + 1);
  EXPECT_EQ(p.labels[0].rfind("part 1 of ", 0), 0u) << p.labels[0];
  EXPECT_NE(p.labels[0].find("/encoder/layer.0 to /encoder/layer."), std::string::npos) << p.labels[0];
}

TEST(DotParts, UnnamedDeepChainIsCutEvenly) {
  std::vector<DotItem> items = chain(16, 7);
  for (DotItem& it : items) it.layer.clear();
  DotParts p = wrap_into_parts(items);
  ASSERT_GE(p.ranks.size(), 3u);
  for (const auto& [first, last] : p.ranks) EXPECT_NEAR(last - first + 1, 113.0 / p.ranks.size(), 1.0);
  EXPECT_NE(p.labels[0].find("ranks 0-"), std::string::npos) << p.labels[0];
}

}  // namespace
}  // namespace kiln
