#!/usr/bin/env python3
"""Writes kiln's robustness corpus: bad models that must end in a clear error
and valid edge cases that must run.

Usage: make_corpus.py OUT [--kiln KILN] [--fake-cuda DIR]     (needs numpy and onnx)

Each case is a folder OUT/<name>/ holding model.onnx or model.plan (and
whatever files the case needs beside it); OUT/cases.json lists them:
    {"name", "kind": "error" | "valid" | "no_crash", "expect": substring of the
     error message (for "error"), "commands": ["compile", "run"...], "args": [...],
     "file": "model.onnx" | "model.plan", "env": {extra environment}}
Damaged plans (plan_*) need KILN to compile the plan they start from; the
plan for another GPU arch needs the fake CUDA driver's folder (DIR holds
libcuda.so.1, tests/runtime/fake_cuda/), which poses as an sm_80 GPU.
"error" cases must exit with code 1 and a message containing `expect`;
"valid" cases must pass (their folder is also a conformance test with
expected outputs computed here with numpy); "no_crash" cases (random bit flips)
may be accepted or rejected but must end in exit code 0 or 1.
OUT/outside/secret.bin is a file outside every case folder that external data
cases try to reach: the runner checks nothing outside the case folder is read.
"""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plan_file as pf  # noqa: E402
import image_cases  # noqa: E402
import stranger_cases  # noqa: E402

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


def case(name, kind, expect="", commands=("compile", "run"), args=(), file="model.onnx", env=None):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    CASES.append({"name": name, "kind": kind, "expect": expect, "commands": list(commands), "args": list(args),
                  "file": file, "env": env or {}})
    return d


def save(name, m, expect, commands=("compile", "run"), args=(), needs_memory_limit=False):
    d = case(name, "error", expect, commands, args)
    if needs_memory_limit:
        CASES[-1]["needs_memory_limit"] = True
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


def npy_file(header, data=b""):
    """A .npy (version 1) with this header dict text, padded as numpy pads it."""
    h = header.encode() + b" "
    h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data


def bad_npy_inputs():
    """`kiln run --inputs x:bad.npy` on a Relu of f32[2,3]: each .npy damaged
    one way; the message must name the .npy file."""
    m = model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [2, 3])], [vi("y", [2, 3])])
    ok = np.arange(6, dtype=np.float32).tobytes()
    cases = [
        ("npy_dim_overflow", "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999, 3), }", ok,
         "bad.npy: .npy shape dimension 99999999999999999999999 does not fit in 64 bits"),
        ("npy_negative_dim", "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", ok,
         "bad.npy: .npy shape has a negative dimension -2"),
        ("npy_float_dim", "{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 3), }", ok,
         "bad.npy: .npy shape dimension '2.0' is not a non-negative integer"),
        ("npy_numel_overflow", "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", ok,
         "bad.npy: element count of shape [4294967296,4294967296] overflows"),
        ("npy_big_endian", "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
         np.arange(6, dtype=">f4").tobytes(), "bad.npy: .npy data is big-endian"),
        ("npy_fortran_order", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", ok,
         "bad.npy: Fortran-order arrays are not supported"),
        ("npy_object_array", "{'descr': '|O', 'fortran_order': False, 'shape': (2, 3), }", b"\x80\x04\x95" + bytes(40),
         "bad.npy: .npy holds Python objects (dtype '|O'); kiln reads numeric arrays only and never unpickles"),
        ("npy_structured_dtype", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }", ok,
         "bad.npy: .npy dtype is not a plain type"),
        ("npy_unsupported_dtype", "{'descr': '<U4', 'fortran_order': False, 'shape': (2, 3), }", bytes(96),
         "bad.npy: .npy dtype '<U4' is not supported"),
        ("npy_truncated_data", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", ok[:10],
         "bad.npy: f32[2,3] needs 24 data bytes, the file holds 10 (truncated)"),
        ("npy_malformed_header", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", ok,
         "bad.npy: malformed .npy header"),
    ]
    for name, header, data, expect in cases:
        d = save(name, m, expect, commands=("run",), args=["--inputs", "x:bad.npy"])
        with open(os.path.join(d, "bad.npy"), "wb") as fh:
            fh.write(npy_file(header, data))


