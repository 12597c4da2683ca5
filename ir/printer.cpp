// Prints a Graph as kiln IR text. The grammar is in docs/ir.md; the parser
// (ir/parser.cpp) reads it back, and print(parse(print(g))) == print(g).
//
// Value names: a value keeps its name when it is non-empty and not taken by an
// earlier value of the same graph; otherwise it gets the smallest free number
// ("0", "1", ...) that no value of the graph is named. Names are assigned in
// print order (inputs, constants, node results), so a reprint of parsed text
// keeps every name.
#include "ir/printer.h"

#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/low_bit.h"
#include "ir/symbolic_dim.h"
#include "ir/text_format.h"

namespace kiln {

namespace {

// One element of a tensor as the parser reads it back.
std::string element_repr(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::F32:
      return float_repr(t.data<float>()[i]);
    case DType::F64:
      return double_repr(t.data<double>()[i]);
    case DType::F16:
      return float_repr(half_to_float(t.data<uint16_t>()[i]));
    case DType::BF16:
      return float_repr(bf16_to_float(t.data<uint16_t>()[i]));
    case DType::Bool:
      return t.data<uint8_t>()[i] ? "true" : "false";
    case DType::U64:
      return std::to_string(t.data<uint64_t>()[i]);
    case DType::I64:  // shape values of a graph with symbolic dims hold them
      return dim_str(t.data<int64_t>()[i]);
    case DType::String:  // escaped as attribute strings are (UTF-8 bytes past 0x7e as \xNN)
      return quote_string(t.strings()[i]);
    default:
      if (is_low_bit_float(t.dtype())) return float_repr(low_bit_to_float(t.dtype(), t.data<uint8_t>()[i]));
      return std::to_string(t.get_int(i));
  }
}

// Whether elements i and j print the same (bitwise equal, or both NaN: the
// text spells every NaN "nan").
bool same_element(const Tensor& t, int64_t i, int64_t j) {
  if (t.dtype() == DType::String) return t.strings()[i] == t.strings()[j];
  size_t w = dtype_size(t.dtype());
  const uint8_t* p = static_cast<const uint8_t*>(t.raw());
  if (std::memcmp(p + i * w, p + j * w, w) == 0) return true;
  if (!computes_as_float(t.dtype())) return false;
  return std::isnan(t.get_double(i)) && std::isnan(t.get_double(j));
}

bool is_splat(const Tensor& t) {
  if (t.numel() == 0 || !t.raw()) return false;
  for (int64_t i = 1; i < t.numel(); ++i)
    if (!same_element(t, 0, i)) return false;
  return true;
}

std::string dense_repr(const Tensor& t) {
  std::string s = "dense<[";
  int64_t n = t.raw() ? t.numel() : 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += element_repr(t, i);
  }
  return s + "]>";
}

// splat<v> when every element prints alike, else dense<[...]>.
std::string inline_tensor(const Tensor& t) {
  if (is_splat(t)) return "splat<" + element_repr(t, 0) + ">";
  return dense_repr(t);
}

template <typename T, typename F>
std::string list_repr(const std::vector<T>& v, const char* empty, F&& item) {
  if (v.empty()) return empty;
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ",";
    s += item(v[i]);
  }
  return s + "]";
}

std::string attr_repr(const Attribute& a) {
  switch (attr_kind(a)) {
    case AttrKind::Int:  // symbolic dims print as such (reshape {shape=[batch,seq,768]})
      return dim_str(std::get<int64_t>(a));
    case AttrKind::Float:
      return float_repr(std::get<float>(a));
    case AttrKind::String:
      return quote_string(std::get<std::string>(a));
    case AttrKind::Ints:
      return list_repr(std::get<std::vector<int64_t>>(a), "ints[]", [](int64_t x) { return dim_str(x); });
    case AttrKind::Floats:
      return list_repr(std::get<std::vector<float>>(a), "floats[]", [](float x) { return float_repr(x); });
    case AttrKind::Strings:
      return list_repr(std::get<std::vector<std::string>>(a), "strings[]",
                       [](const std::string& x) { return quote_string(x); });
    case AttrKind::Tensor: {
      const Tensor& t = std::get<Tensor>(a);
      return inline_tensor(t) + " : " + t.type().str();
    }
  }
  return "?";
}

class Printer {
 public:
  explicit Printer(const PrintOptions& opts) : opts_(opts) {}

