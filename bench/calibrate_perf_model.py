#!/usr/bin/env python3
"""Calibrates kiln's performance model (perf/perf_model.h, docs/performance.md)
against measured per-kernel GPU times (issue 18).

Inputs, all from one GPU run (bench/results/2026-11-27-h100-lease/):
  perf_vs_model.json   per kernel: CUDA-event time per call under
                       `kiln bench --profile` (each launch timed on its own),
                       and each plan's CUDA Graph replay time;
  bench_micro.json     kiln's GEMM 4096^3 and layernorm 32 MB micro benchmarks;
and, per model, the model's per-launch records: `kiln inspect PLAN --perf
--json F` of the same plans (deterministic: bench/plan_checksums.sh), given
as MODEL=FILE, recompiled with --kiln and --models, or else the ones saved
beside the results (RESULTS/calibration/MODEL.perf.json, made with the
calibrated model).

What the measurement includes. A profiled launch is timed between two events
outside any graph, so it carries a per-launch overhead the graph replay does
not: (sum of profiled times - graph replay) / launches, per model. Subtracted
from each kernel's profiled time, what is left is that launch's share of the
graph replay -- the quantity the model's total predicts (its launch
estimate plus one graph-node floor).

Modes:
  check   the fit's copy of the model against kiln's own estimates in any
          `inspect --perf --json` files (h100/h200): equal to 1e-6 us, or
          exit 1 (tests/cli/perf_inspect_test.sh runs it);
  report  per model and per kernel kind (conv, gemm, attention, norm,
          pointwise/other): measured (in-graph) over modelled, with the
          model's terms, for the constants the given JSON was made with;
  fit     fits the constants the micro benchmarks do not give (graph-node
          floor, DRAM and L2 round trips, the fold tail's per-warp rate, the
          GEMM/conv operand L2 rate) on one model and reports the error on
          the other (leave-one-out), then on both.

Standard library and numpy only. Needs no GPU: it reads recorded times.

  bench/calibrate_perf_model.py report [--kernels]     (the saved files)
  bench/calibrate_perf_model.py fit --kiln build/bin/kiln --models build/models
  bench/calibrate_perf_model.py fit resnet50=r.json bert_base=b.json
"""
import argparse
import collections
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile

# The GPU the run measured (perf/gpu_specs.cpp, h100).
SMS = 132
DRAM_GB_PER_S = 3350.0
TENSOR_PEAK_TFLOPS = 989.4


def load_measured(results):
    with open(os.path.join(results, "perf_vs_model.json")) as f:
        runs = {r["model"]: r for r in json.load(f)["results"] if "error" not in r}
    with open(os.path.join(results, "bench_micro.json")) as f:
        micro = {m["name"]: m for m in json.load(f)["micro"]}
    return runs, micro


def perf_json(args, name, d):
    """The model's launches for `name`: a given file, or a plan compiled here."""
    given = dict(kv.split("=", 1) for kv in args.perf)
    saved = os.path.join(args.results, "calibration", f"{name}.perf.json")
    if name in given:
        path = given[name]
    elif not (args.kiln and args.models) and os.path.exists(saved):
        path = saved
    else:
        if not (args.kiln and args.models):
            sys.exit(f"{name}: give {name}=PERF.json or --kiln and --models")
        plan = os.path.join(d, f"{name}.plan")
        path = os.path.join(d, f"{name}.perf.json")
        subprocess.run([args.kiln, "compile", os.path.join(args.models, name, "model.onnx"), "--target", "sm_90",
                        "--precision", "fp16", "-o", plan], check=True, capture_output=True)
        subprocess.run([args.kiln, "inspect", plan, "--perf", "--gpu", "h100", "--json", path], check=True,
                       capture_output=True)
    with open(path) as f:
        return json.load(f)["perf"]


def kind_of(kernel, launch):
    if launch["kind"] in ("conv", "gemm", "attention"):
        return launch["kind"]
    return "norm" if "_norm_" in kernel else "pointwise/other"


