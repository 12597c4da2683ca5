"""The kiln Python package against ONNX Runtime, and its error cases.

Run from the repository root with the built package on the path:
    PYTHONPATH=build/python .venv/bin/python -m pytest python/tests
(ctest's python_pytest does exactly this). The real-model test needs
build/models/mobilenet_v2 (tools/prepare_models.sh) or KILN_MODELS_DIR.
"""
import contextlib
import io
import os
import re
import pathlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper, TensorProto

import kiln

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "models" / "tiny_cnn.onnx"
MODELS = pathlib.Path(os.environ.get("KILN_MODELS_DIR", ROOT / "build" / "models"))


def ort_run(model, feed):
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))


def tiny_input(seed=0):
    return np.random.default_rng(seed).standard_normal((1, 3, 32, 32)).astype(np.float32)


@pytest.fixture(scope="module")
def tiny():
    return kiln.compile(TINY, target="cpu")


def test_tiny_cnn_matches_onnxruntime(tiny):
    for seed in range(3):
        x = tiny_input(seed) * (1 + 4 * seed)
        got = tiny.run({"input": x})
        want = ort_run(TINY, {"input": x})
        assert list(got) == ["probs"]
        assert got["probs"].dtype == np.float32 and got["probs"].shape == (1, 10)
        np.testing.assert_allclose(got["probs"], want["probs"], rtol=1e-4, atol=1e-6)
    # Different inputs give different outputs (the run really reads the input).
    a, b = (tiny.run({"input": tiny_input(s)})["probs"] for s in (1, 2))
    assert not np.allclose(a, b)


def test_io_description_and_backend(tiny):
    assert tiny.inputs == [kiln.TensorInfo("input", "float32", (1, 3, 32, 32))]
    assert tiny.outputs == [kiln.TensorInfo("probs", "float32", (1, 10))]
    assert tiny.backend == "cpu"
    assert tiny.info.startswith("CPU reference path")
    assert "backend=cpu" in repr(tiny)


def test_non_contiguous_input_is_accepted(tiny):
    x = tiny_input(3)
    flipped = x[:, :, :, ::-1]
    np.testing.assert_array_equal(tiny.run({"input": flipped})["probs"],
                                  tiny.run({"input": np.ascontiguousarray(flipped)})["probs"])


def test_save_and_load_round_trip(tiny, tmp_path):
    plan = tmp_path / "tiny.plan"
    tiny.save(plan)
    assert plan.read_bytes() == tiny.plan_bytes()
    loaded = kiln.load(plan)
    assert loaded.inputs == tiny.inputs and loaded.outputs == tiny.outputs
    x = tiny_input(4)
    np.testing.assert_array_equal(loaded.run({"input": x})["probs"], tiny.run({"input": x})["probs"])


def test_lookup_by_name_and_plan_getters(tiny):
    assert tiny.input_index("input") == 0
    assert tiny.output_index("probs") == 0
    assert tiny.target == "cpu"
    assert tiny.precision == "fp32"
    assert kiln.compile(TINY, precision="fp16", target="cpu").precision == "fp16"
    with pytest.raises(kiln.Error, match=r'no input named "nope" \(inputs: "input"\)'):
        tiny.input_index("nope")


def test_profile_times_each_node_and_returns_the_outputs(tiny):
    x = tiny_input(3)
    outs, rows = tiny.profile({"input": x})
    np.testing.assert_array_equal(outs["probs"], tiny.run({"input": x})["probs"])
    assert rows and all(set(r) == {"name", "node", "op", "ms"} and r["ms"] >= 0 for r in rows)
    assert [r["op"] for r in rows][-2:] == ["gemm", "softmax"]  # the optimised graph, in run order


def test_log_callback_hears_the_cpu_fallback_and_can_be_removed(tiny):
    heard = []
    kiln.set_log_callback(lambda level, message: heard.append((level, message)))
    try:
        kiln.compile(TINY, target="cpu")
    finally:
        kiln.set_log_callback(None)
    kiln.compile(TINY, target="cpu")
    assert len(heard) == 1, heard
    level, message = heard[0]
    assert level == "warning"
    assert "the AUTO backend runs on the CPU reference path (the plan has no GPU kernels" in message
    with pytest.raises(kiln.Error, match="takes a callable or None"):
        kiln.set_log_callback(3)


