"""Streaming (decoupled) mode of the load engine: gRPC ModelStreamInfer, one bidirectional stream per
virtual user, responses matched to requests by id.

Per request (genai-perf's definitions; times from the send, or from the moment the request was due
in an open loop, so a client that falls behind cannot hide the server's delay):

- TTFT: first response carrying output - send;
- request latency: final response - send (the final flag may come on an empty response: every
  request asks for one with `triton_enable_empty_final_response=true`);
- ITL: (last response with output - first response with output) / (output tokens - 1), only for
  requests with at least two output tokens;
- output tokens: the elements of the token output tensor summed over the responses (one per
  response for a model that sends one token at a time; a [1, n] tensor counts n);
- output token throughput: all output tokens / (last response - first send); per user the same
  over that user's requests.

A request without its final response `deadline_s` after it was sent is **stuck**: it is reported
with its id, the tokens it got and how long it waited, and the user goes on with its next request
(responses are matched by id, so one stuck request does not block its stream). Errors arrive inside
the stream (`error_message`), which stays open; they are counted by reason like the unary engine's.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from struct import error as struct_error
from typing import Any

import numpy as np

from ..llm_inputs import TEXT_INPUT_NAMES, TOKEN_BUDGET_NAMES, conventional_value, is_convention, sent_when_optional
from .stats import LatencyHistogram
from .timeline import Timeline

STREAMING_DEMO_REPOSITORY = Path(__file__).resolve().parent.parent / "demo" / "streaming"
FINAL = "triton_final_response"
EMPTY_FINAL = "triton_enable_empty_final_response"
ERROR_PAUSE_S = 0.01  # closed loop: a user whose request failed waits this long before the next one

# -- requests -----------------------------------------------------------------------------------
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
        from ..inputs import optional_inputs

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
        from ..input_data import tensor_from_value
        from ..inputs import input_shape, random_tensor

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
    from ..inputs import numpy_dtype

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

    from ..inputs import numpy_dtype

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


def _text_of(values: np.ndarray) -> list[str]:
    return [v.decode(errors="replace") if isinstance(v, bytes) else str(v.item() if hasattr(v, "item") else v)
            for v in values.reshape(-1)]


def is_final(response: Any) -> bool:
    parameter = response.parameters.get(FINAL)
    return bool(parameter is not None and parameter.bool_param)


# -- per-request record and statistics -------------------------------------------------------------
@dataclass
class RequestRecord:
    """One streamed request as the client saw it (monotonic seconds)."""

    id: str
    user: int
    start: float  # send time (closed loop) or due time (open loop)
    sent: float = 0.0
    first: float | None = None   # first response with output
    last_data: float | None = None
    end: float | None = None     # final response or error
    responses: int = 0
    tokens: int = 0
    final: bool = False
    error: str | None = None
    text: list[str] = field(default_factory=list)  # the token output's values, decoded by its datatype
    values: dict[str, list[np.ndarray]] = field(default_factory=dict)  # each output, per response
    problems: list[str] = field(default_factory=list)  # output contract problems seen

    @property
    def ttft_s(self) -> float | None:
        return self.first - self.start if self.first is not None else None

    @property
    def latency_s(self) -> float | None:
        return self.end - self.start if self.end is not None else None

    @property
    def itl_s(self) -> float | None:
        if self.tokens < 2 or self.first is None or self.last_data is None:
            return None
        return (self.last_data - self.first) / (self.tokens - 1)


@dataclass
class StuckRequest:
    id: str
    user: int
    tokens: int
    responses: int
    waited_s: float

    def describe(self) -> str:
        return (f"request {self.id} (user {self.user}) got {self.tokens} tokens in {self.responses} responses "
                f"and no final response after {self.waited_s:.1f} s")


@dataclass(frozen=True)
class StreamSample:
    """What the confidence intervals need of one ended request (load/streaming_confidence.py):
    when it ended, its first and last response with output (monotonic s), its TTFT and ITL (s;
    None for a failed request or one without them) and the output tokens it got."""

    end: float
    ttft_s: float | None
    itl_s: float | None
    tokens: int
    first: float | None = None
    last: float | None = None


def _fold(message: str) -> str:
    return re.sub(r"\d+", "N", message)[:200]


class StreamTally:
    """Streaming statistics: TTFT, ITL and request latency in HdrHistograms, tokens per user,
    errors by reason, stuck requests by id."""

    def __init__(self) -> None:
        self.ttft = LatencyHistogram()
        self.itl = LatencyHistogram()
        self.latency = LatencyHistogram()
        self.completed = 0
        self.tokens = 0
        self.responses = 0
        self.user_tokens: Counter = Counter()
        self.user_span: dict[int, list[float]] = {}
        self.errors: Counter = Counter()
        self.stuck: list[StuckRequest] = []
        self.dropped = 0
        self.first_send: float | None = None
        self.last_response: float | None = None
        self.samples: list[StreamSample] = []

    def record(self, rec: RequestRecord) -> None:
        """A request that ended (final response, or an error)."""
        ok = rec.error is None
        self.samples.append(StreamSample(rec.end if rec.end is not None else rec.start, rec.ttft_s if ok else None,
                                         rec.itl_s if ok else None, rec.tokens, rec.first, rec.last_data))
        self.responses += rec.responses
        self.tokens += rec.tokens
        self.user_tokens[rec.user] += rec.tokens
        span = self.user_span.setdefault(rec.user, [rec.sent or rec.start, rec.end or rec.start])
        span[0] = min(span[0], rec.sent or rec.start)
        span[1] = max(span[1], rec.end or rec.start)
        self.first_send = min(self.first_send, rec.sent or rec.start) if self.first_send is not None else (rec.sent or rec.start)
        if rec.end is not None:
            self.last_response = max(self.last_response or rec.end, rec.end)
        if rec.error is not None:
            self.errors[_fold(rec.error)] += 1
            return
        self.completed += 1
        if rec.ttft_s is not None:
            self.ttft.record_s(rec.ttft_s)
        if rec.itl_s is not None:
            self.itl.record_s(rec.itl_s)
        if rec.latency_s is not None:
            self.latency.record_s(rec.latency_s)

    def record_stuck(self, rec: RequestRecord, now: float) -> None:
        self.responses += rec.responses
        self.tokens += rec.tokens
        self.user_tokens[rec.user] += rec.tokens
        self.samples.append(StreamSample(now, None, None, rec.tokens, rec.first, rec.last_data))
        self.stuck.append(StuckRequest(rec.id, rec.user, rec.tokens, rec.responses, now - (rec.sent or rec.start)))

    def summary(self) -> StreamStats:
        span = (self.last_response - self.first_send) if self.first_send is not None and self.last_response else 0.0
        per_user = {u: (t / (s[1] - s[0]) if s[1] > s[0] else 0.0) for u, t in self.user_tokens.items()
                    for s in [self.user_span.get(u, [0.0, 0.0])]}
        return StreamStats(
            completed=self.completed, errors=dict(self.errors), stuck=list(self.stuck), dropped=self.dropped,
            duration_s=span, output_tokens=self.tokens, responses=self.responses,
            output_tokens_per_s=self.tokens / span if span > 0 else 0.0,
            responses_per_s=self.responses / span if span > 0 else 0.0,
            requests_per_s=self.completed / span if span > 0 else 0.0,
            tokens_per_s_per_user=per_user,
            ttft_ms=self.ttft.percentiles_ms(), itl_ms=self.itl.percentiles_ms(), latency_ms=self.latency.percentiles_ms(),
            ttft_mean_ms=self.ttft.mean_ms(), itl_mean_ms=self.itl.mean_ms(),
            started=self.first_send, samples=list(self.samples),
        )


@dataclass
class StreamStats:
    """What a streaming run measured: the numbers a check compares with its thresholds."""

    completed: int
    errors: dict[str, int]
    stuck: list[StuckRequest]
    dropped: int
    duration_s: float
    output_tokens: int
    responses: int
    output_tokens_per_s: float
    responses_per_s: float
    requests_per_s: float
    tokens_per_s_per_user: dict[int, float]
    ttft_ms: dict[str, float | None]
    itl_ms: dict[str, float | None]
    latency_ms: dict[str, float | None]
    ttft_mean_ms: float | None = None
    itl_mean_ms: float | None = None
    started: float | None = None  # monotonic s of the first send: the measurement spans started + duration_s
    samples: list[StreamSample] = field(default_factory=list, repr=False, compare=False)  # one per ended request

    @property
    def count_errors(self) -> int:
        return sum(self.errors.values())

    @property
    def attempted(self) -> int:
        return self.completed + self.count_errors + len(self.stuck) + self.dropped

    @property
    def success_rate(self) -> float | None:
        return self.completed / self.attempted if self.attempted else None

    @property
    def min_user_tokens_per_s(self) -> float | None:
        return min(self.tokens_per_s_per_user.values()) if self.tokens_per_s_per_user else None

    def to_dict(self) -> dict[str, Any]:
        return {"completed": self.completed, "errors": self.errors, "stuck": [vars(s) for s in self.stuck[:50]],
                "stuck_count": len(self.stuck), "dropped": self.dropped, "duration_s": round(self.duration_s, 3),
                "output_tokens": self.output_tokens, "responses": self.responses,
                "output_tokens_per_s": round(self.output_tokens_per_s, 2), "responses_per_s": round(self.responses_per_s, 2),
                "requests_per_s": round(self.requests_per_s, 2), "success_rate": self.success_rate,
                "min_user_tokens_per_s": self.min_user_tokens_per_s,
                "ttft_ms": self.ttft_ms, "itl_ms": self.itl_ms, "latency_ms": self.latency_ms}


# -- the engine ------------------------------------------------------------------------------------
PromptSource = Callable[[int], tuple[str, int]]


def default_prompts(max_tokens: int, seed: int | None = None) -> PromptSource:
    """Different prompts on every request (so no cache can answer), from the shipped set
    (prompts.py), each asking for `max_tokens`."""
    from ..prompts import shipped_prompts

    return shipped_prompts(max_tokens, seed)


class _Stream:
    """One virtual user's bidirectional stream: writes serialized, responses dispatched by id."""

    def __init__(self, stub: Any, user: int, metadata: tuple, token_output: str, keep_text: bool,
                 declared_outputs: list[Mapping[str, Any]] | None = None, batched: bool = False) -> None:
        self.call = stub.ModelStreamInfer(metadata=metadata or None)
        self.declared_outputs = declared_outputs
        self.batched = batched
        self.user = user
        self.pending: dict[str, tuple[RequestRecord, asyncio.Future]] = {}
        self.write_lock = asyncio.Lock()
        self.token_output = token_output
        self.keep_text = keep_text
        self.closed: str | None = None
        self.reader = asyncio.ensure_future(self._read())

    async def send(self, request: Any, rec: RequestRecord) -> asyncio.Future:
        """Write the request; its future resolves with the record at its final response or error.
        A write on a stream the server already ended (or never opened) ends the request at once
        with that error."""
        future = asyncio.get_running_loop().create_future()
        self.pending[rec.id] = (rec, future)
        async with self.write_lock:
            rec.sent = time.monotonic()
            if self.closed is not None:  # the reader saw the stream end: nothing written here is answered
                rec.error = f"stream closed before the final response: {self.closed}"
                rec.end = rec.sent
                self._done(rec, future)
                return future
            try:
                await self.call.write(request)
            except Exception as exc:  # noqa: BLE001 - said on the request
                reason = self.closed or (getattr(exc, "details", lambda: None)() or f"{type(exc).__name__}: {exc}")
                rec.error = rec.error or f"stream closed before the final response: {reason}"
                rec.end = rec.end or time.monotonic()
                self._done(rec, future)
        return future

    async def _read(self) -> None:
        import grpc

        try:
            async for message in self.call:
                now = time.monotonic()
                response = message.infer_response
                entry = self.pending.get(response.id)
                if entry is None:
                    continue  # a stuck request's late answer, or an id the server lost
                rec, future = entry
                rec.responses += 1
                if message.error_message:
                    rec.error = message.error_message
                    rec.end = now
                    self._done(rec, future)
                    continue
                tokens = response_tokens(response, self.token_output)
                if tokens:
                    rec.tokens += tokens
                    rec.first = rec.first if rec.first is not None else now
                    rec.last_data = now
                if self.keep_text and response.outputs:
                    decoded = decode_outputs(response)
                    for name, values in decoded.items():
                        rec.values.setdefault(name, []).append(values)
                    if self.token_output in decoded:
                        rec.text.extend(_text_of(decoded[self.token_output]))
                    if self.declared_outputs is not None:
                        rec.problems.extend(p for p in output_problems(response, self.declared_outputs, self.batched)
                                            if p not in rec.problems)
                if is_final(response):
                    rec.final = True
                    rec.end = now
                    self._done(rec, future)
        except (grpc.aio.AioRpcError, asyncio.CancelledError) as exc:
            self.closed = getattr(exc, "details", lambda: "cancelled")() or "stream closed"
        except Exception as exc:  # noqa: BLE001 - the stream is gone; say why on every waiting request
            self.closed = f"{type(exc).__name__}: {exc}"
        else:
            self.closed = "the server ended the stream"
        now = time.monotonic()
        for rec, future in list(self.pending.values()):
            rec.error = rec.error or f"stream closed before the final response: {self.closed}"
            rec.end = rec.end or now
            if not future.done():
                future.set_result(rec)
        self.pending.clear()

    def _done(self, rec: RequestRecord, future: asyncio.Future) -> None:
        self.pending.pop(rec.id, None)
        if not future.done():
            future.set_result(rec)

    def forget(self, rec: RequestRecord) -> None:
        self.pending.pop(rec.id, None)

    async def close(self, cancel: bool = False) -> None:
        if cancel:
            self.call.cancel()
        else:
            try:
                await self.call.done_writing()
            except Exception:  # noqa: BLE001
                pass
        self.reader.cancel()
        try:
            await self.reader
        except (asyncio.CancelledError, Exception):  # noqa: BLE001
            pass


