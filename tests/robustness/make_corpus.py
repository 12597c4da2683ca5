#!/usr/bin/env python3
"""Writes kiln's robustness corpus: bad models that must end in a clear error
and valid edge cases that must run.

Usage: make_corpus.py OUT     (needs numpy and onnx)

Each case is a folder OUT/<name>/ holding model.onnx (and whatever files the
case needs beside it); OUT/cases.json lists them:
    {"name", "kind": "error" | "valid" | "no_crash", "expect": substring of the
     error message (for "error"), "commands": ["compile", "run"...], "args": [...]}
"error" cases must exit with code 1 and a message containing `expect`;
"valid" cases must pass (their folder is also a conformance test with
expected outputs computed here with numpy); "no_crash" cases (random bit flips)
may be accepted or rejected but must end in exit code 0 or 1.
OUT/outside/secret.bin is a file outside every case folder that external data
cases try to reach: the runner checks nothing outside the case folder is read.
"""
import json
import os
import random
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
CASES = []


def model(nodes, inputs, outputs, inits=(), opset=OPSET, ir_version=8, value_info=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits), value_info=list(value_info))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir_version
    return m


def vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def relu_model():
    return model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [2, 3])], [vi("y", [2, 3])])


def case(name, kind, expect="", commands=("compile", "run"), args=()):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    CASES.append({"name": name, "kind": kind, "expect": expect, "commands": list(commands), "args": list(args)})
    return d


def save(name, m, expect, commands=("compile", "run"), args=()):
    d = case(name, "error", expect, commands, args)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    return d


def save_bytes(name, data, expect, kind="error"):
    d = case(name, kind, expect)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(data)
    return d


def bare_tensor(name, dims, elem=TensorProto.FLOAT):
    """A TensorProto with dims and no data (onnx.helper would check the count)."""
    t = TensorProto()
    t.name, t.data_type = name, elem
    t.dims.extend(dims)
    return t


def external_model(location, offset=None, length=None, dims=(4,)):
    """A model whose one initializer w (f32[dims]) lives in external data."""
    w = bare_tensor("w", list(dims))
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = w.external_data.add()
            e.key, e.value = k, str(v)
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [vi("x", list(dims))],
                 [vi("y", list(dims))], inits=[w])


