#!/usr/bin/env python3
"""Measured per-kernel GPU times beside kiln's performance model (issue 18):
for each model, the plan `kiln compile --target T --precision P` writes, then

  kiln inspect PLAN --perf --gpu G --json   the model's estimate per launch
  kiln bench PLAN --backend gpu --profile   CUDA-event time per kernel
  kiln bench PLAN --backend gpu             the whole plan (CUDA Graph replay)

joined by kernel name (a kernel launched k times per inference: the model's
mean estimate per launch against the measured mean per call). Prints, per
model, the kernels that take the most measured time and the totals, and
writes every row to --out (JSON). Needs a GPU; no figure is made up where a
step fails (its error is recorded instead).

Usage: perf_vs_model.py --kiln KILN --models DIR --out FILE [--gpu h100]
       [--target sm_90] [--precision fp16] [--iterations 200] MODEL...
(DIR/MODEL/model.onnx, as tests/models/prepare_models.py writes them.)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def call(args):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed (exit {p.returncode}): {(p.stderr or p.stdout).strip()[-800:]}")
    return p


def bench(kiln, plan, iterations, extra, d, tag):
    out = os.path.join(d, f"{tag}.json")
    call([kiln, "bench", plan, "--backend", "gpu", "--iterations", str(iterations), "--warmup-ms", "300",
          "--export-json", out, *extra])
    with open(out) as f:
        return json.load(f)


def median(summary, key):
    v = summary.get(key)
    return v.get("median") if isinstance(v, dict) else None


def one_model(a, name, d):
    model = os.path.join(a.models, name, "model.onnx")
    plan = os.path.join(d, f"{name}.plan")
    call([a.kiln, "compile", model, "--target", a.target, "--precision", a.precision, "-o", plan])
    perf_json = os.path.join(d, f"{name}.perf.json")
    call([a.kiln, "inspect", plan, "--perf", "--gpu", a.gpu, "--json", perf_json])
    with open(perf_json) as f:
        perf = json.load(f)["perf"]
    whole = bench(a.kiln, plan, a.iterations, [], d, f"{name}.whole")
    prof = bench(a.kiln, plan, max(20, a.iterations // 4), ["--profile"], d, f"{name}.profile")
    model_by_kernel = {}
    for launch in perf["launches"]:
        k = model_by_kernel.setdefault(launch["kernel"], {"launches": 0, "est_us": 0.0, "bounds": set()})
        k["launches"] += 1
        k["est_us"] += launch["est_us"]
        k["bounds"].add(launch["bound"])
    rows = []
    for entry in prof.get("profile") or []:
        m = model_by_kernel.get(entry["name"])
        row = {"kernel": entry["name"], "op": entry.get("op"), "calls": entry["calls"],
               "measured_us": entry["avg_ms"] * 1e3}
        if m:
            row.update({"launches_per_run": m["launches"], "model_us": m["est_us"] / m["launches"],
                        "bound": "/".join(sorted(m["bounds"]))})
            row["measured_over_model"] = row["measured_us"] / row["model_us"] if row["model_us"] > 0 else None
        rows.append(row)
    runs = prof.get("iterations") or 1
    measured_kernels_us = sum(e["total_ms"] for e in prof.get("profile") or []) * 1e3 / runs
    return {
        "model": name, "target": a.target, "precision": a.precision, "gpu_model": a.gpu,
        "estimated_ms": perf["estimated_ms"], "estimated_kernel_us": perf.get("kernel_us"),
        "measured_graph_ms": median(whole, "gpu_compute_ms") or median(whole, "latency_ms"),
        "measured_e2e_ms": median(whole, "latency_ms"),
        "measured_kernels_us_per_run_profiled": measured_kernels_us,
        "profile_iterations": runs, "launches_modelled": len(perf["launches"]),
        "kernels": sorted(rows, key=lambda r: -r["measured_us"] * r.get("launches_per_run", 1)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--top", type=int, default=12, help="kernels printed per model (the JSON has all)")
    ap.add_argument("names", nargs="+")
    a = ap.parse_args()
    results, failed = [], False
    with tempfile.TemporaryDirectory(prefix="kiln-perf-vs-model-") as d:
        for name in a.names:
            try:
                r = one_model(a, name, d)
            except (RuntimeError, OSError, KeyError, ValueError) as e:
                r, failed = {"model": name, "error": str(e)}, True
                print(f"{name}: {e}", file=sys.stderr, flush=True)
            results.append(r)
            if "error" in r:
                continue
            print(f"\n{name} ({a.precision}, {a.target}, model of {a.gpu}): modelled {r['estimated_ms']:.3f} ms, "
                  f"measured {r['measured_graph_ms']:.3f} ms (graph replay, CUDA events); kernels one by one "
                  f"{r['measured_kernels_us_per_run_profiled']:.1f} us per run", flush=True)
            print(f"  {'kernel':<46} {'n':>3} {'meas us':>9} {'model us':>9} {'ratio':>6}  bound")
            for k in r["kernels"][:a.top]:
                ratio = k.get("measured_over_model")
                print(f"  {k['kernel'][:46]:<46} {k.get('launches_per_run', '?'):>3} {k['measured_us']:9.2f} "
                      f"{k.get('model_us', float('nan')):9.2f} {ratio if ratio is None else round(ratio, 2)!s:>6}  "
                      f"{k.get('bound', '-')}", flush=True)
    with open(a.out, "w") as f:
        json.dump({"results": results}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
