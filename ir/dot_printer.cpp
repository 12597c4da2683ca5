#include "ir/dot_printer.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "ir/dot_parts.h"
#include "ir/name_cut.h"

namespace kiln {

namespace {

std::string escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') {
      r += "\\n";
      continue;
    }
    r += c;
  }
  return r;
}

std::string type_str(const TensorType& ty) {
  return fmt::format("{}[{}] {}", dtype_name(ty.dtype), fmt::join(ty.shape, ","),
                     ty.layout == Layout::NHWC ? "nhwc" : "default layout");
}

// "f32[1,64,56,56] default layout" (or nhwc) per result: dtype, shape and
// layout spelled out (default is the model's own dim order); equal results in a
// row as one line with "xN".
std::string types_of(const Node& n) {
  std::vector<std::pair<std::string, int>> runs;
  for (int i = 0; i < n.num_outputs(); ++i) {
    std::string t = type_str(n.output(i)->type());
    if (!runs.empty() && runs.back().first == t) ++runs.back().second;
    else runs.emplace_back(t, 1);
  }
  std::string s;
  for (const auto& [t, count] : runs) {
    if (!s.empty()) s += '\n';
    s += count > 1 ? fmt::format("{} x{}", t, count) : t;
  }
  return s;
}

std::string attr_str(const Attribute& a) {
  switch (attr_kind(a)) {
    case AttrKind::Int:
      return std::to_string(std::get<int64_t>(a));
    case AttrKind::Float:
      return float_repr(std::get<float>(a));
    case AttrKind::String:
      return std::get<std::string>(a);
    case AttrKind::Ints:
      return fmt::format("[{}]", fmt::join(std::get<std::vector<int64_t>>(a), ","));
    case AttrKind::Floats: {
      std::string s;
      for (float f : std::get<std::vector<float>>(a)) {
        if (!s.empty()) s += ',';
        s += float_repr(f);
      }
      return "[" + s + "]";
    }
    case AttrKind::Strings:
      return fmt::format("[{}]", fmt::join(std::get<std::vector<std::string>>(a), ","));
    case AttrKind::Tensor:
      return "tensor " + std::get<Tensor>(a).type().str();
  }
  return "?";
}

bool all_equal(const Attribute& a, int64_t v) {
  if (attr_kind(a) == AttrKind::Int) return std::get<int64_t>(a) == v;
  if (attr_kind(a) != AttrKind::Ints) return false;
  for (int64_t x : std::get<std::vector<int64_t>>(a))
    if (x != v) return false;
  return true;
}

// The attributes that tell one node of an op from another (conv's kernel,
// strides and pads, transpose's perm, ...), leaving out defaults: one short line.
std::string key_attrs(const Node& n) {
  static const char* const kKeys[] = {"kernel_shape", "strides", "pads",    "dilations", "group",   "perm",
                                      "axis",         "axes",    "trans_a", "trans_b",   "split",   "shape",
                                      "num_heads",    "causal",  "mode",    "to",        "keepdims"};
  std::string s;
  for (const char* k : kKeys) {
    const Attribute* a = n.attrs().find(k);
    if (!a) continue;
    std::string key = k;
    if ((key == "dilations" || key == "group") && all_equal(*a, 1)) continue;
    if ((key == "pads" || key == "trans_a" || key == "trans_b") && all_equal(*a, 0)) continue;
    if (!s.empty()) s += ' ';
    s += key + "=" + attr_str(*a);
  }
  return cut_middle(s, 72);
}

class DotWriter {
 public:
  explicit DotWriter(const DotOptions& o) : o_(o) {}

