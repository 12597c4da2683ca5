"""Compares the outputs of one plan run on the GPU with the reference backend's.

    gpu_run_all_compare.py GPU_DIR REF_DIR TOLERANCE

Both folders hold the .npy files `kiln run --outputs` writes. TOLERANCE is
ATOL,RTOL for floating outputs, or `default` for kiln's per-dtype bounds
(backends/compare.cpp: f32/f64 1e-5,1e-4; f16 2.5e-3,1e-3; bf16 2e-2,1e-2).
Integers and bools must be equal; NaN matches NaN; infinities must match.
Prints the largest error and exits 1 on a mismatch (bench/gpu_run_all.sh).
"""
import os
import sys

import numpy as np

DEFAULTS = {"float32": (1e-5, 1e-4), "float64": (1e-5, 1e-4), "float16": (2.5e-3, 1e-3), "bfloat16": (2e-2, 1e-2)}


def main():
    gpu_dir, ref_dir, tol = sys.argv[1:4]
    worst, bad = "", []
    names = sorted(os.listdir(ref_dir))
    if sorted(os.listdir(gpu_dir)) != names:
        print(f"outputs differ: gpu {sorted(os.listdir(gpu_dir))} ref {names}")
        return 1
    for f in names:
        ref = np.load(os.path.join(ref_dir, f), allow_pickle=False)
        got = np.load(os.path.join(gpu_dir, f), allow_pickle=False)
        if got.dtype != ref.dtype or got.shape != ref.shape:
            bad.append(f"{f}: gpu {got.dtype}{list(got.shape)} ref {ref.dtype}{list(ref.shape)}")
            continue
        if ref.dtype.kind != "f" and ref.dtype.name not in DEFAULTS:
            if not np.array_equal(got, ref):
                bad.append(f"{f}: {int(np.sum(got != ref))} of {ref.size} values differ")
            continue
        atol, rtol = DEFAULTS.get(ref.dtype.name, (1e-5, 1e-4)) if tol == "default" else map(float, tol.split(","))
        g, r = got.astype(np.float64), ref.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(r)
        same = (g == r) | both_nan
        err = np.where(same, 0.0, np.abs(g - r))
        limit = atol + rtol * np.abs(r)
        over = ~same & ~(err <= limit)  # NaN against a number is over
        max_err = float(np.nanmax(np.where(np.isnan(err), np.inf, err))) if err.size else 0.0
        worst += f"{f}: max abs err {max_err:.3g}; "
        if over.any():
            bad.append(f"{f}: {int(over.sum())} of {ref.size} values over atol {atol:g} rtol {rtol:g} (max abs err {max_err:.3g})")
    print("; ".join(bad) if bad else worst.rstrip("; "))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
