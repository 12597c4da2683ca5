"""Writes tests/cli/unsupported.onnx: a small model with three nodes kiln
cannot compile (an unknown op, a Cast to string, a RandomUniformLike, random
numbers kiln does not produce) among
supported ones. Run with a Python that has `onnx`:
    python tests/cli/make_unsupported_model.py tests/cli/unsupported.onnx
"""
import sys

import onnx
from onnx import TensorProto, helper

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
z = helper.make_tensor_value_info("z", TensorProto.STRING, ["N", 4])
w = helper.make_tensor_value_info("w", TensorProto.FLOAT, ["N", 4])

nodes = [
    helper.make_node("Relu", ["x"], ["r"], name="relu0"),
    helper.make_node("MysteryOp", ["r"], ["m"], name="mystery"),
    helper.make_node("Relu", ["m"], ["y"], name="after_mystery"),
    helper.make_node("Cast", ["r"], ["z"], name="to_string", to=TensorProto.STRING),
    helper.make_node("Cast", ["r"], ["ri"], name="to_int", to=TensorProto.INT64),
    helper.make_node("RandomUniformLike", ["ri"], ["w"], name="random", dtype=TensorProto.FLOAT),
]
graph = helper.make_graph(nodes, "unsupported", [x], [y, z, w])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln-tests")
model.ir_version = 8
onnx.save(model, sys.argv[1])
