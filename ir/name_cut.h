// Long names from models, shortened for pictures and tables: ONNX node names
// such as "/bert/encoder/layer.0/attention/self/query/MatMul" differ at both
// ends, and a fused node's name joins its members' names with '+' (hundreds
// of characters in BERT). Used by the dot/SVG printer and kiln bench's
// profile tables.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace kiln {

// Whole when at most `keep` bytes, else both ends around "...". Cuts fall on
// UTF-8 character boundaries.
std::string cut_middle(const std::string& s, size_t keep);

// A name shortened to at most `keep` bytes keeping what tells it apart: a
// path-like ONNX name loses whole components from its middle, those without
// digits first ("/bert/encoder/layer.0/.../query/MatMul": the layer number
// and the op at the end survive), never its first or last; anything else, or
// a name still too long, is cut in the middle (cut_middle).
std::string cut_name(const std::string& name, size_t keep);

// A fused node's name split at its '+' into its members' names.
std::vector<std::string> split_joined_names(const std::string& joined);

// The first member's name and " + N more": the first name cut (cut_name) to
// `first_keep`, or with first_keep 0 so that the whole fits in `width`.
std::string short_joined_names(const std::string& joined, size_t first_keep = 48, size_t width = 0);

}  // namespace kiln