  void graph(const Graph& g, int indent) {
    Names names = assign_names(g);
    std::string pad(indent, ' ');
    out_ += pad + "graph @" + bare_or_quoted(g.name()) + "(";
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      Value* v = g.inputs()[i];
      out_ += (i ? ", " : "") + ref(names, v) + ": " + v->type().str();
    }
    out_ += ") -> (";
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      Value* v = g.outputs()[i];
      out_ += (i ? ", " : "") + (v ? v->type().str() : std::string("?"));
    }
    out_ += ")";
    if (!g.symbols().empty()) {
      out_ += " symbols(";
      for (size_t i = 0; i < g.symbols().size(); ++i) {
        const SymbolDecl& d = g.symbols()[i];
        out_ += fmt::format("{}{} in [{}, {}]", i ? ", " : "", d.name, d.min, d.max);
      }
      out_ += ")";
    }
    out_ += " {\n";
    for (Value* c : g.constants()) out_ += pad + "  " + ref(names, c) + " = const " + constant(names, c) + "\n";
    for (const auto& n : g.nodes()) node(names, *n, indent + 2);
    out_ += pad + "  return";
    for (size_t i = 0; i < g.outputs().size(); ++i) out_ += (i ? ", " : " ") + ref(names, g.outputs()[i]);
    out_ += "\n" + pad + "}\n";
  }

  std::string take() { return std::move(out_); }

 private:
  using Names = std::unordered_map<const Value*, std::string>;

  static Names assign_names(const Graph& g) {
    std::vector<const Value*> order(g.inputs().begin(), g.inputs().end());
    order.insert(order.end(), g.constants().begin(), g.constants().end());
    for (const auto& n : g.nodes())
      for (int i = 0; i < n->num_outputs(); ++i) order.push_back(n->output(i));
    // Hash sets: ordered ones made printing a 100k-node graph n log n in
    // string comparisons (only membership is asked).
    std::unordered_set<std::string> original, taken;
    original.reserve(order.size());
    taken.reserve(order.size());
    for (const Value* v : order) original.insert(v->name());
    Names names;
    names.reserve(order.size());
    int64_t next = 0;
    for (const Value* v : order) {
      std::string name = v->name();
      if (name.empty() || taken.count(name)) {
        do name = std::to_string(next++);
        while (original.count(name) || taken.count(name));
      }
      taken.insert(name);
      names[v] = std::move(name);
    }
    return names;
  }

  // %name for a value; `_` for an absent operand. A value foreign to the
  // graph (a broken graph) prints its own name so printing never fails.
  static std::string ref(const Names& names, const Value* v) {
    if (!v) return "_";
    auto it = names.find(v);
    std::string r = "%";  // (not "%" + ...: GCC 12 warns falsely, -Wrestrict)
    r += bare_or_quoted(it != names.end() ? it->second : v->name());
    return r;
  }

  std::string constant(const Names& names, const Value* c) {
    std::string s = c->type().str() + " ";
    if (c->has_data()) {
      const Tensor& t = c->data();
      if (t.numel() == 0) return s + "dense<[]>";
      if (is_splat(t)) return s + "splat<" + element_repr(t, 0) + ">";
      if (t.numel() <= opts_.inline_elements) return s + dense_repr(t);
    }
    return s + "@" + quote_string(names.at(c)) + fmt::format(" <xxh64:{:016x}>", c->digest());
  }

  void node(const Names& names, const Node& n, int indent) {
    std::string pad(indent, ' ');
    std::string line = pad;
    for (int i = 0; i < n.num_outputs(); ++i) line += (i ? ", " : "") + ref(names, n.output(i));
    if (n.num_outputs()) line += " = ";
    line += ident_or_quoted(n.op()) + "(";
    for (int i = 0; i < n.num_inputs(); ++i) line += (i ? ", " : "") + ref(names, n.input(i));
    line += ")";
    if (!n.attrs().empty()) {
      line += " {";
      bool first = true;
      for (const auto& [k, a] : n.attrs()) {
        line += (first ? "" : ", ") + ident_or_quoted(k) + "=" + attr_repr(a);
        first = false;
      }
      line += "}";
    }
    for (int i = 0; i < n.num_outputs(); ++i) line += (i ? ", " : " : ") + n.output(i)->type().str();
    if (!n.name().empty()) line += " loc(" + quote_string(n.name()) + ")";
    out_ += line;
    if (n.num_regions()) {  // every region inside one pair of braces
      out_ += " {\n";
      for (const auto& r : n.regions()) graph(*r, indent + 2);
      out_ += pad + "}";
    }
    out_ += "\n";
  }

  const PrintOptions& opts_;
  std::string out_;
};

}  // namespace

std::string print_graph(const Graph& g, const PrintOptions& opts) {
  Printer p(opts);
  p.graph(g, 0);
  return p.take();
}

}  // namespace kiln
