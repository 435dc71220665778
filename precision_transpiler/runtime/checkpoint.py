"""torch.load without torch: a torch checkpoint read into NumPy arrays.

Model code loads its bundled or downloaded weights with `torch.load(path)` and hands them to
`load_state_dict` (facenet-pytorch's MTCNN networks, `from_pretrained` helpers, the end of many
model files); converted modules take NumPy arrays there (runtime/<target>/modules.py), so a
converted file that reads a checkpoint runs without torch. Both of torch's file formats are read:
the zip archive of `torch.save` since torch 1.6 (`data.pkl` and one file per storage) and the
older single pickle stream followed by the storages' bytes.

Like `torch.load(weights_only=True)`, the unpickler builds tensors, parameters, containers and
primitives only, and refuses any other class a file names: reading a checkpoint never runs code
from it. A tensor comes back as a NumPy array of its dtype (bfloat16 through ml_dtypes, which JAX
and TensorFlow both install), shape and strides; `map_location`, `weights_only` and `mmap` have
nothing to choose here.
"""

import collections
import io
import os
import pickle
import struct
import zipfile
from typing import Any

import numpy as np

#: torch's storage classes and the element type each holds
_STORAGE_DTYPES = {
    "FloatStorage": "float32",
    "DoubleStorage": "float64",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
}
#: the globals a checkpoint may name besides the storage classes (torch's weights_only allow-list)
_SAFE_GLOBALS = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "slice"): slice,
    ("torch", "Size"): tuple,
}
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


def _numpy_dtype(name: str) -> Any:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


class _Storage:
    """A storage a checkpoint refers to; its bytes are read when the file says where they are."""

    def __init__(self, dtype: str, key: str) -> None:
        self.dtype, self.key = dtype, key
        self.array: Any = None


class _Tensor:
    """A tensor over a storage, made an array once the storage's bytes are read."""

    def __init__(self, storage: _Storage, offset: int, size: tuple, stride: tuple) -> None:
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)

    def array(self) -> np.ndarray:
        data = self.storage.array
        if not self.size:
            return np.array(data[self.offset]) if data.size else np.zeros((), data.dtype)
        strides = tuple(s * data.itemsize for s in self.stride)
        view = np.lib.stride_tricks.as_strided(data[self.offset :], shape=self.size, strides=strides)
        return np.ascontiguousarray(view)


def _rebuild_tensor(storage: _Storage, offset: int, size: tuple, stride: tuple, *args: Any) -> _Tensor:
    return _Tensor(storage, offset, size, stride)


def _rebuild_parameter(data: Any, requires_grad: bool = True, backward_hooks: Any = None, *args: Any) -> Any:
    return data


class _CheckpointUnpickler(pickle.Unpickler):
    """pickle's Unpickler restricted to what a state_dict holds (torch's weights_only)."""

    def __init__(self, file: Any, storages: dict[str, _Storage]) -> None:
        super().__init__(file)
        self.storages = storages

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch" and name in _STORAGE_DTYPES:
            return _STORAGE_DTYPES[name]
        if module == "torch._utils" and name in ("_rebuild_tensor", "_rebuild_tensor_v2"):
            return _rebuild_tensor
        if module == "torch._utils" and name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
            return _rebuild_parameter
        if (module, name) in _SAFE_GLOBALS:
            return _SAFE_GLOBALS[module, name]
        raise pickle.UnpicklingError(
            f"torch.load without torch reads tensors, containers and numbers; the checkpoint names "
            f"{module}.{name} (a pickled Python object, which torch.load(weights_only=True) refuses too)"
        )

    def persistent_load(self, pid: Any) -> _Storage:
        # ('storage', storage_type, key, location, numel[, view_metadata])
        dtype = pid[1] if isinstance(pid[1], str) else "uint8"
        key = str(pid[2])
        if key not in self.storages:
            self.storages[key] = _Storage(dtype, key)
        return self.storages[key]


def _arrays(value: Any) -> Any:
    """The unpickled structure with every tensor made an array."""
    if isinstance(value, _Tensor):
        return value.array()
    if isinstance(value, dict):
        return type(value)((k, _arrays(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return type(value)(_arrays(v) for v in value)
    return value


def _load_zip(archive: zipfile.ZipFile) -> Any:
    names = archive.namelist()
    pickled = next(n for n in names if n.endswith("data.pkl"))
    prefix = pickled[: -len("data.pkl")]
    order = "<"
    if f"{prefix}byteorder" in names and archive.read(f"{prefix}byteorder").strip() == b"big":
        order = ">"
    storages: dict[str, _Storage] = {}
    result = _CheckpointUnpickler(io.BytesIO(archive.read(pickled)), storages).load()
    for key, storage in storages.items():
        dtype = _numpy_dtype(storage.dtype).newbyteorder(order)
        storage.array = np.frombuffer(archive.read(f"{prefix}data/{key}"), dtype=dtype).astype(dtype.newbyteorder("="))
    return _arrays(result)


def _load_legacy(stream: Any) -> Any:
    if pickle.load(stream) != _LEGACY_MAGIC:
        raise pickle.UnpicklingError("not a torch checkpoint (no torch.save magic number)")
    pickle.load(stream)  # protocol version
    pickle.load(stream)  # sys_info: byte order and sizes of the saving machine
    storages: dict[str, _Storage] = {}
    result = _CheckpointUnpickler(stream, storages).load()
    for key in pickle.load(stream):
        storage = storages[str(key)]
        dtype = _numpy_dtype(storage.dtype)
        (count,) = struct.unpack("<q", stream.read(8))
        storage.array = np.frombuffer(stream.read(count * dtype.itemsize), dtype=dtype).copy()
    return _arrays(result)


def torch_load(
    f: Any,
    map_location: Any = None,
    pickle_module: Any = None,
    *,
    weights_only: Any = None,
    mmap: Any = None,
    **pickle_load_args: Any,
) -> Any:
    """torch.load of a checkpoint file (a path or an open binary file): its state_dict (or other
    containers of tensors) with NumPy arrays for tensors."""
    if isinstance(f, str | os.PathLike):
        with open(f, "rb") as stream:
            return torch_load(stream)
    data = f.read()
    if zipfile.is_zipfile(io.BytesIO(data)):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return _load_zip(archive)
    return _load_legacy(io.BytesIO(data))
