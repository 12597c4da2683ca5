#!/usr/bin/env python3
"""The dynamic zoo tier (docs/testing.md, docs/dynamic_shapes.md): each model
of tests/models/zoo/dynamic (prepared into build/zoo_dynamic by
tools/prepare_models.sh), exported with a dynamic batch or batch and
sequence, is compiled ONCE for sm_90 with its profile (--min/--opt/--max-shapes
from profile.json) at one precision, and that one plan runs at the three
shapes of its data sets on the simulator (the plan's own kernels and launch
list) and on ref (the runtime's CPU path over the plan's graph), every output
compared with ONNX Runtime's at the zoo's whole-model bounds (run_zoo.py's
defaults, or the model's line in tolerances.txt, as the static zoo).
--backends gpu (bench/gpu_lease.sh, on the device) runs the same plan on a
real GPU instead (the runtime's GPU engine; never in CI), held to the same
expected failures: the kernels are the simulator's.

Held strictly both ways to tests/models/zoo/dynamic/expected_failures.txt
(`model precision | text`): an unlisted failure fails the test, and so does a
listed model that passes or fails with another message. A refusal (a family
with no shape-generic kernel yet, named by node) is listed with its message;
a wrong answer is never listed.

With --doc DOC (docs/dynamic_shapes.md), each passing model's row of the
dynamic-zoo table must state its plan's shape-generic launches
(doc_launch_counts.py); with --update-doc too, the rows get the plans' counts.

Usage: run_zoo_dynamic.py --kiln KILN --zoo DIR --precision fp32|fp16 [--backends sim,ref|gpu] [--json OUT]
       [--doc DOC [--update-doc]] [models...]
Needs numpy and onnx (the project's .venv).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import doc_launch_counts  # noqa: E402
from run_zoo import read_table, tolerance, vacuous_bound  # noqa: E402

TIMEOUT_S = 900
BACKENDS = ("sim", "ref", "gpu")
# What `kiln run` prints first when the backend ran the plan itself (no fallback).
RAN_ON = {"sim": "backend: sim (the plan's kernels", "gpu": "backend: gpu"}


def shapes_arg(shapes):
    return ",".join(f"{n}:{'x'.join(str(d) for d in s)}" for n, s in sorted(shapes.items()))


def run(cmd):
    """Exit status and output; a hang past TIMEOUT_S is a failure (124), not a wait forever."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + f"\nerror: timed out after {TIMEOUT_S} s: {' '.join(cmd)}"
    return p.returncode, p.stdout


def error_text(out):
    """kiln's error lines (from 'error:' on), else the tail of its output."""
    at = out.find("error:")
    return (out[at:] if at >= 0 else out[-800:]).strip()


def compare(out_dir, data, tol):
    """The worst |kiln - ORT| / (atol + rtol |ORT|) over every output of one
    data set, and a message for each output that fails (shape or value)."""
    atol, rtol = (float(x) for x in tol.split(","))
    worst, problems, k = 0.0, [], 0
    while os.path.exists(os.path.join(data, f"output_{k}.pb")):
        want_t = onnx.load_tensor(os.path.join(data, f"output_{k}.pb"))
        want = numpy_helper.to_array(want_t)
        path = os.path.join(out_dir, re.sub(r"[^A-Za-z0-9._-]", "_", want_t.name) + ".npy")
        k += 1
        if not os.path.exists(path):
            problems.append(f"output {want_t.name}: kiln wrote no {os.path.basename(path)}")
            continue
        got = np.load(path)
        if got.shape != want.shape:
            problems.append(f"output {want_t.name}: kiln's shape {got.shape}, ONNX Runtime's {want.shape}")
            continue
        if want.dtype.kind != "f":
            if not np.array_equal(got, want):
                problems.append(f"output {want_t.name}: {int((got != want).sum())} of {want.size} elements differ")
            continue
        g, w = got.astype(np.float64), want.astype(np.float64)
        if np.isnan(g).any() and not np.array_equal(np.isnan(g), np.isnan(w)):
            problems.append(f"output {want_t.name}: NaN where ONNX Runtime has none")
            continue
        ratio = float(np.max(np.abs(g - w) / (atol + rtol * np.abs(w)))) if w.size else 0.0
        worst = max(worst, ratio)
        if ratio > 1.0:
            problems.append(f"output {want_t.name}: {ratio:.3g} of tolerance {tol}")
    return worst, problems


