"""Writes DIR/pw.onnx, a pointwise chain with a dynamic batch axis ("batch")
as exporters write one (Relu, Add of a per-row constant, Mul, Sigmoid; a
second output through a Reshape and a scalar Mul, a third a Softmax over the
last axis), and DIR/x_<b>.npy inputs
for batches 1, 5 and 16 (tests/cli/gpu_profiles_test.sh).
    python make_pointwise_dynamic_model.py DIR
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    out = sys.argv[1]
    rng = np.random.RandomState(19)
    c = numpy_helper.from_array(rng.randn(24).astype(np.float32), "c")
    half = numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half")
    shape = numpy_helper.from_array(np.array([0, 72], dtype=np.int64), "shape")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Add", ["r", "c"], ["a"]),
        helper.make_node("Mul", ["a", "x"], ["m"]),
        helper.make_node("Sigmoid", ["m"], ["y"]),
        helper.make_node("Reshape", ["y"], ["f"]),
        helper.make_node("Mul", ["f", "half"], ["z"]),
        helper.make_node("Softmax", ["m"], ["p"], axis=-1),
    ]
    nodes[4].input.append("shape")
    graph = helper.make_graph(
        nodes, "pointwise_dynamic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 24])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, 24]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 72]),
         helper.make_tensor_value_info("p", TensorProto.FLOAT, ["batch", 3, 24])], [c, half, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, f"{out}/pw.onnx")
    for b in (1, 5, 16):
        np.save(f"{out}/x_{b}.npy", rng.randn(b, 3, 24).astype(np.float32))


if __name__ == "__main__":
    main()
