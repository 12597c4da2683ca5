"""DLPack device tensors, enqueue on the caller's stream, launch variants and
data-dependent sizes on a GPU engine: the strict fake CUDA driver as an H100
runs dlpack_gpu_child.py (fake_gpu.py). The fake runs no kernel here (no
simulator in a Python child), so these check the bindings, the copies and
the streams, not the values: the values of zero-copy runs are checked by the
C++ fake-driver tests with the simulator (tests/runtime)."""
import pathlib
import subprocess
import sys

import pytest

import kiln
from fake_gpu import fake_cuda_dir, run_on_fake_gpu

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHILD = pathlib.Path(__file__).resolve().parent / "dlpack_gpu_child.py"
KV_PROFILE = dict(min_shapes={"x": [1, 1, 64], "past_key": [1, 2, 0, 16], "past_value": [1, 2, 0, 16]},
                  opt_shapes={"x": [1, 1, 64], "past_key": [1, 2, 16, 16], "past_value": [1, 2, 16, 16]},
                  max_shapes={"x": [1, 8, 64], "past_key": [1, 2, 24, 16], "past_value": [1, 2, 24, 16]})


@pytest.fixture(scope="module")
def seen(tmp_path_factory):
    fake_cuda_dir()  # skips without the fake driver
    d = tmp_path_factory.mktemp("fake_gpu_plans")
    kiln.compile(ROOT / "examples" / "models" / "tiny_cnn.onnx", target="sm_90", backend="cpu").save(d / "tiny.plan")
    for v in ("all", "none"):
        kiln.compile(ROOT / "tests" / "runtime" / "kv_decoder" / "model.onnx", target="sm_90", backend="cpu",
                     opt_variants=v, **KV_PROFILE).save(d / f"kv_{v}.plan")
    subprocess.run([sys.executable, str(ROOT / "tests" / "cli" / "make_data_dependent_models.py"), str(d)],
                   check=True, capture_output=True)
    kiln.compile(d / "detect.onnx", target="sm_90", backend="cpu").save(d / "detect.plan")
    return run_on_fake_gpu(CHILD, d / "tiny.plan", d / "kv_all.plan", d / "kv_none.plan", d / "detect.plan")


def test_device_tensor_refusals_name_the_tensor(seen):
    assert (seen["backend"], seen["device"]) == ("gpu", 0)
    e = seen["errors"]
    assert e["dtype"] == 'input "input" is f32[1,3,32,32] but the DLPack tensor (cuda:0) is f16[1,3,32,32]'
    assert e["shape"] == 'input "input" is f32[1,3,32,32] but the DLPack tensor (cuda:0) is f32[1,3,32,16]'
    assert e["output_shape"] == 'output "probs" is f32[1,10] but the DLPack tensor (cuda:0) is f32[1,5]'
    assert 'input "input": device pointer 0x' in e["misaligned"] and "is not 256-byte aligned" in e["misaligned"]
    assert 'input "input": the DLPack tensor is not C-contiguous' in e["strides"]
    assert e["read_only"] == 'output "probs": the DLPack tensor is read-only; kiln writes the output'
    assert 'output "probs": the producer exported a copy' in e["copied"]
    assert e["other_gpu"] == 'input "input": the DLPack tensor is on cuda:1 but the engine runs on CUDA device 0'
    assert e["other_gpu_feed"] == e["other_gpu"]


def test_device_tensors_are_read_and_written_in_place(seen):
    # Exported for the stream kiln is told it will use them on.
    assert seen["export_streams"][0] == seen["export_streams"][1] != [None]
    # Enqueued on the caller's stream (an int or a __cuda_stream__ object):
    # one graph launch there, and no copy: the kernels read x and write y.
    for key in ("enqueue_int", "enqueue_protocol"):
        assert seen[key] == {"copies": {}, "graphs": [seen["stream_id"]]}, key
    # run() uses the context's own stream, with no copy either.
    assert seen["run_zero_copy"]["copies"] == {}
    assert seen["run_zero_copy"]["graphs"] and seen["run_zero_copy"]["graphs"] != [seen["stream_id"]]
    # A numpy input next to the device output: uploaded; nothing downloaded.
    assert seen["run_host_input"]["copies"] == {"htod": 1}
    # A device tensor in Engine.run's feed: read in place; the output downloaded.
    assert seen["engine_run_feed"]["copies"] == {"dtoh": 1}
    assert seen["engine_run_feed"]["outputs"] == {"probs": [1, 10]}


def test_each_device_tensor_is_released_once_its_binding_ends(seen):
    assert seen["x_released_when_bound_again"] == [1, 1]
    assert seen["y_released_with_the_context"] == [1, 1]
    assert seen["engine_run_feed"]["released"] == [1, 1]


def test_launch_variants_issued_at_the_opt_shape(seen):
    # opt_variants="all": the five launches of the decoder layer each have a
    # variant for the opt shape (past 16, seq 1), issued there and only there.
    assert seen["variants"]["all"] == {"before": [], "opt": [0, 1, 2, 3, 4], "other": []}
    assert seen["variants"]["none"] == {"before": [], "opt": [], "other": []}


def test_data_dependent_sizes_on_the_gpu_path(seen):
    s = seen["sizes"]
    assert (s["num"], s["backend"]) == (1, "gpu")
    assert 'data-dependent size 0 (nms_n0, decided by node (non_max_suppression) producing %selected) is not known' \
        in seen["errors"]["sizes_before_a_run"]
    value, bound, node = s["sizes"]["nms_n0"]
    assert (bound, node) == (12, "node (non_max_suppression) producing %selected")
    # The zero-filled count (the fake runs no NMS kernel), and the output trimmed to it.
    assert value == 0 and s["selected"] == [0, 3]
