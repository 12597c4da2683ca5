"""Writes the fusion/codegen contract cases (issue 15) as ONNX test folders
(model.onnx + test_data_set_0/{input,output}_N.pb, outputs from ONNX Runtime)
into tests/fusion/cases/. Each is a structure real exporters produce that the
fuser once grouped into a kernel codegen then refused:
  inception_pool    GoogLeNet/Inception: conv -> relu branches -> concat, the
                    concat read by a 1x1 conv and by a 3x3 stride-1 max_pool
                    (overlapping windows) -> 1x1 conv;
  attn_*            softmax(QK^T)V with a guard or mask between the matmuls:
                    Falcon's where(isnan(s)) guard, an additive float mask, a
                    boolean mask through where, GQA/MQA heads broadcast by
                    unsqueeze/expand/reshape, causal masks from Trilu and from
                    a constant, the scale before or after the first matmul, a
                    where mask with a mild fill (-10000).
Run from the repository root with the project's venv:
    .venv/bin/python tests/fusion/make_fusion_cases.py tests/fusion/cases
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(15)
F = TensorProto.FLOAT


def write_case(root, name, nodes, inputs, outputs, inits, feeds, opset=17):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="kiln-tests")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    results = sess.run(None, feeds)
    for i, vi in enumerate(inputs):
        t = numpy_helper.from_array(feeds[vi.name], vi.name)
        open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb").write(t.SerializeToString())
    for i, (vo, r) in enumerate(zip(outputs, results)):
        assert np.isfinite(r).all() and np.std(r) > 1e-3, f"{name}: degenerate output"
        t = numpy_helper.from_array(r, vo.name)
        open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb").write(t.SerializeToString())


def weight(name, shape, scale=0.5):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def inception_pool(root):
    c, hw = 8, 6
    x = helper.make_tensor_value_info("x", F, [1, c, hw, hw])
    y = helper.make_tensor_value_info("y", F, [1, 16, hw, hw])
    inits = [weight("wa", [4, c, 1, 1]), weight("ba", [4]), weight("wb", [4, c, 3, 3]), weight("bb", [4]),
             weight("w1", [8, 8, 1, 1]), weight("b1", [8]), weight("wp", [8, 8, 1, 1]), weight("bp", [8])]
    nodes = [
        helper.make_node("Conv", ["x", "wa", "ba"], ["ca"], name="conv_a"),
        helper.make_node("Relu", ["ca"], ["ra"], name="relu_a"),
        helper.make_node("Conv", ["x", "wb", "bb"], ["cb"], name="conv_b", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["cb"], ["rb"], name="relu_b"),
        helper.make_node("Concat", ["ra", "rb"], ["cat"], name="concat", axis=1),
        helper.make_node("Conv", ["cat", "w1", "b1"], ["c1"], name="branch_1x1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu_1x1"),
        helper.make_node("MaxPool", ["cat"], ["mp"], name="pool", kernel_shape=[3, 3], strides=[1, 1],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["mp", "wp", "bp"], ["cp"], name="pool_proj"),
        helper.make_node("Relu", ["cp"], ["rp"], name="relu_proj"),
        helper.make_node("Concat", ["r1", "rp"], ["y"], name="concat_out", axis=1),
    ]
    feeds = {"x": rng.standard_normal([1, c, hw, hw]).astype(np.float32)}
    write_case(root, "inception_pool", nodes, [x], [y], inits, feeds)


B, H, S, D = 1, 4, 8, 16


def attention_case(root, name, score_nodes, extra_inputs=(), extra_feeds=None, kv_heads=H, inits=(),
                   scale_first=False):
    """q, k, v [B,H,S,D] graph inputs (k, v with kv_heads heads); score_nodes
    turn "s" (scaled QK^T) into "s_final" before the softmax."""
    q = helper.make_tensor_value_info("q", F, [B, H, S, D])
    k = helper.make_tensor_value_info("k", F, [B, kv_heads, S, D])
    v = helper.make_tensor_value_info("v", F, [B, kv_heads, S, D])
    y = helper.make_tensor_value_info("y", F, [B, H, S, D])
    scale = numpy_helper.from_array(np.array(1 / np.sqrt(D), np.float32), "scale")
    nodes = []
    kname, vname = "k", "v"
    if kv_heads != H:  # GQA/MQA as Llama exports it: repeat_kv
        rep = H // kv_heads
        shape5 = numpy_helper.from_array(np.array([B, kv_heads, rep, S, D], np.int64), "shape5")
        shape4 = numpy_helper.from_array(np.array([B, H, S, D], np.int64), "shape4")
        ax2 = numpy_helper.from_array(np.array([2], np.int64), "ax2")
        inits = list(inits) + [shape5, shape4, ax2]
        for t in ("k", "v"):
            nodes += [
                helper.make_node("Unsqueeze", [t, "ax2"], [t + "_u"], name=t + "_unsqueeze"),
                helper.make_node("Expand", [t + "_u", "shape5"], [t + "_e"], name=t + "_expand"),
                helper.make_node("Reshape", [t + "_e", "shape4"], [t + "_r"], name=t + "_reshape"),
            ]
        kname, vname = "k_r", "v_r"
    nodes.append(helper.make_node("Transpose", [kname], ["kt"], name="k_transpose", perm=[0, 1, 3, 2]))
    if scale_first:
        nodes += [helper.make_node("Mul", ["q", "scale"], ["qs"], name="q_scale"),
                  helper.make_node("MatMul", ["qs", "kt"], ["s"], name="qk")]
    else:
        nodes += [helper.make_node("MatMul", ["q", "kt"], ["s0"], name="qk"),
                  helper.make_node("Mul", ["s0", "scale"], ["s"], name="score_scale")]
    nodes += score_nodes
    nodes += [helper.make_node("Softmax", ["s_final"], ["p"], name="softmax", axis=-1),
              helper.make_node("MatMul", ["p", vname], ["y"], name="pv")]
    feeds = {"q": rng.standard_normal([B, H, S, D]).astype(np.float32),
             "k": rng.standard_normal([B, kv_heads, S, D]).astype(np.float32),
             "v": rng.standard_normal([B, kv_heads, S, D]).astype(np.float32)}
    feeds.update(extra_feeds or {})
    write_case(root, name, nodes, [q, k, v] + list(extra_inputs), [y], [scale] + list(inits), feeds)


def neg_inf(name):
    return numpy_helper.from_array(np.array(-np.inf, np.float32), name)


def attention_cases(root):
    lowest = numpy_helper.from_array(np.array(np.finfo(np.float32).min, np.float32), "lowest")
    # Falcon: an additive mask, then a where(isnan(s)) guard before the softmax.
    mask = helper.make_tensor_value_info("mask", F, [B, 1, S, S])
    mask_feed = np.where(rng.random([B, 1, S, S]) < 0.3, -1e4, 0).astype(np.float32)
    attention_case(root, "attn_isnan_guard", [
        helper.make_node("Add", ["s", "mask"], ["sm"], name="add_mask"),
        helper.make_node("IsNaN", ["sm"], ["nan"], name="isnan"),
        helper.make_node("Where", ["nan", "lowest", "sm"], ["s_final"], name="guard"),
    ], [mask], {"mask": mask_feed}, inits=[lowest])
    # Additive float mask (BERT/ONNX decomposed attention).
    attention_case(root, "attn_additive_mask", [helper.make_node("Add", ["s", "mask"], ["s_final"], name="add_mask")],
                   [mask], {"mask": mask_feed})
    # Boolean mask through where(mask, s, -inf).
    bmask = helper.make_tensor_value_info("bmask", TensorProto.BOOL, [B, 1, S, S])
    bfeed = rng.random([B, 1, S, S]) < 0.7
    bfeed[..., 0] = True  # every row keeps a key
    attention_case(root, "attn_bool_mask", [helper.make_node("Where", ["bmask", "s", "ninf"], ["s_final"], name="mask")],
                   [bmask], {"bmask": bfeed}, inits=[neg_inf("ninf")])
    # GQA (2 kv heads for 4 query heads) and MQA (1), repeated by expand.
    attention_case(root, "attn_gqa", [helper.make_node("Identity", ["s"], ["s_final"], name="id")], kv_heads=2)
    attention_case(root, "attn_mqa_causal", [
        helper.make_node("Where", ["causal", "s", "ninf"], ["s_final"], name="causal_mask")],
        kv_heads=1, inits=[neg_inf("ninf"), numpy_helper.from_array(np.tril(np.ones([S, S], bool)), "causal")])
    # Causal from Trilu of ones (folded or not, the mask is lower triangular).
    ones = numpy_helper.from_array(np.ones([S, S], np.float32), "ones")
    zero = numpy_helper.from_array(np.array(0, np.float32), "zero")
    attention_case(root, "attn_trilu_causal", [
        helper.make_node("Trilu", ["ones"], ["tri"], name="trilu", upper=0),
        helper.make_node("Equal", ["tri", "zero"], ["masked"], name="is_masked"),
        helper.make_node("Where", ["masked", "ninf", "s"], ["s_final"], name="causal_mask"),
    ], inits=[ones, zero, neg_inf("ninf")])
    # Scale on q before the matmul, with an additive mask.
    attention_case(root, "attn_scale_first", [helper.make_node("Add", ["s", "mask"], ["s_final"], name="add_mask")],
                   [mask], {"mask": mask_feed}, scale_first=True)
    # where(mask, s, -10000) (older Hugging Face exports): a fill that is not
    # -inf is no additive mask; no attention op, and the fuser's own attention
    # group has no kernel (issue 15's "not a fused node with one attention op").
    mfeed = rng.random([B, 1, S, S]) < 0.7
    mfeed[..., 0] = True
    fill = numpy_helper.from_array(np.array(-1e4, np.float32), "fill")
    attention_case(root, "attn_mild_fill_mask", [
        helper.make_node("Where", ["bmask", "s", "fill"], ["s_final"], name="mask")],
        [bmask], {"bmask": mfeed}, inits=[fill])


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "cases")
    inception_pool(root)
    attention_cases(root)
