// tree_ensemble: the decision-tree ensembles of ONNX's ai.onnx.ml domain
// (TreeEnsembleRegressor and TreeEnsembleClassifier 1/3, TreeEnsemble 5), in
// one form the frontend converts all three into (frontend/adapters_tree_ensemble.cpp).
//
//   tree_ensemble(X [N, F] or [F]) -> Y [N, n_targets]            (regression)
//   tree_ensemble(X) {classify=1}   -> label i64 [N], scores f32 [N, C]
//
// The trees are one table of nodes, indexed 0..n-1; a tree is the node its
// root index names. Attributes (all lists have one entry per node unless said):
//   tree_roots        ints: the root node of each tree
//   nodes_modes       ints: 0 BRANCH_LEQ, 1 LT, 2 GTE, 3 GT, 4 EQ, 5 NEQ,
//                     6 MEMBER (set membership), 7 LEAF
//   nodes_featureids  ints: the column of X an interior node compares
//   nodes_splits      tensor f64: the threshold (f32 and f16 thresholds are
//                     exact in f64, so comparisons match the model's type)
//   nodes_truenodeids, nodes_falsenodeids  ints: the next node either way
//   nodes_missing_value_tracks_true  ints: 1 sends NaN features to the true
//                     side; otherwise NaN takes the comparison's result
//                     (false but for NEQ), as ONNX Runtime and the
//                     TreeEnsemble-5 reference do
//   leaf_offsets      ints, n+1 entries: leaf node i adds the weights
//                     [leaf_offsets[i], leaf_offsets[i+1]) to their targets
//   leaf_targetids    ints; leaf_weights tensor f32 or f64: the sums run in
//                     the weights' type, as ONNX Runtime's do
//   member_offsets    ints, n+1 entries; member_values tensor f64: a MEMBER
//                     node's set
//   n_targets         int: the number of targets (classes when classifying)
//   aggregate_function string SUM | AVERAGE | MIN | MAX (targets no leaf
//                     reached are 0 for MIN and MAX, as in ONNX Runtime)
//   post_transform    string NONE | SOFTMAX | LOGISTIC | SOFTMAX_ZERO | PROBIT
//   base_values       tensor f64, empty, 1 or n_targets entries: added after
//                     the aggregation (one value is added to every target)
//   dtype             string: Y's dtype (regression)
//   classify, class_labels ints, binary int: classification; with binary
//                     (every class weight names one class, ONNX's rule)
//                     the score s of that class becomes the pair [1-s, s]
//                     (NONE, PROBIT) or [-s, s], before the post transform.
//                     The label is the class of the largest score (first on
//                     ties) before the post transform, which is monotone.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/attribute.h"

namespace kiln::ops {

enum class TreeMode : int64_t { Leq = 0, Lt = 1, Gte = 2, Gt = 3, Eq = 4, Neq = 5, Member = 6, Leaf = 7 };
enum class TreeAggregate { Sum, Average, Min, Max };
enum class TreePost { None, Softmax, Logistic, SoftmaxZero, Probit };

struct TreeEnsembleSpec {
  std::vector<int64_t> roots;
  std::vector<int64_t> modes, features, true_next, false_next, missing_true;
  std::vector<double> splits;
  std::vector<int64_t> leaf_offsets, leaf_targets;
  std::vector<double> leaf_weights;
  bool weights_f64 = false;
  std::vector<int64_t> member_offsets;
  std::vector<double> member_values;
  int64_t n_targets = 0;
  TreeAggregate aggregate = TreeAggregate::Sum;
  TreePost post = TreePost::None;
  std::vector<double> base_values;
  bool classify = false;
  std::vector<int64_t> class_labels;
  bool binary = false;
  int64_t max_feature = -1;  // the largest column an interior node reads

  int64_t nodes() const { return static_cast<int64_t>(modes.size()); }
  // Columns of the scores a classifier writes: 2 for a binary one with one label.
  int64_t score_columns() const;
};

// Reads and checks the attributes (every index in range, every tree free of
// cycles, so a walk always ends at a leaf); kiln::Error with a plain message.
TreeEnsembleSpec tree_ensemble_spec(const AttrMap& a);

// The parsed names of the string attributes; kiln::Error for others.
TreeAggregate tree_aggregate_from_name(const std::string& name);
TreePost tree_post_from_name(const std::string& name);
const char* tree_aggregate_name(TreeAggregate a);
const char* tree_post_name(TreePost p);

// The leaf a row reaches from node `root` (x holds the row's features).
int64_t tree_leaf(const TreeEnsembleSpec& s, int64_t root, const double* x);

// The raw scores of one row: aggregated leaf weights plus base values, before
// the binary pairing and the post transform (n_targets entries).
std::vector<double> tree_raw_scores(const TreeEnsembleSpec& s, const double* x);

// Applies a post transform to one row of scores in place, in type T (float for
// f32 models, as ONNX Runtime computes them).
template <typename T>
void tree_post_transform(TreePost p, std::vector<T>& row);

}  // namespace kiln::ops
