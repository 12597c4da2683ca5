// precision: lowers an FP32 model to mixed precision for `--precision fp16|bf16`
// and marks TF32-capable ops for `--precision tf32` (fp32: nothing).
//
// fp16/bf16 rewrites every node in order by its class in passes/precision_policy
// (docs/precision.md says why each op is where it is):
//  - Reduced ops (conv, matmul, gemm, einsum, attention) take f16/bf16 operands;
//  - Float32 ops (softmax, normalizations, sums, exp/log/pow/erf/sqrt, and any
//    op not in the table) take their operands in FP32 and give FP32 results;
//  - Follow ops (data movement, selection, comparisons, cheap pointwise math)
//    run in the widest precision of their non-constant float operands, so a
//    chain stays in whatever precision the region it sits in computes in.
// An operand in the wrong dtype gets a `cast` placed before its first consumer
// that needs it and shared by later ones, so each value has at most one cast per
// dtype and a consumer wanting the original dtype reads the original: the
// f32 -> f16 -> f32 pairs a naive border insertion would make never arise. Float
// constants feeding reduced computation are converted at compile time (FP16
// clamped to +-65504, BF16 to its largest finite value, counted and warned about
// once). Graph inputs and outputs keep the model's dtypes: casts sit at the
// boundary and a cast output takes over the model's output name. Finally casts
// that cancel are folded: a cast to the dtype its operand already has, and a
// cast of a cast that widened exactly (f16 -> f32 -> f16 is the f16 value itself).
//
// Leaves alone: integer, bool and f64 values (only values the model has in f32
// change), nodes with bodies (they keep their operands' dtypes), the model's own
// casts (its f32 -> f16 -> f32 round trips are rounding it asked for), and any
// node whose op's inference refuses the reduced dtype (it keeps FP32, counted
// as kept-f32-by-inference).
#include <cmath>
#include <iostream>
#include <map>
#include <set>
#include <unordered_map>

#include "ops/registry.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/precision_policy.h"

namespace kiln {
namespace {

// True when every value of dtype `from` is exactly a value of dtype `to`, so a
// cast from -> to loses nothing and a later cast to C equals a direct cast to C.
bool exactly_widens(DType from, DType to) {
  if (from == to || from == DType::Bool) return true;
  // Integers exactly representable: bits of magnitude each dtype holds.
  auto int_bits = [](DType t) -> int {
    switch (t) {
      case DType::I8:
        return 7;
      case DType::U8:
        return 8;
      case DType::I16:
        return 15;
      case DType::U16:
        return 16;
      case DType::I32:
        return 31;
      case DType::U32:
        return 32;
      case DType::I64:
        return 63;
      case DType::U64:
        return 64;
      case DType::F16:
        return 11;
      case DType::BF16:
        return 8;
      case DType::F32:
        return 24;
      case DType::F64:
        return 53;
      default:
        return 0;
    }
  };
  if (is_float(from)) {
    if (from == DType::F16 || from == DType::BF16) return to == DType::F32 || to == DType::F64;
    return from == DType::F32 && to == DType::F64;
  }
  if (is_float(to)) return int_bits(from) <= int_bits(to);
  // int -> int: same signedness and wider, or unsigned into a wider signed.
  if (is_signed_int(from) && !is_signed_int(to)) return false;
  return int_bits(from) <= int_bits(to) && (is_signed_int(from) == is_signed_int(to) || int_bits(from) < int_bits(to));
}

class Rewriter {
 public:
  Rewriter(Graph& g, DType low, PassStats& stats) : g_(g), low_(low), stats_(stats) {}

  bool run() {
    std::vector<Node*> order = g_.node_list();
    auto note = [&](Value* v) {
      orig_[v] = v->dtype();
      names_.insert(v->name());
    };
    for (Value* v : g_.inputs()) note(v);
    for (Value* v : g_.constants()) note(v);
    for (Node* n : order)
      for (Value* o : n->outputs()) note(o);
    for (Node* n : order) rewrite(n);
    restore_outputs();
    for (Node* c : casts_) {  // casts of attempts that inference refused
      if (c->output(0)->has_uses() || g_.is_output(c->output(0))) stats_.count("casts-inserted");
      else g_.erase_node(c);
    }
    if (clamped_) {
      std::string msg = fmt::format("precision {}: {} constant value(s) outside the {} range were clamped to +-{:g}",
                                    dtype_name(low_), clamped_, dtype_name(low_), max_finite(low_));
      std::cerr << "warning: " << msg << "\n";
      stats_.notes.push_back(msg);
    }
    return changed_;
  }

