#!/usr/bin/env python3
"""Exports kiln's model zoo (tests/models/zoo/*.skeleton.onnx), once, at
development time; CI never runs this (it needs torch).

Every architecture of architectures.py is built with random weights, made
reproducible the way export_models.py does for the five real models (large
weights overwritten with seeded normals whose recipe replaces their bytes in
the skeleton; zero biases and zero-initialised heads re-drawn), BatchNorm
calibrated on random batches, and exported with the TorchScript exporter
(opset 17, no constant folding). The models in DYNAMO are exported a second
time with the dynamo exporter (opset 18) as <name>_dynamo; those in DYNAMO23
only with the dynamo exporter at opset 23 (its Attention and
RMSNormalization), as <name>_dynamo23.

At export time each model is checked:
- ONNX Runtime on the exported file against PyTorch eager, on the very inputs
  prepare_models.py will draw: the max abs difference is recorded;
- outputs are not degenerate: every float output varies across elements and
  between two different inputs, and a "logits" output's softmax is not
  constant (a test on a constant could never fail).
The figures go into the skeleton's metadata (kiln-export), the input recipe
into kiln-inputs; prepare_models.py reads both.

Run with a venv holding torch, torchvision, transformers, onnx, onnxscript,
onnxruntime and numpy (docs/models.md shows how to make .venv-export):
    .venv-export/bin/python tests/models/zoo/export_zoo.py [names...]
    .venv-export/bin/python tests/models/zoo/export_zoo.py --dynamic [names...]   (the dynamic tier)
"""
import json
import os
import sys
import traceback
import zlib

import numpy as np
import onnx
import onnxruntime as ort
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import export_models  # noqa: E402  (seeded weights and BatchNorm calibration)
import prepare_models  # noqa: E402  (the input draws CI uses)
import architectures  # noqa: E402

# Exported a second time with the dynamo exporter (opset 18).
DYNAMO = ["resnet18", "mobilenet_v3_small", "convnext_small", "regnet_small", "vit_small", "yolo_style",
          "r3d_small", "bert_tiny", "llama_gqa", "qwen2_tiny", "gpt_neox_tiny", "t5_tiny", "phi_tiny", "flow_warp",
          "gpt2_tiny", "electra_tiny", "mistral_tiny", "detr_small", "mobilevit_small",
          # the second batch (architectures_more.py); Mixtral's expert loop
          # does not pass torch.export (data-dependent expert hits)
          "lstm_gru_tagger", "tcn_audio", "unet_small", "yolov8_style", "dinov2_small", "convnextv2_small",
          "swinv2_small", "mamba_tiny", "efficientnetv2_small", "perceiver_style", "moe_topk", "rtdetr_small"]
# Exported only with the dynamo exporter at opset 23, where it writes ONNX's
# Attention and RMSNormalization ops.
DYNAMO23 = ["sdpa_rmsnorm_block"]
# Tensors without a recipe (constant-folded by the exporter, e.g. rotary
# tables) are kept whole up to this many elements; anything larger is an error.
KEEP_UNSEEDED = 65536


def recipes_with_transposes(recipes):
    """Exporters may store a 2-D weight transposed (MatMul instead of Gemm):
    those bytes map to the same recipe plus the permutation to apply."""
    out = dict(recipes)
    for data, r in recipes.items():
        if "shape" in r and len(r["shape"]) == 2:
            arr = np.frombuffer(data, np.float32).reshape(r["shape"])
            out.setdefault(np.ascontiguousarray(arr.T).tobytes(), {**r, "transpose": [1, 0]})
    return out


def make_reproducible(m):
    # Zero-initialised weights (DETR's box head) would make an output
    # constant; export_models re-draws only zero biases and large tensors.
    for name, p in m.named_parameters():
        if p.dtype.is_floating_point and name.endswith("weight") and not bool(p.any()):
            with torch.no_grad():
                p.copy_(torch.from_numpy(export_models.seeded_normal(tuple(p.shape), 0.0, 0.02,
                                                                     zlib.crc32(name.encode()))))
    recipes = export_models.make_reproducible(m)
    shapes = {}
    for _, p in list(m.named_parameters()) + list(m.named_buffers()):
        if p.dtype.is_floating_point:
            shapes[p.detach().float().numpy().tobytes()] = list(p.shape)
    for data, r in recipes.items():
        if data in shapes:
            r["shape"] = shapes[data]
    return recipes


def folded_recipe(arr, recipes):
    """The dynamo exporter folds BatchNorm into the preceding Conv: the
    weight is then a seeded parameter times a per-output-channel scale,
    which the recipe keeps (C floats instead of the whole tensor)."""
    if arr.ndim < 2:
        return None
    for data, r in recipes.items():
        if r.get("shape") != list(arr.shape):
            continue
        base = np.frombuffer(data, np.float32).reshape(arr.shape)
        rows, brow = arr.reshape(len(arr), -1), base.reshape(len(base), -1)
        k = np.argmax(np.abs(brow), axis=1)
        scale = (rows[np.arange(len(rows)), k] / brow[np.arange(len(brow)), k]).astype(np.float32)
        rebuilt = (base * scale.reshape((-1,) + (1,) * (arr.ndim - 1))).astype(np.float32)
        if np.allclose(rebuilt, arr, rtol=1e-5, atol=1e-7):
            return {**r, "scale": [float(x) for x in scale]}
    return None


