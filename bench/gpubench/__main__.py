"""bench/gpu.sh: see that script's header and docs/benchmarks.md."""
import argparse
import copy
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx

from . import micro, models, report
from .kiln_cli import Kiln, KilnError, median_ms

KILN_TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90")


def default_kiln():
    built = os.path.join(models.ROOT, "build", "bin", "kiln")
    return os.environ.get("KILN") or (built if os.path.exists(built) else shutil.which("kiln") or built)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/gpu.sh", description=__doc__)
    p.add_argument("--dry-run", action="store_true", help="no GPU: kiln's reference backend, GPU columns empty")
    p.add_argument("--models", default=",".join(models.SPECS), help="comma-separated subset of " +
                   ",".join(models.SPECS))
    p.add_argument("--no-micro", action="store_true", help="skip the micro benchmarks")
    p.add_argument("--iterations", type=int, help="timed runs per figure (default 200; dry run 3)")
    p.add_argument("--compile-mode", default="max-autotune",
                   help="torch.compile mode of the baseline (default max-autotune; recorded in the JSON)")
    p.add_argument("--batch1-only", action="store_true", help="latency at batch 1 only (no large-batch rows)")
    p.add_argument("--power-seconds", type=float, default=5.0, help="GPU busy time per power sample")
    p.add_argument("--out", help="JSON file (default bench/results/<date>-<gpu>.json; dry run: in $TMPDIR)")
    p.add_argument("--kiln", default=default_kiln(), help="kiln binary (default $KILN, build/bin/kiln, kiln on PATH)")
    a = p.parse_args(argv)
    a.models = [m for m in a.models.split(",") if m]
    for m in a.models:
        if m not in models.SPECS:
            p.error(f"unknown model {m!r}; expected some of {', '.join(models.SPECS)}")
    if a.iterations is None:
        a.iterations = 3 if a.dry_run else 200
    return a


def gpu_facts():
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("bench/gpu.sh: PyTorch sees no GPU here; use --dry-run on a machine without one")
    major, minor = torch.cuda.get_device_capability()
    target = f"sm_{major}{minor}"
    if target not in KILN_TARGETS:  # kiln's newest target that the GPU runs
        target = max((t for t in KILN_TARGETS if int(t[3:]) <= major * 10 + minor), key=lambda t: int(t[3:]))
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip() or None
    return torch.cuda.get_device_name(), driver, torch.version.cuda, target


def max_abs_err(got, want, tol):
    """Largest |a - b| over every float output and the largest
    |a - b| / (atol + rtol |b|) (docs/precision.md's "x tol")."""
    err, xtol = 0.0, 0.0
    for name, w in want.items():
        if name not in got:
            raise KilnError(f"output {name} missing from kiln's GPU run")
        if w.dtype.kind != "f":
            continue
        a, b = got[name].astype(np.float64), w.astype(np.float64)
        d = np.abs(a - b)
        err = max(err, float(d.max(initial=0)))
        xtol = max(xtol, float((d / (tol[0] + tol[1] * np.abs(b))).max(initial=0)))
    return err, xtol


def ort_outputs(onnx_path, inputs):
    """ONNX Runtime's fp32 outputs (CPU provider) by name: the accuracy
    oracle, as for the real models' tests. Not kiln's reference backend: the
    lease bundle (bench/device_bundle.sh --lease) has no BLAS for its GEMMs."""
    import onnxruntime as ort
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, {n: v for n, v in inputs.items()})))


def bench_model(a, k, work, name, target, gpu):
    spec = models.SPECS[name]
    rows = []
    if gpu:
        module, in_names, out_names = models.build_torch(name)
        from . import torch_side
        module16 = torch_side.to_fp16(copy.deepcopy(module))
    for batch in ([1, spec.large_batch] if gpu and not a.batch1_only else [1]):
        row = {"name": name, "precision": "fp16", "batch": batch, "kiln_ms": None, "kiln_e2e_ms": None,
               "eager_ms": None, "compile_ms": None}
        rows.append(row)
        try:
            inputs = models.make_inputs(name, batch)
            if gpu:
                onnx_path = models.export_onnx(module, in_names, out_names, inputs,
                                               os.path.join(work, f"{name}_b{batch}.onnx"))
            else:
                onnx_path = models.prepared_model(name)
            plan = os.path.join(work, f"{name}_b{batch}.plan")
            row["kiln_compile_s_cold"], row["kiln_compile_s_cached"] = k.compile_times(onnx_path, plan, "fp16", target)
            if gpu:
                summary = k.bench(plan, "gpu", a.iterations, 500, inputs=inputs)
            else:
                summary = k.bench(onnx_path, "ref", a.iterations, 0, ["--precision", "fp16"], inputs=inputs)
            row["kiln_ms"], row["kiln_e2e_ms"] = median_ms(summary)
            if batch == 1:  # accuracy: the GPU plan against ONNX Runtime's fp32 outputs, same inputs
                got = k.run(plan, "gpu", inputs) if gpu else k.run(onnx_path, "ref", inputs, ["--precision", "fp16"])
                want = ort_outputs(onnx_path, inputs)
                row["kiln_max_abs_err"], row["kiln_err_x_tolerance"] = max_abs_err(got, want, spec.fp16_tolerance)
                row["kiln_tolerance"] = list(spec.fp16_tolerance)
            if gpu:
                time_torch(a, row, module16, in_names, inputs, k, plan, batch)
        except (KilnError, RuntimeError, OSError) as e:
            row["error"] = str(e)
            print(f"{name} batch {batch}: {e}", file=sys.stderr)
        print(f"{name} batch {batch}: kiln {row['kiln_ms']} ms", flush=True)
    return rows


