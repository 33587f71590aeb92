"""Files every outcome of a run of traffic (event-loop thread only) into the overall tallies, the
open measurement window and the timeline, and notes the first sighting of each error reason."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .stats import Stats, Tally, merged
from .timeline import Timeline


@dataclass
class Sighting:
    """The first time an error reason was seen for a model, warm-up included: seconds since the
    traffic started, wall-clock time, and how many requests (of every model) had completed before
    it; `count` is every occurrence."""

    t_s: float
    wall: float
    completed_before: int
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"t_s": round(self.t_s, 3), "wall": round(self.wall, 3), "completed_before": self.completed_before,
                "count": self.count}

class Recorder:
    """Receives every outcome (event-loop thread only) and files it into the overall tallies, the
    open window and the timeline."""

    def __init__(self, models: list[str], start: float, warmup_s: float, window_s: float | None,
                 timeline: Timeline | None, keep_tallies: int = 3) -> None:
        self.models = models
        self.start = start
        self.measure_from = start + warmup_s
        self.window_s = window_s
        self.timeline = timeline
        self.overall = {m: Tally(started=self.measure_from) for m in models}
        self.window_index = 0
        self.window = self._new_window()
        self.recent_tallies: deque[dict[str, Tally]] = deque(maxlen=keep_tallies)
        self._cpu_mark = time.process_time()
        self._overall_cpu_from = None
        self.completed = 0  # every answer or error, warm-up included
        self.sightings: dict[str, dict[str, Sighting]] = {m: {} for m in models}

    def _new_window(self) -> dict[str, Tally]:
        begin = self.measure_from + self.window_index * (self.window_s or 0)
        return {m: Tally(started=begin) for m in self.models}

    def ok(self, model: str, now: float, latency_s: float) -> None:
        self.completed += 1
        if self.timeline is not None:
            self.timeline.ok(now, latency_s)
        if now >= self.measure_from:
            self.overall[model].ok(latency_s)
            self.window[model].ok(latency_s)

    def error(self, model: str, now: float, reason: str) -> None:
        seen = self.sightings.setdefault(model, {})
        if reason in seen:
            seen[reason].count += 1
        else:
            seen[reason] = Sighting(now - self.start, time.time() - (time.monotonic() - now), self.completed)
        self.completed += 1
        if self.timeline is not None:
            self.timeline.error(now)
        if now >= self.measure_from:
            self.overall[model].error(reason)
            self.window[model].error(reason)

    def drop(self, model: str, now: float) -> None:
        if self.timeline is not None:
            self.timeline.drop(now)
        if now >= self.measure_from:
            self.overall[model].drop()
            self.window[model].drop()

    def late(self, model: str, now: float) -> None:
        """A request sent (or dropped) behind its schedule: the load generator fell behind."""
        if now >= self.measure_from:
            self.overall[model].late_sends += 1
            self.window[model].late_sends += 1

    def lag(self, now: float, lag_s: float) -> None:
        """One overshoot of the event loop's periodic timer, booked once (on the first model)."""
        if now >= self.measure_from:
            first = self.models[0]
            self.overall[first].lag(lag_s)
            self.window[first].lag(lag_s)

    def warmup_over(self, now: float) -> bool:
        if now < self.measure_from:
            return False
        if self._overall_cpu_from is None:
            self._overall_cpu_from = self._cpu_mark = time.process_time()
        return True

    def roll(self, now: float) -> list[tuple[int, float, float, dict[str, Tally]]]:
        """Close every window that ended by `now`: [(index, start_s, end_s, tallies by model)]."""
        closed = []
        if not self.warmup_over(now) or self.window_s is None:
            return closed
        while now >= self.measure_from + (self.window_index + 1) * self.window_s:
            begin = self.window_index * self.window_s
            end = begin + self.window_s
            cpu = time.process_time()
            tallies = self.window
            for tally in tallies.values():
                tally.ended = self.measure_from + end
            share = cpu - self._cpu_mark
            self._cpu_mark = cpu
            first = next(iter(tallies.values()))
            first.client_cpu_s = share  # the process's CPU, booked once per window
            self.recent_tallies.append(tallies)
            closed.append((self.window_index, begin, end, tallies))
            self.window_index += 1
            self.window = self._new_window()
        return closed

    def finish(self, now: float) -> None:
        self.warmup_over(now)
        for tally in self.overall.values():
            tally.ended = max(now, self.measure_from)
        if self._overall_cpu_from is not None:
            first = next(iter(self.overall.values()))
            first.client_cpu_s = time.process_time() - self._overall_cpu_from
        if self.timeline is not None:
            self.timeline.finish(now)


def summarize(tallies: Mapping[str, Tally], duration_s: float) -> tuple[Stats, dict[str, Stats]]:
    by_model = {m: t.summary(duration_s) for m, t in tallies.items()}
    return merged(tallies.values()).summary(duration_s), by_model
