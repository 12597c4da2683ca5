#!/usr/bin/env python3
"""Runs the model zoo (build/zoo/<model>/, made by tools/prepare_models.sh)
through `kiln conformance` in one configuration and holds the result to the
committed expected-failures list, strictly both ways:

- a model that fails and is not listed fails the test;
- a listed model must fail with a message containing the listed text (the
  kiln error it is listed for); one that passes, or fails differently, fails
  the test too, so the list stays true as defects are fixed.

A model missing from the zoo folder fails the test (prepare it first), and
so does a bound that an all-zero output would pass (every |expected| within
atol + rtol |expected|): such a bound makes a test that cannot fail.

Configurations (tolerances: docs/models.md):
    ref-fp32   reference backend, default pipeline, fp32
    sim-fp32   generated kernels on the CPU simulator, sm_90, NVRTC-checked
    sim-fp16   the same at --precision fp16
    sim-bf16   the same at --precision bf16
    gpu-fp32, gpu-fp16, gpu-bf16   the sm_90 plan on a real GPU (--backend gpu);
               the sim configuration's expected failures hold for it (the same kernels)

Usage: run_zoo.py --kiln KILN --zoo DIR --config CFG [--json OUT] [--jobs N] [models...]
Only the standard library: CI runs it with any python3.
"""
import argparse
import array
import concurrent.futures
import json
import os
import re
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = {
    "ref-fp32": ["--backend", "ref"],
    "sim-fp32": ["--backend", "sim", "--target", "sm_90", "--nvrtc-check", "sm_90"],
    "sim-fp16": ["--backend", "sim", "--target", "sm_90", "--precision", "fp16"],
    "sim-bf16": ["--backend", "sim", "--target", "sm_90", "--precision", "bf16"],
    # On a real GPU (the device machine; never in CI): the plan kiln compile
    # writes for sm_90, run by the runtime's GPU engine.
    "gpu-fp32": ["--backend", "gpu", "--target", "sm_90"],
    "gpu-fp16": ["--backend", "gpu", "--target", "sm_90", "--precision", "fp16"],
    "gpu-bf16": ["--backend", "gpu", "--target", "sm_90", "--precision", "bf16"],
}
# Whole-model bounds (atol,rtol), docs/models.md: fp32 the bound of
# docs/testing.md; fp16/bf16 3x the precision's tolerance, as for the
# transformers of docs/precision.md, unless tolerances.txt says otherwise.
DEFAULT_TOLERANCE = {"fp32": "1e-4,1e-3", "fp16": "7.5e-3,3e-3", "bf16": "6e-2,3e-2"}
TIMEOUT_S = 900


def read_table(path, fields):
    """Lines of `model config ... | text`; '#' starts a comment line."""
    rows = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            head, _, text = line.partition("|")
            parts = head.split()
            if len(parts) != fields:
                sys.exit(f"{path}:{n}: expected {fields} fields before '|': {line}")
            if not text.strip():
                sys.exit(f"{path}:{n}: nothing after '|': {line}")
            rows[tuple(parts)] = text.strip()
    return rows


def tolerance(model, config, tolerances):
    prec = config.split("-")[1]
    return tolerances.get((model, prec), DEFAULT_TOLERANCE[prec])


def _varint(buf, at):
    value = shift = 0
    while True:
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def float_values(path):
    """The elements of a float TensorProto file (onnx.proto: data_type 2,
    float_data 4, raw_data 9), read with the standard library (run_zoo.py
    needs no onnx); None for other dtypes."""
    with open(path, "rb") as f:
        buf = f.read()
    at, dtype, raw, packed = 0, 0, None, b""
    while at < len(buf):
        key, at = _varint(buf, at)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(buf, at)
            if field == 2:
                dtype = value
        elif wire == 2:
            n, at = _varint(buf, at)
            if field == 9:
                raw = buf[at:at + n]
            elif field == 4:
                packed += buf[at:at + n]
            at += n
        elif wire == 5:
            if field == 4:
                packed += buf[at:at + 4]
            at += 4
        elif wire == 1:
            at += 8
        else:
            raise ValueError(f"{path}: not a TensorProto (wire type {wire})")
    if dtype == 1:  # FLOAT: raw_data or float_data
        return array.array("f", raw if raw is not None else packed)
    if dtype not in (10, 11, 16):
        return None  # not a float output
    if raw is None:  # written by numpy_helper.from_array, which always uses raw_data
        raise ValueError(f"{path}: a float16/double/bfloat16 tensor without raw_data")
    if dtype == 11:  # DOUBLE
        return array.array("d", raw)
    if dtype == 10:  # FLOAT16
        return [x[0] for x in struct.iter_unpack("<e", raw)]
    return [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]  # BFLOAT16


