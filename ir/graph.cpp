#include "ir/graph.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <xxhash.h>

#include "ir/error.h"
#include "ir/short_name.h"

namespace kiln {

namespace {
void remove_use(Value* v, Node* user, int operand) {
  if (!v) return;
  auto& uses = const_cast<std::vector<Use>&>(v->uses());
  auto it =
      std::find_if(uses.begin(), uses.end(), [&](const Use& u) { return u.user == user && u.operand == operand; });
  KILN_CHECK(it != uses.end(), "use list of %{} lacks operand {} of {}", v->name(), operand, user->op());
  uses.erase(it);
}
void add_use(Value* v, Node* user, int operand) {
  if (v) const_cast<std::vector<Use>&>(v->uses()).push_back({user, operand});
}
}  // namespace

const Tensor& Value::data() const {
  KILN_CHECK(kind_ == ValueKind::Constant, "%{} is not a constant", name_);
  if (!has_data()) fail("constant %{} has no data: the graph was loaded from IR text without its weights", name_);
  return data_;
}

void Value::set_data(Tensor t) {
  KILN_CHECK(kind_ == ValueKind::Constant, "%{} is not a constant", name_);
  type_ = t.type();
  data_ = std::move(t);
  digest_ = 0;
}

uint64_t Value::digest() const {
  if (!has_data() || data_.numel() == 0) return digest_;
  if (data_.dtype() == DType::String) {  // the characters, each string after its length
    XXH64_state_t* st = XXH64_createState();
    XXH64_reset(st, 0);
    for (int64_t i = 0; i < data_.numel(); ++i) {
      const std::string& s = data_.strings()[i];
      const uint64_t n = s.size();
      XXH64_update(st, &n, sizeof n);
      XXH64_update(st, s.data(), s.size());
    }
    const uint64_t h = XXH64_digest(st);
    XXH64_freeState(st);
    return h;
  }
  return XXH64(data_.raw(), data_.nbytes(), 0);
}

Node::~Node() {
  // Outputs die with the node; operands lose this user.
  for (int i = 0; i < num_inputs(); ++i) remove_use(inputs_[i], this, i);
}

void Node::set_input(int i, Value* v) {
  KILN_CHECK(i >= 0 && i < num_inputs(), "operand {} out of range for {}", i, describe());
  remove_use(inputs_[i], this, i);
  inputs_[i] = v;
  add_use(v, this, i);
}

void Node::append_input(Value* v) {
  inputs_.push_back(v);
  add_use(v, this, num_inputs() - 1);
}

void Node::set_inputs(std::vector<Value*> vs) {
  for (int i = 0; i < num_inputs(); ++i) remove_use(inputs_[i], this, i);
  inputs_ = std::move(vs);
  for (int i = 0; i < num_inputs(); ++i) add_use(inputs_[i], this, i);
}

std::vector<Value*> Node::outputs() const {
  std::vector<Value*> r;
  for (auto& o : outputs_) r.push_back(o.get());
  return r;
}

void Node::set_body(std::unique_ptr<Graph> g) {
  regions_.clear();
  if (g) regions_.push_back(std::move(g));
}

std::unique_ptr<Graph> Node::take_body() {
  std::unique_ptr<Graph> g = regions_.empty() ? nullptr : std::move(regions_[0]);
  regions_.clear();
  return g;
}

std::string Node::describe() const {
  if (name_.empty())
    return fmt::format("node ({}) producing %{}", op_, outputs_.empty() ? "" : short_name(outputs_[0]->name()));
  return fmt::format("node \"{}\" ({})", short_name(name_), op_);
}

Graph::Graph(std::string name) : name_(std::move(name)) {}

Graph::~Graph() {
  // Drop every operand first: in a graph whose order is broken (a node using
  // a later node's result, which the verifier reports), no destruction order
  // would otherwise keep each node's operands alive until it goes.
  for (auto& n : nodes_) n->set_inputs({});
  while (!nodes_.empty()) nodes_.pop_back();
}

Value* Graph::add_input(std::string name, TensorType type) {
  auto v = std::make_unique<Value>();
  v->kind_ = ValueKind::Input;
  v->name_ = std::move(name);
  v->type_ = std::move(type);
  inputs_.push_back(v.get());
  owned_.push_back(std::move(v));
  return inputs_.back();
}

Value* Graph::add_constant(std::string name, Tensor data) {
  auto v = std::make_unique<Value>();
  v->kind_ = ValueKind::Constant;
  v->name_ = std::move(name);
  v->type_ = data.type();
  v->data_ = std::move(data);
  constants_.push_back(v.get());
  owned_.push_back(std::move(v));
  return constants_.back();
}

Value* Graph::add_constant_ref(std::string name, TensorType type, uint64_t digest) {
  auto v = std::make_unique<Value>();
  v->kind_ = ValueKind::Constant;
  v->name_ = std::move(name);
  v->type_ = std::move(type);
  v->digest_ = digest;
  constants_.push_back(v.get());
  owned_.push_back(std::move(v));
  return constants_.back();
}

void Graph::freeze_input(Value* input, Tensor data) {
  KILN_CHECK(input->is_input(), "%{} is not a graph input", input->name());
  KILN_CHECK(data.type().dtype == input->dtype() && data.shape() == input->shape(),
             "frozen value for %{} has type {}, expected {}", input->name(), data.type().str(), input->type().str());
  inputs_.erase(std::find(inputs_.begin(), inputs_.end(), input));
  input->kind_ = ValueKind::Constant;
  input->data_ = std::move(data);
  constants_.push_back(input);
}

void Graph::remove_input(Value* input) {
  KILN_CHECK(!input->has_uses() && !is_output(input), "input %{} still used", input->name());
  inputs_.erase(std::find(inputs_.begin(), inputs_.end(), input));
  owned_.erase(std::find_if(owned_.begin(), owned_.end(), [&](auto& p) { return p.get() == input; }));
}

Node* Graph::add_node(std::string op, std::vector<Value*> inputs, std::vector<TensorType> output_types, AttrMap attrs,
                      std::string node_name, Node* before) {
  std::unique_ptr<Node> n(new Node());
  Node* raw = n.get();
  n->op_ = std::move(op);
  n->name_ = std::move(node_name);
  n->attrs_ = std::move(attrs);
  n->owner_ = this;
  for (size_t i = 0; i < output_types.size(); ++i) {
    auto v = std::make_unique<Value>();
    v->kind_ = ValueKind::Result;
    v->type_ = std::move(output_types[i]);
    v->producer_ = raw;
    v->producer_output_ = static_cast<int>(i);
    n->outputs_.push_back(std::move(v));
  }
  n->set_inputs(std::move(inputs));
  auto pos = before ? before->self_ : nodes_.end();
  raw->self_ = nodes_.insert(pos, std::move(n));
  return raw;
}

void Graph::erase_node(Node* n) {
  KILN_CHECK(n->owner_ == this, "node {} is not in graph @{}", n->describe(), name_);
  for (auto& o : n->outputs_)
    KILN_CHECK(!o->has_uses() && !is_output(o.get()), "erasing {} whose result %{} is still used", n->describe(),
               o->name());
  nodes_.erase(n->self_);
}

void Graph::move_node(Node* n, Node* before) {
  auto pos = before ? before->self_ : nodes_.end();
  nodes_.splice(pos, nodes_, n->self_);
}

bool Graph::is_output(const Value* v) const { return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end(); }

std::vector<Node*> Graph::node_list() const {
  std::vector<Node*> r;
  r.reserve(nodes_.size());
  for (auto& n : nodes_) r.push_back(n.get());
  return r;
}

void Graph::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  std::vector<Use> uses = from->uses();
  for (const Use& u : uses) u.user->set_input(u.operand, to);
  for (auto& o : outputs_)
    if (o == from) o = to;
}

