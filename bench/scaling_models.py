"""Synthetic ONNX graphs of a chosen node count for bench/compile_scaling.py.

Two shapes that stress different parts of the pipeline:
  chain   a pure pointwise chain (Add/Mul/Sub by distinct one-element
          constants, Relu, Tanh, Sigmoid): the fuser grows one group of the
          whole length, and its body holds every node (issue 18's chains).
  ladder  a residual ladder: each block is Conv(1x1, bias) -> Relu ->
          MatMul -> Add(skip from the block's input) -> Relu, so every
          block has two anchors (conv, matmul), epilogues and a skip
          connection that the fuser's cycle check has to look across.
Weights are seeded random and distinct per node, as in a real model (no
constant merging collapses them).
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CHAIN_OPS = ["Add", "Relu", "Mul", "Tanh", "Sub", "Sigmoid"]
LADDER_BLOCK = 5  # nodes per ladder block


def _model(nodes, inits, x, y):
    g = helper.make_graph(nodes, "scaling", [x], [y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def chain(n, seed=0):
    rng = np.random.default_rng(seed)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    nodes, inits, prev = [], [], "x"
    for i in range(n):
        op = CHAIN_OPS[i % len(CHAIN_OPS)]
        out = f"v{i}"
        ins = [prev]
        if op in ("Add", "Mul", "Sub"):
            c = f"c{i}"
            # Near 1 for Mul, small otherwise: values stay finite over any length.
            val = 1.0 + 0.01 * rng.standard_normal(1) if op == "Mul" else 0.01 * rng.standard_normal(1)
            inits.append(numpy_helper.from_array(val.astype(np.float32), c))
            ins.append(c)
        nodes.append(helper.make_node(op, ins, [out], name=f"n{i}"))
        prev = out
    y = helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 64])
    return _model(nodes, inits, x, y)


def ladder(n, seed=0):
    rng = np.random.default_rng(seed)
    c, h = 8, 4
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])
    nodes, inits, prev = [], [], "x"
    for b in range(max(1, n // LADDER_BLOCK)):
        w, bias, m = f"w{b}", f"b{b}", f"m{b}"
        inits += [
            numpy_helper.from_array((0.3 * rng.standard_normal((c, c, 1, 1))).astype(np.float32), w),
            numpy_helper.from_array((0.1 * rng.standard_normal(c)).astype(np.float32), bias),
            numpy_helper.from_array((0.3 * rng.standard_normal((h, h))).astype(np.float32), m),
        ]
        t = [f"b{b}_{k}" for k in range(LADDER_BLOCK)]
        nodes += [
            helper.make_node("Conv", [prev, w, bias], [t[0]], name=f"conv{b}"),
            helper.make_node("Relu", [t[0]], [t[1]], name=f"relu{b}a"),
            helper.make_node("MatMul", [t[1], m], [t[2]], name=f"matmul{b}"),
            helper.make_node("Add", [t[2], prev], [t[3]], name=f"skip{b}"),
            helper.make_node("Relu", [t[3]], [t[4]], name=f"relu{b}b"),
        ]
        prev = t[-1]
    y = helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, c, h, h])
    return _model(nodes, inits, x, y)


SHAPES = {"chain": chain, "ladder": ladder}


def write(shape, n, path):
    onnx.save(SHAPES[shape](n), path)
