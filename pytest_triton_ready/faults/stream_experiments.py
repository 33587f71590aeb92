"""PERF-4 on a decoupled (streaming) model, through the one fault skeleton (experiment.py):
SIGTERM with streams in flight (`StreamingSigterm`) and one python backend stub killed under
streams (`StreamingDeadStub`). Their traffic is `StreamingTraffic` (faults/stream_traffic.py); their
steady state is every stream producing tokens with no error (`timeline.streams_steady`).

- SIGTERM: sent the moment a stream is in flight; the clients keep their streams until the
  requests in flight at the signal have ended, then close them, as clients behind a draining load
  balancer do (on Triton 2.51 an open stream keeps its decoupled model loaded, and the server exits
  only at its exit timeout); then the exit is awaited. Nothing in flight at the signal: INCOMPLETE.
- Dead stub: the stub is SIGKILLed under closed-loop streams, the ready endpoints are polled for
  `DEAD_STUB_OBSERVE_S`; the restore (unload + load until every instance streams) is timed. No
  stream failed or hung after the kill: the kill did not take, INCOMPLETE.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..load.streaming.traffic import StreamingLoad
from ..server.client import http_status
from ..server.models import instance_count
from .experiment import Experiment, one_line
from .outcomes import NOTHING_IN_FLIGHT, Outcome
from .probes import wait_until
from .stream_traffic import StreamingTraffic
from .timeline import SteadyState, streams_steady

DEAD_STUB_OBSERVE_S = 3.0
STREAMS_START_S = 10.0  # the longest wait for every stream to produce its first tokens


@dataclass
class StreamOutcome(Outcome):
    """What every streaming fault experiment reads from its streams."""

    streams: int = 0  # concurrent streams (2 x instances)
    stream_errors: dict[str, int] = field(default_factory=dict)
    stuck: list[Any] = field(default_factory=list)  # load.streaming.StuckRequest: no final response
    left_hanging: int = 0  # stuck, or still without a final response when the traffic stopped


@dataclass
class StreamShutdownOutcome(StreamOutcome):
    """SIGTERM with streams in flight."""

    in_flight_at_sigterm: int = 0  # streams sent before the signal, not ended at it (from the records)
    in_flight_counted: int = 0  # the client's own count just before the signal
    finished: int = 0  # of those in flight at the signal: ended with the final response
    cut: list[tuple[str, int]] = field(default_factory=list)  # (id, tokens): stream closed before the final response
    failed: list[tuple[str, int, str]] = field(default_factory=list)  # (id, tokens, error): any other error
    drained_s: float | None = None  # until the streams in flight at the signal ended
    closed_s: float | None = None  # until the clients had closed their streams
    exit_s: float | None = None
    exit_code: int | None = None
    exit_timeout_s: float = 30.0
    server_log: str = ""


@dataclass
class DeadStubOutcome(StreamOutcome):
    """One python backend stub SIGKILLed under streams."""

    instance: str | None = None
    failed_requests: int = 0
    model_ready_while_dead: list[int | None] = field(default_factory=list)
    server_ready_while_dead: list[int | None] = field(default_factory=list)
    recovered_s: float | None = None  # the restore, until every instance streamed again

    @property
    def death_observed(self) -> bool:
        return self.failed_requests > 0 or self.left_hanging > 0


class _StreamExperiment(Experiment):
    """A fault on a server this run owns, under streams over `2 x instances` of the model."""

    refusal = "nothing is done to it"

    def __init__(self, injector: Any, model: str, *, max_tokens: int, deadline_s: float) -> None:
        super().__init__(model, injector.plan, injector.success_rate_min)
        self.injector = injector
        self.target = injector.target
        self.stream_plan = injector.streaming_plan(model)
        self.max_tokens = max_tokens
        self.deadline_s = deadline_s
        self.streams = 2 * instance_count(injector.client.model_config(model))
        self.outcome.streams = self.streams

    def unavailable(self) -> str | None:
        if self.injector.owns_process:
            return None
        return f"the server is attached ({self.target.launcher.name}), not owned by this run: {self.refusal}"

    @property
    def steady_s(self) -> float:
        return 0.0  # the steady state waits for every stream's first tokens

    @property
    def settle_s(self) -> float:
        return 0.0  # the fault observes what it needs itself

    @property
    def baseline_step(self) -> str:
        rate = f" at {self.rate_per_s:g} requests/s" if self.rate_per_s else ""
        return f"{self.streams} streams{rate}, until every stream produces tokens"

    @property
    def settle_step(self) -> str:
        return "observed; the streams end"

    def steady_state(self, traffic: Any) -> SteadyState:
        wait_until(lambda: traffic.tokens_so_far() >= self.streams, STREAMS_START_S, 0.05)
        bins, _ = traffic.timeline_so_far()
        return streams_steady(bins, traffic.tokens_so_far(), self.streams)

    def _traffic(self, **options: Any) -> StreamingTraffic:
        """Streams under the attach ceiling (policy.guard_traffic), as every load a check drives."""
        from ..policy import guard_traffic, policy  # policy reads the fault declarations: imported here

        streams = options.get("concurrency") or options.get("users")
        guard_traffic(policy(self.target.settings), concurrency=streams, rate=options.get("rate_per_s"))
        return StreamingTraffic(self.target.endpoints.grpc_url, self.stream_plan, headers=self.target.settings.headers,
                                late_drop_s=0.5, reconnect=False, **options)

    def _read_streams(self) -> Any:
        """The streaming result, its stuck requests and errors into the outcome (None: no traffic)."""
        outcome = self.outcome
        if outcome.traffic is None:
            return None
        result = outcome.traffic.streaming
        outcome.stream_errors = dict(result.stats.errors)
        outcome.stuck = list(result.stats.stuck)
        outcome.left_hanging = len(result.stats.stuck) + len(result.in_flight_at_stop)
        return result


class StreamingSigterm(_StreamExperiment):
    name = "streaming SIGTERM"
    outcome_type = StreamShutdownOutcome
    refusal = "no SIGTERM is sent"

    def __init__(self, injector: Any, model: str, *, max_tokens: int, deadline_s: float) -> None:
        super().__init__(injector, model, max_tokens=max_tokens, deadline_s=deadline_s)
        self.exit_timeout_s = float(getattr(self.target.launcher, "exit_timeout_s", 30))
        self.outcome.exit_timeout_s = self.exit_timeout_s
        self.sigterm_at: float | None = None

    @property
    def rate_per_s(self) -> float:
        return float(self.streams * 2)

    def prepare(self) -> None:
        self.target.client.reconnect()  # an idle keep-alive connection would hold the server until its exit timeout

    def open_traffic(self) -> Any:
        return self._traffic(rate_per_s=self.rate_per_s, users=self.streams, max_tokens=self.max_tokens * 4,
                             deadline_s=self.exit_timeout_s + 5, keep_records=100_000)

    def ready_for_fault(self, traffic: Any) -> str | None:
        return None if traffic.in_flight else "no stream was in flight"

    def fault(self, traffic: Any) -> None:
        outcome, processes = self.outcome, self.injector.processes
        outcome.in_flight_counted = traffic.in_flight
        self.sigterm_at = sigterm_at = time.monotonic()
        self.note_fault(traffic, "SIGTERM")
        self.injector.terminate_server()

        def exited() -> bool:
            return processes.exit_code() is not None

        wait_until(lambda: not traffic.in_flight_sent_before(sigterm_at) or exited(), self.exit_timeout_s, 0.05)
        outcome.drained_s = time.monotonic() - sigterm_at
        traffic.stop()
        outcome.closed_s = time.monotonic() - sigterm_at
        if wait_until(exited, max(0.0, self.exit_timeout_s + 10 - outcome.closed_s), 0.05) is not None:
            outcome.exit_s = time.monotonic() - sigterm_at
        outcome.exit_code = processes.exit_code()
        outcome.server_log = self.target.server_log(200)

    def verdict(self) -> None:
        result = self._read_streams()
        if result is None or self.sigterm_at is None:
            return
        at = self.sigterm_at
        outcome = self.outcome
        at_signal = [r for r in result.records if r.sent and r.sent < at and (r.end is None or r.end >= at)]
        cut = [r for r in at_signal if not r.final and r.error and "stream closed before the final response" in r.error]
        outcome.in_flight_at_sigterm = len(at_signal)
        outcome.finished = sum(1 for r in at_signal if r.final)
        outcome.cut = [(r.id, r.tokens) for r in cut]
        outcome.failed = [(r.id, r.tokens, r.error) for r in at_signal if not r.final and r not in cut]

    def exercised(self) -> str | None:
        return None if self.outcome.in_flight_at_sigterm else NOTHING_IN_FLIGHT

    def restore(self) -> str | None:
        return self.injector.restore(None) if self.fault_attempted else None


class StreamingDeadStub(_StreamExperiment):
    name = "streaming dead stub"
    outcome_type = DeadStubOutcome
    refusal = "no stub is killed"

    def __init__(self, injector: Any, model: str, *, max_tokens: int, deadline_s: float,
                 recovery_max_s: float) -> None:
        super().__init__(injector, model, max_tokens=max_tokens, deadline_s=deadline_s)
        self.recovery_max_s = recovery_max_s

    @property
    def rate_per_s(self) -> None:
        return None  # closed loop: every stream sends its next request when the last one ended

    def open_traffic(self) -> Any:
        return self._traffic(concurrency=self.streams, max_tokens=self.max_tokens * 4, deadline_s=self.deadline_s)

    def fault(self, traffic: Any) -> None:
        outcome, http = self.outcome, self.target.endpoints.http_url
        self.fault_attempted = True
        outcome.instance = self.injector.kill_stub(self.model).instance
        self.note_fault(traffic, f"SIGKILL {outcome.instance}")
        until = time.monotonic() + DEAD_STUB_OBSERVE_S
        while time.monotonic() < until:
            outcome.model_ready_while_dead.append(http_status(f"{http}/v2/models/{self.model}/ready"))
            outcome.server_ready_while_dead.append(http_status(f"{http}/v2/health/ready"))
            time.sleep(0.25)

    def verdict(self) -> None:
        result = self._read_streams()
        if result is not None:
            self.outcome.failed_requests = result.stats.count_errors

    def exercised(self) -> str | None:
        if self.outcome.instance is None or self.outcome.death_observed:
            return None
        return (f"no death was observed: after the kill of stub {self.outcome.instance} no stream failed or hung; the "
                "kill did not take, so the ready endpoints were not judged against a dead stub")

    def restore(self) -> str | None:
        """The server up and ready, and the model streaming on every instance: unload + load when it
        does not (the injector's own probe speaks unary inference, which decoupled models refuse)."""
        if not self.fault_attempted:
            return None
        started = time.monotonic()
        error = self._bring_back()
        self.outcome.recovered_s = time.monotonic() - started if error is None else None
        return error

    def restore_advice(self) -> str:
        return (f"{self.model} may be left with a dead stub: unload + load it (POST /v2/repository/models/"
                f"{self.model}/unload, then /load) or restart the server, then check one streamed request per instance")

    def _bring_back(self) -> str | None:
        error = self.injector.restore(None)
        if error:
            return error
        if self._streams_serve():
            return None
        try:
            self.injector.unload_and_load(self.model)
        except Exception as exc:  # said in the restore finding
            return f"unload + load of {self.model} failed: {one_line(exc)}"
        deadline = time.monotonic() + self.recovery_max_s
        while time.monotonic() < deadline:
            if self._streams_serve():
                return None
        return f"{self.model} did not stream on every instance within {self.recovery_max_s:g} s of unload + load"

    def _streams_serve(self) -> bool:
        """Every one of the streams gets complete answers for a second."""
        stats = StreamingLoad(self.target.endpoints.grpc_url, self.stream_plan, concurrency=self.streams,
                              duration_s=1.0, max_tokens=4, deadline_s=3.0,
                              headers=self.target.settings.headers).run().stats
        return stats.completed >= self.streams and not stats.errors and not stats.stuck
