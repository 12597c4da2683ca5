// The graph IR: SSA values and nodes kept in topological order.
//
// A Value is a graph input, a constant (weights, folded results) or a node
// result. Nodes own their results; the graph owns inputs and constants.
// Every value keeps its list of uses so passes can rewrite in place.
// A node may own regions (nested Graphs with their own parameters and
// returns): a fused node's body is its one region, an `if` has a then and an
// else region, `loop` and `scan` one body (ir/control_flow.h). A region sees
// only its own values: what it reads from outside is passed in as an operand
// of the node (explicit capture, as XLA does), so every use stays visible to
// use lists, DCE, CSE and liveness.
#pragma once
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/attribute.h"
#include "ir/tensor.h"

namespace kiln {

class Graph;
class Node;

enum class ValueKind { Input, Constant, Result };

struct Use {
  Node* user;
  int operand;
};

class Value {
 public:
  ValueKind kind() const { return kind_; }
  bool is_input() const { return kind_ == ValueKind::Input; }
  bool is_constant() const { return kind_ == ValueKind::Constant; }
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  const TensorType& type() const { return type_; }
  void set_type(TensorType t) { type_ = std::move(t); }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }

  // For results: the node and which of its outputs this is.
  Node* producer() const { return producer_; }
  int producer_output() const { return producer_output_; }

  // For constants. data() throws kiln::Error when the graph was parsed from
  // text that printed this constant by reference only (no weights loaded).
  const Tensor& data() const;
  // (A default Tensor claims data when empty; a constant parsed by reference
  // holds one, so look at the storage.)
  bool has_data() const { return data_.raw() != nullptr; }
  // Replaces a constant's data (same type). Used by folding passes.
  void set_data(Tensor t);
  // The digest of a constant's bytes (xxh64), printed with by-reference
  // constants so two dumps can be compared without the weights.
  uint64_t digest() const;

  const std::vector<Use>& uses() const { return uses_; }
  bool has_uses() const { return !uses_.empty(); }

 private:
  friend class Graph;
  friend class Node;
  ValueKind kind_ = ValueKind::Result;
  std::string name_;
  TensorType type_;
  Node* producer_ = nullptr;
  int producer_output_ = 0;
  Tensor data_;
  uint64_t digest_ = 0;  // set when data is absent (parsed by reference)
  std::vector<Use> uses_;
};

class Node {
 public:
  ~Node();
  const std::string& op() const { return op_; }
  // ONNX node name(s) this node came from; printed as loc("...").
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const std::vector<Value*>& inputs() const { return inputs_; }
  // nullptr for an absent optional input.
  Value* input(int i) const { return i < num_inputs() ? inputs_[i] : nullptr; }
  void set_input(int i, Value* v);
  void append_input(Value* v);
  void set_inputs(std::vector<Value*> vs);

  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  Value* output(int i = 0) const { return outputs_[i].get(); }
  std::vector<Value*> outputs() const;

  AttrMap& attrs() { return attrs_; }
  const AttrMap& attrs() const { return attrs_; }

  Graph* owner() const { return owner_; }
  // The first region (a fused node's body), or nullptr without regions.
  Graph* body() const { return regions_.empty() ? nullptr : regions_[0].get(); }
  // Makes `g` the only region.
  void set_body(std::unique_ptr<Graph> g);
  // Removes the regions and returns the first (null without regions): the
  // fuser asks codegen about a body in a scratch node, then keeps it.
  std::unique_ptr<Graph> take_body();
  int num_regions() const { return static_cast<int>(regions_.size()); }
  Graph* region(int i) const { return regions_.at(i).get(); }
  const std::vector<std::unique_ptr<Graph>>& regions() const { return regions_; }
  void add_region(std::unique_ptr<Graph> g) { regions_.push_back(std::move(g)); }

  // "node "conv1" (conv)" for messages.
  std::string describe() const;

 private:
  friend class Graph;
  Node() = default;
  std::string op_;
  std::string name_;
  std::vector<Value*> inputs_;
  std::vector<std::unique_ptr<Value>> outputs_;
  AttrMap attrs_;
  Graph* owner_ = nullptr;
  std::vector<std::unique_ptr<Graph>> regions_;
  std::list<std::unique_ptr<Node>>::iterator self_;
};

// A symbol of the graph's symbolic dims (ir/symbolic_dim.h) and the range
// of values it may take: min <= value <= max. Declared once, on the
// top-level graph; regions use their parent's symbols.
struct SymbolDecl {
  std::string name;
  int64_t min = 0;
  int64_t max = 0;
  bool operator==(const SymbolDecl& o) const = default;
};

class Graph {
 public:
  explicit Graph(std::string name = "main");
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  Value* add_input(std::string name, TensorType type);
  Value* add_constant(std::string name, Tensor data);
  // A constant whose data is not loaded (parsed from text by reference).
  Value* add_constant_ref(std::string name, TensorType type, uint64_t digest);
  // Turns a graph input into a constant holding `data` (the frontend does
  // this for inputs whose values must be known at compile time).
  void freeze_input(Value* input, Tensor data);
  void remove_input(Value* input);  // must have no uses

  // Creates a node. `before` == nullptr appends at the end of the order.
  Node* add_node(std::string op, std::vector<Value*> inputs, std::vector<TensorType> output_types, AttrMap attrs = {},
                 std::string node_name = {}, Node* before = nullptr);
  // Deletes a node whose results have no uses and are not graph outputs.
  void erase_node(Node* n);
  // Moves `n` right before `before` (nullptr: to the end).
  void move_node(Node* n, Node* before);

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& constants() const { return constants_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  void set_outputs(std::vector<Value*> outs) { outputs_ = std::move(outs); }
  void set_output(int i, Value* v) { outputs_[i] = v; }
  bool is_output(const Value* v) const;

  // Nodes in order. Safe against erasing the current node if iterating over
  // a snapshot: use node_list() when mutating.
  const std::list<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  std::vector<Node*> node_list() const;
  size_t num_nodes() const { return nodes_.size(); }

  // Rewires every use of `from` (operands and graph outputs) to `to`.
  void replace_all_uses(Value* from, Value* to);
  // Drops constants nobody uses. Returns how many were removed.
  int remove_unused_constants();

  // Deep copy (constant data is shared, it is immutable).
  std::unique_ptr<Graph> clone() const;

  // The symbols of a graph with dynamic shapes, in declaration order; empty
  // for a static graph.
  const std::vector<SymbolDecl>& symbols() const { return symbols_; }
  void set_symbols(std::vector<SymbolDecl> s) { symbols_ = std::move(s); }
  const SymbolDecl* find_symbol(std::string_view name) const;

 private:
  std::string name_;
  std::vector<SymbolDecl> symbols_;
  std::vector<std::unique_ptr<Value>> owned_;  // inputs and constants
  std::vector<Value*> inputs_;
  std::vector<Value*> constants_;
  std::vector<Value*> outputs_;
  std::list<std::unique_ptr<Node>> nodes_;
};

}  // namespace kiln
