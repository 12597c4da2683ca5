"""kiln: compile ONNX models and run them from Python.

    import kiln, numpy as np
    eng = kiln.compile("model.onnx", precision="fp16", shapes={"x": [1, 3, 224, 224]})
    outs = eng.run({"x": np.zeros((1, 3, 224, 224), np.float32)})   # {name: ndarray}
    eng.save("model.plan"); eng2 = kiln.load("model.plan")

Every failure inside kiln raises kiln.Error with kiln's message. The
extension (_kiln) does the work; this module gives it a Pythonic face.
See docs/python.md.
"""
from __future__ import annotations

import os
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from . import _kiln

Error = _kiln.Error
__version__ = _kiln.__version__

__all__ = ["Context", "DataDependentSize", "Engine", "Error", "TensorInfo", "compile", "load", "set_log_callback",
           "__version__"]


class TensorInfo(NamedTuple):
    """An input or output: name, numpy dtype name ("float32"; bf16 as "uint16" bits), shape."""

    name: str
    dtype: str
    shape: Tuple[int, ...]


class DataDependentSize(int):
    """A size the data decided in the last run (an int: its value), with the
    node that decides it (`node`) and its range [0, `bound`]."""

    node: str
    bound: int

    def __new__(cls, value: int, node: str, bound: int) -> "DataDependentSize":
        size = super().__new__(cls, value)
        size.node = node
        size.bound = bound
        return size

    def __repr__(self) -> str:
        return f"DataDependentSize({int(self)}, node={self.node!r}, bound={self.bound})"


class Engine:
    """One compiled plan, loaded by the kiln runtime. Immutable; run() may be
    called from several threads (each call uses its own runtime context)."""

    def __init__(self, impl: "_kiln.Engine"):
        self._impl = impl

    @property
    def inputs(self) -> List[TensorInfo]:
        return [TensorInfo(*t) for t in self._impl.inputs]

    @property
    def outputs(self) -> List[TensorInfo]:
        return [TensorInfo(*t) for t in self._impl.outputs]

    @property
    def backend(self) -> str:
        """Where run() executes: "cpu" (the CPU reference path) or "gpu"."""
        return self._impl.backend

    @property
    def device(self) -> int:
        """The CUDA device ordinal the engine runs on (CUDA tensors bound to it
        must be on that device); -1 on the CPU."""
        return self._impl.device

    @property
    def info(self) -> str:
        """The runtime's sentence on the path taken and, for the CPU, why not the GPU."""
        return self._impl.info

    @property
    def target(self) -> str:
        """The plan's target: "cpu" or the GPU arch it was compiled for ("sm_90")."""
        return self._impl.target

    @property
    def precision(self) -> str:
        """The plan's precision: "fp32", "tf32", "fp16" or "bf16"."""
        return self._impl.precision

    @property
    def profiles(self) -> List[Dict[str, Tuple[Tuple[int, ...], Tuple[int, ...], Tuple[int, ...]]]]:
        """A plan compiled with min_shapes/max_shapes: per shape profile, each dynamic
        input's (min, opt, max) shape; [] for a static plan. Dynamic dims show as -1
        in `inputs`; run() takes any shape inside a profile (docs/dynamic_shapes.md)."""
        return self._impl.profiles

    @property
    def num_data_dependent_sizes(self) -> int:
        """How many sizes the data decides in a GPU plan computed at the bounds
        (NonZero, NonMaxSuppression and the like; docs/dynamic_shapes.md): each
        run's values are Context.data_dependent_sizes(). 0 for any other plan
        (a CPU plan's data-dependent outputs say their sizes in their shapes)."""
        return self._impl.num_data_dependent_sizes

    def input_index(self, name: str) -> int:
        """The position of input `name` in `inputs`; kiln.Error when there is none."""
        return self._impl.input_index(name)

    def output_index(self, name: str) -> int:
        """The position of output `name` in `outputs`; kiln.Error when there is none."""
        return self._impl.output_index(name)

    def profile(self, inputs: Mapping[str, object]) -> Tuple[Dict[str, "numpy.ndarray"], List[dict]]:  # noqa: F821
        """Runs once more timing each step: (outputs, [{"name", "node", "op", "ms"}, ...]) in run
        order: per kernel from CUDA events on the GPU, per node on the CPU (kiln_context_profile)."""
        if not isinstance(inputs, Mapping):
            raise Error(f"profile() takes a dict of input name -> numpy array, not {type(inputs).__name__}")
        return self._impl.profile(dict(inputs))

    def run(self, inputs: Mapping[str, object]) -> Dict[str, "numpy.ndarray"]:  # noqa: F821
        """Runs once. `inputs` maps every input name to an array of exactly the
        model's dtype and shape (no silent conversion; a dynamic dim takes any size
        inside a shape profile): a numpy array, or any object implementing DLPack
        (a torch or CuPy tensor: host memory bound as it is, CUDA memory read in
        place on a GPU engine); returns {output name: ndarray}."""
        if not isinstance(inputs, Mapping):
            raise Error(f"run() takes a dict of input name -> numpy array, not {type(inputs).__name__}")
        return self._impl.run(dict(inputs))

    def context(self) -> "Context":
        """A context kept across runs: shapes set ahead, KV caches bound in place."""
        return Context(self)

    def save(self, path: "str | os.PathLike[str]") -> None:
        """Writes the plan, loadable with kiln.load() or the C API / `kiln run`."""
        self._impl.save(os.fspath(path))

    def plan_bytes(self) -> bytes:
        return self._impl.plan_bytes()

    def __repr__(self) -> str:
        def fmt(ts: Sequence[TensorInfo]) -> str:
            return ", ".join(f"{t.name}: {t.dtype}{list(t.shape)}" for t in ts)

        return f"<kiln.Engine backend={self.backend} inputs=({fmt(self.inputs)}) outputs=({fmt(self.outputs)})>"


