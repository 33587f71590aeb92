"""The throughput-latency curve: which concurrencies to sweep, where the knee is, the highest
throughput within the latency budget, and what is wrong with the curve's shape.

- Sweep: 1, 2, 4, ... up to 2 x max_batch_size x instances (the rule of thumb for saturation;
  a model without batching: 2 x instances, at least 8).
- Knee: the lowest concurrency whose throughput reaches `knee_fraction` (90%) of the curve's
  highest: past it, more concurrency buys latency, not throughput.
- Capacity: the highest throughput among trustworthy points whose p99 is within the budget and
  whose success rate meets the minimum.
- Sweep stop: past saturation (two points in a row over budget without a 5% throughput gain).
- Enough points: at least half of the points, and two, stable and valid; else no capacity.
- Shape problems: throughput falling by more than `drop_tolerance` as concurrency rises before
  the knee; p99 over the budget at a point whose throughput is still below the target load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CurvePoint:
    concurrency: int
    throughput_infer_s: float
    p50_ms: float | None
    p99_ms: float | None
    success_rate: float | None
    trustworthy: bool
    problem: str | None = None


def sweep_levels(max_batch_size: int, instances: int, cap: int = 0) -> list[int]:
    """1, 2, 4, ... up to the saturation rule of thumb (or `cap` when it is set and lower)."""
    top = 2 * max(1, max_batch_size) * max(1, instances)
    if max_batch_size <= 0:
        top = max(8, 2 * max(1, instances))
    if cap > 0:
        top = min(top, cap)
    levels, level = [], 1
    while level < top:
        levels.append(level)
        level *= 2
    levels.append(top)
    return levels


def past_saturation(points: Sequence[CurvePoint], budget_p99_ms: float, gain: float = 0.05) -> bool:
    """Stop sweeping once two trustworthy points in a row are over budget without a `gain` (5%)
    throughput rise: of the last three trustworthy points, each step gains less than 5% and the
    last two are over the p99 budget."""
    last = [p for p in points if p.trustworthy][-3:]
    if len(last) < 3:
        return False
    flat = all(b.throughput_infer_s < a.throughput_infer_s * (1 + gain) for a, b in zip(last, last[1:], strict=False))
    return flat and all(p.p99_ms and p.p99_ms > budget_p99_ms for p in last[1:])


def enough_trusted(points: Sequence[CurvePoint]) -> bool:
    """A curve counts when at least half of its points (and at least two) are stable and valid."""
    trusted = sum(1 for p in points if p.trustworthy)
    return trusted >= max(2, (len(points) + 1) // 2)


def knee(points: Sequence[CurvePoint], knee_fraction: float) -> CurvePoint | None:
    usable = [p for p in points if p.trustworthy]
    if not usable:
        return None
    best = max(p.throughput_infer_s for p in usable)
    return next(p for p in usable if p.throughput_infer_s >= knee_fraction * best)


def capacity(points: Sequence[CurvePoint], budget_p99_ms: float, success_min: float) -> CurvePoint | None:
    within = [p for p in points if p.trustworthy and p.p99_ms is not None and p.p99_ms <= budget_p99_ms
              and (p.success_rate or 0) >= success_min]
    return max(within, key=lambda p: p.throughput_infer_s) if within else None


def shape_problems(points: Sequence[CurvePoint], knee_point: CurvePoint | None, drop_tolerance: float,
                   budget_p99_ms: float, target_throughput: float | None) -> list[str]:
    problems = []
    usable = [p for p in points if p.trustworthy]
    if knee_point is not None:
        before = [p for p in usable if p.concurrency <= knee_point.concurrency]
        for prev, cur in zip(before, before[1:], strict=False):
            if cur.throughput_infer_s < prev.throughput_infer_s * (1 - drop_tolerance):
                problems.append(
                    f"throughput falls from {prev.throughput_infer_s:.0f} to {cur.throughput_infer_s:.0f} infer/s "
                    f"as concurrency rises from {prev.concurrency} to {cur.concurrency}, before the knee "
                    f"(concurrency {knee_point.concurrency})")
    if target_throughput is not None:
        for p in usable:
            if p.throughput_infer_s < target_throughput and p.p99_ms is not None and p.p99_ms > budget_p99_ms:
                problems.append(
                    f"p99 {p.p99_ms:.1f} ms exceeds the {budget_p99_ms:g} ms budget at concurrency {p.concurrency}, "
                    f"where throughput ({p.throughput_infer_s:.0f} infer/s) is still below the target load "
                    f"({target_throughput:g} infer/s): latency explodes before the target is reached")
                break
    return problems
