"""Writes tests/cli/long_names.onnx, for the --profile name test (issue 16
item 10): BERT-style node names, long paths that differ in the middle (the
layer) and at the end (the op). Add -> Relu fuse into one node named after
both; the two Transposes, one per "layer", stay apart.
    python tests/cli/make_long_names_model.py tests/cli/long_names.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

prefix = "/bert/encoder/layer.{}/attention/output/dense/"
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])
t0 = helper.make_tensor_value_info("t0", TensorProto.FLOAT, [8, 2])
t1 = helper.make_tensor_value_info("t1", TensorProto.FLOAT, [8, 2])
bias = numpy_helper.from_array(np.linspace(-1, 1, 8).astype(np.float32), "bias")
nodes = [
    helper.make_node("Add", ["x", "bias"], ["a"], name=prefix.format(3) + "Add"),
    helper.make_node("Relu", ["a"], ["y"], name=prefix.format(3) + "Relu"),
    helper.make_node("Transpose", ["x"], ["t0"], name=prefix.format(10) + "Transpose", perm=[1, 0]),
    helper.make_node("Transpose", ["a"], ["t1"], name=prefix.format(11) + "Transpose", perm=[1, 0]),
]
graph = helper.make_graph(nodes, "long_names", [x], [y, t0, t1], initializer=[bias])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln-tests")
model.ir_version = 8
onnx.save(model, sys.argv[1])
