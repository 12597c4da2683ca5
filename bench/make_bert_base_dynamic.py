"""A BERT-base-sized encoder with dynamic batch and sequence axes, for the
launch-variant report (docs/dynamic_shapes.md "Specialised launches"):
12 layers of the structure of tests/cli/make_dynamic_models.py's encoder
(embedding gather, layer norms, Q/K/V MatMuls, heads split by a Reshape read
off Shape, masked softmax attention, output Gemm on [batch*seq, d], Erf GELU
FFN) at hidden 768, 12 heads of 64, FFN 3072, vocabulary 30522. Random
weights: the report is the performance model's, not accuracy.
Usage: make_bert_base_dynamic.py OUT.onnx"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(19)
D, HEADS, HD, FFN, VOCAB, LAYERS = 768, 12, 64, 3072, 30522, 12


def w(name, *shape, scale=0.02):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def f32(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.float32), name)


def main(path):
    n = helper.make_node
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", D])
    inits = [w("emb", VOCAB, D), w("ln0_s", D), w("ln0_b", D), i64("zero", [0]), i64("one", [1]),
             i64("heads", [HEADS]), i64("hd", [HD]), i64("d", [D]), i64("idx0", 0), i64("idx1", 1),
             f32("scale", 1 / np.sqrt(HD)), f32("neg", -10000.0), f32("onef", 1.0), f32("half", 0.5),
             f32("rsqrt2", 1 / np.sqrt(2))]
    nodes = [
        n("Gather", ["emb", "input_ids"], ["e"]),
        n("LayerNormalization", ["e", "ln0_s", "ln0_b"], ["h0"], axis=-1, epsilon=1e-5),
        n("Shape", ["h0"], ["hs"]),
        n("Gather", ["hs", "idx0"], ["b"], axis=0),
        n("Gather", ["hs", "idx1"], ["s"], axis=0),
        n("Unsqueeze", ["b", "zero"], ["b1"]),
        n("Unsqueeze", ["s", "zero"], ["s1"]),
        n("Concat", ["b1", "s1", "heads", "hd"], ["split_shape"], axis=0),
        n("Concat", ["b1", "s1", "d"], ["merge_shape"], axis=0),
        n("Mul", ["b1", "s1"], ["bs"]),
        n("Concat", ["bs", "d"], ["flat_shape"], axis=0),
        n("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        n("Sub", ["onef", "mask_f"], ["inv"]),
        n("Mul", ["inv", "neg"], ["bias_2d"]),
        n("Unsqueeze", ["bias_2d", "one"], ["bias_3d"]),
        n("Unsqueeze", ["bias_3d", "one"], ["bias_4d"]),
    ]
    h = "h0"
    for layer in range(LAYERS):
        p = f"l{layer}_"
        inits += [w(p + "wq", D, D), w(p + "wk", D, D), w(p + "wv", D, D), w(p + "wo", D, D), w(p + "bo", D),
                  w(p + "ln1_s", D), w(p + "ln1_b", D), w(p + "w_ff1", D, FFN), w(p + "w_ff2", FFN, D),
                  w(p + "ln2_s", D), w(p + "ln2_b", D)]
        for name in ("q", "k", "v"):
            nodes += [n("MatMul", [h, p + "w" + name], [p + name + "_p"]),
                      n("Reshape", [p + name + "_p", "split_shape"], [p + name + "_r"]),
                      n("Transpose", [p + name + "_r"], [p + name + "_t"],
                        perm=[0, 2, 3, 1] if name == "k" else [0, 2, 1, 3])]
        nodes += [
            n("MatMul", [p + "q_t", p + "k_t"], [p + "qk"]),
            n("Mul", [p + "qk", "scale"], [p + "qk_s"]),
            n("Add", [p + "qk_s", "bias_4d"], [p + "scores"]),
            n("Softmax", [p + "scores"], [p + "probs"], axis=-1),
            n("MatMul", [p + "probs", p + "v_t"], [p + "ctx"]),
            n("Transpose", [p + "ctx"], [p + "ctx_t"], perm=[0, 2, 1, 3]),
            n("Reshape", [p + "ctx_t", "merge_shape"], [p + "ctx_m"]),
            n("Reshape", [p + "ctx_m", "flat_shape"], [p + "ctx_2d"]),
            n("Gemm", [p + "ctx_2d", p + "wo", p + "bo"], [p + "o_2d"]),
            n("Reshape", [p + "o_2d", "merge_shape"], [p + "o"]),
            n("Add", [p + "o", h], [p + "res1"]),
            n("LayerNormalization", [p + "res1", p + "ln1_s", p + "ln1_b"], [p + "h1"], axis=-1, epsilon=1e-5),
            n("MatMul", [p + "h1", p + "w_ff1"], [p + "f1"]),
            n("Mul", [p + "f1", "rsqrt2"], [p + "f1s"]),
            n("Erf", [p + "f1s"], [p + "erf"]),
            n("Add", [p + "erf", "onef"], [p + "erf1"]),
            n("Mul", [p + "f1", p + "erf1"], [p + "g0"]),
            n("Mul", [p + "g0", "half"], [p + "gelu"]),
            n("MatMul", [p + "gelu", p + "w_ff2"], [p + "f2"]),
            n("Add", [p + "f2", p + "h1"], [p + "res2"]),
        ]
        last = layer == LAYERS - 1
        nxt = "hidden" if last else p + "h2"
        nodes.append(n("LayerNormalization", [p + "res2", p + "ln2_s", p + "ln2_b"], [nxt], axis=-1, epsilon=1e-5))
        h = nxt
    model = helper.make_model(helper.make_graph(nodes, "bert_base_dynamic", [ids, mask], [out], initializer=inits),
                              opset_imports=[helper.make_opsetid("", 17)], producer_name="kiln-bench")
    model.ir_version = 8
    onnx.save(model, path)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
