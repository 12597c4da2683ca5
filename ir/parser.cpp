// Reads kiln IR text (grammar: docs/ir.md) with a hand-written lexer and a
// recursive-descent parser. Every error is a kiln::Error "file:line:col: ...";
// the parser must never crash, whatever the input (it is fuzzed): recursion
// is bounded by the body nesting limit, numbers are range-checked, and
// constants are materialized only up to a size limit.
//
// Operands may refer to values defined later in the same graph (as MLIR
// allows); such graphs parse and the verifier reports the order problem.
// Result types are taken from the text as written; nothing is inferred.
#include "ir/parser.h"

#include <charconv>
#include <map>

#include "ir/error.h"
#include "ir/symbolic_dim.h"
#include "ir/text_format.h"
#include "ir/token_parser.h"

namespace kiln {

namespace {

using namespace text_detail;

constexpr int kMaxBodyDepth = 32;

// An operand as written: a name and where, or absent (`_`).
struct OperandRef {
  std::string name;
  int line = 0, col = 0;
  bool absent = false;
};

class Parser : TokenParser {
 public:
  Parser(std::string_view src, std::string_view file, int first_line) : TokenParser(src, file, first_line) {}

  std::unique_ptr<Graph> parse_single() {
    auto g = graph(0);
    if (peek().kind != T::End) error(peek(), "expected end of input after the graph");
    return g;
  }

 private:
  struct Def {
    Value* value;
    int line;
  };
  // Per-graph parsing state.
  struct Scope {
    Graph* g;
    std::map<std::string, Def> defs;
    std::vector<std::pair<Node*, std::vector<OperandRef>>> pending;
  };

  // ---- graphs ----
  void define(Scope& s, const Tok& at, Value* v) {
    auto [it, fresh] = s.defs.emplace(at.text, Def{v, at.line});
    if (!fresh) error(at, fmt::format("value {} is already defined on line {}", describe(at), it->second.line));
  }

  Value* resolve(Scope& s, const OperandRef& r) {
    if (r.absent) return nullptr;
    auto it = s.defs.find(r.name);
    if (it == s.defs.end())
      lex_.error_at(r.line, r.col, fmt::format("use of undefined value %{}", bare_or_quoted(r.name)));
    return it->second.value;
  }

  OperandRef operand() {
    Tok t = take();
    if (t.is(T::Ident, "_")) return {"", t.line, t.col, true};
    if (t.kind != T::Value) error(t, fmt::format("expected an operand (%name or _), found {}", describe(t)));
    return {t.text, t.line, t.col, false};
  }

  std::unique_ptr<Graph> graph(int depth) {
    if (depth > kMaxBodyDepth) error(peek(), fmt::format("bodies nest deeper than {} levels", kMaxBodyDepth));
    expect_keyword("graph");
    auto g = std::make_unique<Graph>(expect(T::At, "a graph name (@name)").text);
    Scope s{g.get(), {}, {}};
    expect_punct('(');
    if (!peek().punct(')')) {
      do {
        Tok v = expect(T::Value, "an input (%name: type)");
        expect_punct(':');
        define(s, v, g->add_input(v.text, type()));
      } while (accept_punct(','));
    }
    expect_punct(')');
    if (peek().kind != T::Arrow) error(peek(), fmt::format("expected '->', found {}", describe(peek())));
    take();
    expect_punct('(');
    std::vector<TensorType> out_types;
    if (!peek().punct(')')) {
      do out_types.push_back(type());
      while (accept_punct(','));
    }
    expect_punct(')');
    if (peek().is(T::Ident, "symbols")) g->set_symbols(symbol_table());
    expect_punct('{');
    while (!peek().is(T::Ident, "return")) statement(s, depth);
    Tok ret = take();
    std::vector<OperandRef> outs;
    if (!peek().punct('}')) {
      do {
        Tok v = expect(T::Value, "a result (%name)");
        outs.push_back({v.text, v.line, v.col, false});
      } while (accept_punct(','));
    }
    expect_punct('}');
    for (auto& [node, refs] : s.pending) {
      std::vector<Value*> ins;
      for (const OperandRef& r : refs) ins.push_back(resolve(s, r));
      node->set_inputs(std::move(ins));
    }
    if (outs.size() != out_types.size())
      error(ret,
            fmt::format("return gives {} values but the graph declares {} results", outs.size(), out_types.size()));
    std::vector<Value*> out_values;
    for (size_t i = 0; i < outs.size(); ++i) {
      Value* v = resolve(s, outs[i]);
      if (v->type() != out_types[i])
        lex_.error_at(outs[i].line, outs[i].col,
                      fmt::format("result {} %{} has type {} but the graph declares {}", i,
                                  bare_or_quoted(outs[i].name), v->type().str(), out_types[i].str()));
      out_values.push_back(v);
    }
    g->set_outputs(std::move(out_values));
    return g;
  }

  // symbols(batch in [1, 64], seq in [1, 512]): the graph's symbols and
  // their ranges (ir/symbolic_dim.h); the verifier checks the ranges.
  std::vector<SymbolDecl> symbol_table() {
    take();
    expect_punct('(');
    std::vector<SymbolDecl> decls;
    do {
      Tok name = expect(T::Ident, "a symbol name");
      if (!is_symbol_name(name.text)) error(name, fmt::format("'{}' is not a symbol name", name.text));
      for (const SymbolDecl& d : decls)
        if (d.name == name.text) error(name, fmt::format("symbol {} is declared twice", name.text));
      expect_keyword("in");
      expect_punct('[');
      int64_t lo = parse_int<int64_t>(take(), "integer");
      expect_punct(',');
      int64_t hi = parse_int<int64_t>(take(), "integer");
      expect_punct(']');
      decls.push_back({name.text, lo, hi});
    } while (accept_punct(','));
    expect_punct(')');
    return decls;
  }

