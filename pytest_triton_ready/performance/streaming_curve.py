"""PERF-2 for a decoupled model: output tokens/s and TTFT p99 against concurrency 1, 2, 4 ...
`streaming_curve_max_concurrency`. Each point is measured until its question is decided (TTFT p99
within the SLO or not, and its success rate: load/streaming/looks.py), each at its share of the
curve's error budget (StreamingLooks.shares: the sweep's points), then the curve is judged
(load/streaming_rules.judge_stream_curve) and recorded with each point's interval in its charts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .. import progress
from ..facts import StreamingCapacity
from ..load.confidence import Estimate, finite
from ..load.decision import PASS, UNDECIDED
from ..load.streaming.confidence import success_rule, ttft_rule
from ..load.streaming.stats import StreamStats, report_stuck
from .streaming_rules import CurveVerdict, StreamingPoint, capacity_is_lower_bound, enough_valid, judge_stream_curve

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder


@dataclass
class SweptPoint:
    """One concurrency of the sweep: the judged point, its stats, and the look it stopped at."""

    point: StreamingPoint
    stats: StreamStats
    decided_at_s: float | None

    @property
    def tokens_per_request(self) -> float | None:
        return self.stats.output_tokens / self.stats.completed if self.stats.completed else None


def concurrencies(top: int) -> list[int]:
    """1, 2, 4 ... up to `top`."""
    found, c = [], 1
    while c <= top:
        found.append(c)
        c *= 2
    return found


def sweep_streams(streaming: Any, model: str, ttft_budget_ms: float, models_left: int = 1) -> list[SweptPoint]:
    """Measure every concurrency of the sweep for `model`, each recorded on the check as it comes."""
    check, plan = streaming.check, streaming.plan(model)
    point_s = streaming.n("streaming_curve_point_s")
    steps = concurrencies(int(streaming.n("streaming_curve_max_concurrency")))
    rules = [ttft_rule(ttft_budget_ms), success_rule(streaming.n("success_rate_min"))]
    swept = []
    for index, concurrency in enumerate(steps):
        progress.step(f"{model}: {concurrency} streams (point {index + 1} of {len(steps)}, {point_s:g} s, longer "
                      "while undecided)")
        looks = streaming.looks(point_s, parts=(len(steps) - index) + (models_left - 1) * len(steps))
        looks = replace(looks, shares=len(steps))  # "some point within the SLO": a union over the points
        result = streaming.measure(plan, rules, looks, concurrency=concurrency,
                                   warmup_s=streaming.warmup_s(model))
        point = StreamingPoint.measured(concurrency, result.stats, success_min=streaming.n("success_rate_min"),
                                    min_requests=looks.min_requests, level=looks.level, window_s=looks.window_s,
                                    shown_level=looks.confidence)
        swept.append(SweptPoint(point, result.stats, result.decided_at_s))
        record_point(check, model, swept[-1], looks.describe(result.decided_at_s))
    return swept


def record_point(check: CheckRecorder, model: str, swept: SweptPoint, length: str) -> None:
    c, stats, point = swept.point.concurrency, swept.stats, swept.point
    check.measure(f"output tokens/s at concurrency {c}", round(stats.output_tokens_per_s, 2), "tokens/s", model=model)
    check.measure(f"TTFT p99 at concurrency {c}", stats.ttft_ms["p99"], "ms", model=model)
    check.measure(f"requests/s at concurrency {c}", round(stats.requests_per_s, 2), "requests/s", model=model)
    check.measure(f"requests completed at concurrency {c}", stats.completed, "requests", model=model)
    check.measure(f"success rate at concurrency {c}", stats.success_rate, "ratio", model=model)
    check.evidence(f"{model}: concurrency {c} measurement length", length)
    if point.problem:
        check.finding(f"{model}: concurrency {c} does not count for the capacity: {point.problem}",
                      severity="warning", model=model)
    for reason, count in stats.errors.items():
        check.evidence(f"{model} errors at concurrency {c}", f"{count} x {reason}")
    if stats.stuck:
        report_stuck(check, model, stats.stuck, limit=3)


def interval_series(name: str, points: Sequence[StreamingPoint], estimate_of: Any) -> dict[str, list[tuple[float, float]]]:
    """The '<name> 95% interval low/high' series of the points whose estimate has an interval,
    as the unary curve chart draws them."""
    with_interval = [(p.concurrency, e) for p in points if (e := estimate_of(p)) is not None and e.interval is not None]
    if not with_interval:
        return {}
    level = f"{with_interval[0][1].interval.level:.0%}"
    return {f"{name} {level} interval low": [(c, round(e.interval.low, 4)) for c, e in with_interval],
            f"{name} {level} interval high": [(c, round(e.interval.high, 4)) for c, e in with_interval
                                              if finite(e.interval.high) is not None]}


def stream_curve_charts(points: Sequence[StreamingPoint], ttft_budget_ms: float) -> dict[str, dict[str, list]]:
    """The tokens/s and TTFT p99 charts' series, each point with its interval."""
    def tokens(p: StreamingPoint) -> Estimate | None:
        return p.tokens

    def ttft(p: StreamingPoint) -> Estimate | None:
        return p.ttft

    return {
        "tokens": {"tokens/s": [(p.concurrency, round(p.tokens_per_s, 2)) for p in points],
                   **interval_series("tokens/s", points, tokens)},
        "ttft": {"TTFT p99": [(p.concurrency, p.ttft_p99_ms) for p in points if p.ttft_p99_ms is not None],
                 **interval_series("TTFT p99", points, ttft),
                 "SLO": [(points[0].concurrency, ttft_budget_ms), (points[-1].concurrency, ttft_budget_ms)]},
    }


