#include "frontend/onnx_import.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>
#include <unordered_map>

#include "frontend/batch_dim.h"
#include "frontend/import_context.h"
#include "frontend/op_versions.h"
#include "frontend/tensor_proto.h"
#include "ir/control_flow.h"
#include "ir/error.h"
#include "ir/limits.h"
#include "ir/short_name.h"
#include "ops/registry.h"

namespace kiln {

namespace {

// onnx 1.23 defines IR versions up to 14 (its node tests are stamped 11 to
// 14); kiln reads them all: the IR versions since 10 add element types, which
// are refused where a tensor of one is read.
constexpr int64_t kMinIrVersion = 3, kMaxIrVersion = 14;
constexpr int64_t kMaxOpset = kMaxOnnxOpset;

// "node "conv1" (Conv)" for messages; a node without a name is named by its
// first output. Names are shortened (short_name): models come from strangers.
std::string node_label(const onnx::NodeProto& n) {
  std::string name = n.name().empty() ? (n.output_size() ? "->" + n.output(0) : "?") : n.name();
  return fmt::format("node \"{}\" ({})", short_name(name), short_name(n.op_type()));
}

// The one non-default domain kiln imports ops of (FlexAttention), version 1.
constexpr const char* kPreviewDomain = "ai.onnx.preview";

// A node's key in the adapter table: its op type, prefixed for the preview domain.
std::string adapter_key(const onnx::NodeProto& n) {
  return n.domain() == kPreviewDomain ? adapters::preview_adapter_key(n.op_type()) : n.op_type();
}

class Importer;

// One node being imported.
class NodeContext final : public ImportContext {
 public:
  NodeContext(Importer& imp, const onnx::NodeProto& node, AttrMap attrs, std::vector<Value*> inputs,
              std::vector<const std::vector<Value*>*> seq_inputs,
              std::map<std::string, const onnx::GraphProto*> subgraphs)
      : imp_(imp),
        node_(node),
        attrs_(std::move(attrs)),
        inputs_(std::move(inputs)),
        seq_inputs_(std::move(seq_inputs)),
        subgraphs_(std::move(subgraphs)) {}

  using ImportContext::import_as;
  const std::string& op_type() const override { return node_.op_type(); }
  int64_t opset() const override;
  const AttrMap& attrs() const override { return attrs_; }
  int num_inputs() const override { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const override { return i >= 0 && i < num_inputs() && inputs_[i] != nullptr; }
  Value* input(int i) const override {
    if (!has_input(i)) fail("operand {} is missing", i);
    return inputs_[i];
  }
  int num_outputs() const override { return node_.output_size(); }
  bool output_used(int i) const override { return i < node_.output_size() && !node_.output(i).empty(); }
  const Tensor* value_of(Value* v) override;
  const Tensor* fixed_value(Value* v) override;
  const Tensor& require_value(int i, const std::string& what) override {
    if (!has_input(i)) fail("{} (operand {}) is missing", what, i);
    const Tensor* t = value_of(input(i));
    if (!t)
      throw NotKnownAtCompileTime(
          fmt::format("{}: {} (operand {}, \"{}\") must be known at compile time: kiln "
                      "compiles static shapes",
                      label(), what, i, input(i)->name()));
    return *t;
  }
  std::vector<Value*> emit(const std::string& op, const std::vector<Value*>& inputs, const AttrMap& attrs,
                           int num_outputs) override;
  Value* constant(Tensor t, const std::string& name_hint) override;
  void set_outputs(const std::vector<Value*>& outs) override;
  const std::vector<Value*>* sequence_input(int i) const override {
    return i >= 0 && i < static_cast<int>(seq_inputs_.size()) ? seq_inputs_[i] : nullptr;
  }
  void set_sequence_output(int i, std::vector<Value*> elements) override;
  void import_as(const std::string& kiln_op, const AttrMap& attrs) override {
    // Trailing unused outputs are dropped; kiln ops produce what is asked.
    int n = num_outputs();
    while (n > 1 && !output_used(n - 1)) --n;
    set_outputs(emit(kiln_op, inputs_, attrs, n));
  }
  std::string label() const override;
  bool outputs_set() const { return outputs_set_; }

  bool has_subgraph(const std::string& attr) const override { return subgraphs_.count(attr) > 0; }
  std::vector<std::string> subgraph_names() const override {
    std::vector<std::string> names;
    for (const auto& [name, g] : subgraphs_) names.push_back(name);
    return names;
  }
  Regions import_regions(const std::vector<RegionSpec>& specs) override;
  std::vector<Value*> inline_subgraph(const std::string& attr, const std::vector<Value*>& inputs) override;
  std::vector<Value*> emit_with_regions(const std::string& op, const std::vector<Value*>& inputs, const AttrMap& attrs,
                                        const std::vector<TensorType>& types,
                                        std::vector<std::unique_ptr<Graph>> regions) override;

 private:
  Importer& imp_;
  const onnx::NodeProto& node_;
  AttrMap attrs_;
  std::vector<Value*> inputs_;
  std::vector<const std::vector<Value*>*> seq_inputs_;
  std::map<std::string, const onnx::GraphProto*> subgraphs_;
  const onnx::GraphProto& subgraph(const std::string& attr) const {
    auto it = subgraphs_.find(attr);
    if (it == subgraphs_.end()) fail("subgraph attribute '{}' is missing", attr);
    return *it->second;
  }
  bool outputs_set_ = false;
  int emitted_ = 0;
};

class Importer {
 public:
  Importer(const onnx::ModelProto& model, std::string base_dir, std::string file, const ImportOptions& opts)
      : model_(model), base_dir_(std::move(base_dir)), file_(std::move(file)), opts_(opts) {}

