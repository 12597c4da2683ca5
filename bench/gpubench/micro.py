"""The micro benchmarks as small ONNX graphs kiln compiles like any model.

Sizes (issue 6): GEMM 4096^3 fp16; the 3x3 conv of ResNet-50's stage 3
(256 -> 256 channels, 14x14, batch 64: its throughput setting); softmax and
layernorm over the last axis of a 32 MB fp16 tensor ([4096, 4096]). A dry
run uses the scaled-down sizes of DRY (the reference backend is a CPU)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FULL = {"gemm_n": 4096, "conv": (64, 256, 14), "rows_cols": (4096, 4096)}
DRY = {"gemm_n": 256, "conv": (1, 64, 14), "rows_cols": (256, 1024)}

F16 = TensorProto.FLOAT16


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "micro", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def gemm(n):
    m = _model([helper.make_node("MatMul", ["a", "b"], ["c"], name="gemm")],
               [helper.make_tensor_value_info("a", F16, [n, n]), helper.make_tensor_value_info("b", F16, [n, n])],
               [helper.make_tensor_value_info("c", F16, [n, n])])
    return m, 2.0 * n ** 3


def conv3x3(batch, channels, hw):
    w = (np.random.default_rng(3).standard_normal((channels, channels, 3, 3)) * (2.0 / (9 * channels)) ** 0.5)
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv3x3", pads=[1, 1, 1, 1], kernel_shape=[3, 3])],
               [helper.make_tensor_value_info("x", F16, [batch, channels, hw, hw])],
               [helper.make_tensor_value_info("y", F16, [batch, channels, hw, hw])],
               [numpy_helper.from_array(w.astype(np.float16), "w")])
    return m, 2.0 * batch * hw * hw * channels * channels * 9


def softmax(rows, cols):
    m = _model([helper.make_node("Softmax", ["x"], ["y"], name="softmax", axis=-1)],
               [helper.make_tensor_value_info("x", F16, [rows, cols])],
               [helper.make_tensor_value_info("y", F16, [rows, cols])])
    return m, 2.0 * rows * cols * 2  # bytes read + written


def layernorm(rows, cols):
    rng = np.random.default_rng(5)
    m = _model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], name="layernorm", axis=-1)],
               [helper.make_tensor_value_info("x", F16, [rows, cols])],
               [helper.make_tensor_value_info("y", F16, [rows, cols])],
               [numpy_helper.from_array((1 + 0.1 * rng.standard_normal(cols)).astype(np.float16), "g"),
                numpy_helper.from_array((0.1 * rng.standard_normal(cols)).astype(np.float16), "b")])
    return m, 2.0 * rows * cols * 2 + 2 * cols * 2


def build_all(sizes):
    """[(name, model, work, unit, shape)]: work is FLOPs ("tflops") or bytes
    ("gbps"); shape says the size that ran ("n" or "batch x C x HxW" or rows x cols)."""
    n = sizes["gemm_n"]
    rows, cols = sizes["rows_cols"]
    b, c, hw = sizes["conv"]
    return [("gemm_4096_fp16", *gemm(n), "tflops", f"{n}x{n}x{n}"),
            ("conv3x3_stage3_fp16", *conv3x3(b, c, hw), "tflops", f"{b}x{c}x{hw}x{hw}"),
            ("softmax_32mb", *softmax(rows, cols), "gbps", f"{rows}x{cols}"),
            ("layernorm_32mb", *layernorm(rows, cols), "gbps", f"{rows}x{cols}")]


def kernel_ms(summary, op_words):
    """The time of the micro's own kernels, from `kiln bench --profile`: the
    profile entries whose op names one of `op_words` (layout transposes or
    casts kiln adds around a lone op are not the op). None without a profile."""
    prof = summary.get("profile")
    if not prof:
        return None
    # avg_ms is per call and each node runs once per inference.
    ms = sum(p["avg_ms"] for p in prof if any(w in p.get("op", "") or w in p.get("name", "") for w in op_words))
    return ms if ms > 0 else None