@dataclass
class StreamingResult:
    stats: StreamStats
    warmup: StreamStats | None
    records: list[RequestRecord]
    in_flight_at_stop: list[StuckRequest]
    events: list[tuple[float, str]]
    timeline: Timeline | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"stats": self.stats.to_dict(), "in_flight_at_stop": [vars(s) for s in self.in_flight_at_stop],
                "events": self.events}


class StreamingLoad:
    """Drives one decoupled model over gRPC ModelStreamInfer.

    `concurrency=N`: closed loop, N users each with its own stream and one request in flight.
    `rate=R`: open loop, requests due at R/s (Poisson with `poisson=True`) spread over `users`
    streams; latency counts from the due time; a request overdue by `late_drop_s` is dropped.
    Runs in a background thread with its own event loop: `start()`, `stop()`, or `run()`.
    """

    def __init__(self, grpc_url: str, plan: StreamingPlan, *, concurrency: int | None = None,
                 rate: float | None = None, users: int | None = None, poisson: bool = False,
                 duration_s: float | None = None, warmup_s: float = 0.0, deadline_s: float = 30.0,
                 prompts: PromptSource | None = None, max_tokens: int = 32, headers: Mapping[str, str] | None = None,
                 keep_records: int = 0, keep_text: bool = False, late_drop_s: float = 0.5, seed: int | None = None,
                 timeline_bin_s: float | None = None, reconnect: bool = False, version: str | None = None) -> None:
        if (concurrency is None) == (rate is None):
            raise ValueError("give either concurrency (closed loop) or rate (open loop)")
        self.grpc_url = grpc_url
        self.plan = plan
        self.concurrency = concurrency
        self.rate = rate
        self.users = users or concurrency or max(1, min(64, int((rate or 1) * 2)))
        self.poisson = poisson
        self.duration_s = duration_s
        self.warmup_s = warmup_s
        self.deadline_s = deadline_s
        self.prompts = prompts or default_prompts(max_tokens, seed)
        self.metadata = tuple((k.lower(), v) for k, v in (headers or {}).items())
        self.keep_records = keep_records
        self.keep_text = keep_text
        self.late_drop_s = late_drop_s
        self.rng = np.random.default_rng(seed)
        self.tally = StreamTally()
        self.warm_tally = StreamTally()
        self.records: list[RequestRecord] = []
        self.events: list[tuple[float, str]] = []
        self._ids = itertools.count(1)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._result: StreamingResult | None = None
        self._error: BaseException | None = None
        self._t0 = 0.0
        self._cancel_streams = False
        self._streams: list[_Stream] = []
        self.timeline_bin_s = timeline_bin_s
        self.timeline: Timeline | None = None  # with timeline_bin_s: per-bin successes, errors, drops, p99
        self.reconnect = reconnect
        self.version = version
        self._started = threading.Event()
        self._stub: Any = None

    # -- control from any thread ----------------------------------------------------------------
    def start(self) -> StreamingLoad:
        self._thread = threading.Thread(target=self._main, name=f"streaming-load-{self.plan.model}", daemon=True)
        self._thread.start()
        return self

    def stop(self, cancel: bool = False) -> StreamingResult:
        """End the traffic; with `cancel=True` the streams are cancelled (the server sees the
        client go away mid-stream) instead of being waited for."""
        self._cancel_streams = cancel
        self._stop.set()
        return self.wait()

    def wait(self, timeout: float | None = None) -> StreamingResult:
        assert self._thread is not None, "start() first"
        self._thread.join(timeout)
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def run(self) -> StreamingResult:
        return self.start().wait()

    def event(self, name: str) -> None:
        now = time.monotonic()
        self.events.append((round(now - self._t0, 3), name))
        if self.timeline is not None:
            self.timeline.event(name, now)

    def wait_started(self, timeout_s: float = 10.0) -> bool:
        """True once the streams are open and the clock runs (`start()` returns before that)."""
        return self._started.wait(timeout_s)

    def elapsed_s(self) -> float:
        return time.monotonic() - self._t0 if self._started.is_set() else 0.0

    def in_flight(self) -> int:
        return sum(len(s.pending) for s in self._streams)

    def in_flight_sent_before(self, t: float) -> int:
        """Requests still waiting for their final response that were sent before monotonic `t`."""
        return sum(1 for s in self._streams for rec, _ in list(s.pending.values()) if rec.sent and rec.sent < t)

    def tokens_so_far(self) -> int:
        return self.tally.tokens + self.warm_tally.tokens

    def __enter__(self) -> StreamingLoad:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self._result = self.stop()

    @property
    def result(self) -> StreamingResult:
        assert self._result is not None, "the traffic has not ended"
        return self._result

    # -- the event loop ------------------------------------------------------------------------
    def _main(self) -> None:
        from .background import shared_loop

        try:  # gRPC's asyncio binds to the first loop it meets: every run uses the engine's one loop
            asyncio.run_coroutine_threadsafe(self._run(), shared_loop()).result()
        except BaseException as exc:  # noqa: BLE001 - re-raised in wait()
            self._error = exc
        finally:
            self._started.set()  # nobody waits for a start that failed

    async def _run(self) -> None:
        import grpc
        from tritonclient.grpc import service_pb2_grpc

        options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
        async with grpc.aio.insecure_channel(self.grpc_url, options=options) as channel:
            self._stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            self._streams = [self._open(u) for u in range(self.users)]
            self._t0 = time.monotonic()
            if self.timeline_bin_s:
                self.timeline = Timeline(self._t0, self.timeline_bin_s)
            self._started.set()
            end = self._t0 + self.warmup_s + self.duration_s if self.duration_s is not None else None
            watcher = asyncio.ensure_future(self._watch_stop(end))
            if self.concurrency is not None:
                tasks = [asyncio.ensure_future(self._user(s)) for s in self._streams]
            else:
                tasks = [asyncio.ensure_future(self._scheduler())]
            await watcher
            in_flight = [] if self._cancel_streams else await self._drain(tasks)
            now = time.monotonic()
            leftover = [StuckRequest(rec.id, rec.user, rec.tokens, rec.responses, now - (rec.sent or rec.start))
                        for s in self._streams for rec, _ in s.pending.values()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.gather(*(s.close(cancel=True) for s in self._streams), return_exceptions=True)
            del in_flight
        if self.timeline is not None:
            self.timeline.finish(time.monotonic())
        self._result = StreamingResult(self.tally.summary(), self.warm_tally.summary() if self.warmup_s else None,
                                       self.records, leftover, self.events, self.timeline)

    def _open(self, user: int) -> _Stream:
        return _Stream(self._stub, user, self.metadata, self.plan.token_output, self.keep_text)

    async def _watch_stop(self, end: float | None) -> None:
        while not self._stop.is_set():
            if end is not None and time.monotonic() >= end:
                return
            if self.timeline is not None:
                self.timeline.tick(time.monotonic())
            await asyncio.sleep(0.02)

    async def _drain(self, tasks: list[asyncio.Future]) -> list:
        """After the stop: the requests in flight finish or reach their deadline."""
        self._stop.set()
        limit = time.monotonic() + self.deadline_s + 1.0
        while any(s.pending for s in self._streams) and time.monotonic() < limit:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0)
        return []

    def _new_request(self, user: int, start: float) -> tuple[Any, RequestRecord]:
        n = next(self._ids)
        prompt, max_tokens = self.prompts(n)
        rid = f"u{user}-r{n}"
        arrays = self.plan.arrays(prompt, max_tokens, self.rng)
        return build_request(self.plan.model, arrays, rid, version=self.version), RequestRecord(rid, user, start)

    def _tally_for(self, rec: RequestRecord) -> StreamTally:
        return self.warm_tally if rec.start - self._t0 < self.warmup_s else self.tally

    def _finish(self, rec: RequestRecord) -> None:
        self._tally_for(rec).record(rec)
        if self.timeline is not None:
            if rec.error is None and rec.latency_s is not None:
                self.timeline.ok(time.monotonic(), rec.latency_s)
            else:
                self.timeline.error(time.monotonic())
        if self.keep_records and len(self.records) < self.keep_records:
            self.records.append(rec)

    async def _user(self, stream: _Stream) -> None:
        while not self._stop.is_set():
            request, rec = self._new_request(stream.user, time.monotonic())
            rec.start = time.monotonic()
            future = await stream.send(request, rec)
            await self._await(stream, rec, future)
            if stream.closed:
                return
            if rec.error is not None:
                await asyncio.sleep(ERROR_PAUSE_S)  # a refused request is not resent in a busy loop

    async def _await(self, stream: _Stream, rec: RequestRecord, future: asyncio.Future) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout=max(0.0, rec.sent + self.deadline_s - time.monotonic()))
        except asyncio.TimeoutError:
            stream.forget(rec)
            self.tally.record_stuck(rec, time.monotonic())  # stuck in the warm-up is still stuck
            if self.timeline is not None:
                self.timeline.error(time.monotonic())
            if self.keep_records and len(self.records) < self.keep_records:
                self.records.append(rec)
            return
        self._finish(rec)

    async def _scheduler(self) -> None:
        assert self.rate
        interval = 1.0 / self.rate
        due = time.monotonic()
        waiting: set[asyncio.Future] = set()
        users = itertools.cycle(range(len(self._streams)))
        rnd = random.Random(int(self.rng.integers(1 << 30)))
        while not self._stop.is_set():
            now = time.monotonic()
            if due > now:
                await asyncio.sleep(due - now)
                continue
            index = next(users)
            if self.reconnect and self._streams[index].closed:
                # a client that lost its stream (the server went away) opens a new one for its next request
                self._streams[index] = self._open(self._streams[index].user)
            stream = self._streams[index]
            if now - due > self.late_drop_s:
                self._tally_for(RequestRecord("", 0, due)).dropped += 1
                if self.timeline is not None:
                    self.timeline.drop(now)
            else:
                request, rec = self._new_request(stream.user, due)
                future = await stream.send(request, rec)
                task = asyncio.ensure_future(self._await(stream, rec, future))
                waiting.add(task)
                task.add_done_callback(waiting.discard)
            due += rnd.expovariate(self.rate) if self.poisson else interval
        if waiting:
            await asyncio.gather(*waiting, return_exceptions=True)


