"""Declared input data in perf_analyzer's `--input-data` JSON format, read unchanged.

The file holds a `data` list. Each entry maps input names to a value for one batch-1 request:
a flat (row-major) list, `{"b64": "..."}` (little-endian raw bytes; BYTES elements each prefixed
by their 4-byte length), or `{"content": LIST or {"b64": ...}, "shape": [dims]}` where `shape`
(without the batch dimension) fixes variable dims. A `data` list of lists gives one stream per
inner list for sequence models: each stream is played back, step by step, on one correlation id.
An optional `validation_data` list, aligned with `data`, holds the expected outputs in the same
format. Entries are used round-robin; a batch of N takes N consecutive entries.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import TritonReadyError

_NUMPY_DTYPES = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
    "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
    "FP16": np.float16, "FP32": np.float32, "FP64": np.float64, "BYTES": np.object_,
}


def numpy_dtype(datatype: str) -> Any:
    """The numpy dtype of a Triton datatype name (FP32, INT64, BYTES, BF16 as ml_dtypes.bfloat16...)."""
    if datatype == "BF16":
        from tritonclient.utils import triton_to_np_dtype

        return triton_to_np_dtype("BF16")
    try:
        return _NUMPY_DTYPES[datatype]
    except KeyError:
        raise ValueError(f"datatype {datatype} cannot be synthesized") from None


class InputDataError(TritonReadyError, ValueError):
    """A declared data file that cannot be used; the message names the file, the entry and the input."""


@dataclass(frozen=True)
class InputData:
    """One model's declared data: streams of steps (a non-sequence file is streams of one step)."""

    source: str
    streams: tuple[tuple[Mapping[str, Any], ...], ...]
    validation: tuple[tuple[Mapping[str, Any], ...], ...] = ()
    nested: bool = False  # the file gave a list of lists (sequence streams)

    @property
    def entries(self) -> list[Mapping[str, Any]]:
        """Every step of every stream, in file order (how a stateless model uses the file)."""
        return [step for stream in self.streams for step in stream]

    @property
    def expected(self) -> list[Mapping[str, Any] | None]:
        """The validation entry aligned with each of `entries` (None where the file has none)."""
        flat = [step for stream in self.validation for step in stream]
        return [flat[i] if i < len(flat) else None for i in range(len(self.entries))]

    def names(self) -> set[str]:
        return {name for entry in self.entries for name in entry}

    def where(self, index: int) -> str:
        """`FILE data[i]` or `FILE data[s][k]` for the index-th step."""
        if not self.nested:
            return f"{self.source} data[{index}]"
        for s, stream in enumerate(self.streams):
            if index < len(stream):
                return f"{self.source} data[{s}][{index}]"
            index -= len(stream)
        return f"{self.source} data[?]"


def load_input_data(path: str | Path) -> InputData:
    """Read and check the structure of one perf_analyzer input-data file."""
    source = str(path)
    try:
        document = json.loads(Path(path).read_text())
    except OSError as exc:
        raise InputDataError(f"{source}: cannot read the input-data file: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InputDataError(f"{source}: not valid JSON: {exc}") from None
    return parse_input_data(document, source)


def parse_input_data(document: Any, source: str) -> InputData:
    """The InputData of an already-parsed JSON document (see load_input_data)."""
    if not isinstance(document, Mapping) or "data" not in document:
        raise InputDataError(f"{source}: expected an object with a \"data\" list (perf_analyzer's --input-data format)")
    streams, nested = _streams(document["data"], source, "data")
    validation: tuple = ()
    if "validation_data" in document:
        validation, _ = _streams(document["validation_data"], source, "validation_data")
    return InputData(source, streams, validation, nested)


def _streams(data: Any, source: str, key: str) -> tuple[tuple, bool]:
    if not isinstance(data, list) or not data:
        raise InputDataError(f"{source}: \"{key}\" must be a non-empty list")
    nested = all(isinstance(item, list) for item in data)
    if not nested and any(isinstance(item, list) for item in data):
        raise InputDataError(f"{source}: \"{key}\" mixes entries and lists of entries")
    streams = [list(item) for item in data] if nested else [[item] for item in data]
    for s, stream in enumerate(streams):
        if not stream:
            raise InputDataError(f"{source}: {key}[{s}] is an empty stream")
        for k, step in enumerate(stream):
            where = f"{source}: {key}[{s}][{k}]" if nested else f"{source}: {key}[{s}]"
            if not isinstance(step, Mapping):
                raise InputDataError(f"{where} must be an object mapping input names to values")
            for name, value in step.items():
                _check_value(value, f"{where}.{name}")
    return tuple(tuple(stream) for stream in streams), nested


def _check_value(value: Any, where: str) -> None:
    if isinstance(value, (list, str, int, float, bool)):
        return
    if isinstance(value, Mapping):
        if "b64" in value:
            _b64(value["b64"], where)
            return
        if "content" in value:
            shape = value.get("shape")
            if shape is not None and (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)):
                raise InputDataError(f"{where}: \"shape\" must be a list of non-negative integers, got {shape!r}")
            _check_value(value["content"], where)
            return
    raise InputDataError(f"{where}: expected a list, {{\"b64\": ...}} or {{\"content\": ..., \"shape\": [...]}}, "
                         f"got {type(value).__name__}")


