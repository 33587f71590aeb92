"""When a measurement counts and when a rule is decided: warm-up, windows, stability (perf_analyzer's
rule), validity (MLPerf LoadGen's rule) and rules decided with confidence.

- Stability: over the last `stability_windows` (3) windows, max/min of the throughput and of the
  mean latency are each within 1 + `stability_tolerance` (10%), as perf_analyzer decides. For a
  measurement that judges rules it is evidence shown in the report, not a gate.
- Validity: the windows reported last at least `min_duration_s` and hold at least `min_requests`
  completed requests. It gates latency and throughput rules, never the success rate: a model that
  fails every request is judged on its success rate (`Rule.needs_validity`).
- A rule is decided once the statistic's confidence interval (load/confidence.py) at
  `confidence` (0.95) lies on one side of its threshold; undecided at the window budget, it is
  "too close to call" with its interval. The measurement looks at its rules a few times (after
  3, 6 and 10 windows with the defaults: `look_windows`), each look at the level that keeps the
  whole measurement at `confidence` (Bonferroni over the looks): stopping at the first look that
  agrees would otherwise decide on luck.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .confidence import Estimate, Interval, difference_interval, estimate


@dataclass(frozen=True)
class MeasureRules:
    warmup_s: float = 1.0
    window_s: float = 2.0
    stability_windows: int = 3
    stability_tolerance: float = 0.10
    max_windows: int = 10
    min_duration_s: float = 6.0
    min_requests: int = 200
    confidence: float = 0.95

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
        """After which windows a measurement looks at its rules: the first that can be valid (at
        least the second), then at twice as many windows each time, and at the window budget
        (3, 6 and 10 with the defaults). Few looks keep each look's interval narrow."""
        first = min(self.max_windows, max(2, math.ceil(self.min_duration_s / self.window_s - 1e-9)))
        looks, n = [], first
        while n < self.max_windows:
            looks.append(n)
            n *= 2
        return (*looks, self.max_windows)

    @property
    def looks(self) -> int:
        return len(self.look_windows)

    @property
    def look_level(self) -> float:
        """The level of each look's intervals, so that all looks together hold at `confidence`."""
        return 1 - (1 - self.confidence) / self.looks

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


_COMPARE = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
PASS, FAIL, UNDECIDED, UNMEASURED = "pass", "fail", "too close to call", "not measured"