int Graph::remove_unused_constants() {
  // One sweep over owned_ for all of them: erasing each from owned_ on its
  // own is quadratic when a pass (fuse, moving small constants into bodies)
  // drops tens of thousands.
  std::unordered_set<const Value*> gone, outs(outputs_.begin(), outputs_.end());
  std::vector<Value*> keep;
  for (Value* c : constants_) {
    if (c->has_uses() || outs.count(c)) keep.push_back(c);
    else gone.insert(c);
  }
  if (gone.empty()) return 0;
  constants_ = std::move(keep);
  std::erase_if(owned_, [&](const std::unique_ptr<Value>& p) { return gone.count(p.get()) > 0; });
  return static_cast<int>(gone.size());
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>(name_);
  g->symbols_ = symbols_;
  std::unordered_map<const Value*, Value*> map;
  map[nullptr] = nullptr;
  for (Value* v : inputs_) map[v] = g->add_input(v->name(), v->type());
  for (Value* c : constants_) {
    Value* nc =
        c->has_data() ? g->add_constant(c->name(), c->data_) : g->add_constant_ref(c->name(), c->type(), c->digest_);
    nc->type_ = c->type_;
    map[c] = nc;
  }
  for (auto& n : nodes_) {
    std::vector<Value*> ins;
    for (Value* v : n->inputs_) ins.push_back(map.at(v));
    std::vector<TensorType> types;
    for (auto& o : n->outputs_) types.push_back(o->type());
    Node* nn = g->add_node(n->op_, ins, types, n->attrs_, n->name_);
    for (int i = 0; i < n->num_outputs(); ++i) {
      nn->output(i)->set_name(n->output(i)->name());
      map[n->output(i)] = nn->output(i);
    }
    for (const auto& r : n->regions_) nn->add_region(r->clone());
  }
  std::vector<Value*> outs;
  for (Value* v : outputs_) outs.push_back(map.at(v));
  g->set_outputs(outs);
  return g;
}

const SymbolDecl* Graph::find_symbol(std::string_view name) const {
  for (const SymbolDecl& s : symbols_)
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace kiln
