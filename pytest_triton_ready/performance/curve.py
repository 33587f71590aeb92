"""The throughput-latency curve: which concurrencies to sweep, where the knee is, the highest
throughput within the latency budget, and what is wrong with the curve's shape.

- Sweep: 1, 2, 4, ... up to 2 x max_batch_size x instances (the rule of thumb for saturation;
  a model without batching: 2 x instances, at least 8), then on past it (`CapacitySearch`):
  doubling while throughput still rises by `min_gain` per doubling (confirmed against both points'
  intervals, where measured), p99 stays within the budget and no request fails, bounded by a
  maximum concurrency; where p99 left the budget between two doublings, bisecting between them
  while the throughput between them gains (else no point between can raise the capacity).
  A search stopped by the bound while throughput still rose finds a lower bound of the capacity,
  not the capacity. Before the rule of thumb, the sweep ends on a plateau: the last two
  doublings bought less than `min_gain` by value and no confirmed gain, unless the plateau is
  below the min_throughput target.
- A point stops once its questions are decided: p99 within the budget or not (moot once its
  throughput is decidedly below the capacity so far plus `min_gain`), the success rate, and a
  decided fall against the previous point; a p99 or fall question inside the point's noise that
  the window budget would not decide either ends the point undecided (load/decision.py `futile`):
  such a point is not within the budget, and such a drop is no fall.
- Knee: the lowest concurrency whose throughput reaches `knee_fraction` (90%) of the curve's
  highest: past it, more concurrency buys latency, not throughput.
- Capacity: the highest throughput among trustworthy points whose p99 is decidedly within the
  budget (its interval's top within it) and whose success rate meets the minimum; a point without
  an interval is undecided, never within (the report names such points).
- Sweep stop: past saturation (two points in a row over budget without a 5% throughput gain).
- Enough points: at least half of the points, and two, trustworthy (valid; stable too where the
  point judged no rules); else no capacity.
- Shape problems: throughput falling by more than `drop_tolerance` as concurrency rises before
  the knee, decidedly (against both points' confidence intervals, where measured); p99 over the
  budget at a point whose throughput is still below the target load.
- Within the budget: p99 at most the budget, and its interval's top too (no interval: undecided).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from ..load.confidence import Estimate, Interval, difference_interval, estimate, finite
from ..load.decision import Rule, relative_rule, slo_rules
from ..record.model import LoadPoint


class SweepPoint(Protocol):
    """What a point of any curve says: its concurrency, whether it counts, and its throughput (a
    unary CurvePoint's infer/s, a streamed StreamingPoint's output tokens/s)."""

    @property
    def concurrency(self) -> int: ...

    @property
    def trustworthy(self) -> bool: ...

    @property
    def throughput(self) -> float: ...


Point = TypeVar("Point", bound=SweepPoint)


@dataclass(frozen=True)
class CurvePoint:
    """One point of a sweep. `server_us`: the server's time per request in each stage (queue,
    compute_input, compute_infer, compute_output) over the same windows, when it was read. The
    intervals: the throughput's and the p99's confidence intervals over the point's windows (None:
    not computed)."""

    concurrency: int
    throughput_infer_s: float
    p50_ms: float | None
    p99_ms: float | None
    success_rate: float | None
    trustworthy: bool
    problem: str | None = None
    p90_ms: float | None = None
    p95_ms: float | None = None
    mean_ms: float | None = None
    server_us: Mapping[str, float | None] | None = None
    throughput_interval: Interval | None = None
    p99_interval: Interval | None = None
    client_limited: str | None = None  # 'limited by the load generator (...)': its throughput is a lower bound
    server_cpu_cores: float | None = None  # the server's process tree over the point (performance/server_cpu.py)

    @classmethod
    def measured(cls, concurrency: int, measurement: Any) -> CurvePoint:
        """The point a load engine Measurement (engine.py) gives at `concurrency`; a judged
        measurement's windows give the intervals too."""
        stats, server = measurement.stats, measurement.server_model
        throughput_interval = p99_interval = None
        if getattr(measurement, "judged", False):
            level, shown = measurement.rules.look_level, measurement.rules.confidence
            throughput_interval = _shown(estimate("throughput", measurement.windows, level, measurement.model), shown)
            p99_interval = _shown(estimate("p99", measurement.windows, level, measurement.model), shown)
        return cls(concurrency, stats.throughput_infer_s, stats.p50_ms, stats.p99_ms, stats.success_rate,
                   measurement.trustworthy, measurement.problem(), stats.p("p90"), stats.p("p95"), stats.mean_ms,
                   dict(server.stage_us) if server is not None else None, throughput_interval, p99_interval,
                   getattr(measurement, "client_limited", None))

    @property
    def throughput(self) -> float:
        return self.throughput_infer_s

    def throughput_estimate(self) -> Estimate:
        """The point's throughput with its interval, for a rule that compares another point with it."""
        return Estimate("throughput", self.throughput_infer_s, self.throughput_interval, 0)

    def within_budget(self, budget_p99_ms: float) -> bool:
        """p99 decidedly within the budget: the top of its interval within it. A point without an
        interval is undecided, never within (`undecided_within`)."""
        if self.p99_ms is None or self.p99_ms > budget_p99_ms or self.p99_interval is None:
            return False
        return self.p99_interval.high <= budget_p99_ms

    def for_report(self, model: str) -> LoadPoint:
        """The point as the report keeps it (Result.load_points, curves.csv)."""
        stage = (self.server_us or {}).get
        throughput, p99 = self.throughput_interval, self.p99_interval
        return LoadPoint(model, self.concurrency, round(self.throughput_infer_s, 2), self.p50_ms, self.p90_ms,
                         self.p95_ms, self.p99_ms, _rounded(self.mean_ms, 4), _rounded(stage("queue"), 1),
                         _rounded(stage("compute_input"), 1), _rounded(stage("compute_infer"), 1),
                         _rounded(stage("compute_output"), 1), self.success_rate, self.trustworthy,
                         _rounded(throughput.low if throughput else None, 2),
                         _rounded(throughput.high if throughput else None, 2),
                         _rounded(p99.low if p99 else None, 4), _rounded(p99.high if p99 else None, 4),
                         throughput.level if throughput else (p99.level if p99 else None))


