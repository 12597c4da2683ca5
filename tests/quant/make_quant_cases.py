"""Writes the low-bit quantization cases (issue 17 item 4) as ONNX test
folders (model.onnx + test_data_set_0/{input,output}_N.pb) into
tests/quant/cases/, outputs from onnx.reference (ml_dtypes' conversions):
  int4_weight_only_matmul  weight-only int4 quantization as LLM exporters
                           write it: an int4 initializer with per-block
                           scales and zero points (block_size 16 along K)
                           through DequantizeLinear into MatMul, + bias, Relu;
  fp8_qdq_matmul           float8e4m3fn Q/DQ around a MatMul, activations
                           quantized at run time (saturating), weights stored
                           as float8e4m3fn, the result quantized to
                           float8e5m2 and back;
  uint4_per_axis_conv      per-channel uint4 weights of a 1x1 Conv.
Run from the repository root with the project's venv:
    .venv/bin/python tests/quant/make_quant_cases.py tests/quant/cases
"""
import os
import sys

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

rng = np.random.default_rng(17)
F = TensorProto.FLOAT


def write_case(root, name, nodes, inputs, outputs, inits, feeds, opset=21):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="kiln-tests")
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    results = ReferenceEvaluator(model).run(None, feeds)
    for i, vi in enumerate(inputs):
        t = numpy_helper.from_array(feeds[vi.name], vi.name)
        open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb").write(t.SerializeToString())
    for i, (vo, r) in enumerate(zip(outputs, results)):
        assert np.isfinite(r.astype(np.float32)).all() and np.std(r.astype(np.float32)) > 1e-3, f"{name}: degenerate"
        t = numpy_helper.from_array(r, vo.name)
        open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb").write(t.SerializeToString())


def int4_weight_only_matmul(root):
    m, k, n, block = 8, 64, 48, 16
    w = rng.integers(-8, 8, size=(k, n)).astype(ml_dtypes.int4)
    scale = (rng.uniform(0.01, 0.05, size=(k // block, n))).astype(np.float32)
    zp = rng.integers(-2, 3, size=(k // block, n)).astype(ml_dtypes.int4)
    inits = [numpy_helper.from_array(w, "w_q"), numpy_helper.from_array(scale, "w_scale"),
             numpy_helper.from_array(zp, "w_zp"),
             numpy_helper.from_array(rng.standard_normal(n).astype(np.float32) * 0.1, "bias")]
    nodes = [
        helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["w"], axis=0, block_size=block),
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "bias"], ["xb"]),
        helper.make_node("Relu", ["xb"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", F, [m, k])
    y = helper.make_tensor_value_info("y", F, [m, n])
    feeds = {"x": rng.standard_normal((m, k)).astype(np.float32)}
    write_case(root, "int4_weight_only_matmul", nodes, [x], [y], inits, feeds)


def fp8_qdq_matmul(root):
    m, k, n = 16, 32, 24
    w = (rng.standard_normal((k, n)) * 0.3).astype(np.float32)
    w_scale = np.float32(np.abs(w).max() / 448.0)
    w_q = (w / w_scale).astype(ml_dtypes.float8_e4m3fn)
    inits = [numpy_helper.from_array(w_q, "w_q"), numpy_helper.from_array(np.array(w_scale), "w_scale"),
             numpy_helper.from_array(np.array(0.02, dtype=np.float32), "x_scale"),
             numpy_helper.from_array(np.array(0, dtype=ml_dtypes.float8_e4m3fn), "x_zp"),
             numpy_helper.from_array(np.array(0.05, dtype=np.float32), "y_scale"),
             numpy_helper.from_array(np.array(0, dtype=ml_dtypes.float8_e5m2), "y_zp")]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["x_q"]),
        helper.make_node("DequantizeLinear", ["x_q", "x_scale"], ["x_dq"]),
        helper.make_node("DequantizeLinear", ["w_q", "w_scale"], ["w_dq"]),
        helper.make_node("MatMul", ["x_dq", "w_dq"], ["acc"]),
        helper.make_node("QuantizeLinear", ["acc", "y_scale", "y_zp"], ["y_q"]),
        helper.make_node("DequantizeLinear", ["y_q", "y_scale"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", F, [m, k])
    y = helper.make_tensor_value_info("y", F, [m, n])
    # Some activations beyond float8e4m3fn's range after scaling: saturation.
    feeds = {"x": (rng.standard_normal((m, k)) * 3).astype(np.float32)}
    feeds["x"][0, :4] = [20.0, -20.0, 9.0, 1e-4]
    write_case(root, "fp8_qdq_matmul", nodes, [x], [y], inits, feeds)


def uint4_per_axis_conv(root):
    c, oc, hw = 8, 12, 5
    w = rng.integers(0, 16, size=(oc, c, 1, 1)).astype(ml_dtypes.uint4)
    scale = rng.uniform(0.02, 0.06, size=oc).astype(np.float32)
    zp = rng.integers(6, 10, size=oc).astype(ml_dtypes.uint4)
    inits = [numpy_helper.from_array(w, "w_q"), numpy_helper.from_array(scale, "w_scale"),
             numpy_helper.from_array(zp, "w_zp")]
    nodes = [
        helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["w"], axis=0),
        helper.make_node("Conv", ["x", "w"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", F, [1, c, hw, hw])
    y = helper.make_tensor_value_info("y", F, [1, oc, hw, hw])
    feeds = {"x": rng.standard_normal((1, c, hw, hw)).astype(np.float32)}
    write_case(root, "uint4_per_axis_conv", nodes, [x], [y], inits, feeds)


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/quant/cases"
    int4_weight_only_matmul(root)
    fp8_qdq_matmul(root)
    uint4_per_axis_conv(root)
