"""PERF-5's rules: this run's key numbers against a baseline run's, with the runs' own noise.

For each model and key number both runs have, the change is judged in two steps:

1. against the named threshold (e.g. capacity may fall at most regression_capacity_drop_max = 10 %
   of the baseline's; p99 may rise at most 20 %); a change inside the threshold is `ok` (or
   `improved` when it moved the better way);
2. the runs' own noise: regression_noise_sigmas (2) combined standard errors, sqrt(se_this^2 +
   se_base^2), of the spread each run recorded (PERF-5 records it: window-to-window for unary
   models, repeat-to-repeat for streaming ones; a run without it counts with the other run's
   spread, or regression_noise_default). The band is capped at the rule's threshold: a noise band
   wider than the rule would let every change up to the band through, so a change beyond the
   threshold is a `regression` whatever the noise; the band is reported beside it (and said to be
   wider than the rule where it is), and it widens nothing.

Recovery times have no windows; a rise below regression_recovery_floor_s is timing noise
(`within noise`: reported, never a failure).

3. a regression of a number that PERF-5 can measure again in the same run (capacity at the knee
   concurrency, p50/p99 at the target load, streaming tokens/s at the curve's best point:
   REPEATABLE) gets a planned second look (`reconsider`). The two looks share the error budget
   alpha = 1 - load_confidence (Bonferroni: each look at alpha / 2), each judged alone on the
   change's one-sided interval, change +- z(1 - alpha / 2) x se, se = the runs' noise band /
   regression_noise_sigmas: the first look's regression stands where its interval lies beyond
   the rule (the repeat cannot clear it); else the second look decides alone: beyond the rule by
   value, a regression (the rule stands whatever the noise); within the rule with its interval,
   `not reproduced` (reported, never a failure); within by value only, `too close to call` (the
   check is INCOMPLETE). Never the mean of both: a one-off dip cleared by averaging it with a
   second measurement is a second chance to pass that no budget counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from scipy.stats import norm

from .keynumbers import METRICS, Metric, model_label

REGRESSION = "regression"
WITHIN_NOISE = "within noise"
OK = "ok"
IMPROVED = "improved"
NOT_REPRODUCED = "not reproduced"
UNDECIDED = "too close to call"
REPEATABLE = frozenset({"capacity", "p50", "p99", "tokens_capacity"})
LOOKS = 2  # a repeatable regression's planned looks: each at alpha / LOOKS


@dataclass
class Comparison:
    model: str
    metric: Metric
    baseline: float
    current: float
    change: float  # relative (current / baseline - 1) for relative rules, absolute rise otherwise; with a
    # second look, the change it measured
    limit: float
    noise: float | None  # the noise band, in the same terms as `change`, capped at `limit`
    status: str
    repeat: float | None = None  # this run's second look, when the regression was measured again
    look_margin: float | None = None  # z(1 - alpha / 2) x se: the half-width each look was judged with
    measured_noise: float | None = None  # the noise band before the cap (wider than `limit` when it was capped)

    @property
    def worse_by(self) -> float:
        """How far the change went the wrong way (positive = worse)."""
        return -self.change if self.metric.better == "higher" else self.change

    def short_change(self) -> str:
        """'-23.1 %' (relative rules) or '+12 MB/h' (absolute ones)."""
        return _fmt_change(self.change, self.metric)

    def describe(self) -> str:
        m = self.metric
        change = _fmt_change(self.change, m)
        measured = f"{_fmt(self.current)} {m.unit}"
        if self.repeat is not None:
            measured += f" on the first look, {_fmt(self.repeat)} {m.unit} on the planned second look,"
            change += " on the second look"
            if self.look_margin is not None:
                change += f", each look judged alone with ±{_fmt_change(self.look_margin, m, sign=False)}"
        elif self.look_margin is not None:
            change += f", decided on the first look with ±{_fmt_change(self.look_margin, m, sign=False)}"
        text = (f"{model_label(self.model)}: {m.label} {measured} vs {_fmt(self.baseline)} {m.unit} "
                f"in the baseline ({change}; the rule allows {_fmt_limit(self.limit, m)}")
        if self.measured_noise is not None and self.noise is not None and self.measured_noise > self.noise:
            text += (f", the runs' noise is ±{_fmt_change(self.measured_noise, m, sign=False)}, wider than the rule: "
                     "the rule stands")
        elif self.noise is not None:
            text += f", the runs' noise is ±{_fmt_change(self.noise, m, sign=False)}"
        return text + ")"


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _fmt_change(change: float, metric: Metric, sign: bool = True) -> str:
    if metric.relative:
        return f"{change:+.1%}" if sign else f"{change:.1%}"
    return (f"{change:+.4g}" if sign else f"{change:.4g}") + (f" {metric.unit}" if metric.unit != "ratio" else "")


def _fmt_limit(limit: float, metric: Metric) -> str:
    direction = "-" if metric.better == "higher" else "+"
    if metric.relative:
        return f"{direction}{limit:.0%}"
    return f"{direction}{limit:.4g}" + (f" {metric.unit}" if metric.unit != "ratio" else "")


def noise_band(metric: Metric, current: dict[str, float], baseline: dict[str, float], default: float,
               sigmas: float) -> float | None:
    """The change (relative) that the two runs' window noise alone can explain, or None."""
    if metric.noise is None:
        return None
    key = f"noise_{metric.noise}"
    mine, theirs = current.get(key), baseline.get(key)
    mine = mine if mine is not None else (theirs if theirs is not None else default)
    theirs = theirs if theirs is not None else mine
    return sigmas * math.sqrt(mine ** 2 + theirs ** 2)


