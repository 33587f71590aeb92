"""Fault experiments on a decoupled (streaming) model: the injector's own experiments (a forced
reload, a new version rolled out, a crash + restart), with streamed traffic and streamed probes in
place of unary ones, so that a deployment whose models all stream is put through the same faults.

- `StreamingTraffic`: open-loop streamed requests (gRPC ModelStreamInfer, `load.streaming`) in the
  shape the experiments read (`BackgroundTraffic`'s): a 100 ms timeline of successes, errors
  (a request that ends with an error, or is cut off, or gets no final response within its
  deadline) and drops, named events, and a result. A client that loses its stream (the server went
  away) opens a new one for its next request, as a real client retries.
- `StreamingProber`: `InstanceProber`'s twin: concurrent streamed requests spread over the model's
  instances for a span, each answer compared with a healthy reference answer to the same prompt.

Requests ask for `STREAM_TOKENS` tokens each and count as failed without a final response
`STREAM_DEADLINE_S` after they were sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..load.errors import UNHEALTHY_STUB
from ..load.streaming.requests import StreamingPlan
from ..load.streaming.single import stream_once
from ..load.streaming.traffic import StreamingLoad, StreamingResult
from ..load.timeline import Timeline
from .experiment import run_experiment
from .probes import InstanceProbe
from .recording import record_outcome

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder

STREAM_TOKENS = 16
STREAM_DEADLINE_S = 10.0
PROBE_TEXT = "is every instance of this model serving"
PROBE_TOKENS = 4
STUCK = "no final response within {deadline:g} s of the send"


def streaming_plan(client: Any, model: str) -> StreamingPlan:
    return StreamingPlan.from_metadata(model, client.model_metadata(model), client.model_config(model),
                                      declared=getattr(client, "declared", None))


@dataclass
class StreamStatsView:
    """A streaming run's numbers under the names `Outcome` reads from unary traffic stats; a
    request without its final response counts as an error (by reason) here."""

    errors: dict[str, int]
    count_ok: int
    dropped: int
    p50_ms: float | None
    p99_ms: float | None

    @property
    def count_errors(self) -> int:
        return sum(self.errors.values())


@dataclass
class StreamingTrafficResult:
    """What `StreamingTraffic` leaves in `Outcome.traffic`: the timeline and the stats view, and
    the streaming result itself (TTFT, ITL, tokens) for evidence."""

    streaming: StreamingResult
    timeline: Timeline | None
    deadline_s: float

    @property
    def stats(self) -> StreamStatsView:
        stats = self.streaming.stats
        errors = dict(stats.errors)
        stuck = len(stats.stuck) + len(self.streaming.in_flight_at_stop)
        if stuck:
            errors[STUCK.format(deadline=self.deadline_s)] = stuck
        return StreamStatsView(errors, stats.completed, stats.dropped, stats.latency_ms.get("p50"),
                               stats.latency_ms.get("p99"))


def users_for(rate_per_s: float) -> int:
    """The streams an open-loop rate is spread over: one per 5 requests/s, 2 to 16."""
    return max(2, min(16, int(rate_per_s / 5)))


class StreamingTraffic:
    """Streamed traffic for a fault experiment (a context manager): open loop, `rate_per_s`
    requests per second spread round-robin over `users` streams, or closed loop, `concurrency`
    streams each sending its next request when the last one ended. `stop()` ends it early (the
    clients close their streams, as clients behind a draining load balancer do)."""

    def __init__(self, grpc_url: str, plan: StreamingPlan, rate_per_s: float | None = None, *,
                 concurrency: int | None = None, headers: Any = None, late_drop_s: float = 1.0,
                 users: int | None = None, max_tokens: int = STREAM_TOKENS, deadline_s: float = STREAM_DEADLINE_S,
                 keep_records: int = 0, reconnect: bool = True) -> None:
        self.deadline_s = deadline_s
        if rate_per_s is not None:
            users = users or users_for(rate_per_s)
        self.load = StreamingLoad(grpc_url, plan, rate=rate_per_s, concurrency=concurrency, users=users,
                                  max_tokens=max_tokens, deadline_s=deadline_s, headers=headers,
                                  late_drop_s=late_drop_s, timeline_bin_s=Timeline.DEFAULT_BIN_S,
                                  keep_records=keep_records, reconnect=reconnect)
        self.result: StreamingTrafficResult | None = None

    def __enter__(self) -> StreamingTraffic:
        self.load.start()
        if not self.load.wait_started():
            raise TimeoutError("the streamed traffic did not start within 10 s")
        if self.load._error is not None:  # the streams could not be opened
            raise self.load._error
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> StreamingTrafficResult:
        """End the traffic (once): the requests in flight finish or reach their deadline."""
        if self.result is None:
            result = self.load.stop()
            self.result = StreamingTrafficResult(result, result.timeline, self.deadline_s)
        return self.result

    def event(self, name: str) -> None:
        self.load.event(name)

    def elapsed_s(self) -> float:
        return self.load.elapsed_s()

    def timeline_so_far(self):
        timeline = self.load.timeline
        return timeline.snapshot() if timeline is not None else ([], [])

    @property
    def in_flight(self) -> int:
        return self.load.in_flight

    def in_flight_sent_before(self, t: float) -> int:
        """Requests still waiting for their final response that were sent before monotonic `t`."""
        return self.load.in_flight_sent_before(t)

    def tokens_so_far(self) -> int:
        return self.load.tokens_so_far()


class StreamingProber:
    """Streamed requests spread over a decoupled model's instances: `2 x instances` concurrent
    streams for at least `span_s` (see `InstanceProber` for why a span), every answer compared with
    the reference answer to the same prompt once one was taken (`take_reference`)."""

    def __init__(self, grpc_url: str, plan: StreamingPlan, instances: int, span_s: float = 1.5,
                 headers: Any = None, timeout_s: float = 5.0) -> None:
        self.grpc_url = grpc_url
        self.plan = plan
        self.model = plan.model
        self.instances = instances
        self.span_s = span_s
        self.headers = headers
        self.timeout_s = timeout_s
        self.reference: list[str] | None = None

    def _ask(self) -> Any:
        return stream_once(self.grpc_url, self.plan, PROBE_TEXT, PROBE_TOKENS, timeout_s=self.timeout_s,
                           headers=self.headers)

    def take_reference(self) -> bool:
        """Remember one healthy answer to the probe prompt."""
        answer = self._ask()
        if answer.final and answer.error is None:
            self.reference = list(answer.text)
        return self.reference is not None

    def answers(self, client: Any = None, protocol: str | None = None) -> bool:
        """One streamed request answered with its final response (and the reference answer, once
        one was taken). `client` and `protocol` are not used: every probe opens its own gRPC stream."""
        del client, protocol
        answer = self._ask()
        return answer.final and answer.error is None and (self.reference is None or answer.text == self.reference)

    def probe(self, span_s: float | None = None) -> InstanceProbe:
        load = StreamingLoad(self.grpc_url, self.plan, concurrency=2 * self.instances,
                             duration_s=self.span_s if span_s is None else span_s, deadline_s=self.timeout_s,
                             prompts=lambda n: (PROBE_TEXT, PROBE_TOKENS), keep_records=100_000, keep_text=True,
                             headers=self.headers)
        result = load.run()
        return judge_probe(self.model, result, self.reference, self.timeout_s)

    def close(self) -> None:
        """Nothing to close: each probe's streams end with it."""


