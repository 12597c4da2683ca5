#!/usr/bin/env python3
"""Every launch of every sm_90 plan fits an H100's per-block limits.

Compiles each model given (the Debian ONNX 1.12 suites and the real models, as
`kiln conformance` finds them) with `kiln compile --target sm_90 -o`, reads
`kiln inspect --json PLAN` and checks every kernel launch against the H100's
limits (CUDA C Programming Guide, "Compute Capabilities"), written out here
independently of kiln's own check (codegen/launch_fit.h):

  block <= 1024 x 1024 x 64 and <= 1024 threads; grid <= 2^31-1 x 65535 x 65535;
  registers: per warp regs x 32 rounded up to 256, x warps <= 65536;
  static shared <= 48 KB; static + dynamic <= 227 KB; without the runtime's
  opt-in (dynamic <= 48 KB) static + dynamic <= 48 KB;
  parameters: 8 bytes per buffer pointer <= 32764;
  the block <= the kernel's __launch_bounds__ as the CUBIN records it.

A model `kiln compile` cannot build alone (most often a node test whose shape
operands are graph inputs) goes through `kiln conformance --target sm_90
--write-plans`, which imports it with its first data set's inputs known, as
the conformance runner does. A model kiln cannot compile either way (an op it
does not support) is counted and listed, not checked; a build that fails on a
launch limit fails the test (kiln never writes such a plan: it is an error
naming the limit).
Prints the number of plans and launches checked. Exit 1 on any misfit.

Usage: plan_launch_limits.py KILN WORK_DIR MODEL_DIR_OR_SUITE... [--jobs N]
A MODEL_DIR_OR_SUITE is a test folder (holding model.onnx), a folder of them,
or `onnx-1.23`: the four folders of onnx 1.23's backend tests where `kiln
conformance` finds them ($KILN_ONNX_TESTS, else
${XDG_CACHE_HOME:-~/.cache}/kiln/onnx-1.23-tests, made by tools/onnx_suite.sh).
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys

H100 = {"threads": 1024, "block": (1024, 1024, 64), "grid": (2**31 - 1, 65535, 65535), "regs": 65536,
        "static_smem": 48 * 1024, "optin_smem": 227 * 1024, "params": 32764}


def misfits(launch):
    """What in one launch of `kiln inspect --json` breaks the H100's limits."""
    bad = []
    block, grid = launch["block"], launch["grid"]
    threads = block[0] * block[1] * block[2]
    for i in range(3):
        if not 1 <= block[i] <= H100["block"][i]:
            bad.append(f"block {block}")
        if not 1 <= grid[i] <= H100["grid"][i]:
            bad.append(f"grid {grid}")
    if threads > H100["threads"]:
        bad.append(f"{threads} threads")
    regs = max(launch["registers"], launch.get("cubin_registers", -1))  # ptxas's report or the CUBIN's
    if regs < 0:
        bad.append("registers unknown")
    elif (threads + 31) // 32 * ((regs * 32 + 255) // 256 * 256) > H100["regs"]:
        bad.append(f"{threads} threads x {regs} registers")
    st, dyn = max(launch["static_shared_bytes"], 0), launch["dynamic_shared_bytes"]
    if st > H100["static_smem"] or st + dyn > H100["optin_smem"]:
        bad.append(f"shared {st}+{dyn}")
    if dyn <= H100["static_smem"] and st + dyn > H100["static_smem"]:
        bad.append(f"shared {st}+{dyn} without the opt-in")
    # The plan's count (buffers and a shape-generic kernel's kiln_syms) or the CUBIN's own.
    params = max(launch["param_bytes"], launch.get("cubin_param_bytes", -1))
    if params > H100["params"]:
        bad.append(f"{params} parameter bytes")
    bound = launch.get("cubin_max_threads", -1)
    if bound > 0 and threads > bound:
        bad.append(f"{threads} threads over the CUBIN's max threads {bound}")
    return bad


def self_check():
    """The checker itself can fail: each limit broken once (the issue's 1024 x 94
    registers softmax among them) must be reported, a fitting launch not."""
    ok = {"block": [1024, 1, 1], "grid": [4, 1, 1], "registers": 64, "static_shared_bytes": 0,
          "dynamic_shared_bytes": 0, "param_bytes": 16, "cubin_max_threads": 1024}
    assert misfits(ok) == [], misfits(ok)
    for change in ({"registers": 94}, {"block": [2048, 1, 1]}, {"block": [32, 32, 2]}, {"grid": [1, 70000, 1]},
                   {"static_shared_bytes": 50 * 1024}, {"dynamic_shared_bytes": 228 * 1024},
                   {"static_shared_bytes": 40 * 1024, "dynamic_shared_bytes": 16 * 1024}, {"param_bytes": 40008},
                   {"param_bytes": 32760, "cubin_param_bytes": 32768},
                   {"cubin_max_threads": 512}, {"registers": -1}):
        assert misfits({**ok, **change}), f"the checker misses {change}"


