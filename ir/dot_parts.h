// Wrapping a deep picture into side-by-side parts. A network of many layers
// draws as a tall, narrow column of boxes (BERT-base: about 200 ranks, 19k pt
// high and 3.7k wide), which no viewer shows at a readable scale. The dot
// printer instead cuts the picture at rank boundaries into parts laid out
// left to right (Graphviz clusters whose edges between parts do not constrain
// ranks), choosing the number of parts so that the whole is about as wide as
// it is high, and moving each cut to the nearest place where the ONNX names
// change layer ("/bert/encoder/layer.3/..." -> "layer.4"), so a part holds
// whole layers where the model's names say what a layer is.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace kiln {

// One top-level box (or cluster) of the picture, in topological order.
struct DotItem {
  int height = 1;          // ranks it occupies (a fused cluster: its body's depth + 1)
  std::vector<int> preds;  // items with an edge into this one (indices below this one's)
  std::string layer;       // layer_key() of its ONNX name; "" when it has none
};

struct DotParts {
  std::vector<int> part_of;                // per item
  std::vector<std::pair<int, int>> ranks;  // per part: first and last rank
  std::vector<std::string> labels;         // per part: its first and last layer, or its ranks
  int total_ranks = 0;
};

// The layer an ONNX node name belongs to: the name's path up to its first
// component holding a digit ("/bert/encoder/layer.0/attention/self/MatMul"
// -> "/bert/encoder/layer.0", "/layer1/layer1.0/conv1/Conv" -> "/layer1");
// "" for a name that is no '/' path or has no such component.
std::string layer_key(const std::string& onnx_name);

// Parts for the items; a single part when the picture is not deep (under 24
// ranks) or already wide enough.
DotParts wrap_into_parts(const std::vector<DotItem>& items);

}  // namespace kiln