  ImportResult run();

  const std::string& file() const { return file_; }
  int64_t opset() const { return opset_; }
  // The graph nodes are imported into: the main graph, or a region while
  // a subgraph is imported (import_regions).
  Graph& graph() { return *cur_; }

  // `freeze`: a graph input the caller supplies in known_inputs may become a
  // constant (what shape operands need); captures never freeze one.
  const Tensor* known_value(Value* v, bool freeze = true);
  ImportContext::Regions import_regions(const std::vector<ImportContext::RegionSpec>& specs,
                                        const std::map<std::string, const onnx::GraphProto*>& subgraphs,
                                        const std::string& ctx);
  std::vector<Value*> inline_subgraph(const onnx::GraphProto& g, const std::string& ctx,
                                      const std::vector<Value*>& inputs);
  // Every value the oracle cached, in order: what a region import cached is
  // dropped when it ends (known_ is keyed by address, and a region that is
  // discarded, or the node around it, frees its values).
  std::vector<Value*> known_order_;
  void bind(const std::string& name, Value* v, const std::string& ctx) {
    if (name.empty()) return;
    if (env_.count(name)) fail("{}: value \"{}\" is defined twice", ctx, short_name(name));
    env_[name] = v;
  }
  std::string unique_name(const std::string& hint) {
    std::string base = hint.empty() ? "c" : hint;
    std::string n = base;
    for (int i = 1; names_.count(n) || env_.count(n) || onnx_outputs_.count(n); ++i) n = base + "." + std::to_string(i);
    names_.insert(n);
    return n;
  }

 private:
  void check_structure();
  void check_declared_types();
  void import_inputs();
  void check_shadowed_input(const onnx::ValueInfoProto& vi, const Value* init);
  void import_initializers();
  // Counts a tensor the model stores against limits().max_total_bytes before
  // it is read.
  void account_bytes(const onnx::TensorProto& p, const std::string& ctx);
  void import_node(const onnx::NodeProto& node);
  void import_node_collecting(const onnx::NodeProto& node);
  bool op_known(const onnx::NodeProto& node) const;
  AttrMap convert_attrs(const onnx::NodeProto& node, const std::string& ctx,
                        std::map<std::string, const onnx::GraphProto*>& subgraphs);
  void import_subgraph_initializers(const onnx::GraphProto& g, const std::string& ctx);
  Value* lookup_output(const std::string& name, const std::string& ctx);
  TensorType input_type(const onnx::ValueInfoProto& vi);