def compare(current: dict[str, dict[str, float]], baseline: dict[str, dict[str, float]],
            threshold: Callable[[str], float]) -> list[Comparison]:
    """Every key number both runs have, judged; `threshold(name)` gives a named threshold's value."""
    sigmas = threshold("regression_noise_sigmas")
    default = threshold("regression_noise_default")
    comparisons = []
    for model in sorted(set(current) & set(baseline)):
        mine, theirs = current[model], baseline[model]
        for metric in METRICS:
            if metric.key not in mine or metric.key not in theirs:
                continue
            noise = noise_band(metric, mine, theirs, default, sigmas)
            comparisons.append(_judge(model, metric, theirs[metric.key], mine[metric.key], noise, threshold))
    return comparisons


def _judge(model: str, metric: Metric, base: float, now: float, noise: float | None,
           threshold: Callable[[str], float]) -> Comparison:
    limit = threshold(metric.threshold)
    if metric.relative:
        change = (0.0 if now == 0 else math.inf) if base == 0 else now / base - 1.0
    else:
        change = now - base
    band = None if noise is None else min(noise, limit)
    comparison = Comparison(model, metric, base, now, change, limit, band, OK, measured_noise=noise)
    worse = comparison.worse_by
    if worse > limit + 1e-12:
        comparison.status = REGRESSION
        if metric.key == "recovery" and now - base < threshold("regression_recovery_floor_s"):
            comparison.status = WITHIN_NOISE
    elif worse < -limit:
        comparison.status = IMPROVED
    return comparison


def reconsider(comparison: Comparison, repeat: float, threshold: Callable[[str], float]) -> Comparison:
    """A regression's planned second look (the module's rule 3): it stands where the first look's
    one-sided interval at 1 - alpha / 2 already lies beyond the rule; else the repeat alone
    decides, at the same level: beyond the rule by value, a regression; within it with its
    interval, NOT_REPRODUCED; within by value only, UNDECIDED. A number without noise has no
    interval: its second look clears nothing."""
    if comparison.status != REGRESSION or comparison.metric.key not in REPEATABLE:
        return comparison
    margin = look_margin(comparison, threshold)
    if margin is not None and comparison.worse_by - margin > comparison.limit + 1e-12:
        comparison.look_margin = margin
        return comparison  # decided on the first look: a second one spends nothing on clearing it
    again = _judge(comparison.model, comparison.metric, comparison.baseline, repeat, comparison.measured_noise, threshold)
    again.current, again.repeat, again.look_margin = comparison.current, repeat, margin
    if again.status != REGRESSION:
        decided = margin is not None and again.worse_by + margin <= again.limit + 1e-12
        again.status = NOT_REPRODUCED if decided else UNDECIDED
    return again


def look_margin(comparison: Comparison, threshold: Callable[[str], float]) -> float | None:
    """z(1 - alpha / 2) x se of the change, alpha = 1 - load_confidence over the two looks, se =
    the runs' noise band (before its cap) / regression_noise_sigmas; None without a noise."""
    sigmas = threshold("regression_noise_sigmas")
    if comparison.measured_noise is None or not sigmas:
        return None
    alpha = 1 - threshold("load_confidence")
    return float(norm.ppf(1 - alpha / LOOKS)) * comparison.measured_noise / sigmas
