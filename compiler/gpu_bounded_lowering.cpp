#include "compiler/gpu_bounded_lowering.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/specialize.h"
#include "ir/symbolic_dim.h"
#include "ir/verifier.h"
#include "ops/registry.h"

namespace kiln {

namespace {

int norm_axis(int64_t axis, size_t rank) {
  return static_cast<int>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis);
}

// What a masked entry holds: the identity of the reduction reading it.
enum class Fill { Zero, One, Lowest, Highest };

class Lowering {
 public:
  Lowering(Graph& g, const std::map<std::string, const Node*, std::less<>>& deciders, const std::string& where,
           plan::BoundedSizes& out)
      : g_(g), deciders_(deciders), where_(where), out_(out) {}

  // Before substitution: each value's symbolic type, the constants holding
  // size symbols and the clamped slices' own attributes.
  void record(const Graph& g) {
    for (Value* v : g.inputs()) sym_[v] = v->type();
    for (Value* c : g.constants()) {
      sym_[c] = c->type();
      if (holds_sizes(*c)) sym_consts_[c] = c->data().clone();
    }
    for (const auto& n : g.nodes()) {
      for (int r = 0; r < n->num_outputs(); ++r) sym_[n->output(r)] = n->output(r)->type();
      if (n->attrs().has(kSizeSymbolAttr)) sym_attrs_[n.get()] = n->attrs();
      for (const auto& r : n->regions()) record(*r);
    }
  }

  void lower_all() {
    for (Node* n : g_.node_list()) lower_node(n);
  }

  std::vector<Value*> counts_in_order() const { return count_values_; }

 private:
  Graph& g_;
  const std::map<std::string, const Node*, std::less<>>& deciders_;
  std::string where_;
  plan::BoundedSizes& out_;
  std::map<const Value*, TensorType> sym_;
  std::map<const Value*, Tensor> sym_consts_;
  std::map<const Node*, AttrMap> sym_attrs_;
  std::map<const Value*, Value*> computed_consts_;
  std::map<const Value*, Value*> replaced_;
  std::map<std::string, Value*, std::less<>> counts_;
  std::vector<Value*> count_values_;
  int fresh_ = 0;

  bool is_size(const std::string& s) const { return deciders_.count(s) != 0; }

  bool uses_size(int64_t dim) const {
    for (const std::string& s : dim_symbols(dim))
      if (is_size(s)) return true;
    return false;
  }

  bool holds_sizes(const Value& c) const {
    if (!c.has_data() || c.dtype() != DType::I64) return false;
    const int64_t* p = c.data().data<int64_t>();
    return std::any_of(p, p + c.data().numel(), [&](int64_t x) { return is_symbolic_dim(x) && uses_size(x); });
  }

  // The symbolic dim `d` of `v` if it depends on a size, else 0 (a value the
  // rewrite created has none).
  int64_t size_dim(const Value* v, int d) const {
    auto it = sym_.find(v);
    if (it == sym_.end() || d >= static_cast<int>(it->second.shape.size())) return 0;
    const int64_t dim = it->second.shape[d];
    return is_symbolic_dim(dim) && uses_size(dim) ? dim : 0;
  }

  Value* resolve(Value* v) const {
    for (auto it = replaced_.find(v); it != replaced_.end(); it = replaced_.find(v)) v = it->second;
    return v;
  }

  void replace(Value* from, Value* to) {
    g_.replace_all_uses(from, to);
    replaced_[from] = to;
    if (auto it = sym_.find(from); it != sym_.end()) sym_[to] = it->second;
  }

  std::string fresh(const std::string& what) { return fmt::format("bounded.{}.{}", what, fresh_++); }

  Value* constant(Tensor t) { return g_.add_constant(fresh("c"), std::move(t)); }

  Value* i64(int64_t v) {
    Tensor t(DType::I64, {});
    t.set_int(0, v);
    return constant(std::move(t));
  }

