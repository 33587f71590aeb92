"""JUnit properties of one check's testcase, so that a CI system that reads only the JUnit XML
still sees what the check measured, against which threshold, and why it did not run."""

from __future__ import annotations

from ..record.model import Result
from ..record.text import format_threshold, format_value, measurement_label


def junit_properties(result: Result) -> list[tuple[str, str]]:
    """(name, value) pairs: identity and verdict, how many rules it judged, each measurement with
    its unit and threshold (and where the threshold came from), each setting it ran with, the
    reason a check did not decide, each error finding."""
    properties = [
        ("check_id", result.check_id),
        ("phase", result.phase),
        ("title", result.title),
        ("verdict", result.verdict.value),
        ("blocking", "true" if result.blocking else "false"),
    ]
    properties.append(("rules_judged", str(result.rules_judged)))
    if result.reason:
        properties.append(("reason", result.reason))
    for measurement in result.measurements:
        label = measurement_label(measurement)
        properties.append((f"measurement {label}", format_value(measurement.value, measurement.unit)))
        if measurement.threshold is not None:
            outcome = {True: "met", False: "missed"}.get(measurement.passed, "not compared")
            properties.append((f"threshold {label}", f"{format_threshold(measurement)} ({outcome})"))
            properties.append((f"threshold_source {label}", measurement.threshold_source or "check"))
    for item in result.settings:
        label = f"{item.model}: {item.name}" if item.model else item.name
        properties.append((f"setting {label}", format_value(item.value, item.unit)))
    for finding in result.findings:
        if finding.severity == "error":
            properties.append(("finding", finding.message))
    for text in result.recommendations:
        properties.append(("recommendation", text))
    return properties
