"""One decode step of grouped-query attention, for the performance model's
report on GQA head packing (docs/performance.md, "GQA head packing"): a
query of one token for Q query heads against a past of P keys of K key/value
heads (Llama's repeat_kv: unsqueeze -> expand -> reshape, which kiln's
attention reads as grouped-query), head dim D, softmax(q k^T / sqrt(D)) v.
fp32 ONNX; compile it at --precision fp16 for the tensor-core kernel.
Usage: make_gqa_decode.py OUT.onnx [--batch 1] [--heads 32] [--kv-heads 8] [--dim 128] [--past 2048]"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--past", type=int, default=2048)
    a = ap.parse_args()
    B, H, K, D, P = a.batch, a.heads, a.kv_heads, a.dim, a.past
    if H % K:
        ap.error("--heads must be a multiple of --kv-heads")
    F = TensorProto.FLOAT
    q = helper.make_tensor_value_info("q", F, [B, H, 1, D])
    k = helper.make_tensor_value_info("k", F, [B, K, P, D])
    v = helper.make_tensor_value_info("v", F, [B, K, P, D])
    y = helper.make_tensor_value_info("y", F, [B, H, 1, D])
    inits = [
        numpy_helper.from_array(np.array(1 / np.sqrt(D), np.float32), "scale"),
        numpy_helper.from_array(np.array([B, K, H // K, P, D], np.int64), "shape5"),
        numpy_helper.from_array(np.array([B, H, P, D], np.int64), "shape4"),
        numpy_helper.from_array(np.array([2], np.int64), "ax2"),
    ]
    nodes = []
    for t in ("k", "v"):  # repeat_kv
        nodes += [
            helper.make_node("Unsqueeze", [t, "ax2"], [t + "_u"], name=t + "_unsqueeze"),
            helper.make_node("Expand", [t + "_u", "shape5"], [t + "_e"], name=t + "_expand"),
            helper.make_node("Reshape", [t + "_e", "shape4"], [t + "_r"], name=t + "_reshape"),
        ]
    nodes += [
        helper.make_node("Transpose", ["k_r"], ["kt"], name="k_transpose", perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["s0"], name="qk"),
        helper.make_node("Mul", ["s0", "scale"], ["s"], name="score_scale"),
        helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["p", "v_r"], ["y"], name="pv"),
    ]
    graph = helper.make_graph(nodes, "gqa_decode", [q, k, v], [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="kiln-bench")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, a.out)


if __name__ == "__main__":
    main()