  const onnx::ModelProto& model_;
  std::string base_dir_, file_;
  const ImportOptions& opts_;
  int64_t opset_ = 0;
  std::unique_ptr<Graph> graph_;
  Graph* cur_ = nullptr;
  std::unordered_map<std::string, Value*> env_;
  std::unordered_map<std::string, std::vector<Value*>> seq_env_;  // unrolled sequences
  std::set<std::string> names_;
  // Every node output name of the model: fresh names avoid them, so a node's
  // result can take its ONNX name later without two values sharing a name.
  std::set<std::string> onnx_outputs_;
  std::unordered_map<Value*, Tensor> known_;
  std::vector<std::string> frozen_;
  int64_t total_bytes_ = 0;
  // Collecting mode: ONNX names whose producer could not be imported.
  std::set<std::string> unknown_;
  friend class NodeContext;
};

int64_t NodeContext::opset() const { return imp_.opset(); }

std::string NodeContext::label() const { return fmt::format("{}: {}", imp_.file(), node_label(node_)); }

const Tensor* NodeContext::value_of(Value* v) { return imp_.known_value(v); }

const Tensor* NodeContext::fixed_value(Value* v) { return imp_.known_value(v, /*freeze=*/false); }

std::vector<Value*> NodeContext::emit(const std::string& op, const std::vector<Value*>& inputs, const AttrMap& attrs,
                                      int num_outputs) {
  const OpDef* def = op_registry().find(op);
  if (!def) unsupported("kiln has no op '{}' (needed for ONNX {} at opset {})", op, op_type(), opset());
  // Operands whose values inference reads must be constants in the graph
  // (the verifier re-runs inference seeing constants only), so an operand
  // the oracle computed from constants is replaced by a constant here.
  std::set<Value*> computed;
  InferContext ic(op, inputs, attrs, num_outputs, label(), [this, &computed](Value* v) {
    const Tensor* t = imp_.known_value(v);
    if (t && !v->is_constant()) computed.insert(v);
    return t;
  });
  std::vector<TensorType> types = infer_types(*def, ic);
  // An ONNX node imported as several kiln nodes: name them conv1, conv1#1, ...
  std::string node_name = node_.name();
  if (emitted_ > 0 && !node_name.empty()) node_name = fmt::format("{}#{}", node_name, emitted_);
  ++emitted_;
  std::vector<Value*> operands = inputs;
  for (Value*& v : operands)
    if (v && computed.count(v)) v = constant(*imp_.known_value(v), v->name() + ".value");
  Node* n = imp_.graph().add_node(op, operands, types, attrs, node_name);
  for (int i = 0; i < n->num_outputs(); ++i) {
    std::string hint = node_.output_size() ? node_.output(0) : op;
    n->output(i)->set_name(imp_.unique_name(fmt::format("{}.k{}_{}", hint, emitted_, i)));
  }
  return n->outputs();
}

Value* NodeContext::constant(Tensor t, const std::string& name_hint) {
  std::string hint = name_hint.empty() ? (node_.output_size() ? node_.output(0) : op_type()) : name_hint;
  return imp_.graph().add_constant(imp_.unique_name(hint), std::move(t));
}

void NodeContext::set_outputs(const std::vector<Value*>& outs) {
  if (outputs_set_) fail("outputs set twice (adapter bug)");
  outputs_set_ = true;
  for (int i = 0; i < node_.output_size(); ++i) {
    const std::string& name = node_.output(i);
    if (name.empty()) continue;
    if (i >= static_cast<int>(outs.size()) || !outs[i])
      unsupported("output {} (\"{}\") is not produced by kiln's import of {}", i, name, op_type());
    Value* v = outs[i];
    // Give the result its ONNX name when it is fresh, for readable IR.
    if (v->producer() && !imp_.env_.count(name) && !imp_.names_.count(name)) {
      bool is_fresh = v->name().find(".k") != std::string::npos && imp_.names_.count(v->name());
      if (is_fresh) {
        imp_.names_.erase(v->name());
        v->set_name(name);
        imp_.names_.insert(name);
      }
    }
    imp_.bind(name, v, label());
  }
}

void NodeContext::set_sequence_output(int i, std::vector<Value*> elements) {
  outputs_set_ = true;
  if (i >= node_.output_size() || node_.output(i).empty()) return;
  const std::string& name = node_.output(i);
  if (imp_.env_.count(name) || imp_.seq_env_.count(name)) fail("value \"{}\" is defined twice", name);
  imp_.seq_env_[name] = std::move(elements);
}

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
  Graph* saved_cur;
  std::unordered_map<std::string, Value*> saved_env;
  std::unordered_map<std::string, std::vector<Value*>> saved_seq;
  ScopeSave(Graph*& c, std::unordered_map<std::string, Value*>& e,
            std::unordered_map<std::string, std::vector<Value*>>& s)
      : cur(c), env(e), seq_env(s), saved_cur(c), saved_env(std::move(e)), saved_seq(std::move(s)) {
    env.clear();
    seq_env.clear();
  }
  ~ScopeSave() {
    cur = saved_cur;
    env = std::move(saved_env);
    seq_env = std::move(saved_seq);
  }
};

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
  if (seq_env_.count(name))
    unsupported("{}: subgraph output \"{}\" is a sequence; sequences do not cross control flow in kiln", ctx,
                short_name(name));
  auto it = env_.find(name);
  if (it == env_.end()) fail("{}: subgraph output \"{}\" is never produced", ctx, short_name(name));
  return it->second;
}

ImportContext::Regions Importer::import_regions(const std::vector<ImportContext::RegionSpec>& specs,
                                                const std::map<std::string, const onnx::GraphProto*>& subgraphs,
                                                const std::string& ctx) {
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
  // Outer values: known ones are copied into each region as constants (so
  // shape operands inside stay known), the others are captured.
  ImportContext::Regions r;
  std::vector<std::pair<std::string, Value*>> consts, captured;
  for (const std::string& name : names) {
    if (seq_env_.count(name))
      unsupported("{}: a subgraph reads the sequence \"{}\"; sequences do not cross control flow in kiln", ctx,
                  short_name(name));
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
      ScopeSave save(cur_, env_, seq_env_);
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
  if (g.input_size() != static_cast<int>(inputs.size()))
    fail("{}: the subgraph takes {} inputs, {} given", ctx, g.input_size(), inputs.size());
  // The enclosing scope stays visible; the subgraph's own names are dropped
  // afterwards (an unrolled loop imports the same names once per iteration).
  struct Restore {
    Importer& imp;
    std::unordered_map<std::string, Value*> env;
    std::unordered_map<std::string, std::vector<Value*>> seq_env;
    ~Restore() {
      imp.env_ = std::move(env);
      imp.seq_env_ = std::move(seq_env);
    }
  } restore{*this, env_, seq_env_};
  for (int i = 0; i < g.input_size(); ++i) env_[g.input(i).name()] = inputs[i];
  import_subgraph_initializers(g, ctx);
  for (const auto& node : g.node()) import_node(node);
  std::vector<Value*> outs;
  for (const auto& o : g.output()) outs.push_back(lookup_output(o.name(), ctx));
  return outs;
}

ImportContext::Regions NodeContext::import_regions(const std::vector<RegionSpec>& specs) {
  return imp_.import_regions(specs, subgraphs_, label());
}

std::vector<Value*> NodeContext::inline_subgraph(const std::string& attr, const std::vector<Value*>& inputs) {
  return imp_.inline_subgraph(subgraph(attr), label() + ": subgraph '" + attr + "'", inputs);
}

std::vector<Value*> NodeContext::emit_with_regions(const std::string& op, const std::vector<Value*>& inputs,
                                                   const AttrMap& attrs, const std::vector<TensorType>& types,
                                                   std::vector<std::unique_ptr<Graph>> regions) {
  std::string node_name = node_.name();
  if (emitted_ > 0 && !node_name.empty()) node_name = fmt::format("{}#{}", node_name, emitted_);
  ++emitted_;
  Node* n = imp_.graph().add_node(op, inputs, types, attrs, node_name);
  for (auto& r : regions) n->add_region(std::move(r));
  for (int i = 0; i < n->num_outputs(); ++i) {
    std::string hint = node_.output_size() ? node_.output(0) : op;
    n->output(i)->set_name(imp_.unique_name(fmt::format("{}.k{}_{}", hint, emitted_, i)));
  }
  try {
    check_control_flow(*n);
  } catch (const Error& e) {
    fail("{} (kiln import bug)", e.what());
  }
  return n->outputs();
}

const Tensor* Importer::known_value(Value* v, bool freeze) {
  if (!v) return nullptr;
  if (v->is_constant()) return v->has_data() ? &v->data() : nullptr;
  if (auto it = known_.find(v); it != known_.end()) return &it->second;
  if (v->is_input()) {
    // A region's parameters are never known; only the main graph's inputs
    // may be given at compile time.
    const auto& main_inputs = graph_->inputs();
    if (!freeze || std::find(main_inputs.begin(), main_inputs.end(), v) == main_inputs.end()) return nullptr;
    auto it = opts_.known_inputs.find(v->name());
    if (it == opts_.known_inputs.end()) return nullptr;
    if (it->second.type().dtype != v->dtype() || it->second.shape() != v->shape())
      fail("{}: value given for input \"{}\" is {} but the model declares {}", file_, v->name(),
           it->second.type().str(), v->type().str());
    graph_->freeze_input(v, it->second);
    frozen_.push_back(v->name());
    return &v->data();
  }
  // A result: computable if all operands are. (Control-flow results are
  // left to run time; an If with a known condition was inlined already.)
  Node* n = v->producer();
  if (n->num_regions()) return nullptr;
  std::vector<const Tensor*> ins;
  for (Value* in : n->inputs()) {
    if (!in) {
      ins.push_back(nullptr);
      continue;
    }
    const Tensor* t = known_value(in, freeze);
    if (!t) return nullptr;
    ins.push_back(t);
  }
  const OpDef& def = op_registry().get(n->op());
  std::vector<TensorType> types;
  for (Value* o : n->outputs()) types.push_back(o->type());
  std::vector<Tensor> outs = evaluate_op(def, n->attrs(), ins, types, file_ + ": " + n->describe());
  for (int i = 0; i < n->num_outputs(); ++i) {
    known_[n->output(i)] = std::move(outs[i]);
    known_order_.push_back(n->output(i));
  }
  return &known_.at(v);
}

TensorType Importer::input_type(const onnx::ValueInfoProto& vi) {
  std::string ctx = fmt::format("{}: input \"{}\"", file_, short_name(vi.name()));
  if (!vi.type().has_tensor_type()) unsupported("{}: only tensor inputs are supported", ctx);
  const auto& tt = vi.type().tensor_type();
  DType dt = dtype_from_onnx(tt.elem_type(), ctx);
  if (auto it = opts_.input_shapes.find(vi.name()); it != opts_.input_shapes.end()) {
    if (tt.has_shape() && tt.shape().dim_size() != static_cast<int>(it->second.size()))
      fail("{}: --shapes gives rank {} but the model declares rank {}", ctx, it->second.size(), tt.shape().dim_size());
    if (tt.has_shape())
      for (int i = 0; i < tt.shape().dim_size(); ++i) {
        const auto& d = tt.shape().dim(i);
        if (d.has_dim_value() && d.dim_value() != it->second[i] && !opts_.override_fixed_dims)
          fail("{}: --shapes sets dim {} to {} but the model fixes it at {}", ctx, i, it->second[i], d.dim_value());
      }
    check_tensor_bytes(TensorType(dt, it->second), ctx);
    return TensorType(dt, it->second);
  }
  if (auto it = opts_.known_inputs.find(vi.name()); it != opts_.known_inputs.end())
    return TensorType(dt, it->second.shape());
  if (!tt.has_shape()) fail("{}: the model gives no shape; set one with --shapes {}:DIMS", ctx, vi.name());
  Shape s;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    if (d.has_dim_value() && d.dim_value() < 0) fail("{}: dimension {} is negative ({})", ctx, i, d.dim_value());
    if (!d.has_dim_value()) {
      std::string sym = d.has_dim_param() ? fmt::format(" (\"{}\")", d.dim_param()) : "";
      fail("{}: dimension {}{} is not fixed; set it with --shapes {}:DIMS", ctx, i, sym, vi.name());
    }
    s.push_back(d.dim_value());
  }
  // An input over the per-tensor limit can never be bound: reject it now.
  check_tensor_bytes(TensorType(dt, s), ctx);
  return TensorType(dt, s);
}

void Importer::import_initializers() {
  for (const auto& init : model_.graph().initializer()) {
    std::string ctx = fmt::format("{}: initializer \"{}\"", file_, short_name(init.name()));
    if (init.name().empty()) fail("{}: initializer without a name", file_);
    account_bytes(init, ctx);
    Tensor t = tensor_from_proto(init, base_dir_, ctx);
    if (env_.count(init.name())) fail("{}: defined twice", ctx);
    names_.insert(init.name());
    env_[init.name()] = graph_->add_constant(init.name(), std::move(t));
  }
  if (model_.graph().sparse_initializer_size()) unsupported("{}: sparse initializers are not supported", file_);
}

void Importer::import_inputs() {
  for (const auto& vi : model_.graph().input()) {
    if (auto it = env_.find(vi.name()); it != env_.end()) {
      // An initializer with a declared input (old models): a constant.
      check_shadowed_input(vi, it->second);
      continue;
    }
    if (vi.name().empty()) fail("{}: graph input without a name", file_);
    names_.insert(vi.name());
    env_[vi.name()] = graph_->add_input(vi.name(), input_type(vi));
  }
}

// An initializer that shadows a graph input is the input's default value, so
// it must have the input's declared type (ONNX Runtime rejects the model
// otherwise); silently taking the initializer would change what the model
// means. Symbolic or absent dims match any size.
void Importer::check_shadowed_input(const onnx::ValueInfoProto& vi, const Value* init) {
  if (!vi.type().has_tensor_type()) return;
  const auto& tt = vi.type().tensor_type();
  std::string ctx = fmt::format("{}: input \"{}\"", file_, short_name(vi.name()));
  bool same = true;
  if (tt.elem_type() != 0) same = dtype_from_onnx(tt.elem_type(), ctx) == init->dtype();
  if (tt.has_shape()) {
    same = same && tt.shape().dim_size() == init->type().rank();
    for (int i = 0; same && i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      same = !d.has_dim_value() || d.dim_value() == init->shape()[i];
    }
  }
  if (!same) {
    std::string declared = tt.elem_type() != 0 ? std::string(dtype_name(dtype_from_onnx(tt.elem_type(), ctx))) : "?";
    std::vector<std::string> dims;
    for (const auto& d : tt.shape().dim())
      dims.push_back(d.has_dim_value()       ? std::to_string(d.dim_value())
                     : d.dim_param().empty() ? std::string("?")
                                             : short_name(d.dim_param()));
    std::string shape = tt.has_shape() ? fmt::format("[{}]", fmt::join(dims, ",")) : "";
    fail("{}: declared as {}{} but the initializer of the same name is {}", ctx, declared, shape, init->type().str());
  }
}

AttrMap Importer::convert_attrs(const onnx::NodeProto& node, const std::string& ctx,
                                std::map<std::string, const onnx::GraphProto*>& subgraphs) {
  using AP = onnx::AttributeProto;
  AttrMap m;
  std::set<std::string> seen;
  for (const auto& a : node.attribute()) {
    if (a.name().empty()) fail("{}: attribute without a name", ctx);
    if (!seen.insert(a.name()).second) fail("{}: attribute '{}' is given twice", ctx, a.name());
    if (!a.ref_attr_name().empty()) unsupported("{}: attribute '{}' refers to a function attribute", ctx, a.name());
    switch (a.type()) {
      case AP::INT:
        m.set(a.name(), int64_t(a.i()));
        break;
      case AP::FLOAT:
        m.set(a.name(), a.f());
        break;
      case AP::STRING:
        m.set(a.name(), a.s());
        break;
      case AP::INTS:
        m.set(a.name(), std::vector<int64_t>(a.ints().begin(), a.ints().end()));
        break;
      case AP::FLOATS:
        m.set(a.name(), std::vector<float>(a.floats().begin(), a.floats().end()));
        break;
      case AP::STRINGS:
        m.set(a.name(), std::vector<std::string>(a.strings().begin(), a.strings().end()));
        break;
      case AP::TENSOR: {
        std::string actx = ctx + " attribute '" + a.name() + "'";
        account_bytes(a.t(), actx);
        m.set(a.name(), tensor_from_proto(a.t(), base_dir_, actx));
        break;
      }
      case AP::GRAPH:  // the control-flow adapters import these as regions
        subgraphs[a.name()] = &a.g();
        break;
      case AP::GRAPHS:
        unsupported("{}: attribute '{}' holds a list of graphs, which no ONNX op kiln imports takes", ctx, a.name());
      case AP::SPARSE_TENSOR:
      case AP::SPARSE_TENSORS:
        unsupported("{}: sparse tensor attribute '{}' is not supported", ctx, a.name());
      case AP::TYPE_PROTO:
      case AP::TYPE_PROTOS:
        unsupported("{}: type attribute '{}' is not supported", ctx, a.name());
      default:
        fail("{}: attribute '{}' has no valid type ({})", ctx, a.name(), int(a.type()));
    }
  }
  return m;
}

void Importer::import_node(const onnx::NodeProto& node) {
  std::string ctx = fmt::format("{}: {}", file_, node_label(node));
  const bool preview = node.domain() == kPreviewDomain;
  if (!node.domain().empty() && node.domain() != "ai.onnx" && !preview)
    unsupported("{}: domain '{}' is not supported", ctx, short_name(node.domain()));
  if (preview)
    for (const auto& op : model_.opset_import())
      if (op.domain() == kPreviewDomain && op.version() != 1)
        unsupported("{}: domain '{}' version {} is not supported (kiln reads version 1)", ctx, kPreviewDomain,
                    op.version());
  if (opset_ <= 0) fail("{}: the model imports no opset for the default domain", ctx);
  std::vector<Value*> inputs;
  std::vector<const std::vector<Value*>*> seq_inputs;
  for (const std::string& in : node.input()) {
    seq_inputs.push_back(nullptr);
    if (in.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    if (auto s = seq_env_.find(in); s != seq_env_.end()) {
      seq_inputs.back() = &s->second;
      inputs.push_back(nullptr);
      continue;
    }
    auto it = env_.find(in);
    if (it == env_.end())
      fail("{}: input \"{}\" is not defined by any earlier node, initializer or graph input", ctx, short_name(in));
    inputs.push_back(it->second);
  }
  while (!inputs.empty() && !inputs.back() && !seq_inputs[inputs.size() - 1]) inputs.pop_back();
  seq_inputs.resize(inputs.size());
  bool takes_sequence = std::any_of(seq_inputs.begin(), seq_inputs.end(), [](auto* p) { return p != nullptr; });
  std::map<std::string, const onnx::GraphProto*> subgraphs;
  AttrMap attrs = convert_attrs(node, ctx, subgraphs);
  NodeContext nc(*this, node, std::move(attrs), std::move(inputs), std::move(seq_inputs), std::move(subgraphs));
  bool sequence_op = node.op_type().rfind("Sequence", 0) == 0 || node.op_type() == "SplitToSequence" ||
                     node.op_type() == "ConcatFromSequence";
  if (takes_sequence && !sequence_op)
    unsupported("{}: an operand is a sequence; only sequence ops take sequences", ctx);
  // Every ONNX op goes through its adapter: kiln's own op names are never
  // looked up with an ONNX name (ONNX Attention is not kiln's attention).
  const Adapter* adapter = adapter_table().find(adapter_key(node));
  if (!adapter && preview)
    unsupported("{}: op {} of domain '{}' is not supported", ctx, short_name(node.op_type()), kPreviewDomain);
  if (!adapter) unsupported("{}: op {} (opset {}) is not supported", ctx, short_name(node.op_type()), opset_);
  if (!preview) check_op_version(node.op_type(), opset_, ctx);
  try {
    (*adapter)(nc);
  } catch (const Error& e) {
    // Errors raised below the adapter (attribute getters, tensor helpers)
    // do not know the node: name it here.
    std::string what = e.what();
    if (what.rfind(file_, 0) == 0) throw;
    if (dynamic_cast<const Unsupported*>(&e)) unsupported("{}: {}", ctx, what);
    fail("{}: {}", ctx, what);
  }
  if (!nc.outputs_set()) fail("{}: import produced no outputs (adapter bug)", ctx);
}

void Importer::account_bytes(const onnx::TensorProto& p, const std::string& ctx) {
  DType dt;
  try {
    dt = dtype_from_onnx(p.data_type(), ctx);
  } catch (const Error&) {
    return;  // tensor_from_proto names the problem
  }
  for (int64_t d : p.dims())
    if (d < 0) return;  // tensor_from_proto names the problem
  // The per-tensor limit (and overflow) first: its message is the more precise one.
  int64_t bytes = check_tensor_bytes(TensorType(dt, Shape(p.dims().begin(), p.dims().end())), ctx);
  int64_t limit = limits().max_total_bytes;
  if (bytes > limit - total_bytes_)
    fail(
        "{}: the model's weights exceed the limit of {} bytes in total ({} bytes read so far, this tensor needs "
        "{}); raise it with --max-total-bytes or KILN_MAX_TOTAL_BYTES",
        ctx, limit, total_bytes_, bytes);
  total_bytes_ += bytes;
}

namespace {

// Deepest nesting of subgraph attributes (If/Loop/Scan bodies) under `g`,
// stopping as soon as it passes `cap` so a hostile file cannot make the walk
// itself deep.
int subgraph_depth(const onnx::GraphProto& g, int depth, int cap) {
  int deepest = depth;
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      std::vector<const onnx::GraphProto*> subs;
      if (a.has_g()) subs.push_back(&a.g());
      for (const auto& sg : a.graphs()) subs.push_back(&sg);
      for (const auto* sg : subs) {
        if (depth + 1 > cap) return depth + 1;
        deepest = std::max(deepest, subgraph_depth(*sg, depth + 1, cap));
        if (deepest > cap) return deepest;
      }
    }
  return deepest;
}

}  // namespace

// Checks on the model's structure before anything is imported: nesting
// depth, and SSA form of the main graph (every value defined once, every
// operand defined, nodes in topological order, no cycles), each reported with
// the names involved.
void Importer::check_structure() {
  const onnx::GraphProto& g = model_.graph();
  int cap = limits().max_subgraph_depth;
  if (int depth = subgraph_depth(g, 0, cap); depth > cap)
    fail("{}: subgraphs are nested more than {} deep (the limit, as in ONNX Runtime)", file_, cap);

  auto label = [&](int i) { return node_label(g.node(i)); };
  // Who defines each name: -1 an initializer or graph input, else a node.
  std::unordered_map<std::string, int> producer;
  for (const auto& init : g.initializer()) producer.emplace(init.name(), -1);
  for (const auto& vi : g.input()) producer.emplace(vi.name(), -1);
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string& o : g.node(i).output()) {
      if (o.empty()) continue;
      auto [it, fresh] = producer.emplace(o, i);
      if (!fresh)
        fail("{}: {}: value \"{}\" is defined twice (also by {})", file_, label(i), short_name(o),
             it->second < 0 ? std::string("a graph input or initializer") : label(it->second));
    }
  bool sorted = true;
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string& in : g.node(i).input()) {
      if (in.empty()) continue;
      auto it = producer.find(in);
      if (it == producer.end())
        fail("{}: {}: input \"{}\" is not defined by any node, initializer or graph input", file_, label(i),
             short_name(in));
      sorted &= it->second < i;
    }
  if (sorted) return;
  // Out of order: a cycle (named) or just unsorted nodes (ONNX requires
  // topological order, as its checker does).
  // Depth-first over "reads the output of", iterative: a hostile chain of a
  // million nodes must not overflow the stack.
  auto producer_of = [&](int i, int k) {
    const std::string& in = g.node(i).input(k);
    auto it = in.empty() ? producer.end() : producer.find(in);
    return it == producer.end() ? -1 : it->second;
  };
  std::vector<int> state(g.node_size(), 0);  // 0 new, 1 on the stack, 2 done
  std::vector<std::pair<int, int>> stack;    // (node, next input to follow)
  for (int root = 0; root < g.node_size(); ++root) {
    if (state[root]) continue;
    stack.push_back({root, 0});
    state[root] = 1;
    while (!stack.empty()) {
      auto& [i, k] = stack.back();
      if (k == g.node(i).input_size()) {
        state[i] = 2;
        stack.pop_back();
        continue;
      }
      int j = producer_of(i, k++);
      if (j < 0 || state[j] == 2) continue;
      if (state[j] == 1) {
        std::vector<std::string> names;
        auto from = std::find_if(stack.begin(), stack.end(), [j](const auto& e) { return e.first == j; });
        for (auto e = from; e != stack.end(); ++e) names.push_back(label(e->first));
        names.push_back(label(j));
        fail("{}: the graph has a cycle: {} (each reads the next one's output)", file_, fmt::join(names, " <- "));
      }
      state[j] = 1;
      stack.push_back({j, 0});
    }
  }
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string& in : g.node(i).input())
      if (!in.empty() && producer.at(in) >= i)
        fail("{}: {} reads \"{}\" before {} produces it: nodes must be topologically sorted", file_, label(i),
             short_name(in), label(producer.at(in)));
}

