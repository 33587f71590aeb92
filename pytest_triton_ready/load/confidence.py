"""Confidence intervals for the statistics a check judges, computed from a measurement's windows.

- Proportions (the success rate; any share of requests that failed or stuck): the exact binomial
  (Clopper-Pearson) interval over the counts of all windows together, never batch means: windows
  that all read 1.0 give no zero-width interval, and 0 failures in n requests show a rate of at
  least (alpha / 2) ^ (1 / n) only (`trials_needed` turns that round: 3,688 clean requests for
  0.999 at 95%).
- Rates and means (throughput, average batch size): batch means. Each window is one batch; the
  interval is the windows' mean +- t(level, n-1) x s / sqrt(n), with Student's t for the few
  windows a measurement has.
- Percentiles: the hull of two intervals. The order-statistic interval over the merged
  histogram (the exact binomial ranks around n*q, as MLPerf LoadGen's early stopping counts
  them) holds for independent samples; where the upper rank lies beyond the largest sample
  (fewer than 368 samples for p99 at 95%) the interval is unbounded above: no sample shows the
  percentile below any budget, and such a rule can fail but never pass. Requests of one window
  are not independent under load (a stall slows many at once), so the batch-means interval of
  batches' own percentiles widens it where the batches disagree. A batch is consecutive windows
  merged until it holds `samples_per_batch` samples (1 / (1 - q): 100 for p99). The largest of
  n samples lies on average at the quantile n / (n + 1), so a window of five inter-token gaps
  has a "p99" at the 83rd percentile: batches that small dragged the interval's low end far
  below the percentile. With fewer than MIN_BATCHES batches the order-statistic interval stands
  alone (a measurement that short cannot show the dependence between its requests: Student's t
  at one degree of freedom, at a curve point's share of the error budget, is in the thousands
  and turned a 1.3 ms p99 into [1e-24, 1e24] ms). Latency noise is multiplicative (a busy
  machine slows every request by a factor), so those batch means are taken of the logarithms:
  the interval is asymmetric and never below zero.

An interval is None where it cannot be computed (fewer than two windows, nothing measured):
a rule judged on it is undecided, never passed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean, stdev
from typing import Any

from scipy import stats as scipy_stats

from .stats import LatencyHistogram


@dataclass(frozen=True)
class Interval:
    """A two-sided confidence interval at `level` (0.95: 95%)."""

    low: float
    high: float
    level: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def hull(self, other: Interval | None) -> Interval:
        if other is None:
            return self
        return Interval(min(self.low, other.low), max(self.high, other.high), self.level)

    def describe(self, unit: str = "", digits: int = 3) -> str:
        """'95% interval [94.1, 103.2] ms'; an unbounded end reads 'unbounded'."""
        return (f"{self.level:.0%} interval [{_fmt(self.low, digits)}, {_fmt(self.high, digits)}]"
                + (f" {unit}" if unit else ""))

    def to_dict(self) -> dict[str, float | None]:
        """The bounds, an unbounded one as None (JSON has no infinity)."""
        return {"low": finite(self.low), "high": finite(self.high), "level": self.level}


def finite(value: float | None) -> float | None:
    """`value`, or None where it is missing or unbounded."""
    return value if value is not None and math.isfinite(value) else None


def _fmt(value: float, digits: int) -> str:
    if not math.isfinite(value):
        return "unbounded"
    return f"{value:.{digits}g}" if abs(value) < 10 ** digits else f"{value:.0f}"


def t_quantile(level: float, df: int) -> float:
    """t such that Student's t with `df` degrees of freedom lies within +-t with probability `level`."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    return float(scipy_stats.t.ppf(0.5 + level / 2, df))


def proportion_interval(successes: int, trials: int, level: float) -> Interval | None:
    """The exact binomial (Clopper-Pearson) interval of a proportion: `successes` of `trials`
    (None without a trial)."""
    if trials < 1:
        return None
    ci = scipy_stats.binomtest(int(successes), int(trials)).proportion_ci(confidence_level=level, method="exact")
    return Interval(float(ci.low), float(ci.high), level)