# -- one request, for correctness checks -----------------------------------------------------------
def stream_once(grpc_url: str, plan: StreamingPlan, prompt: str, max_tokens: int, *, timeout_s: float = 30.0,
                headers: Mapping[str, str] | None = None, version: str | None = None) -> RequestRecord:
    """Send one request on its own stream and wait for its final response (or the timeout); the
    record keeps the decoded tokens of a BYTES token output. `version`: that version of the model."""
    load = StreamingLoad(grpc_url, plan, concurrency=1, duration_s=None, deadline_s=timeout_s,
                         prompts=lambda n: (prompt, max_tokens), keep_records=1, keep_text=True, headers=headers,
                         version=version)
    request, rec = load._new_request(0, time.monotonic())
    return send_request(grpc_url, request, plan.token_output, timeout_s=timeout_s, headers=headers, record=rec,
                        declared_outputs=plan.outputs, batched=plan.batched)


def stream_arrays(grpc_url: str, plan: StreamingPlan, arrays: Mapping[str, np.ndarray], request_id: str, *,
                  timeout_s: float = 30.0, headers: Mapping[str, str] | None = None) -> RequestRecord:
    """Send one request of exactly these tensors on its own stream (the same tensors can be sent
    twice to compare the answers); the record keeps every output decoded by its datatype."""
    request = build_request(plan.model, arrays, request_id)
    return send_request(grpc_url, request, plan.token_output, timeout_s=timeout_s, headers=headers,
                        declared_outputs=plan.outputs, batched=plan.batched)


