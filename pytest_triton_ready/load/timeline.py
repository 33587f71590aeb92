"""A timeline of fixed bins (default 100 ms) with named events, for fault experiments: what
happened to requests around a reload, a kill or a SIGTERM.

A success or an error lands in the bin of its completion; a drop in the bin where it was found
late (at most `late_drop_s` after it was due). Only the open bin holds a (2-digit) histogram; closed bins keep their numbers, and at
most `max_bins` of them are kept (the oldest go first), so memory stays bounded on long runs.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from .stats import LatencyHistogram


@dataclass(frozen=True)
class Bin:
    t_s: float  # start of the bin, seconds since the traffic started
    ok: int
    errors: int
    dropped: int
    p50_ms: float | None
    p99_ms: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"t_s": round(self.t_s, 3), "ok": self.ok, "errors": self.errors, "dropped": self.dropped,
                "p50_ms": self.p50_ms, "p99_ms": self.p99_ms}


@dataclass(frozen=True)
class Event:
    t_s: float
    name: str


class Timeline:
    DEFAULT_BIN_S = 0.1
    DEFAULT_MAX_BINS = 36_000  # one hour of 100 ms bins

    def __init__(self, start: float, bin_s: float = DEFAULT_BIN_S, max_bins: int = DEFAULT_MAX_BINS) -> None:
        if bin_s <= 0:
            raise ValueError(f"timeline bin must be positive, got {bin_s}")
        self.start = start
        self.bin_s = bin_s
        self.bins: deque[Bin] = deque(maxlen=max_bins)
        self.events: list[Event] = []
        self._lock = threading.Lock()
        self._index = 0
        self._histogram = LatencyHistogram(significant_digits=2)
        self._ok = self._errors = self._dropped = 0

    # called from the event loop only
    def _advance(self, now: float) -> None:
        index = int((now - self.start) / self.bin_s)
        while self._index < index:
            self._close()

    def _close(self) -> None:
        h = self._histogram
        percentiles = h.percentiles_ms((50.0, 99.0))
        closed = Bin(self._index * self.bin_s, self._ok, self._errors, self._dropped,
                     percentiles["p50"], percentiles["p99"])
        with self._lock:
            self.bins.append(closed)
        self._index += 1
        if self._ok:
            h.reset()
        self._ok = self._errors = self._dropped = 0

    def ok(self, now: float, latency_s: float) -> None:
        self._advance(now)
        self._ok += 1
        self._histogram.record_s(latency_s)

    def error(self, now: float) -> None:
        self._advance(now)
        self._errors += 1

    def drop(self, now: float) -> None:
        self._advance(now)
        self._dropped += 1

    def tick(self, now: float) -> None:
        self._advance(now)

    def finish(self, now: float) -> None:
        """Close every bin up to `now`, and the partial last one."""
        self._advance(now)
        if self._ok or self._errors or self._dropped:
            self._close()

    # safe from any thread
    def event(self, name: str, at: float) -> Event:
        event = Event(at - self.start, name)
        with self._lock:
            self.events.append(event)
        return event

    def snapshot(self) -> tuple[list[Bin], list[Event]]:
        with self._lock:
            return list(self.bins), list(self.events)

    def chart_series(self) -> tuple[dict[str, list[tuple[float, float]]], list[dict[str, Any]]]:
        """(series, markers) for `check.chart(title, "time (s)", "latency (ms)", series,
        kind="timeline", markers=markers)`: p50/p99 per bin, and one marker per event."""
        bins, events = self.snapshot()
        series = {
            "p50 (ms)": [(round(b.t_s, 3), b.p50_ms) for b in bins if b.p50_ms is not None],
            "p99 (ms)": [(round(b.t_s, 3), b.p99_ms) for b in bins if b.p99_ms is not None],
            "errors per bin": [(round(b.t_s, 3), float(b.errors)) for b in bins],
            "dropped per bin": [(round(b.t_s, 3), float(b.dropped)) for b in bins],
        }
        return series, [{"x": round(e.t_s, 3), "label": e.name} for e in events]

    def to_dict(self) -> dict[str, Any]:
        bins, events = self.snapshot()
        return {"bin_s": self.bin_s, "bins": [b.to_dict() for b in bins],
                "events": [{"t_s": round(e.t_s, 3), "name": e.name} for e in events]}