def trials_needed(minimum: float, level: float) -> int | None:
    """The fewest trials, none failing, whose exact interval at `level` lies wholly at or above
    `minimum`: the smallest n with (alpha / 2) ^ (1 / n) >= minimum (None for a minimum of 1,
    which no finite count shows, or of 0 or less, which needs none)."""
    if minimum >= 1.0:
        return None
    if minimum <= 0.0:
        return 0
    return math.ceil(math.log((1 - level) / 2) / math.log(minimum))


def batch_means(values: Sequence[float], level: float) -> Interval | None:
    """The interval of the mean of per-window values (None with fewer than two windows)."""
    values = [float(v) for v in values if v is not None]
    if len(values) < 2:
        return None
    mean = fmean(values)
    half = t_quantile(level, len(values) - 1) * stdev(values) / math.sqrt(len(values))
    return Interval(mean - half, mean + half, level)


def order_statistic_interval(histogram: LatencyHistogram, percentile: float, level: float) -> Interval | None:
    """The interval of a percentile (ms) between the order statistics of ranks l and u, the
    exact binomial quantiles of Bin(n, q) at (1 - level) / 2 and (1 + level) / 2 (the rank
    u + 1 counted from 1): unbounded above where u + 1 > n, 0 below where l < 1."""
    n = histogram.count
    if n < 2:
        return None
    q = percentile / 100.0
    alpha = 1 - level
    low_rank = int(scipy_stats.binom.ppf(alpha / 2, n, q))
    high_rank = int(scipy_stats.binom.ppf(1 - alpha / 2, n, q)) + 1
    hist = histogram.hist
    low = hist.get_value_at_percentile(100.0 * low_rank / n) / 1000.0 if low_rank >= 1 else 0.0
    high = hist.get_value_at_percentile(100.0 * high_rank / n) / 1000.0 if high_rank <= n else math.inf
    return Interval(low, max(low, high), level)


MIN_BATCHES = 3  # batches of windows before their spread widens a percentile's interval


def samples_per_batch(percentile: float) -> int | None:
    """The samples a batch holds before its own percentile widens an interval: 1 / (1 - q), the
    fewest whose largest lies on average at the quantile (100 for p99, 2 for p50; None for p100)."""
    q = percentile / 100.0
    return math.ceil(1 / (1 - q) - 1e-9) if q < 1 else None


def batched_percentiles(histograms: Sequence[LatencyHistogram], percentile: float) -> list[float]:
    """Consecutive histograms merged into batches of at least `samples_per_batch` samples (the
    remainder joins the last batch); each batch's percentile (ms)."""
    need = samples_per_batch(percentile)
    if need is None:
        return []
    batches, current = [], LatencyHistogram()
    for histogram in histograms:
        current.add(histogram)
        if current.count >= need:
            batches.append(current)
            current = LatencyHistogram()
    if current.count and batches:
        batches[-1].add(current)
    return [value for value in (b.percentile_ms(percentile) for b in batches) if value is not None]


def percentile_interval(histogram: LatencyHistogram, windows: Sequence[LatencyHistogram], percentile: float,
                        level: float) -> Interval | None:
    """Order-statistic interval over the merged histogram, widened by the batch means of the
    windows batched to `samples_per_batch` (alone with fewer than two batches)."""
    ordered = order_statistic_interval(histogram, percentile, level)
    if ordered is None:
        return None
    batches = [math.log(v) for v in batched_percentiles(windows, percentile) if v > 0]
    logs = batch_means(batches, level) if len(batches) >= MIN_BATCHES else None
    if logs is None:
        return ordered
    return ordered.hull(Interval(math.exp(logs.low), math.exp(logs.high), level))


