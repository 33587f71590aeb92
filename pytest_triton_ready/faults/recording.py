"""Putting an experiment's Outcome into a check's record: the timeline chart, the steady state,
errors by reason, notes, and whether the server was restored for the checks after it."""

from __future__ import annotations

import json
from typing import Any

from .outcomes import Outcome


def record_outcome(check: Any, outcome: Outcome, rate_per_s: float | None = None) -> None:
    """Chart, evidence and informational measurements every experiment shares."""
    series, markers = outcome.chart()
    if series.get("successes per bin"):
        load = f" at {rate_per_s:g} requests/s" if rate_per_s else ""
        check.chart(f"{outcome.experiment}: {outcome.model}{load}, per 100 ms", "seconds since the traffic started",
                    "requests per 100 ms; p99 latency in ms", series, kind="timeline", markers=markers)
    steady = outcome.steady
    if steady is not None:
        check.measure("steady state before the fault: success rate", round(steady.success_rate, 6)
                      if steady.success_rate is not None else None, "ratio", model=outcome.model)
        if steady.p99_ms is not None:
            check.measure("steady state before the fault: p99 latency (median of 100 ms bins)",
                          round(steady.p99_ms, 3), "ms", model=outcome.model)
    if outcome.errors_by_reason:
        check.evidence(f"{outcome.experiment}: errors by reason",
                       "\n".join(f"{n} x {reason}" for reason, n in sorted(outcome.errors_by_reason.items(),
                                                                          key=lambda item: -item[1])))
    for note in outcome.notes:
        check.finding(note, severity="info", model=outcome.model)
    for command in outcome.commands:
        check.evidence(f"{outcome.experiment}: {command.what}", command.evidence())
    check.evidence(f"{outcome.experiment}: numbers", json.dumps(outcome.summary(), indent=1, default=str))
    if outcome.action_error:
        check.finding(outcome.action_error, model=outcome.model, rule=outcome.declared_by)
    if outcome.restore_error:
        check.finding(outcome.restore_finding(), model=outcome.model)


def seconds(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None
