"""Runs MODEL.onnx with ONNX Runtime on the given .npy inputs and compares every
output with OUT_DIR/<output name>.npy (what `kiln run PLAN --outputs OUT_DIR`
wrote), at ONNX Runtime's fp32 tolerance (atol 1e-5, rtol 1e-4; docs/testing.md).
With --fp16 first, at the fp16 tolerance (atol 2.5e-3, rtol 1e-3): a plan
compiled with --precision fp16 against ONNX Runtime's fp32 outputs.
Prints "compare: PASS" or the worst element of each output that differs; exit 1
on a difference, a missing file or a shape mismatch.
    python compare_outputs_ort.py [--fp16] MODEL.onnx OUT_DIR name=file.npy ...
"""
import os
import sys

import numpy as np
import onnxruntime as ort


def main():
    args = sys.argv[1:]
    atol, rtol = 1e-5, 1e-4
    if args and args[0] == "--fp16":
        args, atol, rtol = args[1:], 2.5e-3, 1e-3
    model, out_dir, pairs = args[0], args[1], args[2:]
    feed = {}
    for p in pairs:
        name, path = p.split("=", 1)
        feed[name] = np.load(path)
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    want = sess.run(names, feed)
    ok = True
    for name, w in zip(names, want):
        got = np.load(os.path.join(out_dir, name + ".npy"))
        if got.shape != w.shape:
            print(f"compare: {name}: kiln gave shape {got.shape}, ONNX Runtime {w.shape}")
            ok = False
            continue
        bad = ~np.isclose(got, w, atol=atol, rtol=rtol)
        if bad.any():
            i = np.unravel_index(np.argmax(np.abs(got - w)), w.shape)
            print(f"compare: {name}: {int(bad.sum())} of {w.size} elements differ; worst at {i}: {got[i]} vs {w[i]}")
            ok = False
    print("compare: PASS" if ok else "compare: FAIL")
    return 0 if ok else 1


sys.exit(main())
