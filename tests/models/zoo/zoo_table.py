#!/usr/bin/env python3
"""Prints docs/models.md's per-model table from the skeletons' export
metadata and the JSON results of run_zoo.py (build/zoo_<config>.json).

Usage: zoo_table.py BUILD_DIR   (needs onnx)
"""
import json
import os
import sys

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = ["ref-fp32", "sim-fp32", "sim-fp16", "sim-bf16"]


def cell(r):
    if r is None:
        return "not run"
    if r["verdict"] == "pass":
        return f"pass {r['max_abs_err']:.2g}" if r.get("max_abs_err") is not None else "pass"
    if r["verdict"] == "expected failure":
        return "xfail"
    return "FAIL"


def main():
    build = sys.argv[1]
    results = {}
    for c in CONFIGS:
        p = os.path.join(build, f"zoo_{c}.json")
        if os.path.exists(p):
            results[c] = json.load(open(p))["results"]
    print("| model | exporter, opset | params | nodes | ORT vs eager | ref fp32 | sim fp32 | sim fp16 | sim bf16 "
          "| ref s | sim fp32 s |")
    print("|---|---|---:|---:|---:|---|---|---|---|---:|---:|")
    suffix = ".skeleton.onnx"
    for f in sorted(os.listdir(HERE)):
        if not f.endswith(suffix):
            continue
        name = f[: -len(suffix)]
        m = onnx.load(os.path.join(HERE, f), load_external_data=False)
        meta = json.loads({p.key: p.value for p in m.metadata_props}["kiln-export"])
        rs = [results.get(c, {}).get(name) for c in CONFIGS]
        secs = [f"{r['seconds']:.1f}" if r else "" for r in (rs[0], rs[1])]
        print(f"| {name} | {meta['exporter']} {meta['opset']} | {meta['params'] / 1e6:.2f}M | {meta['nodes']} "
              f"| {meta['ort_vs_eager_max_abs']:.1g} | " + " | ".join(cell(r) for r in rs) + f" | {secs[0]} | {secs[1]} |")


if __name__ == "__main__":
    main()
