"""The overall verdict of a run, and the roll-up of one checklist item from its checks.

READY       every check in scope ran, and every blocking one passed or had nothing to look at
            (not applicable).
NOT READY   a blocking check failed (something was measured and it missed its rule), or failed
            first and passed only when rerun (flaky) while the settings do not allow that.
INCOMPLETE  no blocking check failed, but one could not run, broke, or measured nothing valid,
            or a waiver has expired, so READY cannot be claimed.
PARTIAL     what ran would be READY, but checks in scope did not run (deselected with -k/-m, or
            never reached) and no waiver leaves them out.
Advisory checks (blocking=False) are reported like any other but never decide the verdict; a
waived check does not run and is listed with its waiver.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Result, Verdict

READY = "READY"
NOT_READY = "NOT READY"
INCOMPLETE = "INCOMPLETE"
PARTIAL = "PARTIAL"

# Worst first: a checklist item made of several checks shows its worst verdict.
SEVERITY_ORDER = (Verdict.FAIL, Verdict.ERROR, Verdict.INCOMPLETE, Verdict.PASS, Verdict.NOT_APPLICABLE)

VERDICT_LABELS = {
    Verdict.PASS: "pass",
    Verdict.FAIL: "fail",
    Verdict.INCOMPLETE: "incomplete",
    Verdict.NOT_APPLICABLE: "not applicable",
    Verdict.ERROR: "error",
}

# The symbols of a CI job summary: ✓ passed, ✗ failed, – did not decide (skipped, broke, n/a).
VERDICT_SYMBOLS = {
    Verdict.PASS: "✓",
    Verdict.FAIL: "✗",
    Verdict.INCOMPLETE: "–",
    Verdict.NOT_APPLICABLE: "–",
    Verdict.ERROR: "–",
}


@dataclass(frozen=True)
class Gaps:
    """What the results alone do not show: checks in scope that did not run, expired waivers, and
    whether a check that passed only on a rerun may count as a pass."""

    not_run: tuple[str, ...] = ()
    expired_waivers: tuple[str, ...] = ()
    allow_flaky: bool = False


def overall_verdict(results: list[Result], gaps: Gaps = Gaps()) -> str:
    """READY, NOT READY, INCOMPLETE or PARTIAL, as the module's docstring defines them."""
    blocking = [r for r in results if r.blocking]
    if any(r.verdict == Verdict.FAIL or (r.flaky and not gaps.allow_flaky) for r in blocking):
        return NOT_READY
    if any(r.verdict in (Verdict.INCOMPLETE, Verdict.ERROR) for r in blocking) or gaps.expired_waivers:
        return INCOMPLETE
    if gaps.not_run:
        return PARTIAL
    if not results:
        return INCOMPLETE
    return READY


def verdict_reason(results: list[Result], gaps: Gaps = Gaps()) -> str:
    """One sentence saying why the overall verdict is what it is."""
    blocking = [r for r in results if r.blocking]
    failed = _ids(r for r in blocking if r.verdict == Verdict.FAIL)
    flaky = [] if gaps.allow_flaky else _ids(r for r in blocking if r.flaky and r.verdict != Verdict.FAIL)
    undecided = _ids(r for r in blocking if r.verdict in (Verdict.INCOMPLETE, Verdict.ERROR))
    parts = []
    if failed:
        parts.append(f"blocking checks failed: {', '.join(failed)}")
    if flaky:
        parts.append(f"passed only when rerun (flaky): {', '.join(flaky)}")
    if undecided:
        parts.append(f"{'could not run' if parts else 'blocking checks could not run or broke'}: "
                     f"{', '.join(undecided)}")
    if gaps.expired_waivers:
        parts.append(f"expired waivers: {', '.join(gaps.expired_waivers)}")
    if gaps.not_run:
        parts.append(f"{len(gaps.not_run)} checks in scope did not run: {short_list(gaps.not_run)}")
    if not results and not parts:
        parts.append("no check ran")
    if parts:
        return "; ".join(parts)
    passed = sum(r.verdict == Verdict.PASS for r in blocking)
    not_applicable = sum(r.verdict == Verdict.NOT_APPLICABLE for r in results)
    text = f"all {passed} blocking checks passed"
    if not_applicable:
        text += f"; {not_applicable} not applicable"
    advisory_failed = _ids(r for r in results if not r.blocking and r.verdict in (Verdict.FAIL, Verdict.ERROR))
    if advisory_failed:
        text += f"; advisory checks failed: {', '.join(advisory_failed)}"
    return text


def short_list(names: tuple[str, ...] | list[str], most: int = 5) -> str:
    """'a, b, c, d, e and 3 more'."""
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def worst(verdicts: list[Verdict]) -> Verdict:
    """The verdict a group of checks shows: the worst of its members."""
    return min(verdicts, key=SEVERITY_ORDER.index) if verdicts else Verdict.NOT_APPLICABLE


def verdict_counts(results: list[Result]) -> dict[str, int]:
    """How many checks ended in each verdict (every verdict listed, zeros included)."""
    return {v.value: sum(r.verdict == v for r in results) for v in Verdict}


def checklist(results: list[Result]) -> list[dict]:
    """One row per checklist item (check id), in the order first seen: its worst verdict and checks."""
    items: dict[str, dict] = {}
    for result in results:
        item = items.setdefault(result.check_id, {"check_id": result.check_id, "phase": result.phase,
                                                  "blocking": False, "verdicts": [], "nodeids": []})
        item["blocking"] = item["blocking"] or result.blocking
        item["verdicts"].append(result.verdict)
        item["nodeids"].append(result.nodeid)
    return [
        {"check_id": i["check_id"], "phase": i["phase"], "blocking": i["blocking"],
         "verdict": worst(i["verdicts"]).value, "nodeids": i["nodeids"]}
        for i in items.values()
    ]


def _ids(results) -> list[str]:
    seen: list[str] = []
    for result in results:
        if result.check_id not in seen:
            seen.append(result.check_id)
    return seen
