"""When a measurement counts: warm-up, windows, stability (perf_analyzer's rule) and validity
(MLPerf LoadGen's rule), and when it looks at its rules.

- Stability: over the last `stability_windows` (3) windows, max/min of the throughput and of the
  mean latency are each within 1 + `stability_tolerance` (10%), as perf_analyzer decides. For a
  measurement that judges rules it is evidence shown in the report, not a gate.
- Validity: the windows reported last at least `min_duration_s` and hold at least `min_requests`
  completed requests. It gates latency and throughput rules, never the success rate: a model that
  fails every request is judged on its success rate (`Rule.needs_validity`, load/decision.py).
- Looks: a measurement looks at its rules a few times (after 4, 8, 16 and 24 windows with
  the defaults: `look_windows`), each look at the level that keeps the whole measurement at
  `confidence` (Bonferroni over the looks): stopping at the first look that agrees would
  otherwise decide on luck. A look at an earlier measurement's windows on the same rules
  (`extra_looks`) counts among them, and measurements whose claims form one union (a curve's
  points: "some point keeps p99 within the budget") split the budget between them (`shares`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


def look_schedule(first: float, longest: float) -> tuple[float, ...]:
    """When a measurement looks at its rules, unary (in windows) or streamed (in seconds): at
    `first`, then at twice as long each time, and at `longest`. Few looks keep each look's
    interval narrow (`look_level`)."""
    looks, at = [], first
    while at < longest - 1e-9:
        looks.append(at)
        at *= 2
    return (*looks, longest)


def look_level(confidence: float, looks: int, shares: int = 1) -> float:
    """The level of each look's intervals, so that all looks of all the measurements that share
    the error budget together hold at `confidence`: 1 - (1 - confidence) / (looks x shares)
    (Bonferroni)."""
    return 1 - (1 - confidence) / (looks * shares)


@dataclass(frozen=True)
class MeasureRules:
    warmup_s: float = 1.0
    window_s: float = 0.5
    stability_windows: int = 3
    stability_tolerance: float = 0.10
    max_windows: int = 24
    min_duration_s: float = 2.0
    min_requests: int = 200
    confidence: float = 0.95
    extra_looks: int = 0  # looks at these rules before this measurement's own (a reused measurement's windows)
    shares: int = 1  # measurements whose claims are one union, sharing `confidence` (a curve's points)

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> MeasureRules:
        """The rules with every number taken from the named thresholds (so YAML/CLI can move them)."""
        def value(name: str) -> float:
            return settings.threshold(name).value

        rules = cls(
            warmup_s=value("load_warmup_s"), window_s=value("load_window_s"),
            stability_windows=int(value("load_stability_windows")),
            stability_tolerance=value("load_stability_tolerance"), max_windows=int(value("load_max_windows")),
            min_duration_s=value("load_min_duration_s"), min_requests=int(value("load_min_requests")),
            confidence=value("load_confidence"),
        )
        return cls(**{**rules.__dict__, **overrides})

    @property
    def look_windows(self) -> tuple[int, ...]:
        """After which windows a measurement looks at its rules (`look_schedule` from the first
        window count that can be valid, at least the second, to the window budget: 4, 8, 16 and 24
        with the defaults: 2, 4, 8 and 12 s)."""
        first = min(self.max_windows, max(2, math.ceil(self.min_duration_s / self.window_s - 1e-9)))
        return tuple(int(n) for n in look_schedule(first, self.max_windows))

    @property
    def looks(self) -> int:
        """The looks that share the error budget: the measurement's own, and `extra_looks` (the
        windows of an earlier measurement judged on the same rules first: LoadEngine.measure's
        `reuse`)."""
        return len(self.look_windows) + self.extra_looks

    @property
    def look_level(self) -> float:
        """The level of each look's intervals (`look_level`); they are labelled with `confidence`."""
        return look_level(self.confidence, self.looks, self.shares)

    def describe(self) -> str:
        return (f"warm-up {self.warmup_s:g} s, windows of {self.window_s:g} s, stable when the last "
                f"{self.stability_windows} windows' throughput and mean latency are within "
                f"{self.stability_tolerance:.0%} (max/min), valid with >= {self.min_duration_s:g} s and "
                f">= {self.min_requests} requests, at most {self.max_windows} windows; a judged rule is decided "
                f"when its {self.confidence:.0%} interval lies on one side of its threshold")


def stability(windows: Sequence[Any], rules: MeasureRules) -> tuple[bool, str]:
    """(stable?, why) for the last `rules.stability_windows` windows (each with `.stats`)."""
    n = rules.stability_windows
    if len(windows) < n:
        return False, f"only {len(windows)} of the {n} windows needed"
    last = [w.stats for w in windows[-n:]]
    throughputs = [s.throughput_infer_s for s in last]
    latencies = [s.mean_ms for s in last]
    if min(throughputs) <= 0 or any(v is None for v in latencies):
        return False, "a window completed no request"
    spread_t = max(throughputs) / min(throughputs) - 1
    spread_l = max(latencies) / min(latencies) - 1
    detail = (f"last {n} windows: throughput spread {spread_t:.1%}, mean latency spread {spread_l:.1%} "
              f"(limit {rules.stability_tolerance:.0%})")
    return spread_t <= rules.stability_tolerance and spread_l <= rules.stability_tolerance, detail


def validity(duration_s: float, requests: int, rules: MeasureRules) -> tuple[bool, str]:
    problems = []
    if duration_s + 1e-9 < rules.min_duration_s:
        problems.append(f"measured {duration_s:.2f} s < minimum {rules.min_duration_s:g} s")
    if requests < rules.min_requests:
        problems.append(f"{requests} requests < minimum {rules.min_requests}")
    if problems:
        return False, "; ".join(problems)
    return True, f"{duration_s:.2f} s and {requests} requests measured"
