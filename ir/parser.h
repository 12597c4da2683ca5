// Parses kiln IR text into a Graph. Errors name the file, line and column.
#pragma once
#include <memory>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace kiln {

std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view filename = "<text>");

// A file holding several graphs separated by lines "// -----" (lit/FileCheck
// tests, as with mlir-opt --split-input-file).
std::vector<std::unique_ptr<Graph>> parse_graphs_split(std::string_view text,
                                                       std::string_view filename = "<text>");

}  // namespace kiln
