// Parses kiln IR text into a Graph. Errors name the file, line and column.
#pragma once
#include <memory>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace kiln {

std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view filename = "<text>");

// The same, for text that starts on line `first_line` of the file (a piece of
// a split file), so error positions are the file's.
std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view filename, int first_line);

// The pieces of a file split at lines that are exactly "// -----" (trailing
// blanks allowed), with the line each piece starts on.
struct InputChunk {
  std::string_view text;
  int first_line;
};
std::vector<InputChunk> split_input_file(std::string_view text);

// A file holding several graphs separated by lines "// -----" (lit/FileCheck
// tests, as with mlir-opt --split-input-file).
std::vector<std::unique_ptr<Graph>> parse_graphs_split(std::string_view text, std::string_view filename = "<text>");

}  // namespace kiln