def bad_models_issue15():
    """Inputs strangers sent (issue 15): each used to be accepted silently, or
    to fail without naming the file."""
    f = TensorProto.FLOAT
    # An initializer shadowing a graph input of another shape (ONNX Runtime rejects it).
    save("initializer_shadows_input_shape",
         model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [2]), vi("w", [3])], [vi("y", [2])],
               inits=[helper.make_tensor("w", f, [2], [1, 2])]),
         'input "w": declared as f32[3] but the initializer of the same name is f32[2]')
    save("initializer_shadows_input_dtype",
         model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [2]), vi("w", [2], TensorProto.INT64)],
               [vi("y", [2])], inits=[helper.make_tensor("w", f, [2], [1, 2])]),
         'input "w": declared as i64[2]')
    both = helper.make_tensor("w", f, [2], [1.0, 2.0])
    both.raw_data = np.ones(2, np.float32).tobytes()
    save("tensor_raw_and_typed_data", model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [2])],
                                            [vi("y", [2])], inits=[both]),
         "holds its values twice (raw_data and float_data)")
    save("graph_without_outputs", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], []),
         "model.onnx: the graph has no outputs")
    # A Gather of constants that constant folding evaluates: its error names the model and the node.
    data = numpy_helper.from_array(np.ones((3, 2), np.float32), "data")
    idx = numpy_helper.from_array(np.array([0, 7], np.int64), "i")
    save("folded_gather_index_out_of_range",
         model([helper.make_node("Gather", ["data", "i"], ["y"], name="gather")], [], [vi("y", [2, 2])],
               inits=[data, idx]), 'model.onnx: node "gather" (gather)')
    # Limits raised past what the machine gives (run_corpus.py's 4 GiB of
    # address space): the allocation fails, and the message names the model.
    side = 1 << 15  # f32[32768, 32768]: 4 GiB per tensor
    save("out_of_host_memory", model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [side, side])],
                                     [vi("y", [side, side])]),
         "model.onnx: out of host memory", commands=("run",),
         args=["--max-tensor-bytes", "16G", "--max-total-bytes", "16G"], needs_memory_limit=True)
    # A 1 MB node name is shortened in messages: first and last 60 characters.
    long_name = "n" * (1 << 20)
    save("node_name_1mb", model([helper.make_node("FrobnicateX", ["x"], ["y"], name=long_name)], [vi("x", [2])],
                                [vi("y", [2])]), 'node "' + "n" * 60 + "..." + "n" * 60 + '" (FrobnicateX)')


def gpu_plan_cases():
    """Defects the GPU path showed on models no one here wrote (wave 2)."""
    # LinearAttention (opset 27) with its optional past_state absent but later
    # operands present: building the sm_90 plan dereferenced the absent operand
    # (SIGSEGV, with -o) until absent operands kept an empty parameter slot. "no_crash":
    # a build without codegen (the sanitizer build) refuses GPU targets, exit 1.
    f = TensorProto.FLOAT
    m = model([helper.make_node("LinearAttention", ["q", "k", "v", "", "decay", "beta"], ["y", "state"],
                                name="linear_attention", q_num_heads=4, kv_num_heads=4)],
              [vi("q", [2, 4, 32]), vi("k", [2, 4, 32]), vi("v", [2, 4, 32]), vi("decay", [2, 4, 32]),
               vi("beta", [2, 4, 4])], [vi("y", None), vi("state", None)], opset=27, ir_version=11)
    d = case("gpu_plan_absent_optional_operand", "no_crash", commands=("compile",),
             args=["--target", "sm_90", "-o", "model.plan"])
    CASES[-1]["gpu"] = True  # NVRTC is searched for and loaded outside the case folder
    onnx.save(m, os.path.join(d, "model.onnx"))


# Every command that reads a plan: the runtime (run, bench) and inspect.
PLAN_COMMANDS = ("run", "inspect", "bench")


def save_plan(name, data, expect, kind="error", args=(), env=None, commands=PLAN_COMMANDS):
    d = case(name, kind, expect, commands, args, file="model.plan", env=env)
    with open(os.path.join(d, "model.plan"), "wb") as fh:
        fh.write(data)
    return d


def flip(data, pos, bit=0):
    b = bytearray(data)
    b[pos] ^= 1 << bit
    return bytes(b)


def patched(body, pos, fmt, value):
    b = bytearray(body)
    struct.pack_into(fmt, b, pos, value)
    return bytes(b)


