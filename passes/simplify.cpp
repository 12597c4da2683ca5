// simplify: algebraic simplification, repeated to a fixed point (at most
// kMaxSweeps sweeps over the graph in order).
//
// Rewrites (each counted in the stats under the name in brackets):
//  - no-ops disappear: identity [identity]; reshape to the operand's shape,
//    transpose with the identity perm, cast to the operand's dtype, slice that
//    takes every element in order, expand/tile/pad that change nothing,
//    concat/split of one operand/result [noop-<op>];
//  - reshape of reshape reads the first operand [reshape-reshape]; transpose
//    of transpose becomes one transpose, or none when they cancel
//    [transpose-transpose]; a transpose that keeps the order of every dim
//    larger than 1 moves no data and becomes a reshape [transpose-to-reshape];
//  - cast of a cast that was lossless (f16->f32, i32->i64, bool->anything...)
//    casts the original once, or not at all when it returns to the original
//    dtype [cast-cast];
//  - x*1, 1*x, x+0, 0+x, x-0, x/1 with a constant 1 or 0 give x
//    [mul-one, add-zero, sub-zero, div-one]; pow(x, 1) gives x, pow(x, 2)
//    becomes mul(x, x), pow(x, -1) and div(1, x) become reciprocal(x)
//    [pow-one, pow-two, pow-to-reciprocal, div-to-reciprocal];
//  - neg(neg(x)) and not(not(x)) give x [neg-neg, not-not]; x + neg(y) and
//    neg(y) + x become x - y, x - neg(y) becomes x + y [add-neg, sub-neg].
//
// Every rewrite keeps dtype and shape exactly: the arithmetic identities only
// apply when broadcasting against the constant does not change x's type, and
// a replacement node is built only when its op's inference gives the old
// result type. All are exact in IEEE arithmetic except x + 0 for x = -0.0,
// which gives -0.0 instead of +0.0 (they compare equal). Left alone because
// they are not exact: reciprocal(reciprocal(x)), sqrt(x)*sqrt(x),
// pow(x, 0.5) -> sqrt(x) (differs at -0 and -inf), x*0. pow rewrites apply
// to floating bases only (integer pow has its own wrapping rules).
// Structural rewrites (merging reshapes/transposes, transpose to reshape)
// skip values with a non-default layout tag; a graph output keeps its name
// when the value it is replaced by takes its place.
#include <algorithm>
#include <cmath>

#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using namespace rewrite;

constexpr int kMaxSweeps = 8;

bool default_layout(const Node* n) {
  for (Value* v : n->inputs())
    if (v && v->type().layout != Layout::Default) return false;
  for (Value* v : n->outputs())
    if (v->type().layout != Layout::Default) return false;
  return true;
}

// The node producing `v` when it is the op `op` (single result, no body).
Node* producer_op(Value* v, const char* op) {
  if (!v) return nullptr;
  Node* p = v->producer();
  if (!p || p->op() != op || p->num_outputs() != 1 || p->body()) return nullptr;
  return p;
}

// Every value of `from` is exactly representable in `to`, so casting there
// and back (or on to a third dtype) loses nothing.
bool lossless_cast(DType from, DType to) {
  if (from == to || from == DType::Bool) return true;
  auto one_of = [&](std::initializer_list<DType> l) { return std::find(l.begin(), l.end(), to) != l.end(); };
  using D = DType;
  switch (from) {
    case D::F16:
    case D::BF16:
      return one_of({D::F32, D::F64});
    case D::F32:
      return one_of({D::F64});
    case D::I8:
      return one_of({D::I16, D::I32, D::I64, D::F32, D::F64});
    case D::I16:
      return one_of({D::I32, D::I64, D::F32, D::F64});
    case D::I32:
      return one_of({D::I64, D::F64});
    case D::U8:
      return one_of({D::U16, D::U32, D::U64, D::I16, D::I32, D::I64, D::F32, D::F64});
    case D::U16:
      return one_of({D::U32, D::U64, D::I32, D::I64, D::F32, D::F64});
    case D::U32:
      return one_of({D::U64, D::I64, D::F64});
    default:
      return false;
  }
}

bool is_identity_perm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != int64_t(i)) return false;
  return true;
}