def test_compile_is_deterministic():
    assert kiln.compile(TINY, target="cpu").plan_bytes() == kiln.compile(TINY, target="cpu").plan_bytes()


def test_fp16_close_to_onnxruntime():
    eng = kiln.compile(TINY, precision="fp16", target="cpu")
    x = tiny_input(5)
    got = eng.run({"input": x})["probs"]
    want = ort_run(TINY, {"input": x})["probs"]
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-3)
    # fp16 really changed the computation.
    assert not np.array_equal(got, kiln.compile(TINY, target="cpu").run({"input": x})["probs"])


def test_gpu_target_runs_on_this_machine():
    eng = kiln.compile(TINY, target="sm_90")
    assert eng.backend in ("cpu", "gpu")
    x = tiny_input(6)
    np.testing.assert_allclose(eng.run({"input": x})["probs"], ort_run(TINY, {"input": x})["probs"],
                               rtol=1e-4, atol=1e-6)


def test_default_target_is_a_gpu_plan_never_cpu_only():
    # As `kiln compile` without --target: "auto" is this machine's GPU arch or,
    # with no GPU (the fake driver is not on the loader's path here), a
    # portable GPU plan -- never a CPU-only one.
    eng = kiln.compile(TINY)
    assert eng.target in ("portable", "sm_80", "sm_86", "sm_89", "sm_90"), eng.target
    x = tiny_input(7)
    np.testing.assert_allclose(eng.run({"input": x})["probs"], ort_run(TINY, {"input": x})["probs"],
                               rtol=1e-4, atol=1e-6)


def dynamic_batch_model(path):
    """y = relu(x @ W + b) with a symbolic batch dimension."""
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10 - 0.5
    b = np.array([0.1, -0.2, 0.3], np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["z"]),
         helper.make_node("Relu", ["z"], ["y"])],
        "dyn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return w, b


def test_shapes_fix_a_symbolic_dimension(tmp_path):
    path = tmp_path / "dyn.onnx"
    w, b = dynamic_batch_model(path)
    eng = kiln.compile(path, shapes={"x": [5, 4]}, target="cpu")
    assert eng.inputs == [kiln.TensorInfo("x", "float32", (5, 4))]
    assert eng.outputs == [kiln.TensorInfo("y", "float32", (5, 3))]
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    got = eng.run({"x": x})["y"]
    np.testing.assert_allclose(got, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, ort_run(path, {"x": x})["y"], rtol=1e-5, atol=1e-6)


def test_a_shape_profile_runs_any_shape_inside_it(tmp_path):
    path = tmp_path / "dyn.onnx"
    w, b = dynamic_batch_model(path)
    eng = kiln.compile(path, min_shapes={"x": [1, 4]}, opt_shapes={"x": [3, 4]}, max_shapes={"x": [8, 4]}, target="cpu")
    assert eng.inputs == [kiln.TensorInfo("x", "float32", (-1, 4))]
    assert eng.profiles == [{"x": ((1, 4), (3, 4), (8, 4))}]
    for n in (1, 5, 8):
        x = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
        got = eng.run({"x": x})["y"]
        assert got.shape == (n, 3)
        np.testing.assert_allclose(got, ort_run(path, {"x": x})["y"], rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.Error, match=r"input \"x\": dim 0 is 9, outside profile 0's range \[1, 8\]"):
        eng.run({"x": np.zeros((9, 4), np.float32)})
    # The profile survives a save and load.
    eng.save(tmp_path / "dyn.plan")
    assert kiln.load(tmp_path / "dyn.plan").profiles == eng.profiles


def test_several_profiles_as_tensorrt_takes_them(tmp_path):
    path = tmp_path / "dyn.onnx"
    dynamic_batch_model(path)
    small = {"x": ((1, 4), (2, 4), (4, 4))}
    large = {"x": ((8, 4), (12, 4), (16, 4))}
    eng = kiln.compile(path, profiles=[small, large], target="cpu")
    assert eng.profiles == [small, large]
    for n in (1, 4, 8, 16):
        x = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
        got = eng.run({"x": x})["y"]
        assert got.shape == (n, 3)
        np.testing.assert_allclose(got, ort_run(path, {"x": x})["y"], rtol=1e-5, atol=1e-6)
    # A batch between the two profiles fits neither: the error names both ranges.
    with pytest.raises(kiln.Error, match=r"dim 0 is 6, outside profile 0's range \[1, 4\].*"
                                         r"dim 0 is 6, outside profile 1's range \[8, 16\]"):
        eng.run({"x": np.zeros((6, 4), np.float32)})
    eng.save(tmp_path / "two.plan")
    assert kiln.load(tmp_path / "two.plan").profiles == [small, large]


