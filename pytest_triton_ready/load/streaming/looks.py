"""When a streaming measurement stops: once its rules are decided, as a unary one does
(load/stability.py's look schedule).

It looks at its rules on the unary schedule's rule (load/stability.py `look_schedule`): after its
configured length (`streaming_duration_s` for PERF-1, `streaming_curve_point_s` for a PERF-2 point),
then at twice as long each time, and at its longest: the window budget (`load_max_windows` x
`load_window_s`), or less where the run budget (the check's share, given by StreamingRun) leaves
less, never less than the configured length. Each look's intervals are at
1 - (1 - `load_confidence`) / looks (`look_level`), so that stopping at the first look that agrees
does not decide on luck. It stops at the first look where

- the success rate is decidedly below `success_rate_min` (whatever else: a failing model fails), or
- it is valid (at least `streaming_min_requests` completed requests) and every rule is settled
  (decided; a failure-only rule on its passing side);

else it goes on, and at its longest a rule still undecided is "too close to call" with its interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ... import budget
from ..decision import Judgement, Rule, decided_enough, judge
from ..stability import look_level, look_schedule
from .confidence import streaming_estimate


@dataclass(frozen=True)
class StreamingLooks:
    """The look schedule of one streaming measurement (seconds after its warm-up)."""

    first_s: float
    longest_s: float
    window_s: float = 0.5
    confidence: float = 0.95
    min_requests: int = 10
    shares: int = 1  # measurements whose claims are one union, sharing `confidence` (a curve's points)

    @classmethod
    def from_thresholds(cls, threshold: Any, first_s: float, parts: int = 1,
                        deadline: budget.Deadline = budget.UNBOUNDED) -> StreamingLooks:
        """The schedule from the named thresholds (`threshold(name).value`) for a measurement whose
        configured length is `first_s`, one of `parts` the check still has to measure (the run
        budget's share left, `deadline`, is split evenly among them)."""
        def value(name: str) -> float:
            return threshold(name).value

        window_s = value("load_window_s")
        longest = max(first_s, value("load_max_windows") * window_s)
        left = deadline.per_part(parts)
        if left is not None:
            longest = max(first_s, min(longest, left))
        return cls(first_s, longest, window_s, value("load_confidence"), int(value("streaming_min_requests")))

    @property
    def times_s(self) -> tuple[float, ...]:
        """The unary schedule's rule (`look_schedule`) in seconds: the configured length, twice as
        long each time, the longest (6 and 12 s for a 6 s measurement with 24 windows of 0.5 s;
        3, 6 and 12 s for 3 s)."""
        return look_schedule(self.first_s, self.longest_s)

    @property
    def level(self) -> float:
        """Each look's level (`look_level` over these looks and the measurements sharing the budget)."""
        return look_level(self.confidence, len(self.times_s), self.shares)

    def judge(self, rules: Sequence[Rule], stats: Any) -> list[Judgement]:
        """Every rule on the StreamStats, at the look's level, labelled with `confidence`."""
        judged = []
        for rule in rules:
            estimate = streaming_estimate(rule.statistic, stats, self.level, self.window_s)
            if estimate.interval is not None:
                estimate = replace(estimate, interval=replace(estimate.interval, level=self.confidence))
            judged.append(judge(rule, estimate, self.level))
        return judged

    def valid(self, stats: Any) -> bool:
        return stats.completed >= self.min_requests

    def decided(self, rules: Sequence[Rule], stats: Any) -> bool:
        """Whether the measurement may stop at this look (see the module's docstring)."""
        return decided_enough(self.judge(rules, stats), self.valid(stats))

    def describe(self, stopped_s: float | None) -> str:
        looks = ", ".join(f"{t:g}" for t in self.times_s)
        if stopped_s is None:
            return f"measured to its longest, {self.longest_s:g} s (looks at {looks} s)"
        return f"decided at the look after {stopped_s:g} s (looks at {looks} s)"