// A slice reading every element in order: per dim, the whole extent from 0
// with step 1 (any slice of a dim of size 0 or 1 that keeps its size reads it all).
bool slice_is_noop(const Node* n) {
  const Shape& in = n->input(0)->shape();
  const Shape& out = n->output(0)->shape();
  std::vector<int64_t> st = n->attrs().get_ints("starts"), sp = n->attrs().get_ints("steps");
  if (in != out || st.size() != in.size() || sp.size() != in.size()) return false;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] > 1 && (st[i] != 0 || sp[i] != 1)) return false;
  return true;
}

class Simplifier {
 public:
  Simplifier(Graph& g, PassStats& stats) : g_(g), stats_(stats) {}

  bool visit(Node* n) {
    if (n->body() || n->num_outputs() != 1 || n->num_inputs() == 0 || !n->input(0)) return false;
    const std::string& op = n->op();
    Value* x = n->input(0);
    const AttrMap& a = n->attrs();
    if (op == "identity") return forward(n, x, "identity");
    if (op == "reshape") return reshape(n);
    if (op == "transpose") return transpose(n);
    if (op == "cast") return cast(n);
    if (op == "slice") return slice_is_noop(n) && forward(n, x, "noop-slice");
    if (op == "expand") return forward(n, x, "noop-expand");  // only when the types match
    if (op == "tile") {
      std::vector<int64_t> r = a.get_ints("repeats");
      return std::all_of(r.begin(), r.end(), [](int64_t v) { return v == 1; }) && forward(n, x, "noop-tile");
    }
    if (op == "pad") {
      std::vector<int64_t> p = a.get_ints("pads");
      return std::all_of(p.begin(), p.end(), [](int64_t v) { return v == 0; }) && forward(n, x, "noop-pad");
    }
    if (op == "concat") return n->num_inputs() == 1 && forward(n, x, "noop-concat");
    if (op == "split") return forward(n, x, "noop-split");
    if (op == "neg" || op == "not") {
      Node* p = producer_op(x, op.c_str());
      return p && forward(n, p->input(0), op == "neg" ? "neg-neg" : "not-not", p);
    }
    if (n->num_inputs() != 2 || !n->input(1)) return false;
    Value* y = n->input(1);
    if (op == "mul")
      return forward(n, y, "mul-one", nullptr, is_splat_of(x, 1)) ||
             forward(n, x, "mul-one", nullptr, is_splat_of(y, 1));
    if (op == "add") {
      if (forward(n, y, "add-zero", nullptr, is_splat_of(x, 0)) ||
          forward(n, x, "add-zero", nullptr, is_splat_of(y, 0)))
        return true;
      if (Node* p = producer_op(y, "neg")) return rebuild(n, "sub", {x, p->input(0)}, {}, "add-neg", p);
      if (Node* p = producer_op(x, "neg")) return rebuild(n, "sub", {y, p->input(0)}, {}, "add-neg", p);
      return false;
    }
    if (op == "sub") {
      if (forward(n, x, "sub-zero", nullptr, is_splat_of(y, 0))) return true;
      Node* p = producer_op(y, "neg");
      return p && rebuild(n, "add", {x, p->input(0)}, {}, "sub-neg", p);
    }
    if (op == "div") {
      if (forward(n, x, "div-one", nullptr, is_splat_of(y, 1))) return true;
      return is_float(y->dtype()) && is_splat_of(x, 1) && rebuild(n, "reciprocal", {y}, {}, "div-to-reciprocal");
    }
    if (op == "pow" && is_float(x->dtype())) {
      if (is_splat_of(y, 1)) return forward(n, x, "pow-one");
      if (is_splat_of(y, 2)) return rebuild(n, "mul", {x, x}, {}, "pow-two");
      if (is_splat_of(y, -1)) return rebuild(n, "reciprocal", {x}, {}, "pow-to-reciprocal");
    }
    return false;
  }

 private:
  // Replaces n's result by `to` when `cond` holds and the types allow; then
  // erases `dead_candidate` if the rewrite left it unused.
  bool forward(Node* n, Value* to, const char* what, Node* dead_candidate = nullptr, bool cond = true) {
    if (!cond || !can_replace(g_, n->output(0), to)) return false;
    replace_node_result(g_, n, to);
    if (dead_candidate) erase_if_dead(g_, dead_candidate);
    stats_.count(what);
    return true;
  }