class Context:
    """One engine's runtime context kept across runs (kiln_context): tensors
    bound ahead through DLPack (bind_input/bind_output; CUDA tensors read and
    written in place), runs enqueued on a CUDA stream (enqueue), what the last
    run did (launch_variants, data_dependent_sizes), and KV caches bound in
    place: one buffer of the full capacity serves as a past input and its
    present output (ORT GenAI's past_present_share_buffer). Each run reads the
    past from the buffer's first positions along the appended axis (as many as
    set_input_shape gave the input) and writes only the new positions after
    them. Not for several threads at once."""

    def __init__(self, engine: Engine):
        self._impl = _kiln.Context(engine._impl)

    def set_input_shape(self, name: str, shape: Sequence[int]) -> None:
        """The shape of a dynamic input for the next runs (inside the plan's profile)."""
        self._impl.set_input_shape(name, [int(d) for d in shape])

    def input_shape(self, name: str) -> Tuple[int, ...]:
        return tuple(self._impl.input_shape(name))

    def output_shape(self, name: str) -> Tuple[int, ...]:
        return tuple(self._impl.output_shape(name))

    def bind_in_place(self, input: str, output: str, buffer: object) -> None:  # noqa: A002
        """Binds `buffer` of the capacity shape (the input's with the appended
        axis at the most positions it holds) as both `input` and `output`: a
        writable C-contiguous numpy array on a CPU engine, or on a GPU engine
        an object exposing __cuda_array_interface__ (a torch CUDA tensor, a
        CuPy array: C-contiguous, writable, of the input's dtype; its device
        memory is read and appended to in place by the kernels). The buffer
        is kept alive while bound. kiln.Error naming both when the plan has no
        such pair, the dtype or a dim off the axis differs, or the memory is
        not the engine's (host on a GPU engine, device on a CPU one)."""
        self._impl.bind_in_place(input, output, buffer)

    def bind_in_place_device(
        self, input: str, output: str, ptr: int, *, nbytes: int, shape: Sequence[int], dtype: object  # noqa: A002
    ) -> None:
        """Binds raw device memory (GPU engines): `ptr` a CUdeviceptr of the
        engine's device as an int (torch's `t.data_ptr()`, cuMemAlloc's
        result), 256-byte aligned, of `nbytes` bytes holding the capacity
        `shape` of `dtype` (numpy's name, "float16"; the input's dtype).
        kiln.Error when nbytes does not cover the shape, the pointer is
        misaligned or null, or as bind_in_place. The caller keeps the
        allocation alive while it is bound."""
        self._impl.bind_in_place_device(input, output, ptr, nbytes=int(nbytes), shape=[int(d) for d in shape],
                                        dtype=dtype)

    def bind_input(self, name: str, tensor: object, *, stream: object = None) -> None:
        """Binds `tensor`, any object implementing DLPack (`__dlpack__` and
        `__dlpack_device__`: a numpy array, a torch or CuPy tensor), as input
        `name` for the runs that follow (run, enqueue) until bound again; kiln
        holds its buffer meanwhile. Host memory (CPU or pinned) is bound as a
        host buffer; CUDA device memory, on a GPU engine, is read by the kernels
        in place (kiln_context_bind_input_device: no copy; 256-byte aligned, as
        allocators give it). The tensor must be C-contiguous and of the model's
        dtype and shape (a dynamic input takes its shape from it); otherwise
        kiln.Error naming the input. `stream`: the CUDA stream kiln will read
        it on (the one given to enqueue), passed to `__dlpack__(stream=...)` so
        that the producer orders its pending writes before it; run() uses the
        context's own streams: finish writing first there (e.g.
        torch.cuda.synchronize())."""
        self._impl.bind_input(name, tensor, stream=stream)

    def bind_output(self, name: str, tensor: object, *, stream: object = None) -> None:
        """Binds `tensor` (as bind_input; writable, not a copy the producer
        made) as output `name`: the runs that follow write into it, and run()
        no longer returns that output. A CUDA tensor on a GPU engine is
        written by the kernels in place; its shape must be the one the inputs
        set give (output_shape)."""
        self._impl.bind_output(name, tensor, stream=stream)

    def enqueue(self, stream: object = None) -> None:
        """Runs asynchronously on a CUDA `stream` (kiln_context_enqueue): an
        int (a CUstream), a torch.cuda.Stream, a CuPy stream or any object with
        `__cuda_stream__`; None: synchronously. Every input and output must be
        bound ahead (bind_input/bind_output, bind_in_place): they must stay
        untouched, and bound, until the stream's work is done (synchronize the
        stream before reading the outputs or binding others). On a CPU engine
        only None is taken, and the run is synchronous."""
        self._impl.enqueue(stream)

    def launch_variants(self) -> List[int]:
        """The launch variants (kernels specialised for a profile's opt shape,
        GEMM size buckets; compile(..., opt_variants=...)) the last run issued
        in place of the shape-generic launches, as `kiln inspect` numbers them,
        in launch order; [] on a CPU engine, for a plan without variants and
        before a run."""
        return list(self._impl.launch_variants())

    def data_dependent_sizes(self) -> Dict[str, DataDependentSize]:
        """{symbol: size} for each size the data decided in the last run of a
        GPU plan computed at the bounds (Engine.num_data_dependent_sizes of them;
        {} for other plans). kiln.Error before a run, after a failed one and
        once an input is bound again."""
        return {sym: DataDependentSize(value, node, bound)
                for sym, node, bound, value in self._impl.data_dependent_sizes()}

    def run(self, inputs: Optional[Mapping[str, object]] = None) -> Dict[str, "numpy.ndarray"]:  # noqa: F821
        """Runs once with every input not bound ahead (bind_input, bind_in_place)
        taken from `inputs` (as Engine.run's); returns the outputs not bound
        ahead (those are written into their tensors and buffers)."""
        if inputs is None:
            inputs = {}
        if not isinstance(inputs, Mapping):
            raise Error(f"run() takes a dict of input name -> numpy array, not {type(inputs).__name__}")
        return self._impl.run(dict(inputs))


