"""Trends over a soak's windows: least-squares slopes, per hour, with the fit's quality."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..load.confidence import t_quantile

MIN_POINTS = 3


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

    def growth_low(self, level: float) -> float | None:
        """The lower end of the fitted growth's two-sided interval at `level` (Student's t with
        points - 2 degrees of freedom on the slope's standard error): a growth above a limit is
        decided only where this end is above it too. None without a standard error."""
        if self.slope_se_per_hour is None or self.points < 3:
            return None
        return (self.slope_per_hour - t_quantile(level, self.points - 2) * self.slope_se_per_hour) * self.span_h


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
    slope, intercept = statistics.linear_regression(hours, values)
    try:
        r_squared = statistics.correlation(hours, values) ** 2
    except statistics.StatisticsError:  # constant values: a flat line, nothing to correlate
        r_squared = None
    return Trend(slope, intercept, len(kept), max(hours) - min(hours), r_squared,
                 _slope_standard_error(hours, values, slope, intercept))


def _slope_standard_error(hours: Sequence[float], values: Sequence[float], slope: float,
                          intercept: float) -> float | None:
    """sqrt(residual variance / sum of squared time deviations), the least-squares slope's
    standard error; None with fewer than three points."""
    if len(hours) < 3:
        return None
    mean_t = statistics.fmean(hours)
    spread = sum((t - mean_t) ** 2 for t in hours)
    residual = sum((v - (intercept + slope * t)) ** 2 for t, v in zip(hours, values, strict=True)) / (len(hours) - 2)
    return math.sqrt(residual / spread) if spread > 0 else None


def rise_p_value(before: Sequence[float], after: Sequence[float]) -> float:
    """One-sided Mann-Whitney test that `after` tends to be larger than `before`: the chance, with
    no rise at all, of a rank sum at least as large as the one seen (a tie counts half).

    Exact for up to 400 pairs (a soak's quarters hold a handful of windows each), the normal
    approximation with continuity correction above that."""
    n, m = len(before), len(after)
    if not n or not m:
        return 1.0
    u = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in after for b in before)
    if n * m > 400:
        mean, sd = n * m / 2, math.sqrt(n * m * (n + m + 1) / 12)
        return 1 - statistics.NormalDist().cdf((u - 0.5 - mean) / sd)
    counts = _u_counts(m, n)
    at_least = sum(c for value, c in enumerate(counts) if value >= math.ceil(u - 1e-9))
    return at_least / math.comb(n + m, n)


def _u_counts(m: int, n: int) -> list[int]:
    """How many orderings of m + n distinct values give each U (pairs where one of the m beats one
    of the n): the Mann-Whitney distribution under no difference."""
    table = [[[1] for _ in range(n + 1)] for _ in range(m + 1)]
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            take, leave = table[i - 1][j], table[i][j - 1]
            counts = [0] * (i * j + 1)
            for u, c in enumerate(leave):
                counts[u] += c
            for u, c in enumerate(take):
                counts[u + j] += c
            table[i][j] = counts
    return table[m][n]
