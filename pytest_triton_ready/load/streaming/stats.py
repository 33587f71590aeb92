"""What a streaming measurement counts, per request and in sum.

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

A request without its final response by its deadline is **stuck** (`StuckRequest`: its id, the
tokens it got and how long it waited). Errors are counted by reason, their numbers folded.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import astuple, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..stats import LatencyHistogram

if TYPE_CHECKING:
    from ...record.recorder import CheckRecorder


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
    """What the confidence intervals need of one ended request (load/streaming/confidence.py):
    when it ended, its first and last response with output (monotonic s), its TTFT and ITL (s;
    None for a failed request or one without them), the output tokens it got, and whether it
    succeeded (a final response without an error; a stuck request did not)."""

    end: float
    ttft_s: float | None
    itl_s: float | None
    tokens: int
    first: float | None = None
    last: float | None = None
    ok: bool = True


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
                                         rec.itl_s if ok else None, rec.tokens, rec.first, rec.last_data, ok))
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
        self.samples.append(StreamSample(now, None, None, rec.tokens, rec.first, rec.last_data, False))
        self.stuck.append(StuckRequest(rec.id, rec.user, rec.tokens, rec.responses, now - (rec.sent or rec.start)))

    def merge(self, other: StreamTally) -> None:
        """Add `other`'s requests (another worker's users: the user numbers do not overlap; the
        samples' times share the host's monotonic clock)."""
        for name, histogram in other._histograms().items():
            self._histograms()[name].add(histogram)
        self.completed += other.completed
        self.tokens += other.tokens
        self.responses += other.responses
        self.user_tokens.update(other.user_tokens)
        for user, (begin, end) in other.user_span.items():
            span = self.user_span.setdefault(user, [begin, end])
            span[0], span[1] = min(span[0], begin), max(span[1], end)
        self.errors.update(other.errors)
        self.stuck.extend(other.stuck)
        self.dropped += other.dropped
        sends = [t for t in (self.first_send, other.first_send) if t is not None]
        self.first_send = min(sends) if sends else None
        ends = [t for t in (self.last_response, other.last_response) if t is not None]
        self.last_response = max(ends) if ends else None
        self.samples = sorted(self.samples + other.samples, key=lambda sample: sample.end)

    def to_wire(self) -> dict[str, Any]:
        """The tally as plain data, for another process (HdrHistograms encoded)."""
        return {"histograms": {name: (h.encode(), h.total_us) for name, h in self._histograms().items()},
                "completed": self.completed, "tokens": self.tokens, "responses": self.responses,
                "user_tokens": dict(self.user_tokens), "user_span": {u: list(s) for u, s in self.user_span.items()},
                "errors": dict(self.errors), "stuck": [vars(s) for s in self.stuck], "dropped": self.dropped,
                "first_send": self.first_send, "last_response": self.last_response,
                "samples": [astuple(s) for s in self.samples]}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> StreamTally:
        tally = cls()
        for name, (text, total_us) in data["histograms"].items():
            setattr(tally, name, LatencyHistogram.decode(text, total_us))
        tally.completed, tally.tokens, tally.responses = data["completed"], data["tokens"], data["responses"]
        tally.user_tokens = Counter(data["user_tokens"])
        tally.user_span = {u: list(s) for u, s in data["user_span"].items()}
        tally.errors = Counter(data["errors"])
        tally.stuck = [StuckRequest(**s) for s in data["stuck"]]
        tally.dropped, tally.first_send, tally.last_response = data["dropped"], data["first_send"], data["last_response"]
        tally.samples = [StreamSample(*s) for s in data["samples"]]
        return tally

    def _histograms(self) -> dict[str, LatencyHistogram]:
        return {"ttft": self.ttft, "itl": self.itl, "latency": self.latency}

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
    def single_response(self) -> bool:
        """Every request that succeeded got all its output in one response (Triton's QA model
        async_execute_decouple answers so): no inter-token gap exists to measure."""
        ok = [s for s in self.samples if s.ok]
        return bool(ok) and all(s.first is None or s.last is None or s.last <= s.first for s in ok)

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


def report_stuck(check: CheckRecorder, model: str, stuck_requests: Sequence[Any], limit: int = 10) -> None:
    """Each stream of `model` whose final flag never came, by id (the first `limit`)."""
    for stuck in stuck_requests[:limit]:
        check.finding(f"{model}: {stuck.describe()} (a stream whose final flag never came)", model=model,
                      rule="final-flag", value=stuck.id)
    if len(stuck_requests) > limit:
        check.finding(f"{model}: {len(stuck_requests) - limit} more stuck requests", model=model, rule="final-flag")