def run_model(kiln, folder, precision, tol, scratch, backends):
    with open(os.path.join(folder, "profile.json")) as f:
        prof = json.load(f)
    plan = os.path.join(scratch, "model.plan")
    compile_cmd = [kiln, "compile", os.path.join(folder, "model.onnx"), "--target", "sm_90", "--precision", precision,
                   "--min-shapes", shapes_arg(prof["min"]), "--opt-shapes", shapes_arg(prof["opt"]),
                   "--max-shapes", shapes_arg(prof["max"]), "-o", plan]
    start = time.monotonic()
    rc, out = run(compile_cmd)
    r = {"command": " ".join(compile_cmd), "tolerance": tol, "runs": []}
    if rc != 0:
        r.update(passed=False, refused=rc == 1, message=error_text(out), seconds=round(time.monotonic() - start, 2))
        return r
    _, info = run([kiln, "inspect", plan])
    m = re.search(r"^shape-generic launches: (\d+)", info, re.M)
    r["shape_generic_launches"] = int(m.group(1)) if m else None
    worst, problems = 0.0, []
    sets = sorted(d for d in os.listdir(folder) if d.startswith("test_data_set_"))
    for be in backends:
        for data_name in sets:
            data = os.path.join(folder, data_name)
            ins = []
            for f in sorted(os.listdir(data)):
                if f.startswith("input_"):
                    ins.append(f"{onnx.load_tensor(os.path.join(data, f)).name}:{os.path.join(data, f)}")
            out_dir = os.path.join(scratch, f"{be}_{data_name}")
            rc, out = run([kiln, "run", plan, "--backend", be, "--inputs", ",".join(ins), "--outputs", out_dir])
            sym = re.search(r"^symbols: (.*)$", out, re.M)
            entry = {"backend": be, "data": data_name, "symbols": sym.group(1) if sym else None}
            if rc != 0:
                problems.append(f"{be} {data_name}: exit {rc}: {error_text(out)[:600]}")
            elif be in RAN_ON and RAN_ON[be] not in out:
                problems.append(f"{be} {data_name}: did not run the plan's kernels on {be}")
            else:
                ratio, bad = compare(out_dir, data, tol)
                entry["tol_ratio"] = round(ratio, 4)
                worst = max(worst, ratio)
                problems += [f"{be} {data_name} ({entry['symbols']}): {b}" for b in bad]
            r["runs"].append(entry)
    r.update(passed=not problems, refused=False, tol_ratio=round(worst, 4), message="; ".join(problems),
             seconds=round(time.monotonic() - start, 2))
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--zoo", required=True, help="folder of prepared dynamic zoo models (build/zoo_dynamic)")
    ap.add_argument("--precision", required=True, choices=("fp32", "fp16"))
    ap.add_argument("--backends", default="sim,ref", help="comma-separated, of " + ",".join(BACKENDS))
    ap.add_argument("--json", help="write every model's result here")
    ap.add_argument("--doc", help="docs/dynamic_shapes.md: its table must state each plan's launches")
    ap.add_argument("--update-doc", action="store_true", help="with --doc: write the plans' launches into it")
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    if a.update_doc and not a.doc:
        ap.error("--update-doc needs --doc")
    backends = [b for b in a.backends.split(",") if b]
    if not backends or any(b not in BACKENDS for b in backends):
        ap.error(f"--backends {a.backends!r}: expected a comma-separated list of {', '.join(BACKENDS)}")
    src = os.path.join(HERE, "dynamic")
    expected = read_table(os.path.join(src, "expected_failures.txt"), 2)
    suffix = ".skeleton.onnx"
    models = a.models or sorted(f[: -len(suffix)] for f in os.listdir(src) if f.endswith(suffix))
    for (m, prec) in expected:
        if prec not in ("fp32", "fp16") or (m not in models and not a.models):
            sys.exit(f"dynamic/expected_failures.txt: unknown model or precision: {m} {prec}")
    # The zoo's whole-model bounds, per model where tolerances.txt has one
    # (the same architectures and weights as the static zoo's).
    tolerances = read_table(os.path.join(HERE, "tolerances.txt"), 2)
    results, problems = {}, []
    for m in models:
        folder = os.path.join(a.zoo, m)
        if not os.path.isfile(os.path.join(folder, "profile.json")):
            r = {"passed": False, "refused": False, "seconds": 0,
                 "message": f"missing {folder}/profile.json (run tools/prepare_models.sh)"}
        else:
            tol = tolerance(m, "sim-" + a.precision, tolerances)
            vacuous = vacuous_bound(folder, tol)
            if vacuous:
                r = {"passed": False, "refused": False, "seconds": 0, "message": vacuous}
            else:
                with tempfile.TemporaryDirectory(prefix=f"kiln_zoo_dyn_{m}_") as scratch:
                    r = run_model(a.kiln, folder, a.precision, tol, scratch, backends)
        want = expected.get((m, a.precision))
        if r["passed"]:
            verdict = "pass" if want is None else "UNEXPECTED PASS (remove it from dynamic/expected_failures.txt)"
        elif want is None:
            verdict = "FAIL"
        elif r.get("refused") and want in r["message"]:
            verdict = "expected refusal"
        else:
            verdict = f"FAILS DIFFERENTLY (dynamic/expected_failures.txt says: {want})"
        r["verdict"] = verdict
        results[m] = r
        detail = f", worst {r['tol_ratio']:.3f} of tolerance {r['tolerance']}" if r.get("tol_ratio") is not None else ""
        print(f"{m} [{a.precision}]: {verdict}, {r['seconds']:.1f} s{detail}", flush=True)
        if verdict != "pass":
            print(f"  {r['message'][:1500]}", flush=True)
        if verdict not in ("pass", "expected refusal"):
            problems.append(m)
    if a.doc and a.update_doc:
        for m in doc_launch_counts.update(a.doc, a.precision, results):
            print(f"{a.doc}: {m} [{a.precision}]: {results[m]['shape_generic_launches']} launches written")
    elif a.doc:
        stale = doc_launch_counts.check(a.doc, a.precision, results)
        for line in stale:
            print(line, flush=True)
        problems += stale
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"precision": a.precision, "target": "sm_90", "backends": backends, "results": results}, f, indent=1, sort_keys=True)
    n_pass = sum(r["verdict"] == "pass" for r in results.values())
    n_ref = sum(r["verdict"] == "expected refusal" for r in results.values())
    print(f"zoo dynamic [{a.precision}, {'+'.join(backends)}]: {n_pass} passed, {n_ref} expected refusals, {len(problems)} problems "
          f"of {len(results)} models, {sum(r['seconds'] for r in results.values()):.0f} s")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