 private:
  bool was_f32(Value* v) const {
    auto it = v ? orig_.find(v) : orig_.end();
    return it != orig_.end() && it->second == DType::F32;
  }

  std::string fresh_name(const std::string& base, DType d) {
    if (base.empty()) return "";
    std::string name = base + "." + std::string(dtype_name(d));
    for (int k = 1; names_.count(name); ++k) name = fmt::format("{}.{}.{}", base, dtype_name(d), k);
    names_.insert(name);
    return name;
  }

  // `v` in dtype `d`: itself, a converted constant, or a cast placed before
  // `before_` (nullptr: at the end), made once per value and dtype.
  Value* version(Value* v, DType d) {
    if (v->dtype() == d) return v;
    auto key = std::make_pair(v, d);
    if (auto it = versions_.find(key); it != versions_.end()) return it->second;
    Value* r;
    if (v->is_constant() && v->has_data() && v->dtype() == DType::F32) {
      r = g_.add_constant(fresh_name(v->name(), d), convert(v->data(), d));
      stats_.count("weights-converted");
    } else {
      TensorType t = v->type();
      t.dtype = d;
      AttrMap a;
      a.set("to", std::string(dtype_name(d)));
      Node* c = g_.add_node("cast", {v}, {t}, std::move(a), "", before_);
      c->output(0)->set_name(fresh_name(v->name(), d));
      casts_.push_back(c);
      r = c->output(0);
    }
    versions_[key] = r;
    changed_ = true;
    return r;
  }

  // f32 weights to f16/bf16, clamping finite values beyond the largest finite
  // value of the target (which would otherwise round to infinity).
  Tensor convert(const Tensor& src, DType d) {
    Tensor t(TensorType(d, src.shape(), src.type().layout));
    const float* s = src.data<float>();
    uint16_t* o = t.data<uint16_t>();
    const float hi = float(max_finite(d));
    const bool half = d == DType::F16;
    int64_t flushed = 0;
    for (int64_t i = 0; i < src.numel(); ++i) {
      float x = s[i];
      if (std::fabs(x) > hi && std::fabs(x) != INFINITY) {  // NaN compares false: kept
        x = std::copysign(hi, x);
        ++clamped_;
      }
      o[i] = half ? float_to_half(x) : float_to_bf16(x);
      flushed += (o[i] & 0x7fff) == 0 && x != 0;  // a nonzero weight became +-0
    }
    if (clamped_) stats_.counters["weight-values-clamped"] = clamped_;
    if (flushed) stats_.count("weight-values-flushed-to-zero", flushed);
    return t;
  }

  void set_operands(Node* n, const std::vector<Value*>& from, DType d) {
    for (int i = 0; i < n->num_inputs(); ++i)
      if (was_f32(from[i])) n->set_input(i, version(from[i], d));
  }

  // Re-infers result dtypes after operands changed; false when the op's
  // inference refuses them (or they would change a shape).
  bool reinfer(Node* n) {
    const OpDef* def = op_registry().find(n->op());
    if (!def) return false;
    std::vector<TensorType> types;
    try {
      InferContext ctx(n->op(), n->inputs(), n->attrs(), n->num_outputs(), n->describe());
      types = infer_types(*def, ctx);
    } catch (const Error&) {
      return false;
    }
    if (int(types.size()) != n->num_outputs()) return false;
    for (int i = 0; i < n->num_outputs(); ++i)
      if (types[i].shape != n->output(i)->shape()) return false;
    for (int i = 0; i < n->num_outputs(); ++i) {
      TensorType t = n->output(i)->type();
      t.dtype = types[i].dtype;
      n->output(i)->set_type(t);
    }
    return true;
  }

