"""A model with a sequence input, an optional input and a sequence output
(kiln compile --sequence-shapes / --empty-optionals, sequence_inputs_test.sh):
y = SequenceInsert(s, x) (a sequence output), n = SequenceLength(s),
has = OptionalHasElement(o); plus the inputs as .npy files.
Usage: make_sequence_model.py DIR"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

d = sys.argv[1]
seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
opt = helper.make_value_info("o", helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2])))
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
y = helper.make_tensor_sequence_value_info("y", TensorProto.FLOAT, None)
n = helper.make_tensor_value_info("n", TensorProto.INT64, [])
has = helper.make_tensor_value_info("has", TensorProto.BOOL, [])
g = helper.make_graph(
    [
        helper.make_node("SequenceInsert", ["s", "x"], ["y"], name="insert"),
        helper.make_node("SequenceLength", ["s"], ["n"], name="length"),
        helper.make_node("OptionalHasElement", ["o"], ["has"], name="has"),
    ],
    "seq",
    [seq, opt, x],
    [y, n, has],
)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
m.ir_version = 8
onnx.save(m, f"{d}/seq.onnx")
np.save(f"{d}/s0.npy", np.array([1, 2], np.float32))
np.save(f"{d}/s1.npy", np.array([3, 4, 5], np.float32))
np.save(f"{d}/x.npy", np.array([7, 8], np.float32))
