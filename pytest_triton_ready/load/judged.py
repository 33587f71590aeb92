"""A rule decided with confidence, recorded on a check: the value measured against its threshold
when decided, the value alone when too close to call, and its margin (value, interval, threshold)
as evidence either way."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .client_health import is_behind
from .decision import FAIL, PASS, UNDECIDED, UNMEASURED, Judgement

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder


def record_judgement(check: CheckRecorder, judgement: Judgement, *, model: str | None = None, threshold: Any = None,
                     finding: str | None = None, rule: str | None = None, digits: int | None = None) -> str | None:
    """Record `judgement` on `check`. Decided: measured against its threshold (a failure adds
    `finding`); too close to call: measured without one, and the sentence that makes the check
    INCOMPLETE is returned; so it is for a latency rule left unjudged because the load generator
    fell behind (load/client_health.py). A failure-only rule (a stream's success rate) undecided
    on its passing side is no failure and no reason: measured without a threshold, and what would
    show it is kept as evidence. `threshold`: the named ThresholdValue the rule came from (kept as the
    measurement's source), else the rule's own number."""
    name, unit = judgement.rule.name, judgement.rule.unit
    value = judgement.value
    shown = round(value, digits) if value is not None and digits is not None else value
    where = f"{model}: " if model else ""
    check.evidence(f"{where}{name}: margin", f"{judgement.describe()}: {judgement.outcome}" + _margin(judgement))
    if judgement.outcome in (PASS, FAIL, UNMEASURED):
        limit = threshold if threshold is not None else judgement.rule.threshold
        check.measure(name, shown, unit, model=model, threshold=limit, comparison=judgement.rule.comparison,
                      finding=finding, rule=rule)
        if judgement.outcome == FAIL and value is not None and not _misses(value, judgement):
            # the interval lies wholly on the failing side while the rounded value does not
            check.finding(finding or f"{where}{judgement.describe()}", rule=rule, model=model, value=value)
        return None
    check.measure(name, shown, unit, model=model)
    if judgement.rule.failure_only and judgement.settled:  # only a decided failure matters: none
        check.evidence(f"{where}{name}: not shown", f"no decided failure; {judgement.needs or 'not decided'}")
        return None
    if is_behind(judgement.outcome):  # not judged: the client, not the server, may have made it slow
        return f"{where}{name}: {judgement.outcome}"
    return f"{where}{UNDECIDED}: {judgement.describe()}"


def record_reuse(check: CheckRecorder, model: str, label: str, measurement: Any) -> None:
    """Where a measurement is the windows of an earlier one in this run (LoadEngine.measure's
    `reuse`), say so: which load point, how long before, how many windows."""
    if measurement.reused_after_s is None:
        return
    check.evidence(f"{model}: {label}: measured once", f"the {len(measurement.windows)} windows measured at this "
                   f"load point {measurement.reused_after_s:g} s earlier in this run, judged again on this check's "
                   "rules (they were settled on them)")


def _misses(value: float, judgement: Judgement) -> bool:
    limit, comparison = judgement.rule.threshold, judgement.rule.comparison
    return {"<=": value > limit, "<": value >= limit, ">=": value < limit, ">": value <= limit}[comparison]


def _margin(judgement: Judgement) -> str:
    margin = judgement.margin
    if margin is None or judgement.rule.reference is not None:
        return ""
    unit = f" {judgement.rule.unit}" if judgement.rule.unit else ""
    return f" (margin {margin:+.4g}{unit})"


def incomplete_unless_failed(check: CheckRecorder, reason: str | None) -> None:
    """Measurements that could not decide (`reason`): the check ends INCOMPLETE, unless it already
    failed on what was decided, where the reason stays as a warning."""
    if reason is None:
        return
    if check.errors:
        check.finding(reason, severity="warning")
    else:
        check.incomplete(reason)
