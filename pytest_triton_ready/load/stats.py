"""Streaming latency statistics: HdrHistogram (constant memory whatever the duration), errors by
reason, and the summary a check reads (count, errors, dropped, percentiles, throughput).

Latencies are recorded in microseconds. With 3 significant digits a recorded value is off by at
most 1/1024 of itself (HdrHistogram's value-equivalence range), so every percentile here is
within 0.1% of the exact order statistic of the same samples.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour: nothing a load run waits for is longer
SIGNIFICANT_DIGITS = 3
RELATIVE_PRECISION = 2.0 ** -10  # 3 significant digits: sub-bucket of 2048 values, half-resolution 1/1024
PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)


def percentile_key(p: float) -> str:
    """'p50', 'p99', 'p99.9'."""
    return "p" + (f"{p:g}")


class LatencyHistogram:
    """Latencies in microseconds in one HdrHistogram; merge with `add`, ship with `encode`."""

    def __init__(self, significant_digits: int = SIGNIFICANT_DIGITS) -> None:
        self.hist = HdrHistogram(LOWEST_US, HIGHEST_US, significant_digits)
        self.total_us = 0  # exact sum, for the mean (HdrHistogram's own mean walks every bucket)

    def record_s(self, seconds: float) -> None:
        value = min(HIGHEST_US, max(LOWEST_US, int(seconds * 1e6 + 0.5)))
        self.hist.record_value(value)
        self.total_us += value

    @property
    def count(self) -> int:
        return self.hist.get_total_count()

    def percentile_ms(self, p: float) -> float | None:
        if not self.count:
            return None
        return self.hist.get_value_at_percentile(p) / 1000.0

    def percentiles_ms(self, percentiles: tuple[float, ...] = PERCENTILES) -> dict[str, float | None]:
        """Several percentiles in one pass over the buckets."""
        if not self.count:
            return {percentile_key(p): None for p in percentiles}
        values = self.hist.get_percentile_to_value_dict(list(percentiles))
        return {percentile_key(p): values[p] / 1000.0 for p in percentiles}

    def mean_ms(self) -> float | None:
        return self.total_us / self.count / 1000.0 if self.count else None

    def max_ms(self) -> float | None:
        return self.hist.get_max_value() / 1000.0 if self.count else None

    def add(self, other: LatencyHistogram) -> None:
        if other.count:
            self.hist.add(other.hist)
            self.total_us += other.total_us

    def reset(self) -> None:
        self.hist.reset()
        self.total_us = 0

    def encode(self) -> str:
        """Compressed text form (HdrHistogram's V2 encoding), for worker processes and JSON."""
        return self.hist.encode().decode("ascii") if self.count else ""

    @classmethod
    def decode(cls, text: str, total_us: int = 0) -> LatencyHistogram:
        histogram = cls()
        if text:
            histogram.hist.add(HdrHistogram.decode(text.encode("ascii")))
            histogram.total_us = total_us
        return histogram


@dataclass
class Tally:
    """What happened to requests over some span of time: successes with their latencies, errors
    by reason, requests dropped because they could not be sent on time."""

    histogram: LatencyHistogram = field(default_factory=LatencyHistogram)
    errors: Counter = field(default_factory=Counter)
    dropped: int = 0
    started: float = 0.0  # monotonic seconds
    ended: float = 0.0
    client_cpu_s: float = 0.0
    # The load generator's own health (load/client_health.py): sends behind schedule, and the
    # event loop's lag (a periodic timer's overshoot), booked once per loop like the CPU.
    late_sends: int = 0
    loop_lag: LatencyHistogram | None = None

    def lag(self, seconds: float) -> None:
        if self.loop_lag is None:
            self.loop_lag = LatencyHistogram()
        self.loop_lag.record_s(seconds)

    def ok(self, latency_s: float) -> None:
        self.histogram.record_s(latency_s)

    def error(self, reason: str) -> None:
        self.errors[reason] += 1

    def drop(self, n: int = 1) -> None:
        self.dropped += n

    def merge(self, other: Tally) -> None:
        self.histogram.add(other.histogram)
        self.errors.update(other.errors)
        self.dropped += other.dropped
        self.client_cpu_s += other.client_cpu_s
        self.late_sends += other.late_sends
        if other.loop_lag is not None and other.loop_lag.count:
            if self.loop_lag is None:
                self.loop_lag = LatencyHistogram()
            self.loop_lag.add(other.loop_lag)
        self.started = min(self.started, other.started) if self.started else other.started
        self.ended = max(self.ended, other.ended)

    def summary(self, duration_s: float | None = None) -> Stats:
        duration = duration_s if duration_s is not None else max(0.0, self.ended - self.started)
        ok = self.histogram.count
        sent = ok + sum(self.errors.values())
        lag = self.loop_lag is not None and self.loop_lag.count
        return Stats(
            count_ok=ok,
            errors=dict(self.errors),
            dropped=self.dropped,
            duration_s=duration,
            throughput_infer_s=ok / duration if duration > 0 else 0.0,
            percentiles_ms=self.histogram.percentiles_ms(),
            mean_ms=self.histogram.mean_ms(),
            max_ms=self.histogram.max_ms(),
            client_cpu_us_per_request=(self.client_cpu_s * 1e6 / sent) if sent else None,
            client_cpu_s=self.client_cpu_s,
            late_sends=self.late_sends,
            loop_lag_max_ms=self.loop_lag.max_ms() if lag else None,
            loop_lag_p99_ms=self.loop_lag.percentile_ms(99.0) if lag else None,
        )

    def to_wire(self) -> dict[str, Any]:
        return {"histogram": self.histogram.encode(), "total_us": self.histogram.total_us, "errors": dict(self.errors),
                "dropped": self.dropped,
                "started": self.started, "ended": self.ended, "client_cpu_s": self.client_cpu_s,
                "late_sends": self.late_sends, "loop_lag": self.loop_lag.encode() if self.loop_lag is not None else "",
                "loop_lag_total_us": self.loop_lag.total_us if self.loop_lag is not None else 0}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Tally:
        return cls(LatencyHistogram.decode(data["histogram"], data.get("total_us", 0)), Counter(data["errors"]), data["dropped"],
                   data["started"], data["ended"], data["client_cpu_s"], data.get("late_sends", 0),
                   _lag_from_wire(data.get("loop_lag", ""), data.get("loop_lag_total_us", 0)))


def _lag_from_wire(text: str, total_us: int) -> LatencyHistogram | None:
    if not text:
        return None
    return LatencyHistogram.decode(text, total_us)


@dataclass
class Stats:
    """The numbers of a span of load: what a check compares with its thresholds.

    `throughput_infer_s` counts successful requests per second (each request is one inference of
    the configured batch size; multiply by it for samples/s). Percentiles are in milliseconds and
    None when nothing succeeded.
    """

    count_ok: int
    errors: dict[str, int]
    dropped: int
    duration_s: float
    throughput_infer_s: float
    percentiles_ms: dict[str, float | None]
    mean_ms: float | None = None
    max_ms: float | None = None
    client_cpu_us_per_request: float | None = None
    client_cpu_s: float = 0.0  # the load generator's process CPU time (all its processes)
    late_sends: int = 0  # sends more than LATE_SEND_S behind schedule (open loop), dropped ones included
    loop_lag_max_ms: float | None = None  # the event loop's lag: a periodic timer's overshoot
    loop_lag_p99_ms: float | None = None

    @property
    def client_cores(self) -> float | None:
        """The load generator's CPU time per second of the span (1.0: one core busy throughout)."""
        return self.client_cpu_s / self.duration_s if self.duration_s > 0 else None

    def client_health(self) -> dict[str, Any]:
        """The load generator's own health, with units in the names (JSON-ready)."""
        cores = self.client_cores
        return {"late_sends": self.late_sends, "loop_lag_max_ms": self.loop_lag_max_ms,
                "loop_lag_p99_ms": self.loop_lag_p99_ms, "cpu_s": round(self.client_cpu_s, 4),
                "cpu_cores": round(cores, 3) if cores is not None else None,
                "cpu_us_per_request": self.client_cpu_us_per_request}

    @property
    def count_errors(self) -> int:
        return sum(self.errors.values())

    @property
    def attempted(self) -> int:
        """Requests that should have been sent: successes, errors and drops."""
        return self.count_ok + self.count_errors + self.dropped

    @property
    def success_rate(self) -> float | None:
        return self.count_ok / self.attempted if self.attempted else None

    def p(self, name: str) -> float | None:
        """A percentile by name: 'p50', 'p99', 'p99.9'."""
        return self.percentiles_ms.get(name)

    @property
    def p50_ms(self) -> float | None:
        return self.percentiles_ms["p50"]

    @property
    def p99_ms(self) -> float | None:
        return self.percentiles_ms["p99"]

    def to_dict(self) -> dict[str, Any]:
        return {"count_ok": self.count_ok, "errors": self.errors, "dropped": self.dropped,
                "duration_s": round(self.duration_s, 3), "throughput_infer_s": round(self.throughput_infer_s, 2),
                "success_rate": self.success_rate, "percentiles_ms": self.percentiles_ms, "mean_ms": self.mean_ms,
                "max_ms": self.max_ms, "client_cpu_us_per_request": self.client_cpu_us_per_request,
                "client": self.client_health()}


def merged(tallies: Iterable[Tally]) -> Tally:
    total = Tally()
    for tally in tallies:
        total.merge(tally)
    return total
