"""What a context's last run did, on the CPU path in this process:
Context.data_dependent_sizes() (kiln_context_data_dependent_size) for a GPU
plan computed at its bounds, run by the CPU reference path here, against
ONNX Runtime's result sizes; Context.launch_variants() and compile()'s
opt_variants. The GPU path: test_dlpack_fake_gpu.py."""
import pathlib
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest

import kiln

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "models" / "tiny_cnn.onnx"
KV_DECODER = ROOT / "tests" / "runtime" / "kv_decoder" / "model.onnx"
KV_PROFILE = dict(min_shapes={"x": [1, 1, 64], "past_key": [1, 2, 0, 16], "past_value": [1, 2, 0, 16]},
                  opt_shapes={"x": [1, 1, 64], "past_key": [1, 2, 16, 16], "past_value": [1, 2, 16, 16]},
                  max_shapes={"x": [1, 8, 64], "past_key": [1, 2, 24, 16], "past_value": [1, 2, 24, 16]})


@pytest.fixture(scope="module")
def detect(tmp_path_factory):
    """NonMaxSuppression and a Gather of the kept boxes
    (tests/cli/make_data_dependent_models.py), with its boxes and scores."""
    d = tmp_path_factory.mktemp("data_dependent")
    subprocess.run([sys.executable, str(ROOT / "tests" / "cli" / "make_data_dependent_models.py"), str(d)],
                   check=True, capture_output=True)
    return d / "detect.onnx", {"boxes": np.load(d / "boxes.npy"), "scores": np.load(d / "scores.npy")}


def test_data_dependent_sizes_of_a_gpu_plan_match_onnxruntime(detect):
    model, feed = detect
    eng = kiln.compile(model, target="sm_90", backend="cpu")
    assert eng.num_data_dependent_sizes == 1
    ctx = eng.context()
    with pytest.raises(kiln.Error, match=r'data-dependent size 0 \(nms_n0, decided by node \(non_max_suppression\) '
                                         r'producing %selected\) is not known: no run since the inputs were bound'):
        ctx.data_dependent_sizes()
    want = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(["selected"], feed)[0]
    got = ctx.run(feed)
    sizes = ctx.data_dependent_sizes()
    assert list(sizes) == ["nms_n0"]
    n = sizes["nms_n0"]
    assert n == len(want) == len(got["selected"]) and 0 < n < 12, (n, len(want))
    assert (n.bound, n.node) == (12, "node (non_max_suppression) producing %selected")
    assert repr(n) == f"DataDependentSize({len(want)}, node='node (non_max_suppression) producing %selected', " \
                      f"bound=12)"
    # Fewer boxes above the score threshold: fewer kept.
    low = dict(feed, scores=np.where(feed["scores"] > 0.6, feed["scores"], 0).astype(np.float32))
    ctx.run(low)
    want_low = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(["selected"], low)[0]
    assert ctx.data_dependent_sizes()["nms_n0"] == len(want_low) < n


def test_plans_without_data_dependent_sizes_report_none():
    eng = kiln.compile(TINY, target="cpu")
    assert eng.num_data_dependent_sizes == 0
    ctx = eng.context()
    assert ctx.data_dependent_sizes() == {}
    ctx.run({"input": np.zeros((1, 3, 32, 32), np.float32)})
    assert ctx.data_dependent_sizes() == {}


def test_launch_variants_are_none_on_the_cpu_path():
    # The plan has variants (opt_variants="all"), but the CPU path runs the
    # graph, not the launch list; the fake GPU test sees them issued.
    eng = kiln.compile(KV_DECODER, target="sm_90", backend="cpu", opt_variants="all", **KV_PROFILE)
    ctx = eng.context()
    assert ctx.launch_variants() == []
    ctx.run({"x": np.zeros((1, 1, 64), np.float32), "past_key": np.zeros((1, 2, 16, 16), np.float32),
             "past_value": np.zeros((1, 2, 16, 16), np.float32)})
    assert ctx.launch_variants() == []


def test_opt_variants_argument():
    with pytest.raises(kiln.Error, match=r"opt_variants 'some': expected auto, all or none"):
        kiln.compile(KV_DECODER, target="sm_90", opt_variants="some", **KV_PROFILE)
    with pytest.raises(kiln.Error, match=r"opt_variants='all' applies to shape profiles \(min_shapes/max_shapes or "
                                         r"profiles\), and none is given"):
        kiln.compile(TINY, target="sm_90", opt_variants="all")
    # "none" compiles no variant, "all" one per shape-generic launch: different plans.
    none = kiln.compile(KV_DECODER, target="sm_90", backend="cpu", opt_variants="none", **KV_PROFILE)
    every = kiln.compile(KV_DECODER, target="sm_90", backend="cpu", opt_variants="all", **KV_PROFILE)
    assert none.plan_bytes() != every.plan_bytes()