  void statement(Scope& s, int depth) {
    std::vector<Tok> results;
    if (peek().kind == T::Value) {
      do results.push_back(expect(T::Value, "a result name (%name)"));
      while (accept_punct(','));
      expect_punct('=');
    }
    if (!results.empty() && peek().is(T::Ident, "const")) {
      Tok kw = take();
      if (results.size() != 1) error(kw, "a constant defines exactly one value");
      define(s, results[0], constant(s.g, results[0]));
      return;
    }
    Tok op = take();
    if (op.kind != T::Ident && op.kind != T::String)
      error(op, fmt::format("expected an op name or 'return', found {}", describe(op)));
    expect_punct('(');
    std::vector<OperandRef> refs;
    if (!peek().punct(')')) {
      do refs.push_back(operand());
      while (accept_punct(','));
    }
    expect_punct(')');
    AttrMap attrs;
    if (peek().punct('{') && !(peek(1).is(T::Ident, "graph") && peek(2).kind == T::At)) attrs = attr_dict();
    std::vector<TensorType> types;
    if (!results.empty()) {
      Tok colon = expect_punct(':');
      do types.push_back(type());
      while (accept_punct(','));
      if (types.size() != results.size())
        error(colon, fmt::format("{} results but {} types", results.size(), types.size()));
    }
    std::string loc;
    if (peek().is(T::Ident, "loc")) {
      take();
      expect_punct('(');
      loc = expect(T::String, "a string").text;
      expect_punct(')');
    }
    // Regions: one or more graphs inside one pair of braces (a fused body;
    // an if's then and else).
    std::vector<std::unique_ptr<Graph>> regions;
    if (peek().punct('{')) {
      take();
      do regions.push_back(graph(depth + 1));
      while (peek().is(T::Ident, "graph"));
      expect_punct('}');
    }
    Node* n = s.g->add_node(op.text, {}, types, std::move(attrs), loc);
    for (auto& r : regions) n->add_region(std::move(r));
    for (size_t i = 0; i < results.size(); ++i) {
      n->output(int(i))->set_name(results[i].text);
      define(s, results[i], n->output(int(i)));
    }
    s.pending.push_back({n, std::move(refs)});
  }

  Value* constant(Graph* g, const Tok& name) {
    TensorType tt = type();
    Tok form = peek();
    if (form.kind == T::At) {
      if (has_symbolic_dims(tt.shape)) error(form, fmt::format("a constant needs a static type, not {}", tt.str()));
      Tok ref = take();
      if (ref.text != name.text)
        error(ref, fmt::format("constant reference @{} does not repeat the value's name {}", quote_string(ref.text),
                               describe(name)));
      expect_punct('<');
      Tok algo = expect(T::Ident, "xxh64");
      if (algo.text != "xxh64") error(algo, fmt::format("unknown digest '{}' (expected xxh64)", algo.text));
      expect_punct(':');
      Tok hex = take();
      uint64_t digest = 0;
      bool ok = (hex.kind == T::Number || hex.kind == T::Ident) && hex.text.size() == 16;
      if (ok) {
        auto r = std::from_chars(hex.text.data(), hex.text.data() + 16, digest, 16);
        ok = r.ec == std::errc() && r.ptr == hex.text.data() + 16;
      }
      if (!ok) error(hex, fmt::format("expected 16 hex digits, found {}", describe(hex)));
      expect_punct('>');
      return g->add_constant_ref(name.text, tt, digest);
    }
    if (!form.is(T::Ident, "dense") && !form.is(T::Ident, "splat"))
      error(form, fmt::format("expected dense<...>, splat<...> or @\"name\" <xxh64:...> after the type, found {}",
                              describe(form)));
    Tok which = take();
    auto elems = tensor_elements(which.text == "splat");
    return g->add_constant(name.text, make_tensor(tt, which, which.text == "splat", elems));
  }
};

}  // namespace

std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view filename) {
  return Parser(text, filename, 1).parse_single();
}

std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view filename, int first_line) {
  return Parser(text, filename, first_line).parse_single();
}

std::vector<InputChunk> split_input_file(std::string_view text) {
  std::vector<InputChunk> chunks;
  size_t chunk_start = 0;
  int line = 1, chunk_line = 1;
  for (size_t pos = 0; pos < text.size(); ++line) {
    size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view l = text.substr(pos, end - pos);
    while (!l.empty() && (l.back() == '\r' || l.back() == ' ' || l.back() == '\t')) l.remove_suffix(1);
    if (l == "// -----") {
      chunks.push_back({text.substr(chunk_start, pos - chunk_start), chunk_line});
      chunk_start = std::min(end + 1, text.size());
      chunk_line = line + 1;
    }
    pos = end + 1;
  }
  chunks.push_back({text.substr(chunk_start), chunk_line});
  return chunks;
}

std::vector<std::unique_ptr<Graph>> parse_graphs_split(std::string_view text, std::string_view filename) {
  std::vector<std::unique_ptr<Graph>> graphs;
  for (const InputChunk& c : split_input_file(text)) graphs.push_back(parse_graph(c.text, filename, c.first_line));
  return graphs;
}

}  // namespace kiln
