"""Writes the small models and tensors of the tests for issue 16 (users coming
from trtexec, polygraphy, ONNX Runtime):

  slash_names.onnx   outputs named "gpu_0/softmax_1", "gpu_0_softmax_1" (the
                     same file name once sanitized) and "../up" (--outputs)
  gather_ids.onnx    BERT-like ids: input_ids [1,8] into a 50-row table and
                     token_type_ids [1,8] into a 2-row table (random ids must
                     stay in range)
  overflow.onnx      y = max(x @ W), W all 30000: 120000 for x = 1, finite in
                     fp32, Inf in fp16 (the f16 MatMul result overflows; a
                     fused pointwise chain would not: it computes in fp32)
  small_x.npy, small_x.pb   one value of small.onnx's input x [2,3,8], as NumPy
                     and as an ONNX TensorProto

    python tests/cli/make_habits_models.py tests/cli
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]


def save(graph, name):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name))


f32 = TensorProto.FLOAT
data = helper.make_tensor_value_info("data", f32, [2, 3])
save(helper.make_graph(
    [helper.make_node("Softmax", ["data"], ["gpu_0/softmax_1"], axis=1),
     helper.make_node("Relu", ["data"], ["gpu_0_softmax_1"]),
     helper.make_node("Neg", ["data"], ["../up"])],
    "slash_names", [data],
    [helper.make_tensor_value_info(n, f32, [2, 3]) for n in ["gpu_0/softmax_1", "gpu_0_softmax_1", "../up"]]),
    "slash_names.onnx")

ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 8])
types = helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, [1, 8])
words = numpy_helper.from_array(np.arange(50 * 4, dtype=np.float32).reshape(50, 4), "word_embeddings")
type_table = numpy_helper.from_array(np.array([[0, 0, 0, 0], [1000, 1000, 1000, 1000]], np.float32),
                                     "token_type_embeddings")
save(helper.make_graph(
    [helper.make_node("Gather", ["word_embeddings", "input_ids"], ["w"], name="words"),
     helper.make_node("Gather", ["token_type_embeddings", "token_type_ids"], ["t"], name="types"),
     helper.make_node("Add", ["w", "t"], ["embeddings"], name="add")],
    "gather_ids", [ids, types], [helper.make_tensor_value_info("embeddings", f32, [1, 8, 4])],
    initializer=[words, type_table]),
    "gather_ids.onnx")

x = helper.make_tensor_value_info("x", f32, [1, 4])
w = numpy_helper.from_array(np.full((4, 4), 30000, np.float32), "w")
save(helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["a"], name="matmul"),
     helper.make_node("ReduceMax", ["a"], ["y"], name="max", axes=[1], keepdims=1)],
    "overflow", [x], [helper.make_tensor_value_info("y", f32, [1, 1])], initializer=[w]),
    "overflow.onnx")

v = (np.arange(2 * 3 * 8, dtype=np.float32).reshape(2, 3, 8) / 10 - 2).astype(np.float32)
np.save(os.path.join(out, "small_x.npy"), v)
with open(os.path.join(out, "small_x.pb"), "wb") as f:
    f.write(numpy_helper.from_array(v, "x").SerializeToString())