class Model:
    """One measured plan joined with the model's launches, by kernel name."""

    def __init__(self, run, perf):
        self.name = run["model"]
        self.run = run
        self.perf = perf
        self.launches = perf["launches"]
        self.graph_us = run["measured_graph_ms"] * 1e3
        self.profiled_us = run["measured_kernels_us_per_run_profiled"]
        self.n = len(self.launches)
        if self.n != run["launches_modelled"]:
            sys.exit(f"{self.name}: {self.n} launches here, {run['launches_modelled']} on the GPU: not the same plan")
        # The per-launch overhead of timing each launch on its own.
        self.event_overhead_us = (self.profiled_us - self.graph_us) / self.n
        by_kernel = collections.defaultdict(list)
        for l in self.launches:
            by_kernel[l["kernel"]].append(l)
        first = self.launches[0]["kernel"]
        self.rows = []
        for k in run["kernels"]:
            ls = by_kernel.get(k["kernel"])
            if not ls:
                sys.exit(f"{self.name}: measured kernel {k['kernel']} is not in the plan compiled here")
            self.rows.append({"kernel": k["kernel"], "launches": ls, "n": len(ls), "kind": kind_of(k["kernel"], ls[0]),
                              "measured_us": k["measured_us"],
                              "in_graph_us": k["measured_us"] - self.event_overhead_us,
                              "first": k["kernel"] == first, "model_us_run": k["model_us"],
                              "bound_run": k["bound"]})


# The model's terms (perf/perf_model.cpp) over the launch records of
# `inspect --perf --json`, for trial constants; kept to the terms calibration
# moves. The JSON's compute and epilogue terms are reused (compute rescaled
# to the trial tensor fraction).
def launch_us(l, c, json_c):
    t = l.get("tile")
    fill = min(l["blocks"], SMS) / SMS
    memory = l["bytes"] / (DRAM_GB_PER_S * 1e3 * c["dram_efficiency"] * fill)
    if l["kind"] == "copy":
        return max(memory, c["load_latency_us"])
    l2 = l["l2_bytes"] / (c["l2_gb_per_s"] * 1e3 * fill) if l.get("l2_bytes") else 0.0
    if t and t["k_tiles"] > 0:
        compute = l["compute_us"] * json_c["mma_sync_fraction"] / c["mma_sync_fraction"]
        per_tile = c["load_latency_us"] / max(1, t["stages"] - 1)
        latency = l["waves_run"] * (t["k_tiles"] * per_tile + 2 * c["load_latency_us"])
    else:
        compute = l["compute_us"]
        latency = 2 * c["l2_latency_us"]
    tail = 0.0
    if l.get("tail_blocks"):
        # The last block of each tile reads the tile's partial sums (and the
        # epilogue's operands) at one block's rate, after a ticket round trip;
        # last blocks resident together run side by side.
        per_tile = l["tail_bytes"] / l["tail_blocks"]
        warps = math.ceil(l["threads"] / 32)
        waves = math.ceil(l["tail_blocks"] / (SMS * max(l["blocks_per_sm"], 1)))
        tail = 2 * c["l2_latency_us"] + waves * per_tile / (warps * c["tail_warp_bytes_per_us"])
    return max(compute, memory, l2, latency) + tail + l["epilogue_us"]


def row_us(row, c, json_c):
    return c["graph_node_overhead_us"] + sum(launch_us(l, c, json_c) for l in row["launches"]) / row["n"]


def after_us(row, perf):
    """The model of the JSON (this tree's kiln): launch estimate + node floor."""
    return perf["graph_node_overhead_us"] + sum(l["est_us"] for l in row["launches"]) / row["n"]


def before_us(row, run):
    """The model of the GPU run (perf_vs_model.json): its per-call estimate plus
    its graph-node overhead (estimated total less kernels, per launch)."""
    node = (run["estimated_ms"] * 1e3 - run["estimated_kernel_us"]) / run["launches_modelled"]
    return node + row["model_us_run"]