def time_torch(a, row, module16, in_names, inputs, k, plan, batch):
    from . import torch_side
    from .power import PowerSampler
    args = torch_side.half_inputs(torch_side.device_inputs(inputs, in_names))
    row["eager_ms"] = torch_side.time_eager(module16, args, a.iterations, 20)
    compiled, row["torch_compile_s"] = torch_side.compile_module(module16, args, a.compile_mode)
    row["torch_compile_mode"] = a.compile_mode
    row["compile_ms"] = torch_side.time_compiled(compiled, args, a.iterations, 20)
    if batch == 1:
        return
    # Throughput setting: average GPU power while each system runs for a while.
    iters = max(20, int(a.power_seconds * 1e3 / max(row["kiln_ms"], 1e-3)))
    with PowerSampler() as p:
        k.bench(plan, "gpu", iters, 200, inputs=inputs)
    row["kiln_w"] = p.watts
    for key, fn in (("eager", lambda: module16(*args)), ("compile", lambda: compiled(*args))):
        with PowerSampler() as p:
            torch_side.run_for_seconds(fn, a.power_seconds)
        row[f"{key}_w"] = p.watts
    for key in ("kiln", "eager", "compile"):
        w, ms = row.get(f"{key}_w"), row.get(f"{key}_ms")
        row[f"{key}_inf_per_j"] = batch / (ms * 1e-3) / w if w and ms else None


def bench_micro(a, k, work, target, gpu):
    rows = []
    for name, model, amount, unit, shape in micro.build_all(micro.FULL if gpu else micro.DRY):
        row = {"name": name}
        rows.append(row)
        try:
            path = os.path.join(work, f"{name}.onnx")
            onnx.save(model, path)
            if gpu:
                plan = os.path.join(work, f"{name}.plan")
                k.compile(path, plan, "fp16", target, os.path.join(work, "micro-cache"))
                summary = k.bench(plan, "gpu", a.iterations, 500, ["--profile"])
            else:
                summary = k.bench(path, "ref", a.iterations, 0, ["--precision", "fp16", "--profile"])
            op_words = {"gemm_4096_fp16": ("matmul", "gemm"), "conv3x3_stage3_fp16": ("conv",),
                        "softmax_32mb": ("softmax",), "layernorm_32mb": ("layer_norm", "layernorm")}[name]
            whole, _ = median_ms(summary)
            ms = micro.kernel_ms(summary, op_words) or whole
            row["kiln_ms"], row["kiln_plan_ms"] = ms, whole
            row["shape"] = shape
            if unit == "tflops":
                row["kiln_tflops"] = amount / (ms * 1e-3) / 1e12
            else:
                row["kiln_gbps"] = amount / (ms * 1e-3) / 1e9
            if gpu:
                from . import torch_side
                if name == "gemm_4096_fp16":
                    row["cublas_tflops"] = torch_side.gemm_tflops(micro.FULL["gemm_n"])
                elif name == "conv3x3_stage3_fp16":
                    row["cudnn_tflops"] = torch_side.conv_tflops(*micro.FULL["conv"])
                else:
                    row["copy_gbps"] = torch_side.copy_gbps(32 << 20)
            else:
                row["cublas_tflops" if name.startswith("gemm") else "cudnn_tflops" if name.startswith("conv")
                    else "copy_gbps"] = None
        except (KilnError, RuntimeError, OSError) as e:
            row["error"] = str(e)
            row.setdefault("kiln_tflops" if unit == "tflops" else "kiln_gbps", None)
            print(f"{name}: {e}", file=sys.stderr)
    return rows


def main(argv):
    a = parse_args(argv)
    if not os.access(a.kiln, os.X_OK):
        raise SystemExit(f"{a.kiln}: no kiln binary (build it: tools/build.sh, or set KILN=)")
    gpu = not a.dry_run
    if gpu:
        gpu_name, driver, cuda, target = gpu_facts()
    else:
        gpu_name, driver, cuda, target = None, None, None, "sm_90"
    r = report.header(gpu_name, driver, cuda, a.dry_run, "gpu" if gpu else "ref")
    r["kiln_target"] = target
    r["iterations"] = a.iterations
    work = tempfile.mkdtemp(prefix="kiln-gpu-bench-")
    try:
        k = Kiln(a.kiln, work)
        for name in a.models:
            r["models"] += bench_model(a, k, work, name, target, gpu)
        if not a.no_micro:
            r["micro"] = bench_micro(a, k, work, target, gpu)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.print_table(r)
    if a.out:
        out = a.out
    elif gpu:
        slug = "".join(c if c.isalnum() else "-" for c in gpu_name).strip("-").lower()
        out = os.path.join(models.ROOT, "bench", "results", f"{r['date']}-{slug}.json")
    else:
        out = os.path.join(tempfile.gettempdir(), "kiln-gpu-dry-run.json")
    report.write(r, out)
    errors = [x["name"] for x in r["models"] + r["micro"] if "error" in x]
    if errors:
        print(f"failed: {', '.join(errors)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
