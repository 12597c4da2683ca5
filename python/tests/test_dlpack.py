"""Tensors bound through DLPack (Context.bind_input/bind_output, DLPack
objects in a run's feed) and Context.enqueue, on the CPU path in this
process: numpy's own __dlpack__, and the ctypes producer of dlpack_fakes.py
for what numpy cannot show (device memory, other devices, flags, vector
lanes, a producer from before DLPack 1.0). The GPU path runs on the fake
driver: test_dlpack_fake_gpu.py."""
import gc
import pathlib
import weakref

import numpy as np
import pytest

import kiln
from dlpack_fakes import FLOAT16, IS_COPIED, KDL_ROCM, READ_ONLY, FakeTensor

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "models" / "tiny_cnn.onnx"
X_SHAPE = (1, 3, 32, 32)


@pytest.fixture(scope="module")
def tiny():
    return kiln.compile(TINY, target="cpu")


def x_of(seed):
    return np.random.default_rng(seed).standard_normal(X_SHAPE).astype(np.float32)


def test_numpy_tensors_bound_through_dlpack_are_read_and_written_in_place(tiny):
    x, y = x_of(0), np.full((1, 10), np.nan, np.float32)
    ctx = tiny.context()
    ctx.bind_input("input", x)
    ctx.bind_output("probs", y)
    assert ctx.run() == {}  # the bound output is not returned: it is in y
    np.testing.assert_array_equal(y, tiny.run({"input": x})["probs"])
    # Bound, not copied: the next run reads what x holds then.
    x[...] = x_of(1)
    ctx.run()
    np.testing.assert_array_equal(y, tiny.run({"input": x_of(1)})["probs"])


def test_a_bound_tensor_is_held_until_bound_again(tiny):
    ctx = tiny.context()
    x = x_of(2)
    alive = weakref.ref(x)
    ctx.bind_input("input", x)
    want = tiny.run({"input": x})["probs"]
    del x
    gc.collect()
    assert alive() is not None, "kiln let go of a bound tensor's buffer"
    assert np.array_equal(ctx.run()["probs"], want)
    ctx.bind_input("input", x_of(3))
    gc.collect()
    assert alive() is None, "kiln kept a tensor bound again (the producer's deleter was not called)"


def test_dlpack_objects_in_a_feed(tiny):
    class Wrapped:  # not an ndarray: only the protocol
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    x = x_of(4)
    want = tiny.run({"input": x})["probs"]
    np.testing.assert_array_equal(tiny.run({"input": Wrapped(x)})["probs"], want)
    np.testing.assert_array_equal(tiny.context().run({"input": Wrapped(x)})["probs"], want)
    with pytest.raises(kiln.Error, match=r'input "input": the DLPack tensor is not C-contiguous'):
        tiny.run({"input": Wrapped(np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2))})


def test_a_cpu_engine_has_no_cuda_device(tiny):
    assert tiny.device == -1


def test_a_producer_from_before_dlpack_1_is_read(tiny):
    # No max_version keyword: the unversioned capsule ("dltensor"); the
    # deleter runs once the binding ends (here: refused on the CPU engine).
    old = FakeTensor(1 << 20, X_SHAPE, versioned=False)
    with pytest.raises(kiln.Error, match=r'input "input": zero-copy device binding but the engine runs on the CPU'):
        tiny.context().bind_input("input", old)
    assert (old.exported, old.deleted) == (1, 1)


def test_refusals_name_the_tensor(tiny):
    ctx = tiny.context()
    x = x_of(5)
    cases = [
        (lambda: ctx.bind_input("input", x.transpose(0, 1, 3, 2)),
         r'input "input": the DLPack tensor is not C-contiguous \(shape \(1, 3, 32, 32\), strides '
         r'\(3072, 1024, 1, 32\) elements\); pass a contiguous one'),
        (lambda: ctx.bind_output("probs", np.zeros((1, 20), np.float32)[:, ::2]),
         r'output "probs": the DLPack tensor is not C-contiguous'),
        (lambda: ctx.bind_input("input", x.astype(np.float64)),
         r'input "input" is f32\[1,3,32,32\] but was bound as f64\[1,3,32,32\]'),
        (lambda: ctx.bind_input("input", np.zeros((1, 3, 16, 32), np.float32)),
         r'input "input" is f32\[1,3,32,32\] but was bound as f32\[1,3,16,32\]'),
        (lambda: ctx.bind_output("probs", np.broadcast_to(np.zeros(10, np.float32), (1, 10))),
         r'output "probs": the DLPack tensor is read-only; kiln writes the output'),
        (lambda: ctx.bind_input("input", x.astype(np.complex64)),
         r'input "input": DLPack dtype complex64 has no kiln equivalent \(expected f32\)'),
        (lambda: ctx.bind_input("nope", x), r'unknown input "nope"; the model\'s inputs are "input"'),
        (lambda: ctx.bind_output("input", x), r'unknown output "input"; the model\'s outputs are "probs"'),
        (lambda: ctx.bind_input("input", [0.0] * 3072), r'input "input": bind_input takes an object implementing '
                                                        r'DLPack .* not list'),
        (lambda: ctx.bind_input("input", x, stream=7), r'input "input": a stream was given for a tensor in host '
                                                       r'memory \(cpu\)'),
    ]
    for bind, message in cases:
        with pytest.raises(kiln.Error, match=message):
            bind()