def strip(model, recipes):
    from onnx import numpy_helper
    recipes = recipes_with_transposes(recipes)
    stripped = kept = 0
    for init in model.graph.initializer:
        arr = numpy_helper.to_array(init)
        if arr.dtype.kind != "f" or arr.size <= export_models.KEEP_ELEMENTS:
            continue
        r = recipes.get(arr.astype(np.float32).tobytes()) or folded_recipe(arr, recipes)
        if r is None:
            if arr.size > KEEP_UNSEEDED:
                raise RuntimeError(f"initializer {init.name} {arr.shape} is not a seeded parameter")
            kept += arr.size
            continue
        r = {k: v for k, v in r.items() if k in ("normal", "seed", "transpose", "scale")}
        init.ClearField("raw_data")
        init.ClearField("float_data")
        init.doc_string = "kiln-recipe:" + json.dumps(r, sort_keys=True)
        stripped += arr.size
    return stripped, kept


def calibrate(m, calib):
    if calib is None:
        return
    bns = [b for b in m.modules() if isinstance(b, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for b in bns:
        b.reset_running_stats()
        b.momentum = None
    m.train()
    with torch.no_grad():
        for _ in range(4):
            batch = calib()
            if batch is not None:
                m(batch)
    m.eval()


def draw_feeds(spec, seed, shapes=None):
    rng = np.random.default_rng(seed)
    return {n: prepare_models.draw(rng, (shapes or {}).get(n, shape), np.dtype(dt), tuple(d))
            for n, (shape, dt, d) in spec.inputs.items()}


def dynamo_shapes(spec):
    """The dynamo exporter's form of spec.dynamic for the inputs: one
    torch.export.Dim per axis name, shared between inputs (a batch of ids
    and of masks is one size); None for a static model."""
    if not spec.dynamic:
        return None
    import inspect
    dims = {}
    shapes = tuple({axis: dims.setdefault(label, torch.export.Dim(label)) for axis, label in
                    spec.dynamic.get(n, {}).items()} for n in spec.in_names)
    # A forward(*args) (architectures.Call) takes them as one argument.
    params = list(inspect.signature(spec.module.forward).parameters.values())
    if len(params) == 1 and params[0].kind == inspect.Parameter.VAR_POSITIONAL:
        return (shapes,)
    return shapes


def eager(m, spec, feeds):
    with torch.no_grad():
        outs = m(*[torch.from_numpy(feeds[n]) for n in spec.in_names])
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    return [o.detach().numpy() for o in outs]


def check_not_degenerate(spec, outs_a, outs_b):
    notes = {}
    for name, a, b in zip(spec.out_names, outs_a, outs_b):
        if a.dtype.kind != "f":
            continue
        if float(a.std()) < 1e-6:
            raise RuntimeError(f"output {name} is constant (std {a.std():.3g})")
        # A size the data decides (detections) differs between inputs: that
        # is a dependence on the input already.
        if a.shape == b.shape and float(np.abs(a - b).max()) < 1e-5 * (1 + float(np.abs(a).max())):
            raise RuntimeError(f"output {name} does not depend on the input")
        if name.startswith("logits") and a.shape[-1] > 1:
            e = np.exp(a - a.max(-1, keepdims=True))
            sm = e / e.sum(-1, keepdims=True)
            # relative to uniform: 0 for a constant softmax
            spread = float((sm.max(-1) - sm.min(-1)).min()) * a.shape[-1]
            if spread < 0.1:
                raise RuntimeError(f"softmax of {name} is constant (spread {spread:.3g})")
            notes[name + "_softmax_spread"] = round(spread, 4)
        notes[name + "_std"] = float(f"{a.std():.4g}")
    return notes


def export(name, build, dynamo, opset=None, out_dir=HERE):
    torch.manual_seed(0)
    spec = build()
    m = spec.module.eval()
    recipes = make_reproducible(m)
    calibrate(m, spec.calib)
    feeds = draw_feeds(spec, 7)
    outs = eager(m, spec, feeds)
    notes = check_not_degenerate(spec, outs, eager(m, spec, draw_feeds(spec, 8)))
    opset = opset or (18 if dynamo else 17)
    out_name = name + ("" if not dynamo else "_dynamo" if opset == 18 else f"_dynamo{opset}")
    path = os.path.join(out_dir, f"{out_name}.skeleton.onnx")
    tmp = path + ".full.onnx"
    args = tuple(torch.from_numpy(feeds[n]) for n in spec.in_names)
    with torch.no_grad():
        if dynamo:
            prog = torch.onnx.export(m, args, dynamo=True, opset_version=opset, input_names=spec.in_names,
                                     output_names=spec.out_names, external_data=False,
                                     dynamic_shapes=dynamo_shapes(spec))
            prog.save(tmp, external_data=False)
        else:
            torch.onnx.export(m, args, tmp, opset_version=opset, dynamo=False, input_names=spec.in_names,
                              output_names=spec.out_names, do_constant_folding=False, dynamic_axes=spec.dynamic)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(tmp, opts, providers=["CPUExecutionProvider"])
    # An input the model ignores (DeBERTa's token types) is not in the graph.
    graph_inputs = {i.name for i in sess.get_inputs()}
    got = sess.run(None, {n: feeds[n] for n in spec.in_names if n in graph_inputs})
    diff = max(float(np.abs(g.astype(np.float64) - o).max()) for g, o in zip(got, outs))
    if spec.profile:  # the dynamic tier: ONNX Runtime equals eager at each run shape too
        for k, shapes in enumerate(spec.profile["runs"]):
            run_feeds = draw_feeds(spec, 7 + k, shapes)
            want = eager(m, spec, run_feeds)
            got = sess.run(None, {n: run_feeds[n] for n in spec.in_names if n in graph_inputs})
            for g, o in zip(got, want):
                if g.shape != o.shape:
                    raise RuntimeError(f"at run shape {k} ONNX Runtime's output is {g.shape}, eager's {o.shape}")
            diff = max([diff] + [float(np.abs(g.astype(np.float64) - o).max()) for g, o in zip(got, want)])
    model = onnx.load(tmp)
    os.remove(tmp)
    stripped, kept = strip(model, recipes)
    # The dynamo exporter annotates every node with its Python stack and
    # module path (metadata_props, several KB a node): not part of the graph.
    for node in model.graph.node:
        del node.metadata_props[:]
    params = sum(p.numel() for p in m.parameters())
    meta = {"architecture": name, "exporter": "dynamo" if dynamo else "torchscript", "opset": opset,
            "torch": torch.__version__, "params": params, "nodes": len(model.graph.node),
            "ort_vs_eager_max_abs": float(f"{diff:.3g}"), **notes}
    # Inputs with dynamic dims get their shape here: the model no longer says it.
    inputs = {n: {"draw": list(d), **({"shape": list(s)} if spec.dynamic else {})}
              for n, (s, dt, d) in spec.inputs.items()}
    del model.metadata_props[:]
    props = {"kiln-export": json.dumps(meta, sort_keys=True), "kiln-inputs": json.dumps(inputs, sort_keys=True)}
    if spec.profile:
        props["kiln-profile"] = json.dumps(spec.profile, sort_keys=True)
    onnx.helper.set_model_props(model, props)
    model.doc_string = f"kiln zoo model {out_name}: exported by tests/models/zoo/export_zoo.py"
    onnx.save(model, path)
    print(f"{out_name}: {params} params, {len(model.graph.node)} nodes, ort-vs-eager {diff:.2g}, "
          f"{stripped} weights stripped, {kept} kept, {os.path.getsize(path)} bytes", flush=True)
    if diff > 1e-3 * (1 + max(float(np.abs(o).max()) for o in outs)):
        raise RuntimeError(f"ONNX Runtime differs from eager by {diff:.3g}")


def main_dynamic(names):
    """The dynamic tier (architectures_dynamic_axes.py) into HERE/dynamic:
    <name> from the TorchScript exporter, <name>_dynamo from dynamo's."""
    import architectures_dynamic_axes as dyn
    tab = dyn.table()
    jobs = [(n, False) for n in tab] + [(n, True) for n in dyn.DYNAMO]
    if names:
        jobs = [(n[:-7], True) if n.endswith("_dynamo") else (n, False) for n in names]
    out_dir = os.path.join(HERE, "dynamic")
    failed = []
    for n, dynamo in jobs:
        try:
            export(n, tab[n], dynamo, out_dir=out_dir)
        except Exception as e:  # report every model, then fail
            traceback.print_exc(limit=-3)
            failed.append(f"{n}{'_dynamo' if dynamo else ''}: {type(e).__name__}: {str(e)[:300]}")
    for f in failed:
        print("FAILED", f)
    sys.exit(1 if failed else 0)


def main(names):
    torch.backends.mha.set_fastpath_enabled(False)
    if names[:1] == ["--dynamic"]:
        return main_dynamic(names[1:])
    tab = architectures.table()
    jobs = ([(n, False, None) for n in tab if n not in DYNAMO23] + [(n, True, None) for n in DYNAMO] +
            [(n, True, 23) for n in DYNAMO23])
    if names:
        jobs = [(n[:-9], True, 23) if n.endswith("_dynamo23") else (n[:-7], True, None) if n.endswith("_dynamo")
                else (n, False, None) for n in names]
    failed = []
    for n, dyn, opset in jobs:
        try:
            export(n, tab[n], dyn, opset)
        except Exception as e:  # report every model, then fail
            traceback.print_exc(limit=-3)
            failed.append(f"{n}{'_dynamo' if dyn else ''}{opset or ''}: {type(e).__name__}: {str(e)[:300]}")
    for f in failed:
        print("FAILED", f)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv[1:])
