// Long names from models, shortened for pictures: ONNX node names such as
// "/inner/encoder/layer.0/attention/self/query/MatMul" differ at both ends,
// and a fused node's name joins its members' names with '+' (hundreds of
// characters in BERT). Moved out of the dot printer to be shared.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace kiln {

// Whole when at most `keep` bytes, else both ends around "...". Cuts fall on
// UTF-8 character boundaries.
std::string cut_middle(const std::string& s, size_t keep);

// A fused node's name split at its '+' into its members' names.
std::vector<std::string> split_joined_names(const std::string& joined);

// The first member's name (cut to 48) and " + N more".
std::string short_joined_names(const std::string& joined);

}  // namespace kiln
