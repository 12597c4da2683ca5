"""Builds the scikit-learn tree-ensemble test folders of tests/models/ml.

Each folder is an ONNX backend test (model.onnx, test_data_set_0/input_*.pb and
output_*.pb) holding a small scikit-learn model converted by skl2onnx, with the
outputs ONNX Runtime computes on a fixed input: `kiln conformance
tests/models/ml` compares kiln's reference backend with them (ctest
models_sklearn_trees). CI has no scikit-learn, so the folders are committed;
run this again (in a venv with scikit-learn, skl2onnx, onnxruntime, numpy,
onnx) only to change them:

    python tests/models/ml/make_sklearn_models.py tests/models/ml
"""
import copy
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper
from skl2onnx import to_onnx
from sklearn.ensemble import (
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
        IsolationForest,
    RandomForestClassifier,
    RandomForestRegressor,
)

ML3 = {"": 17, "ai.onnx.ml": 3}


def data(rng, rows, features, nan_fraction=0.0):
    x = rng.normal(size=(rows, features)).astype(np.float32)
    if nan_fraction:
        x[rng.random(x.shape) < nan_fraction] = np.nan
    return x


def write(root, name, model, inputs):
    folder = os.path.join(root, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "test_data_set_0"))
    onnx.save(model, os.path.join(folder, "model.onnx"))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: x for i, x in zip(sess.get_inputs(), inputs)}
    outputs = sess.run(None, feeds)
    for k, (i, x) in enumerate(zip(sess.get_inputs(), inputs)):
        t = numpy_helper.from_array(x, i.name)
        open(os.path.join(folder, "test_data_set_0", f"input_{k}.pb"), "wb").write(t.SerializeToString())
    for k, (o, y) in enumerate(zip(sess.get_outputs(), outputs)):
        t = numpy_helper.from_array(np.asarray(y), o.name)
        open(os.path.join(folder, "test_data_set_0", f"output_{k}.pb"), "wb").write(t.SerializeToString())
    ops = sorted({f"{n.domain or 'ai.onnx'}:{n.op_type}" for n in model.graph.node})
    print(f"{name}: {os.path.getsize(os.path.join(folder, 'model.onnx'))} bytes, ops {ops}")


def tree_ensemble5(legacy, dtype):
    """A one-target TreeEnsembleRegressor model rewritten as a TreeEnsemble-5 model."""
    node = legacy.graph.node[0]
    at = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    keys = list(zip(at["nodes_treeids"], at["nodes_nodeids"]))
    modes = [m.decode() for m in at["nodes_modes"]]
    interior = [k for k, m in zip(keys, modes) if m != "LEAF"]
    leaves = [k for k, m in zip(keys, modes) if m == "LEAF"]
    inner_index = {k: i for i, k in enumerate(interior)}
    leaf_index = {k: i for i, k in enumerate(leaves)}
    weight = {(t, n): w for t, n, w in zip(at["target_treeids"], at["target_nodeids"], at["target_weights"])}
    pos = {k: i for i, k in enumerate(keys)}
    feat, splits, tnode, tleaf, fnode, fleaf = [], [], [], [], [], []
    for tree, nid in interior:
        i = pos[(tree, nid)]
        feat.append(at["nodes_featureids"][i])
        splits.append(at["nodes_values"][i])
        for child, ids, flags in ((at["nodes_truenodeids"][i], tnode, tleaf), (at["nodes_falsenodeids"][i], fnode, fleaf)):
            is_leaf = (tree, child) in leaf_index
            ids.append(leaf_index[(tree, child)] if is_leaf else inner_index[(tree, child)])
            flags.append(int(is_leaf))
    roots = [inner_index[next(k for k in interior if k[0] == t)] for t in sorted(set(at["nodes_treeids"]))]
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    te = onnx.helper.make_node(
        "TreeEnsemble", ["X"], ["Y"], domain="ai.onnx.ml",
        tree_roots=roots,
        nodes_featureids=feat,
        nodes_modes=numpy_helper.from_array(np.zeros(len(interior), np.uint8)),
        nodes_splits=numpy_helper.from_array(np.array(splits, dtype)),
        nodes_truenodeids=tnode, nodes_trueleafs=tleaf, nodes_falsenodeids=fnode, nodes_falseleafs=fleaf,
        leaf_targetids=[0] * len(leaves),
        leaf_weights=numpy_helper.from_array(np.array([weight[k] for k in leaves], dtype)),
        n_targets=1,
        aggregate_function=0,  # AVERAGE
    )
    graph = onnx.helper.make_graph(
        [te], "forest",
        [onnx.helper.make_tensor_value_info("X", elem, [None, 4])],
        [onnx.helper.make_tensor_value_info("Y", elem, [None, 1])],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21),
                                                         onnx.helper.make_opsetid("ai.onnx.ml", 5)])


