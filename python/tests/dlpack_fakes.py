"""A DLPack producer for tests, written with ctypes from the protocol's
specification: what a torch or CuPy tensor hands kiln, for any pointer (a
fake driver's cuMemAlloc, or an address never dereferenced), device, dtype,
layout and flags. It counts the capsules it made and the deleter calls, so a
test sees kiln release every tensor it took."""
import ctypes

KDL_CPU, KDL_CUDA, KDL_ROCM = 1, 2, 10
FLOAT32 = (2, 32)  # (type code, bits): kDLFloat
FLOAT16 = (2, 16)


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# What each exported capsule's tensor needs until its deleter runs, by the
# managed struct's address: its producer (as a real producer's manager_ctx
# keeps the array alive however the consumer's references go) and the structs.
_live = {}


@_DELETER
def _delete(address):
    producer = _live.pop(address)[0]
    producer.deleted += 1


class _Managed(ctypes.Structure):  # DLManagedTensor ("dltensor")
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _ManagedVersioned(ctypes.Structure):  # DLManagedTensorVersioned ("dltensor_versioned")
    _fields_ = [("version", _Version), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", _Tensor)]


READ_ONLY, IS_COPIED = 1, 2
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_NAMES = {True: b"dltensor_versioned", False: b"dltensor"}  # alive as long as the module


class FakeTensor:
    """A tensor at `ptr` (an int) that exports itself through __dlpack__:
    versioned (DLPack 1.0, max_version honoured) unless versioned=False,
    which behaves as a producer from before DLPack 1.0 (no max_version
    keyword). `streams` records the stream of each export; `exported` and
    `deleted` count capsules and deleter calls."""

    def __init__(self, ptr, shape, dtype=FLOAT32, device=(KDL_CUDA, 0), strides=None, flags=0, versioned=True,
                 byte_offset=0, lanes=1):
        self.ptr, self.shape, self.dtype, self.device = ptr, tuple(shape), dtype, device
        self.strides, self.flags, self.versioned, self.byte_offset, self.lanes = strides, flags, versioned, \
            byte_offset, lanes
        self.streams, self.exported, self.deleted = [], 0, 0

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        if not self.versioned and max_version is not None:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.streams.append(stream)
        versioned = self.versioned and max_version is not None and max_version[0] >= 1
        shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        strides = (ctypes.c_int64 * len(self.strides))(*self.strides) if self.strides is not None else None
        t = _Tensor(self.ptr, _Device(*self.device), len(self.shape), _DataType(self.dtype[0], self.dtype[1], self.lanes),
                    shape, strides, self.byte_offset)
        if versioned:
            m = _ManagedVersioned(_Version(1, 0), None, _delete, self.flags, t)
        else:
            m = _Managed(t, None, _delete)
        _live[ctypes.addressof(m)] = (self, m, shape, strides)
        self.exported += 1
        return _capsule_new(ctypes.addressof(m), _NAMES[versioned], None)