// value_info entries declare the types of intermediate values: they must
// agree with what kiln infers (a disagreement means a broken model or a kiln
// bug, and either way the results could not be trusted).
void Importer::check_declared_types() {
  for (const auto& vi : model_.graph().value_info()) {
    auto it = env_.find(vi.name());
    if (it == env_.end() || !vi.type().has_tensor_type()) continue;
    Value* v = it->second;
    const auto& tt = vi.type().tensor_type();
    std::string ctx = fmt::format("{}: value_info \"{}\"", file_, short_name(vi.name()));
    if (tt.elem_type() != 0 && dtype_from_onnx(tt.elem_type(), ctx) != v->dtype())
      fail("{}: the model declares {} but kiln infers {}", ctx, dtype_name(dtype_from_onnx(tt.elem_type(), ctx)),
           v->type().str());
    if (!tt.has_shape()) continue;
    if (tt.shape().dim_size() != v->type().rank())
      fail("{}: the model declares rank {} but kiln infers {}", ctx, tt.shape().dim_size(), v->type().str());
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (d.has_dim_value() && d.dim_value() != v->shape()[i])
        fail("{}: the model declares dim {} = {} but kiln infers {}", ctx, i, d.dim_value(), v->type().str());
    }
  }
}

// Whether kiln has any import for the node's op (its attributes and dtypes
// aside): what can still be said about a node whose operands are unknown.
bool Importer::op_known(const onnx::NodeProto& node) const {
  if (!node.domain().empty() && node.domain() != "ai.onnx" && node.domain() != kPreviewDomain) return false;
  return adapter_table().find(adapter_key(node)) != nullptr;
}

