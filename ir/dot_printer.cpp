#include "ir/dot_printer.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <vector>

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
  std::string run(const Graph& g) {
    out_ << "digraph \"" << escape(g.name()) << "\" {\n"
         << "  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n";
    for (Value* in : g.inputs()) {
      std::string id = fresh();
      ids_[in] = id;
      out_ << fmt::format("  {} [shape=ellipse, label=\"{}\\n{}\", tooltip=\"input {}\\n{}\"];\n", id,
                          escape(cut_name(in->name(), 48)), in->type().str(), escape(in->name()), in->type().str());
    }
    write_nodes(g, "  ");
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      std::string id = fresh();
      const std::string& name = g.outputs()[i]->name();
      out_ << fmt::format("  {} [shape=ellipse, label=\"output {}\\n{}\", tooltip=\"output {}\\n{}\\n{}\"];\n", id, i,
                          escape(cut_name(name, 48)), i, escape(name), g.outputs()[i]->type().str());
      edge(g.outputs()[i], id);
    }
    // Edges last, at top level: an edge statement inside a cluster's braces
    // makes Graphviz adopt both ends into that cluster, outside nodes included.
    for (const std::string& e : edges_) out_ << "  " << e << ";\n";
    out_ << "}\n";
    return out_.str();
  }

 private:
  std::string fresh() { return fmt::format("n{}", next_++); }

  void edge(const Value* from, const std::string& to) {
    auto it = ids_.find(from);
    if (it != ids_.end()) edges_.push_back(fmt::format("{} -> {}", it->second, to));
  }

  // A fused body's inputs stand for the fused node's operands; constants
  // (weights) reach the body that way.
  const Value* outer(const Value* v) const {
    for (auto it = alias_.find(v); it != alias_.end(); it = alias_.find(v)) v = it->second;
    return v;
  }

  // Label: op, result types, key attributes, constant operand shapes, the
  // ONNX name(s) it came from, all kept short. Tooltip: everything in full.
  // Inside a fused cluster the names are left to the tooltips (the cluster's
  // lists them all): BERT-base's picture is a third narrower without them.
  void write_node(const Node& n, const std::string& id, const std::string& indent, bool in_fused_body) {
    std::vector<std::string> consts;
    std::string const_tips;
    for (Value* v : n.inputs()) {
      const Value* o = v ? outer(v) : nullptr;
      if (!o || !o->is_constant()) continue;
      consts.push_back("const " + o->type().str());
      const_tips += fmt::format("\nconst {}: {}", o->name(), o->type().str());
    }
    std::string label = n.op() + "\n" + types_of(n);
    std::string attrs = key_attrs(n);
    // conv carries no kernel_shape: its weight's spatial dims are the kernel
    if (n.op() == "conv" && n.num_inputs() > 1 && n.input(1) && !n.attrs().has("kernel_shape")) {
      const Shape& w = outer(n.input(1))->shape();
      if (w.size() > 2) {
        std::string k = fmt::format("kernel={}", fmt::join(w.begin() + 2, w.end(), "x"));
        attrs = attrs.empty() ? k : k + " " + attrs;
      }
    }
    if (!attrs.empty()) label += "\n" + attrs;
    for (size_t i = 0; i < consts.size() && i < 2; ++i) label += "\n" + consts[i];
    if (consts.size() > 2) label += fmt::format("\n+{} const", consts.size() - 2);
    if (!n.name().empty() && !in_fused_body) label += "\nloc: " + short_joined_names(n.name());

    std::string tip = n.op() + "\n" + types_of(n);
    for (const auto& [k, a] : n.attrs()) tip += "\n" + k + "=" + cut_middle(attr_str(a), 200);
    tip += const_tips;
    for (const std::string& name : split_joined_names(n.name())) tip += "\nloc: " + name;
    out_ << indent
         << fmt::format("{} [label=\"{}\", tooltip=\"{}\"];\n", id, escape(cut_middle(label, 400)), escape(tip));
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

  void write_nodes(const Graph& g, const std::string& indent, bool in_fused_body = false) {
    for (const auto& np : g.nodes()) {
      const Node& n = *np;
      std::string id = fresh();
      if (n.op() == "fused" && n.body()) {
        // (Control-flow nodes draw as one box: their regions' parameters are
        // not their operands one for one.)
        // The fused node is a cluster holding its body's nodes, wired to the
        // fused node's operands; the body's results flow into an anchor box
        // carrying the fused node's name and result types, which is what
        // later nodes read. Only these nodes are declared inside the braces.
        const Graph& body = *n.body();
        std::string kind = n.attrs().get_string("kind", "");
        std::vector<std::string> names = split_joined_names(n.name());
        std::string tip = fmt::format("{} ({}), {} nodes", n.op(), kind, body.nodes().size());
        for (const std::string& name : names) tip += "\n" + name;
        out_ << indent << "subgraph cluster_" << id << " {\n"
             << indent
             << fmt::format("  label=\"{} ({})\"; tooltip=\"{}\"; style=rounded; color=\"#3a6ea5\";\n", escape(n.op()),
                            escape(kind), escape(tip));
        for (size_t i = 0; i < body.inputs().size() && i < size_t(n.num_inputs()); ++i) {
          Value* o = n.input(static_cast<int>(i));
          if (!o) continue;
          alias_[body.inputs()[i]] = o;
          if (ids_.count(o)) ids_[body.inputs()[i]] = ids_[o];
        }
        write_nodes(body, indent + "  ", true);
        std::string label = fmt::format("{}\n{}", kernel_summary(body), types_of(n));
        out_ << indent
             << fmt::format("  {} [label=\"{}\", tooltip=\"{}\", style=filled, fillcolor=\"#dde8f5\"];\n", id,
                            escape(label), escape(tip + "\n" + types_of(n)));
        for (Value* o : body.outputs()) edge(o, id);
        out_ << indent << "}\n";
        for (Value* o : n.outputs()) ids_[o] = id;
        continue;
      }
      write_node(n, id, indent, in_fused_body);
      for (Value* v : n.inputs())
        if (v && !outer(v)->is_constant()) edge(v, id);
      for (Value* o : n.outputs()) ids_[o] = id;
    }
  }

  std::ostringstream out_;
  std::vector<std::string> edges_;
  std::unordered_map<const Value*, std::string> ids_;
  std::unordered_map<const Value*, const Value*> alias_;
  int next_ = 0;
};

}  // namespace

std::string print_dot(const Graph& g) { return DotWriter().run(g); }

}  // namespace kiln
