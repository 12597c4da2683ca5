"""Writes tests/cli/window.onnx: y = x + HannWindow(4). kiln's window op has
no kernel emitter (the default pipeline always folds it into a constant), so
compiling it with `--passes fuse,plan-memory` leaves a node no GPU kernel
covers: what `kiln compile` must refuse for a GPU target (issue 14, "no silent
CPU"). Run with a Python that has `onnx`:
    python tests/cli/make_window_model.py tests/cli/window.onnx
"""
import sys

import onnx
from onnx import TensorProto, helper

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
size = helper.make_tensor("size", TensorProto.INT64, [], [4])
nodes = [
    helper.make_node("HannWindow", ["size"], ["w"], name="window"),
    helper.make_node("Add", ["x", "w"], ["y"], name="add"),
]
graph = helper.make_graph(nodes, "window", [x], [y], initializer=[size])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="kiln-tests")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
