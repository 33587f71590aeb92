"""CheckRecorder: how a check records what it measured, found and recommends.

A check compares measurements with thresholds through `measure`, adds findings, and the plugin
turns the record into pytest's outcome (a failed measurement or an error finding fails the test)
and into a Result for the report.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import pytest

from .report.model import Chart, Evidence, Finding, LoadPoint, Measurement, Result, Series, Verdict
from .thresholds import ThresholdValue

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
    "==": operator.eq,
}


class CheckRecorder:
    """The record of one check. Public methods are the whole vocabulary a check needs."""

    def __init__(self, result: Result, settings: Any = None, marker_thresholds: dict[str, float] | None = None) -> None:
        self.result = result
        self._settings = settings
        self._marker_thresholds = dict(marker_thresholds or {})

    def threshold(self, name: str) -> ThresholdValue:
        """The named threshold for this check: the marker's `thresholds={...}` first, then the
        settings (CLI > env > YAML > ini > default)."""
        from .thresholds import THRESHOLDS

        if name not in THRESHOLDS:
            raise KeyError(f"unknown threshold {name!r}; declare it in thresholds.py")
        if name in self._marker_thresholds:
            return ThresholdValue(name, float(self._marker_thresholds[name]), THRESHOLDS[name].unit, "marker")
        return self._settings.threshold(name)

    # -- measuring -----------------------------------------------------------------------------
    def measure(
        self,
        name: str,
        value: float | int | str | None,
        unit: str = "",
        *,
        model: str | None = None,
        threshold: ThresholdValue | float | int | None = None,
        comparison: str = "<=",
        rule: str | None = None,
        finding: str | None = None,
    ) -> bool:
        """Record a value; with a threshold, compare it and add a finding when it misses.

        Returns whether the value met the threshold (True when there is none). A value of None
        held against a threshold was not measured: it is never within the threshold, the call
        returns False, and a check that otherwise passes ends INCOMPLETE naming it.
        `finding` is the sentence used when it misses; a default one names value and threshold.
        """
        limit, source = _split_threshold(threshold)
        passed = None
        if limit is not None and value is not None:
            passed = bool(_COMPARE[comparison](value, limit))
        self.result.measurements.append(
            Measurement(name, value, unit, model, limit, comparison if limit is not None else None, source, passed)
        )
        if limit is not None and value is None:
            return False
        if passed is False:
            where = f"{model}: " if model else ""
            text = finding or (f"{where}{name} is {_fmt(value)} {unit}".rstrip()
                               + f", the rule is {comparison} {_fmt(limit)} {unit}".rstrip())
            self.finding(text, rule=rule, model=model, value=value)
        return passed is not False

    # -- explaining ----------------------------------------------------------------------------
    def finding(self, message: str, *, severity: str = "error", rule: str | None = None,
                model: str | None = None, value: Any = None) -> None:
        """Add one finding. Severity `error` fails the check; `warning` and `info` only inform."""
        self.result.findings.append(Finding(message, severity, rule, model, value))

    def recommend(self, text: str) -> None:
        """Say what to change, naming the rule or parameter."""
        if text not in self.result.recommendations:
            self.result.recommendations.append(text)

    def caveat(self, text: str) -> None:
        """Qualify a verdict on its own line (e.g. "leak not judged: soak of 60 s < 600 s"); the
        check still passes or fails on its measurements."""
        self.result.reason = text if not self.result.reason else f"{self.result.reason}; {text}"

    def evidence(self, label: str, text: str) -> None:
        """Keep raw evidence: an error message, a log excerpt, a response body."""
        self.result.evidence.append(Evidence(label, text))

    def chart(self, title: str, x_label: str, y_label: str, series: dict[str, list[tuple[float, float]]],
              *, kind: str = "line", markers: list[dict[str, Any]] | None = None) -> None:
        """Attach chart data; the report draws it."""
        self.result.charts.append(
            Chart(title, x_label, y_label, [Series(n, list(p)) for n, p in series.items()], kind, markers or [])
        )

    def load_point(self, point: LoadPoint) -> None:
        """Keep one measured point of a load curve with all its numbers (client percentiles and
        mean, server stage times); curves.csv is written from these."""
        self.result.load_points.append(point)

    # -- ending early --------------------------------------------------------------------------
    def not_applicable(self, reason: str) -> None:
        """End the check: the deployment has nothing for it to look at. Does not block READY."""
        self.result.verdict = Verdict.NOT_APPLICABLE
        self.result.reason = reason
        pytest.skip(f"not applicable: {reason}")

    def incomplete(self, reason: str) -> None:
        """End the check: it could not run or measure validly. Blocks READY (verdict INCOMPLETE)."""
        self.result.verdict = Verdict.INCOMPLETE
        self.result.reason = reason
        pytest.skip(f"incomplete: {reason}")

    # -- reading the record --------------------------------------------------------------------
    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.result.findings if f.severity == "error"]

    @property
    def unmeasured(self) -> list[str]:
        """Labels of measurements that had a threshold and no value."""
        return [f"{m.model}: {m.name}" if m.model else m.name for m in self.result.measurements
                if m.value is None and m.threshold is not None]

    @property
    def failed(self) -> bool:
        return bool(self.errors) or any(m.passed is False for m in self.result.measurements)

    def failure_text(self) -> str:
        lines = [f"{self.result.check_id}: {f.message}" for f in self.errors]
        lines += [f"  -> {r}" for r in self.result.recommendations]
        return "\n".join(lines) or f"{self.result.check_id}: a measurement missed its threshold"


def _split_threshold(threshold: ThresholdValue | float | int | None) -> tuple[float | int | None, str | None]:
    if isinstance(threshold, ThresholdValue):
        return threshold.value, threshold.source
    return threshold, ("check" if threshold is not None else None)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
