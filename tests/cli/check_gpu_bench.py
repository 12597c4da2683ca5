#!/usr/bin/env python3
"""Checks a `bench/gpu.sh --dry-run` JSON (docs/benchmarks.md): every asked
model has a batch-1 row with kiln's latency, compile times and its accuracy
within the model's fp16 bound; the four micro benchmarks have kiln figures;
and nothing claims to be a GPU figure.
Usage: check_gpu_bench.py FILE MODEL[,MODEL...]"""
import json
import sys


def main(path, names):
    r = json.load(open(path))
    problems = []
    for key in ("gpu", "driver", "cuda", "commit", "date", "models", "micro"):
        if key not in r:
            problems.append(f"missing top-level key {key}")
    if r.get("dry_run") is not True or r.get("gpu") is not None or r.get("kiln_backend") != "ref":
        problems.append("a dry run must say dry_run: true, gpu: null, kiln_backend: ref")
    rows = {m["name"]: m for m in r.get("models", []) if m.get("batch") == 1}
    for name in names:
        m = rows.get(name)
        if m is None:
            problems.append(f"no batch-1 row for {name}")
            continue
        if "error" in m:
            problems.append(f"{name}: {m['error']}")
            continue
        for key in ("kiln_ms", "kiln_compile_s_cold", "kiln_compile_s_cached"):
            if not isinstance(m.get(key), (int, float)) or m[key] <= 0:
                problems.append(f"{name}: {key} = {m.get(key)!r}, expected a positive number")
        if not isinstance(m.get("kiln_err_x_tolerance"), (int, float)) or not 0 <= m["kiln_err_x_tolerance"] <= 1:
            problems.append(f"{name}: fp16 error {m.get('kiln_max_abs_err')} is {m.get('kiln_err_x_tolerance')}x "
                            f"its bound {m.get('kiln_tolerance')}")
        for key in ("eager_ms", "compile_ms"):
            if m.get(key) is not None:
                problems.append(f"{name}: {key} is set in a dry run")
    micro = {m["name"]: m for m in r.get("micro", [])}
    for name, key in (("gemm_4096_fp16", "kiln_tflops"), ("conv3x3_stage3_fp16", "kiln_tflops"),
                      ("softmax_32mb", "kiln_gbps"), ("layernorm_32mb", "kiln_gbps")):
        m = micro.get(name)
        if m is None or "error" in m or not isinstance(m.get(key), (int, float)) or m[key] <= 0:
            problems.append(f"micro {name}: {m}")
    for p in problems:
        print("FAIL:", p)
    if not problems:
        print(f"{path}: {len(names)} models and {len(micro)} micro benchmarks as expected")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2].split(",")))
