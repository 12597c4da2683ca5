// tree_ensemble: decision-tree ensembles (ONNX ai.onnx.ml TreeEnsemble*);
// the form and its meaning are described in tree_ensemble.h. Only the
// reference backend runs it: codegen has no emitter for it, so a GPU plan
// refuses the node by name (compiler/compile_model.cpp) and the sim backend
// does too.
#include "ops/tree_ensemble.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/error.h"
#include "ir/symbolic_dim.h"
#include "ops/misc_internal.h"
#include "ops/op_helpers.h"

namespace kiln::ops {

namespace {

std::vector<double> tensor_doubles(const AttrMap& a, const std::string& name) {
  const Tensor* t = a.get_tensor(name);
  if (!t) return {};
  if (!is_float(t->dtype())) fail("{} has dtype {}; it must be a float type", name, dtype_name(t->dtype()));
  return load_all<double>(*t);
}

void check_offsets(const std::vector<int64_t>& offsets, int64_t nodes, size_t entries, const char* what) {
  if (static_cast<int64_t>(offsets.size()) != nodes + 1)
    fail("{} has {} entries for {} nodes (one more than the nodes)", what, offsets.size(), nodes);
  if (offsets.front() != 0) fail("{} starts at {}, not 0", what, offsets.front());
  for (int64_t i = 0; i < nodes; ++i)
    if (offsets[i + 1] < offsets[i]) fail("{} decreases at node {}", what, i);
  if (offsets.back() != static_cast<int64_t>(entries))
    fail("{} ends at {}, but {} entries are given", what, offsets.back(), entries);
}

// Every node reachable from a root is visited once per root, in an explicit
// stack: a node met again on the current path is a cycle, which would make a
// walk endless.
void check_acyclic(const TreeEnsembleSpec& s) {
  const int64_t n = s.nodes();
  std::vector<char> state(static_cast<size_t>(n), 0);  // 0 new, 1 on the path, 2 done
  for (int64_t root : s.roots) {
    std::vector<std::pair<int64_t, int>> stack{{root, 0}};
    while (!stack.empty()) {
      auto& [node, step] = stack.back();
      if (step == 0) {
        if (state[node] == 2) {
          stack.pop_back();
          continue;
        }
        state[node] = 1;
      }
      if (s.modes[node] == int64_t(TreeMode::Leaf) || step == 2) {
        state[node] = 2;
        stack.pop_back();
        continue;
      }
      const int64_t next = step == 0 ? s.true_next[node] : s.false_next[node];
      ++step;
      if (state[next] == 1) fail("the trees have a cycle through node {}", next);
      if (state[next] == 0) stack.push_back({next, 0});
    }
  }
}

template <typename Acc>
std::vector<double> raw_scores(const TreeEnsembleSpec& s, const double* x) {
  const size_t T = static_cast<size_t>(s.n_targets);
  std::vector<Acc> acc(T, Acc(0));
  std::vector<char> hit(T, 0);
  for (int64_t root : s.roots) {
    const int64_t leaf = tree_leaf(s, root, x);
    for (int64_t e = s.leaf_offsets[leaf]; e < s.leaf_offsets[leaf + 1]; ++e) {
      const size_t t = static_cast<size_t>(s.leaf_targets[e]);
      const Acc w = static_cast<Acc>(s.leaf_weights[e]);
      switch (s.aggregate) {
        case TreeAggregate::Sum:
        case TreeAggregate::Average:
          acc[t] += w;
          break;
        case TreeAggregate::Min:
          acc[t] = hit[t] ? std::min(acc[t], w) : w;
          break;
        case TreeAggregate::Max:
          acc[t] = hit[t] ? std::max(acc[t], w) : w;
          break;
      }
      hit[t] = 1;
    }
  }
  if (s.aggregate == TreeAggregate::Average)
    for (Acc& v : acc) v /= static_cast<Acc>(s.roots.size());
  std::vector<double> out(T);
  for (size_t t = 0; t < T; ++t) {
    Acc base = 0;
    if (s.base_values.size() == 1) base = static_cast<Acc>(s.base_values[0]);
    else if (!s.base_values.empty()) base = static_cast<Acc>(s.base_values[t]);
    out[t] = static_cast<double>(acc[t] + base);
  }
  return out;
}

// Winitzki's approximation of erf^-1 (a = 0.147), the one ONNX's reference
// and ONNX Runtime use for PROBIT, so kiln's values match theirs.
template <typename T>
T erf_inv_approx(T x) {
  const T sign = x < 0 ? T(-1) : T(1);
  const T one_minus = (T(1) - x) * (T(1) + x);
  if (one_minus == 0) return T(0);
  const T log_term = std::log(one_minus);
  const T pi = T(3.14159265358979323846);
  const T a = T(2) / (pi * T(0.147)) + T(0.5) * log_term;
  const T b = T(1) / T(0.147) * log_term;
  return sign * std::sqrt(-a + std::sqrt(a * a - b));
}

template <typename T>
void tree_reference_rows(const TreeEnsembleSpec& s, KernelContext& ctx, const std::vector<double>& x, int64_t rows,
                         int64_t width) {
  const int64_t cols = s.classify ? s.score_columns() : s.n_targets;
  std::vector<T> scores(static_cast<size_t>(rows * cols));
  std::vector<int64_t> labels(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<double> raw =
        s.weights_f64 ? raw_scores<double>(s, x.data() + r * width) : raw_scores<float>(s, x.data() + r * width);
    std::vector<T> row(static_cast<size_t>(cols), T(0));
    for (int64_t t = 0; t < std::min(cols, s.n_targets); ++t) row[t] = static_cast<T>(raw[t]);
    if (s.classify && s.binary) {
      row[1] = row[0];
      row[0] = (s.post == TreePost::None || s.post == TreePost::Probit) ? T(1) - row[1] : -row[1];
    }
    if (s.classify) {
      const int64_t best = std::max_element(row.begin(), row.end()) - row.begin();
      if (s.class_labels.size() == 1) labels[r] = best == 1 ? s.class_labels[0] : 0;
      else labels[r] = s.class_labels[best];
    }
    tree_post_transform(s.post, row);
    std::copy(row.begin(), row.end(), scores.begin() + r * cols);
  }
  if (s.classify) {
    store_all(ctx.out(0), labels);
    store_all(ctx.out(1), scores);
  } else {
    store_all(ctx.out(0), scores);
  }
}

std::vector<TensorType> infer_tree_ensemble(InferContext& c) {
  require_dtype(c, 0, {DType::F32, DType::F64, DType::F16, DType::I64, DType::I32});
  TreeEnsembleSpec s;
  try {
    s = tree_ensemble_spec(c.attrs());
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  const Shape& x = c.shape(0);
  if (c.rank(0) < 1 || c.rank(0) > 2) c.fail("X {} must be [N, F] or [F]", c.type(0).str());
  const int64_t width = x.back();
  if (is_symbolic_dim(width))
    c.unsupported("X {} has a symbolic feature count; the trees need it known", c.type(0).str());
  if (s.max_feature >= width)
    c.fail("the trees read feature {}, but X {} has {} features", s.max_feature, c.type(0).str(), width);
  const int64_t rows = c.rank(0) == 2 ? x[0] : 1;
  if (s.classify) {
    if (c.num_outputs() != 2) c.fail("a classifying tree_ensemble has two results (label, scores)");
    return {TensorType(DType::I64, {rows}), TensorType(DType::F32, {rows, s.score_columns()})};
  }
  if (c.num_outputs() != 1) c.fail("a regression tree_ensemble has one result");
  const std::string dt = c.attrs().get_string("dtype", "f32");
  DType out = DType::F32;
  if (dt == "f64") out = DType::F64;
  else if (dt == "f16") out = DType::F16;
  else if (dt != "f32") c.fail("dtype '{}' is not f32, f64 or f16", dt);
  return {TensorType(out, {rows, s.n_targets})};
}

void tree_ensemble_reference(KernelContext& ctx) {
  const TreeEnsembleSpec s = tree_ensemble_spec(ctx.attrs);
  const Tensor& x = ctx.in(0);
  const std::vector<double> features = load_all<double>(x);
  const int64_t width = x.shape().back();
  const int64_t rows = x.rank() == 2 ? x.shape()[0] : 1;
  const bool wide = s.classify ? false : ctx.out(0).dtype() == DType::F64;
  if (wide || s.weights_f64) tree_reference_rows<double>(s, ctx, features, rows, width);
  else tree_reference_rows<float>(s, ctx, features, rows, width);
}

OpDef tree_ensemble_op() {
  OpDef d;
  d.name = "tree_ensemble";
  d.category = OpCategory::Compute;
  d.max_outputs = 2;
  d.symbolic_dims = true;  // a symbolic batch passes through; the feature count must be known
  d.attrs = {{"tree_roots", AttrKind::Ints, true},
             {"nodes_modes", AttrKind::Ints, true},
             {"nodes_featureids", AttrKind::Ints, true},
             {"nodes_splits", AttrKind::Tensor, true},
             {"nodes_truenodeids", AttrKind::Ints, true},
             {"nodes_falsenodeids", AttrKind::Ints, true},
             {"nodes_missing_value_tracks_true", AttrKind::Ints},
             {"leaf_offsets", AttrKind::Ints, true},
             {"leaf_targetids", AttrKind::Ints, true},
             {"leaf_weights", AttrKind::Tensor, true},
             {"member_offsets", AttrKind::Ints},
             {"member_values", AttrKind::Tensor},
             {"n_targets", AttrKind::Int, true},
             {"aggregate_function", AttrKind::String},
             {"post_transform", AttrKind::String},
             {"base_values", AttrKind::Tensor},
             {"dtype", AttrKind::String},
             {"classify", AttrKind::Int},
             {"class_labels", AttrKind::Ints},
             {"binary", AttrKind::Int}};
  d.infer = infer_tree_ensemble;
  d.reference = tree_ensemble_reference;
  d.doc =
      "decision-tree ensemble over the rows of X (ONNX TreeEnsemble, TreeEnsembleRegressor/Classifier): each tree "
      "walked to a leaf, leaf weights aggregated per target (SUM, AVERAGE, MIN, MAX), base values, post transform; "
      "classifying, also the label of the best class (reference backend only)";
  return d;
}

}  // namespace

int64_t TreeEnsembleSpec::score_columns() const { return binary && n_targets == 1 ? 2 : n_targets; }

TreeAggregate tree_aggregate_from_name(const std::string& name) {
  if (name == "SUM") return TreeAggregate::Sum;
  if (name == "AVERAGE") return TreeAggregate::Average;
  if (name == "MIN") return TreeAggregate::Min;
  if (name == "MAX") return TreeAggregate::Max;
  fail("aggregate_function '{}' is not SUM, AVERAGE, MIN or MAX", name);
}

TreePost tree_post_from_name(const std::string& name) {
  if (name == "NONE") return TreePost::None;
  if (name == "SOFTMAX") return TreePost::Softmax;
  if (name == "LOGISTIC") return TreePost::Logistic;
  if (name == "SOFTMAX_ZERO") return TreePost::SoftmaxZero;
  if (name == "PROBIT") return TreePost::Probit;
  fail("post_transform '{}' is not NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT", name);
}

const char* tree_aggregate_name(TreeAggregate a) {
  static const char* names[] = {"SUM", "AVERAGE", "MIN", "MAX"};
  return names[static_cast<int>(a)];
}

const char* tree_post_name(TreePost p) {
  static const char* names[] = {"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"};
  return names[static_cast<int>(p)];
}

TreeEnsembleSpec tree_ensemble_spec(const AttrMap& a) {
  TreeEnsembleSpec s;
  s.roots = a.get_ints("tree_roots");
  s.modes = a.get_ints("nodes_modes");
  s.features = a.get_ints("nodes_featureids");
  s.splits = tensor_doubles(a, "nodes_splits");
  s.true_next = a.get_ints("nodes_truenodeids");
  s.false_next = a.get_ints("nodes_falsenodeids");
  s.missing_true = a.get_ints("nodes_missing_value_tracks_true");
  s.leaf_offsets = a.get_ints("leaf_offsets");
  s.leaf_targets = a.get_ints("leaf_targetids");
  s.leaf_weights = tensor_doubles(a, "leaf_weights");
  const Tensor* w = a.get_tensor("leaf_weights");
  s.weights_f64 = w && w->dtype() == DType::F64;
  s.member_offsets = a.get_ints("member_offsets");
  s.member_values = tensor_doubles(a, "member_values");
  s.n_targets = a.get_int("n_targets", 0);
  s.aggregate = tree_aggregate_from_name(a.get_string("aggregate_function", "SUM"));
  s.post = tree_post_from_name(a.get_string("post_transform", "NONE"));
  s.base_values = tensor_doubles(a, "base_values");
  s.classify = a.get_int("classify", 0) != 0;
  s.class_labels = a.get_ints("class_labels");
  s.binary = a.get_int("binary", 0) != 0;

  const int64_t n = s.nodes();
  if (n == 0) fail("the ensemble has no nodes");
  if (s.roots.empty()) fail("the ensemble has no trees");
  auto same_count = [&](size_t count, const char* what) {
    if (static_cast<int64_t>(count) != n) fail("{} has {} entries for {} nodes", what, count, n);
  };
  same_count(s.features.size(), "nodes_featureids");
  same_count(s.splits.size(), "nodes_splits");
  same_count(s.true_next.size(), "nodes_truenodeids");
  same_count(s.false_next.size(), "nodes_falsenodeids");
  if (s.missing_true.empty()) s.missing_true.assign(static_cast<size_t>(n), 0);
  same_count(s.missing_true.size(), "nodes_missing_value_tracks_true");
  if (s.member_offsets.empty()) s.member_offsets.assign(static_cast<size_t>(n + 1), 0);
  check_offsets(s.leaf_offsets, n, s.leaf_weights.size(), "leaf_offsets");
  check_offsets(s.member_offsets, n, s.member_values.size(), "member_offsets");
  if (s.leaf_targets.size() != s.leaf_weights.size())
    fail("{} leaf target ids for {} leaf weights", s.leaf_targets.size(), s.leaf_weights.size());
  if (s.n_targets < 1) fail("n_targets is {}; it must be at least 1", s.n_targets);
  for (int64_t t : s.leaf_targets)
    if (t < 0 || t >= s.n_targets) fail("a leaf adds to target {}, outside the {} targets", t, s.n_targets);
  if (s.base_values.size() > 1 && static_cast<int64_t>(s.base_values.size()) != s.n_targets)
    fail("{} base values for {} targets (one, or one each)", s.base_values.size(), s.n_targets);
  for (int64_t r : s.roots)
    if (r < 0 || r >= n) fail("a tree root is node {}, outside the {} nodes", r, n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t m = s.modes[i];
    if (m < 0 || m > int64_t(TreeMode::Leaf)) fail("node {} has mode {}, not 0 to 7", i, m);
    const bool leaf = m == int64_t(TreeMode::Leaf);
    if (!leaf && s.leaf_offsets[i + 1] > s.leaf_offsets[i]) fail("node {} is not a leaf but has leaf weights", i);
    if (m != int64_t(TreeMode::Member) && s.member_offsets[i + 1] > s.member_offsets[i])
      fail("node {} is not a set-membership node but has set members", i);
    if (leaf) continue;
    if (s.features[i] < 0) fail("node {} reads feature {}", i, s.features[i]);
    s.max_feature = std::max(s.max_feature, s.features[i]);
    if (s.true_next[i] < 0 || s.true_next[i] >= n || s.false_next[i] < 0 || s.false_next[i] >= n)
      fail("node {} goes to node {} or {}, outside the {} nodes", i, s.true_next[i], s.false_next[i], n);
  }
  check_acyclic(s);
  if (s.classify) {
    if (s.class_labels.empty()) fail("a classifier needs class labels");
    if (static_cast<int64_t>(s.class_labels.size()) != s.n_targets)
      fail("{} class labels for {} classes", s.class_labels.size(), s.n_targets);
    if (s.class_labels.size() == 1 && !(s.binary && s.class_labels[0] == 1))
      fail("one class label ({}) is supported only as the binary label 1", s.class_labels[0]);
  }
  return s;
}

int64_t tree_leaf(const TreeEnsembleSpec& s, int64_t node, const double* x) {
  while (s.modes[node] != int64_t(TreeMode::Leaf)) {
    const double v = x[s.features[node]];
    const double th = s.splits[node];
    bool go = false;
    switch (static_cast<TreeMode>(s.modes[node])) {
      case TreeMode::Leq:
        go = v <= th;
        break;
      case TreeMode::Lt:
        go = v < th;
        break;
      case TreeMode::Gte:
        go = v >= th;
        break;
      case TreeMode::Gt:
        go = v > th;
        break;
      case TreeMode::Eq:
        go = v == th;
        break;
      case TreeMode::Neq:
        go = v != th;
        break;
      case TreeMode::Member:
        go = std::find(s.member_values.begin() + s.member_offsets[node],
                       s.member_values.begin() + s.member_offsets[node + 1],
                       v) != s.member_values.begin() + s.member_offsets[node + 1];
        break;
      case TreeMode::Leaf:
        break;
    }
    go = go || (s.missing_true[node] != 0 && std::isnan(v));
    node = go ? s.true_next[node] : s.false_next[node];
  }
  return node;
}

std::vector<double> tree_raw_scores(const TreeEnsembleSpec& s, const double* x) {
  return s.weights_f64 ? raw_scores<double>(s, x) : raw_scores<float>(s, x);
}

template <typename T>
void tree_post_transform(TreePost p, std::vector<T>& row) {
  switch (p) {
    case TreePost::None:
      return;
    case TreePost::Softmax: {
      const T mx = *std::max_element(row.begin(), row.end());
      T sum = 0;
      for (T& v : row) sum += (v = std::exp(v - mx));
      for (T& v : row) v /= sum;
      return;
    }
    case TreePost::SoftmaxZero: {
      // Entries that are (nearly) zero stay zero: they are classes no tree voted for.
      const T mx = *std::max_element(row.begin(), row.end());
      const T scale = std::exp(-mx);
      T sum = 0;
      for (T& v : row) sum += (v = (v > T(1e-7) || v < T(-1e-7)) ? std::exp(v - mx) : v * scale);
      for (T& v : row) v = sum == 0 ? T(0.5) : v / sum;
      return;
    }
    case TreePost::Logistic:
      for (T& v : row) {
        const T e = T(1) / (T(1) + std::exp(-std::fabs(v)));
        v = v < 0 ? T(1) - e : e;
      }
      return;
    case TreePost::Probit:
      for (T& v : row) v = T(1.41421356) * erf_inv_approx(v * T(2) - T(1));
      return;
  }
}

template void tree_post_transform<float>(TreePost, std::vector<float>&);
template void tree_post_transform<double>(TreePost, std::vector<double>&);

void register_tree_ensemble_op(OpRegistry& r) { r.add(tree_ensemble_op()); }

}  // namespace kiln::ops