  // A node of `op` before `before`, its one result's type inferred.
  Value* op(const std::string& op, std::vector<Value*> ins, AttrMap attrs, Node* before) {
    InferContext ic(op, ins, attrs, 1, op);
    std::vector<TensorType> types = infer_types(op_registry().get(op), ic);
    Node* n = g_.add_node(op, std::move(ins), std::move(types), std::move(attrs), fresh(op), before);
    n->output(0)->set_name(fresh("v"));
    return n->output(0);
  }

  Value* count(const std::string& s) {
    auto it = counts_.find(s);
    if (it == counts_.end())
      fail("{}the size {} is read before the node deciding it ({}) has run", where_, s, deciders_.at(s)->describe());
    return it->second;
  }

  // The device value of the dim `d` (a polynomial of the sizes), i64[].
  Value* count_of(int64_t d, Node* before) {
    if (!is_symbolic_dim(d)) return i64(d);
    Value* acc = nullptr;
    for (const auto& [mono, coeff] : dim_poly(d)) {
      Value* t = nullptr;
      for (const std::string& s : mono) {
        if (!is_size(s))
          fail("{}the dim {} mixes a shape-profile symbol {} with sizes decided at run time", where_, dim_str(d), s);
        t = t ? op("mul", {t, count(s)}, {}, before) : count(s);
      }
      if (!t) t = i64(coeff);
      else if (coeff != 1) t = op("mul", {t, i64(coeff)}, {}, before);
      acc = acc ? op("add", {acc, t}, {}, before) : t;
    }
    return acc ? acc : i64(0);
  }

  void add_count(const std::string& s, Value* c) {
    // A count the rewrite computed gets its size's name, as the bounded
    // kernels' counts have (kiln inspect lists the output holding each).
    if (c->name().rfind("bounded.", 0) == 0) c->set_name(s + "_count");
    counts_[s] = c;
    out_.counts.push_back({s, 0, 0, deciders_.at(s)->describe()});
    count_values_.push_back(c);
  }

  Value* fill_value(DType t, Fill f) {
    Tensor s(t, {});
    if (f == Fill::One) s.set_double(0, 1);
    if (f == Fill::Lowest || f == Fill::Highest) {
      const bool low = f == Fill::Lowest;
      if (is_float(t)) s.set_double(0, low ? -INFINITY : INFINITY);
      else if (t == DType::I64) s.set_int(0, low ? INT64_MIN : INT64_MAX);
      else if (t == DType::I32) s.set_int(0, low ? INT32_MIN : INT32_MAX);
      else
        unsupported("{}a {} value read along a data-dependent dim by a max/min/topk is not handled", where_,
                    dtype_name(t));
    }
    return constant(std::move(s));
  }

  // `x` with the entries at and past `n` along `d` set to `f`.
  Value* mask(Value* x, int d, Value* n, Fill f, Node* before) {
    const Shape& s = x->shape();
    Shape is(s.size(), 1);
    is[d] = s[d];
    Tensor iota(DType::I64, is);
    for (int64_t i = 0; i < s[d]; ++i) iota.set_int(i, i);
    Value* valid = op("less", {constant(std::move(iota)), n}, {}, before);
    return op("where", {valid, x, fill_value(x->dtype(), f)}, {}, before);
  }

  // The value of a constant holding sizes: the static entries as they are,
  // each symbolic one its polynomial of the counts.
  Value* computed_constant(const Value* c, Node* before) {
    if (auto it = computed_consts_.find(c); it != computed_consts_.end()) return it->second;
    const Tensor& t = sym_consts_.at(c);
    const int64_t* p = t.data<int64_t>();
    Value* r = nullptr;
    if (t.numel() == 1) {
      r = count_of(p[0], before);
    } else {
      std::vector<Value*> parts;
      for (int64_t i = 0; i < t.numel(); ++i) {
        AttrMap one;
        one.set("shape", std::vector<int64_t>{1});
        parts.push_back(op("reshape", {count_of(p[i], before)}, one, before));
      }
      AttrMap cat;
      cat.set("axis", int64_t(0));
      r = op("concat", parts, cat, before);
    }
    AttrMap shape;
    shape.set("shape", std::vector<int64_t>(c->shape().begin(), c->shape().end()));
    r = op("reshape", {r}, shape, before);
    computed_consts_[c] = r;
    return r;
  }