def _b64(text: Any, where: str) -> bytes:
    try:
        return base64.b64decode(str(text), validate=True)
    except (binascii.Error, ValueError):
        raise InputDataError(f"{where}: \"b64\" is not valid base64") from None


def tensor_from_value(value: Any, datatype: str, dims: Sequence[int], where: str,
                      default_shape: Sequence[int] | None = None) -> np.ndarray:
    """One batch-1 tensor (without the batch dimension) from a declared value. `dims` are the
    model's declared non-batch dims (-1 variable); `default_shape` fills them (inputs.shapes) where
    the value has no `shape`. Raises InputDataError naming `where` when the data does not fit."""
    shape = None
    if isinstance(value, Mapping) and "content" in value:
        shape = value.get("shape")
        value = value["content"]
    dtype = numpy_dtype(datatype)
    if isinstance(value, Mapping) and "b64" in value:
        raw = _b64(value["b64"], where)
        flat = _bytes_elements(raw, where) if datatype == "BYTES" else _raw_elements(raw, dtype, datatype, where)
    else:
        items = [value] if isinstance(value, (str, int, float, bool)) else value
        if datatype == "BYTES":
            flat = np.array([_as_bytes(v) for v in np.array(items, dtype=object).reshape(-1)], dtype=np.object_)
        else:
            try:
                flat = np.array(items, dtype=np.float64 if datatype == "BF16" else None).reshape(-1).astype(dtype)
            except (TypeError, ValueError) as exc:
                raise InputDataError(f"{where}: values do not fit {datatype}: {exc}") from None
    return flat.reshape(_shape(shape, dims, default_shape, flat.size, where))


def _shape(given: Sequence[int] | None, dims: Sequence[int], default: Sequence[int] | None, count: int,
           where: str) -> list[int]:
    if given is not None:
        shape = list(given)
    elif default is not None:
        shape = list(default)
    else:
        shape = list(dims)
        unknown = [i for i, d in enumerate(shape) if d < 0]
        if len(unknown) == 1:
            known = int(np.prod([d for d in shape if d >= 0])) if len(shape) > 1 else 1
            if known and count % known == 0:
                shape[unknown[0]] = count // known
        elif len(unknown) > 1:
            raise InputDataError(f"{where}: the input has {len(unknown)} variable dims {list(dims)}: give its "
                                 "\"shape\" beside \"content\" in the data file, or inputs.shapes in the YAML")
    if len(shape) != len(dims) or any(d >= 0 and s != d for s, d in zip(shape, dims, strict=False)):
        raise InputDataError(f"{where}: shape {shape} does not match the model's declared dims {list(dims)}")
    if int(np.prod(shape)) != count:
        raise InputDataError(f"{where}: {count} values do not fill shape {shape} ({int(np.prod(shape))} elements)")
    return shape


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    return (value if isinstance(value, str) else json.dumps(value)).encode()


def _bytes_elements(raw: bytes, where: str) -> np.ndarray:
    """BYTES elements from perf_analyzer's binary form: each a 4-byte little-endian length, then bytes."""
    items, offset = [], 0
    while offset < len(raw):
        if offset + 4 > len(raw):
            raise InputDataError(f"{where}: \"b64\" BYTES data ends inside an element's 4-byte length")
        (length,) = struct.unpack_from("<I", raw, offset)
        offset += 4
        if offset + length > len(raw):
            raise InputDataError(f"{where}: \"b64\" BYTES element of {length} bytes runs past the data")
        items.append(raw[offset:offset + length])
        offset += length
    return np.array(items, dtype=np.object_)


def _raw_elements(raw: bytes, dtype: Any, datatype: str, where: str) -> np.ndarray:
    size = np.dtype(dtype).itemsize
    if len(raw) % size:
        raise InputDataError(f"{where}: {len(raw)} bytes of \"b64\" data are not whole {datatype} elements ({size} bytes each)")
    return np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).astype(dtype)
