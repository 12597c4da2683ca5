#!/usr/bin/env python3
"""The sm_90 plans of the conformance suites run on the strict fake driver and
match the reference backend (issue 14's first "must show").

Runs tests/runtime/fake_gpu_plan_check.cpp (one process per test folder: the
plan built with NVRTC, loaded through the runtime's GPU path on the fake
driver with an H100's limits, each launch run by the plan's kernel on the CPU
simulator, the outputs compared with the reference backend) over the test
folders given, in parallel, and prints the count of plans and kernel launches
checked. Exit 1 when any plan fails, when a listed test is missing, or when
fewer plans than --min-plans were checked (so a run that silently checks
nothing fails).

Usage: fake_gpu_conformance.py CHECKER MODEL_DIR_OR_SUITE... [--list FILE] [--jobs N]
                               [--tolerance onnx|ort|A,R] [--min-plans N] [--timeout S]
MODEL_DIR_OR_SUITE as plan_launch_limits.py takes them (a test folder, a
folder of them, or `onnx-1.23`). --list FILE keeps only the tests it names
(`suite/test` per line, `#` comments): the reduced set of the default tier.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plan_launch_limits import model_dirs, test_name  # noqa: E402

FAILING = ("fail", "crash")


def run_one(checker, model_dir, tolerance, timeout):
    name = test_name(model_dir)
    try:
        c = subprocess.run([checker, model_dir, "--tolerance", tolerance], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return name, {"status": "crash", "message": f"timed out after {timeout} s"}
    lines = [ln for ln in c.stdout.splitlines() if ln.startswith("{")]
    if c.returncode not in (0, 1) or not lines:
        tail = (c.stderr.strip().splitlines() or ["no output"])[-1]
        return name, {"status": "crash", "message": f"exit {c.returncode}: {tail}"}
    return name, json.loads(lines[-1])


def read_list(path):
    names = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                names.append(line)
    return names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checker")
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--list")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--tolerance", default="ort")
    ap.add_argument("--min-plans", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=600)
    a = ap.parse_args()
    dirs = model_dirs(a.paths)
    missing = []
    if a.list:
        wanted = read_list(a.list)
        by_name = {test_name(d): d for d in dirs}
        missing = [n for n in wanted if n not in by_name]
        dirs = [by_name[n] for n in wanted if n in by_name]
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        results = list(pool.map(lambda d: run_one(a.checker, d, a.tolerance, a.timeout), dirs))
    counts, plans, launches, kernels = {}, 0, 0, 0
    for name, r in sorted(results):
        st = r["status"]
        counts[st] = counts.get(st, 0) + 1
        if st == "pass":
            plans += 1
            launches += r.get("launches", 0)
            kernels += r.get("kernels", 0)
        elif st in FAILING:
            print(f"FAIL: {name}: {r.get('message', '')}")
        elif st != "not_compiled":
            print(f"{st}: {name}: {r.get('message', '')[:300]}")
    for n in missing:
        print(f"FAIL: {n}: listed in {a.list} but not found")
    failed = sum(counts.get(s, 0) for s in FAILING) + len(missing)
    summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"fake_gpu_conformance: {plans} sm_90 plans ({kernels} kernels, {launches} kernel launches) ran on the "
          f"strict fake driver (H100 limits) and equal the reference backend; {failed} failed; "
          f"{len(dirs)} tests: {summary}; {time.time() - t0:.0f} s")
    if plans < a.min_plans:
        print(f"FAIL: only {plans} plans checked, at least {a.min_plans} expected")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