  void lower_node(Node* n) {
    bool changed = false;
    for (int i = 0; i < n->num_inputs(); ++i) {
      Value* v = n->input(i);
      if (v && sym_consts_.count(v)) {
        n->set_input(i, computed_constant(v, n));
        changed = true;
      }
    }
    if (changed) {
      try {
        InferContext ic(n->op(), n->inputs(), n->attrs(), n->num_outputs(), n->describe());
        infer_types(op_registry().get(n->op()), ic);
      } catch (const Error& e) {
        unsupported("{}{} needs at compile time an operand holding a size decided at run time ({})", where_,
                    n->describe(), e.what());
      }
    }
    if (n->attrs().has(kSizeSymbolAttr)) return lower_decider(n);
    const std::string& o = n->op();
    if (o == "concat") return pack_concat(n);
    if (o == "gather") return wrap_gather(n);
    if (o == "topk") {  // a k the model fixes, over a data-dependent axis
      const int axis = norm_axis(n->attrs().get_int("axis", -1), n->input(0)->shape().size());
      if (int64_t d = size_dim(n->input(0), axis))
        n->set_input(0, mask(n->input(0), axis, count_of(d, n),
                             n->attrs().get_int("largest", 1) ? Fill::Lowest : Fill::Highest, n));
      return;
    }
    if (o == "reduce_sum" || o == "reduce_max" || o == "reduce_min" || o == "reduce_prod") return mask_reduction(n);
  }

  void lower_decider(Node* n) {
    const std::string s = n->attrs().get_string(kSizeSymbolAttr, "");
    const std::string& o = n->op();
    if (o == "if") return inline_if(n, s);
    if (o == "slice") return clamp_slice(n, s);
    AttrMap attrs = n->attrs();
    attrs.erase(kSizeSymbolAttr);
    std::vector<Value*> ins = n->inputs();
    int results = n->num_outputs(), axis = 0;
    Value* cnt = nullptr;
    if (o == "topk") {
      // topk with k = the axis size, sorted, holds a top k in its first k
      // entries; padding along the axis is masked to lose every comparison.
      axis = norm_axis(attrs.get_int("axis", -1), ins[0]->shape().size());
      if (int64_t d = size_dim(ins[0], axis))
        ins[0] = mask(ins[0], axis, count_of(d, n), attrs.get_int("largest", 1) ? Fill::Lowest : Fill::Highest, n);
      attrs.set("k", ins[0]->shape()[axis]);
      attrs.set("sorted", int64_t(1));
      AttrMap scalar;
      scalar.set("shape", std::vector<int64_t>{});
      cnt = op("reshape", {ins[1]}, scalar, n);
      ins.resize(1);
    } else {
      attrs.set("bounded", int64_t(1));
      results += 1;
      axis = o == "nonzero" ? 1 : 0;
      if (o == "non_max_suppression")
        if (int64_t d = size_dim(n->input(0), 1)) ins.push_back(count_of(d, n));
    }
    InferContext ic(o, ins, attrs, results, n->describe());
    std::vector<TensorType> types = infer_types(op_registry().get(o), ic);
    check_bound(n, s, types[0].shape[axis]);
    Node* b = g_.add_node(o, ins, types, attrs, n->name(), n);
    for (int r = 0; r < n->num_outputs(); ++r) {
      const std::string name = n->output(r)->name();
      n->output(r)->set_name(name + ".unbounded");
      b->output(r)->set_name(name);
      replace(n->output(r), b->output(r));
    }
    if (!cnt) {
      cnt = b->output(n->num_outputs());
      cnt->set_name(s + "_count");
    }
    g_.erase_node(n);
    add_count(s, cnt);
  }

