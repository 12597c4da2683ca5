#include "ir/parser.h"
#include "ir/error.h"
namespace kiln {
std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view filename) { throw std::logic_error("parser: not written yet"); }
std::vector<std::unique_ptr<Graph>> parse_graphs_split(std::string_view text, std::string_view filename) { throw std::logic_error("parser: not written yet"); }
}  // namespace kiln
