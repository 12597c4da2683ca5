"""Writes tests/runtime/tuning_matmul.onnx, for the tuning tests: one GEMM
problem large enough that the tile candidates differ in block count
(x[64,96] @ W[96,80] + bias, Relu; compiled with --precision fp16 it is the
tensor-core problem f16:b1:m64:n80:k96, whose default tile is 64x64).
    /work/venv/bin/python tests/runtime/make_tuning_model.py tests/runtime/tuning_matmul.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 96])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 80])
w = numpy_helper.from_array((rng.standard_normal((96, 80)) * 0.1).astype(np.float32), "w")
b = numpy_helper.from_array(np.linspace(-0.5, 0.5, 80).astype(np.float32), "b")
nodes = [
    helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
    helper.make_node("Add", ["m", "b"], ["a"], name="add_bias"),
    helper.make_node("Relu", ["a"], ["y"], name="relu"),
]
graph = helper.make_graph(nodes, "tuning_matmul", [x], [y], initializer=[w, b])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln-tests")
model.ir_version = 8
onnx.save(model, sys.argv[1])