  // Replaces n by a new node `op(inputs) {attrs}` with n's result type, when
  // inference agrees on that type.
  bool rebuild(Node* n, const std::string& op, std::vector<Value*> inputs, AttrMap attrs, const char* what,
               Node* dead_candidate = nullptr) {
    const TensorType& t = n->output(0)->type();
    if (!default_layout(n) || !infers_to(op, inputs, attrs, t)) return false;
    Node* r = g_.add_node(op, std::move(inputs), {t}, std::move(attrs), n->name(), n);
    if (!can_replace(g_, n->output(0), r->output(0))) {
      g_.erase_node(r);
      return false;
    }
    std::string name = n->output(0)->name();
    replace_node_result(g_, n, r->output(0));
    r->output(0)->set_name(name);
    if (dead_candidate) erase_if_dead(g_, dead_candidate);
    stats_.count(what);
    return true;
  }

  // Points n's operand 0 at `to` (dropping the producer p if now unused).
  void bypass(Node* n, Value* to, Node* p, const char* what) {
    n->set_input(0, to);
    std::string pname = p->name();
    if (erase_if_dead(g_, p)) n->set_name(join_names(pname, n->name()));
    stats_.count(what);
  }

  bool reshape(Node* n) {
    Value* x = n->input(0);
    if (x->shape() == n->output(0)->shape()) return forward(n, x, "noop-reshape");
    Node* p = producer_op(x, "reshape");
    if (!p || !default_layout(n) || !default_layout(p)) return false;
    Value* src = p->input(0);
    if (src->shape() == n->output(0)->shape() && forward(n, src, "reshape-reshape", p)) return true;
    bypass(n, src, p, "reshape-reshape");
    return true;
  }

  bool transpose(Node* n) {
    Value* x = n->input(0);
    std::vector<int64_t> perm = n->attrs().get_ints("perm");
    if (is_identity_perm(perm)) return forward(n, x, "noop-transpose");
    if (!default_layout(n)) return false;
    if (Node* p = producer_op(x, "transpose"); p && default_layout(p)) {
      std::vector<int64_t> inner = p->attrs().get_ints("perm"), both(perm.size());
      if (inner.size() != perm.size()) return false;
      for (size_t i = 0; i < perm.size(); ++i) both[i] = inner[perm[i]];
      Value* src = p->input(0);
      if (is_identity_perm(both) && forward(n, src, "transpose-transpose", p)) return true;
      if (is_identity_perm(both)) return false;  // cancels, but n's result is an output src cannot replace
      n->attrs().set("perm", both);
      bypass(n, src, p, "transpose-transpose");
      return true;
    }
    // Dims of size 1 may move freely: if the others keep their order, the
    // elements stay in the same row-major order.
    const Shape& s = x->shape();
    int64_t last = -1;
    for (int64_t d : perm) {
      if (s[d] == 1) continue;
      if (d < last) return false;
      last = d;
    }
    AttrMap ra;
    ra.set("shape", n->output(0)->shape());
    return rebuild(n, "reshape", {x}, std::move(ra), "transpose-to-reshape");
  }

  bool cast(Node* n) {
    Value* x = n->input(0);
    DType to = n->output(0)->dtype();
    if (x->dtype() == to) return forward(n, x, "noop-cast");
    Node* p = producer_op(x, "cast");
    if (!p || !lossless_cast(p->input(0)->dtype(), x->dtype())) return false;
    Value* src = p->input(0);
    if (src->dtype() == to) return forward(n, src, "cast-cast", p);
    bypass(n, src, p, "cast-cast");
    return true;
  }

  Graph& g_;
  PassStats& stats_;
};

class Simplify : public Pass {
 public:
  std::string_view name() const override { return "simplify"; }
  bool run(Graph& g, const PassOptions&, PassStats& stats) override {
    Simplifier s(g, stats);
    bool changed = false;
    for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
      bool any = false;
      // A rewrite erases only the node it visits and that node's producers,
      // which come earlier in the order, so the rest of the snapshot stays valid.
      for (Node* n : g.node_list()) any |= s.visit(n);
      if (!any) break;
      changed = true;
      stats.count("sweeps");
    }
    if (changed) g.remove_unused_constants();
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> create_simplify_pass() { return std::make_unique<Simplify>(); }

}  // namespace kiln
