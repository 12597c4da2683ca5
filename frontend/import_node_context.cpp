// What an adapter sees of the ONNX node it imports (NodeContext).
#include "frontend/importer.h"

#include <algorithm>

#include "ir/control_flow.h"
#include "ir/symbolic_dim.h"

namespace kiln::onnx_import_detail {

int64_t NodeContext::opset() const { return imp_.opset(); }

std::string NodeContext::label() const { return fmt::format("{}: {}", imp_.file(), node_label(node_)); }

const Tensor* NodeContext::value_of(Value* v) { return imp_.known_value(v); }

const Tensor* NodeContext::fixed_value(Value* v) { return imp_.known_value(v, /*freeze=*/false); }

std::string NodeContext::declare_size_symbol(const std::string& hint, int64_t bound, int64_t cap) {
  Graph& g = *imp_.graph_;  // symbols live on the main graph, also for a top-level If's branches
  if (!imp_.opts_.data_dependent_sizes || (&imp_.graph() != &g && !imp_.region_size_symbols_)) return "";
  // The bound at the largest shapes the declared ranges allow.
  SymbolBindings at_max;
  for (const SymbolDecl& d : g.symbols()) at_max[d.name] = d.max;
  int64_t max = eval_dim(bound, at_max);
  if (cap >= 0) max = std::min(max, cap);
  std::string name;
  for (int i = 0; name.empty() || g.find_symbol(name); ++i) name = hint + std::to_string(i);
  std::vector<SymbolDecl> decls = g.symbols();
  decls.push_back({name, 0, max});
  g.set_symbols(std::move(decls));
  return name;
}

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

void NodeContext::set_output_values(const std::vector<ImportedValue>& outs) {
  if (outputs_set_) fail("outputs set twice (adapter bug)");
  outputs_set_ = true;
  for (int i = 0; i < node_.output_size(); ++i) {
    const std::string& name = node_.output(i);
    if (name.empty()) continue;
    if (i >= static_cast<int>(outs.size()))
      unsupported("output {} (\"{}\") is not produced by kiln's import of {}", i, name, op_type());
    imp_.bind_value(name, outs[i], label());
  }
}

std::vector<ImportedValue> NodeContext::inline_subgraph_values(const std::string& attr,
                                                               const std::vector<ImportedValue>& inputs) {
  const onnx::GraphProto& g = subgraph(attr);
  consumed_.insert(attr);
  return imp_.inline_subgraph_values(g, label() + ": subgraph '" + attr + "'", inputs);
}

ImportContext::Regions NodeContext::import_regions(const std::vector<RegionSpec>& specs, bool size_symbols) {
  for (const RegionSpec& spec : specs) consumed_.insert(spec.attr);
  return imp_.import_regions(specs, subgraphs_, label(), size_symbols);
}

std::vector<Value*> NodeContext::inline_subgraph(const std::string& attr, const std::vector<Value*>& inputs) {
  const onnx::GraphProto& g = subgraph(attr);
  consumed_.insert(attr);
  return imp_.inline_subgraph(g, label() + ": subgraph '" + attr + "'", inputs);
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

}  // namespace kiln::onnx_import_detail
