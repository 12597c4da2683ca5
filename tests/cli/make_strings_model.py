"""Writes strings.onnx and its inputs strings_a.pb, strings_b.pb for
strings_test.sh: StringConcat of two string inputs, then RegexFullMatch.
Run once by a developer (committed): python3 make_strings_model.py DIR"""
import sys

import onnx
from onnx import TensorProto as TP
from onnx import helper as h

out = sys.argv[1] if len(sys.argv) > 1 else "."
graph = h.make_graph(
    [h.make_node("StringConcat", ["a", "b"], ["c"], name="join"),
     h.make_node("RegexFullMatch", ["c"], ["m"], name="match", pattern=r"\w+@\w+\.com")],
    "strings",
    [h.make_tensor_value_info("a", TP.STRING, [2]), h.make_tensor_value_info("b", TP.STRING, [2])],
    [h.make_tensor_value_info("c", TP.STRING, [2]), h.make_tensor_value_info("m", TP.BOOL, [2])])
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 20)], ir_version=9,
                     producer_name="kiln tests/cli/make_strings_model.py")
onnx.checker.check_model(model)
onnx.save(model, f"{out}/strings.onnx")
for name, values in [("a", [b"ann", b"b\xc3\xa9"]), ("b", [b"@x.com", b"!"])]:
    with open(f"{out}/strings_{name}.pb", "wb") as f:
        f.write(h.make_tensor(name, TP.STRING, [2], values).SerializeToString())
