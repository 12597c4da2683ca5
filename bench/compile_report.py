#!/usr/bin/env python3
"""Prints kiln's compile figures for the real models, one run side by side:
nodes in/out, kernels (per layer for transformers), planned vs naive
activation memory, and compile time (import, passes) on this machine.
Checks them against issue 3's targets and writes bench/results/compile-<date>.json.

Usage: bench/compile_report.sh [--precision fp16] [--target sm_90] [--repeat 3]
(models come from tools/prepare_models.sh; kiln from build/bin/kiln).
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = {"bert_base": 12, "gpt2": 12, "vit_b_16": 12}
# Issue 3's targets: kernels (total or per layer), memory ratio, compile seconds.
TARGETS = {
    "resnet50": {"kernels": 60, "memory_ratio": 0.25, "compile_s": 2.0},
    "bert_base": {"kernels_per_layer": 9, "compile_s": 2.0},
    "gpt2": {"kernels_per_layer": 10},
}


def compile_once(kiln, model, precision, target):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([kiln, "compile", model, "--precision", precision, "--target", target, "--json", f.name],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return json.load(open(f.name))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--models", default=os.path.join(ROOT, "build", "models"))
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "bin", "kiln"))
    a = ap.parse_args()
    rows, ok = [], True
    print(f"kiln compile --precision {a.precision} --target {a.target}  (best of {a.repeat}; this machine: "
          f"{os.cpu_count()} CPUs)")
    print(f"{'model':<14}{'nodes in':>9}{'out':>6}{'kernels':>8}{'/layer':>7}{'act naive MB':>13}{'planned MB':>11}"
          f"{'ratio':>7}{'import s':>9}{'passes s':>9}  targets")
    for name in ["resnet50", "mobilenet_v2", "vit_b_16", "bert_base", "gpt2"]:
        model = os.path.join(a.models, name, "model.onnx")
        if not os.path.exists(model):
            print(f"{name:<14} missing: run tools/prepare_models.sh")
            ok = False
            continue
        runs = [compile_once(a.kiln, model, a.precision, a.target) for _ in range(a.repeat)]
        best = min(runs, key=lambda r: r["import_ms"] + sum(p["ms"] for p in r["passes"]))
        passes_s = sum(p["ms"] for p in best["passes"]) / 1000
        import_s = best["import_ms"] / 1000
        naive, planned = best.get("activation_bytes_naive"), best.get("activation_bytes_planned")
        ratio = planned / naive if naive and planned is not None else None
        per_layer = best["kernels"] / LAYERS[name] if name in LAYERS else None
        verdicts = []
        t = TARGETS.get(name, {})
        if "kernels" in t:
            verdicts.append(("kernels<=%d" % t["kernels"], best["kernels"] <= t["kernels"]))
        if "kernels_per_layer" in t:
            verdicts.append(("kernels/layer<=%d" % t["kernels_per_layer"], per_layer <= t["kernels_per_layer"]))
        if "memory_ratio" in t:
            verdicts.append(("memory<=25%%", ratio is not None and ratio <= t["memory_ratio"]))
        if "compile_s" in t:
            verdicts.append(("passes<%gs" % t["compile_s"], passes_s < t["compile_s"]))
        ok &= all(v for _, v in verdicts)
        fmt_mb = lambda b: f"{b / 2**20:.1f}" if b is not None else "-"
        print(f"{name:<14}{best['nodes_in']:>9}{best['nodes_out']:>6}{best['kernels']:>8}"
              f"{(f'{per_layer:.1f}' if per_layer else '-'):>7}{fmt_mb(naive):>13}{fmt_mb(planned):>11}"
              f"{(f'{ratio:.0%}' if ratio is not None else '-'):>7}{import_s:>9.2f}{passes_s:>9.2f}  "
              + " ".join(f"{k}:{'ok' if v else 'MISSED'}" for k, v in verdicts))
        rows.append({"name": name, "precision": a.precision, "target": a.target, "nodes_in": best["nodes_in"],
                     "nodes_out": best["nodes_out"], "kernels": best["kernels"], "kernels_per_layer": per_layer,
                     "activation_bytes_naive": naive, "activation_bytes_planned": planned,
                     "import_s": import_s, "passes_s": passes_s,
                     "targets": {k: v for k, v in verdicts}})
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    out = os.path.join(ROOT, "bench", "results", f"compile-{datetime.date.today()}-{a.precision}-{a.target}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"date": str(datetime.date.today()), "commit": commit, "machine": f"{os.cpu_count()} CPUs, no GPU",
                   "models": rows}, f, indent=1)
    print(f"wrote {os.path.relpath(out, ROOT)}; all targets {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
