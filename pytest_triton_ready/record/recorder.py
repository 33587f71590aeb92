"""CheckRecorder: how a check records what it measured, judged, found and recommends.

The record keeps three kinds of entry apart:

- judgements: a measurement compared with a named threshold (`measure(..., threshold=...)`), or an
  error rule evaluated on data measured in this run (`judge(rule, passed, ...)`; an error
  `finding` is a judged rule that failed). Only judgements earn a PASS: a check that judged
  nothing ends INCOMPLETE (plugin/results.py);
- information: a `measure` without a threshold, warning and info findings, charts, evidence;
- settings: configured values the check ran with (`setting`), never measurements.

The plugin turns the record into pytest's outcome (a failed judgement fails the test) and into a
Result for the report.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import pytest

from ..thresholds import ThresholdValue
from .model import Chart, Evidence, Finding, LoadPoint, MeasuredValue, RecordedJudgement, Result, Series, Setting, Verdict

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
        from ..thresholds import THRESHOLDS

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
        """Record a measured value; with a threshold, compare it (a judgement) and add a finding
        when it misses. Without a threshold the value is information only.

        Returns whether the value met the threshold (True when there is none). A value of None
        held against a threshold was not measured: it is never within the threshold, the call
        returns False, and a check that otherwise passes ends INCOMPLETE naming it.
        `finding` is the sentence used when it misses; a default one names value and threshold.
        A configured value is not a measurement: record it with `setting`.
        """
        limit, source = _split_threshold(threshold)
        passed = None
        if limit is not None and value is not None:
            passed = bool(_COMPARE[comparison](value, limit))
        self.result.measurements.append(
            MeasuredValue(name, value, unit, model, limit, comparison if limit is not None else None, source, passed)
        )
        if limit is not None and value is None:
            return False
        if passed is not None:
            self.result.judgements.append(RecordedJudgement(rule or name, passed, model, name))
        if passed is False:
            where = f"{model}: " if model else ""
            text = finding or (f"{where}{name} is {_fmt(value)} {unit}".rstrip()
                               + f", the rule is {comparison} {_fmt(limit)} {unit}".rstrip())
            self.result.findings.append(Finding(text, "error", rule, model, value))
        return passed is not False

    def judge(self, rule: str, passed: bool, *, measured: str, finding: str | None = None,
              model: str | None = None, value: Any = None) -> bool:
        """Record an error rule evaluated on data measured in this run (e.g. "every answer is
        correct", judged on the answers received). `measured` says what it was judged on; when the
        rule fails, `finding` is the error sentence (default: the rule and what was measured).
        Returns `passed`."""
        passed = bool(passed)
        self.result.judgements.append(RecordedJudgement(rule, passed, model, measured))
        if not passed:
            self.result.findings.append(Finding(finding or f"{rule}: failed on {measured}", "error", rule, model, value))
        return passed

    def mark(self) -> int:
        """A point in the record, for `judged_since`: the number of error findings so far."""
        return len(self.errors)

    def judged_since(self, mark: int, rule: str, *, measured: str, model: str | None = None) -> bool:
        """Record that `rule` was judged on `measured` (data measured in this run) by the code since
        `mark`: it passed unless an error finding was added since then (those findings already say
        what failed). Returns whether it passed."""
        passed = len(self.errors) == mark
        self.result.judgements.append(RecordedJudgement(rule, passed, model, measured))
        return passed

    def setting(self, name: str, value: float | int | str | None, unit: str = "", *, model: str | None = None,
                source: str | None = None) -> None:
        """Record a configured value the check ran with (a planned duration, an offered rate):
        context for the reader, never a measurement, never a judgement."""
        self.result.settings.append(Setting(name, value, unit, model, source))

    # -- explaining ----------------------------------------------------------------------------
    def finding(self, message: str, *, severity: str = "error", rule: str | None = None,
                model: str | None = None, value: Any = None) -> None:
        """Add one finding. Severity `error` fails the check (a judged rule that failed); `warning`
        and `info` only inform."""
        self.result.findings.append(Finding(message, severity, rule, model, value))
        if severity == "error":
            self.result.judgements.append(RecordedJudgement(rule or self.result.check_id, False, model, message))

    def recommend(self, text: str) -> None:
        """Say what to change, naming the rule or parameter."""
        if text not in self.result.recommendations:
            self.result.recommendations.append(text)

    def caveat(self, text: str) -> None:
        """Qualify a verdict on its own line (e.g. "the memory-leak rule is judged by the soak
        evidence PATH"); the check still passes or fails on its judgements."""
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
    def judged(self) -> bool:
        """Whether the check judged at least one rule on data measured in this run."""
        return bool(self.result.judgements)

    def unjudged_text(self) -> str:
        """Why a check that judged nothing is INCOMPLETE, naming the rule it could not judge."""
        info = [m.name for m in self.result.measurements] + [f.message for f in self.result.findings]
        told = (f"; it recorded information only: {'; '.join(_clip(i) for i in info[:3])}"
                + (f" (+{len(info) - 3} more)" if len(info) > 3 else "")) if info else ""
        return f"could not judge: {self.result.title}: no rule was judged on data measured in this run{told}"

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


def _clip(text: str, width: int = 80) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
