"""Writes tests/cli/small.onnx, for the --dump-dir test: three branches from
one [2,3,8] input that the current kernel emitters handle after the default
pipeline: Add -> Relu -> Tanh (one fused pointwise kernel), Transpose
(injective) and ReduceMax (reduction).
    python tests/cli/make_small_model.py tests/cli/small.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 8])
t = helper.make_tensor_value_info("t", TensorProto.FLOAT, [8, 3, 2])
m = helper.make_tensor_value_info("m", TensorProto.FLOAT, [2, 1, 8])
bias = numpy_helper.from_array(np.linspace(-1, 1, 8).astype(np.float32), "bias")
nodes = [
    helper.make_node("Add", ["x", "bias"], ["a"], name="add_bias"),
    helper.make_node("Relu", ["a"], ["r"], name="relu"),
    helper.make_node("Tanh", ["r"], ["y"], name="tanh"),
    helper.make_node("Transpose", ["x"], ["t"], name="transpose", perm=[2, 1, 0]),
    helper.make_node("ReduceMax", ["x"], ["m"], name="reduce_max", axes=[1], keepdims=1),
]
graph = helper.make_graph(nodes, "small", [x], [y, t, m], initializer=[bias])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln-tests")
model.ir_version = 8
onnx.save(model, sys.argv[1])