def _shown(measured: Estimate, level: float) -> Interval | None:
    """The interval labelled with the measurement's overall confidence (computed at one look's)."""
    return replace(measured.interval, level=level) if measured.interval is not None else None


def _rounded(value: float | None, digits: int) -> float | None:
    return None if finite(value) is None else round(value, digits)


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


PLATEAU, OVER_BUDGET, ERRORS, BOUND, SATURATED, UNTRUSTED = (
    "throughput stopped rising", "p99 left the budget", "requests failed", "the maximum concurrency was reached",
    "past saturation", "the last point was not stable and valid")


@dataclass
class CapacitySearch:
    """Which concurrency to measure next, from the points measured so far (in order), and why the
    search ended. Feed every measured point to `next_level`; None means done (`reason` says why)."""

    max_batch_size: int
    instances: int
    budget_p99_ms: float
    success_min: float
    max_concurrency: int = 512
    min_gain: float = 0.05
    bisect_steps: int = 2
    target_throughput: float | None = None  # the min_throughput SLO: a plateau below it is swept on
    reason: str | None = None
    _rule_levels: list[int] | None = None
    _bisected: int = 0

    def __post_init__(self) -> None:
        self._rule_levels = sweep_levels(self.max_batch_size, self.instances, self.max_concurrency)

    @property
    def rule_of_thumb(self) -> int:
        return self._rule_levels[-1]

    @property
    def planned_points(self) -> int:
        """The most points the search can measure: the sweep to the rule of thumb, the doublings
        past it up to `max_concurrency`, and `bisect_steps`. Any of them may be the capacity, so
        "some point keeps p99 within the budget" is a union over them: each point's looks are at
        1 - (1 - confidence) / (looks x planned_points) (Bonferroni, MeasureRules.shares) for the
        curve to hold at `confidence`."""
        beyond, level = 0, self.rule_of_thumb
        while level * 2 <= self.max_concurrency:
            beyond, level = beyond + 1, level * 2
        return len(self._rule_levels) + beyond + self.bisect_steps

    def next_level(self, points: Sequence[CurvePoint]) -> int | None:
        measured = {p.concurrency for p in points}
        if points and past_saturation(points, self.budget_p99_ms, self.min_gain):
            return self._done(SATURATED)
        pending = [level for level in self._rule_levels if level not in measured]
        if pending and self._plateaued(points):
            return self._done(PLATEAU)
        if pending:
            return pending[0]
        return self._beyond_rule(points, measured)

    def _plateaued(self, points: Sequence[CurvePoint]) -> bool:
        """Throughput has stopped rising before the rule of thumb: the last two doublings together
        bought less than `min_gain` by value, and neither they nor the last one a confirmed gain
        (against both points' intervals, where measured). Both, because wide intervals on a busy
        machine confirm no gain even where the values rise several-fold. Past a
        plateau more concurrency only queues: the capacity, the knee and the shape before it are
        already measured. Not while the plateau is below the min_throughput target: the points
        past it say whether latency explodes below the target."""
        if not points:
            return False
        by_level = {p.concurrency: p for p in points if p.trustworthy}
        last = max(points, key=lambda p: p.concurrency)
        half, quarter = by_level.get(last.concurrency // 2), by_level.get(last.concurrency // 4)
        if not last.trustworthy or half is None or quarter is None:
            return False
        if self.target_throughput is not None and last.throughput_infer_s < self.target_throughput:
            return False
        flat = last.throughput_infer_s < quarter.throughput_infer_s * (1 + self.min_gain)
        return flat and not gains(quarter, last, self.min_gain) and not gains(half, last, self.min_gain)

    def point_rules(self, points: Sequence[CurvePoint], concurrency: int, drop_tolerance: float) -> list[Rule]:
        """What the point at `concurrency` must decide before it stops: p99 within the budget or
        not, the success rate, and against the nearest lower point measured, whether throughput
        fell by more than `drop_tolerance` (only a decided fall matters, against both points'
        noise). The search's gain question needs no longer measurement: the search goes on only
        while a gain is confirmed (`gains`). The p99 question matters only while the point may
        raise the capacity found so far by `min_gain`: once its throughput is decidedly below that,
        the point stops without deciding its p99 (it cannot be the capacity, and stays out of it).
        The p99 and the fall questions stop undecided where the window budget could not decide
        them either (`stop_when_futile`). Of the success rate only a decided failure matters
        (`failure_only`): deciding a minimum such as 0.999 takes thousands of clean requests
        (load/confidence.py `trials_needed`), a question for PERF-1 at its target load, not for
        every point of the curve."""
        rules = slo_rules(self.budget_p99_ms, self.success_min)
        rules[1] = replace(rules[1], failure_only=True)
        best = capacity(points, self.budget_p99_ms, self.success_min)
        raises = None
        if best is not None:
            raises = relative_rule("throughput above the capacity so far", "throughput", ">=",
                                   best.throughput_estimate(), 1 + self.min_gain, "infer/s")
        rules[0] = replace(rules[0], only_if=raises, stop_when_futile=True)
        below = [p for p in points if p.concurrency < concurrency and p.trustworthy]
        if below:
            previous = max(below, key=lambda p: p.concurrency).throughput_estimate()
            rules.append(replace(relative_rule("throughput against the previous point", "throughput", ">=", previous,
                                               1 - drop_tolerance, "infer/s", failure_only=True),
                                 stop_when_futile=True))
        return rules

    def _beyond_rule(self, points: Sequence[CurvePoint], measured: set[int]) -> int | None:
        by_level = sorted(points, key=lambda p: p.concurrency)
        last = by_level[-1]
        if not last.trustworthy:
            return self._done(UNTRUSTED)
        if (last.success_rate or 0) < self.success_min:
            return self._done(ERRORS)
        if last.p99_ms is not None and last.p99_ms > self.budget_p99_ms:
            return self._bisect(by_level, measured)
        half = next((p for p in by_level if p.concurrency * 2 == last.concurrency and p.trustworthy), None)
        if half is not None and not gains(half, last, self.min_gain):
            return self._done(PLATEAU)
        if last.concurrency * 2 > self.max_concurrency:
            return self._done(BOUND)
        return last.concurrency * 2

    def _bisect(self, by_level: Sequence[CurvePoint], measured: set[int]) -> int | None:
        within = [p for p in by_level if p.trustworthy and p.p99_ms is not None and p.p99_ms <= self.budget_p99_ms]
        over = [p for p in by_level if p.p99_ms is not None and p.p99_ms > self.budget_p99_ms]
        if not within or self._bisected >= self.bisect_steps:
            return self._done(OVER_BUDGET)
        low_point = max(within, key=lambda p: p.concurrency)
        low = low_point.concurrency
        high_point = min((p for p in over if p.concurrency > low), key=lambda p: p.concurrency, default=None)
        high = high_point.concurrency if high_point else None
        if high_point is not None and not gains(low_point, high_point, self.min_gain):
            return self._done(OVER_BUDGET)  # no gain between them: a point between cannot raise the capacity
        middle = (low + high) // 2 if high else None
        if middle is None or middle in measured or middle <= low:
            return self._done(OVER_BUDGET)
        self._bisected += 1
        return middle

    def _done(self, reason: str) -> None:
        self.reason = reason
        return None

    def capacity_is_lower_bound(self, points: Sequence[CurvePoint]) -> bool:
        """The bound stopped a search whose best point within SLO is its highest concurrency."""
        if self.reason != BOUND:
            return False
        best = capacity(points, self.budget_p99_ms, self.success_min)
        return best is not None and best.concurrency == max(p.concurrency for p in points)


KNEE_AND_CAPACITY = (
    "Sweep: concurrency 1, 2, 4, ... to 2 x max_batch_size x instances, then doubling on while throughput rises by "
    "at least curve_min_gain per doubling (confirmed against both points' intervals), p99 stays within the budget "
    "and no request fails, up to "
    "curve_search_max_concurrency; where p99 left the budget between two doublings, bisected. Knee: the lowest "
    "concurrency whose throughput reaches curve_knee_fraction of the highest. Capacity: the highest throughput "
    "among valid points with p99 decidedly within the budget (its interval's top; a point without one is "
    "undecided) and success at least success_rate_min; a lower bound "
    "('>= N') when the maximum concurrency stopped a search that was still rising within SLO.")


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


def knee(points: Sequence[Point], knee_fraction: float) -> Point | None:
    """The lowest trustworthy point whose throughput reaches `knee_fraction` of the curve's
    highest, unary or streamed alike."""
    usable = [p for p in points if p.trustworthy]
    if not usable:
        return None
    best = max(p.throughput for p in usable)
    return next(p for p in usable if p.throughput >= knee_fraction * best)


def capacity(points: Sequence[CurvePoint], budget_p99_ms: float, success_min: float) -> CurvePoint | None:
    within = [p for p in points if p.trustworthy and p.within_budget(budget_p99_ms)
              and (p.success_rate or 0) >= success_min]
    return max(within, key=lambda p: p.throughput_infer_s) if within else None


def undecided_within(points: Sequence[CurvePoint], budget_p99_ms: float, success_min: float) -> list[CurvePoint]:
    """Trustworthy points whose p99 value is within the budget while their interval reaches past it,
    or that have no interval: where no point is decidedly within the budget, these leave 'some
    point is' too close to call; beside a capacity, they are the points it was not chosen from."""
    return [p for p in points if p.trustworthy and (p.success_rate or 0) >= success_min and p.p99_ms is not None
            and p.p99_ms <= budget_p99_ms and not p.within_budget(budget_p99_ms)]


def gains(prev: CurvePoint, cur: CurvePoint, min_gain: float) -> bool:
    """Throughput rises by at least `min_gain` from `prev` to `cur`: confirmed against both
    points' intervals where they have them (a rise inside the noise is no gain)."""
    if cur.throughput_interval is None or prev.throughput_interval is None:
        return cur.throughput_infer_s >= prev.throughput_infer_s * (1 + min_gain)
    gap = difference_interval(cur.throughput_infer_s, cur.throughput_interval, prev.throughput_infer_s,
                              prev.throughput_interval, 1 + min_gain)
    return gap.low >= 0


def falls(prev: CurvePoint, cur: CurvePoint, drop_tolerance: float) -> bool:
    """Throughput falls by more than `drop_tolerance` from `prev` to `cur`: decidedly, against
    both points' intervals, where they have them (a drop inside the noise is no fall)."""
    if cur.throughput_interval is None or prev.throughput_interval is None:
        return cur.throughput_infer_s < prev.throughput_infer_s * (1 - drop_tolerance)
    gap = difference_interval(cur.throughput_infer_s, cur.throughput_interval, prev.throughput_infer_s,
                              prev.throughput_interval, 1 - drop_tolerance)
    return gap.high < 0


def drops_inside_noise(points: Sequence[CurvePoint], drop_tolerance: float) -> list[str]:
    """Falls larger than `drop_tolerance` by the values that the intervals do not confirm."""
    usable = [p for p in points if p.trustworthy]
    notes = []
    for prev, cur in zip(usable, usable[1:], strict=False):
        if cur.throughput_infer_s < prev.throughput_infer_s * (1 - drop_tolerance) and not falls(prev, cur, drop_tolerance):
            notes.append(f"throughput {prev.throughput_infer_s:.0f} -> {cur.throughput_infer_s:.0f} infer/s from "
                         f"concurrency {prev.concurrency} to {cur.concurrency} is inside the noise "
                         f"({prev.throughput_interval.describe('infer/s', 4)} and "
                         f"{cur.throughput_interval.describe('infer/s', 4)}): not judged a fall")
    return notes


def shape_problems(points: Sequence[CurvePoint], knee_point: CurvePoint | None, drop_tolerance: float,
                   budget_p99_ms: float, target_throughput: float | None) -> list[str]:
    problems = []
    usable = [p for p in points if p.trustworthy]
    if knee_point is not None:
        before = [p for p in usable if p.concurrency <= knee_point.concurrency]
        for prev, cur in zip(before, before[1:], strict=False):
            if falls(prev, cur, drop_tolerance):
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
