"""Trends over a soak's windows: least-squares slopes, per hour, with the fit's quality."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MIN_POINTS = 3


@dataclass(frozen=True)
class Trend:
    """A straight line fitted through (seconds, value) points; slope given per hour."""

    slope_per_hour: float
    intercept: float
    points: int
    span_h: float
    r_squared: float | None  # None when the values did not move at all

    @property
    def growth(self) -> float:
        """How much the fitted line rises from the first point to the last."""
        return self.slope_per_hour * self.span_h


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
    return Trend(slope, intercept, len(kept), max(hours) - min(hours), r_squared)