void Importer::import_node_collecting(const onnx::NodeProto& node) {
  std::string name = short_name(node.name().empty() ? (node.output_size() ? "->" + node.output(0) : "?") : node.name());
  auto mark_unknown = [&] {
    for (const auto& o : node.output()) {
      env_.erase(o);
      seq_env_.erase(o);
      if (!o.empty()) unknown_.insert(o);
    }
  };
  bool reads_unknown = std::any_of(node.input().begin(), node.input().end(),
                                   [&](const std::string& in) { return unknown_.count(in) > 0; });
  if (reads_unknown) {
    if (!op_known(node))
      opts_.problems->push_back({name, short_name(node.op_type()), true,
                                 fmt::format("{}: {}: op {} (domain '{}') is not supported", file_, node_label(node),
                                             short_name(node.op_type()), short_name(node.domain()))});
    mark_unknown();
    return;
  }
  try {
    import_node(node);
  } catch (const Unsupported& e) {
    opts_.problems->push_back({name, short_name(node.op_type()), true, e.what()});
    mark_unknown();
  } catch (const Error& e) {
    opts_.problems->push_back({name, short_name(node.op_type()), false, e.what()});
    mark_unknown();
  }
}

ImportResult Importer::run() {
  if (model_.ir_version() < kMinIrVersion || model_.ir_version() > kMaxIrVersion)
    unsupported("{}: ONNX IR version {} is not supported (kiln reads {} to {})", file_, model_.ir_version(),
                kMinIrVersion, kMaxIrVersion);
  for (const auto& op : model_.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
  }
  // A model may import only other domains (training, ML); its nodes are
  // then reported as unsupported one by one.
  if (opset_ == 0 && model_.opset_import_size() == 0) opset_ = 1;
  if (opset_ > kMaxOpset) unsupported("{}: opset {} is newer than kiln supports (up to {})", file_, opset_, kMaxOpset);
  if (!model_.has_graph()) fail("{}: the model has no graph", file_);
  // A graph computes nothing anyone can read without outputs (the ONNX
  // checker rejects it too).
  if (model_.graph().output_size() == 0) fail("{}: the graph has no outputs", file_);

  check_structure();
  graph_ = std::make_unique<Graph>(model_.graph().name().empty() ? "main" : "main");
  cur_ = graph_.get();
  import_initializers();
  import_inputs();
  collect_output_names(model_.graph(), onnx_outputs_);
  const int total_nodes = model_.graph().node_size();
  int done = 0;
  if (opts_.progress) opts_.progress(0, total_nodes);  // the step starts
  for (const auto& node : model_.graph().node()) {
    if (opts_.problems) import_node_collecting(node);
    else import_node(node);
    if (opts_.progress) opts_.progress(++done, total_nodes);
  }
  check_declared_types();

  std::vector<Value*> outs;
  for (const auto& vi : model_.graph().output()) {
    if (unknown_.count(vi.name())) continue;  // collecting mode: its producer is already reported
    if (seq_env_.count(vi.name()))
      unsupported("{}: graph output \"{}\" is a sequence; kiln's outputs are tensors", file_, short_name(vi.name()));
    auto it = env_.find(vi.name());
    if (it == env_.end()) fail("{}: graph output \"{}\" is never produced", file_, short_name(vi.name()));
    Value* v = it->second;
    std::string ctx = fmt::format("{}: output \"{}\"", file_, short_name(vi.name()));
    if (vi.type().has_tensor_type()) {
      const auto& tt = vi.type().tensor_type();
      if (tt.elem_type() != 0 && dtype_from_onnx(tt.elem_type(), ctx) != v->dtype())
        fail("{}: the model declares {} but kiln infers {}", ctx, dtype_name(dtype_from_onnx(tt.elem_type(), ctx)),
             v->type().str());
      if (tt.has_shape() && tt.shape().dim_size() != v->type().rank())
        fail("{}: the model declares rank {} but kiln infers {}", ctx, tt.shape().dim_size(), v->type().str());
      if (tt.has_shape()) {
        for (int i = 0; i < tt.shape().dim_size(); ++i) {
          const auto& d = tt.shape().dim(i);
          if (d.has_dim_value() && d.dim_value() != v->shape()[i] && !opts_.override_fixed_dims)
            fail("{}: the model declares dim {} = {} but kiln infers {}", ctx, i, d.dim_value(), v->type().str());
        }
      }
    }
    outs.push_back(v);
  }
  graph_->set_outputs(outs);
  // Inputs frozen for shapes are constants now; inputs nobody reads stay
  // (callers still bind them by name).
  ImportResult r;
  r.graph = std::move(graph_);
  r.ir_version = model_.ir_version();
  r.opset = opset_;
  r.frozen_inputs = frozen_;
  return r;
}

}  // namespace

