"""PERF-5 onto a check: the baseline read, this run's key numbers compared with it (compare.py),
regressions of repeatable numbers given their planned second look (noise.py, compare.reconsider),
and every comparison recorded; a second look too close to call leaves the check INCOMPLETE."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..facts import Facts, TargetLoad
from ..load.judged import incomplete_unless_failed
from ..record.recorder import CheckRecorder
from . import Baseline, BaselineError, environment_differences, load_baseline
from .compare import NOT_REPRODUCED, REGRESSION, REPEATABLE, UNDECIDED, WITHIN_NOISE, Comparison, compare, reconsider
from .keynumbers import key_numbers, model_label
from .noise import NoiseMeasurement, repeat_at_target


def baseline_for(check: CheckRecorder, path: Any, exclude: Any) -> Baseline:
    """The baseline at `path`; INCOMPLETE when none is given or it cannot be used."""
    if path is None:
        check.incomplete("no baseline given: --triton-baseline=PATH (a previous readiness.json or a directory of "
                         "runs); waive PERF-5 under gate.waivers for a first run")
    try:
        baseline = load_baseline(path, exclude=exclude)
    except BaselineError as exc:
        check.incomplete(f"baseline not usable: {exc}")
    check.measure("baseline", str(baseline.label))
    return baseline


def compare_runs(check: CheckRecorder, current: dict[str, dict[str, float]], context: dict[str, Any],
                 baseline: Baseline, measured: NoiseMeasurement) -> list[Comparison]:
    """This run's key numbers (with their noise) against the baseline's; a warning for each
    difference of environment; INCOMPLETE when the two share no key number."""
    measured.add_noise_to(current)
    here = {"context": context, "results": []}
    for difference in environment_differences(here, baseline.document, measured.digests):
        check.finding(f"compared across environments: {difference}", severity="warning")
    comparisons = compare(current, key_numbers(baseline.document), _thresholds(check))
    if not comparisons:
        check.incomplete(f"nothing to compare: this run and the baseline {baseline.path} share no key number "
                         "(capacity, p50/p99, error rate, soak drift and slopes, recovery times) for a common model")
    return comparisons


def measure_regressions_again(check: CheckRecorder, load: Any, facts: Facts, comparisons: list[Comparison],
                              measured: NoiseMeasurement,
                              repeat: Callable[..., dict[str, float]] = repeat_at_target) -> list[Comparison]:
    """Each regression of a repeatable number given its planned second look (compare.reconsider:
    each look at alpha / 2, never the mean of both); a p50/p99 regression is first measured once
    more at PERF-1's target load."""
    targets = facts.of(TargetLoad)
    repeats = measured.repeats
    for model in sorted({c.model for c in comparisons if c.status == REGRESSION and c.metric.key in REPEATABLE}):
        if any(c.model == model and c.status == REGRESSION and c.metric.key in ("p50", "p99") for c in comparisons):
            repeats.setdefault(model, {}).update(repeat(load, check, model, targets.get(model)))
    return [reconsider(c, repeats[c.model][c.metric.key], _thresholds(check))
            if c.metric.key in repeats.get(c.model, {}) else c for c in comparisons]


def record_comparisons(check: CheckRecorder, comparisons: list[Comparison], baseline: Baseline) -> None:
    """The worst change, each change with its status, a finding per regression (and an info line
    for a change within noise or not reproduced), and the rule `no-regression` judged."""
    mark = check.mark()
    worst = max(comparisons, key=lambda c: c.worse_by / c.limit if c.limit else c.worse_by)
    check.measure("worst change against the baseline", f"{model_label(worst.model)}: {worst.metric.label} "
                  f"{worst.short_change()} ({worst.status})")
    for c in comparisons:
        unit = "ratio" if c.metric.relative else c.metric.unit
        check.measure(f"{c.metric.label}: change against the baseline ({c.status})", round(c.change, 4)
                      if math.isfinite(c.change) else str(c.change), unit, model=None if c.model == "*" else c.model)
        if c.status == REGRESSION:
            check.finding(f"regression: {c.describe()}", model=c.model, rule="PERF-5")
        elif c.status in (WITHIN_NOISE, NOT_REPRODUCED):
            check.finding(f"{c.status}: {c.describe()}", severity="info", model=c.model)
    check.judged_since(mark, "no-regression", measured=f"{len(comparisons)} key numbers against the baseline")
    undecided = [f"{UNDECIDED}: {c.describe()}" for c in comparisons if c.status == UNDECIDED]
    regressions = [c for c in comparisons if c.status == REGRESSION]
    if regressions:
        models = sorted({model_label(c.model) for c in regressions})
        check.recommend(f"Find what changed for {', '.join(models)} since the baseline ({baseline.path}); if the change "
                        "is intended, make this run the new baseline.")
    if undecided:  # a second look within the rule by value only: neither cleared nor confirmed
        incomplete_unless_failed(check, "; ".join(undecided))


def _thresholds(check: CheckRecorder) -> Callable[[str], float]:
    return lambda name: check.threshold(name).value
