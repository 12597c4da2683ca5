// ONNX adapters for the normalization family (see import_context.h). Ops without an
// entry here import 1:1 under their default kiln name.
//
// Every adapter lists the ONNX attributes it understands (over all opsets),
// rejects the others, drops the legacy ones that do not change inference
// results (consumed_inputs, momentum, is_test=1, spatial=1), and writes the
// kiln attributes out explicitly with the ONNX defaults filled in.
#include <algorithm>

#include "frontend/import_context.h"

namespace kiln::adapters {

namespace {

void check_attrs(ImportContext& c, std::initializer_list<std::string_view> known) {
  for (const auto& [name, a] : c.attrs()) {
    bool ok = false;
    for (std::string_view k : known) ok |= name == k;
    if (!ok) c.unsupported("attribute '{}' is not supported (opset {})", name, c.opset());
  }
}

int rank_of(ImportContext& c, int i) { return static_cast<int>(c.input(i)->shape().size()); }

int normalized_axis(ImportContext& c, int64_t axis, int rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) c.fail("axis {} is out of range for rank {}", axis, rank);
  return static_cast<int>(a);
}

// Number of results to ask of kiln: up to the last used ONNX output.
int used_outputs(ImportContext& c) {
  int n = c.num_outputs();
  while (n > 1 && !c.output_used(n - 1)) --n;
  return n;
}

void require_inputs(ImportContext& c, int lo, int hi) {
  int n = c.num_inputs();
  if (n < lo || n > hi) c.fail("takes {} to {} inputs, got {}", lo, hi, n);
  for (int i = 0; i < lo; ++i)
    if (!c.has_input(i)) c.fail("input {} is required", i);
}

AttrMap epsilon_attr(ImportContext& c) {
  AttrMap a;
  a.set("epsilon", c.attrs().get_float("epsilon", 1e-5f));
  return a;
}

// BatchNormalization with training_mode=1 (opset 14+): normalized with the
// batch's own statistics (mean and population variance over every axis but
// the channels), and the running statistics updated with `momentum`:
// running = input * momentum + batch * (1 - momentum), as ONNX defines it.
void batch_normalization_training(ImportContext& c) {
  require_inputs(c, 5, 5);
  Value* x = c.input(0);
  const int rank = x->type().rank();
  if (rank < 2) c.fail("X has rank {}; it must be at least 2 ([N, C, ...])", rank);
  const int64_t channels = x->shape()[1];
  for (int i = 1; i < 5; ++i)
    if (c.input(i)->shape() != Shape{channels} || c.input(i)->dtype() != x->dtype())
      c.fail("operand {} has type {}; it must be {}[{}]", i, c.input(i)->type().str(), dtype_name(x->dtype()),
             channels);
  const double eps = c.attrs().get_float("epsilon", 1e-5f);
  const double momentum = c.attrs().get_float("momentum", 0.9f);
  std::vector<int64_t> axes{0};
  for (int d = 2; d < rank; ++d) axes.push_back(d);
  AttrMap reduce;
  reduce.set("axes", axes);
  reduce.set("keepdims", int64_t(1));
  Shape per_channel(rank, 1);  // [1, C, 1, ...]: broadcasts against X
  per_channel[1] = channels;
  auto reshape = [&](Value* v, const Shape& s) {
    AttrMap a;
    a.set("shape", std::vector<int64_t>(s.begin(), s.end()));
    return c.emit1("reshape", {v}, a);
  };
  auto k = [&](double v) { return c.constant(Tensor::scalar(x->dtype(), v), "k"); };
  Value* mean = c.emit1("reduce_mean", {x}, reduce);
  Value* centered = c.emit1("sub", {x, mean});
  Value* var = c.emit1("reduce_mean", {c.emit1("mul", {centered, centered})}, reduce);
  Value* inv_std = c.emit1("div", {k(1), c.emit1("sqrt", {c.emit1("add", {var, k(eps)})})});
  Value* y = c.emit1("add", {c.emit1("mul", {c.emit1("mul", {centered, inv_std}), reshape(c.input(1), per_channel)}),
                             reshape(c.input(2), per_channel)});
  auto running = [&](Value* input, Value* batch) {
    return c.emit1(
        "add", {c.emit1("mul", {input, k(momentum)}), c.emit1("mul", {reshape(batch, {channels}), k(1 - momentum)})});
  };
  std::vector<Value*> outs{y};
  if (c.num_outputs() > 1) outs.push_back(running(c.input(3), mean));
  if (c.num_outputs() > 2) outs.push_back(running(c.input(4), var));
  if (c.num_outputs() > 3) c.fail("has {} outputs; in training mode it gives at most 3", c.num_outputs());
  c.set_outputs(outs);
}

// BatchNormalization, inference form, and training_mode=1 (above). The
// training forms of the older opsets (is_test=0 before opset 7, requested
// mean/var outputs from opset 7) are unsupported; spatial=0 (opsets 7-8,
// per-activation statistics) too.
void batch_normalization(ImportContext& c) {
  check_attrs(c, {"epsilon", "momentum", "spatial", "is_test", "consumed_inputs", "training_mode"});
  const AttrMap& at = c.attrs();
  if (c.opset() < 7 || at.has("is_test")) {
    int64_t is_test = at.get_int("is_test", 0);
    if (is_test == 0)
      c.unsupported("training mode (is_test=0{}): kiln implements inference batch normalization",
                    at.has("is_test") ? "" : " by default");
  }
  if (int64_t spatial = at.get_int("spatial", 1); spatial != 1)
    c.unsupported("spatial={} (per-activation statistics) is not supported; only spatial=1", spatial);
  if (int64_t tm = at.get_int("training_mode", 0); tm != 0) return batch_normalization_training(c);
  for (int i = 1; i < c.num_outputs(); ++i)
    if (c.output_used(i))
      c.unsupported(
          "output {} (running/saved statistics) is only produced in training mode, which kiln does "
          "not implement",
          i);
  require_inputs(c, 5, 5);
  Value* y =
      c.emit1("batch_normalization", {c.input(0), c.input(1), c.input(2), c.input(3), c.input(4)}, epsilon_attr(c));
  c.set_outputs({y});
}

// LayerNormalization (opset 17): Y and optionally Mean and InvStdDev in f32.
void layer_normalization(ImportContext& c) {
  check_attrs(c, {"axis", "epsilon", "stash_type"});
  if (int64_t st = c.attrs().get_int("stash_type", 1); st != 1)
    c.unsupported("stash_type={}: kiln computes layer normalization statistics as float (stash_type=1) only", st);
  require_inputs(c, 2, 3);
  AttrMap a = epsilon_attr(c);
  a.set("axis", int64_t(normalized_axis(c, c.attrs().get_int("axis", -1), rank_of(c, 0))));
  std::vector<Value*> ins{c.input(0), c.input(1)};
  if (c.has_input(2)) ins.push_back(c.input(2));
  c.set_outputs(c.emit("layer_normalization", ins, a, used_outputs(c)));
}

void instance_normalization(ImportContext& c) {
  check_attrs(c, {"epsilon", "consumed_inputs"});
  require_inputs(c, 3, 3);
  c.set_outputs({c.emit1("instance_normalization", {c.input(0), c.input(1), c.input(2)}, epsilon_attr(c))});
}

// Opsets 18-20 give scale and bias per group ([num_groups]); opset 21 per
// channel ([C]), which is kiln's form. Per-group parameters are repeated
// over each group's C/num_groups channels.
Value* per_channel_param(ImportContext& c, int i, int64_t groups, int64_t channels, const char* what) {
  Value* v = c.input(i);
  const Shape& s = v->shape();
  if (s.size() != 1 || s[0] != groups)
    c.fail("{} has shape [{}]; at opset {} it must be [num_groups] = [{}]", what, fmt::join(s, ","), c.opset(), groups);
  if (groups == channels) return v;
  int64_t cpg = channels / groups;
  if (const Tensor* t = c.value_of(v)) {
    Tensor r(t->dtype(), {channels});
    for (int64_t ch = 0; ch < channels; ++ch) r.set_double(ch, t->get_double(ch / cpg));
    return c.constant(std::move(r), v->name() + ".per_channel");
  }
  AttrMap shape_g1, shape_c;
  shape_g1.set("shape", std::vector<int64_t>{groups, 1});
  shape_c.set("shape", std::vector<int64_t>{channels});
  Tensor ones(v->dtype(), {1, cpg});
  for (int64_t j = 0; j < cpg; ++j) ones.set_double(j, 1.0);
  Value* g1 = c.emit1("reshape", {v}, shape_g1);
  Value* gc = c.emit1("mul", {g1, c.constant(std::move(ones), v->name() + ".ones")});
  return c.emit1("reshape", {gc}, shape_c);
}

void group_normalization(ImportContext& c) {
  check_attrs(c, {"epsilon", "num_groups", "stash_type"});
  if (int64_t st = c.attrs().get_int("stash_type", 1); st != 1)
    c.unsupported("stash_type={}: kiln computes group normalization statistics as float (stash_type=1) only", st);
  require_inputs(c, 3, 3);
  if (!c.attrs().has("num_groups")) c.fail("required attribute 'num_groups' is missing");
  int64_t groups = c.attrs().require_int("num_groups");
  const Shape& xs = c.input(0)->shape();
  if (xs.size() < 2) c.fail("x has rank {}, needs at least 2 (N, C, ...)", xs.size());
  int64_t channels = xs[1];
  if (groups <= 0 || channels % groups != 0)
    c.fail("num_groups {} must be positive and divide the channel count {}", groups, channels);
  Value* scale = c.input(1);
  Value* bias = c.input(2);
  if (c.opset() < 21) {
    scale = per_channel_param(c, 1, groups, channels, "scale");
    bias = per_channel_param(c, 2, groups, channels, "bias");
  }
  AttrMap a = epsilon_attr(c);
  a.set("num_groups", groups);
  c.set_outputs({c.emit1("group_normalization", {c.input(0), scale, bias}, a)});
}

void lrn(ImportContext& c) {
  check_attrs(c, {"size", "alpha", "beta", "bias"});
  if (!c.attrs().has("size")) c.fail("required attribute 'size' is missing");
  AttrMap a;
  a.set("size", c.attrs().require_int("size"));
  a.set("alpha", c.attrs().get_float("alpha", 1e-4f));
  a.set("beta", c.attrs().get_float("beta", 0.75f));
  a.set("bias", c.attrs().get_float("bias", 1.0f));
  require_inputs(c, 1, 1);
  c.set_outputs({c.emit1("lrn", {c.input(0)}, a)});
}

void mean_variance_normalization(ImportContext& c) {
  check_attrs(c, {"axes"});
  require_inputs(c, 1, 1);
  int r = rank_of(c, 0);
  std::vector<int64_t> axes;
  for (int64_t ax : c.attrs().get_ints("axes", {0, 2, 3})) axes.push_back(normalized_axis(c, ax, r));
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) c.fail("axes lists an axis twice");
  AttrMap a;
  a.set("axes", axes);
  c.set_outputs({c.emit1("mean_variance_normalization", {c.input(0)}, a)});
}