def difference_interval(value: float, interval: Interval, reference: float, reference_interval: Interval | None,
                        ratio: float = 1.0) -> Interval:
    """The interval of value - ratio x reference, both measured with their own noise (half-widths
    added in quadrature, each side apart)."""
    ref_low = ratio * (reference - reference_interval.low) if reference_interval else 0.0
    ref_high = ratio * (reference_interval.high - reference) if reference_interval else 0.0
    centre = value - ratio * reference
    below = math.hypot(value - interval.low, ref_high)
    above = math.hypot(interval.high - value, ref_low)
    return Interval(centre - below, centre + above, interval.level)


def window_values(windows: Sequence[Any], model: str | None, read: Any) -> list[float]:
    """`read(stats)` for every window's stats of `model` (all models when None), Nones left out."""
    values = []
    for window in windows:
        stats = window.by_model.get(model) if model is not None and getattr(window, "by_model", None) else window.stats
        value = read(stats) if stats is not None else None
        if value is not None:
            values.append(value)
    return values


@dataclass(frozen=True)
class Estimate:
    """A statistic of a measurement: its value over all windows and its confidence interval
    (None: not computable, e.g. fewer than two windows or nothing measured)."""

    statistic: str
    value: float | None
    interval: Interval | None
    windows: int
    trials: int | None = None  # a proportion's trials (requests attempted), its interval's sample size


def _window_histograms(windows: Sequence[Any], model: str | None) -> list[LatencyHistogram] | None:
    """Each window's latency histogram of `model` (all models when None); None where a window
    kept no histograms."""
    out = []
    for window in windows:
        tallies = getattr(window, "tallies", None)
        if tallies is None:
            return None
        histogram = LatencyHistogram()
        for name, tally in tallies.items():
            if model is None or name == model:
                histogram.add(tally.histogram)
        out.append(histogram)
    return out


def estimate(statistic: str, windows: Sequence[Any], level: float, model: str | None = None) -> Estimate:
    """`statistic` ('throughput', 'success rate', 'average batch size' or a percentile such as
    'p99') over `windows`, each window one batch of the batch means."""
    n = len(windows)
    if statistic == "throughput":
        ok = sum(s.count_ok for s in _stats(windows, model))
        duration = sum(w.end_s - w.start_s for w in windows)
        return Estimate(statistic, ok / duration if duration > 0 else None,
                        clipped(batch_means(window_values(windows, model, lambda s: s.throughput_infer_s), level)), n)
    if statistic == "success rate":
        stats = _stats(windows, model)
        attempted, ok = sum(s.attempted for s in stats), sum(s.count_ok for s in stats)
        return Estimate(statistic, ok / attempted if attempted else None, proportion_interval(ok, attempted, level), n,
                        trials=attempted)
    if statistic == "average batch size":
        parts = [w.server.models.get(model) for w in windows if getattr(w, "server", None) is not None]
        parts = [p for p in parts if p is not None and p.execution_count]
        inferences, executions = sum(p.inference_count for p in parts), sum(p.execution_count for p in parts)
        return Estimate(statistic, inferences / executions if executions else None,
                        clipped(batch_means([p.average_batch_size for p in parts], level), low=1.0), len(parts))
    if statistic.startswith("p"):
        percentile = float(statistic[1:])
        per_window = _window_histograms(windows, model)
        histogram = LatencyHistogram()
        for part in per_window or ():
            histogram.add(part)
        if per_window is None or not histogram.count:
            return Estimate(statistic, None, None, n)
        return Estimate(statistic, histogram.percentile_ms(percentile),
                        clipped(percentile_interval(histogram, per_window, percentile, level)), n, trials=histogram.count)
    raise ValueError(f"unknown statistic {statistic!r}")


def clipped(interval: Interval | None, high: float | None = None, low: float = 0.0) -> Interval | None:
    """The interval within the statistic's possible values (no negative latency or rate, no
    success rate above 1, no batch below 1 request)."""
    if interval is None:
        return None
    top = interval.high if high is None else min(high, interval.high)
    return Interval(min(max(low, interval.low), top), top, interval.level)


def _stats(windows: Sequence[Any], model: str | None) -> list[Any]:
    if model is None:
        return [w.stats for w in windows]
    return [w.by_model[model] for w in windows if model in w.by_model]
