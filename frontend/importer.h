// The ONNX importer's internals, shared by the files that implement it:
// onnx_import.cpp (the model, its inputs, initializers and nodes),
// import_node_context.cpp (what an adapter sees of one node),
// import_regions.cpp (If/Loop/Scan subgraphs) and import_checks.cpp (the
// model's structure and declared types). Not part of the frontend's API.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/import_context.h"
#include "frontend/onnx_import.h"
#include "frontend/op_versions.h"
#include "frontend/symbolic_inputs.h"
#include "ops/symbolic_values.h"
#include "ir/error.h"
#include "ir/short_name.h"
#include "ops/registry.h"

namespace kiln::onnx_import_detail {

// onnx 1.23 defines IR versions up to 14 (its node tests are stamped 11 to
// 14); kiln reads them all: the IR versions since 10 add element types, which
// are refused where a tensor of one is read.
inline constexpr int64_t kMinIrVersion = 3, kMaxIrVersion = 14;
inline constexpr int64_t kMaxOpset = kMaxOnnxOpset;

// "node "conv1" (Conv)" for messages; a node without a name is named by its
// first output. Names are shortened (short_name): models come from strangers.
inline std::string node_label(const onnx::NodeProto& n) {
  std::string name = n.name().empty() ? (n.output_size() ? "->" + n.output(0) : "?") : n.name();
  return fmt::format("node \"{}\" ({})", short_name(name), short_name(n.op_type()));
}

// The non-default domains kiln imports ops of: FlexAttention and the
// optimizers of the training domain (version 1 each), and a few ai.onnx.ml
// ops (versions 1 to 5).
inline constexpr const char* kPreviewDomain = "ai.onnx.preview";
inline constexpr const char* kTrainingDomain = "ai.onnx.preview.training";
inline constexpr const char* kMlDomain = "ai.onnx.ml";
inline bool imported_domain(const std::string& d) {
  return d == kPreviewDomain || d == kTrainingDomain || d == kMlDomain;
}
// The highest version of an imported domain kiln reads (versions from 1).
inline int64_t max_domain_version(const std::string& d) { return d == kMlDomain ? 5 : 1; }

// A node's key in the adapter table: its op type, prefixed for those domains.
inline std::string adapter_key(const onnx::NodeProto& n) {
  return imported_domain(n.domain()) ? domain_adapter_key(n.domain(), n.op_type()) : n.op_type();
}

class Importer;

// Every node output name of `g` and of its subgraphs (import_regions.cpp).
void collect_output_names(const onnx::GraphProto& g, std::set<std::string>& out);

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
    const Tensor& t = require_shape_value(i, what);
    if (holds_symbolic_values(t))
      unsupported(
          "{} (operand {}, \"{}\") holds symbolic dims ({}): kiln needs its value here before the shapes are "
          "known (issue 19)",
          what, i, input(i)->name(), describe_symbolic_values(t));
    return t;
  }
  const Tensor& require_shape_value(int i, const std::string& what) override {
    if (!has_input(i)) fail("{} (operand {}) is missing", what, i);
    const Tensor* t = value_of(input(i));
    if (!t)
      throw NotKnownAtCompileTime(
          fmt::format("{}: {} (operand {}, \"{}\") must be known at compile time: kiln "
                      "compiles static shapes",
                      label(), what, i, input(i)->name()));
    return *t;
  }
  std::string declare_size_symbol(const std::string& hint, int64_t bound, int64_t cap = -1) override;
  std::vector<Value*> emit(const std::string& op, const std::vector<Value*>& inputs, const AttrMap& attrs,
                           int num_outputs) override;
  Value* constant(Tensor t, const std::string& name_hint) override;
  void set_outputs(const std::vector<Value*>& outs) override;
  const std::vector<Value*>* sequence_input(int i) const override {
    return i >= 0 && i < static_cast<int>(seq_inputs_.size()) ? seq_inputs_[i] : nullptr;
  }
  void set_sequence_output(int i, std::vector<Value*> elements) override;
  ImportedValue operand(int i) const override {
    if (const std::vector<Value*>* s = sequence_input(i)) return ImportedValue::sequence(*s);
    return ImportedValue::of(has_input(i) ? inputs_[i] : nullptr);
  }
  void set_output_values(const std::vector<ImportedValue>& outs) override;
  std::vector<ImportedValue> inline_subgraph_values(const std::string& attr,
                                                    const std::vector<ImportedValue>& inputs) override;
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
  Regions import_regions(const std::vector<RegionSpec>& specs, bool size_symbols = false) override;
  std::vector<Value*> inline_subgraph(const std::string& attr, const std::vector<Value*>& inputs) override;
  void skip_subgraph(const std::string& attr) override {
    subgraph(attr);  // must exist
    consumed_.insert(attr);
  }
  // The subgraph attributes the adapter neither imported nor skipped.
  std::vector<std::string> unconsumed_subgraphs() const {
    std::vector<std::string> names;
    for (const auto& [name, g] : subgraphs_)
      if (!consumed_.count(name)) names.push_back(name);
    return names;
  }
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
  std::set<std::string> consumed_;  // subgraph attributes imported or skipped
  bool outputs_set_ = false;
  int emitted_ = 0;
};

class Importer {
 public:
  // `model` is the importer's to change: each initializer's data is released
  // once its tensor holds it (a model's weights are not held twice).
  Importer(onnx::ModelProto& model, std::string base_dir, std::string file, const ImportOptions& opts)
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
                                        const std::string& ctx, bool size_symbols = false);
  std::vector<Value*> inline_subgraph(const onnx::GraphProto& g, const std::string& ctx,
                                      const std::vector<Value*>& inputs);
  std::vector<ImportedValue> inline_subgraph_values(const onnx::GraphProto& g, const std::string& ctx,
                                                    const std::vector<ImportedValue>& inputs);
  // Binds an ONNX name to a tensor, sequence or empty optional.
  void bind_value(const std::string& name, const ImportedValue& v, const std::string& ctx);
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
  // Whether `dim` uses a symbol that a node's data decides (ir/data_dependent.h).
  bool decided_by_data(int64_t dim) const;
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
  // A sequence- or optional-typed graph input (ImportOptions::composite_inputs).
  void import_composite_input(const onnx::ValueInfoProto& vi);
  // Its structure from --sequence-shapes / --empty-optionals / --shapes, or
  // nothing when none names it.
  std::optional<CompositeInput> composite_from_shapes(const onnx::ValueInfoProto& vi, const std::string& ctx);
  std::map<std::string, CompositeInput> opts_composites_;  // what composite_from_shapes gave
  // A graph output holding a sequence: its elements, each through an
  // identity named sequence_element_name(output, k).
  void add_sequence_output(const std::string& name, const std::vector<Value*>& elements, std::vector<Value*>& outs);

  onnx::ModelProto& model_;
  std::string base_dir_, file_;
  const ImportOptions& opts_;
  int64_t opset_ = 0;
  std::unique_ptr<Graph> graph_;
  InputSymbols symbols_;  // the main graph's, from its inputs (--min-shapes/--max-shapes)
  Graph* cur_ = nullptr;
  // While the branches of a top-level If are imported: their nodes may
  // declare size symbols on the main graph (import_regions).
  bool region_size_symbols_ = false;
  std::unordered_map<std::string, Value*> env_;
  std::unordered_map<std::string, std::vector<Value*>> seq_env_;  // unrolled sequences
  std::set<std::string> empty_;                                   // names bound to empty optionals
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

}  // namespace kiln::onnx_import_detail
