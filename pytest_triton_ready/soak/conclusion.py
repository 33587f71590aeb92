"""PERF-3's last word on a soak that ran: the rules judged onto the check (record.py), then what
keeps the verdict from being a pass although no rule failed: a soak cut short, GPU memory that
could not be read for models on GPUs, a leak rule that only accepted soak evidence may judge."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..duration import format_duration
from ..record.recorder import CheckRecorder
from .evidence import stand_in
from .record import record_soak
from .runner import SoakOutcome
from .schedule import SoakPlan


def skipped_reason(soak_s: float, models: list[str], evidence_path: Any = None) -> str | None:
    """Why PERF-3 cannot be judged at all (INCOMPLETE), or None: a soak turned off without soak
    evidence to judge it on (`judge_on_evidence`), or no model to soak."""
    if not soak_s and not evidence_path:
        return ("the soak is turned off (--triton-soak=0) and no soak evidence (--triton-soak-evidence) "
                "stands in for it")
    if not models:
        return "no READY model in scope to soak"
    return None


def conclude(check: CheckRecorder, plan: SoakPlan, outcome: SoakOutcome, identity: dict[str, Any],
             evidence_path: Any, gpu_unavailable_reason: str | None, gpu_models: Callable[[], list[str]]) -> None:
    """Record the soak's rules and end the check INCOMPLETE where the run cannot stand as a pass.
    `gpu_models` names the models with GPU instances (asked only when GPU memory was unreadable)."""
    evaluation = record_soak(check, plan, outcome.windows, outcome.ran_s)
    if outcome.overall is not None and outcome.overall.p99_ms is not None:
        check.measure("p99 over the whole soak (merged histogram)", round(outcome.overall.p99_ms, 3), "ms")
    ran = f"{format_duration(outcome.ran_s)} of {format_duration(plan.duration_s)}"
    if outcome.end_reason == "interrupted":
        check.incomplete(f"the soak was interrupted after {ran}; its {len(outcome.windows)} windows are kept "
                         f"(journal {plan.journal_path})")
    if outcome.end_reason == "error":
        check.incomplete(f"the soak broke off after {ran}: {outcome.error}")
    if not check.errors and gpu_unavailable_reason and gpu_models():
        check.incomplete(f"models run on GPUs but GPU memory could not be read: {gpu_unavailable_reason}")
    if not check.errors and evaluation.open_rules:
        unjudged = stand_in(check, evidence_path, identity, plan.limits, evaluation.unjudged)
        if unjudged or evaluation.undecided:  # evidence from another run never decides this run's latency
            check.incomplete("; ".join([*unjudged, *evaluation.undecided]))