def vacuous_bound(folder, tol):
    """Why `tol` would pass an all-zero output for some float output of the
    folder's first data set (its every |expected| <= atol + rtol |expected|),
    or None."""
    atol, rtol = (float(x) for x in tol.split(","))
    data = os.path.join(folder, "test_data_set_0")
    for name in sorted(os.listdir(data)):
        if not name.startswith("output_"):
            continue
        values = float_values(os.path.join(data, name))
        if not values:
            continue
        largest = max(abs(v) for v in values)
        if largest <= atol + rtol * largest:
            return (f"tolerance {tol} would pass an all-zero {name[:-3]} (largest |expected| {largest:.3g}): "
                    "a test that cannot fail; tighten it in tolerances.txt")
    return None


def run_one(kiln, folder, config, tol):
    cmd = [kiln, "conformance", folder, *CONFIGS[config], "--tolerance", tol, "-j", "1",
           "--timeout", str(TIMEOUT_S), "-v", "--show-errors"]
    start = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    secs = time.monotonic() - start
    out = p.stdout
    passed = p.returncode == 0 and re.search(r"^1 passed, 0 failed", out, re.M) is not None
    line = next((ln for ln in out.splitlines() if re.match(r"(pass|fail|crash|unsupported) ", ln)), "")
    message = line.split(": ", 1)[1] if ": " in line else out.strip()[-500:]
    errs = [float(x) for x in re.findall(r"max abs err ([0-9.eE+-]+|nan|inf)", message)]
    ratios = [float(x) for x in re.findall(r", ([0-9.eE+-]+|nan|inf) of tolerance", message)]
    return {"passed": passed, "seconds": round(secs, 2), "message": message, "max_abs_err": max(errs, default=None),
            "tol_ratio": max(ratios, default=None), "tolerance": tol, "command": " ".join(cmd)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--zoo", required=True, help="folder of prepared zoo models")
    ap.add_argument("--config", required=True, choices=sorted(CONFIGS))
    ap.add_argument("--json", help="write every model's result here")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("KILN_ZOO_JOBS", "1")))
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    expected = read_table(os.path.join(HERE, "expected_failures.txt"), 2)
    tolerances = read_table(os.path.join(HERE, "tolerances.txt"), 2)
    suffix = ".skeleton.onnx"
    models = a.models or sorted(f[: -len(suffix)] for f in os.listdir(HERE) if f.endswith(suffix))
    for (m, c) in expected:
        if c not in CONFIGS or m not in models and not a.models:
            sys.exit(f"expected_failures.txt: unknown model or configuration: {m} {c}")

    def job(m):
        folder = os.path.join(a.zoo, m)
        if not os.path.isfile(os.path.join(folder, "model.onnx")):
            return m, {"passed": False, "seconds": 0, "message": f"missing {folder} (run tools/prepare_models.sh)"}
        tol = tolerance(m, a.config, tolerances)
        vacuous = vacuous_bound(folder, tol)
        if vacuous:
            return m, {"passed": False, "seconds": 0, "message": vacuous, "vacuous": True}
        return m, run_one(a.kiln, folder, a.config, tol)

    results, problems = {}, []
    with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
        for m, r in pool.map(job, models):
            want = expected.get((m, a.config))
            # On a GPU, the sim configuration's expected failure is a
            # prediction (the same kernels), not a committed claim: a pass
            # there is said, not a problem (a discrete selection near a tie
            # may round the other way on the hardware).
            inherited = None
            if want is None and a.config.startswith("gpu-"):
                inherited = expected.get((m, "sim-" + a.config.split("-")[1]))
                want = inherited
            if r.get("vacuous"):
                verdict = "BOUND CANNOT FAIL"
            elif r["passed"] and inherited is not None:
                verdict = "pass"
                r["note"] = f"passes on the GPU; the simulator fails it: {inherited}"
            elif r["passed"]:
                verdict = "pass" if want is None else "UNEXPECTED PASS (remove it from expected_failures.txt)"
            elif want is None:
                verdict = "FAIL"
            elif want in r["message"]:
                verdict = "expected failure"
            else:
                verdict = f"FAILS DIFFERENTLY (expected_failures.txt says: {want})"
            r["verdict"] = verdict
            results[m] = r
            err = "" if r.get("max_abs_err") is None else f", max abs err {r['max_abs_err']:.3g}"
            ratio = "" if r.get("tol_ratio") is None else f" ({r['tol_ratio']:.2f} of tolerance {r['tolerance']})"
            print(f"{m} [{a.config}]: {verdict}, {r['seconds']:.1f} s{err}{ratio}", flush=True)
            if verdict not in ("pass", "expected failure"):
                problems.append(m)
                print(f"  {r['message'][:1500]}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"config": a.config, "results": results}, f, indent=1, sort_keys=True)
    n_pass = sum(r["verdict"] == "pass" for r in results.values())
    n_xfail = sum(r["verdict"] == "expected failure" for r in results.values())
    print(f"zoo [{a.config}]: {n_pass} passed, {n_xfail} expected failures, {len(problems)} problems "
          f"of {len(results)} models, {sum(r['seconds'] for r in results.values()):.0f} s")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
