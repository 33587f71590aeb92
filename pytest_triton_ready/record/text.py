"""Wording shared by every format: how a value, a threshold and a check's one-line detail read."""

from __future__ import annotations

from typing import Any

from .model import MeasuredValue, Result, Verdict


def format_value(value: Any, unit: str = "") -> str:
    """A measured value with its unit: floats to 4 significant digits, nothing for a missing value."""
    if value is None:
        text = "—"
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, float):
        text = f"{value:.4g}"
    else:
        text = str(value)
    return f"{text} {unit}".strip() if unit and value is not None else text


def format_bytes(value: float | None) -> str:
    """A memory size in binary units: 140.4 GiB."""
    if value is None:
        return "—"
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def format_threshold(measurement: MeasuredValue) -> str:
    """'<= 50 ms' or '' when the value was not held against anything."""
    if measurement.threshold is None:
        return ""
    return f"{measurement.comparison or ''} {format_value(measurement.threshold, measurement.unit)}".strip()


def measurement_label(measurement: MeasuredValue) -> str:
    """'scale: inference latency' or 'inference latency'."""
    return f"{measurement.model}: {measurement.name}" if measurement.model else measurement.name


def outcome_mark(measurement: MeasuredValue) -> str:
    """✓ met its threshold, ✗ missed it, "not measured" when a threshold had no value to hold,
    nothing when there was no threshold."""
    if measurement.passed is None and measurement.threshold is not None and measurement.value is None:
        return "not measured"
    return {True: "✓", False: "✗"}.get(measurement.passed, "")


def detail(result: Result) -> str:
    """One line saying what decided a check: the first error, the reason it did not run, a passing
    check's key number (the measurement closest to its threshold), or the measurements it took."""
    errors = [f for f in result.findings if f.severity == "error"]
    if result.verdict in (Verdict.FAIL, Verdict.ERROR) and errors:
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        return errors[0].message + more
    if result.reason:
        return result.reason
    if result.verdict == Verdict.PASS:
        key = headline(result)
        if key:
            warnings = sum(f.severity == "warning" for f in result.findings)
            return key + (f" ({warnings} warning{'s' if warnings != 1 else ''})" if warnings else "")
    measured = len(result.measurements)
    held = [m for m in result.measurements if m.passed is not None]
    if not measured:
        return ""
    text = f"{measured} measurement{'s' if measured != 1 else ''}"
    unmeasured = sum(m.value is None and m.threshold is not None for m in result.measurements)
    if held or unmeasured:
        text += f", {sum(m.passed for m in held)}/{len(held) + unmeasured} within threshold"
    if unmeasured:
        text += f", {unmeasured} not measured"
    warnings = sum(f.severity == "warning" for f in result.findings)
    if warnings:
        text += f", {warnings} warning{'s' if warnings != 1 else ''}"
    return text


def shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def headline(result: Result) -> str:
    """A passing check's key number: the thresholded measurement closest to its limit (one with a
    unit before a ratio), e.g.
    'scale: p99 latency 4.9 ms <= 100 ms'; else the first measurement that is a number."""
    held = [m for m in result.measurements if m.passed and _number(m.value) is not None and _number(m.threshold)]

    def margin(m: MeasuredValue) -> float:
        value, limit = float(m.value), float(m.threshold)
        if not limit:
            return abs(value)
        return abs(limit - value) / abs(limit)

    if held:  # a measured quantity (ms, infer/s) reads better than a ratio such as a success rate
        m = min(held, key=lambda m: (m.unit == "ratio", margin(m)))
        where = f"{m.model}: " if m.model else ""
        return f"{where}{m.name} {format_value(m.value, m.unit)} {m.comparison} {format_value(m.threshold, m.unit)}"
    for m in result.measurements:
        if m.value is not None and not isinstance(m.value, bool) and m.name != "baseline":
            where = f"{m.model}: " if m.model else ""
            return f"{where}{m.name} {format_value(m.value, m.unit)}"
    return ""