  std::string run(const Graph& g) {
    for (Value* in : g.inputs()) {
      begin_item("");
      std::string id = fresh();
      ids_[in] = id;
      cur() << fmt::format("  {} [shape=ellipse, label=\"{}\\n{}\", tooltip=\"input {}\\n{}\"];\n", id,
                           escape(cut_name(in->name(), 48)), in->type().str(), escape(in->name()), in->type().str());
    }
    write_nodes(g, "  ");
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      begin_item("");
      std::string id = fresh();
      const std::string& name = g.outputs()[i]->name();
      cur() << fmt::format("  {} [shape=ellipse, label=\"output {}\\n{}\", tooltip=\"output {}\\n{}\\n{}\"];\n", id, i,
                           escape(cut_name(name, 48)), i, escape(name), g.outputs()[i]->type().str());
      edge(g.outputs()[i], id);
    }
    return assemble(g);
  }

 private:
  struct Item {
    std::ostringstream text;
    DotItem shape;
  };

  std::string fresh() {
    std::string id = fmt::format("n{}", next_++);
    item_of_[id] = static_cast<int>(items_.size()) - 1;
    return id;
  }
  void begin_item(std::string layer, int height = 1) {
    items_.emplace_back();
    items_.back().shape.layer = std::move(layer);
    items_.back().shape.height = height;
  }
  std::ostringstream& cur() { return items_.back().text; }

  void edge(const Value* from, const std::string& to) {
    auto it = ids_.find(from);
    if (it != ids_.end()) edges_.emplace_back(it->second, to);
  }

  // The picture: items (in parts side by side when it is deep, ir/dot_parts.h),
  // then every edge at top level: an edge statement inside a cluster's braces
  // makes Graphviz adopt both ends into that cluster, outside nodes included.
  // An edge between parts constrains no rank (each part starts at the top)
  // and is drawn dashed.
  std::string assemble(const Graph& g) {
    for (const auto& [from, to] : edges_) {
      const int a = item_of_.at(from), b = item_of_.at(to);
      if (a != b) items_[b].shape.preds.push_back(a);
    }
    DotParts parts;
    if (o_.wrap) {
      std::vector<DotItem> shapes;
      for (const Item& it : items_) shapes.push_back(it.shape);
      parts = wrap_into_parts(shapes);
    }
    const bool split = parts.ranks.size() > 1;
    std::ostringstream out;
    out << "digraph \"" << escape(g.name()) << "\" {\n"
        << "  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n";
    if (!split) {
      for (const Item& it : items_) out << it.text.str();
    } else {
      for (size_t p = 0; p < parts.ranks.size(); ++p) {
        out << fmt::format(
            "  subgraph cluster_part{} {{\n    label=\"{}\"; tooltip=\"{}\\nranks {} to {} of {}: a deep graph is cut "
            "into parts side by side; dashed edges come from another part\"; style=dashed; color=\"#999999\"; "
            "fontcolor=\"#555555\";\n",
            p, escape(parts.labels[p]), escape(parts.labels[p]), parts.ranks[p].first, parts.ranks[p].second,
            parts.total_ranks);
        for (size_t i = 0; i < items_.size(); ++i)
          if (parts.part_of[i] == static_cast<int>(p)) out << items_[i].text.str();
        out << "  }\n";
      }
    }
    for (const auto& [from, to] : edges_) {
      const bool across = split && parts.part_of[item_of_.at(from)] != parts.part_of[item_of_.at(to)];
      out << "  " << from << " -> " << to << (across ? " [constraint=false, style=dashed, color=\"#888888\"]" : "")
          << ";\n";
    }
    out << "}\n";
    return out.str();
  }

  // A fused body's inputs stand for the fused node's operands; constants
  // (weights) reach the body that way.
  const Value* outer(const Value* v) const {
    for (auto it = alias_.find(v); it != alias_.end(); it = alias_.find(v)) v = it->second;
    return v;
  }

  // Label: op (a fused node: what its kernel computes, `summary`), result
  // types, key attributes, constant operand shapes, the ONNX name(s) it came
  // from, all kept short. Tooltip: everything in full. Inside a fused cluster
  // the names are left to the tooltips (the cluster's lists them all): BERT-base's
  // picture is a third narrower without them.
  void write_node(const Node& n, const std::string& id, const std::string& indent, bool in_fused_body,
                  const Graph* fused_body = nullptr) {
    std::vector<std::string> consts;
    std::string const_tips;
    for (Value* v : n.inputs()) {
      const Value* o = v ? outer(v) : nullptr;
      if (!o || !o->is_constant()) continue;
      consts.push_back("const " + o->type().str());
      const_tips += fmt::format("\nconst {}: {}", o->name(), o->type().str());
    }
    std::string label = (fused_body ? kernel_summary(*fused_body) : n.op()) + "\n" + types_of(n);
    // A fused kernel shows the attributes of the first body node that has
    // any (its conv's kernel, strides and pads; a transpose's perm).
    std::string attrs;
    if (!fused_body) attrs = attrs_line(n);
    else
      for (const auto& bp : fused_body->nodes())
        if (!(attrs = attrs_line(*bp)).empty()) break;
    if (!attrs.empty()) label += "\n" + attrs;
    for (size_t i = 0; i < consts.size() && i < 2; ++i) label += "\n" + consts[i];
    if (consts.size() > 2) label += fmt::format("\n+{} const", consts.size() - 2);
    if (!n.name().empty() && !in_fused_body) label += "\nloc: " + short_joined_names(n.name());

    std::string tip;
    if (fused_body) {
      // The kernel's body op by op, then its members' ONNX names.
      tip = fmt::format("fused ({}), {} node{}\n{}", n.attrs().get_string("kind", ""), fused_body->nodes().size(),
                        fused_body->nodes().size() == 1 ? "" : "s", types_of(n));
      for (const auto& bp : fused_body->nodes()) tip += "\n  " + bp->op() + " " + types_of(*bp);
    } else {
      tip = n.op() + "\n" + types_of(n);
      for (const auto& [k, a] : n.attrs()) tip += "\n" + k + "=" + cut_middle(attr_str(a), 200);
    }
    tip += const_tips;
    for (const std::string& name : split_joined_names(n.name())) tip += "\nloc: " + name;
    std::string style = fused_body ? ", style=filled, fillcolor=\"#dde8f5\"" : "";
    cur() << indent
          << fmt::format("{} [label=\"{}\", tooltip=\"{}\"{}];\n", id, escape(cut_middle(label, 400)), escape(tip),
                         style);
  }

  // Key attributes on one line; conv carries no kernel_shape: its weight's
  // spatial dims are the kernel.
  std::string attrs_line(const Node& n) const {
    std::string attrs = key_attrs(n);
    if (n.op() == "conv" && n.num_inputs() > 1 && n.input(1) && !n.attrs().has("kernel_shape")) {
      const Shape& w = outer(n.input(1))->shape();
      if (w.size() > 2) {
        std::string k = fmt::format("kernel={}", fmt::join(w.begin() + 2, w.end(), "x"));
        attrs = attrs.empty() ? k : k + " " + attrs;
      }
    }
    return attrs;
  }

  // The body's inputs stand for the fused node's operands (outer()); their
  // ids, for the edges of --fused-bodies, are the operands' ids.
  void alias_body_inputs(const Node& n) {
    const Graph& body = *n.body();
    for (size_t i = 0; i < body.inputs().size() && i < size_t(n.num_inputs()); ++i) {
      Value* o = n.input(static_cast<int>(i));
      if (!o) continue;
      alias_[body.inputs()[i]] = o;
      if (ids_.count(o)) ids_[body.inputs()[i]] = ids_[o];
    }
  }

  // What a fused kernel does, in its body's op names: "matmul+add+gelu (3
  // ops)"; after four distinct ops, "+...". Its members' ONNX names are in
  // the tooltip.
  static std::string kernel_summary(const Graph& body) {
    std::vector<std::string> ops;
    for (const auto& np : body.nodes())
      if (std::find(ops.begin(), ops.end(), np->op()) == ops.end()) ops.push_back(np->op());
    std::string s;
    for (size_t i = 0; i < ops.size() && i < 4; ++i) s += (i ? "+" : "") + ops[i];
    if (ops.size() > 4) s += "+...";
    return fmt::format("{} ({} op{})", s, body.nodes().size(), body.nodes().size() == 1 ? "" : "s");
  }

  // Ranks a fused cluster takes: its body's longest chain, plus the anchor.
  static int body_depth(const Graph& body) {
    std::unordered_map<const Value*, int> depth;
    int deepest = 0;
    for (const auto& np : body.nodes()) {
      int d = 1;
      for (Value* v : np->inputs())
        if (auto it = depth.find(v); it != depth.end()) d = std::max(d, it->second + 1);
      for (Value* o : np->outputs()) depth[o] = d;
      deepest = std::max(deepest, d);
    }
    return deepest;
  }

  static std::string layer_of(const Node& n) {
    if (n.name().empty()) return "";
    std::vector<std::string> names = split_joined_names(n.name());
    return names.empty() ? "" : layer_key(names[0]);
  }

  void write_nodes(const Graph& g, const std::string& indent, bool in_fused_body = false) {
    for (const auto& np : g.nodes()) {
      const Node& n = *np;
      const bool fused = n.op() == "fused" && n.body();
      if (!in_fused_body) begin_item(layer_of(n), fused && o_.fused_bodies ? body_depth(*n.body()) + 1 : 1);
      std::string id = fresh();
      if (fused && !o_.fused_bodies) {
        // One box for the kernel: what it computes, its results, its
        // constants; the body op by op and every member's name in the tooltip.
        alias_body_inputs(n);
        write_node(n, id, indent, in_fused_body, n.body());
        for (Value* v : n.inputs())
          if (v && !outer(v)->is_constant()) edge(v, id);
        for (Value* o : n.outputs()) ids_[o] = id;
        continue;
      }
      if (fused) {
        // (Control-flow nodes draw as one box: their regions' parameters are
        // not their operands one for one.)
        // --fused-bodies: the fused node is a cluster holding its body's
        // nodes, wired to the fused node's operands; the body's results flow
        // into an anchor box carrying the kernel's summary and result types,
        // which is what later nodes read. Only these nodes are declared
        // inside the braces.
        const Graph& body = *n.body();
        std::string kind = n.attrs().get_string("kind", "");
        std::vector<std::string> names = split_joined_names(n.name());
        std::string tip = fmt::format("{} ({}), {} nodes", n.op(), kind, body.nodes().size());
        for (const std::string& name : names) tip += "\n" + name;
        cur() << indent << "subgraph cluster_" << id << " {\n"
              << indent
              << fmt::format("  label=\"{} ({})\"; tooltip=\"{}\"; style=rounded; color=\"#3a6ea5\";\n", escape(n.op()),
                             escape(kind), escape(tip));
        alias_body_inputs(n);
        write_nodes(body, indent + "  ", true);
        std::string label = fmt::format("{}\n{}", kernel_summary(body), types_of(n));
        cur() << indent
              << fmt::format("  {} [label=\"{}\", tooltip=\"{}\", style=filled, fillcolor=\"#dde8f5\"];\n", id,
                             escape(label), escape(tip + "\n" + types_of(n)));
        for (Value* o : body.outputs()) edge(o, id);
        cur() << indent << "}\n";
        for (Value* o : n.outputs()) ids_[o] = id;
        continue;
      }
      write_node(n, id, indent, in_fused_body);
      for (Value* v : n.inputs())
        if (v && !outer(v)->is_constant()) edge(v, id);
      for (Value* o : n.outputs()) ids_[o] = id;
    }
  }

  DotOptions o_;
  std::vector<Item> items_;
  std::vector<std::pair<std::string, std::string>> edges_;
  std::unordered_map<std::string, int> item_of_;  // node id -> the top-level item declaring it
  std::unordered_map<const Value*, std::string> ids_;
  std::unordered_map<const Value*, const Value*> alias_;
  int next_ = 0;
};

}  // namespace

std::string print_dot(const Graph& g, const DotOptions& o) { return DotWriter(o).run(g); }

}  // namespace kiln
