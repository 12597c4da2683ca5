// Symbolic causal masks (passes/causal_mask_symbolic.h). A "counter" is an
// integer value that, at every element, equals offset + the element's
// coordinate along one axis (the others all 1): a range of step 1 and what
// adds, subtracts, reshapes or integer casts make of it. Its offset is a
// polynomial over the symbols (a decoder's `past` is a splat<past>
// constant), so two counters compare the same way at every shape when their
// offsets differ by a polynomial that does.
#include "passes/causal_mask_symbolic.h"

#include <optional>

#include "ir/symbolic_dim.h"
#include "passes/pattern_util.h"

namespace kiln::patterns {
namespace {

// offset + coordinate along `axis` (counted from the right; -1 when every
// dim is 1 and the value is the offset alone).
struct Counter {
  DimPoly offset;
  int axis = -1;
  int64_t len = 1;  // the dim along `axis`
};

DimPoly poly_add(DimPoly a, const DimPoly& b, int64_t sign) {
  for (const auto& [m, c] : b) {
    int64_t& x = a[m];
    x += sign * c;
    if (x == 0) a.erase(m);
  }
  return a;
}

DimPoly poly_of_value(int64_t v) {
  if (is_symbolic_dim(v)) return dim_poly(v);
  DimPoly p;
  if (v != 0) p[{}] = v;
  return p;
}

// The value of an integer scalar constant (symbolic or not).
std::optional<DimPoly> scalar_poly(const Value* v) {
  if (!v || !v->is_constant() || !v->has_data() || !is_int(v->dtype()) || has_symbolic_dims(v->shape()) ||
      v->type().numel() != 1)
    return std::nullopt;
  return poly_of_value(v->data().get_int(0));
}

// The axis (from the right) of the one dim of `s` that is not a static 1;
// -1 when every dim is 1; nullopt when two are not.
std::optional<int> counting_axis(const Shape& s) {
  int axis = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == 1) continue;
    if (axis >= 0) return std::nullopt;
    axis = static_cast<int>(s.size() - 1 - i);
  }
  return axis;
}

int64_t dim_at(const Shape& s, int axis) { return s[s.size() - 1 - axis]; }

std::optional<Counter> counter(const Value* v, int depth = 0) {
  if (!v || !is_int(v->dtype()) || depth > 16) return std::nullopt;
  const Node* n = v->producer();
  if (!n || n->num_outputs() != 1) return std::nullopt;
  const std::string& op = n->op();
  if (op == "range") {
    std::optional<DimPoly> start = scalar_poly(n->input(0)), delta = scalar_poly(n->input(2));
    if (!start || !delta || *delta != poly_of_value(1) || v->shape().size() != 1) return std::nullopt;
    return Counter{*start, v->shape()[0] == 1 ? -1 : 0, v->shape()[0]};
  }
  if (op == "add" || op == "sub") {
    for (int side = 0; side < 2; ++side) {
      if (op == "sub" && side == 1) break;  // c - x counts down
      std::optional<DimPoly> c = scalar_poly(n->input(1 - side));
      if (!c || n->input(side)->shape() != v->shape()) continue;
      std::optional<Counter> x = counter(n->input(side), depth + 1);
      if (!x) return std::nullopt;
      x->offset = poly_add(x->offset, *c, op == "add" ? 1 : -1);
      return x;
    }
    return std::nullopt;
  }
  if (op == "reshape" || op == "identity" || op == "cast") {
    // A cast to a 32- or 64-bit integer type: the counts here are sizes of
    // tensors (< 2^31), inside their range; a narrower type could wrap.
    DType t = v->dtype();
    if (op == "cast" && t != DType::I32 && t != DType::I64 && t != DType::U32 && t != DType::U64) return std::nullopt;
    std::optional<Counter> x = counter(n->input(0), depth + 1);
    if (!x) return std::nullopt;
    std::optional<int> axis = counting_axis(v->shape());
    if (!axis) return std::nullopt;
    int64_t len_in = x->axis < 0 ? 1 : dim_at(n->input(0)->shape(), x->axis);
    int64_t len_out = *axis < 0 ? 1 : dim_at(v->shape(), *axis);
    if (len_in != len_out) return std::nullopt;
    x->axis = *axis;
    x->len = len_out;
    return x;
  }
  return std::nullopt;
}

// Counts along the keys (the last axis of [.., Sq, Sk]) or the queries.
bool counts_along(const Counter& c, int axis, int64_t len) {
  return c.len == len && (c.axis == axis || (c.axis < 0 && len == 1));
}

}  // namespace

bool symbolic_causal_cond(const Value* cond, int64_t sq, int64_t sk, bool masked_when_true) {
  if (!cond || cond->dtype() != DType::Bool || !cond->producer()) return false;
  const Shape& s = cond->shape();
  if (s.size() < 2 || s[s.size() - 2] != sq || s.back() != sk) return false;
  for (size_t i = 0; i + 2 < s.size(); ++i)
    if (s[i] != 1) return false;
  const Node* n = cond->producer();
  const std::string& op = n->op();
  bool le = op == "less_or_equal", lt = op == "less", ge = op == "greater_or_equal", gt = op == "greater";
  if (!(le || lt || ge || gt) || n->num_inputs() != 2) return false;
  std::optional<Counter> x = counter(n->input(0)), y = counter(n->input(1));
  if (!x || !y) return false;
  // Written as op(keys, queries): op(queries, keys) is the mirrored op.
  if (!(counts_along(*x, 0, sk) && counts_along(*y, 1, sq))) {
    if (!(counts_along(*x, 1, sq) && counts_along(*y, 0, sk))) return false;
    std::swap(x, y);
    std::swap(le, ge);
    std::swap(lt, gt);
  }
  // keys a + j, queries b + i: le is j <= i + (b - a); lt is j <= i + (b - a - 1);
  // ge is j > i + (b - a - 1); gt is j > i + (b - a).
  DimPoly d = poly_add(y->offset, x->offset, -1);
  if (lt || ge) d = poly_add(d, poly_of_value(1), -1);
  const bool allowed_when_true = le || lt;
  if (allowed_when_true == masked_when_true) return false;
  DimPoly want = poly_add(poly_of_value(sk), poly_of_value(sq), -1);
  for (const auto& [m, c] : want)
    if (c < 0) return false;  // Sq > Sk at some shape: rows with no key
  return d == want;
}

bool symbolic_causal_additive(const Value* mask, int64_t sq, int64_t sk, bool (*very_negative)(double, DType),
                              DType dt) {
  const Node* n = mask ? mask->producer() : nullptr;
  if (!n || n->op() != "where" || n->num_inputs() != 3 || !is_float(mask->dtype())) return false;
  std::optional<double> a = uniform_value(n->input(1)), b = uniform_value(n->input(2));
  if (!a || !b) return false;
  if (*a == 0 && very_negative(*b, dt)) return symbolic_causal_cond(n->input(0), sq, sk, false);
  if (*b == 0 && very_negative(*a, dt)) return symbolic_causal_cond(n->input(0), sq, sk, true);
  return false;
}

}  // namespace kiln::patterns
