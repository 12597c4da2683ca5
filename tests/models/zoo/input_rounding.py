#!/usr/bin/env python3
"""How much a model itself amplifies rounding: runs a prepared test folder
(model.onnx + test_data_set_0, e.g. build/zoo/<model>) in ONNX Runtime at
FP32 twice, with its float inputs as they are and rounded to f16 or bf16, and
prints how far each float output moves, also as a multiple of the precision's
tolerance (docs/precision.md).

An engine that runs the first layer in f16/bf16 (kiln, TensorRT, ONNX
Runtime's float16 models) rounds the input at least, so this is a floor under
its error on the model; the per-model bounds of tests/models/zoo/tolerances.txt
cite it (docs/models.md). Integer inputs (token ids) are left as they are.

Usage: input_rounding.py FOLDER [fp16|bf16 ...]   (default: both)
Needs numpy, onnx (with ml_dtypes) and onnxruntime: the project's .venv.
"""
import os
import sys

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

ROUND = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}
TOLERANCE = {"fp16": (2.5e-3, 1e-3), "bf16": (2e-2, 1e-2)}  # atol, rtol


def load_inputs(folder):
    data = os.path.join(folder, "test_data_set_0")
    feeds = {}
    for f in sorted(os.listdir(data)):
        if f.startswith("input_"):
            t = onnx.load_tensor(os.path.join(data, f))
            feeds[t.name] = numpy_helper.to_array(t)
    return feeds


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    folder, precisions = sys.argv[1], sys.argv[2:] or ["fp16", "bf16"]
    for p in precisions:
        if p not in ROUND:
            sys.exit(f"input_rounding.py: unknown precision {p} (fp16 or bf16)")
    for need in ("model.onnx", "test_data_set_0"):
        if not os.path.exists(os.path.join(folder, need)):
            sys.exit(f"input_rounding.py: {folder}: no {need} (a prepared test folder, e.g. build/zoo/mnasnet)")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(os.path.join(folder, "model.onnx"), so, providers=["CPUExecutionProvider"])
    feeds = load_inputs(folder)
    names = [o.name for o in sess.get_outputs()]
    base = sess.run(None, feeds)
    for p in precisions:
        rounded = {n: a.astype(ROUND[p]).astype(a.dtype) if a.dtype == np.float32 else a for n, a in feeds.items()}
        atol, rtol = TOLERANCE[p]
        for name, b, r in zip(names, base, sess.run(None, rounded)):
            if b.dtype != np.float32:
                continue
            err = np.abs(r.astype(np.float64) - b)
            multiple = (err / (atol + rtol * np.abs(b))).max()
            print(f"{os.path.basename(os.path.normpath(folder))} {p}: output {name!r} moves by {err.max():.3g} "
                  f"(max |output| {np.abs(b).max():.3g}; {multiple:.1f}x {p.upper()}'s tolerance)")


if __name__ == "__main__":
    main()