def test_profiles_argument_errors(tmp_path):
    path = tmp_path / "dyn.onnx"
    dynamic_batch_model(path)
    with pytest.raises(kiln.Error, match=r"either profiles=\[...\] or min_shapes"):
        kiln.compile(path, profiles=[{"x": ((1, 4), (1, 4), (2, 4))}], min_shapes={"x": [1, 4]}, target="cpu")
    with pytest.raises(kiln.Error, match=r"profiles\[0\]\['x'\] must be \(min, opt, max\)"):
        kiln.compile(path, profiles=[{"x": ((1, 4), (2, 4))}], target="cpu")
    with pytest.raises(kiln.Error, match=r"non-empty list"):
        kiln.compile(path, profiles={"x": ((1, 4), (1, 4), (2, 4))}, target="cpu")
    # Profiles must give the same inputs; the compiler's own check names them.
    with pytest.raises(kiln.Error, match=r"shape profile 1 gives the inputs \[\].*every profile gives the same inputs"):
        kiln.compile(path, profiles=[{"x": ((1, 4), (1, 4), (2, 4))}, {}], target="cpu")


def test_shape_messages_name_compiles_parameters(tmp_path):
    # Errors name compile()'s own parameters, not kiln compile's flags.
    path = tmp_path / "dyn.onnx"
    dynamic_batch_model(path)
    with pytest.raises(kiln.Error, match=r"min_shapes= names \"tokens\", which is not an input of the model"):
        kiln.compile(path, min_shapes={"x": [1, 4], "tokens": [1]}, max_shapes={"x": [8, 4], "tokens": [1]},
                     target="cpu")
    with pytest.raises(kiln.Error, match=r"set it with shapes=\{\"x\": \[\.\.\.\]\}, or give its range with "
                                         r"min_shapes= and max_shapes= \(or profiles=\)"):
        kiln.compile(path, target="cpu")
    with pytest.raises(kiln.Error, match=r"input \"x\": max_shapes= gives rank 3 but the model declares rank 2"):
        kiln.compile(path, min_shapes={"x": [1, 4]}, max_shapes={"x": [8, 4, 1]}, target="cpu")


