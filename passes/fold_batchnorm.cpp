// fold-batchnorm: removes inference batch normalizations whose scale, bias,
// mean and var are constants. With a[c] = scale[c] / sqrt(var[c] + epsilon)
// and shift[c] = bias[c] - mean[c] * a[c], BN(y) = a[c] * y + shift[c] on
// channel c (dim 1), so:
//  - when BN's operand is the only use of a conv, conv_transpose, gemm or
//    2-D matmul whose weight is a constant (and whose bias, if any, is a
//    constant), the weight is scaled per output channel and the bias becomes
//    a[c] * bias[c] + shift[c] [into-conv, into-conv-transpose, into-gemm,
//    into-matmul]. A matmul [M,K] x [K,N] becomes a gemm with a bias. For
//    gemm and matmul dim 1 of the result is N, so the weight must be the
//    right-hand operand; its columns (rows when trans_b) are scaled.
//  - any other BN with constant params becomes mul(x, a) + shift with
//    constants shaped [C,1,1,...] in x's dtype, which fusion can merge
//    [to-mul-add].
// Folded values are computed in double and stored in the weight's dtype (x's
// dtype for mul/add). Left alone: BNs whose params are not all constants
// [params-not-constant], and BNs where a folded value is not finite in the
// target dtype (var + epsilon <= 0, f16 overflow) [not-finite]: the BN op
// itself then gives the NaN/Inf results the model asks for. Producers with
// other users stay (folding would change what those users see), as do
// values with a non-default layout tag.
#include <cmath>
#include <optional>

#include "ops/op_helpers.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using namespace rewrite;

struct BnParams {
  std::vector<double> a, shift;  // per channel
};

// a and shift from the BN's constant operands, or nullopt when some operand
// is not a constant or a value is not finite.
std::optional<BnParams> bn_params(const Node* bn, PassStats& stats) {
  const Tensor* p[4];
  for (int i = 0; i < 4; ++i) {
    p[i] = constant_data(bn->input(i + 1));
    if (!p[i]) {
      stats.count("params-not-constant");
      return std::nullopt;
    }
  }
  double eps = bn->attrs().get_float("epsilon", 1e-5f);
  int64_t ch = p[0]->numel();
  BnParams r;
  for (int64_t c = 0; c < ch; ++c) {
    double a = p[0]->get_double(c) / std::sqrt(p[3]->get_double(c) + eps);
    double s = p[1]->get_double(c) - p[2]->get_double(c) * a;
    if (!std::isfinite(a) || !std::isfinite(s)) {
      stats.count("not-finite");
      return std::nullopt;
    }
    r.a.push_back(a);
    r.shift.push_back(s);
  }
  return r;
}

// Reads a constant's elements as double; f32 and f64 straight from storage
// (weights are large), other dtypes through a converted copy.
class Reader {
 public:
  explicit Reader(const Tensor& t) {
    if (t.dtype() == DType::F32) f32_ = t.data<float>();
    else if (t.dtype() == DType::F64) f64_ = t.data<double>();
    else other_ = ops::load_all<double>(t);
  }
  double operator[](int64_t i) const { return f32_ ? f32_[i] : f64_ ? f64_[i] : other_[size_t(i)]; }

 private:
  const float* f32_ = nullptr;
  const double* f64_ = nullptr;
  std::vector<double> other_;
};

// Tensor of `dtype` with element i = f(i) (computed in double), or nullopt
// if some element is not finite once stored (f16 overflow).
template <typename F>
std::optional<Tensor> make_tensor(DType dtype, Shape shape, F f) {
  Tensor t(dtype, std::move(shape));
  const int64_t n = t.numel();
  bool finite = true;
  if (dtype == DType::F32) {
    float* p = t.data<float>();
    for (int64_t i = 0; i < n; ++i) finite &= std::isfinite(p[i] = static_cast<float>(f(i)));
  } else if (dtype == DType::F64) {
    double* p = t.data<double>();
    for (int64_t i = 0; i < n; ++i) finite &= std::isfinite(p[i] = f(i));
  } else {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = f(i);
    ops::store_all(t, v);
    for (double x : ops::load_all<double>(t)) finite &= std::isfinite(x);
  }
  if (!finite) return std::nullopt;
  return t;
}

class BatchNormFolder {
 public:
  BatchNormFolder(Graph& g, PassStats& stats) : g_(g), stats_(stats) {}

