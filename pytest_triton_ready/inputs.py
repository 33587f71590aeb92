"""Request inputs from a model's metadata and what the team declared, and output checks against
the declaration.

Every input of a request is either declared (an entry of the model's `inputs.data` file, in
perf_analyzer's --input-data format, see input_data.py) or synthesized: random values of the
declared datatype (BF16 included), within `inputs.ranges` where given, variable (-1) dims set by
`inputs.shapes` or `inputs.dynamic_dim`. An input the config marks `optional: true` is left out
unless the data declares it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .input_data import InputData, InputDataError, numpy_dtype, tensor_from_value


@dataclass
class InputDeclarations:
    """What the team declared about one server's requests, per model: the dims to send for
    variable dims (`inputs.shapes`), value ranges (`inputs.ranges`) and data files (`inputs.data`)."""

    shapes: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    ranges: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    data: dict[str, InputData] = field(default_factory=dict)
    dynamic_dim: int = 16
    sequence_length: int = 20  # steps of a synthesized sequence (perf_analyzer's --sequence-length)


def optional_inputs(config: Mapping[str, Any]) -> set[str]:
    """The inputs the model config marks `optional: true`."""
    return {i["name"] for i in config.get("input", []) if i.get("optional")}


def synthesized_inputs(metadata: Mapping[str, Any], config: Mapping[str, Any], data: InputData | None) -> list[str]:
    """The inputs a request carries that no data file declares (optional inputs are left out)."""
    declared = data.names() if data else set()
    optional = optional_inputs(config)
    return [i["name"] for i in metadata.get("inputs", []) if i["name"] not in declared and i["name"] not in optional]


def refusal_hint(model: str, metadata: Mapping[str, Any], config: Mapping[str, Any], data: InputData | None,
                 dynamic_dim: int) -> str:
    """What to say after a request the model refused: which inputs the tool made up, and where to
    declare them."""
    made_up = synthesized_inputs(metadata, config, data)
    if not made_up:
        return f"(the request used {model}'s declared data from {data.source if data else '?'})"
    skip = 1 if int(config.get("max_batch_size", 0)) > 0 else 0  # the batch dim is not a variable dim
    variable = [i["name"] for i in metadata.get("inputs", [])
                if i["name"] in made_up and any(int(d) < 0 for d in i["shape"][skip:])]
    dims = f"; variable dims sent as {dynamic_dim}" if variable else ""
    return (f"(inputs {', '.join(made_up)} were synthesized: random values{dims}; declare real ones with "
            f"inputs.data: {{{model}: FILE}} (perf_analyzer --input-data JSON), value ranges with inputs.ranges, "
            "variable dims with inputs.shapes)")


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
                      rng: np.random.Generator | None = None,
                      ranges: Mapping[str, tuple[float, float]] | None = None,
                      data: InputData | None = None, entry: int = 0,
                      steps: list[Mapping[str, Any]] | None = None) -> dict[str, np.ndarray]:
    """One request's inputs: declared values from `data` (entries `entry`, `entry`+1, ... for a
    batch; or the given `steps`, one per batch row), every other non-optional input random of the
    declared datatype and shape (within `ranges`); different on every call."""
    rng = rng or np.random.default_rng()
    batched = int(config.get("max_batch_size", 0)) > 0
    shapes = shapes or {}
    ranges = ranges or {}
    optional = optional_inputs(config)
    rows: list[tuple[Mapping[str, Any], str]] = []
    if steps is not None:
        rows = [(step, f"{data.source if data else 'declared data'} step") for step in steps]
    elif data is not None:
        count = len(data.entries)
        rows = [(data.entries[(entry + b) % count], data.where((entry + b) % count))
                for b in range(batch_size if batched else 1)]
    known = {spec["name"] for spec in metadata.get("inputs", [])}
    for row, where in rows:
        for name in row:
            if name not in known:
                raise InputDataError(f"{where}: {name} is not an input of {metadata.get('name', 'the model')} "
                                     f"(its inputs: {', '.join(sorted(known)) or 'none'})")
    inputs = {}
    for spec in metadata.get("inputs", []):
        name, datatype = spec["name"], spec["datatype"]
        dims = [int(d) for d in spec["shape"]]
        if rows and all(name in row for row, _ in rows):
            own = dims[1:] if batched else dims
            tensors = [tensor_from_value(row[name], datatype, own, f"{where}.{name}", shapes.get(name))
                       for row, where in rows]
            if batched:
                _same_shapes(tensors, name, rows)
                inputs[name] = np.stack(tensors) if len(tensors) > 1 else tensors[0][np.newaxis, ...]
            else:
                inputs[name] = tensors[0]
            continue
        if name in optional:
            continue
        shape = input_shape(dims, batched, batch_size, dynamic_dim, shapes.get(name))
        if name not in ranges and (value := llm_value(name, datatype, shape, rng)) is not None:
            inputs[name] = value
            continue
        inputs[name] = random_tensor(datatype, shape, rng, ranges.get(name))
    return inputs


def llm_value(name: str, datatype: str, shape: list[int], rng: np.random.Generator) -> np.ndarray | None:
    """An LLM backend's conventional input on a unary (not decoupled) request: text from the
    shipped prompts, a small token budget, stream off (llm_inputs.py); None for any other input."""
    from .llm_inputs import DEFAULT_BUDGET, TEXT_INPUT_NAMES, TOKEN_BUDGET_NAMES, conventional_value, is_convention, text_tensor

    if is_convention(name, datatype):
        return conventional_value(name, shape, decoupled=False)
    if datatype == "BYTES" and TEXT_INPUT_NAMES.search(name):
        from .prompts import QUESTIONS

        return text_tensor(QUESTIONS[int(rng.integers(len(QUESTIONS)))], shape)
    if datatype.startswith(("INT", "UINT")) and TOKEN_BUDGET_NAMES.search(name):
        return np.full(shape, DEFAULT_BUDGET, dtype=numpy_dtype(datatype))
    return None


def _same_shapes(tensors: list[np.ndarray], name: str, rows: list[tuple[Mapping[str, Any], str]]) -> None:
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) > 1:
        raise InputDataError(f"{rows[0][1]}..{rows[-1][1]}: {name} has shapes {sorted(shapes)} in the entries of one "
                             "batch; a batch needs entries of one shape")


def random_tensor(datatype: str, shape: list[int], rng: np.random.Generator,
                  value_range: tuple[float, float] | None = None) -> np.ndarray:
    """Random values of `datatype` and `shape`: integers in [0, 100) or floats N(0, 1), or uniform in
    the declared `value_range` [low, high] (integers inclusive)."""
    dtype = numpy_dtype(datatype)
    if datatype == "BYTES":
        flat = [bytes(rng.integers(97, 123, size=8, dtype=np.uint8)) for _ in range(int(np.prod(shape)))]
        return np.array(flat, dtype=np.object_).reshape(shape)
    if datatype == "BOOL":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    floating = datatype in ("FP16", "FP32", "FP64", "BF16")
    if value_range is not None:
        low, high = value_range
        if floating:
            return rng.uniform(low, high, size=shape).astype(dtype)
        return rng.integers(int(low), int(high) + 1, size=shape).astype(dtype)
    if floating:
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


def string_corrid(config: Mapping[str, Any]) -> bool:
    """True where the config's CONTROL_SEQUENCE_CORRID control input is TYPE_STRING."""
    for control_input in (config.get("sequence_batching") or {}).get("control_input") or []:
        for control in control_input.get("control") or []:
            if control.get("kind") == "CONTROL_SEQUENCE_CORRID" and control.get("data_type") == "TYPE_STRING":
                return True
    return False