def record_stream_curve(check: CheckRecorder, model: str, swept: Sequence[SweptPoint], ttft_budget_ms: float) -> CurveVerdict:
    """Judge the curve and record its charts, knee, margins and falls; returns the verdict."""
    points = [s.point for s in swept]
    verdict = judge_stream_curve(points, ttft_budget_ms, check.threshold("curve_knee_fraction").value,
                          check.threshold("curve_drop_tolerance").value)
    charts = stream_curve_charts(points, ttft_budget_ms)
    check.chart(f"{model}: output tokens/s against concurrency", "concurrency (streams)", "output tokens/s",
                charts["tokens"])
    check.chart(f"{model}: TTFT p99 against concurrency", "concurrency (streams)", "TTFT p99 (ms)", charts["ttft"])
    check.measure("knee concurrency", verdict.knee, "streams", model=model)
    for c, judged in verdict.ttft:
        margin = f" (margin {judged.margin:+.4g} ms)" if judged.margin is not None else ""
        check.evidence(f"{model}: TTFT p99 at concurrency {c}: margin", f"{judged.describe()}: {judged.outcome}{margin}")
    for c_from, c_to, judged in verdict.unsure_drops:
        check.finding(f"{model}: output tokens/s fell from {c_from} to {c_to} streams by more than "
                      f"curve_drop_tolerance, within the noise ({UNDECIDED}: {judged.describe()})",
                      severity="warning", model=model)
    for c_from, c_to, before, after in verdict.drops:
        check.finding(f"{model}: output tokens/s fell from {before:.0f} at {c_from} streams to {after:.0f} at "
                      f"{c_to}, before the knee", model=model, rule="curve-collapse")
    return verdict


def record_stream_capacity(check: CheckRecorder, model: str, swept: Sequence[SweptPoint], verdict: CurveVerdict,
                    ttft_budget_ms: float, instances: int) -> tuple[StreamingCapacity, str | None]:
    """Record the best point within the TTFT SLO; returns the capacity fact and why the check
    cannot decide (no point decided within the SLO while one is too close to call), or None."""
    points, best = [s.point for s in swept], verdict.best_within
    undecided = None
    check.measure("max output tokens/s within TTFT SLO", round(best.tokens_per_s, 2) if best else 0.0, "tokens/s",
                  model=model)
    if best is None and verdict.too_close:
        undecided = (f"{model}: {UNDECIDED}: no concurrency decided within the TTFT SLO; "
                     + "; ".join(f"at {c} streams {j.describe()}" for c, j in verdict.too_close))
    elif best is None:
        check.finding(f"{model}: no valid concurrency keeps TTFT p99 within {ttft_budget_ms:g} ms "
                      f"(at 1 stream it is {points[0].ttft_p99_ms} ms)", model=model)
    else:  # best_within is a point whose TTFT p99 interval lies within the SLO: its judgement says so
        check.judge("capacity-within-ttft-slo", verdict.best_ttft is not None and verdict.best_ttft.outcome == PASS,
                    measured=f"TTFT p99 at {len(points)} concurrencies; at {best.concurrency} streams "
                             + (verdict.best_ttft.describe() if verdict.best_ttft else "not judged"), model=model)
    at_best = next((s for s in swept if best is not None and s.point is best), None)
    best_rps = at_best.stats.requests_per_s if at_best else 0.0
    lower_bound = capacity_is_lower_bound(points, best, check.threshold("curve_min_gain").value)
    check.measure("max requests/s within TTFT SLO", round(best_rps, 2), "requests/s", model=model)
    check.measure("capacity is a lower bound", "yes" if lower_bound else "no", model=model)
    if lower_bound:
        check.finding(f"{model}: capacity >= {best.tokens_per_s:.0f} output tokens/s: tokens/s still rose within "
                      f"the TTFT SLO at the sweep's top ({best.concurrency} streams, "
                      "streaming_curve_max_concurrency)", severity="warning", model=model)
    per_request = at_best.tokens_per_request if at_best else None
    return StreamingCapacity(
        model, max_output_tokens_per_s_within_slo=round(best.tokens_per_s, 2) if best else 0.0,
        max_requests_per_s_within_slo=round(best_rps, 3),
        output_tokens_per_request=round(per_request, 2) if per_request else None,
        concurrency=best.concurrency if best else None,
        ttft_p99_ms=best.ttft_p99_ms if best else points[0].ttft_p99_ms,
        instances=instances, lower_bound=lower_bound), undecided


def not_enough_valid(model: str, swept: Sequence[SweptPoint], success_min: float, min_requests: int) -> str | None:
    """Why the sweep cannot place a knee or a capacity (too few valid points), or None."""
    points = [s.point for s in swept]
    if enough_valid(points):
        return None
    return (f"{model}: curve not valid: only {sum(p.trustworthy for p in points)} of {len(points)} curve points have "
            f">= {min_requests} completed requests, a success rate >= {success_min:g} and no stuck request")
