"""Writes post.onnx into DIR: torchvision's detection post-processing for one
class, as its TorchScript export writes it (ssdlite320_mobilenet_v3_large,
issue 19), built with onnx.helper, with its inputs as .npy files:

  scores [40], boxes [40,4] ->
    keep = scores > 0.5           Greater, NonZero, Transpose, GatherND (the
                                  kept scores and boxes: [n] and [n,4])
    k = min(8, n)                 Shape, Gather, Unsqueeze, Concat with [8],
                                  ReduceMin, Reshape: a run-time k
    top, idx = topk(kept, k)      TopK with that k
    labels = full_like(top, 3)    Shape, ConstantOfShape: i64[k] of 3s
    col = top[:, None]            Slice 0:INT64_MAX (taken whole), Unsqueeze
    first = idx[:5]               Slice with a constant end: min(5, k) rows
    best_boxes = boxes_kept[first]
  and what Faster R-CNN's export adds:
    col2 = col.expand(shape)      Expand to Where(Equal(shape, -1), 1, shape)
                                  of col's run-time shape
    again = top[0:0+k]            Slice to a run-time end (torch's split)
    placed = zeros(n).scatter(0, idx, top)   ScatterElements into [n]

Scores drawn so that 13 of 40 pass the threshold: TopK cuts them to 8 and
the slice to 5.

And nms_if.onnx: torchvision's batched NMS behind its "no boxes?" guard:
  scores [40], boxes [40,4] -> the boxes scoring > 0.5 (NonZero, GatherND),
  If their count is 0 (Shape, ReduceProd, Equal) an empty i64[0], else
  NonMaxSuppression (IoU 0.3) over them and its box column; then the first 6
  of the kept (Slice) and their boxes (Gather). Two score files: scores.npy
  (13 pass the threshold: the else branch) and low_scores.npy (none pass: the
  then branch). Random data, seeded.
    python tests/cli/make_detection_post_model.py DIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from make_dynamic_models import i64, save  # same folder: the script's own path

rng = np.random.default_rng(1919)
INT64_MAX = 2**63 - 1


def post(dir_):
    scores = helper.make_tensor_value_info("scores", TensorProto.FLOAT, [40])
    boxes = helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [40, 4])
    outs = [helper.make_tensor_value_info("top", TensorProto.FLOAT, ["k"]),
            helper.make_tensor_value_info("labels", TensorProto.INT64, ["k"]),
            helper.make_tensor_value_info("col", TensorProto.FLOAT, ["k", 1]),
            helper.make_tensor_value_info("best_boxes", TensorProto.FLOAT, ["f", 4]),
            helper.make_tensor_value_info("col2", TensorProto.FLOAT, ["k", 1]),
            helper.make_tensor_value_info("again", TensorProto.FLOAT, ["k"]),
            helper.make_tensor_value_info("placed", TensorProto.FLOAT, ["n"])]
    inits = [numpy_helper.from_array(np.full((), 0.5, np.float32), "thresh"), i64("zero", 0), i64("ax0", [0]),
             i64("kmax", [8]), i64("one_dim", [1]), i64("start0", [0]), i64("open_end", [INT64_MAX]),
             i64("step1", [1]), i64("end5", [5]), i64("ax1", [1]), i64("minus1", [-1]), i64("ones2", [1, 1])]
    three = helper.make_tensor("three", TensorProto.INT64, [1], [3])
    nodes = [
        helper.make_node("Greater", ["scores", "thresh"], ["mask"]),
        helper.make_node("NonZero", ["mask"], ["nz"]),
        helper.make_node("Transpose", ["nz"], ["nzt"], perm=[1, 0]),
        helper.make_node("GatherND", ["scores", "nzt"], ["kept"]),
        helper.make_node("NonZero", ["mask"], ["nz2"]),
        helper.make_node("Transpose", ["nz2"], ["nzt2"], perm=[1, 0]),
        helper.make_node("GatherND", ["boxes", "nzt2"], ["boxes_kept"]),
        helper.make_node("Shape", ["kept"], ["kept_shape"]),
        helper.make_node("Gather", ["kept_shape", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Concat", ["kmax", "n1"], ["candidates"], axis=0),
        helper.make_node("ReduceMin", ["candidates"], ["kmin"], keepdims=0),
        helper.make_node("Reshape", ["kmin", "one_dim"], ["k"]),
        helper.make_node("TopK", ["kept", "k"], ["top", "idx"], axis=-1, largest=1, sorted=1),
        helper.make_node("Shape", ["top"], ["top_shape"]),
        helper.make_node("ConstantOfShape", ["top_shape"], ["labels"], value=three),
        helper.make_node("Slice", ["top", "start0", "open_end", "ax0", "step1"], ["whole"]),
        helper.make_node("Unsqueeze", ["whole", "ax1"], ["col"]),
        helper.make_node("Slice", ["idx", "start0", "end5", "ax0", "step1"], ["first"]),
        helper.make_node("Gather", ["boxes_kept", "first"], ["best_boxes"], axis=0),
        helper.make_node("Shape", ["col"], ["col_shape"]),
        helper.make_node("Equal", ["col_shape", "minus1"], ["is_minus1"]),
        helper.make_node("Where", ["is_minus1", "ones2", "col_shape"], ["expand_to"]),
        helper.make_node("Expand", ["col", "expand_to"], ["col2"]),
        helper.make_node("Gather", ["top_shape", "zero"], ["k0"], axis=0),
        helper.make_node("Unsqueeze", ["k0", "ax0"], ["k1"]),
        helper.make_node("Add", ["start0", "k1"], ["end_k"]),
        helper.make_node("Slice", ["top", "start0", "end_k", "ax0", "step1"], ["again"]),
        helper.make_node("ConstantOfShape", ["kept_shape"], ["zeros_n"]),
        helper.make_node("ScatterElements", ["zeros_n", "idx", "top"], ["placed"], axis=0),
    ]
    save(helper.make_graph(nodes, "post", [scores, boxes], outs, initializer=inits), os.path.join(dir_, "post.onnx"))
    s = rng.uniform(0, 0.5, 40).astype(np.float32)
    s[rng.choice(40, 13, replace=False)] = rng.uniform(0.55, 1, 13).astype(np.float32)
    np.save(os.path.join(dir_, "scores.npy"), s)
    np.save(os.path.join(dir_, "boxes.npy"), rng.uniform(0, 64, (40, 4)).astype(np.float32))


def nms_if(dir_):
    scores = helper.make_tensor_value_info("scores", TensorProto.FLOAT, [40])
    boxes = helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [40, 4])
    outs = [helper.make_tensor_value_info("keep", TensorProto.INT64, ["m"]),
            helper.make_tensor_value_info("best_boxes", TensorProto.FLOAT, ["f", 4])]
    inits = [numpy_helper.from_array(np.full((), 0.5, np.float32), "thresh"), i64("zero", 0), i64("ax0", [0]),
             i64("start0", [0]), i64("end6", [6]), i64("step1", [1])]
    empty = helper.make_tensor("empty", TensorProto.INT64, [0], [])
    then_g = helper.make_graph([helper.make_node("Constant", [], ["none"], value=empty)], "then", [],
                               [helper.make_tensor_value_info("none", TensorProto.INT64, [0])])
    else_nodes = [
        helper.make_node("Unsqueeze", ["boxes_kept", "ax0"], ["b3"]),
        helper.make_node("Unsqueeze", ["scores_kept", "ax0"], ["s2"]),
        helper.make_node("Unsqueeze", ["s2", "ax0"], ["s3"]),
        helper.make_node("Constant", [], ["max_per_class"], value=helper.make_tensor("m", TensorProto.INT64, [1],
                                                                                      [INT64_MAX])),
        helper.make_node("Constant", [], ["iou"], value=helper.make_tensor("i", TensorProto.FLOAT, [1], [0.3])),
        helper.make_node("NonMaxSuppression", ["b3", "s3", "max_per_class", "iou"], ["sel"]),
        helper.make_node("Constant", [], ["col"], value=helper.make_tensor("c", TensorProto.INT64, [1], [2])),
        helper.make_node("Gather", ["sel", "col"], ["sel_col"], axis=1),
        helper.make_node("Constant", [], ["ax1"], value=helper.make_tensor("a", TensorProto.INT64, [1], [1])),
        helper.make_node("Squeeze", ["sel_col", "ax1"], ["kept_idx"]),
    ]
    else_g = helper.make_graph(else_nodes, "else", [], [helper.make_tensor_value_info("kept_idx", TensorProto.INT64,
                                                                                       ["m"])])
    nodes = [
        helper.make_node("Greater", ["scores", "thresh"], ["mask"]),
        helper.make_node("NonZero", ["mask"], ["nz"]),
        helper.make_node("Transpose", ["nz"], ["nzt"], perm=[1, 0]),
        helper.make_node("GatherND", ["scores", "nzt"], ["scores_kept"]),
        helper.make_node("GatherND", ["boxes", "nzt"], ["boxes_kept"]),
        helper.make_node("Shape", ["boxes_kept"], ["kept_shape"]),
        helper.make_node("ReduceProd", ["kept_shape"], ["numel"], keepdims=0),
        helper.make_node("Equal", ["numel", "zero"], ["no_boxes"]),
        helper.make_node("If", ["no_boxes"], ["keep"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Slice", ["keep", "start0", "end6", "ax0", "step1"], ["first"]),
        helper.make_node("Gather", ["boxes_kept", "first"], ["best_boxes"], axis=0),
    ]
    save(helper.make_graph(nodes, "nms_if", [scores, boxes], outs, initializer=inits),
         os.path.join(dir_, "nms_if.onnx"))
    np.save(os.path.join(dir_, "low_scores.npy"), rng.uniform(0, 0.5, 40).astype(np.float32))


if __name__ == "__main__":
    post(sys.argv[1])
    nms_if(sys.argv[1])
