// Importing ONNX subgraphs (If, Loop, Scan bodies) as IR regions or inline.
#include "frontend/importer.h"

#include <algorithm>

#include "frontend/tensor_proto.h"
#include "ir/control_flow.h"

namespace kiln::onnx_import_detail {

// ---- Subgraphs (If, Loop, Scan) -------------------------------------------

// Every node output name of `g` and of its subgraphs.
void collect_output_names(const onnx::GraphProto& g, std::set<std::string>& out) {
  for (const auto& node : g.node()) {
    for (const auto& o : node.output()) out.insert(o);
    for (const auto& a : node.attribute()) {
      if (a.has_g()) collect_output_names(a.g(), out);
      for (const auto& sg : a.graphs()) collect_output_names(sg, out);
    }
  }
}

namespace {

// The names `g` reads from enclosing scopes (ONNX's implicit capture), also
// through its own subgraphs, in first-use order. check_structure() bounded
// the nesting, so the recursion is too.
void free_names(const onnx::GraphProto& g, std::vector<std::string>& out, std::set<std::string>& seen) {
  std::set<std::string> defined;
  for (const auto& i : g.input()) defined.insert(i.name());
  for (const auto& i : g.initializer()) defined.insert(i.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) defined.insert(o);
  auto note = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name) && seen.insert(name).second) out.push_back(name);
  };
  for (const auto& n : g.node()) {
    for (const auto& in : n.input()) note(in);
    for (const auto& a : n.attribute()) {
      std::vector<const onnx::GraphProto*> subs;
      if (a.has_g()) subs.push_back(&a.g());
      for (const auto& sg : a.graphs()) subs.push_back(&sg);
      for (const auto* sg : subs) {
        std::vector<std::string> inner;
        std::set<std::string> inner_seen;
        free_names(*sg, inner, inner_seen);
        for (const auto& name : inner) note(name);
      }
    }
  }
  for (const auto& o : g.output()) note(o.name());
}

// Restores the importer's current graph and scope when a subgraph import
// ends, also by an exception.
struct ScopeSave {
  Graph*& cur;
  std::unordered_map<std::string, Value*>& env;
  std::unordered_map<std::string, std::vector<Value*>>& seq_env;
  std::set<std::string>& empty;
  Graph* saved_cur;
  std::unordered_map<std::string, Value*> saved_env;
  std::unordered_map<std::string, std::vector<Value*>> saved_seq;
  std::set<std::string> saved_empty;
  ScopeSave(Graph*& c, std::unordered_map<std::string, Value*>& e,
            std::unordered_map<std::string, std::vector<Value*>>& s, std::set<std::string>& o)
      : cur(c),
        env(e),
        seq_env(s),
        empty(o),
        saved_cur(c),
        saved_env(std::move(e)),
        saved_seq(std::move(s)),
        saved_empty(std::move(o)) {
    env.clear();
    seq_env.clear();
    empty.clear();
  }
  ~ScopeSave() {
    cur = saved_cur;
    env = std::move(saved_env);
    seq_env = std::move(saved_seq);
    empty = std::move(saved_empty);
  }
};

}  // namespace

void Importer::import_subgraph_initializers(const onnx::GraphProto& g, const std::string& ctx) {
  for (const auto& init : g.initializer()) {
    std::string ictx = fmt::format("{}: initializer \"{}\"", ctx, short_name(init.name()));
    if (init.name().empty()) fail("{}: subgraph initializer without a name", ctx);
    account_bytes(init, ictx);
    Tensor t = tensor_from_proto(init, base_dir_, ictx);
    bind(init.name(), graph().add_constant(unique_name(init.name()), std::move(t)), ictx);
  }
  if (g.sparse_initializer_size()) unsupported("{}: sparse initializers are not supported", ctx);
}

Value* Importer::lookup_output(const std::string& name, const std::string& ctx) {
  if (seq_env_.count(name) || empty_.count(name))
    throw SequenceInRegion(fmt::format(
        "{}: subgraph output \"{}\" is {}; only an inlined subgraph (an If whose condition is known at compile "
        "time, an unrolled Loop) carries sequences and optionals in kiln",
        ctx, short_name(name), seq_env_.count(name) ? "a sequence" : "an empty optional"));
  auto it = env_.find(name);
  if (it == env_.end()) fail("{}: subgraph output \"{}\" is never produced", ctx, short_name(name));
  return it->second;
}

