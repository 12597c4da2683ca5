// The decision-tree ensembles of domain ai.onnx.ml, converted into kiln's one
// tree_ensemble form (ops/tree_ensemble.h):
//
//  - TreeEnsembleRegressor / TreeEnsembleClassifier (ml 1 and 3; what
//    skl2onnx and onnxmltools write for scikit-learn, LightGBM and XGBoost):
//    nodes named by (tree id, node id), leaves holding any number of
//    (target, weight) entries, modes as strings, thresholds as floats or
//    (ml 3) a tensor. Tree roots are each tree's first node, in the order the
//    trees appear.
//  - TreeEnsemble (ml 5): interior nodes and leaves in separate lists, a
//    child index meaning a leaf where nodes_trueleafs / nodes_falseleafs say
//    so; the leaves become nodes after the interior ones. Set-membership
//    values are read in the order the BRANCH_MEMBER nodes appear, each set
//    ended by a NaN, as the spec says.
//  - ZipMap (what skl2onnx appends to classifiers by default) returns a
//    sequence of maps, a value kiln has none of: refused, naming the
//    converter option that leaves it out.
//
// Class labels must be integers: string labels need string tensors, which
// kiln's IR does not carry here.
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "frontend/import_context.h"
#include "ops/op_helpers.h"
#include "ops/tree_ensemble.h"

