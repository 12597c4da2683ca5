#!/usr/bin/env python3
"""Rebuilds kiln's real-model tests from tests/models/*.skeleton.onnx.

For each skeleton: weights are regenerated from the recipes export_models.py
left in each stripped initializer (seeded, so every run gives the same bytes),
inputs are drawn with a fixed seed, and ONNX Runtime (CPU, graph
optimisations off: a plain reference) computes the expected outputs. Each
model becomes a conformance-format folder that `kiln conformance` runs:
    OUT/<name>/model.onnx
    OUT/<name>/test_data_set_0/input_K.pb, output_K.pb
A folder whose stamp matches the skeleton and this script is left alone.

The model zoo (tests/models/zoo/*.skeleton.onnx, docs/models.md) is prepared
the same way with --zoo; its skeletons carry their input recipe in the
metadata entry kiln-inputs instead of INPUTS below. The dynamic zoo tier
(tests/models/zoo/dynamic) with --zoo-dynamic: its skeletons also carry a
profile (kiln-profile), and each folder gets one data set per run shape and
the profile as profile.json.

Usage: prepare_models.py [--zoo | --zoo-dynamic] OUT [names...]   (needs numpy, onnx, onnxruntime)
"""
import hashlib
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.join(HERE, "zoo")

# How each model's inputs are drawn (seed 7). Images: standard normal.
INPUTS = {
    "bert_base": {"input_ids": ("ints", 30522), "attention_mask": ("mask", 16), "token_type_ids": ("zeros",)},
    "gpt2": {"input_ids": ("ints", 50257)},
}


def seeded_normal(shape, mean, std, seed):
    """The twin of export_models.py's generator: same bytes for the same recipe."""
    return (np.random.default_rng(seed).standard_normal(shape) * std + mean).astype(np.float32)


def rebuild_weights(model):
    for init in model.graph.initializer:
        if not init.doc_string.startswith("kiln-recipe:"):
            continue
        r = json.loads(init.doc_string[len("kiln-recipe:"):])
        perm = r.get("transpose")  # stored transposed by the exporter
        dims = tuple(init.dims) if perm is None else tuple(init.dims[p] for p in perm)
        arr = seeded_normal(dims, r["normal"][0], r["normal"][1], r["seed"])
        if perm is not None:
            arr = arr.transpose(perm)
        if "scale" in r:  # BatchNorm folded into a Conv by the exporter: per output channel
            arr = (arr * np.asarray(r["scale"], np.float32).reshape((-1,) + (1,) * (arr.ndim - 1))).astype(np.float32)
        dtype = onnx.helper.tensor_dtype_to_np_dtype(init.data_type)
        init.raw_data = arr.astype(dtype).tobytes()
        init.doc_string = ""


def draw(rng, shape, dtype, spec):
    """One input from its recipe: ("normal",), ("ints", high), ("mask", k)
    (ones but the last k positions), ("zeros",), ("ones",), ("uniform", lo, hi)."""
    if spec[0] == "ints":
        arr = rng.integers(0, spec[1], shape)
    elif spec[0] == "mask":  # attend to all but the last spec[1] positions
        arr = np.ones(shape)
        arr[..., -spec[1]:] = 0
    elif spec[0] == "zeros":
        arr = np.zeros(shape)
    elif spec[0] == "ones":
        arr = np.ones(shape)
    elif spec[0] == "uniform":
        arr = rng.uniform(spec[1], spec[2], shape)
    elif spec[0] == "normal":
        arr = rng.standard_normal(shape)
    else:
        raise SystemExit(f"unknown input recipe {spec}")
    return arr.astype(dtype)


def input_specs(name, model):
    meta = {p.key: p.value for p in model.metadata_props}
    if "kiln-inputs" in meta:
        return {n: tuple(v["draw"]) for n, v in json.loads(meta["kiln-inputs"]).items()}
    return INPUTS.get(name, {})


def recorded_shapes(model):
    """The shapes export_zoo.py recorded for inputs with dynamic dims."""
    meta = {p.key: p.value for p in model.metadata_props}
    if "kiln-inputs" not in meta:
        return {}
    return {n: v["shape"] for n, v in json.loads(meta["kiln-inputs"]).items() if "shape" in v}


def recorded_profile(model):
    """The dynamic tier's profile (export_zoo.py --dynamic): min/opt/max
    shapes per input and the three shapes it runs at; None elsewhere."""
    meta = {p.key: p.value for p in model.metadata_props}
    return json.loads(meta["kiln-profile"]) if "kiln-profile" in meta else None


def make_inputs(name, model, seed=7, shapes=None):
    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    specs = input_specs(name, model)
    recorded = shapes or recorded_shapes(model)
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value for d in tt.shape.dim]
        if any(not d.HasField("dim_value") for d in tt.shape.dim):  # a dynamic dim
            if vi.name not in recorded:
                raise SystemExit(f"{name}: input {vi.name} has dynamic dims and no recorded shape")
            shape = recorded[vi.name]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        feeds[vi.name] = draw(rng, shape, dtype, specs.get(vi.name, ("normal",)))
    return feeds


def stamp_of(skeleton_path):
    h = hashlib.sha256()
    for p in (skeleton_path, os.path.abspath(__file__)):
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def prepare(name, out_root, src=HERE):
    skeleton = os.path.join(src, f"{name}.skeleton.onnx")
    folder = os.path.join(out_root, name)
    stamp_path = os.path.join(folder, "stamp")
    stamp = stamp_of(skeleton)
    if os.path.exists(stamp_path) and open(stamp_path).read() == stamp:
        print(f"{name}: up to date")
        return
    model = onnx.load(skeleton)
    rebuild_weights(model)
    os.makedirs(folder, exist_ok=True)
    model_path = os.path.join(folder, "model.onnx")
    onnx.save(model, model_path)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    # The dynamic tier: one data set per run shape (seeds 7, 8, 9), and the
    # profile beside them for tests/models/zoo/run_zoo_dynamic.py.
    profile = recorded_profile(model)
    runs = [(7, None)] if profile is None else [(7 + k, shapes) for k, shapes in enumerate(profile["runs"])]
    for k, (seed, shapes) in enumerate(runs):
        data = os.path.join(folder, f"test_data_set_{k}")
        os.makedirs(data, exist_ok=True)
        feeds = make_inputs(name, model, seed, shapes)
        outs = sess.run(None, feeds)
        for i, (n, arr) in enumerate(feeds.items()):
            onnx.save_tensor(numpy_helper.from_array(arr, n), os.path.join(data, f"input_{i}.pb"))
        for i, (o, arr) in enumerate(zip(sess.get_outputs(), outs)):
            onnx.save_tensor(numpy_helper.from_array(arr, o.name), os.path.join(data, f"output_{i}.pb"))
    if profile is not None:
        with open(os.path.join(folder, "profile.json"), "w") as f:
            json.dump(profile, f, indent=1, sort_keys=True)
    with open(stamp_path, "w") as f:
        f.write(stamp)
    print(f"{name}: written ({os.path.getsize(model_path) >> 20} MiB)")


def main():
    args = sys.argv[1:]
    src = HERE
    if args and args[0] == "--zoo":
        src, args = ZOO, args[1:]
    elif args and args[0] == "--zoo-dynamic":
        src, args = os.path.join(ZOO, "dynamic"), args[1:]
    if not args:
        sys.exit(__doc__)
    out_root = args[0]
    suffix = ".skeleton.onnx"
    names = args[1:] or sorted(f[: -len(suffix)] for f in os.listdir(src) if f.endswith(suffix))
    for n in names:
        prepare(n, out_root, src)


if __name__ == "__main__":
    main()
