"""The safetensors format, read without copying: headers from files, tensors as views of a blob.

Why not safetensors' own load-from-bytes function: it copies every tensor out of the blob, so a load
held the file bytes *and* a full state dict *and* the module at once. Here a tensor is a
``torch.frombuffer`` view into the bytes the loader already read, so copying the weights into
the module is the only new allocation; the blob is the load's single transient.

The blob comes from a file we were merely pointed at, so everything in its header is checked
before a view is made: the header length, the JSON, each dtype, that every shape's byte count
equals its offsets' span, and that every span lies inside the blob.
"""

from __future__ import annotations

import json
import math
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from memspec_ros.core.errors import ModelLoadError

TORCH_DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool, "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
    "U16": torch.uint16, "U32": torch.uint32, "U64": torch.uint64,
}
"""safetensors dtype names -> torch dtypes (every dtype a model file may hold)."""

_HEADER_LEN = struct.Struct("<Q")

# Views of a read-only blob (``bytes``) are only ever read (copied into a module), never
# written; torch's warning about non-writable buffers is noise for that use.
warnings.filterwarnings("ignore", message="The given buffer is not writable", category=UserWarning)


@dataclass(frozen=True)
class StoredTensor:
    """One tensor as a file stores it: shape and safetensors dtype name."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes the file spends on it."""
        return self.numel * dtype_size(self.dtype)


def dtype_size(name: str) -> int:
    """Element size of a safetensors dtype; unknown dtypes are a load error, not a guess."""
    if name not in TORCH_DTYPES:
        raise ModelLoadError(f"unsupported safetensors dtype {name!r}")
    return TORCH_DTYPES[name].itemsize


def read_stored_tensors(files: list[Path]) -> dict[str, StoredTensor]:
    """Names, shapes and dtypes of every tensor in ``files`` (headers only; no tensor data)."""
    tensors: dict[str, StoredTensor] = {}
    for file in files:
        with safe_open(file, framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 - safe_open is not a dict
                piece = handle.get_slice(name)
                tensors[name] = StoredTensor(tuple(int(d) for d in piece.get_shape()), piece.get_dtype())
    return tensors


def tensor_views(blob: bytes | bytearray | memoryview) -> dict[str, torch.Tensor]:
    """Every tensor of one safetensors file's bytes, as views sharing the blob's memory.

    A tensor whose offset is not aligned to its element size (legal in old files, never
    written by current ones) is copied instead of viewed, so no kernel reads misaligned data.

    Raises:
        ModelLoadError: the bytes are not a well-formed safetensors file.
    """
    view = memoryview(blob).cast("B")
    if len(view) < _HEADER_LEN.size:
        raise ModelLoadError("weights are not a valid safetensors file: shorter than its 8-byte header length")
    (header_len,) = _HEADER_LEN.unpack_from(view, 0)
    data_start = _HEADER_LEN.size + header_len
    if data_start > len(view):
        raise ModelLoadError(f"weights are not a valid safetensors file: header of {header_len} bytes "
                             f"in a blob of {len(view)}")
    try:
        header = json.loads(bytes(view[_HEADER_LEN.size:data_start]))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"weights are not a valid safetensors file: bad header ({exc})") from exc
    if not isinstance(header, dict):
        raise ModelLoadError("weights are not a valid safetensors file: header is not a JSON object")
    data_len = len(view) - data_start
    out: dict[str, torch.Tensor] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        out[name] = _view_one(view, data_start, data_len, name, entry)
    return out


def _view_one(view: memoryview, data_start: int, data_len: int, name: str, entry: object) -> torch.Tensor:
    try:
        dtype = TORCH_DTYPES[entry["dtype"]]  # type: ignore[index]
        shape = tuple(int(d) for d in entry["shape"])  # type: ignore[index]
        begin, end = (int(o) for o in entry["data_offsets"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelLoadError(f"weights are not a valid safetensors file: bad entry for {name!r} ({exc})") from exc
    numel = math.prod(shape)
    if any(d < 0 for d in shape) or not 0 <= begin <= end <= data_len or end - begin != numel * dtype.itemsize:
        raise ModelLoadError(f"weights are not a valid safetensors file: {name!r} has shape {list(shape)} "
                             f"but bytes [{begin}, {end}) of {data_len}")
    offset = data_start + begin
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    if offset % dtype.itemsize:
        return torch.frombuffer(bytearray(view[offset: offset + end - begin]), dtype=dtype).reshape(shape)
    return torch.frombuffer(view, dtype=dtype, count=numel, offset=offset).reshape(shape)
