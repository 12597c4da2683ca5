#include "ir/dot_printer.h"

#include <fmt/format.h>

#include <sstream>
#include <unordered_map>

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

// "f32[1,64,56,56] default layout" (or nhwc) per result: dtype, shape and layout spelled out
// (Default is the model's own dim order).
std::string types_of(const Node& n) {
  std::string t;
  for (int i = 0; i < n.num_outputs(); ++i) {
    const TensorType& ty = n.output(i)->type();
    t += fmt::format("{}{}[{}] {}", i ? "\\n" : "", dtype_name(ty.dtype), fmt::join(ty.shape, ","),
                     ty.layout == Layout::NHWC ? "nhwc" : "default layout");
  }
  return t;
}

// op, result types, the ONNX node name(s) it came from, constant operands.
std::string node_label(const Node& n) {
  int consts = 0;
  for (Value* v : n.inputs()) consts += v && v->is_constant();
  std::string label = fmt::format("{}\\n{}", escape(n.op()), types_of(n));
  if (!n.name().empty()) label += "\\nloc: " + escape(n.name());
  if (consts) label += fmt::format("\\n+{} const", consts);
  return label;
}

class DotWriter {
 public:
  std::string run(const Graph& g) {
    out_ << "digraph \"" << escape(g.name()) << "\" {\n"
         << "  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n";
    for (Value* in : g.inputs()) {
      std::string id = fresh();
      ids_[in] = id;
      out_ << fmt::format("  {} [shape=ellipse, label=\"{}\\n{}\"];\n", id, escape(in->name()), in->type().str());
    }
    write_nodes(g, "  ");
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      std::string id = fresh();
      out_ << fmt::format("  {} [shape=ellipse, label=\"output {}\\n{}\"];\n", id, i,
                          escape(g.outputs()[i]->name()));
      edge(g.outputs()[i], id);
    }
    out_ << "}\n";
    return out_.str();
  }

 private:
  std::string fresh() { return fmt::format("n{}", next_++); }

  void edge(const Value* from, const std::string& to) {
    auto it = ids_.find(from);
    if (it != ids_.end()) out_ << fmt::format("  {} -> {};\n", it->second, to);
  }

  void write_nodes(const Graph& g, const std::string& indent) {
    for (const auto& np : g.nodes()) {
      const Node& n = *np;
      std::string id = fresh();
      if (n.body()) {
        // The fused node is a cluster holding its body's nodes, wired to the
        // fused node's operands; the body's results flow into an anchor box
        // carrying the fused node's name and result types, which is what
        // later nodes read.
        const Graph& body = *n.body();
        out_ << indent << "subgraph cluster_" << id << " {\n"
             << indent << fmt::format("  label=\"{} ({})\"; style=rounded; color=\"#3a6ea5\";\n",
                                      escape(n.op()), escape(n.attrs().get_string("kind", "")));
        for (size_t i = 0; i < body.inputs().size() && i < size_t(n.num_inputs()); ++i) {
          Value* outer = n.input(static_cast<int>(i));
          if (outer && ids_.count(outer)) ids_[body.inputs()[i]] = ids_[outer];
        }
        write_nodes(body, indent + "  ");
        std::string label = fmt::format("{}\\n{}", escape(n.name().empty() ? n.op() : n.name()), types_of(n));
        out_ << indent << fmt::format("  {} [label=\"{}\", style=filled, fillcolor=\"#dde8f5\"];\n", id, label);
        for (Value* o : body.outputs()) edge(o, id);
        out_ << indent << "}\n";
        for (Value* o : n.outputs()) ids_[o] = id;
        continue;
      }
      out_ << indent << fmt::format("{} [label=\"{}\"];\n", id, node_label(n));
      for (Value* v : n.inputs())
        if (v && !v->is_constant()) edge(v, id);
      for (Value* o : n.outputs()) ids_[o] = id;
    }
  }

  std::ostringstream out_;
  std::unordered_map<const Value*, std::string> ids_;
  int next_ = 0;
};

}  // namespace

std::string print_dot(const Graph& g) { return DotWriter().run(g); }

}  // namespace kiln