  void rewrite(Node* n) {
    PrecisionClass cls = n->body() ? PrecisionClass::Float32 : precision_class(n->op());
    if (cls == PrecisionClass::Cast) return;
    const std::vector<Value*> from = n->inputs();
    bool any = false;
    DType widest = low_;
    bool follow_has_data = false;
    for (Value* v : from) {
      if (!was_f32(v)) continue;
      any = true;
      if (!v->is_constant()) {
        follow_has_data = true;
        if (v->dtype() == DType::F32) widest = DType::F32;
      }
    }
    if (!any) return;
    DType want = DType::F32;
    if (cls == PrecisionClass::Reduced) want = low_;
    if (cls == PrecisionClass::Follow && follow_has_data) want = widest;
    before_ = n;
    if (want != DType::F32) {
      set_operands(n, from, want);
      if (reinfer(n)) {
        stats_.count("nodes-reduced");
        return;
      }
      n->set_inputs(from);
      stats_.count("kept-f32-by-inference");
    }
    // FP32 operands: the model's own types, so the results keep theirs.
    set_operands(n, from, DType::F32);
    if (cls == PrecisionClass::Float32) stats_.count("nodes-f32");
  }

  // Graph outputs keep the model's dtypes; a boundary cast takes over the
  // output's name (callers bind outputs by name).
  void restore_outputs() {
    before_ = nullptr;
    std::set<Value*> renamed;
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      Value* v = g_.outputs()[i];
      auto it = orig_.find(v);
      if (it == orig_.end() || v->dtype() == it->second) continue;
      Value* c = version(v, it->second);
      if (!renamed.count(c)) {
        std::string name = v->name();
        v->set_name(fresh_name(name, v->dtype()));
        c->set_name(name);
        renamed.insert(c);
      }
      g_.set_output(int(i), c);
    }
  }

  Graph& g_;
  DType low_;
  PassStats& stats_;
  std::unordered_map<const Value*, DType> orig_;
  std::set<std::string> names_;
  std::map<std::pair<Value*, DType>, Value*> versions_;
  std::vector<Node*> casts_;
  Node* before_ = nullptr;
  int64_t clamped_ = 0;
  bool changed_ = false;
};

// Folds casts that cancel: cast(cast(x: A -> B) -> C) reads x directly when
// A -> B widened exactly, and a cast to the dtype its operand has goes away
// (unless it is a graph output, whose name callers bind).
bool fold_casts(Graph& g, PassStats& stats) {
  bool changed = false;
  std::set<Node*> maybe_dead;
  for (Node* n : g.node_list()) {
    if (n->op() != "cast" || !n->input(0)) continue;
    Value* x = n->input(0);
    while (Node* p = x->producer()) {
      if (p->op() != "cast" || !p->input(0) || !exactly_widens(p->input(0)->dtype(), x->dtype())) break;
      n->set_input(0, p->input(0));
      maybe_dead.insert(p);
      x = p->input(0);
      stats.count("casts-folded");
      changed = true;
    }
    if (x->dtype() == n->output(0)->dtype() && !g.is_output(n->output(0))) {
      g.replace_all_uses(n->output(0), x);
      g.erase_node(n);
      stats.count("casts-folded");
      changed = true;
    }
  }
  // Inner casts nobody reads any more, latest first so chains go in one sweep.
  std::vector<Node*> order = g.node_list();
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    if (maybe_dead.count(*it) && !(*it)->output(0)->has_uses() && !g.is_output((*it)->output(0))) g.erase_node(*it);
  return changed;
}

bool mark_tf32(Graph& g, PassStats& stats) {
  bool changed = false;
  for (const auto& n : g.nodes()) {
    if (!tf32_capable(n->op()) || !n->input(0) || n->input(0)->dtype() != DType::F32) continue;
    if (n->attrs().get_int("tf32", 0) == 1) continue;
    n->attrs().set("tf32", int64_t{1});
    stats.count("tf32-marked");
    changed = true;
  }
  return changed;
}

class Precision : public Pass {
 public:
  std::string_view name() const override { return "precision"; }
  bool run(Graph& g, const PassOptions& opts, PassStats& stats) override {
    if (opts.precision == "tf32") return mark_tf32(g, stats);
    DType low = reduced_dtype(opts.precision);
    if (low == DType::F32) return false;
    bool changed = Rewriter(g, low, stats).run();
    changed |= fold_casts(g, stats);
    if (changed) g.remove_unused_constants();
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> create_precision_pass() { return std::make_unique<Precision>(); }

}  // namespace kiln
