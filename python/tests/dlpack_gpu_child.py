"""The child of test_dlpack_fake_gpu.py, on the fake CUDA driver as an H100
(fake_gpu.run_on_fake_gpu): DLPack device tensors (dlpack_fakes.FakeTensor
over the fake's cuMemAlloc) bound to a GPU engine of the tiny CNN and runs
enqueued on the caller's stream; the launch variants of the KV decoder; the
data-dependent sizes of a detection plan. Prints what it saw as JSON.
    python dlpack_gpu_child.py TINY_PLAN KV_ALL_PLAN KV_NONE_PLAN DETECT_PLAN"""
import ctypes
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import kiln  # noqa: E402
from dlpack_fakes import FLOAT16, IS_COPIED, READ_ONLY, FakeTensor  # noqa: E402

tiny_plan, kv_all_plan, kv_none_plan, detect_plan = sys.argv[1:5]
cuda = ctypes.CDLL("libcuda.so.1")  # the fake (LD_LIBRARY_PATH), the one the runtime loads
take_log = cuda.fake_cuda_take_log
take_log.restype = ctypes.c_char_p
out = {"errors": {}}

eng = kiln.load(tiny_plan, backend="gpu")
out["backend"], out["device"] = eng.backend, eng.device
# The caller's own allocations and stream, in the device's primary context (as torch's are).
primary = ctypes.c_void_p()
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(primary), 0) == 0
assert cuda.cuCtxPushCurrent_v2(primary) == 0


def alloc(nbytes):
    p = ctypes.c_uint64()
    assert cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(nbytes)) == 0
    return p.value


stream = ctypes.c_void_p()
assert cuda.cuStreamCreate(ctypes.byref(stream), 0) == 0
# The fake's id of that stream, from the log line of an event recorded on it.
event = ctypes.c_void_p()
assert cuda.cuEventCreate(ctypes.byref(event), 0) == 0
take_log()
assert cuda.cuEventRecord(event, stream) == 0
out["stream_id"] = take_log().decode().split()[-1]  # "record eN sM" -> "sM"


def log_summary():
    """Copies by kind and the streams that graphs were launched on, since the last call."""
    copies, graphs = {}, []
    for line in take_log().decode().splitlines():
        kind = line.split()[0]
        if kind in ("htod", "dtoh", "dtod"):
            copies[kind] = copies.get(kind, 0) + 1
        elif kind == "graph":
            graphs.append(line.split()[1])
    return {"copies": copies, "graphs": graphs}


def refused(key, f):
    try:
        f()
        out["errors"][key] = None
    except kiln.Error as e:
        out["errors"][key] = str(e)


x_ptr, y_ptr = alloc(3 * 32 * 32 * 4), alloc(10 * 4)
ctx = eng.context()
refused("dtype", lambda: ctx.bind_input("input", FakeTensor(x_ptr, (1, 3, 32, 32), FLOAT16)))
refused("shape", lambda: ctx.bind_input("input", FakeTensor(x_ptr, (1, 3, 32, 16))))
refused("misaligned", lambda: ctx.bind_input("input", FakeTensor(x_ptr, (1, 3, 32, 32), byte_offset=16)))
refused("strides", lambda: ctx.bind_input("input", FakeTensor(x_ptr, (1, 3, 32, 32), strides=(3072, 1024, 1, 32))))
refused("read_only", lambda: ctx.bind_output("probs", FakeTensor(y_ptr, (1, 10), flags=READ_ONLY)))
refused("copied", lambda: ctx.bind_output("probs", FakeTensor(y_ptr, (1, 10), flags=IS_COPIED)))
refused("output_shape", lambda: ctx.bind_output("probs", FakeTensor(y_ptr, (1, 5))))
# Another GPU's memory (the engine runs on device 0), named before the pointer is used.
refused("other_gpu", lambda: ctx.bind_input("input", FakeTensor(x_ptr, (1, 3, 32, 32), device=(2, 1))))
refused("other_gpu_feed", lambda: eng.run({"input": FakeTensor(x_ptr, (1, 3, 32, 32), device=(2, 1))}))

# Both bound zero-copy; the producer is told the stream kiln will use them on.
x, y = FakeTensor(x_ptr, (1, 3, 32, 32)), FakeTensor(y_ptr, (1, 10))
ctx.bind_input("input", x, stream=stream.value)
ctx.bind_output("probs", y, stream=stream.value)
out["export_streams"] = [x.streams, y.streams]
take_log()
ctx.enqueue(stream.value)
out["enqueue_int"] = log_summary()


class CudaStream:  # the CUDA Python protocol's stream object
    def __cuda_stream__(self):
        return (0, stream.value)


ctx.enqueue(CudaStream())
out["enqueue_protocol"] = log_summary()
assert cuda.cuStreamSynchronize(stream) == 0
ctx.run()  # synchronous, on the context's own streams
out["run_zero_copy"] = log_summary()
# A host (numpy) input with the device output: the input is uploaded, nothing downloaded.
ctx.bind_input("input", np.zeros((1, 3, 32, 32), np.float32))
out["x_released_when_bound_again"] = [x.exported, x.deleted]
ctx.run()
out["run_host_input"] = log_summary()
del ctx
out["y_released_with_the_context"] = [y.exported, y.deleted]
# A device tensor in Engine.run's feed: read in place, the output downloaded.
feed_x = FakeTensor(x_ptr, (1, 3, 32, 32))
got = eng.run({"input": feed_x})
out["engine_run_feed"] = dict(log_summary(), outputs={k: list(v.shape) for k, v in got.items()},
                              released=[feed_x.exported, feed_x.deleted])

# Launch variants: the KV decoder's plan with a variant for every
# shape-generic node at the opt shape (past 16, seq 1), and without any.
kv_feed = {"x": np.zeros((1, 1, 64), np.float32), "past_key": np.zeros((1, 2, 16, 16), np.float32),
           "past_value": np.zeros((1, 2, 16, 16), np.float32)}
variants = {}
for name, plan in (("all", kv_all_plan), ("none", kv_none_plan)):
    kv = kiln.load(plan, backend="gpu").context()
    seen = {"before": kv.launch_variants()}
    kv.run(kv_feed)
    seen["opt"] = kv.launch_variants()
    kv.run(dict(kv_feed, past_key=np.zeros((1, 2, 5, 16), np.float32),
                past_value=np.zeros((1, 2, 5, 16), np.float32)))
    seen["other"] = kv.launch_variants()
    variants[name] = seen
out["variants"] = variants

# Data-dependent sizes on the GPU path: the count the run reads back from
# the device. No simulator runs the fake's kernels here, so the count is
# what the allocation held: zero-filled, 0 (NMS's real counts are checked
# on the CPU path, test_run_reports.py).
cuda.fake_cuda_set_alloc_fill(0)
det = kiln.load(detect_plan, backend="gpu")
dctx = det.context()
refused("sizes_before_a_run", dctx.data_dependent_sizes)
boxes = np.zeros((1, 12, 4), np.float32)
scores = np.zeros((1, 2, 12), np.float32)
outs = dctx.run({"boxes": boxes, "scores": scores})
sizes = dctx.data_dependent_sizes()
out["sizes"] = {"num": det.num_data_dependent_sizes, "backend": det.backend,
                "sizes": {k: [int(v), v.bound, v.node] for k, v in sizes.items()},
                "selected": list(outs["selected"].shape)}
print(json.dumps(out))
