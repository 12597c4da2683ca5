#!/usr/bin/env python3
"""How kiln's compile time grows with graph size (issue 18, item 3).

Builds synthetic graphs (bench/scaling_models.py: a pointwise chain and a
residual ladder) of each size, compiles each with `kiln compile --target cpu
--json` (the import and the whole default pipeline, no kernels, the verifier after every pass, as a
user's compile runs them), and prints per size the wall time, the CPU time (steadier on a loaded machine), the import time,
the CPU time of each pass (a pass run twice, e.g. dce, is summed) and of the
verifier runs between passes. For each column it fits the exponent k of
time ~ nodes^k by least squares over log(time) and log(nodes): k near 1 is
linear. Writes everything to bench/results/compile-scaling-<date>.json.

Usage: bench/compile_scaling.sh [--quick] [--sizes 10000,50000,100000] [--shapes chain,ladder]
                                [--timeout 900] [--out FILE]
A size whose compile runs past --timeout is recorded as timed out and the
larger sizes of that shape are skipped.
"""
import argparse
import datetime
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaling_models  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Columns under this many ms at the largest size are noise, not a trend.
FIT_MIN_MS = 20.0


def fit_exponent(sizes, times):
    pts = [(math.log(n), math.log(t)) for n, t in zip(sizes, times) if t > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def compile_one(kiln, model, timeout):
    """Returns {"wall_ms", "import_ms", "passes": {name: ms}, "verify_ms", ...} or None on timeout."""
    with tempfile.NamedTemporaryFile(suffix=".json") as js:
        t0 = time.monotonic()
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            # --target cpu: the passes' scaling, not NVRTC's (the default, auto,
            # would compile every kernel for a GPU).
            r = subprocess.run([kiln, "compile", model, "--target", "cpu", "--json", js.name], capture_output=True,
                               text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        wall = (time.monotonic() - t0) * 1000
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        # CPU time of the compile: on a loaded machine it moves far less than the wall time.
        cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000
        if r.returncode != 0:
            sys.exit(f"kiln compile {model} failed:\n{r.stderr}")
        j = json.load(open(js.name))
    # Per pass the CPU time where kiln reports it (wall time otherwise): the
    # machine's load moves it much less.
    clock = "cpu_ms" if all("cpu_ms" in p for p in j["passes"]) else "ms"
    passes, verify = {}, 0.0
    for p in j["passes"]:
        passes[p["name"]] = passes.get(p["name"], 0.0) + p[clock]
        verify += p.get("verify_cpu_ms" if clock == "cpu_ms" else "verify_ms", 0.0)
    return {"wall_ms": wall, "cpu_ms": cpu, "import_ms": j.get("import_ms", 0.0), "passes": passes, "verify_ms": verify,
            "pass_clock": clock, "nodes_in": j["nodes_in"], "nodes_out": j["nodes_out"], "kernels": j["kernels"]}


def columns(runs):
    cols = ["wall_ms", "cpu_ms", "import_ms"]
    for r in runs:
        for name in r["passes"]:
            if name not in cols:
                cols.append(name)
    return cols + ["verify_ms"]


def value(run, col):
    return run[col] if col in run and col != "passes" else run["passes"].get(col, 0.0)


def report(shape, sizes, runs):
    cols = columns(runs)
    fits = {}
    for c in cols:
        ts = [value(r, c) for r in runs]
        if len(ts) >= 2 and max(ts) >= FIT_MIN_MS:
            fits[c] = fit_exponent(sizes[: len(runs)], ts)
    label = {"wall_ms": "wall", "cpu_ms": "cpu", "import_ms": "import", "verify_ms": "verify"}
    head = "".join(f"{label.get(c, c)[:13]:>14}" for c in cols)
    clock = "CPU" if runs[0].get("pass_clock") == "cpu_ms" else "wall"
    print(f"\n{shape}: ms per column (wall and CPU of the whole compile; import wall; passes {clock} time, summed "
          f"over their runs; verify = the verifier after every pass)")
    print(f"{'nodes':>8}{head}{'kernels':>9}")
    for n, r in zip(sizes, runs):
        print(f"{n:>8}" + "".join(f"{value(r, c):>14.1f}" for c in cols) + f"{r['kernels']:>9}")
    print(f"{'exponent':>8}" + "".join(f"{fits[c]:>14.2f}" if fits.get(c) is not None else f"{'-':>14}" for c in cols))
    if fits.get("wall_ms") is not None:
        cpu = f", CPU time {fits['cpu_ms']:.2f}" if fits.get("cpu_ms") is not None else ""
        print(f"{shape}: exponent {fits['wall_ms']:.2f} (wall time ~ nodes^k{cpu}; sizes {sizes[0]}..{sizes[len(runs) - 1]})")
    return fits


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="sizes 1000,2000,4000 (a smoke run)")
    ap.add_argument("--sizes", help="comma-separated node counts (default 10000,50000,100000)")
    ap.add_argument("--shapes", default="chain,ladder")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per compile before it counts as too slow")
    ap.add_argument("--out", help="JSON path (default bench/results/compile-scaling-<date>.json)")
    ap.add_argument("--kiln", default=os.environ.get("KILN", os.path.join(ROOT, "build", "bin", "kiln")))
    a = ap.parse_args()
    sizes = [int(s) for s in (a.sizes or ("1000,2000,4000" if a.quick else "10000,50000,100000")).split(",")]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    result = {"commit": commit, "machine": f"{os.cpu_count()} CPUs", "kiln": a.kiln, "sizes": sizes, "shapes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for shape in a.shapes.split(","):
            runs, timed_out = [], None
            for n in sizes:
                path = os.path.join(tmp, f"{shape}-{n}.onnx")
                scaling_models.write(shape, n, path)
                r = compile_one(a.kiln, path, a.timeout)
                os.remove(path)
                if r is None:
                    timed_out = n
                    print(f"{shape} {n}: over {a.timeout:.0f} s, larger sizes skipped", flush=True)
                    break
                print(f"{shape} {n}: {r['wall_ms'] / 1000:.2f} s", flush=True)
                runs.append(r)
            fits = report(shape, sizes, runs) if runs else {}
            result["shapes"][shape] = {"runs": [dict(r, size=n) for n, r in zip(sizes, runs)],
                                       "exponents": fits, "timed_out_at": timed_out}
    out = a.out or os.path.join(ROOT, "bench", "results", f"compile-scaling-{datetime.date.today()}.json")
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
