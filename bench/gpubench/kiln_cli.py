"""kiln driven through its CLI, as a user would: compile, bench, run.

Every call is a subprocess of build/bin/kiln (or $KILN), so the figures are
the ones `kiln bench` prints for users, not a private timing path."""
import json
import os
import shutil
import subprocess
import tempfile
import time

import numpy as np


class KilnError(RuntimeError):
    pass


class Kiln:
    def __init__(self, binary, workdir):
        self.binary = binary
        self.workdir = workdir

    def _call(self, args, what):
        p = subprocess.run([self.binary, *args], capture_output=True, text=True)
        if p.returncode != 0:
            raise KilnError(f"kiln {what} failed (exit {p.returncode}):\n{p.stderr.strip() or p.stdout.strip()}")
        return p

    def compile(self, model, plan, precision, target, cache_dir):
        """Compiles MODEL to PLAN; returns wall seconds (kiln's whole process)."""
        t0 = time.perf_counter()
        self._call(["compile", model, "-o", plan, "--precision", precision, "--target", target,
                    "--cache-dir", cache_dir], f"compile {model}")
        return time.perf_counter() - t0

    def compile_times(self, model, plan, precision, target):
        """Cold (empty kernel cache: every kernel through NVRTC) then cached."""
        cache = tempfile.mkdtemp(prefix="kiln-bench-cache-", dir=self.workdir)
        try:
            cold = self.compile(model, plan, precision, target, cache)
            cached = self.compile(model, plan, precision, target, cache)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        return cold, cached

    @staticmethod
    def _inputs_flag(inputs, d):
        """--inputs name:file.npy,... for numpy arrays written into d."""
        specs = []
        for name, arr in inputs.items():
            path = os.path.join(d, f"in_{len(specs)}.npy")
            np.save(path, arr)
            specs.append(f"{name}:{path}")
        return ["--inputs", ",".join(specs)] if specs else []

    def bench(self, model, backend, iterations, warmup_ms, extra=(), inputs=None):
        """`kiln bench` summary as its --export-json writes it. `inputs`: the
        model's inputs (token ids must be valid ids; random ones may not be)."""
        d = tempfile.mkdtemp(prefix="kiln-bench-", dir=self.workdir)
        out = os.path.join(d, "summary.json")
        self._call(["bench", model, "--backend", backend, "--iterations", str(iterations),
                    "--warmup-ms", str(warmup_ms), "--export-json", out, *self._inputs_flag(inputs or {}, d), *extra],
                   f"bench {model}")
        with open(out) as f:
            summary = json.load(f)
        shutil.rmtree(d, ignore_errors=True)
        return summary

    def run(self, model, backend, inputs, extra=()):
        """Runs once with the given numpy inputs; returns {output name: array}."""
        d = tempfile.mkdtemp(prefix="kiln-run-", dir=self.workdir)
        outdir = os.path.join(d, "out")
        os.makedirs(outdir)
        self._call(["run", model, "--backend", backend, *self._inputs_flag(inputs, d), "--outputs", outdir, *extra],
                   f"run {model}")
        res = {f[:-4]: np.load(os.path.join(outdir, f)) for f in sorted(os.listdir(outdir)) if f.endswith(".npy")}
        shutil.rmtree(d, ignore_errors=True)
        return res


def median_ms(summary):
    """(GPU compute median, end-to-end median) in ms from a bench summary.

    End to end is the host's view of one inference (with transfers for host
    buffers); GPU compute is CUDA-event time, present only where a GPU ran."""
    e2e = summary["latency_ms"]["median"]
    gpu = summary.get("gpu_compute_ms", {}).get("median") if isinstance(summary.get("gpu_compute_ms"), dict) else None
    return (gpu if gpu is not None else e2e), e2e
