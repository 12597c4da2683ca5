#!/usr/bin/env python3
"""Writes tiny_cnn.onnx, the model tools/quickstart.sh compiles and runs.

A small image classifier in the shape real exporters emit (opset 17):
Conv -> BatchNormalization -> Relu -> MaxPool -> Conv -> Relu ->
GlobalAveragePool -> Flatten -> Gemm -> Softmax, input 1x3x32x32.
Weights are random with a fixed seed; the file is committed (about 8 KB),
so the quick start needs no Python. Regenerate with:
    python3 examples/models/make_tiny_cnn.py   (needs: pip install onnx numpy)
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(20261121)


def weight(name, *shape, scale=0.2):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


inits = [
    weight("conv1.weight", 8, 3, 3, 3),
    weight("conv1.bias", 8),
    numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn1.scale"),
    weight("bn1.bias", 8),
    weight("bn1.mean", 8, scale=0.1),
    numpy_helper.from_array(rng.uniform(0.5, 2.0, 8).astype(np.float32), "bn1.var"),
    weight("conv2.weight", 16, 8, 3, 3, scale=0.1),
    weight("conv2.bias", 16),
    weight("fc.weight", 10, 16),
    weight("fc.bias", 10),
]
nodes = [
    helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
    helper.make_node("BatchNormalization", ["c1", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"], ["b1"],
                     name="bn1", epsilon=1e-5),
    helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
    helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
    helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
    helper.make_node("Flatten", ["g"], ["f"], name="flatten", axis=1),
    helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
    helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
]
graph = helper.make_graph(
    nodes, "tiny_cnn",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
    [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])],
    inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="kiln-examples")
model.ir_version = 8
onnx.checker.check_model(model)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_cnn.onnx")
onnx.save(model, out)
print(f"wrote {out}")
