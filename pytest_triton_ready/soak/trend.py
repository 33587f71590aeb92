"""Trends over a soak's windows: least-squares slopes per hour with their confidence intervals
(scipy.stats.linregress), the soak length that would decide a slope against a limit, and the rank
test of one quarter's windows against another's (scipy.stats.mannwhitneyu, ties included)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scipy import stats

MIN_POINTS = 3
EXACT_MAX_ORDERINGS = 200_000  # rank tests enumerate every split of the samples up to this many
SPAN_STEPS = 24  # `span_to_decide` looks up to 2^(24/4) = 64 x the span run


@dataclass(frozen=True)
class Trend:
    """A straight line fitted through (seconds, value) points; slope given per hour."""

    slope_per_hour: float
    intercept: float
    points: int
    span_h: float
    r_squared: float | None  # None when the values did not move at all
    slope_se_per_hour: float | None = None  # the slope's standard error (None with fewer than 3 points)

    @property
    def growth(self) -> float:
        """How much the fitted line rises from the first point to the last."""
        return self.slope_per_hour * self.span_h

    def slope_interval(self, level: float) -> tuple[float, float] | None:
        """The slope's two-sided interval at `level` (MB/h, or per hour): slope +- t(points - 2) x
        its standard error. None without a standard error."""
        if self.slope_se_per_hour is None or self.points < 3:
            return None
        half = float(stats.t.ppf(0.5 + level / 2, self.points - 2)) * self.slope_se_per_hour
        return self.slope_per_hour - half, self.slope_per_hour + half

    def growth_low(self, level: float) -> float | None:
        """The lower end of the fitted growth's interval at `level`: a growth above a limit is
        decided only where this end is above it too."""
        interval = self.slope_interval(level)
        return None if interval is None else interval[0] * self.span_h

    def growth_high(self, level: float) -> float | None:
        """The upper end of the fitted growth's interval at `level`: a growth within a limit is
        decided only where this end is within it too."""
        interval = self.slope_interval(level)
        return None if interval is None else interval[1] * self.span_h

    def span_to_decide(self, level: float, decided: Callable[[float, float, float], bool]) -> float | None:
        """The span (hours) that would decide a rule on this slope if the slope stays where it is:
        the shortest of 2^(k/4) x the span run (k = 1 ... 24, up to 64 x) where `decided(low, high,
        span_h)` holds for the slope's interval then. A slope's standard error over evenly spaced
        windows shrinks as 1 / span^1.5 (residual noise / sqrt(n x span^2 / 12), n growing with the
        span), so the half-width h0 over the span s0 is h0 x (s0 / s)^1.5 over s. None without an
        interval, or where even 64 x the span would not decide it."""
        interval = self.slope_interval(level)
        if interval is None or self.span_h <= 0:
            return None
        half = (interval[1] - interval[0]) / 2
        for k in range(1, SPAN_STEPS + 1):
            factor = 2 ** (k / 4)
            narrowed = half * factor ** -1.5
            if decided(self.slope_per_hour - narrowed, self.slope_per_hour + narrowed, self.span_h * factor):
                return self.span_h * factor
        return None


def fit(points: Sequence[tuple[float, float | None]], scale: float = 1.0) -> Trend | None:
    """Fit `value * scale` against time in hours; points with a None value are left out.

    None when fewer than MIN_POINTS points remain or they all share one time.
    """
    kept = [(t / 3600.0, v * scale) for t, v in points if v is not None]
    if len(kept) < MIN_POINTS:
        return None
    hours = [t for t, _ in kept]
    values = [v for _, v in kept]
    if max(hours) == min(hours):
        return None
    if max(values) == min(values):  # a flat line: no scatter, the slope is exactly 0
        return Trend(0.0, values[0], len(kept), max(hours) - min(hours), None, 0.0)
    line = stats.linregress(hours, values)
    return Trend(float(line.slope), float(line.intercept), len(kept), max(hours) - min(hours),
                 float(line.rvalue) ** 2, float(line.stderr))


def rank_p_value(first: Sequence[float], second: Sequence[float], alternative: str) -> float:
    """One-sided Mann-Whitney test that `first` tends to be larger (`alternative` "greater") or
    smaller ("less") than `second` (scipy.stats.mannwhitneyu): exact while the samples' splits
    are few enough to enumerate (a permutation test where values tie: window p99s read from
    histograms often do), the normal approximation with the tie correction beyond. 1.0 for an
    empty sample."""
    n, m = len(first), len(second)
    if not n or not m:
        return 1.0
    orderings = math.comb(n + m, n)
    ties = len(set(first) | set(second)) < n + m
    if orderings > EXACT_MAX_ORDERINGS:
        method: object = "asymptotic"
    elif ties:
        method = stats.PermutationMethod(n_resamples=orderings)  # every split: exact, no random draw
    else:
        method = "exact"
    return float(stats.mannwhitneyu(first, second, alternative=alternative, method=method).pvalue)