  void check_bound(const Node* n, const std::string& s, int64_t got) {
    const int64_t want = g_.find_symbol(s)->max;
    if (got != want)
      fail("{}{}: its result at the bounds has {} entries along its size, but its size symbol {} has the range [0, {}]",
           where_, n->describe(), got, s, want);
  }

  // x[start:end:step] along the clamped dim: the same slice at the bound,
  // its count max(0, ceil((min(end, n) - start) / step)).
  void clamp_slice(Node* n, const std::string& s) {
    const AttrMap& orig = sym_attrs_.at(n);
    const int d = [&] {
      for (size_t k = 0; k < n->output(0)->shape().size(); ++k)
        if (size_dim(n->output(0), static_cast<int>(k)) &&
            dim_symbols(sym_.at(n->output(0)).shape[k]) == std::vector<std::string>{s})
          return static_cast<int>(k);
      fail("{}{}: no result dim is its size {}", where_, n->describe(), s);
    }();
    const int64_t start = orig.get_ints("starts").at(d), end = orig.get_ints("ends").at(d),
                  step = orig.get_ints("steps").at(d);
    AttrMap attrs = n->attrs();
    attrs.erase(kSizeSymbolAttr);
    InferContext ic("slice", n->inputs(), attrs, 1, n->describe());
    std::vector<TensorType> types = infer_types(op_registry().get("slice"), ic);
    check_bound(n, s, types[0].shape[d]);
    Node* b = g_.add_node("slice", n->inputs(), types, attrs, n->name(), n);
    b->output(0)->set_name(n->output(0)->name());
    n->output(0)->set_name(n->output(0)->name() + ".unbounded");
    Value* len = count_of(size_dim(n->input(0), d) ? sym_.at(n->input(0)).shape[d] : n->input(0)->shape()[d], n);
    Value* c = op("sub", {op("min", {count_of(end, n), len}, {}, n), i64(start)}, {}, n);
    c = op("max", {c, i64(0)}, {}, n);
    if (step > 1) c = op("div", {op("add", {c, i64(step - 1)}, {}, n), i64(step)}, {}, n);
    replace(n->output(0), b->output(0));
    g_.erase_node(n);
    add_count(s, c);
  }

  Value* zeros(DType t, Shape s) { return constant(Tensor(t, std::move(s))); }

  // `x` padded with zeros at the end of each dim to `want` (the sub-box of it).
  Value* pad_to(Value* x, const TensorType& want, Node* before, const Node* n) {
    if (x->shape().size() != want.shape.size() || x->dtype() != want.dtype)
      fail("{}{}: a branch gives {} where the if gives {}", where_, n->describe(), x->type().str(), want.str());
    for (size_t d = 0; d < want.shape.size(); ++d) {
      const Shape& s = x->shape();
      if (s[d] == want.shape[d]) continue;
      if (s[d] > want.shape[d])
        fail("{}{}: a branch gives {}, past the if's bound {}", where_, n->describe(), x->type().str(), want.str());
      Shape z = s;
      z[d] = want.shape[d] - s[d];
      if (s[d] == 0) {
        z[d] = want.shape[d];
        x = zeros(x->dtype(), z);
        continue;
      }
      AttrMap cat;
      cat.set("axis", static_cast<int64_t>(d));
      x = op("concat", {x, zeros(x->dtype(), z)}, cat, before);
    }
    return x;
  }

