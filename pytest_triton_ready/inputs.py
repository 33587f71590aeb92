"""Request inputs synthesized from a model's metadata, and output checks against the declaration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

_NUMPY_DTYPES = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
    "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
    "FP16": np.float16, "FP32": np.float32, "FP64": np.float64, "BYTES": np.object_,
}


def numpy_dtype(datatype: str) -> Any:
    """The numpy dtype of a Triton datatype name (FP32, INT64, BYTES...)."""
    try:
        return _NUMPY_DTYPES[datatype]
    except KeyError:
        raise ValueError(f"datatype {datatype} cannot be synthesized") from None


def input_shape(declared: list[int], batched: bool, batch_size: int, dynamic_dim: int,
                override: list[int] | None = None) -> list[int]:
    """The concrete shape sent for one input: the batch dimension, then the declared dims with
    -1 replaced by the override or `dynamic_dim`."""
    dims = list(declared[1:] if batched else declared)
    if override is not None:
        dims = list(override)
    dims = [dynamic_dim if d < 0 else d for d in dims]
    return ([batch_size] if batched else []) + dims


def synthesize_inputs(metadata: Mapping[str, Any], config: Mapping[str, Any], *, batch_size: int = 1,
                      dynamic_dim: int = 16, shapes: Mapping[str, list[int]] | None = None,
                      rng: np.random.Generator | None = None) -> dict[str, np.ndarray]:
    """Random inputs of the declared names, datatypes and shapes; different on every call."""
    rng = rng or np.random.default_rng()
    batched = int(config.get("max_batch_size", 0)) > 0
    shapes = shapes or {}
    inputs = {}
    for spec in metadata.get("inputs", []):
        shape = input_shape([int(d) for d in spec["shape"]], batched, batch_size, dynamic_dim, shapes.get(spec["name"]))
        inputs[spec["name"]] = random_tensor(spec["datatype"], shape, rng)
    return inputs


def random_tensor(datatype: str, shape: list[int], rng: np.random.Generator) -> np.ndarray:
    dtype = numpy_dtype(datatype)
    if datatype == "BYTES":
        flat = [bytes(rng.integers(97, 123, size=8, dtype=np.uint8)) for _ in range(int(np.prod(shape)))]
        return np.array(flat, dtype=np.object_).reshape(shape)
    if datatype == "BOOL":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(size=shape).astype(dtype)
    return rng.integers(0, 100, size=shape).astype(dtype)


def output_mismatches(metadata: Mapping[str, Any], config: Mapping[str, Any],
                      outputs: Mapping[str, np.ndarray], batch_size: int = 1) -> list[str]:
    """What in `outputs` differs from the declared outputs: names, datatypes, ranks and fixed dims."""
    from tritonclient.utils import np_to_triton_dtype

    problems = []
    batched = int(config.get("max_batch_size", 0)) > 0
    declared = {o["name"]: o for o in metadata.get("outputs", [])}
    for name in sorted(set(declared) - set(outputs)):
        problems.append(f"declared output {name} is missing from the response")
    for name in sorted(set(outputs) - set(declared)):
        problems.append(f"response carries output {name}, which the model does not declare")
    for name in sorted(set(declared) & set(outputs)):
        spec, array = declared[name], outputs[name]
        datatype = np_to_triton_dtype(array.dtype)
        if datatype != spec["datatype"]:
            problems.append(f"output {name} is {datatype}, declared {spec['datatype']}")
        expected = [int(d) for d in spec["shape"]]
        if batched:
            expected = [batch_size] + expected[1:]
        if len(expected) != array.ndim or any(e >= 0 and e != a for e, a in zip(expected, array.shape, strict=False)):
            problems.append(f"output {name} has shape {list(array.shape)}, declared {expected}")
    return problems
