#include "ir/control_flow.h"

#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/symbolic_dim.h"

namespace kiln {

namespace {

// A condition or trip count: one element (ONNX allows shape [] or [1]).
bool is_single(const TensorType& t, DType dt) { return t.dtype == dt && t.numel() == 1; }

// Types compare by dtype and shape: layout tags are the layout pass's, and
// the verifier does not compare them elsewhere either (docs/ir.md).
bool differ(const TensorType& a, const TensorType& b) { return a.dtype != b.dtype || a.shape != b.shape; }

class Checker {
 public:
  explicit Checker(const Node& n) : n_(n) {}

  template <typename... Args>
  [[noreturn]] void err(fmt::format_string<Args...> f, Args&&... args) const {
    throw Error(n_.describe() + ": " + fmt::format(f, std::forward<Args>(args)...));
  }

  void regions(int count) const {
    if (n_.num_regions() != count) err("has {} regions, {} takes {}", n_.num_regions(), n_.op(), count);
  }
  void attrs(std::initializer_list<const char*> known) const {
    for (const auto& [name, a] : n_.attrs()) {
      bool ok = false;
      for (const char* k : known) ok |= name == k;
      if (!ok) err("unknown attribute '{}'", name);
    }
  }
  // Region `r`'s parameter `p` has type `t`.
  void param(int r, size_t p, const TensorType& t, const char* what) const {
    const Graph& g = *n_.region(r);
    if (p >= g.inputs().size()) err("region {} (@{}) lacks parameter {} ({})", r, g.name(), p, what);
    if (differ(g.inputs()[p]->type(), t))
      err("region {} (@{}) parameter {} ({}) has type {} but must be {}", r, g.name(), p, what,
          g.inputs()[p]->type().str(), t.str());
  }
  void param_count(int r, size_t count) const {
    const Graph& g = *n_.region(r);
    if (g.inputs().size() != count)
      err("region {} (@{}) takes {} parameters, expected {}", r, g.name(), g.inputs().size(), count);
  }
  void return_count(int r, size_t count) const {
    const Graph& g = *n_.region(r);
    if (g.outputs().size() != count)
      err("region {} (@{}) returns {} values, expected {}", r, g.name(), g.outputs().size(), count);
  }
  const TensorType& ret(int r, size_t i) const {
    const Value* v = n_.region(r)->outputs()[i];
    if (!v) err("region {} returns no value for result {}", r, i);
    return v->type();
  }
  const Value& operand(int i, const char* what) const {
    if (!n_.input(i)) err("operand {} ({}) is absent", i, what);
    return *n_.input(i);
  }
  // Captures: operands [first, num_inputs) are region parameters [p0, ...).
  void captures(int r, int first, size_t p0) const {
    for (int i = first; i < n_.num_inputs(); ++i)
      param(r, p0 + size_t(i - first), operand(i, "capture").type(), "capture");
  }

