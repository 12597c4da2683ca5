"""Writes the models of data_dependent_test.sh (issue 19, data-dependent
sizes) into DIR, built with onnx.helper, with inputs as .npy files:
  select.onnx  x [4,6] -> the positive elements of x, doubled, and their
               coordinates: Greater, NonZero, Reshape, Gather (flat), Mul;
               TopK of each row with k from an input (k.npy = [3])
  detect.onnx  boxes [1,12,4], scores [1,2,12] -> NonMaxSuppression (at most
               6 per class, IoU 0.4, score 0.3) and the kept boxes (Gather of
               the selection's box column), boxes in four clusters so that
               some are kept and some suppressed
  nonzero_gather.onnx  x [4,6] -> the coordinates of the positive elements
               (NonZero, [2,n]) and those elements through GatherND of the
               transposed coordinates, Sigmoid'ed: what a GPU plan computes at
               the bound and trims
  positive_sum.onnx  x [4,6] -> the sum of its positive elements (NonZero,
               Gather, ReduceSum "total"): a GPU plan masks the padding
  positive_mean.onnx  the same with ReduceMean "average": what a GPU plan
               refuses (the mean divides by the bound)
  loop_nonzero.onnx  x [8] -> a Loop of 3 iterations whose body sums the
               entries of x above the iteration number (NonZero, Gather,
               ReduceSum): a running total (carried) and each sum (scanned)
  scan_nonzero.onnx  x [3,5] -> a Scan over the rows whose body sums the
               row's positive entries (NonZero, Gather, ReduceSum): a running
               total (state) and each row's sum (scanned)
  nested_if.onnx  x [6], c1, c2 bool -> an If whose then branch holds an If
               whose then branch sums x's positive entries (NonZero, Gather,
               ReduceSum); the other branches reduce_max/reduce_min
Random data, seeded.
    python tests/cli/make_data_dependent_models.py DIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from make_dynamic_models import i64, save  # same folder: the script's own path

rng = np.random.default_rng(19)


def select(dir_):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])
    k = helper.make_tensor_value_info("k", TensorProto.INT64, [1])
    outs = [helper.make_tensor_value_info("doubled", TensorProto.FLOAT, ["n"]),
            helper.make_tensor_value_info("where", TensorProto.INT64, [2, "n"]),
            helper.make_tensor_value_info("top", TensorProto.FLOAT, [4, "k"])]
    inits = [numpy_helper.from_array(np.zeros((), np.float32), "zero"),
             numpy_helper.from_array(np.full((), 2, np.float32), "two"), i64("flat", [-1])]
    nodes = [
        helper.make_node("Greater", ["x", "zero"], ["pos"]),
        helper.make_node("NonZero", ["pos"], ["where"]),
        helper.make_node("Reshape", ["x", "flat"], ["xf"]),
        helper.make_node("Reshape", ["pos", "flat"], ["posf"]),
        helper.make_node("NonZero", ["posf"], ["idx2"]),
        helper.make_node("Reshape", ["idx2", "flat"], ["idx"]),
        helper.make_node("Gather", ["xf", "idx"], ["vals"], axis=0),
        helper.make_node("Mul", ["vals", "two"], ["doubled"]),
        helper.make_node("TopK", ["x", "k"], ["top", "top_i"], axis=1),
    ]
    save(helper.make_graph(nodes, "select", [x, k], outs, initializer=inits), os.path.join(dir_, "select.onnx"))
    np.save(os.path.join(dir_, "x.npy"), rng.standard_normal((4, 6)).astype(np.float32))
    np.save(os.path.join(dir_, "k.npy"), np.array([3], np.int64))


def detect(dir_):
    boxes = helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 12, 4])
    scores = helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 2, 12])
    outs = [helper.make_tensor_value_info("selected", TensorProto.INT64, ["m", 3]),
            helper.make_tensor_value_info("kept", TensorProto.FLOAT, ["m", 4])]
    inits = [i64("max_per_class", [6]), numpy_helper.from_array(np.array([0.4], np.float32), "iou"),
             numpy_helper.from_array(np.array([0.3], np.float32), "score"), i64("col", [2]), i64("flat", [-1]),
             i64("rows", [12, 4])]
    nodes = [
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_per_class", "iou", "score"], ["selected"]),
        helper.make_node("Gather", ["selected", "col"], ["box_col"], axis=1),
        helper.make_node("Reshape", ["box_col", "flat"], ["box_idx"]),
        helper.make_node("Reshape", ["boxes", "rows"], ["all_boxes"]),
        helper.make_node("Gather", ["all_boxes", "box_idx"], ["kept"], axis=0),
    ]
    save(helper.make_graph(nodes, "detect", [boxes, scores], outs, initializer=inits),
         os.path.join(dir_, "detect.onnx"))
    centre = np.repeat(rng.uniform(0, 10, (4, 2)), 3, axis=0) + rng.uniform(0, 0.5, (12, 2))
    size = rng.uniform(1, 2, (12, 2))
    b = np.concatenate([centre - size / 2, centre + size / 2], 1).astype(np.float32)[None]
    np.save(os.path.join(dir_, "boxes.npy"), b)
    np.save(os.path.join(dir_, "scores.npy"), rng.uniform(0, 1, (1, 2, 12)).astype(np.float32))


def nonzero_gather(dir_):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])
    outs = [helper.make_tensor_value_info("where", TensorProto.INT64, [2, "n"]),
            helper.make_tensor_value_info("picked", TensorProto.FLOAT, ["n"])]
    inits = [numpy_helper.from_array(np.zeros((), np.float32), "zero")]
    nodes = [
        helper.make_node("Greater", ["x", "zero"], ["pos"]),
        helper.make_node("NonZero", ["pos"], ["where"]),
        helper.make_node("Transpose", ["where"], ["coords"], perm=[1, 0]),
        helper.make_node("GatherND", ["x", "coords"], ["vals"]),
        helper.make_node("Sigmoid", ["vals"], ["picked"]),
    ]
    save(helper.make_graph(nodes, "nonzero_gather", [x], outs, initializer=inits),
         os.path.join(dir_, "nonzero_gather.onnx"))


def positive_sum(dir_, op="ReduceSum", name="total", model="positive_sum"):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])
    outs = [helper.make_tensor_value_info("sum", TensorProto.FLOAT, [1])]
    inits = [numpy_helper.from_array(np.zeros((), np.float32), "zero"), i64("flat", [-1]), i64("axes", [0])]
    nodes = [
        helper.make_node("Greater", ["x", "zero"], ["pos"]),
        helper.make_node("Reshape", ["x", "flat"], ["xf"]),
        helper.make_node("Reshape", ["pos", "flat"], ["posf"]),
        helper.make_node("NonZero", ["posf"], ["nz"]),
        helper.make_node("Reshape", ["nz", "flat"], ["idx"]),
        helper.make_node("Gather", ["xf", "idx"], ["vals"], axis=0),
        # (at opset 13 ReduceSum takes its axes as an operand, ReduceMean as an attribute)
        helper.make_node(op, ["vals", "axes"], ["sum"], name=name, keepdims=1) if op == "ReduceSum" else
        helper.make_node(op, ["vals"], ["sum"], name=name, keepdims=1, axes=[0]),
    ]
    save(helper.make_graph(nodes, model, [x], outs, initializer=inits), os.path.join(dir_, model + ".onnx"))


def loop_nonzero(dir_):
    f32 = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=f32),
         helper.make_node("Greater", ["x", "fi"], ["pos"]),
         helper.make_node("NonZero", ["pos"], ["nz"]),
         helper.make_node("Reshape", ["nz", "flat"], ["idx"]),
         helper.make_node("Gather", ["x", "idx"], ["vals"], axis=0),
         helper.make_node("ReduceSum", ["vals"], ["s"], keepdims=1),
         helper.make_node("Add", ["acc", "s"], ["acc_out"]),
         helper.make_node("Identity", ["cond"], ["cond_out"]),
         helper.make_node("Identity", ["s"], ["s_scan"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc", f32, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", f32, [1]), helper.make_tensor_value_info("s_scan", f32, [1])],
        [i64("flat", [-1])])
    g = helper.make_graph(
        [helper.make_node("Loop", ["trips", "", "zero"], ["total", "per_iter"], body=body)],
        "loop_nonzero", [helper.make_tensor_value_info("x", f32, [8])],
        [helper.make_tensor_value_info("total", f32, [1]), helper.make_tensor_value_info("per_iter", f32, [3, 1])],
        [numpy_helper.from_array(np.array(3, np.int64), "trips"), numpy_helper.from_array(np.zeros(1, np.float32), "zero")])
    save(g, os.path.join(dir_, "loop_nonzero.onnx"))
    np.save(os.path.join(dir_, "xl.npy"), np.array([0.5, 2.5, -1, 1.5, 3, 0.2, 2.2, 1.1], np.float32))


def scan_nonzero(dir_):
    f32 = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Greater", ["row", "zero"], ["pos"]),
         helper.make_node("NonZero", ["pos"], ["nz"]),
         helper.make_node("Reshape", ["nz", "flat"], ["idx"]),
         helper.make_node("Gather", ["row", "idx"], ["vals"], axis=0),
         helper.make_node("ReduceSum", ["vals"], ["s"], keepdims=1),
         helper.make_node("Add", ["acc", "s"], ["acc_out"]),
         helper.make_node("Identity", ["s"], ["s_scan"])],
        "body",
        [helper.make_tensor_value_info("acc", f32, [1]), helper.make_tensor_value_info("row", f32, [5])],
        [helper.make_tensor_value_info("acc_out", f32, [1]), helper.make_tensor_value_info("s_scan", f32, [1])],
        [numpy_helper.from_array(np.zeros((), np.float32), "zero"), i64("flat", [-1])])
    g = helper.make_graph(
        [helper.make_node("Scan", ["init", "x"], ["total", "per_row"], body=body, num_scan_inputs=1)],
        "scan_nonzero", [helper.make_tensor_value_info("x", f32, [3, 5])],
        [helper.make_tensor_value_info("total", f32, [1]), helper.make_tensor_value_info("per_row", f32, [3, 1])],
        [numpy_helper.from_array(np.zeros(1, np.float32), "init")])
    save(g, os.path.join(dir_, "scan_nonzero.onnx"))
    np.save(os.path.join(dir_, "xs.npy"), np.array([[1, -2, 3, -4, 5], [-1, -1, -1, -1, -1], [0.5, 2, -3, 4, 0]], np.float32))


def nested_if(dir_):
    f32, b = TensorProto.FLOAT, TensorProto.BOOL
    out = lambda name: [helper.make_tensor_value_info(name, f32, [1])]
    inner_then = helper.make_graph(
        [helper.make_node("Greater", ["x", "zero"], ["p"]), helper.make_node("NonZero", ["p"], ["nz"]),
         helper.make_node("Reshape", ["nz", "flat"], ["i"]), helper.make_node("Gather", ["x", "i"], ["v"], axis=0),
         helper.make_node("ReduceSum", ["v"], ["o"], keepdims=1)],
        "inner_then", [], out("o"), [numpy_helper.from_array(np.zeros((), np.float32), "zero"), i64("flat", [-1])])
    inner_else = helper.make_graph([helper.make_node("ReduceMax", ["x"], ["o2"], keepdims=1)], "inner_else", [], out("o2"))
    outer_then = helper.make_graph(
        [helper.make_node("If", ["c2"], ["r"], then_branch=inner_then, else_branch=inner_else)], "outer_then", [], out("r"))
    outer_else = helper.make_graph([helper.make_node("ReduceMin", ["x"], ["r2"], keepdims=1)], "outer_else", [], out("r2"))
    g = helper.make_graph(
        [helper.make_node("If", ["c1"], ["y"], then_branch=outer_then, else_branch=outer_else)], "nested_if",
        [helper.make_tensor_value_info("x", f32, [6]), helper.make_tensor_value_info("c1", b, []),
         helper.make_tensor_value_info("c2", b, [])], out("y"))
    save(g, os.path.join(dir_, "nested_if.onnx"))
    np.save(os.path.join(dir_, "xn.npy"), np.array([1, -2, 3, -4, 5, 0.5], np.float32))
    np.save(os.path.join(dir_, "yes.npy"), np.array(True))
    np.save(os.path.join(dir_, "no.npy"), np.array(False))


if __name__ == "__main__":
    select(sys.argv[1])
    detect(sys.argv[1])
    nonzero_gather(sys.argv[1])
    positive_sum(sys.argv[1])
    positive_sum(sys.argv[1], "ReduceMean", "average", "positive_mean")
    loop_nonzero(sys.argv[1])
    scan_nonzero(sys.argv[1])
    nested_if(sys.argv[1])
