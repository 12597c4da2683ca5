"""Writes the dynamic-shape models of dynamic_shapes_test.sh (issue 19) into DIR,
built with onnx.helper as exporters write them (dynamic axes as dim_param,
Reshape targets computed from Shape):
  cnn.onnx      x [batch,3,16,16] -> Conv, BatchNormalization, Relu, MaxPool,
                Conv, Relu, GlobalAveragePool, Flatten, Gemm, Softmax -> [batch,10]
  encoder.onnx  a BERT-style encoder layer: input_ids [batch,seq] (i64) and
                attention_mask [batch,seq] (i64) -> embedding Gather,
                LayerNormalization, Q/K/V MatMul, heads split by a Reshape whose
                target is Shape -> Gather -> Unsqueeze -> Concat, scaled
                QK^T + mask, Softmax, context merged back by the same kind of
                chain, an output projection as Gemm over [batch*seq, 32] (a
                Mul of two gathered dims), residual, LayerNormalization, a GELU
                (Erf) FFN -> hidden [batch,seq,32]
  split.onnx    x [n,4] -> Split into constant parts [2,2] along n: valid
                only where n is 4 (a profile whose largest n is not 4 fails
                the verifier at its largest shapes)
Random weights, seeded.
    python tests/cli/make_dynamic_models.py DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(19)


def w(name, *shape, scale=0.2):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="kiln-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def cnn(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])
    y = helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])
    inits = [w("w1", 8, 3, 3, 3), w("b1", 8), w("bn_s", 8), w("bn_b", 8), w("bn_m", 8, scale=0.1),
             numpy_helper.from_array((rng.random(8) + 0.5).astype(np.float32), "bn_v"),
             w("w2", 16, 8, 3, 3), w("b2", 16), w("fc_w", 10, 16), w("fc_b", 10)]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    save(helper.make_graph(nodes, "cnn", [x], [y], initializer=inits), path)


def encoder(path):
    d, heads, hd, ffn, vocab = 32, 4, 8, 64, 50
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", d])
    inits = [w("emb", vocab, d, scale=0.5), w("ln1_s", d), w("ln1_b", d), w("wq", d, d), w("wk", d, d),
             w("wv", d, d), w("wo", d, d), w("bo", d), w("ln2_s", d), w("ln2_b", d), w("w_ff1", d, ffn),
             w("w_ff2", ffn, d), i64("zero", [0]), i64("one", [1]), i64("heads", [heads]), i64("hd", [hd]),
             i64("d", [d]), i64("idx0", 0), i64("idx1", 1),
             numpy_helper.from_array(np.array(1 / np.sqrt(hd), dtype=np.float32), "scale"),
             numpy_helper.from_array(np.array(-10000.0, dtype=np.float32), "neg"),
             numpy_helper.from_array(np.array(1.0, dtype=np.float32), "onef"),
             numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half"),
             numpy_helper.from_array(np.array(1 / np.sqrt(2), dtype=np.float32), "rsqrt2")]
    n = helper.make_node
    nodes = [
        n("Gather", ["emb", "input_ids"], ["e"]),
        n("LayerNormalization", ["e", "ln1_s", "ln1_b"], ["h"], axis=-1, epsilon=1e-5),
        # batch and seq as exporters read them: Shape -> Gather -> Unsqueeze
        n("Shape", ["h"], ["hs"]),
        n("Gather", ["hs", "idx0"], ["b"], axis=0),
        n("Gather", ["hs", "idx1"], ["s"], axis=0),
        n("Unsqueeze", ["b", "zero"], ["b1"]),
        n("Unsqueeze", ["s", "zero"], ["s1"]),
        n("Concat", ["b1", "s1", "heads", "hd"], ["split_shape"], axis=0),
        n("Concat", ["b1", "s1", "d"], ["merge_shape"], axis=0),
        n("Mul", ["b1", "s1"], ["bs"]),
        n("Concat", ["bs", "d"], ["flat_shape"], axis=0),
    ]
    for name in ("q", "k", "v"):
        nodes += [n("MatMul", ["h", "w" + name], [name + "_p"]),
                  n("Reshape", [name + "_p", "split_shape"], [name + "_r"]),
                  n("Transpose", [name + "_r"], [name + "_t"], perm=[0, 2, 3, 1] if name == "k" else [0, 2, 1, 3])]
    nodes += [
        n("MatMul", ["q_t", "k_t"], ["qk"]),
        n("Mul", ["qk", "scale"], ["qk_s"]),
        # mask [batch, seq] -> (1 - mask) * -10000 as [batch, 1, 1, seq]
        n("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        n("Sub", ["onef", "mask_f"], ["inv"]),
        n("Mul", ["inv", "neg"], ["bias_2d"]),
        n("Unsqueeze", ["bias_2d", "one"], ["bias_3d"]),
        n("Unsqueeze", ["bias_3d", "one"], ["bias_4d"]),
        n("Add", ["qk_s", "bias_4d"], ["scores"]),
        n("Softmax", ["scores"], ["probs"], axis=-1),
        n("MatMul", ["probs", "v_t"], ["ctx"]),
        n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ctx_t", "merge_shape"], ["ctx_m"]),
        # the output projection as exporters write a Linear on 2-D: Gemm on [batch*seq, d]
        n("Reshape", ["ctx_m", "flat_shape"], ["ctx_2d"]),
        n("Gemm", ["ctx_2d", "wo", "bo"], ["o_2d"]),
        n("Reshape", ["o_2d", "merge_shape"], ["o"]),
        n("Add", ["o", "h"], ["res1"]),
        n("LayerNormalization", ["res1", "ln2_s", "ln2_b"], ["h2"], axis=-1, epsilon=1e-5),
        n("MatMul", ["h2", "w_ff1"], ["f1"]),
        n("Mul", ["f1", "rsqrt2"], ["f1s"]),
        n("Erf", ["f1s"], ["erf"]),
        n("Add", ["erf", "onef"], ["erf1"]),
        n("Mul", ["f1", "erf1"], ["g0"]),
        n("Mul", ["g0", "half"], ["gelu"]),
        n("MatMul", ["gelu", "w_ff2"], ["f2"]),
        n("Add", ["f2", "h2"], ["hidden"]),
    ]
    save(helper.make_graph(nodes, "encoder", [ids, mask], [out], initializer=inits), path)


def split_halves(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    outs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 4]) for name in ("first", "second")]
    node = helper.make_node("Split", ["x", "parts"], ["first", "second"], name="halves", axis=0)
    save(helper.make_graph([node], "split", [x], outs, initializer=[i64("parts", [2, 2])]), path)


def inputs(dir_, batch, seq):
    """input_ids / attention_mask .npy files for one shape (the mask zeroes the tail of row 0)."""
    ids = rng.integers(0, 50, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    mask[0, seq // 2:] = 0
    np.save(os.path.join(dir_, f"ids_{batch}x{seq}.npy"), ids)
    np.save(os.path.join(dir_, f"mask_{batch}x{seq}.npy"), mask)


if __name__ == "__main__":  # make_data_dependent_models.py imports the helpers above
    out_dir = sys.argv[1]
    cnn(os.path.join(out_dir, "cnn.onnx"))
    encoder(os.path.join(out_dir, "encoder.onnx"))
    split_halves(os.path.join(out_dir, "split.onnx"))
    for b, s in ((1, 5), (2, 16), (4, 33)):
        inputs(out_dir, b, s)
    # CNN inputs at three batch sizes (plan_profiles_test.sh feeds a plan files).
    for b in (1, 3, 6, 8):
        np.save(os.path.join(out_dir, f"x_{b}.npy"), rng.standard_normal((b, 3, 16, 16)).astype(np.float32))