def convert(est, x, classifier=False, **kw):
    options = {id(est): {"zipmap": False}} if classifier else None
    return to_onnx(est, x[:1], target_opset=ML3, options=options, **kw)


def main(root):
    rng = np.random.default_rng(7)
    x_train = data(rng, 300, 4)
    x_test = data(rng, 24, 4)
    y_reg = x_train[:, 0] * 2 - x_train[:, 1] ** 2 + 0.1 * rng.normal(size=300)
    y_bin = (x_train[:, 0] + x_train[:, 2] > 0).astype(np.int64)
    y_multi = np.digitize(x_train[:, 0] - x_train[:, 3], [-0.7, 0.7]).astype(np.int64)

    rf = RandomForestRegressor(n_estimators=6, max_depth=4, random_state=0).fit(x_train, y_reg)
    write(root, "test_sklearn_random_forest_regressor", convert(rf, x_test), [x_test])

    y_two = np.stack([y_reg, x_train[:, 2] - x_train[:, 3]], axis=1)
    et = ExtraTreesRegressor(n_estimators=5, max_depth=3, random_state=0).fit(x_train, y_two)
    two = convert(et, x_test)
    # skl2onnx declares the output [N, 1] whatever the targets; the node computes [N, 2].
    two.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 2
    write(root, "test_sklearn_extra_trees_two_targets", two, [x_test])

    gbr = GradientBoostingRegressor(n_estimators=8, max_depth=2, random_state=0).fit(x_train, y_reg)
    write(root, "test_sklearn_gradient_boosting_regressor", convert(gbr, x_test), [x_test])

    gbc = GradientBoostingClassifier(n_estimators=8, max_depth=2, random_state=0).fit(x_train, y_bin)
    write(root, "test_sklearn_gradient_boosting_binary", convert(gbc, x_test, True), [x_test])

    gbm = GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(x_train, y_multi)
    write(root, "test_sklearn_gradient_boosting_multiclass", convert(gbm, x_test, True), [x_test])

    # skl2onnx's default: probabilities through ZipMap, which kiln refuses by
    # name (tests/cli/tree_ensemble_test.sh).
    zipmap = to_onnx(gbc, x_test[:1], target_opset=ML3)
    onnx.save(zipmap, os.path.join(root, "sklearn_zipmap.onnx"))

    rfc = RandomForestClassifier(n_estimators=6, max_depth=4, random_state=0).fit(x_train, y_multi + 10)
    write(root, "test_sklearn_random_forest_multiclass", convert(rfc, x_test, True), [x_test])

    # Missing values. skl2onnx 1.20 cannot convert the histogram boosters
    # (it writes numpy bools into nodes_missing_value_tracks_true), so the
    # boosted regressor above gets a NaN direction per node (every third goes
    # true) and inputs with NaN; ONNX Runtime says what that computes.
    tracks = copy.deepcopy(convert(gbr, x_test))
    te = tracks.graph.node[0]
    nodes = len(next(a for a in te.attribute if a.name == "nodes_modes").strings)
    old = [a for a in te.attribute if a.name != "nodes_missing_value_tracks_true"]
    del te.attribute[:]
    te.attribute.extend(old)
    te.attribute.append(
        onnx.helper.make_attribute("nodes_missing_value_tracks_true", [int(i % 3 == 0) for i in range(nodes)])
    )
    x_nan = data(rng, 24, 4, nan_fraction=0.3)
    write(root, "test_sklearn_gradient_boosting_nan_tracks", tracks, [x_nan])

    # The forest in TreeEnsemble (ml opset 5) form, in f32 and f64: the
    # newer op keeps thresholds and weights in X's type.
    for dtype, suffix in ((np.float32, "float"), (np.float64, "double")):
        x = x_test.astype(dtype)
        write(root, f"test_sklearn_random_forest_tree_ensemble5_{suffix}", tree_ensemble5(convert(rf, x_test), dtype), [x])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