namespace kiln::adapters {

namespace {

constexpr const char* kMlDomain = "ai.onnx.ml";

Tensor f64_tensor(const std::vector<double>& v) {
  return Tensor::from(DType::F64, {static_cast<int64_t>(v.size())}, v);
}

// A float list attribute, or its *_as_tensor form (ml 3), as doubles; which
// dtype it came in (f32 unless the tensor says otherwise).
std::vector<double> floats_or_tensor(const ImportContext& c, const std::string& name, DType* dtype = nullptr) {
  const AttrMap& a = c.attrs();
  if (dtype) *dtype = DType::F32;
  if (const Tensor* t = a.get_tensor(name + "_as_tensor")) {
    if (a.has(name)) c.fail("both {} and {}_as_tensor are given", name, name);
    if (!is_float(t->dtype()))
      c.fail("{}_as_tensor has dtype {}; it must be a float type", name, dtype_name(t->dtype()));
    if (dtype) *dtype = t->dtype() == DType::F64 ? DType::F64 : DType::F32;
    return ops::load_all<double>(*t);
  }
  const std::vector<float> f = a.get_floats(name);
  return std::vector<double>(f.begin(), f.end());
}

int64_t legacy_mode(const ImportContext& c, const std::string& m) {
  using ops::TreeMode;
  static const std::map<std::string, TreeMode> modes = {{"BRANCH_LEQ", TreeMode::Leq}, {"BRANCH_LT", TreeMode::Lt},
                                                        {"BRANCH_GTE", TreeMode::Gte}, {"BRANCH_GT", TreeMode::Gt},
                                                        {"BRANCH_EQ", TreeMode::Eq},   {"BRANCH_NEQ", TreeMode::Neq},
                                                        {"LEAF", TreeMode::Leaf}};
  auto it = modes.find(m);
  if (it == modes.end()) c.fail("node mode '{}' is not BRANCH_LEQ/LT/GTE/GT/EQ/NEQ or LEAF", m);
  return static_cast<int64_t>(it->second);
}

// Sets the attributes every form shares, emits the node and binds its results.
void emit_tree_ensemble(ImportContext& c, AttrMap& k, bool classify) {
  Value* x = c.input(0);
  if (classify) {
    k.set("classify", int64_t(1));
    std::vector<Value*> outs = c.emit("tree_ensemble", {x}, k, 2);
    outs.resize(std::min<size_t>(outs.size(), static_cast<size_t>(c.num_outputs())));  // a model may list only Y
    c.set_outputs(outs);
  } else {
    c.set_outputs({c.emit1("tree_ensemble", {x}, k)});
  }
}

// TreeEnsembleRegressor and TreeEnsembleClassifier.
void tree_ensemble_legacy(ImportContext& c, bool classify) {
  const char* p = classify ? "class" : "target";
  auto name = [&](const char* suffix) { return std::string(p) + "_" + suffix; };
  if (classify)
    c.only_attrs({"base_values",
                  "base_values_as_tensor",
                  "class_ids",
                  "class_nodeids",
                  "class_treeids",
                  "class_weights",
                  "class_weights_as_tensor",
                  "classlabels_int64s",
                  "classlabels_strings",
                  "nodes_falsenodeids",
                  "nodes_featureids",
                  "nodes_hitrates",
                  "nodes_hitrates_as_tensor",
                  "nodes_missing_value_tracks_true",
                  "nodes_modes",
                  "nodes_nodeids",
                  "nodes_treeids",
                  "nodes_truenodeids",
                  "nodes_values",
                  "nodes_values_as_tensor",
                  "post_transform"});
  else
    c.only_attrs({"aggregate_function",
                  "base_values",
                  "base_values_as_tensor",
                  "n_targets",
                  "nodes_falsenodeids",
                  "nodes_featureids",
                  "nodes_hitrates",
                  "nodes_hitrates_as_tensor",
                  "nodes_missing_value_tracks_true",
                  "nodes_modes",
                  "nodes_nodeids",
                  "nodes_treeids",
                  "nodes_truenodeids",
                  "nodes_values",
                  "nodes_values_as_tensor",
                  "post_transform",
                  "target_ids",
                  "target_nodeids",
                  "target_treeids",
                  "target_weights",
                  "target_weights_as_tensor"});
  const AttrMap& a = c.attrs();
  if (classify && a.has("classlabels_strings"))
    c.unsupported(
        "string class labels (classlabels_strings) need string tensors, which kiln does not support here; "
        "train or convert the classifier with integer labels (classlabels_int64s)");
  const std::vector<int64_t> tree_ids = a.get_ints("nodes_treeids");
  const std::vector<int64_t> node_ids = a.get_ints("nodes_nodeids");
  const std::vector<std::string> mode_names = a.get_strings("nodes_modes");
  const size_t n = tree_ids.size();
  if (node_ids.size() != n || mode_names.size() != n)
    c.fail("{} tree ids, {} node ids and {} modes: one each per node", n, node_ids.size(), mode_names.size());
  std::map<std::pair<int64_t, int64_t>, int64_t> index;
  std::vector<int64_t> roots;
  std::map<int64_t, bool> seen_tree;
  for (size_t i = 0; i < n; ++i) {
    if (!index.emplace(std::make_pair(tree_ids[i], node_ids[i]), int64_t(i)).second)
      c.fail("node {} of tree {} is listed twice", node_ids[i], tree_ids[i]);
    if (!seen_tree[tree_ids[i]]) roots.push_back(int64_t(i));
    seen_tree[tree_ids[i]] = true;
  }
  auto node_index = [&](int64_t tree, int64_t node, const char* what) {
    auto it = index.find({tree, node});
    if (it == index.end()) c.fail("{} names node {} of tree {}, which is not listed", what, node, tree);
    return it->second;
  };
  std::vector<int64_t> modes(n), true_next(n, 0), false_next(n, 0);
  const std::vector<int64_t> true_ids = a.get_ints("nodes_truenodeids");
  const std::vector<int64_t> false_ids = a.get_ints("nodes_falsenodeids");
  if (true_ids.size() != n || false_ids.size() != n)
    c.fail("{} true and {} false node ids for {} nodes", true_ids.size(), false_ids.size(), n);
  for (size_t i = 0; i < n; ++i) {
    modes[i] = legacy_mode(c, mode_names[i]);
    if (modes[i] == int64_t(ops::TreeMode::Leaf)) continue;
    true_next[i] = node_index(tree_ids[i], true_ids[i], "a true branch");
    false_next[i] = node_index(tree_ids[i], false_ids[i], "a false branch");
  }
  // Leaf entries, grouped by node in the order the model lists them.
  const std::vector<int64_t> e_trees = a.get_ints(name("treeids"));
  const std::vector<int64_t> e_nodes = a.get_ints(name("nodeids"));
  const std::vector<int64_t> e_ids = a.get_ints(name("ids"));
  DType weights_dtype = DType::F32;
  const std::vector<double> e_weights = floats_or_tensor(c, name("weights"), &weights_dtype);
  const size_t m = e_trees.size();
  if (e_nodes.size() != m || e_ids.size() != m || e_weights.size() != m)
    c.fail("{}_treeids, _nodeids, _ids and _weights have {}, {}, {} and {} entries: one each per leaf entry", p, m,
           e_nodes.size(), e_ids.size(), e_weights.size());
  std::vector<std::vector<size_t>> entries_of(n);
  for (size_t e = 0; e < m; ++e) {
    const int64_t at = node_index(e_trees[e], e_nodes[e], classify ? "a class weight" : "a target weight");
    if (modes[at] != int64_t(ops::TreeMode::Leaf))
      c.fail("a weight is attached to node {} of tree {}, which is not a LEAF", e_nodes[e], e_trees[e]);
    entries_of[at].push_back(e);
  }
  std::vector<int64_t> offsets{0}, targets;
  std::vector<double> weights;
  for (size_t i = 0; i < n; ++i) {
    for (size_t e : entries_of[i]) {
      targets.push_back(e_ids[e]);
      weights.push_back(e_weights[e]);
    }
    offsets.push_back(static_cast<int64_t>(targets.size()));
  }
  AttrMap k;
  k.set("tree_roots", roots);
  k.set("nodes_modes", modes);
  k.set("nodes_featureids", a.get_ints("nodes_featureids"));
  k.set("nodes_splits", f64_tensor(floats_or_tensor(c, "nodes_values")));
  k.set("nodes_truenodeids", true_next);
  k.set("nodes_falsenodeids", false_next);
  if (a.has("nodes_missing_value_tracks_true"))
    k.set("nodes_missing_value_tracks_true", a.get_ints("nodes_missing_value_tracks_true"));
  k.set("leaf_offsets", offsets);
  k.set("leaf_targetids", targets);
  k.set("leaf_weights", Tensor::from(weights_dtype, {static_cast<int64_t>(weights.size())}, weights));
  const std::vector<double> base = floats_or_tensor(c, "base_values");
  if (!base.empty()) k.set("base_values", f64_tensor(base));
  k.set("post_transform", a.get_string("post_transform", "NONE"));
  if (classify) {
    const std::vector<int64_t> labels = a.get_ints("classlabels_int64s");
    if (labels.empty()) c.fail("the classifier has no class labels (classlabels_int64s)");
    bool binary = !e_ids.empty();
    for (int64_t id : e_ids) binary = binary && id == e_ids.front();
    k.set("n_targets", static_cast<int64_t>(labels.size()));
    k.set("class_labels", labels);
    k.set("binary", int64_t(binary));
  } else {
    k.set("n_targets", a.get_int("n_targets", 1));
    k.set("aggregate_function", a.get_string("aggregate_function", "SUM"));
  }
  emit_tree_ensemble(c, k, classify);
}

// TreeEnsemble (ml 5).
void tree_ensemble_v5(ImportContext& c) {
  c.only_attrs({"aggregate_function", "leaf_targetids", "leaf_weights", "membership_values", "n_targets",
                "nodes_falseleafs", "nodes_falsenodeids", "nodes_featureids", "nodes_hitrates",
                "nodes_missing_value_tracks_true", "nodes_modes", "nodes_splits", "nodes_trueleafs",
                "nodes_truenodeids", "post_transform", "tree_roots"});
  const AttrMap& a = c.attrs();
  auto tensor = [&](const char* what) -> const Tensor& {
    const Tensor* t = a.get_tensor(what);
    if (!t) c.fail("attribute '{}' (a tensor) is missing", what);
    return *t;
  };
  const DType xt = c.input(0)->dtype();
  if (xt != DType::F32 && xt != DType::F64 && xt != DType::F16)
    c.fail("X has dtype {}; TreeEnsemble takes f32, f64 or f16", dtype_name(xt));
  const Tensor& splits_t = tensor("nodes_splits");
  const Tensor& weights_t = tensor("leaf_weights");
  if (splits_t.dtype() != xt || weights_t.dtype() != xt)
    c.fail("nodes_splits ({}) and leaf_weights ({}) must have X's dtype {}", dtype_name(splits_t.dtype()),
           dtype_name(weights_t.dtype()), dtype_name(xt));
  const std::vector<int64_t> modes_in = ops::load_all<int64_t>(tensor("nodes_modes"));
  const std::vector<double> splits_in = ops::load_all<double>(splits_t);
  const std::vector<int64_t> features = a.get_ints("nodes_featureids");
  const std::vector<int64_t> true_ids = a.get_ints("nodes_truenodeids");
  const std::vector<int64_t> false_ids = a.get_ints("nodes_falsenodeids");
  const std::vector<int64_t> true_leaf = a.get_ints("nodes_trueleafs");
  const std::vector<int64_t> false_leaf = a.get_ints("nodes_falseleafs");
  std::vector<int64_t> missing = a.get_ints("nodes_missing_value_tracks_true");
  const std::vector<int64_t> leaf_targets = a.get_ints("leaf_targetids");
  const std::vector<double> leaf_weights = ops::load_all<double>(weights_t);
  const size_t n = features.size();
  const size_t leaves = leaf_targets.size();
  if (modes_in.size() != n || splits_in.size() != n || true_ids.size() != n || false_ids.size() != n ||
      true_leaf.size() != n || false_leaf.size() != n || (!missing.empty() && missing.size() != n))
    c.fail("the nodes_* attributes must have one entry per interior node ({} feature ids)", n);
  if (leaf_weights.size() != leaves) c.fail("{} leaf target ids for {} leaf weights", leaves, leaf_weights.size());
  if (missing.empty()) missing.assign(n, 0);
  auto child = [&](size_t i, int64_t id, int64_t is_leaf) {
    const size_t bound = is_leaf ? leaves : n;
    if (id < 0 || static_cast<size_t>(id) >= bound)
      c.fail("node {} has child {} {}, outside the {} {}", i, is_leaf ? "leaf" : "node", id, bound,
             is_leaf ? "leaves" : "interior nodes");
    return is_leaf ? static_cast<int64_t>(n) + id : id;
  };
  std::vector<int64_t> modes(n + leaves, int64_t(ops::TreeMode::Leaf)), feat(n + leaves, 0);
  std::vector<int64_t> tnext(n + leaves, 0), fnext(n + leaves, 0), miss(n + leaves, 0);
  std::vector<double> splits(n + leaves, 0.0);
  std::vector<int64_t> member_offsets{0};
  std::vector<double> members;
  std::vector<double> membership;
  if (const Tensor* mv = a.get_tensor("membership_values")) membership = ops::load_all<double>(*mv);
  size_t next_member = 0;
  for (size_t i = 0; i < n; ++i) {
    if (modes_in[i] < 0 || modes_in[i] > int64_t(ops::TreeMode::Member))
      c.fail("node {} has mode {}, not 0 (BRANCH_LEQ) to 6 (BRANCH_MEMBER)", i, modes_in[i]);
    modes[i] = modes_in[i];
    feat[i] = features[i];
    splits[i] = splits_in[i];
    miss[i] = missing[i];
    tnext[i] = child(i, true_ids[i], true_leaf[i]);
    fnext[i] = child(i, false_ids[i], false_leaf[i]);
    if (modes[i] == int64_t(ops::TreeMode::Member)) {
      while (next_member < membership.size() && !std::isnan(membership[next_member]))
        members.push_back(membership[next_member++]);
      if (next_member == membership.size())
        c.fail("membership_values has no NaN-ended set for the set-membership node {}", i);
      ++next_member;  // the NaN ending this set
    }
    member_offsets.push_back(static_cast<int64_t>(members.size()));
  }
  if (next_member != membership.size())
    c.fail("membership_values holds {} values past the last set-membership node's set",
           membership.size() - next_member);
  std::vector<int64_t> leaf_offsets(n + 1, 0);
  for (size_t l = 0; l < leaves; ++l) {
    leaf_offsets.push_back(static_cast<int64_t>(l + 1));
    member_offsets.push_back(member_offsets.back());
  }
  std::vector<int64_t> roots;
  for (int64_t r : a.get_ints("tree_roots")) {
    if (r < 0 || static_cast<size_t>(r) >= n) c.fail("tree root {} is outside the {} interior nodes", r, n);
    // A tree that is one leaf: both children name the same leaf.
    const bool single_leaf = true_leaf[r] && false_leaf[r] && true_ids[r] == false_ids[r];
    roots.push_back(single_leaf ? tnext[r] : r);
  }
  static const char* aggregates[] = {"AVERAGE", "SUM", "MIN", "MAX"};
  static const char* posts[] = {"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"};
  const int64_t agg = a.get_int("aggregate_function", 1);
  const int64_t post = a.get_int("post_transform", 0);
  if (agg < 0 || agg > 3) c.fail("aggregate_function {} is not 0 (AVERAGE) to 3 (MAX)", agg);
  if (post < 0 || post > 4) c.fail("post_transform {} is not 0 (NONE) to 4 (PROBIT)", post);
  AttrMap k;
  k.set("tree_roots", roots);
  k.set("nodes_modes", modes);
  k.set("nodes_featureids", feat);
  k.set("nodes_splits", f64_tensor(splits));
  k.set("nodes_truenodeids", tnext);
  k.set("nodes_falsenodeids", fnext);
  k.set("nodes_missing_value_tracks_true", miss);
  k.set("leaf_offsets", leaf_offsets);
  k.set("leaf_targetids", leaf_targets);
  k.set("leaf_weights",
        Tensor::from(xt == DType::F64 ? DType::F64 : DType::F32, {static_cast<int64_t>(leaves)}, leaf_weights));
  if (!members.empty()) {
    k.set("member_offsets", member_offsets);
    k.set("member_values", f64_tensor(members));
  }
  if (!a.has("n_targets")) c.fail("attribute 'n_targets' is missing");
  k.set("n_targets", a.require_int("n_targets"));
  k.set("aggregate_function", std::string(aggregates[agg]));
  k.set("post_transform", std::string(posts[post]));
  k.set("dtype", std::string(dtype_name(xt)));
  emit_tree_ensemble(c, k, false);
}

void zipmap(ImportContext& c) {
  c.unsupported(
      "ZipMap returns a sequence of maps (one class -> score map per row), a value kiln has none of; convert the "
      "classifier without it (skl2onnx: to_onnx(model, X, options={{id(model): {{'zipmap': False}}}})) so the "
      "probabilities stay a tensor");
}

}  // namespace

void register_tree_ensembles(AdapterTable& t) {
  t.add(domain_adapter_key(kMlDomain, "TreeEnsembleRegressor"),
        [](ImportContext& c) { tree_ensemble_legacy(c, false); });
  t.add(domain_adapter_key(kMlDomain, "TreeEnsembleClassifier"),
        [](ImportContext& c) { tree_ensemble_legacy(c, true); });
  t.add(domain_adapter_key(kMlDomain, "TreeEnsemble"), tree_ensemble_v5);
  t.add(domain_adapter_key(kMlDomain, "ZipMap"), zipmap);
}

}  // namespace kiln::adapters
