"""A KV cache in device memory bound in place from Python
(Context.bind_in_place with a __cuda_array_interface__ object,
Context.bind_in_place_device with a raw pointer; kiln_context_bind_in_place
with KILN_MEMORY_DEVICE). The argument checks run on a CPU engine in this
process; the GPU engine runs on the strict fake CUDA driver
(tests/runtime/fake_cuda) in a child process, since NVRTC, which compiles
the plan here, cannot share a process with the fake driver."""
import pathlib

import numpy as np
import pytest

import kiln
from fake_gpu import fake_cuda_dir, run_on_fake_gpu

ROOT = pathlib.Path(__file__).resolve().parents[2]
KV_DECODER = ROOT / "tests" / "runtime" / "kv_decoder"
# The decoder layer of tests/runtime/make_kv_decoder.py: x [1, seq, 64], two
# KV heads of 16, caches appended along dim 2.
PROFILE = dict(min_shapes={"x": [1, 1, 64], "past_key": [1, 2, 0, 16], "past_value": [1, 2, 0, 16]},
               opt_shapes={"x": [1, 1, 64], "past_key": [1, 2, 16, 16], "past_value": [1, 2, 16, 16]},
               max_shapes={"x": [1, 8, 64], "past_key": [1, 2, 24, 16], "past_value": [1, 2, 24, 16]})


class CudaArray:
    """What a torch CUDA tensor or a CuPy array shows: __cuda_array_interface__ (version 3)."""

    def __init__(self, ptr, shape, typestr="<f4", strides=None, readonly=False, mask=None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, readonly),
                                         "strides": strides, "version": 3, "mask": mask, "stream": None}


@pytest.fixture(scope="module")
def cpu_engine():
    return kiln.compile(KV_DECODER / "model.onnx", target="cpu", **PROFILE)


def test_device_memory_on_a_cpu_engine_is_refused(cpu_engine):
    ctx = cpu_engine.context()
    with pytest.raises(kiln.Error, match=r'input "past_key" and output "present_key": device memory bound but the '
                                         r'engine runs on the CPU'):
        ctx.bind_in_place("past_key", "present_key", CudaArray(1 << 20, (1, 2, 24, 16)))
    with pytest.raises(kiln.Error, match=r'device memory bound but the engine runs on the CPU'):
        ctx.bind_in_place_device("past_key", "present_key", 1 << 20, nbytes=2 * 24 * 16 * 4, shape=(1, 2, 24, 16),
                                 dtype="float32")


def test_device_buffer_checks_name_the_pair(cpu_engine):
    ctx = cpu_engine.context()
    cap = (1, 2, 24, 16)
    with pytest.raises(kiln.Error, match=r'input "past_key" and output "present_key": the device buffer holds 100 '
                                         r'bytes but \[1, 2, 24, 16\] of float32 needs 3072'):
        ctx.bind_in_place_device("past_key", "present_key", 1 << 20, nbytes=100, shape=cap, dtype="float32")
    with pytest.raises(kiln.Error, match=r'the device pointer must be an int, not float'):
        ctx.bind_in_place_device("past_key", "present_key", 1.5, nbytes=3072, shape=cap, dtype="float32")
    with pytest.raises(kiln.Error, match=r'a negative dim'):
        ctx.bind_in_place_device("past_key", "present_key", 1 << 20, nbytes=3072, shape=(1, 2, -1, 16),
                                 dtype="float32")
    with pytest.raises(kiln.Error, match=r'__cuda_array_interface__ is read-only'):
        ctx.bind_in_place("past_key", "present_key", CudaArray(1 << 20, cap, readonly=True))
    with pytest.raises(kiln.Error, match=r'__cuda_array_interface__ is not C-contiguous \(strides \(4, 1536, 4, '
                                         r'96\) bytes\)'):
        # dims 2 and 3 swapped in memory (a transposed view)
        ctx.bind_in_place("past_key", "present_key", CudaArray(1 << 20, cap, strides=(4, 1536, 4, 96)))
    with pytest.raises(kiln.Error, match=r'__cuda_array_interface__ has a mask'):
        ctx.bind_in_place("past_key", "present_key", CudaArray(1 << 20, cap, mask=object()))
    with pytest.raises(kiln.Error, match=r'numpy dtype complex64 has no kiln equivalent'):
        ctx.bind_in_place("past_key", "present_key", CudaArray(1 << 20, cap, typestr="<c8"))