def answer_values(record: RequestRecord) -> dict[str, np.ndarray]:
    """Each output of a streamed answer: its values over all responses, concatenated."""
    return {name: np.concatenate([v.reshape(-1) for v in parts]) for name, parts in record.values.items() if parts}


def send_request(grpc_url: str, request: Any, token_output: str, *, timeout_s: float = 30.0,
                 headers: Mapping[str, str] | None = None, record: RequestRecord | None = None,
                 declared_outputs: list[Mapping[str, Any]] | None = None, batched: bool = False) -> RequestRecord:
    """Send one prebuilt ModelInferRequest on its own stream and wait for its final response, an
    error, or the timeout (then neither `final` nor `error` is set). Any request, well-formed or
    not: the record says what came back (tokens, text of a BYTES token output, the error)."""
    metadata = tuple((k.lower(), v) for k, v in (headers or {}).items())
    rec = record or RequestRecord(request.id or "r0", 0, time.monotonic())
    if not request.id:
        request.id = rec.id

    async def one() -> RequestRecord:
        import grpc
        from tritonclient.grpc import service_pb2_grpc

        options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
        async with grpc.aio.insecure_channel(grpc_url, options=options) as channel:
            stream = _Stream(service_pb2_grpc.GRPCInferenceServiceStub(channel), 0, metadata, token_output, True,
                             declared_outputs, batched)
            rec.start = time.monotonic()
            future = await stream.send(request, rec)
            try:
                await asyncio.wait_for(asyncio.shield(future), timeout_s)
            except asyncio.TimeoutError:
                stream.forget(rec)  # no final response in time: neither final nor an error
                rec.error = None
            await stream.close(cancel=True)
            return rec

    from .background import shared_loop

    return asyncio.run_coroutine_threadsafe(one(), shared_loop()).result()


