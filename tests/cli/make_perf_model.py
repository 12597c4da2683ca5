"""Writes tests/cli/perf_small.onnx, for the `kiln inspect --perf` test: a
GEMM with a bias+ReLU epilogue (x[64,256] @ w[256,128]: 2*64*128*256 FLOPs)
and, from the same input, a pointwise Tanh (memory-bound).
    .venv/bin/python tests/cli/make_perf_model.py tests/cli/perf_small.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(18)
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 128])
t = helper.make_tensor_value_info("t", TensorProto.FLOAT, [64, 256])
w = numpy_helper.from_array((rng.standard_normal((256, 128)) * 0.05).astype(np.float32), "w")
b = numpy_helper.from_array(np.linspace(-1, 1, 128).astype(np.float32), "b")
nodes = [
    helper.make_node("MatMul", ["x", "w"], ["mm"], name="matmul"),
    helper.make_node("Add", ["mm", "b"], ["a"], name="add_bias"),
    helper.make_node("Relu", ["a"], ["y"], name="relu"),
    helper.make_node("Tanh", ["x"], ["t"], name="tanh"),
]
graph = helper.make_graph(nodes, "perf_small", [x], [y, t], initializer=[w, b])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln-tests")
model.ir_version = 8
onnx.save(model, sys.argv[1])