ImportContext::Regions Importer::import_regions(const std::vector<ImportContext::RegionSpec>& specs,
                                                const std::map<std::string, const onnx::GraphProto*>& subgraphs,
                                                const std::string& ctx, bool size_symbols) {
  std::vector<const onnx::GraphProto*> graphs;
  std::vector<std::string> names;
  std::set<std::string> seen;
  std::vector<std::set<std::string>> reads;  // per region: the outer names it reads
  for (const auto& spec : specs) {
    auto it = subgraphs.find(spec.attr);
    if (it == subgraphs.end()) fail("{}: subgraph attribute '{}' is missing", ctx, spec.attr);
    graphs.push_back(it->second);
    std::vector<std::string> own;
    std::set<std::string> own_seen;
    free_names(*it->second, own, own_seen);
    reads.emplace_back(own.begin(), own.end());
    for (const std::string& name : own)
      if (seen.insert(name).second) names.push_back(name);
  }
  struct ForgetCached {
    Importer& imp;
    size_t from;
    ~ForgetCached() {
      for (size_t i = from; i < imp.known_order_.size(); ++i) imp.known_.erase(imp.known_order_[i]);
      imp.known_order_.resize(from);
    }
  } forget{*this, known_order_.size()};
  // The regions of an If, Loop or Scan in the main graph declare size
  // symbols (on the main graph), and so do the regions of such nodes inside
  // them, at any depth; a region whose node does not ask (an If folded away
  // by its known condition inlines instead) stops the chain.
  struct RestoreFlag {
    bool& flag;
    bool saved;
    ~RestoreFlag() { flag = saved; }
  } restore_flag{region_size_symbols_, region_size_symbols_};
  region_size_symbols_ = size_symbols && (cur_ == graph_.get() || region_size_symbols_);
  // Outer values: known ones are copied into each region as constants (so
  // shape operands inside stay known), the others are captured.
  ImportContext::Regions r;
  std::vector<std::pair<std::string, Value*>> consts, captured;
  for (const std::string& name : names) {
    if (seq_env_.count(name) || empty_.count(name))
      throw SequenceInRegion(fmt::format(
          "{}: a subgraph reads \"{}\", which is {}; only an inlined subgraph (an If whose condition is known at "
          "compile time, an unrolled Loop) carries sequences and optionals in kiln",
          ctx, short_name(name), seq_env_.count(name) ? "a sequence" : "an empty optional"));
    auto it = env_.find(name);
    if (it == env_.end()) {
      if (unknown_.count(name))
        unsupported("{}: a subgraph reads \"{}\", whose producer could not be imported", ctx, short_name(name));
      fail("{}: a subgraph reads \"{}\", which no enclosing scope defines", ctx, short_name(name));
    }
    if (known_value(it->second, /*freeze=*/false)) {
      consts.push_back({name, it->second});
    } else {
      captured.push_back({name, it->second});
      r.captures.push_back(it->second);
    }
  }
  for (size_t k = 0; k < specs.size(); ++k) {
    const onnx::GraphProto& sg = *graphs[k];
    const auto& spec = specs[k];
    std::string rctx = fmt::format("{}: subgraph '{}'", ctx, spec.attr);
    if (sg.input_size() != static_cast<int>(spec.params.size()))
      fail("{} takes {} inputs, expected {}", rctx, sg.input_size(), spec.params.size());
    auto region = std::make_unique<Graph>(spec.name);
    {
      ScopeSave save(cur_, env_, seq_env_, empty_);
      cur_ = region.get();
      for (int i = 0; i < sg.input_size(); ++i) {
        const auto& vi = sg.input(i);
        if (vi.name().empty()) fail("{}: input {} has no name", rctx, i);
        if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0) {
          DType declared = dtype_from_onnx(vi.type().tensor_type().elem_type(), rctx);
          if (declared != spec.params[i].dtype)
            fail("{}: input \"{}\" is declared {} but receives {}", rctx, short_name(vi.name()), dtype_name(declared),
                 spec.params[i].str());
        }
        bind(vi.name(), region->add_input(vi.name(), spec.params[i]), rctx);
      }
      for (auto& [name, v] : consts)
        if (reads[k].count(name)) bind(name, region->add_constant(name, *known_value(v, false)), rctx);
      for (auto& [name, v] : captured) bind(name, region->add_input(name, v->type()), rctx);
      import_subgraph_initializers(sg, rctx);
      for (const auto& node : sg.node()) import_node(node);
      std::vector<Value*> outs;
      for (const auto& o : sg.output()) outs.push_back(lookup_output(o.name(), rctx));
      region->set_outputs(outs);
    }
    r.graphs.push_back(std::move(region));
  }
  return r;
}

