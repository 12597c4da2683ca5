"""Writes the small decoder layer the KV-cache-in-place GPU test runs
(tests/runtime/fake_gpu_kv_in_place_test.cpp) and ONNX Runtime's outputs for
its steps, as exporters write such a layer: projections (MatMul), heads split
by Reshape/Transpose, the cache as Concat(past, new) along the sequence,
attention as MatMul/Softmax/MatMul over the present, the output projection;
dynamic `seq` and `past`. ONNX Runtime runs the copy-back loop (each step's
presents are the next step's pasts) over the steps below; the x of each step
and its y are saved as .npy.
    .venv/bin/python tests/runtime/make_kv_decoder.py tests/runtime/kv_decoder
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HIDDEN, HEADS, HEAD_DIM = 64, 2, 16
STEPS = [(5, 0), (1, 5), (1, 6), (1, 7), (8, 8), (1, 16), (1, 17)]  # (seq, past)


def model():
    rng = np.random.default_rng(19)

    def weight(name, rows, cols):
        return numpy_helper.from_array((rng.standard_normal((rows, cols)) * 0.2).astype(np.float32), name)

    inits = [weight("wq", HIDDEN, HEADS * HEAD_DIM), weight("wk", HIDDEN, HEADS * HEAD_DIM),
             weight("wv", HIDDEN, HEADS * HEAD_DIM), weight("wo", HEADS * HEAD_DIM, HIDDEN),
             numpy_helper.from_array(np.array([1, -1, HEADS, HEAD_DIM], np.int64), "heads_shape"),
             numpy_helper.from_array(np.array([1, -1, HEADS * HEAD_DIM], np.int64), "merged_shape"),
             numpy_helper.from_array(np.array(1.0 / np.sqrt(HEAD_DIM), np.float32), "scale")]
    nodes = []
    for p in "qkv":
        nodes += [helper.make_node("MatMul", ["x", "w" + p], [p + "_proj"]),
                  helper.make_node("Reshape", [p + "_proj", "heads_shape"], [p + "_heads"]),
                  helper.make_node("Transpose", [p + "_heads"], [p + "_t"], perm=[0, 2, 1, 3])]
    nodes += [helper.make_node("Concat", ["past_key", "k_t"], ["present_key"], axis=2),
              helper.make_node("Concat", ["past_value", "v_t"], ["present_value"], axis=2),
              helper.make_node("Transpose", ["present_key"], ["key_t"], perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q_t", "key_t"], ["scores"]),
              helper.make_node("Mul", ["scores", "scale"], ["scaled"]),
              helper.make_node("Softmax", ["scaled"], ["probs"], axis=-1),
              helper.make_node("MatMul", ["probs", "present_value"], ["context"]),
              helper.make_node("Transpose", ["context"], ["context_t"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["context_t", "merged_shape"], ["merged"]),
              helper.make_node("MatMul", ["merged", "wo"], ["y"])]
    cache = [1, HEADS, "past", HEAD_DIM]
    present = [1, HEADS, "past+seq", HEAD_DIM]
    graph = helper.make_graph(
        nodes, "kv_decoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", HIDDEN]),
         helper.make_tensor_value_info("past_key", TensorProto.FLOAT, cache),
         helper.make_tensor_value_info("past_value", TensorProto.FLOAT, cache)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", HIDDEN]),
         helper.make_tensor_value_info("present_key", TensorProto.FLOAT, present),
         helper.make_tensor_value_info("present_value", TensorProto.FLOAT, present)],
        initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="kiln-tests")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    m = model()
    onnx.save(m, os.path.join(out, "model.onnx"))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    pk = np.zeros((1, HEADS, 0, HEAD_DIM), np.float32)
    pv = pk.copy()
    for i, (seq, past) in enumerate(STEPS):
        assert pk.shape[2] == past
        x = rng.standard_normal((1, seq, HIDDEN)).astype(np.float32)
        y, pk, pv = sess.run(None, {"x": x, "past_key": pk, "past_value": pv})
        np.save(os.path.join(out, f"step{i}_x.npy"), x)
        np.save(os.path.join(out, f"step{i}_y.npy"), y)
    np.save(os.path.join(out, "last_present_key.npy"), pk)
    np.save(os.path.join(out, "last_present_value.npy"), pv)


if __name__ == "__main__":
    main()