  bool visit(Node* bn) {
    if (bn->op() != "batch_normalization" || bn->num_inputs() != 5 || bn->body()) return false;
    Value* x = bn->input(0);
    if (x->type().layout != Layout::Default || bn->output(0)->type().layout != Layout::Default) return false;
    std::optional<BnParams> bp = bn_params(bn, stats_);
    if (!bp) return false;
    Node* p = x->producer();
    bool sole = p && !p->body() && p->num_outputs() == 1 && x->uses().size() == 1 && !g_.is_output(x);
    if (sole && (p->op() == "conv" || p->op() == "conv_transpose") && into_conv(bn, p, *bp)) return true;
    if (sole && p->op() == "gemm" && into_gemm(bn, p, *bp)) return true;
    if (sole && p->op() == "matmul" && into_matmul(bn, p, *bp)) return true;
    return to_mul_add(bn, *bp);
  }
  // Whether constants were added (those of a fold given up are dropped at the end).
  bool made_constants() const { return made_constants_; }

 private:
  Value* constant(const std::string& base, Tensor t) {
    made_constants_ = true;
    if (!names_) names_.emplace(g_);
    return g_.add_constant(names_->fresh(base), std::move(t));
  }

  // Makes `p` (already holding the folded operands) stand for the BN.
  void finish(Node* bn, Node* p, const char* what) {
    p->set_name(join_names(p->name(), bn->name()));
    replace_node_result(g_, bn, p->output(0));
    stats_.count(what);
  }

  bool into_conv(Node* bn, Node* conv, const BnParams& bp) {
    const Tensor* w = constant_data(conv->input(1));
    Value* bias = conv->input(2);
    const Tensor* b = constant_data(bias);
    if (!w || (bias && !b) || w->rank() < 2) return false;
    bool transpose = conv->op() == "conv_transpose";
    int64_t M = int64_t(bp.a.size()), per = w->shape()[0] ? w->numel() / w->shape()[0] : 0;
    // Output channel of weight element i: conv w [M, C/g, k...] -> dim 0;
    // conv_transpose w [C, M/g, k...] -> group(dim 0) * M/g + dim 1.
    int64_t group = conv->attrs().get_int("group", 1), mg = w->shape()[1];
    int64_t cg = group > 0 ? w->shape()[0] / group : 0;
    int64_t k = mg ? per / mg : 0;
    auto channel = [&](int64_t i) {
      if (!transpose) return i / per;
      int64_t ci = i / per, j = (i % per) / k;
      return (ci / cg) * mg + j;
    };
    if ((transpose ? mg * group : w->shape()[0]) != M || (transpose && (cg == 0 || k == 0))) return false;
    Reader wv(*w);
    auto nw = make_tensor(w->dtype(), w->shape(), [&](int64_t i) { return wv[i] * bp.a[channel(i)]; });
    auto nb =
        make_tensor(w->dtype(), {M}, [&](int64_t c) { return (b ? b->get_double(c) : 0.0) * bp.a[c] + bp.shift[c]; });
    if (!nw || !nb) return not_finite();
    std::vector<Value*> ins = {conv->input(0), nullptr, nullptr};
    ins[1] = constant(conv->input(1)->name() + ".bn", std::move(*nw));
    ins[2] = constant(bias ? bias->name() + ".bn" : conv->input(1)->name() + ".bn_bias", std::move(*nb));
    if (!infers_to(conv->op(), ins, conv->attrs(), conv->output(0)->type())) return false;
    conv->set_input(1, ins[1]);
    if (conv->num_inputs() > 2) conv->set_input(2, ins[2]);
    else conv->append_input(ins[2]);
    finish(bn, conv, transpose ? "into-conv-transpose" : "into-conv");
    return true;
  }

  // gemm: y = alpha * op(A) op(B) + beta * C, result [M,N], channels = N.
  bool into_gemm(Node* bn, Node* gemm, const BnParams& bp) {
    const Tensor* w = constant_data(gemm->input(1));
    Value* cv = gemm->input(2);
    const Tensor* c = constant_data(cv);
    if (!w || (cv && !c)) return false;
    bool tb = gemm->attrs().get_int("trans_b", 0) != 0;
    double beta = gemm->attrs().get_float("beta", 1.0f);
    const Shape& out = gemm->output(0)->shape();
    int64_t M = out[0], N = out[1];
    Reader wv(*w);
    auto nw = make_tensor(w->dtype(), w->shape(), [&](int64_t i) {
      int64_t j = tb ? i / w->shape()[1] : i % w->shape()[1];
      return wv[i] * bp.a[j];
    });
    // C' keeps only the rows it needs: [N] when C does not vary along M.
    bool rows = c && c->rank() == 2 && c->shape()[0] != 1;
    Shape cs = rows ? Shape{M, N} : Shape{N};
    std::vector<int64_t> st = {0, 0};
    if (c) {  // strides of C broadcast to [M,N]
      const Shape& s = c->shape();
      if (s.size() == 2) st = {s[0] == 1 ? 0 : s[1], s[1] == 1 ? 0 : 1};
      else if (s.size() == 1) st = {0, s[0] == 1 ? 0 : 1};
    }
    bool has_c = c && beta != 0;  // beta == 0 ignores C, as the gemm kernel does
    auto nc = make_tensor(w->dtype(), cs, [&](int64_t i) {
      int64_t r = rows ? i / N : 0, j = rows ? i % N : i;
      double v = has_c ? beta * c->get_double(r * st[0] + j * st[1]) : 0.0;
      return v * bp.a[j] + bp.shift[j];
    });
    if (!nw || !nc) return not_finite();
    std::string wname = gemm->input(1)->name();
    std::vector<Value*> ins = {gemm->input(0), constant(wname + ".bn", std::move(*nw)),
                               constant(cv ? cv->name() + ".bn" : wname + ".bn_bias", std::move(*nc))};
    AttrMap attrs = gemm->attrs();
    attrs.erase("beta");
    if (!infers_to("gemm", ins, attrs, gemm->output(0)->type())) return false;
    gemm->set_input(1, ins[1]);
    if (gemm->num_inputs() > 2) gemm->set_input(2, ins[2]);
    else gemm->append_input(ins[2]);
    gemm->attrs() = attrs;
    finish(bn, gemm, "into-gemm");
    return true;
  }