  // Both branches inlined at their bounds, the results selected on the
  // device by the condition, each padded with zeros to the if's bound.
  void inline_if(Node* n, const std::string& s) {
    AttrMap scalar;
    scalar.set("shape", std::vector<int64_t>{});
    Value* cond = op("reshape", {n->input(0)}, scalar, n);
    std::vector<std::vector<Value*>> results(2);
    for (int r = 0; r < 2; ++r) {
      const Graph& br = *n->region(r);
      std::map<const Value*, Value*> m;
      for (size_t i = 0; i < br.inputs().size(); ++i) m[br.inputs()[i]] = n->input(static_cast<int>(i) + 1);
      for (Value* c : br.constants()) {
        Value* nc = g_.add_constant(fresh(c->name()), c->data());
        m[c] = nc;
        sym_[nc] = sym_.at(c);
        if (auto it = sym_consts_.find(c); it != sym_consts_.end()) sym_consts_[nc] = it->second.clone();
      }
      std::vector<Node*> added;
      for (const auto& k : br.nodes()) {
        if (k->num_regions())
          unsupported(
              "{}{} in a branch of {}: an if deciding sizes in a GPU plan inlines its branches, which may "
              "hold no regions of their own (compile it for --target cpu)",
              where_, k->describe(), n->describe());
        std::vector<Value*> ins;
        for (Value* v : k->inputs()) ins.push_back(v ? m.at(v) : nullptr);
        std::vector<TensorType> types;
        for (int o = 0; o < k->num_outputs(); ++o) types.push_back(k->output(o)->type());
        Node* c = g_.add_node(k->op(), ins, types, k->attrs(), k->name(), n);
        for (int o = 0; o < k->num_outputs(); ++o) {
          c->output(o)->set_name(fresh(k->output(o)->name()));
          m[k->output(o)] = c->output(o);
          sym_[c->output(o)] = sym_.at(k->output(o));
        }
        if (auto it = sym_attrs_.find(k.get()); it != sym_attrs_.end()) sym_attrs_[c] = it->second;
        added.push_back(c);
      }
      for (Node* c : added) lower_node(c);
      for (const Value* v : br.outputs()) results[r].push_back(resolve(m.at(v)));
    }
    Value* cnt = nullptr;
    for (int j = 0; j < n->num_outputs(); ++j) {
      Value* t = pad_to(results[0][j], n->output(j)->type(), n, n);
      Value* e = pad_to(results[1][j], n->output(j)->type(), n, n);
      Value* sel = op("where", {cond, t, e}, {}, n);
      sel->set_name(n->output(j)->name());
      n->output(j)->set_name(n->output(j)->name() + ".if");
      // The count: the taken branch's size along the if's own dim (each a
      // polynomial of the counts before it).
      for (size_t d = 0; d < sym_.at(n->output(j)).shape.size() && !cnt; ++d)
        if (dim_symbols(sym_.at(n->output(j)).shape[d]) == std::vector<std::string>{s})
          cnt = op("where", {cond, count_of(branch_dim(n, 0, j, d), n), count_of(branch_dim(n, 1, j, d), n)}, {}, n);
      replace(n->output(j), sel);
    }
    if (!cnt) fail("{}{}: no result dim is its size {}", where_, n->describe(), s);
    g_.erase_node(n);
    add_count(s, cnt);
  }

  int64_t branch_dim(const Node* n, int r, int j, size_t d) const {
    return sym_.at(n->region(r)->outputs()[j]).shape[d];
  }

