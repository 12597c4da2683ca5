"""gpu_test.sh --expected: compares what `kiln run --outputs OUT_DIR` wrote
with an ONNX conformance test's own expected outputs (TEST_DATA/output_*.pb),
or, with --ort MODEL, with ONNX Runtime's outputs for the same .npy inputs.
No reference backend (and so no BLAS) is involved: the GPU lease's bundle
has none (bench/device_bundle.sh --lease).

    gpu_test_expected.py TEST_DATA OUT_DIR WHAT
    gpu_test_expected.py --ort MODEL OUT_DIR WHAT ATOL,RTOL name=file.npy...

Float outputs must satisfy |got - want| <= atol + rtol |want| (default atol
1e-5, rtol 1e-4, the bound gpu_test.sh holds the GPU to against the
reference); others must be equal. Exit 1 naming the output and its worst
element otherwise.
"""
import os
import re
import sys

import numpy as np


def kiln_output(out_dir, name):
    # `kiln run --outputs` names each file after its output, unsafe characters as "_".
    return np.load(os.path.join(out_dir, re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"))


def check(what, name, got, want, atol, rtol):
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{what}: output {name}: kiln gave {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
    if want.dtype.kind not in "fc":
        n = int((got != want).sum())
        return f"{what}: output {name}: {n} of {want.size} elements differ" if n else None
    g, w = got.astype(np.float64), want.astype(np.float64)
    bad = ~((np.abs(g - w) <= atol + rtol * np.abs(w)) | (g == w) | (np.isnan(g) & np.isnan(w)))
    if bad.any():
        i = np.unravel_index(int(np.argmax(np.where(bad, np.abs(g - w), -1))), w.shape)
        return (f"{what}: output {name}: {int(bad.sum())} of {w.size} elements outside atol {atol} rtol {rtol}; "
                f"worst at {tuple(int(x) for x in i)}: {g[i]} vs {w[i]}")
    return None


def main(argv):
    if argv and argv[0] == "--ort":
        import onnxruntime as ort
        model, out_dir, what, tol = argv[1:5]
        atol, rtol = (float(x) for x in tol.split(","))
        feed = {p.split("=", 1)[0]: np.load(p.split("=", 1)[1]) for p in argv[5:]}
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        pairs = list(zip(names, sess.run(names, feed)))
    else:
        import onnx
        from onnx import numpy_helper
        data, out_dir, what = argv[:3]
        atol, rtol = 1e-5, 1e-4
        pairs, k = [], 0
        while os.path.exists(os.path.join(data, f"output_{k}.pb")):
            t = onnx.load_tensor(os.path.join(data, f"output_{k}.pb"))
            pairs.append((t.name, numpy_helper.to_array(t)))
            k += 1
        if not pairs:
            print(f"{what}: no output_*.pb in {data}")
            return 1
    problems = [p for p in (check(what, n, kiln_output(out_dir, n), w, atol, rtol) for n, w in pairs) if p]
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