def judge_probe(model: str, result: StreamingResult, reference: list[str] | None, deadline_s: float) -> InstanceProbe:
    """One probe round's records as an InstanceProbe: answered with the final response (and the
    reference answer), or an error by reason, a wrong answer, or no final response."""
    probe = InstanceProbe(model, 0, 0)

    def fail(reason: str) -> None:
        probe.errors[reason] = probe.errors.get(reason, 0) + 1
        match = UNHEALTHY_STUB.search(reason)
        if match and match.group("instance") not in probe.unhealthy_instances:
            probe.unhealthy_instances.append(match.group("instance"))

    for record in result.records:
        probe.sent += 1
        if record.error is not None:
            fail(record.error)
        elif not record.final:
            fail(STUCK.format(deadline=deadline_s))
        elif reference is not None and record.text != reference:
            probe.wrong_answers += 1
            fail("wrong answer: the tokens differ from the healthy reference for the same prompt")
        else:
            probe.ok += 1
    for _ in result.in_flight_at_stop:
        probe.sent += 1
        fail(STUCK.format(deadline=deadline_s))
    return probe


def run_streaming_fault(faults: Any, check: CheckRecorder, experiment: Any, model: str, **options: Any) -> Any:
    """Run a streaming fault experiment (faults/stream_experiments.py) through the one skeleton with
    the check's token budget and deadline, and record its timeline; INCOMPLETE with the reason when
    it could not judge anything."""
    outcome = run_experiment(experiment(faults, model, max_tokens=int(check.threshold("streaming_max_tokens").value),
                                        deadline_s=check.threshold("streaming_final_deadline_s").value, **options))
    record_outcome(check, outcome)
    if outcome.incomplete:
        check.incomplete(outcome.incomplete)
    return outcome
