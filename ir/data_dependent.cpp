#include "ir/data_dependent.h"

#include "ir/error.h"

namespace kiln {

bool is_data_dependent_node(const Node& node) {
  if (node.attrs().has(kSizeSymbolAttr)) return true;
  if (node.op() != "if" && node.op() != "loop" && node.op() != "scan") return false;
  for (int r = 0; r < node.num_regions(); ++r)
    for (const auto& n : node.region(r)->nodes())
      if (is_data_dependent_node(*n)) return true;
  return false;
}

namespace {

void collect_size_symbols(const Graph& g, std::map<std::string, const Node*, std::less<>>& r) {
  for (const auto& n : g.nodes()) {
    if (!is_data_dependent_node(*n)) continue;
    if (n->attrs().has(kSizeSymbolAttr)) {
      std::string s = n->attrs().get_string(kSizeSymbolAttr, "");
      auto [it, fresh] = r.emplace(s, n.get());
      if (!fresh)
        fail("{} and {} both name the size symbol {}: each data-dependent size needs a symbol of its own",
             it->second->describe(), n->describe(), s);
    }
    if (n->op() == "if" || n->op() == "loop" || n->op() == "scan")
      for (int k = 0; k < n->num_regions(); ++k) collect_size_symbols(*n->region(k), r);
  }
}

}  // namespace

std::map<std::string, const Node*, std::less<>> data_dependent_symbols(const Graph& g) {
  std::map<std::string, const Node*, std::less<>> r;
  collect_size_symbols(g, r);
  return r;
}

bool has_data_dependent_sizes(const Graph& g) {
  for (const auto& n : g.nodes())
    if (is_data_dependent_node(*n)) return true;
  return false;
}

}  // namespace kiln
