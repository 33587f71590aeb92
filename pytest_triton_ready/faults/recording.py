"""Putting an experiment's Outcome into a check's record: the timeline chart, the steady state,
errors by reason, notes, and whether the server was restored for the checks after it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..facts import Drain, ServerStart
from .outcomes import Outcome, ServerRestartOutcome, ShutdownOutcome

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder


def record_outcome(check: CheckRecorder, outcome: Outcome, rate_per_s: float | None = None) -> None:
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


def fault_model(faults: Any, check: CheckRecorder, streaming: bool = True) -> str:
    """The model to break: a stateless unary one; where there is none, a decoupled one under
    streamed traffic (`streaming`), else INCOMPLETE naming what is missing. A model that is a step
    of a pipeline gets a warning: the fault breaks the pipeline too while it lasts."""
    model = faults.choose_model()
    if model is None and streaming:
        model = faults.choose_streaming_model()
    if model is None:
        wanted = f"faults.model={faults.plan.model!r} is not READY" if faults.plan.model else \
            "no READY stateless model in scope (sequence models are left alone)"
        check.incomplete(f"no model to run the fault experiment on: {wanted}")
    pipelines = faults.pipeline_steps().get(model)
    if pipelines:
        check.finding(f"{model} is a step of {', '.join(pipelines)}: the fault breaks "
                      f"{'them' if len(pipelines) > 1 else 'it'} too while it lasts", severity="warning", model=model)
    return model


def publish_outcome(facts: Any, kind: type, outcome: Outcome, check: CheckRecorder, recovery_s: float | None) -> None:
    """Leave the experiment's result for the checks after it as a typed fact (`kind`)."""
    facts.publish(kind(passed=outcome.incomplete is None and not check.failed, failed_requests=outcome.failed_requests,
                       recovery_s=recovery_s, model=outcome.model, incomplete=outcome.incomplete))


def publish_start_and_drain(facts: Any, outcome: Outcome) -> None:
    """Leave a crash + restart's start-to-ready time (ServerStart) or a SIGTERM's drain (Drain) for
    the checks after it (the deployment's probes and grace period)."""
    if isinstance(outcome, ServerRestartOutcome) and outcome.ready_s is not None:
        facts.publish(ServerStart(round(outcome.ready_s, 3)))
    if isinstance(outcome, ShutdownOutcome) and outcome.exit_s is not None:
        facts.publish(Drain(round(outcome.exit_s, 3), sum(outcome.refused.values()), outcome.exit_timeout_s))


def recorded_and_judgeable(faults: Any, check: CheckRecorder, outcome: Outcome) -> bool:
    """Record an experiment's outcome (timeline, steady state, errors, commands, restore); INCOMPLETE
    with its reason when it could not judge anything. False when a declared command failed (an error
    finding with its output: nothing to judge)."""
    record_outcome(check, outcome, faults.plan.rate_per_s)
    if outcome.incomplete:
        check.incomplete(outcome.incomplete)
    return not outcome.action_error
