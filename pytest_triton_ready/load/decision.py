"""When a rule is decided: a threshold on one statistic, held against the statistic's confidence
interval (load/confidence.py) at `confidence` (0.95). Decided once the interval lies on one side
of the threshold; undecided at the window budget, it is "too close to call" with its interval.
When a measurement counts at all (warm-up, stability, validity, the looks) is load/stability.py.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .confidence import Estimate, Interval, difference_interval, estimate, t_quantile, trials_needed
from .stability import MeasureRules

_COMPARE = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
PASS, FAIL, UNDECIDED, UNMEASURED = "pass", "fail", "too close to call", "not measured"


@dataclass(frozen=True)
class Rule:
    """A threshold on one statistic of a measurement: `statistic comparison threshold`, e.g.
    p99 <= 100 ms. `reference`: the threshold is itself measured (another point's throughput
    times `ratio`, with its interval) and its noise counts too. `needs_validity`: judged only on a
    valid measurement (latency and throughput rules); the success rate is judged whatever.
    `failure_only`: only a decided failure matters (a curve point's fall against the previous
    point): the measurement need not go on to confirm a value already on the passing side.
    `only_if`: the rule matters only while this other rule may pass: once it is decided failing,
    the rule is moot and the measurement need not go on to decide it (a curve point whose
    throughput is decidedly below what the capacity already is need not decide its p99).
    `stop_when_futile`: the measurement may stop on this rule undecided once the window budget
    could not decide it either (`futile`): a curve point asks coarse questions, and one inside its
    own noise stays undecided whatever more windows it is given."""

    name: str
    statistic: str
    comparison: str
    threshold: float
    unit: str = ""
    needs_validity: bool = True
    reference: Estimate | None = None
    ratio: float = 1.0
    failure_only: bool = False
    only_if: Rule | None = None
    stop_when_futile: bool = False

    def describe(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        if self.reference is not None and self.reference.value is None:
            return f"{self.comparison} {self.ratio:g} x {self.reference.statistic} (not measured: reference {self.reference.statistic})"
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
    moot: Judgement | None = None  # the `only_if` rule, decided failing: this one needs no decision
    futile: bool = False  # undecided, and the window budget would leave it undecided too (`futile`)
    needed: int | None = None  # undecided for want of samples: the count that could decide it
    needed_level: float | None = None  # the level `needed` is counted at (one look's)

    @property
    def needs(self) -> str:
        """What an undecided rule lacks in samples: '0.999 needs >= 3,688 clean requests at 95%
        (4,786 at this look's 98.3%), 200 measured', 'p99 needs >= 368 requests at 95%, 200
        measured'; '' otherwise."""
        requirement = _requirement(self.rule)
        if self.needed is None or self.outcome != UNDECIDED or requirement is None:
            return ""
        share, noun, label = requirement
        trials = f", {self.estimate.trials:,} measured" if self.estimate.trials is not None else ""
        shown = self.estimate.interval.level if self.estimate.interval else None
        at_shown = trials_needed(share, shown) if shown is not None else None
        look = f" ({self.needed:,} at this look's {self.needed_level:.1%})" if at_shown != self.needed else ""
        at = f"{at_shown:,} {noun} at {shown:.0%}" if at_shown is not None else f"{self.needed:,} {noun}"
        return f"{label} needs >= {at}{look}{trials}"

    @property
    def decided(self) -> bool:
        return self.outcome in (PASS, FAIL)

    @property
    def value(self) -> float | None:
        return self.estimate.value

    @property
    def settled(self) -> bool:
        """Nothing more to measure for this rule: decided, or only a failure matters and the value
        is on the passing side, moot (its `only_if` rule decided failing), or futile."""
        if self.decided or self.moot is not None or self.futile:
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
        needs = f"; {self.needs}" if self.needs else ""
        return f"{self.rule.name} {_num(self.value)}{unit}{shown}, rule {self.rule.describe()}{needs}"

    def to_dict(self) -> dict[str, Any]:
        interval = self.estimate.interval
        return {"rule": self.rule.name, "statistic": self.rule.statistic, "comparison": self.rule.comparison,
                "threshold": self.rule.threshold, "unit": self.rule.unit, "value": self.value,
                "interval": interval.to_dict() if interval else None, "outcome": self.outcome,
                "margin": self.margin, "windows": self.estimate.windows,
                **({"moot": self.moot.describe()} if self.moot is not None else {}),
                **({"trials": self.estimate.trials} if self.estimate.trials is not None else {}),
                **({"trials_needed": self.needed} if self.needs else {}),
                **({"futile": True} if self.futile else {})}


def judge(rule: Rule, measured: Estimate, level: float | None = None) -> Judgement:
    """Decide `rule` on `measured`: pass when the whole interval meets the threshold, fail when
    none of it does, too close to call otherwise (or without an interval, or against a reference
    that was not measured). Undecided for want of
    samples, it carries the count that could decide it at `level` (the interval's own level when
    None): a minimum on a proportion, the clean trials that show it; a maximum on a percentile
    whose interval is unbounded above, the samples whose largest bounds it."""
    judgement = _judge(rule, measured)
    requirement = _requirement(rule)
    if judgement.outcome != UNDECIDED or measured.trials is None or requirement is None or measured.interval is None:
        return judgement
    if rule.comparison in ("<=", "<") and math.isfinite(measured.interval.high):
        return judgement  # bounded: more samples narrow it, but no count is owed
    level = level if level is not None else measured.interval.level
    return replace(judgement, needed=trials_needed(requirement[0], level), needed_level=level)


def _requirement(rule: Rule) -> tuple[float, str, str] | None:
    """(the share to show, what is counted, how it reads) for a rule a sample count can decide:
    a minimum on the success rate, a maximum on a percentile ('p99', 'ttft p99')."""
    if rule.statistic == "success rate" and rule.comparison in (">=", ">"):
        return rule.threshold, "clean requests", _num(rule.threshold)
    name = rule.statistic.rsplit(" ", 1)[-1]
    if rule.comparison in ("<=", "<") and name.startswith("p") and name[1:].replace(".", "", 1).isdigit():
        return float(name[1:]) / 100.0, "requests", rule.name
    return None


def _judge(rule: Rule, measured: Estimate) -> Judgement:
    if measured.value is None:
        return Judgement(rule, measured, UNMEASURED, None)
    if measured.interval is None or (rule.reference is not None and rule.reference.value is None):
        return Judgement(rule, measured, UNDECIDED, None)  # no interval, or nothing measured to hold it against
    if rule.reference is not None:
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


def futile(judgement: Judgement, windows: int, max_windows: int, level: float) -> bool:
    """An undecided judgement the window budget would not decide either: its interval narrowed as
    `max_windows` windows would narrow it (the half-widths times sqrt(n / N) and the ratio of
    Student's t at N - 1 and n - 1 degrees of freedom) still holds the threshold. An interval
    unbounded for want of samples is futile only where the budget's windows, at this rate, would
    still hold fewer than the rule needs."""
    if judgement.outcome != UNDECIDED or judgement.interval is None or not 2 <= windows < max_windows:
        return False
    if not math.isfinite(judgement.interval.high):  # bounded once enough samples: futile only if the budget holds too few
        trials, needed = judgement.estimate.trials, judgement.needed
        return trials is not None and needed is not None and trials * max_windows / windows < needed
    scale = math.sqrt(windows / max_windows) * t_quantile(level, max_windows - 1) / t_quantile(level, windows - 1)
    rule, used = judgement.rule, judgement.interval
    if rule.reference is not None and rule.reference.value is not None:
        centre, zero = judgement.value - rule.ratio * rule.reference.value, 0.0
    else:
        centre, zero = judgement.value, rule.threshold
    low, high = centre - (centre - used.low) * scale, centre + (used.high - centre) * scale
    return low <= zero <= high


def judge_windows(rules: Sequence[Rule], windows: Sequence[Any], level: float,
                  model: str | None = None, shown_level: float | None = None,
                  max_windows: int | None = None) -> list[Judgement]:
    """Every rule judged on the same windows, with intervals at `level`; `shown_level`: the level
    the intervals are labelled with (the measurement's overall confidence, where `level` is one
    look's); `max_windows`: the window budget, for the rules that stop when futile."""
    def judged(rule: Rule) -> Judgement:
        return judge(rule, _labelled(estimate(rule.statistic, windows, level, model), shown_level), level)

    out = []
    for rule in rules:
        judgement = judged(rule)
        if rule.only_if is not None and not judgement.decided:
            condition = judged(rule.only_if)
            if condition.outcome == FAIL:
                judgement = replace(judgement, moot=condition)
        if (rule.stop_when_futile and max_windows and not judgement.settled
                and futile(judgement, len(windows), max_windows, level)):
            judgement = replace(judgement, futile=True)
        out.append(judgement)
    return out


def judge_measurement(rules: Sequence[Rule], windows: Sequence[Any], measure_rules: MeasureRules,
                      model: str | None = None) -> list[Judgement]:
    """Every rule judged as a measurement under `measure_rules` judges it: each look at its
    look_level, labelled with its confidence."""
    return judge_windows(rules, windows, measure_rules.look_level, model, measure_rules.confidence,
                         measure_rules.max_windows)


def _labelled(measured: Estimate, level: float | None) -> Estimate:
    if level is None or measured.interval is None:
        return measured
    return replace(measured, interval=replace(measured.interval, level=level))


def relative_rule(name: str, statistic: str, comparison: str, reference: Estimate, ratio: float,
                  unit: str = "", failure_only: bool = False) -> Rule:
    """A rule against another measurement's statistic (times `ratio`), its noise included; against
    a reference that was not measured it stays undecided (`judge`), never judged against 0."""
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