def bad_plans(kiln, fake_cuda):
    """A real plan (a small Conv + Relu + Add compiled by `kiln compile -o`,
    CPU target) damaged every way the loader checks: bytes and framing, the
    header, each section's checksum, then (checksums recomputed, so only the
    bounds and consistency checks can catch them) section offsets and sizes,
    counts, weight entries, launch bindings, the graph text, the kiln version
    and a GPU plan for another arch. Each through `kiln run`, `kiln inspect`
    and `kiln bench` (MODEL.plan)."""
    base_dir = os.path.join(OUT, "plan_base")
    os.makedirs(base_dir)
    w = numpy_helper.from_array(np.linspace(-1, 1, 3 * 2 * 3 * 3, dtype=np.float32).reshape(3, 2, 3, 3), "w")
    b = numpy_helper.from_array(np.array([0.5, -0.5, 0.25], np.float32), "b")
    m = model([helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
               helper.make_node("Relu", ["c"], ["r"], name="relu"), helper.make_node("Add", ["r", "c"], ["y"], name="add")],
              [vi("x", [1, 2, 5, 5])], [vi("y", [1, 3, 5, 5])], inits=[w, b])
    onnx.save(m, os.path.join(base_dir, "model.onnx"))
    base_path = os.path.join(base_dir, "model.plan")
    env = dict(os.environ, KILN_CACHE_DIR=os.path.join(OUT, "plan_base", "cache"))
    subprocess.run([kiln, "compile", os.path.join(base_dir, "model.onnx"), "--target", "cpu", "-o", base_path],
                   check=True, env=env,
                   stdout=subprocess.DEVNULL)
    with open(base_path, "rb") as fh:
        base = fh.read()
    secs = pf.parse(base)
    body = dict(secs)
    assert [sid for sid, _ in secs][:6] == [pf.META, pf.GRAPH, pf.WEIGHTS, pf.KERNELS, pf.LAUNCHES, pf.MEMORY]
    assert pf.build(secs) == base, "plan_file.py does not reproduce kiln's plan layout"
    with_ = lambda sid, new: pf.build(pf.replace(secs, sid, new))  # noqa: E731

    save_plan("plan_valid", base, "", kind="valid")

    # --- bytes and framing -------------------------------------------------
    save_plan("plan_empty", b"", "truncated: 0 bytes")
    save_plan("plan_truncated_header", base[:30], "truncated: 30 bytes, a plan header needs 40")
    save_plan("plan_truncated", base[: len(base) // 2], f"truncated: the header says the plan has {len(base)} bytes")
    save_plan("plan_trailing_bytes", base + b"\0" * 100, "trailing bytes")
    save_plan("plan_bad_magic", b"KILNPLAM" + base[8:], "not a kiln plan: magic is 'KILNPLAM'")
    save_plan("plan_onnx_file", m.SerializeToString(), "not a kiln plan")
    save_plan("plan_format_version", pf.build(secs, version=3), "plan format version 3, this runtime reads versions 1 to 2")

    # --- the header and its checksum ---------------------------------------
    save_plan("plan_header_flip", flip(base, pf.table_entry_at(1) + 4), "corrupt header: xxh64")
    save_plan("plan_section_count", pf.fix_header_checksum(patched(base, 24, "<I", 100)), "corrupt header: 100 sections")

    # --- a flipped byte in each section: its checksum ----------------------
    for i, (sid, sec) in enumerate(secs):
        off = struct.unpack_from("<Q", base, pf.table_entry_at(i) + 8)[0]
        name = pf.SECTION_NAMES[sid]
        save_plan(f"plan_flip_{name}", flip(base, off + len(sec) // 2, 3), f"section '{name}' is corrupt")

    # --- section table bounds (header checksum recomputed) -------------------
    def table(i, field, value):
        return pf.fix_header_checksum(patched(base, pf.table_entry_at(i) + field, "<Q", value))
    save_plan("plan_section_offset_past_end", table(2, 8, len(base) + 256), "section 'weights' (")
    save_plan("plan_section_size_huge", table(2, 16, (1 << 64) - 16), "is outside the")
    save_plan("plan_section_inside_header", table(1, 8, 0), "section 'graph' (")
    save_plan("plan_section_missing", pf.build([x for x in secs if x[0] != pf.MEMORY]), "section 'memory' is missing")
    save_plan("plan_section_twice", pf.build(secs + [(pf.GRAPH, body[pf.GRAPH])]), "section 'graph' appears twice")

    # --- inside sections (section checksums recomputed) ----------------------
    meta = pf.read_meta(body[pf.META])
    save_plan("plan_meta_string_length", with_(pf.META, patched(body[pf.META], 0, "<Q", 1 << 40)),
              "truncated reading kiln version")
    save_plan("plan_meta_trailing", with_(pf.META, body[pf.META] + b"\0"), "unexpected bytes after the last field")
    arch_count_at = 24 + sum(len(meta[k].encode()) for k in ("kiln_version", "target", "precision"))
    save_plan("plan_meta_arch_count", with_(pf.META, patched(body[pf.META], arch_count_at, "<Q", 1 << 61)),
              "arch count is")
    wsec = body[pf.WEIGHTS]
    entries = pf.weight_entries(wsec)
    start, _, rank, off_at, size_at = entries[0]
    w_off, w_size = struct.unpack_from("<QQ", wsec, off_at)
    save_plan("plan_weight_count_huge", with_(pf.WEIGHTS, patched(wsec, 0, "<Q", 1 << 60)), "weight count is")
    save_plan("plan_weight_offset_past_data", with_(pf.WEIGHTS, patched(wsec, off_at, "<Q", 1 << 30)),
              "is past the data's end")
    save_plan("plan_weight_offset_unaligned", with_(pf.WEIGHTS, patched(wsec, off_at, "<Q", w_off + 4)),
              "is not 256-byte aligned")
    save_plan("plan_weight_size_mismatch", with_(pf.WEIGHTS, patched(wsec, size_at, "<Q", w_size + 4)),
              f"has {w_size + 4} bytes, expected {w_size}")
    save_plan("plan_weight_dtype_code", with_(pf.WEIGHTS, patched(wsec, start, "<B", 200)), "dtype code 200")
    save_plan("plan_weight_negative_dim", with_(pf.WEIGHTS, patched(wsec, start + 10, "<q", -3)),
              "negative dimension -3")
    save_plan("plan_weight_rank_huge", with_(pf.WEIGHTS, patched(wsec, start + 2, "<Q", 1 << 58)), "rank is")
    save_plan("plan_weight_dims_overflow", with_(pf.WEIGHTS, patched(patched(wsec, start + 10, "<q", 1 << 40),
                                                                     start + 18, "<q", 1 << 40)), "weight")
    # f32 -> i32: the same size, a type the graph's constant does not have.
    save_plan("plan_weight_type_vs_graph", with_(pf.WEIGHTS, patched(wsec, start, "<B", 6)),
              "in the graph but weight 0 is i32")
    save_plan("plan_graph_constant_count", with_(pf.META, pf.write_meta(dict(meta, graph_constants=len(entries) - 1))),
              f"the graph has {len(entries)} constants, the weights section holds {len(entries) - 1}")
    save_plan("plan_graph_garbage", with_(pf.GRAPH, b"graph @m(%x: f32[1,2"), "the graph section does not parse")
    save_plan("plan_graph_invalid", with_(pf.GRAPH, body[pf.GRAPH].replace(b"relu(", b"tanh(", 1).replace(
        b"f32[1,3,5,5]", b"f32[1,3,5,4]", 1)), "the graph declares f32[1,3,5,4]")
    arena = pf.memory_arena_bytes(body[pf.MEMORY])
    kernel_step = (0, 0, 3, (1, 1, 1), (32, 1, 1), 0, [(0, 0, 0, 4, 1)])
    save_plan("plan_launch_kernel_index", with_(pf.LAUNCHES, pf.write_steps([kernel_step])),
              "launch step 0 names kernel 3, the plan has 0")
    copy = (1, 0, 0, (0, 1, 1), (0, 1, 1), 0, [(0, 0, arena, 16, 4), (0, 0, 0, 16, 4)])
    save_plan("plan_launch_arena_range", with_(pf.LAUNCHES, pf.write_steps([copy])),
              f"binds 16 bytes at arena offset {arena}, the arena has {arena}")
    copy_w = (1, 0, 0, (0, 1, 1), (0, 1, 1), 0, [(2, 0, 0, 16, 4), (3, 99, 0, 16, 4)])
    save_plan("plan_launch_weight_index", with_(pf.LAUNCHES, pf.write_steps([copy_w])), "binds weight 99, the plan has")
    copy_r = (1, 0, 0, (0, 1, 1), (0, 1, 1), 0, [(2, 0, 0, 16, 4), (3, 0, w_size - 4, 16, 4)])
    save_plan("plan_launch_weight_range", with_(pf.LAUNCHES, pf.write_steps([copy_r])),
              f"reads 16 bytes at {w_size - 4} of weight 0")
    save_plan("plan_launch_step_kind", with_(pf.LAUNCHES, patched(pf.write_steps([copy]), 8, "<B", 7)),
              "step 0 has unknown kind 7")
    save_plan("plan_launch_copy_arity", with_(pf.LAUNCHES, pf.write_steps([copy[:6] + ([copy[6][0]],)])),
              "copy step 0 has 1 buffers, expected 2")
    save_plan("plan_memory_truncated", with_(pf.MEMORY, body[pf.MEMORY][:12]), "section 'memory': truncated reading")
    save_plan("plan_kernels_count_huge", with_(pf.KERNELS, struct.pack("<Q", 1 << 62)), "kernel count is")

    # --- another kiln, another GPU -------------------------------------------
    save_plan("plan_other_kiln_version", with_(pf.META, pf.write_meta(dict(meta, kiln_version="0.0.9"))),
              "built by kiln 0.0.9, this runtime is kiln")
    if fake_cuda:
        # A GPU plan whose kernels are for sm_90 (CUBIN and PTX) on a GPU
        # posing as sm_80: PTX for sm_90 cannot JIT on an older GPU.
        gpu = pf.replace(pf.replace(secs, pf.META, pf.write_meta(dict(
            meta, target="sm_90", archs=["sm_90"], gpu_kernels=True, no_gpu_reason=""))), pf.KERNELS, pf.write_kernels(
            [("kiln_relu", "extern \"C\" __global__ void kiln_relu() {}", "sm_90", b"\x7fELF" + bytes(60),
              ".version 8.0\n.target sm_90\n")]))
        gpu = [x for x in gpu if x[0] != pf.RESOURCES]  # optional; it would have to list the kernel
        save_plan("plan_other_gpu_arch", pf.build(gpu), "the plan's kernels are for sm_90, this GPU is sm_80",
                  args=["--backend", "gpu"], env={"LD_LIBRARY_PATH": fake_cuda, "FAKE_CUDA_ARCH": "8.0"},
                  commands=("run", "bench"))  # inspect reads the plan without a GPU

    # --- random damage: accepted or rejected, never a crash ------------------
    rng = random.Random(11)
    for i in range(8):  # bit flips anywhere: the checksums catch them
        data = bytearray(base)
        for _ in range(1 + i % 3):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        save_plan(f"plan_bit_flip_random_{i}", bytes(data), "", kind="no_crash")
    for i in range(12):  # bytes of one section changed, checksums recomputed: only the parser's checks remain
        sid = secs[i % len(secs)][0]
        sec = bytearray(body[sid])
        for _ in range(1 + i % 4):
            if sec:
                sec[rng.randrange(len(sec))] = rng.randrange(256)
        save_plan(f"plan_mutated_{pf.SECTION_NAMES[sid]}_{i}", with_(sid, bytes(sec)), "", kind="no_crash")


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
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("out")
    ap.add_argument("--kiln")
    ap.add_argument("--fake-cuda")
    cli = ap.parse_args()
    OUT = os.path.abspath(cli.out)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(os.path.join(OUT, "outside"))
    with open(os.path.join(OUT, "outside", "secret.bin"), "wb") as fh:
        fh.write(np.ones(64, np.float32).tobytes())
    bad_models()
    bad_npy_inputs()
    bad_models_issue15()
    image_cases.add(sys.modules[__name__])
    stranger_cases.add(sys.modules[__name__])
    gpu_plan_cases()
    valid_models()
    if cli.kiln:
        bad_plans(os.path.abspath(cli.kiln), cli.fake_cuda and os.path.abspath(cli.fake_cuda))
    with open(os.path.join(OUT, "cases.json"), "w") as fh:
        json.dump(CASES, fh, indent=1)
    print(f"{len(CASES)} cases in {OUT}")