def compile(  # noqa: A001 (kiln.compile is the name users expect)
    model: "str | os.PathLike[str]",
    precision: str = "fp32",
    shapes: Optional[Mapping[str, Sequence[int]]] = None,
    target: str = "auto",
    backend: str = "auto",
    cache_dir: "str | os.PathLike[str] | None" = None,
    tuning_cache: "str | os.PathLike[str] | None" = None,
    min_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    opt_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    max_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    profiles: Optional[Sequence[Mapping[str, Tuple[Sequence[int], Sequence[int], Sequence[int]]]]] = None,
    opt_variants: str = "auto",
) -> Engine:
    """Compiles an ONNX model in process (the pipeline and checks of
    `kiln compile MODEL -o PLAN`) and loads the plan. precision: fp32 | tf32 |
    fp16 | bf16; shapes fixes input dims ({"x": [1, 3, 224, 224]}); target:
    auto (the default, as `kiln compile`'s: this machine's GPU arch, else a
    portable GPU plan) | portable (CUBINs for sm_80 and sm_90, PTX for newer)
    | sm_80 | sm_86 | sm_89 | sm_90 | sm_90a (Hopper only: the opt-in wgmma
    GEMM kernels) | cpu (no GPU kernels); tuning_cache: as
    `--tuning-cache` (docs/tuning.md); backend: auto | cpu | gpu (gpu fails
    when no usable GPU); min_shapes / opt_shapes / max_shapes: a shape profile
    for the dims the model leaves open, as `--min-shapes` etc. (trtexec's
    meaning; a GPU target where every node has a shape-generic kernel;
    docs/dynamic_shapes.md); profiles: several shape profiles, as TensorRT's
    optimization profiles (`profile.set_shape(name, min, opt, max)` per input,
    one `add_optimization_profile` per profile) and trtexec's repeated flags:
    [{"x": (min, opt, max)}, ...], each a mapping of every dynamic input to its
    three shapes; the same form `Engine.profiles` returns. A run's shapes must
    lie inside one profile. Give either profiles or min/opt/max_shapes.
    opt_variants (with shape profiles, a GPU target; `--opt-variants`): auto
    (launches specialised for each profile's opt shape where kiln's performance
    model finds them faster) | all (for every shape-generic node) | none."""

    def dims(m: Optional[Mapping[str, Sequence[int]]]) -> Dict[str, List[int]]:
        return {str(k): [int(d) for d in v] for k, v in (m or {}).items()}

    fixed = dims(shapes)
    if opt_variants not in ("auto", "all", "none"):
        raise Error(f"opt_variants {opt_variants!r}: expected auto, all or none")
    if opt_variants != "auto" and not (min_shapes or max_shapes or profiles):
        raise Error(f"opt_variants={opt_variants!r} applies to shape profiles (min_shapes/max_shapes or profiles), "
                    "and none is given")
    more = []
    if profiles is not None:
        if min_shapes or opt_shapes or max_shapes:
            raise Error("compile() takes either profiles=[...] or min_shapes/opt_shapes/max_shapes, not both")
        if isinstance(profiles, Mapping) or not isinstance(profiles, Sequence) or not profiles:
            raise Error("profiles= takes a non-empty list of {input name: (min, opt, max)} mappings, one per profile")
        split = []
        for k, p in enumerate(profiles):
            if not isinstance(p, Mapping):
                raise Error(f"profiles[{k}] is a {type(p).__name__}, not a mapping of input name -> (min, opt, max)")
            lo, opt, hi = {}, {}, {}
            for name, shapes3 in p.items():
                if isinstance(shapes3, (str, bytes)) or not isinstance(shapes3, Sequence) or len(shapes3) != 3:
                    raise Error(f"profiles[{k}][{name!r}] must be (min, opt, max) shapes, not {shapes3!r}")
                lo[name], opt[name], hi[name] = shapes3
            split.append((dims(lo), dims(opt), dims(hi)))
        (min_shapes, opt_shapes, max_shapes), more = split[0], split[1:]
    return Engine(
        _kiln.compile(
            os.fspath(model),
            precision,
            fixed,
            target,
            backend,
            os.fspath(cache_dir) if cache_dir else "",
            os.fspath(tuning_cache) if tuning_cache else "",
            dims(min_shapes),
            dims(opt_shapes),
            dims(max_shapes),
            more,
            opt_variants,
        )
    )


def load(path: "str | os.PathLike[str]", backend: str = "auto") -> Engine:
    """Loads a plan written by kiln.compile(...).save() or `kiln compile -o`."""
    return Engine(_kiln.load(os.fspath(path), backend))


def set_log_callback(callback) -> None:
    """Receives the runtime's messages: callback(level, message), level "error", "warning"
    or "info" (e.g. why the auto backend runs on the CPU). None removes it. Process-wide."""
    if callback is not None and not callable(callback):
        raise Error(f"set_log_callback() takes a callable or None, not {type(callback).__name__}")
    _kiln.set_log_callback(callback)
