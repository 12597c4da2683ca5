"""Running Python on the strict fake CUDA driver (tests/runtime/fake_cuda) as
an H100, in a child process: NVRTC, which compiles the plans in the test's
own process, cannot share a process with the fake driver."""
import json
import os
import pathlib
import subprocess
import sys

import pytest


def fake_cuda_dir():
    """The folder holding the fake driver as libcuda.so.1: $KILN_FAKE_CUDA_DIR (ctest sets it)."""
    d = os.environ.get("KILN_FAKE_CUDA_DIR")
    if not d:
        pytest.skip("KILN_FAKE_CUDA_DIR is not set (ctest python_pytest sets it to the fake driver's folder)")
    if not (pathlib.Path(d) / "libcuda.so.1").exists():
        pytest.fail(f"KILN_FAKE_CUDA_DIR={d} holds no libcuda.so.1")
    return d


def run_on_fake_gpu(script, *args):
    """Runs `script` (a path, or code for -c) with `args` on the fake H100;
    returns the JSON object its last output line prints."""
    env = dict(os.environ, LD_LIBRARY_PATH=fake_cuda_dir(), FAKE_CUDA_DEVICE="h100")
    cmd = [sys.executable, str(script)] if isinstance(script, pathlib.Path) else [sys.executable, "-c", script]
    child = subprocess.run(cmd + [str(a) for a in args], env=env, capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout.strip().splitlines()[-1])
