"""Writes tests/cli/unsupported.onnx: a small model with three nodes kiln
cannot compile (an unknown op, a Cast to string, an If with subgraphs) among
supported ones. Run with a Python that has `onnx`:
    python tests/cli/make_unsupported_model.py tests/cli/unsupported.onnx
"""
import sys

import onnx
from onnx import TensorProto, helper

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
z = helper.make_tensor_value_info("z", TensorProto.STRING, ["N", 4])
w = helper.make_tensor_value_info("w", TensorProto.FLOAT, ["N", 4])

branch_out = helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 4])
then_g = helper.make_graph([helper.make_node("Identity", ["r"], ["b"])], "then", [], [branch_out])
else_g = helper.make_graph([helper.make_node("Neg", ["r"], ["b"])], "else", [], [branch_out])

nodes = [
    helper.make_node("Relu", ["x"], ["r"], name="relu0"),
    helper.make_node("MysteryOp", ["r"], ["m"], name="mystery"),
    helper.make_node("Relu", ["m"], ["y"], name="after_mystery"),
    helper.make_node("Cast", ["r"], ["z"], name="to_string", to=TensorProto.STRING),
    helper.make_node("If", ["cond"], ["w"], name="branch", then_branch=then_g, else_branch=else_g),
]
graph = helper.make_graph(nodes, "unsupported", [x, cond], [y, z, w])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln-tests")
model.ir_version = 8
onnx.save(model, sys.argv[1])