def log_rms(models, c, json_c, skip_first=True):
    import numpy as np  # only the fit needs it
    e, w = [], []
    for m in models:
        for r in m.rows:
            if skip_first and r["first"]:
                continue
            e.append(math.log(row_us(r, c, json_c) / r["in_graph_us"]))
            w.append(r["n"])
    e, w = np.array(e), np.array(w)
    return float(np.sqrt((w * e * e).sum() / w.sum()))


def report(models):
    for m in models:
        b = sum(before_us(r, m.run) * r["n"] for r in m.rows)
        a = sum(after_us(r, m.perf) * r["n"] for r in m.rows)
        print(f"\n{m.name}: {m.n} launches; graph replay measured {m.graph_us:.1f} us; modelled before "
              f"{b:.1f} us (measured x{m.graph_us / b:.2f}), after {a:.1f} us (x{m.graph_us / a:.2f}); "
              f"profiled launches carry {m.event_overhead_us:.2f} us each of event overhead")
        print(f"  {'kind':<16} {'launches':>8} {'measured':>9} {'before':>8} {'ratio':>6} {'after':>8} {'ratio':>6}"
              f"  bounds before -> after")
        kinds = collections.OrderedDict()
        for r in m.rows:
            k = kinds.setdefault(r["kind"], {"n": 0, "meas": 0.0, "before": 0.0, "after": 0.0,
                                             "bb": collections.Counter(), "ba": collections.Counter()})
            k["n"] += r["n"]
            k["meas"] += r["in_graph_us"] * r["n"]
            k["before"] += before_us(r, m.run) * r["n"]
            k["after"] += after_us(r, m.perf) * r["n"]
            k["bb"][r["bound_run"]] += r["n"]
            for l in r["launches"]:
                k["ba"][l["bound"]] += 1
        for name, k in kinds.items():
            bounds = lambda c: ", ".join(f"{b} {n}" for b, n in c.most_common())
            print(f"  {name:<16} {k['n']:>8} {k['meas']:>9.1f} {k['before']:>8.1f} {k['meas'] / k['before']:>6.2f} "
                  f"{k['after']:>8.1f} {k['meas'] / k['after']:>6.2f}  {bounds(k['bb'])} -> {bounds(k['ba'])}")
        # Where the calibrated model puts the time: each launch's largest
        # term, plus its tail, epilogue and node floor, summed over the plan.
        terms = collections.Counter()
        for l in m.perf["launches"]:
            body = {"compute": l["compute_us"], "memory": l["memory_us"], "l2": l.get("l2_us", 0.0),
                    "latency": l["latency_us"]}
            top = max(body, key=body.get)
            terms[f"{top} ({l['kind']})"] += body[top]
            terms["fold tail"] += l["tail_us"]
            terms["epilogue"] += l["epilogue_us"]
        terms["graph nodes"] += m.perf["graph_node_overhead_us"] * m.n
        print("  after, the plan's time by term: " +
              ", ".join(f"{k} {v:.1f} us" for k, v in terms.most_common() if v > 0.05))


def kernel_table(m):
    print(f"\n{m.name}: per kernel (in-graph = profiled - {m.event_overhead_us:.2f} us), before and after")
    print(f"  {'kernel':<40} {'n':>3} {'kind':<10} {'in-graph':>8} {'before':>7} {'after':>7} {'ratio':>6}  "
          f"terms after (first launch)")
    for r in sorted(m.rows, key=lambda r: -r["in_graph_us"] * r["n"]):
        l = r["launches"][0]
        t = l.get("tile") or {}
        terms = (f"lat {l['latency_us']:.2f} mem {l['memory_us']:.2f} l2 {l.get('l2_us', 0):.2f} "
                 f"tail {l['tail_us']:.2f} ep {l['epilogue_us']:.2f} ({l['bound']})")
        if t:
            terms += f" {t['bm']}x{t['bn']} kt{t['k_tiles']} s{t['stages']} split{t['split_k']} b{l['blocks']}"
        mark = " (first launch)" if r["first"] else ""
        a = after_us(r, m.perf)
        print(f"  {r['kernel'][:40]:<40} {r['n']:>3} {r['kind']:<10} {r['in_graph_us']:>8.2f} "
              f"{before_us(r, m.run):>7.2f} {a:>7.2f} {r['in_graph_us'] / a:>6.2f}  {terms}{mark}")