def positive_entries_model(path, batch="N"):
    """y = the positive entries of x [batch, 3], doubled (Greater, NonZero, Gather): a size the data decides."""
    graph = helper.make_graph(
        [helper.make_node("Greater", ["x", "zero"], ["pos"]), helper.make_node("Reshape", ["x", "flat"], ["xf"]),
         helper.make_node("Reshape", ["pos", "flat"], ["pf"]), helper.make_node("NonZero", ["pf"], ["nz"]),
         helper.make_node("Reshape", ["nz", "flat"], ["idx"]), helper.make_node("Gather", ["xf", "idx"], ["v"]),
         helper.make_node("Mul", ["v", "two"], ["y"])],
        "positive",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])],
        [numpy_helper.from_array(np.zeros((), np.float32), "zero"),
         numpy_helper.from_array(np.full((), 2, np.float32), "two"),
         numpy_helper.from_array(np.array([-1], np.int64), "flat")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def test_a_cpu_plan_holds_data_dependent_sizes(tmp_path):
    path = tmp_path / "positive.onnx"
    positive_entries_model(path)
    eng = kiln.compile(path, min_shapes={"x": [1, 3]}, max_shapes={"x": [4, 3]}, target="cpu")
    assert eng.outputs == [kiln.TensorInfo("y", "float32", (-1,))]
    for n in (1, 3, 4):
        x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        got = eng.run({"x": x})["y"]
        np.testing.assert_array_equal(got, ort_run(path, {"x": x})["y"])
        assert got.shape == ((x > 0).sum(),)
    with pytest.raises(kiln.Error, match=r"shape-profile symbols \(N\) and result sizes decided at run time: "
                                         r"a GPU plan with both is not implemented yet"):
        kiln.compile(path, min_shapes={"x": [1, 3]}, max_shapes={"x": [4, 3]}, target="sm_90")


def test_a_gpu_plan_holds_data_dependent_sizes_at_their_bounds(tmp_path):
    # Fixed input shape: the plan computes at the bound (12 entries) and the
    # run trims the output to the count its kernel wrote, on whichever path
    # the engine runs (the GPU, or the CPU reference path without one).
    path = tmp_path / "positive.onnx"
    positive_entries_model(path, batch=4)
    eng = kiln.compile(path, target="sm_90")
    assert eng.outputs == [kiln.TensorInfo("y", "float32", (-1,))]
    for seed in (1, 2, 3):
        x = np.random.default_rng(seed).standard_normal((4, 3)).astype(np.float32)
        got = eng.run({"x": x})["y"]
        np.testing.assert_array_equal(got, ort_run(path, {"x": x})["y"])
        assert got.shape == ((x > 0).sum(),)
    none = eng.run({"x": -np.ones((4, 3), np.float32)})["y"]
    assert none.shape == (0,)


# Errors: kiln.Error carrying kiln's message.

def test_error_is_a_runtime_error():
    assert issubclass(kiln.Error, RuntimeError)


def test_bad_model_path():
    with pytest.raises(kiln.Error, match=r"/no/such/model\.onnx: cannot open file"):
        kiln.compile("/no/such/model.onnx", target="cpu")


def test_bad_plan_path():
    with pytest.raises(kiln.Error, match=r"invalid plan: /no/such\.plan: cannot open plan file"):
        kiln.load("/no/such.plan")


def test_folders_where_files_belong(tmp_path, tiny):
    # A folder opens as a file on Linux: each path is checked and named as one.
    folder = tmp_path / "m.onnx"
    folder.mkdir()
    with pytest.raises(kiln.Error, match=r"m\.onnx: is a folder, not an ONNX model"):
        kiln.compile(folder, target="cpu")
    with pytest.raises(kiln.Error, match=r"m\.onnx: is a folder, not a plan file"):
        kiln.load(folder)
    with pytest.raises(kiln.Error, match=r"m\.onnx: is a folder, not a plan file"):
        tiny.save(folder)
    # save() writes as kiln compile -o does: beside, then renamed.
    tiny.save(tmp_path / "m.plan")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "m.plan"]
    assert kiln.load(tmp_path / "m.plan").outputs == tiny.outputs


def test_corrupt_plan(tmp_path):
    bad = tmp_path / "bad.plan"
    bad.write_bytes(b"this is not a plan" * 10)
    with pytest.raises(kiln.Error, match=r"invalid plan"):
        kiln.load(bad)