  // matmul [M,K] x [K,N] with a constant right operand -> gemm with a bias.
  bool into_matmul(Node* bn, Node* mm, const BnParams& bp) {
    const Tensor* w = constant_data(mm->input(1));
    if (!w || w->rank() != 2 || mm->input(0)->type().rank() != 2) return false;
    int64_t N = w->shape()[1];
    Reader wv(*w);
    auto nw = make_tensor(w->dtype(), w->shape(), [&](int64_t i) { return wv[i] * bp.a[i % N]; });
    auto nb = make_tensor(w->dtype(), {N}, [&](int64_t j) { return bp.shift[j]; });
    if (!nw || !nb) return not_finite();
    std::string wname = mm->input(1)->name();
    std::vector<Value*> ins = {mm->input(0), constant(wname + ".bn", std::move(*nw)),
                               constant(wname + ".bn_bias", std::move(*nb))};
    const TensorType& t = mm->output(0)->type();
    if (!infers_to("gemm", ins, {}, t)) return false;
    Node* gemm = g_.add_node("gemm", ins, {t}, {}, mm->name(), mm);
    gemm->output(0)->set_name(mm->output(0)->name());
    finish(bn, gemm, "into-matmul");
    g_.erase_node(mm);
    return true;
  }

  // y = x * a + shift with [C,1,1,...] constants.
  bool to_mul_add(Node* bn, const BnParams& bp) {
    Value* x = bn->input(0);
    const TensorType& t = bn->output(0)->type();
    Shape ps(std::max(t.rank() - 1, 1), 1);
    ps[0] = int64_t(bp.a.size());
    auto a = make_tensor(t.dtype, ps, [&](int64_t c) { return bp.a[c]; });
    auto s = make_tensor(t.dtype, ps, [&](int64_t c) { return bp.shift[c]; });
    if (!a || !s) return not_finite();
    std::string base = bn->name().empty() ? bn->output(0)->name() : bn->name();
    Value* av = constant(base + ".scale", std::move(*a));
    Value* sv = constant(base + ".shift", std::move(*s));
    if (!infers_to("mul", {x, av}, {}, t)) return false;
    Node* mul = g_.add_node("mul", {x, av}, {t}, {}, bn->name(), bn);
    if (!infers_to("add", {mul->output(0), sv}, {}, t)) {
      g_.erase_node(mul);
      return false;
    }
    Node* add = g_.add_node("add", {mul->output(0), sv}, {t}, {}, bn->name(), bn);
    std::string name = bn->output(0)->name();
    replace_node_result(g_, bn, add->output(0));
    add->output(0)->set_name(name);
    stats_.count("to-mul-add");
    return true;
  }

  bool not_finite() {
    stats_.count("not-finite");
    return false;
  }

  Graph& g_;
  PassStats& stats_;
  // Built at the first fold that needs a name: collecting every name of a
  // graph with no batch norm to fold cost more than the pass's walk.
  std::optional<NameSet> names_;
  bool made_constants_ = false;
};

class FoldBatchNorm : public Pass {
 public:
  std::string_view name() const override { return "fold-batchnorm"; }
  bool run(Graph& g, const PassOptions&, PassStats& stats) override {
    BatchNormFolder f(g, stats);
    bool changed = false;
    // Folding erases the BN and, for matmul, its producer (earlier in the order).
    for (Node* n : g.node_list()) changed |= f.visit(n);
    if (changed || f.made_constants()) g.remove_unused_constants();
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> create_fold_batchnorm_pass() { return std::make_unique<FoldBatchNorm>(); }

}  // namespace kiln