 private:
  const Node& n_;
};

// Whether a branch result of type `ret` fits the if's result type `res`,
// where a dim of `res` equal to `size_dim` (the if's size symbol, or 0 for
// none) stands for whatever the taken branch gives (ir/data_dependent.h).
bool fits_branch(const TensorType& ret, const TensorType& res, int64_t size_dim) {
  if (ret.dtype != res.dtype || ret.shape.size() != res.shape.size()) return false;
  for (size_t d = 0; d < ret.shape.size(); ++d)
    if (ret.shape[d] != res.shape[d] && !(size_dim != 0 && res.shape[d] == size_dim)) return false;
  return true;
}

void check_if(const Node& n, const Checker& c) {
  c.regions(2);
  c.attrs({kSizeSymbolAttr});
  if (n.num_inputs() < 1 || !n.input(0)) c.err("needs a condition operand");
  if (!is_single(n.input(0)->type(), DType::Bool))
    c.err("the condition has type {}; it must be a single bool", n.input(0)->type().str());
  int64_t size_dim = 0;
  if (n.attrs().has(kSizeSymbolAttr)) {
    const std::string s = n.attrs().get_string(kSizeSymbolAttr, "");
    if (!is_symbol_name(s)) c.err("{} \"{}\" is not a valid symbol name", kSizeSymbolAttr, s);
    size_dim = symbol_dim(s);
  }
  for (int r = 0; r < 2; ++r) {
    c.param_count(r, size_t(n.num_inputs() - 1));
    c.captures(r, 1, 0);
    c.return_count(r, size_t(n.num_outputs()));
    for (int i = 0; i < n.num_outputs(); ++i)
      if (!fits_branch(c.ret(r, i), n.output(i)->type(), size_dim))
        c.err("result {} has type {} but the {} branch returns {}", i, n.output(i)->type().str(),
              r == 0 ? "then" : "else", c.ret(r, i).str());
  }
}

void check_loop(const Node& n, const Checker& c) {
  c.regions(1);
  c.attrs({"carried"});
  LoopSignature s = loop_signature(n);
  if (s.carried < 0 || 2 + s.carried > n.num_inputs() || s.carried > n.num_outputs())
    c.err("carried={} does not fit its {} operands and {} results", s.carried, n.num_inputs(), n.num_outputs());
  if (n.input(0) && !is_single(n.input(0)->type(), DType::I64))
    c.err("the trip count has type {}; it must be a single i64", n.input(0)->type().str());
  if (n.input(1) && !is_single(n.input(1)->type(), DType::Bool))
    c.err("the condition has type {}; it must be a single bool", n.input(1)->type().str());
  c.param_count(0, size_t(n.num_inputs()));
  c.param(0, 0, TensorType(DType::I64, {}), "iteration number");
  c.param(0, 1, TensorType(DType::Bool, {}), "condition");
  for (int i = 0; i < s.carried; ++i) {
    c.param(0, 2 + i, c.operand(2 + i, "initial loop-carried value").type(), "loop-carried value");
    if (differ(n.output(i)->type(), n.input(2 + i)->type()))
      c.err("result {} has type {} but loop-carried value {} starts as {}", i, n.output(i)->type().str(), i,
            n.input(2 + i)->type().str());
  }
  c.captures(0, 2 + s.carried, size_t(2 + s.carried));
  c.return_count(0, size_t(1 + s.carried + s.scans));
  if (!is_single(c.ret(0, 0), DType::Bool))
    c.err("the body's condition result is {}, not a single bool", c.ret(0, 0).str());
  for (int i = 0; i < s.carried; ++i)
    if (differ(c.ret(0, 1 + i), n.input(2 + i)->type()))
      c.err("the body returns loop-carried value {} as {} but it enters as {}", i, c.ret(0, 1 + i).str(),
            n.input(2 + i)->type().str());
  int64_t trips = -1;
  for (int k = 0; k < s.scans; ++k) {
    const TensorType& elem = c.ret(0, 1 + s.carried + k);
    const TensorType& out = n.output(s.carried + k)->type();
    Shape want = elem.shape;
    want.insert(want.begin(), out.rank() ? out.shape[0] : 0);
    if (out.dtype != elem.dtype || out.rank() != elem.rank() + 1 || out.shape != want)
      c.err("scan output {} has type {} but the body's element is {} (expected [trips, ...element dims])", k, out.str(),
            elem.str());
    if (trips >= 0 && out.shape[0] != trips)
      c.err("scan outputs disagree on the trip count ({} and {})", trips, out.shape[0]);
    trips = out.shape[0];
  }
}

void check_scan(const Node& n, const Checker& c) {
  c.regions(1);
  c.attrs({"carried", "scan_inputs", "input_axes", "input_reverse", "output_axes", "output_reverse", "batched"});
  ScanSignature s = scan_signature(n);
  if (s.carried < 0 || s.scan_inputs < 1 || s.carried + s.scan_inputs > n.num_inputs() || s.carried > n.num_outputs())
    c.err("carried={} scan_inputs={} do not fit its {} operands and {} results", s.carried, s.scan_inputs,
          n.num_inputs(), n.num_outputs());
  if (int(s.input_axes.size()) != s.scan_inputs || int(s.input_reverse.size()) != s.scan_inputs ||
      int(s.output_axes.size()) != s.scan_outputs || int(s.output_reverse.size()) != s.scan_outputs)
    c.err("input_axes/input_reverse need {} entries and output_axes/output_reverse {}", s.scan_inputs, s.scan_outputs);
  const int b = s.batched ? 1 : 0;
  auto unbatched = [&](const TensorType& t, const char* what, int64_t batch) {
    if (!b) return t;
    if (t.rank() < 1 || t.shape[0] != batch) c.err("{} of type {} lacks the batch dim {}", what, t.str(), batch);
    return TensorType(t.dtype, Shape(t.shape.begin() + 1, t.shape.end()));
  };
  int64_t batch = b ? c.operand(s.carried, "scan input").shape().at(0) : 0;
  c.param_count(0, size_t(n.num_inputs()));
  for (int i = 0; i < s.carried; ++i) {
    TensorType st = unbatched(c.operand(i, "initial state").type(), "a state", batch);
    c.param(0, i, st, "state");
    if (differ(n.output(i)->type(), n.input(i)->type()))
      c.err("result {} has type {} but state {} starts as {}", i, n.output(i)->type().str(), i,
            n.input(i)->type().str());
  }
  int64_t trips = -1;
  for (int j = 0; j < s.scan_inputs; ++j) {
    TensorType x = unbatched(c.operand(s.carried + j, "scan input").type(), "a scan input", batch);
    int64_t axis = s.input_axes[j];
    if (axis < 0 || axis >= x.rank()) c.err("input_axes[{}] = {} is out of range for {}", j, axis, x.str());
    if (trips >= 0 && x.shape[axis] != trips)
      c.err("scan inputs disagree on the sequence length ({} and {})", trips, x.shape[axis]);
    trips = x.shape[axis];
    x.shape.erase(x.shape.begin() + axis);
    c.param(0, s.carried + j, x, "scan input slice");
  }
  c.captures(0, s.carried + s.scan_inputs, size_t(s.carried + s.scan_inputs));
  c.return_count(0, size_t(s.carried + s.scan_outputs));
  for (int i = 0; i < s.carried; ++i)
    if (differ(c.ret(0, i), n.region(0)->inputs()[i]->type()))
      c.err("the body returns state {} as {} but it enters as {}", i, c.ret(0, i).str(),
            n.region(0)->inputs()[i]->type().str());
  for (int k = 0; k < s.scan_outputs; ++k) {
    const TensorType& elem = c.ret(0, s.carried + k);
    int64_t axis = s.output_axes[k];
    if (axis < 0 || axis > elem.rank()) c.err("output_axes[{}] = {} is out of range for {}", k, axis, elem.str());
    Shape want = elem.shape;
    want.insert(want.begin() + axis, trips);
    if (b) want.insert(want.begin(), batch);
    const TensorType& out = n.output(s.carried + k)->type();
    if (out.dtype != elem.dtype || out.shape != want)
      c.err("scan output {} has type {} but {} elements of {} give {}", k, out.str(), trips, elem.str(),
            TensorType(elem.dtype, want).str());
  }
}

}  // namespace

bool is_control_flow_op(std::string_view op) { return op == "if" || op == "loop" || op == "scan"; }

LoopSignature loop_signature(const Node& n) {
  LoopSignature s;
  s.carried = static_cast<int>(n.attrs().get_int("carried", 0));
  s.captures = n.num_inputs() - 2 - s.carried;
  s.scans = n.num_outputs() - s.carried;
  return s;
}

ScanSignature scan_signature(const Node& n) {
  ScanSignature s;
  const AttrMap& a = n.attrs();
  s.carried = static_cast<int>(a.get_int("carried", 0));
  s.scan_inputs = static_cast<int>(a.get_int("scan_inputs", 0));
  s.captures = n.num_inputs() - s.carried - s.scan_inputs;
  s.scan_outputs = n.num_outputs() - s.carried;
  s.batched = a.get_int("batched", 0) != 0;
  s.input_axes = a.get_ints("input_axes");
  s.input_reverse = a.get_ints("input_reverse");
  s.output_axes = a.get_ints("output_axes");
  s.output_reverse = a.get_ints("output_reverse");
  return s;
}

void check_control_flow(const Node& n) {
  Checker c(n);
  for (int i = 0; i < n.num_regions(); ++i)
    if (!n.region(i)) c.err("region {} is missing", i);
  if (n.op() == "if") return check_if(n, c);
  if (n.op() == "loop") return check_loop(n, c);
  if (n.op() == "scan") return check_scan(n, c);
  c.err("is not a control-flow op");
}

}  // namespace kiln