std::vector<Value*> Importer::inline_subgraph(const onnx::GraphProto& g, const std::string& ctx,
                                              const std::vector<Value*>& inputs) {
  std::vector<ImportedValue> ins;
  for (Value* v : inputs) ins.push_back(ImportedValue::of(v));
  std::vector<Value*> outs;
  std::vector<ImportedValue> results = inline_subgraph_values(g, ctx, ins);
  for (int i = 0; i < g.output_size(); ++i) {
    if (!results[i].is_tensor())
      throw SequenceInRegion(fmt::format("{}: subgraph output \"{}\" is {}; kiln's import of this op takes tensors",
                                         ctx, short_name(g.output(i).name()),
                                         results[i].is_sequence() ? "a sequence" : "an empty optional"));
    outs.push_back(results[i].tensor);
  }
  return outs;
}

std::vector<ImportedValue> Importer::inline_subgraph_values(const onnx::GraphProto& g, const std::string& ctx,
                                                            const std::vector<ImportedValue>& inputs) {
  if (g.input_size() != static_cast<int>(inputs.size()))
    fail("{}: the subgraph takes {} inputs, {} given", ctx, g.input_size(), inputs.size());
  // The enclosing scope stays visible; the subgraph's own names are dropped
  // afterwards (an unrolled loop imports the same names once per iteration).
  struct Restore {
    Importer& imp;
    std::unordered_map<std::string, Value*> env;
    std::unordered_map<std::string, std::vector<Value*>> seq_env;
    std::set<std::string> empty;
    ~Restore() {
      imp.env_ = std::move(env);
      imp.seq_env_ = std::move(seq_env);
      imp.empty_ = std::move(empty);
    }
  } restore{*this, env_, seq_env_, empty_};
  for (int i = 0; i < g.input_size(); ++i) {
    // A formal input shadows an outer value of the same name.
    const std::string& name = g.input(i).name();
    env_.erase(name);
    seq_env_.erase(name);
    empty_.erase(name);
    bind_value(name, inputs[i], ctx);
  }
  import_subgraph_initializers(g, ctx);
  for (const auto& node : g.node()) import_node(node);
  std::vector<ImportedValue> outs;
  for (const auto& o : g.output()) {
    const std::string& name = o.name();
    if (auto s = seq_env_.find(name); s != seq_env_.end()) outs.push_back(ImportedValue::sequence(s->second));
    else if (empty_.count(name)) outs.push_back(ImportedValue{});
    else if (auto t = env_.find(name); t != env_.end()) outs.push_back(ImportedValue::of(t->second));
    else fail("{}: subgraph output \"{}\" is never produced", ctx, short_name(name));
  }
  return outs;
}

void Importer::bind_value(const std::string& name, const ImportedValue& v, const std::string& ctx) {
  if (name.empty()) return;
  if (env_.count(name) || seq_env_.count(name) || empty_.count(name))
    fail("{}: value \"{}\" is defined twice", ctx, short_name(name));
  switch (v.kind) {
    case ImportedValue::Kind::Tensor:
      env_[name] = v.tensor;
      break;
    case ImportedValue::Kind::Sequence:
      seq_env_[name] = v.elements;
      break;
    case ImportedValue::Kind::Empty:
      empty_.insert(name);
      break;
  }
}

}  // namespace kiln::onnx_import_detail