void lp_normalization(ImportContext& c) {
  check_attrs(c, {"axis", "p"});
  require_inputs(c, 1, 1);
  AttrMap a;
  a.set("axis", int64_t(normalized_axis(c, c.attrs().get_int("axis", -1), rank_of(c, 0))));
  a.set("p", c.attrs().get_int("p", 2));
  c.set_outputs({c.emit1("lp_normalization", {c.input(0)}, a)});
}

// SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss (opsets 12, 13).
void loss(ImportContext& c, const std::string& kiln_op, int max_outputs) {
  check_attrs(c, {"reduction", "ignore_index"});
  require_inputs(c, 2, 3);
  AttrMap a;
  a.set("reduction", c.attrs().get_string("reduction", "mean"));
  if (c.attrs().has("ignore_index")) a.set("ignore_index", c.attrs().require_int("ignore_index"));
  std::vector<Value*> ins{c.input(0), c.input(1)};
  if (c.has_input(2)) ins.push_back(c.input(2));
  int n = used_outputs(c);
  if (n > max_outputs) c.fail("has at most {} outputs, got {}", max_outputs, n);
  c.set_outputs(c.emit(kiln_op, ins, a, n));
}

}  // namespace

void register_normalization(AdapterTable& t) {
  t.add("BatchNormalization", batch_normalization);
  t.add("LayerNormalization", layer_normalization);
  t.add("InstanceNormalization", instance_normalization);
  t.add("GroupNormalization", group_normalization);
  t.add("LRN", lrn);
  t.add("MeanVarianceNormalization", mean_variance_normalization);
  t.add("LpNormalization", lp_normalization);
  t.add("SoftmaxCrossEntropyLoss", [](ImportContext& c) { loss(c, "softmax_cross_entropy_loss", 2); });
  t.add("NegativeLogLikelihoodLoss", [](ImportContext& c) { loss(c, "nll_loss", 1); });
}

}  // namespace kiln::adapters
