"""What a team declares its models must answer (`expectations:` in the YAML), and the comparison.

Per model either `deterministic` (the same input must give the same output: a difference is an
error, not a warning) or a list of cases `{inputs: {NAME: VALUE}, outputs: {NAME: VALUE}}` with
values written as in perf_analyzer's --input-data files (a flat list, `{"content": ..., "shape":
...}`, `{"b64": ...}`). A data file's `validation_data` adds cases the same way. A streamed answer is
compared with the concatenation of each output over all its responses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .input_data import InputData, InputDataError, tensor_from_value

DETERMINISTIC = "deterministic"


@dataclass(frozen=True)
class ExpectedCase:
    inputs: Mapping[str, Any]
    outputs: Mapping[str, Any]
    where: str


@dataclass(frozen=True)
class Expectation:
    """One model's declared answers."""

    deterministic: bool = False
    cases: tuple[ExpectedCase, ...] = ()


def parse_expectation(value: Any, where: str) -> Expectation:
    """`deterministic`, or a list of {inputs, outputs} cases; InputDataError naming `where` if neither."""
    if value == DETERMINISTIC:
        return Expectation(deterministic=True)
    if not isinstance(value, list) or not value:
        raise InputDataError(f"{where}: expected \"{DETERMINISTIC}\" or a list of {{inputs: ..., outputs: ...}}")
    cases = []
    for i, case in enumerate(value):
        if not isinstance(case, Mapping) or not isinstance(case.get("inputs"), Mapping) \
                or not isinstance(case.get("outputs"), Mapping) or not case["outputs"]:
            raise InputDataError(f"{where}[{i}]: expected {{inputs: {{NAME: VALUE}}, outputs: {{NAME: VALUE}}}}")
        cases.append(ExpectedCase(dict(case["inputs"]), dict(case["outputs"]), f"{where}[{i}]"))
    return Expectation(True, tuple(cases))


def expectation_for(model: str, expectations: Mapping[str, Expectation], data: InputData | None) -> Expectation:
    """The model's declared expectation with its data file's validation_data cases added."""
    own = expectations.get(model, Expectation())
    cases = list(own.cases)
    if data is not None:
        for index, (entry, expected) in enumerate(zip(data.entries, data.expected, strict=True)):
            if expected:
                cases.append(ExpectedCase(entry, expected, f"{data.where(index)} validation_data"))
    return Expectation(own.deterministic or bool(cases), tuple(cases))


def answer_mismatches(case: ExpectedCase, outputs: Mapping[str, np.ndarray],
                      declared_outputs: Sequence[Mapping[str, Any]], batched: bool) -> list[str]:
    """How `outputs` differ from the case's expected outputs (values, element by element)."""
    specs = {o["name"]: o for o in declared_outputs}
    problems = []
    for name, value in case.outputs.items():
        spec = specs.get(name)
        if spec is None:
            problems.append(f"{case.where}: {name} is not a declared output")
            continue
        if name not in outputs:
            problems.append(f"{case.where}: the answer has no output {name}")
            continue
        if isinstance(value, Mapping) and "content" in value:
            value = {"content": value["content"]}  # compared element by element, whatever the shape
        expected = tensor_from_value(value, spec["datatype"], [-1], f"{case.where}.{name}").reshape(-1)
        actual = np.asarray(outputs[name]).reshape(-1)
        if not _equal(expected, actual, spec["datatype"]):
            problems.append(f"{case.where}: output {name} is {_show(actual)}, expected {_show(expected)}")
    return problems


def _equal(expected: np.ndarray, actual: np.ndarray, datatype: str) -> bool:
    if expected.size != actual.size:
        return False
    if datatype == "BYTES":
        return [_text(v) for v in expected] == [_text(v) for v in actual]
    if datatype in ("FP16", "FP32", "FP64", "BF16"):
        return bool(np.allclose(expected.astype(np.float64), actual.astype(np.float64), rtol=1e-3, atol=1e-5))
    return bool(np.array_equal(expected.astype(np.float64), actual.astype(np.float64)))


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _show(values: np.ndarray, limit: int = 8) -> str:
    shown = [_text(v) if values.dtype == np.object_ else v.item() for v in values[:limit]]
    return f"{shown}{' ...' if values.size > limit else ''} ({values.size} elements)"