# The child: the plan on the fake driver as an H100, caches from the fake's
# cuMemAlloc bound through both Python forms, a prefill and decode steps;
# prints what it saw as JSON.
CHILD = r"""
import ctypes, json, sys
import numpy as np
import kiln
plan = sys.argv[1]
cuda = ctypes.CDLL("libcuda.so.1")  # the fake (LD_LIBRARY_PATH), the one the runtime loaded
eng = kiln.load(plan, backend="gpu")
out = {"backend": eng.backend, "errors": {}}
ctx = eng.context()
cap = (1, 2, 30, 16)
nbytes = 2 * 30 * 16 * 4
# The caller's own allocations, in the device's primary context (as torch's are).
primary = ctypes.c_void_p()
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(primary), 0) == 0
assert cuda.cuCtxPushCurrent_v2(primary) == 0
ptrs = []
for _ in range(2):
    p = ctypes.c_uint64()
    assert cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(nbytes + 256)) == 0
    ptrs.append(p.value)

class CudaArray:
    def __init__(self, ptr, shape, typestr="<f4"):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False), "version": 3}

def refused(key, f):
    try:
        f()
        out["errors"][key] = None
    except kiln.Error as e:
        out["errors"][key] = str(e)

refused("host", lambda: ctx.bind_in_place("past_key", "present_key", np.zeros(cap, np.float32)))
refused("misaligned", lambda: ctx.bind_in_place_device("past_key", "present_key", ptrs[0] + 16, nbytes=nbytes,
                                                       shape=cap, dtype="float32"))
refused("dtype", lambda: ctx.bind_in_place("past_key", "present_key", CudaArray(ptrs[0], cap, "<f2")))
refused("short", lambda: ctx.bind_in_place_device("past_key", "present_key", ptrs[0], nbytes=nbytes - 4,
                                                  shape=cap, dtype="float32"))
ctx.bind_in_place("past_key", "present_key", CudaArray(ptrs[0], cap))
ctx.bind_in_place_device("past_value", "present_value", ptrs[1], nbytes=nbytes, shape=cap, dtype=np.float32)

take_log = cuda.fake_cuda_take_log
take_log.restype = ctypes.c_char_p
take_log()
steps = []
for seq, past in ((5, 0), (1, 5), (1, 6)):
    ctx.set_input_shape("past_key", [1, 2, past, 16])
    ctx.set_input_shape("past_value", [1, 2, past, 16])
    got = ctx.run({"x": np.zeros((1, seq, 64), np.float32)})
    copies = {}
    for line in take_log().decode().splitlines():
        for kind in ("htod", "dtoh", "dtod"):
            if line.startswith(kind):
                copies[kind] = copies.get(kind, 0) + 1
    steps.append({"outputs": sorted(got), "y": list(got["y"].shape), "copies": copies})
out["steps"] = steps
print(json.dumps(out))
"""


def test_device_cache_binds_in_place_on_the_fake_driver(tmp_path):
    fake_cuda_dir()
    eng = kiln.compile(KV_DECODER / "model.onnx", target="sm_90", backend="cpu", **PROFILE)
    plan = tmp_path / "kv_decoder.plan"
    eng.save(plan)
    out = run_on_fake_gpu(CHILD, plan)
    assert out["backend"] == "gpu"
    errors = out["errors"]
    assert "host memory bound in place but the engine runs on the GPU" in errors["host"], errors
    assert 'input "past_key": device pointer' in errors["misaligned"], errors
    assert 'input "past_key" is f32 but the buffer bound in place with output "present_key" is f16' in \
        errors["dtype"], errors
    assert "the device buffer holds 3836 bytes but [1, 2, 30, 16] of float32 needs 3840" in errors["short"], errors
    # Each step uploads x and downloads y only: the caches are read and
    # appended to where they are bound, never copied.
    for step in out["steps"]:
        assert step["outputs"] == ["y"], step
        assert step["copies"] == {"htod": 1, "dtoh": 1}, step