# -- HTTP generate_stream (server-sent events) -----------------------------------------------------
@dataclass
class SseOutcome:
    status: int
    chunks: list[dict[str, Any]]
    error: str | None
    ttft_s: float | None
    latency_s: float


def generate_stream(http_url: str, model: str, body: Mapping[str, Any], *, timeout_s: float = 30.0,
                    headers: Mapping[str, str] | None = None) -> SseOutcome:
    """POST /v2/models/M/generate_stream and read every event. The status is fixed by the first
    chunk, so each chunk is checked for an `error` member: a later error arrives under a 200."""
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"{http_url.rstrip('/')}/v2/models/{model}/generate_stream",
                                     data=json.dumps(dict(body)).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    started = time.monotonic()
    chunks: list[dict[str, Any]] = []
    first = None
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status = response.status
            for raw in response:
                line = raw.decode(errors="replace").strip()
                if not line.startswith("data:"):
                    continue
                first = first if first is not None else time.monotonic()
                try:
                    chunk = json.loads(line[5:].strip())
                except ValueError:
                    chunk = {"error": f"a chunk that is not JSON: {line[:200]}"}
                chunks.append(chunk)
                if "error" in chunk:
                    return SseOutcome(status, chunks, str(chunk["error"]), first - started, time.monotonic() - started)
    except urllib.error.HTTPError as exc:
        text = exc.read().decode(errors="replace")
        return SseOutcome(exc.code, chunks, text[:500], None, time.monotonic() - started)
    except (urllib.error.URLError, OSError) as exc:
        return SseOutcome(0, chunks, f"{type(exc).__name__}: {exc}", None, time.monotonic() - started)
    return SseOutcome(status, chunks, None, (first - started) if first is not None else None, time.monotonic() - started)


