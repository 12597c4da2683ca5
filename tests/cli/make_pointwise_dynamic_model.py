"""Writes DIR/pw.onnx, a pointwise chain with a dynamic batch axis ("batch")
as exporters write one (Relu, Add of a per-row constant, Mul, Sigmoid; a
second output through a Reshape and a scalar Mul, a third a Softmax over the
last axis), and DIR/x_<b>.npy inputs
for batches 1, 5 and 16; DIR/mlp.onnx, a dynamic-batch MLP (Gemm with a bias,
Relu, Gemm with transB, MatMul, Softmax) and DIR/m_<b>.npy for batches 1, 9
and 200; DIR/scatter.onnx, a ScatterElements into x [batch, 3, 24] of u
[batch, 3, 2] at indices i [batch, 3, 2] along the last axis, a family
without shape-generic kernels (tests/cli/gpu_profiles_test.sh).
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
    mlp(out, rng)
    scatter(out)


def mlp(out, rng):
    def w(name, *shape, scale=0.2):
        return numpy_helper.from_array((rng.randn(*shape) * scale).astype(np.float32), name)

    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["r1"]),
        helper.make_node("Gemm", ["r1", "w2", "b2"], ["h2"], transB=1),
        helper.make_node("MatMul", ["h2", "w3"], ["h3"]),
        helper.make_node("Softmax", ["h3"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(nodes, "mlp_dynamic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 7])],
                              [w("w1", 64, 48), w("b1", 48, scale=1.0), w("w2", 10, 48), w("b2", 10, scale=1.0),
                               w("w3", 10, 7)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, f"{out}/mlp.onnx")
    for b in (1, 9, 200):
        np.save(f"{out}/m_{b}.npy", rng.randn(b, 64).astype(np.float32))


def scatter(out):
    def info(name, dtype, *dims):
        return helper.make_tensor_value_info(name, dtype, ["batch", *dims])

    graph = helper.make_graph([helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=-1)],
                              "scatter_dynamic",
                              [info("x", TensorProto.FLOAT, 3, 24), info("i", TensorProto.INT64, 3, 2),
                               info("u", TensorProto.FLOAT, 3, 2)], [info("y", TensorProto.FLOAT, 3, 24)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, f"{out}/scatter.onnx")


if __name__ == "__main__":
    main()
