"""Decisions of the streaming checks (checks/test_streaming.py), kept here to be unit-tested: which
SLO applies, when a streamed measurement is too short to judge, and where the tokens/s curve bends
or falls (on the points' confidence intervals, from load/streaming/confidence.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..load.confidence import Estimate
from ..load.decision import FAIL, PASS, UNDECIDED, Judgement, judge, relative_rule
from ..load.streaming.confidence import streaming_estimate, ttft_rule
from ..thresholds import THRESHOLDS, ThresholdValue
from .curve import knee

# slo key -> the named threshold used without it
SLO_KEYS = {
    "ttft_p99_ms": "streaming_ttft_p99_ms",
    "itl_p99_ms": "streaming_itl_p99_ms",
    "min_output_tokens_per_s": "streaming_min_output_tokens_per_s",
}


def streaming_slo(settings: Any, model: str) -> dict[str, ThresholdValue]:
    """The model's streaming objectives: `slo.<model>.<key>`, then `slo.default.<key>` from the
    YAML file (declared in settings.SloSection), then the named threshold (CLI, env, YAML thresholds, default)."""
    raw = (getattr(settings, "yaml", None) or {}).get("slo") or {} if settings is not None else {}
    own = (raw.get(model) or {}) if isinstance(raw, dict) else {}
    default = (raw.get("default") or {}) if isinstance(raw, dict) else {}
    chosen = {}
    for key, name in SLO_KEYS.items():
        unit = THRESHOLDS[name].unit
        if isinstance(own, dict) and own.get(key) is not None:
            chosen[key] = ThresholdValue(key, float(own[key]), unit, f"slo.{model}")
        elif isinstance(default, dict) and default.get(key) is not None:
            chosen[key] = ThresholdValue(key, float(default[key]), unit, "slo.default")
        else:
            chosen[key] = settings.threshold(name)
    return chosen


def measurement_problem(completed: int, success_rate: float | None, stuck: int, *, success_min: float,
                        min_requests: int) -> str | None:
    """Why a streaming measurement cannot stand for the model's capacity or SLO, or None: fewer than
    `min_requests` requests completed (its percentiles rest on too little), a success rate below
    `success_min`, or a stuck request (a stream whose final response never came)."""
    problems = []
    if completed < min_requests:
        problems.append(f"{completed} requests completed < minimum {min_requests} (streaming_min_requests)")
    if success_rate is None or success_rate < success_min:
        shown = "no request" if success_rate is None else f"{success_rate:.2%}"
        problems.append(f"success rate {shown} < {success_min:.2%} (success_rate_min)")
    if stuck:
        problems.append(f"{stuck} stuck requests")
    return "; ".join(problems) or None


@dataclass
class StreamingPoint:
    """One concurrency of the streaming sweep. `problem` (from `measurement_problem`) keeps a point
    out of the capacity: a point with failed, stuck or too few requests is not a capacity.
    `ttft` and `tokens`: the TTFT p99 and output tokens/s with their confidence intervals (measured
    points have them; without them a point's TTFT p99 is undecided, and a fall is judged on the values)."""

    concurrency: int
    tokens_per_s: float
    ttft_p99_ms: float | None
    problem: str | None = None
    ttft: Estimate | None = None
    tokens: Estimate | None = None

    @property
    def trustworthy(self) -> bool:
        return self.problem is None

    @property
    def throughput(self) -> float:
        return self.tokens_per_s

    @classmethod
    def measured(cls, concurrency: int, stats: Any, *, success_min: float, min_requests: int,
                 level: float = 0.95, window_s: float = 2.0, shown_level: float | None = None) -> StreamingPoint:
        """The point a StreamingLoad's StreamStats give at `concurrency`, its intervals at `level`
        from windows of about `window_s` (load/streaming/confidence.py), labelled `shown_level`
        (the measurement's confidence, where `level` is one look's) when given."""
        problem = measurement_problem(stats.completed, stats.success_rate, len(stats.stuck),
                                      success_min=success_min, min_requests=min_requests)
        if not getattr(stats, "samples", None):  # stats put together without per-request samples
            return cls(concurrency, stats.output_tokens_per_s, stats.ttft_ms["p99"], problem)
        return cls(concurrency, stats.output_tokens_per_s, stats.ttft_ms["p99"], problem,
                   _labelled(streaming_estimate("ttft p99", stats, level, window_s), shown_level),
                   _labelled(streaming_estimate("output tokens/s", stats, level, window_s), shown_level))


def _labelled(estimate: Estimate, level: float | None) -> Estimate:
    if level is None or estimate.interval is None:
        return estimate
    return replace(estimate, interval=replace(estimate.interval, level=level))


def enough_valid(points: Sequence[StreamingPoint]) -> bool:
    """At least half of the sweep's points, and two (one for a one-point sweep), meet the rules:
    fewer cannot place a knee or a capacity."""
    valid = sum(1 for p in points if p.trustworthy)
    return bool(points) and valid >= min(2, len(points)) and 2 * valid >= len(points)


@dataclass
class CurveVerdict:
    knee: int | None
    best_within: StreamingPoint | None
    drops: list[tuple[int, int, float, float]] = field(default_factory=list)  # (from c, to c, tps before, tps after)
    ttft: list[tuple[int, Judgement]] = field(default_factory=list)  # (concurrency, TTFT p99 judged on the budget)
    unsure_drops: list[tuple[int, int, Judgement]] = field(default_factory=list)  # falls inside the noise
    best_ttft: Judgement | None = None  # the TTFT p99 of `best_within`, judged within the budget

    @property
    def too_close(self) -> list[tuple[int, Judgement]]:
        """The points whose TTFT p99 is too close to the budget to call."""
        return [(c, j) for c, j in self.ttft if j.outcome == UNDECIDED]


def judge_stream_curve(points: Sequence[StreamingPoint], ttft_budget_ms: float, knee_fraction: float = 0.9,
                drop_tolerance: float = 0.1) -> CurveVerdict:
    """The knee (first point with `knee_fraction` of the top tokens/s: curve.knee, as for unary
    curves), the best tokens/s whose
    TTFT p99 is within the budget, and every fall of tokens/s by more than `drop_tolerance`
    between two points before the knee (a collapse where more streams should have helped).
    Only trustworthy points (enough requests, success rate met, nothing stuck) count. A point is
    within the budget only when its TTFT p99's interval is (one too close to call, or without an
    interval, is in `too_close`), and a fall counts only when the interval of after - (1 -
    drop_tolerance) x before lies below zero (one the noise may explain is in `unsure_drops`)."""
    points = [p for p in points if p.trustworthy]
    if not points:
        return CurveVerdict(None, None)
    bend = knee(points, knee_fraction)
    knee_at = bend.concurrency if bend is not None else None
    verdict = CurveVerdict(knee_at, None)
    within = []
    for p in points:
        judged = judge(ttft_rule(ttft_budget_ms), p.ttft or Estimate("ttft p99", p.ttft_p99_ms, None, 0))
        verdict.ttft.append((p.concurrency, judged))
        if judged.outcome == PASS:
            within.append((p, judged))
    if within:
        verdict.best_within, verdict.best_ttft = max(within, key=lambda pair: pair[0].tokens_per_s)
    for before, after in zip(points, points[1:], strict=False):
        if knee_at is not None and after.concurrency > knee_at:
            break
        fell = before.tokens_per_s > 0 and after.tokens_per_s < before.tokens_per_s * (1 - drop_tolerance)
        if fell and before.tokens is not None and after.tokens is not None:
            judged = judge(relative_rule(f"output tokens/s at {after.concurrency} streams", "output tokens/s", ">=",
                                         before.tokens, 1 - drop_tolerance, "tokens/s"), after.tokens)
            if judged.outcome != FAIL:
                verdict.unsure_drops.append((before.concurrency, after.concurrency, judged))
                continue
        if fell:
            verdict.drops.append((before.concurrency, after.concurrency, before.tokens_per_s, after.tokens_per_s))
    return verdict


def capacity_is_lower_bound(points: Sequence[StreamingPoint], best: StreamingPoint | None, min_gain: float) -> bool:
    """True when the best point within the SLO is the sweep's last and tokens/s still rose by at
    least `min_gain` (a fraction) from the point before: the capacity lies beyond the sweep."""
    if best is None or len(points) < 2 or best is not points[-1] or not points[-2].trustworthy:
        return False
    before = points[-2].tokens_per_s
    return before > 0 and best.tokens_per_s >= before * (1 + min_gain)