def micro_constants(micro, node_us):
    """Achieved rates from the micro benchmarks (whole-plan replay of one kernel)."""
    g = micro["gemm_4096_fp16"]
    ln = micro["layernorm_32mb"]
    ln_bytes = 2.0 * 4096 * 4096 * 2 + 2 * 4096 * 2
    ln_us = ln["kiln_plan_ms"] * 1e3 - node_us
    return {"mma_sync_fraction": g["kiln_tflops"] / TENSOR_PEAK_TFLOPS,
            "dram_efficiency": ln_bytes / ln_us / (DRAM_GB_PER_S * 1e3)}


def steps(lo, hi, step):
    return [round(lo + i * step, 6) for i in range(int(round((hi - lo) / step)) + 1)]


# The values the fit tries (the last of the two rates: "no such term").
GRID = {
    "graph_node_overhead_us": steps(0.1, 1.5, 0.05),
    "load_latency_us": steps(0.2, 2.5, 0.05),
    "l2_latency_us": steps(0.05, 1.5, 0.05),
    "tail_warp_bytes_per_us": [500, 750, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 7500, 1e4, 1e9],
    "l2_gb_per_s": [1000, 1500, 2000, 2500, 3000, 3500, 4000, 5000, 6000, 8000, 10000, 1e9],
}


def fit(models, start, json_c, keys):
    """Coordinate descent on a grid: small, deterministic, no SciPy."""
    c = dict(start)
    for _ in range(8):
        before = dict(c)
        for k in keys:
            c[k] = float(min(GRID[k], key=lambda v: log_rms(models, {**c, k: v}, json_c)))
        if c == before:
            break
    return c


KEYS = ["graph_node_overhead_us", "load_latency_us", "l2_latency_us", "tail_warp_bytes_per_us", "l2_gb_per_s"]


def json_constants(perf):
    c = dict(perf["constants"])
    c["graph_node_overhead_us"] = perf["graph_node_overhead_us"]
    return c


def check_replica(perfs):
    """The fit's copy of the model must give the JSON's own estimates at the
    JSON's constants, or its fitted constants would not mean the same in C++."""
    worst, n = 0.0, 0
    for perf in perfs:
        if "constants" not in perf or any("tail_bytes" not in l for l in perf["launches"]):
            sys.exit("the JSON lacks the model's constants or work fields: make it with this tree's kiln")
        if perf["gpu"] not in ("h100", "h200"):
            sys.exit(f"the fit models the H100 the run measured, not {perf['gpu']}")
        c = json_constants(perf)
        for l in perf["launches"]:
            worst = max(worst, abs(launch_us(l, c, c) - l["est_us"]))
            n += 1
    if worst > 1e-6:
        sys.exit(f"the fit's model differs from kiln's by up to {worst:.3g} us a launch: bring launch_us up to date")
    return n