ImportResult import_onnx_bytes(const std::string& bytes, const std::string& base_dir, const std::string& display_name,
                               const ImportOptions& opts) {
  if (bytes.empty()) fail("{}: the file is empty, not an ONNX model", display_name);
  if (static_cast<int64_t>(bytes.size()) > limits().max_model_file_bytes)
    unsupported("{}: model files over {} bytes must keep weights as external data", display_name,
                limits().max_model_file_bytes);
  onnx::ModelProto model;
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT32_MAX);
  // Room for subgraphs a little past kiln's depth cap (3 messages per level:
  // node, attribute, graph; plus value_info types), so a model nested too
  // deep reaches check_structure()'s clear message instead of a parse error.
  coded.SetRecursionLimit(3 * limits().max_subgraph_depth + 64);
  if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    fail("{}: not a valid ONNX model (protobuf parse failed: truncated, damaged or not protobuf at all)", display_name);
  if (opts.batch > 0) {
    // The batch dims are read from the model just parsed, not from a second
    // parse of the file (BERT-base's is 440 MB).
    ImportOptions batched = opts;
    for (auto& [name, shape] : batch_input_shapes(model.graph(), opts.batch, opts.input_shapes, display_name))
      batched.input_shapes[name] = shape;
    batched.override_fixed_dims = true;
    Importer imp(model, base_dir, display_name, batched);
    return imp.run();
  }
  Importer imp(model, base_dir, display_name, opts);
  return imp.run();
}

ImportResult import_onnx_file(const std::string& path, const ImportOptions& opts) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open file", path);
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0) fail("{}: cannot read file", path);
  if (size > limits().max_model_file_bytes)
    unsupported("{}: model files over {} bytes must keep weights as external data", path,
                limits().max_model_file_bytes);
  in.seekg(0);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(bytes.data(), size);
  std::string dir = std::filesystem::path(path).parent_path().string();
  return import_onnx_bytes(bytes, dir.empty() ? "." : dir, path, opts);
}

std::map<std::string, Shape> parse_shapes_flag(const std::string& spec) {
  std::map<std::string, Shape> r;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0) fail("--shapes: '{}' should look like name:1x3x224x224", item);
    std::string name = item.substr(0, colon), dims = item.substr(colon + 1);
    Shape s;
    std::stringstream ds(dims);
    std::string d;
    while (std::getline(ds, d, 'x')) {
      try {
        size_t used = 0;
        long long v = std::stoll(d, &used);
        if (used != d.size() || v < 0) throw std::invalid_argument("");
        s.push_back(v);
      } catch (...) {
        fail("--shapes: '{}' in '{}' is not a dimension", d, item);
      }
    }
    r[name] = s;
  }
  return r;
}

}  // namespace kiln
