"""Writes tests/cli/deep_layers.onnx, for the SVG-size test (issue 16): a
16-layer residual stack named as exporters name layers
("/encoder/layer.N/..."), each layer MatMul -> Add -> Relu, MatMul -> Add ->
Add (residual), LayerNormalization: after the default pipeline a few fused
kernels per layer, so the picture is deep (about 50 ranks of boxes) and narrow,
as BERT-base's is at 12 layers.
    python tests/cli/make_deep_model.py tests/cli/deep_layers.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

LAYERS, WIDTH = 16, 16
rng = np.random.default_rng(16)
inits, nodes = [], []


def const(name, shape):
    inits.append(numpy_helper.from_array(rng.normal(0, 0.3, shape).astype(np.float32), name))
    return name


x = "x"
for i in range(LAYERS):
    p = f"/encoder/layer.{i}"
    nodes += [
        helper.make_node("MatMul", [x, const(f"l{i}.w1", [WIDTH, WIDTH])], [f"{p}/h0"], name=f"{p}/ffn/up/MatMul"),
        helper.make_node("Add", [f"{p}/h0", const(f"l{i}.b1", [WIDTH])], [f"{p}/h1"], name=f"{p}/ffn/up/Add"),
        helper.make_node("Relu", [f"{p}/h1"], [f"{p}/h2"], name=f"{p}/ffn/act/Relu"),
        helper.make_node("MatMul", [f"{p}/h2", const(f"l{i}.w2", [WIDTH, WIDTH])], [f"{p}/h3"],
                         name=f"{p}/ffn/down/MatMul"),
        helper.make_node("Add", [f"{p}/h3", const(f"l{i}.b2", [WIDTH])], [f"{p}/h4"], name=f"{p}/ffn/down/Add"),
        helper.make_node("Add", [f"{p}/h4", x], [f"{p}/h5"], name=f"{p}/residual/Add"),
        helper.make_node("LayerNormalization", [f"{p}/h5", const(f"l{i}.g", [WIDTH]), const(f"l{i}.beta", [WIDTH])],
                         [f"{p}/out"], name=f"{p}/norm/LayerNormalization", axis=-1),
    ]
    x = f"{p}/out"
nodes.append(helper.make_node("Identity", [x], ["y"], name="/output/Identity"))
graph = helper.make_graph(nodes, "deep_layers", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, WIDTH])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, WIDTH])], initializer=inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="kiln-tests")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