def do_fit(models, micro):
    json_c = json_constants(models[0].perf)
    tiny = sorted((r for m in models for r in m.rows if r["kind"] == "pointwise/other" and not r["first"]),
                  key=lambda r: r["in_graph_us"])
    print("smallest launches in the graph (profiled less the event overhead): " +
          ", ".join(f"{r['kernel']} {r['in_graph_us']:.2f} us" for r in tiny[:3]))
    print("first launches of a run (left out of the fit, kept in the totals): " +
          ", ".join(f"{m.name} {r['kernel']} {r['in_graph_us']:.2f} us" for m in models for r in m.rows if r["first"]))
    # A graph node cannot cost more than the smallest launch measured in the
    # graph (a kernel of 3 blocks and 40 bytes): the floor's grid stops there.
    GRID["graph_node_overhead_us"] = [v for v in GRID["graph_node_overhead_us"] if v <= tiny[0]["in_graph_us"] + 1e-9]
    start = {"graph_node_overhead_us": 0.5, "load_latency_us": 1.0, "l2_latency_us": 0.3,
             "tail_warp_bytes_per_us": 2000, "l2_gb_per_s": 4000}
    # The micro benchmarks' kernels take 30-600 us: the node floor hardly moves
    # their rates; take them at the floor's start value.
    start.update(micro_constants(micro, start["graph_node_overhead_us"]))
    print(f"from the micro benchmarks: mma.sync fraction {start['mma_sync_fraction']:.3f} "
          f"(GEMM 4096^3: {micro['gemm_4096_fp16']['kiln_tflops']:.0f} TFLOP/s of {TENSOR_PEAK_TFLOPS}), "
          f"DRAM efficiency {start['dram_efficiency']:.3f} (layernorm 32 MB: plan replay "
          f"{micro['layernorm_32mb']['kiln_plan_ms'] * 1e3:.1f} us less one node floor)")
    fits = {}
    # Leave one out: each model judged by a fit on the others; then all.
    trainings = [[o for o in models if o is not m] for m in models] if len(models) > 1 else []
    for train in trainings + [models]:
        c = fit(train, start, json_c, KEYS)
        tag = "+".join(m.name for m in train)
        fits[tag] = c
        print(f"\nfitted on {tag}: " + ", ".join(f"{k} {c[k]:g}" for k in KEYS))
        for m in models:
            total = sum(row_us(r, c, json_c) * r["n"] for r in m.rows)
            held = "" if m in train else "  (held out)"
            print(f"  {m.name:<10} modelled {total:7.1f} us vs graph replay {m.graph_us:7.1f} us "
                  f"({100 * (total / m.graph_us - 1):+.1f}%); per-kernel log-RMS error {log_rms([m], c, json_c):.3f}{held}")
    both = fits["+".join(m.name for m in models)]
    shipped = json_c
    print("\nthis tree's constants (the JSON's): " + ", ".join(f"{k} {shipped[k]:g}" for k in KEYS) +
          f", mma_sync_fraction {shipped['mma_sync_fraction']:g}, dram_efficiency {shipped['dram_efficiency']:g}")
    off = [k for k in KEYS if not math.isclose(both[k], shipped[k], rel_tol=0.02)]
    if off:
        print("  differ from the fit on both models: " + ", ".join(f"{k} {shipped[k]:g} vs {both[k]:g}" for k in off))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["report", "fit", "check"])
    ap.add_argument("--results", default="bench/results/2026-11-27-h100-lease")
    ap.add_argument("--kiln")
    ap.add_argument("--models")
    ap.add_argument("--kernels", action="store_true", help="report: every kernel, with the model's terms")
    ap.add_argument("perf", nargs="*", help="MODEL=FILE: `kiln inspect --perf --json` of a measured model's plan "
                    "(check: FILE...)")
    args = ap.parse_intermixed_args()
    if args.mode == "check":  # the fit's model against kiln's on any --json files
        perfs = []
        for path in args.perf:
            with open(path) as f:
                perfs.append(json.load(f)["perf"])
        print(f"the fit's model gives kiln's estimates for {check_replica(perfs)} launches")
        return 0
    runs, micro = load_measured(args.results)
    with tempfile.TemporaryDirectory(prefix="kiln-calibrate-") as d:
        names = [n for n in runs if n in dict(kv.split("=", 1) for kv in args.perf) or (args.kiln and args.models) or
                 os.path.exists(os.path.join(args.results, "calibration", f"{n}.perf.json"))]
        if not names:
            sys.exit("no model's launches: give MODEL=FILE, --kiln and --models, or save them under RESULTS/calibration")
        models = [Model(runs[n], perf_json(args, n, d)) for n in names]
    check_replica([m.perf for m in models])
    if args.mode == "report":
        report(models)
        if args.kernels:
            for m in models:
                kernel_table(m)
    else:
        do_fit(models, micro)
    return 0


if __name__ == "__main__":
    sys.exit(main())