def bad_models():
    f = TensorProto.FLOAT
    # --- bytes -----------------------------------------------------------
    good = relu_model().SerializeToString()
    save_bytes("truncated_protobuf", good[: len(good) // 2], "protobuf parse failed")
    save_bytes("random_garbage", bytes(random.Random(1).getrandbits(8) for _ in range(4096)), "not a valid ONNX model")
    save_bytes("empty_file", b"", "the file is empty")
    # The graph field's length prefix (second byte after its tag 0x3a) made
    # larger than the file: a deterministic bit flip that breaks framing.
    flipped = bytearray(good)
    tag = flipped.index(0x3A)
    flipped[tag + 1] ^= 0x40
    save_bytes("bit_flip_length", bytes(flipped), "protobuf parse failed")
    # Random bit flips: kiln may accept or reject each one, never crash.
    rng = random.Random(7)
    conv = model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])],
                 [vi("x", [1, 2, 5, 5])], [vi("y", [1, 3, 5, 5])],
                 inits=[numpy_helper.from_array(np.ones((3, 2, 3, 3), np.float32), "w")]).SerializeToString()
    for i in range(12):
        b = bytearray(conv)
        for _ in range(1 + i % 3):
            pos = rng.randrange(len(b))
            b[pos] ^= 1 << rng.randrange(8)
        save_bytes(f"bit_flip_random_{i}", bytes(b), "", kind="no_crash")

    # --- header ----------------------------------------------------------
    save("ir_version_too_new", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])],
                                     ir_version=99), "IR version 99")
    save("opset_too_new", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])], opset=99),
         "opset 99 is newer")
    save("unknown_op", model([helper.make_node("FrobnicateX", ["x"], ["y"], name="frob")], [vi("x", [2])],
                             [vi("y", [2])]), "op FrobnicateX")
    save("unknown_domain", model([helper.make_node("Relu", ["x"], ["y"], name="r", domain="com.example")],
                                 [vi("x", [2])], [vi("y", [2])]), "domain 'com.example'")

    # --- dims, sizes, data lengths -----------------------------------------
    neg = helper.make_tensor("w", f, [2], [1.0, 2.0])
    neg.dims[0] = -2
    save("negative_dim_initializer", model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [2])],
                                           [vi("y", [2])], inits=[neg]), "negative dimension")
    save("negative_dim_input", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2, -3])], [vi("y", [2])]),
         "negative")
    huge = bare_tensor("w", [1 << 40, 1 << 40])
    save("huge_dims_overflow", model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [2])], [vi("y", [2])],
                                     inits=[huge]), "overflows")
    big = bare_tensor("w", [1 << 20, 1 << 20])
    save("huge_dims_over_limit", model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [2])], [vi("y", [2])],
                                       inits=[big]), "limit")
    save("huge_input_over_limit", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [1 << 20, 1 << 20])],
                                        [vi("y", [1 << 20, 1 << 20])]), "limit", commands=("run",))
    shape = numpy_helper.from_array(np.array([1 << 16, 1 << 16, 1 << 8], np.int64), "s")
    save("constant_of_shape_over_limit",
         model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos")], [], [vi("y", [1 << 16, 1 << 16, 256])],
               inits=[shape]), "limit")
    short = bare_tensor("w", [4])
    short.float_data.extend([1.0, 2.0, 3.0])
    save("typed_data_too_short", model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [4])], [vi("y", [4])],
                                       inits=[short]), "float_data holds 3 values")
    raw = bare_tensor("w", [4])
    raw.raw_data = np.ones(3, np.float32).tobytes()
    save("raw_data_wrong_length", model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [4])], [vi("y", [4])],
                                        inits=[raw]), "raw_data has 12 bytes")
    # Many moderate initializers: each under the single-tensor cap, together
    # over a total cap set on the command line.
    inits = [numpy_helper.from_array(np.zeros(1 << 16, np.float32), f"w{i}") for i in range(8)]
    nodes = [helper.make_node("Add", ["x" if i == 0 else f"a{i - 1}", f"w{i}"], [f"a{i}"]) for i in range(8)]
    save("total_bytes_over_limit", model(nodes, [vi("x", [1 << 16])], [vi("a7", [1 << 16])], inits=inits),
         "total", args=["--max-total-bytes", "1000000"])

    # --- SSA and topology ----------------------------------------------------
    save("duplicate_output_name",
         model([helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")],
               [vi("x", [2])], [vi("y", [2])]), "\"y\" is defined twice")
    save("duplicate_initializer",
         model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [2])], [vi("y", [2])],
               inits=[helper.make_tensor("w", f, [2], [1, 2]), helper.make_tensor("w", f, [2], [3, 4])]),
         "defined twice")
    save("dangling_input", model([helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")], [vi("x", [2])],
                                 [vi("y", [2])]), "\"nowhere\" is not defined")
    save("undefined_output", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("z", [2])]),
         "\"z\" is never produced")
    save("cycle", model([helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
                         helper.make_node("Relu", ["a"], ["b"], name="n2")], [vi("x", [2])], [vi("b", [2])]),
         "cycle")
    save("not_topologically_sorted",
         model([helper.make_node("Relu", ["a"], ["y"], name="second"), helper.make_node("Neg", ["x"], ["a"], name="first")],
               [vi("x", [2])], [vi("y", [2])]), "topologically sorted")
    save("output_type_mismatch", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])],
                                       [vi("y", [2], TensorProto.INT64)]), "declares i64")
    save("value_info_type_mismatch",
         model([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["y"])], [vi("x", [2, 3])],
               [vi("y", [2, 3])], value_info=[vi("a", [3, 2])]), "value_info")

    # --- attributes and op checks ---------------------------------------------
    bad_attr = helper.make_node("Conv", ["x", "w"], ["y"], name="conv")
    a = bad_attr.attribute.add()
    a.name, a.type, a.f = "strides", onnx.AttributeProto.FLOAT, 2.0
    w = numpy_helper.from_array(np.ones((3, 2, 3, 3), np.float32), "w")
    save("attribute_wrong_type", model([bad_attr], [vi("x", [1, 2, 5, 5])], [vi("y", [1, 3, 3, 3])], inits=[w]),
         "strides")
    dup = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=[1, 1])
    dup.attribute.extend([helper.make_attribute("strides", [2, 2])])
    save("duplicate_attribute", model([dup], [vi("x", [1, 2, 5, 5])], [vi("y", [1, 3, 3, 3])], inits=[w]),
         "given twice")
    w3 = numpy_helper.from_array(np.ones((3, 2, 3), np.float32), "w")
    save("conv_weight_rank", model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")],
                                   [vi("x", [1, 2, 5, 5])], [vi("y", [1, 3, 3, 3])], inits=[w3]), "conv")
    rs = numpy_helper.from_array(np.array([5, 5], np.int64), "s")
    save("reshape_element_count", model([helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")],
                                        [vi("x", [2, 3])], [vi("y", [5, 5])], inits=[rs]), "reshape")
    save("matmul_shape_mismatch", model([helper.make_node("MatMul", ["x", "z"], ["y"], name="mm")],
                                        [vi("x", [2, 3]), vi("z", [4, 5])], [vi("y", [2, 5])]), "mm")
    idx = numpy_helper.from_array(np.array([0, 7], np.int64), "i")
    save("gather_index_out_of_range", model([helper.make_node("Gather", ["x", "i"], ["y"], name="gather")],
                                            [vi("x", [3, 2])], [vi("y", [2, 2])], inits=[idx]), "out of range", commands=("run",))
    # Subgraphs nested 40 deep (If inside If...): over the depth cap of 32.
    # Built in place: protobuf's Python parser refuses messages this deep.
    m = model([], [vi("x", [2]), vi("c", [], TensorProto.BOOL)], [vi("o40", [2])])
    g = m.graph
    for i in range(40, 0, -1):
        node = g.node.add()
        node.op_type, node.name = "If", f"if{i}"
        node.input.append("c")
        node.output.append(f"o{i}")
        for branch in ("then_branch", "else_branch"):
            a = node.attribute.add()
            a.name, a.type = branch, onnx.AttributeProto.GRAPH
            a.g.name = f"{branch}{i}"
            a.g.output.add().CopyFrom(vi(f"o{i - 1}", [2]))
        leaf = node.attribute[1].g
        leaf.node.add().CopyFrom(helper.make_node("Identity", ["x"], [f"o{i - 1}"]))
        g = node.attribute[0].g
    g.node.add().CopyFrom(helper.make_node("Identity", ["x"], ["o0"]))
    save("subgraph_nesting_too_deep", m, "nested")

    # --- external data ------------------------------------------------------
    secret = os.path.join(OUT, "outside", "secret.bin")
    save("external_absolute_path", external_model(secret), "is absolute")
    save("external_dotdot", external_model("../outside/secret.bin"), "leaves the model's folder")
    save("external_dotdot_inner", external_model("sub/../../outside/secret.bin"), "leaves the model's folder")
    d = save("external_symlink", external_model("link.bin"), "symbolic link")
    os.symlink(secret, os.path.join(d, "link.bin"))
    d = save("external_symlinked_folder", external_model("dir/secret.bin"), "symbolic link")
    os.symlink(os.path.join(OUT, "outside"), os.path.join(d, "dir"))
    save("external_missing_file", external_model("nope.bin"), "does not exist")
    d = save("external_not_a_file", external_model("folder"), "not a regular file")
    os.makedirs(os.path.join(d, "folder"))
    d = save("external_offset_beyond_file", external_model("w.bin", offset=64), "outside the file")
    with open(os.path.join(d, "w.bin"), "wb") as fh:
        fh.write(np.ones(4, np.float32).tobytes())
    d = save("external_length_mismatch", external_model("w.bin", length=1000), "length 1000")
    with open(os.path.join(d, "w.bin"), "wb") as fh:
        fh.write(np.ones(4, np.float32).tobytes())
    d = save("external_offset_overflow", external_model("w.bin", offset=(1 << 63) - 8), "outside the file")
    with open(os.path.join(d, "w.bin"), "wb") as fh:
        fh.write(np.ones(4, np.float32).tobytes())
    d = save("external_negative_offset", external_model("w.bin", offset=-4), "negative")
    with open(os.path.join(d, "w.bin"), "wb") as fh:
        fh.write(np.ones(4, np.float32).tobytes())
    d = save("external_offset_not_integer", external_model("w.bin", offset="12abc"), "not an integer")
    with open(os.path.join(d, "w.bin"), "wb") as fh:
        fh.write(np.ones(4, np.float32).tobytes())


def write_test_data(d, inputs, outputs):
    t = os.path.join(d, "test_data_set_0")
    os.makedirs(t, exist_ok=True)
    for i, (name, a) in enumerate(inputs):
        with open(os.path.join(t, f"input_{i}.pb"), "wb") as fh:
            fh.write(numpy_helper.from_array(a, name).SerializeToString())
    for i, (name, a) in enumerate(outputs):
        with open(os.path.join(t, f"output_{i}.pb"), "wb") as fh:
            fh.write(numpy_helper.from_array(a, name).SerializeToString())


def valid_models():
    """Edge cases kiln must accept, with expected outputs computed by numpy."""
    f = TensorProto.FLOAT
    # Zero-size dims: an empty batch through Relu and Add.
    d = case("valid_zero_size_dims", "valid", commands=("compile", "run", "conformance"))
    m = model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "b"], ["y"])],
              [vi("x", [0, 3])], [vi("y", [0, 3])], inits=[numpy_helper.from_array(np.ones(3, np.float32), "b")])
    onnx.save(m, os.path.join(d, "model.onnx"))
    x = np.zeros((0, 3), np.float32)
    write_test_data(d, [("x", x)], [("y", np.maximum(x, 0) + 1)])
    # Empty tensors: an empty initializer concatenated to the input.
    d = case("valid_empty_tensor", "valid", commands=("compile", "run", "conformance"))
    m = model([helper.make_node("Concat", ["x", "e"], ["y"], axis=0)], [vi("x", [2, 2])], [vi("y", [2, 2])],
              inits=[numpy_helper.from_array(np.zeros((0, 2), np.float32), "e")])
    onnx.save(m, os.path.join(d, "model.onnx"))
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    write_test_data(d, [("x", x)], [("y", x)])
    # NaN and Inf inputs through arithmetic, Relu, Max and a reduction.
    d = case("valid_nan_inf", "valid", commands=("compile", "run", "conformance"))
    m = model([helper.make_node("Mul", ["x", "k"], ["m"]), helper.make_node("Relu", ["m"], ["r"]),
               helper.make_node("Max", ["r", "x"], ["y"]), helper.make_node("ReduceSum", ["x"], ["s"], keepdims=1)],
              [vi("x", [6])], [vi("y", [6]), vi("s", [1])],
              inits=[numpy_helper.from_array(np.array(2.0, np.float32), "k")], opset=12)
    onnx.save(m, os.path.join(d, "model.onnx"))
    x = np.array([np.nan, np.inf, -np.inf, 1.0, -2.0, 0.0], np.float32)
    r = np.maximum(x * 2, 0)
    r[np.isnan(x)] = np.nan
    # ONNX Max propagates NaN (as numpy's maximum does).
    write_test_data(d, [("x", x)], [("y", np.maximum(r, x)), ("s", np.array([np.sum(x)], np.float32))])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    OUT = os.path.abspath(sys.argv[1])
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(os.path.join(OUT, "outside"))
    with open(os.path.join(OUT, "outside", "secret.bin"), "wb") as fh:
        fh.write(np.ones(64, np.float32).tobytes())
    bad_models()
    valid_models()
    with open(os.path.join(OUT, "cases.json"), "w") as fh:
        json.dump(CASES, fh, indent=1)
    print(f"{len(CASES)} cases in {OUT}")