def onnx_suite_root():
    env = os.environ.get("KILN_ONNX_TESTS")
    if env:
        return env
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "kiln", "onnx-1.23-tests")


def expand_suites(paths):
    out = []
    for p in paths:
        if p == "onnx-1.23":
            root = onnx_suite_root()
            if not os.path.isdir(os.path.join(root, "node")):
                sys.exit(f"plan_launch_limits: onnx 1.23's backend tests are not in {root} (run tools/onnx_suite.sh, "
                         "or set KILN_ONNX_TESTS)")
            out += [os.path.join(root, s) for s in ("node", "pytorch-converted", "pytorch-operator", "simple")]
        else:
            out.append(p)
    return out


def model_dirs(paths):
    out = []
    for p in expand_suites(paths):
        if os.path.exists(os.path.join(p, "model.onnx")):
            out.append(p)
        elif os.path.isdir(p):
            out += sorted(os.path.join(p, d) for d in os.listdir(p)
                          if os.path.exists(os.path.join(p, d, "model.onnx")))
        else:
            sys.exit(f"plan_launch_limits: {p}: no such test folder")
    return out


def test_name(model_dir):
    return os.path.basename(os.path.dirname(model_dir)) + "/" + os.path.basename(model_dir)


def plan_path(work, name):
    return os.path.join(work, name.replace("/", "__") + ".plan")


def check(kiln, work, model_dir):
    """(name, launches checked or None, problems, note)"""
    name = test_name(model_dir)
    plan = plan_path(work, name)
    c = subprocess.run([kiln, "compile", os.path.join(model_dir, "model.onnx"), "--target", "sm_90", "-o", plan],
                       capture_output=True, text=True)
    if c.returncode != 0:
        err = (c.stderr.strip().splitlines() or ["?"])[-1]
        if "cannot be launched" in c.stderr:
            return name, None, [err], None
        return name, None, [], err
    return check_plan(kiln, name, plan)


def check_plan(kiln, name, plan):
    js = plan + ".json"
    i = subprocess.run([kiln, "inspect", plan, "--json", js], capture_output=True, text=True)
    if i.returncode != 0:
        return name, None, [f"kiln inspect: {i.stderr.strip()}"], None
    with open(js) as f:
        j = json.load(f)
    os.remove(js)
    os.remove(plan)
    if not j.get("gpu_kernels", False):
        return name, None, [f"no GPU kernels: {j.get('no_gpu_reason')}"], None
    problems, n = [], 0
    for launch in j["launches"]:
        if launch["kind"] != "kernel":
            continue
        n += 1
        for b in misfits(launch):
            problems.append(f"step {launch['step']} ({launch['node']}, {launch['kernel']}): {b}")
    return name, n, problems, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("work")
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    self_check()
    os.makedirs(a.work, exist_ok=True)
    dirs = model_dirs(a.paths)
    plans = launches = 0
    failed, skipped = [], []
    results, via_conformance = [], 0
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        results += pool.map(lambda d: check(a.kiln, a.work, d), dirs)
        # What `kiln compile` could not build alone: through the conformance
        # runner, with the test's inputs known.
        retry = [d for d, r in zip(dirs, results) if r[1] is None and not r[2]]
        if retry:
            conf_dir = os.path.join(a.work, "conformance")
            os.makedirs(conf_dir, exist_ok=True)
            js = os.path.join(a.work, "conformance.json")
            subprocess.run([a.kiln, "conformance", "--target", "sm_90", "--write-plans", conf_dir, "--json", js,
                            "-j", str(a.jobs)] + retry, capture_output=True, text=True)
            with open(js) as f:
                why = {t["suite"] + "/" + t["name"]: t.get("message", "") for t in json.load(f)["tests"]}
            built = {}
            for d in retry:
                name = test_name(d)
                plan = os.path.join(conf_dir, name.replace("/", "__") + ".plan")
                if os.path.exists(plan):
                    built[name] = plan
                elif "cannot be launched" in why.get(name, ""):
                    built[name] = None
            again = list(pool.map(lambda n: check_plan(a.kiln, n, built[n]) if built[n] else
                                  (n, None, [why[n]], None), built))
            results = [r for r in results if r[0] not in built] + again
            via_conformance = sum(1 for r in again if r[1] is not None)
    for name, n, problems, note in results:
        if problems:
            failed.append((name, problems))
        elif n is None:
            skipped.append((name, note))
        else:
            plans += 1
            launches += n
    for name, note in skipped:
        print(f"not compiled: {name}: {note}")
    for name, problems in failed:
        for p in problems:
            print(f"FAIL: {name}: {p}")
    print(f"plan_launch_limits: {plans} sm_90 plans, {launches} kernel launches checked against H100 limits; "
          f"{len(failed)} plans with misfits; {len(skipped)} of {len(dirs)} models not compiled (unsupported)")
    print(f"plan_launch_limits: {via_conformance} of the plans built through `kiln conformance --write-plans`")
    return 1 if failed or plans == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
