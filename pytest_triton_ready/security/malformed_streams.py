"""SEC-3 for decoupled (streaming) models: the malformed cases sent over gRPC ModelStreamInfer,
the only way such a model is reached (it refuses HTTP /infer whatever the request holds).

Each case starts from a well-formed streamed request (the prompt, the token budget, the other
inputs synthesized as the streaming engine does) and breaks exactly one thing: a datatype, a
shape, an input left out, the raw bytes cut short, an oversize prompt, the batch size, the model
name. A server that refuses it answers with an error inside the stream (which stays open); a
response with output and a final flag means the request was accepted; neither within the deadline
is no answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .malformed import ACCEPTED, CLEAN, NO_ANSWER, UNKNOWN_MODEL

GOOD_TEXT = "is this request well formed"
GOOD_TOKENS = 4


@dataclass
class StreamCase:
    """One malformed streamed request: what it breaks, and the request (a ModelInferRequest)."""

    name: str
    model: str
    detail: str
    request: Any


@dataclass
class StreamCaseAnswer:
    """What came back on the stream for one case."""

    case: StreamCase
    error: str | None
    final: bool
    tokens: int
    elapsed_s: float

    @property
    def outcome(self) -> str:
        if self.error:
            return CLEAN
        if self.final:
            return ACCEPTED
        return NO_ANSWER

    def line(self) -> str:
        answer = self.error or (f"{self.tokens} tokens and the final response" if self.final else "nothing")
        return (f"{self.case.name:27} {self.outcome:12} {self.elapsed_s * 1000:8.1f} ms  "
                f"{self.case.detail}; answer: {answer[:200]}")


def good_request(plan: Any, request_id: str = "sec3-good") -> Any:
    from ..load.streaming.requests import build_request

    return build_request(plan.model, plan.arrays(GOOD_TEXT, GOOD_TOKENS, np.random.default_rng(0)), request_id)


def streaming_cases(plan: Any, config: dict[str, Any], oversize_bytes: int) -> list[StreamCase]:
    """The malformed streamed cases for one decoupled model, each from a copy of a good request."""
    from ..load.streaming.requests import build_request

    cases: list[StreamCase] = []

    def case(name: str, detail: str, change: Callable[[Any], None]) -> None:
        request = good_request(plan, f"sec3-{len(cases)}")
        change(request)
        cases.append(StreamCase(name, plan.model, detail, request))

    template = good_request(plan)
    if not template.inputs:
        return []
    first = template.inputs[0]
    other = "FP32" if first.datatype != "FP32" else "INT64"

    def wrong_datatype(request: Any) -> None:
        request.inputs[0].datatype = other
        request.raw_input_contents[0] = bytes(4 * max(1, int(np.prod(list(request.inputs[0].shape)))))

    case("wrong datatype", f"{first.name} sent as {other}, declared {first.datatype}", wrong_datatype)
    case("wrong shape", f"{first.name} shape {list(first.shape) + [1]}", lambda r: r.inputs[0].shape.append(1))
    optional = {i.get("name") for i in config.get("input", []) if i.get("optional")}
    required = [i for i, t in enumerate(template.inputs) if t.name not in optional]
    if required:
        index = required[0]

        def missing(request: Any) -> None:
            del request.inputs[index]
            del request.raw_input_contents[index]

        case("missing input", f"{template.inputs[index].name} left out", missing)
    last = len(template.inputs) - 1

    def truncated(request: Any) -> None:
        content = request.raw_input_contents[last]
        request.raw_input_contents[last] = content[: len(content) // 2]

    case("raw bytes cut short", f"{template.inputs[last].name}: {len(template.raw_input_contents[last]) // 2} of "
                                f"{len(template.raw_input_contents[last])} bytes", truncated)
    if plan.prompt_input is not None:
        arrays = plan.arrays(GOOD_TEXT, GOOD_TOKENS, np.random.default_rng(0))
        shape = list(arrays[plan.prompt_input].shape)
        arrays[plan.prompt_input] = np.array([b"x" * oversize_bytes], dtype=np.object_).reshape(shape)
        cases.append(StreamCase("oversize payload", plan.model,
                                f"{plan.prompt_input}: one prompt of {oversize_bytes / 2**20:.0f} MiB",
                                build_request(plan.model, arrays, f"sec3-{len(cases)}")))
    max_batch = int(config.get("max_batch_size") or 0)
    if max_batch > 0:
        batch = max_batch + 1

        def too_big(request: Any) -> None:
            for index, tensor in enumerate(request.inputs):
                tensor.shape[0] = batch
                request.raw_input_contents[index] = request.raw_input_contents[index] * batch

        case("batch above max_batch_size", f"batch {batch}, max_batch_size {max_batch}", too_big)

    def unknown(request: Any) -> None:
        request.model_name = UNKNOWN_MODEL

    case("unknown model", f"model {UNKNOWN_MODEL}", unknown)
    return cases


def send_case(grpc_url: str, case: StreamCase, token_output: str, *, timeout_s: float,
              headers: Any = None) -> StreamCaseAnswer:
    from ..load.streaming.single import send_request

    record = send_request(grpc_url, case.request, token_output, timeout_s=timeout_s, headers=headers)
    elapsed = (record.end or record.start + timeout_s) - record.start
    return StreamCaseAnswer(case, record.error, record.final, record.tokens, max(0.0, elapsed))