@dataclass(frozen=True)
class Rule:
    """A threshold on one statistic of a measurement: `statistic comparison threshold`, e.g.
    p99 <= 100 ms. `reference`: the threshold is itself measured (another point's throughput
    times `ratio`, with its interval) and its noise counts too. `needs_validity`: judged only on a
    valid measurement (latency and throughput rules); the success rate is judged whatever.
    `failure_only`: only a decided failure matters (a curve point's fall against the previous
    point): the measurement need not go on to confirm a value already on the passing side."""

    name: str
    statistic: str
    comparison: str
    threshold: float
    unit: str = ""
    needs_validity: bool = True
    reference: Estimate | None = None
    ratio: float = 1.0
    failure_only: bool = False

    def describe(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        if self.reference is not None:
            return f"{self.comparison} {self.ratio:g} x {_num(self.threshold / self.ratio if self.ratio else 0)}{unit}"
        return f"{self.comparison} {_num(self.threshold)}{unit}"


def _num(value: float) -> str:
    return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"


@dataclass(frozen=True)
class Judgement:
    """A rule held against an estimate: pass, fail, too close to call, or not measured."""

    rule: Rule
    estimate: Estimate
    outcome: str
    interval: Interval | None  # the interval the decision used (of the value, or of value - threshold)

    @property
    def decided(self) -> bool:
        return self.outcome in (PASS, FAIL)

    @property
    def value(self) -> float | None:
        return self.estimate.value

    @property
    def settled(self) -> bool:
        """Nothing more to measure for this rule: decided, or only a failure matters and the value
        is on the passing side."""
        if self.decided:
            return True
        return self.rule.failure_only and self.value is not None and _COMPARE[self.rule.comparison](
            self.value, self.rule.threshold)

    @property
    def margin(self) -> float | None:
        """How far the value is on the passing side of the threshold (negative: failing side)."""
        if self.value is None:
            return None
        gap = self.value - self.rule.threshold
        return -gap if self.rule.comparison in ("<=", "<") else gap

    def describe(self) -> str:
        """'p99 98.7 ms, 95% interval [94.1, 103.2] ms, rule <= 100 ms'."""
        unit = f" {self.rule.unit}" if self.rule.unit else ""
        if self.value is None:
            return f"{self.rule.name} not measured, rule {self.rule.describe()}"
        interval = self.estimate.interval
        shown = f", {interval.describe(self.rule.unit, 4)}" if interval is not None else ", no interval (too few windows)"
        return f"{self.rule.name} {_num(self.value)}{unit}{shown}, rule {self.rule.describe()}"

    def to_dict(self) -> dict[str, Any]:
        interval = self.estimate.interval
        return {"rule": self.rule.name, "statistic": self.rule.statistic, "comparison": self.rule.comparison,
                "threshold": self.rule.threshold, "unit": self.rule.unit, "value": self.value,
                "interval": interval.to_dict() if interval else None, "outcome": self.outcome,
                "margin": self.margin, "windows": self.estimate.windows}


def judge(rule: Rule, measured: Estimate) -> Judgement:
    """Decide `rule` on `measured`: pass when the whole interval meets the threshold, fail when
    none of it does, too close to call otherwise (or without an interval)."""
    if measured.value is None:
        return Judgement(rule, measured, UNMEASURED, None)
    if measured.interval is None:
        return Judgement(rule, measured, UNDECIDED, None)
    if rule.reference is not None and rule.reference.value is not None:
        gap = difference_interval(measured.value, measured.interval, rule.reference.value, rule.reference.interval,
                                  rule.ratio)
        low, high, zero = gap.low, gap.high, 0.0
        used = gap
    else:
        low, high, zero = measured.interval.low, measured.interval.high, rule.threshold
        used = measured.interval
    compare = _COMPARE[rule.comparison]
    if compare(low, zero) and compare(high, zero):
        return Judgement(rule, measured, PASS, used)
    if not compare(low, zero) and not compare(high, zero):
        return Judgement(rule, measured, FAIL, used)
    return Judgement(rule, measured, UNDECIDED, used)


def judge_windows(rules: Sequence[Rule], windows: Sequence[Any], level: float,
                  model: str | None = None, shown_level: float | None = None) -> list[Judgement]:
    """Every rule judged on the same windows, with intervals at `level`; `shown_level`: the level
    the intervals are labelled with (the measurement's overall confidence, where `level` is one
    look's)."""
    return [judge(rule, _labelled(estimate(rule.statistic, windows, level, model), shown_level)) for rule in rules]


def judge_measurement(rules: Sequence[Rule], windows: Sequence[Any], measure_rules: MeasureRules,
                      model: str | None = None) -> list[Judgement]:
    """Every rule judged as a measurement under `measure_rules` judges it: each look at its
    look_level, labelled with its confidence."""
    return judge_windows(rules, windows, measure_rules.look_level, model, measure_rules.confidence)


def _labelled(measured: Estimate, level: float | None) -> Estimate:
    if level is None or measured.interval is None:
        return measured
    return replace(measured, interval=replace(measured.interval, level=level))


def relative_rule(name: str, statistic: str, comparison: str, reference: Estimate, ratio: float,
                  unit: str = "", failure_only: bool = False) -> Rule:
    """A rule against another measurement's statistic (times `ratio`), its noise included."""
    return Rule(name, statistic, comparison, (reference.value or 0.0) * ratio, unit, reference=reference, ratio=ratio,
                failure_only=failure_only)


def slo_rules(budget_p99_ms: float, success_min: float) -> list[Rule]:
    """The rules a load point is decided on: p99 within the budget (needs a valid measurement) and
    the success rate (judged whatever the validity: a model failing every request fails on it)."""
    return [Rule("p99 latency", "p99", "<=", float(budget_p99_ms), "ms"),
            Rule("success rate", "success rate", ">=", float(success_min), "ratio", needs_validity=False)]


def decided_enough(judgements: Sequence[Judgement], valid: bool) -> bool:
    """A measurement may stop: a rule judged whatever the validity (the success rate) failed, or it
    is valid and every rule is settled (decided, or a failure-only rule on its passing side)."""
    if any(j.outcome == FAIL and not j.rule.needs_validity for j in judgements):
        return True
    return valid and all(j.settled for j in judgements)