  // A concat along a data-dependent dim: the operands' real entries packed
  // to the front by a gather whose indices the counts give, zeros after.
  void pack_concat(Node* n) {
    const int a = norm_axis(n->attrs().get_int("axis", 0), n->output(0)->shape().size());
    bool any = false;
    for (const Value* v : n->inputs()) any = any || size_dim(v, a);
    if (!any) return;
    Node* p = g_.add_node("concat", n->inputs(), {n->output(0)->type()}, n->attrs(), n->name(), n);
    p->output(0)->set_name(n->output(0)->name() + ".padded");
    const int64_t total_bound = p->output(0)->shape()[a];
    Tensor iota_t(DType::I64, {total_bound});
    for (int64_t i = 0; i < total_bound; ++i) iota_t.set_int(i, i);
    Value* iota = constant(std::move(iota_t));
    // Output position i in operand j's part (off_j <= i < off_j + c_j) reads
    // entry i - off_j + P_j of the padded concat (P_j: the bounds before j).
    Value* idx = iota;
    Value* off = nullptr;
    Value* prev = nullptr;  // the count of operand j - 1
    for (int j = 0; j < n->num_inputs(); ++j) {
      const Value* v = n->input(j);
      const int64_t dim = size_dim(v, a) ? sym_.at(v).shape[a] : v->shape()[a];
      Value* c = count_of(dim, n);
      if (j > 0) {
        // From part j - 1 to part j the index jumps by B_{j-1} - c_{j-1}.
        Value* jump = op("sub", {i64(n->input(j - 1)->shape()[a]), prev}, {}, n);
        idx = op("add", {idx, op("where", {op("less", {iota, off}, {}, n), i64(0), jump}, {}, n)}, {}, n);
      }
      off = off ? op("add", {off, c}, {}, n) : c;
      prev = c;
    }
    idx = op("min", {idx, i64(total_bound - 1)}, {}, n);
    AttrMap ga;
    ga.set("axis", static_cast<int64_t>(a));
    Value* packed = op("gather", {p->output(0), idx}, ga, n);
    packed = mask(packed, a, off, Fill::Zero, n);
    packed->set_name(n->output(0)->name());
    n->output(0)->set_name(n->output(0)->name() + ".unpacked");
    replace(n->output(0), packed);
    g_.erase_node(n);
  }

  // A gather along a data-dependent dim: a negative index counts from the
  // real end (the count), not from the bound.
  void wrap_gather(Node* n) {
    const Value* data = n->input(0);
    const int a = norm_axis(n->attrs().get_int("axis", 0), data->shape().size());
    const int64_t d = size_dim(data, a);
    if (!d) return;
    Value* idx = n->input(1);
    Value* c = count_of(d, n);
    if (idx->dtype() != DType::I64) {
      AttrMap to;
      to.set("to", std::string(dtype_name(idx->dtype())));
      c = op("cast", {c}, to, n);
    }
    Value* zero = constant(Tensor(idx->dtype(), {}));
    Value* wrapped = op("where", {op("less", {idx, zero}, {}, n), op("add", {idx, c}, {}, n), idx}, {}, n);
    n->set_input(1, wrapped);
  }

  // A reduction along a data-dependent dim sees the padding as its identity.
  void mask_reduction(Node* n) {
    const std::string& o = n->op();
    const Fill f = o == "reduce_sum"    ? Fill::Zero
                   : o == "reduce_prod" ? Fill::One
                   : o == "reduce_max"  ? Fill::Lowest
                                        : Fill::Highest;
    Value* x = n->input(0);
    const Value* orig = x;
    for (int64_t a : n->attrs().get_ints("axes"))
      if (int64_t d = size_dim(orig, static_cast<int>(a))) x = mask(x, static_cast<int>(a), count_of(d, n), f, n);
    if (x != orig) n->set_input(0, x);
  }
};

}  // namespace

void lower_at_bounds(Graph& g, const SymbolBindings& bounds,
                     const std::map<std::string, const Node*, std::less<>>& deciders, const std::string& where,
                     plan::BoundedSizes& sizes) {
  Lowering l(g, deciders, where, sizes);
  l.record(g);
  for (const Value* v : g.outputs()) {
    std::vector<DimPoly> dims;
    for (int64_t d : v->shape()) dims.push_back(dim_poly(d));
    sizes.outputs.push_back(std::move(dims));
  }
  substitute_symbols(g, bounds);
  l.lower_all();
  std::vector<Value*> outs = g.outputs();
  const std::vector<Value*> counts = l.counts_in_order();
  for (size_t k = 0; k < counts.size(); ++k) {
    sizes.counts[k].bound = bounds.at(sizes.counts[k].symbol);
    sizes.counts[k].output = static_cast<uint32_t>(outs.size());
    outs.push_back(counts[k]);
  }
  g.set_outputs(outs);
  g.set_symbols({});
  g.remove_unused_constants();
  verify_graph(g, op_registry());
}

}  // namespace kiln
