#include "ir/data_dependent.h"

#include "ir/error.h"

namespace kiln {

bool is_data_dependent_node(const Node& node) { return node.attrs().has(kSizeSymbolAttr); }

std::map<std::string, const Node*, std::less<>> data_dependent_symbols(const Graph& g) {
  std::map<std::string, const Node*, std::less<>> r;
  for (const auto& n : g.nodes()) {
    if (!is_data_dependent_node(*n)) continue;
    std::string s = n->attrs().get_string(kSizeSymbolAttr, "");
    auto [it, fresh] = r.emplace(s, n.get());
    if (!fresh)
      fail("{} and {} both name the size symbol {}: each data-dependent size needs a symbol of its own",
           it->second->describe(), n->describe(), s);
  }
  return r;
}

bool has_data_dependent_sizes(const Graph& g) {
  for (const auto& n : g.nodes())
    if (is_data_dependent_node(*n)) return true;
  return false;
}

}  // namespace kiln