def test_producer_side_refusals_release_the_tensor(tiny):
    ctx = tiny.context()
    cases = [
        (FakeTensor(1 << 20, X_SHAPE, device=(KDL_ROCM, 0)),
         r'input "input": the tensor is on DLPack device type 10 \(device 0\); kiln takes CPU memory or CUDA'),
        (FakeTensor(1 << 20, X_SHAPE, lanes=4), r'input "input": DLPack dtype float32x4 has no kiln equivalent'),
        (FakeTensor(1 << 20, X_SHAPE, dtype=FLOAT16),
         r'input "input" is f32\[1,3,32,32\] but the DLPack tensor \(cuda:0\) is f16\[1,3,32,32\]'),
        (FakeTensor(1 << 20, (1, 3, 32, 31)),
         r'input "input" is f32\[1,3,32,32\] but the DLPack tensor \(cuda:0\) is f32\[1,3,32,31\]'),
        (FakeTensor(1 << 20, X_SHAPE), r'input "input": zero-copy device binding but the engine runs on the CPU'),
    ]
    for tensor, message in cases:
        with pytest.raises(kiln.Error, match=message):
            ctx.bind_input("input", tensor)
        assert tensor.deleted == tensor.exported, message
    for flags, message in ((READ_ONLY, "the DLPack tensor is read-only"),
                           (IS_COPIED, "the producer exported a copy of the tensor")):
        y = FakeTensor(1 << 20, (1, 10), flags=flags)
        with pytest.raises(kiln.Error, match=r'output "probs": ' + message):
            ctx.bind_output("probs", y)
        assert (y.exported, y.deleted) == (1, 1)


def test_a_producers_own_failure_is_named_without_a_traceback(tiny):
    class Refusing:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kw):
            raise BufferError("cannot export a read-only array")

    with pytest.raises(kiln.Error) as e:
        tiny.context().bind_input("input", Refusing())
    assert str(e.value) == 'input "input": its __dlpack__() failed: BufferError: cannot export a read-only array'


def test_bool_tensors_as_either_dlpack_code(tmp_path):
    # kDLBool, and uint8 as producers from before DLPack 0.8 write bool.
    from onnx import TensorProto, helper, save
    graph = helper.make_graph([helper.make_node("Not", ["b"], ["nb"])], "not",
                              [helper.make_tensor_value_info("b", TensorProto.BOOL, [4])],
                              [helper.make_tensor_value_info("nb", TensorProto.BOOL, [4])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "not.onnx")
    eng = kiln.compile(tmp_path / "not.onnx", target="cpu")
    b = np.array([True, False, False, True])
    for code in (6, 1):  # kDLBool, kDLUInt
        ctx = eng.context()
        ctx.bind_input("b", FakeTensor(b.ctypes.data, (4,), dtype=(code, 8), device=(1, 0)))
        np.testing.assert_array_equal(ctx.run()["nb"], ~b)
    with pytest.raises(kiln.Error, match=r'input "input" is f32\[1,3,32,32\] but was bound as u8\[1,3,32,32\]'):
        kiln.compile(TINY, target="cpu").context().bind_input("input", np.zeros(X_SHAPE, np.uint8))


def test_bound_and_fed_inputs_do_not_mix(tiny):
    ctx = tiny.context()
    ctx.bind_input("input", x_of(6))
    with pytest.raises(kiln.Error, match=r'input "input" is bound \(Context.bind_input\): it is read from its tensor, '
                                         r'not the feed'):
        ctx.run({"input": x_of(6)})


def test_enqueue_on_a_cpu_engine_runs_synchronously_with_a_null_stream_only(tiny):
    ctx = tiny.context()
    with pytest.raises(kiln.Error, match=r'enqueue: bind every input and output first \(bind_input/bind_output, '
                                         r'bind_in_place\); not bound: input "input", output "probs"'):
        ctx.enqueue()
    # A run's feed lasts that run only: enqueue does not reuse it.
    ctx.run({"input": x_of(7)})
    with pytest.raises(kiln.Error, match=r'not bound: input "input", output "probs"'):
        ctx.enqueue()
    x, y = x_of(7), np.zeros((1, 10), np.float32)
    ctx.bind_input("input", x)
    with pytest.raises(kiln.Error, match=r'not bound: output "probs"$'):
        ctx.enqueue()
    ctx.bind_output("probs", y)
    ctx.enqueue()
    np.testing.assert_array_equal(y, tiny.run({"input": x})["probs"])
    with pytest.raises(kiln.Error, match=r'enqueue: the engine runs on the CPU .*; pass a null stream'):
        ctx.enqueue(0x1234)

    class TorchLikeStream:
        cuda_stream = 0x1234

    with pytest.raises(kiln.Error, match=r'pass a null stream'):
        ctx.enqueue(TorchLikeStream())
    with pytest.raises(kiln.Error, match=r'enqueue: the stream must be None, an int \(a CUstream\) or a stream object '
                                         r'.* not str'):
        ctx.enqueue("default")