def test_not_an_onnx_model(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\xff\x00garbage")
    with pytest.raises(kiln.Error, match=r"bad\.onnx"):
        kiln.compile(bad, target="cpu")


def test_shapes_for_an_unknown_input():
    with pytest.raises(kiln.Error,
                       match=r'names "image", which is not an input of the model \(its inputs: "input"\)'):
        kiln.compile(TINY, shapes={"image": [1, 3, 32, 32]}, target="cpu")


def test_unsupported_op(tmp_path):
    graph = helper.make_graph([helper.make_node("Foo", ["x"], ["y"], name="foo1")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "foo.onnx")
    with pytest.raises(kiln.Error, match=r'node "foo1" \(Foo\): op Foo \(opset 17\) is not supported'):
        kiln.compile(tmp_path / "foo.onnx", target="cpu")


def test_wrong_input_name(tiny):
    with pytest.raises(kiln.Error, match=r'unknown input "image"; the model\'s inputs are "input"'):
        tiny.run({"image": tiny_input()})


def test_missing_input(tiny):
    with pytest.raises(kiln.Error, match=r'missing input "input"'):
        tiny.run({})


def test_wrong_shape(tiny):
    with pytest.raises(kiln.Error, match=r'input "input" is f32\[1,3,32,32\] but was bound as f32\[1,3,32,31\]'):
        tiny.run({"input": np.zeros((1, 3, 32, 31), np.float32)})


def test_wrong_dtype(tiny):
    with pytest.raises(kiln.Error, match=r'input "input" is f32\[1,3,32,32\] but was bound as f64\[1,3,32,32\]'):
        tiny.run({"input": np.zeros((1, 3, 32, 32), np.float64)})
    with pytest.raises(kiln.Error, match=r"numpy dtype complex64 has no kiln equivalent"):
        tiny.run({"input": np.zeros((1, 3, 32, 32), np.complex64)})


def test_not_a_dict(tiny):
    with pytest.raises(kiln.Error, match=r"dict of input name"):
        tiny.run([tiny_input()])


def test_bad_options():
    with pytest.raises(kiln.Error, match=r'precision "fp8"'):
        kiln.compile(TINY, precision="fp8", target="cpu")
    with pytest.raises(kiln.Error, match=r'target "gpu"'):
        kiln.compile(TINY, target="gpu")
    with pytest.raises(kiln.Error, match=r'backend "tpu"'):
        kiln.compile(TINY, backend="tpu", target="cpu")


def test_targets_the_cli_refuses():
    # kiln compile --target takes auto, cpu, portable and the archs codegen supports; so does Python.
    with pytest.raises(kiln.Error, match=r'target "sm_75": expected one of auto, cpu, portable, sm_80, sm_86, sm_89, sm_90'):
        kiln.compile(TINY, target="sm_75")


def test_coverage_check_lists_every_unsupported_node(tmp_path):
    # As `kiln compile`: the import fails fast naming all the nodes, not the first.
    nodes = [helper.make_node("Foo", ["x"], ["t"], name="foo1"), helper.make_node("Bar", ["t"], ["y"], name="bar1")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "two.onnx")
    with pytest.raises(kiln.Error, match=r'(?s)two\.onnx: 2 node\(s\) cannot be compiled:.*"foo1".*"bar1"'):
        kiln.compile(tmp_path / "two.onnx", target="cpu")


def test_tuning_cache_is_read(tmp_path):
    # --tuning-cache's file is read (a missing one is an error naming it), as the CLI does.
    with pytest.raises(kiln.Error, match=r"no_such_tuning\.json"):
        kiln.compile(TINY, target="sm_90", tuning_cache=tmp_path / "no_such_tuning.json")


def test_engine_usable_after_an_error(tiny):
    with pytest.raises(kiln.Error):
        tiny.run({"input": np.zeros((2, 3, 32, 32), np.float32)})
    x = tiny_input(7)
    np.testing.assert_allclose(tiny.run({"input": x})["probs"], ort_run(TINY, {"input": x})["probs"],
                               rtol=1e-4, atol=1e-6)


# A real model: MobileNetV2 (full size) against ONNX Runtime's reference
# output stored next to it by tools/prepare_models.sh.

def real_model(name):
    folder = MODELS / name
    if not (folder / "model.onnx").exists():
        pytest.skip(f"{folder}/model.onnx not present (tools/prepare_models.sh builds it)")
    load = lambda p: numpy_helper.to_array(onnx.load_tensor(str(p)))  # noqa: E731
    data = folder / "test_data_set_0"
    return folder / "model.onnx", load(data / "input_0.pb"), load(data / "output_0.pb")


@pytest.mark.parametrize("precision,atol,rtol", [("fp32", 1e-4, 1e-3), ("fp16", 2e-2, 8e-3)])
def test_mobilenet_v2_matches_onnxruntime(precision, atol, rtol):
    model, x, want = real_model("mobilenet_v2")
    eng = kiln.compile(model, precision=precision, target="cpu")
    (name, dtype, shape), = eng.inputs
    assert dtype == "float32" and shape == x.shape
    got = eng.run({name: x})
    (out,) = got.values()
    assert out.shape == want.shape
    np.testing.assert_allclose(out, want, atol=atol, rtol=rtol)
    assert np.argmax(out) == np.argmax(want)


# docs/python.md: its python blocks run as written, and each `print(...)  # text`
# prints that text (a trailing "..." means: starts with).

def doc_blocks():
    text = (ROOT / "docs" / "python.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


@pytest.mark.parametrize("index", range(len(doc_blocks())))
def test_docs_python_blocks(index, monkeypatch):
    code = doc_blocks()[index]
    expected = [m.group(1).strip() for m in re.finditer(r"^\s*print\(.*\)\s+#\s*(.*)$", code, re.M)]
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"docs/python.md block {index}", "exec"), {})
    printed = out.getvalue().splitlines()
    assert len(printed) >= len(expected) > 0
    for got, want in zip(printed, expected):
        if want.endswith("..."):
            assert got.startswith(want[:-3]), (got, want)
        else:
            assert got == want


# A KV cache bound in place (kiln_context_bind_in_place) through kiln.Context.

def kv_layer_model(path):
    """One attention step: the new keys (-x) appended to the past along axis 2
    and returned as the present; y attends over the present."""
    nodes = [
        helper.make_node("Neg", ["x"], ["k"]),
        helper.make_node("Concat", ["past_key", "k"], ["present_key"], axis=2),
        helper.make_node("Transpose", ["present_key"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["x", "kt"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "present_key"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "kv",
        [helper.make_tensor_value_info("past_key", TensorProto.FLOAT, [1, 2, "past", 4]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "seq", 4])],
        [helper.make_tensor_value_info("present_key", TensorProto.FLOAT, [1, 2, "total", 4]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, "seq", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


@pytest.fixture
def kv_engine(tmp_path):
    path = tmp_path / "kv.onnx"
    kv_layer_model(path)
    eng = kiln.compile(path, target="cpu", min_shapes={"past_key": [1, 2, 0, 4], "x": [1, 2, 1, 4]},
                       max_shapes={"past_key": [1, 2, 12, 4], "x": [1, 2, 4, 4]})
    return path, eng


def test_decode_steps_in_place_equal_onnxruntime(kv_engine):
    path, eng = kv_engine
    cap, untouched = 10, np.float32(12345)
    cache = np.full((1, 2, cap, 4), untouched, np.float32)
    ctx = eng.context()
    ctx.bind_in_place("past_key", "present_key", cache)
    past_ref = np.zeros((1, 2, 0, 4), np.float32)
    past = 0
    for seq in (4, 1, 1):  # a prefill, then decode steps
        ctx.set_input_shape("past_key", [1, 2, past, 4])
        x = np.random.default_rng(past).standard_normal((1, 2, seq, 4)).astype(np.float32)
        got = ctx.run({"x": x})
        assert set(got) == {"y"}  # the present is in the cache, not returned
        want = ort_run(path, {"past_key": past_ref, "x": x})
        past += seq
        np.testing.assert_allclose(cache[:, :, :past], want["present_key"], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-6)
        assert (cache[:, :, past:] == untouched).all()  # positions past the present are never written
        past_ref = want["present_key"]


def test_bind_in_place_refusals_name_the_pair(kv_engine):
    _, eng = kv_engine
    ctx = eng.context()
    with pytest.raises(kiln.Error, match=r'input "x" and output "y" cannot share one buffer: the plan appends in '
                                         r'place only for "past_key" -> "present_key"'):
        ctx.bind_in_place("x", "y", np.zeros((1, 2, 8, 4), np.float32))
    with pytest.raises(kiln.Error, match=r'input "past_key" is f32 but the buffer bound in place with output '
                                         r'"present_key" is f16'):
        ctx.bind_in_place("past_key", "present_key", np.zeros((1, 2, 8, 4), np.float16))
    with pytest.raises(kiln.Error, match=r'only dim 2 \(the positions appended along\) may differ'):
        ctx.bind_in_place("past_key", "present_key", np.zeros((1, 3, 8, 4), np.float32))
    with pytest.raises(kiln.Error, match=r'must be a writable C-contiguous numpy array'):
        ctx.bind_in_place("past_key", "present_key", np.zeros((1, 2, 4, 8), np.float32).transpose(0, 1, 3, 2))
    with pytest.raises(kiln.Error, match=r'must be a writable C-contiguous numpy array'):
        ctx.bind_in_place("past_key", "present_key", [[0.0]])
    # Too short for the present: refused at the run, naming both.
    ctx.bind_in_place("past_key", "present_key", np.zeros((1, 2, 4, 4), np.float32))
    ctx.set_input_shape("past_key", [1, 2, 3, 4])
    with pytest.raises(kiln.Error, match=r'output "present_key" needs 5 positions along dim 2 .*input "past_key" '
                                         r'holds 4'):
        ctx.run({"x": np.zeros((1, 2, 2, 4), np.float32)})
    with pytest.raises(kiln.Error, match=r'input "past_key" is bound in place'):
        ctx.run({"past_key": np.zeros((1, 2, 3, 4), np.float32), "x": np.zeros((1, 2, 1, 4), np.float32)})
