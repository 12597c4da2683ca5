// The tree_ensemble op's semantics where a quick reading of the ONNX spec
// goes wrong (ops/tree_ensemble.h): NaN features and the missing-value track,
// set membership, the aggregates (MIN/MAX of targets no leaf reached, AVERAGE
// over trees, base values after the aggregate), the post transforms, the
// binary classifier's score pair and labels, and the checks that keep a walk
// from looping or reading past its tables. The sklearn models of
// tests/models/ml check whole converted models against ONNX Runtime.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/error.h"
#include "ops/registry.h"
#include "ops/tree_ensemble.h"

namespace kiln {
namespace {

using ops::TreeMode;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A forest built node by node; indices are the order of the calls.
struct Forest {
  std::vector<int64_t> roots, modes, feats, tn, fn, miss, targets, leaf_offsets{0}, member_offsets{0};
  std::vector<double> splits, weights, members;

  int64_t branch(TreeMode m, int64_t f, double th, int64_t t, int64_t fl, bool missing = false,
                 std::vector<double> set = {}) {
    modes.push_back(int64_t(m));
    feats.push_back(f);
    splits.push_back(th);
    tn.push_back(t);
    fn.push_back(fl);
    miss.push_back(missing);
    members.insert(members.end(), set.begin(), set.end());
    member_offsets.push_back(static_cast<int64_t>(members.size()));
    leaf_offsets.push_back(leaf_offsets.back());
    return static_cast<int64_t>(modes.size()) - 1;
  }
  int64_t leaf(std::vector<std::pair<int64_t, double>> entries) {
    const int64_t i = branch(TreeMode::Leaf, 0, 0, 0, 0);
    for (auto [t, w] : entries) {
      targets.push_back(t);
      weights.push_back(w);
    }
    leaf_offsets.back() = static_cast<int64_t>(weights.size());
    return i;
  }
  AttrMap attrs(int64_t n_targets, const std::string& agg = "SUM", const std::string& post = "NONE") const {
    auto f64 = [](const std::vector<double>& v) {
      return Tensor::from(DType::F64, {static_cast<int64_t>(v.size())}, v);
    };
    AttrMap a;
    a.set("tree_roots", roots);
    a.set("nodes_modes", modes);
    a.set("nodes_featureids", feats);
    a.set("nodes_splits", f64(splits));
    a.set("nodes_truenodeids", tn);
    a.set("nodes_falsenodeids", fn);
    a.set("nodes_missing_value_tracks_true", miss);
    a.set("leaf_offsets", leaf_offsets);
    a.set("leaf_targetids", targets);
    a.set("leaf_weights", Tensor::from(DType::F32, {static_cast<int64_t>(weights.size())}, weights));
    a.set("member_offsets", member_offsets);
    a.set("member_values", f64(members));
    a.set("n_targets", n_targets);
    a.set("aggregate_function", agg);
    a.set("post_transform", post);
    return a;
  }
};

// Runs tree_ensemble on rows of two features; returns every result as doubles.
std::vector<std::vector<double>> run(const AttrMap& a, const std::vector<double>& x, int outputs = 1) {
  const int64_t rows = static_cast<int64_t>(x.size()) / 2;
  const Tensor in = Tensor::from(DType::F32, {rows, 2}, x);
  const ops::TreeEnsembleSpec s = ops::tree_ensemble_spec(a);
  std::vector<TensorType> types;
  if (outputs == 2) types = {TensorType(DType::I64, {rows}), TensorType(DType::F32, {rows, s.score_columns()})};
  else types = {TensorType(DType::F32, {rows, s.n_targets})};
  std::vector<Tensor> out = evaluate_op(op_registry().get("tree_ensemble"), a, {&in}, types, "test");
  std::vector<std::vector<double>> r;
  for (const Tensor& t : out) {
    r.emplace_back();
    for (int64_t i = 0; i < t.numel(); ++i) r.back().push_back(t.get_double(i));
  }
  return r;
}

// x0 <= 0.5 ? 1 : (x1 in {1, 3} ? 2 : 3), NaN in x0 going to the side `missing` says.
Forest small_tree(bool missing) {
  Forest f;
  f.roots = {0};
  f.branch(TreeMode::Leq, 0, 0.5, 1, 2, missing);
  f.leaf({{0, 1}});
  f.branch(TreeMode::Member, 1, 0, 3, 4, false, {1, 3});
  f.leaf({{0, 2}});
  f.leaf({{0, 3}});
  return f;
}

TEST(TreeEnsemble, NaNFollowsTheTrackElseTheComparison) {
  EXPECT_EQ(run(small_tree(true).attrs(1), {kNaN, 0})[0], (std::vector<double>{1}));
  EXPECT_EQ(run(small_tree(false).attrs(1), {kNaN, 0})[0], (std::vector<double>{3}));
  // NEQ is true for NaN by itself, track or not (as ONNX Runtime compares).
  Forest f;
  f.roots = {0};
  f.branch(TreeMode::Neq, 0, 2.0, 1, 2, false);
  f.leaf({{0, 10}});
  f.leaf({{0, 20}});
  EXPECT_EQ(run(f.attrs(1), {kNaN, 0, 2, 0})[0], (std::vector<double>{10, 20}));
}

TEST(TreeEnsemble, SetMembership) {
  EXPECT_EQ(run(small_tree(false).attrs(1), {1, 3, 1, 2, 0.5, 2})[0], (std::vector<double>{2, 3, 1}));
}

TEST(TreeEnsemble, AggregatesAndBaseValues) {
  // Two trees of one leaf each: target 0 gets 1 and 4; target 1 is never reached.
  Forest f;
  f.roots = {f.leaf({{0, 1}}), f.leaf({{0, 4}})};
  EXPECT_EQ(run(f.attrs(2, "SUM"), {0, 0})[0], (std::vector<double>{5, 0}));
  EXPECT_EQ(run(f.attrs(2, "AVERAGE"), {0, 0})[0], (std::vector<double>{2.5, 0}));
  EXPECT_EQ(run(f.attrs(2, "MIN"), {0, 0})[0], (std::vector<double>{1, 0}));
  EXPECT_EQ(run(f.attrs(2, "MAX"), {0, 0})[0], (std::vector<double>{4, 0}));
  AttrMap a = f.attrs(2, "AVERAGE");
  a.set("base_values", Tensor::from(DType::F64, {2}, std::vector<double>{10, -1}));
  EXPECT_EQ(run(a, {0, 0})[0], (std::vector<double>{12.5, -1}));  // added after the average
}

TEST(TreeEnsemble, PostTransforms) {
  Forest f;
  f.roots = {f.leaf({{0, 1}, {1, 2}})};
  const auto soft = run(f.attrs(2, "SUM", "SOFTMAX"), {0, 0})[0];
  EXPECT_NEAR(soft[0], 1 / (1 + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(soft[1], 1 / (1 + std::exp(-1.0)), 1e-6);
  const auto logistic = run(f.attrs(2, "SUM", "LOGISTIC"), {0, 0})[0];
  EXPECT_NEAR(logistic[1], 1 / (1 + std::exp(-2.0)), 1e-6);
  Forest g;
  g.roots = {g.leaf({{0, 0.5}, {1, 0.8413447}})};
  const auto probit = run(g.attrs(2, "SUM", "PROBIT"), {0, 0})[0];
  EXPECT_NEAR(probit[0], 0, 1e-6);
  EXPECT_NEAR(probit[1], 1, 3e-3);  // the erf^-1 approximation ONNX Runtime uses
  // SOFTMAX_ZERO leaves classes without a vote at 0.
  Forest z;
  z.roots = {z.leaf({{1, 1}})};
  EXPECT_EQ(run(z.attrs(3, "SUM", "SOFTMAX_ZERO"), {0, 0})[0], (std::vector<double>{0, 1, 0}));
}

TEST(TreeEnsemble, BinaryClassifierScorePairAndLabels) {
  Forest f;
  f.roots = {0};
  f.branch(TreeMode::Lt, 0, 0, 1, 2);
  f.leaf({{0, 0.3}});
  f.leaf({{0, 0.8}});
  AttrMap a = f.attrs(2);
  a.set("classify", int64_t(1));
  a.set("class_labels", std::vector<int64_t>{4, 7});
  a.set("binary", int64_t(1));
  auto r = run(a, {-1, 0, 1, 0}, 2);
  EXPECT_EQ(r[0], (std::vector<double>{4, 7}));
  EXPECT_NEAR(r[1][0], 0.7, 1e-6);
  EXPECT_NEAR(r[1][1], 0.3, 1e-6);
  EXPECT_NEAR(r[1][3], 0.8, 1e-6);
  a.set("post_transform", std::string("LOGISTIC"));  // the pair is [-s, s] before the transform
  r = run(a, {-1, 0}, 2);
  EXPECT_NEAR(r[1][0], 1 / (1 + std::exp(0.3)), 1e-6);
  EXPECT_NEAR(r[1][1], 1 / (1 + std::exp(-0.3)), 1e-6);
  EXPECT_EQ(r[0][0], 7);
  // One label (1): two score columns, and the label is 0 or 1.
  a = f.attrs(1);
  a.set("classify", int64_t(1));
  a.set("class_labels", std::vector<int64_t>{1});
  a.set("binary", int64_t(1));
  r = run(a, {-1, 0, 1, 0}, 2);
  EXPECT_EQ(r[0], (std::vector<double>{0, 1}));
  EXPECT_EQ(r[1].size(), 4u);
}

std::string spec_error(const AttrMap& a) {
  try {
    ops::tree_ensemble_spec(a);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TreeEnsemble, MalformedTreesAreRefused) {
  Forest cycle;
  cycle.roots = {0};
  cycle.branch(TreeMode::Leq, 0, 0, 1, 2);
  cycle.branch(TreeMode::Leq, 0, 0, 0, 2);  // back to the root
  cycle.leaf({{0, 1}});
  EXPECT_NE(spec_error(cycle.attrs(1)).find("cycle through node 0"), std::string::npos) << spec_error(cycle.attrs(1));
  Forest out_of_range = small_tree(false);
  out_of_range.tn[0] = 9;
  EXPECT_NE(spec_error(out_of_range.attrs(1)).find("node 0 goes to node 9 or 2, outside the 5 nodes"),
            std::string::npos);
  Forest bad_target = small_tree(false);
  bad_target.targets[0] = 3;
  EXPECT_NE(spec_error(bad_target.attrs(1)).find("a leaf adds to target 3, outside the 1 targets"), std::string::npos);
  AttrMap bad_agg = small_tree(false).attrs(1, "MEDIAN");
  EXPECT_NE(spec_error(bad_agg).find("aggregate_function 'MEDIAN'"), std::string::npos);
}

}  // namespace
}  // namespace kiln
