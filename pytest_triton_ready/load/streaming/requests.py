"""Streamed requests and responses of a decoupled model: which input carries the prompt and
which the token budget, which output carries the tokens (`StreamingPlan`, found from the model's
metadata by name), the ModelInferRequest that asks for an empty final response
(`triton_enable_empty_final_response=true`), and what one ModelInferResponse carries (its tokens,
its decoded outputs, how they differ from the declared ones, the final flag)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from struct import error as struct_error
from typing import Any

import numpy as np

from ...llm_inputs import TEXT_INPUT_NAMES, TOKEN_BUDGET_NAMES, conventional_value, is_convention, sent_when_optional

FINAL = "triton_final_response"
EMPTY_FINAL = "triton_enable_empty_final_response"

_TEXT_INPUT_NAMES = TEXT_INPUT_NAMES
_TOKEN_BUDGET_NAMES = TOKEN_BUDGET_NAMES
_TOKEN_OUTPUT_NAMES = re.compile(r"^(token|tokens|text_output|output_ids|output|text)$", re.I)


@dataclass
class StreamingPlan:
    """How to build one model's requests and count its tokens: which input is the text, which the
    token budget, which output carries the tokens (found from the model's metadata by name), and
    what the team declared (an `inputs.data` file, value ranges, shapes)."""

    model: str
    prompt_input: str | None
    max_tokens_input: str | None
    token_output: str
    inputs: list[dict[str, Any]]
    batched: bool
    outputs: list[dict[str, Any]] = field(default_factory=list)
    optional: set[str] = field(default_factory=set)
    data: Any = None  # InputData
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    shapes: dict[str, list[int]] = field(default_factory=dict)
    _entry: int = 0

    @classmethod
    def from_metadata(cls, model: str, metadata: Mapping[str, Any], config: Mapping[str, Any],
                      token_output: str | None = None, declared: Any = None) -> StreamingPlan:
        """The plan for `model`; `declared` (InputDeclarations) adds the team's data, ranges, shapes."""
        from ...inputs import optional_inputs

        inputs = list(metadata.get("inputs", []))
        prompt = next((i["name"] for i in inputs if i["datatype"] == "BYTES" and _TEXT_INPUT_NAMES.search(i["name"])), None)
        if prompt is None:
            prompt = next((i["name"] for i in inputs if i["datatype"] == "BYTES"
                           and not is_convention(i["name"], "BYTES")), None)
        budget = next((i["name"] for i in inputs if i["datatype"].startswith(("INT", "UINT"))
                       and _TOKEN_BUDGET_NAMES.search(i["name"])), None)
        outputs = [o["name"] for o in metadata.get("outputs", [])]
        chosen = token_output or next((o for o in outputs if _TOKEN_OUTPUT_NAMES.match(o)), outputs[0] if outputs else "")
        plan = cls(model, prompt, budget, chosen, inputs, int(config.get("max_batch_size", 0)) > 0,
                   list(metadata.get("outputs", [])), optional_inputs(config))
        if declared is not None:
            plan.data = declared.data.get(model)
            plan.ranges = dict(declared.ranges.get(model, {}))
            plan.shapes = dict(declared.shapes.get(model, {}))
        return plan

    def arrays(self, prompt: str, max_tokens: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """The request's tensors: the next `inputs.data` entry's values where declared (round-robin);
        else the text and the token budget where the model has them, the LLM backends' conventional
        inputs (see LLM_CONVENTIONS) set as those backends expect, optional inputs left out and
        every other input synthesized (within `inputs.ranges`)."""
        from ...input_data import tensor_from_value
        from ...inputs import input_shape, random_tensor

        entry: Mapping[str, Any] = {}
        where = ""
        if self.data is not None:
            index = self._entry % len(self.data.entries)
            entry, where = self.data.entries[index], self.data.where(index)
            self._entry += 1
        arrays = {}
        for spec in self.inputs:
            dims = [int(d) for d in spec["shape"]]
            name, datatype = spec["name"], spec["datatype"]
            if name in entry:
                tensor = tensor_from_value(entry[name], datatype, dims[1:] if self.batched else dims,
                                           f"{where}.{name}", self.shapes.get(name))
                arrays[name] = tensor[np.newaxis, ...] if self.batched else tensor
                continue
            if name in self.optional and name not in (self.prompt_input, self.max_tokens_input) \
                    and not sent_when_optional(name, datatype, decoupled=True):
                continue
            shape = input_shape(dims, self.batched, 1, 1, self.shapes.get(name))
            shape = [1 if d < 0 else d for d in shape]
            if name == self.prompt_input:
                arrays[name] = np.array([prompt.encode()] * int(np.prod(shape)), dtype=np.object_).reshape(shape)
            elif name == self.max_tokens_input:
                arrays[name] = np.full(shape, max_tokens, dtype=_np_type(datatype))
            elif is_convention(name, datatype):
                arrays[name] = conventional_value(name, shape, decoupled=True, max_tokens=max_tokens)
            else:
                arrays[name] = random_tensor(datatype, shape, rng, self.ranges.get(name))
        return arrays


def _np_type(datatype: str):
    from ...inputs import numpy_dtype

    return numpy_dtype(datatype)


def build_request(model: str, arrays: Mapping[str, np.ndarray], request_id: str, *,
                  empty_final: bool = True, version: str | None = None) -> Any:
    """A ModelInferRequest (tritonclient's service_pb2) with raw input contents and an id; for
    `version` of the model when given (else the version the server's policy picks)."""
    from tritonclient.grpc import service_pb2
    from tritonclient.utils import np_to_triton_dtype, serialize_byte_tensor

    request = service_pb2.ModelInferRequest(model_name=model, id=request_id, model_version=version or "")
    if empty_final:
        request.parameters[EMPTY_FINAL].bool_param = True
    for name, array in arrays.items():
        tensor = request.inputs.add(name=name, datatype=np_to_triton_dtype(array.dtype), shape=list(array.shape))
        del tensor
        if array.dtype == np.object_:
            serialized = serialize_byte_tensor(array)
            request.raw_input_contents.append(serialized.item() if serialized.size else b"")
        else:
            request.raw_input_contents.append(np.ascontiguousarray(array).tobytes())
    return request


def response_tokens(response: Any, token_output: str) -> int:
    """Output tokens in one ModelInferResponse: the elements of the token output (0 when absent)."""
    for output in response.outputs:
        if output.name == token_output:
            return int(np.prod(list(output.shape))) if len(output.shape) else 1
    return 0


def decode_outputs(response: Any) -> dict[str, np.ndarray]:
    """Every output of one ModelInferResponse, decoded by its own datatype and shaped; an output
    whose bytes do not fit its datatype and shape is left out (output_problems says so)."""
    from tritonclient.utils import deserialize_bytes_tensor

    from ...inputs import numpy_dtype

    decoded = {}
    for index, output in enumerate(response.outputs):
        if index >= len(response.raw_output_contents):
            continue
        raw = response.raw_output_contents[index]
        shape = [int(d) for d in output.shape]
        try:
            if output.datatype == "BYTES":
                values = deserialize_bytes_tensor(raw) if raw else np.array([], dtype=np.object_)
            else:
                values = np.frombuffer(raw, dtype=np.dtype(numpy_dtype(output.datatype)).newbyteorder("<"))
            decoded[output.name] = values.reshape(shape)
        except (ValueError, TypeError, struct_error):
            continue
    return decoded


def _fits(dims: list[int], expected: list[int]) -> bool:
    return len(dims) == len(expected) and all(e < 0 or e == a for e, a in zip(expected, dims, strict=False))


def output_problems(response: Any, declared: Iterable[Mapping[str, Any]], batched: bool = False) -> list[str]:
    """How one streamed response's outputs differ from the declared ones: undeclared names,
    datatypes, ranks and fixed dims, and contents that do not fit their datatype and shape. A
    batched model's response may leave out the batch dim (Triton passes decoupled responses on
    as the model shaped them, and streaming clients read both)."""
    specs = {o["name"]: o for o in declared}
    problems = []
    decoded = decode_outputs(response)
    for output in response.outputs:
        spec = specs.get(output.name)
        if spec is None:
            problems.append(f"response carries output {output.name}, which the model does not declare")
            continue
        if output.datatype != spec["datatype"]:
            problems.append(f"output {output.name} is {output.datatype}, declared {spec['datatype']}")
        dims, expected = [int(d) for d in output.shape], [int(d) for d in spec["shape"]]
        if not (_fits(dims, expected) or (batched and _fits(dims, expected[1:]))):
            problems.append(f"output {output.name} has shape {dims}, declared {expected}")
        if output.name not in decoded:
            problems.append(f"output {output.name}'s contents do not fit {output.datatype} {dims}")
    return problems


def text_of(values: np.ndarray) -> list[str]:
    return [v.decode(errors="replace") if isinstance(v, bytes) else str(v.item() if hasattr(v, "item") else v)
            for v in values.reshape(-1)]


def is_final(response: Any) -> bool:
    parameter = response.parameters.get(FINAL)
    return bool(parameter is not None and parameter.bool_param)