def sse_body(plan: StreamingPlan, prompt: str, max_tokens: int) -> dict[str, Any]:
    """A generate_stream body: the prompt and the budget by name, other scalars synthesized."""
    body: dict[str, Any] = {}
    for spec in plan.inputs:
        name = spec["name"]
        if name == plan.prompt_input:
            body[name] = prompt
        elif name == plan.max_tokens_input:
            body[name] = max_tokens
        elif is_convention(name, spec["datatype"]) and (name not in plan.optional
                                                       or sent_when_optional(name, spec["datatype"], True)):
            value = conventional_value(name, [1], decoupled=True, max_tokens=max_tokens).reshape(-1)[0]
            body[name] = value.decode() if isinstance(value, bytes) else bool(value)
        elif spec["datatype"] == "BOOL" and name not in plan.optional:
            body[name] = False
    return body


def decoupled(config: Mapping[str, Any]) -> bool:
    return bool((config.get("model_transaction_policy") or {}).get("decoupled"))


def decoupled_models(target: Any, models: Iterable[str]) -> list[str]:
    return [m for m in models if decoupled(target.client.model_config(m))]


if __name__ == "__main__":  # python -m pytest_triton_ready.load.streaming: where the streaming demo lies
    print(STREAMING_DEMO_REPOSITORY)
